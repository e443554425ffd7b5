//! Typed stores of Floe's aggregates over any `Backend`. The aggregates'
//! rules live here once: which writes go together in one batch, which
//! references are counted, and what a failed condition means to a caller.

use crate::backend::{
    Attrs, Backend, BackendError, Filter, Kind, ListQuery, Record, RecordKey, Write, WriteFailure,
};
use crate::memo::{Memo, Weigh};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use floe_domain::deployment::Deployment;
use floe_domain::plan::Plan;
use floe_domain::policy::Policy;
use floe_domain::repository::Repository;
use floe_domain::snapshot::{PolicyRun, SnapshotRecord};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const DEFAULT_PAGE_SIZE: u32 = 20;
pub const MAX_PAGE_SIZE: u32 = 100;
/// How long a create's idempotency key is remembered.
pub const IDEMPOTENCY_TTL_SECS: i64 = 24 * 3600;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("already exists")]
    AlreadyExists,
    /// The caller's expected version is stale.
    #[error("version mismatch: current version is {current}")]
    VersionMismatch { current: u64 },
    /// Other records still reference this one.
    #[error("still referenced by {refs} records")]
    InUse { refs: u64 },
    /// A referenced record does not exist (in this organization).
    #[error("{kind:?} '{key}' does not exist")]
    MissingReference { kind: Kind, key: String },
    /// The idempotency key was used before with another request.
    #[error("idempotency key reused with a different request")]
    IdempotencyKeyReused,
    #[error("invalid cursor")]
    BadCursor,
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// A value with its record's version and reference count.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned<T> {
    pub value: T,
    pub version: u64,
    pub refs: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Opaque; present when more items may follow.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageRequest {
    pub size: Option<u32>,
    pub cursor: Option<String>,
}

/// The partition of the active-plan index. `~` cannot occur in an
/// organization id, so no organization's records can collide with it.
pub const SYSTEM_ORG: &str = "~system";

/// An entry of the active-plan index: where to find an unfinished plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivePlan {
    pub org: String,
    pub deployment_id: String,
    pub plan_id: String,
}

/// What finishing a plan does to its deployment, in the same batch.
pub enum DeploymentOutcome<'a> {
    /// Store the deployment's new state (status, pending plan cleared).
    Update {
        deployment: &'a Deployment,
        previous: &'a Versioned<Deployment>,
    },
    /// Remove the deployment record and release its references.
    Delete(&'a Versioned<Deployment>),
}

/// What an idempotent create remembers: the request's hash and its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub request_hash: String,
    pub deployment_id: String,
}

/// The idempotency part of a create: the key (already hashed by the caller,
/// so any client string is safe as a storage key) and the request's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    pub key_hash: String,
    pub request_hash: String,
}

#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
}

fn encode<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn decode<T: DeserializeOwned>(record: &Record) -> Result<Versioned<T>, StoreError> {
    let value = serde_json::from_str(&record.body).map_err(|e| {
        StoreError::Corrupt(format!("{:?} {}: {e}", record.key.kind, record.key.key))
    })?;
    Ok(Versioned {
        value,
        version: record.version,
        refs: record.refs,
    })
}

fn backend_error(e: BackendError) -> StoreError {
    match e {
        BackendError::Unavailable(m) => StoreError::Unavailable(m),
        BackendError::Corrupt(m) => StoreError::Corrupt(m),
        BackendError::Failed { failure, .. } => simple_failure(failure),
    }
}

fn simple_failure(f: WriteFailure) -> StoreError {
    match f {
        WriteFailure::Exists => StoreError::AlreadyExists,
        WriteFailure::Missing => StoreError::NotFound,
        WriteFailure::VersionMismatch { current } => StoreError::VersionMismatch { current },
        WriteFailure::Referenced { refs } => StoreError::InUse { refs },
        WriteFailure::Underflow => StoreError::Corrupt("reference count below zero".into()),
    }
}

/// A batch of writes with, for each, what its failure means to the caller.
#[derive(Default)]
struct Batch {
    writes: Vec<Write>,
    meanings: Vec<Meaning>,
}

#[derive(Clone)]
enum Meaning {
    /// The aggregate's own record: failures mean what they say.
    Own,
    /// A reference to another record: `Missing` means the reference is dangling.
    Reference(Kind, String),
    /// The idempotency record: `Exists` means the key was used before.
    IdempotencyKey,
    /// A deployment's fleet copy. A deployment stored before the fleet
    /// index existed has none: an update of it (`Missing`) creates it
    /// instead, and a delete drops it from the batch.
    Fleet(Option<Write>),
}

impl Batch {
    fn push(&mut self, w: Write, m: Meaning) {
        self.writes.push(w);
        self.meanings.push(m);
    }

    /// Adds +1/-1 reference writes for the difference between `before` and `after`.
    fn reference_changes(
        &mut self,
        org: &str,
        before: &[(Kind, String)],
        after: &[(Kind, String)],
    ) {
        self.reference_changes_held(org, before, after, None);
    }

