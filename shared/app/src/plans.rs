//! A deployment's plans: the current, pending and finished ones, and
//! cancelling the pending one.

use crate::{App, AppError, Manager, Reader, Resource};
use floe_domain::deployment::Deployment;
use floe_domain::plan::{
    Plan, PlanEnd, PlanKind, PlanSource, PlanStatus, StepError, StepRecord, lifecycle,
};
use floe_ports::ReconcileJob;
use floe_store::{DeploymentOutcome, PageRequest, StoreError, Versioned};
use serde::Serialize;
use utoipa::ToSchema;

/// One plan attempt, as ECE shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanView {
    pub plan_attempt_id: String,
    pub kind: PlanKind,
    pub status: PlanStatus,
    pub source: PlanSource,
    pub created: chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
    pub cancel_requested: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    pub steps: Vec<StepRecord>,
}

impl PlanView {
    pub fn new(p: &Plan) -> PlanView {
        PlanView {
            plan_attempt_id: p.id.clone(),
            kind: p.kind(),
            status: p.status,
            source: p.source.clone(),
            created: p.created,
            finished: p.finished,
            cancel_requested: p.cancel_requested,
            error: p.error.clone(),
            // Step outputs are the engine's working memory, not the user's view.
            steps: p
                .steps
                .iter()
                .map(|s| StepRecord {
                    output: serde_json::Value::Null,
                    ..s.clone()
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentPlans {
    /// The last plan that succeeded: what the deployment runs now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<PlanView>,
    /// The plan in progress, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PlanView>,
    /// Finished plans, oldest first (one page; see `next_cursor`).
    pub history: Vec<PlanView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl App {
    /// The deployment's plans: the current one, the pending one, and one
    /// page of the finished ones.
    pub async fn deployment_plans(
        &self,
        who: &Reader,
        id: &str,
        page: PageRequest,
    ) -> Result<DeploymentPlans, AppError> {
        let deployment = self.load_deployment(&who.org, id).await?;
        let listed = self.store.list_plans(&who.org, id, &page).await?;
        // The pending plan is usually on the page just read (a deployment
        // with few plans, or its last page): read it again only when not.
        let pending = match &deployment.value.pending_plan {
            Some(p) => match listed.items.iter().find(|v| v.value.id == p.plan_id) {
                Some(on_page) => Some(on_page.clone()),
                None => self.store.get_plan(&who.org, id, &p.plan_id).await?,
            },
            None => None,
        };
        let history: Vec<&Plan> = listed
            .items
            .iter()
            .map(|v| &v.value)
            .filter(|p| p.status.is_finished())
            .collect();
        let current = history
            .iter()
            .rev()
            .find(|p| p.status == PlanStatus::Succeeded)
            .map(|p| PlanView::new(p));
        Ok(DeploymentPlans {
            current,
            pending: pending.map(|p| PlanView::new(&p.value)),
            history: history.into_iter().map(PlanView::new).collect(),
            next_cursor: listed.next_cursor,
        })
    }

    /// The deployment's pending plan, unfinished, or 404 naming the
    /// deployment (none pending, or it ended meanwhile).
    async fn unfinished_pending_plan(
        &self,
        org: &str,
        deployment: &Versioned<Deployment>,
    ) -> Result<Versioned<Plan>, AppError> {
        let id = &deployment.value.id;
        let no_plan = || AppError::not_found(Resource::PendingPlan, id);
        let pending = deployment.value.pending_plan.as_ref().ok_or_else(no_plan)?;
        let pv = self
            .store
            .get_plan(org, id, &pending.plan_id)
            .await?
            .ok_or_else(no_plan)?;
        if pv.value.status.is_finished() {
            return Err(no_plan());
        }
        Ok(pv)
    }

    /// Asks the pending plan to stop at its next step boundary and unwind.
    pub async fn cancel_pending_plan(&self, who: &Manager, id: &str) -> Result<PlanView, AppError> {
        let deployment = self.load_deployment(&who.org, id).await?;
        // The engine writes the plan as it goes: retry on a lost race.
        for _ in 0..5 {
            let pv = self.unfinished_pending_plan(&who.org, &deployment).await?;
            let mut plan = pv.value;
            plan.cancel_requested = true;
            match self.store.update_plan(&plan, pv.version).await {
                Ok(_) => {
                    tracing::info!(deployment = %id, plan = %plan.id, "plan cancellation requested");
                    self.wake(&who.org, id, &plan.id).await;
                    return Ok(PlanView::new(&plan));
                }
                Err(StoreError::VersionMismatch { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::ConcurrentChange)
    }

    /// Ends the pending plan at once, where it stands (ECE's
    /// `force_delete`): no further step or undo runs, and the deployment
    /// is marked `failed`, since its nodes are as the plan left them. The
    /// way out of a plan that waits on something that will never come
    /// (nodes that never drain, a cluster that is gone), also while it
    /// unwinds. The plan and the deployment are written in one batch, so a
    /// worker that holds the plan loses its next write and stops.
    pub async fn force_end_pending_plan(
        &self,
        who: &Manager,
        id: &str,
    ) -> Result<PlanView, AppError> {
        for _ in 0..5 {
            let deployment = self.load_deployment(&who.org, id).await?;
            let pv = self.unfinished_pending_plan(&who.org, &deployment).await?;
            let now = chrono::Utc::now();
            let mut plan = pv.value;
            plan.force_end(&who.subject, now);
            let mut next = deployment.value.clone();
            next.pending_plan = None;
            // A move to a stable endpoint ends unfinished; the next update
            // starts it again.
            next.endpoint_moving_to = None;
            next.status = lifecycle::after_plan(&plan, PlanEnd::ForceEnded);
            next.updated = now;
            let outcome = DeploymentOutcome::Update {
                deployment: &next,
                previous: &deployment,
            };
            match self.store.finish_plan(&plan, pv.version, outcome).await {
                Ok(_) => {
                    tracing::warn!(deployment = %id, plan = %plan.id, by = %who.subject, "plan ended by force");
                    self.sync_schedules(ReconcileJob::deployment(&who.org, id))
                        .await;
                    return Ok(PlanView::new(&plan));
                }
                // The engine wrote the plan or the record meanwhile: look again.
                Err(StoreError::VersionMismatch { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::ConcurrentChange)
    }
}
