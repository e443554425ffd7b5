//! Local mode: one simulated Elasticsearch cluster per deployment, started
//! when something first needs it. Its nodes follow the deployment's running
//! (simulated) instances, so a node group that grows joins nodes, and
//! instances terminated before their shards were moved off take those
//! shards with them, as on EC2. It implements the port of `floe-clusters`.
//!
//! A simulated node starts from what a real one boots with:
//!
//! - with instances on loopback addresses (`floe-compute-sim`'s loopback
//!   pool), the cluster listens on every running node's address at the
//!   nodes' HTTP port ([`SimulatedClusters::with_http_port`]), so any
//!   address a plan records answers, and stops listening on a node's
//!   address when its instance goes;
//! - with the node parameters ([`SimulatedClusters::with_parameters`]),
//!   the deployment's certificate, key and `elastic` password make the
//!   cluster serve HTTPS and ask for basic authentication, and the client
//!   handed to plans is pinned to the deployment's CA, as
//!   `floe_clusters::NodeAddresses` connects to a real node; the
//!   repository's keys are the nodes' keystore, reloaded (as
//!   `_nodes/reload_secure_settings` does) whenever they change;
//! - with the instances' user data ([`SimulatedClusters::with_user_data`]),
//!   the S3 client settings of the `elasticsearch.yml` in it
//!   (`s3.client.floe.endpoint`, `protocol`, `path_style_access`,
//!   `region`).

use async_trait::async_trait;
use floe_clusters::{ClusterError, Clusters, NodeAddress, running_nodes};
use floe_compute::parameters::{
    ELASTIC_PASSWORD, REPOSITORY_ACCESS_KEY, REPOSITORY_SECRET_KEY, REPOSITORY_SESSION_TOKEN,
    TLS_CA_CERT, TLS_CA_KEY, TLS_HTTP_CA_CERT, TLS_NODE_CERT, TLS_NODE_KEY, deployment_path,
    parameter_name,
};
use floe_compute::{Compute, NodeParameters};
use floe_domain::deployment::{Deployment, NodeRole};
use floe_domain::secret::SecretString;
use floe_elastic::{Auth, ElasticClient};
use floe_elastic_sim::{
    RunningCluster, S3Access, S3Client, S3Keys, SimConfig, SimFaults, SimNode, SimSecurity,
    SimulatedCluster,
};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// The `path.repo` of `org`'s clusters under `root`. Organization ids are
/// lower-case letters, digits, `-` and `_` (the token checks), so each is
/// one plain folder; anything else is refused rather than joined.
pub fn org_fs_root(root: &std::path::Path, org: &str) -> Result<PathBuf, ClusterError> {
    plain_folder(root, org, "organization", "a repository folder")
}

/// `root/name` for a name of lower-case letters, digits, `-` and `_`
/// (organization and deployment ids are); anything else is refused
/// rather than joined.
fn plain_folder(
    root: &std::path::Path,
    name: &str,
    what: &str,
    folder: &str,
) -> Result<PathBuf, ClusterError> {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !plain {
        return Err(ClusterError::Simulator(format!(
            "{what} {name:?} cannot name {folder}"
        )));
    }
    Ok(root.join(name))
}

/// The port a node serves HTTP on unless told otherwise: Elasticsearch's.
pub const DEFAULT_HTTP_PORT: u16 = 9200;

/// How each deployment's simulated cluster is set up.
#[derive(Debug, Clone, Default)]
pub struct SimulatedClustersConfig {
    /// Where `fs` repositories live: each simulated cluster's `path.repo`
    /// is the folder of its deployment's organization under it, shared by
    /// that organization's deployments (so a clone sees its source's
    /// snapshots) and out of every other organization's reach (a tenant's
    /// `elastic` user can register any location under `path.repo`).
    pub fs_root: Option<PathBuf>,
    /// Where each deployment's cluster keeps its data (its nodes' disks):
    /// the folder named after the deployment under it, so a process
    /// started again finds every deployment's indices and documents as
    /// they were. Removed when the deployment's nodes are gone (shutdown,
    /// delete). `None` keeps clusters in memory.
    pub data_root: Option<PathBuf>,
    /// An S3 client every simulated cluster starts with; what a
    /// deployment's own nodes are configured with (user data, parameters)
    /// overrides it.
    pub s3: Option<S3Access>,
    pub faults: SimFaults,
}

