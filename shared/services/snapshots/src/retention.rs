//! Which of a policy's snapshots retention deletes.
//!
//! The rules are Elasticsearch SLM's (`SnapshotRetentionConfiguration`, as
//! fixed in elastic/elasticsearch#68352), so a policy means the same on Floe
//! as on a cluster running SLM itself:
//!
//! - Only the policy's own snapshots are looked at; manual snapshots never
//!   count and are never deleted (the caller passes one policy's records).
//! - `IN_PROGRESS` snapshots are never deleted and count for nothing.
//! - `min_count` and `max_count` count **successful** snapshots only.
//!   `FAILED` and `PARTIAL` snapshots neither fill the minimum nor the
//!   maximum: with `max_count` alone they are deleted only when they are
//!   older than the successful snapshots being dropped; without
//!   `expire_after` a failed or partial snapshot is deleted as soon as a
//!   newer successful one exists; with `expire_after` they expire by age like
//!   any other, even when the minimum is not reached.
//! - `expire_after`: a snapshot older than this (by start time) is deleted,
//!   but with `min_count` only among the successful snapshots beyond the
//!   newest `min_count` ones.
//! - `max_count`: the oldest successful snapshots beyond the newest
//!   `max_count` are deleted, together with any unsuccessful ones older than
//!   the last of them.
//!
//! Floe adds one rule SLM leaves to `min_count`: the newest successful
//! snapshot is never deleted, so a policy whose snapshots all expire still
//! leaves something to restore (`__latest_success__` clones need it).

use chrono::{DateTime, Utc};
use floe_domain::policy::Retention;
use floe_domain::snapshot::{SnapshotRecord, SnapshotState};
use floe_domain::timevalue::parse_time_value;
use std::time::Duration;

/// A policy's retention, parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionRules {
    pub expire_after: Option<Duration>,
    pub min_count: Option<u32>,
    pub max_count: Option<u32>,
}

impl RetentionRules {
    /// The policy's `expire_after` was validated when it was written; a
    /// value that no longer parses is refused rather than read as "never".
    pub fn from_policy(r: &Retention) -> Result<RetentionRules, String> {
        let expire_after = r
            .expire_after
            .as_deref()
            .map(parse_time_value)
            .transpose()
            .map_err(|e| format!("retention.expire_after {e}"))?;
        Ok(RetentionRules {
            expire_after,
            min_count: r.min_count,
            max_count: r.max_count,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.expire_after.is_none() && self.min_count.is_none() && self.max_count.is_none()
    }
}

fn unsuccessful(state: SnapshotState) -> bool {
    matches!(state, SnapshotState::Failed | SnapshotState::Partial)
}

/// Names of the snapshots retention deletes, oldest first.
pub fn expired(
    snapshots: &[SnapshotRecord],
    rules: &RetentionRules,
    now: DateTime<Utc>,
) -> Vec<String> {
    if rules.is_empty() {
        return Vec::new();
    }
    let mut finished: Vec<&SnapshotRecord> =
        snapshots.iter().filter(|s| s.state.is_finished()).collect();
    // Ties on the start time (clusters report milliseconds, some only
    // seconds) fall back to the order Floe started them, then the name, so
    // the answer never depends on the order the records came in.
    finished.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then_with(|| a.sort_millis.cmp(&b.sort_millis))
            .then_with(|| a.name.cmp(&b.name))
    });
    let successes: Vec<&SnapshotRecord> = finished
        .iter()
        .copied()
        .filter(|s| s.state == SnapshotState::Success)
        .collect();
    let newest_success = successes.last().copied();

    finished
        .iter()
        .filter(|s| newest_success.is_none_or(|n| n.name != s.name))
        .filter(|s| eligible(s, &finished, &successes, rules, now))
        .map(|s| s.name.clone())
        .collect()
}

