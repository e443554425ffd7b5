//! Index APIs: create, delete, get, documents, count, search, open and
//! close, and `_cat/indices`.

use crate::cat::{Column, row, table};
use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ClusterState, Doc, Index, Sim, flatten_settings};
use crate::util::{byte_size, check_index_name, new_doc_id, split_names};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Resolves an index expression (aliases included) against the cluster,
/// under the index options of the request being answered (see
/// `resolve::with_options`), Elasticsearch's defaults otherwise.
pub fn pick(state: &ClusterState, expression: &str) -> Result<Vec<String>, ApiError> {
    crate::resolve::resolve(state, expression, &crate::resolve::current())
}

fn get_index<'a>(state: &'a ClusterState, name: &str) -> Result<&'a Index, ApiError> {
    state
        .indices
        .get(name)
        .ok_or_else(|| ApiError::index_not_found(name))
}

/// Whether the index takes writes: closed, mounted (write block) and still
/// recovering indices do not.
pub(crate) fn check_writable(name: &str, index: &Index) -> Result<(), ApiError> {
    if index.closed {
        return Err(ApiError::index_closed(name, &index.uuid));
    }
    let blocked = index
        .settings
        .get("blocks.write")
        .is_some_and(|v| v == "true");
    if index.mounted.is_some() || blocked {
        return Err(ApiError::write_blocked(name));
    }
    if index.is_recovering() {
        return Err(ApiError::unavailable_shards(name));
    }
    Ok(())
}

pub(crate) fn check_readable(name: &str, index: &Index) -> Result<(), ApiError> {
    if index.closed {
        return Err(ApiError::index_closed(name, &index.uuid));
    }
    if index.is_recovering() {
        return Err(ApiError::all_shards_failed());
    }
    Ok(())
}

fn setting_u32(flat: &BTreeMap<String, String>, key: &str, default: u32) -> Result<u32, ApiError> {
    match flat.get(key) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| {
            ApiError::illegal_argument(format!(
                "Failed to parse value [{v}] for setting [index.{key}]"
            ))
        }),
    }
}

/// Builds an index from a create body (`settings`, `mappings`, `aliases`).
pub fn index_from_body(body: &Value) -> Result<Index, ApiError> {
    let mut flat = flatten_settings(body.get("settings").unwrap_or(&Value::Null));
    let shards = setting_u32(&flat, "number_of_shards", 1)?;
    if shards == 0 {
        return Err(ApiError::illegal_argument(
            "Failed to parse value [0] for setting [index.number_of_shards] must be >= 1",
        ));
    }
    let replicas = setting_u32(&flat, "number_of_replicas", 1)?;
    flat.remove("number_of_shards");
    flat.remove("number_of_replicas");
    let mut index = Index::new(shards, replicas);
    index.settings = flat;
    if let Some(mappings) = body.get("mappings") {
        index.mappings = floe_search_index::Mappings::parse(mappings)
            .map_err(|e| crate::search::api_error(e, "_na_"))?;
    }
    if let Some(Value::Object(aliases)) = body.get("aliases") {
        index.aliases = aliases.clone();
    }
    Ok(index)
}

pub fn create(sim: &Sim, req: &Req, name: &str) -> ApiResult {
    check_index_name(name)?;
    let body = req.json()?;
    let mut state = sim.state();
    if let Some(existing) = state.indices.get(name) {
        return Err(ApiError::index_exists(name, &existing.uuid));
    }
    let index = index_from_body(&crate::templates::apply(&state, name, &body)?)?;
    state.indices.insert(name.to_string(), index);
    tracing::debug!(index = name, "simulated cluster created an index");
    Ok(Reply::ok(json!({
        "acknowledged": true,
        "shards_acknowledged": true,
        "index": name,
    })))
}

/// `DELETE /{indices}`: every named index, or (with `ignore_unavailable`)
/// those that exist, as Elasticsearch answers both with 200.
pub fn delete(sim: &Sim, req: &Req, expression: &str) -> ApiResult {
    let ignore_unavailable = match req.param("ignore_unavailable").map(String::as_str) {
        None | Some("false") => false,
        Some("true") | Some("") => true,
        Some(other) => {
            return Err(ApiError::illegal_argument(format!(
                "Failed to parse value [{other}] as only [true] or [false] are allowed."
            )));
        }
    };
    let names = split_names(expression);
    // `action.destructive_requires_name` is true by default from 8.0 on.
    if names.iter().any(|n| n.contains('*') || n == "_all") {
        return Err(ApiError::illegal_argument(
            "Wildcard expressions or all indices are not allowed",
        ));
    }
    let mut state = sim.state();
    if !ignore_unavailable
        && let Some(missing) = names.iter().find(|n| !state.indices.contains_key(*n))
    {
        return Err(ApiError::index_not_found(missing));
    }
    for name in &names {
        state.indices.remove(name);
    }
    Ok(Reply::acknowledged())
}

