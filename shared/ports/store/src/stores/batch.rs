//! A batch of writes that succeed or fail together, each with what its
//! failure means to the caller: how every aggregate writes.

use super::{StoreError, backend_error, simple_failure};
use crate::backend::{Backend, BackendError, Kind, RecordKey, Write, WriteFailure};
use std::collections::BTreeMap;

/// A batch of writes with, for each, what its failure means to the caller.
#[derive(Default)]
pub(super) struct Batch {
    writes: Vec<Write>,
    meanings: Vec<Meaning>,
}

#[derive(Clone)]
pub(super) enum Meaning {
    /// The aggregate's own record: failures mean what they say.
    Own,
    /// A reference to another record: `Missing` means the reference is dangling.
    Reference(Kind, String),
    /// The idempotency record: `Exists` means the key was used before.
    IdempotencyKey,
    /// A deployment's fleet copy. A deployment stored before the fleet
    /// index existed has none: an update of it (`Missing`) creates it
    /// instead, and a delete drops it from the batch.
    Fleet(Option<Write>),
}

impl Batch {
    pub(super) fn push(&mut self, w: Write, m: Meaning) {
        self.writes.push(w);
        self.meanings.push(m);
    }

    /// Adds +1/-1 reference writes for the difference between `before` and `after`.
    pub(super) fn reference_changes(
        &mut self,
        org: &str,
        before: &[(Kind, String)],
        after: &[(Kind, String)],
    ) {
        self.reference_changes_held(org, before, after, None);
    }

    /// As [`Batch::reference_changes`]; a reference gained on `held`'s
    /// record is counted only while that record is at `held`'s version
    /// (the version its writer read).
    pub(super) fn reference_changes_held(
        &mut self,
        org: &str,
        before: &[(Kind, String)],
        after: &[(Kind, String)],
        held: Option<&((Kind, String), u64)>,
    ) {
        let mut delta: BTreeMap<(Kind, String), i64> = BTreeMap::new();
        for r in before {
            *delta.entry(r.clone()).or_default() -= 1;
        }
        for r in after {
            *delta.entry(r.clone()).or_default() += 1;
        }
        for ((kind, key), d) in delta {
            if d == 0 {
                continue;
            }
            let record = RecordKey::new(org, kind, &key);
            let write = match held {
                Some(((k, held_key), version)) if d > 0 && *k == kind && *held_key == key => {
                    Write::RefsAt {
                        key: record,
                        delta: d,
                        expected: *version,
                    }
                }
                _ => Write::Refs {
                    key: record,
                    delta: d,
                },
            };
            self.push(write, Meaning::Reference(kind, key));
        }
    }

    pub(super) async fn run(mut self, backend: &dyn Backend) -> Result<(), StoreError> {
        let mut result = backend.write(self.writes.clone()).await;
        // Once per fleet write at most: the batch again, with a missing
        // fleet copy created (or, for a delete, left alone). A deployment
        // has two (its shard's copy, and the unsharded one of an older
        // Floe), either of which may be missing.
        let fleet_writes = self
            .meanings
            .iter()
            .filter(|m| matches!(m, Meaning::Fleet(_)))
            .count();
        for _ in 0..fleet_writes {
            let Err(BackendError::Failed {
                index,
                failure: WriteFailure::Missing,
            }) = &result
            else {
                break;
            };
            let index = *index;
            let Some(Meaning::Fleet(instead)) = self.meanings.get(index).cloned() else {
                break;
            };
            match instead {
                Some(w) => {
                    self.writes[index] = w;
                    self.meanings[index] = Meaning::Own;
                }
                None => {
                    self.writes.remove(index);
                    self.meanings.remove(index);
                }
            }
            result = backend.write(self.writes.clone()).await;
        }
        self.finish(result)
    }

    fn finish(self, result: Result<(), BackendError>) -> Result<(), StoreError> {
        match result {
            Ok(()) => Ok(()),
            Err(BackendError::Failed { index, failure }) => Err(
                match (
                    self.meanings.get(index).cloned().unwrap_or(Meaning::Own),
                    failure,
                ) {
                    (Meaning::Reference(kind, key), WriteFailure::Missing) => {
                        StoreError::MissingReference { kind, key }
                    }
                    // A reference held at a version that moved on: the
                    // record is no longer the one its writer read (a
                    // snapshot whose delete began), as good as gone.
                    (Meaning::Reference(kind, key), WriteFailure::VersionMismatch { .. }) => {
                        StoreError::MissingReference { kind, key }
                    }
                    (Meaning::IdempotencyKey, WriteFailure::Exists) => {
                        StoreError::IdempotencyKeyReused
                    }
                    (_, f) => simple_failure(f),
                },
            ),
            Err(e) => Err(backend_error(e)),
        }
    }
}
