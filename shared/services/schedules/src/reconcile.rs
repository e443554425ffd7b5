//! Makes a scheduler hold exactly the schedules the store implies.
//!
//! The desired state of one deployment: one schedule per attached policy
//! that exists and is enabled, and one for its drill schedule, while the deployment is `running` or
//! `reconfiguring` (a reconfiguring cluster still serves and can still be
//! snapshotted, and dropping its schedules for the length of a resize would
//! skip snapshots for nothing). `initializing`, `stopping`, `stopped` and
//! `failed` deployments, and deployments that no longer exist, have none:
//! there is no healthy cluster to snapshot, and the deployment's next
//! transition to `running` reconciles again.
//!
//! Reconciling lists the deployment's schedules by name prefix and creates
//! what is missing, rewrites what differs and deletes what is not wanted.
//! Every step is idempotent, so a run that failed halfway is repaired by the
//! next one; a run that finds everything in place writes nothing.
//!
//! Two runs for the same deployment at the same time can interleave (one
//! reads the old policy, the other deletes, the first re-creates), so the
//! callers should reconcile a deployment from one place at a time (the
//! worker) or reconcile again after the last change; the snapshotter also
//! re-reads the policy and deployment when a schedule fires.

use crate::names::{deployment_prefix, drill_schedule_name, schedule_name};
use crate::port::{
    DrillJob, ExistingSchedule, ScheduleSpec, Scheduler, SchedulerError, SnapshotJob,
};
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_ports::ReconcileJob;
use floe_store::{Filter, PageRequest, Store, StoreError};
use std::collections::{BTreeMap, BTreeSet};

/// What a reconciliation changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileSummary {
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    /// Wanted schedules that were already right.
    pub unchanged: usize,
}

impl ReconcileSummary {
    /// Whether the run wrote nothing.
    pub fn is_noop(&self) -> bool {
        self.created == 0 && self.updated == 0 && self.deleted == 0
    }

    fn add(&mut self, other: &ReconcileSummary) {
        self.created += other.created;
        self.updated += other.updated;
        self.deleted += other.deleted;
        self.unchanged += other.unchanged;
    }
}

/// One schedule that could not be brought in line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleFailure {
    pub name: String,
    pub error: SchedulerError,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// The desired state could not be read; nothing was changed.
    #[error("reading the desired schedules failed: {0}")]
    Store(#[from] StoreError),
    /// The existing schedules could not be listed; nothing was changed.
    #[error("listing the existing schedules failed: {0}")]
    List(SchedulerError),
    /// Some writes failed; the others were done (see `summary`). Running
    /// the reconciliation again finishes the job.
    #[error("{} schedule(s) could not be reconciled, first: {}", failures.len(), first_failure(failures))]
    Incomplete {
        summary: ReconcileSummary,
        failures: Vec<ScheduleFailure>,
    },
}

fn first_failure(failures: &[ScheduleFailure]) -> String {
    failures
        .first()
        .map(|f| format!("{}: {}", f.name, f.error))
        .unwrap_or_default()
}

impl ReconcileError {
    /// Whether running again later may succeed without anyone's help.
    pub fn is_transient(&self) -> bool {
        match self {
            ReconcileError::Store(e) => matches!(e, StoreError::Unavailable(_)),
            ReconcileError::List(e) => e.is_transient(),
            ReconcileError::Incomplete { failures, .. } => {
                failures.iter().all(|f| f.error.is_transient())
            }
        }
    }
}

/// Whether a deployment in `status` keeps its snapshot schedules.
pub fn status_has_schedules(status: DeploymentStatus) -> bool {
    matches!(
        status,
        DeploymentStatus::Running | DeploymentStatus::Reconfiguring
    )
}

