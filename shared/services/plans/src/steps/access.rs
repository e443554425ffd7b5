//! record-access: the last step of every plan that changes a deployment's
//! nodes. It records which nodes run and how to reach the cluster (its CA,
//! and the `elastic` password sealed by the platform's cipher), so that the
//! api function reaches a cluster from the record alone, calling neither
//! EC2 nor SSM. The engine copies it onto the deployment when the plan
//! succeeds ([`crate::Steps::settle`]).

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{StepContext, done};
use crate::failure::{StepFailure, StepResult};
use floe_domain::access::{ClusterAccess, NodeEndpoint, PASSWORD_FIELD, sealing_resource};
use floe_domain::deployment::Deployment;
use floe_domain::plan::{Plan, PlanKind};
use floe_secrets::{Owner, SecretError};

pub(crate) const STEP: &str = "record-access";

impl DeploymentSteps {
    pub(crate) async fn record_access(&self, ctx: &StepContext<'_>) -> StepResult {
        use floe_compute::parameters::{ELASTIC_PASSWORD, TLS_CA_CERT, parameter_name};
        let deployment_id = &ctx.plan.deployment_id;
        let nodes = floe_clusters::running_nodes(self.compute.as_ref(), deployment_id).await?;
        let path = self.parameter_path(deployment_id);
        let (ca, password) = match (
            self.parameters
                .get(&parameter_name(&path, TLS_CA_CERT))
                .await,
            self.parameters
                .get(&parameter_name(&path, ELASTIC_PASSWORD))
                .await,
        ) {
            (Ok(Some(ca)), Ok(Some(password))) => (ca, password),
            (Err(e), _) | (_, Err(e)) => return Err(e.into()),
            _ => {
                return Err(StepFailure::permanent(
                    "not_secured",
                    "the deployment's CA or elastic password is missing from the node parameters",
                ));
            }
        };
        let resource = sealing_resource(deployment_id);
        let owner = Owner {
            org: &ctx.plan.org,
            repository: &resource,
            field: PASSWORD_FIELD,
        };
        let sealed_password = match self.cipher.seal(password.expose(), &owner).await {
            Ok(s) => s,
            // A KMS throttle or outage passes; a key that cannot be used
            // at all is a configuration to fix.
            Err(SecretError::KeyUnavailable(m)) => {
                return Err(StepFailure::transient(format!(
                    "sealing the elastic password: {m}"
                )));
            }
            Err(e) => return Err(StepFailure::permanent("sealing_failed", e.to_string())),
        };
        let ca_cert_pem = self.http_trust(ctx, ca.expose()).await?;
        // The endpoint's name follows the nodes before the record says so.
        self.set_endpoint_records(ctx, &[]).await?;
        ctx.log(format!(
            "{} running nodes recorded, with the cluster's CA and sealed elastic password",
            nodes.len()
        ));
        Ok(done(&ClusterAccess {
            ca_cert_pem,
            sealed_password,
            nodes: nodes
                .into_iter()
                .map(|n| NodeEndpoint {
                    name: n.node_name,
                    address: n.private_ip,
                })
                .collect(),
            http_port: self.settings.http_port,
        }))
    }

    /// The CAs a client of the cluster's HTTP layer trusts, given the CA
    /// parameter `ca`: the deployment's CA; or, for a deployment that moved
    /// to a stable endpoint with an HTTP CA of its own
    /// ([`floe_compute::parameters::TLS_HTTP_CA_CERT`]), that one once
    /// every node was made with it (the move's update succeeded), and both
    /// (`ca` holds them) while nodes from before may still run (a move
    /// that failed and left them, then a heal).
    async fn http_trust(&self, ctx: &StepContext<'_>, ca: &str) -> Result<String, StepFailure> {
        use floe_compute::parameters::{TLS_HTTP_CA_CERT, parameter_name};
        let path = self.parameter_path(&ctx.plan.deployment_id);
        let Some(http_ca) = self
            .parameters
            .get(&parameter_name(&path, TLS_HTTP_CA_CERT))
            .await?
        else {
            return Ok(ca.to_string());
        };
        let moved = ctx.deployment.endpoint.is_some()
            || (ctx.plan.kind() == PlanKind::Update && ctx.deployment.endpoint_moving_to.is_some());
        Ok(if moved {
            http_ca.expose().to_string()
        } else {
            ca.to_string()
        })
    }
}

