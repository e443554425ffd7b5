//! Injected faults: slow snapshots, PARTIAL and FAILED snapshots, slow
//! restores.

use crate::common::{
    TestResult, call, client, count, eventually, fs_repo, reason, seed, start, wire,
};
use floe_elastic::{
    CreateSnapshot, CreateSnapshotResponse, ElasticError, HealthStatus, RestoreRequest,
    SnapshotState, SnapshotStatusState,
};
use floe_elastic_sim::{SimFaults, SnapshotFault};
use std::time::Duration;

#[tokio::test]
async fn a_slow_snapshot_is_visible_in_progress_and_blocks_a_second_one() -> TestResult {
    let root = tempfile::tempdir()?;
    let faults = SimFaults {
        snapshot_delay: Duration::from_millis(700),
        ..SimFaults::default()
    };
    let cluster = start("slow", root.path(), faults).await?;
    seed(&cluster, "data", 3).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;

    let accepted = es
        .create_snapshot("repo", "slow-1", &CreateSnapshot::default(), false)
        .await?;
    assert_eq!(
        accepted,
        CreateSnapshotResponse::Accepted {
            predicted_name: Some("slow-1".to_string())
        }
    );
    let running = es.get_snapshot("repo", "slow-1").await?;
    assert_eq!(running.state, Some(SnapshotState::InProgress));
    assert_eq!(running.end_time(), None);
    assert_eq!(
        running.shards.map(|s| (s.total, s.successful)),
        Some((1, 0))
    );
    let status = es.snapshot_status("repo", "slow-1").await?;
    assert_eq!(status.state, SnapshotStatusState::Started);
    assert!(status.stats.processed.is_some());

    let second = es
        .create_snapshot("repo", "slow-2", &CreateSnapshot::default(), false)
        .await;
    let Err(error @ ElasticError::ConcurrentSnapshot(_)) = second else {
        return Err(format!("expected a concurrency refusal, got {second:?}").into());
    };
    assert_eq!(
        wire(&error),
        (
            Some(503),
            "concurrent_snapshot_execution_exception".to_string()
        )
    );
    assert!(error.is_transient());

    eventually("the slow snapshot succeeds", || async {
        let info = es.get_snapshot("repo", "slow-1").await?;
        Ok(info.state == Some(SnapshotState::Success))
    })
    .await?;
    let info = es.get_snapshot("repo", "slow-1").await?;
    assert!(
        info.duration_in_millis.unwrap_or_default() >= 600,
        "{info:?}"
    );
    es.create_snapshot("repo", "slow-2", &CreateSnapshot::default(), false)
        .await?;
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn deleting_a_running_snapshot_aborts_it() -> TestResult {
    let root = tempfile::tempdir()?;
    let faults = SimFaults {
        snapshot_delay: Duration::from_secs(30),
        ..SimFaults::default()
    };
    let cluster = start("abort", root.path(), faults).await?;
    seed(&cluster, "data", 1).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;
    es.create_snapshot("repo", "doomed", &CreateSnapshot::default(), false)
        .await?;
    es.delete_snapshot("repo", "doomed").await?;
    assert!(es.list_snapshots("repo", true).await?.is_empty());

    // A cluster that goes away leaves its running snapshot unfinished.
    es.create_snapshot("repo", "unfinished", &CreateSnapshot::default(), false)
        .await?;
    cluster.shutdown().await?;
    let later = start("later", root.path(), SimFaults::default()).await?;
    let es = client(&later)?;
    es.put_repository("repo", &fs_repo("repo").read_only())
        .await?;
    assert!(es.list_snapshots("repo", true).await?.is_empty());
    later.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn partial_and_failed_snapshots_are_reported_and_restore_accordingly() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("faulty", root.path(), SimFaults::default()).await?;
    seed(&cluster, "a-logs", 2).await?;
    seed(&cluster, "b-logs", 2).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;

    cluster.set_faults(SimFaults {
        fail_snapshots: Some(SnapshotFault::Partial),
        ..SimFaults::default()
    });
    let partial = es
        .create_snapshot("repo", "partial", &CreateSnapshot::default(), true)
        .await?;
    let CreateSnapshotResponse::Completed(info) = partial else {
        return Err(format!("expected a completed snapshot, got {partial:?}").into());
    };
    assert_eq!(info.state, Some(SnapshotState::Partial));
    assert_eq!(
        info.shards.map(|s| (s.total, s.failed, s.successful)),
        Some((2, 1, 1))
    );
    assert_eq!(info.failures.len(), 1);
    assert_eq!(info.failures[0].index.as_deref(), Some("b-logs"));
    assert!(
        info.failures[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("simulated"))
    );

    let whole = RestoreRequest {
        rename_pattern: Some("(.+)".to_string()),
        rename_replacement: Some("r-$1".to_string()),
        ..RestoreRequest::default()
    };
    let refused = es.restore("repo", "partial", &whole, true).await;
    assert!(
        matches!(&refused, Err(e @ ElasticError::SnapshotRestore(_))
            if reason(e).contains("index [b-logs] wasn't fully snapshotted - cannot restore")),
        "{refused:?}"
    );
    let partial_ok = RestoreRequest {
        partial: Some(true),
        ..whole.clone()
    };
    es.restore("repo", "partial", &partial_ok, true).await?;
    assert_eq!(count(&cluster, "r-a-logs").await?, 2);
    assert_eq!(count(&cluster, "r-b-logs").await?, 0);

    cluster.set_faults(SimFaults {
        fail_snapshots: Some(SnapshotFault::Failed),
        ..SimFaults::default()
    });
    let failed = es
        .create_snapshot("repo", "failed", &CreateSnapshot::default(), true)
        .await?;
    let CreateSnapshotResponse::Completed(info) = failed else {
        return Err(format!("expected a completed snapshot, got {failed:?}").into());
    };
    assert_eq!(info.state, Some(SnapshotState::Failed));
    assert!(
        info.reason
            .as_deref()
            .is_some_and(|r| r.contains("simulated failure"))
    );
    // The repository records failed snapshots too.
    let listed = es.get_snapshot("repo", "failed").await?;
    assert_eq!(listed.state, Some(SnapshotState::Failed));
    let refused = es
        .restore("repo", "failed", &RestoreRequest::default(), true)
        .await;
    assert!(
        matches!(&refused, Err(e @ ElasticError::SnapshotRestore(_))
            if reason(e).contains("unsupported snapshot state [FAILED]")),
        "{refused:?}"
    );
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn a_slow_restore_reports_its_progress() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("progress", root.path(), SimFaults::default()).await?;
    seed(&cluster, "big", 50).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;
    es.create_snapshot("repo", "s", &CreateSnapshot::default(), true)
        .await?;
    cluster.set_faults(SimFaults {
        restore_delay: Duration::from_millis(1500),
        ..SimFaults::default()
    });
    let request = RestoreRequest {
        rename_pattern: Some("big".to_string()),
        rename_replacement: Some("copy".to_string()),
        ..RestoreRequest::default()
    };
    es.restore("repo", "s", &request, false).await?;

    let copying = es.active_recoveries(&["copy".to_string()]).await?;
    assert_eq!(copying.shards_total, 1);
    assert!(!copying.is_done(), "{copying}");
    assert!(copying.bytes_total > 0);
    assert!(copying.bytes_recovered < copying.bytes_total, "{copying}");
    assert_eq!(copying.shards[0].stage, "INDEX");
    let health = es.health(None, None).await?;
    assert_eq!(health.status, HealthStatus::Red);
    let (status, body) = call(&cluster, reqwest::Method::GET, "/copy/_count", None).await?;
    assert_eq!(status, 503, "{body}");

    let health = es
        .health(Some(HealthStatus::Green), Some(Duration::from_secs(5)))
        .await?;
    assert_eq!(
        (health.status, health.timed_out),
        (HealthStatus::Green, false)
    );
    let done = es.recovery(&["copy".to_string()]).await?;
    assert!(done.is_done(), "{done}");
    assert_eq!(done.bytes_recovered, done.bytes_total);
    assert!(
        es.active_recoveries(&["copy".to_string()])
            .await?
            .shards
            .is_empty()
    );
    assert_eq!(count(&cluster, "copy").await?, 50);
    cluster.shutdown().await?;
    Ok(())
}
