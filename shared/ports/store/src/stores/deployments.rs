//! Deployments: each record has a fleet copy (the store-wide index the
//! health check lists), counts its references (repository, policies, a
//! clone's source), and is created with its first plan.

use super::batch::{Batch, Meaning};
use super::idempotency::{Idempotency, push_idempotency};
use super::plans::push_new_plan;
use super::snapshots::snapshot_key;
use super::{
    Page, PageRequest, SYSTEM_ORG, Store, StoreError, Versioned, backend_error, decode, encode,
    record,
};
use crate::backend::{Attrs, Filter, Kind, RecordKey, Write};
use crate::memo::{Memo, Weigh};
use floe_domain::deployment::Deployment;
use floe_domain::plan::Plan;

/// How many shards the fleet index is split into. Each is a partition of
/// its own (`~fleet-00` to `~fleet-15`), read with one query a page, so
/// that one health check job reads one shard and the jobs of one sweep
/// read the whole fleet side by side. Changing it moves every copy: a
/// deployment's shard must be the same for every writer.
pub const FLEET_SHARDS: u16 = 16;

/// The shard a deployment's fleet copy lives in: FNV-1a over its org and
/// id, stable across processes and releases (Rust's own hasher is not).
pub fn fleet_shard(org: &str, deployment_id: &str) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in org
        .bytes()
        .chain(std::iter::once(b'#'))
        .chain(deployment_id.bytes())
    {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    // At most FLEET_SHARDS - 1: the conversion cannot fail.
    u16::try_from(hash % u32::from(FLEET_SHARDS)).unwrap_or(0)
}

/// The partition of one shard of the fleet index. `~` is in no
/// organization's name, so no organization's records share it.
fn shard_partition(shard: u16) -> String {
    format!("~fleet-{shard:02}")
}

fn fleet_key(org: &str, deployment_id: &str) -> RecordKey {
    RecordKey::new(
        &shard_partition(fleet_shard(org, deployment_id)),
        Kind::Fleet,
        &format!("{org}#{deployment_id}"),
    )
}

/// Where a Floe before the shards kept every fleet copy, in one
/// partition: each is moved to its shard by its deployment's next write,
/// or by the health check's backfill ([`Store::list_unsharded_fleet`]).
fn unsharded_fleet_key(org: &str, deployment_id: &str) -> RecordKey {
    RecordKey::new(SYSTEM_ORG, Kind::Fleet, &format!("{org}#{deployment_id}"))
}

/// A new deployment record and its fleet copy.
pub(super) fn push_new_deployment(b: &mut Batch, d: &Deployment) -> Result<(), StoreError> {
    let body = encode(d)?;
    let attrs = deployment_attrs(d);
    b.push(
        Write::Create(record(
            RecordKey::new(&d.org, Kind::Deployment, &d.id),
            body.clone(),
            1,
            attrs.clone(),
        )),
        Meaning::Own,
    );
    b.push(
        Write::Create(record(fleet_key(&d.org, &d.id), body, 1, attrs)),
        Meaning::Fleet(None),
    );
    Ok(())
}

/// `d` replacing the record at `previous_version`, and its fleet copy
/// (kept at the same version).
pub(super) fn push_deployment_update(
    b: &mut Batch,
    d: &Deployment,
    previous_version: u64,
) -> Result<(), StoreError> {
    push_deployment_write(b, d, previous_version, previous_version + 1)
}

/// `d` replacing the record at `previous_version` with one at `version`,
/// and its fleet copy.
fn push_deployment_write(
    b: &mut Batch,
    d: &Deployment,
    previous_version: u64,
    version: u64,
) -> Result<(), StoreError> {
    let body = encode(d)?;
    let attrs = deployment_attrs(d);
    b.push(
        Write::Update {
            record: record(
                RecordKey::new(&d.org, Kind::Deployment, &d.id),
                body.clone(),
                version,
                attrs.clone(),
            ),
            expected: previous_version,
        },
        Meaning::Own,
    );
    let copy = record(fleet_key(&d.org, &d.id), body, version, attrs);
    b.push(
        Write::Update {
            record: copy.clone(),
            expected: previous_version,
        },
        Meaning::Fleet(Some(Write::Create(copy))),
    );
    // An unsharded copy (kept in step with the record, as the sharded one
    // is) goes with the first write that makes the sharded one.
    b.push(
        Write::Delete {
            key: unsharded_fleet_key(&d.org, &d.id),
            expected: previous_version,
            unreferenced: false,
        },
        Meaning::Fleet(None),
    );
    Ok(())
}

/// The deployment record at `version` goes, and its fleet copy.
pub(super) fn push_deployment_delete(b: &mut Batch, d: &Deployment, version: u64) {
    b.push(
        Write::Delete {
            key: RecordKey::new(&d.org, Kind::Deployment, &d.id),
            expected: version,
            unreferenced: false,
        },
        Meaning::Own,
    );
    b.push(
        Write::Delete {
            key: fleet_key(&d.org, &d.id),
            expected: version,
            unreferenced: false,
        },
        Meaning::Fleet(None),
    );
    b.push(
        Write::Delete {
            key: unsharded_fleet_key(&d.org, &d.id),
            expected: version,
            unreferenced: false,
        },
        Meaning::Fleet(None),
    );
}

