//! How the control plane reaches a deployment's cluster without asking EC2
//! or SSM: the plans that change a deployment's nodes record, as their last
//! step, which nodes run and the cluster's CA and `elastic` password (the
//! password sealed by the platform's cipher). The api function reads only
//! this record to reach a cluster (manual snapshots, and later the proxy).

use serde::{Deserialize, Serialize};

/// What the last plan that changed the nodes recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterAccess {
    /// The deployment's CA (PEM), the only root its nodes' HTTP
    /// certificates are trusted by. Public.
    pub ca_cert_pem: String,
    /// The `elastic` user's password, sealed for [`PASSWORD_FIELD`] of
    /// [`sealing_resource`]. Never returned by the API.
    pub sealed_password: String,
    /// The running nodes when it was recorded, in a stable order.
    pub nodes: Vec<NodeEndpoint>,
}

/// One node: its name (the instance id) and private address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEndpoint {
    pub name: String,
    pub address: String,
}

/// The field name a deployment's sealed password is bound to.
pub const PASSWORD_FIELD: &str = "elastic_password";

/// The resource a deployment's sealed values are bound to: not a repository
/// name (those never contain `/`), so a value sealed for one can never open
/// as the other's.
pub fn sealing_resource(deployment_id: &str) -> String {
    format!("deployment/{deployment_id}")
}
