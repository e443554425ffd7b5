//! Handler tests through the real router (no socket): the semantics of each
//! resource, versions, idempotency, references, roles and organizations.

mod support;

use axum::http::StatusCode;
use floe_auth::{Role, issue_hs256};
use serde_json::{Value, json};
use std::time::Duration;
use support::{SECRET, TestResult, api, token};

const REPOS: &str = "/api/v1/platform/configuration/snapshots/repositories";

fn repo_body(secret: &str) -> Value {
    json!({"type": "s3", "settings": {"bucket": "elastic-snapshots", "endpoint": "1.2.3.4", "protocol": "http",
        "access_key": "AKIAFLOETEST1234", "secret_key": secret, "max_snapshot_bytes_per_sec": "150mb"}})
}

fn deployment_body(name: &str, repository: Option<&str>, policies: &[&str]) -> Value {
    let mut body = json!({"name": name, "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"], "instance_type": "m6g.xlarge",
            "count": 3, "zone_count": 3, "storage": {"size_gb": 200}}],
        "user_settings": {"thread_pool": {"snapshot": {"max": 8}}},
        "metadata": {"tags": [{"key": "team", "value": "search"}]}});
    if let Some(r) = repository {
        body["snapshot"] = json!({"repository": r, "policies": policies});
    }
    body
}

fn policy_body(repository: &str) -> Value {
    json!({"name": "nightly", "schedule": {"cron": "0 30 1 * * ?", "timezone": "Europe/Berlin"},
        "snapshot_name": "<nightly-{now/d}>", "repository": repository,
        "retention": {"expire_after": "30d", "min_count": 5, "max_count": 50}})
}

#[tokio::test]
async fn deployment_shows_architecture_heap_and_pending_plan() -> TestResult {
    let api = api()?;
    let r = api
        .admin(
            "POST",
            "/api/v1/deployments",
            Some(deployment_body("logs", None, &[])),
        )
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.etag(), "\"1\"");
    let id = r.body["id"].as_str().ok_or("id")?.to_string();
    assert_eq!(
        r.headers.get("location").and_then(|v| v.to_str().ok()),
        Some(format!("/api/v1/deployments/{id}").as_str())
    );
    assert_eq!(r.body["status"], "initializing");
    assert_eq!(r.body["node_groups"][0]["arch"], "arm64");
    assert_eq!(r.body["node_groups"][0]["jvm_heap_mib"], 8192);
    assert_eq!(r.body["plans"]["pending"]["kind"], "create");
    // Nested settings are stored flat, as Elasticsearch reports them.
    assert_eq!(
        r.body["user_settings"],
        json!({"thread_pool.snapshot.max": 8})
    );

    // The create's answer, and only it, carries the elastic password.
    assert_eq!(r.body["credentials"]["username"], "elastic");
    let password = r.body["credentials"]["password"].as_str().unwrap_or("");
    assert_eq!(password.len(), 32, "{}", r.body);
    let got = api
        .admin("GET", &format!("/api/v1/deployments/{id}"), None)
        .await?;
    let mut created = r.body.clone();
    created.as_object_mut().map(|o| o.remove("credentials"));
    assert_eq!(got.body, created);
    assert!(
        !got.body.to_string().contains(password),
        "a read never shows the password"
    );

    // x86 types are x86_64, and the heap is capped at 31 GiB.
    let mut big = deployment_body("big", None, &[]);
    big["node_groups"][0]["instance_type"] = json!("r6i.16xlarge");
    let r = api.admin("POST", "/api/v1/deployments", Some(big)).await?;
    assert_eq!(r.body["node_groups"][0]["arch"], "x86_64");
    assert_eq!(r.body["node_groups"][0]["jvm_heap_mib"], 31 * 1024);
    Ok(())
}

