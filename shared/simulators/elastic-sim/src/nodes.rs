//! Nodes and shard allocation: `_cat/nodes`, `_nodes`, `_cat/shards` and
//! `_cluster/settings`. Enough of allocation for a grow-and-shrink plan:
//! excluding nodes by name moves their shards to the others (at once, the
//! simulator has no relocation delay), and nodes that leave with shards
//! still on them take those shards with them.

use crate::cat::{Column, row, table};
use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{Sim, placement};
use crate::util::{byte_size, glob_match, parse_bool};
use serde_json::{Map, Value, json};

const NODE_COLUMNS: &[Column] = &[
    Column::new("id", &["nodeId"]).hidden(),
    Column::new("ip", &["i"]),
    Column::new("heap.percent", &["hp", "heapPercent"]).right(),
    Column::new("ram.percent", &["rp", "ramPercent"]).right(),
    Column::new("cpu", &[]).right(),
    Column::new("load_1m", &["l"]).right(),
    Column::new("load_5m", &["l"]).right(),
    Column::new("load_15m", &["l"]).right(),
    Column::new("node.role", &["r", "role", "nodeRole"]),
    Column::new("master", &["m"]),
    Column::new("name", &["n"]),
    Column::new("version", &["v"]).hidden(),
];

pub fn cat_nodes(sim: &Sim, req: &Req) -> ApiResult {
    let full_id = parse_bool("full_id", req.param("full_id"), false)?;
    let master = sim.master();
    let rows = sim
        .nodes()
        .iter()
        .map(|n| {
            // Elasticsearch shortens ids to four characters unless asked.
            let id = if full_id {
                n.id.clone()
            } else {
                n.id.chars().take(4).collect()
            };
            row([
                ("id", json!(id)),
                ("ip", json!(n.addr.unwrap_or(req.served).ip().to_string())),
                ("heap.percent", json!("30")),
                ("ram.percent", json!("50")),
                ("cpu", json!("1")),
                ("load_1m", json!("0.00")),
                ("load_5m", json!("0.00")),
                ("load_15m", json!("0.00")),
                ("node.role", json!(n.role_letters())),
                ("master", json!(if n.id == master.id { "*" } else { "-" })),
                ("name", json!(n.name)),
                ("version", json!(n.version)),
            ])
        })
        .collect();
    table(req, NODE_COLUMNS, rows)
}

/// The GET APIs under `_nodes/` that are not node information; a path
/// naming one of them is not read as a node filter.
pub const OTHER_NODE_APIS: &[&str] = &["stats", "usage", "hot_threads", "reload_secure_settings"];

/// The metrics `_nodes` knows. The simulator fills in `http` and
/// `transport`; the others add nothing to the node's answer.
const METRICS: &[&str] = &[
    "_all",
    "_none",
    "settings",
    "os",
    "process",
    "jvm",
    "thread_pool",
    "transport",
    "http",
    "plugins",
    "ingest",
    "aggregations",
    "indices",
    "remote_cluster_server",
];

/// Whether a comma-separated list names metrics only (`_nodes/http`).
pub fn are_metrics(list: &str) -> bool {
    list.split(',').all(|m| METRICS.contains(&m))
}

/// `GET _nodes[/{nodes}][/{metrics}]`: each chosen node with the address
/// it publishes, so that a client that sniffs reaches every node.
pub fn nodes_info(sim: &Sim, req: &Req, which: Option<&str>, metrics: Option<&str>) -> ApiResult {
    if let Some(list) = metrics
        && let Some(unknown) = list.split(',').find(|m| !METRICS.contains(m))
    {
        return Err(ApiError::illegal_argument(format!(
            "request [{}] contains unrecognized metric: [{unknown}]",
            req.uri
        )));
    }
    let wanted = |metric: &str| {
        metrics.is_none_or(|list| list.split(',').any(|m| m == metric || m == "_all"))
    };
    let master = sim.master();
    let serving = sim.serving_node(req.served);
    let chosen = |n: &crate::state::Node| {
        which.is_none_or(|list| {
            list.split(',').any(|w| match w {
                "_all" | "*" => true,
                "_local" => n.id == serving.id,
                "_master" => n.id == master.id,
                pattern => n.id == pattern || glob_match(pattern, &n.name),
            })
        })
    };
    let nodes: Map<String, Value> = sim
        .nodes()
        .iter()
        .filter(|n| chosen(n))
        .map(|n| {
            let addr = n.addr.unwrap_or(req.served);
            let ip = addr.ip().to_string();
            let mut node = json!({
                "name": n.name,
                "transport_address": format!("{ip}:9300"),
                "host": ip,
                "ip": ip,
                "version": n.version,
                "build_flavor": "default",
                "build_type": "simulated",
                "roles": n.roles(),
                "attributes": {},
            });
            if wanted("transport") {
                node["transport"] = json!({
                    "bound_address": [format!("{ip}:9300")],
                    "publish_address": format!("{ip}:9300"),
                    "profiles": {},
                });
            }
            if wanted("http") {
                node["http"] = json!({
                    "bound_address": [addr.to_string()],
                    "publish_address": addr.to_string(),
                    "max_content_length_in_bytes": 104_857_600,
                });
            }
            (n.id.clone(), node)
        })
        .collect();
    let count = nodes.len();
    Ok(Reply::ok(json!({
        "_nodes": {"total": count, "successful": count, "failed": 0},
        "cluster_name": sim.cluster_name,
        "nodes": nodes,
    })))
}

