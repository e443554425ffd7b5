//! Index aliases: `POST /_aliases` (`add`, `remove`, `remove_index`),
//! `PUT|POST|DELETE /{index}/_alias/{name}`, and the `GET`/`HEAD` reads.
//! Aliases live on their indices (`Index::aliases`, as Elasticsearch
//! keeps them in each index's metadata); index expressions resolve them
//! (see `resolve`).

use crate::error::ApiError;
use crate::resolve::{IndicesOptions, alias_names, resolve};
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ClusterState, Sim};
use crate::util::{body_bool, body_names, glob_match, split_names};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

/// Keys an alias action or definition may carry.
const ALIAS_KEYS: &[&str] = &[
    "index",
    "indices",
    "alias",
    "aliases",
    "filter",
    "routing",
    "index_routing",
    "search_routing",
    "is_write_index",
    "is_hidden",
    "must_exist",
];

/// What an alias holds, as `GET _alias` shows it: only what was set.
fn definition(body: &Value) -> Result<Value, ApiError> {
    let mut out = Map::new();
    if let Some(filter) = body.get("filter").filter(|f| !f.is_null()) {
        if !filter.is_object() {
            return Err(ApiError::parsing("[filter] must be an object"));
        }
        out.insert("filter".into(), filter.clone());
    }
    let text = |key: &str| -> Result<Option<String>, ApiError> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(other) => Err(ApiError::x_content_parse(format!(
                "[{key}] must be a string, not {other}"
            ))),
        }
    };
    if let Some(routing) = text("routing")? {
        out.insert("index_routing".into(), routing.clone().into());
        out.insert("search_routing".into(), routing.into());
    }
    if let Some(r) = text("index_routing")? {
        out.insert("index_routing".into(), r.into());
    }
    if let Some(r) = text("search_routing")? {
        out.insert("search_routing".into(), r.into());
    }
    for flag in ["is_write_index", "is_hidden"] {
        if body.get(flag).is_some_and(|v| !v.is_null()) {
            out.insert(flag.into(), body_bool(body, flag, false)?.into());
        }
    }
    Ok(Value::Object(out))
}

/// The concrete indices an alias action names (wildcards allowed, closed
/// indices too: aliases may be put on them).
fn action_indices(state: &ClusterState, names: &[String]) -> Result<Vec<String>, ApiError> {
    let options = IndicesOptions {
        closed: true,
        allow_no_indices: false,
        ..IndicesOptions::default()
    };
    let mut out = Vec::new();
    for name in names {
        if !name.contains('*') && !state.indices.contains_key(name) {
            // An alias is not an index here: actions take indices.
            return Err(ApiError::index_not_found(name));
        }
        for picked in resolve(state, name, &options)? {
            if !out.contains(&picked) {
                out.push(picked);
            }
        }
    }
    Ok(out)
}

/// Refuses an alias name Elasticsearch refuses.
fn check_alias_name(state: &ClusterState, alias: &str) -> Result<(), ApiError> {
    if state.indices.contains_key(alias) {
        return Err(ApiError::invalid_alias_name(alias));
    }
    if alias.is_empty() || alias.starts_with(['_', '-', '+']) || alias.contains(['*', ',', ' ']) {
        return Err(ApiError::illegal_argument(format!(
            "Invalid alias name [{alias}], must not start with '_', '-', or '+' or contain ' ', ',' or '*'"
        )));
    }
    Ok(())
}

/// One parsed action of `POST /_aliases`.
enum Action {
    Add {
        indices: Vec<String>,
        aliases: Vec<String>,
        definition: Value,
    },
    Remove {
        indices: Vec<String>,
        aliases: Vec<String>,
        must_exist: bool,
    },
    RemoveIndex {
        indices: Vec<String>,
    },
}

fn names_of(body: &Value, one: &str, many: &str) -> Result<Vec<String>, ApiError> {
    let mut names = body_names(body, one)?;
    names.extend(body_names(body, many)?);
    Ok(names)
}

