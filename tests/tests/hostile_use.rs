//! Issue 33's hostile-use defects, each reproduced through the real binary:
//!
//! - A deployment's GET body is a valid PUT in every state it can be read
//!   in: a client reads the deployment, changes one tag and sends the
//!   whole document back, as Terraform-style clients do. Before the fix,
//!   the body of a deployment the health check had looked at carried
//!   `healthy`, `health_reason` and `nodes`, which the PUT refused as
//!   unknown fields. The states: a create whose plan failed, checked
//!   healthy (with its nodes), unhealthy, healed after a lost node, during
//!   and after an update, and a clone.
//! - An idempotency key is answered only to the caller who used it: a
//!   token of another organization with the same `sub` was handed the
//!   first create's deployment and `elastic` password.
//! - A tag filter names one tag: `tag=a:b:c` is key `a`, value `b:c`.

use floe_tests::{Call, DEPLOYMENTS, REPOSITORIES, Server, TestResult, deployment};
use serde_json::{Value, json};

const ORG: &str = "acme";

fn spec(name: &str, repository: &str, hot: u32) -> Value {
    json!({
        "name": name,
        "version": "8.15.3",
        "node_groups": [
            {"id": "masters", "roles": ["master"], "instance_type": "c7g.large",
             "count": 1, "zone_count": 1, "storage": {"size_gb": 20}},
            {"id": "hot", "roles": ["data_hot", "data_content"], "instance_type": "m6g.xlarge",
             "count": hot, "zone_count": 1, "storage": {"size_gb": 100}}
        ],
        "snapshot": {"repository": repository},
        "metadata": {"tags": [{"key": "team", "value": "search"}]}
    })
}

fn settled(d: &Value) -> bool {
    d["plans"]["pending"].is_null()
}

fn healthy(d: &Value) -> bool {
    settled(d) && d["status"] == json!("running") && d["healthy"] == json!(true)
}

