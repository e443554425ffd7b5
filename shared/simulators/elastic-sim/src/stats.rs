//! `GET /_stats` and `GET /{index}/_stats[/{metric}]`: the index
//! statistics Elasticsearch reports, from what the simulator really holds
//! (documents, their bytes) and the operations it counted; what it does
//! not do (caches, throttling, warmers) is reported as 0.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ClusterState, Index, Sim};
use crate::util::{parse_bool, split_names};
use serde_json::{Map, Value, json};

/// The metrics `_stats` knows, as named in the URL.
pub const METRICS: &[&str] = &[
    "_all",
    "docs",
    "shard_stats",
    "store",
    "indexing",
    "get",
    "search",
    "merge",
    "refresh",
    "flush",
    "warmer",
    "query_cache",
    "fielddata",
    "completion",
    "segments",
    "translog",
    "request_cache",
    "recovery",
    "bulk",
    "dense_vector",
    "sparse_vector",
];

/// URL parameters `_stats` takes; Elasticsearch's output-only ones
/// (`pretty`, `human`, `error_trace`, `filter_path`) change nothing here.
const PARAMS: &[&str] = &[
    "level",
    "completion_fields",
    "fielddata_fields",
    "fields",
    "groups",
    "include_segment_file_sizes",
    "include_unloaded_segments",
    "forbid_closed_indices",
    "ignore_unavailable",
    "allow_no_indices",
    "expand_wildcards",
];

/// The figures of some shards (one, an index's primaries, its copies,
/// every index): everything `_stats` prints is one of these or 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub shards: u64,
    pub docs: u64,
    pub bytes: u64,
    pub index_total: u64,
    pub delete_total: u64,
    pub get_total: u64,
    pub query_total: u64,
    pub refresh_total: u64,
    pub flush_total: u64,
    pub merge_total: u64,
    pub merge_docs: u64,
    pub merge_bytes: u64,
    pub bulk_operations: u64,
    pub bulk_bytes: u64,
    pub segments: u64,
}

impl Figures {
    pub fn add(&mut self, other: &Figures) {
        self.shards += other.shards;
        self.docs += other.docs;
        self.bytes += other.bytes;
        self.index_total += other.index_total;
        self.delete_total += other.delete_total;
        self.get_total += other.get_total;
        self.query_total += other.query_total;
        self.refresh_total += other.refresh_total;
        self.flush_total += other.flush_total;
        self.merge_total += other.merge_total;
        self.merge_docs += other.merge_docs;
        self.merge_bytes += other.merge_bytes;
        self.bulk_operations += other.bulk_operations;
        self.bulk_bytes += other.bulk_bytes;
        self.segments += other.segments;
    }

    /// Shard `shard` of `index`'s primaries: documents and bytes split
    /// evenly, as routing by id spreads them; operations too.
    pub fn shard(index: &Index, shard: u32) -> Figures {
        let shards = u64::from(index.number_of_shards.max(1));
        let part = |total: u64| total / shards + u64::from(u64::from(shard) < total % shards);
        let c = &index.counters;
        let docs = if index.closed {
            0
        } else {
            part(index.docs.len() as u64)
        };
        // Lucene writes a segment per refresh with new documents and merges
        // them in tiers; a handful per shard is what a small index shows,
        // one after a force merge to one segment.
        let segments = match c.merged_segments {
            Some(n) => n.min(docs.max(1)),
            None if docs == 0 => 0,
            None => 1 + (docs / 10_000).min(20),
        };
        Figures {
            shards: 1,
            docs,
            bytes: part(index.store_bytes()),
            index_total: part(c.index_total),
            delete_total: part(c.delete_total),
            get_total: part(c.get_total),
            query_total: c.query_total,
            refresh_total: c.refresh_total,
            flush_total: c.flush_total,
            merge_total: c.merge_total,
            merge_docs: part(c.merge_docs),
            merge_bytes: part(c.merge_bytes),
            bulk_operations: part(c.bulk_operations),
            bulk_bytes: part(c.bulk_bytes),
            segments,
        }
    }

    /// The index's primaries.
    pub fn primaries(index: &Index) -> Figures {
        let mut sum = Figures::default();
        for shard in 0..index.number_of_shards {
            sum.add(&Figures::shard(index, shard));
        }
        sum
    }

    /// Its primaries and the replicas that are assigned (`nodes` being
    /// the nodes shards may go to): each copy holds and does the same.
    pub fn total(index: &Index, nodes: u32) -> Figures {
        let primaries = Figures::primaries(index);
        let mut sum = Figures::default();
        for _ in 0..=index.assigned_replicas(nodes) {
            sum.add(&primaries);
        }
        sum
    }
}

