//! `GET /`, `GET _cluster/health` and `GET _cat/health`.

use crate::cat::Column;
use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ShardHealth, Sim};
use crate::util::{parse_bool, parse_time, split_names};
use axum::http::StatusCode;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Elasticsearch's default `timeout` for a health wait.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// How often a waiting health request looks again.
const POLL: Duration = Duration::from_millis(25);

/// `GET /`: the node that answers, and the version it runs.
pub fn root(sim: &Sim, req: &Req) -> ApiResult {
    let node = sim.serving_node(req.served);
    let facts = crate::compat::facts(&node.version);
    Ok(Reply::ok(json!({
        "name": node.name,
        "cluster_name": sim.cluster_name,
        "cluster_uuid": sim.cluster_uuid,
        "version": {
            "number": node.version,
            "build_flavor": "default",
            "build_type": "simulated",
            "build_snapshot": false,
            "lucene_version": facts.lucene,
            "minimum_wire_compatibility_version": facts.minimum_wire_compatibility,
            "minimum_index_compatibility_version": facts.minimum_index_compatibility,
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
        // Names, wildcards and aliases, open and closed indices alike.
        let options = crate::resolve::IndicesOptions {
            closed: true,
            ..crate::resolve::IndicesOptions::default()
        };
        crate::resolve::resolve(&state, &expressions.join(","), &options)?
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
        // Every node that is in the cluster: one lost is one fewer.
        "number_of_nodes": sim.member_count(),
        "number_of_data_nodes": sim.data_node_count(),
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

/// `_cat/health`'s columns; `unassign.pri` only from 8.16, which added
/// `unassigned_primary_shards` to the health it is read from.
const HEALTH_COLUMNS: &[Column] = &[
    Column::new("epoch", &["t", "time"]).right(),
    Column::new("timestamp", &["ts", "hms", "hhmmss"]),
    Column::new("cluster", &["cl"]),
    Column::new("status", &["st"]),
    Column::new("node.total", &["nt", "nodeTotal"]).right(),
    Column::new("node.data", &["nd", "nodeData"]).right(),
    Column::new("shards", &["t", "sh", "shards.total", "shardsTotal"]).right(),
    Column::new("pri", &["p", "shards.primary", "shardsPrimary"]).right(),
    Column::new("relo", &["r", "shards.relocating", "shardsRelocating"]).right(),
    Column::new("init", &["i", "shards.initializing", "shardsInitializing"]).right(),
    Column::new("unassign", &["u", "shards.unassigned", "shardsUnassigned"]).right(),
    Column::new("unassign.pri", &["up", "shards.unassigned.primary"]).right(),
    Column::new("pending_tasks", &["pt", "pendingTasks"]).right(),
    Column::new("max_task_wait_time", &["mtwt", "maxTaskWaitTime"]).right(),
    Column::new("active_shards_percent", &["asp", "activeShardsPercent"]).right(),
];

fn at_least(version: &str, major: u64, minor: u64) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let have = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    have >= (major, minor)
}

/// `GET _cat/health`: the cluster health as one row.
pub fn cat_health(sim: &Sim, req: &Req) -> ApiResult {
    let timestamps = parse_bool("ts", req.param("ts"), true)?;
    let (_, health) = snapshot_health(sim, &[])?;
    let now = chrono::Utc::now();
    let number = |key: &str| json!(health[key].as_u64().unwrap_or(0).to_string());
    let percent = health["active_shards_percent_as_number"]
        .as_f64()
        .unwrap_or(100.0);
    let row = crate::cat::row([
        ("epoch", json!(now.timestamp().to_string())),
        ("timestamp", json!(now.format("%H:%M:%S").to_string())),
        ("cluster", json!(sim.cluster_name)),
        ("status", health["status"].clone()),
        ("node.total", number("number_of_nodes")),
        ("node.data", number("number_of_data_nodes")),
        ("shards", number("active_shards")),
        ("pri", number("active_primary_shards")),
        ("relo", number("relocating_shards")),
        ("init", number("initializing_shards")),
        ("unassign", number("unassigned_shards")),
        ("unassign.pri", number("unassigned_primary_shards")),
        ("pending_tasks", number("number_of_pending_tasks")),
        // No task ever waits: Elasticsearch shows `-` then.
        ("max_task_wait_time", json!("-")),
        ("active_shards_percent", json!(format!("{percent:.1}%"))),
    ]);
    let columns: Vec<Column> = HEALTH_COLUMNS
        .iter()
        .filter(|c| timestamps || !matches!(c.name, "epoch" | "timestamp"))
        .filter(|c| c.name != "unassign.pri" || at_least(&sim.version, 8, 16))
        .map(|c| Column {
            name: c.name,
            aliases: c.aliases,
            default: c.default,
            right: c.right,
        })
        .collect();
    crate::cat::table(req, &columns, vec![row])
}
