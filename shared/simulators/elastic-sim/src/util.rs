//! Small parsers and checks shared by the APIs: path segments, query
//! values, names, wildcards, ids and sizes.

use crate::error::ApiError;
use base64::Engine;
use serde_json::Value;
use std::time::Duration;

/// Splits a request path into its segments, percent-decoding each one on
/// its own so that an encoded `/` stays inside its segment (date-math
/// snapshot names are sent that way).
pub fn path_segments(path: &str) -> Result<Vec<String>, ApiError> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect()
}

fn percent_decode(segment: &str) -> Result<String, ApiError> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    ApiError::illegal_argument(format!(
                        "partial escape sequence at end of string: {segment}"
                    ))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| ApiError::illegal_argument(format!("invalid UTF-8 in path: {segment}")))
}

/// Elasticsearch's strict booleans: `true`, `false`, or an empty value
/// (a bare `?flag`), which means true.
pub fn parse_bool(name: &str, value: Option<&String>, default: bool) -> Result<bool, ApiError> {
    match value.map(String::as_str) {
        None => Ok(default),
        Some("" | "true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(ApiError::illegal_argument(format!(
            "Failed to parse value [{other}] as only [true] or [false] are allowed for [{name}]"
        ))),
    }
}

/// A body field that must be a boolean when present.
pub fn body_bool(body: &Value, field: &str, default: bool) -> Result<bool, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(other) => Err(ApiError::x_content_parse(format!(
            "[{field}] failed to parse field: {other} is not a boolean"
        ))),
    }
}

/// A body field holding names: a comma-separated string or an array.
pub fn body_names(body: &Value, field: &str) -> Result<Vec<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(split_names(s)),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::x_content_parse(format!("[{field}] must hold strings, not {item}"))
                })
            })
            .collect(),
        Some(other) => Err(ApiError::x_content_parse(format!(
            "[{field}] must be a string or an array of strings, not {other}"
        ))),
    }
}

pub fn body_string(body: &Value, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ApiError::x_content_parse(format!(
            "[{field}] must be a string, not {other}"
        ))),
    }
}

pub fn split_names(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Elasticsearch time values (`30s`, `100ms`, `1m`, `-1`).
pub fn parse_time(name: &str, value: &str) -> Result<Duration, ApiError> {
    let bad = || {
        ApiError::parse(format!(
            "failed to parse setting [{name}] with value [{value}] as a time value: unit is missing or unrecognized"
        ))
    };
    if value == "-1" || value == "0" {
        return Ok(Duration::ZERO);
    }
    let split = value
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .ok_or_else(bad)?;
    let (number, unit) = value.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let millis = match unit {
        "nanos" => number / 1_000_000.0,
        "micros" => number / 1_000.0,
        "ms" => number,
        "s" => number * 1_000.0,
        "m" => number * 60_000.0,
        "h" => number * 3_600_000.0,
        "d" => number * 86_400_000.0,
        _ => return Err(bad()),
    };
    if !millis.is_finite() || millis < 0.0 {
        return Err(bad());
    }
    // Whole milliseconds are all a wait needs.
    Ok(Duration::from_millis(millis as u64))
}

/// `*` matches any run of characters; nothing else is special.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// What an index expression (`a,b`, `logs-*`, `-logs-old`, `_all`) picks
/// out of `names`, in the order given. Explicit names that do not exist are
/// returned in `missing` (the caller decides whether that is an error);
/// wildcards that match nothing are not an error, as on Elasticsearch.
pub struct Resolved {
    pub names: Vec<String>,
    pub missing: Vec<String>,
}

pub fn resolve_expression(expressions: &[String], names: &[String]) -> Resolved {
    let mut picked: Vec<String> = Vec::new();
    let mut missing = Vec::new();
    let all = expressions.is_empty()
        || (expressions.len() == 1 && matches!(expressions[0].as_str(), "_all" | "*"));
    if all {
        return Resolved {
            names: names.to_vec(),
            missing,
        };
    }
    for (position, expression) in expressions.iter().enumerate() {
        // A leading `-` excludes, except as the very first expression,
        // where Elasticsearch reads it as part of a name.
        if let Some(excluded) = expression.strip_prefix('-').filter(|_| position > 0) {
            picked.retain(|name| !glob_match(excluded, name));
            continue;
        }
        if expression.contains('*') {
            for name in names {
                if glob_match(expression, name) && !picked.contains(name) {
                    picked.push(name.clone());
                }
            }
        } else if names.contains(expression) {
            if !picked.contains(expression) {
                picked.push(expression.clone());
            }
        } else {
            missing.push(expression.clone());
        }
    }
    Resolved {
        names: picked,
        missing,
    }
}

/// Elasticsearch's rules for index names, with its messages.
pub fn check_index_name(name: &str) -> Result<(), ApiError> {
    let refuse = |why: &str| Err(ApiError::invalid_index_name(name, why));
    if name.is_empty() {
        return refuse("must not be empty");
    }
    if name.to_lowercase() != name {
        return refuse("must be lowercase");
    }
    const FORBIDDEN: [char; 10] = ['\\', '/', '*', '?', '"', '<', '>', '|', ' ', ','];
    if name.contains(FORBIDDEN) {
        return refuse(
            "must not contain the following characters [ , \", *, \\, <, |, ,, >, /, ?]",
        );
    }
    if name.contains('#') {
        return refuse("must not contain '#'");
    }
    if name.contains(':') {
        return refuse("must not contain ':'");
    }
    if name.starts_with(['_', '-', '+']) {
        return refuse("must not start with '_', '-', or '+'");
    }
    if name == "." || name == ".." {
        return refuse("must not be '.' or '..'");
    }
    if name.len() > 255 {
        return refuse("index name is too long, (> 255)");
    }
    Ok(())
}

/// Elasticsearch's rules for a snapshot name to create, in the order it
/// checks them; `Err` holds the explanation for
/// `invalid_snapshot_name_exception`.
pub fn check_snapshot_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("cannot be empty");
    }
    if name.contains(char::is_whitespace) {
        return Err("must not contain whitespace");
    }
    if name.contains(',') {
        return Err("must not contain ','");
    }
    if name.contains('#') {
        return Err("must not contain '#'");
    }
    if name.starts_with('_') {
        return Err("must not start with '_'");
    }
    if name.to_lowercase() != name {
        return Err("must be lowercase");
    }
    const FORBIDDEN: [char; 8] = ['\\', '/', '*', '?', '"', '<', '>', '|'];
    if name.contains(FORBIDDEN) {
        return Err("must not contain the following characters [ , \", *, \\, <, |, ,, >, /, ?]");
    }
    Ok(())
}

