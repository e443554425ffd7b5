//! Elasticsearch's query DSL, compiled into the search library's queries
//! against one index's mappings.

use crate::dates;
use crate::engine::{SchemaField, SearchIndex, analyze};
use crate::error::SearchError;
use crate::mapping::{Field, Kind, Mappings};
use crate::supported::QUERY_TYPES;
use serde_json::{Map, Value};
use std::ops::Bound;
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, ConstScoreQuery, DisjunctionMaxQuery, EmptyQuery, Occur,
    PhraseQuery, Query, QueryParser, RangeQuery, RegexQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::IndexRecordOption;
use tantivy::{DateTime, Term};

/// What a query compiles against: one index, its mappings, and the time
/// `now` means.
pub struct Context<'a> {
    pub index: &'a SearchIndex,
    pub mappings: &'a Mappings,
    pub now_millis: i64,
}

type Compiled = Box<dyn Query>;

/// Compiles a query clause (`{"match": {...}}`).
pub fn compile(query: &Value, cx: &Context<'_>) -> Result<Compiled, SearchError> {
    let Value::Object(clause) = query else {
        return Err(SearchError::parsing(
            "[_na] query malformed, must start with start_object",
        ));
    };
    let mut entries = clause.iter();
    let (Some((name, body)), None) = (entries.next(), entries.next()) else {
        return Err(SearchError::parsing(if clause.is_empty() {
            "query malformed, empty clause found".to_string()
        } else {
            "[_na] query malformed, no start_object after query name".to_string()
        }));
    };
    if !QUERY_TYPES.contains(&name.as_str()) {
        return Err(SearchError::unsupported("query", name));
    }
    match name.as_str() {
        "match_all" => {
            let params = object(name, body)?;
            check_keys(name, params, &["boost", "_name"])?;
            boosted(Box::new(AllQuery), params)
        }
        "match_none" => Ok(Box::new(EmptyQuery)),
        "match" => field_query(name, body, "query", |field, params| {
            match_query(field, params, cx)
        }),
        "match_phrase" => field_query(name, body, "query", |field, params| {
            phrase_query(field, params, cx)
        }),
        "multi_match" => multi_match(object(name, body)?, cx),
        "term" => field_query(name, body, "value", |field, params| {
            check_keys(
                "term",
                params,
                &["value", "boost", "case_insensitive", "_name"],
            )?;
            let value = params.get("value").ok_or_else(|| {
                SearchError::parsing("[term] query does not support [value] missing")
            })?;
            let insensitive = params.get("case_insensitive").and_then(Value::as_bool) == Some(true);
            let q = if insensitive {
                pattern_query(field, &regex_escape(&text_of(value)), true, cx)?
            } else {
                term_query(field, value, cx)?
            };
            boosted(q, params)
        }),
        "terms" => terms_query(object(name, body)?, cx),
        "range" => field_query(name, body, "", |field, params| {
            range_query(field, params, cx)
        }),
        "exists" => {
            let params = object(name, body)?;
            check_keys(name, params, &["field", "boost", "_name"])?;
            let field = params
                .get("field")
                .and_then(Value::as_str)
                .ok_or_else(|| SearchError::parsing("[exists] must be provided with a [field]"))?;
            boosted(exists_query(field, cx), params)
        }
        "ids" => {
            let params = object(name, body)?;
            check_keys(name, params, &["values", "boost", "_name"])?;
            let values = match params.get("values") {
                Some(Value::Array(v)) => v,
                _ => {
                    return Err(SearchError::parsing(
                        "[ids] query requires [values] as an array",
                    ));
                }
            };
            let id = cx.index.id_field();
            let terms = values
                .iter()
                .map(|v| Term::from_field_text(id, &text_of(v)));
            boosted(
                Box::new(ConstScoreQuery::new(
                    Box::new(TermSetQuery::new(terms)),
                    1.0,
                )),
                params,
            )
        }
        "prefix" => field_query(name, body, "value", |field, params| {
            check_keys(
                "prefix",
                params,
                &["value", "boost", "case_insensitive", "rewrite", "_name"],
            )?;
            let value = text_of(params.get("value").unwrap_or(&Value::Null));
            let insensitive = params.get("case_insensitive").and_then(Value::as_bool) == Some(true);
            boosted(
                pattern_query(
                    field,
                    &format!("{}.*", regex_escape(&value)),
                    insensitive,
                    cx,
                )?,
                params,
            )
        }),
        "wildcard" => field_query(name, body, "value", |field, params| {
            check_keys(
                "wildcard",
                params,
                &[
                    "value",
                    "wildcard",
                    "boost",
                    "case_insensitive",
                    "rewrite",
                    "_name",
                ],
            )?;
            let value = params
                .get("value")
                .or_else(|| params.get("wildcard"))
                .map(text_of)
                .unwrap_or_default();
            let insensitive = params.get("case_insensitive").and_then(Value::as_bool) == Some(true);
            boosted(
                pattern_query(field, &wildcard_regex(&value), insensitive, cx)?,
                params,
            )
        }),
        "bool" => bool_query(object(name, body)?, cx),
        "query_string" => query_string(object(name, body)?, cx),
        "constant_score" => {
            let params = object(name, body)?;
            check_keys(name, params, &["filter", "boost", "_name"])?;
            let filter = params.get("filter").ok_or_else(|| {
                SearchError::parsing("[constant_score] requires a 'filter' element")
            })?;
            let boost = params.get("boost").and_then(Value::as_f64).unwrap_or(1.0) as f32;
            Ok(Box::new(ConstScoreQuery::new(compile(filter, cx)?, boost)))
        }
        other => Err(SearchError::unsupported("query", other)),
    }
}

