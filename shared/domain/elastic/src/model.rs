//! Requests and responses, in the JSON shapes Elasticsearch documents.
//!
//! Responses tolerate missing and unknown fields: versions differ in what
//! they include (a `verbose=false` listing omits most of a snapshot), and a
//! newer cluster adding a field must not break this client.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Red,
    Yellow,
    Green,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Red => "red",
            HealthStatus::Yellow => "yellow",
            HealthStatus::Green => "green",
        }
    }
}

/// `GET _cluster/health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterHealth {
    #[serde(default)]
    pub cluster_name: String,
    pub status: HealthStatus,
    /// The wait for a status ran out before the cluster reached it.
    #[serde(default)]
    pub timed_out: bool,
    #[serde(default)]
    pub number_of_nodes: u32,
    #[serde(default)]
    pub number_of_data_nodes: u32,
    #[serde(default)]
    pub active_primary_shards: u32,
    #[serde(default)]
    pub active_shards: u32,
    #[serde(default)]
    pub relocating_shards: u32,
    #[serde(default)]
    pub initializing_shards: u32,
    #[serde(default)]
    pub unassigned_shards: u32,
    #[serde(default)]
    pub delayed_unassigned_shards: u32,
    #[serde(default)]
    pub number_of_pending_tasks: u32,
    #[serde(default)]
    pub number_of_in_flight_fetch: u32,
    #[serde(default)]
    pub task_max_waiting_in_queue_millis: u64,
    #[serde(default)]
    pub active_shards_percent_as_number: f64,
}

/// A repository to register with `PUT _snapshot/{name}`.
///
/// `settings` are the repository type's own settings (`bucket`, `client`,
/// `base_path`, `location`, throttles, …). Credentials of S3 repositories
/// belong in the nodes' keystore, never here.
#[derive(Debug, Clone, PartialEq)]
pub struct RepositoryRegistration {
    /// `s3`, `fs`, `url`, …
    pub repository_type: String,
    pub settings: Map<String, Value>,
    /// Sent as `settings.readonly`. A repository shared by several clusters
    /// must have exactly one writer; every other cluster registers it
    /// read-only, or the clusters corrupt it between them.
    pub readonly: bool,
    /// When false, sends `?verify=false`, so registering does not check that
    /// every node can reach the repository (use `verify_repository` later).
    pub verify: bool,
}

impl RepositoryRegistration {
    /// A writable repository, verified on registration.
    pub fn new(repository_type: impl Into<String>, settings: Map<String, Value>) -> Self {
        RepositoryRegistration {
            repository_type: repository_type.into(),
            settings,
            readonly: false,
            verify: true,
        }
    }

    pub fn read_only(mut self) -> Self {
        self.readonly = true;
        self
    }

    pub fn without_verification(mut self) -> Self {
        self.verify = false;
        self
    }

    /// The request body. `readonly` wins over a `readonly` key in
    /// `settings`, so the flag always says what is registered.
    pub(crate) fn body(&self) -> Value {
        let mut settings = self.settings.clone();
        if self.readonly {
            settings.insert("readonly".to_string(), Value::Bool(true));
        } else {
            settings.remove("readonly");
        }
        serde_json::json!({ "type": self.repository_type, "settings": settings })
    }
}

