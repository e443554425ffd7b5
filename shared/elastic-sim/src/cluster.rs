//! `GET /` and `GET _cluster/health`.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ShardHealth, Sim};
use crate::util::{parse_time, resolve_expression, split_names};
use axum::http::StatusCode;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Elasticsearch's default `timeout` for a health wait.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// How often a waiting health request looks again.
const POLL: Duration = Duration::from_millis(25);

pub fn root(sim: &Sim) -> ApiResult {
    Ok(Reply::ok(json!({
        "name": sim.master().name,
        "cluster_name": sim.cluster_name,
        "cluster_uuid": sim.cluster_uuid,
        "version": {
            "number": sim.version,
            "build_flavor": "default",
            "build_type": "simulated",
            "build_snapshot": false,
            "minimum_wire_compatibility_version": "7.17.0",
            "minimum_index_compatibility_version": "7.0.0",
        },
        "tagline": "You Know, for Search",
    })))
}

fn level(word: &str) -> Result<u8, ApiError> {
    match word {
        "green" => Ok(0),
        "yellow" => Ok(1),
        "red" => Ok(2),
        other => Err(ApiError::illegal_argument(format!(
            "unknown cluster health status [{other}]"
        ))),
    }
}

fn word(level: u8) -> &'static str {
    match level {
        0 => "green",
        1 => "yellow",
        _ => "red",
    }
}

pub async fn health(sim: &Arc<Sim>, req: &Req, indices: Option<&str>) -> ApiResult {
    let wanted = req.param("wait_for_status").map(|w| level(w)).transpose()?;
    let timeout = match req.param("timeout") {
        Some(t) => parse_time("timeout", t)?,
        None => DEFAULT_WAIT,
    };
    let expressions = indices.map(split_names).unwrap_or_default();
    let deadline = Instant::now() + timeout;
    loop {
        let (status, body) = snapshot_health(sim, &expressions)?;
        let reached = wanted.is_none_or(|w| status <= w);
        if reached || Instant::now() >= deadline {
            let mut body = body;
            body["timed_out"] = json!(!reached);
            // A wait that runs out answers 408 with the health as it stands.
            let code = if reached {
                StatusCode::OK
            } else {
                StatusCode::REQUEST_TIMEOUT
            };
            return Ok(Reply::with_status(code, body));
        }
        tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

fn snapshot_health(sim: &Sim, expressions: &[String]) -> Result<(u8, serde_json::Value), ApiError> {
    let nodes = sim.node_count();
    let state = sim.state();
    let picked = if expressions.is_empty() {
        state.index_names()
    } else {
        let resolved = resolve_expression(expressions, &state.index_names());
        if let Some(missing) = resolved.missing.first() {
            return Err(ApiError::index_not_found(missing));
        }
        resolved.names
    };
    let mut total = ShardHealth::default();
    for name in &picked {
        if let Some(index) = state.indices.get(name) {
            let h = index.health(nodes);
            total.level = total.level.max(h.level);
            total.active_primary += h.active_primary;
            total.active += h.active;
            total.initializing += h.initializing;
            total.unassigned += h.unassigned;
        }
    }
    let all = total.active + total.initializing + total.unassigned;
    let percent = if all == 0 {
        100.0
    } else {
        f64::from(total.active) * 100.0 / f64::from(all)
    };
    let body = json!({
        "cluster_name": sim.cluster_name,
        "status": word(total.level),
        "timed_out": false,
        "number_of_nodes": nodes,
        "number_of_data_nodes": nodes,
        "active_primary_shards": total.active_primary,
        "active_shards": total.active,
        "relocating_shards": 0,
        "initializing_shards": total.initializing,
        "unassigned_shards": total.unassigned,
        "unassigned_primary_shards": 0,
        "delayed_unassigned_shards": 0,
        "number_of_pending_tasks": 0,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 0,
        "active_shards_percent_as_number": percent,
    });
    Ok((total.level, body))
}
