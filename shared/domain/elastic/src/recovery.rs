//! Progress of shard recoveries (`GET {indices}/_recovery`), which is how a
//! restore or a fully mounted snapshot copies its data onto the nodes.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The stage Elasticsearch reports for a finished recovery.
const DONE: &str = "DONE";

/// Every reported shard recovery, with totals over them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryProgress {
    pub shards_total: u32,
    pub shards_done: u32,
    /// Bytes of every shard's files, whether copied or already on the node.
    pub bytes_total: u64,
    /// Bytes already on the target node, which need no copying.
    pub bytes_reused: u64,
    /// Bytes copied so far.
    pub bytes_recovered: u64,
    pub files_total: u64,
    pub files_reused: u64,
    pub files_recovered: u64,
    /// Ordered by index name, then shard, primaries first.
    pub shards: Vec<ShardRecovery>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRecovery {
    pub index: String,
    pub shard: u32,
    pub primary: bool,
    /// `SNAPSHOT` for a restore, `PEER` for a replica, `EXISTING_STORE`, …
    pub recovery_type: String,
    /// `INIT`, `INDEX`, `VERIFY_INDEX`, `TRANSLOG`, `FINALIZE` or `DONE`.
    pub stage: String,
    pub bytes_total: u64,
    pub bytes_reused: u64,
    pub bytes_recovered: u64,
    pub files_total: u64,
    pub files_reused: u64,
    pub files_recovered: u64,
    /// For a `SNAPSHOT` recovery, the repository and snapshot it reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_repository: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_snapshot: Option<String>,
    /// When the recovery started (epoch milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_millis: Option<i64>,
}

impl ShardRecovery {
    /// Whether this shard is being (or was) recovered from `repository:snapshot`.
    pub fn reads(&self, repository: &str, snapshot: &str) -> bool {
        self.source_repository.as_deref() == Some(repository)
            && self.source_snapshot.as_deref() == Some(snapshot)
    }

    pub fn is_done(&self) -> bool {
        self.stage.eq_ignore_ascii_case(DONE)
    }
}

impl RecoveryProgress {
    /// Whether there was something to recover and all of it is done.
    pub fn is_done(&self) -> bool {
        self.shards_total > 0 && self.shards_done == self.shards_total
    }

    /// How much of what has to be copied is copied, from 0.0 to 1.0, as
    /// Elasticsearch computes its own percentage (reused bytes excluded);
    /// 1.0 when nothing needs copying.
    pub fn fraction(&self) -> f64 {
        let to_copy = self.bytes_total.saturating_sub(self.bytes_reused);
        if to_copy == 0 {
            return 1.0;
        }
        // Precision loss is irrelevant for a progress figure.
        (self.bytes_recovered.min(to_copy) as f64) / (to_copy as f64)
    }

    pub(crate) fn from_response(body: BTreeMap<String, IndexRecovery>) -> RecoveryProgress {
        let mut progress = RecoveryProgress::default();
        for (index, recovery) in body {
            let mut shards: Vec<ShardRecovery> = recovery
                .shards
                .into_iter()
                .map(|shard| shard.into_public(&index))
                .collect();
            shards.sort_by_key(|s| (s.shard, !s.primary));
            progress.shards.extend(shards);
        }
        for shard in &progress.shards {
            progress.shards_total += 1;
            if shard.is_done() {
                progress.shards_done += 1;
            }
            progress.bytes_total += shard.bytes_total;
            progress.bytes_reused += shard.bytes_reused;
            progress.bytes_recovered += shard.bytes_recovered;
            progress.files_total += shard.files_total;
            progress.files_reused += shard.files_reused;
            progress.files_recovered += shard.files_recovered;
        }
        progress
    }
}

/// For plan step log lines.
impl fmt::Display for RecoveryProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} shards done, {} of {} bytes copied ({:.1}%)",
            self.shards_done,
            self.shards_total,
            self.bytes_recovered,
            self.bytes_total.saturating_sub(self.bytes_reused),
            self.fraction() * 100.0
        )
    }
}

/// The response is keyed by index name; only the counters are read, since
/// the time fields have changed type between versions.
#[derive(Debug, Deserialize)]
pub(crate) struct IndexRecovery {
    #[serde(default)]
    shards: Vec<ShardBody>,
}

#[derive(Debug, Deserialize)]
struct ShardBody {
    id: u32,
    #[serde(rename = "type", default)]
    recovery_type: String,
    #[serde(default)]
    stage: String,
    #[serde(default)]
    primary: bool,
    #[serde(default)]
    index: IndexBody,
    #[serde(default)]
    source: SourceBody,
    #[serde(default)]
    start_time_in_millis: Option<i64>,
}

/// Only a snapshot source names a repository and snapshot; a peer source
/// names a node instead.
#[derive(Debug, Default, Deserialize)]
struct SourceBody {
    #[serde(default)]
    repository: Option<String>,
    #[serde(default)]
    snapshot: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct IndexBody {
    #[serde(default)]
    size: SizeBody,
    #[serde(default)]
    files: FilesBody,
}

#[derive(Debug, Default, Deserialize)]
struct SizeBody {
    #[serde(default)]
    total_in_bytes: u64,
    #[serde(default)]
    reused_in_bytes: u64,
    #[serde(default)]
    recovered_in_bytes: u64,
}

#[derive(Debug, Default, Deserialize)]
struct FilesBody {
    #[serde(default)]
    total: u64,
    #[serde(default)]
    reused: u64,
    #[serde(default)]
    recovered: u64,
}

impl ShardBody {
    fn into_public(self, index: &str) -> ShardRecovery {
        ShardRecovery {
            index: index.to_string(),
            shard: self.id,
            primary: self.primary,
            recovery_type: self.recovery_type,
            stage: self.stage,
            bytes_total: self.index.size.total_in_bytes,
            bytes_reused: self.index.size.reused_in_bytes,
            bytes_recovered: self.index.size.recovered_in_bytes,
            files_total: self.index.files.total,
            files_reused: self.index.files.reused,
            files_recovered: self.index.files.recovered,
            source_repository: self.source.repository,
            source_snapshot: self.source.snapshot,
            start_millis: self.start_time_in_millis,
        }
    }
}
