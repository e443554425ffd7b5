//! Aggregations: checked against the mappings and the table of supported
//! types, run by the search library, and printed as Elasticsearch prints
//! them (whole-number keys, dates as `key_as_string`).

use crate::dates;
use crate::engine::SearchIndex;
use crate::error::SearchError;
use crate::mapping::{Kind, Mappings};
use crate::supported::AGGREGATION_TYPES;
use serde_json::{Map, Value, json};
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::intermediate_agg_result::IntermediateAggregationResults;
use tantivy::aggregation::{
    AggContextParams, AggregationLimitsGuard, DistributedAggregationCollector,
};
use tantivy::query::Query;

/// Elasticsearch's `search.max_buckets`.
const MAX_BUCKETS: u32 = 65_536;

/// What each aggregation of a request is, to print its answer.
#[derive(Debug, Clone)]
pub struct Plan {
    aggs: Vec<(String, Node)>,
}

#[derive(Debug, Clone)]
struct Node {
    agg_type: String,
    /// The field's kind in the first index that maps it.
    kind: Option<Kind>,
    date_format: String,
    subs: Plan,
}

/// Checks an `aggs` object and rewrites what the library reads
/// differently (calendar intervals it takes as fixed ones); returns the
/// request for the library and what printing the answer needs.
pub fn prepare(aggs: &Value, mappings: &[&Mappings]) -> Result<(Value, Plan), SearchError> {
    let Value::Object(aggs) = aggs else {
        return Err(SearchError::parsing(
            "Expected [START_OBJECT] under [aggs], but got a different token",
        ));
    };
    let mut out = Map::new();
    let mut plan = Plan { aggs: Vec::new() };
    for (name, body) in aggs {
        let Value::Object(body) = body else {
            return Err(SearchError::parsing(format!(
                "Expected [START_OBJECT] under [{name}], but got a different token"
            )));
        };
        let mut agg_type = None;
        let mut params = None;
        let mut subs = None;
        let mut rewritten = Map::new();
        for (key, value) in body {
            match key.as_str() {
                "aggs" | "aggregations" => {
                    let (sub, sub_plan) = prepare(value, mappings)?;
                    subs = Some(sub_plan);
                    rewritten.insert("aggs".into(), sub);
                }
                "meta" => {
                    return Err(SearchError::unsupported("aggregation parameter", "meta"));
                }
                other => {
                    if agg_type.is_some() {
                        return Err(SearchError::parsing(format!(
                            "Found two aggregation type definitions in [{name}]: [{}] and [{other}]",
                            agg_type.unwrap_or_default()
                        )));
                    }
                    if !AGGREGATION_TYPES.contains(&other) {
                        return Err(SearchError::unsupported("aggregation type", other));
                    }
                    agg_type = Some(other.to_string());
                    params = Some(value.clone());
                }
            }
        }
        let (Some(agg_type), Some(params)) = (agg_type, params) else {
            return Err(SearchError::parsing(format!(
                "Missing definition for aggregation [{name}]"
            )));
        };
        let Value::Object(mut params) = params else {
            return Err(SearchError::parsing(format!(
                "Expected [START_OBJECT] under [{agg_type}], but got a different token"
            )));
        };
        if params.contains_key("script") {
            return Err(SearchError::unsupported("aggregation parameter", "script"));
        }
        let field = params
            .get("field")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mapped = field
            .as_deref()
            .and_then(|f| mappings.iter().find_map(|m| m.field(f)));
        if let (Some(field), Some(mapped)) = (&field, &mapped)
            && mapped.field_type.kind() == Kind::Text
        {
            return Err(SearchError::shard_argument(format!(
                "Fielddata is disabled on [{field}] in [{}]. Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [{field}] in order to load field data by uninverting the inverted index. Note that this can use significant memory.",
                "index"
            )));
        }
        if agg_type == "date_histogram" {
            calendar_to_fixed(&mut params)?;
        }
        let mut entry = Map::new();
        entry.insert(agg_type.clone(), Value::Object(params));
        entry.extend(rewritten);
        out.insert(name.clone(), Value::Object(entry));
        plan.aggs.push((
            name.clone(),
            Node {
                agg_type,
                kind: mapped.as_ref().map(|m| m.field_type.kind()),
                date_format: mapped
                    .as_ref()
                    .map_or(dates::DEFAULT_FORMAT, |m| m.date_format())
                    .to_string(),
                subs: subs.unwrap_or(Plan { aggs: Vec::new() }),
            },
        ));
    }
    Ok((Value::Object(out), plan))
}

