//! The deployment's own node identity: node-identity of the create and
//! start plans (before the launch templates that name it), forget-identity
//! of the delete plan and of a failed create's unwinding.
//!
//! The identity is granted exactly the snapshot paths the plan's nodes
//! need with their own credentials: the deployment's own path of its
//! repository, and read-only the path a clone or a restore reads from.
//! Each ensure writes the whole set, so a restore's source is reachable
//! only until the deployment's next plan.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::IdentityOutput;
use floe_compute::{PathAccess, SnapshotPath};
use serde_json::Value;

impl DeploymentSteps {
    /// The deployment's role and instance profile exist, allowed to read its
    /// own parameters and snapshot paths only. Without a node identity port
    /// configured, the nodes keep the compute adapter's profile and this
    /// step does nothing.
    pub(crate) async fn ensure_identity(&self, ctx: &StepContext<'_>) -> StepResult {
        let Some(identity) = &self.identity else {
            return Ok(Outcome::Done(Value::Null));
        };
        let paths = self.snapshot_paths(ctx).await?;
        let profile = identity.ensure(&ctx.plan.deployment_id, &paths).await?;
        ctx.log(format!(
            "node identity {profile}, {} snapshot paths",
            paths.len()
        ));
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
        let paths = self.snapshot_paths(ctx).await?;
        Ok(Some(
            identity.ensure(&ctx.plan.deployment_id, &paths).await?,
        ))
    }

    /// Before a repository is registered on the cluster: the identity may
    /// reach its path (an update may name another repository; a restore
    /// into a running deployment adds its source; a create granted both
    /// already, and ensuring again is harmless).
    pub(crate) async fn grant_snapshot_paths(
        &self,
        ctx: &StepContext<'_>,
    ) -> Result<(), StepFailure> {
        let Some(identity) = &self.identity else {
            return Ok(());
        };
        let paths = self.snapshot_paths(ctx).await?;
        identity.ensure(&ctx.plan.deployment_id, &paths).await?;
        Ok(())
    }

    /// The snapshot paths this plan's nodes reach with their own
    /// credentials: read and write at the deployment's own path of its
    /// repository; read only at the path of the snapshot a clone reads
    /// (while it reads it) or this plan restores. Repositories with keys of
    /// their own, or on a filesystem, add none. A repository gone since the
    /// plan was made adds none either: the step that needs it fails on its
    /// own, with its own message.
    async fn snapshot_paths(
        &self,
        ctx: &StepContext<'_>,
    ) -> Result<Vec<SnapshotPath>, StepFailure> {
        let spec = ctx
            .plan
            .params
            .target_spec()
            .unwrap_or(&ctx.deployment.spec);
        let mut wanted: Vec<(&str, &str, PathAccess)> = Vec::new();
        if let Some(own) = spec.repository() {
            wanted.push((own, &ctx.plan.deployment_id, PathAccess::ReadWrite));
        }
        if let Some(src) = &ctx.deployment.clone_source
            && (src.reads_source() || src.pinned)
        {
            wanted.push((
                &src.repository,
                &src.source_deployment_id,
                PathAccess::ReadOnly,
            ));
        }
        let restore = ctx.plan.params.restore();
        if let Some(t) = restore.as_ref().filter(|t| t.foreign_repository) {
            wanted.push((&t.repository, &t.source_deployment_id, PathAccess::ReadOnly));
        }
        let mut paths = Vec::new();
        for (repository, deployment_id, access) in wanted {
            let Some(repo) = self
                .snapshots
                .store()
                .get_repository(&ctx.plan.org, repository)
                .await?
            else {
                continue;
            };
            if let Some((bucket, prefix)) =
                floe_snapshots::instance_role_path(&repo.value, deployment_id)
            {
                paths.push(SnapshotPath {
                    bucket,
                    prefix,
                    access,
                });
            }
        }
        Ok(paths)
    }
}