/// The JSON of one metric (URL name) for `f`.
pub fn metric_json(metric: &str, f: &Figures) -> (&'static str, Value) {
    match metric {
        "docs" => (
            "docs",
            json!({ "count": f.docs, "deleted": 0, "total_size_in_bytes": f.bytes }),
        ),
        "shard_stats" => ("shard_stats", json!({ "total_count": f.shards })),
        "store" => (
            "store",
            json!({
                "size_in_bytes": f.bytes,
                "total_data_set_size_in_bytes": f.bytes,
                "reserved_in_bytes": 0,
            }),
        ),
        "indexing" => (
            "indexing",
            json!({
                "index_total": f.index_total,
                "index_time_in_millis": 0,
                "index_current": 0,
                "index_failed": 0,
                "delete_total": f.delete_total,
                "delete_time_in_millis": 0,
                "delete_current": 0,
                "noop_update_total": 0,
                "is_throttled": false,
                "throttle_time_in_millis": 0,
                "write_load": 0.0,
            }),
        ),
        "get" => (
            "get",
            json!({
                "total": f.get_total,
                "time_in_millis": 0,
                "exists_total": f.get_total,
                "exists_time_in_millis": 0,
                "missing_total": 0,
                "missing_time_in_millis": 0,
                "current": 0,
            }),
        ),
        "search" => (
            "search",
            json!({
                "open_contexts": 0,
                "query_total": f.query_total,
                "query_time_in_millis": 0,
                "query_current": 0,
                "fetch_total": f.query_total,
                "fetch_time_in_millis": 0,
                "fetch_current": 0,
                "scroll_total": 0,
                "scroll_time_in_millis": 0,
                "scroll_current": 0,
                "suggest_total": 0,
                "suggest_time_in_millis": 0,
                "suggest_current": 0,
            }),
        ),
        "merge" => (
            "merges",
            json!({
                "current": 0,
                "current_docs": 0,
                "current_size_in_bytes": 0,
                "total": f.merge_total,
                "total_time_in_millis": 0,
                "total_docs": f.merge_docs,
                "total_size_in_bytes": f.merge_bytes,
                "total_stopped_time_in_millis": 0,
                "total_throttled_time_in_millis": 0,
                "total_auto_throttle_in_bytes": 20_971_520 * f.shards,
            }),
        ),
        "refresh" => (
            "refresh",
            json!({
                "total": f.refresh_total,
                "total_time_in_millis": 0,
                "external_total": f.refresh_total,
                "external_total_time_in_millis": 0,
                "listeners": 0,
            }),
        ),
        "flush" => (
            "flush",
            json!({ "total": f.flush_total, "periodic": 0, "total_time_in_millis": 0 }),
        ),
        "warmer" => (
            "warmer",
            json!({ "current": 0, "total": f.refresh_total, "total_time_in_millis": 0 }),
        ),
        "query_cache" => (
            "query_cache",
            json!({
                "memory_size_in_bytes": 0,
                "total_count": 0,
                "hit_count": 0,
                "miss_count": 0,
                "cache_size": 0,
                "cache_count": 0,
                "evictions": 0,
            }),
        ),
        "fielddata" => (
            "fielddata",
            json!({ "memory_size_in_bytes": 0, "evictions": 0 }),
        ),
        "completion" => ("completion", json!({ "size_in_bytes": 0 })),
        "segments" => (
            "segments",
            json!({
                "count": f.segments,
                "memory_in_bytes": 0,
                "terms_memory_in_bytes": 0,
                "stored_fields_memory_in_bytes": 0,
                "term_vectors_memory_in_bytes": 0,
                "norms_memory_in_bytes": 0,
                "points_memory_in_bytes": 0,
                "doc_values_memory_in_bytes": 0,
                "index_writer_memory_in_bytes": 0,
                "version_map_memory_in_bytes": 0,
                "fixed_bit_set_memory_in_bytes": 0,
                "max_unsafe_auto_id_timestamp": -1,
                "file_sizes": {},
            }),
        ),
        "translog" => (
            "translog",
            json!({
                "operations": 0,
                "size_in_bytes": 55 * f.shards,
                "uncommitted_operations": 0,
                "uncommitted_size_in_bytes": 55 * f.shards,
                "earliest_last_modified_age": 0,
            }),
        ),
        "request_cache" => (
            "request_cache",
            json!({ "memory_size_in_bytes": 0, "evictions": 0, "hit_count": 0, "miss_count": 0 }),
        ),
        "recovery" => (
            "recovery",
            json!({ "current_as_source": 0, "current_as_target": 0, "throttle_time_in_millis": 0 }),
        ),
        "bulk" => {
            let avg = |n: u64| n.checked_div(f.bulk_operations).unwrap_or(0);
            (
                "bulk",
                json!({
                    "total_operations": f.bulk_operations,
                    "total_time_in_millis": 0,
                    "total_size_in_bytes": f.bulk_bytes,
                    "avg_time_in_millis": 0,
                    "avg_size_in_bytes": avg(f.bulk_bytes),
                }),
            )
        }
        "dense_vector" => ("dense_vector", json!({ "value_count": 0 })),
        _ => ("sparse_vector", json!({ "value_count": 0 })),
    }
}

