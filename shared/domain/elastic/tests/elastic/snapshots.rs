use crate::common::{MockEs, Reply, TestResult};
use chrono::Utc;
use floe_domain::snapshot_name::resolve_snapshot_name;
use floe_elastic::{
    CreateSnapshot, CreateSnapshotResponse, ElasticError, SnapshotState, SnapshotStatusState,
};
use serde_json::{Value, json};

/// A finished snapshot as Elasticsearch 8 describes it.
fn snapshot(name: &str, state: &str, start: i64, end: i64) -> Value {
    json!({
        "snapshot": name,
        "uuid": format!("uuid-{name}"),
        "repository": "backups",
        "version_id": 8_150_099,
        "version": "8.15.0",
        "indices": ["logs-2024.03.21", "orders"],
        "data_streams": [],
        "feature_states": [],
        "include_global_state": false,
        "state": state,
        "start_time": "2024-03-22T01:00:00.000Z",
        "start_time_in_millis": start,
        "end_time": "2024-03-22T01:00:04.200Z",
        "end_time_in_millis": end,
        "duration_in_millis": end - start,
        "failures": [],
        "shards": {"total": 6, "failed": 0, "successful": 6}
    })
}

#[tokio::test]
async fn create_with_date_math_encodes_the_name_and_predicts_it() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"accepted": true}))).await?;
    let request = CreateSnapshot {
        indices: vec!["logs-*".to_string(), "orders".to_string()],
        include_global_state: Some(false),
        metadata: json!({"taken_by": "floe"}).as_object().cloned(),
        ..CreateSnapshot::default()
    };
    let name = "<nightly-{now/d}>";

    let before = resolve_snapshot_name(name, Utc::now())?;
    let response = es
        .client()?
        .create_snapshot("backups", name, &request, false)
        .await?;
    let after = resolve_snapshot_name(name, Utc::now())?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.path, "/_snapshot/backups/%3Cnightly-%7Bnow%2Fd%7D%3E");
    assert_eq!(seen.query.as_deref(), Some("wait_for_completion=false"));
    assert_eq!(
        seen.json()?,
        json!({
            "indices": ["logs-*", "orders"],
            "include_global_state": false,
            "metadata": {"taken_by": "floe"},
        })
    );
    let CreateSnapshotResponse::Accepted {
        predicted_name: Some(predicted),
    } = response
    else {
        return Err(format!("expected a prediction, got {response:?}").into());
    };
    // A run across midnight may land on either day.
    assert!(predicted == before || predicted == after, "{predicted}");
    assert!(predicted.starts_with("nightly-"), "{predicted}");
    Ok(())
}

#[tokio::test]
async fn every_character_elasticsearch_lists_is_encoded_in_the_path() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"accepted": true}))).await?;
    es.client()?
        .create_snapshot(
            "backups",
            "<hourly-{now/h{yyyy.MM.dd-HH|+01:00}}>",
            &CreateSnapshot::default(),
            false,
        )
        .await?;
    let seen = es.only_request()?;
    assert_eq!(
        seen.path,
        "/_snapshot/backups/%3Chourly-%7Bnow%2Fh%7Byyyy.MM.dd-HH%7C%2B01%3A00%7D%7D%3E"
    );
    // An empty request sends an empty object, so Elasticsearch's defaults apply.
    assert_eq!(seen.json()?, json!({}));
    Ok(())
}

#[tokio::test]
async fn create_and_wait_returns_the_snapshot() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({"snapshot": snapshot("snap-1", "SUCCESS", 1_711_069_200_000, 1_711_069_204_200)}),
    ))
    .await?;

    let response = es
        .client()?
        .create_snapshot("backups", "snap-1", &CreateSnapshot::default(), true)
        .await?;

    let seen = es.only_request()?;
    assert_eq!(seen.path, "/_snapshot/backups/snap-1");
    assert_eq!(seen.query.as_deref(), Some("wait_for_completion=true"));
    let CreateSnapshotResponse::Completed(info) = response else {
        return Err(format!("expected Completed, got {response:?}").into());
    };
    assert_eq!(info.snapshot, "snap-1");
    assert_eq!(info.uuid, "uuid-snap-1");
    assert_eq!(info.repository.as_deref(), Some("backups"));
    assert_eq!(info.version.as_deref(), Some("8.15.0"));
    assert_eq!(info.state, Some(SnapshotState::Success));
    assert_eq!(info.indices, ["logs-2024.03.21", "orders"]);
    assert_eq!(info.include_global_state, Some(false));
    assert_eq!(info.duration_in_millis, Some(4_200));
    assert_eq!(
        info.start_time().map(|t| t.to_rfc3339()),
        Some("2024-03-22T01:00:00+00:00".to_string())
    );
    assert_eq!(
        info.shards.map(|s| (s.total, s.failed, s.successful)),
        Some((6, 0, 6))
    );
    Ok(())
}