fn object<'v>(name: &str, body: &'v Value) -> Result<&'v Map<String, Value>, SearchError> {
    body.as_object().ok_or_else(|| {
        SearchError::parsing(format!(
            "[{name}] query malformed, no start_object after query name"
        ))
    })
}

/// Refuses a parameter the query does not take, as Elasticsearch's
/// parser does (`[match] query does not support [fuzziness]`); the
/// simulated cluster also refuses the parameters it does not implement.
fn check_keys(
    name: &str,
    params: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), SearchError> {
    match params.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(SearchError::parsing(format!(
            "[{name}] query does not support [{key}]"
        ))),
        None => Ok(()),
    }
}

fn boosted(query: Compiled, params: &Map<String, Value>) -> Result<Compiled, SearchError> {
    match params.get("boost") {
        None => Ok(query),
        Some(b) => {
            let boost = b.as_f64().ok_or_else(|| {
                SearchError::parsing(format!("[boost] must be a number, not {b}"))
            })?;
            if boost < 0.0 {
                return Err(SearchError::illegal_argument(format!(
                    "negative [boost] are not allowed in [{boost}]"
                )));
            }
            Ok(Box::new(BoostQuery::new(query, boost as f32)))
        }
    }
}

/// A query of the `{"field": value}` or `{"field": {params}}` shape; the
/// short form's value goes in under `short_key`.
fn field_query(
    name: &str,
    body: &Value,
    short_key: &str,
    build: impl Fn(&str, &Map<String, Value>) -> Result<Compiled, SearchError>,
) -> Result<Compiled, SearchError> {
    let params = object(name, body)?;
    let mut fields = params
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "boost" | "_name"));
    let (Some((field, value)), None) = (fields.next(), fields.next()) else {
        return Err(SearchError::parsing(format!(
            "[{name}] query doesn't support multiple fields, found [{}]",
            params.keys().cloned().collect::<Vec<_>>().join("] and [")
        )));
    };
    let owned;
    let params = match value {
        Value::Object(p) => p,
        short if !short_key.is_empty() => {
            let mut m = Map::new();
            m.insert(short_key.to_string(), short.clone());
            owned = m;
            &owned
        }
        other => {
            return Err(SearchError::parsing(format!(
                "[{name}] query does not support [{field}] with a value of {other}"
            )));
        }
    };
    build(field, params)
}

