//! The cluster's data path (`path.data`): what a simulated cluster keeps
//! on disk so that one started again on the same folder holds what it
//! held, as a real cluster's nodes do across a restart.
//!
//! Layout, under the data path:
//! - `cluster.json`: the cluster's metadata: its UUID, the `elastic`
//!   user's password hash (its security index), the license, persistent
//!   cluster settings (transient ones are lost on a full restart, as in
//!   Elasticsearch), templates, registered repositories, and each index's
//!   settings, mappings, aliases and state. Rewritten whole (temporary
//!   file, fsync, rename) whenever it changes.
//! - `indices/{uuid}/docs.jsonl`: an index's documents as of its last
//!   checkpoint, one per line after a header line.
//! - `indices/{uuid}/journal.jsonl`: every write and delete since, one per
//!   line: the simulator's translog. Each request's lines reach the file
//!   before the request is answered, so an acknowledged write survives the
//!   process being killed (not a power cut: the journal is not fsynced per
//!   request). When the journal outgrows the checkpoint, the documents
//!   are checkpointed again and the journal starts empty.
//!
//! What a restart loses, as it does on Elasticsearch: transient settings,
//! running snapshots and tasks, open scrolls and points in time, and the
//! statistics counters.

use crate::error::SimError;
use crate::license::License;
use crate::state::{
    ClusterState, Doc, Index, Mounted, Recovery, RecoverySource, Repository, Sim, Storage,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

const METADATA: &str = "cluster.json";
const INDICES: &str = "indices";
const DOCS: &str = "docs.jsonl";
const JOURNAL: &str = "journal.jsonl";
/// A journal is checkpointed once it is larger than this and than the
/// checkpoint it follows: each document is rewritten a bounded number of
/// times however long the cluster ingests.
const JOURNAL_FLOOR_BYTES: u64 = 64 * 1024 * 1024;

/// A cluster's data path, and the metadata last written there.
#[derive(Debug)]
pub struct DataPath {
    dir: PathBuf,
    /// Held while the metadata is built and written, so that two requests
    /// finishing together never write an older state over a newer one.
    written: Mutex<Option<String>>,
}

/// The writes an index has taken since its last checkpoint, on their way
/// to its journal file. A copy of an index (a snapshot's, say) has none:
/// only the index in the cluster state writes to the data path.
#[derive(Debug, Default)]
pub struct Journal(Option<JournalFile>);

#[derive(Debug)]
struct JournalFile {
    writer: BufWriter<File>,
    /// Bytes in the journal file, and in the checkpoint it follows.
    bytes: u64,
    checkpoint_bytes: u64,
    /// Lines written since the last flush; an error writing one, kept for
    /// the flush to report.
    pending: bool,
    failed: Option<std::io::Error>,
}

impl Clone for Journal {
    fn clone(&self) -> Journal {
        Journal(None)
    }
}

impl PartialEq for Journal {
    /// What an index holds is its documents; where they are kept is not.
    fn eq(&self, _: &Journal) -> bool {
        true
    }
}

/// One line of a journal: a document written, or a document deleted.
#[derive(Serialize, Deserialize)]
struct Entry {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<Value>,
}

/// The first line of a checkpoint.
#[derive(Serialize, Deserialize)]
struct Header {
    seq_no: u64,
}

impl Journal {
    /// Notes a document written.
    pub fn put(&mut self, id: &str, doc: &Doc) {
        self.append(&Entry {
            id: id.to_string(),
            version: Some(doc.version),
            source: Some(doc.source.clone()),
        });
    }

    /// Notes a document deleted.
    pub fn delete(&mut self, id: &str) {
        self.append(&Entry {
            id: id.to_string(),
            version: None,
            source: None,
        });
    }

    fn append(&mut self, entry: &Entry) {
        let Some(file) = &mut self.0 else {
            return;
        };
        if file.failed.is_some() {
            return;
        }
        let mut line = match serde_json::to_vec(entry) {
            Ok(line) => line,
            Err(e) => {
                file.failed = Some(std::io::Error::other(e));
                return;
            }
        };
        line.push(b'\n');
        match file.writer.write_all(&line) {
            Ok(()) => {
                file.bytes += line.len() as u64;
                file.pending = true;
            }
            Err(e) => file.failed = Some(e),
        }
    }
}

/// What `cluster.json` holds.
#[derive(Serialize, Deserialize, PartialEq)]
struct Saved {
    cluster_uuid: String,
    #[serde(default)]
    password_hash: Option<String>,
    #[serde(default)]
    license: Option<License>,
    #[serde(default)]
    persistent_settings: Map<String, Value>,
    #[serde(default)]
    index_templates: BTreeMap<String, Value>,
    #[serde(default)]
    component_templates: BTreeMap<String, Value>,
    #[serde(default)]
    repositories: BTreeMap<String, SavedRepository>,
    #[serde(default)]
    indices: BTreeMap<String, SavedIndex>,
}

#[derive(Serialize, Deserialize, PartialEq)]
struct SavedRepository {
    #[serde(rename = "type")]
    repo_type: String,
    settings: Map<String, Value>,
}

#[derive(Serialize, Deserialize, PartialEq)]
struct SavedIndex {
    uuid: String,
    number_of_shards: u32,
    number_of_replicas: u32,
    settings: BTreeMap<String, String>,
    mappings: Value,
    aliases: Map<String, Value>,
    closed: bool,
    creation_millis: i64,
    #[serde(default)]
    mounted: Option<SavedMount>,
    #[serde(default)]
    lost_shards: BTreeSet<u32>,
}

#[derive(Serialize, Deserialize, PartialEq)]
struct SavedMount {
    repository: String,
    snapshot: String,
    snapshot_uuid: String,
    index: String,
    storage: String,
}

impl SavedIndex {
    fn of(index: &Index) -> SavedIndex {
        SavedIndex {
            uuid: index.uuid.clone(),
            number_of_shards: index.number_of_shards,
            number_of_replicas: index.number_of_replicas,
            settings: index.settings.clone(),
            mappings: index.mappings.to_json(),
            aliases: index.aliases.clone(),
            closed: index.closed,
            creation_millis: index.creation_millis,
            mounted: index.mounted.as_ref().map(|m| SavedMount {
                repository: m.repository.clone(),
                snapshot: m.snapshot.clone(),
                snapshot_uuid: m.snapshot_uuid.clone(),
                index: m.index.clone(),
                storage: m.storage.as_str().to_string(),
            }),
            lost_shards: index.lost_shards.clone(),
        }
    }
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{}: {e}", path.display()))
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or
/// the new one: a temporary file beside it, synced, renamed over it.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    let tmp = path.with_extension("tmp");
    let file = File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
    let mut out = BufWriter::new(file);
    write(&mut out).map_err(|e| io_error(&tmp, e))?;
    let file = out.into_inner().map_err(|e| io_error(&tmp, e.error()))?;
    file.sync_all().map_err(|e| io_error(&tmp, e))?;
    let bytes = file.metadata().map_err(|e| io_error(&tmp, e))?.len();
    std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))?;
    Ok(bytes)
}

