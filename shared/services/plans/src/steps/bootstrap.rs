//! The parameters a new cluster bootstraps from: bootstrap-masters, and
//! forget-parameters, which removes every one of a deployment's.

use super::{outcome_of, target};
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::outputs::{BootstrapOutput, LaunchOutput};
use floe_domain::deployment::NodeRole;
use serde_json::Value;

impl DeploymentSteps {
    /// The master-eligible instances this plan launched bootstrap the new
    /// cluster: their ids go where their boot script reads
    /// `cluster.initial_master_nodes`. Written right after the launches,
    /// long before a node has booted far enough to read it.
    pub(crate) async fn bootstrap_masters(&self, ctx: &StepContext<'_>) -> Outcome {
        let spec = match target(ctx.plan) {
            Ok(s) => s,
            Err(e) => return Outcome::Fail(e),
        };
        let mut ids: Vec<String> = Vec::new();
        for g in spec
            .node_groups
            .iter()
            .filter(|g| g.roles.contains(&NodeRole::Master))
        {
            match ctx.optional_output_of::<LaunchOutput>(&format!("launch:{}", g.id)) {
                Ok(Some(launched)) => ids.extend(launched.instance_ids),
                Ok(None) => {}
                Err(e) => return Outcome::Fail(e),
            }
        }
        let value = match floe_compute::parameters::initial_master_nodes(&ids) {
            Ok(v) => v,
            Err(e) => return outcome_of(e),
        };
        let name = floe_compute::parameters::parameter_name(
            &self.parameter_path(&ctx.plan.deployment_id),
            floe_compute::parameters::INITIAL_MASTER_NODES,
        );
        match self.parameters.put(&name, &value).await {
            Ok(()) => {
                ctx.log(format!("{} initial masters in {name}", ids.len()));
                done(&BootstrapOutput {
                    parameter: name,
                    masters: ids,
                })
            }
            Err(e) => outcome_of(e),
        }
    }

    /// Every bootstrap parameter of the deployment (a failed create, a delete).
    pub(crate) async fn forget_parameters(&self, ctx: &StepContext<'_>) -> Outcome {
        match self
            .parameters
            .delete_under(&self.parameter_path(&ctx.plan.deployment_id))
            .await
        {
            Ok(n) => {
                if n > 0 {
                    ctx.log(format!("{n} bootstrap parameters deleted"));
                }
                Outcome::Done(Value::Null)
            }
            Err(e) => outcome_of(e),
        }
    }
}
