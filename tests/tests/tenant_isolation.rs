//! Issue 33, defect 1: organizations cannot reach each other's snapshots.
//!
//! Reproduced as the review did it: a `deployment_manager` of globex holds
//! its cluster's `elastic` user (through Floe's proxy) and registers
//! acme's snapshot path on its own cluster. In local mode each
//! organization's clusters have their own `path.repo`, so acme's folder is
//! out of reach whatever location globex names. On a shared S3 bucket, the
//! keys are what reach it: Floe refuses a second organization's repository
//! on the same endpoint and bucket unless a platform admin marks both
//! shared. (On AWS with instance roles, each node role reaches only its
//! own path: `floe-identity-iam`'s tests and the plan tests cover that.)

use floe_tests::{Call, DEPLOYMENTS, REPOSITORIES, Server, TestResult, assert_ece_error};
use serde_json::{Value, json};

fn spec(name: &str, repository: &str) -> Value {
    json!({
        "name": name,
        "version": "8.15.3",
        "node_groups": [
            {"id": "hot", "roles": ["master", "data_hot", "data_content"], "instance_type": "m6g.xlarge",
             "count": 1, "zone_count": 1, "storage": {"size_gb": 100}}
        ],
        "snapshot": {"repository": repository}
    })
}

fn running(d: &Value) -> bool {
    d["plans"]["pending"].is_null() && d["status"] == json!("running")
}

/// A running deployment of the token's organization; its id.
async fn running_deployment(
    s: &Server,
    token: &str,
    name: &str,
    repo: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let created = s
        .call(
            Call::post(DEPLOYMENTS)
                .bearer(token)
                .json(&spec(name, repo)),
        )
        .await;
    let id = created.expect_status(201).json()["id"]
        .as_str()
        .ok_or("id")?
        .to_string();
    s.until(token, &format!("{DEPLOYMENTS}/{id}"), "running", running)
        .await?;
    Ok(id)
}

fn proxy(id: &str) -> String {
    format!("{DEPLOYMENTS}/{id}/elasticsearch/main-elasticsearch/proxy")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_register_another_organizations_snapshot_folder() -> TestResult {
    let s = Server::start_quick();
    let acme = s.token("acme", &["platform_admin"]);
    // The platform admin gives both organizations a repository at the same
    // location name.
    let globex_admin = s.token("globex", &["platform_admin"]);
    s.put_fs_repository(&acme, "snaps", "snaps").await;
    s.put_fs_repository(&globex_admin, "snaps", "snaps").await;

    let acme_id = running_deployment(&s, &acme, "orders", "snaps").await?;
    s.call(
        Call::put(format!("{}/orders/_doc/1?refresh=true", proxy(&acme_id)))
            .bearer(&acme)
            .json(&json!({"secret": "acme's"})),
    )
    .await
    .expect_status(201);
    let taken = s
        .call(
            Call::post(format!(
                "{DEPLOYMENTS}/{acme_id}/snapshots?wait_for_completion=true"
            ))
            .bearer(&acme)
            .json(&json!({"name": "nightly"})),
        )
        .await;
    assert!([200, 202].contains(&taken.status), "{}", taken.describe());
    s.until(
        &acme,
        &format!("{DEPLOYMENTS}/{acme_id}/snapshots"),
        "a successful snapshot",
        |l| {
            l["snapshots"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["state"] == json!("SUCCESS")))
        },
    )
    .await?;

    let globex = s.token("globex", &["deployment_manager"]);
    let globex_id = running_deployment(&s, &globex, "thief", "snaps").await?;
    let acme_folder = s
        .data_dir()
        .join("repositories")
        .join("acme")
        .join("snaps")
        .join(&acme_id);
    assert!(
        acme_folder.is_dir(),
        "acme's snapshot is not where expected"
    );
    let locations = [
        // As the review did: the same location name, acme's id under it.
        format!("snaps/{acme_id}"),
        // Every other way to name acme's folder.
        acme_folder.display().to_string(),
        format!("../acme/snaps/{acme_id}"),
        format!(
            "{}/../acme/snaps/{acme_id}",
            s.data_dir().join("repositories").join("globex").display()
        ),
    ];
    for (i, location) in locations.iter().enumerate() {
        let name = format!("stolen-{i}");
        let registered = s
            .call(
                Call::put(format!("{}/_snapshot/{name}", proxy(&globex_id)))
                    .bearer(&globex)
                    .json(&json!({"type": "fs", "settings": {"location": location, "readonly": true}})),
            )
            .await;
        if registered.status != 200 {
            // Refused as Elasticsearch refuses a location outside
            // path.repo, or a read-only one with nothing there.
            assert_eq!(
                registered.status,
                500,
                "{location}: {}",
                registered.describe()
            );
            let kind = registered.json()["error"]["type"].clone();
            assert!(
                kind == json!("repository_exception")
                    || kind == json!("repository_verification_exception"),
                "{location}: {}",
                registered.describe()
            );
            continue;
        }
        let listed = s
            .call(Call::get(format!("{}/_snapshot/{name}/_all", proxy(&globex_id))).bearer(&globex))
            .await;
        let snapshots = listed.json()["snapshots"].clone();
        assert!(
            snapshots.as_array().is_none_or(|a| a.is_empty()),
            "{location}: globex lists acme's snapshots: {}",
            listed.describe()
        );
    }
    // The same registration on acme's own cluster does find the snapshot:
    // what globex was refused is there to find.
    let own = s
        .call(
            Call::put(format!("{}/_snapshot/again", proxy(&acme_id)))
                .bearer(&acme)
                .json(&json!({"type": "fs", "settings": {"location": format!("snaps/{acme_id}"), "readonly": true}})),
        )
        .await;
    own.expect_status(200);
    let listed = s
        .call(Call::get(format!("{}/_snapshot/again/_all", proxy(&acme_id))).bearer(&acme))
        .await;
    assert_eq!(
        listed.expect_status(200).json()["snapshots"][0]["snapshot"],
        json!("nightly")
    );
    // acme's snapshot is untouched.
    assert!(std::fs::read_dir(&acme_folder)?.count() > 0);
    Ok(())
}

