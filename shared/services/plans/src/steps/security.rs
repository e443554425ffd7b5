//! node-security: the deployment's CA, node certificate and `elastic`
//! password, made once for every node it will ever have.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done, fail};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::NodeSecurityOutput;
use floe_domain::access::{PASSWORD_FIELD, sealing_resource};
use floe_domain::secret::SecretString;
use floe_secrets::{Owner, SecretError};
use serde_json::Value;

impl DeploymentSteps {
    /// The deployment's CA, node certificate and elastic password, made
    /// once and kept: every node of the deployment, now and after any
    /// resize, must share them. The password goes last, so its presence
    /// says the set is complete.
    pub(crate) async fn node_security(&self, ctx: &StepContext<'_>) -> StepResult {
        use floe_compute::parameters::{
            ELASTIC_PASSWORD, SecretOrPlain, TLS_CA_CERT, TLS_CA_KEY, TLS_NODE_CERT, TLS_NODE_KEY,
            parameter_name,
        };
        let path = self.parameter_path(&ctx.plan.deployment_id);
        if self
            .parameters
            .get(&parameter_name(&path, ELASTIC_PASSWORD))
            .await?
            .is_some()
        {
            ctx.log("the deployment's certificates and password exist: kept");
            self.http_ca_for_move(ctx).await?;
            return Ok(done(&NodeSecurityOutput { kept: true }));
        }
        // The create handed its owner a password already: the cluster gets
        // that one. (Records from before creates did so have none.)
        let password = match self.password_to_apply(ctx).await {
            Ok(Some(p)) => p,
            Ok(None) => floe_node_security::new_password(),
            Err(stop) => return Ok(stop),
        };
        let security = floe_node_security::generate_with(
            &ctx.plan.deployment_id,
            password,
            ctx.deployment.endpoint_for_nodes(),
        )
        .map_err(|e| StepFailure::permanent("node_security_failed", e.to_string()))?;
        let values = [
            (TLS_CA_CERT, SecretOrPlain::plain(security.ca_cert_pem)),
            (TLS_NODE_CERT, SecretOrPlain::secret(security.node_cert_pem)),
            (
                TLS_NODE_KEY,
                SecretOrPlain::secret(security.node_key_pem.expose()),
            ),
            (
                TLS_CA_KEY,
                SecretOrPlain::secret(security.ca_key_pem.expose()),
            ),
            (
                ELASTIC_PASSWORD,
                SecretOrPlain::secret(security.elastic_password.expose()),
            ),
        ];
        self.put_parameters(&ctx.plan.deployment_id, &values)
            .await?;
        let named = match ctx.deployment.endpoint_for_nodes() {
            Some(host) => format!(
                "{} and {host}",
                floe_node_security::server_name(&ctx.plan.deployment_id)
            ),
            None => floe_node_security::server_name(&ctx.plan.deployment_id),
        };
        ctx.log(format!(
            "a CA, a node certificate for {named} and the elastic password stored for the nodes"
        ));
        Ok(done(&NodeSecurityOutput { kept: false }))
    }

    /// For an update that moves a deployment to a stable endpoint: the
    /// nodes it makes sign HTTP certificates naming the endpoint, which
    /// needs a CA key. A deployment created before Floe kept its CA's has
    /// none, so it gets a CA for HTTP alone (transport keeps the old CA,
    /// which the nodes still running trust). Made once: a later attempt,
    /// or the next move after one that failed, keeps it.
    async fn http_ca_for_move(&self, ctx: &StepContext<'_>) -> Result<(), StepFailure> {
        use floe_compute::parameters::{
            SecretOrPlain, TLS_CA_CERT, TLS_CA_KEY, TLS_HTTP_CA_CERT, parameter_name,
        };
        if ctx.deployment.endpoint_moving_to.is_none() {
            return Ok(());
        }
        let path = self.parameter_path(&ctx.plan.deployment_id);
        if self
            .parameters
            .get(&parameter_name(&path, TLS_CA_KEY))
            .await?
            .is_some()
        {
            return Ok(());
        }
        let Some(trusted) = self
            .parameters
            .get(&parameter_name(&path, TLS_CA_CERT))
            .await?
        else {
            return Err(StepFailure::permanent(
                "not_secured",
                "the deployment's CA is missing from the node parameters",
            ));
        };
        let (cert, key) = floe_node_security::generate_http_ca(&ctx.plan.deployment_id)
            .map_err(|e| StepFailure::permanent("node_security_failed", e.to_string()))?;
        // The deployment's CA (the first: an earlier attempt may have added
        // another) and the new one: nodes and functions trust both while
        // old and new nodes run. The key last: its presence says the set
        // is complete.
        let deployment_ca =
            floe_node_security::first_certificate(trusted.expose()).ok_or_else(|| {
                StepFailure::permanent(
                    "not_secured",
                    "the deployment's CA parameter holds no certificate",
                )
            })?;
        let both = format!("{}\n{}", deployment_ca.trim_end(), cert);
        self.put_parameters(
            &ctx.plan.deployment_id,
            &[
                (TLS_HTTP_CA_CERT, SecretOrPlain::plain(cert)),
                (TLS_CA_CERT, SecretOrPlain::plain(both)),
                (TLS_CA_KEY, SecretOrPlain::secret(key.expose())),
            ],
        )
        .await?;
        ctx.log("a CA for HTTP stored: the deployment's create kept no CA key");
        Ok(())
    }

