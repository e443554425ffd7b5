//! `validate_only` on a deployment's create and update (issue 15, item 3),
//! through the real binary: it answers what the call would do, with the
//! plan's steps, stores nothing (read back and counted), and refuses every
//! request the real call refuses, with the same status, codes and fields.

use floe_tests::{Call, DEPLOYMENTS, REPOSITORIES, Reply, Server, TestResult, deployment};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ORG: &str = "acme";

/// What a refusal says: status, codes and fields.
fn refusal(r: &Reply) -> (u16, Vec<String>, Vec<String>) {
    let errors = floe_tests::assert_ece_error(r);
    (r.status, r.error_codes(), floe_tests::error_fields(&errors))
}

/// Sends `call` with `validate_only=true` first, then as it is; both must be
/// refused alike, with `status`.
async fn refused_alike(s: &Server, call: Call, status: u16) -> (u16, Vec<String>, Vec<String>) {
    let sep = if call.path.contains('?') { '&' } else { '?' };
    let mut dry = call.clone();
    dry.path = format!("{}{sep}validate_only=true", call.path);
    let dry = s.call(dry).await;
    let real = s.call(call).await;
    assert_eq!(real.status, status, "{}", real.describe());
    assert_eq!(refusal(&dry), refusal(&real), "{}", dry.describe());
    refusal(&real)
}

async fn count_deployments(s: &Server, token: &str) -> usize {
    let listed = s.call(Call::get(DEPLOYMENTS).bearer(token)).await;
    listed.expect_status(200).json()["deployments"]
        .as_array()
        .map_or(0, Vec::len)
}

