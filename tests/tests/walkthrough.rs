//! The API's own walk-through (repository, deployment, policy, attach,
//! listings, plans, shutdown, delete): what a user types, and what they
//! would look at in each answer. Run once on the embedded SQLite store and
//! once on DynamoDB (moto, started by scripts/test.sh). The walk-through's
//! block in docs/getting-started.md is itself run by `readme.rs`.

use floe_tests::{
    Call, DEPLOYMENTS, FLASHBLADE_REPOSITORY, INSTANCE_TYPES, POLICIES, REPOSITORIES, Reply,
    Server, TestResult, policy,
};
use serde_json::{Value, json};

const ORG: &str = "acme";

fn str_of<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn check_versioned(r: &Reply, version: u64) {
    assert_eq!(
        r.header("etag"),
        Some(format!("\"{version}\"").as_str()),
        "{}",
        r.describe()
    );
    assert_eq!(
        r.header("x-cloud-resource-version"),
        Some(version.to_string().as_str()),
        "{}",
        r.describe()
    );
    assert_eq!(
        r.json()["resource_version"],
        json!(version),
        "{}",
        r.describe()
    );
}

/// The walk-through's Graviton deployment (docs/getting-started.md).
fn graviton(name: &str, repository: Option<&str>, policies: &[&str], team: &str) -> Value {
    let mut d = json!({
        "name": name,
        "version": "8.15.3",
        "node_groups": [{
            "id": "hot",
            "roles": ["master", "data_hot", "data_content", "ingest"],
            "instance_type": "m6g.xlarge",
            "count": 3,
            "zone_count": 3,
            "storage": {"size_gb": 200, "volume_type": "gp3"}
        }],
        "user_settings": {"thread_pool.snapshot.max": 8},
        "metadata": {"tags": [{"key": "team", "value": team}]}
    });
    if let Some(r) = repository {
        d["snapshot"] = json!({"repository": r, "policies": policies});
    }
    d
}

fn names(list: &Value) -> Vec<String> {
    list["deployments"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| str_of(d, "/name").to_string())
        .collect()
}