/// An instance's user data by instance id: what EC2 keeps of a launch
/// (`floe_compute_sim::SimulatedCompute::user_data`). The compute port has
/// no such call (production never needs one), so it is handed in apart.
pub type UserDataSource = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

pub struct SimulatedClusters {
    compute: Arc<dyn Compute>,
    config: SimulatedClustersConfig,
    /// Each deployment's simulated cluster and what it was started with.
    clusters: Mutex<HashMap<String, Simulated>>,
    timeout: Duration,
    http_port: u16,
    /// The node parameters and their path prefix.
    parameters: Option<(Arc<dyn NodeParameters>, String)>,
    user_data: Option<UserDataSource>,
}

/// One deployment's running simulated cluster.
struct Simulated {
    cluster: RunningCluster,
    /// The CAs the client pins, when the cluster is secured.
    ca_cert_pem: Option<String>,
    /// Whether its nodes listen on their own (loopback) addresses.
    on_node_addresses: bool,
    /// The client last handed out, and what it was built for.
    client: Option<(ClientKey, ElasticClient)>,
    /// The S3 keys last put in the keystore and reloaded.
    keys: Option<S3Keys>,
    /// The S3 client settings the nodes were last configured with.
    settings: NodeS3Settings,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ClientKey {
    addr: Option<SocketAddr>,
    password: Option<String>,
    trust: Option<String>,
}

/// What a deployment's nodes boot with, read from where a real node reads
/// it.
#[derive(Clone)]
struct Boot {
    security: Option<(SimSecurity, String)>,
    /// The deployment's CA key, with which each node signs its own HTTP
    /// certificate (as a real node's boot script does); `None` for a
    /// deployment created before it was kept.
    ca_key: Option<SecretString>,
    /// The CA of the HTTP layer alone, whose key `ca_key` is, for a
    /// deployment that moved to a stable endpoint after a create that kept
    /// no CA key.
    http_ca: Option<String>,
    settings: NodeS3Settings,
    keys: Option<S3Keys>,
}

/// The `s3.client.floe.*` settings of a node's `elasticsearch.yml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NodeS3Settings {
    endpoint: Option<String>,
    protocol: Option<String>,
    path_style_access: Option<bool>,
    region: Option<String>,
}

impl NodeS3Settings {
    fn is_empty(&self) -> bool {
        *self == NodeS3Settings::default()
    }

    /// Reads the settings of the client Floe's nodes use
    /// (`floe_nodeconfig::S3_CLIENT`) from the rendered boot script: one
    /// `s3.client.floe.NAME: VALUE` line each, the value a JSON-compatible
    /// quoted string or a bare boolean.
    fn from_user_data(user_data: &str) -> NodeS3Settings {
        let prefix = format!("s3.client.{}.", floe_nodeconfig::S3_CLIENT);
        let mut out = NodeS3Settings::default();
        for line in user_data.lines() {
            let Some(rest) = line.trim().strip_prefix(&prefix) else {
                continue;
            };
            let Some((name, value)) = rest.split_once(':') else {
                continue;
            };
            let value = value.trim();
            let text = serde_json::from_str::<String>(value)
                .ok()
                .unwrap_or_else(|| value.to_string());
            match name.trim() {
                "endpoint" => out.endpoint = Some(text),
                "protocol" => out.protocol = Some(text),
                "path_style_access" => out.path_style_access = text.parse().ok(),
                "region" => out.region = Some(text),
                _ => {}
            }
        }
        out
    }
}

impl SimulatedClusters {
    pub fn new(compute: Arc<dyn Compute>, config: SimulatedClustersConfig) -> SimulatedClusters {
        SimulatedClusters {
            compute,
            config,
            clusters: Mutex::new(HashMap::new()),
            timeout: Duration::from_secs(30),
            http_port: DEFAULT_HTTP_PORT,
            parameters: None,
            user_data: None,
        }
    }

