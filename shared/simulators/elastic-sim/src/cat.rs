//! The `_cat` APIs' tables, as Elasticsearch's `RestTable` renders them:
//! the default columns (or those `h` picks, by name or alias, wildcards
//! allowed), as JSON objects with `format=json`, else as text with each
//! column padded to its widest cell (numbers aligned right) and a header
//! line with `v`.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::util::{glob_match, parse_bool};
use axum::http::StatusCode;
use serde_json::{Map, Value};

/// One column of a `_cat` table.
pub struct Column {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// Shown when `h` is not given.
    pub default: bool,
    /// Numbers are aligned to the right in text.
    pub right: bool,
}

impl Column {
    pub const fn new(name: &'static str, aliases: &'static [&'static str]) -> Column {
        Column {
            name,
            aliases,
            default: true,
            right: false,
        }
    }

    pub const fn right(mut self) -> Column {
        self.right = true;
        self
    }

    pub const fn hidden(mut self) -> Column {
        self.default = false;
        self
    }
}

/// The columns to show: each `h` entry matched against names and aliases
/// (an entry matching nothing shows nothing, as in Elasticsearch), shown
/// under the name the request used.
fn displayed<'a>(req: &Req, columns: &'a [Column]) -> Vec<(&'a Column, String)> {
    let Some(h) = req.param("h").filter(|h| !h.is_empty()) else {
        return columns
            .iter()
            .filter(|c| c.default)
            .map(|c| (c, c.name.to_string()))
            .collect();
    };
    let mut out: Vec<(&Column, String)> = Vec::new();
    for wanted in h.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if wanted.contains('*') {
            for c in columns.iter().filter(|c| glob_match(wanted, c.name)) {
                if !out.iter().any(|(o, _)| o.name == c.name) {
                    out.push((c, c.name.to_string()));
                }
            }
        } else if let Some(c) = columns
            .iter()
            .find(|c| c.name == wanted || c.aliases.contains(&wanted))
        {
            out.push((c, wanted.to_string()));
        }
    }
    out
}

fn cell(row: &Map<String, Value>, column: &Column) -> Value {
    row.get(column.name).cloned().unwrap_or(Value::Null)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Renders `rows` (every column's value by its name) as the request asks.
pub fn table(req: &Req, columns: &[Column], rows: Vec<Map<String, Value>>) -> ApiResult {
    let shown = displayed(req, columns);
    match req.param("format").map(String::as_str) {
        None | Some("text" | "txt") => {}
        Some("json") => {
            let out = rows
                .iter()
                .map(|row| {
                    let object: Map<String, Value> = shown
                        .iter()
                        .map(|(c, display)| {
                            // Values are strings (or null), as the table keeps them.
                            let value = match cell(row, c) {
                                Value::Null => Value::Null,
                                Value::String(s) => Value::String(s),
                                other => Value::String(other.to_string()),
                            };
                            (display.clone(), value)
                        })
                        .collect();
                    Value::Object(object)
                })
                .collect();
            return Ok(Reply::ok(Value::Array(out)));
        }
        Some(other) => {
            return Err(ApiError::illegal_argument(format!(
                "Unsupported format [{other}]"
            )));
        }
    }
    let header = parse_bool("v", req.param("v"), false)?;
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| shown.iter().map(|(c, _)| text(&cell(row, c))).collect())
        .collect();
    let mut widths: Vec<usize> = shown
        .iter()
        .map(|(_, d)| if header { d.chars().count() } else { 0 })
        .collect();
    for line in &cells {
        for (i, value) in line.iter().enumerate() {
            widths[i] = widths[i].max(value.chars().count());
        }
    }
    let mut out = String::new();
    let write_line = |values: Vec<&str>, out: &mut String| {
        let last = values.len().saturating_sub(1);
        let mut line = String::new();
        for (i, value) in values.iter().enumerate() {
            let pad = widths[i].saturating_sub(value.chars().count());
            if shown[i].0.right {
                line.push_str(&" ".repeat(pad));
                line.push_str(value);
            } else {
                line.push_str(value);
                if i != last {
                    line.push_str(&" ".repeat(pad));
                }
            }
            if i != last {
                line.push(' ');
            }
        }
        out.push_str(&line);
        out.push('\n');
    };
    if header {
        write_line(shown.iter().map(|(_, d)| d.as_str()).collect(), &mut out);
    }
    for line in &cells {
        write_line(line.iter().map(String::as_str).collect(), &mut out);
    }
    Ok(Reply {
        status: StatusCode::OK,
        body: Value::Null,
        text: Some(out),
    })
}

/// A row from `(column, value)` pairs.
pub fn row<const N: usize>(cells: [(&str, Value); N]) -> Map<String, Value> {
    cells.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
