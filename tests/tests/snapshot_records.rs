//! Issue 33's snapshot-record defects, each reproduced through the real
//! binary (see docs/snapshot-records.md):
//!
//! - A snapshot deleted outside Floe (through the proxy, with the
//!   cluster's own `DELETE _snapshot/{repo}/{name}`) is found missing at
//!   the next listing, shown `missing`, never resolved as
//!   `__latest_success__` (a clone falls back to the newest present
//!   success), refused as a named clone source, and a mount clone of it
//!   says why in its health warnings.
//! - A deleted deployment's snapshots stay listable and restorable as the
//!   repository's snapshots of a deleted deployment, keep the repository
//!   in use.

use floe_tests::{Call, DEPLOYMENTS, Look, REPOSITORIES, Server, TestResult, WAIT, poll_until};
use serde_json::{Value, json};

const ORG: &str = "acme";

fn spec(name: &str, repository: &str) -> Value {
    json!({
        "name": name,
        "version": "8.15.3",
        "node_groups": [
            {"id": "hot", "roles": ["master", "data_hot", "data_content"],
             "instance_type": "m6g.xlarge", "count": 1, "zone_count": 1,
             "storage": {"size_gb": 100}}
        ],
        "snapshot": {"repository": repository}
    })
}

fn settled(d: &Value) -> bool {
    d["plans"]["pending"].is_null()
}

fn running(d: &Value) -> bool {
    settled(d) && d["status"] == json!("running")
}

/// Takes snapshot `name` of the deployment at `path` through Floe's API
/// and waits for its end.
async fn snapshot(s: &Server, token: &str, path: &str, name: &str) {
    let taken = s
        .call(
            Call::post(format!("{path}/snapshots?wait_for_completion=true"))
                .bearer(token)
                .json(&json!({"name": name})),
        )
        .await;
    assert_eq!(taken.status, 200, "{}", taken.describe());
}