/// `GET /{indices}/_settings` (or every index's): each index's settings,
/// as `GET /{index}` shows them.
pub fn get_settings(sim: &Sim, expression: Option<&str>) -> ApiResult {
    each_index(
        sim,
        expression,
        |name, index| json!({ "settings": index.settings_json(name) }),
    )
}

/// An answer keyed by index name, one part per index the expression (or,
/// without one, the cluster) names.
fn each_index(
    sim: &Sim,
    expression: Option<&str>,
    part: impl Fn(&str, &Index) -> Value,
) -> ApiResult {
    let state = sim.state();
    let names = match expression {
        Some(e) => pick(&state, e)?,
        None => state.index_names(),
    };
    let mut out = Map::new();
    for name in names {
        let index = get_index(&state, &name)?;
        out.insert(name.clone(), part(&name, index));
    }
    Ok(Reply::ok(Value::Object(out)))
}

pub fn get(sim: &Sim, expression: &str) -> ApiResult {
    let state = sim.state();
    let mut out = Map::new();
    for name in pick(&state, expression)? {
        let index = get_index(&state, &name)?;
        out.insert(
            name.clone(),
            json!({
                "aliases": index.aliases,
                "mappings": index.mappings.to_json(),
                "settings": index.settings_json(&name),
            }),
        );
    }
    Ok(Reply::ok(Value::Object(out)))
}

pub fn index_doc(
    sim: &Sim,
    req: &Req,
    name: &str,
    id: Option<&str>,
    create_only: bool,
) -> ApiResult {
    let source = req.json()?;
    let create_only = create_only || req.param("op_type").is_some_and(|o| o == "create");
    let mut state = sim.state();
    if !state.indices.contains_key(name) {
        // Elasticsearch creates a missing index on the first write
        // (`action.auto_create_index`).
        check_index_name(name)?;
        let index = crate::templates::new_index(&state, name)?;
        state.indices.insert(name.to_string(), index);
    }
    let index = state
        .indices
        .get_mut(name)
        .ok_or_else(|| ApiError::index_not_found(name))?;
    check_writable(name, index)?;
    let id = id.map_or_else(new_doc_id, str::to_string);
    let previous = index.docs.get(&id).map(|d| d.version);
    if let (true, Some(version)) = (create_only, previous) {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            error_type: "version_conflict_engine_exception",
            reason: format!(
                "[{id}]: version conflict, document already exists (current version [{version}])"
            ),
            extra: Map::new(),
        });
    }
    let version = previous.map_or(1, |v| v + 1);
    index
        .put_doc(&id, Doc { version, source })
        .map_err(|e| crate::search::api_error(e, name))?;
    let seq_no = index.seq_no;
    index.seq_no += 1;
    let copies = 1 + index.assigned_replicas(sim.node_count());
    let (status, result) = match previous {
        None => (StatusCode::CREATED, "created"),
        Some(_) => (StatusCode::OK, "updated"),
    };
    Ok(Reply::with_status(
        status,
        json!({
            "_index": name,
            "_id": id,
            "_version": version,
            "result": result,
            "_shards": {
                "total": 1 + index.number_of_replicas,
                "successful": copies,
                "failed": 0,
            },
            "_seq_no": seq_no,
            "_primary_term": 1,
        }),
    ))
}

pub fn get_doc(sim: &Sim, name: &str, id: &str) -> ApiResult {
    let state = sim.state();
    let index = get_index(&state, name)?;
    check_readable(name, index)?;
    let body = match index.docs.get(id) {
        Some(doc) => json!({
            "_index": name,
            "_id": id,
            "_version": doc.version,
            "_seq_no": 0,
            "_primary_term": 1,
            "found": true,
            "_source": doc.source,
        }),
        None => {
            return Ok(Reply::with_status(
                StatusCode::NOT_FOUND,
                json!({ "_index": name, "_id": id, "found": false }),
            ));
        }
    };
    Ok(Reply::ok(body))
}

pub fn delete_doc(sim: &Sim, name: &str, id: &str) -> ApiResult {
    let mut state = sim.state();
    let index = state
        .indices
        .get_mut(name)
        .ok_or_else(|| ApiError::index_not_found(name))?;
    check_writable(name, index)?;
    let removed = index
        .remove_doc(id)
        .map_err(|e| crate::search::api_error(e, name))?;
    let (status, result, version) = match removed {
        Some(doc) => (StatusCode::OK, "deleted", doc.version + 1),
        None => (StatusCode::NOT_FOUND, "not_found", 1),
    };
    Ok(Reply::with_status(
        status,
        json!({ "_index": name, "_id": id, "_version": version, "result": result }),
    ))
}