/// The metrics a comma-separated list names (every one for `_all` or
/// none given); an unknown one is refused as Elasticsearch refuses it.
pub fn chosen_metrics(req: &Req, list: Option<&str>) -> Result<Vec<&'static str>, ApiError> {
    let everything: Vec<&'static str> = METRICS.iter().skip(1).copied().collect();
    let Some(list) = list else {
        return Ok(everything);
    };
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    if let Some(unknown) = names.iter().find(|m| !METRICS.contains(m)) {
        return Err(ApiError::illegal_argument(format!(
            "request [{}] contains unrecognized metric: [{unknown}]",
            req.uri
        )));
    }
    if names.contains(&"_all") {
        return Ok(everything);
    }
    Ok(everything
        .into_iter()
        .filter(|m| names.contains(m))
        .collect())
}

/// The metrics object of `f`.
pub fn block(metrics: &[&str], f: &Figures) -> Value {
    let mut out = Map::new();
    for m in metrics {
        let (key, value) = metric_json(m, f);
        out.insert(key.to_string(), value);
    }
    Value::Object(out)
}

/// `_shards` of a broadcast over `names`: every copy asked, the assigned
/// ones answering.
pub fn shards_header(state: &ClusterState, names: &[String], nodes: u32) -> Value {
    let (mut total, mut ok) = (0u64, 0u64);
    for index in names.iter().filter_map(|n| state.indices.get(n)) {
        let shards = u64::from(index.number_of_shards);
        total += shards * u64::from(1 + index.number_of_replicas);
        ok += shards * u64::from(1 + index.assigned_replicas(nodes));
    }
    json!({ "total": total, "successful": ok, "failed": 0 })
}

/// `GET [/{index}]/_stats[/{metric}]`.
pub fn stats(sim: &Sim, req: &Req, expression: Option<&str>, metric: Option<&str>) -> ApiResult {
    crate::search_support::check_params(req, PARAMS)?;
    let metrics = chosen_metrics(req, metric)?;
    let level = req.param("level").map_or("indices", String::as_str);
    if !matches!(level, "cluster" | "indices" | "shards") {
        return Err(ApiError::illegal_argument(format!(
            "level parameter must be one of [cluster] or [indices] or [shards] but was [{level}]"
        )));
    }
    let options =
        crate::resolve::IndicesOptions::from_req(req, crate::resolve::IndicesOptions::default())?;
    let nodes = sim.node_count();
    let eligible = sim.eligible_nodes();
    let state = sim.state();
    let mut names = crate::resolve::resolve(&state, expression.unwrap_or("_all"), &options)?;
    // Closed indices have no stats to give: named, they are refused;
    // picked by a wildcard, left out (unless `forbid_closed_indices=false`).
    let forbid_closed = parse_bool(
        "forbid_closed_indices",
        req.param("forbid_closed_indices"),
        true,
    )?;
    if forbid_closed {
        let named = expression.map(split_names).unwrap_or_default();
        if let Some((name, index)) = names
            .iter()
            .filter(|n| named.contains(n))
            .find_map(|n| state.indices.get(n).filter(|i| i.closed).map(|i| (n, i)))
        {
            return Err(ApiError::index_closed(name, &index.uuid));
        }
        names.retain(|n| state.indices.get(n).is_some_and(|i| !i.closed));
    }
    let (mut all_primaries, mut all_total) = (Figures::default(), Figures::default());
    let mut indices = Map::new();
    for name in &names {
        let Some(index) = state.indices.get(name) else {
            continue;
        };
        let (primaries, total) = (Figures::primaries(index), Figures::total(index, nodes));
        all_primaries.add(&primaries);
        all_total.add(&total);
        if level == "cluster" {
            continue;
        }
        let mut entry = json!({
            "uuid": index.uuid,
            "health": index.health_word(nodes),
            "status": if index.closed { "close" } else { "open" },
            "primaries": block(&metrics, &primaries),
            "total": block(&metrics, &total),
        });
        if level == "shards" {
            entry["shards"] = shard_entries(name, index, &metrics, &eligible, nodes);
        }
        indices.insert(name.clone(), entry);
    }
    let mut body = json!({
        "_shards": shards_header(&state, &names, nodes),
        "_all": {
            "primaries": block(&metrics, &all_primaries),
            "total": block(&metrics, &all_total),
        },
    });
    if level != "cluster" {
        body["indices"] = Value::Object(indices);
    }
    Ok(Reply::ok(body))
}