#[tokio::test]
async fn versions_and_preconditions() -> TestResult {
    let api = api()?;
    let path = format!("{REPOS}/main");
    let r = api
        .admin("PUT", &path, Some(repo_body("s3cr3t-value")))
        .await?;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        r.headers
            .get("x-cloud-resource-version")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );

    let t = token("acme", Role::PlatformAdmin);
    let r = api
        .call(
            "PUT",
            &path,
            Some(&t),
            &[("if-match", "\"1\"")],
            Some(repo_body("s3cr3t-value")),
        )
        .await?;
    assert_eq!((r.status, r.etag()), (StatusCode::OK, "\"2\""));
    let stale = api
        .call(
            "PUT",
            &path,
            Some(&t),
            &[("if-match", "\"1\"")],
            Some(repo_body("other")),
        )
        .await?;
    assert_eq!(
        (stale.status, stale.code()),
        (StatusCode::PRECONDITION_FAILED, "request.version_mismatch")
    );
    let stale = api
        .call("DELETE", &format!("{path}?version=1"), Some(&t), &[], None)
        .await?;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    let garbage = api
        .call(
            "DELETE",
            &path,
            Some(&t),
            &[("if-match", "yesterday")],
            None,
        )
        .await?;
    assert_eq!(
        (garbage.status, garbage.code()),
        (StatusCode::BAD_REQUEST, "validation.if_match")
    );
    let unchanged = api.admin("GET", &path, None).await?;
    assert_eq!(unchanged.etag(), "\"2\"");

    let ok = api
        .call("DELETE", &path, Some(&t), &[("if-match", "\"2\"")], None)
        .await?;
    assert_eq!(ok.status, StatusCode::NO_CONTENT);
    assert_eq!(
        api.admin("GET", &path, None).await?.status,
        StatusCode::NOT_FOUND
    );
    Ok(())
}

#[tokio::test]
async fn omitted_secrets_are_kept_only_for_the_same_access_key() -> TestResult {
    let api = api()?;
    let path = format!("{REPOS}/main");
    api.admin("PUT", &path, Some(repo_body("first-secret")))
        .await?;
    let mut without = repo_body("x");
    if let Some(s) = without["settings"].as_object_mut() {
        s.remove("secret_key");
    }
    let r = api.admin("PUT", &path, Some(without.clone())).await?;
    assert_eq!(
        r.body["settings"]["secret_key_set"], true,
        "same access key: the stored secret stays"
    );
    assert_eq!(r.body["settings"]["access_key"], "****1234");

    without["settings"]["access_key"] = json!("AKIAANOTHERKEY99");
    let r = api.admin("PUT", &path, Some(without)).await?;
    assert_eq!(
        r.body["settings"]["secret_key_set"], false,
        "a new access key never inherits the old secret"
    );
    Ok(())
}

#[tokio::test]
async fn idempotent_creates() -> TestResult {
    let api = api()?;
    let t = token("acme", Role::DeploymentManager);
    let first = api
        .call(
            "POST",
            "/api/v1/deployments",
            Some(&t),
            &[("idempotency-key", "k-1")],
            Some(deployment_body("logs", None, &[])),
        )
        .await?;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = api
        .call(
            "POST",
            "/api/v1/deployments",
            Some(&t),
            &[("idempotency-key", "k-1")],
            Some(deployment_body("logs", None, &[])),
        )
        .await?;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["id"], first.body["id"]);
    let other = api
        .call(
            "POST",
            "/api/v1/deployments",
            Some(&t),
            &[("idempotency-key", "k-1")],
            Some(deployment_body("other", None, &[])),
        )
        .await?;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::CONFLICT, "request.idempotency_key_reused")
    );
    // ECE's request_id works the same way.
    let a = api
        .call(
            "POST",
            "/api/v1/deployments?request_id=r-9",
            Some(&t),
            &[],
            Some(deployment_body("logs", None, &[])),
        )
        .await?;
    let b = api
        .call(
            "POST",
            "/api/v1/deployments?request_id=r-9",
            Some(&t),
            &[],
            Some(deployment_body("logs", None, &[])),
        )
        .await?;
    assert_eq!(a.body["id"], b.body["id"]);
    let list = api
        .call("GET", "/api/v1/deployments", Some(&t), &[], None)
        .await?;
    assert_eq!(
        list.body["deployments"].as_array().map(Vec::len),
        Some(2),
        "retries created nothing more"
    );
    Ok(())
}

