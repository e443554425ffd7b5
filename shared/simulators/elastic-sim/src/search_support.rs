//! What the simulated cluster's search APIs take, in one table with the
//! query and aggregation types of `floe_search_index::supported`, and the
//! refusal of everything else.
//!
//! The search semantics come from the search library; what it does not
//! implement is refused as Elasticsearch refuses a request it cannot
//! parse (a 400 in its error shape, naming what is not supported), never
//! answered with something that looks right and is not.

use crate::error::ApiError;
use crate::server::Req;
use serde_json::Value;

/// The search endpoints, by method and path, as `server::route` serves
/// them.
pub const SEARCH_ENDPOINTS: &[&str] = &[
    "GET|POST /_search",
    "GET|POST /{indices}/_search",
    "GET|POST /_search/scroll[/{id}]",
    "DELETE /_search/scroll[/{ids}]",
    "POST /{indices}/_pit",
    "DELETE /_pit",
    "GET|POST [/{indices}]/_count",
    "GET|POST [/{index}]/_mget",
    "POST /{indices}/_delete_by_query",
    "GET [/{indices}]/_mapping",
    "PUT|POST /{indices}/_mapping",
];

/// Output-only URL parameters every API takes: they change how an answer
/// is printed, not what it says.
const OUTPUT_PARAMS: &[&str] = &["pretty", "human", "error_trace", "filter_path"];

/// URL parameters of `_search`. Those that tune how Elasticsearch runs a
/// search across shards change nothing a single-process cluster answers.
pub const SEARCH_PARAMS: &[&str] = &[
    "from",
    "size",
    "q",
    "df",
    "default_operator",
    "sort",
    "_source",
    "_source_includes",
    "_source_excludes",
    "track_total_hits",
    "track_scores",
    "rest_total_hits_as_int",
    "scroll",
    "version",
    "seq_no_primary_term",
    "timeout",
    "ignore_unavailable",
    "allow_no_indices",
    "expand_wildcards",
    "request_cache",
    "preference",
    "search_type",
    "allow_partial_search_results",
    "ccs_minimize_roundtrips",
    "batched_reduce_size",
    "max_concurrent_shard_requests",
    "pre_filter_shard_size",
];

/// URL parameters of `_count`.
pub const COUNT_PARAMS: &[&str] = &[
    "q",
    "df",
    "default_operator",
    "ignore_unavailable",
    "allow_no_indices",
    "expand_wildcards",
    "preference",
];

/// Elasticsearch's name for the token a key's value starts with, as its
/// parser reports an unknown key.
fn token(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "START_OBJECT",
        Value::Array(_) => "START_ARRAY",
        Value::String(_) => "VALUE_STRING",
        Value::Number(_) => "VALUE_NUMBER",
        Value::Bool(_) => "VALUE_BOOLEAN",
        Value::Null => "VALUE_NULL",
    }
}

/// Refuses a URL parameter outside `allowed` (and the output-only ones),
/// as Elasticsearch refuses one it does not know.
pub fn check_params(req: &Req, allowed: &[&str]) -> Result<(), ApiError> {
    let unknown: Vec<&str> = req
        .query
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k) && !OUTPUT_PARAMS.contains(k))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let names = unknown
        .iter()
        .map(|k| format!("[{k}]"))
        .collect::<Vec<_>>()
        .join(", ");
    let noun = if unknown.len() == 1 {
        "parameter"
    } else {
        "parameters"
    };
    Err(ApiError::illegal_argument(format!(
        "request [{}] contains unrecognized {noun}: {names} (Floe's simulated Elasticsearch does not support them)",
        req.uri
    )))
}

/// Refuses a body key outside `allowed`, as Elasticsearch's parser
/// refuses an unknown one. (Queries and aggregations are checked as they
/// are compiled.)
pub fn check_body(body: &Value, allowed: &[&str]) -> Result<(), ApiError> {
    let Some(map) = body.as_object() else {
        return Err(ApiError::parsing("request body must be an object"));
    };
    for (key, value) in map {
        if !allowed.contains(&key.as_str()) {
            return Err(ApiError::parsing(format!(
                "Unknown key for a {} in [{key}]. (Floe's simulated Elasticsearch supports {})",
                token(value),
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}
