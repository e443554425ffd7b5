//! The simulator's own repository format. It is not Elasticsearch's (that
//! one is binary and versioned); it only has to hold what the simulated
//! APIs report, so that any simulated cluster reading the repository sees
//! the same snapshots:
//!
//! - `index.json`: every finished snapshot, with what `GET _snapshot`
//!   reports about it, and the repository's generation;
//! - `index.latest`: that generation alone, in decimal, written after
//!   `index.json` (Elasticsearch's `index.latest` holds the generation of
//!   the current `index-N` blob the same way);
//! - `snapshots/snap-{uuid}.json`: one per snapshot, with its indices'
//!   settings, mappings, aliases and documents.
//!
//! Like Elasticsearch, a cluster keeps what it read of a repository
//! ([`RepoCache`]) and reads it again only when the repository's
//! generation is no longer the one it holds: a mount or restore costs one
//! read of the small `index.latest`, not of every snapshot's record and
//! data.

use crate::blobs::{BlobStore, StoreError};
use crate::util::iso_millis;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub const INDEX_BLOB: &str = "index.json";
pub const LATEST_BLOB: &str = "index.latest";
const FORMAT: &str = "floe-elastic-sim/1";

pub fn snapshot_blob(uuid: &str) -> String {
    format!("snapshots/snap-{uuid}.json")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SnapState {
    InProgress,
    Success,
    Partial,
    Failed,
}

impl SnapState {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapState::InProgress => "IN_PROGRESS",
            SnapState::Success => "SUCCESS",
            SnapState::Partial => "PARTIAL",
            SnapState::Failed => "FAILED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardFailure {
    pub index: String,
    pub index_uuid: String,
    pub shard_id: u32,
    pub reason: String,
    pub node_id: String,
}

/// Sizes of one index as snapshotted, for `_status` and recovery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexSize {
    pub shards: u32,
    pub bytes: u64,
    pub files: u64,
}

/// One snapshot as `index.json` records it (finished) or the cluster
/// holds it while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub name: String,
    pub uuid: String,
    pub state: SnapState,
    pub indices: Vec<String>,
    pub include_global_state: bool,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    pub version: String,
    pub start_millis: i64,
    /// 0 while running.
    pub end_millis: i64,
    pub shards_total: u32,
    pub shards_failed: u32,
    #[serde(default)]
    pub failures: Vec<ShardFailure>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub sizes: BTreeMap<String, IndexSize>,
    /// The feature states the snapshot holds, by name (`security`).
    #[serde(default)]
    pub feature_states: Vec<String>,
}

/// The system index of each feature state the simulator keeps.
pub fn feature_indices(feature: &str) -> Vec<&'static str> {
    match feature {
        SECURITY_FEATURE => vec![".security-7"],
        _ => Vec::new(),
    }
}

/// The feature state of users, roles and keys.
pub const SECURITY_FEATURE: &str = "security";

impl SnapshotRecord {
    /// SnapshotInfo as Elasticsearch writes it; `verbose=false` leaves out
    /// the times, shard counts and failures.
    pub fn info(&self, repository: &str, verbose: bool) -> Value {
        let mut info = json!({
            "snapshot": self.name,
            "uuid": self.uuid,
            "repository": repository,
            "indices": self.indices,
            "data_streams": [],
            "state": self.state.as_str(),
        });
        if !verbose {
            return info;
        }
        let extra = json!({
            "version_id": version_id(&self.version),
            "version": self.version,
            "include_global_state": self.include_global_state,
            "metadata": self.metadata,
            "start_time": iso_millis(self.start_millis),
            "start_time_in_millis": self.start_millis,
            "failures": self.failures.iter().map(|f| json!({
                "index": f.index,
                "index_uuid": f.index_uuid,
                "shard_id": f.shard_id,
                "reason": f.reason,
                "node_id": f.node_id,
                "status": "INTERNAL_SERVER_ERROR",
            })).collect::<Vec<_>>(),
            "shards": {
                "total": self.shards_total,
                "failed": self.shards_failed,
                "successful": self.successful_shards(),
            },
            "feature_states": self.feature_states.iter().map(|f| json!({
                "feature_name": f,
                "indices": feature_indices(f),
            })).collect::<Vec<_>>(),
        });
        if let (Value::Object(info), Value::Object(extra)) = (&mut info, extra) {
            info.extend(extra);
            if self.metadata.is_none() {
                info.remove("metadata");
            }
            // Elasticsearch leaves out what has not happened yet.
            if self.end_millis > 0 {
                info.insert("end_time".into(), iso_millis(self.end_millis).into());
                info.insert("end_time_in_millis".into(), self.end_millis.into());
                info.insert(
                    "duration_in_millis".into(),
                    (self.end_millis - self.start_millis).into(),
                );
            }
            if let Some(reason) = &self.reason {
                info.insert("reason".into(), reason.clone().into());
            }
        }
        info
    }

