//! `axum-baseline`: the API's three benchmarked routes (read one, list a
//! page, create) answered by bare axum handlers with small JSON bodies, no
//! auth, no store. The warm-throughput benchmark drives it with the same
//! load generator settings as floe-local, so the gap between the two is
//! what Floe adds on top of the HTTP stack they share.
//!
//! Listens on `FLOE_LISTEN` (default `127.0.0.1:0`); the first stdout line
//! is the address, as floe-local prints it.

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};
use std::process::ExitCode;

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
    let app = axum::Router::new()
        .route("/api/v1/deployments", get(list).post(create))
        .route("/api/v1/deployments/{id}", get(read_one));
    match axum::serve(listener, app).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum-baseline: {e}");
            ExitCode::FAILURE
        }
    }
}
