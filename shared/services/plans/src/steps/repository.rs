//! The deployment's snapshot repository: reading it (for the nodes'
//! client settings, for registering it), register-repository, and the
//! final-snapshot of a shutdown.

use super::{client_repository_name, target};
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done, fail};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::{FinalSnapshotOutput, RegisteredOutput};
use floe_domain::deployment::DeploymentSpec;
use floe_domain::repository::{Repository, RepositorySettings};
use serde_json::Value;

impl DeploymentSteps {
    /// The repository `spec` names, read now: its settings may have changed
    /// since the plan was made, and the nodes need the current ones.
    pub(crate) async fn repository_of(
        &self,
        ctx: &StepContext<'_>,
        spec: &DeploymentSpec,
    ) -> Result<Option<Repository>, Outcome> {
        let Some(name) = spec.repository() else {
            return Ok(None);
        };
        self.repository_named(ctx, name).await
    }

    /// The repository whose S3 client the nodes get: the deployment's own,
    /// else, for a clone, its source's (the API refuses a clone whose own
    /// repository needs another client than its source).
    pub(crate) async fn client_repository(
        &self,
        ctx: &StepContext<'_>,
        spec: &DeploymentSpec,
    ) -> Result<Option<Repository>, Outcome> {
        match client_repository_name(spec, ctx.deployment.clone_source.as_ref()) {
            Some(name) => self.repository_named(ctx, name).await,
            None => Ok(None),
        }
    }

    pub(crate) async fn repository_named(
        &self,
        ctx: &StepContext<'_>,
        name: &str,
    ) -> Result<Option<Repository>, Outcome> {
        match self
            .snapshots
            .store()
            .get_repository(&ctx.plan.org, name)
            .await
        {
            Ok(Some(r)) => {
                self.check_endpoint(&r.value).await?;
                Ok(Some(r.value))
            }
            Ok(None) => Err(fail(
                "repository_missing",
                format!("snapshot repository {name} no longer exists"),
            )),
            Err(e) => Err(Outcome::Retry(format!("store: {e}"))),
        }
    }

    /// A repository endpoint given as a name, resolved and held to the
    /// API's address policy again now, before a step hands it to nodes:
    /// it was checked when the repository was written, and a name can
    /// point elsewhere since (at the metadata service, say). An address
    /// the policy refuses fails the plan; a name that does not resolve
    /// right now is retried.
    pub(crate) async fn check_endpoint(&self, repo: &Repository) -> Result<(), Outcome> {
        let RepositorySettings::S3(s) = &repo.settings else {
            return Ok(());
        };
        let policy = self.endpoints.policy;
        let Some((host, port)) = s
            .endpoint
            .as_deref()
            .and_then(|e| floe_domain::repository::endpoint_name(e, s.protocol, policy))
        else {
            return Ok(());
        };
        let addresses = self
            .endpoints
            .resolver
            .resolve(&host, port)
            .await
            .map_err(|e| Outcome::Retry(format!("repository {}: {e}", repo.name)))?;
        floe_domain::repository::check_resolved(&host, &addresses, policy).map_err(|why| {
            fail(
                "repository_endpoint_refused",
                format!(
                    "the endpoint of snapshot repository {} {why}; nothing was handed to the nodes. Point the name back at the store, or give the repository another endpoint",
                    repo.name
                ),
            )
        })
    }

    /// Registers the deployment's repository on its cluster (the only
    /// writer), with the repository's throttles.
    pub(crate) async fn register_repository(&self, ctx: &StepContext<'_>) -> StepResult {
        let spec = target(ctx.plan)?;
        let repo = match self.repository_of(ctx, &spec).await {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(Outcome::Done(Value::Null)),
            Err(stop) => return Ok(stop),
        };
        let name = &repo.name;
        self.grant_snapshot_paths(ctx).await?;
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let registration =
            floe_snapshots::repository_registration(&repo, &ctx.plan.deployment_id, false);
        client
            .put_repository(name, &registration)
            .await
            .map_err(|e| {
                StepFailure::elastic_retried(
                    e,
                    &format!("registering {name}"),
                    "repository_registration_failed",
                )
            })?;
        ctx.log(format!(
            "repository {name} registered ({})",
            registration.repository_type
        ));
        Ok(done(&RegisteredOutput {
            repository: name.clone(),
        }))
    }

    /// The last snapshot before the nodes go, unless the shutdown said
    /// `skip_snapshot`, or there is no repository to take it into.
    pub(crate) async fn final_snapshot(&self, ctx: &StepContext<'_>) -> StepResult {
        self.snapshot_first(
            ctx,
            "final-snapshot",
            "shutdown",
            "final_snapshot_failed",
            "shut down with skip_snapshot=true to go ahead without it",
        )
        .await
    }

    /// `upgrade-snapshot`: before a version change, as ECE takes one, a
    /// snapshot of the cluster on the version it runs (a snapshot restores
    /// only onto the same or a newer version, so this one is the way back).
    pub(crate) async fn upgrade_snapshot(&self, ctx: &StepContext<'_>) -> StepResult {
        self.snapshot_first(
            ctx,
            "upgrade-snapshot",
            "upgrade",
            "upgrade_snapshot_failed",
            "the version did not change; apply the change again once a snapshot succeeds",
        )
        .await
    }

    /// A snapshot named `{prefix}-{plan}` into the deployment's repository,
    /// recorded as the output of `step_id`, before the nodes change.
    async fn snapshot_first(
        &self,
        ctx: &StepContext<'_>,
        step_id: &str,
        prefix: &str,
        failure_type: &str,
        hint: &str,
    ) -> StepResult {
        if ctx.deployment.spec.repository().is_none() {
            ctx.log("no snapshot repository: no snapshot first");
            return Ok(Outcome::Done(Value::Null));
        }
        if let Some(taken) = ctx.optional_output_of::<FinalSnapshotOutput>(step_id)? {
            return Ok(done(&taken));
        }
        let name = format!("{prefix}-{}", ctx.plan.id.get(..12).unwrap_or(&ctx.plan.id));
        Ok(
            match self
                .snapshots
                .take_final(&ctx.plan.org, &ctx.plan.deployment_id, &name)
                .await
            {
                Ok(taken) => {
                    let state = taken.value.state.as_str();
                    ctx.log(format!("snapshot {name}: {state}"));
                    if state == "SUCCESS" || state == "PARTIAL" {
                        done(&FinalSnapshotOutput {
                            snapshot: name,
                            state: state.to_string(),
                        })
                    } else if state == "IN_PROGRESS" {
                        Outcome::Wait {
                            after: self.settings.poll,
                            note: format!("snapshot {name} still in progress"),
                        }
                    } else {
                        fail(
                            failure_type,
                            format!("the snapshot {name} ended {state}; {hint}"),
                        )
                    }
                }
                Err(e) if e.is_transient() => Outcome::Retry(format!("snapshot {name}: {e}")),
                Err(e) => fail(failure_type, format!("snapshot {name}: {e}")),
            },
        )
    }
}
