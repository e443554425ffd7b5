//! Plans: the durable engine that runs every change to a deployment, the
//! work queue that wakes it, and the steps of each kind of plan.

pub mod deployment_steps;
pub mod engine;
pub mod queue;
pub mod repository_access;

pub use deployment_steps::{DeploymentSteps, StepSettings};
pub use engine::{Engine, EngineConfig, Outcome, PlanListener, RunResult, StepContext, Steps};
pub use queue::{LocalQueue, PlanJob, WorkQueue};
