//! `GET /_nodes/stats` and `GET /_cluster/stats`.
//!
//! The simulated nodes have no JVM, heap or disks of their own; what they
//! report is shaped exactly as Elasticsearch's answers (every field a
//! client reads is there, with its type), figured from what the cluster
//! holds: index figures come from the documents on each node's shards,
//! heap use grows with them, and garbage collections with the operations
//! done. Rally reads these before and after a race (`jvm.gc.collectors`,
//! `jvm.mem.pools.*.peak_used_in_bytes`, `ingest`), and an answer without
//! them stops it.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{Node, Sim, placement};
use crate::stats::{Figures, block};
use crate::util::{glob_match, now_millis};
use serde_json::{Map, Value, json};

/// The metrics `_nodes/stats` knows, as named in the URL.
pub const METRICS: &[&str] = &[
    "_all",
    "adaptive_selection",
    "allocations",
    "breaker",
    "discovery",
    "fs",
    "http",
    "indexing_pressure",
    "indices",
    "ingest",
    "jvm",
    "os",
    "process",
    "repositories",
    "script",
    "script_cache",
    "thread_pool",
    "transport",
];

/// Whether a path segment names `_nodes/stats` metrics (else it names
/// nodes).
pub fn are_metrics(list: &str) -> bool {
    list.split(',').all(|m| METRICS.contains(&m))
}

const HEAP_MAX: u64 = 1 << 30;
const HEAP_BASE: u64 = 180 << 20;
const MEM_TOTAL: u64 = 16 << 30;
const DISK_TOTAL: u64 = 100 << 30;

/// A shard copy on a node: its index, shard number, whether it is the
/// primary, and its figures.
type Placed = (String, u32, bool, Figures);

/// Each node's share of the indices: the shards placed on it, and their sum.
fn node_figures(sim: &Sim) -> Vec<(Node, Figures, Vec<Placed>)> {
    let eligible = sim.eligible_nodes();
    let nodes = sim.nodes();
    let room = u32::try_from(eligible.len()).unwrap_or(u32::MAX);
    let state = sim.state();
    let mut out: Vec<(Node, Figures, Vec<Placed>)> = nodes
        .into_iter()
        .map(|n| (n, Figures::default(), Vec::new()))
        .collect();
    for (name, index) in &state.indices {
        for shard in 0..index.number_of_shards {
            if index.lost_shards.contains(&shard) {
                continue;
            }
            let figures = Figures::shard(index, shard);
            for copy in 0..=index.assigned_replicas(room) {
                if let Some(node) = placement(&eligible, name, shard, copy)
                    && let Some((_, f, placed)) = out.iter_mut().find(|(n, _, _)| n.id == node.id)
                {
                    f.add(&figures);
                    placed.push((name.clone(), shard, copy == 0, figures));
                }
            }
        }
    }
    out
}

/// The nodes a `_nodes/{nodes}` filter picks.
fn chosen(sim: &Sim, req: &Req, which: Option<&str>, node: &Node) -> bool {
    let master = sim.master();
    let serving = sim.serving_node(req.served);
    which.is_none_or(|list| {
        list.split(',').any(|w| match w {
            "_all" | "*" => true,
            "_local" => node.id == serving.id,
            "_master" => node.id == master.id,
            "master:true" => node.master_eligible,
            "data:true" => node.data,
            pattern => node.id == pattern || glob_match(pattern, &node.name),
        })
    })
}