/// Elasticsearch's ids are 20 or 22 URL-safe base64 characters.
pub fn new_uuid() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

/// Auto-generated document ids: time-ordered, 20 characters like
/// Elasticsearch's.
pub fn new_doc_id() -> String {
    let bytes = uuid::Uuid::now_v7().into_bytes();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes[..15])
}

pub fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub fn iso_millis(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Lucene files a shard of this size would have: enough to make file
/// counts in recovery and snapshot status move with the data.
pub fn file_count(bytes: u64) -> u64 {
    1 + bytes / 65_536
}

/// A percentage as Elasticsearch prints it in `_recovery`.
pub fn percent(done: u64, total: u64) -> String {
    if total == 0 {
        return "0.0%".to_string();
    }
    format!("{:.1}%", (done as f64) * 100.0 / (total as f64))
}

/// A byte count as the `_cat` APIs show it: in the unit `?bytes=` asks
/// for (whole units, rounded down), or, without it, in Elasticsearch's
/// human form (`225b`, `4.5kb`, `1gb`: the largest unit that keeps the
/// number at least 1, one decimal, a trailing `.0` dropped).
pub fn byte_size(bytes: u64, unit: Option<&String>) -> Result<String, ApiError> {
    const UNITS: [(&str, u64); 6] = [
        ("b", 1),
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("tb", 1 << 40),
        ("pb", 1 << 50),
    ];
    if let Some(unit) = unit {
        let Some((_, divisor)) = UNITS.iter().find(|(u, _)| u == unit) else {
            return Err(ApiError::illegal_argument(format!(
                "failed to parse [{unit}] as a byte size unit"
            )));
        };
        return Ok((bytes / divisor).to_string());
    }
    let (suffix, divisor) = UNITS
        .iter()
        .rev()
        .find(|(_, d)| bytes >= *d)
        .copied()
        .unwrap_or(("b", 1));
    if divisor == 1 {
        return Ok(format!("{bytes}b"));
    }
    // Precision loss is irrelevant for a figure shown with one decimal.
    let value = format!("{:.1}", bytes as f64 / divisor as f64);
    let value = value.strip_suffix(".0").unwrap_or(&value);
    Ok(format!("{value}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_decoded_one_by_one() -> Result<(), ApiError> {
        assert_eq!(
            path_segments("/_snapshot/r/%3Cnightly-%7Bnow%2Fd%7D%3E")?,
            vec!["_snapshot", "r", "<nightly-{now/d}>"]
        );
        assert!(path_segments("/a%2").is_err());
        Ok(())
    }

    #[test]
    fn wildcards_and_exclusions() {
        let names: Vec<String> = ["logs-1", "logs-2", "metrics"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let pick = |e: &[&str]| {
            let e: Vec<String> = e.iter().map(|s| s.to_string()).collect();
            let r = resolve_expression(&e, &names);
            (r.names, r.missing)
        };
        assert_eq!(pick(&["logs-*"]).0, vec!["logs-1", "logs-2"]);
        assert_eq!(
            pick(&["*", "-logs-1"]).0,
            vec!["logs-1", "logs-2", "metrics"][1..]
        );
        assert_eq!(pick(&["nope"]).1, vec!["nope"]);
        assert_eq!(pick(&[]).0.len(), 3);
        assert!(glob_match("*-2", "logs-2"));
        assert!(!glob_match("l*x", "logs"));
    }

    #[test]
    fn time_values() -> Result<(), ApiError> {
        assert_eq!(parse_time("t", "30s")?, Duration::from_secs(30));
        assert_eq!(parse_time("t", "150ms")?, Duration::from_millis(150));
        assert_eq!(parse_time("t", "1m")?, Duration::from_secs(60));
        assert!(parse_time("t", "10").is_err());
        Ok(())
    }

    #[test]
    fn names() {
        assert_eq!(check_snapshot_name("Snap"), Err("must be lowercase"));
        assert_eq!(check_snapshot_name("_x"), Err("must not start with '_'"));
        assert_eq!(
            check_snapshot_name("a b"),
            Err("must not contain whitespace")
        );
        assert!(check_snapshot_name("nightly-2024.03.01").is_ok());
        assert!(check_index_name("Logs").is_err());
        assert!(check_index_name("logs-1").is_ok());
    }

    #[test]
    fn byte_sizes_read_as_elasticsearch_writes_them() {
        let human = |n| super::byte_size(n, None).unwrap_or_default();
        assert_eq!(human(225), "225b");
        assert_eq!(human(1024), "1kb");
        assert_eq!(human(4608), "4.5kb");
        assert_eq!(human(3 << 30), "3gb");
        let bytes = "b".to_string();
        assert_eq!(
            super::byte_size(4608, Some(&bytes)).ok().as_deref(),
            Some("4608")
        );
        assert!(super::byte_size(1, Some(&"zb".to_string())).is_err());
    }
}
