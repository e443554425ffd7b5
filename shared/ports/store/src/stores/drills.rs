//! Restore drills: one record per drill, listed newest first under the
//! deployment drilled, and one lock per deployment naming the drill that
//! runs, so that two drills of one deployment never run at once. A drill
//! is stored with its clone and the clone's drill plan in one write.

use super::batch::{Batch, Meaning};
use super::deployments::{deployment_refs, push_new_deployment, snapshot_held};
use super::plans::push_new_plan;
use super::snapshots::snapshot_key;
use super::{Page, PageRequest, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, RecordKey, Write};
use floe_domain::deployment::Deployment;
use floe_domain::drill::Drill;
use floe_domain::plan::Plan;
use serde::{Deserialize, Serialize};

/// A drill's record key: the deployment drilled, then newest first (the
/// same inverted start time as snapshot records), then the drill's id.
pub fn drill_key(deployment_id: &str, started_millis: i64, drill_id: &str) -> String {
    snapshot_key(deployment_id, started_millis, drill_id)
}

/// The drill that runs on a deployment: held from the drill's start until
/// its plan ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillLock {
    pub drill_key: String,
    /// The clone and its plan, so that a lock whose plan has ended (its
    /// release lost to a crash) is known as stale.
    pub clone_deployment_id: String,
    pub plan_id: String,
}

fn drill_attrs(d: &Drill) -> Attrs {
    Attrs {
        name: None,
        status: Some(d.view.status.as_str().to_string()),
        tags: Vec::new(),
    }
}

fn lock_key(org: &str, deployment_id: &str) -> RecordKey {
    RecordKey::new(org, Kind::DrillLock, deployment_id)
}

impl Store {
    /// Stores a drill with its clone (and the clone's drill plan, its
    /// references and its pin) and takes the drilled deployment's lock, in
    /// one write: `AlreadyExists` when another drill holds the lock.
    pub async fn create_drill(
        &self,
        drill: &Drill,
        clone: &Deployment,
        plan: &Plan,
    ) -> Result<(), StoreError> {
        let org = &clone.org;
        let mut b = Batch::default();
        let lock = DrillLock {
            drill_key: drill.key.clone(),
            clone_deployment_id: clone.id.clone(),
            plan_id: plan.id.clone(),
        };
        b.push(
            Write::Create(record(
                lock_key(org, &drill.view.deployment_id),
                encode(&lock)?,
                1,
                Attrs::default(),
            )),
            Meaning::Own,
        );
        b.push(
            Write::Create(record(
                RecordKey::new(org, Kind::Drill, &drill.key),
                encode(drill)?,
                1,
                drill_attrs(drill),
            )),
            Meaning::Own,
        );
        push_new_deployment(&mut b, clone)?;
        push_new_plan(&mut b, plan)?;
        b.reference_changes_held(
            org,
            &[],
            &deployment_refs(clone),
            snapshot_held(clone).as_ref(),
        );
        b.pin_changes(None, Some(clone))?;
        b.run(self.backend.as_ref()).await
    }

    pub async fn get_drill(
        &self,
        org: &str,
        key: &str,
    ) -> Result<Option<Versioned<Drill>>, StoreError> {
        self.get(RecordKey::new(org, Kind::Drill, key)).await
    }

    /// One page of a deployment's drills, newest first.
    pub async fn list_drills(
        &self,
        org: &str,
        deployment_id: &str,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Drill>>, StoreError> {
        self.list(
            org,
            Kind::Drill,
            format!("{deployment_id}#"),
            Filter::default(),
            page,
        )
        .await
    }

    /// The lock of the drill running on a deployment, if one is.
    pub async fn get_drill_lock(
        &self,
        org: &str,
        deployment_id: &str,
    ) -> Result<Option<Versioned<DrillLock>>, StoreError> {
        self.get(lock_key(org, deployment_id)).await
    }

    /// Writes the drill's outcome over the record at `expected`, and
    /// releases the lock when it is still this drill's (`lock`, as read).
    pub async fn end_drill(
        &self,
        drill: &Drill,
        expected: u64,
        lock: Option<&Versioned<DrillLock>>,
    ) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: record(
                    RecordKey::new(&drill.org, Kind::Drill, &drill.key),
                    encode(drill)?,
                    expected + 1,
                    drill_attrs(drill),
                ),
                expected,
            },
            Meaning::Own,
        );
        if let Some(lock) = lock.filter(|l| l.value.drill_key == drill.key) {
            b.push(
                Write::Delete {
                    key: lock_key(&drill.org, &drill.view.deployment_id),
                    expected: lock.version,
                    unreferenced: false,
                },
                Meaning::Own,
            );
        }
        b.run(self.backend.as_ref()).await
    }

    /// Removes a lock whose drill has ended without releasing it.
    pub async fn release_drill_lock(
        &self,
        org: &str,
        deployment_id: &str,
        lock: &Versioned<DrillLock>,
    ) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: lock_key(org, deployment_id),
                expected: lock.version,
                unreferenced: false,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }
}