/// What a deployment is listed and filtered by (name, status, tags): the
/// store indexes every deployment it writes with these, and a bulk load of
/// deployment records (the list-at-scale benchmark) must use the same.
pub fn deployment_attrs(d: &Deployment) -> Attrs {
    Attrs {
        name: Some(d.spec.name.clone()),
        status: Some(d.status.as_str().to_string()),
        tags: d
            .spec
            .metadata
            .tags
            .iter()
            .map(|t| t.filter_form())
            .collect(),
    }
}

pub(super) fn deployment_refs(d: &Deployment) -> Vec<(Kind, String)> {
    let mut refs: Vec<(Kind, String)> = d
        .spec
        .repository()
        .map(|r| (Kind::Repository, r.to_string()))
        .into_iter()
        .collect();
    refs.extend(d.spec.policies().iter().map(|p| (Kind::Policy, p.clone())));
    // A clone reads its source's repository for as long as it exists, and
    // holds the snapshot it depends on while pinned: counted on the
    // snapshot's own record, so that a delete of it (by a client or by
    // retention) is refused in the same write that would remove it.
    if let Some(src) = &d.clone_source {
        refs.push((Kind::Repository, src.repository.clone()));
        if src.pinned {
            refs.push((
                Kind::Snapshot,
                snapshot_key(
                    &src.source_deployment_id,
                    src.snapshot_sort_millis,
                    &src.snapshot,
                ),
            ));
        }
    }
    refs
}

/// The snapshot record `d` starts to pin, with the version at which its
/// writer read it (`CloneSource::snapshot_version`): the pin is counted
/// only while the record is still at that version, so a snapshot whose
/// delete began after the read (which writes its record first) is not
/// pinned by a clone that would find it gone.
pub(super) fn snapshot_held(d: &Deployment) -> Option<((Kind, String), u64)> {
    let src = d.clone_source.as_ref().filter(|s| s.pinned)?;
    let version = src.snapshot_version?;
    Some((
        (
            Kind::Snapshot,
            snapshot_key(
                &src.source_deployment_id,
                src.snapshot_sort_millis,
                &src.snapshot,
            ),
        ),
        version,
    ))
}

impl Store {
    /// Stores a new deployment with its first plan, counts its references
    /// (repository, policies: all must exist), and remembers the idempotency
    /// key, all in one atomic batch.
    pub async fn create_deployment(
        &self,
        deployment: &Deployment,
        plan: &Plan,
        idempotency: Option<&Idempotency>,
    ) -> Result<(), StoreError> {
        let org = &deployment.org;
        let mut b = Batch::default();
        push_new_deployment(&mut b, deployment)?;
        push_new_plan(&mut b, plan)?;
        b.reference_changes_held(
            org,
            &[],
            &deployment_refs(deployment),
            snapshot_held(deployment).as_ref(),
        );
        b.pin_changes(None, Some(deployment))?;
        if let Some(idem) = idempotency {
            push_idempotency(&mut b, org, idem, &deployment.id)?;
        }
        b.run(self.backend.as_ref()).await
    }

    /// Replaces `previous` with `deployment` (moving references), and stores
    /// `plan` with it when the change needs one.
    pub async fn replace_deployment(
        &self,
        deployment: &Deployment,
        previous: &Versioned<Deployment>,
        plan: Option<&Plan>,
    ) -> Result<u64, StoreError> {
        let org = &deployment.org;
        let version = previous.version + 1;
        let mut b = Batch::default();
        push_deployment_update(&mut b, deployment, previous.version)?;
        if let Some(plan) = plan {
            push_new_plan(&mut b, plan)?;
        }
        b.reference_changes_held(
            org,
            &deployment_refs(&previous.value),
            &deployment_refs(deployment),
            snapshot_held(deployment).as_ref(),
        );
        b.pin_changes(Some(&previous.value), Some(deployment))?;
        b.run(self.backend.as_ref()).await?;
        Ok(version)
    }

    /// Records what the health check found on the deployment at
    /// `previous`, and nothing else, without a new version.
    ///
    /// Health is an observation, not a change of the deployment: a new
    /// version would refuse (412) every user's `If-Match` sent after a
    /// read, only because the check looked meanwhile. The write is still
    /// conditional on `previous.version`, so it never undoes a change that
    /// won the race (`VersionMismatch`: the next check looks again); a
    /// change written after it keeps whichever health its writer read,
    /// until the next check writes it again.
    pub async fn record_health(
        &self,
        previous: &Versioned<Deployment>,
        health: &floe_domain::health::Health,
    ) -> Result<(), StoreError> {
        let mut d = previous.value.clone();
        d.health = Some(health.clone());
        let mut b = Batch::default();
        push_deployment_write(&mut b, &d, previous.version, previous.version)?;
        b.run(self.backend.as_ref()).await
    }