/// The body of `PUT _snapshot/{repository}/{snapshot}`. Unset fields take
/// Elasticsearch's defaults (every index, the global state included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateSnapshot {
    /// Data streams and indices, patterns allowed; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indices: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_unavailable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_global_state: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_states: Option<Vec<String>>,
    /// Free-form; Elasticsearch caps it at 1024 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expand_wildcards: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CreateSnapshotResponse {
    /// The snapshot started (`wait_for_completion=false`). Elasticsearch
    /// does not say which name a date-math name resolved to, so
    /// `predicted_name` holds what `resolve_snapshot_name` expected just
    /// before sending (`None` if it could not tell); see
    /// [`crate::encode_snapshot_name`] for when it can be wrong.
    Accepted { predicted_name: Option<String> },
    /// The snapshot finished (`wait_for_completion=true`), successfully or
    /// not: look at its `state`.
    Completed(Box<SnapshotInfo>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SnapshotState {
    InProgress,
    Success,
    Failed,
    /// Finished, but some shards were not stored; `failures` says which.
    Partial,
    /// Taken by a version this cluster cannot read.
    Incompatible,
    /// A state this client does not know yet.
    #[serde(other)]
    Unknown,
}

impl SnapshotState {
    /// Whether the snapshot has stopped changing.
    pub fn is_finished(self) -> bool {
        !matches!(self, SnapshotState::InProgress | SnapshotState::Unknown)
    }
}

/// One snapshot, as `GET _snapshot/{repository}/{snapshot}` and a
/// completed create describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    pub snapshot: String,
    #[serde(default)]
    pub uuid: String,
    /// Present from Elasticsearch 7.13 on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// The Elasticsearch version that took the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Absent only from some `verbose=false` listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SnapshotState>,
    #[serde(default)]
    pub indices: Vec<String>,
    #[serde(default)]
    pub data_streams: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_global_state: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time_in_millis: Option<i64>,
    /// 0 while the snapshot is running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time_in_millis: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_in_millis: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardCounts>,
    #[serde(default)]
    pub failures: Vec<SnapshotShardFailure>,
    /// Why a snapshot failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl SnapshotInfo {
    pub fn start_time(&self) -> Option<DateTime<Utc>> {
        self.start_time_in_millis.and_then(from_millis)
    }

    /// `None` while the snapshot is running.
    pub fn end_time(&self) -> Option<DateTime<Utc>> {
        self.end_time_in_millis.and_then(from_millis)
    }
}

/// Elasticsearch writes 0 for a time that has not happened yet.
fn from_millis(millis: i64) -> Option<DateTime<Utc>> {
    if millis <= 0 {
        return None;
    }
    DateTime::from_timestamp_millis(millis)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardCounts {
    #[serde(default)]
    pub total: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub successful: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotShardFailure {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// The state `GET _snapshot/{repository}/{snapshot}/_status` reports: the
/// running states of a snapshot in progress, or how a finished one ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SnapshotStatusState {
    Init,
    Started,
    InProgress,
    Success,
    Failed,
    Aborted,
    Partial,
    #[serde(other)]
    Unknown,
}

/// `GET _snapshot/{repository}/{snapshot}/_status`: shard and byte counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotStatus {
    pub snapshot: String,
    #[serde(default)]
    pub repository: String,
    #[serde(default)]
    pub uuid: String,
    pub state: SnapshotStatusState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_global_state: Option<bool>,
    #[serde(default)]
    pub shards_stats: ShardsStats,
    #[serde(default)]
    pub stats: SnapshotStats,
    #[serde(default)]
    pub indices: BTreeMap<String, IndexSnapshotStatus>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardsStats {
    #[serde(default)]
    pub initializing: u32,
    #[serde(default)]
    pub started: u32,
    #[serde(default)]
    pub finalizing: u32,
    #[serde(default)]
    pub done: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub total: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStats {
    /// Files this snapshot had to copy (still to copy, while running).
    #[serde(default)]
    pub incremental: FileStats,
    /// Files copied so far; reported while the snapshot runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processed: Option<FileStats>,
    /// Every file the snapshot references, copied now or by earlier ones.
    #[serde(default)]
    pub total: FileStats,
    #[serde(default)]
    pub start_time_in_millis: i64,
    #[serde(default)]
    pub time_in_millis: i64,
}

/// Signed because Elasticsearch reports -1 for shards whose numbers it
/// could not load (finished by a node that has since left).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStats {
    #[serde(default)]
    pub file_count: i64,
    #[serde(default)]
    pub size_in_bytes: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexSnapshotStatus {
    #[serde(default)]
    pub shards_stats: ShardsStats,
    #[serde(default)]
    pub stats: SnapshotStats,
}

/// The body of `POST _snapshot/{repository}/{snapshot}/_restore`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RestoreRequest {
    /// Data streams and indices, patterns allowed; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indices: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_unavailable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_global_state: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_aliases: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_states: Option<Vec<String>>,
    /// A Java regular expression over the restored names…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_pattern: Option<String>,
    /// …and its replacement, with `$1` for groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_replacement: Option<String>,
    /// Settings to set on every restored index, such as
    /// `index.number_of_replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_settings: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_index_settings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreResponse {
    /// The restore started (`wait_for_completion=false`).
    Accepted,
    /// Every primary shard's recovery attempt finished
    /// (`wait_for_completion=true`); the counts say how many succeeded.
    Completed(RestoreInfo),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreInfo {
    pub snapshot: String,
    #[serde(default)]
    pub indices: Vec<String>,
    #[serde(default)]
    pub shards: ShardCounts,
}

/// Where a mounted searchable snapshot keeps its data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MountStorage {
    /// A full local copy of the shard (fully mounted).
    #[default]
    FullCopy,
    /// Only a cache of recently read parts (partially mounted; frozen tier).
    SharedCache,
}

impl MountStorage {
    pub fn as_str(self) -> &'static str {
        match self {
            MountStorage::FullCopy => "full_copy",
            MountStorage::SharedCache => "shared_cache",
        }
    }
}

/// `POST _snapshot/{repository}/{snapshot}/_mount`: one index at a time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MountRequest {
    /// The index in the snapshot.
    pub index: String,
    /// The name of the mounted index; the snapshot's name when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_index: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_settings: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_index_settings: Vec<String>,
    /// Sent as the `storage` query parameter, not in the body, which
    /// Elasticsearch parses strictly.
    #[serde(skip)]
    pub storage: MountStorage,
}