/// The library takes fixed intervals only; a calendar interval of a fixed
/// length in UTC (a minute, an hour, a day, a week starting on Monday) is
/// the same thing. Months, quarters and years are not, and are refused.
fn calendar_to_fixed(params: &mut Map<String, Value>) -> Result<(), SearchError> {
    if params.contains_key("interval") {
        return Err(SearchError::illegal_argument(
            "[interval] on [date_histogram] is no longer supported; use [fixed_interval] or [calendar_interval]",
        ));
    }
    if let Some(tz) = params.get("time_zone").and_then(Value::as_str)
        && !matches!(tz, "UTC" | "Z" | "+00:00" | "Etc/UTC")
    {
        return Err(SearchError::unsupported("date_histogram time_zone", tz));
    }
    params.remove("time_zone");
    let Some(calendar) = params.remove("calendar_interval") else {
        return Ok(());
    };
    let unit = calendar.as_str().unwrap_or_default();
    let (fixed, week) = match unit {
        "1m" | "minute" => ("1m", false),
        "1h" | "hour" => ("1h", false),
        "1d" | "day" => ("1d", false),
        "1w" | "week" => ("7d", true),
        "1M" | "month" | "1q" | "quarter" | "1y" | "year" => {
            return Err(SearchError::unsupported(
                "date_histogram calendar_interval",
                unit,
            ));
        }
        other => {
            return Err(SearchError::illegal_argument(format!(
                "The supplied interval [{other}] could not be parsed as a calendar interval."
            )));
        }
    };
    params.insert("fixed_interval".into(), json!(fixed));
    if week {
        // 1970-01-01 was a Thursday; weeks start three days earlier.
        if params.contains_key("offset") {
            return Err(SearchError::unsupported(
                "date_histogram weekly offset",
                "offset",
            ));
        }
        params.insert("offset".into(), json!("-3d"));
    }
    Ok(())
}

/// Runs the aggregations on one index, for merging with the others'.
pub fn collect(
    request: &Value,
    query: &dyn Query,
    index: &SearchIndex,
) -> Result<IntermediateAggregationResults, SearchError> {
    let aggs: Aggregations = serde_json::from_value(request.clone())
        .map_err(|e| SearchError::x_content(format!("[aggs] failed to parse: {e}")))?;
    let context = AggContextParams::new(limits(), index.tantivy().tokenizers().clone());
    let collector = DistributedAggregationCollector::from_aggs(aggs, context);
    index
        .searcher()
        .search(query, &collector)
        .map_err(aggregation_error)
}

fn limits() -> AggregationLimitsGuard {
    AggregationLimitsGuard::new(Some(512 * 1024 * 1024), Some(MAX_BUCKETS))
}

fn aggregation_error(e: tantivy::TantivyError) -> SearchError {
    match e {
        tantivy::TantivyError::InvalidArgument(reason) => SearchError::illegal_argument(reason),
        tantivy::TantivyError::AggregationError(a) => {
            let text = a.to_string();
            if text.contains("limit") {
                SearchError::shard_argument(format!(
                    "Trying to create too many buckets. Must be less than or equal to: [{MAX_BUCKETS}]. This limit can be set by changing the [search.max_buckets] cluster level setting. ({text})"
                ))
            } else {
                SearchError::illegal_argument(text)
            }
        }
        other => SearchError::engine(other),
    }
}

