use floe_clusters::ClusterError;
use floe_domain::deployment::DeploymentStatus;
use floe_elastic::ElasticError;
use floe_store::StoreError;

/// Why a snapshot operation did not happen. The API maps each variant to
/// one error code; the snapshotter function retries the transient ones.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("deployment {0} was not found")]
    DeploymentNotFound(String),
    #[error("deployment {id} is {}, not running", status.as_str())]
    NotRunning {
        id: String,
        status: DeploymentStatus,
    },
    #[error("deployment {0} has no snapshot repository")]
    NoRepository(String),
    #[error("snapshot repository {0} was not found")]
    RepositoryNotFound(String),
    #[error("snapshot {0} was not found")]
    SnapshotNotFound(String),
    #[error("snapshot {0} already exists")]
    SnapshotExists(String),
    /// Clones depend on the snapshot (they restore or mount it): it stays
    /// until they no longer do. `by` names them (possibly not all, when a
    /// pin is being written right now).
    #[error("snapshot {snapshot} is pinned by {}", by.join(", "))]
    Pinned { snapshot: String, by: Vec<String> },
    /// Taken at `taken_at`, where its repository no longer keeps the
    /// deployment's snapshots (`now_at`): its data is at the old place.
    #[error(
        "snapshot {snapshot} was taken at {taken_at}; its repository now keeps snapshots at {now_at}"
    )]
    Moved {
        snapshot: String,
        taken_at: String,
        now_at: String,
    },
    /// Elasticsearch's `concurrent_snapshot_execution_exception`, or a
    /// snapshot seen running in the repository before starting one.
    #[error("a snapshot is already running in repository {repository}")]
    AlreadyRunning { repository: String },
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("elasticsearch: {0}")]
    Elastic(#[from] ElasticError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

impl SnapshotError {
    /// Worth running again later without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        match self {
            SnapshotError::Cluster(e) => e.is_transient(),
            SnapshotError::Elastic(e) => e.is_transient(),
            SnapshotError::Store(e) => matches!(e, StoreError::Unavailable(_)),
            SnapshotError::AlreadyRunning { .. } => true,
            _ => false,
        }
    }
}

/// An Elasticsearch error, with the repository-level ones given their own
/// meaning.
pub(crate) fn from_elastic(e: ElasticError, repository: &str) -> SnapshotError {
    match e {
        ElasticError::ConcurrentSnapshot(_) => SnapshotError::AlreadyRunning {
            repository: repository.to_string(),
        },
        other => SnapshotError::Elastic(other),
    }
}