/// Reads the deployment, sets tag `touched` to `state` in the body read,
/// and sends the whole body back (read again on a 412, see
/// [`Server::put_changed`]).
async fn put_back(
    s: &Server,
    token: &str,
    path: &str,
    state: &str,
    require: impl Fn(&Value) -> bool,
) -> TestResult {
    let answer = s
        .put_changed(token, path, |body| {
            assert!(require(body), "{state}: not in the state to test: {body}");
            let tags = body["metadata"]["tags"]
                .as_array_mut()
                .ok_or("tags in the view")?;
            tags.retain(|t| t["key"] != json!("touched"));
            tags.push(json!({"key": "touched", "value": state}));
            Ok(())
        })
        .await
        .map_err(|e| format!("{state}: {e}"))?;
    let touched = answer["metadata"]["tags"]
        .as_array()
        .is_some_and(|t| t.contains(&json!({"key": "touched", "value": state})));
    assert!(touched, "{state}: the tag changed: {answer}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_body_with_a_tag_changed_is_a_valid_put_in_every_state() -> TestResult {
    let s = Server::start_with(&[
        ("FLOE_SIM_BOOT_DELAY_MS", "200"),
        ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
        ("FLOE_PLAN_POLL_MS", "20"),
        ("FLOE_SWEEP_INTERVAL_MS", "200"),
        ("FLOE_ALLOW_PRIVATE_ENDPOINTS", "true"),
    ]);
    let token = s.token(ORG, &["platform_admin"]);
    for (name, repository) in [
        (
            "local-backups",
            json!({"type": "fs", "settings": {"location": "backups"}}),
        ),
        // Nothing listens on port 9 (discard) of loopback: a create that
        // registers it fails.
        (
            "nowhere",
            json!({"type": "s3", "settings": {
                "bucket": "nowhere", "endpoint": "127.0.0.1:9", "protocol": "http",
                "access_key": "AKIDLOCALTEST", "secret_key": "not-a-real-secret-0123"}}),
        ),
    ] {
        let put = s
            .call(
                Call::put(format!("{REPOSITORIES}/{name}"))
                    .bearer(&token)
                    .json(&repository),
            )
            .await;
        assert!([200, 201].contains(&put.status), "{}", put.describe());
    }
    let create = |body: Value| {
        let s = &s;
        let token = &token;
        async move {
            let created = s
                .call(Call::post(DEPLOYMENTS).bearer(token).json(&body))
                .await;
            let id = created.expect_status(201).json()["id"]
                .as_str()
                .ok_or("id")?
                .to_string();
            Ok::<_, Box<dyn std::error::Error>>(format!("{DEPLOYMENTS}/{id}"))
        }
    };

    // A failed plan.
    let doomed = create(spec("doomed", "nowhere", 1)).await?;
    s.until(&token, &doomed, "ended", settled).await?;
    let plans = s
        .call(Call::get(format!("{doomed}/plans")).bearer(&token))
        .await;
    let plans = plans.expect_status(200).json();
    let last = plans["history"]
        .as_array()
        .and_then(|h| h.last())
        .ok_or("no plan")?;
    assert_eq!(last["status"], json!("failed"), "{plans}");
    put_back(&s, &token, &doomed, "failed-plan", |_| true).await?;

    // Checked by the health check: `healthy` and `nodes` shown.
    let path = create(spec("orders", "local-backups", 1)).await?;
    s.until(&token, &path, "healthy", healthy).await?;
    put_back(&s, &token, &path, "health-checked", |d| {
        d["healthy"] == json!(true) && d["nodes"].as_array().is_some_and(|n| n.len() == 2)
    })
    .await?;

    // Healed: a lost data node replaced by the check's heal plan.
    let d = s.until(&token, &path, "healthy", healthy).await?;
    let victim = d["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["group"] == json!("hot")))
        .and_then(|n| n["instance_id"].as_str())
        .ok_or("a hot node")?
        .to_string();
    std::fs::write(s.data_dir().join("sim").join("kill").join(&victim), "")?;
    s.until(&token, &path, "unhealthy", |d| d["healthy"] == json!(false))
        .await?;
    put_back(&s, &token, &path, "unhealthy", |d| {
        d["health_reason"].is_string()
    })
    .await?;
    s.until(&token, &path, "healed", |d| {
        healthy(d)
            && d["nodes"]
                .as_array()
                .is_some_and(|n| n.iter().all(|n| n["instance_id"] != json!(victim)))
    })
    .await?;
    put_back(&s, &token, &path, "healed", healthy).await?;

    // During and after an update.
    let mut grown = s
        .call(Call::get(path.as_str()).bearer(&token))
        .await
        .expect_status(200)
        .json();
    grown["node_groups"][1]["count"] = json!(2);
    let updating = s
        .call(Call::put(path.as_str()).bearer(&token).json(&grown))
        .await;
    let updating = updating.expect_status(200).json();
    assert_eq!(
        updating["plans"]["pending"]["kind"],
        json!("update"),
        "{updating}"
    );
    // Nodes boot in 200 ms: the plan is still pending at the next read,
    // unless the machine is slow (a 412 on the PUT then, read again).
    put_back(&s, &token, &path, "updating", |_| true).await?;
    let updated = s
        .until(&token, &path, "updated", |d| {
            healthy(d) && d["node_groups"][1]["count"] == json!(2)
        })
        .await?;
    assert_eq!(updated["status"], json!("running"), "{updated}");
    put_back(&s, &token, &path, "updated", |d| {
        d["node_groups"][1]["count"] == json!(2)
    })
    .await?;

    // A clone: its body carries `clone_source`.
    let snapshot = s
        .call(
            Call::post(format!("{path}/snapshots?wait_for_completion=true"))
                .bearer(&token)
                .json(&json!({"name": "for-the-clone"})),
        )
        .await;
    snapshot.expect_status(200);
    let cloned = s
        .call(
            Call::post(format!("{path}/_clone"))
                .bearer(&token)
                .json(&json!({"name": "orders-copy"})),
        )
        .await;
    let clone_id = cloned.expect_status(201).json()["id"]
        .as_str()
        .ok_or("clone id")?
        .to_string();
    let clone = format!("{DEPLOYMENTS}/{clone_id}");
    s.until(&token, &clone, "clone healthy", healthy).await?;
    put_back(&s, &token, &clone, "clone", |d| {
        d["clone_source"].is_object()
    })
    .await?;
    Ok(())
}

/// A token of `org` with `roles` whose `sub` is `subject`.
fn token_of(s: &Server, subject: &str, org: &str, roles: &[&str]) -> String {
    let mut claims = Server::claims(org, roles);
    claims["sub"] = json!(subject);
    s.sign(&claims)
}

#[tokio::test]
async fn an_idempotency_key_is_answered_only_to_the_caller_who_used_it() -> TestResult {
    let s = Server::start();
    let alice = token_of(&s, "alice", ORG, &["deployment_manager"]);
    // Globex's platform admin, whose identity provider also has an `alice`.
    let other = token_of(&s, "alice", "globex", &["platform_admin"]);
    let body = deployment("idempotent", None, &[]);
    let create = |token: &str| {
        Call::post(DEPLOYMENTS)
            .bearer(token)
            .header("idempotency-key", "create-once")
            .json(&body)
    };
    let first = s.call(create(&alice)).await;
    let first = first.expect_status(201).json();
    let id = first["id"].as_str().ok_or("id")?.to_string();
    let password = first["credentials"]["password"]
        .as_str()
        .ok_or("the create's password")?
        .to_string();

    // Her own retry is answered the first result.
    let retry = s.call(create(&alice)).await;
    assert_eq!(retry.json()["id"], json!(id), "{}", retry.describe());
    assert_eq!(retry.json()["credentials"]["password"], json!(password));

    // The other alice, acting in acme with the same key and body: a
    // conflict, never acme's deployment or its password.
    let foreign = s
        .call(create(&other).header("x-floe-organization", ORG))
        .await;
    assert_eq!(foreign.status, 409, "{}", foreign.describe());
    assert_eq!(foreign.error_codes(), ["request.idempotency_key_reused"]);
    assert!(!foreign.body.contains(&password), "{}", foreign.describe());
    assert!(!foreign.body.contains(&id), "{}", foreign.describe());
    // In its own organization the key is its own: a new deployment.
    let own = s.call(create(&other)).await;
    let own = own.expect_status(201).json();
    assert_ne!(own["id"], json!(id), "{own}");
    assert_ne!(own["credentials"]["password"], json!(password), "{own}");
    Ok(())
}

#[tokio::test]
async fn a_tag_filter_names_one_tag() -> TestResult {
    let s = Server::start();
    let token = s.token(ORG, &["deployment_manager"]);
    let tagged = |name: &str, key: &str, value: &str| {
        let mut d = deployment(name, None, &[]);
        d["metadata"] = json!({"tags": [{"key": key, "value": value}]});
        d
    };
    // A key holds no ':', so `a:b:c` cannot also name {a:b = c}.
    let refused = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(&token)
                .json(&tagged("colon-key", "a:b", "c")),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.describe());
    assert_eq!(refused.error_codes(), ["validation.tag"]);
    assert_eq!(
        refused.json()["errors"][0]["fields"],
        json!(["metadata.tags[0].key"])
    );
    let mut ids = Vec::new();
    for (name, key, value) in [("colon-value", "a", "b:c"), ("plain", "a", "b")] {
        let created = s
            .call(
                Call::post(DEPLOYMENTS)
                    .bearer(&token)
                    .json(&tagged(name, key, value)),
            )
            .await;
        ids.push(created.expect_status(201).json()["id"].clone());
    }
    // Split at the first ':'; the query's own escapes are decoded first.
    for (filter, expected) in [
        ("a:b:c", vec![ids[0].clone()]),
        ("a%3Ab%3Ac", vec![ids[0].clone()]),
        ("a:b", vec![ids[1].clone()]),
        ("a:c", vec![]),
    ] {
        let listed = s
            .call(Call::get(format!("{DEPLOYMENTS}?tag={filter}")).bearer(&token))
            .await;
        let listed = listed.expect_status(200).json();
        let got: Vec<Value> = listed["deployments"]
            .as_array()
            .map(|d| d.iter().map(|d| d["id"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(got, expected, "tag={filter}: {listed}");
    }
    Ok(())
}

/// A restore with the global state never brings back the security feature
/// state: the platform sends `feature_states` itself (none unless named),
/// so the `elastic` password it holds keeps working after restoring a
/// snapshot taken before that password was reset. Asking for `security` is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_with_the_global_state_keeps_the_platforms_password() -> TestResult {
    let s = Server::start_quick();
    let token = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&token, "restore-backups", "restore-backups")
        .await;
    let created = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(&token)
                .json(&spec("restored", "restore-backups", 1)),
        )
        .await;
    let id = created.expect_status(201).json()["id"]
        .as_str()
        .ok_or("id")?
        .to_string();
    let path = format!("{DEPLOYMENTS}/{id}");
    let proxy = format!("{path}/elasticsearch/main-elasticsearch/proxy");
    s.until(&token, &path, "running", |d| {
        settled(d) && d["status"] == json!("running")
    })
    .await?;
    s.call(
        Call::put(format!("{proxy}/logs/_doc/1?refresh=true"))
            .bearer(&token)
            .json(&json!({"n": 1})),
    )
    .await
    .expect_status(201);
    // Taken on the cluster as a tenant would, global state included (the
    // default): it holds the security feature state.
    let taken = s
        .call(
            Call::put(format!(
                "{proxy}/_snapshot/restore-backups/before-reset?wait_for_completion=true"
            ))
            .bearer(&token)
            .json(&json!({})),
        )
        .await;
    let taken = taken.expect_status(200).json();
    assert_eq!(
        taken["snapshot"]["feature_states"][0]["feature_name"],
        json!("security"),
        "{taken}"
    );
    s.call(Call::get(format!("{path}/snapshots")).bearer(&token))
        .await
        .expect_status(200);

    // The password changes after the snapshot.
    s.call(
        Call::post(format!(
            "{path}/elasticsearch/main-elasticsearch/_reset-password"
        ))
        .bearer(&token),
    )
    .await
    .expect_status(202);
    s.until(&token, &path, "settled", settled).await?;

    let refused = s
        .call(
            Call::post(format!("{path}/_restore"))
                .bearer(&token)
                .json(&json!({
                    "snapshot_name": "before-reset", "include_global_state": true,
                    "feature_states": ["security"]
                })),
        )
        .await;
    let errors = floe_tests::assert_ece_error(&refused.expect_status(400).clone());
    assert_eq!(floe_tests::error_fields(&errors), ["feature_states[0]"]);

    let restore = s
        .call(Call::post(format!("{path}/_restore")).bearer(&token).json(&json!({
            "snapshot_name": "before-reset", "include_global_state": true,
            "indices": ["logs"], "rename_pattern": "(.+)", "rename_replacement": "restored-$1"
        })))
        .await;
    assert!(
        [200, 202].contains(&restore.status),
        "{}",
        restore.describe()
    );
    let d = s.until(&token, &path, "settled", settled).await?;
    let plans = s
        .call(Call::get(format!("{path}/plans")).bearer(&token))
        .await
        .json();
    assert_eq!(plans["current"]["status"], json!("succeeded"), "{plans}");
    assert_eq!(d["status"], json!("running"), "{d}");
    // The platform still reaches the cluster with the password it holds.
    let me = s
        .call(Call::get(format!("{proxy}/_security/_authenticate")).bearer(&token))
        .await;
    assert_eq!(me.expect_status(200).json()["username"], json!("elastic"));
    let count = s
        .call(Call::get(format!("{proxy}/restored-logs/_count")).bearer(&token))
        .await;
    assert_eq!(count.expect_status(200).json()["count"], json!(1));
    Ok(())
}
