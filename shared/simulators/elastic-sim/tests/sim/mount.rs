//! Searchable-snapshot mounts.

use crate::common::{TestResult, call, client, count, fs_repo, seed, start, start_trial, wire};
use floe_elastic::{CreateSnapshot, ElasticError, MountRequest, MountStorage};
use floe_elastic_sim::SimFaults;
use serde_json::json;

#[tokio::test]
async fn a_mounted_snapshot_is_readable_and_refuses_writes() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("mount", root.path(), SimFaults::default()).await?;
    start_trial(&cluster).await?;
    seed(&cluster, "events", 6).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;
    es.create_snapshot("repo", "s", &CreateSnapshot::default(), true)
        .await?;

    let request = MountRequest {
        index: "events".to_string(),
        renamed_index: Some("events-frozen".to_string()),
        storage: MountStorage::SharedCache,
        ..MountRequest::default()
    };
    es.mount("repo", "s", &request, true).await?;
    assert_eq!(count(&cluster, "events-frozen").await?, 6);

    let (status, body) = call(
        &cluster,
        reqwest::Method::PUT,
        "/events-frozen/_doc/new",
        Some(json!({ "x": 1 })),
    )
    .await?;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["type"], "cluster_block_exception");
    assert_eq!(
        body["error"]["reason"],
        "index [events-frozen] blocked by: [FORBIDDEN/8/index write (api)];"
    );
    let (_, index) = call(&cluster, reqwest::Method::GET, "/events-frozen", None).await?;
    let settings = &index["events-frozen"]["settings"]["index"];
    assert_eq!(settings["store"]["type"], "snapshot");
    assert_eq!(settings["store"]["snapshot"]["partial"], "true");
    assert_eq!(settings["number_of_replicas"], "0");

    let full = MountRequest {
        index: "events".to_string(),
        ..MountRequest::default()
    };
    let conflict = es.mount("repo", "s", &full, true).await;
    let Err(error @ ElasticError::IndexAlreadyExists(_)) = conflict else {
        return Err(format!("expected a conflict, got {conflict:?}").into());
    };
    assert_eq!(
        wire(&error),
        (Some(500), "snapshot_restore_exception".to_string())
    );
    let (status, _) = call(&cluster, reqwest::Method::DELETE, "/events", None).await?;
    assert_eq!(status, 200);
    es.mount("repo", "s", &full, true).await?;
    assert_eq!(count(&cluster, "events").await?, 6);
    let (_, index) = call(&cluster, reqwest::Method::GET, "/events", None).await?;
    assert_eq!(
        index["events"]["settings"]["index"]["store"]["snapshot"]["partial"],
        "false"
    );
    cluster.shutdown().await?;
    Ok(())
}
