use crate::common::{MockEs, Reply, TestResult};
use floe_elastic::{ElasticError, MountRequest, MountStorage, RestoreRequest, RestoreResponse};
use serde_json::json;

fn rename_request() -> RestoreRequest {
    RestoreRequest {
        indices: vec!["orders".to_string(), "logs-*".to_string()],
        ignore_unavailable: Some(true),
        include_global_state: Some(false),
        include_aliases: Some(false),
        rename_pattern: Some("(.+)".to_string()),
        rename_replacement: Some("restored-$1".to_string()),
        index_settings: json!({"index.number_of_replicas": 0}).as_object().cloned(),
        ignore_index_settings: vec!["index.refresh_interval".to_string()],
        ..RestoreRequest::default()
    }
}

#[tokio::test]
async fn restore_and_wait_sends_the_request_and_reads_the_outcome() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({
            "snapshot": {
                "snapshot": "snap-1",
                "indices": ["restored-orders", "restored-logs-2024.03.21"],
                "shards": {"total": 4, "failed": 1, "successful": 3}
            }
        }),
    ))
    .await?;

    let response = es
        .client()?
        .restore("backups", "snap-1", &rename_request(), true)
        .await?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/_snapshot/backups/snap-1/_restore");
    assert_eq!(seen.query.as_deref(), Some("wait_for_completion=true"));
    assert_eq!(
        seen.json()?,
        json!({
            "indices": ["orders", "logs-*"],
            "ignore_unavailable": true,
            "include_global_state": false,
            "include_aliases": false,
            "rename_pattern": "(.+)",
            "rename_replacement": "restored-$1",
            "index_settings": {"index.number_of_replicas": 0},
            "ignore_index_settings": ["index.refresh_interval"]
        })
    );
    let RestoreResponse::Completed(info) = response else {
        return Err(format!("expected Completed, got {response:?}").into());
    };
    assert_eq!(info.snapshot, "snap-1");
    assert_eq!(
        info.indices,
        ["restored-orders", "restored-logs-2024.03.21"]
    );
    assert_eq!(
        (
            info.shards.total,
            info.shards.failed,
            info.shards.successful
        ),
        (4, 1, 3)
    );
    Ok(())
}

#[tokio::test]
async fn restore_without_waiting_is_accepted() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"accepted": true}))).await?;
    let response = es
        .client()?
        .restore("backups", "snap-1", &RestoreRequest::default(), false)
        .await?;
    let seen = es.only_request()?;
    assert_eq!(seen.query.as_deref(), Some("wait_for_completion=false"));
    assert_eq!(seen.json()?, json!({}));
    assert_eq!(response, RestoreResponse::Accepted);
    Ok(())
}

#[tokio::test]
async fn restore_conflicts_map_to_their_variants() -> TestResult {
    let cases = [
        (
            Reply::error(
                500,
                "snapshot_restore_exception",
                "[backups:snap-1/u1] cannot restore index [orders] because an open index with same name already exists in the cluster. Either close or delete the existing index or restore the index under a different name by providing a rename pattern and replacement name",
            ),
            "index_already_exists",
        ),
        (
            Reply::error(400, "index_closed_exception", "closed"),
            "index_closed",
        ),
        (
            Reply::error(
                500,
                "snapshot_restore_exception",
                "[backups:snap-1/u1] cannot restore index [orders] with [2] shards from a snapshot of index [orders] with [1] shards",
            ),
            "snapshot_restore_failed",
        ),
        (
            Reply::error(
                404,
                "snapshot_missing_exception",
                "[backups:snap-1] is missing",
            ),
            "snapshot_missing",
        ),
        (
            Reply::error(
                503,
                "concurrent_snapshot_execution_exception",
                "[backups:snap-1] cannot restore a snapshot while a snapshot deletion is in-progress",
            ),
            "concurrent_snapshot",
        ),
    ];
    for (reply, code) in cases {
        let es = MockEs::always(reply).await?;
        let result = es
            .client()?
            .restore("backups", "snap-1", &RestoreRequest::default(), false)
            .await;
        let Err(error) = result else {
            return Err(format!("{code}: expected an error, got {result:?}").into());
        };
        assert_eq!(error.code(), code, "{error:?}");
    }
    Ok(())
}

