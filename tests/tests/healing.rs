//! Self-healing in local mode, through the real binary: a running
//! deployment shows each of its nodes and `healthy`; a simulated instance
//! lost (a file named after it in the data folder's `sim/kill/`) makes it
//! unhealthy, and the health check's heal plan replaces the node in its
//! group and zone until it is healthy again; a change sent meanwhile is
//! refused (409) as with any plan. First a data node, then a master-eligible
//! one (the cluster keeps its quorum). The kill-to-healthy time is printed.

use floe_tests::{Call, DEPLOYMENTS, Server, TestResult};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ORG: &str = "acme";

fn body() -> Value {
    json!({
        "name": "healing",
        "version": "8.15.3",
        "node_groups": [
            {"id": "masters", "roles": ["master"], "instance_type": "c7g.large",
             "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
            {"id": "hot", "roles": ["data_hot", "data_content"], "instance_type": "m6g.xlarge",
             "count": 2, "zone_count": 2, "storage": {"size_gb": 100}}
        ]
    })
}

/// Polls the deployment until `done` says so; gives up after 60 s.
async fn until(
    s: &Server,
    token: &str,
    path: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = s.call(Call::get(path).bearer(token)).await;
        let d = d.expect_status(200).json();
        if done(&d) {
            return Ok(d);
        }
        if Instant::now() > deadline {
            return Err(format!("not {what} after 60 s: {d}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn healthy(d: &Value) -> bool {
    d["status"] == json!("running")
        && d["plans"]["pending"].is_null()
        && d["healthy"] == json!(true)
}

fn nodes_of<'a>(d: &'a Value, group: &str) -> Vec<&'a Value> {
    d["nodes"]
        .as_array()
        .map(|n| n.iter().filter(|n| n["group"] == json!(group)).collect())
        .unwrap_or_default()
}

/// Kills one node of `group` and follows the deployment until it healed.
async fn kill_and_heal(s: &Server, token: &str, path: &str, group: &str) -> TestResult {
    let before = until(s, token, path, "healthy", healthy).await?;
    let victim = nodes_of(&before, group)
        .first()
        .map(|n| (*n).clone())
        .ok_or("no node to kill")?;
    let victim_id = victim["instance_id"]
        .as_str()
        .ok_or("instance id")?
        .to_string();
    let killed = Instant::now();
    std::fs::write(s.data_dir().join("sim").join("kill").join(&victim_id), b"")?;

    // The check finds it lost and starts a heal: both in one write.
    let healing = until(s, token, path, "healing", |d| {
        d["plans"]["pending"]["kind"] == json!("heal")
    })
    .await?;
    assert_eq!(healing["healthy"], json!(false), "{healing}");
    assert_eq!(healing["status"], json!("reconfiguring"), "{healing}");
    let reason = healing["health_reason"].as_str().unwrap_or("");
    assert!(
        reason.contains(&format!("node group {group} has")),
        "{healing}"
    );
    // A user's change while it heals waits for it, as for any plan.
    let mut grown = body();
    grown["node_groups"][1]["count"] = json!(3);
    let refused = s.call(Call::put(path).bearer(token).json(&grown)).await;
    refused.expect_status(409);

    let healed = until(s, token, path, "healthy again", healthy).await?;
    let elapsed = killed.elapsed();
    println!(
        "kill-to-healthy ({group} node {victim_id}): {} ms",
        elapsed.as_millis()
    );
    assert!(healed["health_reason"].is_null(), "{healed}");
    let group_nodes = nodes_of(&healed, group);
    assert_eq!(
        group_nodes.len(),
        nodes_of(&before, group).len(),
        "{healed}"
    );
    assert!(
        group_nodes
            .iter()
            .all(|n| n["instance_id"] != json!(victim_id)),
        "{healed}"
    );
    // The replacement is in the zone the lost node was in.
    assert!(
        group_nodes.iter().any(|n| n["zone"] == victim["zone"]),
        "{healed}"
    );
    for n in group_nodes {
        assert_eq!(n["state"], json!("running"), "{n}");
        assert_eq!(n["joined"], json!(true), "{n}");
        assert_eq!(n["version"], json!("8.15.3"), "{n}");
        assert!(n["private_address"].is_string(), "{n}");
    }

    // The heal is in the plan history, logged like any plan.
    let plans = s
        .call(Call::get(format!("{path}/plans")).bearer(token))
        .await;
    let plans = plans.expect_status(200).json();
    let plan = &plans["current"];
    assert_eq!(plan["kind"], json!("heal"), "{plans}");
    assert_eq!(plan["status"], json!("succeeded"), "{plans}");
    assert_eq!(plan["source"]["user"], json!("floe-health-check"), "{plan}");
    let steps: Vec<&str> = plan["steps"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["step_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        steps,
        [
            format!("template:{group}").as_str(),
            format!("replace:{group}").as_str(),
            "wait-running",
            "wait-joined",
            "record-access"
        ],
        "{plan}"
    );
    let log = plan["steps"][1]["info_log"].to_string();
    assert!(log.contains(&victim_id), "{log}");
    Ok(())
}

#[tokio::test]
async fn a_lost_node_is_replaced_and_the_deployment_heals() -> TestResult {
    let s = Server::start_with(&[
        // Slow enough boots that the heal is seen pending.
        ("FLOE_SIM_BOOT_DELAY_MS", "500"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "50"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_SWEEP_INTERVAL_MS", "200"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    let created = s
        .call(Call::post(DEPLOYMENTS).bearer(&token).json(&body()))
        .await;
    let id = created.expect_status(201).json()["id"]
        .as_str()
        .ok_or("id")?
        .to_string();
    let path = format!("{DEPLOYMENTS}/{id}");

    // Running and checked: every node shown where it runs.
    let d = until(&s, &token, &path, "healthy", healthy).await?;
    let nodes = d["nodes"].as_array().ok_or("nodes")?;
    assert_eq!(nodes.len(), 5, "{d}");
    for n in nodes {
        assert!(n["instance_id"].is_string(), "{n}");
        assert!(n["zone"].is_string(), "{n}");
        assert!(n["private_address"].is_string(), "{n}");
        assert_eq!(n["state"], json!("running"), "{n}");
        assert_eq!(n["version"], json!("8.15.3"), "{n}");
        assert_eq!(n["joined"], json!(true), "{n}");
    }
    assert_eq!(nodes_of(&d, "masters")[0]["roles"], json!(["master"]));
    assert_eq!(
        nodes_of(&d, "hot")[0]["roles"],
        json!(["data_hot", "data_content"])
    );

    kill_and_heal(&s, &token, &path, "hot").await?;
    kill_and_heal(&s, &token, &path, "masters").await?;
    Ok(())
}