async fn walkthrough(s: &Server) -> TestResult {
    // Health and the contract need no token.
    let health = s.call(Call::get("/api/v1/health")).await;
    assert_eq!(
        str_of(&health.expect_status(200).json(), "/status"),
        "ok",
        "{}",
        health.describe()
    );
    let doc = s.call(Call::get("/api/v1/openapi.json")).await;
    let doc = doc.expect_status(200).json();
    assert!(
        str_of(&doc, "/openapi").starts_with("3."),
        "not an OpenAPI 3 document"
    );
    for path in [
        "/api/v1/deployments",
        "/api/v1/deployments/{id}",
        "/api/v1/snapshot-policies",
        "/api/v1/platform/configuration/snapshots/repositories/{name}",
    ] {
        assert!(
            doc["paths"].get(path).is_some(),
            "the document lacks {path}"
        );
    }

    let token = s.token(ORG, &["platform_admin"]);

    // 1. The FlashBlade repository, the body the walk-through sends.
    let repo_path = format!("{REPOSITORIES}/flashblade");
    let repo = s
        .call(
            Call::put(repo_path.clone())
                .bearer(&token)
                .header("content-type", "application/json")
                .bytes(FLASHBLADE_REPOSITORY.as_bytes().to_vec()),
        )
        .await;
    repo.expect_status(201);
    check_versioned(&repo, 1);
    assert_eq!(repo.header("location"), Some(repo_path.as_str()));
    let v = repo.json();
    assert_eq!(v["name"], json!("flashblade"));
    assert_eq!(v["type"], json!("s3"));
    assert_eq!(
        v["settings"],
        json!({
            "bucket": "elastic-snapshots", "endpoint": "1.2.3.4", "protocol": "http",
            "access_key": "****", "secret_key_set": true, "session_token_set": false,
            "max_snapshot_bytes_per_sec": "150mb", "max_restore_bytes_per_sec": "1gb"
        }),
        "{}",
        repo.describe()
    );
    assert_eq!(v["used_by"], json!(0));

    // 2. What Graviton offers.
    let types = s
        .call(Call::get(format!("{INSTANCE_TYPES}?arch=arm64")).bearer(&token))
        .await;
    let types = types.expect_status(200).json();
    let list = types["instance_types"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!list.is_empty());
    assert!(list.iter().all(|t| t["arch"] == json!("arm64")));
    let m6g = list
        .iter()
        .find(|t| t["name"] == json!("m6g.xlarge"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(m6g["jvm_heap_mib"], json!(8192), "{types}");

    // 3. A Graviton deployment writing to that repository.
    let created = s
        .call(Call::post(DEPLOYMENTS).bearer(&token).json(&graviton(
            "logs-prod",
            Some("flashblade"),
            &[],
            "search",
        )))
        .await;
    created.expect_status(201);
    check_versioned(&created, 1);
    let d = created.json();
    let dep_id = str_of(&d, "/id").to_string();
    assert_eq!(dep_id.len(), 32, "{}", created.describe());
    let dep_path = format!("{DEPLOYMENTS}/{dep_id}");
    assert_eq!(created.header("location"), Some(dep_path.as_str()));
    assert_eq!(d["status"], json!("initializing"));
    assert_eq!(d["plans"]["pending"]["kind"], json!("create"));
    let plan_id = str_of(&d, "/plans/pending/plan_id").to_string();
    assert_eq!(plan_id.len(), 32, "{}", created.describe());
    let group = &d["node_groups"][0];
    assert_eq!(group["instance_type"], json!("m6g.xlarge"));
    assert_eq!(group["arch"], json!("arm64"));
    assert_eq!(group["count"], json!(3));
    assert_eq!(group["vcpus"], json!(4));
    assert_eq!(group["memory_mib"], json!(16384));
    assert_eq!(group["jvm_heap_mib"], json!(8192));
    assert_eq!(d["user_settings"], json!({"thread_pool.snapshot.max": 8}));
    assert_eq!(d["snapshot"]["repository"], json!("flashblade"));

    // 4. A snapshot every 30 minutes, with retention.
    let mut body = policy("every-30-minutes", "flashblade");
    body["retention"] = json!({"expire_after": "7d", "min_count": 5, "max_count": 100});
    let pol = s
        .call(Call::post(POLICIES).bearer(&token).json(&body))
        .await;
    pol.expect_status(201);
    check_versioned(&pol, 1);
    let p = pol.json();
    let pol_id = str_of(&p, "/id").to_string();
    let pol_path = format!("{POLICIES}/{pol_id}");
    assert_eq!(pol.header("location"), Some(pol_path.as_str()));
    assert_eq!(
        p["schedule_expression"],
        json!({"expression": "rate(30 minutes)", "timezone": "UTC"})
    );
    assert_eq!(
        p["retention"],
        json!({"expire_after": "7d", "min_count": 5, "max_count": 100})
    );
    assert_eq!(p["attached_deployments"], json!(0));

    // 5. Attach it. Only the record changes, so the pending create plan
    //    does not stand in the way.
    let attach = s
        .call(
            Call::put(dep_path.clone())
                .bearer(&token)
                .header("if-match", "\"1\"")
                .json(&graviton(
                    "logs-prod",
                    Some("flashblade"),
                    &[&pol_id],
                    "search",
                )),
        )
        .await;
    attach.expect_status(200);
    check_versioned(&attach, 2);
    let a = attach.json();
    assert_eq!(a["snapshot"]["policies"], json!([pol_id]));
    assert_eq!(a["status"], json!("initializing"));
    assert_eq!(
        a["plans"]["pending"],
        json!({"plan_id": plan_id, "kind": "create"})
    );

    // 6. Read everything back.
    let read = s.call(Call::get(dep_path.clone()).bearer(&token)).await;
    read.expect_status(200);
    check_versioned(&read, 2);
    assert_eq!(read.json()["snapshot"]["policies"], json!([pol_id]));
    assert_eq!(read.json()["node_groups"][0]["jvm_heap_mib"], json!(8192));
    let read = s.call(Call::get(pol_path.clone()).bearer(&token)).await;
    read.expect_status(200);
    check_versioned(&read, 1);
    assert_eq!(read.json()["attached_deployments"], json!(1));
    let read = s.call(Call::get(repo_path.clone()).bearer(&token)).await;
    read.expect_status(200);
    check_versioned(&read, 1);
    assert_eq!(
        read.json()["used_by"],
        json!(2),
        "the deployment and the policy use it: {}",
        read.describe()
    );
    let repos = s.call(Call::get(REPOSITORIES).bearer(&token)).await;
    let repos = repos.expect_status(200).json();
    assert_eq!(
        repos["repositories"]
            .as_array()
            .map(|l| l.iter().map(|r| r["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("flashblade")])
    );
    let pols = s.call(Call::get(POLICIES).bearer(&token)).await;
    let pols = pols.expect_status(200).json();
    assert_eq!(pols["policies"][0]["id"], json!(pol_id));
    assert_eq!(pols["policies"][0]["attached_deployments"], json!(1));

    // 7. Two more deployments (one x86), then page through all three.
    let mut x86 = graviton("metrics-prod", None, &[], "metrics");
    x86["node_groups"][0]["instance_type"] = json!("m5.xlarge");
    let metrics = s
        .call(Call::post(DEPLOYMENTS).bearer(&token).json(&x86))
        .await;
    assert_eq!(
        metrics.expect_status(201).json()["node_groups"][0]["arch"],
        json!("x86_64")
    );
    // A retry with the same idempotency key gives back the first result.
    let staging = graviton("logs-staging", None, &[], "search");
    let first = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(&token)
                .header("idempotency-key", "walkthrough-staging-1")
                .json(&staging),
        )
        .await;
    first.expect_status(201);
    let retry = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(&token)
                .header("idempotency-key", "walkthrough-staging-1")
                .json(&staging),
        )
        .await;
    retry.expect_status(200);
    assert_eq!(retry.json()["id"], first.json()["id"]);

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let path = match &cursor {
            None => format!("{DEPLOYMENTS}?size=1"),
            Some(c) => format!("{DEPLOYMENTS}?size=1&cursor={c}"),
        };
        let page = s.call(Call::get(path).bearer(&token)).await;
        let page = page.expect_status(200).json();
        let here = names(&page);
        assert!(here.len() <= 1, "size=1 gave {here:?}");
        seen.extend(here);
        cursor = page["next_cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    assert!(cursor.is_none(), "pagination did not end after 10 pages");
    assert_eq!(seen, ["logs-prod", "metrics-prod", "logs-staging"]);

    // 8. Filters.
    for (query, expected) in [
        ("name=logs", vec!["logs-prod", "logs-staging"]),
        (
            "status=initializing",
            vec!["logs-prod", "metrics-prod", "logs-staging"],
        ),
        ("status=running", vec![]),
        ("tag=team:metrics", vec!["metrics-prod"]),
        ("tag=team:search&name=logs-s", vec!["logs-staging"]),
    ] {
        let mut got = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10 {
            let path = match &cursor {
                None => format!("{DEPLOYMENTS}?{query}"),
                Some(c) => format!("{DEPLOYMENTS}?{query}&cursor={c}"),
            };
            let page = s.call(Call::get(path).bearer(&token)).await;
            let page = page.expect_status(200).json();
            got.extend(names(&page));
            cursor = page["next_cursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(got, expected, "filter {query}");
    }
    Ok(())
}

#[tokio::test]
async fn walkthrough_on_sqlite() -> TestResult {
    let s = Server::start();
    walkthrough(&s).await
}

#[tokio::test]
async fn walkthrough_on_dynamodb() -> TestResult {
    let s = Server::start_dynamodb();
    walkthrough(&s).await?;
    assert!(
        !s.data_dir().join("floe.db").exists(),
        "FLOE_STORE=dynamodb://… still wrote the SQLite store"
    );
    Ok(())
}