#[tokio::test]
async fn mount_sends_storage_as_a_query_parameter_and_not_in_the_body() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"accepted": true}))).await?;
    let request = MountRequest {
        index: "orders".to_string(),
        renamed_index: Some("orders-frozen".to_string()),
        index_settings: json!({"index.number_of_replicas": 0}).as_object().cloned(),
        ignore_index_settings: vec!["index.refresh_interval".to_string()],
        storage: MountStorage::SharedCache,
    };

    es.client()?
        .mount("backups", "snap-1", &request, false)
        .await?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/_snapshot/backups/snap-1/_mount");
    assert_eq!(
        seen.query.as_deref(),
        Some("wait_for_completion=false&storage=shared_cache")
    );
    assert_eq!(
        seen.json()?,
        json!({
            "index": "orders",
            "renamed_index": "orders-frozen",
            "index_settings": {"index.number_of_replicas": 0},
            "ignore_index_settings": ["index.refresh_interval"]
        })
    );
    Ok(())
}

#[tokio::test]
async fn mount_waits_by_default_for_a_full_copy() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({"snapshot": {"snapshot": "snap-1", "indices": ["orders"], "shards": {"total": 1, "failed": 0, "successful": 1}}}),
    ))
    .await?;
    let request = MountRequest {
        index: "orders".to_string(),
        ..MountRequest::default()
    };
    es.client()?
        .mount("backups", "snap-1", &request, true)
        .await?;
    let seen = es.only_request()?;
    assert_eq!(
        seen.query.as_deref(),
        Some("wait_for_completion=true&storage=full_copy")
    );
    assert_eq!(seen.json()?, json!({"index": "orders"}));
    Ok(())
}

#[tokio::test]
async fn mounting_over_an_existing_index_is_a_conflict() -> TestResult {
    let es = MockEs::always(Reply::error(
        400,
        "resource_already_exists_exception",
        "index [orders/3hX5dQmUQGCpQ1qRkWgGGw] already exists",
    ))
    .await?;
    let request = MountRequest {
        index: "orders".to_string(),
        ..MountRequest::default()
    };
    let result = es
        .client()?
        .mount("backups", "snap-1", &request, false)
        .await;
    assert!(
        matches!(result, Err(ElasticError::IndexAlreadyExists(_))),
        "{result:?}"
    );
    Ok(())
}

/// Two indices being restored: one shard done, one copying, one replica
/// waiting; the fields are those the recovery API documents.
fn recovery_body() -> serde_json::Value {
    let shard = |id: u32,
                 primary: bool,
                 kind: &str,
                 stage: &str,
                 size: (u64, u64, u64),
                 files: (u64, u64, u64)| {
        json!({
            "id": id,
            "type": kind,
            "stage": stage,
            "primary": primary,
            "start_time_in_millis": 1_711_069_200_000_i64,
            "stop_time_in_millis": 0,
            "total_time_in_millis": 175_576,
            "source": {"repository": "backups", "snapshot": "snap-1", "index": "orders", "version": "8.15.0", "restoreUUID": "PDh1ZAOaRbiGIVtCvZOMww"},
            "target": {"id": "ryqJ5lO5S4-lSFbGntkEkg", "host": "10.0.1.7", "transport_address": "10.0.1.7:9300", "ip": "10.0.1.7", "name": "es-data-0"},
            "index": {
                "size": {"total_in_bytes": size.0, "reused_in_bytes": size.1, "recovered_in_bytes": size.2, "percent": "n/a"},
                "files": {"total": files.0, "reused": files.1, "recovered": files.2, "percent": "n/a"},
                "total_time_in_millis": 0,
                "source_throttle_time_in_millis": 0,
                "target_throttle_time_in_millis": 0
            },
            "translog": {"recovered": 0, "total": 0, "percent": "100.0%", "total_on_start": 0, "total_time_in_millis": 0},
            "verify_index": {"check_index_time_in_millis": 0, "total_time_in_millis": 0}
        })
    };
    json!({
        "restored-orders": {"shards": [
            shard(1, false, "PEER", "INIT", (0, 0, 0), (0, 0, 0)),
            shard(0, true, "SNAPSHOT", "INDEX", (80_000_000, 0, 60_000_000), (70, 0, 50)),
            shard(1, true, "SNAPSHOT", "DONE", (20_000_000, 0, 20_000_000), (20, 0, 20)),
        ]},
        "restored-logs": {"shards": [
            shard(0, true, "EXISTING_STORE", "DONE", (10_000_000, 10_000_000, 0), (5, 5, 0)),
        ]}
    })
}

