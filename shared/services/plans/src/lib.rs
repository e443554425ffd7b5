//! Plans: the durable engine that runs every change to a deployment, the
//! work queue that wakes it, and the steps of each kind of plan.
//!
//! - [`engine`]: runs a plan's steps in order and their undos in reverse.
//! - [`plans`]: one module per plan kind, declaring its steps with their
//!   `run` and `undo` side by side ([`step`] is how).
//! - [`health`]: the health check the sweep runs beside the plans, which
//!   starts heals through [`sweep::StartPlan`].
//! - [`steps`]: the steps themselves, shared between plan kinds, and
//!   [`outputs`], what they record for later steps.

pub mod deployment_steps;
pub mod drills;
pub mod engine;
pub mod failure;
pub mod health;
pub mod outputs;
pub mod plans;
pub mod repository_access;
pub mod step;
pub mod steps;
pub mod sweep;

pub use deployment_steps::{DeploymentSteps, EndpointCheck, StepPorts, StepSettings};
pub use engine::{Engine, EngineConfig, Outcome, RunResult, StepContext, Steps};
pub use health::{
    EventOutcome, HealthCheck, HealthConfig, HealthSummary, InstanceEvents, Probe, Survey,
};
pub use sweep::{PlanStarter, StartPlan, SweepTask};
// The ports the engine calls, where its callers have always found them.
pub use floe_ports::{LocalQueue, PlanJob, PlanListener, WorkQueue, queue};