/// The schedules the store wants for one deployment, by name.
pub async fn desired_schedules(
    store: &Store,
    org: &str,
    deployment_id: &str,
) -> Result<BTreeMap<String, ScheduleSpec>, StoreError> {
    let mut desired = BTreeMap::new();
    let Some(deployment) = store.get_deployment(org, deployment_id).await? else {
        return Ok(desired);
    };
    let deployment = deployment.value;
    if !status_has_schedules(deployment.status) {
        return Ok(desired);
    }
    for policy_id in deployment.spec.policies() {
        let Some(policy) = store.get_policy(org, policy_id).await? else {
            // The store refuses to delete an attached policy, so this is a
            // record written around it; without a policy there is nothing to run.
            tracing::warn!(org, deployment_id, policy_id, "attached policy not found");
            continue;
        };
        let policy = policy.value;
        if !policy.spec.enabled {
            continue;
        }
        let name = schedule_name(org, deployment_id, policy_id);
        desired.insert(
            name.clone(),
            ScheduleSpec {
                name,
                expression: policy.schedule_expression.expression.clone(),
                timezone: policy.schedule_expression.timezone.clone(),
                input: SnapshotJob {
                    org: org.to_string(),
                    deployment_id: deployment_id.to_string(),
                    policy_id: policy_id.clone(),
                }
                .into(),
            },
        );
    }
    if let Some(drill) = &deployment.spec.drill_schedule {
        match drill.expression() {
            Some(expression) => {
                let name = drill_schedule_name(org, deployment_id);
                desired.insert(
                    name.clone(),
                    ScheduleSpec {
                        name,
                        expression: expression.expression,
                        timezone: expression.timezone,
                        input: DrillJob {
                            org: org.to_string(),
                            deployment_id: deployment_id.to_string(),
                        }
                        .into(),
                    },
                );
            }
            // Checked when written; a record that fails it was written
            // around the API, and has no schedule to keep.
            None => tracing::warn!(org, deployment_id, "drill schedule not readable"),
        }
    }
    Ok(desired)
}

/// Makes `scheduler` hold exactly the deployment's desired schedules.
pub async fn reconcile_deployment(
    store: &Store,
    scheduler: &dyn Scheduler,
    org: &str,
    deployment_id: &str,
) -> Result<ReconcileSummary, ReconcileError> {
    let desired = desired_schedules(store, org, deployment_id).await?;
    let existing: BTreeMap<String, ExistingSchedule> = scheduler
        .list(&deployment_prefix(org, deployment_id))
        .await
        .map_err(ReconcileError::List)?
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();

    let mut summary = ReconcileSummary::default();
    let mut failures = Vec::new();
    for (name, spec) in &desired {
        let current = existing.get(name);
        if current.is_some_and(|c| c.spec.as_ref() == Some(spec)) {
            summary.unchanged += 1;
            continue;
        }
        match scheduler.put(spec).await {
            Ok(()) if current.is_some() => summary.updated += 1,
            Ok(()) => summary.created += 1,
            Err(error) => failures.push(ScheduleFailure {
                name: name.clone(),
                error,
            }),
        }
    }
    for name in existing.keys().filter(|n| !desired.contains_key(*n)) {
        match scheduler.delete(name).await {
            Ok(()) => summary.deleted += 1,
            Err(error) => failures.push(ScheduleFailure {
                name: name.clone(),
                error,
            }),
        }
    }
    tracing::info!(
        org,
        deployment_id,
        created = summary.created,
        updated = summary.updated,
        deleted = summary.deleted,
        unchanged = summary.unchanged,
        failed = failures.len(),
        "schedules reconciled"
    );
    if failures.is_empty() {
        Ok(summary)
    } else {
        Err(ReconcileError::Incomplete { summary, failures })
    }
}