    pub async fn get_deployment(
        &self,
        org: &str,
        id: &str,
    ) -> Result<Option<Versioned<Deployment>>, StoreError> {
        self.get(RecordKey::new(org, Kind::Deployment, id)).await
    }

    pub async fn list_deployments(
        &self,
        org: &str,
        filter: Filter,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Deployment>>, StoreError> {
        self.list(org, Kind::Deployment, String::new(), filter, page)
            .await
    }

    /// A deployment as `show` shows it, or `None` when there is none. What
    /// `show` made of the record as it is stored now is kept in `memo`, and
    /// answered again without decoding the record while it is unchanged;
    /// so `show` must depend on nothing but the deployment and its version.
    /// When the backend can tell that nothing was written since the memo
    /// last found the record, the memo answers without reading it.
    pub async fn show_deployment<V: Clone + Weigh, E: From<StoreError>>(
        &self,
        org: &str,
        id: &str,
        memo: &Memo<V>,
        show: impl Fn(Versioned<Deployment>) -> Result<V, E>,
    ) -> Result<Option<V>, E> {
        let key = RecordKey::new(org, Kind::Deployment, id);
        // Taken before the read: a write that begins after it moves the
        // mark, so the entry stamped with it is not answered again.
        let mark = self.backend.quiet_mark();
        if let Some(made) = mark.and_then(|mark| memo.unchanged(&key, mark)) {
            return Ok(Some(made));
        }
        match self.backend.get(&key).await.map_err(backend_error)? {
            Some(record) => memo.make(record, mark, |r| show(decode(r)?)).map(Some),
            None => Ok(None),
        }
    }

    /// A page of deployments as `show` shows each (see
    /// [`Store::show_deployment`]): one query, and a decode only of the
    /// records `memo` has not seen as they are.
    pub async fn show_deployments<V: Clone + Weigh, E: From<StoreError>>(
        &self,
        org: &str,
        filter: Filter,
        page: &PageRequest,
        memo: &Memo<V>,
        show: impl Fn(Versioned<Deployment>) -> Result<V, E>,
    ) -> Result<Page<V>, E> {
        let mark = self.backend.quiet_mark();
        let records = self
            .list_records(org, Kind::Deployment, String::new(), filter, page)
            .await?;
        Ok(Page {
            items: memo.make_all(records.items, mark, |r| show(decode(r)?))?,
            next_cursor: records.next_cursor,
        })
    }

    /// Deletes the deployment record and releases its references. Its plans
    /// stay as history.
    pub async fn delete_deployment(
        &self,
        previous: &Versioned<Deployment>,
    ) -> Result<(), StoreError> {
        let d = &previous.value;
        let mut b = Batch::default();
        push_deployment_delete(&mut b, d, previous.version);
        b.reference_changes(&d.org, &deployment_refs(d), &[]);
        b.pin_changes(Some(d), None)?;
        b.run(self.backend.as_ref()).await
    }

    /// One page of the running deployments of one shard of the fleet
    /// index, of every organization: one query per page, for the health
    /// check. The versions are the deployment records' own.
    pub async fn list_fleet_shard(
        &self,
        shard: u16,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Deployment>>, StoreError> {
        let filter = Filter {
            status: Some(
                floe_domain::deployment::DeploymentStatus::Running
                    .as_str()
                    .to_string(),
            ),
            ..Filter::default()
        };
        self.list(
            &shard_partition(shard),
            Kind::Fleet,
            String::new(),
            filter,
            page,
        )
        .await
    }

    /// One page of the fleet copies a Floe before the shards wrote, in any
    /// status, as their deployments' records: what is still to move.
    pub async fn list_unsharded_fleet(
        &self,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Deployment>>, StoreError> {
        self.list(
            SYSTEM_ORG,
            Kind::Fleet,
            String::new(),
            Filter::default(),
            page,
        )
        .await
    }

    /// Removes an unsharded fleet copy whose deployment record is gone,
    /// at the copy's version.
    pub async fn drop_unsharded_copy(
        &self,
        copy: &Versioned<Deployment>,
    ) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: unsharded_fleet_key(&copy.value.org, &copy.value.id),
                expected: copy.version,
                unreferenced: false,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }

    /// Moves the deployment's fleet copy into its shard: its record written
    /// again as it is (same version, as a health write), which writes the
    /// sharded copy and removes the unsharded one. `VersionMismatch` when
    /// the record moved on (that write moved the copy).
    pub async fn move_to_shard(&self, current: &Versioned<Deployment>) -> Result<(), StoreError> {
        let mut b = Batch::default();
        push_deployment_write(&mut b, &current.value, current.version, current.version)?;
        b.run(self.backend.as_ref()).await
    }
}