impl DataPath {
    pub fn new(dir: PathBuf) -> DataPath {
        DataPath {
            dir,
            written: Mutex::new(None),
        }
    }

    fn index_dir(&self, uuid: &str) -> PathBuf {
        self.dir.join(INDICES).join(uuid)
    }

    /// Writes an index's documents as its checkpoint and starts its
    /// journal empty.
    fn checkpoint(&self, index: &mut Index) -> std::io::Result<()> {
        let dir = self.index_dir(&index.uuid);
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let seq_no = index.seq_no;
        let docs = &index.docs;
        let checkpoint_bytes = write_atomically(&dir.join(DOCS), |out| {
            serde_json::to_writer(&mut *out, &Header { seq_no })?;
            out.write_all(b"\n")?;
            for (id, doc) in docs {
                serde_json::to_writer(
                    &mut *out,
                    &Entry {
                        id: id.clone(),
                        version: Some(doc.version),
                        source: Some(doc.source.clone()),
                    },
                )?;
                out.write_all(b"\n")?;
            }
            Ok(())
        })?;
        let path = dir.join(JOURNAL);
        let file = File::create(&path).map_err(|e| io_error(&path, e))?;
        index.journal = Journal(Some(JournalFile {
            writer: BufWriter::new(file),
            bytes: 0,
            checkpoint_bytes,
            pending: false,
            failed: None,
        }));
        Ok(())
    }

