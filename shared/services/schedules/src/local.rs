//! The in-process scheduler of local mode: the scheduler port over a map in
//! memory, and a firing loop that evaluates each schedule's expression in its
//! time zone (see [`crate::expression`]) and hands every due firing to a
//! callback, in time order, exactly once.
//!
//! Time comes from a [`Clock`], so tests drive it with a [`ManualClock`] and
//! [`LocalScheduler::due_firings`] instead of waiting.
//!
//! Firings missed while nothing ticked (a laptop asleep) are all delivered
//! at the next tick, in order; the snapshotter's retention keeps what they
//! produce in check. Schedules live as long as the process: local mode's
//! worker reconciles every deployment at start-up to rebuild them.

use crate::expression::Recurrence;
use crate::port::{ExistingSchedule, ScheduleSpec, ScheduledJob, Scheduler, SchedulerError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Where the scheduler reads the time.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock {
            now: Mutex::new(start),
        }
    }

    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut now = lock(&self.now);
        *now = now
            .checked_add_signed(by)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *lock(&self.now) = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *lock(&self.now)
    }
}

/// A poisoned lock only means another thread panicked while holding it; the
/// map it guards is still consistent (every update is a single assignment).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What runs a firing: in local mode the snapshotter for a snapshot job,
/// the drill use case for a drill job.
#[async_trait]
pub trait Fire: Send + Sync {
    async fn fire(&self, job: ScheduledJob);
}

#[async_trait]
impl<F> Fire for F
where
    F: Fn(ScheduledJob) -> BoxFuture<'static, ()> + Send + Sync,
{
    async fn fire(&self, job: ScheduledJob) {
        self(job).await
    }
}

/// One due firing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firing {
    pub at: DateTime<Utc>,
    pub name: String,
    pub job: ScheduledJob,
}

struct Entry {
    spec: ScheduleSpec,
    recurrence: Recurrence,
    /// Where a rate schedule counts from: when it was created, or when its
    /// expression or time zone last changed.
    anchor: DateTime<Utc>,
    /// The next firing not yet handed out; `None` once a cron's years end.
    next: Option<DateTime<Utc>>,
}

pub struct LocalScheduler {
    clock: Arc<dyn Clock>,
    entries: Mutex<BTreeMap<String, Entry>>,
    changed: Notify,
}

impl std::fmt::Debug for LocalScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalScheduler")
            .field("schedules", &lock(&self.entries).len())
            .finish_non_exhaustive()
    }
}

impl LocalScheduler {
    pub fn new(clock: Arc<dyn Clock>) -> LocalScheduler {
        LocalScheduler {
            clock,
            entries: Mutex::new(BTreeMap::new()),
            changed: Notify::new(),
        }
    }

    /// The schedules held now, by name.
    pub fn schedules(&self) -> Vec<ScheduleSpec> {
        lock(&self.entries)
            .values()
            .map(|e| e.spec.clone())
            .collect()
    }

    /// The next firing of a schedule, if it has one.
    pub fn next_firing(&self, name: &str) -> Option<DateTime<Utc>> {
        lock(&self.entries).get(name).and_then(|e| e.next)
    }

    /// Takes every firing due at or before `until`, across all schedules, in
    /// time order (then by name). Each firing is handed out once: the next
    /// call starts after it.
    pub fn due_firings(&self, until: DateTime<Utc>) -> Vec<Firing> {
        let mut due = Vec::new();
        let mut entries = lock(&self.entries);
        for (name, entry) in entries.iter_mut() {
            while let Some(at) = entry.next.filter(|at| *at <= until) {
                due.push(Firing {
                    at,
                    name: name.clone(),
                    job: entry.spec.input.clone(),
                });
                entry.next = entry.recurrence.next_after(at, entry.anchor);
            }
        }
        due.sort_by(|a, b| (a.at, &a.name).cmp(&(b.at, &b.name)));
        due
    }

    /// Fires everything due by the clock's now, one after the other; returns
    /// how many fired.
    pub async fn tick(&self, fire: &dyn Fire) -> usize {
        let due = self.due_firings(self.clock.now());
        let count = due.len();
        for firing in due {
            tracing::debug!(schedule = %firing.name, at = %firing.at, "schedule fired");
            fire.fire(firing.job).await;
        }
        count
    }

    fn earliest_next(&self) -> Option<DateTime<Utc>> {
        lock(&self.entries).values().filter_map(|e| e.next).min()
    }

    /// Runs the firing loop on a Tokio task until the handle is aborted:
    /// sleeps until the next firing (at most `poll`, so that a clock that
    /// jumps is noticed), or until a schedule changes.
    pub fn spawn(self: Arc<Self>, fire: Arc<dyn Fire>, poll: Duration) -> JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                self.tick(fire.as_ref()).await;
                let wait = self
                    .earliest_next()
                    .and_then(|next| (next - self.clock.now()).to_std().ok())
                    .map_or(poll, |until_next| until_next.min(poll));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = self.changed.notified() => {}
                }
            }
        })
    }
}

#[async_trait]
impl Scheduler for LocalScheduler {
    async fn put(&self, spec: &ScheduleSpec) -> Result<(), SchedulerError> {
        if !crate::names::is_valid_name(&spec.name) {
            return Err(SchedulerError::Rejected {
                name: spec.name.clone(),
                message: "a name is 1-64 characters of 0-9 a-z A-Z - _ .".into(),
            });
        }
        let recurrence = Recurrence::parse(&spec.expression, &spec.timezone).map_err(|e| {
            SchedulerError::Rejected {
                name: spec.name.clone(),
                message: e.to_string(),
            }
        })?;
        let now = self.clock.now();
        {
            let mut entries = lock(&self.entries);
            let same_timing = entries.get(&spec.name).is_some_and(|e| {
                e.spec.expression == spec.expression && e.spec.timezone == spec.timezone
            });
            match entries.get_mut(&spec.name) {
                // A new input keeps the timing, as an UpdateSchedule would.
                Some(entry) if same_timing => entry.spec = spec.clone(),
                _ => {
                    let next = recurrence.first_at_or_after(now, now);
                    entries.insert(
                        spec.name.clone(),
                        Entry {
                            spec: spec.clone(),
                            recurrence,
                            anchor: now,
                            next,
                        },
                    );
                }
            }
        }
        self.changed.notify_one();
        Ok(())
    }

    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        lock(&self.entries).remove(name);
        self.changed.notify_one();
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ExistingSchedule>, SchedulerError> {
        Ok(lock(&self.entries)
            .range(prefix.to_string()..)
            .take_while(|(name, _)| name.starts_with(prefix))
            .map(|(name, e)| ExistingSchedule {
                name: name.clone(),
                spec: Some(e.spec.clone()),
            })
            .collect())
    }
}
