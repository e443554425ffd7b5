//! The platform license through the real router and the real plans
//! (issue 39): uploaded by a platform admin, checked as Elasticsearch
//! checks it, never shown with its signature; installed on every running
//! deployment by a `license` plan, seen through the proxy with
//! `GET /_license`; and what lets a mount clone run without a trial. The
//! simulated clusters start on basic, as Elasticsearch does.

mod planned;

use axum::http::StatusCode;
use floe_auth::Role;
use planned::*;
use serde_json::{Value, json};

const DAY: i64 = 86_400_000;

fn upload(uid: &str, license_type: &str) -> Value {
    let now = chrono::Utc::now().timestamp_millis();
    let mut license = json!({
        "uid": uid, "type": license_type, "issuer": "API", "issued_to": "Example Corp",
        "issue_date_in_millis": now - DAY, "start_date_in_millis": now - DAY,
        "expiry_date_in_millis": now + 365 * DAY,
        "signature": "AAAABAAAAA3FXON9kGmNqmH-not-shown"
    });
    if license_type == "enterprise" {
        license["max_resource_units"] = json!(8);
    } else {
        license["max_nodes"] = json!(12);
    }
    json!({ "license": license })
}

const LICENSE: &str = "/api/v1/platform/license";

impl World {
    /// `method` on the platform license, as a platform admin of `org`.
    async fn license_as_admin(
        &self,
        org: &str,
        method: &str,
        body: Option<Value>,
    ) -> Fallible<(StatusCode, Value)> {
        self.call_with(
            &token_with(org, &[Role::PlatformAdmin]),
            method,
            LICENSE,
            body,
        )
        .await
    }

    /// `GET /_license` on deployment `id`, through the proxy.
    async fn proxied_license(&self, id: &str) -> Fallible<Value> {
        let (status, body) = self
            .call(
                "GET",
                &format!(
                    "/api/v1/deployments/{id}/elasticsearch/main-elasticsearch/proxy/_license"
                ),
                None,
            )
            .await?;
        assert_eq!(status, StatusCode::OK, "{body}");
        Ok(body["license"].clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_license_reaches_every_running_deployment_and_lets_mount_clones_run()
-> TestResult {
    let w = world().await?;
    let (source, _) = w.source().await?;
    let (plain, _) = w
        .create_at("/api/v1/deployments", spec("plain", None))
        .await?;
    assert_eq!(w.proxied_license(&plain).await?["type"], "basic");
    let (status, body) = w.license_as_admin(ORG, "GET", None).await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["errors"][0]["code"], "license.license_not_found");

    // Without a platform license, a mount clone needs the trial.
    let clone_path = format!("/api/v1/deployments/{source}/_clone");
    let (status, body) = w
        .call(
            "POST",
            &clone_path,
            Some(json!({"name": "m0", "mode": "mount"})),
        )
        .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errors"][0]["code"], "restore.license_required");
    assert_eq!(body["errors"][0]["fields"], json!(["license"]));

    // `validate_only` answers the same, and stores nothing.
    let mut mount = spec("m1", None);
    mount["restore_snapshot"] = json!({"source_deployment_id": source, "mode": "mount"});
    let (status, body) = w
        .call(
            "POST",
            "/api/v1/deployments?validate_only=true",
            Some(mount.clone()),
        )
        .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errors"][0]["code"], "restore.license_required");
    assert_eq!(
        body["errors"][0]["fields"],
        json!(["restore_snapshot.license"])
    );

    // An upload is a platform admin's.
    let (status, _) = w
        .call("PUT", LICENSE, Some(upload("u-1", "enterprise")))
        .await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, answer) = w
        .license_as_admin(ORG, "PUT", Some(upload("u-1", "enterprise")))
        .await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(!answer.to_string().contains("not-shown"), "{answer}");
    assert_eq!(answer["license"]["type"], "enterprise");
    assert_eq!(answer["license"]["allows_searchable_snapshots"], true);
    let mut planned: Vec<&str> = answer["plans"]
        .as_array()
        .ok_or("no plans")?
        .iter()
        .filter_map(|p| p["deployment_id"].as_str())
        .collect();
    planned.sort_unstable();
    let mut running = vec![source.as_str(), plain.as_str()];
    running.sort_unstable();
    assert_eq!(planned, running, "{answer}");

    // Each running deployment runs it, as the proxy shows, and its view says so.
    for id in [&source, &plain] {
        let d = w.settled(id).await?;
        assert_eq!(d["status"], "running", "{d}");
        assert_eq!(d["license"]["type"], "enterprise", "{d}");
        assert_eq!(d["license"]["uid"], "u-1", "{d}");
        let plan = w.last_plan(id).await?;
        assert_eq!(plan["kind"], "license", "{plan}");
        let reported = w.proxied_license(id).await?;
        assert_eq!(reported["uid"], "u-1", "{reported}");
        assert_eq!(reported["type"], "enterprise", "{reported}");
    }

    // Viewers read it, without its signature.
    let viewer = token_with(ORG, &[Role::DeploymentViewer]);
    let (status, shown) = w.call_with(&viewer, "GET", LICENSE, None).await?;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["uid"], "u-1");
    assert_eq!(shown["issued_to"], "Example Corp");
    assert!(shown["expiry"].is_string(), "{shown}");
    assert!(shown.get("signature").is_none(), "{shown}");

