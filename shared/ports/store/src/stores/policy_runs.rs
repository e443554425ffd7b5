//! The run state of a policy attached to a deployment (when it last ran,
//! what it keeps), one record per attachment.

use super::batch::{Batch, Meaning};
use super::{Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Kind, RecordKey, Write};
use floe_domain::snapshot::PolicyRun;

impl Store {
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
