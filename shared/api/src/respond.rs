use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A resource with its version as `ETag` and ECE's `x-cloud-resource-version`.
pub fn versioned<T: Serialize>(status: StatusCode, body: &T, version: u64) -> Response {
    let mut r = (status, axum::Json(body)).into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        h.insert(header::ETAG, v);
    }
    h.insert("x-cloud-resource-version", HeaderValue::from(version));
    r
}

pub fn with_location(mut r: Response, location: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}