#[tokio::test]
async fn recovery_adds_up_bytes_and_shards() -> TestResult {
    let es = MockEs::always(Reply::json(200, recovery_body())).await?;
    let indices = vec!["restored-orders".to_string(), "restored-logs".to_string()];

    let progress = es.client()?.recovery(&indices).await?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.path, "/restored-orders,restored-logs/_recovery");
    assert_eq!(seen.query, None);

    assert_eq!(progress.shards_total, 4);
    assert_eq!(progress.shards_done, 2);
    assert_eq!(progress.bytes_total, 110_000_000);
    assert_eq!(progress.bytes_reused, 10_000_000);
    assert_eq!(progress.bytes_recovered, 80_000_000);
    assert_eq!(progress.files_total, 95);
    assert_eq!(progress.files_recovered, 70);
    assert!(!progress.is_done());
    assert!(
        (progress.fraction() - 0.8).abs() < 1e-9,
        "{}",
        progress.fraction()
    );
    assert_eq!(
        progress.to_string(),
        "2/4 shards done, 80000000 of 100000000 bytes copied (80.0%)"
    );
    // Ordered by index, then shard, primary first.
    let order: Vec<_> = progress
        .shards
        .iter()
        .map(|s| (s.index.as_str(), s.shard, s.primary))
        .collect();
    assert_eq!(
        order,
        [
            ("restored-logs", 0, true),
            ("restored-orders", 0, true),
            ("restored-orders", 1, true),
            ("restored-orders", 1, false),
        ]
    );
    assert_eq!(progress.shards[1].recovery_type, "SNAPSHOT");
    assert_eq!(progress.shards[1].stage, "INDEX");
    Ok(())
}

#[tokio::test]
async fn active_recoveries_ask_only_for_running_ones() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({}))).await?;
    let client = es.client()?;

    let active = client
        .active_recoveries(&["restored-*".to_string()])
        .await?;
    let everything = client.recovery(&[]).await?;

    let seen = es.requests();
    assert_eq!(seen[0].path, "/restored-%2A/_recovery");
    assert_eq!(seen[0].query.as_deref(), Some("active_only=true"));
    assert_eq!(seen[1].path, "/_recovery");
    assert_eq!(seen[1].query, None);
    assert_eq!(active.shards_total, 0);
    assert!(!active.is_done());
    assert!((active.fraction() - 1.0).abs() < f64::EPSILON);
    assert_eq!(everything.shards_total, 0);
    Ok(())
}

#[tokio::test]
async fn recovery_is_done_when_every_shard_is() -> TestResult {
    let body = json!({
        "orders": {"shards": [
            {"id": 0, "type": "SNAPSHOT", "stage": "DONE", "primary": true,
             "index": {"size": {"total_in_bytes": 100, "reused_in_bytes": 0, "recovered_in_bytes": 100},
                       "files": {"total": 3, "reused": 0, "recovered": 3}}},
            {"id": 0, "type": "PEER", "stage": "DONE", "primary": false,
             "index": {"size": {"total_in_bytes": 100, "reused_in_bytes": 0, "recovered_in_bytes": 100},
                       "files": {"total": 3, "reused": 0, "recovered": 3}}}
        ]}
    });
    let es = MockEs::always(Reply::json(200, body)).await?;
    let progress = es.client()?.recovery(&["orders".to_string()]).await?;
    assert!(progress.is_done());
    assert!((progress.fraction() - 1.0).abs() < f64::EPSILON);
    Ok(())
}

#[tokio::test]
async fn recovery_of_an_unknown_index_is_an_http_error() -> TestResult {
    let es = MockEs::always(Reply::error(
        404,
        "index_not_found_exception",
        "no such index [nope]",
    ))
    .await?;
    let result = es.client()?.recovery(&["nope".to_string()]).await;
    let Err(ElasticError::Http(failure)) = result else {
        return Err(format!("expected Http, got {result:?}").into());
    };
    assert_eq!(failure.status, 404);
    assert_eq!(failure.error_type, "index_not_found_exception");
    Ok(())
}