    /// Zero while the snapshot runs: shards count once they are stored.
    pub fn successful_shards(&self) -> u32 {
        match self.state {
            SnapState::InProgress => 0,
            _ => self.shards_total - self.shards_failed,
        }
    }

    pub fn total_size(&self) -> IndexSize {
        self.sizes
            .values()
            .fold(IndexSize::default(), |a, s| IndexSize {
                shards: a.shards + s.shards,
                bytes: a.bytes + s.bytes,
                files: a.files + s.files,
            })
    }
}

/// Elasticsearch's numeric version id (8.15.0 is 8150099).
fn version_id(version: &str) -> u64 {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor, patch) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    major * 1_000_000 + minor * 10_000 + patch * 100 + 99
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RepositoryData {
    pub format: String,
    /// Bumped by every change, like Elasticsearch's repository generation.
    pub generation: u64,
    pub snapshots: Vec<SnapshotRecord>,
}

impl RepositoryData {
    pub async fn load(store: &BlobStore) -> Result<RepositoryData, StoreError> {
        match store.read(INDEX_BLOB).await? {
            None => Ok(RepositoryData {
                format: FORMAT.to_string(),
                ..RepositoryData::default()
            }),
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                name: INDEX_BLOB.to_string(),
                reason: e.to_string(),
            }),
        }
    }

    pub async fn save(&mut self, store: &BlobStore) -> Result<(), StoreError> {
        self.format = FORMAT.to_string();
        self.generation += 1;
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| StoreError::Corrupt {
            name: INDEX_BLOB.to_string(),
            reason: e.to_string(),
        })?;
        store.write(INDEX_BLOB, bytes).await
    }

    pub fn find(&self, name: &str) -> Option<&SnapshotRecord> {
        self.snapshots.iter().find(|s| s.name == name)
    }
}

/// A document as the snapshot keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDoc {
    pub id: String,
    pub version: u64,
    pub source: Value,
}

/// One index in a snapshot blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexBlob {
    pub uuid: String,
    pub number_of_shards: u32,
    pub number_of_replicas: u32,
    /// The other `index.*` settings, without the prefix.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    #[serde(default)]
    pub mappings: Value,
    #[serde(default)]
    pub aliases: Map<String, Value>,
    /// The documents. In the snapshot blob itself only for snapshots
    /// written before each index's data had a blob of its own (`data`).
    #[serde(default)]
    pub docs: Vec<StoredDoc>,
    /// The blob holding the documents, under `indices/`, as Elasticsearch
    /// keeps each index's shard data apart from the snapshot's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Why the documents could not be read (their blob is gone or
    /// corrupt): a restore or mount of the index then fails its shards.
    #[serde(skip)]
    pub unreadable: Option<String>,
}

/// The blob of one index's documents in one snapshot.
pub fn index_data_blob(index_uuid: &str, snapshot_uuid: &str) -> String {
    format!("indices/{index_uuid}/snap-{snapshot_uuid}.json")
}

#[derive(Deserialize)]
struct IndexData {
    docs: Vec<StoredDoc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotBlob {
    pub uuid: String,
    pub indices: BTreeMap<String, IndexBlob>,
    /// The cluster state and feature states, when the snapshot includes
    /// the global state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<GlobalState>,
}

/// What a snapshot with `include_global_state` keeps of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GlobalState {
    /// The persistent cluster settings.
    #[serde(default)]
    pub persistent_settings: Map<String, Value>,
    /// The security feature state: the `elastic` user's password hash (as
    /// the security index keeps it, never the password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_password_sha256: Option<String>,
}