#[tokio::test]
async fn a_snapshot_that_ran_and_failed_comes_back_as_a_failed_snapshot() -> TestResult {
    // Elasticsearch answers a failed snapshot with 500 and the snapshot
    // itself, not with an error body.
    let mut failed = snapshot("snap-2", "FAILED", 1_711_069_200_000, 1_711_069_201_000);
    failed["reason"] = json!("Indices don't have primary shards [orders]");
    failed["shards"] = json!({"total": 6, "failed": 6, "successful": 0});
    failed["failures"] = json!([{
        "index": "orders",
        "index_uuid": "orders-uuid",
        "shard_id": 0,
        "reason": "primary shard is not allocated",
        "node_id": "K5tWq0BZQ2eRVSsAvgtgqw",
        "status": "INTERNAL_SERVER_ERROR"
    }]);
    let es = MockEs::always(Reply::json(500, json!({ "snapshot": failed }))).await?;

    let response = es
        .client()?
        .create_snapshot("backups", "snap-2", &CreateSnapshot::default(), true)
        .await?;

    let CreateSnapshotResponse::Completed(info) = response else {
        return Err(format!("expected Completed, got {response:?}").into());
    };
    assert_eq!(info.state, Some(SnapshotState::Failed));
    assert_eq!(
        info.reason.as_deref(),
        Some("Indices don't have primary shards [orders]")
    );
    assert_eq!(info.failures.len(), 1);
    assert_eq!(info.failures[0].index.as_deref(), Some("orders"));
    assert_eq!(info.failures[0].shard_id, Some(0));
    Ok(())
}

#[tokio::test]
async fn create_errors_map_to_their_variants() -> TestResult {
    let cases = [
        (
            Reply::error(
                503,
                "concurrent_snapshot_execution_exception",
                "[backups:snap-3] cannot snapshot while a snapshot deletion is in-progress",
            ),
            "concurrent_snapshot",
            true,
        ),
        (
            Reply::error(
                400,
                "invalid_snapshot_name_exception",
                "[backups:snap-3] Invalid snapshot name [snap-3], snapshot with the same name already exists",
            ),
            "invalid_snapshot_name",
            false,
        ),
        (
            Reply::error(
                500,
                "repository_exception",
                "[backups] cannot create snapshot in a readonly repository",
            ),
            "read_only_repository",
            false,
        ),
        (
            Reply::error(404, "repository_missing_exception", "[backups] missing"),
            "repository_missing",
            false,
        ),
        (
            Reply::error(400, "index_closed_exception", "closed"),
            "index_closed",
            false,
        ),
        (
            Reply::error(
                503,
                "process_cluster_event_timeout_exception",
                "failed to process cluster event (create_snapshot [snap-3]) within 30s",
            ),
            "timeout",
            true,
        ),
        (
            Reply::error(
                403,
                "security_exception",
                "action [cluster:admin/snapshot/create] is unauthorized for user [viewer]",
            ),
            "http_error",
            false,
        ),
    ];
    for (reply, code, transient) in cases {
        let es = MockEs::always(reply).await?;
        let result = es
            .client()?
            .create_snapshot("backups", "snap-3", &CreateSnapshot::default(), false)
            .await;
        let Err(error) = result else {
            return Err(format!("{code}: expected an error, got {result:?}").into());
        };
        assert_eq!(error.code(), code, "{error:?}");
        assert_eq!(error.is_transient(), transient, "{error:?}");
    }
    Ok(())
}

