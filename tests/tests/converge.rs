//! Issue 33, defects 4 and 8, through the real binary.
//!
//! Defect 4: applying a spec converges to it. A create ended by force
//! while it waited for its nodes, then the same spec applied again, used
//! to end `running` and `healthy` with the first plan's nodes beside the
//! second's (four nodes for a spec of two, and on EC2 two clusters, each
//! bootstrapped by its own plan). Now the start that follows adopts the
//! leftovers when they formed a cluster (the new nodes join it) and
//! terminates them when they did not (a fresh cluster bootstraps once they
//! are gone); and the health check finds nodes beyond the spec unhealthy
//! (`surplus`), and heals them out: their shards moved off, then
//! terminated.
//!
//! Defect 8: a tenant holds the `elastic` password, so it can change what
//! Floe owns on the cluster: re-register Floe's repository elsewhere,
//! delete it, install another license, change the password Floe holds.
//! The health check shows each as a warning beside `healthy` (which stays
//! about the nodes) and starts no heal; the next plan registers Floe's
//! repository again as Floe set it.

use floe_tests::{Call, DEPLOYMENTS, Server, TestResult};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ORG: &str = "acme";

/// One group of two master-eligible data nodes over two zones.
fn spec(count: u32) -> Value {
    json!({
        "name": "converge",
        "version": "8.15.3",
        "node_groups": [
            {"id": "hot", "roles": ["master", "data_hot", "data_content", "ingest"],
             "instance_type": "m6g.xlarge", "count": count, "zone_count": 2,
             "storage": {"size_gb": 50}}
        ]
    })
}

fn settled(d: &Value) -> bool {
    d["plans"]["pending"].is_null()
}

fn healthy(d: &Value) -> bool {
    settled(d) && d["status"] == json!("running") && d["healthy"] == json!(true)
}