#[tokio::test]
async fn references_are_checked_and_guard_deletes() -> TestResult {
    let api = api()?;
    let missing = api
        .admin(
            "POST",
            "/api/v1/snapshot-policies",
            Some(policy_body("nope")),
        )
        .await?;
    assert_eq!(
        (
            missing.status,
            missing.body["errors"][0]["fields"][0].as_str()
        ),
        (StatusCode::BAD_REQUEST, Some("repository"))
    );

    api.admin("PUT", &format!("{REPOS}/main"), Some(repo_body("s")))
        .await?;
    let p = api
        .admin(
            "POST",
            "/api/v1/snapshot-policies",
            Some(policy_body("main")),
        )
        .await?;
    assert_eq!(p.status, StatusCode::CREATED, "{}", p.body);
    assert_eq!(
        p.body["schedule_expression"],
        json!({"expression": "cron(30 1 * * ? *)", "timezone": "Europe/Berlin"})
    );
    let pid = p.body["id"].as_str().ok_or("id")?.to_string();

    let bad_policy = api
        .admin(
            "POST",
            "/api/v1/deployments",
            Some(deployment_body(
                "logs",
                Some("main"),
                &["0193a0c4e1f07d2a8b9c0d1e2f3a4b5c"],
            )),
        )
        .await?;
    assert_eq!(
        bad_policy.body["errors"][0]["fields"][0],
        "snapshot.policies[0]"
    );

    let d = api
        .admin(
            "POST",
            "/api/v1/deployments",
            Some(deployment_body("logs", Some("main"), &[&pid])),
        )
        .await?;
    assert_eq!(d.status, StatusCode::CREATED, "{}", d.body);
    let did = d.body["id"].as_str().ok_or("id")?.to_string();

    let repo = api.admin("GET", &format!("{REPOS}/main"), None).await?;
    assert_eq!(repo.body["used_by"], 2);
    let in_use = api.admin("DELETE", &format!("{REPOS}/main"), None).await?;
    assert_eq!(
        (in_use.status, in_use.code()),
        (StatusCode::CONFLICT, "repositories.repository_in_use")
    );
    let attached = api
        .admin("DELETE", &format!("/api/v1/snapshot-policies/{pid}"), None)
        .await?;
    assert_eq!(
        (attached.status, attached.code()),
        (StatusCode::CONFLICT, "policies.policy_in_use")
    );
    let running = api
        .admin("DELETE", &format!("/api/v1/deployments/{did}"), None)
        .await?;
    assert_eq!(
        (running.status, running.code()),
        (StatusCode::CONFLICT, "deployments.deployment_not_stopped")
    );

    // Detaching is a record-only change, allowed while the create plan is pending.
    let mut detached = deployment_body("logs", Some("main"), &[]);
    detached["metadata"]["tags"] = json!([{"key": "team", "value": "obs"}]);
    let r = api
        .admin("PUT", &format!("/api/v1/deployments/{did}"), Some(detached))
        .await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["resource_version"], 2);
    assert_eq!(
        api.admin("DELETE", &format!("/api/v1/snapshot-policies/{pid}"), None)
            .await?
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        api.admin("GET", &format!("{REPOS}/main"), None).await?.body["used_by"],
        1
    );

    // A cluster change waits for the pending plan.
    let mut resized = deployment_body("logs", Some("main"), &[]);
    resized["node_groups"][0]["count"] = json!(5);
    let r = api
        .admin("PUT", &format!("/api/v1/deployments/{did}"), Some(resized))
        .await?;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "deployments.plan_in_progress")
    );
    Ok(())
}