/// SLM's predicate for one snapshot; `finished` and `successes` are sorted
/// oldest first.
fn eligible(
    s: &SnapshotRecord,
    finished: &[&SnapshotRecord],
    successes: &[&SnapshotRecord],
    rules: &RetentionRules,
    now: DateTime<Utc>,
) -> bool {
    let success_count = successes.len();
    let newest_success_start = successes.last().map(|n| n.start);

    if rules.expire_after.is_none()
        && unsuccessful(s.state)
        && newest_success_start.is_some_and(|n| n > s.start)
    {
        return true;
    }

    if let Some(max) = rules.max_count.map(|m| m as usize)
        && success_count > max
    {
        let excess = success_count - max;
        let mut seen = 0;
        for candidate in finished {
            if candidate.state == SnapshotState::Success {
                seen += 1;
            }
            if seen > excess {
                break;
            }
            if candidate.name == s.name {
                return true;
            }
        }
    }

    if let Some(min) = rules.min_count.map(|m| m as usize)
        && success_count <= min
        && !unsuccessful(s.state)
    {
        return false;
    }

    let Some(expire_after) = rules.expire_after else {
        return false;
    };
    if let Some(min) = rules.min_count.map(|m| m as usize) {
        let may_expire = match s.state {
            SnapshotState::Success => successes
                .iter()
                .take(success_count.saturating_sub(min))
                .any(|c| c.name == s.name),
            state => unsuccessful(state),
        };
        if !may_expire {
            return false;
        }
    }
    let age = now.signed_duration_since(s.start);
    age.to_std().is_ok_and(|age| age > expire_after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_domain::snapshot::SnapshotShards;
    use std::collections::BTreeSet;

    const DAY: i64 = 24 * 3600;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
    }

    /// `spec` is one letter per snapshot, oldest first, one day apart, the
    /// newest started a day ago: S success, F failed, P partial, R running.
    /// Names are the letter with its age in days: "S9", "F3", "R1".
    fn history(spec: &str) -> Vec<SnapshotRecord> {
        let n = spec.len() as i64;
        spec.chars()
            .enumerate()
            .map(|(i, c)| {
                let age_days = n - i as i64;
                let state = match c {
                    'S' => SnapshotState::Success,
                    'F' => SnapshotState::Failed,
                    'P' => SnapshotState::Partial,
                    'I' => SnapshotState::Incompatible,
                    _ => SnapshotState::InProgress,
                };
                let start = now() - chrono::TimeDelta::seconds(age_days * DAY);
                SnapshotRecord {
                    org: "acme".into(),
                    deployment_id: "d".into(),
                    repository: "r".into(),
                    name: format!("{c}{age_days}"),
                    uuid: String::new(),
                    state,
                    start,
                    end: None,
                    duration_in_millis: None,
                    indices: Vec::new(),
                    shards: SnapshotShards::default(),
                    size_in_bytes: None,
                    policy_id: Some("p".into()),
                    failure: None,
                    sort_millis: start.timestamp_millis(),
                    updated: start,
                    deleting: None,
                    place: None,
                    missing: None,
                    document_counts: None,
                }
            })
            .collect()
    }

    fn rules(expire_days: Option<u64>, min: Option<u32>, max: Option<u32>) -> RetentionRules {
        RetentionRules {
            expire_after: expire_days.map(|d| Duration::from_secs(d * DAY as u64)),
            min_count: min,
            max_count: max,
        }
    }

    #[test]
    fn the_table() {
        // (what the case shows, history, expire_after days, min, max, kept)
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, &str, Option<u64>, Option<u32>, Option<u32>, &[&str])] = &[
            (
                "no retention keeps everything",
                "SSSFS",
                None,
                None,
                None,
                &["S5", "S4", "S3", "F2", "S1"],
            ),
            (
                "expire_after alone drops the old ones",
                "SSSSS",
                Some(3),
                None,
                None,
                &["S3", "S2", "S1"],
            ),
            (
                "expire_after never drops the newest success; exactly that old stays",
                "SSSFF",
                Some(1),
                None,
                None,
                &["S3", "F1"],
            ),
            (
                "min_count holds back expiry",
                "SSSSS",
                Some(1),
                Some(3),
                None,
                &["S3", "S2", "S1"],
            ),
            (
                "min_count counts successes only, failures still expire",
                "SFSFSF",
                Some(2),
                Some(3),
                None,
                &["S6", "S4", "S2", "F1"],
            ),
            (
                "max_count keeps the newest successes",
                "SSSSSS",
                None,
                None,
                Some(2),
                &["S2", "S1"],
            ),
            (
                "max_count drops failures older than the cut",
                "SFSFSS",
                None,
                None,
                Some(2),
                &["S2", "S1"],
            ),
            (
                "without expire_after a failure goes once a newer success exists",
                "SFSF",
                None,
                Some(5),
                None,
                &["S4", "S2", "F1"],
            ),
            (
                "max_count, and failures older than a newer success go too",
                "SSFSFS",
                None,
                None,
                Some(2),
                &["S3", "S1"],
            ),
            (
                "max_count and expire_after both apply",
                "SSSSSS",
                Some(3),
                None,
                Some(4),
                &["S3", "S2", "S1"],
            ),
            (
                "all in one: expiry limited by min_count, capped by max_count",
                "SSSSSSSS",
                Some(2),
                Some(5),
                Some(6),
                &["S5", "S4", "S3", "S2", "S1"],
            ),
            (
                "in progress is never deleted nor counted",
                "RSSSR",
                None,
                None,
                Some(1),
                &["R5", "S2", "R1"],
            ),
            (
                "old in-progress survives expiry",
                "RSS",
                Some(1),
                None,
                None,
                &["R3", "S1"],
            ),
            (
                "only failures: nothing to compare, max_count counts none",
                "FFFF",
                None,
                Some(1),
                Some(1),
                &["F4", "F3", "F2", "F1"],
            ),
            (
                "only failures expire by age",
                "FFFF",
                Some(2),
                None,
                None,
                &["F2", "F1"],
            ),
            (
                "partial counts as unsuccessful",
                "SPSP",
                None,
                None,
                None,
                &["S4", "P3", "S2", "P1"],
            ),
            (
                "partial older than a success goes without expire_after",
                "SPSP",
                None,
                Some(1),
                None,
                &["S4", "S2", "P1"],
            ),
            (
                "max_count one keeps only the newest success",
                "SSS",
                None,
                Some(1),
                Some(1),
                &["S1"],
            ),
        ];
        for (what, spec, expire, min, max, kept) in cases {
            let all = history(spec);
            let gone: BTreeSet<String> = expired(&all, &rules(*expire, *min, *max), now())
                .into_iter()
                .collect();
            let remaining: Vec<&str> = all
                .iter()
                .map(|s| s.name.as_str())
                .filter(|n| !gone.contains(*n))
                .collect();
            assert_eq!(&remaining, kept, "{what} ({spec})");
        }
    }

    #[test]
    fn input_order_does_not_matter() {
        let mut all = history("SFSSPS");
        let r = rules(Some(2), Some(1), Some(3));
        let forward = expired(&all, &r, now());
        all.reverse();
        assert_eq!(expired(&all, &r, now()), forward);
        assert!(!forward.is_empty());
    }

    #[test]
    fn rules_parse_from_the_policy() {
        let r = Retention {
            expire_after: Some("30d".into()),
            min_count: Some(2),
            max_count: None,
        };
        assert_eq!(
            RetentionRules::from_policy(&r),
            Ok(rules(Some(30), Some(2), None))
        );
        let bad = Retention {
            expire_after: Some("soon".into()),
            ..r
        };
        assert!(RetentionRules::from_policy(&bad).is_err());
    }
}