fn node_ids(d: &Value) -> Vec<String> {
    let mut ids: Vec<String> = d["nodes"]
        .as_array()
        .map(|n| {
            n.iter()
                .filter_map(|n| n["instance_id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// Creates the deployment; the path of its resource.
async fn create(
    s: &Server,
    token: &str,
    body: &Value,
) -> Result<String, Box<dyn std::error::Error>> {
    let id = s.create_deployment(token, body).await?;
    Ok(format!("{DEPLOYMENTS}/{id}"))
}

/// Waits until the pending plan waits in `step`, then ends it by force.
async fn force_end_in(s: &Server, token: &str, path: &str, step: &str) -> TestResult {
    let plans = format!("{path}/plans");
    s.until(token, &plans, &format!("waiting in {step}"), |p| {
        p["pending"]["steps"].as_array().is_some_and(|steps| {
            steps
                .iter()
                .any(|st| st["step_id"] == json!(step) && st["status"] == json!("waiting"))
        })
    })
    .await?;
    let ended = s
        .call(Call::delete(format!("{path}/plans/pending?force_delete=true")).bearer(token))
        .await;
    let ended = ended.expect_status(200).json();
    assert_eq!(ended["status"], json!("failed"), "{ended}");
    Ok(())
}

/// The plan history's last plan, and the info log of its step `id`.
async fn last_plan(
    s: &Server,
    token: &str,
    path: &str,
) -> Result<Value, Box<dyn std::error::Error>> {
    let plans = s
        .call(Call::get(format!("{path}/plans")).bearer(token))
        .await;
    let plans = plans.expect_status(200).json();
    Ok(plans["current"].clone())
}

fn log_of(plan: &Value, id: &str) -> String {
    plan["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["step_id"] == json!(id)))
        .map(|s| s["info_log"].to_string())
        .unwrap_or_default()
}

fn step_ids(plan: &Value) -> Vec<String> {
    plan["steps"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|s| s["step_id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Applies the GET body back with `change` made to it.
async fn apply(
    s: &Server,
    token: &str,
    path: &str,
    change: impl Fn(&mut Value),
) -> Result<Value, Box<dyn std::error::Error>> {
    s.put_changed(token, path, |body| {
        change(body);
        Ok(())
    })
    .await
}

/// Stays as it is for `sweeps` health checks: `check` holds of every read.
async fn stays(
    s: &Server,
    token: &str,
    path: &str,
    for_ms: u64,
    check: impl Fn(&Value) -> bool,
) -> TestResult {
    let until = Instant::now() + Duration::from_millis(for_ms);
    while Instant::now() < until {
        let d = s
            .call(Call::get(path).bearer(token))
            .await
            .expect_status(200)
            .json();
        assert!(check(&d), "{d}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The leftovers of the create never formed a cluster (still booting when
/// the spec is applied again): the start terminates them and bootstraps a
/// fresh cluster of the spec's two nodes. Before the fix: four nodes,
/// `healthy: true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_ended_by_force_then_applied_again_leaves_no_node_booting_beside() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "1500"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_SWEEP_INTERVAL_MS", "200"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    let path = create(&s, &token, &spec(2)).await?;
    force_end_in(&s, &token, &path, "wait-running").await?;
    let d = apply(&s, &token, &path, |_| {}).await?;
    assert_eq!(d["plans"]["pending"]["kind"], json!("start"), "{d}");

    let d = s.until(&token, &path, "healthy", healthy).await?;
    assert_eq!(node_ids(&d).len(), 2, "the spec's two nodes, no more: {d}");
    let plan = last_plan(&s, &token, &path).await?;
    let log = log_of(&plan, "leftovers");
    assert!(log.contains("formed no cluster"), "{log}");
    // Checked again and again: still the spec's nodes, all in the cluster.
    stays(&s, &token, &path, 1000, |d| {
        healthy(d)
            && node_ids(d).len() == 2
            && d["nodes"]
                .as_array()
                .is_some_and(|n| n.iter().all(|n| n["joined"] == json!(true)))
    })
    .await?;
    Ok(())
}

/// The leftovers booted and formed a cluster before the spec was applied
/// again: the start adopts them (the new plan launches nothing, and writes
/// no second bootstrap), and the deployment runs on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_ended_by_force_whose_nodes_formed_a_cluster_is_adopted() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "400"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_SWEEP_INTERVAL_MS", "200"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    let path = create(&s, &token, &spec(2)).await?;
    force_end_in(&s, &token, &path, "wait-running").await?;
    // The leftovers boot meanwhile.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    apply(&s, &token, &path, |_| {}).await?;

    let d = s.until(&token, &path, "healthy", healthy).await?;
    assert_eq!(node_ids(&d).len(), 2, "{d}");
    let plan = last_plan(&s, &token, &path).await?;
    assert_eq!(plan["kind"], json!("start"), "{plan}");
    let leftovers = log_of(&plan, "leftovers");
    assert!(leftovers.contains("adopted"), "{leftovers}");
    for id in node_ids(&d) {
        assert!(leftovers.contains(&id), "{id} not adopted: {leftovers}");
    }
    let bootstrap = log_of(&plan, "bootstrap-masters");
    assert!(
        bootstrap.contains("initial masters are kept"),
        "{bootstrap}"
    );
    stays(&s, &token, &path, 1000, |d| {
        healthy(d) && node_ids(d).len() == 2
    })
    .await?;
    Ok(())
}

/// An update ended by force after its new nodes booted (a changed group
/// is replaced whole: three new nodes beside the two old ones), then the
/// running spec applied again: the nodes beyond the spec, in the cluster,
/// are found by the health check (`healthy: false`, `surplus`), and its
/// heal moves the shards off them, takes them out of the voting
/// configuration and terminates them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_beyond_the_spec_is_unhealthy_and_healed_out() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "300"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_SWEEP_INTERVAL_MS", "200"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    let path = create(&s, &token, &spec(2)).await?;
    let before = s.until(&token, &path, "healthy", healthy).await?;
    let kept = node_ids(&before);
    let proxy = format!("{path}/elasticsearch/main-elasticsearch/proxy");
    s.call(
        Call::put(format!("{proxy}/logs/_doc/1?refresh=true"))
            .bearer(&token)
            .json(&json!({"n": 1})),
    )
    .await
    .expect_status(201);

    apply(&s, &token, &path, |b| {
        b["node_groups"][0]["count"] = json!(3)
    })
    .await?;
    force_end_in(&s, &token, &path, "wait-running").await?;
    // The third node joins meanwhile; the spec of two applied again.
    tokio::time::sleep(Duration::from_millis(800)).await;
    apply(&s, &token, &path, |b| {
        b["node_groups"][0]["count"] = json!(2)
    })
    .await?;

    // The update keeps what joined; the check finds it surplus and heals.
    let found = s
        .until(&token, &path, "surplus found", |d| {
            d["health_reason"]
                .as_str()
                .is_some_and(|r| r.contains("surplus"))
        })
        .await?;
    assert_eq!(found["healthy"], json!(false), "{found}");
    let reason = found["health_reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("node group hot has 5 nodes, 3 more than the spec's 2"),
        "{reason}"
    );
    let healed = s
        .until(&token, &path, "healed", |d| {
            healthy(d) && node_ids(d).len() == 2
        })
        .await?;
    assert_eq!(node_ids(&healed), kept, "the recorded nodes stay: {healed}");
    let plan = last_plan(&s, &token, &path).await?;
    assert_eq!(plan["kind"], json!("heal"), "{plan}");
    let ids = step_ids(&plan);
    let at = |id: &str| ids.iter().position(|s| s == id);
    for step in [
        "drain-surplus",
        "wait-surplus-drained",
        "exclude-lost-masters",
        "retire-lost",
        "clear-surplus-exclusion",
    ] {
        assert!(at(step).is_some(), "{step} missing: {ids:?}");
    }
    assert!(at("wait-surplus-drained") < at("retire-lost"), "{ids:?}");
    assert!(at("exclude-lost-masters") < at("retire-lost"), "{ids:?}");
    // No document lost with it.
    let count = s
        .call(Call::get(format!("{proxy}/logs/_count")).bearer(&token))
        .await;
    assert_eq!(count.expect_status(200).json()["count"], json!(1));
    stays(&s, &token, &path, 800, |d| {
        healthy(d) && node_ids(d).len() == 2
    })
    .await?;
    Ok(())
}

/// What a tenant changes of what Floe owns shows as warnings; no heal;
/// the next plan registers Floe's repository again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_to_what_floe_owns_are_warnings_and_the_next_plan_restores_them() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "100"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_SWEEP_INTERVAL_MS", "200"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&token, "floe-backups", "floe-backups")
        .await;
    let mut body = spec(2);
    body["snapshot"] = json!({"repository": "floe-backups"});
    let path = create(&s, &token, &body).await?;
    let d = s.until(&token, &path, "healthy", healthy).await?;
    assert!(d.get("health_warnings").is_none(), "{d}");
    let proxy = format!("{path}/elasticsearch/main-elasticsearch/proxy");
    let registered = s
        .call(Call::get(format!("{proxy}/_snapshot/floe-backups")).bearer(&token))
        .await;
    let registered = registered.expect_status(200).json();
    let floe_location = registered["floe-backups"]["settings"]["location"]
        .as_str()
        .ok_or("location")?
        .to_string();
    let license = s
        .call(Call::get(format!("{proxy}/_license")).bearer(&token))
        .await;
    assert_eq!(
        license.expect_status(200).json()["license"]["type"],
        json!("basic")
    );

    // Re-registered elsewhere, and a trial started.
    s.call(
        Call::put(format!("{proxy}/_snapshot/floe-backups"))
            .bearer(&token)
            .json(&json!({"type": "fs", "settings": {"location": "floe-backups/tenant"}})),
    )
    .await
    .expect_status(200);
    let trial = s
        .call(Call::post(format!("{proxy}/_license/start_trial?acknowledge=true")).bearer(&token))
        .await;
    assert_eq!(
        trial.expect_status(200).json()["trial_was_started"],
        json!(true)
    );
    let warned = s
        .until(&token, &path, "warned", |d| {
            d["health_warnings"]
                .as_array()
                .is_some_and(|w| w.len() == 2)
        })
        .await?;
    let warnings = warned["health_warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "repository floe-backups: location is floe-backups/tenant on the cluster, Floe registered {floe_location}"
        )),
        "{warned}"
    );
    assert!(warnings.contains("the license is trial"), "{warned}");
    // A warning is no finding about the nodes, and starts no heal.
    assert_eq!(warned["healthy"], json!(true), "{warned}");
    assert!(warned["health_reason"].is_null(), "{warned}");
    stays(&s, &token, &path, 800, |d| {
        healthy(d) && d["plans"]["pending"].is_null()
    })
    .await?;

    // Deleted: named so.
    s.call(Call::delete(format!("{proxy}/_snapshot/floe-backups")).bearer(&token))
        .await
        .expect_status(200);
    s.until(&token, &path, "deletion warned", |d| {
        d["health_warnings"]
            .to_string()
            .contains("repository floe-backups is no longer registered on the cluster")
    })
    .await?;

    // The next plan (an update, sent as the GET body with one change)
    // registers Floe's repository again as Floe set it.
    apply(&s, &token, &path, |b| {
        b["node_groups"][0]["count"] = json!(3)
    })
    .await?;
    let restored = s
        .until(&token, &path, "restored", |d| {
            healthy(d)
                && d["node_groups"][0]["count"] == json!(3)
                && !d["health_warnings"].to_string().contains("floe-backups")
        })
        .await?;
    let plan = last_plan(&s, &token, &path).await?;
    assert!(
        step_ids(&plan).iter().any(|s| s == "register-repository"),
        "{plan}"
    );
    let again = s
        .call(Call::get(format!("{proxy}/_snapshot/floe-backups")).bearer(&token))
        .await;
    assert_eq!(
        again.expect_status(200).json()["floe-backups"]["settings"]["location"],
        json!(floe_location)
    );
    // The license is the tenant's choice to keep or undo: still warned of.
    assert!(
        restored["health_warnings"]
            .to_string()
            .contains("the license is trial"),
        "{restored}"
    );

    // The password Floe holds, changed by the tenant: Floe cannot read the
    // cluster any more; a warning, the nodes still judged by EC2.
    s.call(
        Call::post(format!("{proxy}/_security/user/elastic/_password"))
            .bearer(&token)
            .json(&json!({"password": "the-tenants-own-password"})),
    )
    .await
    .expect_status(200);
    let refused = s
        .until(&token, &path, "refused warned", |d| {
            d["health_warnings"]
                .to_string()
                .contains("the cluster refuses the elastic password Floe holds (401")
        })
        .await?;
    assert_eq!(refused["healthy"], json!(true), "{refused}");
    let direct = s
        .call(Call::get(format!("{proxy}/_cluster/health")).bearer(&token))
        .await;
    // ES's own refusal, passed through.
    assert_eq!(direct.status, 401, "{}", direct.describe());
    assert_eq!(direct.json()["error"]["type"], json!("security_exception"));
    Ok(())
}
