//! The DNS records of a deployment's stable endpoint: kept equal to the
//! running nodes that serve clients by record-access, the last step of
//! every plan that changes nodes (create, start, update, heal); the nodes an
//! update or a heal retires leave the records before they are terminated;
//! terminate removes the records before a shutdown or a delete stops the
//! nodes. Dedicated
//! master nodes are never named: clients are not theirs to serve.
//!
//! Without a records port (local mode, whose endpoint is an address its
//! simulated cluster serves) or for a deployment without a DNS endpoint
//! (one created before endpoints were named, or one whose endpoint is an
//! address), nothing is written.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::StepContext;
use crate::failure::StepFailure;
use floe_compute::{EndpointRecords, InstanceState, TAG_NODE_GROUP};
use floe_domain::deployment::{DeploymentSpec, NodeRole};
use std::net::IpAddr;
use std::sync::Arc;

impl DeploymentSteps {
    /// The records port and the endpoint's name, when this deployment's
    /// endpoint is a DNS name kept by this platform.
    fn endpoint_records<'a>(
        &'a self,
        ctx: &'a StepContext<'_>,
    ) -> Option<(&'a Arc<dyn EndpointRecords>, &'a str)> {
        let records = self.records.as_ref()?;
        // A deployment moving to a stable endpoint gets its records with
        // its new nodes; no function asks for the name before the move
        // ends.
        let host = ctx.deployment.endpoint_for_nodes()?;
        // An address is its own record.
        host.parse::<IpAddr>().is_err().then_some((records, host))
    }

    /// Points the endpoint at the running nodes that serve clients, but
    /// those in `leaving` (nodes a step is about to stop).
    pub(crate) async fn set_endpoint_records(
        &self,
        ctx: &StepContext<'_>,
        leaving: &[String],
    ) -> Result<(), StepFailure> {
        let Some((records, host)) = self.endpoint_records(ctx) else {
            return Ok(());
        };
        // Roles by group, of the spec this plan brings the nodes to and of
        // the one they had: an update's new and old nodes both run now.
        let specs: Vec<&DeploymentSpec> = ctx
            .plan
            .params
            .target_spec()
            .into_iter()
            .chain(std::iter::once(&ctx.deployment.spec))
            .collect();
        let serves_clients = |group: &str| {
            specs
                .iter()
                .flat_map(|s| s.node_groups.iter())
                .find(|g| g.id == group)
                // A dedicated master does not serve clients; a group the
                // specs do not know (left by a plan) is named, not hidden.
                .is_none_or(|g| g.roles.iter().any(|r| *r != NodeRole::Master))
        };
        let mut addresses: Vec<String> = self
            .compute
            .instances(&ctx.plan.deployment_id)
            .await?
            .into_iter()
            .filter(|i| i.state == InstanceState::Running && !leaving.contains(&i.id))
            .filter(|i| {
                i.tags
                    .get(TAG_NODE_GROUP)
                    .is_none_or(|group| serves_clients(group))
            })
            .filter_map(|i| i.private_ip)
            .collect();
        addresses.sort();
        if addresses.is_empty() && !leaving.is_empty() {
            // Never leave a name with nothing behind it while nodes remain:
            // the old ones keep answering until they go.
            return Ok(());
        }
        records.set(host, &addresses).await?;
        ctx.log(format!("{host} names {}", addresses.join(", ")));
        Ok(())
    }

    /// The endpoint names no node: before the nodes stop, so that clients
    /// are not sent to nodes on their way out.
    pub(crate) async fn remove_endpoint_records(
        &self,
        ctx: &StepContext<'_>,
    ) -> Result<(), StepFailure> {
        let Some((records, host)) = self.endpoint_records(ctx) else {
            return Ok(());
        };
        records.set(host, &[]).await?;
        ctx.log(format!("{host} removed"));
        Ok(())
    }
}