    /// As [`Batch::reference_changes`]; a reference gained on `held`'s
    /// record is counted only while that record is at `held`'s version
    /// (the version its writer read).
    fn reference_changes_held(
        &mut self,
        org: &str,
        before: &[(Kind, String)],
        after: &[(Kind, String)],
        held: Option<&((Kind, String), u64)>,
    ) {
        let mut delta: BTreeMap<(Kind, String), i64> = BTreeMap::new();
        for r in before {
            *delta.entry(r.clone()).or_default() -= 1;
        }
        for r in after {
            *delta.entry(r.clone()).or_default() += 1;
        }
        for ((kind, key), d) in delta {
            if d == 0 {
                continue;
            }
            let record = RecordKey::new(org, kind, &key);
            let write = match held {
                Some(((k, held_key), version)) if d > 0 && *k == kind && *held_key == key => {
                    Write::RefsAt {
                        key: record,
                        delta: d,
                        expected: *version,
                    }
                }
                _ => Write::Refs {
                    key: record,
                    delta: d,
                },
            };
            self.push(write, Meaning::Reference(kind, key));
        }
    }

    /// Creates or removes the pin record as the deployment goes from
    /// `before` to `after` (either absent for a create or a delete).
    fn pin_changes(
        &mut self,
        before: Option<&Deployment>,
        after: Option<&Deployment>,
    ) -> Result<(), StoreError> {
        let old = before.and_then(pin_of);
        let new = after.and_then(pin_of);
        if old.as_ref().map(|p| &p.0) == new.as_ref().map(|p| &p.0) {
            return Ok(());
        }
        if let Some((key, _)) = old {
            // Pin records are written once and never updated.
            self.push(
                Write::Delete {
                    key,
                    expected: 1,
                    unreferenced: false,
                },
                Meaning::Own,
            );
        }
        if let Some((key, pin)) = new {
            self.push(
                Write::Create(record(key, encode(&pin)?, 1, Attrs::default())),
                Meaning::Own,
            );
        }
        Ok(())
    }

    async fn run(mut self, backend: &dyn Backend) -> Result<(), StoreError> {
        let first = backend.write(self.writes.clone()).await;
        // Once only: the batch again, with a missing fleet copy created
        // (or, for a delete, left alone).
        if let Err(BackendError::Failed {
            index,
            failure: WriteFailure::Missing,
        }) = &first
            && let Some(Meaning::Fleet(instead)) = self.meanings.get(*index).cloned()
        {
            match instead {
                Some(w) => {
                    self.writes[*index] = w;
                    self.meanings[*index] = Meaning::Own;
                }
                None => {
                    self.writes.remove(*index);
                    self.meanings.remove(*index);
                }
            }
            let again = backend.write(self.writes.clone()).await;
            return self.finish(again);
        }
        self.finish(first)
    }

    fn finish(self, result: Result<(), BackendError>) -> Result<(), StoreError> {
        match result {
            Ok(()) => Ok(()),
            Err(BackendError::Failed { index, failure }) => Err(
                match (
                    self.meanings.get(index).cloned().unwrap_or(Meaning::Own),
                    failure,
                ) {
                    (Meaning::Reference(kind, key), WriteFailure::Missing) => {
                        StoreError::MissingReference { kind, key }
                    }
                    // A reference held at a version that moved on: the
                    // record is no longer the one its writer read (a
                    // snapshot whose delete began), as good as gone.
                    (Meaning::Reference(kind, key), WriteFailure::VersionMismatch { .. }) => {
                        StoreError::MissingReference { kind, key }
                    }
                    (Meaning::IdempotencyKey, WriteFailure::Exists) => {
                        StoreError::IdempotencyKeyReused
                    }
                    (_, f) => simple_failure(f),
                },
            ),
            Err(e) => Err(backend_error(e)),
        }
    }
}

fn record(key: RecordKey, body: String, version: u64, attrs: Attrs) -> Record {
    Record {
        key,
        body,
        version,
        refs: 0,
        attrs,
        expires_at: None,
    }
}

fn fleet_key(org: &str, deployment_id: &str) -> RecordKey {
    RecordKey::new(SYSTEM_ORG, Kind::Fleet, &format!("{org}#{deployment_id}"))
}

/// A new deployment record and its fleet copy.
fn push_new_deployment(b: &mut Batch, d: &Deployment) -> Result<(), StoreError> {
    let body = encode(d)?;
    let attrs = deployment_attrs(d);
    b.push(
        Write::Create(record(
            RecordKey::new(&d.org, Kind::Deployment, &d.id),
            body.clone(),
            1,
            attrs.clone(),
        )),
        Meaning::Own,
    );
    b.push(
        Write::Create(record(fleet_key(&d.org, &d.id), body, 1, attrs)),
        Meaning::Fleet(None),
    );
    Ok(())
}