#[tokio::test]
async fn organizations_and_roles() -> TestResult {
    let api = api()?;
    let d = api
        .admin(
            "POST",
            "/api/v1/deployments",
            Some(deployment_body("logs", None, &[])),
        )
        .await?;
    let path = format!("/api/v1/deployments/{}", d.body["id"].as_str().ok_or("id")?);

    let other_org = api
        .call(
            "GET",
            &path,
            Some(&token("globex", Role::PlatformViewer)),
            &[],
            None,
        )
        .await?;
    assert_eq!(
        (other_org.status, other_org.code()),
        (StatusCode::NOT_FOUND, "deployments.deployment_not_found")
    );
    // Platform roles may act in another organization, by saying which.
    let chosen = api
        .call(
            "GET",
            &path,
            Some(&token("globex", Role::PlatformViewer)),
            &[("x-floe-organization", "acme")],
            None,
        )
        .await?;
    assert_eq!(chosen.status, StatusCode::OK);
    let not_platform = api
        .call(
            "GET",
            &path,
            Some(&token("globex", Role::DeploymentManager)),
            &[("x-floe-organization", "acme")],
            None,
        )
        .await?;
    assert_eq!(
        (not_platform.status, not_platform.code()),
        (StatusCode::FORBIDDEN, "auth.forbidden")
    );
    // Outside its own organization a token holds its platform roles only:
    // a platform_viewer that manages deployments at home only reads here.
    let combined = issue_hs256(
        SECRET,
        "floe-local",
        "floe-api",
        "tester",
        "globex",
        &[Role::PlatformViewer, Role::DeploymentManager],
        Duration::from_secs(600),
    )?;
    let elsewhere = [("x-floe-organization", "acme")];
    for (method, target, body) in [
        (
            "POST",
            "/api/v1/deployments",
            Some(deployment_body("intruder", None, &[])),
        ),
        ("POST", &format!("{path}/_shutdown") as &str, None),
        ("DELETE", &format!("{path}/plans/pending") as &str, None),
        (
            "PUT",
            &path as &str,
            Some(deployment_body("renamed", None, &[])),
        ),
    ] {
        let r = api
            .call(method, target, Some(&combined), &elsewhere, body)
            .await?;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "auth.forbidden"),
            "{method} {target}: {}",
            r.body
        );
    }
    let read = api
        .call("GET", &path, Some(&combined), &elsewhere, None)
        .await?;
    assert_eq!(read.status, StatusCode::OK);
    let listed = api
        .call(
            "GET",
            "/api/v1/deployments",
            Some(&combined),
            &elsewhere,
            None,
        )
        .await?;
    assert_eq!(listed.body["deployments"].as_array().map(Vec::len), Some(1));
    // At home the same token manages.
    let home = api
        .call(
            "POST",
            "/api/v1/deployments",
            Some(&combined),
            &[],
            Some(deployment_body("at-home", None, &[])),
        )
        .await?;
    assert_eq!(home.status, StatusCode::CREATED, "{}", home.body);

    let viewer = token("acme", Role::DeploymentViewer);
    assert_eq!(
        api.call("GET", &path, Some(&viewer), &[], None)
            .await?
            .status,
        StatusCode::OK
    );
    let write = api
        .call(
            "POST",
            "/api/v1/deployments",
            Some(&viewer),
            &[],
            Some(deployment_body("x", None, &[])),
        )
        .await?;
    assert_eq!(write.status, StatusCode::FORBIDDEN);
    let manager = token("acme", Role::DeploymentManager);
    let repo = api
        .call(
            "PUT",
            &format!("{REPOS}/x"),
            Some(&manager),
            &[],
            Some(repo_body("s")),
        )
        .await?;
    assert_eq!(
        repo.status,
        StatusCode::FORBIDDEN,
        "repositories are platform configuration"
    );

    let none = api.call("GET", &path, None, &[], None).await?;
    assert_eq!(
        (none.status, none.code()),
        (StatusCode::UNAUTHORIZED, "auth.missing_token")
    );
    assert_eq!(
        none.headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer")
    );
    Ok(())
}

#[tokio::test]
async fn health_catalog_and_unknown_paths() -> TestResult {
    let api = api()?;
    let h = api.call("GET", "/api/v1/health", None, &[], None).await?;
    assert_eq!(
        (h.status, h.body["status"].as_str()),
        (StatusCode::OK, Some("ok"))
    );
    // Like every operation without query parameters, it refuses one.
    let h = api
        .call("GET", "/api/v1/health?verbose=1", None, &[], None)
        .await?;
    assert_eq!(h.status, StatusCode::BAD_REQUEST);
    assert_eq!(h.body["errors"][0]["fields"][0], "verbose");
    assert_eq!(
        h.body["errors"][0]["message"],
        "verbose: is not a parameter of this operation, which takes none"
    );
    let doc = api
        .call("GET", "/api/v1/openapi.json", None, &[], None)
        .await?;
    assert_eq!(doc.body["info"]["title"], "Floe API");

    let arm = api
        .admin(
            "GET",
            "/api/v1/platform/configuration/instance-types?arch=arm64",
            None,
        )
        .await?;
    let types = arm.body["instance_types"].as_array().ok_or("list")?;
    assert!(types.iter().all(|t| t["arch"] == "arm64"));
    for family in [
        "m6g", "m7g", "m8g", "c6g", "c7g", "r6g", "r7g", "r8g", "im4gn", "i4g",
    ] {
        assert!(
            types.iter().any(|t| t["family"] == family),
            "{family} missing"
        );
    }
    let bad = api
        .admin(
            "GET",
            "/api/v1/platform/configuration/instance-types?arch=sparc",
            None,
        )
        .await?;
    assert_eq!(
        (bad.status, bad.body["errors"][0]["fields"][0].as_str()),
        (StatusCode::BAD_REQUEST, Some("arch"))
    );

    let nowhere = api.admin("GET", "/api/v1/nowhere", None).await?;
    assert_eq!(
        (nowhere.status, nowhere.code()),
        (StatusCode::NOT_FOUND, "root.not_found")
    );
    let method = api.admin("PATCH", "/api/v1/deployments", None).await?;
    assert_eq!(
        (method.status, method.code()),
        (StatusCode::METHOD_NOT_ALLOWED, "root.method_not_allowed")
    );
    Ok(())
}

