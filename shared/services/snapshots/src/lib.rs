//! Snapshots of a deployment's cluster: the snapshotter service (scheduled
//! and manual snapshots, their records, refresh and delete), the retention
//! rules, and a Floe repository's Elasticsearch registration.
//!
//! No AWS SDK here: the cluster is reached through the `Clusters` port and
//! records go through the `Store`, so the Lambda function, the API and local
//! mode share this code with different adapters.

mod error;
pub mod registration;
pub mod retention;
mod snapshotter;

pub use error::SnapshotError;
pub use registration::{instance_role_path, repository_registration, snapshot_place};
pub use retention::{RetentionRules, expired};
pub use snapshotter::{
    MAX_INDICES, Reconciled, Removal, RunSummary, Snapshotter, SnapshotterSettings,
};