/// `GET /{indices}/_mapping` (or every index's).
pub fn get_mapping(sim: &Sim, expression: Option<&str>) -> ApiResult {
    each_index(
        sim,
        expression,
        |_, index| json!({ "mappings": index.mappings.to_json() }),
    )
}

/// `PUT /{indices}/_mapping`: adds fields to every named index, or (a
/// field's type changing, say) to none of them.
pub fn put_mapping(sim: &Sim, req: &Req, expression: &str) -> ApiResult {
    let body = req.json()?;
    let mut state = sim.state();
    let names = pick(&state, expression)?;
    let mut merged = Vec::new();
    for name in &names {
        let index = get_index(&state, name)?;
        let mut mappings = index.mappings.clone();
        mappings
            .merge(&body)
            .map_err(|e| crate::search::api_error(e, name))?;
        merged.push((name.clone(), mappings));
    }
    for (name, mappings) in merged {
        if let Some(index) = state.indices.get_mut(&name) {
            index.mappings = mappings;
        }
    }
    Ok(Reply::acknowledged())
}

/// Documents are searchable as soon as they are written, so a refresh
/// only has to answer.
pub fn refresh(sim: &Sim, expression: Option<&str>) -> ApiResult {
    let state = sim.state();
    let names = match expression {
        Some(e) => pick(&state, e)?,
        None => state.index_names(),
    };
    let shards: u32 = names
        .iter()
        .filter_map(|n| state.indices.get(n))
        .map(|i| i.number_of_shards)
        .sum();
    Ok(Reply::ok(
        json!({ "_shards": crate::search::shards_header(shards) }),
    ))
}

pub fn close(sim: &Sim, expression: &str) -> ApiResult {
    let mut state = sim.state();
    let names = pick(&state, expression)?;
    let mut closed = Map::new();
    for name in names {
        if let Some(index) = state.indices.get_mut(&name) {
            index.closed = true;
            closed.insert(name, json!({ "closed": true }));
        }
    }
    Ok(Reply::ok(json!({
        "acknowledged": true,
        "shards_acknowledged": true,
        "indices": closed,
    })))
}

pub fn open(sim: &Sim, expression: &str) -> ApiResult {
    let mut state = sim.state();
    for name in pick(&state, expression)? {
        if let Some(index) = state.indices.get_mut(&name) {
            index.closed = false;
        }
    }
    Ok(Reply::ok(
        json!({ "acknowledged": true, "shards_acknowledged": true }),
    ))
}

const INDEX_COLUMNS: &[Column] = &[
    Column::new("health", &["h"]),
    Column::new("status", &["s"]),
    Column::new("index", &["i", "idx"]),
    Column::new("uuid", &["id", "uuid"]),
    Column::new("pri", &["p", "shards.primary", "shardsPrimary"]).right(),
    Column::new("rep", &["r", "shards.replica", "shardsReplica"]).right(),
    Column::new("docs.count", &["dc", "docsCount"]).right(),
    Column::new("docs.deleted", &["dd", "docsDeleted"]).right(),
    Column::new("store.size", &["ss", "storeSize"]).right(),
    Column::new("pri.store.size", &[]).right(),
    Column::new("dataset.size", &[]).right(),
    Column::new("creation.date", &["cd"]).hidden().right(),
    Column::new("creation.date.string", &["cds"]).hidden(),
];

pub fn cat(sim: &Sim, req: &Req, pattern: Option<&str>) -> ApiResult {
    let nodes = sim.node_count();
    let state = sim.state();
    let names = match pattern {
        Some(p) => pick(&state, p)?,
        None => state.index_names(),
    };
    let unit = req.param("bytes");
    let mut rows = Vec::new();
    for name in names {
        let index = get_index(&state, &name)?;
        let primary = index.store_bytes();
        let copies = 1 + u64::from(index.assigned_replicas(nodes));
        // A closed index reports no documents or sizes.
        let open = |v: Value| if index.closed { Value::Null } else { v };
        rows.push(row([
            ("health", json!(index.health_word(nodes))),
            ("status", json!(if index.closed { "close" } else { "open" })),
            ("index", json!(name)),
            ("uuid", json!(index.uuid)),
            ("pri", json!(index.number_of_shards.to_string())),
            ("rep", json!(index.number_of_replicas.to_string())),
            ("docs.count", open(json!(index.docs.len().to_string()))),
            ("docs.deleted", open(json!("0"))),
            (
                "store.size",
                open(json!(byte_size(primary * copies, unit)?)),
            ),
            ("pri.store.size", open(json!(byte_size(primary, unit)?))),
            ("dataset.size", open(json!(byte_size(primary, unit)?))),
            ("creation.date", json!(index.creation_millis.to_string())),
            (
                "creation.date.string",
                json!(crate::util::iso_millis(index.creation_millis)),
            ),
        ]));
    }
    table(req, INDEX_COLUMNS, rows)
}
