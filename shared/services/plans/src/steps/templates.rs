//! A deleted deployment's launch templates: forget-templates of the delete
//! plan. Each create, start and update plan left one per group it launched,
//! named after that plan; they are found by the deployment's tag, so a
//! template of a plan the record no longer remembers goes too.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{StepContext, done};
use crate::failure::StepResult;
use crate::outputs::ForgottenTemplatesOutput;

impl DeploymentSteps {
    /// Every launch template of the deployment goes. Deleting what is gone
    /// succeeds, so a second run (after a crash, or a template deleted in
    /// between) lists what is left and finishes.
    pub(crate) async fn forget_all_templates(&self, ctx: &StepContext<'_>) -> StepResult {
        let names = self
            .compute
            .launch_templates(&ctx.plan.deployment_id)
            .await?;
        for name in &names {
            self.compute.delete_launch_template(name).await?;
        }
        if !names.is_empty() {
            ctx.log(format!("{} launch templates deleted", names.len()));
        }
        Ok(done(&ForgottenTemplatesOutput { deleted: names }))
    }
}
