//! The read APIs that search: `_search` (with scroll and point in time),
//! `_count`, `_mget` and `_delete_by_query`, on the search library (see
//! the `floe-search-index` crate). What they do not implement is refused
//! (see `search_support`).

use crate::error::ApiError;
use crate::indices::{check_readable, check_writable, pick};
use crate::search_support;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ClusterState, Index, Sim};
use crate::util::{new_uuid, now_millis, parse_time};
use axum::http::StatusCode;
use base64::Engine;
use floe_search_index::search::{self as engine, Request, Target, filter_source};
use floe_search_index::{Phase, SearchError};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Elasticsearch's `index.max_result_window` default.
const MAX_RESULT_WINDOW: usize = 10_000;

/// Elasticsearch's `search.max_open_scroll_context` default.
const MAX_OPEN_SCROLLS: usize = 500;

/// A search error as Elasticsearch answers it: a request error as
/// itself, a shard's error inside a `search_phase_execution_exception`.
pub fn api_error(e: SearchError, index: &str) -> ApiError {
    let status = match e.phase {
        Phase::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut error = ApiError::of(status, e.error_type, e.reason.clone());
    if e.phase == Phase::Shard {
        let cause = json!({ "type": e.error_type, "reason": e.reason, "index": index });
        error = ApiError::of(
            status,
            "search_phase_execution_exception",
            "all shards failed",
        )
        .with_field("phase", json!("query"))
        .with_field("grouped", json!(true))
        .with_field(
            "failed_shards",
            json!([{ "shard": 0, "index": index, "node": "", "reason": cause }]),
        )
        .with_field(
            "caused_by",
            json!({ "type": e.error_type, "reason": e.reason }),
        )
        .with_field("root_cause", json!([cause]));
    }
    error
}

/// Scroll and point-in-time contexts a cluster keeps open.
#[derive(Default)]
pub struct Contexts {
    scrolls: BTreeMap<String, Scroll>,
    pits: BTreeMap<String, Pit>,
}

/// A scroll: every hit of the search, as it was when it started, paged.
struct Scroll {
    hits: Vec<Value>,
    next: usize,
    size: usize,
    total: Option<Value>,
    shards: u32,
    expires: Instant,
}

/// A point in time: the indices as they were when it was opened.
struct Pit {
    indices: Vec<(String, Index)>,
    /// The alias filters of the expression it was opened with.
    filters: BTreeMap<String, Value>,
    expires: Instant,
}

impl Contexts {
    fn prune(&mut self) {
        let now = Instant::now();
        self.scrolls.retain(|_, s| s.expires > now);
        self.pits.retain(|_, p| p.expires > now);
    }
}

fn context_missing(id: &str) -> ApiError {
    ApiError::of(
        StatusCode::NOT_FOUND,
        "search_context_missing_exception",
        format!("No search context found for id [{id}]"),
    )
}

/// A context id, as Elasticsearch's are: opaque base64.
fn context_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(new_uuid())
}

fn keep_alive(name: &str, value: Option<&Value>) -> Result<Option<Duration>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(parse_time(name, s)?)),
        Some(other) => Err(ApiError::parsing(format!(
            "[{name}] must be a time value, not {other}"
        ))),
    }
}

/// A whole number from the URL, else the body, else `default`.
fn number(req: &Req, body: &Value, name: &str, default: usize) -> Result<usize, ApiError> {
    if let Some(v) = req.param(name) {
        return v.parse().map_err(|_| {
            ApiError::illegal_argument(format!(
                "Failed to parse int parameter [{name}] with value [{v}]"
            ))
        });
    }
    match body.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                ApiError::illegal_argument(format!(
                    "[{name}] parameter cannot be negative, found [{v}]"
                ))
            }),
    }
}

