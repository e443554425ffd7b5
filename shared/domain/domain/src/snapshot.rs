//! Snapshot records: what Floe knows about each snapshot it took (or was
//! asked to take) of a deployment, and the run state of each policy
//! attachment. The repository itself stays the truth about the files; these
//! records make listing and retention one store query instead of a cluster
//! round trip.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Elasticsearch's snapshot states, spelled as Elasticsearch spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SnapshotState {
    InProgress,
    Success,
    /// Finished, but some shards were not stored.
    Partial,
    Failed,
    /// Taken by a version the cluster cannot read.
    Incompatible,
}

impl SnapshotState {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotState::InProgress => "IN_PROGRESS",
            SnapshotState::Success => "SUCCESS",
            SnapshotState::Partial => "PARTIAL",
            SnapshotState::Failed => "FAILED",
            SnapshotState::Incompatible => "INCOMPATIBLE",
        }
    }

    pub fn is_finished(self) -> bool {
        self != SnapshotState::InProgress
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotShards {
    pub total: u32,
    pub successful: u32,
    pub failed: u32,
}

/// One snapshot of one deployment, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub org: String,
    pub deployment_id: String,
    pub repository: String,
    pub name: String,
    /// Empty until the cluster has reported it (a snapshot accepted but not
    /// yet seen).
    #[serde(default)]
    pub uuid: String,
    pub state: SnapshotState,
    pub start: DateTime<Utc>,
    #[serde(default)]
    pub end: Option<DateTime<Utc>>,
    #[serde(default)]
    pub duration_in_millis: Option<u64>,
    #[serde(default)]
    pub indices: Vec<String>,
    #[serde(default)]
    pub shards: SnapshotShards,
    #[serde(default)]
    pub size_in_bytes: Option<u64>,
    /// The policy that took it; `None` for a manual snapshot.
    #[serde(default)]
    pub policy_id: Option<String>,
    /// Elasticsearch's reason for a failed or partial snapshot.
    #[serde(default)]
    pub failure: Option<String>,
    /// The start time in the record's storage key, fixed at creation so that
    /// a later, more exact start time from the cluster never moves the record.
    pub sort_millis: i64,
    pub updated: DateTime<Utc>,
    /// When a delete of it began: from then on no clone may pin it (the
    /// pin is counted only on the record as the clone read it, and this
    /// mark gives it a new version). Set until the delete removes the
    /// record, or cleared when the delete is refused or fails on the
    /// cluster; one left by a delete that stopped half-way is finished by
    /// the next delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting: Option<DateTime<Utc>>,
    /// Where its repository kept it when it was recorded
    /// (`s3://{bucket}/{base_path}` or `fs:{location}`, the deployment's
    /// own path). A repository that moved since no longer holds it: it is
    /// then neither restored from, nor deleted, nor dropped by retention
    /// at the new place. `None` on records written before Floe kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<String>,
    /// When Floe found the repository no longer holding it (deleted
    /// outside Floe, through the cluster's own API): it is then never
    /// restored from nor resolved as `__latest_success__`. Cleared if the
    /// repository lists it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<DateTime<Utc>>,
    /// Each index's document count as Floe read it just before it started
    /// the snapshot and again when it saw the snapshot end, so that a
    /// restore of it can be checked: a restored index's count lies between
    /// the two (equal when nothing was written meanwhile). Only for the
    /// snapshots Floe took itself; `None` for adopted ones (taken through
    /// the cluster's own API) and for records from before Floe kept counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_counts: Option<BTreeMap<String, DocumentCount>>,
}

/// One index's document count around a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DocumentCount {
    /// Its count just before the snapshot started.
    pub before: u64,
    /// Its count when Floe saw the snapshot end; absent until then (and when
    /// the index was gone by then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
}

/// A snapshot as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SnapshotView {
    #[schema(example = "nightly-2026.11.29")]
    pub snapshot: String,
    #[schema(example = "main-backups")]
    pub repository: String,
    #[schema(example = "dpGR0bHlS5eSn5xE1ZKYKg")]
    pub uuid: String,
    pub state: SnapshotState,
    pub start_time: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_in_millis: Option<u64>,
    pub indices: Vec<String>,
    pub shards: SnapshotShards,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_in_bytes: Option<u64>,
    /// The policy that took it; absent for a manual snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Clones depend on it (they mount it, or have not finished restoring
    /// it): it cannot be deleted, and retention keeps it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// The repository no longer holds it: it was deleted outside Floe
    /// (through the cluster's own snapshot API), found so at a listing,
    /// a look at it or a restore's resolution since `missing_since`. A
    /// missing snapshot cannot be restored or cloned, is never
    /// `__latest_success__`, and a mount clone of it reports a health
    /// warning. Deleting it only forgets its record. Absent when present.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    /// When Floe first found it missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_since: Option<DateTime<Utc>>,
    /// Each index's document count just before the snapshot started and
    /// when it ended, as Floe read them (`_cat/indices`), for checking a
    /// restore of it. Absent for snapshots Floe did not take itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_counts: Option<BTreeMap<String, DocumentCount>>,
}

