//! A memo of what a pure function made of stored records.
//!
//! Showing a stored record (a deployment's view, say) means decoding its
//! JSON body and encoding what is shown: most of a warm read's work, done
//! again for every read of an unchanged record. When what is made depends
//! only on the record (its body, version and reference count), the memo
//! keeps it, and a later read of the same record returns it without
//! decoding anything.
//!
//! An entry answers only a record that is byte for byte the one it was
//! made from: same organization, key, version, reference count and body.
//! So nothing kept can outlive a write (a write that left the version
//! alone still changed the body), and a memo can be shared by any number
//! of readers. It holds at most a budget of bytes, counting the bodies
//! it keeps and what was made of them, and forgets entries at random when
//! full.
//!
//! A backend that is its records' only writer gives quiet marks (see
//! [`crate::Backend::quiet_mark`]). An entry remembers the mark taken
//! before the last read that found its record; while the backend's mark is
//! still that one, nothing has been written since, and the entry answers
//! without a read at all ([`Memo::unchanged`]).

use crate::backend::{Kind, Record, RecordKey, now_epoch};
use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the memo counts against its budget for a value it keeps.
pub trait Weigh {
    /// Bytes held, roughly: the heap behind the value.
    fn weight(&self) -> usize;
}

/// The fixed cost of an entry beyond its bytes: the map's slot, the boxes.
const ENTRY_OVERHEAD: usize = 128;

pub struct Memo<V> {
    budget: usize,
    /// Read-locked for lookups, so that readers of the same records (a
    /// dashboard's poll from every worker thread) never wait on each other;
    /// write-locked only to keep what was made.
    state: RwLock<State<V>>,
}

struct State<V> {
    /// By the record's own key; the organization is compared on a hit.
    entries: HashMap<Box<str>, Entry<V>>,
    bytes: usize,
}

struct Entry<V> {
    org: Box<str>,
    kind: Kind,
    version: u64,
    refs: u64,
    body: Box<str>,
    expires_at: Option<i64>,
    made: V,
    weight: usize,
    /// The quiet mark taken before the latest read that found this
    /// record, 0 for none (marks start at 1). Raised under the read lock
    /// by readers that found it again.
    seen: AtomicU64,
}

impl<V> Entry<V> {
    fn stamp(&self, mark: Option<u64>) {
        if let Some(mark) = mark {
            self.seen.fetch_max(mark, Ordering::Relaxed);
        }
    }

    fn answers(&self, record: &Record) -> bool {
        self.version == record.version
            && self.refs == record.refs
            && self.kind == record.key.kind
            && *self.org == *record.key.org
            && *self.body == *record.body
    }
}

impl<V: Clone + Weigh> Memo<V> {
    /// A memo that keeps at most `budget` bytes. A budget of 0 keeps
    /// nothing: every record is made afresh.
    pub fn new(budget: usize) -> Memo<V> {
        Memo {
            budget,
            state: RwLock::new(State {
                entries: HashMap::new(),
                bytes: 0,
            }),
        }
    }

    /// What `make` makes of each record, in order: kept values where the
    /// memo has them, `make`'s answer (then kept) where it has not. `make`
    /// must depend on nothing but the record. The lock is held twice per
    /// call (to read, then to keep), never while `make` runs.
    ///
    /// `mark` is the backend's quiet mark taken before the read that found
    /// `records` (see [`Memo::unchanged`]).
    pub fn make_all<E>(
        &self,
        records: Vec<Record>,
        mark: Option<u64>,
        make: impl Fn(&Record) -> Result<V, E>,
    ) -> Result<Vec<V>, E> {
        let mut found: Vec<Option<V>> = match self.state.read() {
            Ok(state) => records
                .iter()
                .map(|r| {
                    state
                        .entries
                        .get(r.key.key.as_str())
                        .filter(|e| e.answers(r))
                        .map(|e| {
                            e.stamp(mark);
                            e.made.clone()
                        })
                })
                .collect(),
            // A panic while the lock was held leaves nothing to trust: make
            // everything, keep nothing.
            Err(_) => return records.iter().map(make).collect(),
        };
        let mut fresh = Vec::new();
        for (slot, record) in found.iter_mut().zip(records) {
            if slot.is_none() {
                let made = make(&record)?;
                *slot = Some(made.clone());
                fresh.push((record, made));
            }
        }
        if !fresh.is_empty() {
            self.keep(fresh, mark);
        }
        Ok(found.into_iter().flatten().collect())
    }

    /// One record's value (see [`Memo::make_all`]).
    pub fn make<E>(
        &self,
        record: Record,
        mark: Option<u64>,
        make: impl Fn(&Record) -> Result<V, E>,
    ) -> Result<V, E> {
        if let Ok(state) = self.state.read()
            && let Some(e) = state.entries.get(record.key.key.as_str())
            && e.answers(&record)
        {
            e.stamp(mark);
            return Ok(e.made.clone());
        }
        let made = make(&record)?;
        self.keep(vec![(record, made.clone())], mark);
        Ok(made)
    }

