//! How a simulated cluster is set up, and the faults it can be told to show.

use floe_domain::secret::SecretString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The Elasticsearch version the simulator claims to be, unless told
/// otherwise. Snapshots record it, as real ones do.
pub const DEFAULT_VERSION: &str = "8.15.0";

/// One simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub cluster_name: String,
    /// Nodes in the cluster. Replicas need a second node: with one node, an
    /// index with replicas is yellow, as on Elasticsearch.
    pub nodes: u32,
    /// Where to listen; must be a loopback address. `None` is
    /// `127.0.0.1:0`, a free port. More addresses can be added later
    /// ([`crate::RunningCluster::set_addrs`]).
    pub addr: Option<SocketAddr>,
    /// Reported as `version.number` and recorded in snapshots.
    pub version: String,
    /// What Elasticsearch calls `path.repo`: `fs` repositories must have
    /// their `location` under it (a relative location is resolved against
    /// it). `None` refuses `fs` repositories, as an empty `path.repo` does.
    pub fs_root: Option<PathBuf>,
    /// What Elasticsearch calls `path.data`: where the cluster keeps its
    /// indices, documents, registered repositories, templates, persistent
    /// settings and license, so that a cluster started again on the same
    /// folder holds what it held ([`crate::persist`]). `None` keeps
    /// everything in memory only.
    pub data_path: Option<PathBuf>,
    /// The nodes' S3 client (`s3.client.*` in `elasticsearch.yml`, keys in
    /// the keystore). `None`: no client is configured, and an `s3`
    /// repository cannot reach its bucket.
    pub s3: Option<S3Client>,
    /// HTTPS and basic authentication, as `xpack.security` gives a real
    /// node; `None` serves plain HTTP to anyone (a cluster with security
    /// disabled).
    pub security: Option<SimSecurity>,
    /// Certificates of their own (PEM chain and key) that nodes serve
    /// HTTPS with at their addresses, by address, instead of the shared
    /// one of `security`: each names its node's address, as a real node's
    /// boot script makes it, so that a client sniffing `_nodes/http`
    /// verifies every node. More can be added later
    /// ([`crate::RunningCluster::set_node_certificate`]).
    pub node_certificates: Vec<(std::net::IpAddr, String, SecretString)>,
    pub faults: SimFaults,
    /// The nodes it starts with, by name, role and version; `None`:
    /// `nodes` master-eligible nodes named after the cluster.
    pub members: Option<Vec<SimNode>>,
}

/// One node of a simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimNode {
    pub name: String,
    /// Whether `master` is among its roles (it is when `node.roles` is unset).
    pub master_eligible: bool,
    /// `None`: the cluster's version.
    pub version: Option<String>,
    /// Whether it has a data role (it has when `node.roles` is unset):
    /// `_cluster/health` counts such nodes as `number_of_data_nodes`.
    pub data: bool,
    /// The address it publishes for HTTP (`_nodes/http`, `_cat/nodes`);
    /// `None`: the first address the cluster serves.
    pub addr: Option<SocketAddr>,
}

impl SimNode {
    pub fn master_eligible(name: impl Into<String>) -> SimNode {
        SimNode {
            name: name.into(),
            master_eligible: true,
            version: None,
            data: true,
            addr: None,
        }
    }
}

impl SimConfig {
    /// Three nodes (so replicas are assigned and indices turn green), no
    /// repositories, no security, no faults.
    pub fn new(cluster_name: impl Into<String>) -> SimConfig {
        SimConfig {
            cluster_name: cluster_name.into(),
            nodes: 3,
            addr: None,
            version: DEFAULT_VERSION.to_string(),
            fs_root: None,
            data_path: None,
            s3: None,
            security: None,
            node_certificates: Vec::new(),
            faults: SimFaults::default(),
            members: None,
        }
    }

    /// Starts with exactly these nodes; the master-eligible ones bootstrap
    /// the cluster (its first voting configuration).
    pub fn with_members(mut self, members: Vec<SimNode>) -> SimConfig {
        self.nodes = u32::try_from(members.len()).unwrap_or(u32::MAX);
        self.members = Some(members);
        self
    }

    /// The version its nodes run unless a node says otherwise.
    pub fn with_version(mut self, version: impl Into<String>) -> SimConfig {
        self.version = version.into();
        self
    }

    pub fn with_fs_root(mut self, root: impl Into<PathBuf>) -> SimConfig {
        self.fs_root = Some(root.into());
        self
    }

    /// Keeps the cluster's data in `dir` (created when missing), and
    /// starts from what a cluster left there before.
    pub fn with_data_path(mut self, dir: impl Into<PathBuf>) -> SimConfig {
        self.data_path = Some(dir.into());
        self
    }

    /// The nodes' S3 client; an [`S3Access`] (endpoint and keys in one)
    /// converts into one.
    pub fn with_s3(mut self, s3: impl Into<S3Client>) -> SimConfig {
        self.s3 = Some(s3.into());
        self
    }

