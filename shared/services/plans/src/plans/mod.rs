//! The kinds of deployment plans, one module each. Each declares its steps,
//! in order, with their `run` and `undo` side by side, from the plan's
//! params alone (and, for an update or a shutdown, the spec the deployment
//! runs: data, kept unchanged until the plan ends). How the worker is wired
//! plays no part, so every worker lays out and runs a plan the same way.

pub mod create;
pub mod delete;
pub mod drill;
pub mod heal;
pub mod license;
pub mod reset_password;
pub mod restore;
pub mod shutdown;
pub mod start;
pub mod update;

use crate::step::Saga;
use floe_domain::deployment::Deployment;
use floe_domain::plan::{Plan, PlanParams};

/// The steps of `plan`, a plan of `deployment`.
pub fn saga(plan: &Plan, deployment: &Deployment) -> Saga {
    match &plan.params {
        PlanParams::Create(spec) => create::saga(spec, plan.params.restore().as_ref()),
        PlanParams::Update(target) => update::saga(
            &deployment.spec,
            target,
            deployment.clone_source.as_ref(),
            deployment.endpoint_moving_to.is_some(),
        ),
        PlanParams::Shutdown(params) => shutdown::saga(params, &deployment.spec),
        PlanParams::Delete => delete::saga(),
        PlanParams::DeleteRemovingSnapshots => delete::saga_removing_snapshots(),
        PlanParams::Restore(target) => restore::saga(target),
        PlanParams::Start(params) => start::saga(params, deployment.clone_source.as_ref()),
        PlanParams::ResetPassword => reset_password::saga(),
        PlanParams::Heal(params) => heal::saga(params),
        PlanParams::License => license::saga(),
        PlanParams::Drill(params) => drill::saga(params, plan.params.restore().as_ref()),
    }
}