/// `d` replacing the record at `previous_version`, and its fleet copy
/// (kept at the same version).
fn push_deployment_update(
    b: &mut Batch,
    d: &Deployment,
    previous_version: u64,
) -> Result<(), StoreError> {
    push_deployment_write(b, d, previous_version, previous_version + 1)
}

/// `d` replacing the record at `previous_version` with one at `version`,
/// and its fleet copy.
fn push_deployment_write(
    b: &mut Batch,
    d: &Deployment,
    previous_version: u64,
    version: u64,
) -> Result<(), StoreError> {
    let body = encode(d)?;
    let attrs = deployment_attrs(d);
    b.push(
        Write::Update {
            record: record(
                RecordKey::new(&d.org, Kind::Deployment, &d.id),
                body.clone(),
                version,
                attrs.clone(),
            ),
            expected: previous_version,
        },
        Meaning::Own,
    );
    let copy = record(fleet_key(&d.org, &d.id), body, version, attrs);
    b.push(
        Write::Update {
            record: copy.clone(),
            expected: previous_version,
        },
        Meaning::Fleet(Some(Write::Create(copy))),
    );
    Ok(())
}

/// The deployment record at `version` goes, and its fleet copy.
fn push_deployment_delete(b: &mut Batch, d: &Deployment, version: u64) {
    b.push(
        Write::Delete {
            key: RecordKey::new(&d.org, Kind::Deployment, &d.id),
            expected: version,
            unreferenced: false,
        },
        Meaning::Own,
    );
    b.push(
        Write::Delete {
            key: fleet_key(&d.org, &d.id),
            expected: version,
            unreferenced: false,
        },
        Meaning::Fleet(None),
    );
}

/// What a deployment is listed and filtered by (name, status, tags): the
/// store indexes every deployment it writes with these, and a bulk load of
/// deployment records (the list-at-scale benchmark) must use the same.
pub fn deployment_attrs(d: &Deployment) -> Attrs {
    Attrs {
        name: Some(d.spec.name.clone()),
        status: Some(d.status.as_str().to_string()),
        tags: d
            .spec
            .metadata
            .tags
            .iter()
            .map(|t| t.filter_form())
            .collect(),
    }
}

fn deployment_refs(d: &Deployment) -> Vec<(Kind, String)> {
    let mut refs: Vec<(Kind, String)> = d
        .spec
        .repository()
        .map(|r| (Kind::Repository, r.to_string()))
        .into_iter()
        .collect();
    refs.extend(d.spec.policies().iter().map(|p| (Kind::Policy, p.clone())));
    // A clone reads its source's repository for as long as it exists, and
    // holds the snapshot it depends on while pinned: counted on the
    // snapshot's own record, so that a delete of it (by a client or by
    // retention) is refused in the same write that would remove it.
    if let Some(src) = &d.clone_source {
        refs.push((Kind::Repository, src.repository.clone()));
        if src.pinned {
            refs.push((
                Kind::Snapshot,
                snapshot_key(
                    &src.source_deployment_id,
                    src.snapshot_sort_millis,
                    &src.snapshot,
                ),
            ));
        }
    }
    refs
}

/// The snapshot record `d` starts to pin, with the version at which its
/// writer read it (`CloneSource::snapshot_version`): the pin is counted
/// only while the record is still at that version, so a snapshot whose
/// delete began after the read (which writes its record first) is not
/// pinned by a clone that would find it gone.
fn snapshot_held(d: &Deployment) -> Option<((Kind, String), u64)> {
    let src = d.clone_source.as_ref().filter(|s| s.pinned)?;
    let version = src.snapshot_version?;
    Some((
        (
            Kind::Snapshot,
            snapshot_key(
                &src.source_deployment_id,
                src.snapshot_sort_millis,
                &src.snapshot,
            ),
        ),
        version,
    ))
}

/// A clone's pin on its source's snapshot, listed by snapshot to name the
/// deployments that hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPin {
    /// The clone that depends on the snapshot.
    pub deployment_id: String,
    pub source_deployment_id: String,
    pub snapshot: String,
    pub mode: floe_domain::restore::RestoreMode,
}

fn pin_prefix(source_deployment_id: &str, snapshot: &str) -> String {
    format!("{source_deployment_id}#{snapshot}#")
}

/// The pin record `d` holds, while it pins its source's snapshot.
fn pin_of(d: &Deployment) -> Option<(RecordKey, SnapshotPin)> {
    let src = d.clone_source.as_ref().filter(|s| s.pinned)?;
    let key = RecordKey::new(
        &d.org,
        Kind::SnapshotPin,
        &format!(
            "{}{}",
            pin_prefix(&src.source_deployment_id, &src.snapshot),
            d.id
        ),
    );
    Some((
        key,
        SnapshotPin {
            deployment_id: d.id.clone(),
            source_deployment_id: src.source_deployment_id.clone(),
            snapshot: src.snapshot.clone(),
            mode: src.mode,
        },
    ))
}