/// The schema field of `path`, or why a query on it matches nothing or
/// fails: an unmapped field matches nothing; an unindexed one fails.
fn resolve(path: &str, cx: &Context<'_>) -> Result<Option<(SchemaField, Field)>, SearchError> {
    let Some(mapping) = cx.mappings.field(path) else {
        return Ok(None);
    };
    if !mapping.indexed {
        return Err(SearchError::query_shard(format!(
            "failed to create query: Cannot search on field [{path}] since it is not indexed."
        )));
    }
    Ok(cx.index.field(path).map(|f| (f, mapping)))
}

pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The term a value is in a field of its kind, or the error Elasticsearch
/// gives for a value the type cannot read.
fn term_for(
    field: &SchemaField,
    mapping: &Field,
    value: &Value,
    cx: &Context<'_>,
) -> Result<Term, SearchError> {
    let bad = || {
        SearchError::query_shard(format!(
            "failed to create query: For input string: \"{}\"",
            text_of(value)
        ))
    };
    let f = field.field;
    Ok(match field.kind {
        Kind::Text | Kind::Keyword => Term::from_field_text(f, &text_of(value)),
        Kind::Long => {
            let n = match value {
                Value::Number(n) => n
                    .as_i64()
                    .or_else(|| n.as_f64().filter(|x| x.fract() == 0.0).map(|x| x as i64)),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            Term::from_field_i64(f, n.ok_or_else(bad)?)
        }
        Kind::Double => {
            let n = match value {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            Term::from_field_f64(f, n.ok_or_else(bad)?)
        }
        Kind::Boolean => {
            let b = match value {
                Value::Bool(b) => Some(*b),
                Value::String(s) if s == "true" => Some(true),
                Value::String(s) if s == "false" => Some(false),
                _ => None,
            };
            Term::from_field_bool(f, b.ok_or_else(|| {
                SearchError::query_shard(format!(
                    "failed to create query: Can't parse boolean value [{}], expected [true] or [false]",
                    text_of(value)
                ))
            })?)
        }
        Kind::Date => {
            let ms = dates::parse_bound(value, mapping.date_format(), false, cx.now_millis)?;
            Term::from_field_date(f, DateTime::from_timestamp_millis(ms))
        }
    })
}

fn term_query(path: &str, value: &Value, cx: &Context<'_>) -> Result<Compiled, SearchError> {
    let Some((field, mapping)) = resolve(path, cx)? else {
        return Ok(Box::new(EmptyQuery));
    };
    let term = term_for(&field, &mapping, value, cx)?;
    Ok(Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)))
}

fn terms_query(params: &Map<String, Value>, cx: &Context<'_>) -> Result<Compiled, SearchError> {
    let mut fields = params
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "boost" | "_name"));
    let (Some((path, values)), None) = (fields.next(), fields.next()) else {
        return Err(SearchError::parsing(
            "[terms] query does not support multiple fields",
        ));
    };
    let Value::Array(values) = values else {
        return Err(SearchError::parsing(format!(
            "[terms] query does not support [{path}]: its value must be an array (terms lookup is not supported by Floe's simulated Elasticsearch)"
        )));
    };
    let Some((field, mapping)) = resolve(path, cx)? else {
        return Ok(Box::new(EmptyQuery));
    };
    let terms = values
        .iter()
        .map(|v| term_for(&field, &mapping, v, cx))
        .collect::<Result<Vec<_>, _>>()?;
    boosted(
        Box::new(ConstScoreQuery::new(
            Box::new(TermSetQuery::new(terms)),
            1.0,
        )),
        params,
    )
}

