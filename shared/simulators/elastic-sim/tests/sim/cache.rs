//! A cluster reads a repository once per generation: mounts and restores
//! of a snapshot it has read do not read the repository's data again
//! while `index.latest` names the same generation, and a generation
//! changed by another cluster makes it read again.

use crate::common::{TestResult, client, fs_repo, seed, start, start_trial, wire};
use floe_elastic::{CreateSnapshot, MountRequest, RepositoryRegistration};
use floe_elastic_sim::SimFaults;
use serde_json::json;

fn readonly(location: &str) -> RepositoryRegistration {
    let mut registration = fs_repo(location);
    registration.settings.insert("readonly".into(), json!(true));
    registration
}

fn mount(index: &str, renamed: &str) -> MountRequest {
    MountRequest {
        index: index.into(),
        renamed_index: Some(renamed.into()),
        ..MountRequest::default()
    }
}

#[tokio::test]
async fn repository_data_is_read_again_only_when_its_generation_changes() -> TestResult {
    let root = tempfile::tempdir()?;
    let source = start("source", root.path(), SimFaults::default()).await?;
    seed(&source, "a", 2).await?;
    seed(&source, "b", 1).await?;
    let es = client(&source)?;
    es.put_repository("main", &fs_repo("main")).await?;
    es.create_snapshot("main", "snap-1", &CreateSnapshot::default(), true)
        .await?;
    let latest = root.path().join("main/index.latest");
    let generation: u64 = std::fs::read_to_string(&latest)?.trim().parse()?;

    let clone = start("clone", root.path(), SimFaults::default()).await?;
    start_trial(&clone).await?;
    let es2 = client(&clone)?;
    es2.put_repository("main", &readonly("main")).await?;
    es2.mount("main", "snap-1", &mount("a", "a-1"), true)
        .await?;

    // The repository's data and the snapshot's blob become unreadable, but
    // the generation stays: the clone keeps what it read.
    let index_json = root.path().join("main/index.json");
    let good = std::fs::read(&index_json)?;
    std::fs::write(&index_json, b"not json")?;
    for blob in std::fs::read_dir(root.path().join("main/snapshots"))? {
        std::fs::write(blob?.path(), b"not json")?;
    }
    es2.mount("main", "snap-1", &mount("b", "b-1"), true)
        .await?;
    es2.mount("main", "snap-1", &mount("a", "a-2"), true)
        .await?;

    // Another writer's generation: read again (and here, found broken).
    std::fs::write(&latest, (generation + 1).to_string())?;
    let refused = es2.mount("main", "snap-1", &mount("a", "a-3"), true).await;
    let error = refused.err().ok_or("the mount read the repository again")?;
    assert_eq!(
        wire(&error),
        (Some(500), "repository_exception".to_string())
    );

    // The source writes a good generation over it, which the clone sees.
    std::fs::write(&index_json, good)?;
    es.create_snapshot("main", "snap-2", &CreateSnapshot::default(), true)
        .await?;
    let listed = es2.list_snapshots("main", false).await?;
    let names: Vec<&str> = listed.iter().map(|s| s.snapshot.as_str()).collect();
    assert_eq!(names, ["snap-1", "snap-2"]);
    es2.mount("main", "snap-2", &mount("b", "b-2"), true)
        .await?;
    source.shutdown().await?;
    clone.shutdown().await?;
    Ok(())
}
