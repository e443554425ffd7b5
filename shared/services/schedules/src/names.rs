//! Schedule names. EventBridge Scheduler allows 1–64 characters of
//! `[0-9a-zA-Z-_.]`, but an organization id alone may be 64 characters and
//! deployment and policy ids are 32 each, so the ids cannot simply be joined.
//! A name is instead
//!
//! ```text
//! floe-{D}-{P}     D = first 24 hex digits of SHA-256("floe-schedule-v1", org, deployment_id)
//!                  P = first 24 hex digits of SHA-256("floe-schedule-v1", policy_id)
//! ```
//!
//! (each string hashed with its length in front, so no two tuples share an
//! input): 54 characters, deterministic, and `floe-{D}-` is the prefix that
//! lists one deployment's schedules and nothing else, because D has a fixed
//! length. 96 bits per part make a collision between two deployments of a
//! schedule group negligible. The ids themselves travel in the schedule's
//! input (and, on AWS, its description), so nothing needs reversing the hash.
//!
//! Changing this scheme orphans every existing schedule (the reconciler no
//! longer lists them): bump the version tag only together with a migration
//! that deletes the old names.

use sha2::{Digest, Sha256};

const TAG: &str = "floe-schedule-v1";
const HASH_DIGITS: usize = 24;

/// The longest name EventBridge Scheduler accepts.
pub const MAX_NAME_LEN: usize = 64;

fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in std::iter::once(&TAG).chain(parts) {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let mut hex = hex::encode(hasher.finalize());
    hex.truncate(HASH_DIGITS);
    hex
}

/// The prefix shared by every schedule of one deployment, and no other.
pub fn deployment_prefix(org: &str, deployment_id: &str) -> String {
    format!("floe-{}-", digest(&[org, deployment_id]))
}

/// The name of the schedule that runs `policy_id` for the deployment.
pub fn schedule_name(org: &str, deployment_id: &str, policy_id: &str) -> String {
    format!(
        "{}{}",
        deployment_prefix(org, deployment_id),
        digest(&[policy_id])
    )
}

/// The name of the deployment's drill schedule: under the deployment's
/// prefix (its listing and deletion are the policies'), with a second part
/// hashed from two strings, which no policy id's (one string) can equal.
pub fn drill_schedule_name(org: &str, deployment_id: &str) -> String {
    format!(
        "{}{}",
        deployment_prefix(org, deployment_id),
        digest(&["drill", "schedule"])
    )
}

/// Whether EventBridge Scheduler accepts `name`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORG: &str = "acme";
    const DEP: &str = "0190f5a3b2c47d8e9f00112233445566";
    const POL: &str = "0190f5a3b2c47d8e9f00aabbccddeeff";

    #[test]
    fn names_are_valid_even_for_the_longest_ids() {
        let long_org = "o".repeat(64);
        for (org, dep, pol) in [
            (ORG, DEP, POL),
            (long_org.as_str(), DEP, POL),
            ("a_b-c", "x", "y"),
            ("", "", ""),
        ] {
            let name = schedule_name(org, dep, pol);
            assert!(is_valid_name(&name), "{name}");
            assert_eq!(name.len(), 54);
            assert!(name.starts_with(&deployment_prefix(org, dep)));
        }
    }

    #[test]
    fn names_are_deterministic_and_distinct() {
        assert_eq!(schedule_name(ORG, DEP, POL), schedule_name(ORG, DEP, POL));
        let all = [
            schedule_name(ORG, DEP, POL),
            schedule_name("other", DEP, POL),
            schedule_name(ORG, POL, DEP),
            schedule_name(ORG, DEP, DEP),
            // The length prefix keeps "ab"+"c" apart from "a"+"bc".
            schedule_name("ab", "c", POL),
            schedule_name("a", "bc", POL),
        ];
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
    }

    #[test]
    fn a_drill_schedule_is_named_under_its_deployment_apart_from_every_policy() {
        let name = drill_schedule_name(ORG, DEP);
        assert!(is_valid_name(&name), "{name}");
        assert_eq!(name.len(), 54);
        assert!(name.starts_with(&deployment_prefix(ORG, DEP)));
        for policy in [POL, "drill", "schedule", "drillschedule", ""] {
            assert_ne!(name, schedule_name(ORG, DEP, policy));
        }
        assert_ne!(name, drill_schedule_name(ORG, POL));
    }

    #[test]
    fn a_deployment_prefix_matches_only_its_own_schedules() {
        let mine = deployment_prefix(ORG, DEP);
        assert!(schedule_name(ORG, DEP, "p1").starts_with(&mine));
        assert!(!schedule_name("other", DEP, "p1").starts_with(&mine));
        assert!(!schedule_name(ORG, POL, "p1").starts_with(&mine));
        assert!(!mine.starts_with(&deployment_prefix(ORG, POL)));
    }

    #[test]
    fn validity_follows_eventbridge_rules() {
        assert!(is_valid_name("a"));
        assert!(is_valid_name("A-z_0.9"));
        assert!(is_valid_name(&"x".repeat(64)));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name(&"x".repeat(65)));
        assert!(!is_valid_name("a/b"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name("é"));
    }
}