/// The clauses a text analyses into, or the one term of any other kind.
fn analyzed_terms(
    field: &SchemaField,
    mapping: &Field,
    value: &Value,
    cx: &Context<'_>,
) -> Result<Vec<Term>, SearchError> {
    if field.kind == Kind::Text {
        Ok(analyze(&text_of(value))
            .iter()
            .map(|w| Term::from_field_text(field.field, w))
            .collect())
    } else {
        Ok(vec![term_for(field, mapping, value, cx)?])
    }
}

/// `minimum_should_match`: a count, a negative count, or a percentage.
fn minimum_should_match(
    value: Option<&Value>,
    clauses: usize,
) -> Result<Option<usize>, SearchError> {
    let Some(value) = value else { return Ok(None) };
    let text = text_of(value);
    let bad = || SearchError::illegal_argument(format!("Invalid minimum_should_match [{text}]"));
    let n = if let Some(pct) = text.strip_suffix('%') {
        let pct: i64 = pct.trim().parse().map_err(|_| bad())?;
        let count = (clauses as i64 * pct.abs()) / 100;
        if pct < 0 {
            clauses as i64 - count
        } else {
            count
        }
    } else {
        let n: i64 = text.trim().parse().map_err(|_| bad())?;
        if n < 0 { clauses as i64 + n } else { n }
    };
    Ok(Some(usize::try_from(n.max(0)).unwrap_or(0).min(clauses)))
}

fn match_query(
    path: &str,
    params: &Map<String, Value>,
    cx: &Context<'_>,
) -> Result<Compiled, SearchError> {
    check_keys(
        "match",
        params,
        &[
            "query",
            "operator",
            "minimum_should_match",
            "boost",
            "lenient",
            "analyzer",
            "_name",
        ],
    )?;
    if let Some(a) = params.get("analyzer").and_then(Value::as_str)
        && a != "standard"
    {
        return Err(SearchError::unsupported("analyzer", a));
    }
    let value = params
        .get("query")
        .ok_or_else(|| SearchError::parsing("No text specified for text query"))?;
    let Some((field, mapping)) = resolve(path, cx)? else {
        return Ok(Box::new(EmptyQuery));
    };
    let lenient = params.get("lenient").and_then(Value::as_bool) == Some(true);
    let terms = match analyzed_terms(&field, &mapping, value, cx) {
        Ok(t) => t,
        Err(_) if lenient => return Ok(Box::new(EmptyQuery)),
        Err(e) => return Err(e),
    };
    if terms.is_empty() {
        return Ok(Box::new(EmptyQuery));
    }
    let and = match params
        .get("operator")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
    {
        None => false,
        Some(op) if op == "or" => false,
        Some(op) if op == "and" => true,
        Some(op) => {
            return Err(SearchError::illegal_argument(format!(
                "operator needs to be either and or or, but was [{op}]"
            )));
        }
    };
    let occur = if and { Occur::Must } else { Occur::Should };
    let count = terms.len();
    let clauses: Vec<(Occur, Compiled)> = terms
        .into_iter()
        .map(|t| {
            (
                occur,
                Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs)) as Compiled,
            )
        })
        .collect();
    let mut q = BooleanQuery::new(clauses);
    if !and && let Some(min) = minimum_should_match(params.get("minimum_should_match"), count)? {
        q.set_minimum_number_should_match(min.max(1));
    }
    boosted(Box::new(q), params)
}

fn phrase_query(
    path: &str,
    params: &Map<String, Value>,
    cx: &Context<'_>,
) -> Result<Compiled, SearchError> {
    check_keys(
        "match_phrase",
        params,
        &["query", "slop", "boost", "analyzer", "_name"],
    )?;
    let value = params
        .get("query")
        .ok_or_else(|| SearchError::parsing("No text specified for text query"))?;
    let Some((field, mapping)) = resolve(path, cx)? else {
        return Ok(Box::new(EmptyQuery));
    };
    let terms = analyzed_terms(&field, &mapping, value, cx)?;
    let q: Compiled = match terms.len() {
        0 => Box::new(EmptyQuery),
        1 => Box::new(TermQuery::new(
            terms[0].clone(),
            IndexRecordOption::WithFreqs,
        )),
        _ => {
            let mut q = PhraseQuery::new(terms);
            if let Some(slop) = params.get("slop").and_then(Value::as_u64) {
                q.set_slop(u32::try_from(slop).unwrap_or(u32::MAX));
            }
            Box::new(q)
        }
    };
    boosted(q, params)
}

