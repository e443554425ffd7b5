//! The node identity port: the IAM identity a deployment's nodes run with.
//! Each deployment gets its own (a role and an instance profile in
//! production, `floe-identity-iam`, the only crate that links
//! `aws-sdk-iam`), allowed to read that deployment's parameters and no
//! other's, so that a node taken over cannot read another organization's
//! keys. `floe-compute-sim` simulates it for local mode and tests.
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

#[async_trait]
pub trait NodeIdentity: Send + Sync + 'static {
    /// Creates the deployment's node identity if it does not exist, brings
    /// its permissions to what they must be, and returns what a launch
    /// template names it by (the instance profile's ARN).
    async fn ensure(&self, deployment_id: &str) -> Result<String, ComputeError>;
    /// Removes the deployment's node identity; succeeds if it is gone.
    async fn forget(&self, deployment_id: &str) -> Result<(), ComputeError>;
}
