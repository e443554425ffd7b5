//! `validate_only` (ECE's name) on a deployment's create and update: a use
//! case of its own beside the real call, which reads what the real call
//! reads and shows the decision the real call would apply. It stores
//! nothing, wakes no worker, seals no password, and answers with what the
//! call would do, including the steps of the plan it would start.

use floe_domain::deployment::{Deployment, DeploymentView};
use floe_domain::plan::{Plan, PlanKind};
use serde::Serialize;
use utoipa::ToSchema;

/// What the real call would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValidationOutcome {
    /// A new deployment with its create plan.
    Create,
    /// A retry of an earlier create with the same idempotency key and body:
    /// the real call answers that create's deployment and creates nothing.
    Replay,
    /// A plan would change the deployment's nodes (an update, or a start
    /// that fixes a deployment that never ran).
    Plan,
    /// The change would be recorded at once, with no plan (name, tags,
    /// policies; any change to a stopped deployment).
    Record,
}

/// A plan the call would start: its kind and its steps, in the order the
/// engine would run them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PlanPreview {
    pub kind: PlanKind,
    #[schema(example = json!(["node-security", "template:hot", "launch:hot", "bootstrap-masters", "wait-running", "wait-joined", "register-repository", "license", "record-access"]))]
    pub steps: Vec<String>,
}

/// The answer to a `validate_only` create or update: nothing was stored.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeploymentValidation {
    pub outcome: ValidationOutcome,
    /// The deployment as the call would leave it, with the spec it asks
    /// for (a plan's target). A create's `id` is empty (the real call
    /// makes one) and its `resource_version` 0; an update's is the
    /// current version; no `credentials` (no password is made).
    pub deployment: DeploymentView,
    /// The plan the call would start; absent when it starts none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanPreview>,
}

/// The steps `plan` would have, as the engine lays them out for
/// `deployment` (an update's and a shutdown's depend on the running spec).
pub(crate) fn preview(plan: &Plan, deployment: &Deployment) -> PlanPreview {
    PlanPreview {
        kind: plan.kind(),
        steps: floe_plans::plans::saga(plan, deployment).ids(),
    }
}

/// The view of `deployment` as a validation shows it: no pending plan
/// (none was recorded) and no credentials.
pub(crate) fn would_be(deployment: &Deployment, version: u64) -> DeploymentView {
    let mut d = deployment.clone();
    d.pending_plan = None;
    d.password_to_apply = None;
    let mut view = DeploymentView::new(&d, version);
    view.credentials = None;
    view
}