    /// Gives the running cluster the password the record holds for this
    /// plan, then stores it where the nodes and the functions read it. Run
    /// again after a crash, it finds the cluster already changed (the old
    /// password is refused, the new one works) and only stores it.
    pub(crate) async fn apply_password(&self, ctx: &StepContext<'_>) -> StepResult {
        use floe_compute::parameters::{ELASTIC_PASSWORD, SecretOrPlain, parameter_name};
        let new = match self.password_to_apply(ctx).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                return Err(StepFailure::permanent(
                    "invalid_plan",
                    "the record holds no password to apply",
                ));
            }
            Err(stop) => return Ok(stop),
        };
        let path = self.parameter_path(&ctx.plan.deployment_id);
        let name = parameter_name(&path, ELASTIC_PASSWORD);
        if let Some(current) = self.parameters.get(&name).await?
            && current.expose() == new.expose()
        {
            ctx.log("the cluster has the new password already");
            return Ok(Outcome::Done(Value::Null));
        }
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let user = floe_node_security::ELASTIC_USER;
        match client.change_password(user, &new).await {
            Ok(()) => ctx.log("the cluster took the new elastic password"),
            Err(e) if e.status() == Some(401) => {
                // An earlier attempt changed it and died before storing it.
                let again = client.with_basic_auth(user, new.clone());
                if let Err(e) = again.authenticate().await {
                    return Err(StepFailure::permanent(
                        "password_reset_failed",
                        format!(
                            "the cluster takes neither the old nor the new elastic password: {e}"
                        ),
                    ));
                }
                ctx.log("the cluster had taken the new elastic password already");
            }
            Err(e) if e.is_transient() => {
                return Err(StepFailure::transient(format!(
                    "changing the elastic password: {e}"
                )));
            }
            Err(e) => {
                return Err(StepFailure::permanent(
                    "password_reset_failed",
                    format!("changing the elastic password: {e}"),
                ));
            }
        }
        self.put_parameters(
            &ctx.plan.deployment_id,
            &[(ELASTIC_PASSWORD, SecretOrPlain::secret(new.expose()))],
        )
        .await?;
        Ok(Outcome::Done(Value::Null))
    }

    /// The password the deployment's record holds for its pending plan to
    /// apply, opened.
    pub(crate) async fn password_to_apply(
        &self,
        ctx: &StepContext<'_>,
    ) -> Result<Option<SecretString>, Outcome> {
        let Some(sealed) = &ctx.deployment.password_to_apply else {
            return Ok(None);
        };
        let resource = sealing_resource(&ctx.plan.deployment_id);
        let owner = Owner {
            org: &ctx.plan.org,
            repository: &resource,
            field: PASSWORD_FIELD,
        };
        match self.cipher.open(sealed, &owner).await {
            Ok(p) => Ok(Some(SecretString::new(p))),
            Err(SecretError::KeyUnavailable(m)) => Err(Outcome::Retry(format!(
                "opening the new elastic password: {m}"
            ))),
            Err(e) => Err(fail(
                "password_unreadable",
                format!("the elastic password to apply cannot be opened: {e}"),
            )),
        }
    }

    /// A failed create's certificates and password go with it.
    pub(crate) async fn forget_node_security(&self, ctx: &StepContext<'_>) -> StepResult {
        use floe_compute::parameters::{
            ELASTIC_PASSWORD, TLS_CA_CERT, TLS_CA_KEY, TLS_NODE_CERT, TLS_NODE_KEY,
        };
        self.delete_parameters(
            &ctx.plan.deployment_id,
            &[
                ELASTIC_PASSWORD,
                TLS_CA_KEY,
                TLS_NODE_KEY,
                TLS_NODE_CERT,
                TLS_CA_CERT,
            ],
        )
        .await?;
        Ok(Outcome::Done(Value::Null))
    }
}
