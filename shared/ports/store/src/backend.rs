//! The storage port every adapter implements: versioned records with
//! reference counts, read one at a time or a page at a time, and written in
//! all-or-nothing batches of conditional writes.
//!
//! Every aggregate (repositories, deployments, policies, plans, idempotency
//! records) is stored through this one port, so each adapter implements the
//! conditional-write rules once, and the typed stores in `crate::stores`
//! encode the aggregates' rules once for every adapter.

use async_trait::async_trait;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Repository,
    Deployment,
    Policy,
    Plan,
    Idempotency,
    /// An index entry per unfinished plan, all in one partition, so that the
    /// sweep finds plans whose worker died with one query per page.
    ActivePlan,
    /// A deployment's snapshots, newest first:
    /// `{deployment}#{inverted start millis}#{name}`.
    Snapshot,
    /// Where a snapshot's record is, by name: `{deployment}#{name}`.
    SnapshotName,
    /// The run state of one policy attachment: `{deployment}#{policy}`.
    PolicyRun,
    /// A snapshot pinned by a clone that depends on it:
    /// `{source deployment}#{snapshot}#{clone}`, so that the clones of one
    /// snapshot are found with one query.
    SnapshotPin,
    /// A copy of every deployment record (`{org}#{deployment}`, same body,
    /// attributes and version), all in one partition, so that the health
    /// check reads a page of running deployments of every organization
    /// with one query.
    Fleet,
    /// A deleted deployment whose snapshots are kept, listed by the
    /// repository that holds them: `{repository}#{deployment}`. It counts
    /// as a reference on the repository while it exists.
    FormerDeployment,
    /// Every repository on one S3 endpoint and bucket, all in the store-wide
    /// partition (`{endpoint}/{bucket}`), so that a repository of another
    /// organization on the same bucket is found with one read.
    BucketClaim,
    /// An organization's platform license: one record, key `platform`.
    PlatformLicense,
    /// An API key, by id (its maker is in the body).
    ApiKey,
    /// The organization's sealed key for hashing its API keys: one record,
    /// key `api-keys`.
    KeyHashingKey,
    /// A restore drill, listed newest first under the deployment drilled:
    /// `{deployment}#{inverted start millis}#{drill}`.
    Drill,
    /// The drill running on a deployment, by the deployment's id: at most
    /// one at a time.
    DrillLock,
}

impl Kind {
    /// Prefix of the record's sort key in the single table (`REPO#name`).
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Repository => "REPO",
            Kind::Deployment => "DEP",
            Kind::Policy => "POL",
            Kind::Plan => "PLAN",
            Kind::Idempotency => "IDEM",
            Kind::ActivePlan => "ACTIVE",
            Kind::Snapshot => "SNAP",
            Kind::SnapshotName => "SNAPNAME",
            Kind::PolicyRun => "RUN",
            Kind::SnapshotPin => "PIN",
            Kind::Fleet => "FLEET",
            Kind::FormerDeployment => "FORMER",
            Kind::BucketClaim => "CLAIM",
            Kind::PlatformLicense => "LICENSE",
            Kind::ApiKey => "APIKEY",
            Kind::KeyHashingKey => "KEYHASH",
            Kind::Drill => "DRILL",
            Kind::DrillLock => "DRILLLOCK",
        }
    }

    pub fn from_prefix(p: &str) -> Option<Kind> {
        [
            Kind::Repository,
            Kind::Deployment,
            Kind::Policy,
            Kind::Plan,
            Kind::Idempotency,
            Kind::ActivePlan,
            Kind::Snapshot,
            Kind::SnapshotName,
            Kind::PolicyRun,
            Kind::SnapshotPin,
            Kind::Fleet,
            Kind::FormerDeployment,
            Kind::BucketClaim,
            Kind::PlatformLicense,
            Kind::ApiKey,
            Kind::KeyHashingKey,
            Kind::Drill,
            Kind::DrillLock,
        ]
        .into_iter()
        .find(|k| k.prefix() == p)
    }
}

/// Where a record lives: its organization, kind and key within the kind.
/// Keys never contain `#` (names and ids are validated before they get here).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordKey {
    pub org: String,
    pub kind: Kind,
    pub key: String,
}

impl RecordKey {
    pub fn new(org: &str, kind: Kind, key: &str) -> RecordKey {
        RecordKey {
            org: org.to_string(),
            kind,
            key: key.to_string(),
        }
    }
}

