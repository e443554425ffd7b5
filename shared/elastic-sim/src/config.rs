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
    /// `127.0.0.1:0`, a free port.
    pub addr: Option<SocketAddr>,
    /// Reported as `version.number` and recorded in snapshots.
    pub version: String,
    /// What Elasticsearch calls `path.repo`: `fs` repositories must have
    /// their `location` under it (a relative location is resolved against
    /// it). `None` refuses `fs` repositories, as an empty `path.repo` does.
    pub fs_root: Option<PathBuf>,
    /// How `s3` repositories reach their bucket when their settings name no
    /// endpoint, and the credentials they use (a real node keeps them in
    /// its keystore, never in repository settings).
    pub s3: Option<S3Access>,
    pub faults: SimFaults,
}

impl SimConfig {
    /// Three nodes (so replicas are assigned and indices turn green), no
    /// repositories, no faults.
    pub fn new(cluster_name: impl Into<String>) -> SimConfig {
        SimConfig {
            cluster_name: cluster_name.into(),
            nodes: 3,
            addr: None,
            version: DEFAULT_VERSION.to_string(),
            fs_root: None,
            s3: None,
            faults: SimFaults::default(),
        }
    }

    pub fn with_fs_root(mut self, root: impl Into<PathBuf>) -> SimConfig {
        self.fs_root = Some(root.into());
        self
    }

    pub fn with_s3(mut self, s3: S3Access) -> SimConfig {
        self.s3 = Some(s3);
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

/// The S3 client settings and credentials of the simulated nodes.
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
