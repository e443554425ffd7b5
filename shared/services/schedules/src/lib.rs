//! Snapshot and drill schedules: each snapshot policy attached to a
//! deployment becomes one schedule that hands a [`SnapshotJob`] to the
//! snapshotter, and a deployment's drill schedule one that hands a
//! [`DrillJob`] to the worker.
//!
//! - [`port`]: the [`Scheduler`] port and the job payload, the contract
//!   between the scheduler adapters and the snapshotter (defined in
//!   `floe-ports`, re-exported).
//! - [`names`]: deterministic, EventBridge-safe schedule names.
//! - [`reconcile`]: computes the wanted schedules from the store and makes a
//!   scheduler match them.
//! - [`expression`]: EventBridge `rate(...)`/`cron(...)` evaluation in a time
//!   zone, daylight saving time included.
//! - [`local`]: the in-process scheduler of local mode.
//!
//! No AWS SDK here: the EventBridge adapter is `floe-scheduler-aws`.

pub mod expression;
pub mod local;
pub mod names;
pub mod port;
pub mod reconcile;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use local::{Clock, Fire, Firing, LocalScheduler, ManualClock, SystemClock};
pub use port::{
    DrillJob, ExistingSchedule, NoScheduler, ScheduleSpec, ScheduledJob, Scheduler, SchedulerError,
    SnapshotJob,
};
pub use reconcile::{
    ReconcileError, ReconcileNow, ReconcileSummary, ScheduleFailure, reconcile_deployment,
    reconcile_policy,
};
