//! The `floe` command line (issue 15, item 4), black-box: the real `floe`
//! binary against the real `floe-local` binary on a loopback port, driven
//! as an operator would, through the environment or a config file.

use floe_tests::{Server, TestResult, built_binary};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }

    fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// The value of the `key:` line of a text answer.
    fn field(&self, key: &str) -> String {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {key}: line in {}", self.stdout))
    }
}

fn output(out: Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `floe` with a clean environment: a home of its own (no config file of
/// the machine's user) and the given variables.
fn floe_in(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = Command::new(built_binary("floe"));
    cmd.args(args)
        .env_clear()
        .env("HOME", home)
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    output(
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run floe: {e}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_drives_floe_through_a_deployments_life() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "50"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
    ]);
    let token = s.token("acme", &["platform_admin"]);
    let home = tempfile::tempdir()?;
    let env = [
        ("FLOE_API_URL", s.base_url()),
        ("FLOE_TOKEN", token.as_str()),
    ];
    let floe = |args: &[&str]| floe_in(home.path(), &env, args);
    let file = |name: &str, body: &Value| -> Result<String, std::io::Error> {
        let path = home.path().join(name);
        std::fs::write(&path, body.to_string())?;
        Ok(path.display().to_string())
    };

    // A repository, then a deployment on it, followed to the end.
    let repo = file(
        "repo.json",
        &json!({"type": "fs", "settings": {"location": "cli-backups"}}),
    )?;
    let put = floe(&["repository", "put", "local-backups", "-f", &repo]).ok();
    assert!(put.stdout.contains("local-backups"), "{}", put.stdout);
    let listed = floe(&["repository", "list", "-o", "json"]).ok();
    assert_eq!(
        listed.json()["repositories"][0]["name"],
        json!("local-backups")
    );

    let spec = json!({
        "name": "orders", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content", "ingest"],
            "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3, "storage": {"size_gb": 200}}],
        "snapshot": {"repository": "local-backups"}
    });
    let spec_file = file("spec.json", &spec)?;
    let created = floe(&[
        "deployment",
        "create",
        "-f",
        &spec_file,
        "--track",
        "--poll-ms",
        "20",
    ])
    .ok();
    let id = created.field("id");
    assert!(
        created
            .stdout
            .contains("credentials (shown once): elastic / "),
        "{}",
        created.stdout
    );
    // Progress: a line per change (stderr is no terminal here), each step
    // named, and the plan's end.
    assert!(
        created.stderr.contains("wait-running"),
        "{}",
        created.stderr
    );
    assert!(
        created.stderr.contains("register-repository"),
        "{}",
        created.stderr
    );
    assert!(
        created
            .stderr
            .lines()
            .any(|l| l.contains("(create): succeeded")),
        "{}",
        created.stderr
    );

    // Lists and reads, as text and as JSON.
    let list = floe(&["deployment", "list"]).ok();
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .ok_or(format!("{id} not listed: {}", list.stdout))?;
    assert!(row.contains("orders") && row.contains("running"), "{row}");
    let list = floe(&["deployment", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(
        list["deployments"].as_array().map(Vec::len),
        Some(1),
        "{list}"
    );
    let shown = floe(&["deployment", "show", &id]).ok();
    assert_eq!(shown.field("status"), "running");
    let shown = floe(&["deployment", "show", &id, "-o", "json"]).ok().json();
    assert_eq!(shown["id"], json!(id));
    assert!(shown.get("credentials").is_none(), "{shown}");

    // validate_only through the client: what would change, nothing changed.
    let mut bigger = spec.clone();
    bigger["node_groups"][0]["count"] = json!(5);
    let bigger_file = file("bigger.json", &bigger)?;
    let dry = floe(&[
        "deployment",
        "update",
        &id,
        "-f",
        &bigger_file,
        "--validate-only",
        "--if-match",
        "current",
    ])
    .ok();
    assert!(dry.stdout.contains("outcome: plan"), "{}", dry.stdout);
    assert!(dry.stdout.contains("  launch:hot"), "{}", dry.stdout);
    let again = floe(&["deployment", "show", &id, "-o", "json"]).ok().json();
    assert_eq!(again["resource_version"], shown["resource_version"]);

    // A snapshot, taken and listed.
    floe(&["snapshot", "take", &id, "--name", "manual-1", "--wait"]).ok();
    let snaps = floe(&["snapshot", "list", &id]).ok();
    let row = snaps
        .stdout
        .lines()
        .find(|l| l.starts_with("manual-1"))
        .ok_or(format!("no manual-1: {}", snaps.stdout))?;
    assert!(row.contains("SUCCESS"), "{row}");
    let snaps = floe(&["snapshot", "list", &id, "-o", "json"]).ok().json();
    assert_eq!(
        snaps["snapshots"][0]["snapshot"],
        json!("manual-1"),
        "{snaps}"
    );

    // A restore drill of that snapshot, followed to its verdict, listed.
    let drilled = floe(&["drill", "run", &id, "--track", "--poll-ms", "20"]).ok();
    let drill_id = drilled.field("id");
    assert!(drilled.stderr.contains("drill-check"), "{}", drilled.stderr);
    assert!(
        drilled.stderr.contains(&format!("drill {drill_id} passed")),
        "{}",
        drilled.stderr
    );
    let drills = floe(&["drill", "list", &id]).ok();
    let row = drills
        .stdout
        .lines()
        .find(|l| l.starts_with(&drill_id))
        .ok_or(format!("{drill_id} not listed: {}", drills.stdout))?;
    assert!(row.contains("passed") && row.contains("manual-1"), "{row}");
    let refused = floe(&["drill", "run", &id, "--mode", "sideways"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("mode"), "{}", refused.stderr);

    // A drill schedule: local mode's scheduler fires a rate schedule when
    // it is set, and that firing runs a drill like the one above.
    let mut scheduled = spec.clone();
    scheduled["drill_schedule"] = json!({"schedule": {"interval": "1d"}});
    let scheduled_file = file("scheduled.json", &scheduled)?;
    floe(&["deployment", "update", &id, "-f", &scheduled_file]).ok();
    let mut passed = 0;
    for _ in 0..200 {
        let drills = floe(&["drill", "list", &id]).ok();
        passed = drills
            .stdout
            .lines()
            .filter(|l| l.contains("passed"))
            .count();
        if passed == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(passed, 2, "the schedule's drill did not pass");

    // A clone from the latest successful snapshot, on x86, followed.
    let cloned = floe(&[
        "deployment",
        "clone",
        &id,
        "--name",
        "orders-copy",
        "--instance-type",
        "m5.xlarge",
        "--track",
        "--poll-ms",
        "20",
    ])
    .ok();
    let clone_id = cloned.field("id");
    assert!(cloned.stderr.contains("wait-restored"), "{}", cloned.stderr);
    let plans = floe(&["plan", "show", &clone_id]).ok();
    assert!(plans.stdout.contains("current:"), "{}", plans.stdout);
    assert!(
        plans.stdout.contains("(create): succeeded"),
        "{}",
        plans.stdout
    );
    let plans = floe(&["plan", "show", &clone_id, "-o", "json"]).ok().json();
    assert_eq!(plans["current"]["kind"], json!("create"));
    let clone = floe(&["deployment", "show", &clone_id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(clone["node_groups"][0]["arch"], json!("x86_64"), "{clone}");

    // A mount clone needs a license that allows searchable snapshots; a
    // platform admin uploads the organization's, which the running
    // deployments get by a license plan each, and the clone then runs on.
    let refused = floe(&[
        "deployment",
        "clone",
        &id,
        "--name",
        "mounted",
        "--mode",
        "mount",
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("HTTP 400 restore.license_required")
            && refused.stderr.contains("(fields: license"),
        "{}",
        refused.stderr
    );
    let now = chrono::Utc::now().timestamp_millis();
    let license_file = file(
        "license.json",
        &json!({"license": {
            "uid": "cli-license-1", "type": "enterprise", "issuer": "API", "issued_to": "Acme",
            "issue_date_in_millis": now - 86_400_000, "start_date_in_millis": now - 86_400_000,
            "expiry_date_in_millis": now + 365 * 86_400_000_i64, "max_resource_units": 4,
            "signature": "AAAABAAAAA-never-shown"}}),
    )?;
    let uploaded = floe(&["license", "put", "-f", &license_file, "-o", "json"])
        .ok()
        .json();
    assert_eq!(
        uploaded["plans"].as_array().map(Vec::len),
        Some(2),
        "a plan for each running deployment: {uploaded}"
    );
    let shown = floe(&["license", "show"]).ok();
    assert!(shown.stdout.contains("cli-license-1"), "{}", shown.stdout);
    assert!(!shown.stdout.contains("never-shown"), "{}", shown.stdout);
    let mounted = floe(&[
        "deployment",
        "clone",
        &id,
        "--name",
        "mounted",
        "--mode",
        "mount",
        "--track",
        "--poll-ms",
        "20",
    ])
    .ok();
    let mounted_id = mounted.field("id");
    let mounted = floe(&["deployment", "show", &mounted_id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(
        mounted["license"]["uid"],
        json!("cli-license-1"),
        "{mounted}"
    );

    // Errors: the API's status, code and fields, and a non-zero exit.
    let mut bad = spec.clone();
    bad["node_groups"][0]["count"] = json!(0);
    let bad_file = file("bad.json", &bad)?;
    let refused = floe(&["deployment", "create", "-f", &bad_file]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("HTTP 400 validation."),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("(fields: node_groups[0].count"),
        "{}",
        refused.stderr
    );
    let conflict = floe(&["deployment", "delete", &id]);
    assert_eq!(conflict.code, 1, "{}", conflict.stderr);
    assert!(
        conflict
            .stderr
            .contains("HTTP 409 deployments.deployment_not_stopped"),
        "{}",
        conflict.stderr
    );

    // A retried create with the same key creates nothing twice.
    let first = floe(&[
        "deployment",
        "create",
        "-f",
        &spec_file,
        "--idempotency-key",
        "once",
        "-o",
        "json",
    ])
    .ok()
    .json();
    let retry = floe(&[
        "deployment",
        "create",
        "-f",
        &spec_file,
        "--idempotency-key",
        "once",
        "-o",
        "json",
    ])
    .ok()
    .json();
    assert_eq!(first["id"], retry["id"]);
    let once_id = first["id"].as_str().ok_or("id")?.to_string();
    let list = floe(&["deployment", "list", "-o", "json"]).ok().json();
    assert_eq!(
        list["deployments"].as_array().map(Vec::len),
        Some(4),
        "{list}"
    );

    // Shut down (followed) and delete.
    for d in [&id, &clone_id, &mounted_id, &once_id] {
        let down = floe(&[
            "deployment",
            "shutdown",
            d,
            "--skip-snapshot",
            "--track",
            "--poll-ms",
            "20",
        ])
        .ok();
        assert!(
            down.stderr.contains("(shutdown): succeeded"),
            "{}",
            down.stderr
        );
        // A delete is a plan: followed, it ends when the record is gone.
        let gone = floe(&["deployment", "delete", d, "--track", "--poll-ms", "20"]).ok();
        assert!(gone.stderr.contains("deleted"), "{}", gone.stderr);
    }
    let list = floe(&["deployment", "list", "-o", "json"]).ok().json();
    assert_eq!(list["deployments"], json!([]), "{list}");
    Ok(())
}

#[tokio::test]
async fn settings_come_from_a_private_config_file_and_flags_override() -> TestResult {
    let s = Server::start();
    let token = s.token("acme", &["deployment_viewer"]);
    let home = tempfile::tempdir()?;
    let config = home.path().join("floe.toml");
    std::fs::write(
        &config,
        format!(
            "# floe\napi_url = \"{}/api/v1\"\ntoken = \"{token}\"\n",
            s.base_url()
        ),
    )?;
    let config = config.display().to_string();

    // A token in a file others can read is refused.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644))?;
        let open = floe_in(
            home.path(),
            &[],
            &["--config", &config, "deployment", "list"],
        );
        assert_eq!(open.code, 2, "{}", open.stderr);
        assert!(open.stderr.contains("chmod 600"), "{}", open.stderr);
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600))?;
    }
    let listed = floe_in(
        home.path(),
        &[],
        &["--config", &config, "deployment", "list", "-o", "json"],
    )
    .ok();
    assert_eq!(listed.json()["deployments"], json!([]));

    // Flags override the file: no such server is an unreachable API.
    let unreachable = floe_in(
        home.path(),
        &[],
        &[
            "--config",
            &config,
            "--api-url",
            "http://127.0.0.1:1",
            "deployment",
            "list",
        ],
    );
    assert_eq!(unreachable.code, 3, "{}", unreachable.stderr);
    // And a bad token is the API's 401, printed with its code.
    let refused = floe_in(
        home.path(),
        &[],
        &[
            "--config",
            &config,
            "--token",
            "not-a-token",
            "deployment",
            "list",
        ],
    );
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("HTTP 401"), "{}", refused.stderr);
    // Without any URL, a usage error.
    let nothing = floe_in(home.path(), &[], &["deployment", "list"]);
    assert_eq!(nothing.code, 2, "{}", nothing.stderr);
    Ok(())
}

/// `--track`'s exit status says how the plan ended: 4 failed, 5 cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracked_plan_that_fails_or_is_cancelled_exits_non_zero() -> TestResult {
    let s = Server::start_with(&[
        // Nodes never finish booting: a plan waits until it is cancelled.
        ("FLOE_SIM_BOOT_DELAY_MS", "3600000"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_ALLOW_PRIVATE_ENDPOINTS", "true"),
    ]);
    let token = s.token("acme", &["platform_admin"]);
    let home = tempfile::tempdir()?;
    let env = [
        ("FLOE_API_URL", s.base_url()),
        ("FLOE_TOKEN", token.as_str()),
    ];
    let floe = |args: &[&str]| floe_in(home.path(), &env, args);
    let spec = |repository: Option<&str>| {
        let mut d = json!({
            "name": "orders", "version": "8.15.3",
            "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content", "ingest"],
                "instance_type": "m6g.xlarge", "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}]
        });
        if let Some(r) = repository {
            d["snapshot"] = json!({"repository": r});
        }
        d
    };

    // Cancelled: the create waits for its nodes; cancelling it unwinds.
    let path = home.path().join("spec.json");
    std::fs::write(&path, spec(None).to_string())?;
    let path = path.display().to_string();
    let created = floe(&["deployment", "create", "-f", &path, "-o", "json"])
        .ok()
        .json();
    let id = created["id"].as_str().ok_or("id")?.to_string();
    let cancelled = floe(&["plan", "cancel", &id, "--track", "--poll-ms", "20"]);
    assert_eq!(
        cancelled.code, 5,
        "{}\n{}",
        cancelled.stdout, cancelled.stderr
    );
    assert!(
        cancelled.stderr.contains("plan cancelled"),
        "{}",
        cancelled.stderr
    );
    // Nothing pending any more: cancelling again is the API's 404.
    let again = floe(&["plan", "cancel", &id]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("HTTP 404"), "{}", again.stderr);

    // Failed: a repository nothing listens for (port 9 of loopback), on a
    // server whose nodes boot at once, fails the create's last steps.
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "0"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_ALLOW_PRIVATE_ENDPOINTS", "true"),
    ]);
    let token = s.token("acme", &["platform_admin"]);
    let env = [
        ("FLOE_API_URL", s.base_url()),
        ("FLOE_TOKEN", token.as_str()),
    ];
    let floe = |args: &[&str]| floe_in(home.path(), &env, args);
    let repo = home.path().join("repo.json");
    std::fs::write(
        &repo,
        json!({"type": "s3", "settings": {
            "bucket": "nowhere", "endpoint": "127.0.0.1:9", "protocol": "http",
            "access_key": "AKIDLOCALTEST", "secret_key": "not-a-real-secret-0123"}})
        .to_string(),
    )?;
    floe(&[
        "repository",
        "put",
        "nowhere",
        "-f",
        &repo.display().to_string(),
    ])
    .ok();
    let path = home.path().join("spec-nowhere.json");
    std::fs::write(&path, spec(Some("nowhere")).to_string())?;
    let failed = floe(&[
        "deployment",
        "create",
        "-f",
        &path.display().to_string(),
        "--track",
        "--poll-ms",
        "20",
    ]);
    assert_eq!(failed.code, 4, "{}\n{}", failed.stdout, failed.stderr);
    assert!(failed.stderr.contains("plan failed"), "{}", failed.stderr);
    assert!(failed.stderr.contains("127.0.0.1:9"), "{}", failed.stderr);
    Ok(())
}

/// A script's credential: an API key made with `floe auth key create`,
/// then used alone (`FLOE_API_KEY`, `--api-key`, or `api_key` in the
/// config file), listed without its text, and refused once deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_works_with_an_api_key_made_by_the_cli() -> TestResult {
    let s = Server::start_quick();
    let token = s.token("acme", &["deployment_manager"]);
    let home = tempfile::tempdir()?;
    let url = s.base_url().to_string();
    let with_token = [
        ("FLOE_API_URL", url.as_str()),
        ("FLOE_TOKEN", token.as_str()),
    ];

    let made = floe_in(
        home.path(),
        &with_token,
        &[
            "auth",
            "key",
            "create",
            "--description",
            "nightly job",
            "--expiration",
            "30d",
            "-o",
            "json",
        ],
    )
    .ok();
    let key = made.json()["key"].as_str().unwrap_or_default().to_string();
    assert!(!key.is_empty(), "{}", made.stdout);
    assert_eq!(made.json()["roles"], json!(["deployment_manager"]));
    let id = made.json()["id"].as_str().unwrap_or_default().to_string();
    // As text it is printed once, with the warning.
    let text = floe_in(
        home.path(),
        &with_token,
        &[
            "auth",
            "key",
            "create",
            "--description",
            "another",
            "--roles",
            "deployment_manager",
        ],
    )
    .ok();
    assert!(text.stdout.contains("not shown again"), "{}", text.stdout);

    // The key alone, from the environment.
    let with_key = [
        ("FLOE_API_URL", url.as_str()),
        ("FLOE_API_KEY", key.as_str()),
    ];
    let listed = floe_in(
        home.path(),
        &with_key,
        &["deployment", "list", "-o", "json"],
    )
    .ok();
    assert_eq!(listed.json()["deployments"], json!([]));
    let keys = floe_in(home.path(), &with_key, &["auth", "key", "list"]).ok();
    assert!(
        keys.stdout.contains(&id) && keys.stdout.contains("nightly job"),
        "{}",
        keys.stdout
    );
    assert!(!keys.stdout.contains(&key), "the listing shows the key");
    // From a flag, and from the config file.
    let flagged = floe_in(
        home.path(),
        &[],
        &["--api-url", &url, "--api-key", &key, "deployment", "list"],
    )
    .ok();
    assert_eq!(flagged.code, 0);
    let config = home.path().join("floe.toml");
    std::fs::write(
        &config,
        format!("api_url = \"{url}\"\napi_key = \"{key}\"\n"),
    )?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600))?;
    let configured = floe_in(
        home.path(),
        &[],
        &[
            "--config",
            &config.display().to_string(),
            "deployment",
            "list",
        ],
    );
    assert_eq!(configured.code, 0, "{}", configured.stderr);
    let both = floe_in(
        home.path(),
        &[],
        &["--token", "t", "--api-key", "k", "deployment", "list"],
    );
    assert_eq!(both.code, 2, "{}", both.stderr);
    // A key makes no keys.
    let refused = floe_in(
        home.path(),
        &with_key,
        &["auth", "key", "create", "--description", "x"],
    );
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("403"), "{}", refused.stderr);

    // Deleted, it is refused at once.
    floe_in(home.path(), &with_token, &["auth", "key", "delete", &id]).ok();
    let after = floe_in(home.path(), &with_key, &["deployment", "list"]);
    assert_eq!(after.code, 1);
    assert!(
        after.stderr.contains("auth.invalid_api_key"),
        "{}",
        after.stderr
    );
    Ok(())
}
