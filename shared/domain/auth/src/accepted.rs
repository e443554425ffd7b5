//! Tokens a verifier accepted lately. A client sends the same bearer token
//! with every request until it expires; checking its signature and decoding
//! its claims each time was a tenth of a warm read's work (issue 16). What a
//! verification concludes depends only on the token's bytes, the keys and
//! the clock, so the conclusion is kept, keyed by the whole token, for as
//! long as each of those still holds:
//! - the clock: an entry answers only inside the token's own `nbf`..`exp`
//!   window (with the verifier's leeway), so an expired token is refused
//!   exactly when a full check would refuse it;
//! - the keys: with keys fetched from a JWKS URL, an entry answers only
//!   while the key set it was checked against is still the current one, so
//!   a key the provider removed stops verifying when it would have anyway.
//!
//! Refusals are never kept: a bad token costs its full check every time,
//! and nothing a client sends can fill the cache but tokens that verify.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::remote::KeySet;
use crate::role::Principal;

/// Entries kept at most: far more than the callers one API instance sees in
/// a token's lifetime. When full, the cache starts again empty: simple, and
/// a client that rotates through more valid tokens than this only pays for
/// full checks.
const CAPACITY: usize = 1024;

/// Tokens longer than this are checked in full every time rather than kept:
/// the cache is keyed by the whole token, and a verifier accepts tokens of
/// up to 16 KiB, so without it 1,024 entries could hold 16 MiB (a Lambda
/// function's whole memory target is 32 MB). With it they hold at most
/// 4 MiB of keys; identity providers' tokens are a few hundred bytes to a
/// couple of KiB.
const MAX_KEPT_TOKEN_LEN: usize = 4 * 1024;

/// The unix-time window in which a verified token is valid, as its claims
/// and the verifier's leeway set it: valid while `not_before <= now < until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) not_before: u64,
    pub(crate) until: u64,
}

struct Entry {
    principal: Principal,
    window: Window,
    /// The key set it was verified against, for keys fetched from a URL.
    keys: Option<Arc<KeySet>>,
}

#[derive(Default)]
pub(crate) struct Accepted {
    entries: Mutex<HashMap<Box<str>, Entry>>,
}

impl Accepted {
    /// Who `token` speaks for, if it was accepted before, is valid at `now`
    /// and was checked against `keys` (the current set, for fetched keys).
    pub(crate) fn get(
        &self,
        token: &str,
        now: u64,
        keys: Option<&Arc<KeySet>>,
    ) -> Option<Principal> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.get(token)?;
        let same_keys = match (&entry.keys, keys) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if same_keys && entry.window.not_before <= now && now < entry.window.until {
            return Some(entry.principal.clone());
        }
        // Expired, or checked against keys that are gone: a full check
        // decides again, and its answer replaces this one.
        entries.remove(token);
        None
    }

    /// Keeps the conclusion of a successful full check.
    pub(crate) fn put(
        &self,
        token: &str,
        principal: &Principal,
        window: Window,
        keys: Option<Arc<KeySet>>,
    ) {
        if token.len() > MAX_KEPT_TOKEN_LEN {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CAPACITY && !entries.contains_key(token) {
            entries.clear();
        }
        entries.insert(
            token.into(),
            Entry {
                principal: principal.clone(),
                window,
                keys,
            },
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

/// Seconds since the Unix epoch, as the token's claims count them.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::role::Role;

    fn alice() -> Principal {
        Principal {
            issuer: "floe-local".into(),
            subject: "alice".into(),
            org: "acme".into(),
            roles: vec![Role::DeploymentViewer],
        }
    }

    const WINDOW: Window = Window {
        not_before: 100,
        until: 200,
    };

    #[test]
    fn an_entry_answers_only_inside_its_window() {
        let cache = Accepted::default();
        cache.put("t", &alice(), WINDOW, None);
        assert_eq!(cache.get("t", 99, None), None, "before nbf");
        // The refusal dropped it: a full check decides from now on.
        assert_eq!(cache.len(), 0);
        cache.put("t", &alice(), WINDOW, None);
        assert_eq!(cache.get("t", 100, None), Some(alice()));
        assert_eq!(cache.get("t", 199, None), Some(alice()));
        assert_eq!(cache.get("t", 200, None), None, "at exp plus leeway");
        assert_eq!(cache.get("other", 150, None), None);
    }

    #[test]
    fn an_entry_answers_only_for_the_key_set_it_was_checked_against() {
        let cache = Accepted::default();
        let first = Arc::new(KeySet::empty_for_tests());
        let second = Arc::new(KeySet::empty_for_tests());
        cache.put("t", &alice(), WINDOW, Some(first.clone()));
        assert_eq!(cache.get("t", 150, Some(&first)), Some(alice()));
        assert_eq!(cache.get("t", 150, Some(&second)), None, "the set changed");
        assert_eq!(
            cache.get("t", 150, Some(&first)),
            None,
            "and it was dropped"
        );
        cache.put("t", &alice(), WINDOW, Some(first.clone()));
        assert_eq!(
            cache.get("t", 150, None),
            None,
            "fixed keys never match fetched ones"
        );
    }

    #[test]
    fn a_long_token_is_never_kept() {
        let cache = Accepted::default();
        let long = "t".repeat(MAX_KEPT_TOKEN_LEN + 1);
        cache.put(&long, &alice(), WINDOW, None);
        assert_eq!(cache.get(&long, 150, None), None);
        assert_eq!(cache.len(), 0);
        let longest = "t".repeat(MAX_KEPT_TOKEN_LEN);
        cache.put(&longest, &alice(), WINDOW, None);
        assert_eq!(cache.get(&longest, 150, None), Some(alice()));
    }

    #[test]
    fn the_cache_never_outgrows_its_capacity() {
        let cache = Accepted::default();
        for i in 0..CAPACITY * 3 + 7 {
            cache.put(&format!("token-{i}"), &alice(), WINDOW, None);
            assert!(cache.len() <= CAPACITY);
        }
        // The latest one is always kept.
        let last = format!("token-{}", CAPACITY * 3 + 6);
        assert_eq!(cache.get(&last, 150, None), Some(alice()));
    }
}
