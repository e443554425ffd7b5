//! repository-credentials: the keys of the deployment's repository, where
//! the nodes' boot script reads them; and the deployment's parameters in
//! general (written and deleted under its path).

use super::{outcome_of, target};
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::RepositoryCredentialsOutput;
use floe_compute::parameters::SecretOrPlain;
use serde_json::Value;

impl DeploymentSteps {
    /// Stores `values` under the deployment's parameter path (names
    /// relative to it) and returns their full names.
    pub(crate) async fn put_parameters(
        &self,
        deployment_id: &str,
        values: &[(&str, SecretOrPlain)],
    ) -> Result<Vec<String>, Outcome> {
        let path = self.parameter_path(deployment_id);
        let mut written = Vec::new();
        for (name, value) in values {
            let full = floe_compute::parameters::parameter_name(&path, name);
            self.parameters
                .put(&full, value)
                .await
                .map_err(outcome_of)?;
            written.push(full);
        }
        Ok(written)
    }

    /// Deletes the deployment's parameters `names` (relative to its path);
    /// ones already gone are fine.
    pub(crate) async fn delete_parameters(
        &self,
        deployment_id: &str,
        names: &[&str],
    ) -> Result<(), Outcome> {
        let path = self.parameter_path(deployment_id);
        for name in names {
            let full = floe_compute::parameters::parameter_name(&path, name);
            self.parameters.delete(&full).await.map_err(outcome_of)?;
        }
        Ok(())
    }

    /// Writes the repository's keys where the new nodes' boot script pipes
    /// them into the keystore, before any of them is launched; removes keys
    /// left from an earlier repository when this one has none.
    pub(crate) async fn repository_credentials(&self, ctx: &StepContext<'_>) -> StepResult {
        let spec = target(ctx.plan)?;
        let repo = match self.client_repository(ctx, &spec).await {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(Outcome::Done(Value::Null)),
            Err(stop) => return Ok(stop),
        };
        let wanted = match crate::repository_access::credential_parameters(
            self.cipher.as_ref(),
            &repo,
        )
        .await
        {
            Ok(w) => w,
            Err(floe_secrets::SecretError::KeyUnavailable(e)) => {
                return Err(StepFailure::transient(format!(
                    "opening the credentials of {}: {e}",
                    repo.name
                )));
            }
            Err(e) => {
                return Err(StepFailure::permanent(
                    "repository_credentials_unreadable",
                    format!(
                        "the stored credentials of repository {} cannot be opened ({e}); send them again with PUT on the repository",
                        repo.name
                    ),
                ));
            }
        };
        let written = self
            .put_parameters(&ctx.plan.deployment_id, &wanted.put)
            .await?;
        if let Err(stop) = self
            .delete_parameters(&ctx.plan.deployment_id, &wanted.delete)
            .await
        {
            return Ok(stop);
        }
        if !written.is_empty() {
            ctx.log(format!(
                "the keys of repository {} stored for the nodes ({} parameters)",
                repo.name,
                written.len()
            ));
        }
        Ok(done(&RepositoryCredentialsOutput {
            repository: repo.name,
            parameters: written,
        }))
    }

    /// Removes the keys a failed create wrote (an update leaves them: the
    /// nodes that stay booted with the same parameters' names).
    pub(crate) async fn forget_repository_credentials(&self, ctx: &StepContext<'_>) -> StepResult {
        use floe_compute::parameters::{
            REPOSITORY_ACCESS_KEY, REPOSITORY_SECRET_KEY, REPOSITORY_SESSION_TOKEN,
        };
        self.delete_parameters(
            &ctx.plan.deployment_id,
            &[
                REPOSITORY_ACCESS_KEY,
                REPOSITORY_SECRET_KEY,
                REPOSITORY_SESSION_TOKEN,
            ],
        )
        .await?;
        Ok(Outcome::Done(Value::Null))
    }
}