#[tokio::test]
async fn list_snapshots_reads_the_listing_and_can_skip_details() -> TestResult {
    let es = MockEs::start(|seen| {
        if seen.query.as_deref() == Some("verbose=false") {
            Reply::json(
                200,
                json!({
                    "snapshots": [
                        {"snapshot": "snap-1", "uuid": "u1", "repository": "backups", "indices": ["orders"], "data_streams": [], "state": "SUCCESS"},
                        {"snapshot": "snap-2", "uuid": "u2", "repository": "backups", "indices": ["orders"], "data_streams": []}
                    ],
                    "total": 2,
                    "remaining": 0
                }),
            )
        } else {
            Reply::json(
                200,
                json!({
                    "snapshots": [
                        snapshot("snap-1", "SUCCESS", 1_000, 2_000),
                        snapshot("snap-2", "PARTIAL", 3_000, 5_000),
                        snapshot("snap-3", "IN_PROGRESS", 6_000, 0),
                    ],
                    "total": 3,
                    "remaining": 0
                }),
            )
        }
    })
    .await?;
    let client = es.client()?;

    let full = client.list_snapshots("backups", true).await?;
    let brief = client.list_snapshots("backups", false).await?;

    let seen = es.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].path, "/_snapshot/backups/_all");
    assert_eq!(seen[0].query, None);
    assert_eq!(seen[1].path, "/_snapshot/backups/_all");
    assert_eq!(seen[1].query.as_deref(), Some("verbose=false"));

    let states: Vec<_> = full.iter().map(|s| s.state).collect();
    assert_eq!(
        states,
        [
            Some(SnapshotState::Success),
            Some(SnapshotState::Partial),
            Some(SnapshotState::InProgress)
        ]
    );
    assert_eq!(full[2].end_time(), None);
    assert!(!SnapshotState::InProgress.is_finished());
    assert!(SnapshotState::Partial.is_finished());

    assert_eq!(brief.len(), 2);
    assert_eq!(brief[1].state, None);
    assert_eq!(brief[1].shards, None);
    assert_eq!(brief[1].start_time_in_millis, None);
    Ok(())
}

#[tokio::test]
async fn list_snapshots_reads_the_older_per_repository_shape() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({
            "responses": [{
                "repository": "backups",
                "snapshots": [snapshot("snap-1", "INCOMPATIBLE", 1_000, 2_000)]
            }]
        }),
    ))
    .await?;
    let snapshots = es.client()?.list_snapshots("backups", true).await?;
    assert_eq!(snapshots.len(), 1);
    assert_eq!(snapshots[0].state, Some(SnapshotState::Incompatible));
    Ok(())
}

#[tokio::test]
async fn a_repository_failure_inside_a_listing_is_an_error() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({
            "snapshots": [],
            "failures": {
                "backups": {
                    "type": "repository_exception",
                    "reason": "[backups] Could not read repository data because the contents of the repository do not match its expected state."
                }
            },
            "total": 0,
            "remaining": 0
        }),
    ))
    .await?;
    let result = es.client()?.list_snapshots("backups", true).await;
    let Err(ElasticError::Http(failure)) = result else {
        return Err(format!("expected Http, got {result:?}").into());
    };
    assert_eq!(failure.error_type, "repository_exception");
    assert!(failure.reason.contains("Could not read repository data"));
    Ok(())
}

#[tokio::test]
async fn a_state_this_client_does_not_know_does_not_break_the_listing() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({"snapshots": [{"snapshot": "s", "uuid": "u", "state": "SOMETHING_NEW", "future_field": {"x": 1}}]}),
    ))
    .await?;
    let snapshots = es.client()?.list_snapshots("backups", true).await?;
    assert_eq!(snapshots[0].state, Some(SnapshotState::Unknown));
    Ok(())
}

#[tokio::test]
async fn get_snapshot_finds_it_or_reports_it_missing() -> TestResult {
    let es = MockEs::start(|seen| match seen.path.as_str() {
        "/_snapshot/backups/snap-1" => Reply::json(
            200,
            json!({"snapshots": [snapshot("snap-1", "SUCCESS", 1_000, 2_000)], "total": 1, "remaining": 0}),
        ),
        "/_snapshot/backups/vanished" => Reply::json(200, json!({"snapshots": [], "total": 0, "remaining": 0})),
        _ => Reply::error(404, "snapshot_missing_exception", "[backups:snap-9] is missing"),
    })
    .await?;
    let client = es.client()?;

    let info = client.get_snapshot("backups", "snap-1").await?;
    assert_eq!(info.snapshot, "snap-1");

    let missing = client.get_snapshot("backups", "snap-9").await;
    let Err(error @ ElasticError::SnapshotMissing(_)) = missing else {
        return Err(format!("expected SnapshotMissing, got {missing:?}").into());
    };
    assert_eq!(error.code(), "snapshot_missing");
    assert_eq!(error.status(), Some(404));

    let vanished = client.get_snapshot("backups", "vanished").await;
    assert!(
        matches!(vanished, Err(ElasticError::SnapshotMissing(_))),
        "{vanished:?}"
    );
    let seen = es.requests();
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].path, "/_snapshot/backups/snap-1");
    Ok(())
}

