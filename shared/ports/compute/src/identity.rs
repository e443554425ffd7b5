//! The node identity port: the IAM identity a deployment's nodes run with.
//! Each deployment gets its own (a role and an instance profile in
//! production, `floe-identity-iam`, the only crate that links
//! `aws-sdk-iam`), allowed to read that deployment's parameters and no
//! other's, so that a node taken over cannot read another organization's
//! keys. `floe-compute-sim` simulates it for local mode and tests.
//!
//! The same holds for snapshots kept with the nodes' own credentials (an S3
//! repository without keys of its own): the identity reaches only the paths
//! it is granted, the deployment's own path of its repository and, read
//! only, the path of a snapshot it restores or mounts. A cluster's `elastic`
//! user can register any path of any bucket; the identity is what stops it
//! reading another deployment's snapshots.
//!
//! Both operations are idempotent, like the other compute ports': a plan
//! step may run them again after a crash.

use crate::ComputeError;
use async_trait::async_trait;

/// The name of a deployment's node role and instance profile (IAM allows 64
/// characters for a role: this prefix and a 32-character deployment id fit).
pub fn node_identity_name(deployment_id: &str) -> String {
    format!("floe-node-{deployment_id}")
}

/// What a node may do under a granted path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathAccess {
    /// Read snapshots: a clone's or a restore's source.
    ReadOnly,
    /// Take, read and delete snapshots: the deployment's own path.
    ReadWrite,
}

/// One path of one S3 bucket that a deployment's nodes may reach with their
/// own credentials: every object under `{prefix}/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotPath {
    pub bucket: String,
    /// The path without leading or trailing `/` (`{base_path}/{deployment}`).
    pub prefix: String,
    pub access: PathAccess,
}

#[async_trait]
pub trait NodeIdentity: Send + Sync + 'static {
    /// Creates the deployment's node identity if it does not exist, brings
    /// its permissions to what they must be (its parameters, and exactly
    /// `paths` of the snapshot buckets: a path granted before and not
    /// named now is no longer reachable), and returns what a launch
    /// template names it by (the instance profile's ARN).
    async fn ensure(
        &self,
        deployment_id: &str,
        paths: &[SnapshotPath],
    ) -> Result<String, ComputeError>;
    /// Removes the deployment's node identity; succeeds if it is gone.
    async fn forget(&self, deployment_id: &str) -> Result<(), ComputeError>;
}