    /// The nodes' HTTP port, where a deployment whose instances have
    /// loopback addresses is served on each of them (default
    /// [`DEFAULT_HTTP_PORT`]; 0 takes any free port per address, which only
    /// tests that never reach a node by its recorded address want).
    pub fn with_http_port(mut self, port: u16) -> SimulatedClusters {
        self.http_port = port;
        self
    }

    /// Reads each deployment's certificates, password and repository keys
    /// from the node parameters under `prefix`, as its nodes would at boot.
    pub fn with_parameters(
        mut self,
        parameters: Arc<dyn NodeParameters>,
        prefix: impl Into<String>,
    ) -> SimulatedClusters {
        self.parameters = Some((parameters, prefix.into()));
        self
    }

    /// Reads the nodes' S3 client settings from their instances' user data.
    pub fn with_user_data(mut self, source: UserDataSource) -> SimulatedClusters {
        self.user_data = Some(source);
        self
    }

    /// The address of a deployment's simulated cluster, if it runs (for
    /// users of local mode, who index documents into it directly): one of
    /// its nodes' when they have their own addresses.
    pub async fn url(&self, deployment_id: &str) -> Option<String> {
        self.clusters
            .lock()
            .await
            .get(deployment_id)
            .and_then(|s| s.cluster.urls().into_iter().next())
    }

    /// Every address a deployment's simulated cluster listens on.
    pub async fn addrs(&self, deployment_id: &str) -> Vec<SocketAddr> {
        self.clusters
            .lock()
            .await
            .get(deployment_id)
            .map(|s| s.cluster.addrs())
            .unwrap_or_default()
    }

    /// The simulated cluster's node names (tests check joins and leaves).
    pub async fn node_names(&self, deployment_id: &str) -> Vec<String> {
        self.clusters
            .lock()
            .await
            .get(deployment_id)
            .map(|s| s.cluster.node_names())
            .unwrap_or_default()
    }

    /// The S3 client a deployment's simulated cluster uses now.
    pub async fn s3_client(&self, deployment_id: &str) -> Option<S3Client> {
        self.clusters
            .lock()
            .await
            .get(deployment_id)
            .and_then(|s| s.cluster.s3_client())
    }

    /// Changes the faults of a deployment's running simulated cluster.
    pub async fn set_faults(&self, deployment_id: &str, faults: SimFaults) -> bool {
        match self.clusters.lock().await.get(deployment_id) {
            Some(s) => {
                s.cluster.set_faults(faults);
                true
            }
            None => false,
        }
    }

    async fn parameter(
        &self,
        deployment_id: &str,
        name: &str,
    ) -> Result<Option<String>, ClusterError> {
        let Some((parameters, prefix)) = &self.parameters else {
            return Ok(None);
        };
        let path = deployment_path(prefix, deployment_id);
        Ok(parameters
            .get(&parameter_name(&path, name))
            .await?
            .map(|v| v.expose().to_string()))
    }

    /// What the deployment's nodes boot with now.
    async fn boot(&self, deployment_id: &str, nodes: &[NodeAddress]) -> Result<Boot, ClusterError> {
        let cert = self.parameter(deployment_id, TLS_NODE_CERT).await?;
        let key = self.parameter(deployment_id, TLS_NODE_KEY).await?;
        let password = self.parameter(deployment_id, ELASTIC_PASSWORD).await?;
        let security = match (cert, key, password) {
            (Some(cert), Some(key), Some(password)) => {
                let ca = self
                    .parameter(deployment_id, TLS_CA_CERT)
                    .await?
                    .ok_or_else(|| ClusterError::NotSecured {
                        deployment_id: deployment_id.to_string(),
                        message: format!("no {TLS_CA_CERT} parameter to trust its nodes by"),
                    })?;
                Some((
                    SimSecurity {
                        cert_chain_pem: cert,
                        key_pem: SecretString::new(key),
                        elastic_password: SecretString::new(password),
                    },
                    ca,
                ))
            }
            _ => None,
        };
        let access_key = self.parameter(deployment_id, REPOSITORY_ACCESS_KEY).await?;
        let secret_key = self.parameter(deployment_id, REPOSITORY_SECRET_KEY).await?;
        let keys = match (access_key, secret_key) {
            (Some(access_key), Some(secret_key)) => Some(S3Keys {
                access_key,
                secret_key: SecretString::new(secret_key),
                session_token: self
                    .parameter(deployment_id, REPOSITORY_SESSION_TOKEN)
                    .await?
                    .map(SecretString::new),
            }),
            _ => None,
        };
        // Every node of a deployment renders the same client settings;
        // the first running node's stand for all.
        let settings = match (&self.user_data, nodes.first()) {
            (Some(source), Some(node)) => source(&node.node_name)
                .map(|u| NodeS3Settings::from_user_data(&u))
                .unwrap_or_default(),
            _ => NodeS3Settings::default(),
        };
        let ca_key = self
            .parameter(deployment_id, TLS_CA_KEY)
            .await?
            .map(SecretString::new);
        let http_ca = self.parameter(deployment_id, TLS_HTTP_CA_CERT).await?;
        Ok(Boot {
            security,
            ca_key,
            http_ca,
            settings,
            keys,
        })
    }