    /// The value kept for the record at `key`, when a read that found it
    /// began at the quiet mark `mark` and the backend's mark is `mark`
    /// still: then no write has begun since that read, and the record is
    /// as it found it. `None` sends the caller to read the record.
    ///
    /// Exact, not a cache with an age: a mark equal to an entry's means
    /// the backend's write counters have not moved since before the read
    /// the entry was checked against (they only grow).
    pub fn unchanged(&self, key: &RecordKey, mark: u64) -> Option<V> {
        let state = self.state.read().ok()?;
        let e = state.entries.get(key.key.as_str())?;
        let seen = e.seen.load(Ordering::Relaxed);
        let answers = seen != 0
            && seen == mark
            && e.kind == key.kind
            && *e.org == *key.org
            && e.expires_at.is_none_or(|at| at > now_epoch());
        answers.then(|| e.made.clone())
    }

    fn keep(&self, fresh: Vec<(Record, V)>, mark: Option<u64>) {
        let Ok(mut state) = self.state.write() else {
            return;
        };
        for (record, made) in fresh {
            let weight = ENTRY_OVERHEAD + record.key.key.len() + record.body.len() + made.weight();
            if weight > self.budget / 8 {
                // One record this large would crowd out the rest.
                continue;
            }
            let entry = Entry {
                org: record.key.org.into_boxed_str(),
                kind: record.key.kind,
                version: record.version,
                refs: record.refs,
                body: record.body.into_boxed_str(),
                expires_at: record.expires_at,
                made,
                weight,
                seen: AtomicU64::new(mark.unwrap_or(0)),
            };
            state.bytes += weight;
            if let Some(old) = state.entries.insert(record.key.key.into_boxed_str(), entry) {
                state.bytes -= old.weight;
            }
        }
        if state.bytes > self.budget {
            state.shrink(self.budget - self.budget / 4);
        }
    }

    /// Entries kept and the bytes counted for them (for tests and figures).
    pub fn usage(&self) -> (usize, usize) {
        self.state
            .read()
            .map_or((0, 0), |s| (s.entries.len(), s.bytes))
    }
}

impl<V> State<V> {
    /// Forgets entries until at most `target` bytes are kept. Which ones is
    /// left to the map's order, which is random: no entry is favoured, and
    /// a working set larger than the budget still finds part of itself.
    fn shrink(&mut self, target: usize) {
        let mut bytes = self.bytes;
        self.entries.retain(|_, e| {
            if bytes <= target {
                return true;
            }
            bytes -= e.weight;
            false
        });
        self.bytes = bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Attrs, RecordKey};
    use std::cell::Cell;

    impl Weigh for String {
        fn weight(&self) -> usize {
            self.len()
        }
    }

    fn record(org: &str, key: &str, body: &str, version: u64) -> Record {
        Record {
            key: RecordKey::new(org, Kind::Deployment, key),
            body: body.to_string(),
            version,
            refs: 0,
            attrs: Attrs::default(),
            expires_at: None,
        }
    }