fn parse_action(state: &ClusterState, action: &Value) -> Result<Action, ApiError> {
    let Some((kind, body)) = action
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
    else {
        return Err(ApiError::illegal_argument(
            "[alias_action] each action must hold exactly one of [add, remove, remove_index]",
        ));
    };
    if let Some(unknown) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| !ALIAS_KEYS.contains(&k.as_str())))
    {
        return Err(ApiError::x_content_parse(format!(
            "[{kind}] unknown field [{unknown}]"
        )));
    }
    let index_names = names_of(body, "index", "indices")?;
    if index_names.is_empty() {
        return Err(ApiError::validation(
            "One of [index] or [indices] is required",
        ));
    }
    match kind.as_str() {
        "add" | "remove" => {
            let aliases = names_of(body, "alias", "aliases")?;
            if aliases.is_empty() {
                return Err(ApiError::validation(
                    "One of [alias] or [aliases] is required",
                ));
            }
            let indices = action_indices(state, &index_names)?;
            if kind == "add" {
                for alias in &aliases {
                    check_alias_name(state, alias)?;
                }
                Ok(Action::Add {
                    indices,
                    aliases,
                    definition: definition(body)?,
                })
            } else {
                Ok(Action::Remove {
                    indices,
                    aliases,
                    must_exist: body_bool(body, "must_exist", false)?,
                })
            }
        }
        "remove_index" => {
            if index_names.iter().any(|n| n.contains('*')) {
                return Err(ApiError::illegal_argument(
                    "Wildcard expressions or all indices are not allowed",
                ));
            }
            let indices = action_indices(state, &index_names)?;
            Ok(Action::RemoveIndex { indices })
        }
        other => Err(ApiError::illegal_argument(format!(
            "[alias_action] unknown field [{other}]"
        ))),
    }
}

/// Refuses two write indices for one alias, as Elasticsearch does after
/// applying every action.
fn check_write_indices(state: &ClusterState) -> Result<(), ApiError> {
    for alias in alias_names(state) {
        let writers: Vec<&String> = state
            .indices
            .iter()
            .filter(|(_, i)| {
                i.aliases
                    .get(&alias)
                    .and_then(|a| a.get("is_write_index"))
                    .and_then(Value::as_bool)
                    == Some(true)
            })
            .map(|(n, _)| n)
            .collect();
        if writers.len() > 1 {
            let list: Vec<&str> = writers.iter().map(|s| s.as_str()).collect();
            return Err(ApiError::illegal_argument(format!(
                "alias [{alias}] has more than one write index [{}]",
                list.join(",")
            )));
        }
    }
    Ok(())
}

/// Runs `actions` on a copy of the indices and keeps the result only if
/// all succeed: the aliases API is atomic.
fn run_actions(state: &mut ClusterState, actions: Vec<Action>) -> Result<(), ApiError> {
    let mut indices = state.indices.clone();
    for action in actions {
        match action {
            Action::Add {
                indices: names,
                aliases,
                definition,
            } => {
                for name in &names {
                    if let Some(index) = indices.get_mut(name) {
                        for alias in &aliases {
                            index.aliases.insert(alias.clone(), definition.clone());
                        }
                    }
                }
            }
            Action::Remove {
                indices: names,
                aliases,
                must_exist,
            } => {
                let mut removed = false;
                let mut missing = Vec::new();
                for alias in &aliases {
                    let mut found = false;
                    for name in &names {
                        if let Some(index) = indices.get_mut(name) {
                            let matching: Vec<String> = index
                                .aliases
                                .keys()
                                .filter(|a| glob_match(alias, a) || alias == "_all")
                                .cloned()
                                .collect();
                            for a in matching {
                                index.aliases.remove(&a);
                                found = true;
                            }
                        }
                    }
                    removed |= found;
                    if !found {
                        missing.push(alias.clone());
                    }
                }
                // Without `must_exist`, only removing nothing at all fails.
                if (must_exist && !missing.is_empty()) || !removed {
                    return Err(ApiError::aliases_not_found(&missing));
                }
            }
            Action::RemoveIndex { indices: names } => {
                for name in names {
                    indices.remove(&name);
                }
            }
        }
    }
    let before = std::mem::replace(&mut state.indices, indices);
    if let Err(e) = check_write_indices(state) {
        state.indices = before;
        return Err(e);
    }
    Ok(())
}

