//! Composable index templates and component templates
//! (`_index_template`, `_component_template`), and their application when
//! an index is created: the matching template of highest priority, its
//! component templates in order, then the template's own `template`, with
//! the create request's settings, mappings and aliases over all of them.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ClusterState, Sim, flatten_settings};
use crate::util::{glob_match, parse_bool, split_names};
use serde_json::{Map, Value, json};

/// Keys a composable index template may have.
const INDEX_TEMPLATE_KEYS: &[&str] = &[
    "index_patterns",
    "composed_of",
    "priority",
    "template",
    "version",
    "_meta",
    "data_stream",
    "allow_auto_create",
    "ignore_missing_component_templates",
    "deprecated",
];

/// Keys of a component template.
const COMPONENT_TEMPLATE_KEYS: &[&str] = &["template", "version", "_meta", "deprecated"];

/// Keys of the `template` object both kinds hold.
const TEMPLATE_KEYS: &[&str] = &["settings", "mappings", "aliases", "lifecycle"];

fn check_keys(body: &Value, allowed: &[&str], what: &str) -> Result<(), ApiError> {
    if let Some(map) = body.as_object()
        && let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str()))
    {
        return Err(ApiError::x_content_parse(format!(
            "[{what}] unknown field [{unknown}]"
        )));
    }
    Ok(())
}

fn check_template_object(body: &Value) -> Result<(), ApiError> {
    match body.get("template") {
        None | Some(Value::Null) => Ok(()),
        Some(template @ Value::Object(_)) => check_keys(template, TEMPLATE_KEYS, "template"),
        Some(_) => Err(ApiError::x_content_parse(
            "[template] failed to parse field: expected an object",
        )),
    }
}

/// A stored template's list of names under `key` (`index_patterns`,
/// `composed_of`); none when it has no such list.
fn names(template: &Value, key: &str) -> Vec<String> {
    template
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The index patterns of a stored template.
fn patterns(template: &Value) -> Vec<String> {
    names(template, "index_patterns")
}

fn priority(template: &Value) -> i64 {
    template
        .get("priority")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn composed_of(template: &Value) -> Vec<String> {
    names(template, "composed_of")
}

/// Whether some name matches both patterns (`*` being the only
/// wildcard), as Elasticsearch checks two templates for overlap.
fn patterns_overlap(a: &[char], b: &[char]) -> bool {
    match (a.first(), b.first()) {
        (None, None) => true,
        (Some('*'), _) => {
            patterns_overlap(&a[1..], b) || (!b.is_empty() && patterns_overlap(a, &b[1..]))
        }
        (_, Some('*')) => {
            patterns_overlap(a, &b[1..]) || (!a.is_empty() && patterns_overlap(&a[1..], b))
        }
        (Some(x), Some(y)) => x == y && patterns_overlap(&a[1..], &b[1..]),
        _ => false,
    }
}

fn overlap(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    patterns_overlap(&a, &b)
}

/// `PUT|POST /_index_template/{name}`.
pub fn put_index_template(sim: &Sim, req: &Req, name: &str) -> ApiResult {
    let create = parse_bool("create", req.param("create"), false)?;
    let body = req.json()?;
    check_keys(&body, INDEX_TEMPLATE_KEYS, "index_template")?;
    check_template_object(&body)?;
    let Some(list) = body.get("index_patterns") else {
        return Err(ApiError::x_content_parse(
            "[index_template] failed to parse: Required [index_patterns]",
        ));
    };
    // One pattern may be given as a string.
    let list = match list {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::x_content_parse("[index_patterns] must hold strings"))
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ApiError::x_content_parse(
                "[index_patterns] must be a string or an array of strings",
            ));
        }
    };
    if list.is_empty() {
        return Err(ApiError::validation("index patterns are missing"));
    }
    if let Some(p) = body.get("priority")
        && p.as_i64().is_none_or(|p| p < 0)
    {
        return Err(ApiError::validation("index template priority must be >= 0"));
    }
    let mut stored = body.clone();
    stored["index_patterns"] = json!(list);
    if stored.get("composed_of").is_none() {
        stored["composed_of"] = json!([]);
    }
    let mut state = sim.state();
    if create && state.index_templates.contains_key(name) {
        return Err(ApiError::illegal_argument(format!(
            "index template [{name}] already exists"
        )));
    }
    let missing: Vec<String> = composed_of(&stored)
        .into_iter()
        .filter(|c| !state.component_templates.contains_key(c))
        .collect();
    if !missing.is_empty() && stored.get("ignore_missing_component_templates").is_none() {
        return Err(ApiError::invalid_index_template(
            name,
            &format!(
                "index template [{name}] specifies component templates [{}] that do not exist",
                missing.join(", ")
            ),
        ));
    }
    let mine = priority(&stored);
    let mut conflicts = Vec::new();
    for (other, template) in &state.index_templates {
        if other == name || priority(template) != mine {
            continue;
        }
        let theirs = patterns(template);
        if list.iter().any(|p| theirs.iter().any(|q| overlap(p, q))) {
            conflicts.push(format!("{other} => [{}]", theirs.join(", ")));
        }
    }
    if !conflicts.is_empty() {
        let names: Vec<&str> = conflicts
            .iter()
            .filter_map(|c| c.split(" => ").next())
            .collect();
        return Err(ApiError::illegal_argument(format!(
            "index template [{name}] has index patterns [{}] matching patterns from existing templates [{}] with patterns ({}) that have the same priority [{mine}], multiple index templates may not match during index creation, please use a different priority",
            list.join(", "),
            names.join(","),
            conflicts.join(",")
        )));
    }
    state.index_templates.insert(name.to_string(), stored);
    Ok(Reply::acknowledged())
}