    /// Makes "org/key@version:body" and counts its calls.
    fn maker(calls: &Cell<usize>) -> impl Fn(&Record) -> Result<String, String> + '_ {
        move |r| {
            calls.set(calls.get() + 1);
            Ok(format!(
                "{}/{}@{}#{}:{}",
                r.key.org, r.key.key, r.version, r.refs, r.body
            ))
        }
    }

    #[test]
    fn an_unchanged_record_is_made_once() -> Result<(), String> {
        let memo = Memo::new(1 << 20);
        let calls = Cell::new(0);
        for _ in 0..3 {
            let made = memo.make_all(
                vec![record("o", "a", "{1}", 1), record("o", "b", "{2}", 1)],
                None,
                maker(&calls),
            )?;
            assert_eq!(made, ["o/a@1#0:{1}", "o/b@1#0:{2}"]);
        }
        assert_eq!(calls.get(), 2);
        Ok(())
    }

    /// Whatever differs from the record an entry was made from (the body
    /// with the version kept, the version, the references, the
    /// organization) is made afresh, and the fresh value is what is kept.
    #[test]
    fn any_change_to_the_record_is_made_afresh() -> Result<(), String> {
        let memo = Memo::new(1 << 20);
        let calls = Cell::new(0);
        let first = memo.make(record("o", "a", "{1}", 1), None, maker(&calls))?;
        assert_eq!(first, "o/a@1#0:{1}");
        let mut changed_refs = record("o", "a", "{1}", 1);
        changed_refs.refs = 2;
        for (r, want) in [
            (record("o", "a", "{2}", 1), "o/a@1#0:{2}"),
            (record("o", "a", "{2}", 2), "o/a@2#0:{2}"),
            (changed_refs, "o/a@1#2:{1}"),
            (record("p", "a", "{1}", 1), "p/a@1#0:{1}"),
        ] {
            let before = calls.get();
            assert_eq!(memo.make(r.clone(), None, maker(&calls))?, want);
            assert_eq!(calls.get(), before + 1, "{want} was not made afresh");
            assert_eq!(memo.make(r, None, maker(&calls))?, want);
            assert_eq!(calls.get(), before + 1, "{want} was not kept");
        }
        Ok(())
    }

    #[test]
    fn a_failure_is_answered_and_not_kept() {
        let memo: Memo<String> = Memo::new(1 << 20);
        let calls = Cell::new(0);
        let failing = |_: &Record| -> Result<String, String> {
            calls.set(calls.get() + 1);
            Err("corrupt".to_string())
        };
        for _ in 0..2 {
            let answer = memo.make_all(
                vec![record("o", "a", "{", 1), record("o", "b", "{", 1)],
                None,
                failing,
            );
            assert_eq!(answer, Err("corrupt".to_string()));
        }
        assert_eq!(calls.get(), 2, "a failure was kept");
        assert_eq!(memo.usage().0, 0);
    }

    #[test]
    fn the_budget_bounds_what_is_kept() -> Result<(), String> {
        let budget = 64 * 1024;
        let memo = Memo::new(budget);
        let calls = Cell::new(0);
        let body = "x".repeat(500);
        for i in 0..1000 {
            memo.make(record("o", &format!("k{i}"), &body, 1), None, maker(&calls))?;
            assert!(memo.usage().1 <= budget, "over budget after {i}");
        }
        let (entries, bytes) = memo.usage();
        assert!(
            entries > 10 && bytes > budget / 2,
            "{entries} entries, {bytes} bytes"
        );
        Ok(())
    }

    #[test]
    fn a_zero_budget_keeps_nothing() -> Result<(), String> {
        let memo = Memo::new(0);
        let calls = Cell::new(0);
        for _ in 0..2 {
            memo.make(record("o", "a", "{}", 1), None, maker(&calls))?;
        }
        assert_eq!(calls.get(), 2);
        assert_eq!(memo.usage(), (0, 0));
        Ok(())
    }

    /// An entry answers without a read only at the mark of the read that
    /// last found its record, and only for its organization and kind, and
    /// not once it has expired.
    #[test]
    fn only_the_mark_of_the_last_read_answers_without_a_read() -> Result<(), String> {
        let memo = Memo::new(1 << 20);
        let calls = Cell::new(0);
        let key = RecordKey::new("o", Kind::Deployment, "a");
        assert_eq!(memo.unchanged(&key, 7), None, "nothing kept yet");
        memo.make(record("o", "a", "{1}", 1), Some(7), maker(&calls))?;
        assert_eq!(memo.unchanged(&key, 7).as_deref(), Some("o/a@1#0:{1}"));
        assert_eq!(memo.unchanged(&key, 9), None, "a write began since");
        assert_eq!(
            memo.unchanged(&RecordKey::new("p", Kind::Deployment, "a"), 7),
            None,
            "another organization's record"
        );
        assert_eq!(
            memo.unchanged(&RecordKey::new("o", Kind::Policy, "a"), 7),
            None,
            "another kind's record"
        );
        // Found again by a read at a later mark: that mark answers now.
        memo.make(record("o", "a", "{1}", 1), Some(9), maker(&calls))?;
        assert_eq!(memo.unchanged(&key, 9).as_deref(), Some("o/a@1#0:{1}"));
        // A slower read that began at an earlier mark does not take the
        // entry back to it.
        memo.make_all(vec![record("o", "a", "{1}", 1)], Some(7), maker(&calls))?;
        assert_eq!(memo.unchanged(&key, 9).as_deref(), Some("o/a@1#0:{1}"));
        // A read without a mark (a backend that cannot tell) keeps the
        // record unstamped.
        memo.make(record("o", "b", "{2}", 1), None, maker(&calls))?;
        let b = RecordKey::new("o", Kind::Deployment, "b");
        assert_eq!(memo.unchanged(&b, 0), None);
        // A changed record, made afresh, carries the mark of its read.
        memo.make(record("o", "a", "{2}", 2), Some(11), maker(&calls))?;
        assert_eq!(memo.unchanged(&key, 11).as_deref(), Some("o/a@2#0:{2}"));
        let mut expired = record("o", "c", "{3}", 1);
        expired.expires_at = Some(now_epoch() - 1);
        memo.make(expired, Some(11), maker(&calls))?;
        assert_eq!(
            memo.unchanged(&RecordKey::new("o", Kind::Deployment, "c"), 11),
            None,
            "an expired record is read again"
        );
        assert_eq!(calls.get(), 4);
        Ok(())
    }
}
