//! Deployments stored before the fleet index existed have no fleet copy:
//! their next write makes one, and deleting them still works.

use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_store::backend::{Kind, Record, RecordKey, Write};
use floe_store::{Backend, PageRequest, Store};
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
    let fleet = store.list_running_fleet(&PageRequest::default()).await?;
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
    let fleet = store.list_running_fleet(&PageRequest::default()).await?;
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
