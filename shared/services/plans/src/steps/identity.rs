//! The deployment's own node identity: node-identity of the create and
//! start plans (before the launch templates that name it), forget-identity
//! of the delete plan and of a failed create's unwinding.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::IdentityOutput;
use serde_json::Value;

impl DeploymentSteps {
    /// The deployment's role and instance profile exist, allowed to read its
    /// own parameters only. Without a node identity port configured, the
    /// nodes keep the compute adapter's profile and this step does nothing.
    pub(crate) async fn ensure_identity(&self, ctx: &StepContext<'_>) -> StepResult {
        let Some(identity) = &self.identity else {
            return Ok(Outcome::Done(Value::Null));
        };
        let profile = identity.ensure(&ctx.plan.deployment_id).await?;
        ctx.log(format!("node identity {profile}"));
        Ok(done(&IdentityOutput {
            instance_profile: profile,
        }))
    }

    /// The deployment's node identity is gone (a delete, a failed create).
    pub(crate) async fn forget_identity(&self, ctx: &StepContext<'_>) -> StepResult {
        let Some(identity) = &self.identity else {
            return Ok(Outcome::Done(Value::Null));
        };
        identity.forget(&ctx.plan.deployment_id).await?;
        Ok(Outcome::Done(Value::Null))
    }

    /// The instance profile a launch template of this plan names: the one
    /// node-identity made, else (a plan without that step, such as an
    /// update) ensured now, else none.
    pub(crate) async fn instance_profile(
        &self,
        ctx: &StepContext<'_>,
    ) -> Result<Option<String>, StepFailure> {
        let Some(identity) = &self.identity else {
            return Ok(None);
        };
        if let Some(made) = ctx.optional_output_of::<IdentityOutput>("node-identity")? {
            return Ok(Some(made.instance_profile));
        }
        Ok(Some(identity.ensure(&ctx.plan.deployment_id).await?))
    }
}
