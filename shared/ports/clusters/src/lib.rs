//! How the control plane reaches a deployment's Elasticsearch cluster.
//!
//! Plans (joining and draining nodes, registering the repository), the
//! snapshotter and the snapshot API all talk to a cluster through
//! [`Clusters`]: the worker and the snapshotter on EC2 from the running
//! nodes and their parameters ([`NodeAddresses`]); the api function from
//! what the plans recorded on the deployment ([`StoredClusters`]); local
//! mode and tests by a simulated cluster per deployment whose nodes follow
//! the simulated instances (`floe-clusters-sim`, which no Lambda function
//! links). Each reaches a deployment by its stable endpoint once the plans
//! keep one for it ([`endpoint_reach`]), else by a running node's address.

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

/// The stable endpoint host the functions reach `deployment` by, when they
/// may: it has one (a DNS name kept equal to its client nodes, or local
/// mode's address), a plan has recorded running nodes (so the name's
/// records exist: asking for a name before it has any would leave the
/// resolver caching "no such name" past its creation), and the caller
/// avoids no node (a name cannot leave one out). A name keeps a long poll
/// going while nodes are replaced: each new connection resolves it anew.
/// `None`: reach a running node by its address.
pub fn endpoint_reach<'a>(deployment: &'a Deployment, avoid: &[String]) -> Option<&'a str> {
    let host = deployment.endpoint.as_deref()?;
    let recorded = deployment
        .access
        .as_ref()
        .is_some_and(|access| !access.nodes.is_empty());
    (recorded && avoid.is_empty()).then_some(host)
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

    /// The CAs and the elastic password of `deployment_id`, from its node
    /// parameters: the CA parameter holds the deployment's CA and, once it
    /// has one, its HTTP CA too (nodes from before its move to a stable
    /// endpoint and nodes made since may both run).
    async fn secrets(
        &self,
        parameters: &dyn NodeParameters,
        prefix: &str,
        deployment_id: &str,
    ) -> Result<(String, Auth), ClusterError> {
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
        Ok((
            ca.expose().to_string(),
            Auth::Basic {
                username: floe_node_security::ELASTIC_USER.to_string(),
                password: floe_domain::secret::SecretString::new(password.expose()),
            },
        ))
    }

    /// A client pinned to the deployment's CA, by its endpoint `host` or,
    /// without one, at `node`'s address checked against its server name.
    async fn secured_client(
        &self,
        parameters: &dyn NodeParameters,
        prefix: &str,
        deployment_id: &str,
        target: Target<'_>,
    ) -> Result<ElasticClient, ClusterError> {
        let (ca, auth) = self.secrets(parameters, prefix, deployment_id).await?;
        Ok(match target {
            Target::Endpoint(host) => {
                ElasticClient::at_endpoint(host, self.port, &ca, Some(auth), self.timeout)?
            }
            Target::Node(node) => {
                let ip: std::net::IpAddr =
                    node.private_ip
                        .parse()
                        .map_err(|_| ClusterError::NotSecured {
                            deployment_id: deployment_id.to_string(),
                            message: format!("{} is not an IP address", node.private_ip),
                        })?;
                ElasticClient::pinned(
                    &floe_node_security::server_name(deployment_id),
                    std::net::SocketAddr::new(ip, self.port),
                    &ca,
                    Some(auth),
                    self.timeout,
                )?
            }
        })
    }
}

/// Where [`NodeAddresses`] connects.
enum Target<'a> {
    Endpoint(&'a str),
    Node(&'a NodeAddress),
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
        let target = match endpoint_reach(deployment, avoid) {
            Some(host) => Target::Endpoint(host),
            None => Target::Node(node),
        };
        let url = match target {
            Target::Endpoint(host) if host.contains(':') => {
                format!("{}://[{host}]:{}", self.scheme, self.port)
            }
            Target::Endpoint(host) => format!("{}://{host}:{}", self.scheme, self.port),
            Target::Node(node) => format!("{}://{}:{}", self.scheme, node.private_ip, self.port),
        };
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
                self.secured_client(parameters.as_ref(), prefix, &deployment.id, target)
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
