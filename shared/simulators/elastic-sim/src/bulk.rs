//! `POST _bulk` and `POST {index}/_bulk`: newline-delimited actions
//! (`index`, `create`, `update` with `doc`, `delete`), each answered on
//! its own, as Elasticsearch answers them: one failed item fails only
//! itself and sets `errors`. Indices are created on the first write to
//! them, as `action.auto_create_index` does.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{ClusterState, Doc, Sim};
use crate::util::{check_index_name, new_doc_id};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use std::time::Instant;

/// The metadata an action line may carry; anything else is refused, as
/// Elasticsearch refuses it. Only `_index` and `_id` mean something here.
const KNOWN_METADATA: [&str; 14] = [
    "_index",
    "_id",
    "routing",
    "version",
    "version_type",
    "if_seq_no",
    "if_primary_term",
    "pipeline",
    "require_alias",
    "retry_on_conflict",
    "dynamic_templates",
    "require_data_stream",
    "list_executed_pipelines",
    "_source",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Index,
    Create,
    Update,
    Delete,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Index => "index",
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        }
    }
}

struct Op {
    action: Action,
    index: String,
    id: Option<String>,
    /// The document (`index`, `create`) or the update request (`update`).
    source: Option<Value>,
}

/// `Content-Type` must be one a bulk body can have; Elasticsearch answers
/// anything else with 406 before reading the body.
fn check_content_type(req: &Req) -> Result<(), ApiError> {
    let Some(value) = &req.content_type else {
        return Err(ApiError::not_acceptable("Content-Type header is missing"));
    };
    let media = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let accepted = [
        "application/x-ndjson",
        "application/json",
        "application/vnd.elasticsearch+x-ndjson",
        "application/vnd.elasticsearch+json",
    ];
    if accepted.contains(&media.as_str()) {
        Ok(())
    } else {
        Err(ApiError::not_acceptable(&format!(
            "Content-Type header [{value}] is not supported"
        )))
    }
}

/// `refresh`: `true` (or empty) forces one, `false` and `wait_for` do not
/// need to (documents are searchable at once here).
fn forced_refresh(req: &Req) -> Result<bool, ApiError> {
    match req.param("refresh").map(String::as_str) {
        None | Some("false" | "wait_for") => Ok(false),
        Some("" | "true") => Ok(true),
        Some(other) => Err(ApiError::illegal_argument(format!(
            "Unknown value for refresh: [{other}]."
        ))),
    }
}

fn parse_line(line: &str, number: usize) -> Result<Value, ApiError> {
    serde_json::from_str(line).map_err(|e| {
        ApiError::x_content_parse(format!(
            "[{number}:{}] failed to parse the bulk line: {e}",
            e.column()
        ))
    })
}

/// The actions of a bulk body, checked as Elasticsearch checks them before
/// running any.
fn parse(body: &str, default_index: Option<&str>) -> Result<Vec<Op>, ApiError> {
    let mut ops = Vec::new();
    let mut lines = body.split('\n').enumerate().map(|(i, l)| (i + 1, l));
    while let Some((number, line)) = lines.next() {
        if line.trim().is_empty() {
            continue;
        }
        let value = parse_line(line, number)?;
        let Some((name, meta)) = value
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.iter().next())
        else {
            return Err(ApiError::illegal_argument(format!(
                "Malformed action/metadata line [{number}], expected START_OBJECT or END_OBJECT but found [{}]",
                if value.is_object() {
                    "FIELD_NAME"
                } else {
                    "VALUE"
                }
            )));
        };
        let action = match name.as_str() {
            "index" => Action::Index,
            "create" => Action::Create,
            "update" => Action::Update,
            "delete" => Action::Delete,
            other => {
                return Err(ApiError::illegal_argument(format!(
                    "Malformed action/metadata line [{number}], expected field [create, delete, index, update] but found [{other}]"
                )));
            }
        };
        let Some(meta) = meta.as_object() else {
            return Err(ApiError::illegal_argument(format!(
                "Malformed action/metadata line [{number}], expected START_OBJECT but found [VALUE]"
            )));
        };
        if let Some(unknown) = meta.keys().find(|k| !KNOWN_METADATA.contains(&k.as_str())) {
            return Err(ApiError::illegal_argument(format!(
                "Action/metadata line [{number}] contains an unknown parameter [{unknown}]"
            )));
        }
        let text = |key: &str| match meta.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        let index = text("_index").or_else(|| default_index.map(str::to_string));
        let id = text("_id");
        let source = if action == Action::Delete {
            None
        } else {
            let Some((source_number, source_line)) = lines.next() else {
                return Err(ApiError::illegal_argument(format!(
                    "The bulk request's action on line [{number}] has no source line"
                )));
            };
            let source = parse_line(source_line, source_number)?;
            if !source.is_object() {
                return Err(ApiError::x_content_parse(format!(
                    "[{source_number}:1] the document must be an object"
                )));
            }
            Some(source)
        };
        let Some(index) = index else {
            return Err(ApiError::validation("index is missing"));
        };
        if action != Action::Index && id.is_none() && action != Action::Create {
            return Err(ApiError::validation("id is missing"));
        }
        ops.push(Op {
            action,
            index,
            id,
            source,
        });
    }
    if ops.is_empty() {
        return Err(ApiError::validation("no requests added"));
    }
    Ok(ops)
}