/// Attributes that list filters look at, kept beside the body so that a
/// backend can filter without parsing JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attrs {
    pub name: Option<String>,
    pub status: Option<String>,
    /// `key:value` strings.
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: RecordKey,
    /// The entity as JSON.
    pub body: String,
    /// Starts at 1; every change adds 1. A write may keep it (the health
    /// check's observation of a deployment, `Store::record_health`): the
    /// condition on `expected` still holds it back from a record that moved.
    pub version: u64,
    /// How many other records reference this one (deployments using a
    /// repository, say). Maintained only by `Write::Refs` and
    /// `Write::RefsAt`, never by updates.
    pub refs: u64,
    pub attrs: Attrs,
    /// Epoch seconds after which the record counts as absent (idempotency
    /// records). Backends may delete it lazily (DynamoDB TTL), so readers and
    /// conditions must treat an expired record as missing.
    pub expires_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Creates the record; fails with `Exists` if an unexpired one is there.
    Create(Record),
    /// Replaces body, attributes, expiry and version of the record whose
    /// version is `expected`; its `refs` are kept.
    Update { record: Record, expected: u64 },
    /// Deletes the record whose version is `expected`; with `unreferenced`,
    /// only while its `refs` is 0.
    Delete {
        key: RecordKey,
        expected: u64,
        unreferenced: bool,
    },
    /// Adds `delta` to the refs of an existing record; fails with `Missing`
    /// if there is none and with `Underflow` if refs would go below zero.
    Refs { key: RecordKey, delta: i64 },
    /// As `Refs`, and only while the record's version is `expected`
    /// (`VersionMismatch` otherwise): a reference counted on the record as
    /// its writer read it, so that a change written since (a snapshot whose
    /// delete has begun) refuses it in the same batch.
    RefsAt {
        key: RecordKey,
        delta: i64,
        expected: u64,
    },
}

/// Why one write of a batch failed (and so the whole batch did nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteFailure {
    Exists,
    Missing,
    VersionMismatch { current: u64 },
    Referenced { refs: u64 },
    Underflow,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// Write number `index` of the batch failed its condition; nothing was written.
    #[error("write {index} failed: {failure:?}")]
    Failed { index: usize, failure: WriteFailure },
    /// The backend could not be reached or refused the request.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// Stored data could not be read back (a bug or a hand-edited table).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    pub name_prefix: Option<String>,
    pub status: Option<String>,
    /// `key:value`.
    pub tag: Option<String>,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.name_prefix.is_none() && self.status.is_none() && self.tag.is_none()
    }

    pub fn matches(&self, attrs: &Attrs) -> bool {
        self.name_prefix.as_ref().is_none_or(|p| {
            attrs
                .name
                .as_ref()
                .is_some_and(|n| n.starts_with(p.as_str()))
        }) && self
            .status
            .as_ref()
            .is_none_or(|s| attrs.status.as_ref() == Some(s))
            && self.tag.as_ref().is_none_or(|t| attrs.tags.contains(t))
    }
}

/// One page of one kind in one organization, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub org: String,
    pub kind: Kind,
    /// Only keys starting with this (plans of one deployment: `{id}#`).
    pub key_prefix: String,
    /// Continue after this key (exclusive).
    pub after: Option<String>,
    /// Records to examine, 1 to 1000. With a filter a page may hold fewer
    /// matches than `limit` while more follow: one query per page, whatever
    /// the table holds, matters more than full pages.
    pub limit: u32,
    pub filter: Filter,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPage {
    pub records: Vec<Record>,
    /// The last key examined, when more records may follow.
    pub next: Option<String>,
}

#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The record, or `None` if absent or expired.
    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, BackendError>;
    /// One page, from one query. Expired records are left out.
    async fn list(&self, query: &ListQuery) -> Result<RecordPage, BackendError>;
    /// Applies every write or none (at most 100 per batch).
    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError>;
    /// A mark of the records' state, for a reader that keeps what it read
    /// (see [`crate::Memo`]): the same `Some` mark taken before a read and
    /// again later means no write began in between, so what that read
    /// found is still what is stored. `None` when that cannot be known:
    /// another process may write these records (DynamoDB), or a write is
    /// running now. The default never tells.
    fn quiet_mark(&self) -> Option<u64> {
        None
    }
}

pub fn now_epoch() -> i64 {
    chrono::Utc::now().timestamp()
}
