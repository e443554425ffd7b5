//! The steps of deployment plans, over the ports a worker is given.
//!
//! Each kind of plan is a module of [`crate::plans`] that declares its steps
//! with their `run` and `undo` side by side (see [`crate::step`]); the steps
//! themselves, shared between kinds, are in [`crate::steps`]. A plan's
//! layout follows from its params alone (and, for an update or a shutdown,
//! from the spec the deployment runs), never from how a worker is wired:
//! every port the steps call is required.
//!
//! create:   node-security, repository-credentials (a repository with
//!           keys), template:{group} and launch:{group} for every node
//!           group, bootstrap-masters, wait-running, wait-joined,
//!           register-repository; a clone then restores
//! restore:  register-source, restore | mount, wait-restored
//! shutdown: final-snapshot, terminate, wait-terminated
//! delete:   terminate, wait-terminated, forget-parameters (then the record goes)
//! update:   grow and shrink: begin, new nodes first, then the old ones go
//!           (master-eligible ones out of the voting configuration first)
//! heal:     template:{group} and replace:{group} for each group with lost
//!           nodes, wait-running, wait-joined, retire-lost (lost nodes
//!           still there terminated; lost master-eligible ones first
//!           excluded from voting: exclude-lost-masters,
//!           wait-lost-masters-excluded, and clear-lost-exclusion after),
//!           record-access

use crate::engine::{Outcome, StepContext, Steps, fail};
use crate::failure::StepResult;
use async_trait::async_trait;
use floe_clusters::Clusters;
use floe_compute::{Compute, NodeParameters};
use floe_domain::deployment::Deployment;
use floe_domain::plan::{Plan, StepError};
use floe_secrets::Cipher;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub use crate::steps::drain::{UpdateShape, update_shape};
pub use crate::steps::spread;

#[derive(Debug, Clone)]
pub struct StepSettings {
    /// How often to look again while instances boot or terminate.
    pub poll: Duration,
    /// A node group that is not running after this fails the plan.
    pub boot_timeout: Duration,
    pub region: String,
    /// Where nodes read their bootstrap data (SSM parameter prefix).
    pub parameter_prefix: String,
    /// Moving shards off old nodes may take this long before the plan fails.
    pub drain_timeout: Duration,
    /// The port the nodes serve HTTPS on, recorded with their addresses.
    pub http_port: u16,
}

impl Default for StepSettings {
    fn default() -> StepSettings {
        StepSettings {
            poll: Duration::from_secs(10),
            boot_timeout: Duration::from_secs(20 * 60),
            region: "us-east-1".into(),
            parameter_prefix: "/floe".into(),
            drain_timeout: Duration::from_secs(6 * 3600),
            http_port: floe_domain::access::DEFAULT_HTTP_PORT,
        }
    }
}

/// Everything the steps call. Every port is required: a plan's steps do
/// not depend on how the worker running it was wired.
pub struct StepPorts {
    pub compute: Arc<dyn Compute>,
    pub clusters: Arc<dyn Clusters>,
    /// Where nodes read their bootstrap data (the first masters, the
    /// deployment's certificates, the repository's keys).
    pub parameters: Arc<dyn NodeParameters>,
    /// Opens the repository keys the nodes are handed.
    pub cipher: Arc<dyn Cipher>,
    /// Reads repositories, registers them and takes final snapshots.
    pub snapshots: floe_snapshots::Snapshotter,
}

/// The steps of every kind of deployment plan.
pub struct DeploymentSteps {
    pub(crate) compute: Arc<dyn Compute>,
    pub(crate) clusters: Arc<dyn Clusters>,
    pub(crate) parameters: Arc<dyn NodeParameters>,
    pub(crate) cipher: Arc<dyn Cipher>,
    pub(crate) snapshots: floe_snapshots::Snapshotter,
    pub(crate) settings: StepSettings,
    /// Each deployment's own node identity; `None` launches every node with
    /// the compute adapter's configured profile.
    pub(crate) identity: Option<Arc<dyn floe_compute::NodeIdentity>>,
    /// The DNS records of the deployments' endpoints; `None` keeps none
    /// (local mode, whose endpoints are addresses).
    pub(crate) records: Option<Arc<dyn floe_compute::EndpointRecords>>,
    /// How a repository endpoint given as a name is checked again before a
    /// step hands it to nodes: the API checked it when it was written, but
    /// the name may point elsewhere now (DNS rebinding).
    pub(crate) endpoints: EndpointCheck,
}