/// Reconciles every deployment of the organization that has `policy_id`
/// attached, after the policy changed. Deployments that had it detached
/// were reconciled by that change. One failing deployment does not stop
/// the others; the failures are reported together.
pub async fn reconcile_policy(
    store: &Store,
    scheduler: &dyn Scheduler,
    org: &str,
    policy_id: &str,
) -> Result<ReconcileSummary, ReconcileError> {
    let attached = deployments_attaching(store, org, policy_id).await?;
    let mut summary = ReconcileSummary::default();
    let mut failures = Vec::new();
    for deployment_id in attached {
        match reconcile_deployment(store, scheduler, org, &deployment_id).await {
            Ok(s) => summary.add(&s),
            Err(ReconcileError::Incomplete {
                summary: partial,
                failures: f,
            }) => {
                summary.add(&partial);
                failures.extend(f);
            }
            Err(ReconcileError::List(error)) => failures.push(ScheduleFailure {
                name: deployment_prefix(org, &deployment_id),
                error,
            }),
            Err(e @ ReconcileError::Store(_)) => return Err(e),
        }
    }
    if failures.is_empty() {
        Ok(summary)
    } else {
        Err(ReconcileError::Incomplete { summary, failures })
    }
}

/// Ids of the organization's deployments that attach `policy_id`, read a
/// page at a time.
async fn deployments_attaching(
    store: &Store,
    org: &str,
    policy_id: &str,
) -> Result<BTreeSet<String>, StoreError> {
    let mut ids = BTreeSet::new();
    let mut page = PageRequest {
        size: Some(floe_store::stores::MAX_PAGE_SIZE),
        cursor: None,
    };
    loop {
        let result = store
            .list_deployments(org, Filter::default(), &page)
            .await?;
        ids.extend(
            result
                .items
                .iter()
                .map(|v| &v.value)
                .filter(|d| attaches(d, policy_id))
                .map(|d| d.id.clone()),
        );
        match result.next_cursor {
            Some(cursor) => page.cursor = Some(cursor),
            None => return Ok(ids),
        }
    }
}

fn attaches(deployment: &Deployment, policy_id: &str) -> bool {
    deployment.spec.policies().iter().any(|p| p == policy_id)
}

/// Reconciles on the spot: after a plan finishes (a create that succeeded
/// starts the schedules, a shutdown removes them), and whenever a use case
/// says records changed. The worker and local mode use it; the api function
/// sends the same jobs to the worker instead.
pub struct ReconcileNow {
    store: Store,
    scheduler: std::sync::Arc<dyn Scheduler>,
}

impl ReconcileNow {
    pub fn new(store: Store, scheduler: std::sync::Arc<dyn Scheduler>) -> ReconcileNow {
        ReconcileNow { store, scheduler }
    }

    /// Reconciles what `job` names, logging what changed.
    pub async fn run(&self, job: &ReconcileJob) -> Result<ReconcileSummary, ReconcileError> {
        let (what, id, result) = match (&job.deployment_id, &job.policy_id) {
            (Some(d), _) => (
                "deployment",
                d.as_str(),
                reconcile_deployment(&self.store, self.scheduler.as_ref(), &job.org, d).await,
            ),
            (None, Some(p)) => (
                "policy",
                p.as_str(),
                reconcile_policy(&self.store, self.scheduler.as_ref(), &job.org, p).await,
            ),
            (None, None) => return Ok(ReconcileSummary::default()),
        };
        match &result {
            Ok(summary) if !summary.is_noop() => {
                tracing::info!(what, id, ?summary, "schedules reconciled");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(what, id, error = %e, "schedules not reconciled; the next change retries");
            }
        }
        result
    }
}

#[async_trait::async_trait]
impl floe_ports::PlanListener for ReconcileNow {
    async fn finished(&self, org: &str, deployment_id: &str) {
        // The plan's result is recorded; a failure here is retried by the
        // next change or plan end, as reconciliation is idempotent.
        let _ = self
            .run(&ReconcileJob::deployment(org, deployment_id))
            .await;
    }
}

#[async_trait::async_trait]
impl floe_ports::ScheduleSync for ReconcileNow {
    async fn sync(&self, job: ReconcileJob) -> Result<(), floe_ports::QueueError> {
        self.run(&job)
            .await
            .map(|_| ())
            .map_err(|e| floe_ports::QueueError(format!("schedules not reconciled: {e}")))
    }
}
