//! Index expressions as Elasticsearch resolves them: names, aliases,
//! wildcards and exclusions, under the request's `ignore_unavailable`,
//! `allow_no_indices` and `expand_wildcards`.
//!
//! Most index APIs are synchronous functions that call
//! [`crate::indices::pick`] without the request's options; rather than
//! change each of them, the router runs them inside [`with_options`], and
//! `pick` reads the options of the request being answered from here.

use crate::error::ApiError;
use crate::server::Req;
use crate::state::{ClusterState, Index};
use crate::util::{glob_match, split_names};
use serde_json::{Value, json};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

/// The index options a request may carry, Elasticsearch's defaults
/// being those of a search: unknown names are an error, wildcards match
/// open indices, and matching nothing is fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndicesOptions {
    pub ignore_unavailable: bool,
    pub allow_no_indices: bool,
    pub open: bool,
    pub closed: bool,
    pub hidden: bool,
}

impl Default for IndicesOptions {
    fn default() -> IndicesOptions {
        IndicesOptions {
            ignore_unavailable: false,
            allow_no_indices: true,
            open: true,
            closed: false,
            hidden: false,
        }
    }
}

/// The URL parameters [`IndicesOptions`] reads.
pub const PARAMS: &[&str] = &["ignore_unavailable", "allow_no_indices", "expand_wildcards"];

/// Elasticsearch's strict boolean, with its message.
fn strict_bool(value: &str) -> Result<bool, ApiError> {
    match value {
        "" | "true" => Ok(true),
        "false" => Ok(false),
        other => Err(ApiError::illegal_argument(format!(
            "Failed to parse value [{other}] as only [true] or [false] are allowed."
        ))),
    }
}

impl IndicesOptions {
    /// The options an API that opens closed indices starts from: its
    /// wildcards match closed indices only.
    pub fn closed_only() -> IndicesOptions {
        IndicesOptions {
            open: false,
            closed: true,
            ..IndicesOptions::default()
        }
    }

    /// `defaults` changed by the request's parameters; an unknown value
    /// is refused as Elasticsearch refuses it.
    pub fn from_req(req: &Req, defaults: IndicesOptions) -> Result<IndicesOptions, ApiError> {
        let mut options = defaults;
        if let Some(v) = req.param("ignore_unavailable") {
            options.ignore_unavailable = strict_bool(v)?;
        }
        if let Some(v) = req.param("allow_no_indices") {
            options.allow_no_indices = strict_bool(v)?;
        }
        if let Some(list) = req.param("expand_wildcards") {
            (options.open, options.closed, options.hidden) = (false, false, false);
            for state in list.split(',').map(str::trim) {
                match state {
                    "open" => options.open = true,
                    "closed" => options.closed = true,
                    "hidden" => options.hidden = true,
                    "all" => (options.open, options.closed, options.hidden) = (true, true, true),
                    "none" => {}
                    other => {
                        return Err(ApiError::illegal_argument(format!(
                            "No valid expand wildcard value [{other}]"
                        )));
                    }
                }
            }
        }
        Ok(options)
    }

    /// Whether a wildcard may pick this index.
    fn expands_to(&self, index: &Index) -> bool {
        let hidden = index.settings.get("hidden").is_some_and(|v| v == "true");
        (if index.closed { self.closed } else { self.open }) && (self.hidden || !hidden)
    }
}

thread_local! {
    /// The options of the request this thread is answering, while the
    /// router runs a synchronous API inside [`with_options`].
    static CURRENT: Cell<Option<IndicesOptions>> = const { Cell::new(None) };
}

/// Runs `f` (synchronous: it cannot move to another thread midway) with
/// `options` as the ones [`current`] answers.
pub fn with_options<T>(options: IndicesOptions, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<IndicesOptions>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(options))));
    f()
}

/// The options of the request being answered, else the defaults.
pub fn current() -> IndicesOptions {
    CURRENT.with(Cell::get).unwrap_or_default()
}