pub fn bulk(sim: &Sim, req: &Req, default_index: Option<&str>) -> ApiResult {
    check_content_type(req)?;
    let refresh = forced_refresh(req)?;
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::parse("request body is required"));
    }
    if req.body.last() != Some(&b'\n') {
        return Err(ApiError::illegal_argument(
            "The bulk request must be terminated by a newline [\\n]",
        ));
    }
    let body = std::str::from_utf8(&req.body)
        .map_err(|_| ApiError::x_content_parse("the bulk body is not UTF-8"))?;
    let ops = parse(body, default_index)?;
    let started = Instant::now();
    let nodes = sim.node_count();
    let mut state = sim.state();
    let mut errors = false;
    let items: Vec<Value> = ops
        .into_iter()
        .map(|op| {
            let action = op.action.name();
            let mut item = match run(&mut state, nodes, op) {
                Ok(item) => item,
                Err(failed) => {
                    errors = true;
                    failed
                }
            };
            if refresh && item.get("error").is_none() {
                item["forced_refresh"] = json!(true);
            }
            json!({ action: item })
        })
        .collect();
    drop(state);
    let took = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(Reply::ok(json!({
        "errors": errors,
        "took": took,
        "items": items,
    })))
}

/// A failed item: its index and id, its status, and the error without the
/// `root_cause` list a whole-request error has.
fn failure(index: &str, id: Option<&str>, error: ApiError) -> Value {
    let mut object = Map::new();
    object.insert("type".into(), json!(error.error_type));
    object.insert("reason".into(), json!(error.reason));
    object.extend(error.extra.clone());
    let mut item = json!({
        "_index": index,
        "status": error.status.as_u16(),
        "error": object,
    });
    if let Some(id) = id {
        item["_id"] = json!(id);
    }
    item
}

fn version_conflict(index: &str, uuid: &str, id: &str, version: u64) -> ApiError {
    ApiError {
        status: StatusCode::CONFLICT,
        error_type: "version_conflict_engine_exception",
        reason: format!(
            "[{id}]: version conflict, document already exists (current version [{version}])"
        ),
        extra: Map::from_iter([
            ("index_uuid".to_string(), json!(uuid)),
            ("shard".to_string(), json!("0")),
            ("index".to_string(), json!(index)),
        ]),
    }
}

fn document_missing(index: &str, uuid: &str, id: &str) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        error_type: "document_missing_exception",
        reason: format!("[{id}]: document missing"),
        extra: Map::from_iter([
            ("index_uuid".to_string(), json!(uuid)),
            ("shard".to_string(), json!("0")),
            ("index".to_string(), json!(index)),
        ]),
    }
}

/// Merges `doc` into `target` as a partial update does: objects field by
/// field, anything else replaced.
fn merge(target: &mut Value, doc: &Value) {
    match (target, doc) {
        (Value::Object(target), Value::Object(doc)) => {
            for (key, value) in doc {
                match target.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value);
                    }
                    _ => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (target, doc) => *target = doc.clone(),
    }
}