/// The fields a `multi_match` or `query_string` names (`title^2`, `msg*`),
/// with their boosts; `*` or none: every text and keyword field.
fn expand_fields(names: &[String], cx: &Context<'_>) -> Vec<(String, f32)> {
    let searchable = |kind: Kind| matches!(kind, Kind::Text | Kind::Keyword);
    let all: Vec<(&String, Kind)> = cx.index.fields().iter().map(|(p, f)| (p, f.kind)).collect();
    if names.is_empty() {
        return all
            .iter()
            .filter(|(_, k)| searchable(*k))
            .map(|(p, _)| ((*p).clone(), 1.0))
            .collect();
    }
    let mut out = Vec::new();
    for name in names {
        let (pattern, boost) = match name.split_once('^') {
            Some((p, b)) => (p, b.parse::<f32>().unwrap_or(1.0)),
            None => (name.as_str(), 1.0),
        };
        if pattern.contains('*') {
            for (path, kind) in &all {
                if searchable(*kind) && glob(pattern, path) {
                    out.push(((*path).clone(), boost));
                }
            }
        } else {
            out.push((pattern.to_string(), boost));
        }
    }
    out
}

fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head)
                && (0..=text.len() - head.len()).any(|i| {
                    text.get(head.len() + i..)
                        .is_some_and(|rest| glob(tail, rest))
                })
        }
    }
}

fn multi_match(params: &Map<String, Value>, cx: &Context<'_>) -> Result<Compiled, SearchError> {
    check_keys(
        "multi_match",
        params,
        &[
            "query",
            "fields",
            "type",
            "operator",
            "minimum_should_match",
            "tie_breaker",
            "boost",
            "lenient",
            "_name",
        ],
    )?;
    let query = params
        .get("query")
        .ok_or_else(|| SearchError::parsing("[multi_match] requires query value"))?;
    let names: Vec<String> = match params.get("fields") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items.iter().map(text_of).collect(),
        Some(other) => {
            return Err(SearchError::parsing(format!(
                "[multi_match] [fields] must be an array, not {other}"
            )));
        }
    };
    let kind = params
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("best_fields");
    let mut per_field = Map::new();
    per_field.insert("query".into(), query.clone());
    for key in ["operator", "minimum_should_match"] {
        if let Some(v) = params.get(key) {
            per_field.insert(key.into(), v.clone());
        }
    }
    // Fields given by pattern, or none, are read leniently, as
    // Elasticsearch does for `*`.
    let lenient = names.is_empty()
        || names.iter().any(|n| n.contains('*'))
        || params.get("lenient").and_then(Value::as_bool) == Some(true);
    let mut disjuncts: Vec<Compiled> = Vec::new();
    for (path, boost) in expand_fields(&names, cx) {
        let q = match kind {
            "best_fields" | "most_fields" => match_query(&path, &per_field, cx),
            "phrase" => {
                let mut p = Map::new();
                p.insert("query".into(), query.clone());
                phrase_query(&path, &p, cx)
            }
            other => return Err(SearchError::unsupported("multi_match type", other)),
        };
        match q {
            Ok(q) => disjuncts.push(Box::new(BoostQuery::new(q, boost))),
            Err(_) if lenient => {}
            Err(e) => return Err(e),
        }
    }
    if disjuncts.is_empty() {
        return Ok(Box::new(EmptyQuery));
    }
    let q: Compiled = if kind == "most_fields" {
        Box::new(BooleanQuery::new(
            disjuncts.into_iter().map(|q| (Occur::Should, q)).collect(),
        ))
    } else {
        let tie = params
            .get("tie_breaker")
            .and_then(Value::as_f64)
            .unwrap_or(0.0) as f32;
        Box::new(DisjunctionMaxQuery::with_tie_breaker(disjuncts, tie))
    };
    boosted(q, params)
}