fn jvm(f: &Figures, uptime: u64) -> Value {
    let heap_used = (HEAP_BASE + f.bytes * 3).min(HEAP_MAX * 3 / 4);
    let ops = f.index_total + f.query_total + f.bulk_operations;
    // A young collection every few thousand operations, as small heaps see.
    let young = 2 + ops / 2_000;
    let old = u64::from(f.bytes > HEAP_MAX / 4);
    let pool = |used: u64, max: u64| {
        json!({
            "used_in_bytes": used,
            "max_in_bytes": max,
            "peak_used_in_bytes": used,
            "peak_max_in_bytes": max,
        })
    };
    json!({
        "timestamp": now_millis(),
        "uptime_in_millis": uptime,
        "mem": {
            "heap_used_in_bytes": heap_used,
            "heap_used_percent": heap_used * 100 / HEAP_MAX,
            "heap_committed_in_bytes": HEAP_MAX,
            "heap_max_in_bytes": HEAP_MAX,
            "non_heap_used_in_bytes": 150 << 20,
            "non_heap_committed_in_bytes": 160 << 20,
            "pools": {
                "young": pool(heap_used / 4, 0),
                "old": pool(heap_used / 2, HEAP_MAX),
                "survivor": pool(heap_used / 4, 0),
            },
        },
        "threads": { "count": 60, "peak_count": 64 },
        "gc": {
            "collectors": {
                "young": { "collection_count": young, "collection_time_in_millis": young * 4 },
                "old": { "collection_count": old, "collection_time_in_millis": old * 40 },
            },
        },
        "buffer_pools": {
            "mapped": { "count": f.segments * 4, "used_in_bytes": f.bytes, "total_capacity_in_bytes": f.bytes },
            "direct": { "count": 40, "used_in_bytes": 8 << 20, "total_capacity_in_bytes": 8 << 20 },
            "mapped - 'non-volatile memory'": { "count": 0, "used_in_bytes": 0, "total_capacity_in_bytes": 0 },
        },
        "classes": {
            "current_loaded_count": 25_000,
            "total_loaded_count": 25_000,
            "total_unloaded_count": 0,
        },
    })
}

fn os(now: i64) -> Value {
    let used = MEM_TOTAL / 2;
    json!({
        "timestamp": now,
        "cpu": { "percent": 1, "load_average": { "1m": 0.0, "5m": 0.0, "15m": 0.0 } },
        "mem": {
            "total_in_bytes": MEM_TOTAL,
            "adjusted_total_in_bytes": MEM_TOTAL,
            "free_in_bytes": MEM_TOTAL - used,
            "used_in_bytes": used,
            "free_percent": 50,
            "used_percent": 50,
        },
        "swap": { "total_in_bytes": 0, "free_in_bytes": 0, "used_in_bytes": 0 },
    })
}

fn fs(f: &Figures, now: i64) -> Value {
    let free = DISK_TOTAL.saturating_sub(f.bytes);
    json!({
        "timestamp": now,
        "total": { "total_in_bytes": DISK_TOTAL, "free_in_bytes": free, "available_in_bytes": free },
        "data": [{
            "path": "/usr/share/elasticsearch/data",
            "mount": "/ (/dev/root)",
            "type": "ext4",
            "total_in_bytes": DISK_TOTAL,
            "free_in_bytes": free,
            "available_in_bytes": free,
        }],
        "io_stats": {},
    })
}

fn thread_pool() -> Value {
    let mut pools = Map::new();
    for (name, threads) in [
        ("analyze", 1),
        ("fetch_shard_started", 1),
        ("flush", 1),
        ("force_merge", 1),
        ("generic", 4),
        ("get", 2),
        ("management", 2),
        ("refresh", 1),
        ("search", 4),
        ("snapshot", 1),
        ("warmer", 1),
        ("write", 2),
    ] {
        pools.insert(
            name.into(),
            json!({
                "threads": threads, "queue": 0, "active": 0,
                "rejected": 0, "largest": threads, "completed": 0,
            }),
        );
    }
    Value::Object(pools)
}

fn breakers() -> Value {
    let mut out = Map::new();
    for (name, limit, overhead) in [
        ("request", HEAP_MAX * 6 / 10, 1.0),
        ("fielddata", HEAP_MAX * 4 / 10, 1.03),
        ("in_flight_requests", HEAP_MAX, 2.0),
        ("model_inference", HEAP_MAX / 2, 1.0),
        ("eql_sequence", HEAP_MAX / 2, 1.0),
        ("parent", HEAP_MAX * 95 / 100, 1.0),
    ] {
        out.insert(
            name.into(),
            json!({
                "limit_size_in_bytes": limit,
                "limit_size": crate::util::byte_size(limit, None).unwrap_or_default(),
                "estimated_size_in_bytes": 0,
                "estimated_size": "0b",
                "overhead": overhead,
                "tripped": 0,
            }),
        );
    }
    Value::Object(out)
}

/// The `indices` metric's parts, as `_stats` names them (all but `_all`).
const INDEX_METRICS: &[&str] = crate::stats::METRICS.split_at(1).1;