/// How many hits a search counts exactly: `track_total_hits` from the URL
/// or the body (true: all, false: none, a number), else 10,000.
fn tracked_hits(req: &Req, body: &Value) -> Result<Option<u64>, ApiError> {
    let value = match req.param("track_total_hits") {
        Some(v) => match v.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            n => Value::from(n.parse::<u64>().map_err(|_| {
                ApiError::illegal_argument(format!(
                    "Failed to parse value [{n}] for [track_total_hits]"
                ))
            })?),
        },
        None => body.get("track_total_hits").cloned().unwrap_or(Value::Null),
    };
    match value {
        Value::Null => Ok(Some(10_000)),
        Value::Bool(true) => Ok(Some(u64::MAX)),
        Value::Bool(false) => Ok(None),
        Value::Number(n) => n.as_u64().map(Some).ok_or_else(|| {
            ApiError::illegal_argument(
                "[track_total_hits] parameter must be positive or equals to -1",
            )
        }),
        other => Err(ApiError::parsing(format!(
            "[track_total_hits] cannot be {other}"
        ))),
    }
}

/// The query of a request: the body's, or the `?q=` shorthand.
fn request_query(req: &Req, body: &Value) -> Result<Option<Value>, ApiError> {
    match (req.param("q"), body.get("query")) {
        (Some(_), Some(_)) => Err(ApiError::illegal_argument(
            "request [_search] contains both [q] parameter and a query in the body",
        )),
        (Some(q), None) => Ok(Some(floe_search_index::query::from_q(
            q,
            req.param("df").map(String::as_str),
            req.param("default_operator").map(String::as_str),
        ))),
        (None, query) => Ok(query.cloned()),
    }
}

/// `?sort=a:desc,b`, as a sort clause.
fn url_sort(sort: &str) -> Value {
    let clauses: Vec<Value> = sort
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once(':') {
            Some((field, order)) => json!({ field: order }),
            None => json!(s),
        })
        .collect();
    Value::Array(clauses)
}

/// The `_source` filter of a request, URL parameters winning.
fn source_filter(req: &Req, body: &Value) -> Value {
    let list = |s: &String| -> Value { Value::Array(s.split(',').map(|p| json!(p)).collect()) };
    match (
        req.param("_source"),
        req.param("_source_includes"),
        req.param("_source_excludes"),
    ) {
        (Some(s), _, _) if s == "false" => Value::Bool(false),
        (Some(s), _, _) if s == "true" => Value::Bool(true),
        (Some(s), _, excludes) => {
            json!({ "includes": list(s), "excludes": excludes.map_or(json!([]), list) })
        }
        (None, None, None) => body.get("_source").cloned().unwrap_or(Value::Bool(true)),
        (None, includes, excludes) => json!({
            "includes": includes.map_or(json!([]), list),
            "excludes": excludes.map_or(json!([]), list),
        }),
    }
}

/// The open indices an expression reads, made searchable (refreshed:
/// every write so far shows); closed ones a wildcard skips.
fn searched_names(state: &mut ClusterState, expression: &str) -> Result<Vec<String>, ApiError> {
    let names = pick(state, expression)?;
    let mut out = Vec::new();
    for name in names {
        let Some(index) = state.indices.get_mut(&name) else {
            return Err(ApiError::index_not_found(&name));
        };
        if index.closed && (expression.contains('*') || expression == "_all") {
            continue;
        }
        check_readable(&name, index)?;
        index.searchable().map_err(|e| api_error(e, &name))?;
        out.push(name);
    }
    Ok(out)
}

/// What the search library searches: each index, with the filter of the
/// alias it was reached through, if any.
fn targets<'a>(
    indices: impl Iterator<Item = (&'a String, &'a Index)>,
    filters: &'a BTreeMap<String, Value>,
) -> Vec<Target<'a>> {
    indices
        .filter_map(|(name, index)| {
            index.search_index().map(|search| Target {
                name,
                index: search,
                mappings: &index.mappings,
                filter: filters.get(name),
            })
        })
        .collect()
}

pub(crate) fn shards_header(shards: u32) -> Value {
    json!({ "total": shards, "successful": shards, "skipped": 0, "failed": 0 })
}

