//! `--track`: follows one plan of a deployment step by step until it ends,
//! redrawing its steps in place on a terminal and printing a line per
//! change otherwise (a log, a pipe, CI).

use crate::client::{Client, Failure, encode};
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Polls `/deployments/{id}/plans` until plan `plan_id` ends. Progress goes
/// to stderr, so that stdout keeps the command's answer.
pub async fn follow(
    client: &Client,
    deployment_id: &str,
    plan_id: &str,
    kind: &str,
    poll: Duration,
) -> Result<Value, Failure> {
    let tty = std::io::stderr().is_terminal();
    let mut drawn_lines = 0usize;
    let mut printed: Vec<String> = Vec::new();
    // A brief outage (a restart, a dropped connection) is waited out; a
    // longer one ends the command as unreachable.
    let mut misses = 0;
    let mut last_kind = kind.to_string();
    loop {
        let plan = match find_plan(client, deployment_id, plan_id).await {
            Ok(p) => {
                misses = 0;
                p
            }
            // A delete plan that succeeds takes the deployment, and its
            // plans, with it: gone after one was seen is how it ends well.
            Err(Failure::Api { status: 404, .. }) if last_kind == "delete" => {
                eprintln!("deployment {deployment_id} deleted");
                return Ok(serde_json::json!({
                    "plan_attempt_id": plan_id,
                    "kind": "delete",
                    "status": "succeeded",
                }));
            }
            Err(Failure::Unreachable(m)) if misses < 10 => {
                misses += 1;
                eprintln!("(retrying: {m})");
                tokio::time::sleep(poll).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let Some(plan) = plan else {
            return Err(Failure::Usage(format!(
                "deployment {deployment_id} has no plan {plan_id}"
            )));
        };
        last_kind = plan["kind"].as_str().unwrap_or("").to_string();
        // A log gets no line for a step that has not started yet.
        let lines = render(&plan, !tty);
        let mut err = std::io::stderr().lock();
        if tty {
            // Back to the first line drawn last time, then draw over it.
            if drawn_lines > 0 {
                let _ = write!(err, "\x1b[{drawn_lines}A");
            }
            // A line that wraps would throw the count of lines to go back
            // up off: each is cut to the terminal's width.
            let width = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse::<usize>().ok())
                .unwrap_or(120)
                .saturating_sub(1)
                .max(20);
            for l in &lines {
                let cut: String = l.chars().take(width).collect();
                let _ = writeln!(err, "\x1b[2K{cut}");
            }
            drawn_lines = lines.len();
        } else {
            for l in &lines {
                if !printed.contains(l) {
                    let _ = writeln!(err, "{l}");
                    printed.push(l.clone());
                }
            }
        }
        let _ = err.flush();
        drop(err);
        match plan["status"].as_str().unwrap_or("") {
            "succeeded" => return Ok(plan),
            "failed" => {
                let why = plan["error"]["message"]
                    .as_str()
                    .or_else(|| plan["error"]["failure_type"].as_str())
                    .unwrap_or("see `floe plan show`");
                return Err(Failure::PlanFailed(format!("plan {plan_id}: {why}")));
            }
            "cancelled" => return Err(Failure::PlanCancelled(format!("plan {plan_id}"))),
            _ => tokio::time::sleep(poll).await,
        }
    }
}

/// The plan `plan_id` of the deployment: its pending plan or one of its
/// finished ones.
async fn find_plan(
    client: &Client,
    deployment_id: &str,
    plan_id: &str,
) -> Result<Option<Value>, Failure> {
    let base = format!("/api/v1/deployments/{}/plans", encode(deployment_id));
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("{base}?size=100&cursor={}", encode(c)),
            None => format!("{base}?size=100"),
        };
        let plans = client.get(&path).await?;
        if plans["pending"]["plan_attempt_id"].as_str() == Some(plan_id) {
            return Ok(Some(plans["pending"].clone()));
        }
        if let Some(p) = plans["history"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["plan_attempt_id"].as_str() == Some(plan_id))
        {
            return Ok(Some(p.clone()));
        }
        match plans["next_cursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(None),
        }
    }
}