    pub fn with_security(mut self, security: SimSecurity) -> SimConfig {
        self.security = Some(security);
        self
    }

    pub fn with_addr(mut self, addr: SocketAddr) -> SimConfig {
        self.addr = Some(addr);
        self
    }

    pub fn with_faults(mut self, faults: SimFaults) -> SimConfig {
        self.faults = faults;
        self
    }

    pub fn with_nodes(mut self, nodes: u32) -> SimConfig {
        self.nodes = nodes;
        self
    }
}

/// What a secured node is started with: its HTTP certificate (the
/// `xpack.security.http.ssl` certificate and key) and the `elastic` user's
/// password (the keystore's `bootstrap.password`).
#[derive(Clone)]
pub struct SimSecurity {
    /// The node certificate, then any intermediates, PEM.
    pub cert_chain_pem: String,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: SecretString,
    pub elastic_password: SecretString,
}

impl std::fmt::Debug for SimSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimSecurity")
            .field("cert_chain_pem", &self.cert_chain_pem.len())
            .field("key_pem", &self.key_pem)
            .field("elastic_password", &self.elastic_password)
            .finish()
    }
}

/// One S3 client of the nodes, as Elasticsearch configures it: the
/// settings from `elasticsearch.yml` (`s3.client.NAME.endpoint`,
/// `protocol`, `path_style_access`, `region`) and the keys from the
/// keystore (`s3.client.NAME.access_key`, `secret_key`, `session_token`).
/// A repository's own settings of the same names win over the client's.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Client {
    /// `host`, `host:port`, or a URL with its scheme; `None` is AWS S3.
    pub endpoint: Option<String>,
    /// `http` or `https` (Elasticsearch's default) for an endpoint
    /// without a scheme.
    pub protocol: Option<String>,
    pub path_style_access: Option<bool>,
    /// `None`: `us-east-1`, which is what an S3-compatible store accepts.
    pub region: Option<String>,
    /// `None`: no keys in the keystore (a real node would use its instance
    /// role; the simulator has none and fails the request).
    pub keys: Option<S3Keys>,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Client")
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .field("path_style_access", &self.path_style_access)
            .field("region", &self.region)
            .field("keys", &self.keys)
            .finish()
    }
}

/// The S3 client's keystore entries.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Keys {
    pub access_key: String,
    pub secret_key: SecretString,
    /// Only for temporary credentials.
    pub session_token: Option<SecretString>,
}

impl std::fmt::Debug for S3Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Keys")
            .field(
                "access_key",
                &floe_domain::secret::mask_access_key(&self.access_key),
            )
            .field("secret_key", &self.secret_key)
            .field("session_token", &self.session_token.is_some())
            .finish()
    }
}

/// The S3 client settings and credentials of the simulated nodes, in one:
/// the older way of giving a simulated cluster its client, kept for the
/// tests that use it. It converts into an [`S3Client`].
#[derive(Clone)]
pub struct S3Access {
    /// Such as `http://127.0.0.1:5000`; `None` is AWS itself. A repository's
    /// own `endpoint` setting wins over it.
    pub endpoint_url: Option<String>,
    pub region: String,
    pub access_key: String,
    pub secret_key: SecretString,
    /// Used when the repository does not say `path_style_access`.
    pub force_path_style: bool,
}

impl From<S3Access> for S3Client {
    fn from(a: S3Access) -> S3Client {
        S3Client {
            endpoint: a.endpoint_url,
            protocol: None,
            path_style_access: Some(a.force_path_style),
            region: Some(a.region),
            keys: Some(S3Keys {
                access_key: a.access_key,
                secret_key: a.secret_key,
                session_token: None,
            }),
        }
    }
}

impl std::fmt::Debug for S3Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Access")
            .field("endpoint_url", &self.endpoint_url)
            .field("region", &self.region)
            .field(
                "access_key",
                &floe_domain::secret::mask_access_key(&self.access_key),
            )
            .field("secret_key", &self.secret_key)
            .field("force_path_style", &self.force_path_style)
            .finish()
    }
}

/// Faults the simulator shows on purpose, so callers can test how they
/// cope. They can be changed on a running cluster
/// ([`crate::RunningCluster::set_faults`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimFaults {
    /// How long each snapshot stays `IN_PROGRESS` before it is written to
    /// the repository.
    pub snapshot_delay: Duration,
    /// Make every snapshot end `PARTIAL` or `FAILED`.
    pub fail_snapshots: Option<SnapshotFault>,
    /// How long a restore (or a `full_copy` mount) takes to recover its
    /// shards; `_recovery` reports the bytes copied so far in between, and
    /// the restored indices are red until it is over.
    pub restore_delay: Duration,
}

/// How injected snapshot failures end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotFault {
    /// The shards of the last index (by name) fail; the others are stored.
    /// Restoring that index then needs `partial: true`.
    Partial,
    /// The whole snapshot fails with a reason; nothing can be restored.
    Failed,
}
