//! Request ids and the access log, in one layer around the whole router.
//!
//! Each request gets an id: the client's `x-request-id` when it is one a
//! log line and a support ticket can carry (1 to 128 visible ASCII
//! characters), a new UUID otherwise. The id goes back on the response and
//! into every line the request writes, and the request ends with one
//! `request done` line: status and latency, beside the method, path, id and
//! organization that [`floe_telemetry::request`] adds. Headers and bodies
//! are never logged: they carry tokens and credentials.
//!
//! This replaces tower-http's request-id and trace layers, whose tracing
//! span per request was the largest single cost of a warm read (issue 16).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Request, Response};
use floe_telemetry::request;
use tower::{Layer, Service};

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client id kept; a longer one is replaced, not cut.
const MAX_CLIENT_ID: usize = 128;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AccessLogLayer;

impl<S> Layer<S> for AccessLogLayer {
    type Service = AccessLog<S>;

    fn layer(&self, inner: S) -> AccessLog<S> {
        AccessLog { inner }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct AccessLog<S> {
    inner: S,
}

impl<S, B> Service<Request<Body>> for AccessLog<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        let started = Instant::now();
        let id = match req.headers().get(&REQUEST_ID) {
            Some(sent) if usable(sent) => sent.clone(),
            _ => {
                let made = new_id();
                req.headers_mut().insert(REQUEST_ID, made.clone());
                made
            }
        };
        let context = request::Request::new(req.method().clone(), req.uri().clone(), id.clone());
        let handled = self.inner.call(req);
        Box::pin(request::scope(context, async move {
            let mut res = handled.await?;
            tracing::info!(
                status = res.status().as_u16(),
                latency_ms = started.elapsed().as_millis() as u64,
                "request done"
            );
            res.headers_mut().insert(REQUEST_ID, id);
            Ok(res)
        }))
    }
}

/// An id worth keeping: short, and nothing a log reader could mistake.
fn usable(id: &HeaderValue) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty() && bytes.len() <= MAX_CLIENT_ID && bytes.iter().all(|b| b.is_ascii_graphic())
}

fn new_id() -> HeaderValue {
    let mut text = uuid::Uuid::encode_buffer();
    let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
    // A hyphenated UUID is always a valid header value.
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_kept_only_when_short_and_visible() {
        assert!(usable(&HeaderValue::from_static("abc-123_XYZ.{}")));
        assert!(usable(
            &HeaderValue::from_str(&"a".repeat(128)).expect("ascii")
        ));
        assert!(!usable(
            &HeaderValue::from_str(&"a".repeat(129)).expect("ascii")
        ));
        assert!(!usable(&HeaderValue::from_static("")));
        assert!(!usable(&HeaderValue::from_static("has space")));
        assert!(!usable(
            &HeaderValue::from_bytes(b"caf\xc3\xa9").expect("obs-text")
        ));
    }

    #[test]
    fn a_made_id_is_a_uuid() {
        let id = new_id();
        let text = id.to_str().expect("ascii");
        assert!(uuid::Uuid::parse_str(text).is_ok(), "{text}");
        assert_ne!(new_id(), id);
    }
}