fn range_query(
    path: &str,
    params: &Map<String, Value>,
    cx: &Context<'_>,
) -> Result<Compiled, SearchError> {
    check_keys(
        "range",
        params,
        &[
            "gte",
            "gt",
            "lte",
            "lt",
            "from",
            "to",
            "include_lower",
            "include_upper",
            "format",
            "boost",
            "relation",
            "_name",
        ],
    )?;
    if let Some(r) = params.get("relation").and_then(Value::as_str)
        && r != "intersects"
    {
        return Err(SearchError::unsupported("range relation", r));
    }
    let Some((field, mapping)) = resolve(path, cx)? else {
        return Ok(Box::new(EmptyQuery));
    };
    let format = params
        .get("format")
        .and_then(Value::as_str)
        .map_or_else(|| mapping.date_format().to_string(), str::to_string);
    let lower = match (params.get("gte"), params.get("gt"), params.get("from")) {
        (Some(v), _, _) => Some((v, true)),
        (None, Some(v), _) => Some((v, false)),
        (None, None, Some(v)) if !v.is_null() => Some((
            v,
            params.get("include_lower").and_then(Value::as_bool) != Some(false),
        )),
        _ => None,
    };
    let upper = match (params.get("lte"), params.get("lt"), params.get("to")) {
        (Some(v), _, _) => Some((v, true)),
        (None, Some(v), _) => Some((v, false)),
        (None, None, Some(v)) if !v.is_null() => Some((
            v,
            params.get("include_upper").and_then(Value::as_bool) != Some(false),
        )),
        _ => None,
    };
    let bound =
        |side: Option<(&Value, bool)>, is_lower: bool| -> Result<Bound<Term>, SearchError> {
            let Some((value, inclusive)) = side else {
                return Ok(Bound::Unbounded);
            };
            let f = field.field;
            let wrap = |t: Term| {
                if inclusive {
                    Bound::Included(t)
                } else {
                    Bound::Excluded(t)
                }
            };
            let bad = || {
                SearchError::query_shard(format!(
                    "failed to create query: For input string: \"{}\"",
                    text_of(value)
                ))
            };
            Ok(match field.kind {
                Kind::Text | Kind::Keyword => wrap(Term::from_field_text(f, &text_of(value))),
                Kind::Long => {
                    let x = match value {
                        Value::Number(n) => n.as_f64(),
                        Value::String(s) => s.trim().parse::<f64>().ok(),
                        _ => None,
                    }
                    .ok_or_else(bad)?;
                    // A fractional bound on a whole-number field includes what
                    // Elasticsearch includes: `gte 1.5` starts at 2.
                    let n = match (is_lower, inclusive) {
                        (true, true) => x.ceil(),
                        (true, false) => x.floor() + 1.0,
                        (false, true) => x.floor(),
                        (false, false) => x.ceil() - 1.0,
                    };
                    Bound::Included(Term::from_field_i64(
                        f,
                        n.clamp(i64::MIN as f64, i64::MAX as f64) as i64,
                    ))
                }
                Kind::Double => {
                    let x = match value {
                        Value::Number(n) => n.as_f64(),
                        Value::String(s) => s.trim().parse::<f64>().ok(),
                        _ => None,
                    }
                    .ok_or_else(bad)?;
                    wrap(Term::from_field_f64(f, x))
                }
                Kind::Boolean => wrap(term_for(&field, &mapping, value, cx)?),
                Kind::Date => {
                    // `gt` and `lte` round date math up, the others down.
                    let round_up = is_lower != inclusive;
                    let ms = dates::parse_bound(value, &format, round_up, cx.now_millis)?;
                    wrap(Term::from_field_date(
                        f,
                        DateTime::from_timestamp_millis(ms),
                    ))
                }
            })
        };
    let (lo, hi) = (bound(lower, true)?, bound(upper, false)?);
    let q: Compiled = if matches!((&lo, &hi), (Bound::Unbounded, Bound::Unbounded)) {
        exists_query(path, cx)
    } else {
        Box::new(ConstScoreQuery::new(Box::new(RangeQuery::new(lo, hi)), 1.0))
    };
    boosted(q, params)
}