    /// Makes what an index took so far survive the process: its journal
    /// flushed (or a first checkpoint for an index new to the data path),
    /// and a checkpoint when the journal has grown too long.
    fn keep(&self, index: &mut Index) -> std::io::Result<()> {
        let Some(file) = &mut index.journal.0 else {
            return self.checkpoint(index);
        };
        if let Some(e) = file.failed.take() {
            // The journal misses a write: only a checkpoint has them all.
            tracing::warn!(index = %index.uuid, error = %e, "the simulated cluster could not journal a write; checkpointing the index");
            return self.checkpoint(index);
        }
        if file.pending {
            file.writer.flush()?;
            file.pending = false;
        }
        if file.bytes > JOURNAL_FLOOR_BYTES.max(file.checkpoint_bytes) {
            self.checkpoint(index)?;
        }
        Ok(())
    }

    /// Brings the data path up to date with the cluster: every index's
    /// writes kept, then the metadata, then the folders of indices that
    /// are gone removed. Called after each request that may have changed
    /// something, before it is answered.
    pub fn save(&self, sim: &Sim) -> std::io::Result<()> {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        let saved = {
            let mut state = sim.state();
            for index in state.indices.values_mut() {
                self.keep(index)?;
            }
            saved_of(sim, &state)
        };
        let text = serde_json::to_string(&saved).map_err(std::io::Error::other)?;
        if written.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        let path = self.dir.join(METADATA);
        write_atomically(&path, |out| out.write_all(text.as_bytes()))?;
        *written = Some(text);
        self.remove_unlisted(&saved.indices.values().map(|i| i.uuid.as_str()).collect())
    }