fn plan_key(p: &Plan) -> RecordKey {
    RecordKey::new(&p.org, Kind::Plan, &format!("{}#{}", p.deployment_id, p.id))
}

/// The plan's next version, if it is still at `expected`.
fn plan_update(plan: &Plan, expected: u64) -> Result<Write, StoreError> {
    Ok(Write::Update {
        record: record(
            plan_key(plan),
            encode(plan)?,
            expected + 1,
            plan_attrs(plan),
        ),
        expected,
    })
}

fn active_key(p: &Plan) -> RecordKey {
    RecordKey::new(
        SYSTEM_ORG,
        Kind::ActivePlan,
        &format!("{}#{}#{}", p.org, p.deployment_id, p.id),
    )
}

/// A new plan and its active-plan index entry.
fn push_new_plan(b: &mut Batch, plan: &Plan) -> Result<(), StoreError> {
    b.push(
        Write::Create(record(plan_key(plan), encode(plan)?, 1, plan_attrs(plan))),
        Meaning::Own,
    );
    let entry = ActivePlan {
        org: plan.org.clone(),
        deployment_id: plan.deployment_id.clone(),
        plan_id: plan.id.clone(),
    };
    b.push(
        Write::Create(record(
            active_key(plan),
            encode(&entry)?,
            1,
            Attrs::default(),
        )),
        Meaning::Own,
    );
    Ok(())
}

fn decode_cursor(cursor: &Option<String>) -> Result<Option<String>, StoreError> {
    let Some(c) = cursor else { return Ok(None) };
    let bytes = URL_SAFE_NO_PAD
        .decode(c)
        .map_err(|_| StoreError::BadCursor)?;
    let key = String::from_utf8(bytes).map_err(|_| StoreError::BadCursor)?;
    // A cursor is only ever a key we produced; the backend rebuilds the full
    // storage key from it inside the caller's organization and kind, so a
    // forged cursor can only skip ahead, never step outside.
    if key.is_empty() || key.len() > 512 || key.contains(char::is_control) {
        return Err(StoreError::BadCursor);
    }
    Ok(Some(key))
}

fn encode_cursor(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key.as_bytes())
}

impl Store {
    pub fn new(backend: Arc<dyn Backend>) -> Store {
        Store { backend }
    }

    async fn get<T: DeserializeOwned>(
        &self,
        key: RecordKey,
    ) -> Result<Option<Versioned<T>>, StoreError> {
        match self.backend.get(&key).await.map_err(backend_error)? {
            Some(r) => decode(&r).map(Some),
            None => Ok(None),
        }
    }

