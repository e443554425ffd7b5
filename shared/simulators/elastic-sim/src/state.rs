//! What a simulated cluster holds in memory: its indices, its registered
//! repositories and the snapshots it is taking. Finished snapshots live in
//! the repositories, never here.

use crate::blobs::BlobStore;
use crate::config::{S3Client, S3Keys, SimConfig, SimFaults, SimNode};
use crate::coordination::Coordination;
use crate::repo_data::{IndexBlob, IndexSize, SnapshotRecord, StoredDoc};
use crate::util::{file_count, new_uuid, now_millis};
use floe_domain::secret::SecretString;
use floe_search_index::{Mappings, SearchError, SearchIndex};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// Bytes Elasticsearch reports for an empty index; the simulator adds each
/// document's id and source to it.
const EMPTY_INDEX_BYTES: u64 = 225;

pub struct Sim {
    pub cluster_name: String,
    pub cluster_uuid: String,
    pub version: String,
    /// Changes as instances come and go ([`Sim::set_nodes`]).
    nodes: Mutex<Vec<Node>>,
    pub fs_root: Option<std::path::PathBuf>,
    /// The nodes' S3 client and what their keystore holds.
    s3: Mutex<S3State>,
    /// The SHA-256 of the `elastic` user's password when the cluster is
    /// secured (what its security index keeps, and what a snapshot of the
    /// security feature state carries); `None` without security.
    password: Option<Mutex<[u8; 32]>>,
    faults: Mutex<SimFaults>,
    state: Mutex<ClusterState>,
    settings: Mutex<ClusterSettings>,
    /// The voting configuration and the elected master; apart from the
    /// rest, so that a request may read it while holding the state.
    coordination: Mutex<Coordination>,
    /// The cluster's license: the self-generated `basic` one a new
    /// cluster starts with, until someone installs another.
    pub(crate) license: Mutex<crate::license::License>,
    /// Open scrolls and points in time.
    contexts: Mutex<crate::search::Contexts>,
    /// When the cluster started: its nodes' uptime.
    pub started: Instant,
    /// Where it keeps its data across restarts; `None`: in memory only.
    pub data: Option<crate::persist::DataPath>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub name: String,
    /// `master` is among its `node.roles` (as it is when they are unset).
    pub master_eligible: bool,
    /// The Elasticsearch version the node runs.
    pub version: String,
    /// It has a data role.
    pub data: bool,
    /// The address it publishes for HTTP; `None`: the cluster's first.
    pub addr: Option<std::net::SocketAddr>,
}

impl Node {
    fn of(member: &SimNode, cluster_version: &str) -> Node {
        Node {
            id: new_uuid(),
            name: member.name.clone(),
            master_eligible: member.master_eligible,
            data: member.data,
            addr: member.addr,
            version: member
                .version
                .clone()
                .unwrap_or_else(|| cluster_version.to_string()),
        }
    }

    /// Its roles, as `_nodes` and the cluster state list them.
    pub fn roles(&self) -> Vec<&'static str> {
        let mut roles = Vec::new();
        if self.data {
            roles.extend(["data", "ingest"]);
        }
        if self.master_eligible {
            roles.push("master");
        }
        roles
    }

    /// Its roles as `_cat/nodes` abbreviates them (`-`: none, a
    /// coordinating-only node).
    pub fn role_letters(&self) -> &'static str {
        match (self.master_eligible, self.data) {
            (true, true) => "cdfhilmrstw",
            (false, true) => "cdfhilrstw",
            (true, false) => "m",
            (false, false) => "-",
        }
    }
}

impl Sim {
    pub fn new(config: SimConfig) -> Sim {
        let members: Vec<SimNode> = config.members.clone().unwrap_or_else(|| {
            (0..config.nodes.max(1))
                .map(|i| SimNode::master_eligible(format!("{}-node-{i}", config.cluster_name)))
                .collect()
        });
        let nodes: Vec<Node> = members
            .iter()
            .map(|m| Node::of(m, &config.version))
            .collect();
        let coordination = Coordination::bootstrap(&nodes);
        Sim {
            cluster_name: config.cluster_name,
            cluster_uuid: new_uuid(),
            version: config.version,
            nodes: Mutex::new(nodes),
            fs_root: config.fs_root,
            s3: Mutex::new(S3State {
                keystore: config.s3.as_ref().and_then(|c| c.keys.clone()),
                client: config.s3,
            }),
            password: config
                .security
                .map(|s| Mutex::new(password_hash(s.elastic_password.expose()))),
            faults: Mutex::new(config.faults),
            state: Mutex::new(ClusterState::default()),
            settings: Mutex::new(ClusterSettings::default()),
            coordination: Mutex::new(coordination),
            license: Mutex::new(crate::license::License::self_generated("basic")),
            contexts: Mutex::new(crate::search::Contexts::default()),
            started: Instant::now(),
            data: config.data_path.map(crate::persist::DataPath::new),
        }
    }

