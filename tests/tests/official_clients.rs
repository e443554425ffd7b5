//! The official Elasticsearch Python client, as operators use it, against
//! local deployments, directly at each deployment's endpoint (its CA and
//! the `elastic` password alone) and through the control plane's proxy (a
//! bearer token, or a Floe API key as the client's own `api_key`): the 8.x
//! client
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

use floe_tests::{Call, DEPLOYMENTS, Server, TestResult};
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

/// A running deployment, as a user has it: its id, the `elastic` password
/// from the create's answer, its endpoint and its CA.
struct Running {
    id: String,
    password: String,
    endpoint: String,
    ca_certificate: String,
}

/// Creates a deployment at `version` and waits until it runs.
async fn running(s: &Server, token: &str, name: &str, version: &str) -> Result<Running, String> {
    let created = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(token)
                .json(&deployment(name, version)),
        )
        .await;
    let created = created.expect_status(201).json();
    let id = created["id"].as_str().ok_or("no id")?.to_string();
    let password = created["credentials"]["password"]
        .as_str()
        .ok_or("no password in the create's answer")?
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let d = s
            .call(Call::get(format!("{DEPLOYMENTS}/{id}")).bearer(token))
            .await
            .json();
        if d["plans"]["pending"].is_null() && d["status"] == json!("running") {
            let es = &d["elasticsearch"];
            assert_eq!(es["stable_endpoint"], json!(true), "{es}");
            return Ok(Running {
                id,
                password,
                endpoint: es["endpoint"].as_str().ok_or("no endpoint")?.to_string(),
                ca_certificate: es["ca_certificate"].as_str().ok_or("no CA")?.to_string(),
            });
        }
        if Instant::now() > deadline {
            return Err(format!("{name} did not run within 90 s: {d}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How the script reaches the cluster.
enum Reach {
    /// Through the control plane's proxy, with a bearer token.
    Proxy { url: String, token: String },
    /// Through the proxy, with a Floe API key as the client's own
    /// `api_key` (it sends `Authorization: ApiKey {key}`, as Floe takes it).
    ProxyKey { url: String, key: String },
    /// At the deployment's endpoint, with its CA and the password alone.
    Direct {
        endpoint: String,
        ca_file: PathBuf,
        password: String,
    },
}

impl Reach {
    fn label(&self, version: &str) -> String {
        match self {
            Reach::Proxy { .. } => format!("{version} via proxy"),
            Reach::ProxyKey { .. } => format!("{version} via proxy, key"),
            Reach::Direct { .. } => format!("{version} direct"),
        }
    }
}

/// One run of the conformance script with the `major`.x client, its
/// indices and snapshot named after `prefix`: its rows, and whether every
/// call passed.
fn run_client(major: u8, path: &Reach, version: &str, prefix: &str) -> (Vec<Value>, bool) {
    let dir = clients_dir().join(major.to_string());
    assert!(
        dir.join("elasticsearch").is_dir(),
        "the official Python client {major}.x is not installed in {} (scripts/test.sh installs it)",
        dir.display()
    );
    let mut command = std::process::Command::new(python());
    command
        .arg(script())
        .env("PYTHONPATH", &dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("FLOE_ES_VERSION", version)
        .env("FLOE_NAME_PREFIX", prefix);
    match path {
        Reach::Proxy { url, token } => command.env("FLOE_PROXY_URL", url).env("FLOE_TOKEN", token),
        Reach::ProxyKey { url, key } => command.env("FLOE_PROXY_URL", url).env("FLOE_API_KEY", key),
        Reach::Direct {
            endpoint,
            ca_file,
            password,
        } => command
            .env("FLOE_ENDPOINT", endpoint)
            .env("FLOE_CA_FILE", ca_file)
            .env("FLOE_PASSWORD", password),
    };
    let out = command
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
            "{label:<24} client {:<7} {:<24} {:<4} {}\n",
            r["client"].as_str().unwrap_or("?"),
            r["call"].as_str().unwrap_or("?"),
            if r["ok"] == json!(true) { "ok" } else { "FAIL" },
            r["detail"]
        ));
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_clients_work_directly_and_through_the_proxy() -> TestResult {
    let s = Server::start_quick();
    let token = s.token(ORG, &["deployment_manager"]);
    let admin = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&admin, "local-backups", "client-backups")
        .await;
    // A script's credential: an API key of the same manager.
    let key = s
        .call(
            Call::post("/api/v1/users/auth/keys")
                .bearer(&token)
                .json(&json!({"description": "official clients"})),
        )
        .await
        .expect_status(201)
        .json()["key"]
        .as_str()
        .ok_or("no key")?
        .to_string();

    let mut report = String::new();
    let mut failed = Vec::new();
    for (major, version, name) in [
        (8u8, "8.15.3", "clients-eight"),
        (9, "9.1.0", "clients-nine"),
    ] {
        let d = running(&s, &token, name, version).await?;
        let ca_file = s.data_dir().join(format!("{name}-ca.pem"));
        std::fs::write(&ca_file, &d.ca_certificate)?;
        let proxy = format!(
            "{}{DEPLOYMENTS}/{}/elasticsearch/main-elasticsearch/proxy",
            s.base_url(),
            d.id
        );
        let paths = [
            Reach::Proxy {
                url: proxy.clone(),
                token: token.clone(),
            },
            Reach::ProxyKey {
                url: proxy,
                key: key.clone(),
            },
            Reach::Direct {
                endpoint: d.endpoint.clone(),
                ca_file,
                password: d.password.clone(),
            },
        ];
        for (n, path) in paths.iter().enumerate() {
            let label = path.label(version);
            // Its own client, then the other major's: an 8.x cluster
            // refuses a 9.x client as Elasticsearch 8 does; a 9.x cluster
            // serves an 8.x client (compatible-with=8).
            let (rows, passed) =
                tokio::task::block_in_place(|| run_client(major, path, version, &format!("p{n}-")));
            report.push_str(&table(&label, &rows));
            if !passed {
                failed.push(format!("{major}.x client, {label}"));
            }
            if major == 8 {
                let (rows, _) =
                    tokio::task::block_in_place(|| run_client(9, path, version, &format!("q{n}-")));
                let info = rows.iter().find(|r| r["call"] == json!("info"));
                let detail = info.map(|r| r["detail"].to_string()).unwrap_or_default();
                if !(info.is_some_and(|r| r["ok"] == json!(false))
                    && detail.contains("media_type_header_exception"))
                {
                    failed.push(format!("9.x client not refused, {label}: {detail}"));
                }
                report.push_str(&format!(
                    "{label:<24} client 9.x     info                     refused as by Elasticsearch 8: {detail}\n"
                ));
            } else {
                let (rows, passed) =
                    tokio::task::block_in_place(|| run_client(8, path, version, &format!("q{n}-")));
                report.push_str(&table(&label, &rows));
                if !passed {
                    failed.push(format!("8.x client, {label}"));
                }
            }
        }
    }
    println!("{report}");
    assert!(failed.is_empty(), "failed: {failed:?}\n{report}");
    Ok(())
}
