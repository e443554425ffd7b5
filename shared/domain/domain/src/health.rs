//! What the worker's health check last saw of a running deployment: its
//! instances against its spec, and its cluster's health. The check runs
//! in the worker (it needs EC2 and the cluster); it writes what it saw onto
//! the deployment record, so the api, which reaches nothing but the store,
//! shows it in the deployment's view.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The last health check's findings, kept on the deployment record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub healthy: bool,
    /// Why it is not healthy; absent when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The deployment's live instances, and whether each joined the cluster.
    #[serde(default)]
    pub nodes: Vec<NodeStatus>,
    /// What a tenant changed of what Floe owns on the cluster (its
    /// repository registrations, the license, the `elastic` password Floe
    /// holds), each named: a warning, beside `healthy`, that starts no
    /// heal; the next plan that registers repositories restores them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// When the check first saw it so (the record is written only when
    /// what the check sees changes).
    pub since: chrono::DateTime<chrono::Utc>,
    /// When the check last started a heal plan; cleared when a heal
    /// succeeds. A heal that failed is tried again only after a while, so
    /// a cluster that cannot heal (a lost quorum) does not loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal_started: Option<chrono::DateTime<chrono::Utc>>,
    /// The newest successful snapshot, as the check last found it: what a
    /// restore now would go back to. Absent before the first one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point: Option<RecoveryPoint>,
    /// Since when the check finds the recovery point older than the
    /// deployment's target (or no successful snapshot in a deployment
    /// older than it); cleared when a newer snapshot meets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point_breached: Option<chrono::DateTime<chrono::Utc>>,
}

/// The snapshot a restore would go back to now: the newest successful
/// one. The data written after its `end` is what a restore would lose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RecoveryPoint {
    #[schema(example = "floe-2026.12.06-3f9c2a7d1b0e")]
    pub snapshot: String,
    /// When it ended.
    pub end: chrono::DateTime<chrono::Utc>,
}

impl RecoveryPoint {
    /// Why a recovery point (`None`: no successful snapshot) breaks the
    /// `target` (as the operator wrote it), found so `since`: the one
    /// wording of the view's reason and the operators' event.
    pub fn breach(
        point: Option<&RecoveryPoint>,
        target: &str,
        since: chrono::DateTime<chrono::Utc>,
    ) -> String {
        let since = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match point {
            Some(p) => format!(
                "the newest successful snapshot ({}) ended at {}, longer ago than the recovery point target of {target} (since {since})",
                p.snapshot,
                p.end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            None => format!(
                "no successful snapshot, for longer than the recovery point target of {target} (since {since})"
            ),
        }
    }

    /// Whether `now` is further from this point than `target` allows.
    pub fn older_than(
        &self,
        target: std::time::Duration,
        now: chrono::DateTime<chrono::Utc>,
    ) -> bool {
        (now - self.end).to_std().is_ok_and(|age| age > target)
    }
}

impl Health {
    /// Whether `other` says the same about the deployment (the times aside).
    pub fn same_findings(&self, other: &Health) -> bool {
        self.healthy == other.healthy
            && self.reason == other.reason
            && self.nodes == other.nodes
            && self.warnings == other.warnings
    }

    /// Whether `other` says the same about the deployment's recovery point.
    pub fn same_recovery(&self, other: &Health) -> bool {
        self.recovery_point == other.recovery_point
            && self.recovery_point_breached == other.recovery_point_breached
    }
}

/// One node of the deployment as the view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeStatus {
    /// The EC2 instance id, also the Elasticsearch node name.
    #[schema(example = "i-0a1b2c3d4e5f67890")]
    pub instance_id: String,
    /// Its node group.
    #[schema(example = "hot")]
    pub group: String,
    /// Its availability zone.
    #[schema(example = "eu-west-1a")]
    pub zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "10.0.1.7")]
    pub private_address: Option<String>,
    /// The instance's state: `pending`, `running`, `stopping`, `stopped`,
    /// `shutting_down` or `terminated`.
    #[schema(example = "running")]
    pub state: String,
    /// The Elasticsearch version the node reports (the spec's while it has
    /// not joined).
    #[schema(example = "8.15.3")]
    pub version: String,
    /// Its Elasticsearch roles, as its node group declares them.
    #[schema(example = json!(["data_hot", "data_content"]))]
    pub roles: Vec<String>,
    /// It is a member of the cluster (listed by `_cat/nodes`).
    pub joined: bool,
}
