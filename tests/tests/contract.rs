//! The contract, from outside: schemathesis against the real binary, and
//! clients generated from the committed `openapi/openapi.json` (Python with
//! openapi-python-client, TypeScript with openapi-typescript and
//! openapi-fetch) driving the whole workflow in typed calls.
//!
//! The tools are pinned and installed by scripts/test.sh, which says where
//! they are in the environment. A missing tool fails the test: a contract
//! check that quietly skips proves nothing.

use floe_tests::{Call, Server, TestResult, deployment, policy, s3_repository};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn tool(var: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: scripts/test.sh installs the contract tools and sets it")
    });
    assert!(
        path.exists(),
        "{var}={} does not exist: run scripts/test.sh",
        path.display()
    );
    path
}

fn contract_dir() -> PathBuf {
    Path::new(ROOT).join("tests/contract")
}

fn document() -> PathBuf {
    Path::new(ROOT).join("openapi/openapi.json")
}

/// Runs `cmd`, failing with everything it printed unless it succeeds.
fn run(what: &str, cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} did not start: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    println!("{what}:\n{text}");
}

/// PATH with `dir` first.
fn path_with(dir: Option<&Path>) -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> = dir.map(Path::to_path_buf).into_iter().collect();
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap_or_default()
}

/// Local mode that resolves no names (schemathesis sends random S3
/// endpoints) and runs its plans at once (the workflows wait on them).
fn server(plans_finish: bool) -> Server {
    let mut env = vec![("FLOE_LOCAL_OFFLINE", "true")];
    if plans_finish {
        env.extend([("FLOE_SIM_BOOT_DELAY_MS", "0"), ("FLOE_PLAN_POLL_MS", "50")]);
    }
    Server::start_with(&env)
}

/// A local server with a platform_admin token and resources that exist, so
/// that the operations on one reach their own logic and not only the 404
/// of a random id: the repository the document's examples name, a
/// deployment (its create plan stays pending here, so the operations that
/// need a running one answer their documented 409) and a policy.
struct Seeded {
    server: Server,
    token: String,
    deployment_id: String,
    policy_id: String,
}

async fn seeded() -> Seeded {
    let server = server(false);
    let token = server.token("acme", &["platform_admin"]);
    server
        .call(
            Call::put("/api/v1/platform/configuration/snapshots/repositories/main-backups")
                .bearer(&token)
                .json(&s3_repository("elastic-snapshots")),
        )
        .await
        .expect_status(201);
    let id = |v: serde_json::Value| v["id"].as_str().unwrap_or_default().to_string();
    let deployment_id = id(server
        .call(
            Call::post("/api/v1/deployments")
                .bearer(&token)
                .json(&deployment("contract-seed", Some("main-backups"), &[])),
        )
        .await
        .expect_status(201)
        .json());
    let policy_id = id(server
        .call(
            Call::post("/api/v1/snapshot-policies")
                .bearer(&token)
                .json(&policy("contract-seed", "main-backups")),
        )
        .await
        .expect_status(201)
        .json());
    assert!(!deployment_id.is_empty() && !policy_id.is_empty());
    Seeded {
        server,
        token,
        deployment_id,
        policy_id,
    }
}

/// Runs schemathesis with `committed` (a configuration in tests/contract)
/// against a seeded server, from `cwd`, failing on any failure it reports.
/// The seeded ids are added as a dictionary that half of the generated
/// path parameters draw from (the other half stay random, so the 404s are
/// still exercised).
async fn schemathesis(committed: &str, cwd: PathBuf) -> TestResult {
    let st = tool("FLOE_TEST_SCHEMATHESIS");
    let seeded = seeded().await;
    let report = tempfile::tempdir()?;
    let config = report.path().join("schemathesis.toml");
    let committed = std::fs::read_to_string(contract_dir().join(committed))?;
    std::fs::write(
        &config,
        format!(
            "{committed}\n[dictionaries.ids]\nvalues = [\"{}\", \"{}\"]\n\
             [dictionaries.names]\nvalues = [\"main-backups\"]\n\
             [dictionaries.refs]\nvalues = [\"main-elasticsearch\"]\n\
             [parameters]\n\
             \"path.id\" = {{ dictionary = \"ids\", probability = 0.5 }}\n\
             \"path.name\" = {{ dictionary = \"names\", probability = 0.5 }}\n\
             \"path.ref_id\" = {{ dictionary = \"refs\", probability = 0.5 }}\n",
            seeded.deployment_id, seeded.policy_id
        ),
    )?;
    let base = seeded.server.base_url().to_string();
    let auth = format!("Authorization: Bearer {}", seeded.token);
    let doc = document();
    let junit = report.path().join("junit.xml");
    tokio::task::spawn_blocking(move || {
        run(
            "schemathesis",
            Command::new(&st)
                .current_dir(cwd)
                .arg("--config-file")
                .arg(&config)
                // Every check runs: schemathesis's default, which a
                // configuration may narrow for one check on some
                // operations (`--checks all` would override that).
                .args(["run", "--no-color", "-u", &base, "-H", &auth])
                .arg("--report")
                .arg("junit")
                .arg("--report-junit-path")
                .arg(&junit)
                .arg(&doc),
        )
    })
    .await?;
    drop(seeded);
    Ok(())
}