/// A copy of `req` without the index-option parameters, for APIs that
/// refuse parameters they do not know: their options are applied through
/// [`with_options`] instead.
pub fn without_options(req: &Req) -> Req {
    Req {
        served: req.served,
        method: req.method.clone(),
        uri: req.uri.clone(),
        content_type: req.content_type.clone(),
        segments: req.segments.clone(),
        query: req
            .query
            .iter()
            .filter(|(k, _)| !PARAMS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        body: req.body.clone(),
    }
}

/// The indices an alias points to, in name order.
pub fn alias_indices(state: &ClusterState, alias: &str) -> Vec<String> {
    state
        .indices
        .iter()
        .filter(|(_, index)| index.aliases.contains_key(alias))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Every alias name, once.
pub fn alias_names(state: &ClusterState) -> Vec<String> {
    let mut names: Vec<String> = state
        .indices
        .values()
        .flat_map(|i| i.aliases.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Resolves an index expression (`a,b`, `logs-*`, `-logs-old`, `_all`,
/// alias names) to concrete index names, in the order given, as
/// Elasticsearch does under `options`: aliases stand for their indices;
/// wildcards match index and alias names, then keep the indices whose
/// state `expand_wildcards` allows; a name that is neither an index nor an
/// alias is `index_not_found_exception` unless `ignore_unavailable`; an
/// expression that picks nothing is `index_not_found_exception` when
/// `allow_no_indices` is false.
pub fn resolve(
    state: &ClusterState,
    expression: &str,
    options: &IndicesOptions,
) -> Result<Vec<String>, ApiError> {
    let parts = split_names(expression);
    let everything = parts.is_empty() || (parts.len() == 1 && parts[0] == "_all");
    let parts = if everything {
        vec!["*".to_string()]
    } else {
        parts
    };
    let aliases = alias_names(state);
    let mut picked: Vec<String> = Vec::new();
    let add = |name: &String, picked: &mut Vec<String>| {
        if !picked.contains(name) {
            picked.push(name.clone());
        }
    };
    for (position, part) in parts.iter().enumerate() {
        // A leading `-` excludes, except as the very first expression,
        // where Elasticsearch reads it as part of a name.
        if let Some(excluded) = part.strip_prefix('-').filter(|_| position > 0) {
            let dropped: Vec<String> = aliases
                .iter()
                .filter(|a| glob_match(excluded, a))
                .flat_map(|a| alias_indices(state, a))
                .collect();
            picked.retain(|name| !glob_match(excluded, name) && !dropped.contains(name));
            continue;
        }
        if part.contains('*') {
            let mut matched: Vec<String> = state
                .indices
                .keys()
                .filter(|name| glob_match(part, name))
                .cloned()
                .collect();
            for alias in aliases.iter().filter(|a| glob_match(part, a)) {
                matched.extend(alias_indices(state, alias));
            }
            for name in &matched {
                if state
                    .indices
                    .get(name)
                    .is_some_and(|i| options.expands_to(i))
                {
                    add(name, &mut picked);
                }
            }
        } else if state.indices.contains_key(part) {
            add(part, &mut picked);
        } else if aliases.contains(part) {
            for name in alias_indices(state, part) {
                add(&name, &mut picked);
            }
        } else if !options.ignore_unavailable {
            return Err(ApiError::index_not_found(part));
        }
    }
    if picked.is_empty() && !options.allow_no_indices {
        let shown = if everything { "_all" } else { expression };
        return Err(ApiError::index_not_found(shown));
    }
    Ok(picked)
}

/// The filter each index an expression picks is searched with, as
/// Elasticsearch applies alias filters: an index reached only through
/// aliases that have filters matches any of them; one named (or matched by
/// a wildcard on its own name), or reached through an alias without a
/// filter, is searched whole and is not in the map.
pub fn alias_filters(state: &ClusterState, expression: &str) -> BTreeMap<String, Value> {
    let parts = split_names(expression);
    if parts.is_empty() || parts.iter().any(|p| p == "_all") {
        return BTreeMap::new();
    }
    let matches = |part: &str, name: &str| {
        if part.contains('*') {
            glob_match(part, name)
        } else {
            part == name
        }
    };
    let aliases = alias_names(state);
    let mut whole: BTreeSet<&String> = BTreeSet::new();
    let mut filters: BTreeMap<&String, Vec<Value>> = BTreeMap::new();
    for (position, part) in parts.iter().enumerate() {
        if position > 0 && part.starts_with('-') {
            continue;
        }
        whole.extend(state.indices.keys().filter(|n| matches(part, n)));
        for alias in aliases.iter().filter(|a| matches(part, a)) {
            for (name, index) in &state.indices {
                match index.aliases.get(alias).map(|a| a.get("filter")) {
                    None => {}
                    Some(Some(filter)) if !filter.is_null() => {
                        filters.entry(name).or_default().push(filter.clone());
                    }
                    Some(_) => {
                        whole.insert(name);
                    }
                }
            }
        }
    }
    filters
        .into_iter()
        .filter(|(name, _)| !whole.contains(name))
        .map(|(name, mut found)| {
            let filter = if found.len() == 1 {
                found.remove(0)
            } else {
                json!({"bool": {"should": found, "minimum_should_match": 1}})
            };
            (name.clone(), filter)
        })
        .collect()
}

/// The one index a write to `name` goes to: the index itself, or the
/// alias's write index, or its only index. A name that is neither is
/// returned as it is, for the write to create it.
pub fn write_index(state: &ClusterState, name: &str) -> Result<String, ApiError> {
    if state.indices.contains_key(name) {
        return Ok(name.to_string());
    }
    let members = alias_indices(state, name);
    if members.is_empty() {
        return Ok(name.to_string());
    }
    let flag = |index: &str| {
        state
            .indices
            .get(index)
            .and_then(|i| i.aliases.get(name))
            .and_then(|a| a.get("is_write_index"))
            .and_then(serde_json::Value::as_bool)
    };
    if let Some(write) = members.iter().find(|i| flag(i) == Some(true)) {
        return Ok(write.clone());
    }
    match members.as_slice() {
        [only] if flag(only) != Some(false) => Ok(only.clone()),
        _ => Err(ApiError::illegal_argument(format!(
            "no write index is defined for alias [{name}]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index"
        ))),
    }
}

/// The one index a single-document read of `name` goes to: the index
/// itself, or an alias's only index.
pub fn single_index(state: &ClusterState, name: &str) -> Result<String, ApiError> {
    if state.indices.contains_key(name) {
        return Ok(name.to_string());
    }
    let members = alias_indices(state, name);
    match members.as_slice() {
        [] => Ok(name.to_string()),
        [only] => Ok(only.clone()),
        many => Err(ApiError::illegal_argument(format!(
            "alias [{name}] has more than one index associated with it [{}], can't execute a single index op",
            many.join(", ")
        ))),
    }
}

/// Runs a synchronous API that resolves its indices through
/// `indices::pick` under the request's index options (`defaults` changed
/// by its parameters), and without those parameters in the request it
/// sees, so that an API that refuses parameters it does not know still
/// takes them.
pub fn scoped(
    req: &Req,
    defaults: IndicesOptions,
    f: impl FnOnce(&Req) -> crate::server::ApiResult,
) -> crate::server::ApiResult {
    let options = IndicesOptions::from_req(req, defaults)?;
    let stripped = without_options(req);
    with_options(options, || f(&stripped))
}

/// Refuses an expression that names an alias where only indices may be
/// named (deleting indices), with Elasticsearch's message.
pub fn refuse_aliases(state: &ClusterState, expression: &str) -> Result<(), ApiError> {
    let aliases = alias_names(state);
    match split_names(expression)
        .into_iter()
        .find(|n| !state.indices.contains_key(n) && aliases.contains(n))
    {
        Some(alias) => Err(ApiError::illegal_argument(format!(
            "The provided expression [{alias}] matches an alias, specify the corresponding concrete indices instead."
        ))),
        None => Ok(()),
    }
}