    pub fn coordination(&self) -> MutexGuard<'_, Coordination> {
        self.coordination
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a master is elected (else most APIs answer 503).
    pub fn has_master(&self) -> bool {
        self.coordination().master.is_some()
    }

    /// The state is only ever held for short, synchronous work; a panic
    /// while holding it leaves nothing half-written worth refusing over.
    pub fn state(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn contexts(&self) -> MutexGuard<'_, crate::search::Contexts> {
        self.contexts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn settings(&self) -> MutexGuard<'_, ClusterSettings> {
        self.settings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn faults(&self) -> SimFaults {
        self.faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_faults(&self, faults: SimFaults) {
        *self.faults.lock().unwrap_or_else(PoisonError::into_inner) = faults;
    }

    pub fn is_secured(&self) -> bool {
        self.password.is_some()
    }

    /// Whether `password` is the `elastic` user's; always false on a
    /// cluster without security.
    pub fn password_matches(&self, password: &str) -> bool {
        let Some(current) = &self.password else {
            return false;
        };
        let current = current.lock().unwrap_or_else(PoisonError::into_inner);
        constant_time_eq(&*current, &password_hash(password))
    }

    /// The `elastic` user's password hash, hex: what a snapshot of the
    /// security feature state keeps. `None` without security.
    pub fn password_hash_hex(&self) -> Option<String> {
        let current = self.password.as_ref()?;
        let current = current.lock().unwrap_or_else(PoisonError::into_inner);
        Some(current.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Restores the `elastic` user's password hash from a snapshot's
    /// security feature state; `false` if it is not one or the cluster has
    /// no security.
    pub fn restore_password_hash(&self, hex: &str) -> bool {
        let Some(current) = &self.password else {
            return false;
        };
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect();
        match bytes.and_then(|b| <[u8; 32]>::try_from(b).ok()) {
            Some(hash) => {
                *current.lock().unwrap_or_else(PoisonError::into_inner) = hash;
                true
            }
            None => false,
        }
    }

    /// Changes the `elastic` user's password; `false` on a cluster without
    /// security, which has no users.
    pub fn set_password(&self, password: SecretString) -> bool {
        match &self.password {
            Some(current) => {
                *current.lock().unwrap_or_else(PoisonError::into_inner) =
                    password_hash(password.expose());
                true
            }
            None => false,
        }
    }

    /// The S3 client repositories use now.
    pub fn s3_client(&self) -> Option<S3Client> {
        self.s3
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .client
            .clone()
    }

    /// Replaces the S3 client, settings and keys both: what restarting the
    /// nodes with another `elasticsearch.yml` and keystore does.
    pub fn set_s3_client(&self, client: Option<S3Client>) {
        let mut s3 = self.s3.lock().unwrap_or_else(PoisonError::into_inner);
        s3.keystore = client.as_ref().and_then(|c| c.keys.clone());
        s3.client = client;
    }

    /// Writes the S3 keys into the keystore. Like `elasticsearch-keystore
    /// add`, it changes nothing until the secure settings are reloaded.
    pub fn set_keystore_s3_keys(&self, keys: Option<S3Keys>) {
        self.s3
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keystore = keys;
    }

    /// `_nodes/reload_secure_settings`: the S3 client takes the keystore's
    /// keys. Keys alone make a client (with the default settings), as in
    /// Elasticsearch, where any `s3.client.NAME.*` setting defines one.
    pub fn reload_secure_settings(&self) {
        let mut s3 = self.s3.lock().unwrap_or_else(PoisonError::into_inner);
        let keys = s3.keystore.clone();
        match (&mut s3.client, keys) {
            (Some(client), keys) => client.keys = keys,
            (None, Some(keys)) => {
                s3.client = Some(S3Client {
                    keys: Some(keys),
                    ..S3Client::default()
                });
            }
            (None, None) => {}
        }
    }

    /// Stops every running snapshot before it reaches its repository, as
    /// a cluster that goes away leaves its snapshots unfinished.
    pub fn abort_running(&self) {
        for running in self.state().running.values_mut() {
            if let Some(abort) = running.abort.take() {
                let _ = abort.send(());
            }
        }
    }

    pub fn nodes(&self) -> Vec<Node> {
        self.nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Nodes that may hold shards: all but those excluded by
    /// `cluster.routing.allocation.exclude._name`. When every node is
    /// excluded, shards have nowhere to go and stay where they are.
    pub fn eligible_nodes(&self) -> Vec<Node> {
        let nodes = self.nodes();
        let excluded = self.settings().excluded_names();
        let eligible: Vec<Node> = nodes
            .iter()
            .filter(|n| !excluded.contains(&n.name))
            .cloned()
            .collect();
        if eligible.is_empty() { nodes } else { eligible }
    }

    /// The nodes replicas can be spread over.
    /// Every node in the cluster, as `_cluster/health` counts
    /// `number_of_nodes` (nodes excluded from allocation included).
    pub fn member_count(&self) -> u32 {
        u32::try_from(self.nodes().len()).unwrap_or(u32::MAX)
    }

    /// The nodes with a data role (`number_of_data_nodes`).
    pub fn data_node_count(&self) -> u32 {
        u32::try_from(self.nodes().iter().filter(|n| n.data).count()).unwrap_or(u32::MAX)
    }

    pub fn node_count(&self) -> u32 {
        u32::try_from(self.eligible_nodes().len()).unwrap_or(u32::MAX)
    }

    /// The elected master, else (no master) the first node, which is the
    /// one answering.
    pub fn master(&self) -> Node {
        let nodes = self.nodes();
        let elected = self.coordination().master.clone();
        elected
            .and_then(|id| nodes.iter().find(|n| n.id == id).cloned())
            .or_else(|| nodes.first().cloned())
            .unwrap_or_else(|| Node {
                id: String::new(),
                name: String::new(),
                master_eligible: false,
                version: self.version.clone(),
                data: false,
                addr: None,
            })
    }

    /// The node whose address `served` is; a node without an address of
    /// its own (a cluster started alone, on one address) is the master.
    pub fn serving_node(&self, served: std::net::SocketAddr) -> Node {
        self.nodes()
            .into_iter()
            .find(|n| n.addr.is_some_and(|a| a.ip() == served.ip()))
            .unwrap_or_else(|| self.master())
    }

    /// Makes the cluster's nodes exactly `names` (nodes keep their ids
    /// while they stay). A shard whose every copy was on the nodes that
    /// left is lost, and its index turns red: that is what happens when
    /// nodes go before their shards were moved off them.
    pub fn set_nodes(&self, names: &[String]) {
        let members: Vec<SimNode> = names
            .iter()
            .map(|n| SimNode::master_eligible(n.clone()))
            .collect();
        self.set_members(&members);
    }

    /// Like [`Sim::set_nodes`], with each node's roles and version. The
    /// voting configuration follows (see [`Coordination`]).
    pub fn set_members(&self, members: &[SimNode]) {
        if members.is_empty() {
            return;
        }
        let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
        let names = names.as_slice();
        let before = self.nodes();
        let eligible_before = self.eligible_nodes();
        let leaving: Vec<String> = before
            .iter()
            .filter(|n| !names.contains(&n.name))
            .map(|n| n.id.clone())
            .collect();
        let mut state = self.state();
        if !leaving.is_empty() {
            for (name, index) in state.indices.iter_mut() {
                let copies = 1 + index.assigned_replicas(len_u32(&eligible_before));
                for shard in 0..index.number_of_shards {
                    let all_leave = (0..copies).all(|copy| {
                        let node = placement(&eligible_before, name, shard, copy);
                        node.is_some_and(|n| leaving.contains(&n.id))
                    });
                    if all_leave {
                        index.lost_shards.insert(shard);
                    }
                }
            }
        }
        drop(state);
        let mut kept: Vec<Node> = before
            .into_iter()
            .filter(|n| names.contains(&n.name))
            .collect();
        // A node older than the newest node of the cluster may not join:
        // Elasticsearch refuses a join from a node older than the nodes
        // already there (its version barrier, and an older node joining a
        // newer master), which is why an upgrade replaces master-eligible
        // nodes last. It stays out of the cluster, as the refused node
        // keeps retrying its join.
        let newest = kept.iter().filter_map(|n| version_triple(&n.version)).max();
        for member in members {
            if kept.iter().any(|n| n.name == member.name) {
                continue;
            }
            let joining = Node::of(member, &self.version);
            if let (Some(newest), Some(v)) = (newest, version_triple(&joining.version))
                && v < newest
            {
                tracing::warn!(
                    cluster = %self.cluster_name,
                    node = %joining.name,
                    version = %joining.version,
                    "simulated cluster refused the join of a node older than its newest node"
                );
                continue;
            }
            kept.push(joining);
        }
        // Nodes leave, then the new ones join: a master is needed for that.
        self.coordination().membership_changed(&kept);
        *self.nodes.lock().unwrap_or_else(PoisonError::into_inner) = kept;
    }
}

/// What the nodes' S3 client is, and what their keystore holds (which
/// differs from the client's keys until the secure settings are reloaded).
struct S3State {
    client: Option<S3Client>,
    keystore: Option<S3Keys>,
}

/// The SHA-256 of a password: what the simulator keeps of it.
fn password_hash(password: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(password.as_bytes()).into()
}

/// Compares without stopping at the first difference, so the time taken
/// says nothing about how much of a guessed password was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `major.minor.patch` as numbers, to compare versions by.
fn version_triple(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    match (it.next(), it.next(), it.next()) {
        (Some(Some(a)), Some(Some(b)), Some(Some(c))) => Some((a, b, c)),
        _ => None,
    }
}

fn len_u32(nodes: &[Node]) -> u32 {
    u32::try_from(nodes.len()).unwrap_or(u32::MAX)
}

/// Where copy `copy` (0 is the primary) of a shard lives: spread round
/// robin over the eligible nodes from a start that depends on the index,
/// so that indices do not all put shard 0 on the same node.
pub fn placement<'a>(eligible: &'a [Node], index: &str, shard: u32, copy: u32) -> Option<&'a Node> {
    if eligible.is_empty() {
        return None;
    }
    let start = index.bytes().fold(0usize, |h, b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    eligible.get((start + shard as usize + copy as usize) % eligible.len())
}

#[derive(Default)]
pub struct ClusterState {
    pub indices: BTreeMap<String, Index>,
    pub repositories: BTreeMap<String, Repository>,
    /// At most one running snapshot per repository.
    pub running: BTreeMap<String, RunningSnapshot>,
    /// Composable index templates (`_index_template`), by name, as stored.
    pub index_templates: BTreeMap<String, Value>,
    /// Component templates (`_component_template`), by name, as stored.
    pub component_templates: BTreeMap<String, Value>,
    /// Tasks started without waiting (`wait_for_completion=false`), by
    /// `node:id`, as `GET _tasks/{id}` shows them once done.
    pub tasks: BTreeMap<String, Value>,
}

/// `PUT _cluster/settings`, flat keys, as set. Apart from the rest of the
/// state, so that anything holding the state may still ask which nodes
/// take shards.
#[derive(Default)]
pub struct ClusterSettings {
    pub persistent: Map<String, Value>,
    pub transient: Map<String, Value>,
}

impl ClusterSettings {
    /// Node names excluded from allocation; a transient setting wins over
    /// a persistent one, as in Elasticsearch.
    pub fn excluded_names(&self) -> Vec<String> {
        const KEY: &str = "cluster.routing.allocation.exclude._name";
        let value = self.transient.get(KEY).or_else(|| self.persistent.get(KEY));
        value
            .and_then(Value::as_str)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl ClusterState {
    pub fn index_names(&self) -> Vec<String> {
        self.indices.keys().cloned().collect()
    }
}

#[derive(Clone)]
pub struct Repository {
    pub repo_type: String,
    /// As registered, for `GET _snapshot`.
    pub settings: Map<String, Value>,
    pub readonly: bool,
    pub store: BlobStore,
    /// Serialises this cluster's read-modify-write cycles of `index.json`.
    pub write_lock: Arc<tokio::sync::Mutex<()>>,
    /// What this cluster read of the repository since it registered it.
    pub cache: Arc<crate::repo_data::RepoCache>,
}

pub struct RunningSnapshot {
    pub record: SnapshotRecord,
    pub started: Instant,
    pub delay: Duration,
    /// Gets the finished record (or `None` if the task died).
    pub done: watch::Receiver<Option<SnapshotRecord>>,
    /// Taken by a delete, which aborts the snapshot while it waits.
    pub abort: Option<oneshot::Sender<()>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub version: u64,
    pub source: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    FullCopy,
    SharedCache,
}

impl Storage {
    pub fn as_str(self) -> &'static str {
        match self {
            Storage::FullCopy => "full_copy",
            Storage::SharedCache => "shared_cache",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Mounted {
    pub repository: String,
    pub snapshot: String,
    pub snapshot_uuid: String,
    pub index: String,
    pub storage: Storage,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RecoverySource {
    /// A new, empty index.
    EmptyStore,
    /// The index as its nodes' disks held it when the cluster started.
    ExistingStore,
    /// Restored or mounted from a snapshot.
    Snapshot {
        repository: String,
        snapshot: String,
        index: String,
        restore_uuid: String,
    },
}

/// The last recovery of an index's shards, which `_recovery` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    pub source: RecoverySource,
    pub started: Instant,
    pub start_millis: i64,
    pub duration: Duration,
    /// What there is to copy, fixed when the recovery starts.
    pub bytes_total: u64,
    pub files_total: u64,
}

impl Recovery {
    pub fn instant(source: RecoverySource, bytes_total: u64) -> Recovery {
        Recovery {
            source,
            started: Instant::now(),
            start_millis: now_millis(),
            duration: Duration::ZERO,
            bytes_total,
            files_total: if bytes_total == 0 {
                0
            } else {
                file_count(bytes_total)
            },
        }
    }

    /// From 0.0 to 1.0.
    pub fn fraction(&self) -> f64 {
        if self.duration.is_zero() {
            return 1.0;
        }
        (self.started.elapsed().as_secs_f64() / self.duration.as_secs_f64()).min(1.0)
    }

    pub fn is_done(&self) -> bool {
        self.started.elapsed() >= self.duration
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    pub uuid: String,
    pub number_of_shards: u32,
    pub number_of_replicas: u32,
    /// Other `index.*` settings, without the prefix, as strings (which is
    /// how Elasticsearch reports settings).
    pub settings: BTreeMap<String, String>,
    pub mappings: Mappings,
    pub aliases: Map<String, Value>,
    /// The documents, by id: what gets, snapshots and hits read.
    pub docs: BTreeMap<String, Doc>,
    /// The documents in the search library, for queries, sorts and
    /// aggregations; built from `docs` when first searched.
    pub search: SearchCache,
    /// Where its writes go on their way to the data path, if the cluster
    /// has one.
    pub journal: crate::persist::Journal,
    pub closed: bool,
    pub creation_millis: i64,
    pub recovery: Recovery,
    pub mounted: Option<Mounted>,
    pub seq_no: u64,
    /// Shards whose every copy was on nodes that left.
    pub lost_shards: std::collections::BTreeSet<u32>,
    /// What `_stats` and `_nodes/stats` count for this index.
    pub counters: IndexCounters,
}

/// Operations done on an index since it was created here, for `_stats`:
/// the simulator keeps the counts Elasticsearch reports and a client may
/// watch move (Rally's summary reads merges, refreshes and flushes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexCounters {
    pub index_total: u64,
    pub delete_total: u64,
    pub get_total: u64,
    pub query_total: u64,
    pub refresh_total: u64,
    pub flush_total: u64,
    pub merge_total: u64,
    pub merge_docs: u64,
    pub merge_bytes: u64,
    pub bulk_operations: u64,
    pub bulk_bytes: u64,
    /// Segments per shard a force merge left, until the next write.
    pub merged_segments: Option<u64>,
}

/// The health of one index, and its shard counts for `_cluster/health`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardHealth {
    /// 0 green, 1 yellow, 2 red.
    pub level: u8,
    pub active_primary: u32,
    pub active: u32,
    pub initializing: u32,
    pub unassigned: u32,
}

impl Index {
    pub fn new(number_of_shards: u32, number_of_replicas: u32) -> Index {
        Index {
            uuid: new_uuid(),
            number_of_shards,
            number_of_replicas,
            settings: BTreeMap::new(),
            mappings: Mappings::default(),
            aliases: Map::new(),
            docs: BTreeMap::new(),
            search: SearchCache::default(),
            journal: crate::persist::Journal::default(),
            closed: false,
            creation_millis: now_millis(),
            recovery: Recovery::instant(RecoverySource::EmptyStore, 0),
            mounted: None,
            seq_no: 0,
            lost_shards: std::collections::BTreeSet::new(),
            counters: IndexCounters::default(),
        }
    }

    pub fn from_blob(blob: &IndexBlob, docs: bool) -> Index {
        let mut index = Index::new(blob.number_of_shards, blob.number_of_replicas);
        index.settings.clone_from(&blob.settings);
        // A snapshot holds the mappings its cluster made; any that this
        // cluster cannot read again are made anew from the documents.
        let readable = Mappings::parse(&blob.mappings);
        let remap = readable.is_err();
        index.mappings = readable.unwrap_or_default();
        index.aliases = blob.aliases.clone();
        if docs {
            for doc in &blob.docs {
                index.docs.insert(
                    doc.id.clone(),
                    Doc {
                        version: doc.version,
                        source: doc.source.clone(),
                    },
                );
            }
        }
        index.seq_no = u64::try_from(index.docs.len()).unwrap_or(u64::MAX);
        if remap {
            for doc in index.docs.values() {
                // The documents were indexed once; what they add is mapped.
                let _ = index.mappings.map_dynamically(&doc.source);
            }
        }
        index
    }

    pub fn to_blob(&self) -> IndexBlob {
        IndexBlob {
            uuid: self.uuid.clone(),
            number_of_shards: self.number_of_shards,
            number_of_replicas: self.number_of_replicas,
            settings: self.settings.clone(),
            mappings: self.mappings.to_json(),
            aliases: self.aliases.clone(),
            docs: self
                .docs
                .iter()
                .map(|(id, doc)| StoredDoc {
                    id: id.clone(),
                    version: doc.version,
                    source: doc.source.clone(),
                })
                .collect(),
            data: None,
            unreadable: None,
        }
    }

    /// Bytes on disk of the primaries: a fixed overhead plus every
    /// document's id and source.
    pub fn store_bytes(&self) -> u64 {
        EMPTY_INDEX_BYTES
            + self
                .docs
                .iter()
                .map(|(id, doc)| (id.len() + doc.source.to_string().len()) as u64)
                .sum::<u64>()
    }

    pub fn size(&self) -> IndexSize {
        let bytes = self.store_bytes();
        IndexSize {
            shards: self.number_of_shards,
            bytes,
            files: file_count(bytes) * u64::from(self.number_of_shards),
        }
    }

    /// Primaries still copying from a snapshot.
    pub fn is_recovering(&self) -> bool {
        !self.recovery.is_done()
    }

    /// Replicas that fit on the other nodes.
    pub fn assigned_replicas(&self, nodes: u32) -> u32 {
        self.number_of_replicas.min(nodes.saturating_sub(1))
    }

    pub fn health(&self, nodes: u32) -> ShardHealth {
        let shards = self.number_of_shards;
        let assigned = self.assigned_replicas(nodes);
        let missing = self.number_of_replicas - assigned;
        if self.is_recovering() {
            // Primaries initialise from the snapshot; replicas wait for them.
            return ShardHealth {
                level: 2,
                active_primary: 0,
                active: 0,
                initializing: shards,
                unassigned: shards * self.number_of_replicas,
            };
        }
        let lost = u32::try_from(self.lost_shards.len()).unwrap_or(u32::MAX);
        if lost > 0 {
            let kept = shards.saturating_sub(lost);
            return ShardHealth {
                level: 2,
                active_primary: kept,
                active: kept * (1 + assigned),
                initializing: 0,
                unassigned: lost * (1 + self.number_of_replicas) + kept * missing,
            };
        }
        ShardHealth {
            level: u8::from(missing > 0),
            active_primary: shards,
            active: shards * (1 + assigned),
            initializing: 0,
            unassigned: shards * missing,
        }
    }

    pub fn health_word(&self, nodes: u32) -> &'static str {
        match self.health(nodes).level {
            0 => "green",
            1 => "yellow",
            _ => "red",
        }
    }

    /// The `index.*` settings as Elasticsearch reports them, nested under
    /// `index`, every value a string.
    pub fn settings_json(&self, name: &str) -> Value {
        let mut index = Map::new();
        index.insert(
            "number_of_shards".into(),
            self.number_of_shards.to_string().into(),
        );
        index.insert(
            "number_of_replicas".into(),
            self.number_of_replicas.to_string().into(),
        );
        index.insert("uuid".into(), self.uuid.clone().into());
        index.insert("provided_name".into(), name.into());
        index.insert(
            "creation_date".into(),
            self.creation_millis.to_string().into(),
        );
        for (key, value) in &self.settings {
            index.insert(key.clone(), value.clone().into());
        }
        serde_json::json!({ "index": nest(index) })
    }
}

/// Turns `{"store.type": "snapshot"}` into `{"store": {"type": "snapshot"}}`.
fn nest(flat: Map<String, Value>) -> Value {
    let mut out = Map::new();
    for (key, value) in flat {
        let mut parts = key.split('.').peekable();
        let mut node = &mut out;
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                node.insert(part.to_string(), value);
                break;
            }
            let entry = node
                .entry(part.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            match entry {
                Value::Object(map) => node = map,
                _ => break,
            }
        }
    }
    Value::Object(out)
}

/// Reads index settings in any of the shapes Elasticsearch accepts
/// (`{"index": {"number_of_shards": 1}}`, `{"number_of_shards": "1"}`,
/// `{"index.number_of_shards": 1}`) into flat keys without `index.`.
pub fn flatten_settings(settings: &Value) -> BTreeMap<String, String> {
    fn walk(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    let key = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    walk(&key, value, out);
                }
            }
            Value::Null => {}
            Value::String(s) => {
                out.insert(prefix.to_string(), s.clone());
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let mut flat = BTreeMap::new();
    walk("", settings, &mut flat);
    flat.into_iter()
        .map(|(k, v)| match k.strip_prefix("index.") {
            Some(rest) => (rest.to_string(), v),
            None => (k, v),
        })
        .collect()
}

/// An index's documents in the search library, or nothing until the
/// first search builds them. A copy of an index starts without (it builds
/// its own when searched).
#[derive(Debug, Default)]
pub struct SearchCache(Option<SearchIndex>);

impl Clone for SearchCache {
    fn clone(&self) -> SearchCache {
        SearchCache(None)
    }
}

impl PartialEq for SearchCache {
    /// What an index holds is its documents; the search structure is
    /// derived from them.
    fn eq(&self, _: &SearchCache) -> bool {
        true
    }
}

impl Index {
    /// Writes a document: maps what is new in it (refusing, unchanged, a
    /// value its field cannot take, or a new field under a strict
    /// mapping), then keeps it for reads and for searches.
    pub fn put_doc(&mut self, id: &str, doc: Doc) -> Result<(), SearchError> {
        let (values, remapped) = self.mappings.map_and_read(id, &doc.source)?;
        if let Some(search) = &mut self.search.0 {
            if !remapped || search.covers(&self.mappings) {
                search.put(id, &values)?;
            } else {
                // A new field: the schema is built again at the next search.
                self.search.0 = None;
            }
        }
        self.journal.put(id, &doc);
        self.docs.insert(id.to_string(), doc);
        Ok(())
    }

    /// Removes a document; `None` if there was none.
    pub fn remove_doc(&mut self, id: &str) -> Result<Option<Doc>, SearchError> {
        let removed = self.docs.remove(id);
        if removed.is_some() {
            self.journal.delete(id);
            if let Some(search) = &mut self.search.0 {
                search.delete(id)?;
            }
        }
        Ok(removed)
    }

    /// The index, searchable with every write so far: built from the
    /// documents when it was not yet, refreshed when it was.
    pub fn searchable(&mut self) -> Result<&SearchIndex, SearchError> {
        let mappings = &self.mappings;
        let stale = self.search.0.as_ref().is_none_or(|s| !s.covers(mappings));
        if stale {
            let mut built = SearchIndex::create(mappings, None)?;
            for (id, doc) in &self.docs {
                // Documents were checked when written; one its field can no
                // longer take (after a restore, say) is kept unsearchable.
                if let Ok(values) = mappings.values(id, &doc.source) {
                    built.put(id, &values)?;
                }
            }
            self.search.0 = Some(built);
        }
        let search = self
            .search
            .0
            .as_mut()
            .ok_or_else(|| SearchError::engine("the search index was not built"))?;
        search.refresh()?;
        Ok(search)
    }

    /// `_forcemerge`: the search library's segments merged down to `max`.
    pub fn force_merge(&mut self, max: usize) -> Result<(), SearchError> {
        self.searchable()?;
        match &mut self.search.0 {
            Some(search) => search.force_merge(max),
            None => Ok(()),
        }
    }

    /// The search library's index as of the last [`Index::searchable`].
    pub fn search_index(&self) -> Option<&SearchIndex> {
        self.search.0.as_ref()
    }
}
