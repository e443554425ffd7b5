//! Repository credentials go in and never come out: not in a response body
//! or header, not in a log line (at the most verbose level), not in the
//! OpenAPI document, and not in plaintext on disk.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use floe_tests::{Call, DEPLOYMENTS, POLICIES, REPOSITORIES, Reply, Server, TestResult};
use floe_tests::{assert_ece_error, deployment, policy};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

const ORG: &str = "acme";
const REPO: &str = "leaky";
const BUCKET: &str = "leak-canary-bucket";
const ACCESS_KEY: &str = "AKIAFLOELEAKCANARY42";
const SECRET_KEY: &str = "SECRET-floe-leak-canary-7f3a-secret-key";
const SESSION_TOKEN: &str = "SESSION-floe-leak-canary-9c1e-session-token";
const REPLACED_SECRET_KEY: &str = "SECRET-floe-leak-canary-b21d-replaced-key";

fn repository(secret_key: Option<&str>, session_token: Option<&str>) -> Value {
    let mut r = json!({"type": "s3", "settings": {
        "bucket": BUCKET, "endpoint": "198.51.100.7", "protocol": "https",
        "access_key": ACCESS_KEY, "max_snapshot_bytes_per_sec": "150mb"}});
    if let Some(s) = secret_key {
        r["settings"]["secret_key"] = json!(s);
    }
    if let Some(t) = session_token {
        r["settings"]["session_token"] = json!(t);
    }
    r
}

/// The secret, and its base64 forms however it is aligned inside a longer
/// encoded text (only whole 3-byte groups encode the same everywhere).
fn needles(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let mut out = vec![secret.to_string()];
    for skip in 0..3 {
        let rest = &bytes[skip..];
        let whole = &rest[..rest.len() / 3 * 3];
        let standard = STANDARD.encode(whole);
        let url = URL_SAFE.encode(whole);
        out.push(standard.clone());
        if url != standard {
            out.push(url);
        }
    }
    out
}

fn secrets() -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (name, secret) in [
        ("secret_key", SECRET_KEY),
        ("session_token", SESSION_TOKEN),
        ("replaced secret_key", REPLACED_SECRET_KEY),
    ] {
        for n in needles(secret) {
            out.push((name, n));
        }
    }
    out
}

fn check_view(r: &Reply, session_token_set: bool) {
    let v = r.json();
    let s = &v["settings"];
    assert_eq!(s["secret_key_set"], json!(true), "{}", r.describe());
    assert_eq!(
        s["session_token_set"],
        json!(session_token_set),
        "{}",
        r.describe()
    );
    assert_eq!(s["access_key"], json!("****RY42"), "{}", r.describe());
    assert!(
        s.get("secret_key").is_none() && s.get("session_token").is_none(),
        "{}",
        r.describe()
    );
}