/// The committed contract is what the router generates.
#[test]
fn openapi_document_is_up_to_date() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = floe_api::openapi_json();
    assert!(
        committed == generated,
        "openapi/openapi.json differs from what the router generates; rewrite it with:\n    cargo run -q --bin floe-local -- openapi > openapi/openapi.json"
    );
}

/// Every operation carries what SDK generators and readers rely on.
#[test]
fn every_operation_is_fully_documented() -> TestResult {
    let doc: Value = serde_json::from_str(&floe_api::openapi_json())?;
    let paths = doc["paths"].as_object().ok_or("paths")?;
    let mut ids = std::collections::BTreeSet::new();
    let mut count = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().ok_or("item")? {
            count += 1;
            let name = format!("{method} {path}");
            let id = op["operationId"]
                .as_str()
                .ok_or(format!("{name}: operationId"))?;
            assert!(
                ids.insert(id.to_string()),
                "{name}: duplicate operationId {id}"
            );
            assert!(
                op["tags"].as_array().is_some_and(|t| !t.is_empty()),
                "{name}: tag"
            );
            assert!(op["security"].is_array(), "{name}: security requirement");
            let responses = op["responses"]
                .as_object()
                .ok_or(format!("{name}: responses"))?;
            let public = path == "/api/v1/health";
            if !public {
                assert!(responses.contains_key("401"), "{name}: 401 documented");
                assert!(
                    responses.keys().any(|k| k.starts_with('4') && k != "401"),
                    "{name}: other errors documented"
                );
            }
            let success = responses
                .iter()
                .find(|(k, _)| k.starts_with('2'))
                .ok_or(format!("{name}: 2xx"))?;
            if success.0 != "204" {
                // One example, or named ones where the answer has two bodies.
                let content = &success.1["content"]["application/json"];
                assert!(
                    !content["example"].is_null()
                        || content["examples"]
                            .as_object()
                            .is_some_and(|e| !e.is_empty()),
                    "{name}: response example"
                );
            }
            if let Some(body) = op.get("requestBody") {
                assert!(
                    !body["content"]["application/json"]["example"].is_null(),
                    "{name}: request example"
                );
            }
        }
    }
    assert!(count >= 15, "expected every route, found {count}");
    let text = floe_api::openapi_json();
    assert!(
        !text.contains("AKIA") && !text.contains("wJalr"),
        "no real-looking credentials in examples"
    );
    Ok(())
}

/// Answers document their bodies by reference: every `$ref` in the
/// document names a schema its components hold.
#[test]
fn every_schema_reference_resolves() -> TestResult {
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r);
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let doc: Value = serde_json::from_str(&floe_api::openapi_json())?;
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(
        found.len() > 50,
        "expected many references, found {}",
        found.len()
    );
    for r in found {
        let name = r
            .strip_prefix("#/components/schemas/")
            .ok_or(format!("{r}: not a schema reference"))?;
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "{r} names no schema of the document"
        );
    }
    Ok(())
}

