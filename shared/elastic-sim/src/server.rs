//! The HTTP side: listening, shutting down, and routing requests to the
//! APIs the way Elasticsearch's REST layer does.

use crate::config::{SimConfig, SimFaults};
use crate::error::{ApiError, SimError};
use crate::state::Sim;
use crate::util::path_segments;
use crate::{cluster, indices, nodes, repositories, restore, snapshots};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The simulated cluster; see [`SimulatedCluster::start`].
pub struct SimulatedCluster;

impl SimulatedCluster {
    /// Starts serving one simulated cluster on `config.addr` (a loopback
    /// address; `127.0.0.1:0` when unset) and returns once it accepts
    /// connections.
    pub async fn start(config: SimConfig) -> Result<RunningCluster, SimError> {
        let addr = config
            .addr
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        if !addr.ip().is_loopback() {
            return Err(SimError::NotLoopback(addr));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| SimError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| SimError::Bind { addr, source })?;
        let sim = Arc::new(Sim::new(config));
        let app = Router::new().fallback(dispatch).with_state(sim.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        tracing::info!(
            cluster = %sim.cluster_name,
            %addr,
            nodes = sim.node_count(),
            "simulated Elasticsearch cluster started"
        );
        Ok(RunningCluster {
            url: format!("http://{addr}"),
            addr,
            sim,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

/// A simulated cluster that is serving. Dropping it stops the server too,
/// without waiting; [`RunningCluster::shutdown`] waits.
pub struct RunningCluster {
    url: String,
    addr: SocketAddr,
    sim: Arc<Sim>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl std::fmt::Debug for RunningCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningCluster")
            .field("url", &self.url)
            .field("cluster_name", &self.sim.cluster_name)
            .finish_non_exhaustive()
    }
}

impl RunningCluster {
    /// Such as `http://127.0.0.1:41234`, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn cluster_name(&self) -> &str {
        &self.sim.cluster_name
    }

    /// Changes the injected faults; snapshots and restores already running
    /// keep the ones they started with.
    pub fn set_faults(&self, faults: SimFaults) {
        self.sim.set_faults(faults);
    }

    pub fn faults(&self) -> SimFaults {
        self.sim.faults()
    }

    /// Makes the cluster's nodes exactly these names, as instances join and
    /// leave; shards still on nodes that leave are lost (see `_cat/shards`).
    pub fn set_nodes(&self, names: &[String]) {
        self.sim.set_nodes(names);
    }

    pub fn node_names(&self) -> Vec<String> {
        self.sim.nodes().into_iter().map(|n| n.name).collect()
    }

    /// Stops accepting requests, lets the ones in flight finish, and waits
    /// for the server to end. Snapshots still running are aborted and never
    /// reach their repository, as when a real cluster goes away.
    pub async fn shutdown(mut self) -> Result<(), SimError> {
        self.sim.abort_running();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        let outcome = task.await;
        tracing::info!(cluster = %self.sim.cluster_name, "simulated Elasticsearch cluster stopped");
        match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(SimError::Serve(e)),
            Err(e) => Err(SimError::Task(e.to_string())),
        }
    }
}

impl Drop for RunningCluster {
    fn drop(&mut self) {
        self.sim.abort_running();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One request, as the APIs see it.
pub struct Req {
    pub method: Method,
    pub uri: String,
    pub segments: Vec<String>,
    pub query: BTreeMap<String, String>,
    pub body: Bytes,
}

impl Req {
    pub fn param(&self, name: &str) -> Option<&String> {
        self.query.get(name)
    }

    /// The JSON body; an empty body is an empty object.
    pub fn json(&self) -> Result<Value, ApiError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        let value: Value = serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::x_content_parse(format!("failed to parse the body: {e}")))?;
        if !value.is_object() {
            return Err(ApiError::parse("request body must be a JSON object"));
        }
        Ok(value)
    }
}

/// A successful answer.
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    /// `_cat` APIs answer text unless asked for JSON.
    pub text: Option<String>,
}

impl Reply {
    pub fn ok(body: Value) -> Reply {
        Reply {
            status: StatusCode::OK,
            body,
            text: None,
        }
    }

    pub fn with_status(status: StatusCode, body: Value) -> Reply {
        Reply {
            status,
            body,
            text: None,
        }
    }

    pub fn acknowledged() -> Reply {
        Reply::ok(serde_json::json!({ "acknowledged": true }))
    }
}

pub type ApiResult = Result<Reply, ApiError>;

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // Official clients refuse to talk to a server without it (7.14 on).
    headers.insert(
        "x-elastic-product",
        HeaderValue::from_static("Elasticsearch"),
    );
    response
}

