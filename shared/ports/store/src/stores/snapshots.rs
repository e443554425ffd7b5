//! Snapshot records, listed newest first, and their by-name pointers,
//! always written and removed together.

use super::batch::{Batch, Meaning};
use super::{MAX_PAGE_SIZE, Page, PageRequest, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, RecordKey, Write};
use floe_domain::snapshot::SnapshotRecord;
use serde::{Deserialize, Serialize};

/// Far enough in the future (year 2286) that every real start time inverts
/// to a positive 13-digit number, so keys sort newest first as strings.
const INVERT_MILLIS_FROM: i64 = 9_999_999_999_999;

pub(super) fn snapshot_key(deployment_id: &str, sort_millis: i64, name: &str) -> String {
    let inverted = INVERT_MILLIS_FROM.saturating_sub(sort_millis.max(0)).max(0);
    format!("{deployment_id}#{inverted:013}#{name}")
}

/// The body of a snapshot's by-name pointer.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SnapshotPointer {
    key: String,
}

fn snapshot_attrs(s: &SnapshotRecord) -> Attrs {
    Attrs {
        name: Some(s.name.clone()),
        status: Some(s.state.as_str().to_string()),
        tags: vec![match &s.policy_id {
            Some(p) => format!("policy:{p}"),
            None => "policy:".to_string(),
        }],
    }
}

impl Store {
    /// Records a new snapshot and its by-name pointer in one batch;
    /// `AlreadyExists` if the deployment already has a snapshot of that name.
    pub async fn create_snapshot(&self, s: &SnapshotRecord) -> Result<(), StoreError> {
        let key = snapshot_key(&s.deployment_id, s.sort_millis, &s.name);
        let pointer = encode(&SnapshotPointer { key: key.clone() })?;
        let mut b = Batch::default();
        b.push(
            Write::Create(record(
                RecordKey::new(
                    &s.org,
                    Kind::SnapshotName,
                    &format!("{}#{}", s.deployment_id, s.name),
                ),
                pointer,
                1,
                Attrs::default(),
            )),
            Meaning::Own,
        );
        b.push(
            Write::Create(record(
                RecordKey::new(&s.org, Kind::Snapshot, &key),
                encode(s)?,
                1,
                snapshot_attrs(s),
            )),
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }

    /// Replaces the snapshot record whose version is `expected` (its state
    /// moved on); returns the new version. The record keeps its place in the
    /// list (`sort_millis` must not change).
    pub async fn update_snapshot(
        &self,
        s: &SnapshotRecord,
        expected: u64,
    ) -> Result<u64, StoreError> {
        let key = snapshot_key(&s.deployment_id, s.sort_millis, &s.name);
        let mut b = Batch::default();
        b.push(
            Write::Update {
                record: record(
                    RecordKey::new(&s.org, Kind::Snapshot, &key),
                    encode(s)?,
                    expected + 1,
                    snapshot_attrs(s),
                ),
                expected,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    pub async fn get_snapshot(
        &self,
        org: &str,
        deployment_id: &str,
        name: &str,
    ) -> Result<Option<Versioned<SnapshotRecord>>, StoreError> {
        let pointer = self
            .get::<SnapshotPointer>(RecordKey::new(
                org,
                Kind::SnapshotName,
                &format!("{deployment_id}#{name}"),
            ))
            .await?;
        match pointer {
            // A pointer without its record is a half-finished delete seen
            // from another backend's consistency model; both are written and
            // removed together, so treat it as gone.
            Some(p) => {
                self.get(RecordKey::new(org, Kind::Snapshot, &p.value.key))
                    .await
            }
            None => Ok(None),
        }
    }

    /// One page of a deployment's snapshots, newest first. With `policy_id`,
    /// only that policy's (`Some("")` means only manual snapshots).
    pub async fn list_snapshots(
        &self,
        org: &str,
        deployment_id: &str,
        policy_id: Option<&str>,
        page: &PageRequest,
    ) -> Result<Page<Versioned<SnapshotRecord>>, StoreError> {
        let filter = Filter {
            tag: policy_id.map(|p| format!("policy:{p}")),
            ..Filter::default()
        };
        self.list(
            org,
            Kind::Snapshot,
            format!("{deployment_id}#"),
            filter,
            page,
        )
        .await
    }

    /// A deployment's snapshot records, newest first, a page at a time (see
    /// [`SnapshotPages`]). With `policy_id`, only that policy's, as
    /// [`Store::list_snapshots`].
    pub fn snapshot_pages<'a>(
        &'a self,
        org: &'a str,
        deployment_id: &'a str,
        policy_id: Option<&'a str>,
    ) -> SnapshotPages<'a> {
        SnapshotPages {
            store: self,
            org,
            deployment_id,
            policy_id,
            next: Some(PageRequest {
                size: Some(MAX_PAGE_SIZE),
                cursor: None,
            }),
        }
    }

    /// Removes the snapshot record and its pointer together; `InUse` while
    /// a clone pins it (its record's `refs`).
    pub async fn delete_snapshot(
        &self,
        previous: &Versioned<SnapshotRecord>,
    ) -> Result<(), StoreError> {
        let s = &previous.value;
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: RecordKey::new(
                    &s.org,
                    Kind::Snapshot,
                    &snapshot_key(&s.deployment_id, s.sort_millis, &s.name),
                ),
                expected: previous.version,
                unreferenced: true,
            },
            Meaning::Own,
        );
        b.push(
            Write::Delete {
                key: RecordKey::new(
                    &s.org,
                    Kind::SnapshotName,
                    &format!("{}#{}", s.deployment_id, s.name),
                ),
                expected: 1,
                unreferenced: false,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }
}

/// The walk over a deployment's snapshot records: one page from the store,
/// then the next by its cursor, until the store says there is none. The
/// callers that go over every record (retention, removing a deployment's
/// snapshots, naming the pinned ones, finding the newest success) walk
/// with it, a page in memory at a time, and may stop early.
pub struct SnapshotPages<'a> {
    store: &'a Store,
    org: &'a str,
    deployment_id: &'a str,
    policy_id: Option<&'a str>,
    /// The page to read next; `None` once the last one was read.
    next: Option<PageRequest>,
}

impl SnapshotPages<'_> {
    /// Pages of `size` records (clamped to 1 to [`MAX_PAGE_SIZE`]) rather
    /// than the largest the store gives.
    #[must_use]
    pub fn page_size(mut self, size: u32) -> Self {
        if let Some(next) = &mut self.next {
            next.size = Some(size.clamp(1, MAX_PAGE_SIZE));
        }
        self
    }

    /// The next page's records, newest first; `None` once the last page was
    /// read. A failed read leaves the walk where it was, so it may be
    /// called again.
    pub async fn next_page(
        &mut self,
    ) -> Result<Option<Vec<Versioned<SnapshotRecord>>>, StoreError> {
        let Some(page) = &self.next else {
            return Ok(None);
        };
        let size = page.size;
        let listed = self
            .store
            .list_snapshots(self.org, self.deployment_id, self.policy_id, page)
            .await?;
        self.next = listed.next_cursor.map(|cursor| PageRequest {
            size,
            cursor: Some(cursor),
        });
        Ok(Some(listed.items))
    }

    /// Every record not walked yet, newest first, read into memory: for a
    /// caller that must see them all before it decides (retention).
    pub async fn all(mut self) -> Result<Vec<Versioned<SnapshotRecord>>, StoreError> {
        let mut all = Vec::new();
        while let Some(items) = self.next_page().await? {
            all.extend(items);
        }
        Ok(all)
    }
}
