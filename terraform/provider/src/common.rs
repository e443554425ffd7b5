//! What every resource and data source shares: the configured client, the
//! value types of the plugin protocol, and the translation of the API's
//! errors into diagnostics that point at the configuration's attribute.

use crate::client::{CallError, Client};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

/// A string, number or flag that Terraform may hold as null or unknown.
pub type Str = Value<String>;
pub type Num = Value<i64>;
pub type Flag = Value<bool>;
pub type StrList = Value<Vec<Str>>;

/// The provider's settings once `configure` ran. Resources are made before
/// Terraform configures the provider, so each holds this cell.
#[derive(Clone, Default)]
pub struct Shared(Arc<OnceLock<Configured>>);

pub struct Configured {
    pub client: Client,
    /// How long an apply waits for one of a deployment's plans.
    pub plan_timeout: Duration,
}

impl Shared {
    pub fn set(&self, configured: Configured) -> bool {
        self.0.set(configured).is_ok()
    }

    pub fn get(&self, diags: &mut Diagnostics) -> Option<&Configured> {
        let got = self.0.get();
        if got.is_none() {
            diags.root_error_short("the floe provider is not configured");
        }
        got
    }
}

/// One step of an API error's `fields` entry: `node_groups[0].count` is
/// `node_groups`, index 0, `count`.
#[derive(Debug, PartialEq)]
pub enum Step {
    Name(String),
    Index(i64),
}

pub fn field_steps(field: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in field.split('.') {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            let (name, indices) = rest.split_at(open);
            if !name.is_empty() {
                steps.push(Step::Name(name.to_string()));
            }
            rest = indices;
            for idx in rest.split('[').filter(|s| !s.is_empty()) {
                match idx.trim_end_matches(']').parse::<i64>() {
                    Ok(i) => steps.push(Step::Index(i)),
                    Err(_) => steps.push(Step::Name(idx.trim_end_matches(']').to_string())),
                }
            }
        } else if !rest.is_empty() {
            steps.push(Step::Name(rest.to_string()));
        }
    }
    steps
}

/// Appends `steps` to `path` as they are (names as attributes).
pub fn extend(mut path: AttributePath, steps: &[Step]) -> AttributePath {
    for s in steps {
        path = match s {
            Step::Name(n) => path.attribute(n.clone()),
            Step::Index(i) => path.index(*i),
        };
    }
    path
}

/// Reports a failed call: each of the API's errors as its own diagnostic,
/// on the attribute its field names (through `locate`) when it names one.
pub fn report(
    diags: &mut Diagnostics,
    doing: &str,
    err: &CallError,
    locate: fn(&str) -> Option<AttributePath>,
) {
    if err.items().is_empty() {
        diags.root_error(format!("{doing}: failed"), err.to_string());
        return;
    }
    let status = err.status().unwrap_or_default();
    if status == 412 {
        diags.root_error(
            format!("{doing}: it changed outside Terraform since it was read"),
            format!("{err}. Nothing was changed: run terraform plan again to see the change, then apply."),
        );
        return;
    }
    for item in err.items() {
        let detail = format!("{} ({status} {})", item.message, item.code);
        let at = item.fields.iter().find_map(|f| locate(f));
        match at {
            Some(path) => diags.error(format!("{doing}: {}", item.fields.join(", ")), detail, path),
            None if item.fields.is_empty() => diags.root_error(format!("{doing}: refused"), detail),
            None => diags.root_error(format!("{doing}: {}", item.fields.join(", ")), detail),
        }
    }
}

/// Deletes the resource at `path` at `version` (`If-Match`); one already
/// gone is deleted. What the API refuses is reported as `doing`.
pub async fn delete_at(
    configured: &Configured,
    diags: &mut Diagnostics,
    path: &str,
    version: Option<i64>,
    doing: &str,
    locate: fn(&str) -> Option<AttributePath>,
) -> Option<()> {
    match configured
        .client
        .call(reqwest::Method::DELETE, path, None, version)
        .await
    {
        Ok(_) => Some(()),
        Err(e) if e.is_not_found() => Some(()),
        Err(e) => {
            report(diags, doing, &e, locate);
            None
        }
    }
}

/// A known string of a JSON answer, or null.
pub fn str_of(v: &serde_json::Value) -> Str {
    match v.as_str() {
        Some(s) => Value::Value(s.to_string()),
        None => Value::Null,
    }
}

pub fn num_of(v: &serde_json::Value) -> Num {
    match v.as_i64() {
        Some(n) => Value::Value(n),
        None => Value::Null,
    }
}

pub fn flag_of(v: &serde_json::Value) -> Flag {
    match v.as_bool() {
        Some(b) => Value::Value(b),
        None => Value::Null,
    }
}

pub fn list_of(v: &serde_json::Value) -> StrList {
    match v.as_array() {
        Some(items) => Value::Value(items.iter().map(str_of).collect()),
        None => Value::Null,
    }
}

/// A value's JSON for a request body: null and unknown are absent.
pub fn json_str(v: &Str) -> Option<serde_json::Value> {
    v.as_ref_option()
        .map(|s| serde_json::Value::String(s.clone()))
}

pub fn json_num(v: &Num) -> Option<serde_json::Value> {
    v.as_ref_option().map(|n| serde_json::Value::from(*n))
}

pub fn json_flag(v: &Flag) -> Option<serde_json::Value> {
    v.as_ref_option().map(|b| serde_json::Value::Bool(*b))
}

pub fn json_list(v: &StrList) -> Option<serde_json::Value> {
    v.as_ref_option()
        .map(|items| serde_json::Value::Array(items.iter().filter_map(json_str).collect()))
}

/// Sets `key` of `object` when `value` is known.
pub fn put(
    object: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    value: Option<serde_json::Value>,
) {
    if let Some(v) = value {
        object.insert(key.to_string(), v);
    }
}

/// Whether a value holds anything unknown at plan time (then a plan-time
/// check waits for apply).
pub fn unknown<T>(v: &Value<T>) -> bool {
    v.is_unknown()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_split_into_names_and_indices() {
        assert_eq!(
            field_steps("node_groups[0].storage.size_gb"),
            vec![
                Step::Name("node_groups".into()),
                Step::Index(0),
                Step::Name("storage".into()),
                Step::Name("size_gb".into()),
            ]
        );
        assert_eq!(
            field_steps("metadata.tags[2].key"),
            vec![
                Step::Name("metadata".into()),
                Step::Name("tags".into()),
                Step::Index(2),
                Step::Name("key".into()),
            ]
        );
        assert_eq!(field_steps("name"), vec![Step::Name("name".into())]);
    }
}