/// Renders a page of hits with their sources.
fn render_hits(
    outcome: &engine::Outcome,
    indices: &[(&String, &Index)],
    filter: &Value,
    body: &Value,
    req: &Req,
) -> Vec<Value> {
    let version = body.get("version") == Some(&Value::Bool(true))
        || req.param("version").is_some_and(|v| v != "false");
    let seq_no = body.get("seq_no_primary_term") == Some(&Value::Bool(true))
        || req
            .param("seq_no_primary_term")
            .is_some_and(|v| v != "false");
    outcome
        .hits
        .iter()
        .filter_map(|hit| {
            let (name, index) = indices.get(hit.target)?;
            let doc = index.docs.get(&hit.id)?;
            let mut out = Map::new();
            out.insert("_index".into(), json!(name));
            out.insert("_id".into(), json!(hit.id));
            if version {
                out.insert("_version".into(), json!(doc.version));
            }
            if seq_no {
                out.insert("_seq_no".into(), json!(0));
                out.insert("_primary_term".into(), json!(1));
            }
            out.insert("_score".into(), hit.score.map_or(Value::Null, |s| json!(s)));
            if let Some(source) = filter_source(&doc.source, filter) {
                out.insert("_source".into(), source);
            }
            if let Some(sort) = &hit.sort {
                out.insert("sort".into(), Value::Array(sort.clone()));
            }
            Some(Value::Object(out))
        })
        .collect()
}

fn total_json(req: &Req, total: u64, tracked: Option<u64>) -> Option<Value> {
    let tracked = tracked?;
    let counted = total.min(tracked);
    if req
        .param("rest_total_hits_as_int")
        .is_some_and(|v| v != "false")
    {
        return Some(json!(counted));
    }
    let relation = if total > tracked { "gte" } else { "eq" };
    Some(json!({ "value": counted, "relation": relation }))
}

