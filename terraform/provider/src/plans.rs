//! Waiting for a deployment's plan. Every change to a deployment runs as a
//! plan of steps in the platform's worker; an apply waits for the one its
//! call started, logs each step as it starts and ends (the provider's log
//! is Terraform's only view of progress), and fails with the plan's error
//! and the step it failed in.

use crate::client::{CallError, Client, encode};
use crate::log;
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Why a plan did not end in success.
pub enum PlanFailure {
    /// The plan ended `failed` or `cancelled`.
    Failed {
        status: String,
        step: Option<String>,
        message: String,
    },
    /// It was still running when the provider's timeout passed.
    TimedOut {
        deployment: String,
        plan_id: String,
        running: Option<String>,
    },
    Call(CallError),
}

impl PlanFailure {
    pub fn summary(&self, what: &str) -> String {
        match self {
            PlanFailure::Failed {
                status,
                step: Some(step),
                ..
            } => {
                format!("the {what} plan {status} at step {step}")
            }
            PlanFailure::Failed {
                status, step: None, ..
            } => format!("the {what} plan {status}"),
            PlanFailure::TimedOut { .. } => format!("the {what} plan did not finish in time"),
            PlanFailure::Call(_) => format!("following the {what} plan failed"),
        }
    }

    pub fn detail(&self) -> String {
        match self {
            PlanFailure::Failed { message, .. } => message.clone(),
            PlanFailure::TimedOut {
                deployment,
                plan_id,
                running,
            } => format!(
                "plan {plan_id} is still running{}; it goes on in the platform: follow it with `floe plan show {deployment}`, or raise the provider's plan_timeout_seconds",
                running
                    .as_ref()
                    .map(|s| format!(" (step {s})"))
                    .unwrap_or_default()
            ),
            PlanFailure::Call(e) => e.to_string(),
        }
    }
}

/// The plan a deployment answer points at (`plans.pending`).
pub fn pending_plan(view: &Value) -> Option<String> {
    view["plans"]["pending"]["plan_id"]
        .as_str()
        .map(str::to_string)
}

/// Waits for plan `plan_id` of deployment `id` to end.
pub async fn wait(
    client: &Client,
    id: &str,
    plan_id: &str,
    what: &str,
    timeout: Duration,
) -> Result<(), PlanFailure> {
    let started = Instant::now();
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut pause = Duration::from_millis(200);
    log::info(format!("deployment {id}: {what} plan {plan_id} started"));
    loop {
        let plans = match client
            .get(&format!(
                "/api/v1/deployments/{}/plans?size=100",
                encode(id)
            ))
            .await
        {
            Ok(p) => p,
            // A delete's plan ends by removing the deployment, plans and all.
            Err(e) if e.is_not_found() && what == "delete" => {
                log::info(format!("deployment {id}: deleted"));
                return Ok(());
            }
            Err(e) => return Err(PlanFailure::Call(e)),
        };
        let pending = &plans["pending"];
        if pending["plan_attempt_id"].as_str() == Some(plan_id) {
            report_steps(id, pending, &mut seen);
            if started.elapsed() >= timeout {
                return Err(PlanFailure::TimedOut {
                    deployment: id.to_string(),
                    plan_id: plan_id.to_string(),
                    running: running_step(pending),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
            continue;
        }
        let finished = find_finished(client, id, plan_id, &plans)
            .await
            .map_err(PlanFailure::Call)?;
        let Some(plan) = finished else {
            // Not yet listed (a queue's delay before the worker's first
            // write): look again until the timeout.
            if started.elapsed() >= timeout {
                return Err(PlanFailure::TimedOut {
                    deployment: id.to_string(),
                    plan_id: plan_id.to_string(),
                    running: None,
                });
            }
            tokio::time::sleep(pause).await;
            continue;
        };
        report_steps(id, &plan, &mut seen);
        let status = plan["status"].as_str().unwrap_or_default().to_string();
        log::info(format!("deployment {id}: {what} plan {plan_id} {status}"));
        if status == "succeeded" {
            return Ok(());
        }
        // The step that failed: the one marked so, or, once the plan has
        // unwound (its steps then read `undone`), the last one that ran.
        let steps: Vec<&Value> = plan["steps"].as_array().into_iter().flatten().collect();
        let failed_step = steps
            .iter()
            .find(|s| s["status"] == "failed" || s["error"].is_object())
            .or_else(|| steps.iter().rev().find(|s| s["status"] != "pending"));
        let error = if plan["error"].is_object() {
            &plan["error"]
        } else {
            failed_step.map(|s| &s["error"]).unwrap_or(&Value::Null)
        };
        let mut message = error["message"]
            .as_str()
            .unwrap_or("the plan gave no error message")
            .to_string();
        if let Some(kind) = error["failure_type"].as_str() {
            message = format!("{message} (failure type {kind})");
        }
        let step = failed_step.and_then(|s| s["step_id"].as_str().map(str::to_string));
        log::warn(format!(
            "deployment {id}: {what} plan {plan_id} {status} at step {}: {message}",
            step.as_deref().unwrap_or("-")
        ));
        return Err(PlanFailure::Failed {
            status,
            step,
            message,
        });
    }
}

/// The finished plan `plan_id`: the current one, or one in the history
/// (followed page by page; newest pages last).
async fn find_finished(
    client: &Client,
    id: &str,
    plan_id: &str,
    first: &Value,
) -> Result<Option<Value>, CallError> {
    if first["current"]["plan_attempt_id"].as_str() == Some(plan_id) {
        return Ok(Some(first["current"].clone()));
    }
    let mut page = first.clone();
    loop {
        if let Some(plan) = page["history"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["plan_attempt_id"].as_str() == Some(plan_id))
        {
            return Ok(Some(plan.clone()));
        }
        let Some(cursor) = page["next_cursor"].as_str().filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        page = client
            .get(&format!(
                "/api/v1/deployments/{}/plans?size=100&cursor={}",
                encode(id),
                encode(cursor)
            ))
            .await?;
    }
}

fn running_step(plan: &Value) -> Option<String> {
    plan["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["status"] == "running" || s["status"] == "waiting")
        .and_then(|s| s["step_id"].as_str().map(str::to_string))
}

/// Logs each step whose status changed since the last look.
fn report_steps(id: &str, plan: &Value, seen: &mut HashMap<String, String>) {
    for step in plan["steps"].as_array().into_iter().flatten() {
        let (Some(step_id), Some(status)) = (step["step_id"].as_str(), step["status"].as_str())
        else {
            continue;
        };
        // A step not started yet says nothing worth a line.
        if status == "pending" || seen.get(step_id).map(String::as_str) == Some(status) {
            continue;
        }
        seen.insert(step_id.to_string(), status.to_string());
        let last_line = step["info_log"]
            .as_array()
            .and_then(|l| l.last())
            .and_then(Value::as_str)
            .map(|l| format!(": {l}"))
            .unwrap_or_default();
        if status == "failed" {
            log::warn(format!(
                "deployment {id}: step {step_id} {status}{last_line}"
            ));
        } else {
            log::info(format!(
                "deployment {id}: step {step_id} {status}{last_line}"
            ));
        }
    }
}
