//! `axum-baseline`: the API's three benchmarked routes (read one, list a
//! page, create) answered by bare axum handlers with small JSON bodies, no
//! auth, no store. The warm-throughput benchmark drives it with the same
//! load generator settings as floe-local, so the gap between the two is
//! what Floe adds on top of the HTTP stack they share.
//!
//! A small body is not what Floe answers, though: a page of 100 deployments
//! is some hundred kilobytes of JSON, and producing it is most of the work
//! of any server that answers it. So the baseline also has the same-body
//! routes `/baseline/deployments` and `/baseline/deployments/{id}`: each
//! serialises, per request, a JSON document read at start from the file in
//! `FLOE_BASELINE_LIST_BODY` or `FLOE_BASELINE_ONE_BODY` (the benchmark
//! saves Floe's own answers there) and held in memory. A route whose file
//! is not given is not served.
//!
//! Listens on `FLOE_LISTEN` (default `127.0.0.1:0`); the first stdout line
//! is the address, as floe-local prints it.

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};
use std::process::ExitCode;
use std::sync::Arc;

async fn read_one(Path(id): Path<String>) -> Json<Value> {
    Json(json!({"id": id, "status": "running"}))
}

async fn list() -> Json<Value> {
    Json(json!({"deployments": []}))
}

/// Parses the body as JSON like the real create does, so the baseline pays
/// for reading and decoding the request too.
async fn create(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let name = body.get("name").cloned().unwrap_or(Value::Null);
    (StatusCode::CREATED, Json(json!({"name": name})))
}

/// A document held in memory and serialised again for every request, as a
/// server that keeps its data in memory would answer it.
#[derive(Clone)]
struct Held(Arc<Value>);

impl Serialize for Held {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// The JSON document in the file named by `var`; `None` when it is unset.
fn held_body(var: &str) -> Result<Option<Held>, String> {
    let Some(path) = std::env::var_os(var) else {
        return Ok(None);
    };
    let text = std::fs::read(&path)
        .map_err(|e| format!("{var}: cannot read {}: {e}", path.to_string_lossy()))?;
    let value: Value = serde_json::from_slice(&text)
        .map_err(|e| format!("{var}: {} is not JSON: {e}", path.to_string_lossy()))?;
    Ok(Some(Held(Arc::new(value))))
}

#[tokio::main]
async fn main() -> ExitCode {
    let listen = std::env::var("FLOE_LISTEN").unwrap_or_else(|_| "127.0.0.1:0".to_string());
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("axum-baseline: cannot listen on {listen}: {e}");
            return ExitCode::from(2);
        }
    };
    match listener.local_addr() {
        Ok(addr) => println!("axum-baseline listening on http://{addr}"),
        Err(e) => {
            eprintln!("axum-baseline: {e}");
            return ExitCode::from(2);
        }
    }
    let (list_body, one_body) = match (
        held_body("FLOE_BASELINE_LIST_BODY"),
        held_body("FLOE_BASELINE_ONE_BODY"),
    ) {
        (Ok(list), Ok(one)) => (list, one),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("axum-baseline: {e}");
            return ExitCode::from(2);
        }
    };
    let mut app = axum::Router::new()
        .route("/api/v1/deployments", get(list).post(create))
        .route("/api/v1/deployments/{id}", get(read_one));
    if let Some(body) = list_body {
        app = app.route(
            "/baseline/deployments",
            get(move || std::future::ready(Json(body.clone()))),
        );
    }
    if let Some(body) = one_body {
        app = app.route(
            "/baseline/deployments/{id}",
            get(move || std::future::ready(Json(body.clone()))),
        );
    }
    match axum::serve(listener, app).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum-baseline: {e}");
            ExitCode::FAILURE
        }
    }
}