/// What a plan that ended well does to its deployment's access record: the
/// nodes a create or update recorded replace the old record; a shutdown
/// leaves no node to reach.
pub(crate) fn settle(plan: &Plan, next: &mut Deployment) {
    // The license the plan's `license` step found or put in force.
    if let Some(license) = plan
        .steps
        .iter()
        .find(|s| s.step_id == crate::steps::license::STEP)
        .and_then(|s| {
            serde_json::from_value::<floe_domain::license::ClusterLicense>(s.output.clone()).ok()
        })
    {
        next.license = Some(license);
    }
    match plan.kind() {
        PlanKind::Create
        | PlanKind::Update
        | PlanKind::Start
        | PlanKind::ResetPassword
        | PlanKind::Heal => {
            let recorded = plan
                .steps
                .iter()
                .find(|s| s.step_id == STEP)
                .and_then(|s| serde_json::from_value::<ClusterAccess>(s.output.clone()).ok());
            // A plan recorded before this step existed leaves the record
            // as it was; its next plan records it.
            if let Some(access) = recorded {
                next.access = Some(access);
                // The cluster has the password now; the record keeps it
                // sealed in `access` alone.
                next.password_to_apply = None;
                // An update that moved the deployment to a stable endpoint
                // replaced every node with ones whose certificates name it.
                if plan.kind() == PlanKind::Update
                    && let Some(host) = next.endpoint_moving_to.take()
                {
                    next.endpoint = Some(host);
                }
            }
            // A heal that succeeded may be started again at once, should
            // another node be lost.
            if plan.kind() == PlanKind::Heal
                && let Some(health) = &mut next.health
            {
                health.heal_started = None;
            }
        }
        PlanKind::Shutdown => {
            if let Some(access) = &mut next.access {
                access.nodes.clear();
            }
            // The cluster went with its nodes; a start makes a new one, on
            // the basic license.
            next.license = None;
        }
        // A drill's clone is removed when its plan ends.
        PlanKind::Delete | PlanKind::Restore | PlanKind::License | PlanKind::Drill => {}
    }
}

#[cfg(test)]
mod tests {
    use super::settle;
    use floe_domain::deployment::Deployment;
    use floe_domain::license::ClusterLicense;
    use floe_domain::plan::{Plan, PlanParams, StepRecord};

    fn spec() -> floe_domain::deployment::DeploymentSpec {
        serde_json::from_value(serde_json::json!({
            "name": "logs", "version": "8.15.3",
            "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.xlarge",
                             "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}]
        }))
        .expect("spec")
    }

    /// The license a plan's `license` step found is the record's; a
    /// shutdown, which takes the cluster, takes it too.
    #[test]
    fn the_record_keeps_the_license_its_cluster_runs() {
        let now = chrono::Utc::now();
        let trial = ClusterLicense {
            license_type: "trial".into(),
            expiry: Some(now),
            uid: None,
        };
        let mut create = Plan::new("acme", "d1", PlanParams::Create(spec()), "t", "t", now);
        let mut step = StepRecord::new(crate::steps::license::STEP);
        step.output = serde_json::to_value(&trial).expect("output");
        create.steps.push(step);
        let mut d = Deployment::first_planned_by(&create, spec());
        settle(&create, &mut d);
        assert_eq!(d.license, Some(trial));

        let shutdown = Plan::new(
            "acme",
            "d1",
            PlanParams::Shutdown(serde_json::from_value(serde_json::json!({})).expect("params")),
            "t",
            "t",
            now,
        );
        settle(&shutdown, &mut d);
        assert_eq!(d.license, None);
    }
}
