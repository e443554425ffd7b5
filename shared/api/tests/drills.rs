//! Restore drills through the real router and the real plans, on
//! simulated compute with a simulated Elasticsearch cluster per deployment
//! and an `fs` repository, as in local mode.
//!
//! What an operator relies on: a drill of a healthy deployment passes with
//! every index checked and its recovery measured; a snapshot that lost a
//! blob, a record whose counts disagree with the data, or a query that
//! finds too little fails the drill naming the index and the reason; in
//! every case the clone is gone afterwards and nothing under the source's
//! path changed; one drill runs at a time.

mod planned;

use axum::http::StatusCode;
use planned::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Every file under `root` with the SHA-256 of its content.
fn checksums(root: &Path) -> Fallible<BTreeMap<String, String>> {
    let mut all = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let digest = Sha256::digest(std::fs::read(&path)?);
                let name = path.strip_prefix(root)?.display().to_string();
                all.insert(name, format!("{digest:x}"));
            }
        }
    }
    Ok(all)
}

/// A running deployment with three indices (30, 10 and 5 documents),
/// snapshotted by Floe.
async fn source(w: &World) -> Fallible<(String, String)> {
    let (id, d) = w
        .create_at("/api/v1/deployments", spec("shop", Some("main")))
        .await?;
    assert_eq!(d["status"], "running", "{d}");
    w.write(&id, "orders", 30).await?;
    w.write(&id, "customers", 10).await?;
    w.write(&id, "logs-1", 5).await?;
    let snapshot = w.snapshot(&id).await?;
    Ok((id, snapshot))
}

/// Makes the snapshot's records say `customers` had `count` documents,
/// before and after it.
async fn record_customers(w: &World, id: &str, snapshot: &str, count: u64) -> TestResult {
    let mut record = w
        .store
        .get_snapshot(ORG, id, snapshot)
        .await?
        .ok_or("no record")?;
    let counts = record.value.document_counts.as_mut().ok_or("no counts")?;
    let customers = counts.get_mut("customers").ok_or("customers")?;
    customers.before = count;
    customers.after = Some(count);
    w.store
        .update_snapshot(&record.value, record.version)
        .await?;
    Ok(())
}

