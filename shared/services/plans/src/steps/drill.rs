//! The steps that judge a drill's clone once its data is back:
//!
//! drill-check    reads every index the cluster holds (health, document
//!                count) and runs the drill's query checks, then judges
//!                them against the snapshot's records; its output is the
//!                list of checks, kept in the plan whatever they found
//! drill-verdict  fails the plan, naming the first failed check's index
//!                and reason, when any check failed; the plan then unwinds
//!                and the clone goes

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use floe_domain::drill::{
    CHECK_STEP, DrillCheck, DrillPlan, QueryAnswer, RestoredIndex, failed_reason, judge,
};
use floe_domain::plan::PlanParams;
use floe_elastic::ElasticError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long drill-check waits for restored indices to turn green (their
/// primaries allocated after the last recovery) before it judges them as
/// they are.
const GREEN_WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Serialize, Deserialize)]
struct CheckOutput {
    checks: Vec<DrillCheck>,
}

fn drill_of<'a>(ctx: &'a StepContext<'_>) -> Result<&'a DrillPlan, StepFailure> {
    match &ctx.plan.params {
        PlanParams::Drill(p) => Ok(&p.drill),
        _ => Err(StepFailure::permanent(
            "invalid_plan",
            "only a drill plan checks a drill",
        )),
    }
}

/// A search's answer: a count, or the cluster's refusal (an index that is
/// not there, a query it cannot parse), which fails the check. What may
/// pass (the cluster unreachable a moment) is retried instead.
fn answer(result: Result<u64, ElasticError>) -> Result<Result<u64, String>, StepFailure> {
    match result {
        Ok(n) => Ok(Ok(n)),
        Err(e) if e.is_transient() => Err(StepFailure::transient(format!(
            "running a drill's query: {e}"
        ))),
        Err(e) => Ok(Err(e.to_string())),
    }
}

impl DeploymentSteps {
    pub(crate) async fn drill_check(&self, ctx: &StepContext<'_>) -> StepResult {
        let drill = drill_of(ctx)?;
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let rows = client.indices().await.map_err(|e| {
            StepFailure::elastic_retried(e, "listing the restored indices", "drill_check_failed")
        })?;
        let found: Vec<RestoredIndex> = rows
            .iter()
            .map(|r| RestoredIndex {
                name: r.index.clone(),
                health: r.health.clone().unwrap_or_else(|| "closed".to_string()),
                documents: r.documents().unwrap_or(0),
            })
            .collect();
        // Shards still starting may turn an index green yet; one whose
        // shards failed (its data unreadable) will not, and is judged now.
        let expected = |name: &str| drill.indices.iter().any(|i| i == name);
        let not_green = found
            .iter()
            .filter(|i| expected(&i.name) && i.health != "green")
            .count();
        if not_green > 0 && ctx.elapsed() < GREEN_WAIT {
            let health = client.health(None, None).await.map_err(|e| {
                StepFailure::elastic_retried(
                    e,
                    "reading the cluster's health",
                    "drill_check_failed",
                )
            })?;
            if health.initializing_shards > 0 {
                return Ok(Outcome::Wait {
                    after: self.settings.poll,
                    note: format!(
                        "{not_green} restored indices are not green yet: {} shards initializing",
                        health.initializing_shards
                    ),
                });
            }
        }
        let mut answers = Vec::new();
        for q in &drill.queries {
            answers.push(QueryAnswer {
                index: q.index.clone(),
                min_hits: q.min_hits,
                hits: answer(client.count(&q.index, q.query.as_ref()).await)?,
            });
        }
        let checks = judge(drill, &found, &answers);
        let failed = checks
            .iter()
            .filter(|c| c.outcome == floe_domain::drill::CheckOutcome::Failed)
            .count();
        ctx.log(format!(
            "{} checks on {} indices: {} failed",
            checks.len(),
            drill.indices.len(),
            failed
        ));
        Ok(done(&CheckOutput { checks }))
    }

    pub(crate) async fn drill_verdict(&self, ctx: &StepContext<'_>) -> StepResult {
        let checked: CheckOutput = ctx.output_of(CHECK_STEP)?;
        match failed_reason(&checked.checks) {
            Some(reason) => Err(StepFailure::permanent("drill_check_failed", reason)),
            None => {
                ctx.log("every check passed");
                Ok(done(&serde_json::Value::Null))
            }
        }
    }
}
