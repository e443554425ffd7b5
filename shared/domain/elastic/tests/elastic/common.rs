//! A stand-in for Elasticsearch: an axum server on a loopback port that
//! answers whatever the test scripts and records every request it gets.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use floe_elastic::{ElasticClient, ElasticError};
use serde_json::Value;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// One request as the server saw it, path still percent-encoded.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn json(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    body: String,
    content_type: &'static str,
    delay: Duration,
    location: Option<String>,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: body.to_string(),
            content_type: "application/json",
            delay: Duration::ZERO,
            location: None,
        }
    }

    pub fn text(status: u16, body: &str, content_type: &'static str) -> Reply {
        Reply {
            status,
            body: body.to_string(),
            content_type,
            delay: Duration::ZERO,
            location: None,
        }
    }

    /// Elasticsearch's error body, as every API shapes it.
    pub fn error(status: u16, error_type: &str, reason: &str) -> Reply {
        Reply::json(
            status,
            serde_json::json!({
                "error": {
                    "root_cause": [{"type": error_type, "reason": reason}],
                    "type": error_type,
                    "reason": reason,
                },
                "status": status,
            }),
        )
    }

    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    pub fn redirect_to(mut self, location: &str) -> Reply {
        self.location = Some(location.to_string());
        self
    }
}

type Responder = dyn Fn(&Seen) -> Reply + Send + Sync;

struct Shared {
    seen: Mutex<Vec<Seen>>,
    responder: Box<Responder>,
}

pub struct MockEs {
    pub url: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for MockEs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockEs {
    /// Starts a server whose answers `responder` picks per request.
    pub async fn start(
        responder: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<MockEs> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            seen: Mutex::new(Vec::new()),
            responder: Box::new(responder),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            // The server lives as long as the test; an error here shows up
            // as failed requests in the test itself.
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockEs {
            url: format!("http://{addr}"),
            shared,
            task,
        })
    }

    /// A server that gives every request the same answer.
    pub async fn always(reply: Reply) -> std::io::Result<MockEs> {
        MockEs::start(move |_| reply.clone()).await
    }

    pub fn client(&self) -> Result<ElasticClient, ElasticError> {
        ElasticClient::new(&self.url, None, Duration::from_secs(5))
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.shared
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The one request the server got; an error if it got another number.
    pub fn only_request(&self) -> Result<Seen, String> {
        let mut seen = self.requests();
        match seen.len() {
            1 => Ok(seen.remove(0)),
            n => Err(format!(
                "expected one request, the server got {n}: {seen:?}"
            )),
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = Seen {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        headers,
        body: body.to_vec(),
    };
    let reply = (shared.responder)(&seen);
    shared
        .seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(seen);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, reply.content_type)],
        reply.body,
    )
        .into_response();
    if let Some(location) = reply.location
        && let Ok(value) = location.parse()
    {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// A port nothing listens on: bound, then released.
pub async fn closed_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    drop(listener);
    Ok(port)
}