    /// Removes the folders of indices the metadata no longer lists
    /// (deleted, or replaced by a restore).
    fn remove_unlisted(&self, listed: &BTreeSet<&str>) -> std::io::Result<()> {
        let root = self.dir.join(INDICES);
        let entries = match std::fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error(&root, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&root, e))?;
            let name = entry.file_name();
            if !listed.contains(name.to_string_lossy().as_ref()) {
                std::fs::remove_dir_all(entry.path()).map_err(|e| io_error(&entry.path(), e))?;
            }
        }
        Ok(())
    }

    /// Loads what the data path holds into a new cluster, before it
    /// serves. An empty (or new) folder loads nothing.
    pub fn load(&self, sim: &mut Sim) -> Result<(), SimError> {
        let fail = |path: &Path, message: String| SimError::DataPath {
            path: path.to_path_buf(),
            message,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| fail(&self.dir, e.to_string()))?;
        let path = self.dir.join(METADATA);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(fail(&path, e.to_string())),
        };
        let saved: Saved = serde_json::from_str(&text).map_err(|e| fail(&path, e.to_string()))?;
        sim.cluster_uuid.clone_from(&saved.cluster_uuid);
        if let Some(hash) = &saved.password_hash
            && !sim.restore_password_hash(hash)
        {
            tracing::warn!(path = %path.display(), "the simulated cluster kept the password it booted with: the saved one is not a password hash");
        }
        if let Some(license) = saved.license.clone() {
            *sim.license.lock().unwrap_or_else(PoisonError::into_inner) = license;
        }
        sim.settings()
            .persistent
            .clone_from(&saved.persistent_settings);
        let mut indices = BTreeMap::new();
        for (name, meta) in &saved.indices {
            let dir = self.index_dir(&meta.uuid);
            let index = self
                .load_index(meta)
                .map_err(|e| fail(&dir, e.to_string()))?;
            indices.insert(name.clone(), index);
        }
        let repositories: BTreeMap<String, Repository> = saved
            .repositories
            .iter()
            .map(|(name, r)| {
                let repository = crate::repositories::registered(
                    sim,
                    name,
                    r.repo_type.clone(),
                    r.settings.clone(),
                );
                (name.clone(), repository)
            })
            .collect();
        {
            let mut state = sim.state();
            state.indices = indices;
            state.repositories = repositories;
            state.index_templates = saved.index_templates.clone();
            state.component_templates = saved.component_templates.clone();
        }
        tracing::info!(
            cluster = %sim.cluster_name,
            path = %self.dir.display(),
            indices = saved.indices.len(),
            "simulated cluster loaded its data path"
        );
        // Checkpoints what the journals held, starting them empty (and
        // dropping a line a crash tore), and removes what nothing lists.
        self.save(sim).map_err(|e| fail(&self.dir, e.to_string()))
    }

    /// One index from its metadata, its checkpoint and its journal.
    fn load_index(&self, meta: &SavedIndex) -> std::io::Result<Index> {
        let mut index = Index::new(meta.number_of_shards, meta.number_of_replicas);
        index.uuid.clone_from(&meta.uuid);
        index.settings.clone_from(&meta.settings);
        let readable = floe_search_index::Mappings::parse(&meta.mappings);
        let mut remap = readable.is_err();
        index.mappings = readable.unwrap_or_default();
        index.aliases.clone_from(&meta.aliases);
        index.closed = meta.closed;
        index.creation_millis = meta.creation_millis;
        index.lost_shards.clone_from(&meta.lost_shards);
        index.mounted = meta.mounted.as_ref().map(|m| Mounted {
            repository: m.repository.clone(),
            snapshot: m.snapshot.clone(),
            snapshot_uuid: m.snapshot_uuid.clone(),
            index: m.index.clone(),
            storage: if m.storage == Storage::SharedCache.as_str() {
                Storage::SharedCache
            } else {
                Storage::FullCopy
            },
        });
        let dir = self.index_dir(&meta.uuid);
        let mut lines = read_lines(&dir.join(DOCS))?.into_iter();
        let mut seq_no = match lines.next() {
            Some(header) => {
                serde_json::from_slice::<Header>(&header)
                    .map_err(|e| io_error(&dir.join(DOCS), e))?
                    .seq_no
            }
            None => 0,
        };
        for line in lines {
            let entry: Entry =
                serde_json::from_slice(&line).map_err(|e| io_error(&dir.join(DOCS), e))?;
            if let (Some(version), Some(source)) = (entry.version, entry.source) {
                index.docs.insert(entry.id, Doc { version, source });
            }
        }
        let journal = read_lines(&dir.join(JOURNAL))?;
        let last = journal.len().saturating_sub(1);
        for (i, line) in journal.into_iter().enumerate() {
            let entry: Entry = match serde_json::from_slice(&line) {
                Ok(entry) => entry,
                // The process died while writing its last line: that write
                // was never answered.
                Err(_) if i == last => break,
                Err(e) => return Err(io_error(&dir.join(JOURNAL), e)),
            };
            seq_no += 1;
            remap = true;
            match (entry.version, entry.source) {
                (Some(version), Some(source)) => {
                    index.docs.insert(entry.id, Doc { version, source });
                }
                _ => {
                    index.docs.remove(&entry.id);
                }
            }
        }
        index.seq_no = seq_no;
        if remap {
            // Mappings a document added after the metadata was last written.
            for doc in index.docs.values() {
                let _ = index.mappings.map_dynamically(&doc.source);
            }
        }
        let bytes = index.store_bytes();
        index.recovery = Recovery::instant(
            match &index.mounted {
                Some(m) => RecoverySource::Snapshot {
                    repository: m.repository.clone(),
                    snapshot: m.snapshot.clone(),
                    index: m.index.clone(),
                    restore_uuid: crate::util::new_uuid(),
                },
                None => RecoverySource::ExistingStore,
            },
            bytes,
        );
        Ok(index)
    }
}

/// A file's lines (none for a missing file).
fn read_lines(path: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(path, e)),
    };
    let mut lines = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| io_error(path, e))?;
        if !line.is_empty() {
            lines.push(line);
        }
    }
    Ok(lines)
}

fn saved_of(sim: &Sim, state: &ClusterState) -> Saved {
    Saved {
        cluster_uuid: sim.cluster_uuid.clone(),
        password_hash: sim.password_hash_hex(),
        license: Some(
            sim.license
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        ),
        persistent_settings: sim.settings().persistent.clone(),
        index_templates: state.index_templates.clone(),
        component_templates: state.component_templates.clone(),
        repositories: state
            .repositories
            .iter()
            .map(|(name, r)| {
                (
                    name.clone(),
                    SavedRepository {
                        repo_type: r.repo_type.clone(),
                        settings: r.settings.clone(),
                    },
                )
            })
            .collect(),
        indices: state
            .indices
            .iter()
            .map(|(name, index)| (name.clone(), SavedIndex::of(index)))
            .collect(),
    }
}
