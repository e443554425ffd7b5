//! Deployments stored before the fleet index existed have no fleet copy:
//! their next write makes one, and deleting them still works. Those stored
//! before its shards have their copy in the one unsharded partition: their
//! next write moves it into their shard, as does `move_to_shard`.

use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_store::backend::{Kind, Record, RecordKey, Write};
use floe_store::{Backend, PageRequest, Store, fleet_shard};
use floe_store_sqlite::SqliteBackend;
use std::sync::Arc;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn deployment() -> Result<Deployment, serde_json::Error> {
    serde_json::from_value(serde_json::json!({
        "id": "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b", "org": "acme",
        "spec": {"name": "old", "version": "8.15.3", "node_groups": [
            {"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.xlarge",
             "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}]},
        "status": "initializing", "pending_plan": null,
        "created": "2026-11-29T10:00:00Z", "updated": "2026-11-29T10:00:00Z"
    }))
}

#[tokio::test]
async fn a_deployment_without_a_fleet_copy_gets_one_on_its_next_write() -> TestResult {
    let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::in_memory()?);
    let store = Store::new(backend.clone());
    let d = deployment()?;
    // As an older Floe wrote it: the record alone.
    backend
        .write(vec![Write::Create(Record {
            key: RecordKey::new(&d.org, Kind::Deployment, &d.id),
            body: serde_json::to_string(&d)?,
            version: 1,
            refs: 0,
            attrs: floe_store::stores::deployment_attrs(&d),
            expires_at: None,
        })])
        .await?;
    let previous = store.get_deployment(&d.org, &d.id).await?.ok_or("stored")?;
    let mut running = d.clone();
    running.status = DeploymentStatus::Running;
    let version = store.replace_deployment(&running, &previous, None).await?;
    let shard = fleet_shard(&d.org, &d.id);
    let fleet = store
        .list_fleet_shard(shard, &PageRequest::default())
        .await?;
    assert_eq!(
        fleet
            .items
            .iter()
            .map(|v| (v.value.id.as_str(), v.version))
            .collect::<Vec<_>>(),
        [(d.id.as_str(), version)]
    );
    // And the copy follows the next write too.
    let previous = store.get_deployment(&d.org, &d.id).await?.ok_or("stored")?;
    let version = store.replace_deployment(&running, &previous, None).await?;
    let fleet = store
        .list_fleet_shard(shard, &PageRequest::default())
        .await?;
    assert_eq!(fleet.items.first().map(|v| v.version), Some(version));

    // A record without a copy still deletes.
    let mut other = deployment()?;
    other.id = "0193a0c4d2b77c3e9a4b5c6d7e8f9a0c".into();
    backend
        .write(vec![Write::Create(Record {
            key: RecordKey::new(&other.org, Kind::Deployment, &other.id),
            body: serde_json::to_string(&other)?,
            version: 1,
            refs: 0,
            attrs: floe_store::stores::deployment_attrs(&other),
            expires_at: None,
        })])
        .await?;
    let stored = store
        .get_deployment(&other.org, &other.id)
        .await?
        .ok_or("stored")?;
    store.delete_deployment(&stored).await?;
    assert!(store.get_deployment(&other.org, &other.id).await?.is_none());
    Ok(())
}

/// A record and its fleet copy as a Floe before the shards wrote them: the
/// copy in the one unsharded partition.
async fn unsharded(backend: &Arc<dyn Backend>, d: &Deployment) -> TestResult {
    let body = serde_json::to_string(d)?;
    let attrs = floe_store::stores::deployment_attrs(d);
    backend
        .write(vec![
            Write::Create(Record {
                key: RecordKey::new(&d.org, Kind::Deployment, &d.id),
                body: body.clone(),
                version: 1,
                refs: 0,
                attrs: attrs.clone(),
                expires_at: None,
            }),
            Write::Create(Record {
                key: RecordKey::new("~system", Kind::Fleet, &format!("{}#{}", d.org, d.id)),
                body,
                version: 1,
                refs: 0,
                attrs,
                expires_at: None,
            }),
        ])
        .await?;
    Ok(())
}

#[tokio::test]
async fn an_unsharded_fleet_copy_moves_into_its_shard_and_goes_with_its_record() -> TestResult {
    let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::in_memory()?);
    let store = Store::new(backend.clone());
    let mut moved_by_write = deployment()?;
    moved_by_write.status = DeploymentStatus::Running;
    let mut moved_by_backfill = moved_by_write.clone();
    moved_by_backfill.id = "0193a0c4d2b77c3e9a4b5c6d7e8f9a0d".into();
    let mut deleted = moved_by_write.clone();
    deleted.id = "0193a0c4d2b77c3e9a4b5c6d7e8f9a0e".into();
    for d in [&moved_by_write, &moved_by_backfill, &deleted] {
        unsharded(&backend, d).await?;
    }
    let page = PageRequest::default();
    assert_eq!(store.list_unsharded_fleet(&page).await?.items.len(), 3);
    let in_shard = |d: &Deployment| {
        let store = store.clone();
        let (org, id) = (d.org.clone(), d.id.clone());
        async move {
            let listed = store
                .list_fleet_shard(fleet_shard(&org, &id), &PageRequest::default())
                .await?;
            Ok::<_, floe_store::StoreError>(
                listed
                    .items
                    .iter()
                    .find(|v| v.value.id == id)
                    .map(|v| v.version),
            )
        }
    };
    assert_eq!(in_shard(&moved_by_write).await?, None);

    // A write moves the copy.
    let previous = store
        .get_deployment(&moved_by_write.org, &moved_by_write.id)
        .await?
        .ok_or("stored")?;
    let version = store
        .replace_deployment(&moved_by_write, &previous, None)
        .await?;
    assert_eq!(in_shard(&moved_by_write).await?, Some(version));

    // The backfill's move: same version, the copy in its shard.
    let current = store
        .get_deployment(&moved_by_backfill.org, &moved_by_backfill.id)
        .await?
        .ok_or("stored")?;
    store.move_to_shard(&current).await?;
    assert_eq!(in_shard(&moved_by_backfill).await?, Some(current.version));
    let after = store
        .get_deployment(&moved_by_backfill.org, &moved_by_backfill.id)
        .await?
        .ok_or("stored")?;
    assert_eq!(after.version, current.version, "a move is no change");

    // A delete removes the unsharded copy too.
    let current = store
        .get_deployment(&deleted.org, &deleted.id)
        .await?
        .ok_or("stored")?;
    store.delete_deployment(&current).await?;
    assert!(store.list_unsharded_fleet(&page).await?.items.is_empty());
    Ok(())
}
