//! node-security: the deployment's CA, node certificate and `elastic`
//! password, made once for every node it will ever have.

use super::outcome_of;
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done, fail};
use crate::outputs::NodeSecurityOutput;
use serde_json::Value;

impl DeploymentSteps {
    /// The deployment's CA, node certificate and elastic password, made
    /// once and kept: every node of the deployment, now and after any
    /// resize, must share them. The password goes last, so its presence
    /// says the set is complete.
    pub(crate) async fn node_security(&self, ctx: &StepContext<'_>) -> Outcome {
        use floe_compute::parameters::{
            ELASTIC_PASSWORD, SecretOrPlain, TLS_CA_CERT, TLS_NODE_CERT, TLS_NODE_KEY,
            parameter_name,
        };
        let path = self.parameter_path(&ctx.plan.deployment_id);
        match self
            .parameters
            .get(&parameter_name(&path, ELASTIC_PASSWORD))
            .await
        {
            Ok(Some(_)) => {
                ctx.log("the deployment's certificates and password exist: kept");
                return done(&NodeSecurityOutput { kept: true });
            }
            Ok(None) => {}
            Err(e) => return outcome_of(e),
        }
        let security = match floe_node_security::generate(&ctx.plan.deployment_id) {
            Ok(s) => s,
            Err(e) => return fail("node_security_failed", e.to_string()),
        };
        let values = [
            (TLS_CA_CERT, SecretOrPlain::plain(security.ca_cert_pem)),
            (TLS_NODE_CERT, SecretOrPlain::secret(security.node_cert_pem)),
            (
                TLS_NODE_KEY,
                SecretOrPlain::secret(security.node_key_pem.expose()),
            ),
            (
                ELASTIC_PASSWORD,
                SecretOrPlain::secret(security.elastic_password.expose()),
            ),
        ];
        if let Err(stop) = self.put_parameters(&ctx.plan.deployment_id, &values).await {
            return stop;
        }
        ctx.log(format!(
            "a CA, a node certificate for {} and the elastic password stored for the nodes",
            floe_node_security::server_name(&ctx.plan.deployment_id)
        ));
        done(&NodeSecurityOutput { kept: false })
    }

    /// A failed create's certificates and password go with it.
    pub(crate) async fn forget_node_security(&self, ctx: &StepContext<'_>) -> Outcome {
        use floe_compute::parameters::{
            ELASTIC_PASSWORD, TLS_CA_CERT, TLS_NODE_CERT, TLS_NODE_KEY,
        };
        self.delete_parameters(
            &ctx.plan.deployment_id,
            &[ELASTIC_PASSWORD, TLS_NODE_KEY, TLS_NODE_CERT, TLS_CA_CERT],
        )
        .await
        .map_or_else(|stop| stop, |()| Outcome::Done(Value::Null))
    }
}
