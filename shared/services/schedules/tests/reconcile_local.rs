//! The shared reconciliation scenario on the in-process scheduler and the
//! SQLite store, and what the reconciler does when listing fails.

use async_trait::async_trait;
use floe_domain::deployment::DeploymentStatus;
use floe_schedules::conformance::{self, reconciliation_scenario};
use floe_schedules::{
    ExistingSchedule, LocalScheduler, ManualClock, ReconcileError, ScheduleSpec, Scheduler,
    SchedulerError, SystemClock, reconcile_deployment,
};
use floe_store::{Backend, Store};
use std::sync::Arc;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn sqlite_store(
    dir: &tempfile::TempDir,
) -> Result<Store, Box<dyn std::error::Error + Send + Sync>> {
    let backend: Arc<dyn Backend> = Arc::new(floe_store_sqlite::SqliteBackend::open(
        &dir.path().join("floe.db"),
    )?);
    Ok(Store::new(backend))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scenario_passes_on_the_local_scheduler() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = sqlite_store(&dir)?;
    let scheduler = LocalScheduler::new(Arc::new(SystemClock));
    reconciliation_scenario(&store, &scheduler).await?;
    assert!(scheduler.schedules().is_empty(), "the scenario cleans up");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciled_schedules_fire_the_attached_policies() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = sqlite_store(&dir)?;
    let start = chrono::DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")?.to_utc();
    let clock = Arc::new(ManualClock::new(start));
    let scheduler = LocalScheduler::new(clock.clone());
    let org = conformance::fresh_org();
    store
        .create_repository(&conformance::repository(&org, "main"))
        .await?;
    let p = conformance::policy(&org, "main", conformance::interval("30m"))?;
    store.create_policy(&p).await?;
    let (d, plan) = conformance::deployment(&org, DeploymentStatus::Running, &[&p.id]);
    store.create_deployment(&d, &plan, None).await?;
    reconcile_deployment(&store, &scheduler, &org, &d.id).await?;
    clock.advance(std::time::Duration::from_secs(3600));
    let due = scheduler.due_firings(floe_schedules::Clock::now(clock.as_ref()));
    assert_eq!(due.len(), 3);
    assert!(due.iter().all(
        |f| matches!(&f.job, floe_schedules::ScheduledJob::Snapshot(j)
            if j.policy_id == p.id && j.deployment_id == d.id && j.org == org)
    ));
    Ok(())
}

struct ListFails;

#[async_trait]
impl Scheduler for ListFails {
    async fn put(&self, _: &ScheduleSpec) -> Result<(), SchedulerError> {
        Err(SchedulerError::Failed("must not be called".into()))
    }
    async fn delete(&self, _: &str) -> Result<(), SchedulerError> {
        Err(SchedulerError::Failed("must not be called".into()))
    }
    async fn list(&self, _: &str) -> Result<Vec<ExistingSchedule>, SchedulerError> {
        Err(SchedulerError::Transient("throttled".into()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_list_changes_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = sqlite_store(&dir)?;
    let org = conformance::fresh_org();
    store
        .create_repository(&conformance::repository(&org, "main"))
        .await?;
    let p = conformance::policy(&org, "main", conformance::interval("30m"))?;
    store.create_policy(&p).await?;
    let (d, plan) = conformance::deployment(&org, DeploymentStatus::Running, &[&p.id]);
    store.create_deployment(&d, &plan, None).await?;
    let result = reconcile_deployment(&store, &ListFails, &org, &d.id).await;
    match result {
        Err(e @ ReconcileError::List(_)) => assert!(e.is_transient()),
        other => return Err(format!("expected a list failure, got {other:?}").into()),
    }
    Ok(())
}
