//! What the simulated cluster's searches understand, in one table, and the
//! refusal of everything else.
//!
//! The simulated cluster keeps documents to read them back (after a bulk
//! load, a restore, a clone); it does not score, filter, sort or
//! aggregate. A request that asks for any of that must not get an answer
//! that looks right and is not (every document for a `term` query, say),
//! so it is refused as Elasticsearch refuses a request it cannot parse: a
//! 400 in Elasticsearch's error shape, naming what is not supported.

use crate::error::ApiError;
use crate::server::Req;
use serde_json::Value;

/// Query types the simulated cluster runs.
pub const QUERY_TYPES: &[&str] = &["match_all"];

/// Aggregation types it runs: none yet.
pub const AGGREGATION_TYPES: &[&str] = &[];

/// Keys of a `_search` body it honours.
pub const SEARCH_BODY_KEYS: &[&str] = &["query", "from", "size", "track_total_hits"];

/// Keys of a `_count` body it honours.
pub const COUNT_BODY_KEYS: &[&str] = &["query"];

/// URL parameters of `_search`; Elasticsearch's output-only parameters
/// (`pretty`, `human`, `error_trace`) change nothing it answers.
pub const SEARCH_PARAMS: &[&str] = &[
    "from",
    "size",
    "track_total_hits",
    "pretty",
    "human",
    "error_trace",
];

/// URL parameters of `_count`.
pub const COUNT_PARAMS: &[&str] = &["pretty", "human", "error_trace"];

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

/// Refuses a URL parameter outside `allowed`, as Elasticsearch refuses
/// one it does not know (`?scroll=` included: without scroll contexts, a
/// client's scan would read one page and stop, without an error).
pub fn check_params(req: &Req, allowed: &[&str]) -> Result<(), ApiError> {
    let unknown: Vec<&str> = req
        .query
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
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

/// Refuses a body key outside `allowed` and any query but `match_all`.
pub fn check_body(body: &Value, allowed: &[&str]) -> Result<(), ApiError> {
    let Some(map) = body.as_object() else {
        return Err(ApiError::parsing("request body must be an object"));
    };
    for (key, value) in map {
        if matches!(key.as_str(), "aggs" | "aggregations") {
            check_aggregations(value)?;
            continue;
        }
        if !allowed.contains(&key.as_str()) {
            return Err(ApiError::parsing(format!(
                "Unknown key for a {} in [{key}]. (Floe's simulated Elasticsearch supports {})",
                token(value),
                allowed.join(", ")
            )));
        }
    }
    if let Some(query) = map.get("query") {
        check_query(query)?;
    }
    Ok(())
}

fn check_query(query: &Value) -> Result<(), ApiError> {
    let Some(clauses) = query.as_object() else {
        return Err(ApiError::parsing(
            "[_na] query malformed, must start with start_object",
        ));
    };
    let mut names = clauses.keys();
    let (Some(name), None) = (names.next(), names.next()) else {
        return Err(ApiError::parsing(
            "[query] must hold exactly one query (Floe's simulated Elasticsearch runs match_all only)",
        ));
    };
    if !QUERY_TYPES.contains(&name.as_str()) {
        return Err(ApiError::parsing(format!(
            "unknown query [{name}]: Floe's simulated Elasticsearch runs only {QUERY_TYPES:?}"
        )));
    }
    // match_all takes `boost` and `_name`, nothing that changes the hits.
    let inner = clauses.get(name).and_then(Value::as_object);
    if let Some(extra) =
        inner.and_then(|o| o.keys().find(|k| !matches!(k.as_str(), "boost" | "_name")))
    {
        return Err(ApiError::parsing(format!(
            "[match_all] query does not support [{extra}]"
        )));
    }
    Ok(())
}

/// Refuses every aggregation whose type is not in [`AGGREGATION_TYPES`]
/// (all of them, for now), with the type Elasticsearch would name.
fn check_aggregations(aggs: &Value) -> Result<(), ApiError> {
    let Some(named) = aggs.as_object() else {
        return Err(ApiError::parsing("Expected [START_OBJECT] under [aggs]"));
    };
    for (name, agg) in named {
        let kind = agg
            .as_object()
            .and_then(|a| {
                a.keys()
                    .find(|k| !matches!(k.as_str(), "aggs" | "aggregations" | "meta"))
            })
            .cloned()
            .unwrap_or_default();
        if !AGGREGATION_TYPES.contains(&kind.as_str()) {
            return Err(ApiError::parsing(format!(
                "Unknown aggregation type [{kind}] for aggregation [{name}]: Floe's simulated Elasticsearch runs no aggregations"
            )));
        }
    }
    Ok(())
}