/// A resolver and the address policy the API holds repository endpoints to.
#[derive(Clone)]
pub struct EndpointCheck {
    pub resolver: Arc<dyn floe_ports::Resolver>,
    pub policy: floe_domain::repository::EndpointPolicy,
}

impl EndpointCheck {
    /// The system's resolver, and the API's policy on private addresses.
    pub fn system(allow_private: bool) -> EndpointCheck {
        EndpointCheck {
            resolver: Arc::new(floe_ports::SystemResolver),
            policy: floe_domain::repository::EndpointPolicy {
                allow_private,
                ..Default::default()
            },
        }
    }
}

impl Default for EndpointCheck {
    /// Resolves no name and allows no private address: what a set of
    /// steps built without [`DeploymentSteps::with_endpoint_check`] (a
    /// test, say) does, so that it never asks a DNS server. The worker and
    /// local mode give their own.
    fn default() -> Self {
        EndpointCheck {
            resolver: Arc::new(floe_ports::OfflineResolver),
            policy: floe_domain::repository::EndpointPolicy::default(),
        }
    }
}

impl DeploymentSteps {
    pub fn new(ports: StepPorts, settings: StepSettings) -> DeploymentSteps {
        let StepPorts {
            compute,
            clusters,
            parameters,
            cipher,
            snapshots,
        } = ports;
        DeploymentSteps {
            compute,
            clusters,
            parameters,
            cipher,
            snapshots,
            settings,
            identity: None,
            records: None,
            endpoints: EndpointCheck::default(),
        }
    }

    /// Checks repository endpoints given as names with `check` (the API's
    /// policy and resolver) before handing them to nodes.
    pub fn with_endpoint_check(mut self, check: EndpointCheck) -> Self {
        self.endpoints = check;
        self
    }

    /// Keeps each deployment's endpoint name pointing at its nodes, in
    /// `records` (a Route 53 private hosted zone in production).
    pub fn with_records(mut self, records: Arc<dyn floe_compute::EndpointRecords>) -> Self {
        self.records = Some(records);
        self
    }

    /// Gives each deployment's nodes an identity of their own, made by
    /// `identity` (an IAM role and instance profile in production).
    pub fn with_identity(mut self, identity: Arc<dyn floe_compute::NodeIdentity>) -> Self {
        self.identity = Some(identity);
        self
    }

    pub(crate) fn parameter_path(&self, deployment_id: &str) -> String {
        floe_compute::parameters::deployment_path(&self.settings.parameter_prefix, deployment_id)
    }

    /// The undo of a step that changed nothing to undo (waiting, reading),
    /// or the run of a step that only marks a place in the plan.
    pub(crate) async fn nothing(&self, _ctx: &StepContext<'_>) -> StepResult {
        Ok(Outcome::Done(Value::Null))
    }
}

#[async_trait]
impl Steps for DeploymentSteps {
    fn layout(&self, plan: &Plan, deployment: &Deployment) -> Result<Vec<String>, StepError> {
        Ok(crate::plans::saga(plan, deployment).ids())
    }

    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let saga = crate::plans::saga(ctx.plan, ctx.deployment);
        match saga.find(step_id) {
            Some(step) => (step.run)(self, ctx, &step.group)
                .await
                .unwrap_or_else(|stop| stop.into_outcome(self.settings.poll)),
            None => fail(
                "invalid_plan",
                format!(
                    "unknown step {step_id} of a {} plan",
                    ctx.plan.kind().as_str()
                ),
            ),
        }
    }

    fn settle(&self, plan: &Plan, next: &mut Deployment) {
        crate::steps::access::settle(plan, next);
        crate::steps::restore::settle_source(plan, next);
    }

    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let saga = crate::plans::saga(ctx.plan, ctx.deployment);
        match saga.find(step_id) {
            Some(step) => (step.undo)(self, ctx, &step.group)
                .await
                .unwrap_or_else(|stop| stop.into_outcome(self.settings.poll)),
            // A step this plan kind never has did nothing to undo.
            None => Outcome::Done(Value::Null),
        }
    }
}
