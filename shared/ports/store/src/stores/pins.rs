//! A clone's pin on its source's snapshot: a record per pinning clone,
//! written and removed in the clone's own batches, and listed by snapshot.

use super::batch::{Batch, Meaning};
use super::{MAX_PAGE_SIZE, PageRequest, Store, StoreError, encode, record};
use crate::backend::{Attrs, Filter, Kind, RecordKey, Write};
use floe_domain::deployment::Deployment;
use serde::{Deserialize, Serialize};

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

impl Batch {
    /// Creates or removes the pin record as the deployment goes from
    /// `before` to `after` (either absent for a create or a delete).
    pub(super) fn pin_changes(
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
}

impl Store {
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
}
