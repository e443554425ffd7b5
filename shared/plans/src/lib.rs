//! Plans: the durable engine that runs every change to a deployment, the
//! work queue that wakes it, and the steps of each kind of plan.

pub mod deployment_steps;
pub mod engine;
pub mod repository_access;

pub use deployment_steps::{DeploymentSteps, StepSettings};
pub use engine::{Engine, EngineConfig, Outcome, RunResult, StepContext, Steps};
// The ports the engine calls, where its callers have always found them.
pub use floe_ports::{LocalQueue, PlanJob, PlanListener, WorkQueue, queue};