/// The project's configuration (tests/contract/schemathesis.toml): a
/// bounded number of cases per operation for 60 s, and allowances for rules
/// the document states in prose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing() -> TestResult {
    schemathesis("schemathesis.toml", contract_dir()).await
}

/// schemathesis close to its defaults (tests/contract/schemathesis-minimal.toml):
/// its own example counts and expected statuses for 120 s, allowing only
/// the rules JSON Schema cannot state. Run from an empty folder, so that no
/// configuration of the project's is found by walking up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_close_to_its_defaults_finds_nothing() -> TestResult {
    let cwd = tempfile::tempdir()?;
    schemathesis("schemathesis-minimal.toml", cwd.path().to_path_buf()).await
}

/// The minimal configuration allows exactly the operations whose
/// descriptions name rules JSON Schema cannot state: an allowance without
/// its rule in the document, or a rule the configuration does not know,
/// fails here.
#[test]
fn the_minimal_configuration_allows_only_the_rules_the_document_names() -> TestResult {
    let config = std::fs::read_to_string(contract_dir().join("schemathesis-minimal.toml"))?;
    let mut allowed: Vec<String> = config
        .lines()
        .filter_map(|l| l.trim().strip_prefix("include-operation-id = ["))
        .flat_map(|l| l.split('"').skip(1).step_by(2).map(str::to_string))
        .collect();
    allowed.sort();
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(document())?)?;
    let mut named: Vec<String> = Vec::new();
    for item in doc["paths"].as_object().ok_or("no paths")?.values() {
        for op in item.as_object().ok_or("a path item")?.values() {
            let description = op["description"].as_str().unwrap_or_default();
            if description.contains("Rules JSON Schema cannot state:") {
                named.push(op["operationId"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    named.sort();
    assert!(
        !allowed.is_empty(),
        "no allowance read from the configuration"
    );
    assert_eq!(
        allowed, named,
        "the operations schemathesis-minimal.toml allows rules for, and those whose description names them"
    );
    Ok(())
}

/// What each workflow script is given: the API, a token and the local S3
/// store's endpoint and keys.
fn workflow_env(s: &Server, token: &str) -> Vec<(String, String)> {
    let mut env = vec![
        ("FLOE_API".to_string(), s.base_url().to_string()),
        ("FLOE_TOKEN".to_string(), token.to_string()),
    ];
    let s3 = std::fs::read_to_string(s.data_dir().join("s3.env")).unwrap_or_default();
    for line in s3.lines() {
        let line = line.trim().trim_start_matches("export ");
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            env.push((
                k.to_string(),
                v.trim_matches(|c| c == '"' || c == '\'').to_string(),
            ));
        }
    }
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_python_client_drives_the_workflow() -> TestResult {
    let generator = tool("FLOE_TEST_OPENAPI_PYTHON_CLIENT");
    let python = generator.with_file_name("python");
    let s = server(true);
    let token = s.token("acme", &["platform_admin"]);
    let out = tempfile::tempdir()?;
    // `--meta none` writes the package itself: `floe_client` on PYTHONPATH.
    let client = out.path().join("floe_client");
    let env = workflow_env(&s, &token);
    let doc = document();
    tokio::task::spawn_blocking(move || {
        run(
            "openapi-python-client generate",
            Command::new(&generator)
                .current_dir(contract_dir().join("python"))
                // A warning (an operation or a schema it could not
                // generate) fails: the client would be missing that piece.
                // Its formatter (ruff) is beside it in the venv.
                .env("PATH", path_with(generator.parent()))
                .args(["generate", "--meta", "none", "--fail-on-warning"])
                .args(["--config", "generator.yaml"])
                .arg("--path")
                .arg(&doc)
                .arg("--output-path")
                .arg(&client),
        );
        run(
            "the Python workflow",
            Command::new(&python)
                .current_dir(contract_dir().join("python"))
                .arg("workflow.py")
                .env("PYTHONPATH", out.path())
                .envs(env),
        );
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_typescript_client_drives_the_workflow() -> TestResult {
    let dir = tool("FLOE_TEST_TYPESCRIPT_CLIENT");
    let bin = dir.join("node_modules/.bin");
    let s = server(true);
    let token = s.token("acme", &["platform_admin"]);
    let out = tempfile::tempdir()?;
    let types = out.path().join("floe.d.ts");
    let env = workflow_env(&s, &token);
    let doc = document();
    tokio::task::spawn_blocking(move || {
        run(
            "openapi-typescript",
            Command::new(bin.join("openapi-typescript"))
                .current_dir(&dir)
                .arg(&doc)
                .arg("--output")
                .arg(&types),
        );
        // The workflow is type-checked against the generated types: a
        // document change that breaks the client's calls fails here.
        std::fs::create_dir_all(dir.join("generated"))
            .unwrap_or_else(|e| panic!("cannot make generated/: {e}"));
        std::fs::copy(&types, dir.join("generated/floe.d.ts"))
            .unwrap_or_else(|e| panic!("cannot place the generated types: {e}"));
        run(
            "tsc",
            Command::new(bin.join("tsc"))
                .current_dir(&dir)
                .args(["--project", "tsconfig.json"]),
        );
        run(
            "the TypeScript workflow",
            Command::new("node")
                .current_dir(&dir)
                .arg("build/workflow.js")
                .envs(env),
        );
    })
    .await?;
    Ok(())
}
