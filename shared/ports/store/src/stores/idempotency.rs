//! Idempotent creates: the key a create was sent with, remembered for a
//! day with the request's hash and the deployment it made.

use super::batch::{Batch, Meaning};
use super::{Store, StoreError, encode, record};
use crate::backend::{Attrs, Kind, RecordKey, Write};
use serde::{Deserialize, Serialize};

/// How long a create's idempotency key is remembered.
pub const IDEMPOTENCY_TTL_SECS: i64 = 24 * 3600;

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

/// The key's record, remembered for [`IDEMPOTENCY_TTL_SECS`]: its create
/// fails (`IdempotencyKeyReused`) when the key was used before.
pub(super) fn push_idempotency(
    b: &mut Batch,
    org: &str,
    idem: &Idempotency,
    deployment_id: &str,
) -> Result<(), StoreError> {
    let body = encode(&IdempotencyRecord {
        request_hash: idem.request_hash.clone(),
        deployment_id: deployment_id.to_owned(),
    })?;
    let mut r = record(
        RecordKey::new(org, Kind::Idempotency, &idem.key_hash),
        body,
        1,
        Attrs::default(),
    );
    r.expires_at = Some(crate::backend::now_epoch() + IDEMPOTENCY_TTL_SECS);
    b.push(Write::Create(r), Meaning::IdempotencyKey);
    Ok(())
}

impl Store {
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
}