    /// The S3 client of nodes that booted with `settings` and `keys`, over
    /// the configured base client.
    fn s3_client_for(&self, settings: &NodeS3Settings, keys: Option<&S3Keys>) -> Option<S3Client> {
        let base: Option<S3Client> = self.config.s3.clone().map(S3Client::from);
        if settings.is_empty() && keys.is_none() {
            return base;
        }
        let mut client = base.unwrap_or_default();
        if settings.endpoint.is_some() {
            client.endpoint.clone_from(&settings.endpoint);
        }
        if settings.protocol.is_some() {
            client.protocol.clone_from(&settings.protocol);
        }
        if settings.path_style_access.is_some() {
            client.path_style_access = settings.path_style_access;
        }
        if settings.region.is_some() {
            client.region.clone_from(&settings.region);
        }
        if let Some(keys) = keys {
            client.keys = Some(keys.clone());
        }
        Some(client)
    }

    /// The running nodes as cluster members: master-eligible when the
    /// `node.roles` of their `elasticsearch.yml` (in their user data) name
    /// `master`; without user data, when their node group's roles in the
    /// deployment do; and when neither says, as Elasticsearch takes a node
    /// without `node.roles`: master-eligible.
    async fn members(
        &self,
        deployment: &Deployment,
        nodes: &[NodeAddress],
    ) -> Result<Vec<SimNode>, ClusterError> {
        let groups: HashMap<String, String> = if self.user_data.is_some() {
            HashMap::new()
        } else {
            self.compute
                .instances(&deployment.id)
                .await?
                .into_iter()
                .filter_map(|i| {
                    let group = i.tags.get(floe_compute::TAG_NODE_GROUP)?.clone();
                    Some((i.id, group))
                })
                .collect()
        };
        Ok(nodes
            .iter()
            .map(|n| {
                let user_data = self
                    .user_data
                    .as_ref()
                    .and_then(|source| source(&n.node_name));
                let roles = user_data.as_deref().and_then(roles_in);
                let version = user_data.as_deref().and_then(version_in);
                let from_group = || {
                    let group = groups.get(&n.node_name)?;
                    let g = deployment
                        .spec
                        .node_groups
                        .iter()
                        .find(|g| &g.id == group)?;
                    Some((
                        g.roles.contains(&NodeRole::Master),
                        g.roles.iter().any(NodeRole::is_data),
                    ))
                };
                let (master_eligible, data) = roles.or_else(from_group).unwrap_or((true, true));
                // A node on a loopback address is served there: it
                // publishes that address, as a real node its private one.
                let addr = n
                    .private_ip
                    .parse::<IpAddr>()
                    .ok()
                    .filter(IpAddr::is_loopback)
                    .map(|ip| SocketAddr::new(ip, self.http_port));
                SimNode {
                    name: n.node_name.clone(),
                    master_eligible,
                    version,
                    data,
                    addr,
                }
            })
            .collect())
    }

