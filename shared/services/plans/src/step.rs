//! How a plan kind declares its steps, in the manner of omicron's sagas:
//! each step is its id with its `run` and its `undo` side by side, and a
//! plan kind's module is the ordered list of them, built from the plan's
//! params (and, for an update or a shutdown, the spec the deployment runs).
//!
//! ```text
//! saga.step("wait-running", action!(wait_running), action!(nothing));
//! saga.group_step("launch", &g.id, action!(launch(group)), action!(terminate_launched(group)));
//! ```
//!
//! The engine sees step ids only; [`crate::DeploymentSteps`] finds a step's
//! declaration by its id in the plan's saga and calls its `run` or `undo`.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::StepContext;
use crate::failure::StepResult;
use std::future::Future;
use std::pin::Pin;

/// What an action returns: it borrows the steps' ports and the context.
pub type StepFuture<'a> = Pin<Box<dyn Future<Output = StepResult> + Send + 'a>>;

/// One half of a step, `run` or `undo`: called with the ports, the step's
/// context and the step's node group (empty for a step of no group).
pub type Action = for<'a> fn(&'a DeploymentSteps, &'a StepContext<'a>, &'a str) -> StepFuture<'a>;

/// An action that calls a method of [`DeploymentSteps`]:
/// `action!(method)` calls `steps.method(ctx)`, and
/// `action!(method(group))` calls `steps.method(ctx, group)` with the node
/// group of a `template:{group}` or `launch:{group}` step.
macro_rules! action {
    ($method:ident) => {{
        fn action<'a>(
            steps: &'a $crate::deployment_steps::DeploymentSteps,
            ctx: &'a $crate::engine::StepContext<'a>,
            _group: &'a str,
        ) -> $crate::step::StepFuture<'a> {
            Box::pin(steps.$method(ctx))
        }
        action as $crate::step::Action
    }};
    ($method:ident(group)) => {{
        fn action<'a>(
            steps: &'a $crate::deployment_steps::DeploymentSteps,
            ctx: &'a $crate::engine::StepContext<'a>,
            group: &'a str,
        ) -> $crate::step::StepFuture<'a> {
            Box::pin(steps.$method(ctx, group))
        }
        action as $crate::step::Action
    }};
}
pub(crate) use action;

/// One step of a plan: its id (kept in the plan record: never rename one),
/// what it does, and what undoes it.
pub struct StepDef {
    pub id: String,
    /// The node group of a per-group step; empty otherwise.
    pub group: String,
    pub run: Action,
    pub undo: Action,
}

impl std::fmt::Debug for StepDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepDef").field("id", &self.id).finish()
    }
}

/// The steps of one plan, in the order they run.
#[derive(Debug, Default)]
pub struct Saga {
    steps: Vec<StepDef>,
}

impl Saga {
    /// Adds step `id`.
    pub fn step(&mut self, id: &str, run: Action, undo: Action) {
        self.steps.push(StepDef {
            id: id.to_string(),
            group: String::new(),
            run,
            undo,
        });
    }

    /// Adds step `{kind}:{group}`, whose actions get the group.
    pub fn group_step(&mut self, kind: &str, group: &str, run: Action, undo: Action) {
        self.steps.push(StepDef {
            id: format!("{kind}:{group}"),
            group: group.to_string(),
            run,
            undo,
        });
    }

    /// The step ids, as the plan record keeps them.
    pub fn ids(&self) -> Vec<String> {
        self.steps.iter().map(|s| s.id.clone()).collect()
    }

    /// The declaration of step `id`.
    pub fn find(&self, id: &str) -> Option<&StepDef> {
        self.steps.iter().find(|s| s.id == id)
    }
}
