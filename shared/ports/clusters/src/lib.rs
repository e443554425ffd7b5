//! How the control plane reaches a deployment's Elasticsearch cluster.
//!
//! Plans (joining and draining nodes, registering the repository), the
//! snapshotter and the snapshot API all talk to a cluster through
//! [`Clusters`]: the worker and the snapshotter on EC2 by a running node's
//! private address ([`NodeAddresses`]); the api function from what the
//! plans recorded on the deployment ([`StoredClusters`]); local mode and
//! tests by a simulated cluster per deployment whose nodes follow the
//! simulated instances (`floe-clusters-sim`, which no Lambda function
//! links).

pub mod stored;
pub use stored::StoredClusters;

use async_trait::async_trait;
use floe_compute::{Compute, ComputeError, InstanceState, NodeParameters};
use floe_domain::deployment::Deployment;
use floe_elastic::{Auth, ElasticClient, ElasticError};
use std::sync::Arc;
use std::time::Duration;

/// What [`NodeAddresses`] asks of AWS, in IAM terms: the nodes' addresses
/// from EC2 (the compute port) and each cluster's CA and elastic password
/// from SSM (the node parameters port). Every function that reaches
/// clusters needs both.
pub const IAM_ACTIONS: &[&str] = &["ec2:DescribeInstances", "ssm:GetParameter"];

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
    /// The cluster's CA or password cannot be had (a deployment created
    /// before Floe secured its nodes, or damaged parameters).
    #[error("deployment {deployment_id} cannot be reached securely: {message}")]
    NotSecured {
        deployment_id: String,
        message: String,
    },
}

impl ClusterError {
    /// Worth trying again later (a node booting, a throttled describe).
    pub fn is_transient(&self) -> bool {
        match self {
            ClusterError::NoRunningNode { .. } => true,
            ClusterError::Compute(e) => !matches!(e, ComputeError::Permanent { .. }),
            ClusterError::Client(_)
            | ClusterError::Simulator(_)
            | ClusterError::NotSecured { .. } => false,
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

/// Production: the cluster's HTTP port on a running node's private address
/// (the functions run in the nodes' VPC).
pub struct NodeAddresses {
    compute: Arc<dyn Compute>,
    scheme: &'static str,
    port: u16,
    auth: Option<Auth>,
    timeout: Duration,
    /// With HTTPS: where each deployment's CA and elastic password are
    /// (the node parameters, under this prefix).
    security: Option<(Arc<dyn NodeParameters>, String)>,
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
            security: None,
            clients: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Over HTTPS, trust only each deployment's own CA, reach its nodes by
    /// the certificate's name, and authenticate as the elastic user, all
    /// read from the node parameters under `prefix` (`floe-node-security`).
    pub fn with_security(
        mut self,
        parameters: Arc<dyn NodeParameters>,
        prefix: impl Into<String>,
    ) -> NodeAddresses {
        self.security = Some((parameters, prefix.into()));
        self
    }

    /// A pinned client for `node` of `deployment_id`.
    async fn secured_client(
        &self,
        parameters: &dyn NodeParameters,
        prefix: &str,
        deployment_id: &str,
        node: &NodeAddress,
    ) -> Result<ElasticClient, ClusterError> {
        use floe_compute::parameters::{
            ELASTIC_PASSWORD, TLS_CA_CERT, deployment_path, parameter_name,
        };
        let not_secured = |message: String| ClusterError::NotSecured {
            deployment_id: deployment_id.to_string(),
            message,
        };
        let path = deployment_path(prefix, deployment_id);
        let ca = parameters
            .get(&parameter_name(&path, TLS_CA_CERT))
            .await?
            .ok_or_else(|| not_secured(format!("no {TLS_CA_CERT} parameter")))?;
        let password = parameters
            .get(&parameter_name(&path, ELASTIC_PASSWORD))
            .await?
            .ok_or_else(|| not_secured(format!("no {ELASTIC_PASSWORD} parameter")))?;
        let ip: std::net::IpAddr = node
            .private_ip
            .parse()
            .map_err(|_| not_secured(format!("{} is not an IP address", node.private_ip)))?;
        Ok(ElasticClient::pinned(
            &floe_node_security::server_name(deployment_id),
            std::net::SocketAddr::new(ip, self.port),
            ca.expose(),
            Some(Auth::Basic {
                username: floe_node_security::ELASTIC_USER.to_string(),
                password: floe_domain::secret::SecretString::new(password.expose()),
            }),
            self.timeout,
        )?)
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
        // Addresses are reused after an instance goes: the deployment is
        // part of the key.
        let key = format!("{} {url}", deployment.id);
        if let Some(client) = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok(client.clone());
        }
        let client = match &self.security {
            Some((parameters, prefix)) if self.scheme == "https" => {
                self.secured_client(parameters.as_ref(), prefix, &deployment.id, node)
                    .await?
            }
            _ => ElasticClient::new(&url, self.auth.clone(), self.timeout)?,
        };
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, client.clone());
        Ok(client)
    }

    async fn forget(&self, _deployment_id: &str) {}
}
