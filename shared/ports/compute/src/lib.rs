//! The compute port: what the plan engine asks of a cloud to run a node
//! group. EC2 implements it in production (`floe-compute-ec2`, the only crate
//! that links `aws-sdk-ec2`); `floe-compute-sim` simulates it for local mode
//! and tests, with delays and injected failures. This crate is the port
//! only: no SDK, no simulator.
//!
//! Every operation is idempotent, because a plan step may run again after a
//! crash: launches carry a client token, deletes of what is gone succeed.

pub mod identity;
pub mod parameters;
#[cfg(feature = "conformance")]
pub mod parameters_conformance;
pub mod records;

pub use identity::{NodeIdentity, PathAccess, SnapshotPath, node_identity_name};
pub use parameters::{NodeParameters, SecretOrPlain};
pub use records::{EndpointRecords, MemoryRecords};

use async_trait::async_trait;
use floe_domain::catalog::Arch;
use floe_domain::deployment::VolumeType;
use std::collections::BTreeMap;

/// Tags every Floe resource carries, so that a deployment's resources can be
/// found (and IAM can be conditioned on them).
pub const TAG_DEPLOYMENT: &str = "floe:deployment";
pub const TAG_ORG: &str = "floe:org";
pub const TAG_NODE_GROUP: &str = "floe:node-group";
pub const TAG_PLAN: &str = "floe:plan";
/// One launch of a plan (a group's share in one zone), whichever zone it
/// landed in: a retry finds what an earlier attempt started by this tag.
pub const TAG_LAUNCH: &str = "floe:launch";

/// How many deployments one listing of instances names at most: the
/// values of one EC2 filter (`tag:floe:deployment`). A longer list is
/// listed in parts.
pub const DEPLOYMENTS_PER_LISTING: usize = 200;
/// How many instances one page of a listing holds at most
/// (`DescribeInstances`' `MaxResults`).
pub const INSTANCES_PER_PAGE: usize = 1000;
/// How many instance ids one status call takes at most: EC2 refuses more
/// than 100 explicit ids in `DescribeInstanceStatus`, and pages only
/// without ids (all of the account's instances, Floe's or not).
pub const STATUS_IDS_PER_CALL: usize = 100;

/// The EC2 calls that read the instances of `deployments` deployments
/// holding `instances` instances and then the status checks of `running`
/// of them, as the EC2 adapter makes them: `(DescribeInstances,
/// DescribeInstanceStatus)`. What the health check's cost is counted in.
pub fn describe_calls(deployments: usize, instances: usize, running: usize) -> (usize, usize) {
    let listings = deployments.div_ceil(DEPLOYMENTS_PER_LISTING);
    // A listing of n instances reads n / 1000 full pages and one more,
    // partly filled (or empty): exact for one listing, at most this many
    // for several.
    let pages = listings + instances / INSTANCES_PER_PAGE;
    (pages, running.div_ceil(STATUS_IDS_PER_CALL))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub size_gb: u32,
    pub volume_type: VolumeType,
    pub iops: Option<u32>,
    pub throughput: Option<u32>,
}

/// One launch template per node group (and per plan that changes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchTemplateSpec {
    /// Unique and deterministic, e.g. `floe-{deployment}-{group}-{plan}`.
    pub name: String,
    pub instance_type: String,
    /// From the instance catalog; the adapter picks the image for it and
    /// refuses a type whose architecture differs, before any call.
    pub arch: Arch,
    /// The node's boot script (cloud-init); the adapter encodes it.
    pub user_data: String,
    pub volume: Volume,
    pub tags: BTreeMap<String, String>,
    /// The deployment's own node identity (an instance profile ARN from
    /// [`NodeIdentity::ensure`]); `None` keeps the adapter's configured one.
    pub instance_profile: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRequest {
    pub template_name: String,
    pub count: u32,
    /// Index into the configured zones (subnets); the adapter wraps it.
    pub zone: usize,
    /// Same token, same instances: a retried launch starts nothing new.
    pub client_token: String,
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    Pending,
    Running,
    Stopping,
    Stopped,
    ShuttingDown,
    Terminated,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Instance {
    pub id: String,
    pub state: InstanceState,
    pub instance_type: String,
    pub zone: String,
    pub private_ip: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// What one of EC2's status checks says of a running instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Ok,
    /// The check fails: the instance (or its host) does not work.
    Impaired,
    /// Too soon to say: the instance has just started.
    Initializing,
    /// EC2 has too little data to decide (an instance that is stopping,
    /// a check that has not run yet): no verdict.
    InsufficientData,
    /// The check does not apply to this instance.
    NotApplicable,
}

/// The status checks of one running instance, as EC2 reports them
/// (`DescribeInstanceStatus`): the system check (AWS's side: host, power,
/// network), the instance check (the instance's own: kernel, OS,
/// network configuration) and the attached EBS check (whether the
/// instance can reach its EBS volumes; a node whose data volume hangs
/// holds its shards and its vote while serving neither).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatusChecks {
    pub id: String,
    pub system: CheckStatus,
    pub instance: CheckStatus,
    /// EC2 reports it only for Nitro instances, and older answers (or an
    /// emulator) may leave it out: then it judges nothing.
    #[serde(default = "no_verdict")]
    pub attached_ebs: CheckStatus,
    /// The maintenance EC2 has scheduled for the instance (its status's
    /// `Events`): a reboot, a stop or a retirement AWS will carry out in a
    /// window. Not a failure: the node works until then.
    #[serde(default)]
    pub scheduled_events: Vec<ScheduledEvent>,
}