/// The headers the document promises on a versioned answer are the ones
/// the typed answers send.
/// The rules JSON Schema can state are in the document: either/or bodies
/// as `oneOf`, fields that come together as `dependentRequired`, lists
/// that cannot be empty as `minItems`, a cursor's form as a pattern; and
/// it names its servers and describes every operation.
#[test]
fn the_document_states_what_json_schema_can() -> TestResult {
    let doc: Value = serde_json::from_str(&floe_api::openapi_json())?;
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["Schedule"]["oneOf"].as_array().map(Vec::len),
        Some(2)
    );
    for restore in ["RestoreRequest", "RestoreSnapshot"] {
        assert_eq!(
            schemas[restore]["dependentRequired"]["rename_pattern"],
            json!(["rename_replacement"]),
            "{restore}"
        );
    }
    assert_eq!(schemas["NodeGroup"]["properties"]["roles"]["minItems"], 1);
    assert_eq!(
        schemas["DeploymentSpec"]["properties"]["node_groups"]["minItems"],
        1
    );
    assert_eq!(
        schemas["DrillQuery"]["properties"]["query"]["maxProperties"],
        1
    );
    assert!(doc["servers"].as_array().is_some_and(|s| !s.is_empty()));
    assert!(
        schemas["Tag"]["properties"]["key"]["pattern"]
            .as_str()
            .is_some_and(|p| p.starts_with("^[^:"))
    );
    let mut cursors = 0;
    for item in doc["paths"].as_object().ok_or("paths")?.values() {
        for (method, op) in item.as_object().ok_or("a path item")? {
            let id = op["operationId"].as_str().unwrap_or(method);
            assert!(
                op["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{id} has no description"
            );
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["name"] == "cursor" {
                    cursors += 1;
                    assert_eq!(p["schema"]["pattern"], "^[A-Za-z0-9_-]{2,683}$", "{id}");
                }
                if p["in"] == "path" && (p["name"] == "id" || p["name"] == "api_key_id") {
                    assert_eq!(p["schema"]["pattern"], "^[0-9a-f]{32}$", "{id}");
                }
            }
        }
    }
    assert!(cursors >= 8, "{cursors} cursor parameters");
    Ok(())
}

/// A field that excludes another or comes with one is text when sent: a
/// `null` beside a value would be a second spelling of "left out".
#[tokio::test]
async fn either_or_fields_refuse_null() -> TestResult {
    let api = api()?;
    let mut policy = policy_body("main");
    policy["schedule"] = json!({"interval": "30m", "cron": null});
    let r = api
        .admin("POST", "/api/v1/snapshot-policies", Some(policy))
        .await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["errors"][0]["code"], "validation.type");
    assert_eq!(r.body["errors"][0]["fields"][0], "schedule.cron");
    let mut spec = deployment_body("renamed", None, &[]);
    spec["restore_snapshot"] = json!({"source_deployment_id": "x", "rename_pattern": null});
    let r = api.admin("POST", "/api/v1/deployments", Some(spec)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["errors"][0]["code"], "validation.type");
    assert_eq!(
        r.body["errors"][0]["fields"][0],
        "restore_snapshot.rename_pattern"
    );
    Ok(())
}

#[tokio::test]
async fn documented_version_headers_are_sent() -> TestResult {
    let doc: Value = serde_json::from_str(&floe_api::openapi_json())?;
    let documented = |path: &str, method: &str, status: &str| -> Vec<String> {
        doc["paths"][path][method]["responses"][status]["headers"]
            .as_object()
            .map(|h| h.keys().map(|k| k.to_ascii_lowercase()).collect())
            .unwrap_or_default()
    };
    let api = api()?;
    let created = api
        .admin(
            "POST",
            "/api/v1/deployments",
            Some(deployment_body("logs", None, &[])),
        )
        .await?;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let headers = documented("/api/v1/deployments", "post", "201");
    assert_eq!(headers, ["etag", "location", "x-cloud-resource-version"]);
    for h in &headers {
        assert!(created.headers.contains_key(h.as_str()), "{h} not sent");
    }
    let id = created.body["id"].as_str().ok_or("id")?;
    let got = api
        .admin("GET", &format!("/api/v1/deployments/{id}"), None)
        .await?;
    let headers = documented("/api/v1/deployments/{id}", "get", "200");
    assert_eq!(headers, ["etag", "x-cloud-resource-version"]);
    for h in &headers {
        assert!(got.headers.contains_key(h.as_str()), "{h} not sent");
    }
    assert_eq!(
        got.headers
            .get("x-cloud-resource-version")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    // Answers without a version document none.
    assert!(documented("/api/v1/deployments", "get", "200").is_empty());
    Ok(())
}

/// A spec that each field allows but that adds up past what the store can
/// hold is a 400 naming its biggest part, and nothing is stored (issue 12,
/// defect 14); so are more policies than one transaction can attach.
#[tokio::test]
async fn a_spec_too_big_to_store_is_refused_on_its_biggest_part() -> TestResult {
    let api = api()?;
    let mut body = deployment_body("big", None, &[]);
    // 150 settings of 100 items of 55 characters: each within its bound,
    // about 900 KB in all, under the 1 MiB body cap.
    let item = "x".repeat(55);
    for k in 0..150 {
        body["user_settings"][format!("node.attr.custom{k}")] = json!(vec![item.clone(); 100]);
    }
    let size = body.to_string().len();
    assert!(size > 800_000 && size < 1_000_000, "{size}");
    let refused = api.admin("POST", "/api/v1/deployments", Some(body)).await?;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert_eq!(refused.code(), "validation.too_large");
    assert_eq!(
        refused.body["errors"][0]["fields"],
        json!(["user_settings"])
    );

    let ids: Vec<String> = (0..21)
        .map(|i| format!("0193a0c4e1f07d2a8b9c0d1e2f3a4b{i:02}"))
        .collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let refused = api
        .admin(
            "POST",
            "/api/v1/deployments",
            Some(deployment_body("many", Some("main"), &refs)),
        )
        .await?;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        refused.body["errors"].as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["fields"] == json!(["snapshot.policies"]))),
        "{}",
        refused.body
    );
    let listed = api.admin("GET", "/api/v1/deployments", None).await?;
    assert_eq!(listed.body["deployments"], json!([]), "nothing stored");
    Ok(())
}