/// Names picked by a comma-separated list that may hold wildcards; an
/// explicit name that is absent is `None`.
fn picked<'a>(
    names: impl Iterator<Item = &'a String> + Clone,
    wanted: Option<&str>,
) -> Result<Vec<String>, String> {
    let Some(wanted) = wanted else {
        return Ok(names.cloned().collect());
    };
    let mut out = Vec::new();
    for w in split_names(wanted) {
        if w.contains('*') || w == "_all" {
            let pattern = if w == "_all" { "*" } else { w.as_str() };
            out.extend(names.clone().filter(|n| glob_match(pattern, n)).cloned());
        } else if names.clone().any(|n| *n == w) {
            out.push(w);
        } else {
            return Err(w);
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// `GET /_index_template[/{name}]`.
pub fn get_index_templates(sim: &Sim, name: Option<&str>) -> ApiResult {
    let state = sim.state();
    listed(&state.index_templates, name, "index_template", |missing| {
        format!("index template matching [{missing}] not found")
    })
}

/// The templates of one kind `name` picks (all without one), each as
/// `{"name", "{kind}"}` under `{kind}s`; `not_found` words the error for a
/// name that matches none.
fn listed(
    templates: &std::collections::BTreeMap<String, Value>,
    name: Option<&str>,
    kind: &str,
    not_found: impl Fn(&str) -> String,
) -> ApiResult {
    let names = picked(templates.keys(), name)
        .map_err(|missing| ApiError::resource_not_found(&not_found(&missing)))?;
    let listed: Vec<Value> = names
        .iter()
        .filter_map(|n| templates.get(n).map(|t| json!({ "name": n, kind: t })))
        .collect();
    Ok(Reply::ok(json!({ format!("{kind}s"): listed })))
}

/// `DELETE /_index_template/{name}` (names and wildcards, comma-separated).
pub fn delete_index_template(sim: &Sim, name: &str) -> ApiResult {
    let mut state = sim.state();
    let names = picked(state.index_templates.keys(), Some(name))
        .map_err(|missing| ApiError::index_template_missing(&missing))?;
    if names.is_empty() {
        return Err(ApiError::index_template_missing(name));
    }
    for n in names {
        state.index_templates.remove(&n);
    }
    Ok(Reply::acknowledged())
}

/// `PUT|POST /_component_template/{name}`.
pub fn put_component_template(sim: &Sim, req: &Req, name: &str) -> ApiResult {
    let create = parse_bool("create", req.param("create"), false)?;
    let body = req.json()?;
    check_keys(&body, COMPONENT_TEMPLATE_KEYS, "component_template")?;
    if body.get("template").is_none_or(|t| !t.is_object()) {
        return Err(ApiError::x_content_parse(
            "[component_template] failed to parse: Required [template]",
        ));
    }
    check_template_object(&body)?;
    let mut state = sim.state();
    if create && state.component_templates.contains_key(name) {
        return Err(ApiError::illegal_argument(format!(
            "component template [{name}] already exists"
        )));
    }
    state.component_templates.insert(name.to_string(), body);
    Ok(Reply::acknowledged())
}

/// `GET /_component_template[/{name}]`.
pub fn get_component_templates(sim: &Sim, name: Option<&str>) -> ApiResult {
    let state = sim.state();
    listed(
        &state.component_templates,
        name,
        "component_template",
        |missing| format!("component template matching [{missing}] not found"),
    )
}

/// `DELETE /_component_template/{name}`: refused while an index template
/// is composed of it.
pub fn delete_component_template(sim: &Sim, name: &str) -> ApiResult {
    let mut state = sim.state();
    let names = picked(state.component_templates.keys(), Some(name))
        .map_err(|missing| ApiError::resource_not_found(&missing))?;
    if names.is_empty() {
        return Err(ApiError::resource_not_found(name));
    }
    let users: Vec<String> = state
        .index_templates
        .iter()
        .filter(|(_, t)| composed_of(t).iter().any(|c| names.contains(c)))
        .map(|(n, _)| n.clone())
        .collect();
    if !users.is_empty() {
        return Err(ApiError::illegal_argument(format!(
            "component templates [{}] cannot be removed as they are still in use by index templates [{}]",
            names.join(", "),
            users.join(", ")
        )));
    }
    for n in names {
        state.component_templates.remove(&n);
    }
    Ok(Reply::acknowledged())
}

/// Merges `over` into `base`: objects key by key, anything else replaced,
/// as Elasticsearch merges mappings from templates and the request.
fn deep_merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        deep_merge(existing, value);
                    }
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

/// What one layer (a component template, a template, the request) adds.
fn layer(
    settings: &mut Map<String, Value>,
    mappings: &mut Value,
    aliases: &mut Map<String, Value>,
    from: &Value,
) {
    for (k, v) in flatten_settings(from.get("settings").unwrap_or(&Value::Null)) {
        settings.insert(k, Value::String(v));
    }
    if let Some(m) = from.get("mappings").filter(|m| m.is_object()) {
        deep_merge(mappings, m);
    }
    if let Some(Value::Object(a)) = from.get("aliases") {
        for (k, v) in a {
            aliases.insert(k.clone(), v.clone());
        }
    }
}

/// The index template that applies to a new index `name`: the one of
/// highest priority among those whose patterns match it.
fn matching_template<'a>(state: &'a ClusterState, name: &str) -> Option<(&'a String, &'a Value)> {
    state
        .index_templates
        .iter()
        .filter(|(_, t)| patterns(t).iter().any(|p| glob_match(p, name)))
        .max_by_key(|(_, t)| priority(t))
}

/// The create body of a new index `name` with the matching template's
/// settings, mappings and aliases under the request's own (`body`), and
/// the checks Elasticsearch makes of a new index's name and aliases.
/// Every path that creates an index calls this: `PUT /{index}`, the first
/// document written, and `_bulk`.
pub fn apply(state: &ClusterState, name: &str, body: &Value) -> Result<Value, ApiError> {
    if crate::resolve::alias_names(state).iter().any(|a| a == name) {
        return Err(ApiError::invalid_index_name(
            name,
            "already exists as alias",
        ));
    }
    let merged = match matching_template(state, name) {
        None => body.clone(),
        Some((_, template)) => {
            let (mut settings, mut mappings, mut aliases) = (Map::new(), json!({}), Map::new());
            for component in composed_of(template) {
                if let Some(c) = state.component_templates.get(&component) {
                    layer(
                        &mut settings,
                        &mut mappings,
                        &mut aliases,
                        c.get("template").unwrap_or(&Value::Null),
                    );
                }
            }
            let own = template.get("template").unwrap_or(&Value::Null);
            layer(&mut settings, &mut mappings, &mut aliases, own);
            layer(&mut settings, &mut mappings, &mut aliases, body);
            let mut out = json!({ "settings": settings, "aliases": aliases });
            if mappings.as_object().is_some_and(|m| !m.is_empty()) {
                out["mappings"] = mappings;
            }
            out
        }
    };
    if let Some(Value::Object(aliases)) = merged.get("aliases")
        && let Some(clash) = aliases
            .keys()
            .find(|a| state.indices.contains_key(*a) || *a == name)
    {
        return Err(ApiError::invalid_alias_name(clash));
    }
    Ok(merged)
}

/// `POST /_index_template/_simulate_index/{name}`: what an index of that
/// name would be created with.
pub fn simulate_index(sim: &Sim, name: &str) -> ApiResult {
    let state = sim.state();
    let merged = apply(&state, name, &json!({}))?;
    let index = crate::indices::index_from_body(&merged)?;
    let mut settings = index.settings_json(name);
    // Only what the templates set: what an index gets when it is made
    // (uuid, creation date) is not part of a simulation.
    if let Some(inner) = settings.get_mut("index").and_then(Value::as_object_mut) {
        for key in ["uuid", "provided_name", "creation_date"] {
            inner.remove(key);
        }
    }
    let overlapping: Vec<Value> = match matching_template(&state, name) {
        None => Vec::new(),
        Some((chosen, _)) => state
            .index_templates
            .iter()
            .filter(|(n, t)| *n != chosen && patterns(t).iter().any(|p| glob_match(p, name)))
            .map(|(n, t)| json!({ "name": n, "index_patterns": patterns(t) }))
            .collect(),
    };
    Ok(Reply::ok(json!({
        "template": {
            "settings": settings,
            "mappings": index.mappings.to_json(),
            "aliases": index.aliases,
        },
        "overlapping": overlapping,
    })))
}

/// The index a write creates when `name` does not exist: what the
/// matching template makes of an empty create body.
pub fn new_index(state: &ClusterState, name: &str) -> Result<crate::state::Index, ApiError> {
    crate::indices::index_from_body(&apply(state, name, &json!({}))?)
}