/// A row of `_cat/nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NodeRow {
    pub id: String,
    pub name: String,
    /// The Elasticsearch version the node runs.
    #[serde(default)]
    pub version: String,
}

/// `metadata.cluster_coordination` of `GET _cluster/state/metadata`: who
/// votes in master elections (node ids) and who is excluded from voting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct VotingConfiguration {
    #[serde(default)]
    pub last_committed_config: Vec<String>,
    #[serde(default)]
    pub last_accepted_config: Vec<String>,
    #[serde(default)]
    pub voting_config_exclusions: Vec<VotingExclusion>,
}

/// One entry of the voting configuration exclusions; `node_id` is
/// `_absent_` for a node excluded by name while not in the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VotingExclusion {
    pub node_id: String,
    pub node_name: String,
}

impl VotingConfiguration {
    /// Whether node `name` is excluded and no longer in the committed or
    /// accepted configuration, so that its leaving cannot cost the quorum.
    pub fn has_left(&self, name: &str) -> bool {
        self.voting_config_exclusions
            .iter()
            .filter(|e| e.node_name == name)
            .any(|e| {
                !self.last_committed_config.contains(&e.node_id)
                    && !self.last_accepted_config.contains(&e.node_id)
            })
    }
}

/// A row of `_cat/indices`: one index, its health and its documents.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IndexRow {
    pub index: String,
    /// `green`, `yellow` or `red`; none for a closed index.
    #[serde(default)]
    pub health: Option<String>,
    /// `open` or `close`.
    #[serde(default)]
    pub status: Option<String>,
    /// The primaries' documents, as text (`_cat`'s JSON gives numbers as
    /// strings); none for a closed index.
    #[serde(default, rename = "docs.count")]
    pub docs_count: Option<String>,
}

impl IndexRow {
    /// The document count, when the cluster gave a readable one.
    pub fn documents(&self) -> Option<u64> {
        self.docs_count
            .as_deref()
            .and_then(|c| c.trim().parse().ok())
    }
}

/// A row of `_cat/shards`: one copy of one shard.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ShardRow {
    pub index: String,
    pub shard: String,
    /// `p` for a primary, `r` for a replica.
    pub prirep: String,
    /// `STARTED`, `RELOCATING`, `INITIALIZING` or `UNASSIGNED`.
    pub state: String,
    /// The node's name; none while unassigned.
    #[serde(default)]
    pub node: Option<String>,
}