/// The plan as lines: a heading, then one line per step with its state,
/// duration and last log line (not for pending steps with `started_only`).
pub fn render(plan: &Value, started_only: bool) -> Vec<String> {
    let mut lines = vec![format!(
        "plan {} ({}): {}",
        plan["plan_attempt_id"].as_str().unwrap_or("?"),
        plan["kind"].as_str().unwrap_or("?"),
        plan["status"].as_str().unwrap_or("?"),
    )];
    for step in plan["steps"].as_array().into_iter().flatten() {
        if started_only && step["status"].as_str() == Some("pending") {
            continue;
        }
        let duration = step["duration_in_millis"]
            .as_u64()
            .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
            .unwrap_or_else(|| "-".into());
        let last_log = step["info_log"]
            .as_array()
            .and_then(|l| l.last())
            .and_then(Value::as_str)
            .unwrap_or("");
        let error = step["error"]["message"].as_str().unwrap_or("");
        let note = if error.is_empty() { last_log } else { error };
        lines.push(
            format!(
                "  {:<28} {:<12} {:>8}  {}",
                step["step_id"].as_str().unwrap_or("?"),
                step["status"].as_str().unwrap_or("?"),
                duration,
                note
            )
            .trim_end()
            .to_string(),
        );
    }
    lines
}

/// A drill to follow: the deployment drilled, the drill, and its clone's
/// plan (whose steps are the drill's progress).
pub struct DrillRef {
    pub deployment_id: String,
    pub drill_id: String,
    pub clone_id: String,
    pub plan_id: String,
}

impl DrillRef {
    /// The drill a `_drill` answer started.
    pub fn of(started: &Value) -> Option<DrillRef> {
        let field = |name: &str| started[name].as_str().map(str::to_string);
        Some(DrillRef {
            deployment_id: field("deployment_id")?,
            drill_id: field("id")?,
            clone_id: field("clone_deployment_id")?,
            plan_id: field("plan_id")?,
        })
    }
}

/// Follows a drill to its verdict: the clone's plan steps as they change
/// (one line each, on stderr), until the clone is gone and the drill's
/// record says how it ended. A failed drill is a failed plan (exit 4).
pub async fn follow_drill(
    client: &Client,
    drill: &DrillRef,
    poll: Duration,
) -> Result<Value, Failure> {
    let mut printed: Vec<String> = Vec::new();
    let mut misses = 0;
    let drills = format!(
        "/api/v1/deployments/{}/drills?size=100",
        encode(&drill.deployment_id)
    );
    loop {
        // The clone's plan while the clone exists; its deletion ends it.
        match find_plan(client, &drill.clone_id, &drill.plan_id).await {
            Ok(Some(plan)) => {
                let mut err = std::io::stderr().lock();
                for l in render(&plan, true) {
                    if !printed.contains(&l) {
                        let _ = writeln!(err, "{l}");
                        printed.push(l);
                    }
                }
            }
            Ok(None) | Err(Failure::Api { status: 404, .. }) => {}
            Err(Failure::Unreachable(m)) if misses < 10 => {
                misses += 1;
                eprintln!("(retrying: {m})");
                tokio::time::sleep(poll).await;
                continue;
            }
            Err(e) => return Err(e),
        }
        let listed = match client.get(&drills).await {
            Ok(l) => {
                misses = 0;
                l
            }
            Err(Failure::Unreachable(m)) if misses < 10 => {
                misses += 1;
                eprintln!("(retrying: {m})");
                tokio::time::sleep(poll).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let found = listed["drills"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["id"].as_str() == Some(drill.drill_id.as_str()))
            .cloned();
        match found.as_ref().and_then(|d| d["status"].as_str()) {
            Some("passed") => {
                let d = found.unwrap_or_default();
                eprintln!(
                    "drill {} passed: recovery time {} ms, recovery point {} s",
                    drill.drill_id, d["recovery_time"]["total_millis"], d["recovery_point_seconds"]
                );
                return Ok(d);
            }
            Some("failed") => {
                let d = found.unwrap_or_default();
                return Err(Failure::PlanFailed(format!(
                    "drill {} failed at {}: {}",
                    drill.drill_id,
                    d["failure"]["step"].as_str().unwrap_or("?"),
                    d["failure"]["reason"]
                        .as_str()
                        .unwrap_or("see `floe drill list`")
                )));
            }
            Some(_) => tokio::time::sleep(poll).await,
            None => {
                return Err(Failure::Usage(format!(
                    "deployment {} has no drill {}",
                    drill.deployment_id, drill.drill_id
                )));
            }
        }
    }
}
