//! A simulated Elasticsearch cluster, for Floe's local mode and tests.
//!
//! No Elasticsearch can run where Floe is built and tested, so this crate
//! answers Elasticsearch's documented HTTP APIs itself, over real HTTP on a
//! loopback port (HTTPS with the `elastic` user's basic authentication
//! when secured, as a real node is): cluster health, indices and
//! documents (in memory, `_bulk` included),
//! snapshot repositories of type `fs` (a folder under
//! [`SimConfig::fs_root`], like `path.repo`) and `s3` (any S3 endpoint),
//! snapshots, restore, searchable-snapshot mounts and recovery progress,
//! with Elasticsearch's status codes and error bodies.
//!
//! Snapshots are kept in the repository itself (in the simulator's own
//! format), not in memory: a second simulated cluster that registers the
//! same folder or bucket sees them and can restore them, which is how a
//! clone of a deployment works.
//!
//! Faults can be injected ([`SimFaults`]): slow snapshots, `PARTIAL` or
//! `FAILED` snapshots, slow restores.
//!
//! ```no_run
//! # async fn demo() -> Result<(), floe_elastic_sim::SimError> {
//! use floe_elastic_sim::{SimConfig, SimulatedCluster};
//! let cluster = SimulatedCluster::start(SimConfig::new("demo").with_fs_root("/tmp/repos")).await?;
//! println!("simulated Elasticsearch at {}", cluster.url());
//! cluster.shutdown().await?;
//! # Ok(()) }
//! ```

mod aliases;
mod blobs;
mod bulk;
mod cat;
mod cluster;
mod compat;
mod config;
mod coordination;
mod error;
mod index_admin;
mod indices;
mod license;
mod node_stats;
mod nodes;
mod persist;
mod repo_data;
mod repositories;
mod resolve;
mod restore;
mod search;
mod search_support;
pub use search_support::SEARCH_ENDPOINTS;
mod security;
mod server;
mod snapshots;
mod state;
mod stats;
mod templates;
mod tls;
mod util;

pub use config::{
    DEFAULT_VERSION, S3Access, S3Client, S3Keys, SimConfig, SimFaults, SimNode, SimSecurity,
    SnapshotFault,
};
pub use error::{ApiError, SimError};
pub use server::{RunningCluster, SimulatedCluster};
