//! Deleted deployments whose snapshots are kept: one record each, listed
//! by the repository that holds the snapshots (`{repository}#{id}`),
//! written in the batch that deletes the deployment's record and counted
//! as a reference on the repository for as long as it exists, so that a
//! repository holding a deleted deployment's snapshots cannot be deleted.
//! The snapshots' own records stay under the deployment's id.

use super::batch::{Batch, Meaning};
use super::{Page, PageRequest, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, RecordKey, Write};
use floe_domain::snapshot::FormerDeployment;

pub(super) fn former_key(f: &FormerDeployment) -> RecordKey {
    RecordKey::new(
        &f.org,
        Kind::FormerDeployment,
        &format!("{}#{}", f.repository, f.id),
    )
}

/// The former deployment's record, created in a deployment's delete batch.
pub(super) fn push_former_create(b: &mut Batch, f: &FormerDeployment) -> Result<(), StoreError> {
    b.push(
        Write::Create(record(
            former_key(f),
            encode(f)?,
            1,
            Attrs {
                name: Some(f.id.clone()),
                ..Attrs::default()
            },
        )),
        Meaning::Own,
    );
    Ok(())
}

impl Store {
    pub async fn get_former_deployment(
        &self,
        org: &str,
        repository: &str,
        id: &str,
    ) -> Result<Option<Versioned<FormerDeployment>>, StoreError> {
        self.get(RecordKey::new(
            org,
            Kind::FormerDeployment,
            &format!("{repository}#{id}"),
        ))
        .await
    }

    /// One page of the deleted deployments whose snapshots `repository`
    /// holds, by id.
    pub async fn list_former_deployments(
        &self,
        org: &str,
        repository: &str,
        page: &PageRequest,
    ) -> Result<Page<Versioned<FormerDeployment>>, StoreError> {
        self.list(
            org,
            Kind::FormerDeployment,
            format!("{repository}#"),
            Filter::default(),
            page,
        )
        .await
    }

    /// Forgets a former deployment (its snapshots are gone) and releases
    /// its reference on the repository, in one batch.
    pub async fn forget_former_deployment(
        &self,
        previous: &Versioned<FormerDeployment>,
    ) -> Result<(), StoreError> {
        let f = &previous.value;
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: former_key(f),
                expected: previous.version,
                unreferenced: false,
            },
            Meaning::Own,
        );
        b.reference_changes(&f.org, &[(Kind::Repository, f.repository.clone())], &[]);
        b.run(self.backend.as_ref()).await
    }
}