    async fn list<T: DeserializeOwned>(
        &self,
        org: &str,
        kind: Kind,
        key_prefix: String,
        filter: Filter,
        page: &PageRequest,
    ) -> Result<Page<Versioned<T>>, StoreError> {
        let records = self
            .list_records(org, kind, key_prefix, filter, page)
            .await?;
        let items = records
            .items
            .into_iter()
            .map(|r| decode(&r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page {
            items,
            next_cursor: records.next_cursor,
        })
    }

    /// One page of stored records, not yet decoded.
    async fn list_records(
        &self,
        org: &str,
        kind: Kind,
        key_prefix: String,
        filter: Filter,
        page: &PageRequest,
    ) -> Result<Page<Record>, StoreError> {
        let limit = page
            .size
            .unwrap_or(DEFAULT_PAGE_SIZE)
            .clamp(1, MAX_PAGE_SIZE);
        let after = match decode_cursor(&page.cursor)? {
            // A cursor from another deployment's plan list must not leak across.
            Some(k) if !k.starts_with(&key_prefix) => return Err(StoreError::BadCursor),
            other => other,
        };
        let query = ListQuery {
            org: org.to_string(),
            kind,
            key_prefix,
            after,
            limit,
            filter,
        };
        let result = self.backend.list(&query).await.map_err(backend_error)?;
        Ok(Page {
            items: result.records,
            next_cursor: result.next.as_deref().map(encode_cursor),
        })
    }

    // ---- repositories ----

    pub async fn create_repository(&self, repo: &Repository) -> Result<(), StoreError> {
        let key = RecordKey::new(&repo.org, Kind::Repository, &repo.name);
        let attrs = Attrs {
            name: Some(repo.name.clone()),
            ..Attrs::default()
        };
        let mut b = Batch::default();
        b.push(
            Write::Create(record(key, encode(repo)?, 1, attrs)),
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }

    /// Replaces the repository whose version is `expected`; returns the new version.
    pub async fn replace_repository(
        &self,
        repo: &Repository,
        expected: u64,
    ) -> Result<u64, StoreError> {
        let key = RecordKey::new(&repo.org, Kind::Repository, &repo.name);
        let attrs = Attrs {
            name: Some(repo.name.clone()),
            ..Attrs::default()
        };
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: record(key, encode(repo)?, expected + 1, attrs),
                expected,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    pub async fn get_repository(
        &self,
        org: &str,
        name: &str,
    ) -> Result<Option<Versioned<Repository>>, StoreError> {
        self.get(RecordKey::new(org, Kind::Repository, name)).await
    }

    pub async fn list_repositories(
        &self,
        org: &str,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Repository>>, StoreError> {
        self.list(
            org,
            Kind::Repository,
            String::new(),
            Filter::default(),
            page,
        )
        .await
    }

    /// Deletes the repository unless a deployment or policy still uses it (`InUse`).
    pub async fn delete_repository(
        &self,
        org: &str,
        name: &str,
        expected: u64,
    ) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: RecordKey::new(org, Kind::Repository, name),
                expected,
                unreferenced: true,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }

    // ---- snapshot policies ----

    /// Creates the policy and counts its use of the repository, which must exist.
    pub async fn create_policy(&self, policy: &Policy) -> Result<(), StoreError> {
        let key = RecordKey::new(&policy.org, Kind::Policy, &policy.id);
        let attrs = Attrs {
            name: Some(policy.spec.name.clone()),
            ..Attrs::default()
        };
        let mut b = Batch::default();
        b.push(
            Write::Create(record(key, encode(policy)?, 1, attrs)),
            Meaning::Own,
        );
        b.reference_changes(
            &policy.org,
            &[],
            &[(Kind::Repository, policy.spec.repository.clone())],
        );
        b.run(self.backend.as_ref()).await
    }

    /// Replaces `previous` with `policy`, moving the repository reference if it changed.
    pub async fn replace_policy(
        &self,
        policy: &Policy,
        previous: &Versioned<Policy>,
    ) -> Result<u64, StoreError> {
        let key = RecordKey::new(&policy.org, Kind::Policy, &policy.id);
        let attrs = Attrs {
            name: Some(policy.spec.name.clone()),
            ..Attrs::default()
        };
        let version = previous.version + 1;
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: record(key, encode(policy)?, version, attrs),
                expected: previous.version,
            },
            Meaning::Own,
        );
        b.reference_changes(
            &policy.org,
            &[(Kind::Repository, previous.value.spec.repository.clone())],
            &[(Kind::Repository, policy.spec.repository.clone())],
        );
        b.run(self.backend.as_ref()).await?;
        Ok(version)
    }

    pub async fn get_policy(
        &self,
        org: &str,
        id: &str,
    ) -> Result<Option<Versioned<Policy>>, StoreError> {
        self.get(RecordKey::new(org, Kind::Policy, id)).await
    }

    pub async fn list_policies(
        &self,
        org: &str,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Policy>>, StoreError> {
        self.list(org, Kind::Policy, String::new(), Filter::default(), page)
            .await
    }

    /// Deletes the policy unless a deployment still has it attached (`InUse`).
    pub async fn delete_policy(&self, previous: &Versioned<Policy>) -> Result<(), StoreError> {
        let p = &previous.value;
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: RecordKey::new(&p.org, Kind::Policy, &p.id),
                expected: previous.version,
                unreferenced: true,
            },
            Meaning::Own,
        );
        b.reference_changes(
            &p.org,
            &[(Kind::Repository, p.spec.repository.clone())],
            &[],
        );
        b.run(self.backend.as_ref()).await
    }

    // ---- deployments and their plans ----

    /// Stores a new deployment with its first plan, counts its references
    /// (repository, policies: all must exist), and remembers the idempotency
    /// key, all in one atomic batch.
    pub async fn create_deployment(
        &self,
        deployment: &Deployment,
        plan: &Plan,
        idempotency: Option<&Idempotency>,
    ) -> Result<(), StoreError> {
        let org = &deployment.org;
        let mut b = Batch::default();
        push_new_deployment(&mut b, deployment)?;
        push_new_plan(&mut b, plan)?;
        b.reference_changes_held(
            org,
            &[],
            &deployment_refs(deployment),
            snapshot_held(deployment).as_ref(),
        );
        b.pin_changes(None, Some(deployment))?;
        if let Some(idem) = idempotency {
            let body = encode(&IdempotencyRecord {
                request_hash: idem.request_hash.clone(),
                deployment_id: deployment.id.clone(),
            })?;
            let mut r = record(
                RecordKey::new(org, Kind::Idempotency, &idem.key_hash),
                body,
                1,
                Attrs::default(),
            );
            r.expires_at = Some(crate::backend::now_epoch() + IDEMPOTENCY_TTL_SECS);
            b.push(Write::Create(r), Meaning::IdempotencyKey);
        }
        b.run(self.backend.as_ref()).await
    }

    pub async fn get_idempotency(
        &self,
        org: &str,
        key_hash: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        Ok(self
            .get::<IdempotencyRecord>(RecordKey::new(org, Kind::Idempotency, key_hash))
            .await?
            .map(|v| v.value))
    }