/// Starts a drill of `id` with `body` and waits for its end.
async fn drill(w: &World, id: &str, body: Value) -> Fallible<Value> {
    let (status, started) = w
        .call(
            "POST",
            &format!("/api/v1/deployments/{id}/_drill"),
            Some(body),
        )
        .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    assert_eq!(started["status"], "running", "{started}");
    let drill_id = started["id"].as_str().ok_or("no id")?.to_string();
    for _ in 0..4000 {
        let (status, listed) = w
            .call("GET", &format!("/api/v1/deployments/{id}/drills"), None)
            .await?;
        assert_eq!(status, StatusCode::OK, "{listed}");
        let found = listed["drills"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["id"] == drill_id.as_str())
            .cloned()
            .ok_or_else(|| format!("drill {drill_id} is not listed: {listed}"))?;
        if found["status"] != "running" {
            return Ok(found);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(format!("drill {drill_id} did not end").into())
}

/// What the operators' bus was told once a drill ended. The engine tells
/// it just after it writes the drill's end, which a reader of the drills
/// (the wait above) may see first: so the first event is waited for (ten
/// seconds at most), then a moment more is given for any that would follow
/// it, since the tests hold the bus to being told once.
async fn told_once_it_ended(w: &World) -> Vec<floe_ports::PlatformEvent> {
    let mut told = Vec::new();
    for _ in 0..2000 {
        told.extend(w.events.taken());
        if !told.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    told.extend(w.events.taken());
    told
}

/// The clone is gone: no record, no instance running.
async fn clone_gone(w: &World, drill: &Value) -> TestResult {
    let clone = drill["clone_deployment_id"].as_str().ok_or("no clone")?;
    let (status, body) = w
        .call("GET", &format!("/api/v1/deployments/{clone}"), None)
        .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(w.live(clone).await?, 0, "the clone's nodes are gone");
    Ok(())
}

/// The `main` repository's folder: every deployment's path in it.
fn repository_path(w: &World) -> std::path::PathBuf {
    w._dir.path().join(ORG).join(format!("{ORG}-main"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_of_a_healthy_deployment_passes_and_measures_its_recovery() -> TestResult {
    let w = world().await?;
    let (id, snapshot) = source(&w).await?;
    // Written after the snapshot: the drill checks the snapshot, not them.
    w.write(&id, "orders", 3).await?;
    let before = checksums(&repository_path(&w))?;

    let done = drill(&w, &id, json!({})).await?;
    assert_eq!(done["status"], "passed", "{done}");
    assert_eq!(done["snapshot"], snapshot.as_str(), "{done}");
    assert_eq!(done["repository"], "main", "{done}");
    let checks = done["checks"].as_array().ok_or("no checks")?;
    for index in ["orders", "customers", "logs-1"] {
        for check in ["green", "document_count"] {
            let found = checks
                .iter()
                .find(|c| c["index"] == index && c["check"] == check)
                .ok_or_else(|| format!("no {check} check of {index}: {done}"))?;
            assert_eq!(found["outcome"], "passed", "{found}");
        }
    }
    let counted = checks
        .iter()
        .find(|c| c["index"] == "orders" && c["check"] == "document_count")
        .ok_or("orders")?;
    assert_eq!(
        counted["detail"],
        "30 documents, recorded 30 before and 30 after the snapshot"
    );
    // Plausible figures: the snapshot was taken moments ago, and the
    // recovery time is the sum of its parts, within the drill's span.
    let point = done["recovery_point_seconds"].as_u64().ok_or("point")?;
    assert!(point < 120, "{done}");
    let time = &done["recovery_time"];
    let total = time["total_millis"].as_u64().ok_or("total")?;
    let provisioning = time["provisioning_millis"].as_u64().ok_or("provisioning")?;
    let recovery = time["recovery_millis"].as_u64().ok_or("recovery")?;
    assert_eq!(total, provisioning + recovery, "{time}");
    let started: chrono::DateTime<chrono::Utc> = serde_json::from_value(done["started"].clone())?;
    let finished: chrono::DateTime<chrono::Utc> = serde_json::from_value(done["finished"].clone())?;
    assert!(
        u64::try_from((finished - started).num_milliseconds())? + 5 >= total,
        "{done}"
    );
    assert!(
        done["bytes_recovered"].as_u64().is_some_and(|b| b > 0),
        "{done}"
    );
    assert!(done.get("failure").is_none(), "{done}");

    clone_gone(&w, &done).await?;
    assert_eq!(
        before,
        checksums(&repository_path(&w))?,
        "nothing under the source's path changed"
    );
    // The source is as it was, and its snapshot free: it can be deleted.
    let (status, body) = w
        .call(
            "DELETE",
            &format!("/api/v1/deployments/{id}/snapshots/{snapshot}"),
            None,
        )
        .await?;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_fails_naming_the_index_when_the_counts_disagree_or_a_query_finds_too_little()
-> TestResult {
    let w = world().await?;
    let (id, snapshot) = source(&w).await?;

    // The snapshot's records say customers had 11 documents.
    record_customers(&w, &id, &snapshot, 11).await?;
    let before = checksums(&repository_path(&w))?;
    let failed = drill(&w, &id, json!({})).await?;
    assert_eq!(failed["status"], "failed", "{failed}");
    let failure = &failed["failure"];
    assert_eq!(failure["step"], "drill-verdict", "{failed}");
    assert_eq!(failure["failure_type"], "drill_check_failed", "{failed}");
    let reason = failure["reason"].as_str().ok_or("reason")?;
    assert!(
        reason.contains("index customers") && reason.contains("10 documents, recorded 11"),
        "{reason}"
    );
    clone_gone(&w, &failed).await?;
    assert_eq!(before, checksums(&repository_path(&w))?);

    // The records put right; then a query that must find more orders
    // than there are.
    record_customers(&w, &id, &snapshot, 10).await?;
    let failed = drill(
        &w,
        &id,
        json!({"queries": [
            {"index": "logs-*", "min_hits": 5},
            {"index": "orders", "query": {"match_all": {}}, "min_hits": 31}
        ]}),
    )
    .await?;
    assert_eq!(failed["status"], "failed", "{failed}");
    let query = failed["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["check"] == "query")
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(query.len(), 2, "{failed}");
    assert_eq!(query[0]["outcome"], "passed", "{failed}");
    assert_eq!(query[1]["outcome"], "failed", "{failed}");
    assert_eq!(query[1]["detail"], "30 hits, at least 31 wanted");
    let reason = failed["failure"]["reason"].as_str().ok_or("reason")?;
    assert!(
        reason.contains("query check failed on index orders"),
        "{reason}"
    );
    clone_gone(&w, &failed).await?;
    assert_eq!(before, checksums(&repository_path(&w))?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_fails_when_a_blob_of_the_snapshot_is_gone() -> TestResult {
    let w = world().await?;
    let (id, _snapshot) = source(&w).await?;
    // The data blob of one index removed from the repository.
    let indices = repository_path(&w).join(&id).join("indices");
    let mut blobs = Vec::new();
    let mut dirs = vec![indices];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                blobs.push(path);
            }
        }
    }
    blobs.sort();
    let removed = blobs.first().ok_or("no data blob in the repository")?;
    std::fs::remove_file(removed)?;
    let before = checksums(&repository_path(&w))?;

    let failed = drill(&w, &id, json!({})).await?;
    assert_eq!(failed["status"], "failed", "{failed}");
    let failure = &failed["failure"];
    // Elasticsearch accepts the restore; the index's primaries then fail
    // to recover, and it stays red with no documents.
    assert_eq!(failure["step"], "wait-restored", "{failed}");
    assert_eq!(failure["failure_type"], "restore_failed", "{failed}");
    let reason = failure["reason"].as_str().ok_or("reason")?;
    assert!(
        ["orders", "customers", "logs-1"]
            .iter()
            .any(|i| reason.contains(&format!("index {i} is red"))),
        "the reason names the index: {reason}"
    );
    clone_gone(&w, &failed).await?;
    assert_eq!(before, checksums(&repository_path(&w))?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_drill_runs_at_a_time_and_bad_requests_change_nothing() -> TestResult {
    let w = world().await?;
    let (status, body) = w
        .call(
            "POST",
            "/api/v1/deployments/0193a0c4d2b77c3e9a4b5c6d7e8f9a0b/_drill",
            None,
        )
        .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // No snapshot yet.
    let (id, _) = w
        .create_at("/api/v1/deployments", spec("fresh", Some("main")))
        .await?;
    let (status, body) = w
        .call("POST", &format!("/api/v1/deployments/{id}/_drill"), None)
        .await?;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["errors"][0]["code"], "restore.no_successful_snapshot",
        "{body}"
    );
    assert!(body["errors"][0].get("fields").is_none(), "{body}");

    let (id, _) = source(&w).await?;
    for (bad, field) in [
        (json!({"instance_type": "m5.hyper"}), "instance_type"),
        (
            json!({"queries": [{"index": "Orders", "min_hits": 1}]}),
            "queries[0].index",
        ),
        (
            json!({"queries": [{"index": "orders", "query": [], "min_hits": 1}]}),
            "queries[0].query",
        ),
        (json!({"mode": "restore", "license": "trial"}), "license"),
    ] {
        let (status, body) = w
            .call(
                "POST",
                &format!("/api/v1/deployments/{id}/_drill"),
                Some(bad.clone()),
            )
            .await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(body.to_string().contains(field), "{bad}: {body}");
    }
    let (_, listed) = w
        .call("GET", &format!("/api/v1/deployments/{id}/drills"), None)
        .await?;
    assert_eq!(listed["drills"], json!([]), "{listed}");

    // A drill held before its checks: a second one is refused meanwhile.
    *w.steps.hold.lock().map_err(|_| "poisoned")? = Some("drill-check".into());
    let (status, first) = w
        .call("POST", &format!("/api/v1/deployments/{id}/_drill"), None)
        .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let (status, second) = w
        .call("POST", &format!("/api/v1/deployments/{id}/_drill"), None)
        .await?;
    assert_eq!(status, StatusCode::CONFLICT, "{second}");
    assert_eq!(
        second["errors"][0]["code"], "drills.drill_running",
        "{second}"
    );
    let first_id = first["id"].as_str().ok_or("id")?;
    assert!(
        second["errors"][0]["message"]
            .to_string()
            .contains(first_id),
        "{second}"
    );
    // The clone is a deployment of its own while it runs, tagged with its
    // source, and refuses to be drilled itself.
    let clone = first["clone_deployment_id"].as_str().ok_or("clone")?;
    let (status, shown) = w
        .call("GET", &format!("/api/v1/deployments/{clone}"), None)
        .await?;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert!(shown.to_string().contains("floe-drill-of"), "{shown}");
    let (status, refused) = w
        .call("POST", &format!("/api/v1/deployments/{clone}/_drill"), None)
        .await?;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");

    *w.steps.hold.lock().map_err(|_| "poisoned")? = None;
    let mut ended = Value::Null;
    for _ in 0..4000 {
        let (_, listed) = w
            .call("GET", &format!("/api/v1/deployments/{id}/drills"), None)
            .await?;
        ended = listed["drills"][0].clone();
        if ended["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(ended["status"], "passed", "{ended}");
    // The next drill may start, and lists first.
    let next = drill(&w, &id, json!({})).await?;
    assert_eq!(next["status"], "passed", "{next}");
    let (_, listed) = w
        .call(
            "GET",
            &format!("/api/v1/deployments/{id}/drills?size=1"),
            None,
        )
        .await?;
    assert_eq!(listed["drills"][0]["id"], next["id"], "{listed}");
    assert!(listed["next_cursor"].is_string(), "{listed}");
    Ok(())
}

/// A drill whose plan fails part-way (its restore refused, say) unwinds:
/// the clone's nodes and record go, the drill names the step, and the
/// next drill may start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_that_fails_part_way_leaves_no_clone_and_frees_the_next() -> TestResult {
    let w = world().await?;
    let (id, _) = source(&w).await?;
    *w.steps.fail_after.lock().map_err(|_| "poisoned")? = Some("restore".into());
    let failed = drill(&w, &id, json!({})).await?;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["failure"]["step"], "restore", "{failed}");
    assert_eq!(failed["failure"]["failure_type"], "injected", "{failed}");
    assert!(failed.get("recovery_time").is_none(), "{failed}");
    clone_gone(&w, &failed).await?;
    *w.steps.fail_after.lock().map_err(|_| "poisoned")? = None;
    let next = drill(&w, &id, json!({})).await?;
    assert_eq!(next["status"], "passed", "{next}");
    Ok(())
}

/// A mount drill mounts the snapshot's indices as searchable snapshots on
/// the clone (on the trial it asks for) and checks them as a restore drill
/// does; without a license that allows mounting it is refused up front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_drill_checks_the_mounted_indices() -> TestResult {
    let w = world().await?;
    let (id, _) = source(&w).await?;
    let (status, refused) = w
        .call(
            "POST",
            &format!("/api/v1/deployments/{id}/_drill"),
            Some(json!({"mode": "mount"})),
        )
        .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(
        refused["errors"][0]["code"], "restore.license_required",
        "{refused}"
    );
    assert_eq!(
        refused["errors"][0]["fields"],
        json!(["license"]),
        "{refused}"
    );

    let done = drill(&w, &id, json!({"mode": "mount", "license": "trial"})).await?;
    assert_eq!(done["status"], "passed", "{done}");
    assert_eq!(done["mode"], "mount", "{done}");
    let counted = done["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["check"] == "document_count" && c["outcome"] == "passed")
        .count();
    assert_eq!(counted, 3, "{done}");
    clone_gone(&w, &done).await?;
    Ok(())
}

/// A deployment's view carries its recovery, apart from `healthy`: the
/// last drill, and whether it met the targets the operator set. Targets
/// change without a plan; a bad one is refused naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_shows_its_recovery_against_its_targets() -> TestResult {
    let w = world().await?;
    let (id, _) = source(&w).await?;
    let (_, shown) = w
        .call("GET", &format!("/api/v1/deployments/{id}"), None)
        .await?;
    assert!(
        shown.get("recovery").is_none(),
        "no drill, no targets: {shown}"
    );

    // Targets no drill can meet here: a recovery time of 1 ms.
    let mut spec = spec("shop", Some("main"));
    spec["recovery_targets"] = json!({"recovery_point": "1h", "recovery_time": "1ms"});
    let (status, updated) = w
        .call(
            "PUT",
            &format!("/api/v1/deployments/{id}"),
            Some(spec.clone()),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert!(
        updated["plans"].get("pending").is_none(),
        "no plan: {updated}"
    );
    assert_eq!(updated["recovery"]["healthy"], false, "{updated}");
    assert_eq!(
        updated["recovery"]["reasons"],
        json!(["no restore drill has run yet"]),
        "{updated}"
    );

    let done = drill(&w, &id, json!({})).await?;
    assert_eq!(done["status"], "passed", "{done}");
    let (_, shown) = w
        .call("GET", &format!("/api/v1/deployments/{id}"), None)
        .await?;
    let recovery = &shown["recovery"];
    assert_eq!(recovery["last_drill"]["id"], done["id"], "{shown}");
    assert_eq!(recovery["last_drill"]["status"], "passed", "{shown}");
    assert_eq!(recovery["healthy"], false, "{shown}");
    let reasons = recovery["reasons"].to_string();
    assert!(reasons.contains("recovery time target of 1ms"), "{reasons}");
    // Told on the operators' bus, once.
    let told = told_once_it_ended(&w).await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].detail_type, "Floe Recovery Target Breached");
    assert_eq!(told[0].detail["target"], "recovery_time", "{:?}", told[0]);
    assert_eq!(told[0].detail["target_value"], "1ms");
    assert_eq!(told[0].detail["deployment_id"], id.as_str());
    assert_eq!(told[0].detail["drill_id"], done["id"]);
    assert!(!reasons.contains("recovery point"), "{reasons}");
    assert_eq!(shown["recovery_targets"]["recovery_time"], "1ms", "{shown}");
    // A recovery warning is not the cluster's health.
    assert_ne!(shown["healthy"], false, "{shown}");

    spec["recovery_targets"] = json!({"recovery_point": "1h", "recovery_time": "1h"});
    let (status, updated) = w
        .call(
            "PUT",
            &format!("/api/v1/deployments/{id}"),
            Some(spec.clone()),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["recovery"]["healthy"], true, "{updated}");
    assert!(updated["recovery"].get("reasons").is_none(), "{updated}");

    // A failed drill is the last drill, and says where it failed.
    *w.steps.fail_after.lock().map_err(|_| "poisoned")? = Some("restore".into());
    let failed = drill(&w, &id, json!({})).await?;
    assert_eq!(failed["status"], "failed", "{failed}");
    let (_, shown) = w
        .call("GET", &format!("/api/v1/deployments/{id}"), None)
        .await?;
    assert_eq!(shown["recovery"]["healthy"], false, "{shown}");
    assert!(
        shown["recovery"]["reasons"][0]
            .as_str()
            .is_some_and(|r| r.starts_with("the last drill failed at restore: ")),
        "{shown}"
    );
    let told = told_once_it_ended(&w).await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].detail_type, "Floe Drill Failed");
    assert_eq!(told[0].detail["org"], ORG);
    assert_eq!(told[0].detail["drill_id"], failed["id"]);
    assert_eq!(told[0].detail["failure"], failed["failure"]);
    assert_eq!(told[0].detail["deployment_name"], "shop");

    for (bad, field) in [
        (
            json!({"recovery_time": "soon"}),
            "recovery_targets.recovery_time",
        ),
        (
            json!({"recovery_point": "0s"}),
            "recovery_targets.recovery_point",
        ),
        (json!({"rto": "1h"}), "recovery_targets"),
    ] {
        spec["recovery_targets"] = bad.clone();
        let (status, body) = w
            .call(
                "PUT",
                &format!("/api/v1/deployments/{id}"),
                Some(spec.clone()),
            )
            .await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(body.to_string().contains(field), "{bad}: {body}");
    }
    Ok(())
}

/// The deployment's drills, newest first.
async fn drills_of(w: &World, id: &str) -> Fallible<Vec<Value>> {
    let (status, listed) = w
        .call("GET", &format!("/api/v1/deployments/{id}/drills"), None)
        .await?;
    assert_eq!(status, StatusCode::OK, "{listed}");
    Ok(listed["drills"].as_array().cloned().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_schedule_fires_from_the_local_scheduler() -> TestResult {
    use floe_schedules::Fire;
    let w = world().await?;
    let (id, snapshot) = source(&w).await?;
    let path = format!("/api/v1/deployments/{id}");

    // Bad schedules are refused naming the field, and change nothing.
    let mut spec = spec("shop", Some("main"));
    for (bad, field) in [
        (
            json!({"schedule": {"interval": "1d", "cron": "0 0 3 * * ?"}}),
            "drill_schedule.schedule",
        ),
        (
            json!({"schedule": {"interval": "30s"}}),
            "drill_schedule.schedule.interval",
        ),
        (
            json!({"schedule": {"cron": "0 0 3 * * ?", "timezone": "Mars/Olympus"}}),
            "drill_schedule.schedule.timezone",
        ),
        (
            json!({"schedule": {"interval": "1d"}, "drill": {"instance_type": "x9.huge"}}),
            "drill_schedule.drill.instance_type",
        ),
        (
            json!({"schedule": {"interval": "1d"}, "drill": {"license": "trial"}}),
            "drill_schedule.drill.license",
        ),
        (
            json!({"schedule": {"interval": "1d"}, "drill": {"queries": [{"index": "a,b", "min_hits": 1}]}}),
            "drill_schedule.drill.queries[0].index",
        ),
        (json!({"interval": "1d"}), "drill_schedule.interval"),
    ] {
        spec["drill_schedule"] = bad.clone();
        let (status, body) = w.call("PUT", &path, Some(spec.clone())).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(
            body["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|e| e["fields"].as_array().cloned().unwrap_or_default())
                .any(|f| f == field),
            "{bad}: {body}"
        );
    }
    assert!(w.scheduler.schedules().is_empty());

    // A daily drill with a query check: no plan, one schedule carrying the
    // drill job.
    spec["drill_schedule"] = json!({
        "schedule": {"interval": "1d"},
        "drill": {"queries": [{"index": "orders", "min_hits": 30}]}
    });
    let (status, updated) = w.call("PUT", &path, Some(spec.clone())).await?;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert!(updated["plans"].get("pending").is_none(), "{updated}");
    assert_eq!(
        updated["drill_schedule"]["schedule"]["interval"], "1d",
        "{updated}"
    );
    let schedules = w.scheduler.schedules();
    assert_eq!(schedules.len(), 1, "{schedules:?}");
    assert_eq!(schedules[0].expression, "rate(1 day)");
    assert_eq!(
        serde_json::to_value(&schedules[0].input)?,
        json!({"drill": {"org": ORG, "deployment_id": id}})
    );

    // A rate schedule fires when it is set, then once a day: the firing
    // starts the drill as the API would, with the schedule's checks. A
    // firing while it runs is skipped (one drill at a time).
    let due = w
        .scheduler
        .due_firings(floe_schedules::Clock::now(w.clock.as_ref()));
    assert_eq!(due.len(), 1, "{due:?}");
    for firing in due {
        w.firings.fire(firing.job.clone()).await;
        w.firings.fire(firing.job).await;
    }
    let mut listed = drills_of(&w, &id).await?;
    for _ in 0..4000 {
        if listed.iter().all(|d| d["status"] != "running") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        listed = drills_of(&w, &id).await?;
    }
    assert_eq!(listed.len(), 1, "one drill: {listed:?}");
    let done = &listed[0];
    assert_eq!(done["status"], "passed", "{done}");
    assert_eq!(done["snapshot"], snapshot.as_str(), "{done}");
    assert!(
        done["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["check"] == "query" && c["outcome"] == "passed"),
        "{done}"
    );
    clone_gone(&w, done).await?;
    assert!(
        w.scheduler
            .due_firings(floe_schedules::Clock::now(w.clock.as_ref()))
            .is_empty()
    );
    w.clock.advance(Duration::from_secs(24 * 3600));
    assert_eq!(
        w.scheduler
            .due_firings(floe_schedules::Clock::now(w.clock.as_ref()))
            .len(),
        1
    );

    // Removed, the schedule goes; a firing already under way starts
    // nothing.
    let job = w.scheduler.schedules()[0].input.clone();
    spec.as_object_mut().ok_or("spec")?.remove("drill_schedule");
    let (status, updated) = w.call("PUT", &path, Some(spec.clone())).await?;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert!(updated.get("drill_schedule").is_none(), "{updated}");
    assert!(w.scheduler.schedules().is_empty());
    w.firings.fire(job).await;
    assert_eq!(
        drills_of(&w, &id).await?.len(),
        1,
        "a stale firing starts nothing"
    );
    Ok(())
}