/// Merges every index's results and prints them as Elasticsearch does.
pub fn finish(
    request: &Value,
    plan: &Plan,
    parts: Vec<IntermediateAggregationResults>,
) -> Result<Value, SearchError> {
    let aggs: Aggregations = serde_json::from_value(request.clone())
        .map_err(|e| SearchError::x_content(format!("[aggs] failed to parse: {e}")))?;
    let mut merged: Option<IntermediateAggregationResults> = None;
    for part in parts {
        match &mut merged {
            None => merged = Some(part),
            Some(m) => m.merge_fruits(part).map_err(aggregation_error)?,
        }
    }
    let merged = merged.unwrap_or_default();
    let result = merged
        .into_final_result(aggs, limits())
        .map_err(aggregation_error)?;
    let mut value = serde_json::to_value(result).map_err(SearchError::engine)?;
    reshape(&mut value, plan);
    Ok(value)
}

/// Walks the answer beside the plan: keys as Elasticsearch types them.
fn reshape(value: &mut Value, plan: &Plan) {
    let Value::Object(results) = value else {
        return;
    };
    for (name, node) in &plan.aggs {
        let Some(result) = results.get_mut(name) else {
            continue;
        };
        match node.agg_type.as_str() {
            "terms" | "histogram" | "date_histogram" | "range" => {
                if let Some(Value::Array(buckets)) = result.get_mut("buckets") {
                    for bucket in buckets.iter_mut() {
                        reshape_bucket(bucket, node);
                        reshape(bucket, &node.subs);
                    }
                } else if let Some(Value::Object(buckets)) = result.get_mut("buckets") {
                    for bucket in buckets.values_mut() {
                        reshape_bucket(bucket, node);
                        reshape(bucket, &node.subs);
                    }
                }
                if node.agg_type == "terms"
                    && let Value::Object(r) = result
                {
                    r.entry("doc_count_error_upper_bound").or_insert(json!(0));
                    r.entry("sum_other_doc_count").or_insert(json!(0));
                }
            }
            "value_count" | "cardinality" => {
                // Counts are whole numbers.
                if let Some(v) = result.get("value").and_then(Value::as_f64) {
                    result["value"] = json!(v as u64);
                }
            }
            "min" | "max" if node.kind == Some(Kind::Date) => {
                if let Some(v) = result.get("value").and_then(Value::as_f64) {
                    result["value_as_string"] =
                        json!(dates::format_millis(v as i64, &node.date_format));
                }
            }
            _ => {}
        }
    }
}

fn reshape_bucket(bucket: &mut Value, node: &Node) {
    let Value::Object(b) = bucket else { return };
    match (node.agg_type.as_str(), node.kind) {
        ("date_histogram", _) | ("terms", Some(Kind::Date)) => {
            if let Some(ms) = b.get("key").and_then(Value::as_f64) {
                let ms = ms as i64;
                b.insert("key".into(), json!(ms));
                b.insert(
                    "key_as_string".into(),
                    json!(dates::format_millis(ms, &node.date_format)),
                );
            }
        }
        ("terms", Some(Kind::Long)) => {
            if let Some(n) = b.get("key").and_then(Value::as_f64) {
                b.insert("key".into(), json!(n as i64));
            }
        }
        ("terms", Some(Kind::Boolean)) => {
            let truth = match b.get("key") {
                Some(Value::Bool(t)) => Some(*t),
                Some(k) => k.as_f64().map(|n| n != 0.0),
                None => None,
            };
            if let Some(t) = truth {
                b.insert("key".into(), json!(u8::from(t)));
                b.insert("key_as_string".into(), json!(t.to_string()));
            }
        }
        ("histogram", _) => {
            if let Some(n) = b.get("key").and_then(Value::as_f64) {
                b.insert("key".into(), json!(n));
            }
        }
        _ => {}
    }
}
