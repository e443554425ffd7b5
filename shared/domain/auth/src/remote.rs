//! The identity provider's keys, kept fresh.
//!
//! A provider rotates its signing keys: it publishes a new key, starts
//! signing with it, and later drops the old one. A verifier that fetched the
//! set once would refuse every token signed with the new key until its
//! process restarts. So the set is cached with a lifetime, fetched again
//! when it expires or when a token names a `kid` the cache does not hold,
//! and kept when a fetch fails: a provider that is down must not take down
//! the tokens its known keys still verify.
//!
//! The hot path (a fresh set that holds the token's key) is a read lock
//! held for an `Arc` clone; nothing is awaited. Fetches are serialised by
//! one async mutex, so concurrent misses share one download, and rate
//! limited, so tokens with made-up `kid`s cannot turn the verifier into a
//! load generator against the provider.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, MutexGuard};

use crate::error::ConfigError;
use crate::jwks::Fetcher;
use crate::verify::{PublicKey, usable_keys};

/// A source of the current time, so tests can move it instead of sleeping.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

/// The monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// How long fetched keys are trusted, and how often the provider may be
/// asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JwksCacheSettings {
    /// The set's lifetime when the response carries no `Cache-Control:
    /// max-age`.
    pub default_ttl: Duration,
    /// At least this long between two fetches, whatever asks for them (an
    /// expired set or an unknown `kid`).
    pub refetch_interval: Duration,
}

impl JwksCacheSettings {
    pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
    pub const DEFAULT_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
    /// A provider's `max-age` is raised to this: `max-age=0` (or
    /// `no-store`) would otherwise mean a fetch per request.
    pub const MIN_TTL: Duration = Duration::from_secs(60);
    /// …and lowered to this: a removed key must stop verifying within a day
    /// even if the provider asked for a year.
    pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
    /// A longer interval would leave a rotated-in key refused for too long.
    pub const MAX_REFETCH_INTERVAL: Duration = Duration::from_secs(60 * 60);
}

impl Default for JwksCacheSettings {
    fn default() -> Self {
        JwksCacheSettings {
            default_ttl: Self::DEFAULT_TTL,
            refetch_interval: Self::DEFAULT_REFETCH_INTERVAL,
        }
    }
}

/// The keys of one fetch. Replaced whole, never edited, so a reader holds a
/// consistent set for as long as it needs it.
pub(crate) struct KeySet {
    pub(crate) keys: Vec<PublicKey>,
    /// Bumped by each successful fetch: a request that waited for the fetch
    /// lock tells from it whether someone else fetched meanwhile.
    generation: u64,
    expires_at: Instant,
}

#[cfg(test)]
impl KeySet {
    /// A set with no keys, for tests that only tell sets apart.
    pub(crate) fn empty_for_tests() -> KeySet {
        KeySet {
            keys: Vec::new(),
            generation: 0,
            expires_at: Instant::now(),
        }
    }
}

/// What the fetch lock guards: when the provider was last asked, and how
/// that went.
struct FetchLog {
    last_attempt: Option<Instant>,
    last_failed: bool,
}

/// Why a token's key could not be found after looking again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// The provider's current set does not hold it either (or it was asked
    /// too recently and did not hold it then).
    NotPublished,
    /// The provider could not be asked: it is down or answered garbage.
    ProviderUnavailable,
}

/// The provider's JWKS, cached. Build it with [`JwksCache::connect`] and
/// hand it to a `Verifier` as `KeySource::Remote`. Clones share one cache.
#[derive(Clone)]
pub struct JwksCache {
    inner: Arc<Inner>,
}

struct Inner {
    fetcher: Fetcher,
    settings: JwksCacheSettings,
    clock: Arc<dyn Clock>,
    current: RwLock<Arc<KeySet>>,
    fetch: Mutex<FetchLog>,
}

impl fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        let set = inner.snapshot();
        let kids: Vec<&str> = set
            .keys
            .iter()
            .map(|k| k.kid.as_deref().unwrap_or("<no kid>"))
            .collect();
        f.debug_struct("JwksCache")
            .field("url", &inner.fetcher.url())
            .field("settings", &inner.settings)
            .field("kids", &kids)
            .finish()
    }
}

impl JwksCache {
    /// Fetches the set once, now: a URL that does not serve a usable set
    /// is a configuration mistake and should stop start-up, not surface as
    /// 401s later.
    pub async fn connect(url: &str, settings: JwksCacheSettings) -> Result<JwksCache, ConfigError> {
        JwksCache::connect_with_clock(url, settings, Arc::new(SystemClock)).await
    }