fn exists_query(path: &str, cx: &Context<'_>) -> Compiled {
    let term = Term::from_field_text(cx.index.field_names_field(), path);
    Box::new(ConstScoreQuery::new(
        Box::new(TermQuery::new(term, IndexRecordOption::Basic)),
        1.0,
    ))
}

fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~\"<>@".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn wildcard_regex(pattern: &str) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push_str(&regex_escape(&next.to_string()));
                }
            }
            other => out.push_str(&regex_escape(&other.to_string())),
        }
    }
    out
}

/// A prefix or wildcard, as a regular expression over the field's terms
/// (keyword and text fields only, as in Elasticsearch).
fn pattern_query(
    path: &str,
    regex: &str,
    insensitive: bool,
    cx: &Context<'_>,
) -> Result<Compiled, SearchError> {
    let Some((field, _)) = resolve(path, cx)? else {
        return Ok(Box::new(EmptyQuery));
    };
    if !matches!(field.kind, Kind::Text | Kind::Keyword) {
        return Err(SearchError::query_shard(format!(
            "Can only use wildcard, prefix and case-insensitive term queries on keyword and text fields - not on [{path}] which is of a numeric, date or boolean type"
        )));
    }
    let regex = if insensitive {
        format!("(?i){regex}")
    } else {
        regex.to_string()
    };
    let q = RegexQuery::from_pattern(&regex, field.field)
        .map_err(|e| SearchError::query_shard(format!("failed to create query: {e}")))?;
    Ok(Box::new(ConstScoreQuery::new(Box::new(q), 1.0)))
}

fn clauses(value: Option<&Value>, cx: &Context<'_>) -> Result<Vec<Compiled>, SearchError> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(|q| compile(q, cx)).collect(),
        Some(one) => Ok(vec![compile(one, cx)?]),
    }
}

fn bool_query(params: &Map<String, Value>, cx: &Context<'_>) -> Result<Compiled, SearchError> {
    check_keys(
        "bool",
        params,
        &[
            "must",
            "filter",
            "should",
            "must_not",
            "minimum_should_match",
            "boost",
            "_name",
            "adjust_pure_negative",
        ],
    )?;
    let must = clauses(params.get("must"), cx)?;
    let filter = clauses(params.get("filter"), cx)?;
    let should = clauses(params.get("should"), cx)?;
    let must_not = clauses(params.get("must_not"), cx)?;
    let positive = !must.is_empty() || !filter.is_empty();
    let should_count = should.len();
    let mut all: Vec<(Occur, Compiled)> = Vec::new();
    let scoring = !must.is_empty() || !should.is_empty();
    all.extend(must.into_iter().map(|q| (Occur::Must, q)));
    all.extend(filter.into_iter().map(|q| {
        (
            Occur::Must,
            Box::new(ConstScoreQuery::new(q, 0.0)) as Compiled,
        )
    }));
    all.extend(must_not.into_iter().map(|q| (Occur::MustNot, q)));
    // Should clauses are optional beside must or filter clauses, required
    // (one at least) alone; `minimum_should_match` overrides both.
    let min = minimum_should_match(params.get("minimum_should_match"), should_count)?
        .unwrap_or(usize::from(!positive && should_count > 0));
    all.extend(should.into_iter().map(|q| (Occur::Should, q)));
    if !positive && should_count == 0 {
        // Only must_not (or nothing): everything else matches, scoring 0
        // when there are exclusions, 1 for an empty bool.
        let score = if all.is_empty() { 1.0 } else { 0.0 };
        all.push((
            Occur::Must,
            Box::new(ConstScoreQuery::new(Box::new(AllQuery), score)),
        ));
    }
    let _ = scoring;
    let mut q = BooleanQuery::new(all);
    if min > 0 {
        if min > should_count {
            return Ok(Box::new(EmptyQuery));
        }
        q.set_minimum_number_should_match(min);
    }
    boosted(Box::new(q), params)
}