    async fn start(
        &self,
        deployment: &Deployment,
        members: Vec<SimNode>,
        node_addrs: &[SocketAddr],
        boot: Boot,
    ) -> Result<Simulated, ClusterError> {
        let mut config = SimConfig::new(deployment.spec.name.clone())
            .with_version(deployment.spec.version.clone())
            .with_members(members)
            .with_faults(self.config.faults.clone());
        if let Some(root) = &self.config.fs_root {
            config = config.with_fs_root(org_fs_root(root, &deployment.org)?);
        }
        if let Some(root) = &self.config.data_root {
            config = config.with_data_path(plain_folder(
                root,
                &deployment.id,
                "deployment",
                "a data folder",
            )?);
        }
        if let Some(s3) = self.s3_client_for(&boot.settings, boot.keys.as_ref()) {
            config = config.with_s3(s3);
        }
        if let Some(first) = node_addrs.first() {
            config = config.with_addr(*first);
        }
        for addr in node_addrs {
            if let Some((cert, key)) = node_certificate(deployment, &boot, addr.ip())? {
                config.node_certificates.push((addr.ip(), cert, key));
            }
        }
        let ca_cert_pem = boot.trust();
        if let Some((security, _)) = boot.security {
            config = config.with_security(security);
        }
        let simulator = |e: floe_elastic_sim::SimError| ClusterError::Simulator(e.to_string());
        let cluster = SimulatedCluster::start(config).await.map_err(simulator)?;
        cluster.set_addrs(node_addrs).await.map_err(simulator)?;
        tracing::info!(
            deployment = %deployment.id,
            urls = ?cluster.urls(),
            secured = cluster.is_secured(),
            "simulated cluster for the deployment"
        );
        Ok(Simulated {
            cluster,
            ca_cert_pem,
            on_node_addresses: !node_addrs.is_empty(),
            client: None,
            keys: boot.keys,
            settings: boot.settings,
        })
    }
}

impl Boot {
    /// The CAs a client of the nodes' HTTP layer trusts: the CA parameter,
    /// which holds the deployment's and, once it has one, its HTTP CA
    /// (nodes from before a move to a stable endpoint and nodes made since
    /// may both run).
    fn trust(&self) -> Option<String> {
        self.security.as_ref().map(|(_, ca)| ca.clone())
    }
}

/// The HTTP certificate a node at `ip` (or the endpoint's address) signs
/// for itself with the CA key it boots with: the deployment's names and
/// that address. `None` without a CA key.
fn node_certificate(
    deployment: &Deployment,
    boot: &Boot,
    ip: IpAddr,
) -> Result<Option<(String, SecretString)>, ClusterError> {
    let Some(ca_key) = &boot.ca_key else {
        return Ok(None);
    };
    let ca = match boot.http_ca {
        Some(_) => floe_node_security::HttpCa::Own,
        None => floe_node_security::HttpCa::Deployment,
    };
    floe_node_security::node_http_certificate(
        &deployment.id,
        ca,
        ca_key,
        deployment.endpoint_for_nodes(),
        &[ip],
    )
    .map(Some)
    .map_err(|e| ClusterError::Simulator(e.to_string()))
}

/// Whether the `node.roles` line of a rendered `elasticsearch.yml` names
/// `master`, and whether it names a data role (`data`, `data_hot`, …);
/// `None` without such a line.
fn roles_in(user_data: &str) -> Option<(bool, bool)> {
    let line = user_data
        .lines()
        .find_map(|l| l.trim().strip_prefix("node.roles:"))?;
    let roles = line.trim().trim_start_matches('[').trim_end_matches(']');
    let roles: Vec<&str> = roles.split(',').map(str::trim).collect();
    Some((
        roles.contains(&"master"),
        roles.iter().any(|r| r.starts_with("data")),
    ))
}

/// The Elasticsearch version a boot script installs (its `ES_VERSION=`
/// line, the value maybe single-quoted); `None` without one.
fn version_in(user_data: &str) -> Option<String> {
    let value = user_data
        .lines()
        .find_map(|l| l.trim().strip_prefix("ES_VERSION="))?;
    let value = value.trim().trim_matches('\'');
    (!value.is_empty()).then(|| value.to_string())
}

/// The addresses a deployment's cluster serves: its nodes' and, when they
/// are loopback addresses and the deployment has a loopback endpoint, that
/// endpoint (which outlives every node), from the move to it on, as a
/// name's records are written on AWS.
fn served_addrs(deployment: &Deployment, node_addrs: &[SocketAddr], port: u16) -> Vec<SocketAddr> {
    let mut served = node_addrs.to_vec();
    let endpoint = deployment
        .endpoint_for_nodes()
        .and_then(|host| host.parse::<IpAddr>().ok())
        .filter(IpAddr::is_loopback)
        .map(|ip| SocketAddr::new(ip, port));
    if let Some(endpoint) = endpoint
        && !served.is_empty()
        && !served.contains(&endpoint)
    {
        served.push(endpoint);
    }
    served
}

