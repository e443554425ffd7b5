//! How the control plane reaches a deployment's Elasticsearch cluster.
//!
//! Plans (joining and draining nodes, registering the repository), the
//! snapshotter and the snapshot API all talk to a cluster through
//! [`Clusters`]: on EC2 by a running node's private address
//! ([`NodeAddresses`]); in local mode and tests by a simulated cluster
//! per deployment whose nodes follow the simulated instances
//! ([`simulated::SimulatedClusters`], feature `simulated`).

#[cfg(feature = "simulated")]
pub mod simulated;

use async_trait::async_trait;
use floe_compute::{Compute, ComputeError, InstanceState};
use floe_domain::deployment::Deployment;
use floe_elastic::{Auth, ElasticClient, ElasticError};
use std::sync::Arc;
use std::time::Duration;

/// What [`NodeAddresses`] asks of EC2 (through the compute port), in IAM
/// terms: every function that reaches clusters needs it.
pub const IAM_ACTIONS: &[&str] = &["ec2:DescribeInstances"];

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No node of the deployment runs (yet, or any more).
    #[error("deployment {deployment_id} has no running node to talk to")]
    NoRunningNode { deployment_id: String },
    #[error("compute: {0}")]
    Compute(#[from] ComputeError),
    #[error("elasticsearch client: {0}")]
    Client(#[from] ElasticError),
    /// The simulated cluster could not start (local mode only).
    #[error("simulated cluster: {0}")]
    Simulator(String),
}

impl ClusterError {
    /// Worth trying again later (a node booting, a throttled describe).
    pub fn is_transient(&self) -> bool {
        match self {
            ClusterError::NoRunningNode { .. } => true,
            ClusterError::Compute(e) => !matches!(e, ComputeError::Permanent { .. }),
            ClusterError::Client(_) | ClusterError::Simulator(_) => false,
        }
    }
}

/// A running node of the cluster, as Elasticsearch names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// The instance id; nodes are named after their instance.
    pub node_name: String,
    pub private_ip: String,
}

#[async_trait]
pub trait Clusters: Send + Sync + 'static {
    /// A client for the deployment's cluster, through one of its running
    /// nodes (preferring nodes not in `avoid`, such as nodes being drained).
    async fn client(
        &self,
        deployment: &Deployment,
        avoid: &[String],
    ) -> Result<ElasticClient, ClusterError>;

    /// The deployment's nodes are gone (shutdown, delete): forget anything
    /// kept for its cluster.
    async fn forget(&self, deployment_id: &str);
}

/// Running instances with an address, in a stable order.
pub async fn running_nodes(
    compute: &dyn Compute,
    deployment_id: &str,
) -> Result<Vec<NodeAddress>, ComputeError> {
    let mut nodes: Vec<NodeAddress> = compute
        .instances(deployment_id)
        .await?
        .into_iter()
        .filter(|i| i.state == InstanceState::Running)
        .filter_map(|i| {
            i.private_ip.map(|ip| NodeAddress {
                node_name: i.id,
                private_ip: ip,
            })
        })
        .collect();
    nodes.sort_by(|a, b| a.node_name.cmp(&b.node_name));
    Ok(nodes)
}

/// How the functions reach a node's HTTP port: `FLOE_ES_SCHEME` (`https`,
/// the default since Elasticsearch 8 secures HTTP, or `http`) and
/// `FLOE_ES_PORT` (9200).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHttp {
    pub https: bool,
    pub port: u16,
}

impl NodeHttp {
    /// Reads the two settings through `var`; an error names the setting
    /// and what it must be.
    pub fn from_lookup(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<NodeHttp, (&'static str, &'static str)> {
        let https = match var("FLOE_ES_SCHEME").as_deref().map(str::trim) {
            None | Some("") | Some("https") => true,
            Some("http") => false,
            Some(_) => return Err(("FLOE_ES_SCHEME", "must be http or https")),
        };
        let port = match var("FLOE_ES_PORT").as_deref().map(str::trim) {
            None | Some("") => 9200,
            Some(p) => match p.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(("FLOE_ES_PORT", "must be a port number")),
            },
        };
        Ok(NodeHttp { https, port })
    }
}

/// Production: the cluster's HTTP port on a running node's private address
/// (the functions run in the nodes' VPC).
pub struct NodeAddresses {
    compute: Arc<dyn Compute>,
    scheme: &'static str,
    port: u16,
    auth: Option<Auth>,
    timeout: Duration,
    /// One client per node address: a plan polls the same cluster every few
    /// seconds, and building a client loads the TLS roots and drops the
    /// connection pool each time.
    clients: std::sync::Mutex<std::collections::HashMap<String, ElasticClient>>,
}

impl NodeAddresses {
    pub fn new(
        compute: Arc<dyn Compute>,
        https: bool,
        port: u16,
        auth: Option<Auth>,
        timeout: Duration,
    ) -> NodeAddresses {
        NodeAddresses {
            compute,
            scheme: if https { "https" } else { "http" },
            port,
            auth,
            timeout,
            clients: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }
}

#[async_trait]
impl Clusters for NodeAddresses {
    async fn client(
        &self,
        deployment: &Deployment,
        avoid: &[String],
    ) -> Result<ElasticClient, ClusterError> {
        let nodes = running_nodes(self.compute.as_ref(), &deployment.id).await?;
        let node = nodes
            .iter()
            .find(|n| !avoid.contains(&n.node_name))
            .or_else(|| nodes.first())
            .ok_or_else(|| ClusterError::NoRunningNode {
                deployment_id: deployment.id.clone(),
            })?;
        let url = format!("{}://{}:{}", self.scheme, node.private_ip, self.port);
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = clients.get(&url) {
            return Ok(client.clone());
        }
        let client = ElasticClient::new(&url, self.auth.clone(), self.timeout)?;
        clients.insert(url, client.clone());
        Ok(client)
    }

    async fn forget(&self, _deployment_id: &str) {}
}

#[cfg(test)]
mod tests {
    use super::NodeHttp;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn node_http_defaults_to_https_on_9200_and_names_a_bad_setting() {
        assert_eq!(
            NodeHttp::from_lookup(lookup(&[])),
            Ok(NodeHttp {
                https: true,
                port: 9200
            })
        );
        assert_eq!(
            NodeHttp::from_lookup(lookup(&[
                ("FLOE_ES_SCHEME", "http"),
                ("FLOE_ES_PORT", "9243")
            ])),
            Ok(NodeHttp {
                https: false,
                port: 9243
            })
        );
        assert_eq!(
            NodeHttp::from_lookup(lookup(&[("FLOE_ES_SCHEME", "ftp")])).map_err(|e| e.0),
            Err("FLOE_ES_SCHEME")
        );
        for bad in ["0", "70000", "x"] {
            let pairs: &'static [(&'static str, &'static str)] = match bad {
                "0" => &[("FLOE_ES_PORT", "0")],
                "70000" => &[("FLOE_ES_PORT", "70000")],
                _ => &[("FLOE_ES_PORT", "x")],
            };
            assert_eq!(
                NodeHttp::from_lookup(lookup(pairs)).map_err(|e| e.0),
                Err("FLOE_ES_PORT"),
                "{bad}"
            );
        }
    }
}
