//! Snapshot repositories: named per organization, deleted only while
//! nothing references them.

use super::batch::{Batch, Meaning};
use super::{Page, PageRequest, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, Record, RecordKey, Write};
use floe_domain::repository::Repository;

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
        let mut b = Batch::default();
        b.push(Write::Create(repository_record(repo, 1)?), Meaning::Own);
        b.run(self.backend.as_ref()).await
    }

    /// Replaces the repository whose version is `expected`; returns the new version.
    pub async fn replace_repository(
        &self,
        repo: &Repository,
        expected: u64,
    ) -> Result<u64, StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: repository_record(repo, expected + 1)?,
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
}