/// `GET /_nodes[/{nodes}]/stats[/{metrics}[/{index_metrics}]]`.
pub fn nodes_stats(
    sim: &Sim,
    req: &Req,
    which: Option<&str>,
    metrics: Option<&str>,
    index_metrics: Option<&str>,
) -> ApiResult {
    let list: Vec<&str> = metrics.map_or_else(|| vec!["_all"], |m| m.split(',').collect());
    if let Some(unknown) = list.iter().find(|m| !METRICS.contains(m)) {
        return Err(ApiError::illegal_argument(format!(
            "request [{}] contains unrecognized metric: [{unknown}]",
            req.uri
        )));
    }
    let wanted = |m: &str| list.iter().any(|l| *l == m || *l == "_all");
    let index_parts: Vec<&str> = match index_metrics {
        None => INDEX_METRICS.to_vec(),
        Some(parts) => {
            let parts: Vec<&str> = parts.split(',').collect();
            if let Some(unknown) = parts
                .iter()
                .find(|p| !INDEX_METRICS.contains(p) && **p != "_all")
            {
                return Err(ApiError::illegal_argument(format!(
                    "request [{}] contains unrecognized index metric: [{unknown}]",
                    req.uri
                )));
            }
            if parts.contains(&"_all") {
                INDEX_METRICS.to_vec()
            } else {
                parts
            }
        }
    };
    let level = req.param("level").map_or("node", String::as_str);
    if !matches!(level, "node" | "indices" | "shards") {
        return Err(ApiError::illegal_argument(format!(
            "level parameter must be one of [node] or [indices] or [shards] but was [{level}]"
        )));
    }
    let uptime = u64::try_from(sim.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let now = now_millis();
    let mut nodes = Map::new();
    for (node, f, placed) in node_figures(sim) {
        if !chosen(sim, req, which, &node) {
            continue;
        }
        let ip = node.addr.unwrap_or(req.served).ip().to_string();
        let mut entry = json!({
            "timestamp": now,
            "name": node.name,
            "transport_address": format!("{ip}:9300"),
            "host": ip,
            "ip": format!("{ip}:9300"),
            "roles": node.roles(),
            "attributes": {},
        });
        if wanted("indices") {
            entry["indices"] = block(&index_parts, &f);
            match level {
                "indices" => entry["indices"]["indices"] = by_index(&index_parts, &placed),
                "shards" => entry["indices"]["shards"] = by_shard(&index_parts, &placed),
                _ => {}
            }
        }
        if wanted("os") {
            entry["os"] = os(now);
        }
        if wanted("process") {
            entry["process"] = json!({
                "timestamp": now,
                "open_file_descriptors": 300 + f.segments * 10,
                "max_file_descriptors": 65_535,
                "cpu": { "percent": 1, "total_in_millis": uptime / 100 },
                "mem": { "total_virtual_in_bytes": 6u64 << 30 },
            });
        }
        if wanted("jvm") {
            entry["jvm"] = jvm(&f, uptime);
        }
        if wanted("thread_pool") {
            entry["thread_pool"] = thread_pool();
        }
        if wanted("fs") {
            entry["fs"] = fs(&f, now);
        }
        if wanted("transport") {
            entry["transport"] = json!({
                "server_open": 0, "total_outbound_connections": 0,
                "rx_count": 0, "rx_size_in_bytes": 0, "tx_count": 0, "tx_size_in_bytes": 0,
            });
        }
        if wanted("http") {
            entry["http"] = json!({ "current_open": 1, "total_opened": 1, "clients": [] });
        }
        if wanted("breaker") {
            entry["breakers"] = breakers();
        }
        if wanted("script") {
            entry["script"] = json!({ "compilations": 0, "cache_evictions": 0, "compilation_limit_triggered": 0 });
        }
        if wanted("discovery") {
            entry["discovery"] = json!({
                "cluster_state_queue": { "total": 0, "pending": 0, "committed": 0 },
                "published_cluster_states": { "full_states": 0, "incompatible_diffs": 0, "compatible_diffs": 0 },
            });
        }
        if wanted("ingest") {
            entry["ingest"] = json!({
                "total": { "count": 0, "time_in_millis": 0, "current": 0, "failed": 0 },
                "pipelines": {},
            });
        }
        if wanted("adaptive_selection") {
            entry["adaptive_selection"] = json!({});
        }
        if wanted("indexing_pressure") {
            entry["indexing_pressure"] = json!({ "memory": {
                "current": { "combined_coordinating_and_primary_in_bytes": 0, "coordinating_in_bytes": 0, "primary_in_bytes": 0, "replica_in_bytes": 0, "all_in_bytes": 0 },
                "total": { "combined_coordinating_and_primary_in_bytes": 0, "coordinating_in_bytes": 0, "primary_in_bytes": 0, "replica_in_bytes": 0, "all_in_bytes": 0, "coordinating_rejections": 0, "primary_rejections": 0, "replica_rejections": 0 },
                "limit_in_bytes": HEAP_MAX / 10,
            }});
        }
        if wanted("script_cache") {
            entry["script_cache"] = json!({ "sum": { "compilations": 0, "cache_evictions": 0, "compilation_limit_triggered": 0 } });
        }
        if wanted("repositories") {
            entry["repositories"] = json!({});
        }
        if wanted("allocations") {
            entry["allocations"] = json!({});
        }
        nodes.insert(node.id.clone(), entry);
    }
    let count = nodes.len();
    Ok(Reply::ok(json!({
        "_nodes": { "total": count, "successful": count, "failed": 0 },
        "cluster_name": sim.cluster_name,
        "nodes": nodes,
    })))
}

/// `level=indices`: the node's figures per index.
fn by_index(parts: &[&str], placed: &[Placed]) -> Value {
    let mut sums: Vec<(String, Figures)> = Vec::new();
    for (index, _, _, f) in placed {
        match sums.iter_mut().find(|(n, _)| n == index) {
            Some((_, sum)) => sum.add(f),
            None => sums.push((index.clone(), *f)),
        }
    }
    Value::Object(
        sums.into_iter()
            .map(|(n, f)| (n, block(parts, &f)))
            .collect(),
    )
}

/// `level=shards`: per index, a list of `{shard number: figures}`, each
/// with its routing, as Elasticsearch lists a node's shards.
fn by_shard(parts: &[&str], placed: &[Placed]) -> Value {
    let mut out = Map::new();
    for (index, shard, primary, f) in placed {
        let mut stats = block(parts, f);
        stats["routing"] =
            json!({ "state": "STARTED", "primary": primary, "relocating_node": null });
        let list = out
            .entry(index.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            list.push(json!({ shard.to_string(): stats }));
        }
    }
    Value::Object(out)
}

fn min_max_avg(values: &[u64]) -> Value {
    let min = values.iter().copied().min().unwrap_or(0);
    let max = values.iter().copied().max().unwrap_or(0);
    let avg = if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<u64>() as f64 / values.len() as f64
    };
    json!({ "min": min, "max": max, "avg": avg })
}

