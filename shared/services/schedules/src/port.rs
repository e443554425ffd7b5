//! The scheduler port lives in `floe-ports` (below its adapters); it is
//! re-exported here for the callers that name it `floe_schedules::port`.

pub use floe_ports::scheduler::{
    DrillJob, ExistingSchedule, NoScheduler, ScheduleSpec, ScheduledJob, Scheduler, SchedulerError,
    SnapshotJob,
};
