//! The handler against a SQLite store and simulated clusters: malformed
//! events are rejected without a retry, schedules that outlived their
//! deployment are skipped, and the summary is JSON.

use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_snapshots::Snapshotter;
use floe_snapshotter::{ScheduledEvent, handle};
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use serde_json::json;
use std::sync::Arc;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const DEP: &str = "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b";
const POL: &str = "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c";

fn snapshotter() -> Result<Snapshotter, Box<dyn std::error::Error>> {
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let clusters = Arc::new(SimulatedClusters::new(
        compute,
        SimulatedClustersConfig::default(),
    ));
    Ok(Snapshotter::new(store, clusters))
}

#[test]
fn events_are_checked_before_they_reach_storage_keys() {
    let ok = ScheduledEvent::parse(json!({"org": "acme", "deployment_id": DEP, "policy_id": POL}));
    assert_eq!(
        ok,
        Ok(ScheduledEvent {
            org: "acme".into(),
            deployment_id: DEP.into(),
            policy_id: POL.into()
        })
    );
    for bad in [
        json!({"org": "acme", "deployment_id": DEP}),
        json!({"org": "acme", "deployment_id": DEP, "policy_id": POL, "extra": 1}),
        json!({"org": "ACME#x", "deployment_id": DEP, "policy_id": POL}),
        json!({"org": "acme", "deployment_id": "../x", "policy_id": POL}),
        json!({"org": "acme", "deployment_id": DEP, "policy_id": "p#1"}),
        json!("just a string"),
    ] {
        assert!(ScheduledEvent::parse(bad.clone()).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn a_malformed_event_is_rejected_not_retried() -> TestResult {
    let s = snapshotter()?;
    let answer = handle(&s, json!({"deployment_id": DEP})).await?;
    assert_eq!(answer["outcome"], "rejected");
    assert!(answer["reason"].as_str().is_some_and(|r| r.contains("org")));
    Ok(())
}

#[tokio::test]
async fn a_schedule_without_its_deployment_is_skipped() -> TestResult {
    let s = snapshotter()?;
    let answer = handle(
        &s,
        json!({"org": "acme", "deployment_id": DEP, "policy_id": POL}),
    )
    .await?;
    assert_eq!(answer["outcome"], "skipped");
    assert_eq!(answer["reason"], "the deployment no longer exists");
    assert_eq!(answer["deployment_id"], DEP);
    assert_eq!(answer["deleted"], json!([]));
    Ok(())
}