async fn dispatch(
    State(sim): State<Arc<Sim>>,
    method: Method,
    uri: Uri,
    Query(query): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Response {
    let head = method == Method::HEAD;
    let outcome = match path_segments(uri.path()) {
        Ok(segments) => {
            let req = Req {
                method: if head { Method::GET } else { method.clone() },
                uri: uri.path().to_string(),
                segments,
                query,
                body,
            };
            route(&sim, &req).await
        }
        Err(e) => Err(e),
    };
    let mut response = match outcome {
        Ok(Reply {
            status,
            text: Some(text),
            ..
        }) => {
            let mut response = Response::new(Body::from(text));
            *response.status_mut() = status;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=UTF-8"),
            );
            response
        }
        Ok(reply) => json_response(reply.status, &reply.body),
        Err(error) => {
            tracing::debug!(
                %method,
                path = uri.path(),
                status = error.status.as_u16(),
                error_type = error.error_type,
                reason = %error.reason,
                "simulated cluster refused a request"
            );
            json_response(error.status, &error.body())
        }
    };
    if head {
        *response.body_mut() = Body::empty();
    }
    response
}

async fn route(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let segments: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let m = &req.method;
    let (get, put, post, delete) = (
        m == Method::GET,
        m == Method::PUT,
        m == Method::POST,
        m == Method::DELETE,
    );
    let wrong = |allowed: &[&str]| -> ApiResult {
        Err(ApiError::method_not_allowed(m.as_str(), &req.uri, allowed))
    };
    match segments.as_slice() {
        [] if get => cluster::root(sim),
        [] => wrong(&["GET", "HEAD"]),
        ["_cluster", "health"] if get => cluster::health(sim, req, None).await,
        ["_cluster", "health", indices] if get => cluster::health(sim, req, Some(indices)).await,
        ["_cat", "nodes"] if get => nodes::cat_nodes(sim, req),
        ["_cat", "shards"] if get => nodes::cat_shards(sim, req, None),
        ["_cat", "shards", index] if get => nodes::cat_shards(sim, req, Some(index)),
        ["_nodes"] if get => nodes::nodes_info(sim),
        ["_cluster", "settings"] if get => nodes::get_settings(sim),
        ["_cluster", "settings"] if put => nodes::put_settings(sim, req),
        ["_cluster", "settings"] => wrong(&["GET", "PUT"]),
        ["_cat", "indices"] if get => indices::cat(sim, req, None),
        ["_cat", "indices", pattern] if get => indices::cat(sim, req, Some(pattern)),
        ["_recovery"] if get => restore::recovery(sim, req, None),
        ["_count"] if get || post => indices::count(sim, req, None),
        ["_refresh"] if get || post => indices::refresh(sim, None),

        ["_snapshot"] if get => repositories::get(sim, None),
        ["_snapshot", "_status"] if get => snapshots::status(sim, None, None).await,
        ["_snapshot", repo] if get => repositories::get(sim, Some(repo)),
        ["_snapshot", repo] if put || post => repositories::put(sim, req, repo).await,
        ["_snapshot", repo] if delete => repositories::delete(sim, repo),
        ["_snapshot", _] => wrong(&["GET", "PUT", "POST", "DELETE"]),
        ["_snapshot", repo, "_verify"] if post => repositories::verify(sim, repo).await,
        ["_snapshot", repo, "_status"] if get => snapshots::status(sim, Some(repo), None).await,
        ["_snapshot", repo, snapshot] if put || post => {
            snapshots::create(sim, req, repo, snapshot).await
        }
        ["_snapshot", repo, snapshots] if get => snapshots::get(sim, req, repo, snapshots).await,
        ["_snapshot", repo, snapshots] if delete => snapshots::delete(sim, repo, snapshots).await,
        ["_snapshot", _, _] => wrong(&["GET", "PUT", "POST", "DELETE"]),
        ["_snapshot", repo, snapshot, "_status"] if get => {
            snapshots::status(sim, Some(repo), Some(snapshot)).await
        }
        ["_snapshot", repo, snapshot, "_restore"] if post => {
            restore::restore(sim, req, repo, snapshot).await
        }
        ["_snapshot", repo, snapshot, "_mount"] if post => {
            restore::mount(sim, req, repo, snapshot).await
        }

        [name, ..] if name.starts_with('_') => Err(ApiError::no_handler(m.as_str(), &req.uri)),
        [index] if put => indices::create(sim, req, index),
        [index] if delete => indices::delete(sim, index),
        [index] if get => indices::get(sim, index),
        [_] => wrong(&["GET", "HEAD", "PUT", "DELETE"]),
        [index, "_doc"] if post => indices::index_doc(sim, req, index, None, false),
        [index, "_doc", id] if put || post => indices::index_doc(sim, req, index, Some(id), false),
        [index, "_create", id] if put || post => {
            indices::index_doc(sim, req, index, Some(id), true)
        }
        [index, "_doc", id] if get => indices::get_doc(sim, index, id),
        [index, "_doc", id] if delete => indices::delete_doc(sim, index, id),
        [index, "_count"] if get || post => indices::count(sim, req, Some(index)),
        [index, "_search"] if get || post => indices::search(sim, req, index),
        [index, "_refresh"] if get || post => indices::refresh(sim, Some(index)),
        [index, "_close"] if post => indices::close(sim, index),
        [index, "_open"] if post => indices::open(sim, index),
        [index, "_recovery"] if get => restore::recovery(sim, req, Some(index)),
        _ => Err(ApiError::no_handler(m.as_str(), &req.uri)),
    }
}
