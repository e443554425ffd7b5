//! API keys, one record each under their organization, and the
//! organization's sealed key for hashing them (made with its first key).

use super::batch::{Batch, Meaning};
use super::{Page, PageRequest, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, RecordKey, Write};
use floe_domain::api_key::{ApiKey, KeyHashingKey};

/// The key of the one hashing-key record of an organization.
const HASHING_KEY: &str = "api-keys";

impl Store {
    pub async fn get_api_key(
        &self,
        org: &str,
        id: &str,
    ) -> Result<Option<Versioned<ApiKey>>, StoreError> {
        self.get(RecordKey::new(org, Kind::ApiKey, id)).await
    }

    /// One page of the organization's keys, oldest first (ids sort by
    /// creation time).
    pub async fn list_api_keys(
        &self,
        org: &str,
        page: &PageRequest,
    ) -> Result<Page<Versioned<ApiKey>>, StoreError> {
        self.list(org, Kind::ApiKey, String::new(), Filter::default(), page)
            .await
    }

    /// Stores a new key (`AlreadyExists` if its id is taken).
    pub async fn create_api_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        let stored = record(
            RecordKey::new(&key.org, Kind::ApiKey, &key.id),
            encode(key)?,
            1,
            Attrs::default(),
        );
        let mut b = Batch::default();
        b.push(Write::Create(stored), Meaning::Own);
        b.run(self.backend.as_ref()).await
    }

    /// Replaces `previous` with `key` (its last use), on the version read.
    pub async fn update_api_key(
        &self,
        key: &ApiKey,
        previous: &Versioned<ApiKey>,
    ) -> Result<u64, StoreError> {
        let version = previous.version + 1;
        let stored = record(
            RecordKey::new(&key.org, Kind::ApiKey, &key.id),
            encode(key)?,
            version,
            Attrs::default(),
        );
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: stored,
                expected: previous.version,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await?;
        Ok(version)
    }

    /// Deletes the key as `previous` read it.
    pub async fn delete_api_key(&self, previous: &Versioned<ApiKey>) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: RecordKey::new(&previous.value.org, Kind::ApiKey, &previous.value.id),
                expected: previous.version,
                unreferenced: false,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }

    pub async fn get_key_hashing_key(
        &self,
        org: &str,
    ) -> Result<Option<KeyHashingKey>, StoreError> {
        Ok(self
            .get(RecordKey::new(org, Kind::KeyHashingKey, HASHING_KEY))
            .await?
            .map(|v: Versioned<KeyHashingKey>| v.value))
    }

    /// Stores the organization's hashing key; `AlreadyExists` when another
    /// request made one first (whose key then hashes every key).
    pub async fn create_key_hashing_key(&self, key: &KeyHashingKey) -> Result<(), StoreError> {
        let stored = record(
            RecordKey::new(&key.org, Kind::KeyHashingKey, HASHING_KEY),
            encode(key)?,
            1,
            Attrs::default(),
        );
        let mut b = Batch::default();
        b.push(Write::Create(stored), Meaning::Own);
        b.run(self.backend.as_ref()).await
    }
}