    /// Replaces `previous` with `deployment` (moving references), and stores
    /// `plan` with it when the change needs one.
    pub async fn replace_deployment(
        &self,
        deployment: &Deployment,
        previous: &Versioned<Deployment>,
        plan: Option<&Plan>,
    ) -> Result<u64, StoreError> {
        let org = &deployment.org;
        let version = previous.version + 1;
        let mut b = Batch::default();
        push_deployment_update(&mut b, deployment, previous.version)?;
        if let Some(plan) = plan {
            push_new_plan(&mut b, plan)?;
        }
        b.reference_changes_held(
            org,
            &deployment_refs(&previous.value),
            &deployment_refs(deployment),
            snapshot_held(deployment).as_ref(),
        );
        b.pin_changes(Some(&previous.value), Some(deployment))?;
        b.run(self.backend.as_ref()).await?;
        Ok(version)
    }

    /// Records what the health check found on the deployment at
    /// `previous`, and nothing else, without a new version.
    ///
    /// Health is an observation, not a change of the deployment: a new
    /// version would refuse (412) every user's `If-Match` sent after a
    /// read, only because the check looked meanwhile. The write is still
    /// conditional on `previous.version`, so it never undoes a change that
    /// won the race (`VersionMismatch`: the next check looks again); a
    /// change written after it keeps whichever health its writer read,
    /// until the next check writes it again.
    pub async fn record_health(
        &self,
        previous: &Versioned<Deployment>,
        health: &floe_domain::health::Health,
    ) -> Result<(), StoreError> {
        let mut d = previous.value.clone();
        d.health = Some(health.clone());
        let mut b = Batch::default();
        push_deployment_write(&mut b, &d, previous.version, previous.version)?;
        b.run(self.backend.as_ref()).await
    }

    pub async fn get_deployment(
        &self,
        org: &str,
        id: &str,
    ) -> Result<Option<Versioned<Deployment>>, StoreError> {
        self.get(RecordKey::new(org, Kind::Deployment, id)).await
    }