impl SnapshotBlob {
    /// The snapshot's metadata, and each index's documents from its own
    /// blob. An index whose blob is gone or unreadable loads without its
    /// documents, marked `unreadable`: the snapshot is still listed and
    /// its other indices restore, as in Elasticsearch.
    pub async fn load(store: &BlobStore, uuid: &str) -> Result<SnapshotBlob, StoreError> {
        let name = snapshot_blob(uuid);
        let bytes = store
            .read(&name)
            .await?
            .ok_or_else(|| StoreError::Corrupt {
                name: name.clone(),
                reason: "the blob is missing".to_string(),
            })?;
        let mut blob: SnapshotBlob =
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                name,
                reason: e.to_string(),
            })?;
        for index in blob.indices.values_mut() {
            let Some(data) = index.data.clone() else {
                continue;
            };
            match store.read(&data).await? {
                Some(bytes) => match serde_json::from_slice::<IndexData>(&bytes) {
                    Ok(read) => index.docs = read.docs,
                    Err(e) => index.unreadable = Some(format!("the blob [{data}] is corrupt: {e}")),
                },
                None => index.unreadable = Some(format!("the blob [{data}] is missing")),
            }
        }
        Ok(blob)
    }

    /// Each index's documents first, then the metadata that names them.
    pub async fn save(&self, store: &BlobStore) -> Result<(), StoreError> {
        // The documents are written from where they are, never copied:
        // the metadata takes every field of an index but them.
        #[derive(Serialize)]
        struct Docs<'a> {
            docs: &'a [StoredDoc],
        }
        let mut meta = SnapshotBlob {
            uuid: self.uuid.clone(),
            indices: BTreeMap::new(),
            global: self.global.clone(),
        };
        for (name, index) in &self.indices {
            let data = index_data_blob(&index.uuid, &self.uuid);
            let bytes = serde_json::to_vec(&Docs { docs: &index.docs }).map_err(|e| {
                StoreError::Corrupt {
                    name: data.clone(),
                    reason: e.to_string(),
                }
            })?;
            store.write(&data, bytes).await?;
            meta.indices.insert(
                name.clone(),
                IndexBlob {
                    uuid: index.uuid.clone(),
                    number_of_shards: index.number_of_shards,
                    number_of_replicas: index.number_of_replicas,
                    settings: index.settings.clone(),
                    mappings: index.mappings.clone(),
                    aliases: index.aliases.clone(),
                    docs: Vec::new(),
                    data: Some(data),
                    unreadable: None,
                },
            );
        }
        let name = snapshot_blob(&self.uuid);
        let bytes = serde_json::to_vec(&meta).map_err(|e| StoreError::Corrupt {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        store.write(&name, bytes).await
    }

    /// The blobs of each index's documents (none for a snapshot written
    /// before they had their own), read from the metadata only.
    pub async fn data_blobs(store: &BlobStore, uuid: &str) -> Vec<String> {
        let Ok(Some(bytes)) = store.read(&snapshot_blob(uuid)).await else {
            return Vec::new();
        };
        serde_json::from_slice::<SnapshotBlob>(&bytes)
            .map(|b| b.indices.into_values().filter_map(|i| i.data).collect())
            .unwrap_or_default()
    }
}

/// The generation `index.latest` names; `None` when the repository has
/// none (empty, or written before the simulator kept one).
async fn latest_generation(store: &BlobStore) -> Result<Option<u64>, StoreError> {
    let Some(bytes) = store.read(LATEST_BLOB).await? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    text.trim()
        .parse::<u64>()
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            name: LATEST_BLOB.to_string(),
            reason: e.to_string(),
        })
}

/// What one cluster read of one registered repository: its data at a
/// generation, and the snapshot blobs it has read (a snapshot's blob never
/// changes once written, and its uuid is never reused).
#[derive(Default)]
pub struct RepoCache {
    /// Held across the reads, so that concurrent requests read the
    /// repository once between them.
    data: tokio::sync::Mutex<Option<Arc<RepositoryData>>>,
    blobs: tokio::sync::Mutex<HashMap<String, Arc<SnapshotBlob>>>,
}

impl RepoCache {
    /// The repository's data: the cached copy while `index.latest` names
    /// its generation, else read again.
    pub async fn data(&self, store: &BlobStore) -> Result<Arc<RepositoryData>, StoreError> {
        let mut cached = self.data.lock().await;
        let latest = latest_generation(store).await?;
        if let (Some(latest), Some(data)) = (latest, cached.as_ref())
            && data.generation == latest
        {
            return Ok(data.clone());
        }
        let data = Arc::new(RepositoryData::load(store).await?);
        if latest.is_some() {
            let keep: Vec<&str> = data.snapshots.iter().map(|s| s.uuid.as_str()).collect();
            self.blobs
                .lock()
                .await
                .retain(|uuid, _| keep.contains(&uuid.as_str()));
            *cached = Some(data.clone());
        } else {
            // No generation to check a copy against: nothing is kept.
            *cached = None;
        }
        Ok(data)
    }

    /// Writes `data` as the repository's next generation (`index.json`,
    /// then `index.latest`) and keeps it, so this cluster's next request
    /// reads nothing back.
    pub async fn save(
        &self,
        store: &BlobStore,
        mut data: RepositoryData,
    ) -> Result<(), StoreError> {
        let mut cached = self.data.lock().await;
        data.save(store).await?;
        store
            .write(LATEST_BLOB, data.generation.to_string().into_bytes())
            .await?;
        let keep: Vec<&str> = data.snapshots.iter().map(|s| s.uuid.as_str()).collect();
        self.blobs
            .lock()
            .await
            .retain(|uuid, _| keep.contains(&uuid.as_str()));
        *cached = Some(Arc::new(data));
        Ok(())
    }

    /// A snapshot's blob, read once.
    pub async fn snapshot(
        &self,
        store: &BlobStore,
        uuid: &str,
    ) -> Result<Arc<SnapshotBlob>, StoreError> {
        let mut blobs = self.blobs.lock().await;
        if let Some(blob) = blobs.get(uuid) {
            return Ok(blob.clone());
        }
        let blob = Arc::new(SnapshotBlob::load(store, uuid).await?);
        blobs.insert(uuid.to_string(), blob.clone());
        Ok(blob)
    }
}