/// `query_string` and the `?q=` shorthand, read by the search library's
/// own Lucene-like query parser.
fn query_string(params: &Map<String, Value>, cx: &Context<'_>) -> Result<Compiled, SearchError> {
    check_keys(
        "query_string",
        params,
        &[
            "query",
            "default_field",
            "fields",
            "default_operator",
            "lenient",
            "boost",
            "analyze_wildcard",
            "_name",
        ],
    )?;
    let text = params
        .get("query")
        .and_then(Value::as_str)
        .ok_or_else(|| SearchError::parsing("[query_string] requires query value"))?;
    let mut names: Vec<String> = match params.get("fields") {
        Some(Value::Array(items)) => items.iter().map(text_of).collect(),
        _ => Vec::new(),
    };
    if let Some(df) = params.get("default_field").and_then(Value::as_str)
        && df != "*"
    {
        names.push(df.to_string());
    }
    let fields = expand_fields(&names, cx);
    let schema_fields: Vec<tantivy::schema::Field> = fields
        .iter()
        .filter_map(|(p, _)| cx.index.field(p).map(|f| f.field))
        .collect();
    let mut parser = QueryParser::for_index(cx.index.tantivy(), schema_fields);
    for (path, boost) in &fields {
        if let Some(f) = cx.index.field(path)
            && *boost != 1.0
        {
            parser.set_field_boost(f.field, *boost);
        }
    }
    match params
        .get("default_operator")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
    {
        None => {}
        Some(op) if op == "or" => {}
        Some(op) if op == "and" => parser.set_conjunction_by_default(),
        Some(op) => {
            return Err(SearchError::illegal_argument(format!(
                "No enum constant org.elasticsearch.index.query.Operator.{}",
                op.to_ascii_uppercase()
            )));
        }
    }
    let q = parser
        .parse_query(text)
        .map_err(|e| SearchError::query_shard(format!("Failed to parse query [{text}]: {e}")))?;
    boosted(q, params)
}

/// The `?q=` shorthand as a `query_string` clause.
pub fn from_q(q: &str, df: Option<&str>, default_operator: Option<&str>) -> Value {
    let mut params = Map::new();
    params.insert("query".into(), Value::String(q.to_string()));
    if let Some(df) = df {
        params.insert("default_field".into(), Value::String(df.to_string()));
    }
    if let Some(op) = default_operator {
        params.insert("default_operator".into(), Value::String(op.to_string()));
    }
    let mut clause = Map::new();
    clause.insert("query_string".into(), Value::Object(params));
    Value::Object(clause)
}

#[cfg(test)]
mod tests {
    type TestResult = Result<(), Box<dyn std::error::Error>>;
    use super::*;

    #[test]
    fn globs_and_wildcards() -> TestResult {
        assert!(glob("msg*", "msg.keyword"));
        assert!(glob("*", "a"));
        assert!(!glob("m*x", "msg"));
        assert_eq!(wildcard_regex("a*b?.c"), "a.*b.\\.c");
        Ok(())
    }

    #[test]
    fn minimum_should_match_reads_counts_and_percentages() -> TestResult {
        assert_eq!(minimum_should_match(Some(&Value::from(2)), 4)?, Some(2));
        assert_eq!(minimum_should_match(Some(&Value::from("-1")), 4)?, Some(3));
        assert_eq!(minimum_should_match(Some(&Value::from("75%")), 4)?, Some(3));
        assert!(minimum_should_match(Some(&Value::from("x")), 4).is_err());
        Ok(())
    }
}