    pub async fn list_deployments(
        &self,
        org: &str,
        filter: Filter,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Deployment>>, StoreError> {
        self.list(org, Kind::Deployment, String::new(), filter, page)
            .await
    }

    /// A deployment as `show` shows it, or `None` when there is none. What
    /// `show` made of the record as it is stored now is kept in `memo`, and
    /// answered again without decoding the record while it is unchanged;
    /// so `show` must depend on nothing but the deployment and its version.
    /// When the backend can tell that nothing was written since the memo
    /// last found the record, the memo answers without reading it.
    pub async fn show_deployment<V: Clone + Weigh, E: From<StoreError>>(
        &self,
        org: &str,
        id: &str,
        memo: &Memo<V>,
        show: impl Fn(Versioned<Deployment>) -> Result<V, E>,
    ) -> Result<Option<V>, E> {
        let key = RecordKey::new(org, Kind::Deployment, id);
        // Taken before the read: a write that begins after it moves the
        // mark, so the entry stamped with it is not answered again.
        let mark = self.backend.quiet_mark();
        if let Some(made) = mark.and_then(|mark| memo.unchanged(&key, mark)) {
            return Ok(Some(made));
        }
        match self.backend.get(&key).await.map_err(backend_error)? {
            Some(record) => memo.make(record, mark, |r| show(decode(r)?)).map(Some),
            None => Ok(None),
        }
    }

    /// A page of deployments as `show` shows each (see
    /// [`Store::show_deployment`]): one query, and a decode only of the
    /// records `memo` has not seen as they are.
    pub async fn show_deployments<V: Clone + Weigh, E: From<StoreError>>(
        &self,
        org: &str,
        filter: Filter,
        page: &PageRequest,
        memo: &Memo<V>,
        show: impl Fn(Versioned<Deployment>) -> Result<V, E>,
    ) -> Result<Page<V>, E> {
        let mark = self.backend.quiet_mark();
        let records = self
            .list_records(org, Kind::Deployment, String::new(), filter, page)
            .await?;
        Ok(Page {
            items: memo.make_all(records.items, mark, |r| show(decode(r)?))?,
            next_cursor: records.next_cursor,
        })
    }

    /// Deletes the deployment record and releases its references. Its plans
    /// stay as history.
    pub async fn delete_deployment(
        &self,
        previous: &Versioned<Deployment>,
    ) -> Result<(), StoreError> {
        let d = &previous.value;
        let mut b = Batch::default();
        push_deployment_delete(&mut b, d, previous.version);
        b.reference_changes(&d.org, &deployment_refs(d), &[]);
        b.pin_changes(Some(d), None)?;
        b.run(self.backend.as_ref()).await
    }

    /// One page of the running deployments of every organization, from
    /// their fleet copies: one query per page, for the health check. The
    /// versions are the deployment records' own.
    pub async fn list_running_fleet(
        &self,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Deployment>>, StoreError> {
        let filter = Filter {
            status: Some(
                floe_domain::deployment::DeploymentStatus::Running
                    .as_str()
                    .to_string(),
            ),
            ..Filter::default()
        };
        self.list(SYSTEM_ORG, Kind::Fleet, String::new(), filter, page)
            .await
    }

    pub async fn get_plan(
        &self,
        org: &str,
        deployment_id: &str,
        plan_id: &str,
    ) -> Result<Option<Versioned<Plan>>, StoreError> {
        self.get(RecordKey::new(
            org,
            Kind::Plan,
            &format!("{deployment_id}#{plan_id}"),
        ))
        .await
    }

    /// Writes the plan's progress, if it is still at `expected`.
    pub async fn update_plan(&self, plan: &Plan, expected: u64) -> Result<u64, StoreError> {
        let mut b = Batch::default();
        b.push(plan_update(plan, expected)?, Meaning::Own);
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    /// Records a finished plan, drops it from the active index and applies
    /// its outcome to the deployment, all or nothing.
    pub async fn finish_plan(
        &self,
        plan: &Plan,
        expected: u64,
        outcome: DeploymentOutcome<'_>,
    ) -> Result<u64, StoreError> {
        let mut b = Batch::default();
        b.push(plan_update(plan, expected)?, Meaning::Own);
        b.push(
            Write::Delete {
                key: active_key(plan),
                expected: 1,
                unreferenced: false,
            },
            Meaning::Own,
        );
        match outcome {
            DeploymentOutcome::Update {
                deployment,
                previous,
            } => {
                push_deployment_update(&mut b, deployment, previous.version)?;
                b.reference_changes(
                    &deployment.org,
                    &deployment_refs(&previous.value),
                    &deployment_refs(deployment),
                );
                b.pin_changes(Some(&previous.value), Some(deployment))?;
            }
            DeploymentOutcome::Delete(previous) => {
                let d = &previous.value;
                push_deployment_delete(&mut b, d, previous.version);
                b.reference_changes(&d.org, &deployment_refs(d), &[]);
                b.pin_changes(Some(d), None)?;
            }
        }
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    /// One page of the active-plan index (all organizations), for the sweep.
    pub async fn list_active_plans(
        &self,
        page: &PageRequest,
    ) -> Result<Page<ActivePlan>, StoreError> {
        let page = self
            .list::<ActivePlan>(
                SYSTEM_ORG,
                Kind::ActivePlan,
                String::new(),
                Filter::default(),
                page,
            )
            .await?;
        Ok(Page {
            items: page.items.into_iter().map(|v| v.value).collect(),
            next_cursor: page.next_cursor,
        })
    }

    pub async fn list_plans(
        &self,
        org: &str,
        deployment_id: &str,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Plan>>, StoreError> {
        self.list(
            org,
            Kind::Plan,
            format!("{deployment_id}#"),
            Filter::default(),
            page,
        )
        .await
    }
}

fn plan_attrs(p: &Plan) -> Attrs {
    Attrs {
        name: None,
        status: serde_json::to_value(p.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string)),
        tags: Vec::new(),
    }
}

/// Far enough in the future (year 2286) that every real start time inverts
/// to a positive 13-digit number, so keys sort newest first as strings.
const INVERT_MILLIS_FROM: i64 = 9_999_999_999_999;

fn snapshot_key(deployment_id: &str, sort_millis: i64, name: &str) -> String {
    let inverted = INVERT_MILLIS_FROM.saturating_sub(sort_millis.max(0)).max(0);
    format!("{deployment_id}#{inverted:013}#{name}")
}

/// The body of a snapshot's by-name pointer.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SnapshotPointer {
    key: String,
}

fn snapshot_attrs(s: &SnapshotRecord) -> Attrs {
    Attrs {
        name: Some(s.name.clone()),
        status: Some(s.state.as_str().to_string()),
        tags: vec![match &s.policy_id {
            Some(p) => format!("policy:{p}"),
            None => "policy:".to_string(),
        }],
    }
}

impl Store {
    // ---- snapshots ----

    /// Records a new snapshot and its by-name pointer in one batch;
    /// `AlreadyExists` if the deployment already has a snapshot of that name.
    pub async fn create_snapshot(&self, s: &SnapshotRecord) -> Result<(), StoreError> {
        let key = snapshot_key(&s.deployment_id, s.sort_millis, &s.name);
        let pointer = encode(&SnapshotPointer { key: key.clone() })?;
        let mut b = Batch::default();
        b.push(
            Write::Create(record(
                RecordKey::new(
                    &s.org,
                    Kind::SnapshotName,
                    &format!("{}#{}", s.deployment_id, s.name),
                ),
                pointer,
                1,
                Attrs::default(),
            )),
            Meaning::Own,
        );
        b.push(
            Write::Create(record(
                RecordKey::new(&s.org, Kind::Snapshot, &key),
                encode(s)?,
                1,
                snapshot_attrs(s),
            )),
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }

    /// Replaces the snapshot record whose version is `expected` (its state
    /// moved on); returns the new version. The record keeps its place in the
    /// list (`sort_millis` must not change).
    pub async fn update_snapshot(
        &self,
        s: &SnapshotRecord,
        expected: u64,
    ) -> Result<u64, StoreError> {
        let key = snapshot_key(&s.deployment_id, s.sort_millis, &s.name);
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: record(
                    RecordKey::new(&s.org, Kind::Snapshot, &key),
                    encode(s)?,
                    expected + 1,
                    snapshot_attrs(s),
                ),
                expected,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    pub async fn get_snapshot(
        &self,
        org: &str,
        deployment_id: &str,
        name: &str,
    ) -> Result<Option<Versioned<SnapshotRecord>>, StoreError> {
        let pointer = self
            .get::<SnapshotPointer>(RecordKey::new(
                org,
                Kind::SnapshotName,
                &format!("{deployment_id}#{name}"),
            ))
            .await?;
        match pointer {
            // A pointer without its record is a half-finished delete seen
            // from another backend's consistency model; both are written and
            // removed together, so treat it as gone.
            Some(p) => {
                self.get(RecordKey::new(org, Kind::Snapshot, &p.value.key))
                    .await
            }
            None => Ok(None),
        }
    }

    /// One page of a deployment's snapshots, newest first. With `policy_id`,
    /// only that policy's (`Some("")` means only manual snapshots).
    pub async fn list_snapshots(
        &self,
        org: &str,
        deployment_id: &str,
        policy_id: Option<&str>,
        page: &PageRequest,
    ) -> Result<Page<Versioned<SnapshotRecord>>, StoreError> {
        let filter = Filter {
            tag: policy_id.map(|p| format!("policy:{p}")),
            ..Filter::default()
        };
        self.list(
            org,
            Kind::Snapshot,
            format!("{deployment_id}#"),
            filter,
            page,
        )
        .await
    }

    /// The clones that pin the snapshot `name` of `deployment_id` (one
    /// query: at most a page of them, enough to name them).
    pub async fn snapshot_pins(
        &self,
        org: &str,
        deployment_id: &str,
        name: &str,
    ) -> Result<Vec<SnapshotPin>, StoreError> {
        let page = PageRequest {
            size: Some(MAX_PAGE_SIZE),
            cursor: None,
        };
        let listed = self
            .list::<SnapshotPin>(
                org,
                Kind::SnapshotPin,
                pin_prefix(deployment_id, name),
                Filter::default(),
                &page,
            )
            .await?;
        Ok(listed.items.into_iter().map(|v| v.value).collect())
    }

    /// Removes the snapshot record and its pointer together; `InUse` while
    /// a clone pins it (its record's `refs`).
    pub async fn delete_snapshot(
        &self,
        previous: &Versioned<SnapshotRecord>,
    ) -> Result<(), StoreError> {
        let s = &previous.value;
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: RecordKey::new(
                    &s.org,
                    Kind::Snapshot,
                    &snapshot_key(&s.deployment_id, s.sort_millis, &s.name),
                ),
                expected: previous.version,
                unreferenced: true,
            },
            Meaning::Own,
        );
        b.push(
            Write::Delete {
                key: RecordKey::new(
                    &s.org,
                    Kind::SnapshotName,
                    &format!("{}#{}", s.deployment_id, s.name),
                ),
                expected: 1,
                unreferenced: false,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }

    // ---- policy attachment run state ----

    pub async fn get_policy_run(
        &self,
        org: &str,
        deployment_id: &str,
        policy_id: &str,
    ) -> Result<Option<Versioned<PolicyRun>>, StoreError> {
        self.get(RecordKey::new(
            org,
            Kind::PolicyRun,
            &format!("{deployment_id}#{policy_id}"),
        ))
        .await
    }

    /// Creates the run state (`expected` None) or replaces the one at
    /// `expected`; returns the new version.
    pub async fn save_policy_run(
        &self,
        run: &PolicyRun,
        expected: Option<u64>,
    ) -> Result<u64, StoreError> {
        let key = RecordKey::new(
            &run.org,
            Kind::PolicyRun,
            &format!("{}#{}", run.deployment_id, run.policy_id),
        );
        let mut b = Batch::default();
        let version = match expected {
            None => {
                b.push(
                    Write::Create(record(key, encode(run)?, 1, Attrs::default())),
                    Meaning::Own,
                );
                1
            }
            Some(expected) => {
                b.push(
                    Write::Update {
                        record: record(key, encode(run)?, expected + 1, Attrs::default()),
                        expected,
                    },
                    Meaning::Own,
                );
                expected + 1
            }
        };
        b.run(self.backend.as_ref()).await?;
        Ok(version)
    }
}