/// `POST /_aliases`.
pub fn update(sim: &Sim, req: &Req) -> ApiResult {
    let body = req.json()?;
    if let Some(unknown) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "actions"))
    {
        return Err(ApiError::x_content_parse(format!(
            "[aliases] unknown field [{unknown}]"
        )));
    }
    let Some(list) = body.get("actions").and_then(Value::as_array) else {
        return Err(ApiError::validation("no action specified"));
    };
    if list.is_empty() {
        return Err(ApiError::validation("no action specified"));
    }
    let mut state = sim.state();
    let actions = list
        .iter()
        .map(|a| parse_action(&state, a))
        .collect::<Result<Vec<_>, _>>()?;
    run_actions(&mut state, actions)?;
    Ok(Reply::ok(json!({ "acknowledged": true, "errors": false })))
}

/// `PUT|POST /{index}/_alias/{name}` (and `_aliases`): one `add`.
pub fn put(sim: &Sim, req: &Req, expression: &str, name: &str) -> ApiResult {
    let body = req.json()?;
    if let Some(unknown) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| !ALIAS_KEYS.contains(&k.as_str())))
    {
        return Err(ApiError::x_content_parse(format!(
            "[alias] unknown field [{unknown}]"
        )));
    }
    let mut state = sim.state();
    let indices = action_indices(&state, &split_names(expression))?;
    let aliases = split_names(name);
    for alias in &aliases {
        check_alias_name(&state, alias)?;
    }
    let action = Action::Add {
        indices,
        aliases,
        definition: definition(&body)?,
    };
    run_actions(&mut state, vec![action])?;
    Ok(Reply::acknowledged())
}

/// `DELETE /{index}/_alias/{name}` (and `_aliases`).
pub fn delete(sim: &Sim, expression: &str, name: &str) -> ApiResult {
    let mut state = sim.state();
    let indices = action_indices(&state, &split_names(expression))?;
    let action = Action::Remove {
        indices,
        aliases: split_names(name),
        must_exist: true,
    };
    run_actions(&mut state, vec![action])?;
    Ok(Reply::acknowledged())
}

/// `GET [/{index}]/_alias[/{name}]` and `HEAD` of the same: per index,
/// the aliases asked for. Asked for by name, an alias that no index has is
/// a 404 whose body still holds what was found, as Elasticsearch answers.
pub fn get(sim: &Sim, req: &Req, expression: Option<&str>, name: Option<&str>) -> ApiResult {
    let options = IndicesOptions::from_req(
        req,
        IndicesOptions {
            closed: true,
            hidden: true,
            ..IndicesOptions::default()
        },
    )?;
    let state = sim.state();
    let names = resolve(&state, expression.unwrap_or("_all"), &options)?;
    let wanted = name.map(split_names);
    let wanted = wanted.filter(|w| !w.iter().any(|a| a == "_all"));
    let mut out = Map::new();
    let mut seen: Vec<String> = Vec::new();
    for index_name in &names {
        let Some(index) = state.indices.get(index_name) else {
            continue;
        };
        let aliases: Map<String, Value> = index
            .aliases
            .iter()
            .filter(|(a, _)| {
                wanted
                    .as_ref()
                    .is_none_or(|w| w.iter().any(|p| glob_match(p, a)))
            })
            .map(|(a, v)| (a.clone(), v.clone()))
            .collect();
        seen.extend(aliases.keys().cloned());
        // Asked for aliases, indices without any of them are left out.
        if wanted.is_some() && aliases.is_empty() {
            continue;
        }
        out.insert(index_name.clone(), json!({ "aliases": aliases }));
    }
    if let Some(wanted) = &wanted {
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|w| !w.contains('*') && !seen.contains(w))
            .collect();
        if !missing.is_empty() {
            let list: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            let noun = if missing.len() == 1 {
                "alias"
            } else {
                "aliases"
            };
            out.insert(
                "error".into(),
                json!(format!("{noun} [{}] missing", list.join(","))),
            );
            out.insert("status".into(), json!(404));
            return Ok(Reply::with_status(
                StatusCode::NOT_FOUND,
                Value::Object(out),
            ));
        }
        if out.is_empty() && wanted.iter().all(|w| w.contains('*')) {
            return Ok(Reply::ok(json!({})));
        }
    }
    Ok(Reply::ok(Value::Object(out)))
}

/// `GET [/{index}]/_aliases`: every picked index with its aliases.
pub fn get_all(sim: &Sim, req: &Req, expression: Option<&str>) -> ApiResult {
    get(sim, req, expression, None)
}