/// A maintenance event EC2 has scheduled for an instance.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScheduledEvent {
    /// EC2's code: `instance-reboot`, `system-reboot`, `system-maintenance`,
    /// `instance-retirement` or `instance-stop`.
    pub code: String,
    /// EC2's description; one it has carried out or cancelled starts with
    /// `[Completed]` or `[Canceled]`.
    #[serde(default)]
    pub description: String,
    /// The window's earliest start.
    #[serde(default)]
    pub not_before: Option<chrono::DateTime<chrono::Utc>>,
    /// The window's latest end, when EC2 gives one.
    #[serde(default)]
    pub not_after: Option<chrono::DateTime<chrono::Utc>>,
}

impl ScheduledEvent {
    /// Whether it is still to come: EC2 keeps listing an event for a while
    /// after it was carried out or cancelled, marked in its description.
    pub fn pending(&self) -> bool {
        let d = self.description.trim_start();
        !(d.starts_with("[Completed]") || d.starts_with("[Canceled]"))
    }
}

/// What a check that was not reported says: nothing.
fn no_verdict() -> CheckStatus {
    CheckStatus::InsufficientData
}

impl StatusChecks {
    /// The names of the checks that fail; empty for an instance that works
    /// (or that nobody can judge yet: only `impaired` is a failure).
    pub fn failing(&self) -> Vec<&'static str> {
        let mut failing = Vec::new();
        if self.system == CheckStatus::Impaired {
            failing.push("system status check");
        }
        if self.instance == CheckStatus::Impaired {
            failing.push("instance status check");
        }
        if self.attached_ebs == CheckStatus::Impaired {
            failing.push("attached EBS status check");
        }
        failing
    }

    pub fn impaired(&self) -> bool {
        !self.failing().is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComputeError {
    /// Worth retrying as is (throttling, a network blip, eventual consistency).
    #[error("transient {code}: {message}")]
    Transient { code: String, message: String },
    /// This zone has no capacity for the type now; another zone may.
    #[error("insufficient capacity in zone {zone}: {message}")]
    InsufficientCapacity { zone: usize, message: String },
    /// Retrying will not help; `failure_type` is shown to the user.
    #[error("{failure_type}: {message}")]
    Permanent {
        failure_type: String,
        message: String,
    },
}

#[async_trait]
pub trait Compute: Send + Sync + 'static {
    /// Creates the template if no template of that name exists; returns its id.
    async fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<String, ComputeError>;
    /// Deletes the template; succeeds if it is already gone.
    async fn delete_launch_template(&self, name: &str) -> Result<(), ComputeError>;
    /// The names of the deployment's launch templates (by `floe:deployment`
    /// tag), sorted: every plan that launched left one per group, and a
    /// delete finds them all here rather than by guessing their names.
    async fn launch_templates(&self, deployment_id: &str) -> Result<Vec<String>, ComputeError>;
    /// Starts `count` instances from the template in one zone; idempotent on
    /// `client_token`. Returns their ids.
    async fn launch(&self, request: &LaunchRequest) -> Result<Vec<String>, ComputeError>;
    /// The deployment's instances (by `floe:deployment` tag), terminated ones included.
    async fn instances(&self, deployment_id: &str) -> Result<Vec<Instance>, ComputeError>;
    /// The instances of each of `deployment_ids`, terminated ones
    /// included, listed together: the health check reads a page of its
    /// shard this way, in one `DescribeInstances` (by tag, a thousand
    /// instances a page) per [`DEPLOYMENTS_PER_LISTING`] deployments
    /// rather than one per deployment. A deployment without instances
    /// maps to none.
    ///
    /// The default asks for each deployment in turn, for a test's
    /// stand-in; both adapters of this workspace list them together.
    async fn instances_of(
        &self,
        deployment_ids: &[String],
    ) -> Result<BTreeMap<String, Vec<Instance>>, ComputeError> {
        let mut found = BTreeMap::new();
        for id in deployment_ids {
            found.insert(id.clone(), self.instances(id).await?);
        }
        Ok(found)
    }
    /// Terminates the instances; already terminated or unknown ones are fine.
    async fn terminate(&self, ids: &[String]) -> Result<(), ComputeError>;
    /// The status checks of those of `ids` that run (EC2 reports none for
    /// an instance in any other state, nor for an unknown id), in any order.
    ///
    /// The default reports none, for a port whose instances have no status
    /// checks (a test's stand-in): its instances are judged by state alone.
    /// Both adapters of this workspace report them.
    async fn status_checks(&self, ids: &[String]) -> Result<Vec<StatusChecks>, ComputeError> {
        let _ = ids;
        Ok(Vec::new())
    }
    /// One instance by id, whatever made it (`None`: no such instance).
    /// EC2's state-change notifications name an instance and nothing else:
    /// its tags say whether it is a node, and whose.
    ///
    /// The default knows none, for a test's stand-in whose instances send
    /// no such notifications. Both adapters of this workspace know theirs.
    async fn instance(&self, id: &str) -> Result<Option<Instance>, ComputeError> {
        let _ = id;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::{CheckStatus, StatusChecks};

    /// Each of the three checks fails the instance on its own; a check
    /// without a verdict (starting, not reported) fails nothing.
    #[test]
    fn any_failing_check_impairs_the_instance() {
        let checks = |system, instance, attached_ebs| StatusChecks {
            id: "i-1".into(),
            system,
            instance,
            attached_ebs,
            scheduled_events: Vec::new(),
        };
        use CheckStatus::{Impaired, InsufficientData, Ok};
        assert!(!checks(Ok, Ok, InsufficientData).impaired());
        assert_eq!(
            checks(Ok, Ok, Impaired).failing(),
            ["attached EBS status check"]
        );
        assert_eq!(
            checks(Impaired, Ok, Impaired).failing(),
            ["system status check", "attached EBS status check"]
        );
        assert_eq!(
            checks(Ok, Impaired, Ok).failing(),
            ["instance status check"]
        );
    }
}