/// Every request that could carry the credentials back out.
async fn exercise(s: &Server) -> TestResult {
    let admin = s.token(ORG, &["platform_admin"]);
    let manager = s.token(ORG, &["deployment_manager"]);
    let repo_path = format!("{REPOSITORIES}/{REPO}");
    let put = |body: &Value| Call::put(repo_path.clone()).bearer(&admin).json(body);

    let created = s
        .call(put(&repository(Some(SECRET_KEY), Some(SESSION_TOKEN))))
        .await;
    created.expect_status(201);
    check_view(&created, true);
    let read = s.call(Call::get(repo_path.clone()).bearer(&admin)).await;
    read.expect_status(200);
    check_view(&read, true);
    s.call(Call::get(REPOSITORIES).bearer(&admin))
        .await
        .expect_status(200);
    s.call(
        Call::get(REPOSITORIES)
            .bearer(&admin)
            .header("x-floe-organization", ORG),
    )
    .await
    .expect_status(200);

    // Replacing the settings without sending the secrets keeps them.
    let kept = s.call(put(&repository(None, None))).await;
    kept.expect_status(200);
    check_view(&kept, true);

    // The error paths, each with the secrets in the body.
    let with_secrets = repository(Some(SECRET_KEY), Some(SESSION_TOKEN));
    let mut bad_bucket = with_secrets.clone();
    bad_bucket["settings"]["bucket"] = json!("Not A Bucket");
    let mut unknown = with_secrets.clone();
    unknown["settings"]["secret_key_id"] = json!(SECRET_KEY);
    let mut spaced = with_secrets.clone();
    spaced["settings"]["secret_key"] = json!(format!("{SECRET_KEY} {SECRET_KEY}"));
    let mut too_long = with_secrets.clone();
    too_long["settings"]["secret_key"] = json!(SECRET_KEY.repeat(40));
    let mut no_access_key = with_secrets.clone();
    if let Some(settings) = no_access_key["settings"].as_object_mut() {
        settings.remove("access_key");
    }
    let mut token_as_number = with_secrets.clone();
    token_as_number["settings"]["session_token"] = json!(12345);
    for (what, body) in [
        ("a bad bucket next to the secrets", &bad_bucket),
        ("an unknown field holding the secret", &unknown),
        ("a secret with white space", &spaced),
        ("a secret over 1024 characters", &too_long),
        ("secrets without an access key", &no_access_key),
        ("a session token of the wrong type", &token_as_number),
    ] {
        let r = s.call(put(body)).await;
        assert_eq!(r.status, 400, "{what}: {}", r.describe());
        assert_ece_error(&r);
    }
    let texts = [
        // Cut off right after the secret: the parser stops inside it.
        format!(r#"{{"type":"s3","settings":{{"bucket":"{BUCKET}","secret_key":"{SECRET_KEY}"#),
        format!(
            r#"{{"type":"s3","settings":{{"bucket":"{BUCKET}","secret_key":"{SECRET_KEY}",}}}}"#
        ),
        // `settings` first: serde buffers it before it knows the type.
        format!(r#"{{"settings":{{"secret_key":"{SECRET_KEY}"}},"type":"gcs"}}"#),
        format!(
            r#"{{"settings":{{"bucket":5,"access_key":"{ACCESS_KEY}","secret_key":"{SECRET_KEY}"}},"type":"s3"}}"#
        ),
    ];
    for text in texts {
        let r = s
            .call(
                Call::put(repo_path.clone())
                    .bearer(&admin)
                    .header("content-type", "application/json")
                    .bytes(text.into_bytes()),
            )
            .await;
        assert_eq!(r.status, 400, "{}", r.describe());
        assert_ece_error(&r);
    }
    for (call, status) in [
        (
            put(&with_secrets).header("if-match", "\"99\""),
            412, // stale version
        ),
        (
            Call::put(repo_path.clone())
                .bearer(&manager)
                .json(&with_secrets),
            403,
        ),
        (Call::put(repo_path.clone()).json(&with_secrets), 401),
        (
            Call::put(repo_path.clone())
                .bearer(&admin)
                .header("content-type", "text/plain")
                .bytes(with_secrets.to_string().into_bytes()),
            415,
        ),
        (
            Call::put(format!("{REPOSITORIES}/Bad%20Name"))
                .bearer(&admin)
                .json(&with_secrets),
            400,
        ),
        (
            Call::put(repo_path.clone())
                .bearer(&admin)
                .header("content-type", "application/json")
                .bytes(
                    format!(
                        r#"{{"type":"s3","settings":{{"bucket":"{BUCKET}","access_key":"{ACCESS_KEY}","secret_key":"{SECRET_KEY}","base_path":"{}"}}}}"#,
                        "x".repeat(1024 * 1024)
                    )
                    .into_bytes(),
                ),
            413,
        ),
    ] {
        let r = s.call(call).await;
        assert_eq!(r.status, status, "{}", r.describe());
        assert_ece_error(&r);
    }

    // A second secret replaces the first.
    let replaced = s
        .call(put(&repository(Some(REPLACED_SECRET_KEY), None)))
        .await;
    replaced.expect_status(200);
    check_view(&replaced, true);
    let read = s.call(Call::get(repo_path.clone()).bearer(&admin)).await;
    check_view(read.expect_status(200), true);

    // Everything that refers to the repository.
    let pol = s
        .call(
            Call::post(POLICIES)
                .bearer(&admin)
                .json(&policy("leak-policy", REPO)),
        )
        .await;
    pol.expect_status(201);
    let pol_id = pol.json()["id"].as_str().unwrap_or_default().to_string();
    let dep = s
        .call(Call::post(DEPLOYMENTS).bearer(&admin).json(&deployment(
            "leak-logs",
            Some(REPO),
            &[&pol_id],
        )))
        .await;
    dep.expect_status(201);
    let dep_id = dep.json()["id"].as_str().unwrap_or_default().to_string();
    let mut renamed = deployment("leak-logs-renamed", Some(REPO), &[&pol_id]);
    renamed["metadata"] = json!({"tags": [{"key": "leak", "value": "test"}]});
    for call in [
        Call::get(format!("{DEPLOYMENTS}/{dep_id}")).bearer(&admin),
        Call::get(DEPLOYMENTS).bearer(&admin),
        Call::put(format!("{DEPLOYMENTS}/{dep_id}"))
            .bearer(&admin)
            .json(&renamed),
        Call::get(format!("{POLICIES}/{pol_id}")).bearer(&admin),
        Call::get(POLICIES).bearer(&admin),
        Call::get(repo_path.clone()).bearer(&admin),
        Call::get("/api/v1/openapi.json"),
        Call::get("/api/v1/health"),
    ] {
        let r = s.call(call).await;
        assert_eq!(r.status, 200, "{}", r.describe());
    }
    let in_use = s.call(Call::delete(repo_path.clone()).bearer(&admin)).await;
    assert_eq!(in_use.status, 409, "{}", in_use.describe());
    Ok(())
}

/// Waits until the server has logged a line containing `text`, so that the
/// log search below looks at a complete log.
fn wait_for_log(s: &Server, text: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if s.logs().iter().any(|l| l.contains(text)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                files_under(&p, out);
            } else {
                out.push(p);
            }
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The search must find a secret wherever it sits inside an encoded text,
/// or a clean result below would mean nothing.
#[test]
fn the_search_finds_a_secret_inside_base64_at_any_offset() {
    for prefix in ["", "a", "ab", "abc", "{\"secret_key\":\""] {
        let text = format!("{prefix}{SECRET_KEY}\"}}");
        for encoded in [STANDARD.encode(&text), URL_SAFE.encode(&text)] {
            assert!(
                needles(SECRET_KEY).iter().any(|n| encoded.contains(n)),
                "{encoded} hides {SECRET_KEY}"
            );
        }
    }
}

#[tokio::test]
async fn credentials_never_appear_in_responses_logs_or_files() -> TestResult {
    let s = Server::start();
    exercise(&s).await?;
    let mut leaks = leaks_in_responses_and_logs(&s);
    leaks.extend(leaks_on_disk(&s, true));
    assert!(
        leaks.is_empty(),
        "credentials leaked:\n{}",
        leaks.join("\n")
    );
    assert!(
        s.data_dir().join("floe.db").exists(),
        "local mode keeps its records in floe.db"
    );
    check_key_files(&s)
}

/// The same on DynamoDB: the store's SDK logs at debug level too, and those
/// lines must not carry the credentials either.
#[tokio::test]
async fn credentials_never_appear_on_dynamodb_either() -> TestResult {
    let s = Server::start_dynamodb();
    exercise(&s).await?;
    let mut leaks = leaks_in_responses_and_logs(&s);
    leaks.extend(leaks_on_disk(&s, false));
    assert!(
        leaks.is_empty(),
        "credentials leaked:\n{}",
        leaks.join("\n")
    );
    check_key_files(&s)
}

fn leaks_in_responses_and_logs(s: &Server) -> Vec<String> {
    // The log reader runs on its own thread: wait until the last lines of
    // the exercise are in before searching.
    assert!(
        wait_for_log(s, "repository replaced") && wait_for_log(s, "status\":409"),
        "the server's log lines were not captured; got:\n{}",
        s.logs().join("\n")
    );
    std::thread::sleep(Duration::from_millis(200));

    let seen = s.seen();
    let logs = s.logs();
    assert!(seen.len() > 25, "only {} responses recorded", seen.len());
    let mut leaks = Vec::new();
    for (name, needle) in secrets() {
        for r in &seen {
            if r.body.contains(&needle) {
                leaks.push(format!(
                    "{name} ({needle}) in the body of {} {}",
                    r.method, r.path
                ));
            }
            for (k, v) in &r.headers {
                if k.contains(&needle) || v.contains(&needle) {
                    leaks.push(format!(
                        "{name} ({needle}) in header {k} of {} {}",
                        r.method, r.path
                    ));
                }
            }
        }
        for line in &logs {
            if line.contains(&needle) {
                leaks.push(format!("{name} ({needle}) in the log line {line}"));
            }
        }
    }
    // The access key id is shown masked, so the whole of it never comes back.
    for r in &seen {
        if r.body.contains(ACCESS_KEY) {
            leaks.push(format!(
                "the unmasked access key in the body of {} {}",
                r.method, r.path
            ));
        }
    }
    leaks
}

/// Every file in the data folder. With the SQLite store the repository must
/// be found there (in plaintext: proof that the right file was searched)
/// while its credentials must not.
fn leaks_on_disk(s: &Server, store_is_local: bool) -> Vec<String> {
    let mut files = Vec::new();
    files_under(s.data_dir(), &mut files);
    let mut bucket_seen = false;
    let mut leaks = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_default();
        bucket_seen |= contains(&bytes, BUCKET.as_bytes());
        for (name, needle) in secrets() {
            if contains(&bytes, needle.as_bytes()) {
                leaks.push(format!("{name} ({needle}) in the file {}", f.display()));
            }
        }
    }
    if store_is_local {
        assert!(
            bucket_seen,
            "no file under {} holds the repository (files: {files:?}); the on-disk check looked at the wrong place",
            s.data_dir().display()
        );
    }
    leaks
}

/// The key that encrypts credentials at rest, the token secret and the
/// records (sealed credentials among them) are readable by their owner
/// only, and the data folder that holds them (and the local repositories'
/// snapshots) is the owner's alone.
fn check_key_files(s: &Server) -> TestResult {
    let dir = std::fs::metadata(s.data_dir())?.permissions().mode() & 0o777;
    assert_eq!(dir, 0o700, "{} has mode {dir:03o}", s.data_dir().display());
    let local_db = s.data_dir().join("floe.db").exists().then_some("floe.db");
    for key_file in ["secrets.key", "jwt.secret"].into_iter().chain(local_db) {
        let path = s.data_dir().join(key_file);
        let mode = std::fs::metadata(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:03o}", path.display());
    }
    Ok(())
}

/// The `elastic` password is in the create's answer (and a reset's) and
/// nowhere else: not in a read, a list, a plan or its log, another answer,
/// or a log line (nor as the Basic credentials the control plane sends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_elastic_password_is_in_its_own_answers_only() -> TestResult {
    let s = Server::start_with(&[("FLOE_SIM_BOOT_DELAY_MS", "0"), ("FLOE_PLAN_POLL_MS", "20")]);
    let token = s.token(ORG, &["platform_admin"]);
    s.call(
        Call::put(format!("{REPOSITORIES}/local"))
            .bearer(&token)
            .json(&json!({"type": "fs", "settings": {"location": "leak-check"}})),
    )
    .await
    .expect_status(201);
    let mut body = deployment("guarded", Some("local"), &[]);
    body["node_groups"][0]["count"] = json!(1);
    body["node_groups"][0]["zone_count"] = json!(1);
    let created = s
        .call(Call::post(DEPLOYMENTS).bearer(&token).json(&body))
        .await;
    let created = created.expect_status(201).json();
    let id = created["id"].as_str().ok_or("id")?.to_string();
    let first = created["credentials"]["password"]
        .as_str()
        .ok_or("the create carries the password")?
        .to_string();
    let path = format!("{DEPLOYMENTS}/{id}");
    assert_eq!(settle(&s, &token, &path).await?["status"], "running");
    let proxy = format!("{path}/elasticsearch/main-elasticsearch/proxy");
    s.call(Call::get(format!("{proxy}/_cluster/health")).bearer(&token))
        .await
        .expect_status(200);
    s.call(
        Call::post(format!("{path}/snapshots?wait_for_completion=true"))
            .bearer(&token)
            .json(&json!({})),
    )
    .await
    .expect_status(200);
    let reset = s
        .call(
            Call::post(format!(
                "{path}/elasticsearch/main-elasticsearch/_reset-password"
            ))
            .bearer(&token),
        )
        .await;
    let second = reset.expect_status(202).json()["credentials"]["password"]
        .as_str()
        .ok_or("the reset carries the new password")?
        .to_string();
    assert_ne!(first, second);
    assert_eq!(settle(&s, &token, &path).await?["status"], "running");
    s.call(Call::get(format!("{proxy}/_cat/health?v")).bearer(&token))
        .await
        .expect_status(200);
    for read in [
        path.clone(),
        DEPLOYMENTS.to_string(),
        format!("{path}/plans"),
        format!("{path}/snapshots"),
    ] {
        s.call(Call::get(read).bearer(&token))
            .await
            .expect_status(200);
    }
    std::thread::sleep(Duration::from_millis(300));

    let mut leaks = Vec::new();
    for (name, password) in [
        ("the first password", &first),
        ("the reset password", &second),
    ] {
        let mut search = needles(password);
        search.extend(needles(&format!("elastic:{password}")));
        for r in s.seen() {
            let its_own = (r.method == "POST" && r.path == DEPLOYMENTS)
                || r.path.ends_with("/_reset-password");
            for needle in &search {
                if !its_own
                    && (r.body.contains(needle.as_str())
                        || r.headers.iter().any(|(k, v)| {
                            k.contains(needle.as_str()) || v.contains(needle.as_str())
                        }))
                {
                    leaks.push(format!("{name} in the answer to {} {}", r.method, r.path));
                }
            }
        }
        for line in s.logs() {
            if search.iter().any(|n| line.contains(n.as_str())) {
                leaks.push(format!("{name} in the log line {line}"));
            }
        }
    }
    assert!(
        s.seen().iter().any(|r| r.body.contains(first.as_str())),
        "the search sees the create's answer (proof it looks at the right place)"
    );
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
    Ok(())
}

/// Polls the deployment until no plan is pending.
async fn settle(s: &Server, token: &str, path: &str) -> Result<Value, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = s.call(Call::get(path).bearer(token)).await.json();
        if d["plans"]["pending"].is_null() {
            return Ok(d);
        }
        if Instant::now() > deadline {
            return Err(format!("still pending: {d}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
