//! Step wrappers shared by the plan tests, in the style of omicron's saga
//! tests: run every step twice, or fail right after a chosen step.

// The world of the tests on simulated compute; each test binary compiles
// this module, and not every one uses it.
#[allow(dead_code)]
pub mod world;

use async_trait::async_trait;
use floe_domain::deployment::Deployment;
use floe_domain::plan::{Plan, StepError};
use floe_plans::engine::{Outcome, StepContext, Steps, fail};

/// Runs every step (and every undo) twice in a row, which is what a crash
/// right after a step, before its result was recorded, amounts to.
pub struct Twice<S>(pub S);

#[async_trait]
impl<S: Steps> Steps for Twice<S> {
    fn layout(&self, plan: &Plan, d: &Deployment) -> Result<Vec<String>, StepError> {
        self.0.layout(plan, d)
    }
    fn settle(&self, plan: &Plan, next: &mut Deployment) {
        self.0.settle(plan, next);
    }
    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        match self.0.run(step_id, ctx).await {
            Outcome::Done(_) => self.0.run(step_id, ctx).await,
            other => other,
        }
    }
    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        match self.0.undo(step_id, ctx).await {
            Outcome::Done(_) => self.0.undo(step_id, ctx).await,
            other => other,
        }
    }
}

/// Fails the plan right after step `at` did its work, so that everything the
/// steps before it (and it) created has to be unwound.
pub struct FailAfter<S> {
    pub inner: S,
    pub at: String,
}

#[async_trait]
impl<S: Steps> Steps for FailAfter<S> {
    fn layout(&self, plan: &Plan, d: &Deployment) -> Result<Vec<String>, StepError> {
        self.inner.layout(plan, d)
    }
    fn settle(&self, plan: &Plan, next: &mut Deployment) {
        self.inner.settle(plan, next);
    }
    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let outcome = self.inner.run(step_id, ctx).await;
        if step_id == self.at && matches!(outcome, Outcome::Done(_)) {
            return fail("injected", format!("failure injected after {step_id}"));
        }
        outcome
    }
    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        self.inner.undo(step_id, ctx).await
    }
}

/// Runs `job` on an engine over `steps`, delivering its re-queued wake-ups,
/// until the plan finishes (bounded in rounds and in wait per round).
pub async fn run_to_end(
    store: &floe_store::Store,
    steps: std::sync::Arc<dyn Steps>,
    job: &floe_plans::PlanJob,
) -> Result<floe_domain::plan::PlanStatus, Box<dyn std::error::Error>> {
    use floe_plans::engine::{EngineConfig, RunResult};
    use std::time::Duration;
    let (queue, mut rx) = floe_plans::LocalQueue::new();
    let config = EngineConfig {
        backoff: Duration::from_millis(1),
        ..EngineConfig::default()
    };
    let engine = floe_plans::Engine::new(
        store.clone(),
        std::sync::Arc::new(queue),
        steps,
        "test",
        config,
    );
    let mut result = engine.run(job).await?;
    for _ in 0..2000 {
        if let RunResult::Finished(status) = result {
            return Ok(status);
        }
        let next = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await?
            .ok_or("queue closed")?;
        result = engine.run(&next).await?;
    }
    Err("plan did not finish".into())
}

/// A 30-minute snapshot policy of `org` on `repository`.
// Each test binary compiles this module; not every one makes a policy.
#[allow(dead_code)]
pub fn policy(org: &str, repository: &str) -> floe_domain::policy::Policy {
    use floe_domain::policy::{Policy, PolicySpec, Schedule, ScheduleExpression};
    let now = chrono::Utc::now();
    Policy {
        id: floe_domain::names::new_resource_id(),
        org: org.into(),
        spec: PolicySpec {
            name: "every-30m".into(),
            schedule: Schedule {
                interval: Some("30m".into()),
                cron: None,
                timezone: None,
            },
            snapshot_name: "<scheduled-{now/d}>".into(),
            repository: repository.into(),
            indices: vec![],
            include_global_state: true,
            retention: None,
            enabled: true,
        },
        schedule_expression: ScheduleExpression {
            expression: "rate(30 minutes)".into(),
            timezone: "UTC".into(),
        },
        created: now,
        updated: now,
    }
}