/// `GET|POST /{indices}/_search`.
pub fn search(sim: &Sim, req: &Req, expression: Option<&str>) -> ApiResult {
    let started = Instant::now();
    search_support::check_params(req, search_support::SEARCH_PARAMS)?;
    let body = req.json()?;
    search_support::check_body(&body, floe_search_index::supported::SEARCH_BODY_KEYS)?;
    let from = number(req, &body, "from", 0)?;
    let size = number(req, &body, "size", 10)?;
    let scroll = match req.param("scroll") {
        Some(s) => Some(parse_time("scroll", s)?),
        None => None,
    };
    if scroll.is_some() && from > 0 {
        return Err(ApiError::illegal_argument(
            "Validation Failed: 1: using [from] is not allowed in a scroll context;",
        ));
    }
    let tracked = tracked_hits(req, &body)?;
    let sort = match req.param("sort") {
        Some(s) => Some(url_sort(s)),
        None => body.get("sort").cloned(),
    };
    let filter = source_filter(req, &body);
    let track_scores = body.get("track_scores") == Some(&Value::Bool(true));
    let aggs = body
        .get("aggs")
        .or_else(|| body.get("aggregations"))
        .cloned();
    let search_after = match body.get("search_after") {
        None => None,
        Some(Value::Array(values)) => Some(values.clone()),
        Some(other) => {
            return Err(ApiError::parsing(format!(
                "[search_after] must be an array, not {other}"
            )));
        }
    };
    let pit = body.get("pit");
    if pit.is_some() && expression.is_some() {
        return Err(ApiError::illegal_argument(
            "Validation Failed: 1: [indices] cannot be used with point in time. Do not specify any index with point in time.;",
        ));
    }
    if pit.is_some() && scroll.is_some() {
        return Err(ApiError::illegal_argument(
            "Validation Failed: 1: using [point in time] is not allowed in a scroll context;",
        ));
    }
    let mut request = Request {
        query: request_query(req, &body)?,
        from,
        size,
        sort,
        search_after,
        track_total_hits: tracked,
        aggs,
        track_scores,
    };
    if scroll.is_none() && from.saturating_add(size) > MAX_RESULT_WINDOW {
        return Err(api_error(
            SearchError::shard_argument(format!(
                "Result window is too large, from + size must be less than or equal to: [{MAX_RESULT_WINDOW}] but was [{}]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting.",
                from.saturating_add(size)
            )),
            expression.unwrap_or("_all"),
        ));
    }
    let now = now_millis();
    // A point in time searches the indices as they were when it opened.
    let mut pit_guard;
    let mut state_guard;
    let filters;
    let (indices, pit_id): (Vec<(&String, &Index)>, Option<String>) = if let Some(pit) = pit {
        let id = pit
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::parsing("[pit] requires an [id]"))?;
        let alive = keep_alive("keep_alive", pit.get("keep_alive"))?;
        pit_guard = sim.contexts();
        pit_guard.prune();
        let open = pit_guard
            .pits
            .get_mut(id)
            .ok_or_else(|| context_missing(id))?;
        if let Some(alive) = alive {
            open.expires = Instant::now() + alive;
        }
        for (name, index) in &mut open.indices {
            index.searchable().map_err(|e| api_error(e, name))?;
        }
        let open = pit_guard.pits.get(id).ok_or_else(|| context_missing(id))?;
        filters = open.filters.clone();
        (
            open.indices.iter().map(|(n, i)| (n, i)).collect(),
            Some(id.to_string()),
        )
    } else {
        state_guard = sim.state();
        let names = searched_names(&mut state_guard, expression.unwrap_or("_all"))?;
        filters = crate::resolve::alias_filters(&state_guard, expression.unwrap_or("_all"));
        let state: &ClusterState = &state_guard;
        (
            state
                .indices
                .iter()
                .filter(|(n, _)| names.contains(n))
                .collect(),
            None,
        )
    };
    let shards: u32 = indices.iter().map(|(_, i)| i.number_of_shards).sum();
    if indices.is_empty() {
        // No shard to ask: Elasticsearch answers no hits and leaves the
        // aggregations out (a wildcard matching nothing, say).
        request.aggs = None;
    }
    let first_name = indices.first().map_or_else(
        || expression.unwrap_or("_all").to_string(),
        |(n, _)| (*n).clone(),
    );
    if scroll.is_some() {
        // Every hit now; the scroll pages through them.
        request.from = 0;
        request.size = usize::MAX;
    }
    let outcome = engine::search(&targets(indices.iter().copied(), &filters), &request, now)
        .map_err(|e| api_error(e, &first_name))?;
    let mut hits = render_hits(&outcome, &indices, &filter, &body, req);
    let total = total_json(req, outcome.total, tracked);
    let max_score = match (outcome.max_score, request.sort.is_some()) {
        (Some(s), false) if outcome.total > 0 => json!(s),
        _ => Value::Null,
    };
    let mut answer = Map::new();
    if let Some(keep) = scroll {
        let rest = hits.split_off(size.min(hits.len()));
        let id = context_id();
        let mut contexts = sim.contexts();
        contexts.prune();
        if contexts.scrolls.len() >= MAX_OPEN_SCROLLS {
            return Err(ApiError::illegal_argument(format!(
                "Trying to create too many scroll contexts. Must be less than or equal to: [{MAX_OPEN_SCROLLS}]. This limit can be set by changing the [search.max_open_scroll_context] setting."
            )));
        }
        contexts.scrolls.insert(
            id.clone(),
            Scroll {
                hits: rest,
                next: 0,
                size,
                total: total.clone(),
                shards,
                expires: Instant::now() + keep,
            },
        );
        answer.insert("_scroll_id".into(), json!(id));
    }
    if let Some(id) = pit_id {
        answer.insert("pit_id".into(), json!(id));
    }
    answer.insert("took".into(), json!(started.elapsed().as_millis() as u64));
    answer.insert("timed_out".into(), json!(false));
    answer.insert("_shards".into(), shards_header(shards));
    let mut found = Map::new();
    if let Some(total) = total {
        found.insert("total".into(), total);
    }
    found.insert("max_score".into(), max_score);
    found.insert("hits".into(), Value::Array(hits));
    answer.insert("hits".into(), Value::Object(found));
    if let Some(aggs) = outcome.aggregations {
        answer.insert("aggregations".into(), aggs);
    }
    Ok(Reply::ok(Value::Object(answer)))
}

