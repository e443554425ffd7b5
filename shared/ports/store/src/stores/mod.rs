//! Typed stores of Floe's aggregates over any `Backend`. The aggregates'
//! rules live here once: which writes go together in one batch, which
//! references are counted, and what a failed condition means to a caller.
//!
//! One file per aggregate, each adding its operations to [`Store`]:
//! `repositories`, `policies`, `deployments` (with their fleet copies),
//! `plans` (with the active-plan index), `snapshots`, `pins` (a clone's
//! hold on its source's snapshot), `policy_runs`, `idempotency` and
//! `license` (an organization's platform license) and `api_keys` (API keys
//! and the organization's key for hashing them).
//! `batch` is how all of them write: one atomic batch, and what each
//! write's failure means to the caller. This file holds what they share:
//! the errors, versions and pages, the encoding of records and cursors,
//! and the reads.

mod api_keys;
mod batch;
mod deployments;
mod drills;
mod former;
mod idempotency;
mod license;
mod pins;
mod plans;
mod policies;
mod policy_runs;
mod repositories;
mod snapshots;

use crate::backend::{
    Attrs, Backend, BackendError, Filter, Kind, ListQuery, Record, RecordKey, WriteFailure,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Serialize, de::DeserializeOwned};
use std::sync::Arc;

pub use deployments::{FLEET_SHARDS, deployment_attrs, fleet_shard};
pub use drills::{DrillLock, drill_key};
pub use idempotency::{IDEMPOTENCY_TTL_SECS, Idempotency, IdempotencyRecord};
pub use pins::SnapshotPin;
pub use plans::{ActivePlan, DeploymentOutcome};
pub use repositories::ClaimChange;
pub use snapshots::SnapshotPages;

pub const DEFAULT_PAGE_SIZE: u32 = 20;
pub const MAX_PAGE_SIZE: u32 = 100;

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

/// The partition of the store-wide indexes (active plans, the fleet). `~`
/// cannot occur in an organization id, so no organization's records can
/// collide with it.
pub const SYSTEM_ORG: &str = "~system";

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
}
