//! `_flush` and `_forcemerge`: broadcast operations over the picked
//! indices. The simulator's documents are in memory, so there is nothing
//! to write or merge; each answers with the `_shards` of its broadcast and
//! counts the operation for `_stats` (Rally reports merges and flushes).

use crate::error::ApiError;
use crate::resolve::{IndicesOptions, resolve};
use crate::search_support::check_params;
use crate::server::{ApiResult, Reply, Req};
use crate::state::Sim;
use crate::util::parse_bool;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};

const FLUSH_PARAMS: &[&str] = &[
    "force",
    "wait_if_ongoing",
    "ignore_unavailable",
    "allow_no_indices",
    "expand_wildcards",
];

const FORCEMERGE_PARAMS: &[&str] = &[
    "max_num_segments",
    "only_expunge_deletes",
    "flush",
    "wait_for_completion",
    "ignore_unavailable",
    "allow_no_indices",
    "expand_wildcards",
];

/// Ids of the tasks a force merge without `wait_for_completion` names.
static TASK_IDS: AtomicU64 = AtomicU64::new(1);

/// The indices a broadcast reaches; a closed one named explicitly is
/// refused, as Elasticsearch refuses to flush or merge it.
fn targets(sim: &Sim, req: &Req, expression: Option<&str>) -> Result<Vec<String>, ApiError> {
    let options = IndicesOptions::from_req(req, IndicesOptions::default())?;
    let state = sim.state();
    let names = resolve(&state, expression.unwrap_or("_all"), &options)?;
    for name in &names {
        if let Some(index) = state.indices.get(name)
            && index.closed
        {
            return Err(ApiError::index_closed(name, &index.uuid));
        }
    }
    Ok(names)
}

/// `POST|GET [/{index}]/_flush`.
pub fn flush(sim: &Sim, req: &Req, expression: Option<&str>) -> ApiResult {
    check_params(req, FLUSH_PARAMS)?;
    parse_bool("force", req.param("force"), false)?;
    parse_bool("wait_if_ongoing", req.param("wait_if_ongoing"), true)?;
    let names = targets(sim, req, expression)?;
    let nodes = sim.node_count();
    let mut state = sim.state();
    for name in &names {
        if let Some(index) = state.indices.get_mut(name) {
            index.counters.flush_total += 1;
        }
    }
    Ok(Reply::ok(json!({
        "_shards": crate::stats::shards_header(&state, &names, nodes),
    })))
}

/// `POST [/{index}]/_forcemerge`.
pub fn forcemerge(sim: &Sim, req: &Req, expression: Option<&str>) -> ApiResult {
    check_params(req, FORCEMERGE_PARAMS)?;
    let max_segments = match req.param("max_num_segments") {
        None => None,
        Some(v) => Some(v.parse::<i64>().map_err(|_| {
            ApiError::illegal_argument(format!(
                "Failed to parse int parameter [max_num_segments] with value [{v}]"
            ))
        })?),
    };
    let expunge = parse_bool(
        "only_expunge_deletes",
        req.param("only_expunge_deletes"),
        false,
    )?;
    let then_flush = parse_bool("flush", req.param("flush"), true)?;
    let wait = parse_bool(
        "wait_for_completion",
        req.param("wait_for_completion"),
        true,
    )?;
    // -1 is the default: merge as the merge policy sees fit.
    let max_segments = max_segments.filter(|n| *n != -1);
    if expunge && max_segments.is_some() {
        return Err(ApiError::validation(
            "cannot set only_expunge_deletes and max_num_segments at the same time, those two parameters are mutually exclusive",
        ));
    }
    if let Some(n) = max_segments
        && n < 1
    {
        return Err(ApiError::illegal_argument(format!(
            "max_num_segments must be -1 or greater than 0, but was [{n}]"
        )));
    }
    let names = targets(sim, req, expression)?;
    let nodes = sim.node_count();
    let master = sim.master();
    let mut state = sim.state();
    for name in &names {
        let Some(index) = state.indices.get_mut(name) else {
            continue;
        };
        let bytes = index.store_bytes();
        let docs = index.docs.len() as u64;
        let c = &mut index.counters;
        c.merge_total += u64::from(index.number_of_shards);
        c.merge_docs += docs;
        c.merge_bytes += bytes;
        if let Some(n) = max_segments {
            c.merged_segments = Some(u64::try_from(n).unwrap_or(1));
        }
        if then_flush {
            c.flush_total += 1;
        }
        if let Some(n) = max_segments {
            // The search library's segments are merged for real.
            let max = usize::try_from(n).unwrap_or(1);
            index
                .force_merge(max)
                .map_err(|e| crate::search::api_error(e, name))?;
        }
    }
    let response = json!({
        "_shards": crate::stats::shards_header(&state, &names, nodes),
    });
    if !wait {
        // Done already: the task is kept as Elasticsearch keeps a finished
        // task's result, for `GET _tasks/{id}` (Rally's polling mode).
        let id = TASK_IDS.fetch_add(1, Ordering::Relaxed);
        let task_id = format!("{}:{id}", master.id);
        let now = crate::util::now_millis();
        state.tasks.insert(
            task_id.clone(),
            json!({
                "completed": true,
                "task": {
                    "node": master.id,
                    "id": id,
                    "type": "transport",
                    "action": "indices:admin/forcemerge",
                    "description": format!(
                        "Force-merge indices {names:?}, maxSegments[{}], onlyExpungeDeletes[{expunge}], flush[{then_flush}]",
                        max_segments.unwrap_or(-1)
                    ),
                    "start_time_in_millis": now,
                    "running_time_in_nanos": 0,
                    "cancellable": false,
                    "headers": {},
                },
                "response": response,
            }),
        );
        return Ok(Reply::ok(json!({ "task": task_id })));
    }
    Ok(Reply::ok(response))
}

/// `GET /_tasks/{task_id}`: a task started here without waiting, which is
/// always finished (the simulator's operations take no time).
pub fn get_task(sim: &Sim, task_id: &str) -> ApiResult {
    let state = sim.state();
    match state.tasks.get(task_id) {
        Some(task) => Ok(Reply::ok(task.clone())),
        None if !task_id.contains(':') => Err(ApiError::illegal_argument(format!(
            "malformed task id {task_id}"
        ))),
        None => Err(ApiError::resource_not_found(&format!(
            "task [{task_id}] isn't running and hasn't stored its results"
        ))),
    }
}

/// `GET /_tasks`: the tasks running now, which are none (every
/// operation is finished when it answers).
pub fn list_tasks() -> ApiResult {
    Ok(Reply::ok(json!({ "nodes": {} })))
}