/// `GET|POST /_search/scroll[/{id}]`: the next page of a scroll.
pub fn scroll(sim: &Sim, req: &Req, path_id: Option<&str>) -> ApiResult {
    search_support::check_params(req, &["scroll", "scroll_id", "rest_total_hits_as_int"])?;
    let body = req.json()?;
    let id = path_id
        .map(str::to_string)
        .or_else(|| req.param("scroll_id").cloned())
        .or_else(|| {
            body.get("scroll_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .ok_or_else(|| ApiError::illegal_argument("Validation Failed: 1: scrollId is missing;"))?;
    let alive = match req.param("scroll") {
        Some(s) => Some(parse_time("scroll", s)?),
        None => keep_alive("scroll", body.get("scroll"))?,
    };
    let mut contexts = sim.contexts();
    contexts.prune();
    let scroll = contexts
        .scrolls
        .get_mut(&id)
        .ok_or_else(|| context_missing(&id))?;
    if let Some(alive) = alive {
        scroll.expires = Instant::now() + alive;
    }
    let end = scroll
        .next
        .saturating_add(scroll.size)
        .min(scroll.hits.len());
    let page: Vec<Value> = scroll.hits[scroll.next..end].to_vec();
    scroll.next = end;
    let mut found = Map::new();
    if let Some(total) = &scroll.total {
        found.insert("total".into(), total.clone());
    }
    found.insert("max_score".into(), Value::Null);
    found.insert("hits".into(), Value::Array(page));
    Ok(Reply::ok(json!({
        "_scroll_id": id,
        "took": 0,
        "timed_out": false,
        "_shards": shards_header(scroll.shards),
        "hits": found,
    })))
}

/// `DELETE /_search/scroll[/{ids}]`.
pub fn clear_scroll(sim: &Sim, req: &Req, path_ids: Option<&str>) -> ApiResult {
    let body = req.json()?;
    let mut ids: Vec<String> = path_ids
        .map(|p| p.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    match body.get("scroll_id") {
        Some(Value::String(s)) => ids.push(s.clone()),
        Some(Value::Array(items)) => {
            ids.extend(items.iter().filter_map(Value::as_str).map(str::to_string))
        }
        _ => {}
    }
    let mut contexts = sim.contexts();
    contexts.prune();
    let freed = if ids.iter().any(|i| i == "_all") {
        let n = contexts.scrolls.len();
        contexts.scrolls.clear();
        n
    } else {
        ids.iter()
            .filter(|i| contexts.scrolls.remove(*i).is_some())
            .count()
    };
    let status = if freed == 0 && !ids.is_empty() {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    Ok(Reply::with_status(
        status,
        json!({ "succeeded": true, "num_freed": freed }),
    ))
}

/// `POST /{indices}/_pit?keep_alive=`: opens a point in time.
pub fn open_pit(sim: &Sim, req: &Req, expression: &str) -> ApiResult {
    search_support::check_params(
        req,
        &[
            "keep_alive",
            "ignore_unavailable",
            "expand_wildcards",
            "allow_partial_search_results",
            "preference",
            "routing",
        ],
    )?;
    let alive = req.param("keep_alive").ok_or_else(|| {
        ApiError::illegal_argument("Validation Failed: 1: [keep_alive] is not specified;")
    })?;
    let alive = parse_time("keep_alive", alive)?;
    let mut state = sim.state();
    let names = searched_names(&mut state, expression)?;
    let indices: Vec<(String, Index)> = names
        .iter()
        .filter_map(|n| state.indices.get(n).map(|i| (n.clone(), i.clone())))
        .collect();
    let shards: u32 = indices.iter().map(|(_, i)| i.number_of_shards).sum();
    let filters = crate::resolve::alias_filters(&state, expression);
    drop(state);
    let id = context_id();
    let mut contexts = sim.contexts();
    contexts.prune();
    contexts.pits.insert(
        id.clone(),
        Pit {
            indices,
            filters,
            expires: Instant::now() + alive,
        },
    );
    Ok(Reply::ok(
        json!({ "id": id, "_shards": shards_header(shards) }),
    ))
}

/// `DELETE /_pit`.
pub fn close_pit(sim: &Sim, req: &Req) -> ApiResult {
    let body = req.json()?;
    let id = body
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::illegal_argument("Validation Failed: 1: no pit ids specified;"))?;
    let mut contexts = sim.contexts();
    contexts.prune();
    let freed = usize::from(contexts.pits.remove(id).is_some());
    let status = if freed == 0 {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    Ok(Reply::with_status(
        status,
        json!({ "succeeded": true, "num_freed": freed }),
    ))
}

/// `GET|POST /{indices}/_count`.
pub fn count(sim: &Sim, req: &Req, expression: Option<&str>) -> ApiResult {
    search_support::check_params(req, search_support::COUNT_PARAMS)?;
    let body = req.json()?;
    search_support::check_body(&body, floe_search_index::supported::COUNT_BODY_KEYS)?;
    let query = request_query(req, &body)?;
    let mut state = sim.state();
    let expression = expression.unwrap_or("_all");
    let names = searched_names(&mut state, expression)?;
    let filters = crate::resolve::alias_filters(&state, expression);
    let state: &ClusterState = &state;
    let indices: Vec<(&String, &Index)> = state
        .indices
        .iter()
        .filter(|(n, _)| names.contains(n))
        .collect();
    let shards: u32 = indices.iter().map(|(_, i)| i.number_of_shards).sum();
    let first = names.first().map_or(expression, String::as_str);
    let count = engine::count(
        &targets(indices.into_iter(), &filters),
        query.as_ref(),
        now_millis(),
    )
    .map_err(|e| api_error(e, first))?;
    Ok(Reply::ok(
        json!({ "count": count, "_shards": shards_header(shards) }),
    ))
}

/// `GET|POST [/{index}]/_mget`.
pub fn mget(sim: &Sim, req: &Req, default_index: Option<&str>) -> ApiResult {
    search_support::check_params(
        req,
        &[
            "_source",
            "_source_includes",
            "_source_excludes",
            "realtime",
            "refresh",
            "preference",
        ],
    )?;
    let body = req.json()?;
    let filter = source_filter(req, &body);
    let requested: Vec<(Option<String>, String, Value)> = match (body.get("docs"), body.get("ids"))
    {
        (Some(Value::Array(docs)), None) => docs
            .iter()
            .map(|d| {
                let id = d.get("_id").map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
                let index = d.get("_index").and_then(Value::as_str).map(str::to_string);
                let source = d.get("_source").cloned().unwrap_or_else(|| filter.clone());
                id.map(|id| (index, id, source)).ok_or_else(|| {
                    ApiError::illegal_argument("Validation Failed: 1: id is missing for doc 0;")
                })
            })
            .collect::<Result<_, _>>()?,
        (None, Some(Value::Array(ids))) => ids
            .iter()
            .map(|id| {
                (
                    None,
                    id.as_str().map_or_else(|| id.to_string(), str::to_string),
                    filter.clone(),
                )
            })
            .collect(),
        _ => {
            return Err(ApiError::parsing(
                "unexpected token, expected an array of [docs] or [ids]",
            ));
        }
    };
    if requested.is_empty() {
        return Err(ApiError::illegal_argument(
            "Validation Failed: 1: no documents to get;",
        ));
    }
    let state = sim.state();
    let mut docs = Vec::new();
    for (index, id, source_filter) in requested {
        let Some(name) = index.or_else(|| default_index.map(str::to_string)) else {
            return Err(ApiError::illegal_argument(
                "Validation Failed: 1: index is missing for doc 0;",
            ));
        };
        let found = match state.indices.get(&name) {
            None => {
                let e = ApiError::index_not_found(&name).body();
                docs.push(json!({ "_index": name, "_id": id, "error": e["error"] }));
                continue;
            }
            Some(index) => {
                if let Err(e) = check_readable(&name, index) {
                    docs.push(json!({ "_index": name, "_id": id, "error": e.body()["error"] }));
                    continue;
                }
                index.docs.get(&id)
            }
        };
        docs.push(match found {
            Some(doc) => {
                let mut out = json!({
                    "_index": name, "_id": id, "_version": doc.version,
                    "_seq_no": 0, "_primary_term": 1, "found": true,
                });
                if let Some(source) = filter_source(&doc.source, &source_filter) {
                    out["_source"] = source;
                }
                out
            }
            None => json!({ "_index": name, "_id": id, "found": false }),
        });
    }
    Ok(Reply::ok(json!({ "docs": docs })))
}

/// `POST /{indices}/_delete_by_query`: deletes every match, at once.
pub fn delete_by_query(sim: &Sim, req: &Req, expression: &str) -> ApiResult {
    let started = Instant::now();
    search_support::check_params(
        req,
        &[
            "refresh",
            "conflicts",
            "max_docs",
            "wait_for_completion",
            "slices",
            "q",
            "df",
            "default_operator",
            "ignore_unavailable",
            "allow_no_indices",
            "expand_wildcards",
            "timeout",
            "wait_for_active_shards",
            "requests_per_second",
            "scroll_size",
        ],
    )?;
    if req
        .param("wait_for_completion")
        .is_some_and(|v| v == "false")
    {
        return Err(ApiError::illegal_argument(
            "[wait_for_completion=false] is not supported by Floe's simulated Elasticsearch: it runs a delete by query at once",
        ));
    }
    let body = req.json()?;
    search_support::check_body(&body, &["query", "max_docs", "conflicts"])?;
    let query = request_query(req, &body)?;
    if query.is_none() {
        return Err(ApiError::illegal_argument(
            "Validation Failed: 1: query is missing;",
        ));
    }
    let max_docs = match req.param("max_docs") {
        Some(_) => Some(number(req, &body, "max_docs", 0)?),
        None => body
            .get("max_docs")
            .map(|_| number(req, &body, "max_docs", 0))
            .transpose()?,
    };
    let mut state = sim.state();
    let names = searched_names(&mut state, expression)?;
    let filters = crate::resolve::alias_filters(&state, expression);
    let mut plan: Vec<(String, Vec<String>)> = Vec::new();
    let now = now_millis();
    for name in &names {
        let Some(index) = state.indices.get(name) else {
            continue;
        };
        let Some(search) = index.search_index() else {
            continue;
        };
        let target = Target {
            name,
            index: search,
            mappings: &index.mappings,
            filter: filters.get(name),
        };
        let ids =
            engine::matching_ids(&target, query.as_ref(), now).map_err(|e| api_error(e, name))?;
        if !ids.is_empty() {
            check_writable(name, index)?;
        }
        plan.push((name.clone(), ids));
    }
    let mut deleted = 0usize;
    'outer: for (name, ids) in plan {
        let Some(index) = state.indices.get_mut(&name) else {
            continue;
        };
        for id in ids {
            if max_docs.is_some_and(|m| deleted >= m) {
                break 'outer;
            }
            if index
                .remove_doc(&id)
                .map_err(|e| api_error(e, &name))?
                .is_some()
            {
                deleted += 1;
            }
        }
    }
    Ok(Reply::ok(json!({
        "took": started.elapsed().as_millis() as u64,
        "timed_out": false,
        "total": deleted,
        "deleted": deleted,
        "batches": usize::from(deleted > 0),
        "version_conflicts": 0,
        "noops": 0,
        "retries": { "bulk": 0, "search": 0 },
        "throttled_millis": 0,
        "requests_per_second": -1.0,
        "throttled_until_millis": 0,
        "failures": [],
    })))
}