    /// [`JwksCache::connect`] with a clock of the caller's (tests).
    pub async fn connect_with_clock(
        url: &str,
        settings: JwksCacheSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<JwksCache, ConfigError> {
        let fetcher = Fetcher::new(url)?;
        let attempt = clock.now();
        let (keys, ttl) = fetch_usable(&fetcher, &settings).await?;
        let first = KeySet {
            keys,
            generation: 0,
            expires_at: attempt + ttl,
        };
        Ok(JwksCache {
            inner: Arc::new(Inner {
                fetcher,
                settings,
                clock,
                current: RwLock::new(Arc::new(first)),
                fetch: Mutex::new(FetchLog {
                    last_attempt: Some(attempt),
                    last_failed: false,
                }),
            }),
        })
    }

    pub(crate) async fn keys(&self) -> Arc<KeySet> {
        self.inner.keys().await
    }

    pub(crate) async fn keys_after_miss(&self, seen: &KeySet) -> Result<Arc<KeySet>, Miss> {
        self.inner.keys_after_miss(seen).await
    }
}

impl Inner {
    /// The set as it is now, with no fetch.
    fn snapshot(&self) -> Arc<KeySet> {
        // Writers only swap the `Arc`, so a poisoned lock still holds a
        // whole set.
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The keys to verify with. A fresh set is returned at once. An expired
    /// one is fetched again by the first request that notices (if the rate
    /// limit allows); the requests that arrive meanwhile go on with the
    /// expired set rather than queue behind the download.
    async fn keys(&self) -> Arc<KeySet> {
        let set = self.snapshot();
        if self.clock.now() < set.expires_at {
            return set;
        }
        match self.fetch.try_lock() {
            Ok(log) => {
                self.refresh(log).await;
                self.snapshot()
            }
            Err(_) => set,
        }
    }

    /// Looks again for a key that `seen` did not hold: waits for a fetch
    /// under way, or starts one if the rate limit allows.
    async fn keys_after_miss(&self, seen: &KeySet) -> Result<Arc<KeySet>, Miss> {
        let log = self.fetch.lock().await;
        let current = self.snapshot();
        if current.generation != seen.generation {
            // Fetched while this request waited for the lock.
            return Ok(current);
        }
        let failed = match self.refresh(log).await {
            Refresh::Fetched => return Ok(self.snapshot()),
            Refresh::Failed => true,
            Refresh::TooSoon { last_failed } => last_failed,
        };
        Err(if failed {
            Miss::ProviderUnavailable
        } else {
            Miss::NotPublished
        })
    }

    /// Fetches the set and swaps it in, unless the last attempt was less
    /// than the refetch interval ago. A failure keeps the set there is.
    async fn refresh(&self, mut log: MutexGuard<'_, FetchLog>) -> Refresh {
        let now = self.clock.now();
        if let Some(last) = log.last_attempt
            && now.saturating_duration_since(last) < self.settings.refetch_interval
        {
            return Refresh::TooSoon {
                last_failed: log.last_failed,
            };
        }
        log.last_attempt = Some(now);
        match fetch_usable(&self.fetcher, &self.settings).await {
            Ok((keys, ttl)) => {
                let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
                let next = KeySet {
                    keys,
                    generation: current.generation.wrapping_add(1),
                    expires_at: now + ttl,
                };
                tracing::info!(
                    url = self.fetcher.url(),
                    keys = next.keys.len(),
                    ttl_secs = ttl.as_secs(),
                    "fetched the JWKS"
                );
                *current = Arc::new(next);
                log.last_failed = false;
                Refresh::Fetched
            }
            Err(error) => {
                let kept = self.snapshot().keys.len();
                tracing::warn!(
                    %error,
                    kept,
                    retry_after_secs = self.settings.refetch_interval.as_secs(),
                    "could not refresh the JWKS; verifying with the keys fetched before"
                );
                log.last_failed = true;
                Refresh::Failed
            }
        }
    }
}

enum Refresh {
    Fetched,
    Failed,
    TooSoon { last_failed: bool },
}

/// One fetch, turned into verification keys and their lifetime. A set with
/// no usable key counts as a failed fetch: a provider answering `{"keys":
/// []}` is broken, and replacing the known keys with nothing would refuse
/// everyone.
async fn fetch_usable(
    fetcher: &Fetcher,
    settings: &JwksCacheSettings,
) -> Result<(Vec<PublicKey>, Duration), ConfigError> {
    let fetched = fetcher.fetch().await?;
    let keys = usable_keys(&fetched.set);
    if keys.is_empty() {
        return Err(ConfigError::NoUsableKeys);
    }
    // Bounded either way, which also keeps `now + ttl` far from overflow.
    let ttl = fetched
        .max_age
        .map_or(settings.default_ttl, |age| {
            age.max(JwksCacheSettings::MIN_TTL)
        })
        .min(JwksCacheSettings::MAX_TTL);
    Ok((keys, ttl))
}
