//! `remove-snapshots`: a delete with `remove_snapshots=true` removes the
//! deployment's unpinned snapshots through its cluster before the nodes
//! go. The pinned ones stay (and so does the deleted deployment's entry
//! under its repository, listing them); the step's output names both.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done, fail};
use crate::failure::StepResult;

impl DeploymentSteps {
    pub(crate) async fn remove_snapshots(&self, ctx: &StepContext<'_>) -> StepResult {
        if ctx.deployment.spec.repository().is_none() {
            ctx.log("no snapshot repository: no snapshots to remove");
            return Ok(Outcome::Done(serde_json::Value::Null));
        }
        Ok(match self.snapshots.remove_all(ctx.deployment).await {
            Ok(removal) => {
                ctx.log(format!(
                    "{} snapshots removed, {} kept",
                    removal.removed.len(),
                    removal.kept.len()
                ));
                for kept in &removal.kept {
                    ctx.log(format!("kept {kept}"));
                }
                done(&removal)
            }
            Err(e) if e.is_transient() => Outcome::Retry(format!("removing snapshots: {e}")),
            Err(e) => fail(
                "remove_snapshots_failed",
                format!("removing snapshots: {e}"),
            ),
        })
    }
}