/// The lines a test's requests write, through the JSON formatter every
/// function installs. Set for this thread only: `#[tokio::test]` polls the
/// router on it.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<Value> {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect()
    }
}

#[tokio::test]
async fn every_request_has_an_id_and_one_access_line() -> TestResult {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .fmt_fields(floe_telemetry::json::Fields)
        .event_format(floe_telemetry::json::Lines)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let api = api()?;
    let admin = token("acme", Role::PlatformAdmin);
    let missing = "/api/v1/deployments/0193a0c4e1f07d2a8b9c0d1e2f3a4b5c";
    let too_long = "x".repeat(129);
    // (token, headers sent, whether the client's id is kept)
    type Case<'a> = (Option<&'a str>, &'a [(&'a str, &'a str)], bool);
    let cases: [Case; 4] = [
        (Some(admin.as_str()), &[], false),
        (
            Some(admin.as_str()),
            &[("x-request-id", "trace-4711")],
            true,
        ),
        (
            Some(admin.as_str()),
            &[("x-request-id", too_long.as_str())],
            false,
        ),
        (None, &[("x-request-id", "has space")], false),
    ];
    let mut ids = Vec::new();
    for (token, headers, kept) in cases {
        let r = api.call("GET", missing, token, headers, None).await?;
        let id = r
            .headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .ok_or("every answer carries a request id")?
            .to_string();
        if kept {
            assert_eq!(id, "trace-4711", "a usable client id is kept");
        } else {
            assert!(uuid::Uuid::parse_str(&id).is_ok(), "made, not echoed: {id}");
        }
        ids.push((id, r.status));
    }

    let done: Vec<Value> = out
        .lines()
        .into_iter()
        .filter(|l| l["fields"]["message"] == "request done")
        .collect();
    assert_eq!(done.len(), 4, "one access line per request: {done:?}");
    for (line, (id, status)) in done.iter().zip(&ids) {
        assert_eq!(line["span"]["name"], "request");
        assert_eq!(line["span"]["method"], "GET");
        assert_eq!(line["span"]["path"], missing);
        assert_eq!(line["span"]["request_id"], id.as_str());
        assert_eq!(line["fields"]["status"], status.as_u16());
        assert!(line["fields"]["latency_ms"].is_u64(), "{line}");
    }
    assert_eq!(done[0]["span"]["org"], "acme", "the caller's organization");
    assert!(done[3]["span"].get("org").is_none(), "no caller, no org");
    assert_eq!(ids[3].1, StatusCode::UNAUTHORIZED);
    let text =
        String::from_utf8_lossy(&out.0.lock().map(|b| b.clone()).unwrap_or_default()).into_owned();
    assert!(!text.contains(&admin), "a token never reaches the log");
    Ok(())
}