fn keyed_repository(bucket: &str, shared: Option<bool>) -> Value {
    let mut body = json!({"type": "s3", "settings": {
        "bucket": bucket, "endpoint": "198.51.100.7", "protocol": "https",
        "access_key": "AKIAEXAMPLE", "secret_key": "not-a-real-secret"}});
    if let Some(shared) = shared {
        body["settings"]["shared_across_organizations"] = json!(shared);
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_organizations_share_a_bucket_only_when_a_platform_admin_marks_both() -> TestResult {
    let s = Server::start();
    let acme = s.token("acme", &["platform_admin"]);
    let globex = s.token("globex", &["platform_admin"]);
    let put = |token: &str, name: &str, body: Value| {
        Call::put(format!("{REPOSITORIES}/{name}"))
            .bearer(token)
            .json(&body)
    };
    s.call(put(
        &acme,
        "backups",
        keyed_repository("shared-bucket", None),
    ))
    .await
    .expect_status(201);
    // Another repository of the same organization on that bucket is fine.
    s.call(put(&acme, "more", keyed_repository("shared-bucket", None)))
        .await
        .expect_status(201);

    // The same endpoint and bucket however written: port, case.
    for (endpoint, shared) in [
        ("198.51.100.7", None),
        ("198.51.100.7:443", None),
        ("198.51.100.7", Some(true)),
    ] {
        let mut body = keyed_repository("shared-bucket", shared);
        body["settings"]["endpoint"] = json!(endpoint);
        let refused = s.call(put(&globex, "theirs", body)).await;
        let errors = assert_ece_error(&refused.expect_status(409).clone());
        assert_eq!(
            errors[0]["code"],
            json!("repositories.bucket_claimed"),
            "{errors:?}"
        );
        assert_eq!(
            errors[0]["fields"],
            json!(["settings.bucket"]),
            "{errors:?}"
        );
        // The refusal names no organization.
        assert!(
            !refused.describe().contains("acme"),
            "{}",
            refused.describe()
        );
    }
    s.call(Call::get(format!("{REPOSITORIES}/theirs")).bearer(&globex))
        .await
        .expect_status(404);
    // Moving a repository onto the bucket is refused too.
    s.call(put(&globex, "theirs", keyed_repository("own-bucket", None)))
        .await
        .expect_status(201);
    let moved = s
        .call(put(
            &globex,
            "theirs",
            keyed_repository("shared-bucket", Some(true)),
        ))
        .await;
    moved.expect_status(409);

    // Both marked: shared, and the view says plainly what that allows.
    s.call(put(
        &acme,
        "backups",
        keyed_repository("shared-bucket", Some(true)),
    ))
    .await
    .expect_status(200);
    s.call(put(
        &acme,
        "more",
        keyed_repository("shared-bucket", Some(true)),
    ))
    .await
    .expect_status(200);
    let shared = s
        .call(put(
            &globex,
            "theirs",
            keyed_repository("shared-bucket", Some(true)),
        ))
        .await;
    let view = shared.expect_status(200).json();
    assert_eq!(view["settings"]["shared_across_organizations"], json!(true));
    assert!(
        view["settings"]["sharing"]
            .as_str()
            .is_some_and(|t| t.contains("delete every snapshot")),
        "{view}"
    );
    // Unmarking one of acme's while globex is there is refused.
    let unmark = s
        .call(put(
            &acme,
            "more",
            keyed_repository("shared-bucket", Some(false)),
        ))
        .await;
    unmark.expect_status(409);

    // Once globex's repository is gone, acme's may be unshared again.
    s.call(Call::delete(format!("{REPOSITORIES}/theirs")).bearer(&globex))
        .await;
    s.call(put(
        &acme,
        "more",
        keyed_repository("shared-bucket", Some(false)),
    ))
    .await
    .expect_status(200);
    let unshared = s
        .call(Call::get(format!("{REPOSITORIES}/more")).bearer(&acme))
        .await
        .json();
    assert!(
        unshared["settings"]["shared_across_organizations"].is_null(),
        "{unshared}"
    );
    assert!(unshared["settings"]["sharing"].is_null(), "{unshared}");
    Ok(())
}
