//! A deployment's whole life in local mode, through the real binary: create
//! → running with every step visible and its `fs` repository registered,
//! resize 3 → 5 → 3 (grow and shrink), documents and a manual snapshot, a
//! clone from `__latest_success__` on x86 that holds exactly the snapshot's
//! documents, shutdown with its final snapshot, delete. Simulated compute boots nodes after
//! a short delay, and each deployment gets a simulated Elasticsearch cluster.

use floe_tests::{Call, DEPLOYMENTS, REPOSITORIES, Server, TestResult};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ORG: &str = "acme";

fn body(count: u32) -> Value {
    json!({
        "name": "orders",
        "version": "8.15.3",
        "node_groups": [{
            "id": "hot",
            "roles": ["master", "data_hot", "data_content", "ingest"],
            "instance_type": "m6g.xlarge",
            "count": count,
            "zone_count": 3,
            "storage": {"size_gb": 200}
        }],
        "snapshot": {"repository": "local-backups"}
    })
}

/// Polls the deployment until no plan is pending; returns it.
async fn settled(s: &Server, token: &str, path: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = s.call(Call::get(path).bearer(token)).await;
        let d = d.expect_status(200).json();
        if d["plans"]["pending"].is_null() {
            return Ok(d);
        }
        if Instant::now() > deadline {
            return Err(format!("still pending after 60 s: {d}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The newest plan in the history, and its step ids (all must have succeeded).
async fn last_plan(
    s: &Server,
    token: &str,
    path: &str,
) -> Result<(Value, Vec<String>), Box<dyn std::error::Error>> {
    let plans = s
        .call(Call::get(format!("{path}/plans")).bearer(token))
        .await;
    let plans = plans.expect_status(200).json();
    let plan = plans["current"].clone();
    let steps = plan["steps"].as_array().cloned().unwrap_or_default();
    for step in &steps {
        assert_eq!(step["status"], json!("succeeded"), "{plan}");
        assert!(step["duration_in_millis"].is_u64(), "{step}");
        assert!(step["started"].is_string(), "{step}");
    }
    let ids = steps
        .iter()
        .map(|s| s["step_id"].as_str().unwrap_or("").to_string())
        .collect();
    Ok((plan, ids))
}

/// A deployment's cluster, through the control plane's proxy (the way a
/// user with a token reaches it).
fn cluster(id: &str) -> String {
    format!("{DEPLOYMENTS}/{id}/elasticsearch/main-elasticsearch/proxy")
}

async fn count_docs(
    s: &Server,
    token: &str,
    cluster: &str,
    index: &str,
) -> Result<u64, Box<dyn std::error::Error>> {
    let r = s
        .call(Call::get(format!("{cluster}/{index}/_count")).bearer(token))
        .await;
    let body = r.expect_status(200).json();
    body["count"]
        .as_u64()
        .ok_or_else(|| format!("{body}").into())
}

async fn write_docs(s: &Server, token: &str, cluster: &str, index: &str, n: u32) -> TestResult {
    for i in 0..n {
        s.call(
            Call::post(format!("{cluster}/{index}/_doc"))
                .bearer(token)
                .json(&json!({"n": i})),
        )
        .await
        .expect_status(201);
    }
    Ok(())
}

fn count_of(d: &Value) -> u64 {
    d["node_groups"][0]["count"].as_u64().unwrap_or(0)
}

/// `version.number` of the cluster at `endpoint`, reached as any verifying
/// client reaches it: the deployment's CA as the only root, no name
/// override, the `elastic` user's password.
async fn version_at(
    endpoint: &str,
    ca: &str,
    password: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes())?])
        .timeout(Duration::from_secs(10))
        .build()?;
    let info: Value = client
        .get(format!("{endpoint}/"))
        .basic_auth("elastic", Some(password))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(info["version"]["number"]
        .as_str()
        .ok_or_else(|| format!("no version in {info}"))?
        .to_string())
}

#[tokio::test]
async fn create_resize_shutdown_delete_in_local_mode() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "100"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "50"),
        ("FLOE_PLAN_POLL_MS", "20"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    // An `fs` repository: a folder under the data folder's
    // repositories/{organization}/.
    let repo = s
        .call(
            Call::put(format!("{REPOSITORIES}/local-backups"))
                .bearer(&token)
                .json(&json!({"type": "fs", "settings": {"location": "orders-backups"}})),
        )
        .await;
    assert!([200, 201].contains(&repo.status), "{}", repo.describe());

    let created = s
        .call(Call::post(DEPLOYMENTS).bearer(&token).json(&body(3)))
        .await;
    let created = created.expect_status(201).json();
    let id = created["id"].as_str().ok_or("id")?.to_string();
    let path = format!("{DEPLOYMENTS}/{id}");
    let d = settled(&s, &token, &path).await?;
    assert_eq!(d["status"], json!("running"), "{d}");
    let (plan, steps) = last_plan(&s, &token, &path).await?;
    assert_eq!(plan["kind"], json!("create"));
    assert_eq!(plan["status"], json!("succeeded"));
    assert_eq!(
        steps,
        [
            "node-security",
            "repository-credentials",
            "node-identity",
            "template:hot",
            "launch:hot",
            "bootstrap-masters",
            "wait-running",
            "wait-joined",
            "register-repository",
            "license",
            "record-access"
        ]
    );

    let mut version = d["resource_version"].as_u64().ok_or("version")?;
    for count in [5, 3] {
        let changed = s
            .call(
                Call::put(path.clone())
                    .bearer(&token)
                    .header("if-match", &format!("\"{version}\""))
                    .json(&body(count)),
            )
            .await;
        let changed = changed.expect_status(200).json();
        assert_eq!(changed["status"], json!("reconfiguring"), "{changed}");
        assert_eq!(changed["plans"]["pending"]["kind"], json!("update"));
        // A second change while the first runs names the running plan.
        let second = s
            .call(Call::put(path.clone()).bearer(&token).json(&body(4)))
            .await;
        second.expect_status(409);

        let d = settled(&s, &token, &path).await?;
        assert_eq!(d["status"], json!("running"), "{d}");
        assert_eq!(count_of(&d), u64::from(count), "{d}");
        version = d["resource_version"].as_u64().ok_or("version")?;
        let (plan, steps) = last_plan(&s, &token, &path).await?;
        assert_eq!(plan["kind"], json!("update"));
        assert_eq!(plan["status"], json!("succeeded"));
        assert_eq!(
            steps,
            [
                "begin",
                // Issue 33: what a plan ended by force left goes first, and
                // Floe's repository registration is restored every time.
                "leftovers",
                "node-security",
                "repository-credentials",
                "template:hot",
                "launch:hot",
                "wait-running",
                "wait-joined",
                "register-repository",
                "drain",
                "wait-drained",
                // The hot group is master-eligible: out of voting first.
                "exclude-masters",
                "wait-masters-excluded",
                "retire",
                "wait-retired",
                "clear-exclusion",
                "forget-templates",
                "license",
                "record-access"
            ]
        );
        let launched = plan["steps"][5]["info_log"].to_string();
        assert!(launched.contains("nodes of hot"), "{launched}");
    }

    let source_url = cluster(&id);
    write_docs(&s, &token, &source_url, "orders", 20).await?;
    let manual = s
        .call(
            Call::post(format!("{path}/snapshots?wait_for_completion=true"))
                .bearer(&token)
                .json(&json!({"name": "before-shutdown"})),
        )
        .await;
    let manual = manual.expect_status(200).json();
    assert_eq!(manual["state"], json!("SUCCESS"), "{manual}");
    write_docs(&s, &token, &source_url, "orders", 3).await?;

    // A clone of the newest successful snapshot, on x86 with one node.
    let mut groups = body(1)["node_groups"].clone();
    groups[0]["instance_type"] = json!("m5.xlarge");
    groups[0]["zone_count"] = json!(1);
    let cloned = s
        .call(
            Call::post(format!("{path}/_clone"))
                .bearer(&token)
                .json(&json!({"name": "orders-copy", "node_groups": groups})),
        )
        .await;
    let cloned = cloned.expect_status(201).json();
    let clone_path = format!("{DEPLOYMENTS}/{}", cloned["id"].as_str().ok_or("id")?);
    let c = settled(&s, &token, &clone_path).await?;
    assert_eq!(c["status"], json!("running"), "{c}");
    assert_eq!(c["node_groups"][0]["arch"], json!("x86_64"), "{c}");
    let (_, clone_steps) = last_plan(&s, &token, &clone_path).await?;
    assert_eq!(
        clone_steps[clone_steps.len() - 5..],
        [
            "register-source",
            "license",
            "restore",
            "wait-restored",
            "record-access"
        ]
    );
    let clone_url = cluster(cloned["id"].as_str().ok_or("id")?);
    assert_eq!(count_docs(&s, &token, &clone_url, "orders").await?, 20);
    assert_eq!(count_docs(&s, &token, &source_url, "orders").await?, 23);

    let shutdown = s
        .call(Call::post(format!("{path}/_shutdown")).bearer(&token))
        .await;
    shutdown.expect_status(202);
    let d = settled(&s, &token, &path).await?;
    assert_eq!(d["status"], json!("stopped"), "{d}");
    let (plan, steps) = last_plan(&s, &token, &path).await?;
    assert_eq!(plan["kind"], json!("shutdown"));
    assert_eq!(steps, ["final-snapshot", "terminate", "wait-terminated"]);
    // Both snapshots are listed, newest first, and their files are in the
    // repository's folder.
    let listed = s
        .call(Call::get(format!("{path}/snapshots")).bearer(&token))
        .await;
    let listed = listed.expect_status(200).json();
    let names: Vec<&str> = listed["snapshots"]
        .as_array()
        .map(|l| l.iter().filter_map(|x| x["snapshot"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names.len(), 2, "{listed}");
    assert!(names[0].starts_with("shutdown-"), "{listed}");
    assert_eq!(names[1], "before-shutdown");
    // Each deployment writes under its own folder of the repository.
    let folder = s
        .data_dir()
        .join("repositories")
        .join(ORG)
        .join("orders-backups")
        .join(&id);
    let files = std::fs::read_dir(&folder)?.count();
    assert!(files > 0, "nothing in {}", folder.display());

    let deleted = s.call(Call::delete(path.clone()).bearer(&token)).await;
    assert!(
        [200, 202, 204].contains(&deleted.status),
        "{}",
        deleted.describe()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = s.call(Call::get(path.clone()).bearer(&token)).await;
        if got.status == 404 {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("not gone after 60 s: {}", got.describe()).into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// An S3 store that cannot be reached fails the create plan at
/// `register-repository`, with a message naming the endpoint and why; the
/// deployment ends `stopped` (nothing of it left running) and, with a
/// reachable repository, starts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_fails_the_plan_naming_the_endpoint() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "0"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_ALLOW_PRIVATE_ENDPOINTS", "true"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    // Nothing listens on port 9 (discard) of loopback.
    let repo = s
        .call(
            Call::put(format!("{REPOSITORIES}/local-backups"))
                .bearer(&token)
                .json(&json!({"type": "s3", "settings": {
                    "bucket": "nowhere", "endpoint": "127.0.0.1:9", "protocol": "http",
                    "access_key": "AKIDLOCALTEST", "secret_key": "not-a-real-secret-0123"}})),
        )
        .await;
    assert!([200, 201].contains(&repo.status), "{}", repo.describe());
    let created = s
        .call(Call::post(DEPLOYMENTS).bearer(&token).json(&body(3)))
        .await;
    let id = created.expect_status(201).json()["id"]
        .as_str()
        .ok_or("id")?
        .to_string();
    let path = format!("{DEPLOYMENTS}/{id}");
    let d = settled(&s, &token, &path).await?;
    assert_eq!(d["status"], json!("stopped"), "{d}");
    let plans = s
        .call(Call::get(format!("{path}/plans")).bearer(&token))
        .await;
    let plans = plans.expect_status(200).json();
    let plan = plans["history"]
        .as_array()
        .and_then(|h| h.last())
        .cloned()
        .ok_or("no plan")?;
    assert_eq!(plan["status"], json!("failed"), "{plan}");
    let error = plan["error"].to_string();
    assert!(
        error.contains("register-repository") || plan.to_string().contains("register-repository"),
        "{plan}"
    );
    assert!(
        error.contains("127.0.0.1:9"),
        "the endpoint is named: {error}"
    );
    assert!(
        error.to_lowercase().contains("refused"),
        "and the reason: {error}"
    );
    assert!(!error.contains("SimConfig"), "no internal type: {error}");
    Ok(())
}

/// Version changes with an `fs` repository attached, through the real
/// binary: the plan takes an `upgrade-` snapshot before any node changes,
/// replaces every node, and the deployment runs the new version (a minor
/// upgrade, and a major one from the last 7.x minor).
#[tokio::test]
async fn an_upgrade_with_a_repository_snapshots_first() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "50"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    let repo = s
        .call(
            Call::put(format!("{REPOSITORIES}/local-backups"))
                .bearer(&token)
                .json(&json!({"type": "fs", "settings": {"location": "upgrade-backups"}})),
        )
        .await;
    assert!([200, 201].contains(&repo.status), "{}", repo.describe());
    for (from, to) in [("8.15.3", "8.17.0"), ("7.17.25", "8.15.3")] {
        let mut spec = body(3);
        spec["version"] = json!(from);
        let created = s
            .call(Call::post(DEPLOYMENTS).bearer(&token).json(&spec))
            .await;
        let created = created.expect_status(201).json();
        let id = created["id"].as_str().ok_or("id")?.to_string();
        let password = created["credentials"]["password"]
            .as_str()
            .ok_or("password")?
            .to_string();
        let path = format!("{DEPLOYMENTS}/{id}");
        let d = settled(&s, &token, &path).await?;
        assert_eq!(d["status"], json!("running"), "{d}");
        let endpoint = d["elasticsearch"]["endpoint"]
            .as_str()
            .ok_or("endpoint")?
            .to_string();
        let ca = d["elasticsearch"]["ca_certificate"]
            .as_str()
            .ok_or("CA")?
            .to_string();
        let nodes_before = d["elasticsearch"]["nodes"].clone();
        assert_eq!(
            version_at(&endpoint, &ca, &password).await?,
            from,
            "{endpoint}"
        );
        let version = d["resource_version"].as_u64().ok_or("version")?;
        spec["version"] = json!(to);
        let changed = s
            .call(
                Call::put(path.clone())
                    .bearer(&token)
                    .header("if-match", &format!("\"{version}\""))
                    .json(&spec),
            )
            .await;
        changed.expect_status(200);
        let d = settled(&s, &token, &path).await?;
        let plans = s
            .call(Call::get(format!("{path}/plans")).bearer(&token))
            .await;
        let plans = plans.expect_status(200).json();
        assert_eq!(
            plans["current"]["status"],
            json!("succeeded"),
            "{from} -> {to}: {plans}"
        );
        assert_eq!(d["status"], json!("running"), "{from} -> {to}: {d}");
        assert_eq!(d["version"], json!(to), "{plans}");
        // Every node was replaced; the endpoint a user saved still answers,
        // verified against the same CA, now with the new version.
        assert_eq!(d["elasticsearch"]["endpoint"], json!(endpoint), "{d}");
        let addresses = |nodes: &Value| -> Vec<String> {
            nodes
                .as_array()
                .map(|l| l.iter().map(|n| n["address"].to_string()).collect())
                .unwrap_or_default()
        };
        let before = addresses(&nodes_before);
        assert!(
            addresses(&d["elasticsearch"]["nodes"])
                .iter()
                .all(|a| !before.contains(a)),
            "{nodes_before} -> {}",
            d["elasticsearch"]["nodes"]
        );
        assert_eq!(version_at(&endpoint, &ca, &password).await?, to);
        let (_, steps) = last_plan(&s, &token, &path).await?;
        assert_eq!(
            steps.get(1).map(String::as_str),
            Some("upgrade-snapshot"),
            "{steps:?}"
        );
        let listed = s
            .call(Call::get(format!("{path}/snapshots")).bearer(&token))
            .await;
        let listed = listed.expect_status(200).json();
        let upgrade = listed["snapshots"]
            .as_array()
            .and_then(|l| {
                l.iter().find(|x| {
                    x["snapshot"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("upgrade-"))
                })
            })
            .ok_or("no upgrade snapshot")?;
        assert_eq!(upgrade["state"], json!("SUCCESS"), "{listed}");
    }
    Ok(())
}

/// The way out of a stuck plan (issue 12, defect 4), through the real
/// binary: nodes that never boot keep the create waiting. A forced end
/// stops it where it stands: the plan `failed` with `force_ended` on the
/// step it stood in, the deployment `failed`, and the worker never takes
/// the plan up again.
#[tokio::test]
async fn a_plan_stuck_waiting_is_ended_by_force() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "3600000"),
        ("FLOE_PLAN_POLL_MS", "20"),
    ]);
    let token = s.token(ORG, &["deployment_manager"]);
    let mut spec = body(1);
    spec["snapshot"] = Value::Null;
    spec["node_groups"][0]["zone_count"] = json!(1);
    let created = s
        .call(Call::post(DEPLOYMENTS).bearer(&token).json(&spec))
        .await;
    let id = created.expect_status(201).json()["id"]
        .as_str()
        .ok_or("an id")?
        .to_string();
    let path = format!("{DEPLOYMENTS}/{id}");
    let pending = format!("{path}/plans/pending");
    let plans = format!("{path}/plans");

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = s.call(Call::get(plans.as_str()).bearer(&token)).await;
        let p = p.expect_status(200).json();
        let waiting = p["pending"]["steps"].as_array().is_some_and(|steps| {
            steps.iter().any(|st| {
                st["step_id"] == json!("wait-running") && st["status"] == json!("waiting")
            })
        });
        if waiting {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("not waiting for the nodes after 30 s: {p}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A bad flag changes nothing.
    let bad = s
        .call(Call::delete(format!("{pending}?force_delete=yes")).bearer(&token))
        .await;
    assert_eq!(
        bad.expect_status(400).json()["errors"][0]["fields"][0],
        "force_delete"
    );

    let ended = s
        .call(Call::delete(format!("{pending}?force_delete=true")).bearer(&token))
        .await;
    let ended = ended.expect_status(200).json();
    assert_eq!(ended["status"], json!("failed"), "{ended}");
    assert_eq!(
        ended["error"]["failure_type"],
        json!("force_ended"),
        "{ended}"
    );
    let forced_steps = ended["steps"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .filter(|st| st["error"]["failure_type"] == json!("force_ended"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(forced_steps, 1, "the step it stood in: {ended}");

    let d = s.call(Call::get(path.as_str()).bearer(&token)).await;
    let d = d.expect_status(200).json();
    assert_eq!(d["status"], json!("failed"), "{d}");
    assert!(d["plans"]["pending"].is_null(), "{d}");
    let none = s.call(Call::delete(pending.as_str()).bearer(&token)).await;
    none.expect_status(404);

    // The worker that held it, and the sweep, leave it as it was ended.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = s.call(Call::get(plans.as_str()).bearer(&token)).await;
    let later = later.expect_status(200).json();
    let last = later["history"]
        .as_array()
        .and_then(|h| h.last())
        .ok_or("in the history")?;
    assert_eq!(last, &ended, "the plan changed after its forced end");
    Ok(())
}
