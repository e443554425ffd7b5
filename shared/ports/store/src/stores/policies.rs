//! Snapshot policies: each counts its use of its repository, and is
//! deleted only while no deployment has it attached.

use super::batch::{Batch, Meaning};
use super::{Page, PageRequest, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, Record, RecordKey, Write};
use floe_domain::policy::Policy;

/// The policy's record at `version`, listed by its name.
fn policy_record(policy: &Policy, version: u64) -> Result<Record, StoreError> {
    let attrs = Attrs {
        name: Some(policy.spec.name.clone()),
        ..Attrs::default()
    };
    Ok(record(
        RecordKey::new(&policy.org, Kind::Policy, &policy.id),
        encode(policy)?,
        version,
        attrs,
    ))
}

impl Store {
    /// Creates the policy and counts its use of the repository, which must exist.
    pub async fn create_policy(&self, policy: &Policy) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(Write::Create(policy_record(policy, 1)?), Meaning::Own);
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
        let version = previous.version + 1;
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: policy_record(policy, version)?,
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
}