/// `GET /_cluster/stats`.
pub fn cluster_stats(sim: &Sim, req: &Req) -> ApiResult {
    crate::search_support::check_params(
        req,
        &[
            "include_remotes",
            "timeout",
            "pretty",
            "human",
            "error_trace",
            "filter_path",
        ],
    )?;
    let nodes_count = sim.node_count();
    let per_node = node_figures(sim);
    let state = sim.state();
    let names = crate::resolve::resolve(
        &state,
        "_all",
        &crate::resolve::IndicesOptions {
            closed: true,
            hidden: true,
            ..Default::default()
        },
    )?;
    let (mut primaries, mut total) = (Figures::default(), Figures::default());
    let (mut shard_counts, mut primary_counts, mut replications) =
        (Vec::new(), Vec::new(), Vec::new());
    let mut worst = 0u8;
    for name in &names {
        let Some(index) = state.indices.get(name) else {
            continue;
        };
        primaries.add(&Figures::primaries(index));
        total.add(&Figures::total(index, nodes_count));
        let copies =
            u64::from(index.number_of_shards) * u64::from(1 + index.assigned_replicas(nodes_count));
        shard_counts.push(copies);
        primary_counts.push(u64::from(index.number_of_shards));
        replications.push(u64::from(index.assigned_replicas(nodes_count)));
        worst = worst.max(index.health(nodes_count).level);
    }
    drop(state);
    let replication = if primaries.shards == 0 {
        0.0
    } else {
        (total.shards - primaries.shards) as f64 / primaries.shards as f64
    };
    let metric = |m: &str| crate::stats::metric_json(m, &total).1;
    let nodes: Vec<Node> = per_node.iter().map(|(n, _, _)| n.clone()).collect();
    let mut versions: Vec<String> = nodes.iter().map(|n| n.version.clone()).collect();
    versions.sort();
    versions.dedup();
    let count_role = |role: &str| nodes.iter().filter(|n| n.roles().contains(&role)).count();
    let coordinating = nodes.iter().filter(|n| n.roles().is_empty()).count();
    let heap_used: u64 = per_node
        .iter()
        .map(|(_, f, _)| jvm(f, 0)["mem"]["heap_used_in_bytes"].as_u64().unwrap_or(0))
        .sum();
    let n = nodes.len() as u64;
    let disk_free = per_node
        .iter()
        .map(|(_, f, _)| DISK_TOTAL.saturating_sub(f.bytes))
        .sum::<u64>();
    let status = match worst {
        0 => "green",
        1 => "yellow",
        _ => "red",
    };
    let uptime = u64::try_from(sim.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(Reply::ok(json!({
        "_nodes": { "total": n, "successful": n, "failed": 0 },
        "cluster_name": sim.cluster_name,
        "cluster_uuid": sim.cluster_uuid,
        "timestamp": now_millis(),
        "status": status,
        "indices": {
            "count": shard_counts.len(),
            "shards": {
                "total": total.shards,
                "primaries": primaries.shards,
                "replication": replication,
                "index": {
                    "shards": min_max_avg(&shard_counts),
                    "primaries": min_max_avg(&primary_counts),
                    "replication": min_max_avg(&replications),
                },
            },
            // Documents of the primaries; sizes of every copy, as
            // Elasticsearch counts them here.
            "docs": crate::stats::metric_json("docs", &primaries).1,
            "store": metric("store"),
            "fielddata": metric("fielddata"),
            "query_cache": metric("query_cache"),
            "completion": metric("completion"),
            "segments": metric("segments"),
            "mappings": { "field_types": [], "runtime_field_types": [] },
            "analysis": {
                "char_filter_types": [], "tokenizer_types": [], "filter_types": [],
                "analyzer_types": [], "built_in_char_filters": [], "built_in_tokenizers": [],
                "built_in_filters": [], "built_in_analyzers": [],
            },
            "versions": [],
        },
        "nodes": {
            "count": {
                "total": n,
                "coordinating_only": coordinating,
                "data": count_role("data"),
                "ingest": count_role("ingest"),
                "master": count_role("master"),
                "data_hot": 0, "data_warm": 0, "data_cold": 0, "data_frozen": 0, "data_content": 0,
                "ml": 0, "remote_cluster_client": 0, "transform": 0, "voting_only": 0,
            },
            "versions": versions,
            "os": {
                "available_processors": 2 * n,
                "allocated_processors": 2 * n,
                "names": [{ "name": "Linux", "count": n }],
                "pretty_names": [{ "pretty_name": "Linux", "count": n }],
                "architectures": [{ "arch": std::env::consts::ARCH, "count": n }],
                "mem": {
                    "total_in_bytes": MEM_TOTAL * n,
                    "adjusted_total_in_bytes": MEM_TOTAL * n,
                    "free_in_bytes": MEM_TOTAL / 2 * n,
                    "used_in_bytes": MEM_TOTAL / 2 * n,
                    "free_percent": 50,
                    "used_percent": 50,
                },
            },
            "process": {
                "cpu": { "percent": 1 },
                "open_file_descriptors": { "min": 300, "max": 300, "avg": 300 },
            },
            "jvm": {
                "max_uptime_in_millis": uptime,
                "versions": [{
                    "version": "22.0.1",
                    "vm_name": "OpenJDK 64-Bit Server VM",
                    "vm_version": "22.0.1",
                    "vm_vendor": "Oracle Corporation",
                    "bundled_jdk": true,
                    "using_bundled_jdk": true,
                    "count": n,
                }],
                "mem": { "heap_used_in_bytes": heap_used, "heap_max_in_bytes": HEAP_MAX * n },
                "threads": 60 * n,
            },
            "fs": {
                "total_in_bytes": DISK_TOTAL * n,
                "free_in_bytes": disk_free,
                "available_in_bytes": disk_free,
            },
            "plugins": [],
            "network_types": { "transport_types": { "netty4": n }, "http_types": { "netty4": n } },
            "discovery_types": { "multi-node": n },
            "packaging_types": [{ "flavor": "default", "type": "docker", "count": n }],
            "ingest": { "number_of_pipelines": 0, "processor_stats": {} },
            "indexing_pressure": { "memory": { "current": {}, "total": {}, "limit_in_bytes": 0 } },
        },
        "snapshots": {},
        "repositories": {},
        "ccs": {},
    })))
}