/// The node addresses to serve: every running node's, when all of them are
/// loopback addresses (a real node's private address would never be
/// bindable here).
fn loopback_addrs(nodes: &[NodeAddress], port: u16) -> Vec<SocketAddr> {
    let ips: Vec<IpAddr> = nodes
        .iter()
        .filter_map(|n| n.private_ip.parse::<IpAddr>().ok())
        .filter(IpAddr::is_loopback)
        .collect();
    if ips.len() != nodes.len() {
        return Vec::new();
    }
    ips.into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect()
}

#[async_trait]
impl Clusters for SimulatedClusters {
    async fn client(
        &self,
        deployment: &Deployment,
        avoid: &[String],
    ) -> Result<ElasticClient, ClusterError> {
        let nodes = running_nodes(self.compute.as_ref(), &deployment.id).await?;
        if nodes.is_empty() {
            return Err(ClusterError::NoRunningNode {
                deployment_id: deployment.id.clone(),
            });
        }
        let members = self.members(deployment, &nodes).await?;
        let node_addrs = loopback_addrs(&nodes, self.http_port);
        // What the cluster serves: every node's address and, while it has
        // nodes there, the deployment's stable endpoint.
        let served = served_addrs(deployment, &node_addrs, self.http_port);
        let boot = self.boot(&deployment.id, &nodes).await?;
        let password = self.parameter(&deployment.id, ELASTIC_PASSWORD).await?;
        let mut clusters = self.clusters.lock().await;
        let simulated = match clusters.entry(deployment.id.clone()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                self.start(deployment, members.clone(), &served, boot.clone())
                    .await?,
            ),
        };
        let cluster = &simulated.cluster;
        cluster.set_members(&members);
        simulated.ca_cert_pem = boot.trust();
        if simulated.on_node_addresses && !node_addrs.is_empty() {
            // A node that joins signs its own certificate before it serves;
            // so does the endpoint, served from a move's end on.
            for addr in &served {
                if cluster.has_node_certificate(addr.ip()) {
                    continue;
                }
                if let Some((cert, key)) = node_certificate(deployment, &boot, addr.ip())? {
                    cluster
                        .set_node_certificate(addr.ip(), &cert, &key)
                        .map_err(|e| ClusterError::Simulator(e.to_string()))?;
                }
            }
            cluster
                .set_addrs(&served)
                .await
                .map_err(|e| ClusterError::Simulator(e.to_string()))?;
        }
        // New nodes with another elasticsearch.yml (an update plan's new
        // launch template) bring their S3 client settings.
        let current = boot;
        if current.settings != simulated.settings {
            cluster.set_s3_client(self.s3_client_for(&current.settings, current.keys.as_ref()));
            simulated.settings = current.settings.clone();
            simulated.keys.clone_from(&current.keys);
        } else if current.keys != simulated.keys {
            // Changed keys reach the keystore, then the running nodes, as
            // a plan's `_nodes/reload_secure_settings` makes them.
            match &current.keys {
                Some(keys) => cluster.set_keystore_s3_keys(Some(keys.clone())),
                None => cluster.set_keystore_s3_keys(
                    self.s3_client_for(&NodeS3Settings::default(), None)
                        .and_then(|c| c.keys),
                ),
            }
            cluster.reload_secure_settings();
            simulated.keys.clone_from(&current.keys);
            tracing::info!(deployment = %deployment.id, "simulated cluster reloaded the repository's keys");
        }
        // The stable endpoint, when the functions reach the deployment by it
        // and the cluster serves it; else a node not being drained, as
        // `NodeAddresses` picks one.
        let endpoint = floe_clusters::endpoint_reach(deployment, avoid)
            .and_then(|host| host.parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, self.http_port))
            .filter(|addr| simulated.on_node_addresses && served.contains(addr));
        let addr = if simulated.on_node_addresses {
            endpoint.or_else(|| {
                nodes
                    .iter()
                    .position(|n| !avoid.contains(&n.node_name))
                    .and_then(|i| node_addrs.get(i))
                    .or_else(|| node_addrs.first())
                    .copied()
            })
        } else {
            None
        };
        let key = ClientKey {
            addr,
            password: password.clone(),
            trust: simulated.ca_cert_pem.clone(),
        };
        if let Some((built, client)) = &simulated.client
            && *built == key
        {
            return Ok(client.clone());
        }
        let target = addr.unwrap_or_else(|| cluster.addr());
        let client = match (&simulated.ca_cert_pem, password) {
            (Some(ca), Some(password)) => {
                let auth = Some(Auth::Basic {
                    username: floe_node_security::ELASTIC_USER.to_string(),
                    password: SecretString::new(password),
                });
                match endpoint {
                    Some(endpoint) => ElasticClient::at_endpoint(
                        &endpoint.ip().to_string(),
                        endpoint.port(),
                        ca,
                        auth,
                        self.timeout,
                    )?,
                    None => ElasticClient::pinned(
                        &floe_node_security::server_name(&deployment.id),
                        target,
                        ca,
                        auth,
                        self.timeout,
                    )?,
                }
            }
            (Some(_), None) => {
                return Err(ClusterError::NotSecured {
                    deployment_id: deployment.id.clone(),
                    message: format!("no {ELASTIC_PASSWORD} parameter"),
                });
            }
            (None, _) => ElasticClient::new(
                &format!("{}://{target}", cluster.scheme()),
                None,
                self.timeout,
            )?,
        };
        simulated.client = Some((key, client.clone()));
        Ok(client)
    }

    async fn forget(&self, deployment_id: &str) {
        let simulated = self.clusters.lock().await.remove(deployment_id);
        if let Some(simulated) = simulated
            && let Err(e) = simulated.cluster.shutdown().await
        {
            tracing::warn!(deployment = deployment_id, error = %e, "simulated cluster did not stop cleanly");
        }
        // Its nodes' disks went with them.
        if let Some(root) = &self.config.data_root
            && let Ok(dir) = plain_folder(root, deployment_id, "deployment", "a data folder")
            && let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(deployment = deployment_id, error = %e, dir = %dir.display(), "cannot remove a simulated cluster's data folder");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{NodeS3Settings, roles_in, version_in};

    #[test]
    fn the_version_is_read_from_the_boot_script() {
        assert_eq!(
            version_in("#!/bin/bash\nES_VERSION=8.15.3\n").as_deref(),
            Some("8.15.3")
        );
        assert_eq!(
            version_in("ES_VERSION='7.17.25'").as_deref(),
            Some("7.17.25")
        );
        assert_eq!(version_in("ES_ARCH=aarch64"), None);
    }

    #[test]
    fn master_eligibility_and_data_roles_are_read_from_node_roles() {
        assert_eq!(
            roles_in("x\nnode.roles: [master, data_hot]\n"),
            Some((true, true))
        );
        assert_eq!(
            roles_in("node.roles: [data_hot, ingest]"),
            Some((false, true))
        );
        assert_eq!(roles_in("node.roles: [master]"), Some((true, false)));
        assert_eq!(roles_in("node.roles: []"), Some((false, false)));
        assert_eq!(roles_in("cluster.name: x"), None);
    }

    #[test]
    fn the_s3_client_settings_are_read_from_the_rendered_yml() {
        let user_data = "#!/bin/bash\ncat > x <<'FLOE_EOF'\ncluster.name: \"a\"\ns3.client.floe.endpoint: \"minio.internal:9000\"\ns3.client.floe.protocol: \"http\"\ns3.client.floe.path_style_access: true\ns3.client.floe.region: \"eu-west-1\"\ns3.client.other.endpoint: \"no\"\nFLOE_EOF\n";
        assert_eq!(
            NodeS3Settings::from_user_data(user_data),
            NodeS3Settings {
                endpoint: Some("minio.internal:9000".into()),
                protocol: Some("http".into()),
                path_style_access: Some(true),
                region: Some("eu-west-1".into()),
            }
        );
        assert!(NodeS3Settings::from_user_data("s3.client.floe: x\n").is_empty());
    }
}
