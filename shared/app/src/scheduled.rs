//! What a schedule's firing starts: a restore drill from a deployment's
//! drill schedule (the worker on AWS, where the schedule puts its job on
//! the work queue, and local mode's scheduler), and, in local mode, the
//! snapshotter's run of a policy (on AWS the snapshotter function is that
//! schedule's target).

use crate::{App, AppError, Manager};
use floe_domain::deployment::DeploymentStatus;
use floe_ports::{DrillJob, DrillStarter, QueueError, ScheduledDrill, ScheduledJob};
use floe_snapshots::Snapshotter;

/// The author a scheduled drill's plan records: no person asked for it.
pub const DRILL_SCHEDULE_SUBJECT: &str = "floe:drill-schedule";

impl App {
    /// Starts the drill the deployment's drill schedule describes, as it
    /// is now (a schedule carries ids only). What makes a drill impossible
    /// now is a skip, not an error: the schedule, changed or removed, or a
    /// deployment that is not running, or a drill still running, or no
    /// successful snapshot yet. The next firing tries again; a skip is
    /// logged with its reason.
    pub async fn start_scheduled_drill(&self, job: &DrillJob) -> Result<ScheduledDrill, AppError> {
        let skip = |reason: String| {
            tracing::warn!(org = %job.org, deployment = %job.deployment_id, %reason, "scheduled drill skipped");
            Ok(ScheduledDrill::Skipped { reason })
        };
        let Some(deployment) = self
            .store
            .get_deployment(&job.org, &job.deployment_id)
            .await?
        else {
            return skip("the deployment no longer exists".into());
        };
        let deployment = deployment.value;
        let Some(schedule) = deployment.spec.drill_schedule else {
            return skip("the deployment has no drill schedule any more".into());
        };
        if !matches!(
            deployment.status,
            DeploymentStatus::Running | DeploymentStatus::Reconfiguring
        ) {
            return skip(format!("the deployment is {}", deployment.status.as_str()));
        }
        let who = Manager::for_schedule(&job.org);
        match self
            .start_drill(&who, &job.deployment_id, schedule.drill)
            .await
        {
            Ok(drill) => {
                tracing::info!(org = %job.org, deployment = %job.deployment_id, drill = %drill.id, "scheduled drill started");
                Ok(ScheduledDrill::Started { drill_id: drill.id })
            }
            Err(e @ (AppError::Unavailable { .. } | AppError::ConcurrentChange)) => Err(e),
            Err(e) => skip(e.to_string()),
        }
    }
}

#[async_trait::async_trait]
impl DrillStarter for App {
    async fn start_scheduled_drill(&self, job: &DrillJob) -> Result<ScheduledDrill, QueueError> {
        App::start_scheduled_drill(self, job)
            .await
            .map_err(|e| QueueError(format!("the drill was not started: {e}")))
    }
}

/// Local mode's firings: each job goes where its schedule sends it on AWS
/// (the snapshotter, or the drill use case).
pub struct LocalFirings {
    pub app: App,
    pub snapshotter: Snapshotter,
}

#[async_trait::async_trait]
impl floe_schedules::Fire for LocalFirings {
    async fn fire(&self, job: ScheduledJob) {
        match job {
            ScheduledJob::Snapshot(job) => match self
                .snapshotter
                .run_scheduled(&job.org, &job.deployment_id, &job.policy_id)
                .await
            {
                Ok(summary) => tracing::info!(?summary, "scheduled snapshot"),
                Err(e) => {
                    tracing::warn!(error = %e, deployment = %job.deployment_id, policy = %job.policy_id, "scheduled snapshot failed")
                }
            },
            ScheduledJob::Drill { drill } => {
                if let Err(e) = self.app.start_scheduled_drill(&drill).await {
                    tracing::warn!(error = %e, deployment = %drill.deployment_id, "scheduled drill not started; the next firing tries again");
                }
            }
        }
    }
}