async fn settled(s: &Server, token: &str, path: &str) -> Result<Value, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = s.call(Call::get(path).bearer(token)).await;
        let d = d.expect_status(200).json();
        if d["plans"]["pending"].is_null() {
            return Ok(d);
        }
        if Instant::now() > deadline {
            return Err(format!("still pending after 60 s: {d}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn step_ids(plan: &Value) -> Vec<String> {
    plan["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["step_id"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn validate_only_answers_the_plan_and_stores_nothing() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "300"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "50"),
        ("FLOE_PLAN_POLL_MS", "20"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    s.call(
        Call::put(format!("{REPOSITORIES}/local-backups"))
            .bearer(&token)
            .json(&json!({"type": "fs", "settings": {"location": "backups"}})),
    )
    .await
    .expect_status(201);
    let body = deployment("orders", Some("local-backups"), &[]);

    // A create, checked: what it would be, its steps, and nothing stored.
    let dry = s
        .call(
            Call::post(format!("{DEPLOYMENTS}?validate_only=true"))
                .bearer(&token)
                .header("idempotency-key", "create-orders")
                .json(&body),
        )
        .await;
    let dry = dry.expect_status(200).json();
    assert_eq!(dry["outcome"], json!("create"), "{dry}");
    assert_eq!(dry["deployment"]["name"], json!("orders"), "{dry}");
    assert_eq!(dry["deployment"]["id"], json!(""), "{dry}");
    assert!(dry["deployment"]["credentials"].is_null(), "{dry}");
    assert_eq!(dry["plan"]["kind"], json!("create"), "{dry}");
    assert_eq!(count_deployments(&s, &token).await, 0);

    // The key was not spent: the real create with it creates (201, not a
    // replay), and its plan has the steps the validation showed.
    let created = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(&token)
                .header("idempotency-key", "create-orders")
                .json(&body),
        )
        .await;
    let created = created.expect_status(201).json();
    let id = created["id"].as_str().ok_or("id")?.to_string();
    let path = format!("{DEPLOYMENTS}/{id}");
    let d = settled(&s, &token, &path).await?;
    assert_eq!(d["status"], json!("running"), "{d}");
    let plans = s
        .call(Call::get(format!("{path}/plans")).bearer(&token))
        .await;
    let plans = plans.expect_status(200).json();
    let created_steps = step_ids(&plans["current"]);
    let shown: Vec<String> = serde_json::from_value(dry["plan"]["steps"].clone())?;
    assert_eq!(shown, created_steps, "{dry}");
    let history = plans["history"].as_array().map_or(0, Vec::len);

    // The same key and body again, checked: a replay, nothing created.
    let replay = s
        .call(
            Call::post(format!("{DEPLOYMENTS}?validate_only=true"))
                .bearer(&token)
                .header("idempotency-key", "create-orders")
                .json(&body),
        )
        .await;
    let replay = replay.expect_status(200).json();
    assert_eq!(replay["outcome"], json!("replay"), "{replay}");
    assert_eq!(replay["deployment"]["id"], json!(id), "{replay}");
    assert!(replay["deployment"]["credentials"].is_null(), "{replay}");
    assert_eq!(count_deployments(&s, &token).await, 1);

    // An update that needs a plan, checked: the update's steps, and the
    // deployment unchanged (same version, no pending plan, no new plan).
    let version = d["resource_version"].as_u64().ok_or("version")?;
    let mut bigger = body.clone();
    bigger["node_groups"][0]["count"] = json!(5);
    let dry = s
        .call(
            Call::put(format!("{path}?validate_only=true"))
                .bearer(&token)
                .header("if-match", &format!("\"{version}\""))
                .json(&bigger),
        )
        .await;
    let dry = dry.expect_status(200).json();
    assert_eq!(dry["outcome"], json!("plan"), "{dry}");
    assert_eq!(dry["plan"]["kind"], json!("update"), "{dry}");
    assert_eq!(dry["deployment"]["node_groups"][0]["count"], json!(5));
    let steps: Vec<String> = serde_json::from_value(dry["plan"]["steps"].clone())?;
    assert_eq!(steps.first().map(String::as_str), Some("begin"), "{dry}");
    assert!(steps.contains(&"launch:hot".to_string()), "{dry}");
    let after = s.call(Call::get(&path).bearer(&token)).await;
    let after = after.expect_status(200).json();
    assert_eq!(after["resource_version"], json!(version), "{after}");
    assert!(after["plans"]["pending"].is_null(), "{after}");
    assert_eq!(after["node_groups"][0]["count"], json!(3), "{after}");

    // A rename, checked: recorded at once, no plan; the name is unchanged.
    let mut renamed = body.clone();
    renamed["name"] = json!("orders-renamed");
    let dry = s
        .call(
            Call::put(format!("{path}?validate_only=true"))
                .bearer(&token)
                .json(&renamed),
        )
        .await;
    let dry = dry.expect_status(200).json();
    assert_eq!(dry["outcome"], json!("record"), "{dry}");
    assert!(dry.get("plan").is_none(), "{dry}");
    assert_eq!(dry["deployment"]["name"], json!("orders-renamed"));
    let after = s.call(Call::get(&path).bearer(&token)).await;
    let after = after.expect_status(200).json();
    assert_eq!(after["name"], json!("orders"), "{after}");
    assert_eq!(after["resource_version"], json!(version), "{after}");
    let plans = s
        .call(Call::get(format!("{path}/plans")).bearer(&token))
        .await;
    let plans = plans.expect_status(200).json();
    assert_eq!(plans["history"].as_array().map_or(0, Vec::len), history);
    assert!(plans["pending"].is_null(), "{plans}");
    Ok(())
}

#[tokio::test]
async fn validate_only_refuses_what_the_real_call_refuses() -> TestResult {
    let s = Server::start_with(&[
        // Long enough that an update is still pending for the next request.
        ("FLOE_SIM_BOOT_DELAY_MS", "1500"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "50"),
        ("FLOE_PLAN_POLL_MS", "20"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    let viewer = s.token(ORG, &["deployment_viewer"]);
    s.call(
        Call::put(format!("{REPOSITORIES}/local-backups"))
            .bearer(&token)
            .json(&json!({"type": "fs", "settings": {"location": "backups"}})),
    )
    .await
    .expect_status(201);
    let body = deployment("orders", Some("local-backups"), &[]);
    let post = || Call::post(DEPLOYMENTS).bearer(&token);

    // Creates.
    let mut no_groups = body.clone();
    no_groups["node_groups"] = json!([]);
    refused_alike(&s, post().json(&no_groups), 400).await;
    let mut bad_version = body.clone();
    bad_version["version"] = json!("banana");
    refused_alike(&s, post().json(&bad_version), 400).await;
    let missing_repo = deployment("orders", Some("nowhere"), &[]);
    refused_alike(&s, post().json(&missing_repo), 400).await;
    let missing_policy = deployment(
        "orders",
        Some("local-backups"),
        &["0193a0c4e1f07d2a8b9c0d1e2f3a4b5c"],
    );
    refused_alike(&s, post().json(&missing_policy), 400).await;
    let long_key = "k".repeat(129);
    refused_alike(
        &s,
        post().header("idempotency-key", &long_key).json(&body),
        400,
    )
    .await;
    refused_alike(&s, Call::post(DEPLOYMENTS).bearer(&viewer).json(&body), 403).await;
    refused_alike(
        &s,
        Call::post(format!("{DEPLOYMENTS}?typo=1"))
            .bearer(&token)
            .json(&body),
        400,
    )
    .await;
    // A key used with another body.
    let first = s
        .call(post().header("idempotency-key", "k1").json(&body))
        .await;
    let first_id = first.expect_status(201).json()["id"].clone();
    let mut other = body.clone();
    other["name"] = json!("other");
    refused_alike(&s, post().header("idempotency-key", "k1").json(&other), 409).await;
    // A clone of a deployment with no successful snapshot yet.
    let mut clone = body.clone();
    clone["restore_snapshot"] = json!({"source_deployment_id": first_id});
    refused_alike(&s, post().json(&clone), 409).await;
    clone["restore_snapshot"]["snapshot_name"] = json!("no-such-snapshot");
    refused_alike(&s, post().json(&clone), 400).await;
    clone["restore_snapshot"] = json!({"source_deployment_id": "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b"});
    refused_alike(&s, post().json(&clone), 400).await;
    // Not a boolean.
    let maybe = s
        .call(
            Call::post(format!("{DEPLOYMENTS}?validate_only=maybe"))
                .bearer(&token)
                .json(&body),
        )
        .await;
    let (status, codes, fields) = refusal(&maybe);
    assert_eq!(
        (status, codes, fields),
        (
            400,
            vec!["validation.boolean".to_string()],
            vec!["validate_only".to_string()]
        )
    );
    assert_eq!(count_deployments(&s, &token).await, 1);

    // Updates.
    let listed = s.call(Call::get(DEPLOYMENTS).bearer(&token)).await;
    let id = listed.expect_status(200).json()["deployments"][0]["id"]
        .as_str()
        .ok_or("id")?
        .to_string();
    let path = format!("{DEPLOYMENTS}/{id}");
    let d = settled(&s, &token, &path).await?;
    let version = d["resource_version"].as_u64().ok_or("version")?;
    let put = |p: &str| Call::put(p.to_string()).bearer(&token);

    refused_alike(
        &s,
        put(&format!("{DEPLOYMENTS}/0193a0c4d2b77c3e9a4b5c6d7e8f9a0b")).json(&body),
        404,
    )
    .await;
    refused_alike(
        &s,
        put(&path)
            .header("if-match", &format!("\"{}\"", version + 7))
            .json(&body),
        412,
    )
    .await;
    let mut downgrade = body.clone();
    downgrade["version"] = json!("7.17.0");
    refused_alike(&s, put(&path).json(&downgrade), 400).await;
    refused_alike(
        &s,
        put(&path).json(&deployment("orders", Some("nowhere"), &[])),
        400,
    )
    .await;
    let mut restore = body.clone();
    restore["restore_snapshot"] = json!({"source_deployment_id": id});
    refused_alike(&s, put(&path).json(&restore), 400).await;
    refused_alike(&s, Call::put(path.clone()).bearer(&viewer).json(&body), 403).await;
    let mut changed_id = d.clone();
    changed_id["status"] = json!("stopped");
    refused_alike(&s, put(&path).json(&changed_id), 400).await;

    // While a plan is pending, another change that needs one is refused.
    let mut bigger = body.clone();
    bigger["node_groups"][0]["count"] = json!(5);
    s.call(put(&path).json(&bigger)).await.expect_status(200);
    let mut smaller = body.clone();
    smaller["node_groups"][0]["count"] = json!(4);
    refused_alike(&s, put(&path).json(&smaller), 409).await;
    settled(&s, &token, &path).await?;
    Ok(())
}