/// `level=shards`: each assigned copy of each shard, with its routing.
fn shard_entries(
    name: &str,
    index: &Index,
    metrics: &[&str],
    eligible: &[crate::state::Node],
    nodes: u32,
) -> Value {
    let mut shards = Map::new();
    for shard in 0..index.number_of_shards {
        let figures = Figures::shard(index, shard);
        let mut copies = Vec::new();
        if !index.lost_shards.contains(&shard) {
            for copy in 0..=index.assigned_replicas(nodes) {
                let node = crate::state::placement(eligible, name, shard, copy);
                let mut entry = block(metrics, &figures);
                entry["routing"] = json!({
                    "state": "STARTED",
                    "primary": copy == 0,
                    "node": node.map(|n| n.id.clone()),
                    "relocating_node": null,
                });
                entry["commit"] = json!({
                    "id": format!("{}-{shard}", index.uuid),
                    "generation": 1 + index.counters.flush_total,
                    "user_data": {},
                    "num_docs": figures.docs,
                });
                entry["seq_no"] = json!({
                    "max_seq_no": i64::try_from(index.seq_no).unwrap_or(i64::MAX) - 1,
                    "local_checkpoint": i64::try_from(index.seq_no).unwrap_or(i64::MAX) - 1,
                    "global_checkpoint": i64::try_from(index.seq_no).unwrap_or(i64::MAX) - 1,
                });
                copies.push(entry);
            }
        }
        shards.insert(shard.to_string(), Value::Array(copies));
    }
    Value::Object(shards)
}

/// Counts a search or count over `expression` (under the options in
/// force, see `resolve::with_options`) in its indices' `search` stats.
pub fn count_search(sim: &Sim, expression: Option<&str>) {
    let mut state = sim.state();
    let names = crate::indices::pick(&state, expression.unwrap_or("_all")).unwrap_or_default();
    for name in names {
        if let Some(index) = state.indices.get_mut(&name) {
            index.counters.query_total += u64::from(index.number_of_shards);
        }
    }
}

/// Counts a refresh of `expression` in its indices' `refresh` stats.
pub fn count_refresh(sim: &Sim, expression: Option<&str>) {
    let mut state = sim.state();
    let names = crate::indices::pick(&state, expression.unwrap_or("_all")).unwrap_or_default();
    for name in names {
        if let Some(index) = state.indices.get_mut(&name) {
            index.counters.refresh_total += 1;
        }
    }
}

/// Counts what one successful document answer (`_index`, `result`) did.
fn count_item(state: &mut ClusterState, item: &Value) -> Option<String> {
    let name = item.get("_index").and_then(Value::as_str)?;
    let index = state.indices.get_mut(name)?;
    match item.get("result").and_then(Value::as_str) {
        Some("created" | "updated") => index.counters.index_total += 1,
        Some("deleted") => index.counters.delete_total += 1,
        Some(_) | None => return None,
    }
    // New documents make new segments: a force merge's result is gone.
    index.counters.merged_segments = None;
    Some(name.to_string())
}

/// Counts a single-document write's answer.
pub fn count_write(sim: &Sim, outcome: &ApiResult) {
    if let Ok(reply) = outcome {
        count_item(&mut sim.state(), &reply.body);
    }
}

/// Counts a document read's answer.
pub fn count_get(sim: &Sim, outcome: &ApiResult) {
    if let Ok(reply) = outcome
        && let Some(name) = reply.body.get("_index").and_then(Value::as_str)
        && let Some(index) = sim.state().indices.get_mut(name)
    {
        index.counters.get_total += 1;
    }
}

/// Counts a bulk answer: each item's write, and the request once per
/// index it wrote to, with its share of the body's bytes.
pub fn count_bulk(sim: &Sim, body_bytes: usize, outcome: &ApiResult) {
    let Ok(reply) = outcome else {
        return;
    };
    let Some(items) = reply.body.get("items").and_then(Value::as_array) else {
        return;
    };
    let mut state = sim.state();
    let mut touched: Vec<String> = Vec::new();
    for item in items {
        if let Some(inner) = item.as_object().and_then(|o| o.values().next())
            && let Some(name) = count_item(&mut state, inner)
            && !touched.contains(&name)
        {
            touched.push(name);
        }
    }
    let share = (body_bytes as u64)
        .checked_div(touched.len() as u64)
        .unwrap_or(0);
    for name in touched {
        if let Some(index) = state.indices.get_mut(&name) {
            index.counters.bulk_operations += 1;
            index.counters.bulk_bytes += share;
        }
    }
}