fn listed<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list["snapshots"]
        .as_array()?
        .iter()
        .find(|s| s["snapshot"] == json!(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_deleted_through_the_proxy_is_shown_missing_and_never_resolved() -> TestResult {
    // The health check every 200 ms: it writes the mount clone's warning.
    let s = Server::start_quick_with(&[("FLOE_SWEEP_INTERVAL_MS", "200")]);
    let token = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&token, "backups", "backups").await;
    let id = s
        .create_deployment(&token, &spec("source", "backups"))
        .await?;
    let path = format!("{DEPLOYMENTS}/{id}");
    let proxy = format!("{path}/elasticsearch/main-elasticsearch/proxy");
    s.until(&token, &path, "running", running).await?;
    s.call(
        Call::put(format!("{proxy}/logs/_doc/1?refresh=true"))
            .bearer(&token)
            .json(&json!({"n": 1})),
    )
    .await
    .expect_status(201);
    snapshot(&s, &token, &path, "snap-0").await;
    snapshot(&s, &token, &path, "snap-1").await;

    // A mount clone pins snap-1: Floe's own delete refuses it.
    let mounted = s
        .call(
            Call::post(format!("{path}/_clone"))
                .bearer(&token)
                .json(&json!({"name": "mounted", "snapshot_name": "snap-1", "mode": "mount", "license": "trial"})),
        )
        .await;
    let mounted = mounted.expect_status(201).json()["id"]
        .as_str()
        .ok_or("clone id")?
        .to_string();
    let mounted_path = format!("{DEPLOYMENTS}/{mounted}");
    s.until(&token, &mounted_path, "running", running).await?;
    let refused = s
        .call(Call::delete(format!("{path}/snapshots/snap-1")).bearer(&token))
        .await;
    assert_eq!(refused.status, 409, "{}", refused.describe());

    // The tenant deletes it on the cluster itself, through the proxy.
    let gone = s
        .call(Call::delete(format!("{proxy}/_snapshot/backups/snap-1")).bearer(&token))
        .await;
    assert_eq!(gone.status, 200, "{}", gone.describe());

    // The next listing finds it missing.
    let list = s
        .call(Call::get(format!("{path}/snapshots")).bearer(&token))
        .await;
    let list = list.expect_status(200).json();
    let snap1 = listed(&list, "snap-1").ok_or("snap-1 listed")?;
    assert_eq!(snap1["missing"], json!(true), "{list}");
    assert!(snap1["missing_since"].is_string(), "{list}");
    assert_eq!(snap1["pinned"], json!(true), "{list}");
    let snap0 = listed(&list, "snap-0").ok_or("snap-0 listed")?;
    assert!(snap0.get("missing").is_none(), "{list}");
    let one = s
        .call(Call::get(format!("{path}/snapshots/snap-1")).bearer(&token))
        .await;
    assert_eq!(one.expect_status(200).json()["missing"], json!(true));

    // `__latest_success__` falls back to the newest present success.
    let latest = s
        .call(
            Call::post(format!("{path}/_clone"))
                .bearer(&token)
                .json(&json!({"name": "latest"})),
        )
        .await;
    let latest = latest.expect_status(201).json();
    assert_eq!(
        latest["clone_source"]["snapshot"],
        json!("snap-0"),
        "{latest}"
    );
    let latest_path = format!(
        "{DEPLOYMENTS}/{}",
        latest["id"].as_str().ok_or("latest id")?
    );
    let done = s.until(&token, &latest_path, "settled", settled).await?;
    assert_eq!(done["status"], json!("running"), "{done}");

    // Named, it is refused before any plan.
    let named = s
        .call(
            Call::post(format!("{path}/_clone"))
                .bearer(&token)
                .json(&json!({"name": "named", "snapshot_name": "snap-1"})),
        )
        .await;
    assert_eq!(named.status, 409, "{}", named.describe());
    assert!(named.describe().contains("missing"), "{}", named.describe());

    // The mount clone says why its data cannot be read, from the next
    // health check on (it writes the warning onto the clone's record);
    // `healthy` stays about the nodes, and no heal starts.
    let d = s
        .until(&token, &mounted_path, "warned of its source", |d| {
            d["health_warnings"].as_array().is_some_and(|w| {
                w.iter().any(|w| {
                    w.as_str()
                        .is_some_and(|w| w.contains("snap-1") && w.contains("missing"))
                })
            })
        })
        .await?;
    assert_eq!(d["healthy"], json!(true), "{d}");
    assert!(d["plans"]["pending"].is_null(), "{d}");
    Ok(())
}

/// Waits for the deployment at `path` to be gone (its delete plan ended).
async fn until_gone(s: &Server, token: &str, path: &str) -> TestResult {
    poll_until("deleted", WAIT, async || {
        let d = s.call(Call::get(path).bearer(token)).await;
        if d.status == 404 {
            Look::Done(())
        } else {
            Look::NotYet(d.describe())
        }
    })
    .await
}

async fn shut_down(s: &Server, token: &str, path: &str) -> TestResult {
    let stop = s
        .call(
            Call::post(format!("{path}/_shutdown"))
                .bearer(token)
                .json(&json!({})),
        )
        .await;
    assert!([200, 202].contains(&stop.status), "{}", stop.describe());
    s.until(token, path, "stopped", |d| {
        settled(d) && d["status"] == json!("stopped")
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_deployments_snapshots_stay_listable_restorable_and_counted() -> TestResult {
    let s = Server::start_quick();
    let token = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&token, "kept", "kept").await;
    let repo = format!("{REPOSITORIES}/kept");
    let id = s.create_deployment(&token, &spec("doomed", "kept")).await?;
    let path = format!("{DEPLOYMENTS}/{id}");
    let proxy = format!("{path}/elasticsearch/main-elasticsearch/proxy");
    s.until(&token, &path, "running", running).await?;
    s.call(
        Call::put(format!("{proxy}/logs/_doc/1?refresh=true"))
            .bearer(&token)
            .json(&json!({"n": 1})),
    )
    .await
    .expect_status(201);
    snapshot(&s, &token, &path, "before-delete").await;
    shut_down(&s, &token, &path).await?;
    let deleted = s.call(Call::delete(&path).bearer(&token)).await;
    assert_eq!(deleted.status, 202, "{}", deleted.describe());
    until_gone(&s, &token, &path).await?;

    // The repository still counts the deleted deployment's snapshots.
    let r = s
        .call(Call::get(&repo).bearer(&token))
        .await
        .expect_status(200)
        .json();
    assert_eq!(r["used_by"], json!(1), "{r}");
    let refused = s.call(Call::delete(&repo).bearer(&token)).await;
    assert_eq!(refused.status, 409, "{}", refused.describe());

    // They are listed, by former deployment.
    let former = s
        .call(Call::get(format!("{repo}/deleted-deployments")).bearer(&token))
        .await;
    let former = former.expect_status(200).json();
    let entry = former["deployments"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["id"] == json!(id)))
        .ok_or_else(|| format!("{id} not among {former}"))?;
    assert_eq!(entry["name"], json!("doomed"), "{former}");
    let snaps = s
        .call(Call::get(format!("{repo}/deleted-deployments/{id}/snapshots")).bearer(&token))
        .await;
    let snaps = snaps.expect_status(200).json();
    assert!(listed(&snaps, "before-delete").is_some(), "{snaps}");
    // The shutdown's final snapshot is kept too.
    assert!(
        snaps["snapshots"].as_array().is_some_and(|s| s.len() >= 2),
        "{snaps}"
    );

    // Restorable: a new deployment cloned from it by the deleted id.
    let mut body = spec("reborn", "kept");
    body["restore_snapshot"] = json!({
        "source_deployment_id": id, "snapshot_name": "before-delete"
    });
    let reborn = s.create_deployment(&token, &body).await?;
    let reborn_path = format!("{DEPLOYMENTS}/{reborn}");
    let d = s.until(&token, &reborn_path, "settled", settled).await?;
    assert_eq!(d["status"], json!("running"), "{d}");
    let count = s
        .call(
            Call::get(format!(
                "{reborn_path}/elasticsearch/main-elasticsearch/proxy/logs/_count"
            ))
            .bearer(&token),
        )
        .await;
    assert_eq!(count.expect_status(200).json()["count"], json!(1));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_snapshots_removes_what_no_clone_pins_and_names_what_stays() -> TestResult {
    let s = Server::start_quick();
    let token = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&token, "gone", "gone").await;
    let repo = format!("{REPOSITORIES}/gone");

    // No pins: every snapshot goes, and nothing holds the repository.
    let id = s
        .create_deployment(&token, &spec("short-lived", "gone"))
        .await?;
    let path = format!("{DEPLOYMENTS}/{id}");
    s.until(&token, &path, "running", running).await?;
    snapshot(&s, &token, &path, "one").await;
    let deleted = s
        .call(Call::delete(format!("{path}?remove_snapshots=true")).bearer(&token))
        .await;
    assert_eq!(deleted.status, 202, "{}", deleted.describe());
    until_gone(&s, &token, &path).await?;
    let former = s
        .call(Call::get(format!("{repo}/deleted-deployments")).bearer(&token))
        .await;
    assert_eq!(
        former.expect_status(200).json()["deployments"],
        json!([]),
        "{}",
        former.describe()
    );
    let r = s
        .call(Call::get(&repo).bearer(&token))
        .await
        .expect_status(200)
        .json();
    assert_eq!(r["used_by"], json!(0), "{r}");

    // A pinned snapshot stays, named in the answer and listed.
    let id = s
        .create_deployment(&token, &spec("pinned-source", "gone"))
        .await?;
    let path = format!("{DEPLOYMENTS}/{id}");
    let proxy = format!("{path}/elasticsearch/main-elasticsearch/proxy");
    s.until(&token, &path, "running", running).await?;
    s.call(
        Call::put(format!("{proxy}/logs/_doc/1?refresh=true"))
            .bearer(&token)
            .json(&json!({"n": 1})),
    )
    .await
    .expect_status(201);
    snapshot(&s, &token, &path, "free").await;
    snapshot(&s, &token, &path, "held").await;
    let mounted = s
        .call(
            Call::post(format!("{path}/_clone"))
                .bearer(&token)
                .json(&json!({"name": "holder", "snapshot_name": "held", "mode": "mount", "license": "trial"})),
        )
        .await;
    let mounted = mounted.expect_status(201).json()["id"]
        .as_str()
        .ok_or("clone id")?
        .to_string();
    s.until(
        &token,
        &format!("{DEPLOYMENTS}/{mounted}"),
        "running",
        running,
    )
    .await?;
    let deleted = s
        .call(Call::delete(format!("{path}?remove_snapshots=true")).bearer(&token))
        .await;
    assert_eq!(deleted.status, 202, "{}", deleted.describe());
    let answer = deleted.json();
    let warned = answer["warnings"].as_array().is_some_and(|w| {
        w.iter().any(|w| {
            w.as_str()
                .is_some_and(|w| w.contains("held") && w.contains(&mounted))
        })
    });
    assert!(warned, "{answer}");
    until_gone(&s, &token, &path).await?;
    let snaps = s
        .call(Call::get(format!("{repo}/deleted-deployments/{id}/snapshots")).bearer(&token))
        .await;
    let snaps = snaps.expect_status(200).json();
    let names: Vec<&str> = snaps["snapshots"]
        .as_array()
        .ok_or("snapshots")?
        .iter()
        .filter_map(|s| s["snapshot"].as_str())
        .collect();
    assert_eq!(names, ["held"], "{snaps}");

    // A stopped deployment has no cluster to remove them with.
    let id = s
        .create_deployment(&token, &spec("stopped", "gone"))
        .await?;
    let path = format!("{DEPLOYMENTS}/{id}");
    s.until(&token, &path, "running", running).await?;
    shut_down(&s, &token, &path).await?;
    let refused = s
        .call(Call::delete(format!("{path}?remove_snapshots=true")).bearer(&token))
        .await;
    assert_eq!(refused.status, 409, "{}", refused.describe());
    let kept = s.call(Call::delete(&path).bearer(&token)).await;
    assert_eq!(kept.status, 202, "{}", kept.describe());
    Ok(())
}