#[tokio::test]
async fn snapshot_status_reads_shard_and_byte_counts() -> TestResult {
    let stats = |incremental: (i64, i64), total: (i64, i64), start: i64, time: i64| {
        json!({
            "incremental": {"file_count": incremental.0, "size_in_bytes": incremental.1},
            "total": {"file_count": total.0, "size_in_bytes": total.1},
            "start_time_in_millis": start,
            "time_in_millis": time
        })
    };
    let shards_stats = json!({"initializing": 0, "started": 1, "finalizing": 0, "done": 2, "failed": 0, "total": 3});
    let es = MockEs::always(Reply::json(
        200,
        json!({
            "snapshots": [{
                "snapshot": "snap-1",
                "repository": "backups",
                "uuid": "u1",
                "state": "STARTED",
                "include_global_state": true,
                "shards_stats": shards_stats,
                "stats": stats((12, 7_340_032), (40, 52_428_800), 1_711_069_200_000, 3_500),
                "indices": {
                    "orders": {
                        "shards_stats": shards_stats,
                        "stats": stats((12, 7_340_032), (40, 52_428_800), 1_711_069_200_100, 3_400),
                        "shards": {
                            "0": {"stage": "DONE", "stats": stats((4, 1), (10, 2), 0, 0)},
                            "1": {"stage": "DONE", "stats": stats((-1, -1), (-1, -1), 0, 0), "description": "node left"}
                        }
                    }
                }
            }]
        }),
    ))
    .await?;

    let status = es.client()?.snapshot_status("backups", "snap-1").await?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.path, "/_snapshot/backups/snap-1/_status");
    assert_eq!(status.state, SnapshotStatusState::Started);
    assert_eq!(status.shards_stats.done, 2);
    assert_eq!(status.shards_stats.total, 3);
    assert_eq!(status.stats.incremental.size_in_bytes, 7_340_032);
    assert_eq!(status.stats.total.file_count, 40);
    assert_eq!(status.stats.time_in_millis, 3_500);
    assert_eq!(
        status.indices["orders"].stats.total.size_in_bytes,
        52_428_800
    );
    Ok(())
}

#[tokio::test]
async fn delete_snapshot_and_its_refusals() -> TestResult {
    let es = MockEs::start(|seen| match seen.path.as_str() {
        "/_snapshot/backups/snap-1" => Reply::json(200, json!({"acknowledged": true})),
        "/_snapshot/shared/snap-1" => Reply::error(
            500,
            "repository_exception",
            "[shared] cannot delete snapshot from a readonly repository",
        ),
        _ => Reply::error(
            404,
            "snapshot_missing_exception",
            "[backups:snap-9] is missing",
        ),
    })
    .await?;
    let client = es.client()?;

    client.delete_snapshot("backups", "snap-1").await?;
    let read_only = client.delete_snapshot("shared", "snap-1").await;
    let missing = client.delete_snapshot("backups", "snap-9").await;
    // Patterns would delete more than one snapshot; they never leave.
    for pattern in ["*", "snap-*", "a,b", "_all", ""] {
        let refused = client.delete_snapshot("backups", pattern).await;
        assert!(
            matches!(refused, Err(ElasticError::InvalidArgument { .. })),
            "{pattern:?}: {refused:?}"
        );
    }

    let seen = es.requests();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].method, "DELETE");
    assert_eq!(seen[0].path, "/_snapshot/backups/snap-1");
    assert!(
        matches!(read_only, Err(ElasticError::ReadOnlyRepository(_))),
        "{read_only:?}"
    );
    assert!(
        matches!(missing, Err(ElasticError::SnapshotMissing(_))),
        "{missing:?}"
    );
    Ok(())
}