    // A mount clone now runs on it, with no trial; `validate_only` says so.
    let (status, shown) = w
        .call(
            "POST",
            "/api/v1/deployments?validate_only=true",
            Some(mount),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert!(
        shown["plan"]["steps"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s == "license")),
        "{shown}"
    );
    // A mount clone now runs on it, with no trial.
    let (clone, d) = w
        .create_at(&clone_path, json!({"name": "mounted", "mode": "mount"}))
        .await?;
    assert_eq!(d["status"], "running", "{d}");
    assert_eq!(d["license"]["uid"], "u-1", "{d}");
    assert_eq!(w.count(&clone, "orders").await?, Some(30));
    let trial: Value = w
        .http
        .get(format!("{}/_license/trial_status", w.url(&clone).await?))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        trial["eligible_to_start_trial"], true,
        "no trial was used: {trial}"
    );

    // The same license again plans nothing; another reaches all three.
    let (_, again) = w
        .license_as_admin(ORG, "PUT", Some(upload("u-1", "enterprise")))
        .await?;
    assert_eq!(again["plans"], json!([]), "{again}");
    let (status, next) = w
        .license_as_admin(ORG, "PUT", Some(upload("u-2", "enterprise")))
        .await?;
    assert_eq!(status, StatusCode::OK, "{next}");
    assert_eq!(next["plans"].as_array().map(Vec::len), Some(3), "{next}");
    for id in [&source, &plain, &clone] {
        w.settled(id).await?;
        assert_eq!(w.proxied_license(id).await?["uid"], "u-2");
    }
    assert_eq!(w.count(&clone, "orders").await?, Some(30));

    // Deleted: clusters keep what they run; mount clones need a trial again.
    let (status, _) = w.license_as_admin(ORG, "DELETE", None).await?;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(w.proxied_license(&plain).await?["uid"], "u-2");
    let (status, body) = w
        .call(
            "POST",
            &clone_path,
            Some(json!({"name": "m2", "mode": "mount"})),
        )
        .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_license_elasticsearch_would_refuse_is_refused_naming_the_field() -> TestResult {
    let w = world().await?;
    let now = chrono::Utc::now().timestamp_millis();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut body = upload("u-bad", "platinum");
        f(&mut body["license"]);
        body
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            edit(&|l| l["expiry_date_in_millis"] = json!(now - DAY)),
            "license.invalid_license",
            "license.expiry_date_in_millis",
        ),
        (
            edit(&|l| l["type"] = json!("basic")),
            "license.invalid_license",
            "license.type",
        ),
        (
            edit(&|l| {
                if let Some(l) = l.as_object_mut() {
                    l.remove("max_nodes");
                }
            }),
            "license.invalid_license",
            "license.max_nodes",
        ),
        (
            edit(&|l| l["issue_date_in_millis"] = json!(now + DAY)),
            "license.invalid_license",
            "license.issue_date_in_millis",
        ),
        (
            edit(&|l| l["uid"] = json!("")),
            "license.invalid_license",
            "license.uid",
        ),
        (
            edit(&|l| l["cluster_licenses"] = json!([])),
            "validation.unknown_field",
            "license.cluster_licenses",
        ),
        (
            edit(&|l| l["max_nodes"] = json!("ten")),
            "validation.type",
            "license.max_nodes",
        ),
        (json!({}), "validation.required", "license"),
    ];
    for (body, code, field) in cases {
        let (status, answer) = w.license_as_admin(ORG, "PUT", Some(body.clone())).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["errors"][0]["code"], code, "{body}: {answer}");
        assert_eq!(
            answer["errors"][0]["fields"],
            json!([field]),
            "{body}: {answer}"
        );
        let (status, _) = w.license_as_admin(ORG, "GET", None).await?;
        assert_eq!(status, StatusCode::NOT_FOUND, "nothing was stored");
    }
    // One organization's license is not another's.
    let (status, _) = w
        .license_as_admin(ORG, "PUT", Some(upload("u-acme", "enterprise")))
        .await?;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = w.license_as_admin("globex", "GET", None).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    Ok(())
}