const SHARD_COLUMNS: &[Column] = &[
    Column::new("index", &["i", "idx"]),
    Column::new("shard", &["s", "sh"]).right(),
    Column::new("prirep", &["p", "pr", "primaryOrReplica"]),
    Column::new("state", &["st"]),
    Column::new("docs", &["d", "dc"]).right(),
    Column::new("store", &["sto"]).right(),
    Column::new("dataset", &[]).right(),
    Column::new("ip", &[]),
    Column::new("id", &[]).hidden(),
    Column::new("node", &["n"]),
];

pub fn cat_shards(sim: &Sim, req: &Req, index: Option<&str>) -> ApiResult {
    let unit = req.param("bytes");
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
        let store = byte_size(idx.store_bytes(), unit)?;
        for shard in 0..idx.number_of_shards {
            let lost = idx.lost_shards.contains(&shard);
            for copy in 0..=idx.number_of_replicas {
                let node = if lost || copy > assigned {
                    None
                } else {
                    placement(&eligible, name, shard, copy)
                };
                // An unassigned copy has no size, address or node.
                let on_node = |v: Value| if node.is_some() { v } else { Value::Null };
                rows.push(row([
                    ("index", json!(name)),
                    ("shard", json!(shard.to_string())),
                    ("prirep", json!(if copy == 0 { "p" } else { "r" })),
                    (
                        "state",
                        json!(if node.is_some() {
                            "STARTED"
                        } else {
                            "UNASSIGNED"
                        }),
                    ),
                    ("docs", on_node(json!(idx.docs.len().to_string()))),
                    ("store", on_node(json!(store))),
                    ("dataset", on_node(json!(store))),
                    (
                        "ip",
                        on_node(json!(
                            node.and_then(|n| n.addr)
                                .unwrap_or(req.served)
                                .ip()
                                .to_string()
                        )),
                    ),
                    ("id", json!(node.map(|n| n.id.clone()))),
                    ("node", json!(node.map(|n| n.name.clone()))),
                ]));
            }
        }
    }
    table(req, SHARD_COLUMNS, rows)
}

/// `POST _nodes/reload_secure_settings`: every node re-reads its keystore
/// (the S3 client's keys).
pub fn reload_secure_settings(sim: &Sim, req: &Req) -> ApiResult {
    reload(sim, req, None)
}

/// `POST _nodes/{node_id}/reload_secure_settings`: the keystore is the
/// same on every simulated node, so any node reloads them all.
pub fn reload_secure_settings_on(sim: &Sim, req: &Req, node: &str) -> ApiResult {
    reload(sim, req, Some(node))
}

fn reload(sim: &Sim, req: &Req, filter: Option<&str>) -> ApiResult {
    let body = req.json()?;
    if body
        .get("secure_settings_password")
        .is_some_and(|p| p.as_str().is_some_and(|p| !p.is_empty()))
    {
        // The simulated keystore has no password, like the one the boot
        // script makes.
        return Err(ApiError::illegal_argument(
            "Provided keystore password was incorrect",
        ));
    }
    sim.reload_secure_settings();
    crate::repositories::rebuild_s3_stores(sim);
    let nodes: Map<String, Value> = sim
        .nodes()
        .iter()
        .filter(|n| {
            filter.is_none_or(|f| {
                f == "_all" || f == "_local" || f == n.id || f == n.name || glob_match(f, &n.name)
            })
        })
        .map(|n| (n.id.clone(), json!({ "name": n.name })))
        .collect();
    let count = nodes.len();
    tracing::info!(cluster = %sim.cluster_name, nodes = count, "simulated cluster reloaded its secure settings");
    Ok(Reply::ok(json!({
        "_nodes": {"total": count, "successful": count, "failed": 0},
        "cluster_name": sim.cluster_name,
        "nodes": nodes,
    })))
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
