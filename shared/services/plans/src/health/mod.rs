//! The health check: on the sweep's schedule, the worker compares each
//! running deployment's instances with its spec and reads its cluster's
//! health and nodes, writes what it found onto the deployment record (the
//! api shows it from there, reaching nothing but the store), and starts a
//! heal plan when nodes are lost: terminated, stopped (by a person in the
//! console, say) or impaired (failing an EC2 status check).
//!
//! It is a part of its own beside the engine, in three pieces:
//!
//! - [`probe`] reads the facts of one deployment (its instances, their
//!   status checks, what its cluster says) through the steps' ports;
//! - [`judge`] turns those facts into an [`Observation`]: a pure function,
//!   whether the nodes are as the spec wants (`healthy`, what a heal can
//!   fix), what is wrong, which nodes a heal replaces, and the warnings
//!   beside it (what a tenant changed of what Floe owns, a mount clone's
//!   source snapshot gone);
//! - [`check`] goes over a page of the fleet each sweep, records what it
//!   found, and starts heals through the narrow
//!   [`crate::sweep::StartPlan`]. The engine runs it as a
//!   [`crate::sweep::SweepTask`] and knows nothing else of it.

pub mod check;
pub mod events;
pub mod judge;
pub mod probe;

pub use check::{HEALTH_CHECK_USER, HealthCheck, HealthConfig, HealthSummary, assess};
pub use events::{EventError, EventOutcome, InstanceEvents};
pub use judge::{ClusterFacts, Facts, MountSourceFacts, Observation, SourceRecord, judge};
pub use probe::{Probe, Survey};
