//! Nodes and shard allocation: `_cat/nodes`, `_nodes`, `_cat/shards` and
//! `_cluster/settings`. Enough of allocation for a grow-and-shrink plan:
//! excluding nodes by name moves their shards to the others (at once, the
//! simulator has no relocation delay), and nodes that leave with shards
//! still on them take those shards with them.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{Sim, placement};
use crate::util::parse_bool;
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

/// A `_cat` answer: the rows as JSON with `format=json`, else text with
/// the given columns (and a header line with `v`).
pub fn text_or_json(req: &Req, columns: &[&str], rows: Vec<Value>) -> ApiResult {
    if req.param("format").is_some_and(|f| f == "json") {
        return Ok(Reply::ok(Value::Array(rows)));
    }
    let mut text = String::new();
    if parse_bool("v", req.param("v"), false)? {
        text.push_str(&columns.join(" "));
        text.push('\n');
    }
    for row in &rows {
        let line: Vec<String> = columns
            .iter()
            .map(|c| match row.get(*c) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            })
            .collect();
        text.push_str(&line.join(" "));
        text.push('\n');
    }
    Ok(Reply {
        status: StatusCode::OK,
        body: Value::Null,
        text: Some(text),
    })
}

pub fn cat_nodes(sim: &Sim, req: &Req) -> ApiResult {
    let master = sim.master();
    let rows = sim
        .nodes()
        .iter()
        .map(|n| {
            json!({
                "id": n.id,
                "name": n.name,
                "ip": "127.0.0.1",
                "node.role": "cdfhilmrstw",
                "master": if n.id == master.id { "*" } else { "-" },
            })
        })
        .collect();
    text_or_json(req, &["id", "ip", "node.role", "master", "name"], rows)
}

pub fn nodes_info(sim: &Sim) -> ApiResult {
    let nodes: Map<String, Value> = sim
        .nodes()
        .iter()
        .map(|n| {
            (
                n.id.clone(),
                json!({
                    "name": n.name,
                    "version": sim.version,
                    "roles": ["data", "ingest", "master"],
                }),
            )
        })
        .collect();
    let count = nodes.len();
    Ok(Reply::ok(json!({
        "_nodes": {"total": count, "successful": count, "failed": 0},
        "cluster_name": sim.cluster_name,
        "nodes": nodes,
    })))
}

pub fn cat_shards(sim: &Sim, req: &Req, index: Option<&str>) -> ApiResult {
    let eligible = sim.eligible_nodes();
    let copies_room = u32::try_from(eligible.len()).unwrap_or(u32::MAX);
    let state = sim.state();
    if let Some(name) = index
        && !state.indices.contains_key(name)
    {
        return Err(ApiError::index_not_found(name));
    }
    let mut rows = Vec::new();
    for (name, idx) in &state.indices {
        if index.is_some_and(|i| i != name) {
            continue;
        }
        let assigned = idx.assigned_replicas(copies_room);
        for shard in 0..idx.number_of_shards {
            let lost = idx.lost_shards.contains(&shard);
            for copy in 0..=idx.number_of_replicas {
                let node = if lost || copy > assigned {
                    None
                } else {
                    placement(&eligible, name, shard, copy)
                };
                rows.push(json!({
                    "index": name,
                    "shard": shard.to_string(),
                    "prirep": if copy == 0 { "p" } else { "r" },
                    "state": if node.is_some() { "STARTED" } else { "UNASSIGNED" },
                    "docs": idx.docs.len().to_string(),
                    "node": node.map(|n| n.name.clone()),
                }));
            }
        }
    }
    text_or_json(
        req,
        &["index", "shard", "prirep", "state", "docs", "node"],
        rows,
    )
}

pub fn get_settings(sim: &Sim) -> ApiResult {
    let settings = sim.settings();
    Ok(Reply::ok(json!({
        "persistent": settings.persistent,
        "transient": settings.transient,
    })))
}

/// Flat keys only (`"cluster.routing.allocation.exclude._name": "a,b"`);
/// `null` removes a setting, as in Elasticsearch.
pub fn put_settings(sim: &Sim, req: &Req) -> ApiResult {
    let body = req.json()?;
    let mut persistent = Map::new();
    let mut transient = Map::new();
    for (scope, target) in [
        ("persistent", &mut persistent),
        ("transient", &mut transient),
    ] {
        match body.get(scope) {
            None => {}
            Some(Value::Object(map)) => target.clone_from(map),
            Some(_) => {
                return Err(ApiError::illegal_argument(format!(
                    "[{scope}] must be an object"
                )));
            }
        }
    }
    if let Some(key) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "persistent" && *k != "transient"))
    {
        return Err(ApiError::illegal_argument(format!(
            "request body contains unknown key [{key}]"
        )));
    }
    let mut guard = sim.settings();
    let settings = &mut *guard;
    for (changes, current) in [
        (&persistent, &mut settings.persistent),
        (&transient, &mut settings.transient),
    ] {
        for (key, value) in changes {
            if value.is_null() {
                current.remove(key);
            } else {
                let as_text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                current.insert(key.clone(), Value::String(as_text));
            }
        }
    }
    Ok(Reply::ok(json!({
        "acknowledged": true,
        "persistent": persistent,
        "transient": transient,
    })))
}
