//! The official Elasticsearch Python client, as operators use it, against
//! local deployments through the control plane's proxy: the 8.x client
//! against an 8.x deployment and the 9.x client against a 9.x one (each
//! asks for its own major's REST API, `compatible-with=N`); then the 8.x
//! client against the 9.x deployment, which serves the major before its
//! own, and the 9.x client against the 8.x one, which refuses it as a real
//! 8.x cluster does.
//!
//! The clients are pinned in `tests/clients/python/requirements-es{8,9}.txt`
//! and installed by `scripts/test.sh`, which says where
//! (`FLOE_TEST_ES_CLIENTS`); without them this test fails rather than skips.
//! Each call of `tests/clients/python/conformance.py` is one row of the
//! table this test prints.

use floe_tests::{Call, DEPLOYMENTS, REPOSITORIES, Server, TestResult};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const ORG: &str = "acme";

fn clients_dir() -> PathBuf {
    std::env::var_os("FLOE_TEST_ES_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/es-clients"))
}

fn python() -> PathBuf {
    std::env::var_os("FLOE_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"))
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/conformance.py")
}

fn deployment(name: &str, version: &str) -> Value {
    json!({
        "name": name,
        "version": version,
        "node_groups": [{
            "id": "hot",
            "roles": ["master", "data_hot", "data_content", "ingest"],
            "instance_type": "m6g.large",
            "count": 3,
            "zone_count": 3,
            "storage": {"size_gb": 50}
        }],
        "snapshot": {"repository": "local-backups"}
    })
}

/// Creates a deployment at `version` and waits until it runs; its id.
async fn running(s: &Server, token: &str, name: &str, version: &str) -> Result<String, String> {
    let created = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(token)
                .json(&deployment(name, version)),
        )
        .await;
    let created = created.expect_status(201).json();
    let id = created["id"].as_str().ok_or("no id")?.to_string();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let d = s
            .call(Call::get(format!("{DEPLOYMENTS}/{id}")).bearer(token))
            .await
            .json();
        if d["plans"]["pending"].is_null() && d["status"] == json!("running") {
            return Ok(id);
        }
        if Instant::now() > deadline {
            return Err(format!("{name} did not run within 90 s: {d}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One run of the conformance script: its rows, and whether it passed.
fn run_client(major: u8, proxy_url: &str, token: &str, version: &str) -> (Vec<Value>, bool) {
    run_client_named(major, proxy_url, token, version, "")
}

/// [`run_client`] with the script's indices and snapshot named after
/// `prefix`, for a second client on the same deployment.
fn run_client_named(
    major: u8,
    proxy_url: &str,
    token: &str,
    version: &str,
    prefix: &str,
) -> (Vec<Value>, bool) {
    let dir = clients_dir().join(major.to_string());
    assert!(
        dir.join("elasticsearch").is_dir(),
        "the official Python client {major}.x is not installed in {} (scripts/test.sh installs it)",
        dir.display()
    );
    let out = std::process::Command::new(python())
        .arg(script())
        .env("PYTHONPATH", &dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("FLOE_PROXY_URL", proxy_url)
        .env("FLOE_TOKEN", token)
        .env("FLOE_ES_VERSION", version)
        .env("FLOE_NAME_PREFIX", prefix)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python().display()));
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if rows.is_empty() {
        panic!(
            "the {major}.x client printed no row:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (rows, out.status.success())
}

fn table(label: &str, rows: &[Value]) -> String {
    let mut t = String::new();
    for r in rows {
        t.push_str(&format!(
            "{label:<24} client {:<7} {:<22} {:<4} {}\n",
            r["client"].as_str().unwrap_or("?"),
            r["call"].as_str().unwrap_or("?"),
            if r["ok"] == json!(true) { "ok" } else { "FAIL" },
            r["detail"]
        ));
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_clients_work_through_the_proxy() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "50"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
    ]);
    let token = s.token(ORG, &["deployment_manager"]);
    let admin = s.token(ORG, &["platform_admin"]);
    let repo = s
        .call(
            Call::put(format!("{REPOSITORIES}/local-backups"))
                .bearer(&admin)
                .json(&json!({"type": "fs", "settings": {"location": "client-backups"}})),
        )
        .await;
    assert!([200, 201].contains(&repo.status), "{}", repo.describe());

    let mut report = String::new();
    let mut failed = Vec::new();
    for (major, version, name) in [
        (8u8, "8.15.3", "clients-eight"),
        (9, "9.1.0", "clients-nine"),
    ] {
        let id = running(&s, &token, name, version).await?;
        let proxy = format!(
            "{}{DEPLOYMENTS}/{id}/elasticsearch/main-elasticsearch/proxy",
            s.base_url()
        );
        let (rows, passed) =
            tokio::task::block_in_place(|| run_client(major, &proxy, &token, version));
        report.push_str(&table(&format!("{version} via proxy"), &rows));
        if !passed {
            failed.push(format!("{major}.x client on {version}"));
        }
        // The other major's client: a 9.x client asks an 8.x cluster for a
        // REST API it does not serve, and is refused with Elasticsearch's
        // 400; an 8.x client is served by a 9.x cluster (compatible-with=8).
        if major == 8 {
            let (rows, _) = tokio::task::block_in_place(|| run_client(9, &proxy, &token, version));
            let info = rows.iter().find(|r| r["call"] == json!("info"));
            let detail = info.map(|r| r["detail"].to_string()).unwrap_or_default();
            assert!(
                info.is_some_and(|r| r["ok"] == json!(false))
                    && detail.contains("media_type_header_exception"),
                "a 9.x client must be refused by an 8.x cluster: {detail}"
            );
            report.push_str(&format!(
                "{:<24} client 9.x     info                   refused as on Elasticsearch 8: {detail}\n",
                format!("{version} via proxy")
            ));
        } else {
            let (rows, passed) = tokio::task::block_in_place(|| {
                run_client_named(8, &proxy, &token, version, "eight-")
            });
            report.push_str(&table(&format!("{version} via proxy"), &rows));
            if !passed {
                failed.push(format!("8.x client on {version}"));
            }
        }
    }
    println!("{report}");
    assert!(failed.is_empty(), "failed: {failed:?}\n{report}");
    Ok(())
}
