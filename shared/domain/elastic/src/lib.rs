//! Floe's Elasticsearch client: cluster health, snapshot repositories,
//! snapshots, restore, searchable-snapshot mounts and recovery progress.
//!
//! One [`ElasticClient`] per cluster, built once. Every call maps
//! Elasticsearch's error bodies to an [`ElasticError`] variant with a stable
//! [`code`](ElasticError::code) and a [`transient`](ElasticError::is_transient)
//! flag, so plan steps can decide between retrying and giving up.
//!
//! Snapshot names may be date math (`<nightly-{now/d}>`). Elasticsearch
//! resolves them when it creates the snapshot; the client only encodes them
//! (see [`encode_snapshot_name`]) and reports the name Floe expects.

mod client;
mod encode;
mod error;
mod forward;
mod model;
mod recovery;

pub use client::{Auth, ElasticClient};
pub use encode::encode_snapshot_name;
pub use error::{Cause, ElasticError, Failure};
pub use forward::{FORWARDED_REQUEST_HEADERS, ForwardRequest, Forwarded};
pub use model::{
    ClusterHealth, CreateSnapshot, CreateSnapshotResponse, FileStats, HealthStatus, IndexRow,
    IndexSnapshotStatus, MountRequest, MountStorage, NodeRow, RepositoryRegistration, RestoreInfo,
    RestoreRequest, RestoreResponse, ShardCounts, ShardRow, ShardsStats, SnapshotInfo,
    SnapshotShardFailure, SnapshotState, SnapshotStats, SnapshotStatus, SnapshotStatusState,
    VotingConfiguration, VotingExclusion,
};
pub use recovery::{RecoveryProgress, ShardRecovery};
/// The HTTP method type requests are built with.
pub use reqwest::Method;
