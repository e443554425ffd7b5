//! The parameters a new cluster bootstraps from: bootstrap-masters, and
//! forget-parameters, which removes every one of a deployment's.

use super::target;
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::StepResult;
use crate::outputs::{BootstrapOutput, LaunchOutput};
use floe_domain::deployment::NodeRole;
use serde_json::Value;

impl DeploymentSteps {
    /// The master-eligible instances this plan launched bootstrap the new
    /// cluster: their ids go where their boot script reads
    /// `cluster.initial_master_nodes`. Written right after the launches,
    /// long before a node has booted far enough to read it.
    /// A start that adopted the cluster a plan ended by force left writes
    /// nothing: its new nodes join that cluster, and no second one may
    /// bootstrap.
    pub(crate) async fn bootstrap_masters(&self, ctx: &StepContext<'_>) -> StepResult {
        if super::nodes::adopted(ctx)?.cluster {
            ctx.log("joining the cluster the leftovers formed: its initial masters are kept");
            return Ok(Outcome::Done(Value::Null));
        }
        let spec = target(ctx.plan)?;
        let mut ids: Vec<String> = Vec::new();
        for g in spec
            .node_groups
            .iter()
            .filter(|g| g.roles.contains(&NodeRole::Master))
        {
            if let Some(launched) =
                ctx.optional_output_of::<LaunchOutput>(&format!("launch:{}", g.id))?
            {
                ids.extend(launched.instance_ids);
            }
        }
        let value = floe_compute::parameters::initial_master_nodes(&ids)?;
        let name = floe_compute::parameters::parameter_name(
            &self.parameter_path(&ctx.plan.deployment_id),
            floe_compute::parameters::INITIAL_MASTER_NODES,
        );
        self.parameters.put(&name, &value).await?;
        ctx.log(format!("{} initial masters in {name}", ids.len()));
        Ok(done(&BootstrapOutput {
            parameter: name,
            masters: ids,
        }))
    }

    /// Every bootstrap parameter of the deployment (a failed create, a delete).
    pub(crate) async fn forget_parameters(&self, ctx: &StepContext<'_>) -> StepResult {
        let n = self
            .parameters
            .delete_under(&self.parameter_path(&ctx.plan.deployment_id))
            .await?;
        if n > 0 {
            ctx.log(format!("{n} bootstrap parameters deleted"));
        }
        Ok(Outcome::Done(Value::Null))
    }
}