impl SnapshotView {
    /// The view of a record that `refs` clones pin.
    pub fn pinned_by(r: &SnapshotRecord, refs: u64) -> SnapshotView {
        SnapshotView {
            pinned: refs > 0,
            ..SnapshotView::new(r)
        }
    }

    pub fn new(r: &SnapshotRecord) -> SnapshotView {
        SnapshotView {
            snapshot: r.name.clone(),
            repository: r.repository.clone(),
            uuid: r.uuid.clone(),
            state: r.state,
            start_time: r.start,
            end_time: r.end,
            duration_in_millis: r.duration_in_millis,
            indices: r.indices.clone(),
            shards: r.shards,
            size_in_bytes: r.size_in_bytes,
            policy_id: r.policy_id.clone(),
            failure: r.failure.clone(),
            pinned: false,
            missing: r.missing.is_some(),
            missing_since: r.missing,
            document_counts: r.document_counts.clone(),
        }
    }
}

/// How the last scheduled run of a policy attachment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// A snapshot was taken (or started) and recorded.
    Snapshot,
    /// Nothing was taken; `last_skip_reason` says why.
    Skipped,
    /// Taking the snapshot failed; `last_failure` says why.
    Failed,
}

/// The run state of one policy attached to one deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRun {
    pub org: String,
    pub deployment_id: String,
    pub policy_id: String,
    pub last_run: DateTime<Utc>,
    pub last_outcome: RunOutcome,
    #[serde(default)]
    pub last_snapshot: Option<String>,
    #[serde(default)]
    pub last_success: Option<DateTime<Utc>>,
    #[serde(default)]
    pub last_skip_reason: Option<String>,
    #[serde(default)]
    pub last_failure: Option<String>,
    /// Failures since the last success; reset by a successful snapshot.
    #[serde(default)]
    pub consecutive_failures: u32,
    #[serde(default)]
    pub total_failures: u64,
    #[serde(default)]
    pub total_snapshots: u64,
    #[serde(default)]
    pub total_deleted: u64,
    /// What the last run's retention kept because clones depend on it
    /// (`{snapshot}: pinned by …`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_retention_skipped: Vec<String>,
}

impl PolicyRun {
    pub fn new(org: &str, deployment_id: &str, policy_id: &str, now: DateTime<Utc>) -> PolicyRun {
        PolicyRun {
            org: org.into(),
            deployment_id: deployment_id.into(),
            policy_id: policy_id.into(),
            last_run: now,
            last_outcome: RunOutcome::Skipped,
            last_snapshot: None,
            last_success: None,
            last_skip_reason: None,
            last_failure: None,
            consecutive_failures: 0,
            total_failures: 0,
            total_snapshots: 0,
            total_deleted: 0,
            last_retention_skipped: Vec::new(),
        }
    }
}

/// A deleted deployment whose snapshots Floe keeps: the delete left them
/// in its repository (a delete keeps them unless asked to remove them), so
/// their records stay, listed under the repository by this entry, and the
/// repository counts it as a user until they are gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormerDeployment {
    pub org: String,
    /// The deleted deployment's id: its snapshots' records are still
    /// found by it, and a clone names it as `source_deployment_id`.
    pub id: String,
    pub name: String,
    /// The Elasticsearch version it ran: a restore needs this or later.
    pub version: String,
    /// The repository that holds its snapshots (its last one).
    pub repository: String,
    pub deleted: DateTime<Utc>,
}

/// A deleted deployment whose snapshots are kept, as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FormerDeploymentView {
    /// The deleted deployment's id: list its snapshots under
    /// `…/repositories/{name}/deleted-deployments/{id}/snapshots`, and clone
    /// one with `restore_snapshot.source_deployment_id` set to it.
    #[schema(example = "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c")]
    pub id: String,
    #[schema(example = "logs-2025")]
    pub name: String,
    #[schema(example = "8.15.3")]
    pub version: String,
    pub repository: String,
    pub deleted: DateTime<Utc>,
}

impl FormerDeploymentView {
    pub fn new(f: &FormerDeployment) -> FormerDeploymentView {
        FormerDeploymentView {
            id: f.id.clone(),
            name: f.name.clone(),
            version: f.version.clone(),
            repository: f.repository.clone(),
            deleted: f.deleted,
        }
    }
}
