//! The ports: the traits that adapters implement and that the engine, the
//! use cases and the functions call. Nothing here links an SDK or a
//! simulator, so an adapter depends on this crate and never on what uses it.

pub mod events;
pub mod listener;
pub mod queue;
pub mod resolver;
pub mod schedule_sync;
pub mod scheduler;

pub use events::{EVENT_SOURCE, EventError, Events, LoggedEvents, PlatformEvent, RecordedEvents};
pub use listener::PlanListener;
pub use queue::{LocalQueue, PlanJob, QueueError, WorkQueue};
pub use resolver::{FixedResolver, OfflineResolver, ResolveError, Resolver, SystemResolver};
pub use schedule_sync::{
    HealthShards, InstanceStateChange, InstanceStateDetail, ReconcileJob, ScheduleSync, WorkMessage,
};
pub use scheduler::{
    DrillJob, DrillStarter, ExistingSchedule, NoScheduler, ScheduleSpec, ScheduledDrill,
    ScheduledJob, Scheduler, SchedulerError, SnapshotJob,
};