/// Runs one action; `Err` is the item of a failed one.
fn run(state: &mut ClusterState, nodes: u32, op: Op) -> Result<Value, Value> {
    let Op {
        action,
        index: name,
        id,
        source,
    } = op;
    let name =
        crate::resolve::write_index(state, &name).map_err(|e| failure(&name, id.as_deref(), e))?;
    let fail = |id: Option<&str>, e: ApiError| failure(&name, id, e);
    if !state.indices.contains_key(&name) {
        if action == Action::Delete {
            // A delete creates nothing.
            return Err(fail(id.as_deref(), ApiError::index_not_found(&name)));
        }
        check_index_name(&name).map_err(|e| fail(id.as_deref(), e))?;
        let index =
            crate::templates::new_index(state, &name).map_err(|e| fail(id.as_deref(), e))?;
        state.indices.insert(name.clone(), index);
        tracing::debug!(index = %name, "simulated cluster created an index on a bulk write");
    }
    let Some(index) = state.indices.get_mut(&name) else {
        return Err(fail(id.as_deref(), ApiError::index_not_found(&name)));
    };
    crate::indices::check_writable(&name, index).map_err(|e| fail(id.as_deref(), e))?;
    let id = id.unwrap_or_else(new_doc_id);
    let previous = index.docs.get(&id).cloned();
    let (status, result, version, new_source) = match action {
        Action::Index | Action::Create => {
            if let (Action::Create, Some(doc)) = (action, &previous) {
                return Err(fail(
                    Some(&id),
                    version_conflict(&name, &index.uuid, &id, doc.version),
                ));
            }
            let version = previous.as_ref().map_or(1, |d| d.version + 1);
            let (status, result) = match previous {
                None => (StatusCode::CREATED, "created"),
                Some(_) => (StatusCode::OK, "updated"),
            };
            (status, result, version, source)
        }
        Action::Update => {
            let request = source.unwrap_or_default();
            if request.get("script").is_some() {
                return Err(fail(
                    Some(&id),
                    ApiError::illegal_argument("the simulated cluster runs no scripts"),
                ));
            }
            let doc = request.get("doc").cloned();
            let as_upsert = request
                .get("doc_as_upsert")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            match (previous, doc) {
                (Some(current), Some(doc)) => {
                    let mut merged = current.source.clone();
                    merge(&mut merged, &doc);
                    let detect_noop = request
                        .get("detect_noop")
                        .and_then(Value::as_bool)
                        .unwrap_or(true);
                    if detect_noop && merged == current.source {
                        // Nothing changes: no new version, no write.
                        return Ok(json!({
                            "_index": name,
                            "_id": id,
                            "_version": current.version,
                            "result": "noop",
                            "_shards": { "total": 0, "successful": 0, "failed": 0 },
                            "_seq_no": index.seq_no.saturating_sub(1),
                            "_primary_term": 1,
                            "status": 200,
                        }));
                    }
                    (StatusCode::OK, "updated", current.version + 1, Some(merged))
                }
                (None, doc) => {
                    let upsert = request
                        .get("upsert")
                        .cloned()
                        .or_else(|| doc.filter(|_| as_upsert));
                    match upsert {
                        Some(upsert) => (StatusCode::CREATED, "created", 1, Some(upsert)),
                        None => {
                            return Err(fail(Some(&id), document_missing(&name, &index.uuid, &id)));
                        }
                    }
                }
                (Some(_), None) => {
                    return Err(fail(
                        Some(&id),
                        ApiError::validation("script or doc is missing"),
                    ));
                }
            }
        }
        Action::Delete => match previous {
            Some(doc) => (StatusCode::OK, "deleted", doc.version + 1, None),
            None => (StatusCode::NOT_FOUND, "not_found", 1, None),
        },
    };
    let written = match (action, new_source) {
        (Action::Delete, _) => index.remove_doc(&id).map(drop),
        (_, Some(source)) => index.put_doc(&id, Doc { version, source }),
        (_, None) => Ok(()),
    };
    written.map_err(|e| fail(Some(&id), crate::search::api_error(e, &name)))?;
    let seq_no = index.seq_no;
    index.seq_no += 1;
    let copies = 1 + index.assigned_replicas(nodes);
    Ok(json!({
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
        "status": status.as_u16(),
    }))
}
