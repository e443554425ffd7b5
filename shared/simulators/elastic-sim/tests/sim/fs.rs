//! Snapshots in an `fs` repository, seen and restored by a second cluster.

use crate::common::{TestResult, call, client, count, fs_repo, reason, seed, start, wire};
use chrono::Utc;
use floe_domain::snapshot_name::resolve_snapshot_name;
use floe_elastic::{
    CreateSnapshot, CreateSnapshotResponse, ElasticError, HealthStatus, RestoreRequest,
    RestoreResponse, SnapshotState,
};
use floe_elastic_sim::SimFaults;
use std::time::Duration;

#[tokio::test]
async fn a_snapshot_taken_by_one_cluster_restores_on_another() -> TestResult {
    let root = tempfile::tempdir()?;
    let source = start("source", root.path(), SimFaults::default()).await?;
    seed(&source, "logs-1", 5).await?;
    seed(&source, "logs-2", 3).await?;
    let es = client(&source)?;
    es.put_repository("shared", &fs_repo("shared")).await?;
    assert_eq!(es.verify_repository("shared").await?.len(), 3);

    let created = es
        .create_snapshot("shared", "snap-1", &CreateSnapshot::default(), true)
        .await?;
    let CreateSnapshotResponse::Completed(info) = created else {
        return Err(format!("expected a completed snapshot, got {created:?}").into());
    };
    assert_eq!(info.state, Some(SnapshotState::Success));
    assert_eq!(info.indices.len(), 2);
    assert_eq!(info.shards.map(|s| (s.total, s.failed)), Some((2, 0)));
    assert!(info.end_time().is_some());
    // Written to the folder, not kept in memory.
    assert!(root.path().join("shared/index.json").is_file());

    let clone = start("clone", root.path(), SimFaults::default()).await?;
    let es2 = client(&clone)?;
    es2.put_repository("shared", &fs_repo("shared").read_only())
        .await?;
    let listed = es2.list_snapshots("shared", true).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].snapshot, "snap-1");
    assert_eq!(listed[0].uuid, info.uuid);
    assert_eq!(listed[0].state, Some(SnapshotState::Success));
    let brief = es2.list_snapshots("shared", false).await?;
    assert_eq!(brief[0].shards, None);

    let restored = es2
        .restore("shared", "snap-1", &RestoreRequest::default(), true)
        .await?;
    let RestoreResponse::Completed(done) = restored else {
        return Err(format!("expected a completed restore, got {restored:?}").into());
    };
    assert_eq!(done.shards.successful, 2);
    assert_eq!(count(&clone, "logs-1").await?, 5);
    assert_eq!(count(&clone, "logs-2").await?, 3);
    let recovery = es2.recovery(&["logs-1".to_string()]).await?;
    assert!(recovery.is_done(), "{recovery}");
    assert_eq!(recovery.shards[0].recovery_type, "SNAPSHOT");
    let health = es2
        .health(Some(HealthStatus::Green), Some(Duration::from_secs(2)))
        .await?;
    assert_eq!(
        (health.status, health.timed_out),
        (HealthStatus::Green, false)
    );

    // The read-only registration refuses every write, as Elasticsearch does.
    let refused = es2
        .create_snapshot("shared", "snap-2", &CreateSnapshot::default(), true)
        .await;
    let Err(error @ ElasticError::ReadOnlyRepository(_)) = refused else {
        return Err(format!("expected a read-only refusal, got {refused:?}").into());
    };
    assert_eq!(
        wire(&error),
        (Some(500), "repository_exception".to_string())
    );
    assert_eq!(
        reason(&error),
        "[shared] cannot create snapshot in a readonly repository"
    );
    let refused = es2.delete_snapshot("shared", "snap-1").await;
    assert!(
        matches!(refused, Err(ElasticError::ReadOnlyRepository(_))),
        "{refused:?}"
    );

    source.shutdown().await?;
    clone.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn restoring_over_an_open_index_conflicts_and_a_rename_avoids_it() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("rename", root.path(), SimFaults::default()).await?;
    seed(&cluster, "orders", 4).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;
    es.create_snapshot("repo", "before", &CreateSnapshot::default(), true)
        .await?;

    let conflict = es
        .restore("repo", "before", &RestoreRequest::default(), true)
        .await;
    let Err(error @ ElasticError::IndexAlreadyExists(_)) = conflict else {
        return Err(format!("expected a conflict, got {conflict:?}").into());
    };
    assert_eq!(
        wire(&error),
        (Some(500), "snapshot_restore_exception".to_string())
    );
    assert!(
        reason(&error).contains(
            "cannot restore index [orders] because an open index with same name already exists in the cluster"
        ),
        "{error}"
    );

    let renamed = RestoreRequest {
        indices: vec!["orders".to_string()],
        rename_pattern: Some("(.+)".to_string()),
        rename_replacement: Some("restored-$1".to_string()),
        ..RestoreRequest::default()
    };
    es.restore("repo", "before", &renamed, true).await?;
    assert_eq!(count(&cluster, "restored-orders").await?, 4);

    // Over a closed index, the restore replaces what it held.
    seed(&cluster, "orders-extra", 0).await?;
    call(
        &cluster,
        reqwest::Method::PUT,
        "/orders/_doc/late",
        Some(serde_json::json!({ "late": true })),
    )
    .await?;
    assert_eq!(count(&cluster, "orders").await?, 5);
    let (status, _) = call(&cluster, reqwest::Method::POST, "/orders/_close", None).await?;
    assert_eq!(status, 200);
    let only_orders = RestoreRequest {
        indices: vec!["orders".to_string()],
        ..RestoreRequest::default()
    };
    es.restore("repo", "before", &only_orders, true).await?;
    assert_eq!(count(&cluster, "orders").await?, 4);

    let missing = RestoreRequest {
        indices: vec!["nope".to_string()],
        ..RestoreRequest::default()
    };
    let refused = es.restore("repo", "before", &missing, true).await;
    assert!(
        matches!(&refused, Err(e @ ElasticError::SnapshotRestore(_)) if reason(e).contains("indices [nope] missing")),
        "{refused:?}"
    );
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn deleted_and_unknown_snapshots_and_repositories() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("delete", root.path(), SimFaults::default()).await?;
    seed(&cluster, "data", 2).await?;
    let es = client(&cluster)?;

    let missing_repo = es.list_snapshots("nowhere", true).await;
    let Err(error @ ElasticError::RepositoryMissing(_)) = missing_repo else {
        return Err(format!("expected a missing repository, got {missing_repo:?}").into());
    };
    assert_eq!(
        wire(&error),
        (Some(404), "repository_missing_exception".to_string())
    );

    es.put_repository("repo", &fs_repo("repo")).await?;
    es.create_snapshot("repo", "one", &CreateSnapshot::default(), true)
        .await?;
    es.create_snapshot("repo", "two", &CreateSnapshot::default(), true)
        .await?;
    assert_eq!(es.list_snapshots("repo", true).await?.len(), 2);
    let status = es.snapshot_status("repo", "one").await?;
    assert_eq!(status.shards_stats.done, 1);
    assert!(status.stats.total.size_in_bytes > 0);

    es.delete_snapshot("repo", "one").await?;
    let names: Vec<String> = es
        .list_snapshots("repo", true)
        .await?
        .into_iter()
        .map(|s| s.snapshot)
        .collect();
    assert_eq!(names, vec!["two"]);
    let gone = es.get_snapshot("repo", "one").await;
    let Err(error @ ElasticError::SnapshotMissing(_)) = gone else {
        return Err(format!("expected a missing snapshot, got {gone:?}").into());
    };
    assert_eq!(
        wire(&error),
        (Some(404), "snapshot_missing_exception".to_string())
    );
    assert_eq!(reason(&error), "[repo:one] is missing");
    let again = es.delete_snapshot("repo", "one").await;
    assert!(
        matches!(again, Err(ElasticError::SnapshotMissing(_))),
        "{again:?}"
    );
    let restore = es
        .restore("repo", "one", &RestoreRequest::default(), true)
        .await;
    assert!(
        matches!(restore, Err(ElasticError::SnapshotRestore(_))),
        "{restore:?}"
    );

    // A location outside path.repo is refused, and so is an unknown type.
    let outside = es.put_repository("etc", &fs_repo("/etc")).await;
    assert!(
        matches!(&outside, Err(e) if wire(e) == (Some(500), "repository_exception".to_string())
            && reason(e).contains("doesn't match any of the locations specified by path.repo")),
        "{outside:?}"
    );
    es.delete_repository("repo").await?;
    let after = es.list_snapshots("repo", true).await;
    assert!(
        matches!(after, Err(ElasticError::RepositoryMissing(_))),
        "{after:?}"
    );
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn snapshot_names_resolve_date_math_and_are_checked() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("names", root.path(), SimFaults::default()).await?;
    seed(&cluster, "data", 1).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;

    let before = resolve_snapshot_name("<nightly-{now/d}>", Utc::now())?;
    let created = es
        .create_snapshot(
            "repo",
            "<nightly-{now/d}>",
            &CreateSnapshot::default(),
            true,
        )
        .await?;
    let after = resolve_snapshot_name("<nightly-{now/d}>", Utc::now())?;
    let CreateSnapshotResponse::Completed(info) = created else {
        return Err(format!("expected a completed snapshot, got {created:?}").into());
    };
    assert!(
        info.snapshot == before || info.snapshot == after,
        "{} is neither {before} nor {after}",
        info.snapshot
    );
    assert!(info.snapshot.starts_with("nightly-"));
    es.get_snapshot("repo", &info.snapshot).await?;

    let duplicate = es
        .create_snapshot("repo", &info.snapshot, &CreateSnapshot::default(), true)
        .await;
    let Err(error @ ElasticError::InvalidSnapshotName(_)) = duplicate else {
        return Err(format!("expected a duplicate name, got {duplicate:?}").into());
    };
    assert_eq!(
        wire(&error),
        (Some(400), "invalid_snapshot_name_exception".to_string())
    );
    assert!(reason(&error).ends_with("snapshot with the same name already exists"));

    let upper = es
        .create_snapshot("repo", "Nightly", &CreateSnapshot::default(), true)
        .await;
    assert!(
        matches!(&upper, Err(e @ ElasticError::InvalidSnapshotName(_)) if reason(e).ends_with("must be lowercase")),
        "{upper:?}"
    );
    let accepted = es
        .create_snapshot("repo", "<later-{now/d}>", &CreateSnapshot::default(), false)
        .await?;
    assert!(
        matches!(&accepted, CreateSnapshotResponse::Accepted { predicted_name: Some(n) } if n.starts_with("later-")),
        "{accepted:?}"
    );
    cluster.shutdown().await?;
    Ok(())
}
