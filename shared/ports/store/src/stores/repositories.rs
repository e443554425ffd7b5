//! Snapshot repositories: named per organization, deleted only while
//! nothing references them; each S3 one held in its bucket's claim
//! (`floe_domain::bucket_claim`), written in the same batch.

use super::batch::{Batch, Meaning};
use super::{Page, PageRequest, SYSTEM_ORG, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, Record, RecordKey, Write};
use floe_domain::bucket_claim::BucketClaim;
use floe_domain::repository::Repository;

/// A change to one bucket's claim that goes with a repository's write: the
/// claim as its writer read it (absent: none yet), and as it is to be
/// (empty: removed). The write holds only while the claim is still as read,
/// so two organizations writing to one bucket at once cannot both pass.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimChange {
    pub before: Option<Versioned<BucketClaim>>,
    pub after: BucketClaim,
}

fn claim_key(endpoint: &str, bucket: &str) -> RecordKey {
    RecordKey::new(
        SYSTEM_ORG,
        Kind::BucketClaim,
        &format!("{endpoint}/{bucket}"),
    )
}

impl ClaimChange {
    fn push_into(&self, b: &mut Batch) -> Result<(), StoreError> {
        let key = claim_key(&self.after.endpoint, &self.after.bucket);
        let write = match (&self.before, self.after.is_empty()) {
            (None, true) => return Ok(()),
            (None, false) => Write::Create(record(key, encode(&self.after)?, 1, Attrs::default())),
            (Some(before), true) => Write::Delete {
                key,
                expected: before.version,
                unreferenced: false,
            },
            (Some(before), false) => Write::Update {
                record: record(
                    key,
                    encode(&self.after)?,
                    before.version + 1,
                    Attrs::default(),
                ),
                expected: before.version,
            },
        };
        b.push(write, Meaning::Own);
        Ok(())
    }
}

/// The repository's record at `version`, listed by its name.
fn repository_record(repo: &Repository, version: u64) -> Result<Record, StoreError> {
    let attrs = Attrs {
        name: Some(repo.name.clone()),
        ..Attrs::default()
    };
    Ok(record(
        RecordKey::new(&repo.org, Kind::Repository, &repo.name),
        encode(repo)?,
        version,
        attrs,
    ))
}

impl Store {
    pub async fn create_repository(&self, repo: &Repository) -> Result<(), StoreError> {
        self.create_repository_claimed(repo, &[]).await
    }

    /// Creates the repository and applies `claims` with it, all or nothing
    /// (a claim changed since it was read fails the write as
    /// `VersionMismatch` or `AlreadyExists`).
    pub async fn create_repository_claimed(
        &self,
        repo: &Repository,
        claims: &[ClaimChange],
    ) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(Write::Create(repository_record(repo, 1)?), Meaning::Own);
        for c in claims {
            c.push_into(&mut b)?;
        }
        b.run(self.backend.as_ref()).await
    }

    /// Replaces the repository whose version is `expected`; returns the new version.
    pub async fn replace_repository(
        &self,
        repo: &Repository,
        expected: u64,
    ) -> Result<u64, StoreError> {
        self.replace_repository_claimed(repo, expected, &[]).await
    }

    /// As [`Store::replace_repository`], with `claims` in the same batch.
    pub async fn replace_repository_claimed(
        &self,
        repo: &Repository,
        expected: u64,
        claims: &[ClaimChange],
    ) -> Result<u64, StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: repository_record(repo, expected + 1)?,
                expected,
            },
            Meaning::Own,
        );
        for c in claims {
            c.push_into(&mut b)?;
        }
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    /// The claim of one endpoint and bucket (keys as
    /// `floe_domain::bucket_claim::claim_key` makes them).
    pub async fn get_bucket_claim(
        &self,
        endpoint: &str,
        bucket: &str,
    ) -> Result<Option<Versioned<BucketClaim>>, StoreError> {
        self.get(claim_key(endpoint, bucket)).await
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
        self.delete_repository_claimed(org, name, expected, &[])
            .await
    }

    /// As [`Store::delete_repository`], with `claims` in the same batch.
    pub async fn delete_repository_claimed(
        &self,
        org: &str,
        name: &str,
        expected: u64,
        claims: &[ClaimChange],
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
        for c in claims {
            c.push_into(&mut b)?;
        }
        b.run(self.backend.as_ref()).await
    }
}
