//! The HTTP side: listening, shutting down, and routing requests to the
//! APIs the way Elasticsearch's REST layer does.

use crate::config::{S3Client, S3Keys, SimConfig, SimFaults};
use crate::error::{ApiError, SimError};
use crate::resolve::{IndicesOptions, scoped};
use crate::state::Sim;
use crate::util::path_segments;
use crate::{
    aliases, cluster, coordination, index_admin, indices, node_stats, nodes, repositories, resolve,
    restore, snapshots, stats, templates,
};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
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
    /// connections: over HTTPS with basic authentication when
    /// `config.security` is set, plain HTTP otherwise.
    pub async fn start(config: SimConfig) -> Result<RunningCluster, SimError> {
        let addr = config
            .addr
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let tls = match &config.security {
            Some(security) => Some(crate::tls::acceptor(security)?),
            None => None,
        };
        let mut node_tls = BTreeMap::new();
        if tls.is_some() {
            for (ip, cert, key) in &config.node_certificates {
                node_tls.insert(*ip, crate::tls::acceptor_for(cert, key)?);
            }
        }
        let mut sim = Sim::new(config);
        // A node reads its data path before it joins and serves.
        if let Some(data) = sim.data.take() {
            let loaded = data.load(&mut sim);
            sim.data = Some(data);
            loaded?;
        }
        let sim = Arc::new(sim);
        let app = Router::new().fallback(dispatch).with_state(sim.clone());
        let first = serve(&app, node_tls.get(&addr.ip()).or(tls.as_ref()), addr).await?;
        let addr = first.addr;
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(
            cluster = %sim.cluster_name,
            %addr,
            scheme,
            nodes = sim.node_count(),
            "simulated Elasticsearch cluster started"
        );
        Ok(RunningCluster {
            url: format!("{scheme}://{addr}"),
            addr,
            scheme,
            sim,
            app,
            tls,
            node_tls: std::sync::Mutex::new(node_tls),
            listeners: std::sync::Mutex::new(BTreeMap::from([(addr, first)])),
        })
    }
}

/// One address the cluster listens on, and the server task behind it.
struct Listening {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Listening {
    fn signal(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Stops accepting, lets the requests in flight finish, and waits for
    /// the server task to end.
    async fn stop(mut self) -> Result<(), SimError> {
        self.signal();
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(SimError::Serve(e)),
            Err(e) => Err(SimError::Task(e.to_string())),
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.signal();
    }
}

/// Binds `addr` (loopback only) and serves `app` there until stopped.
async fn serve(
    app: &Router,
    tls: Option<&tokio_rustls::TlsAcceptor>,
    addr: SocketAddr,
) -> Result<Listening, SimError> {
    if !addr.ip().is_loopback() {
        return Err(SimError::NotLoopback(addr));
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| SimError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| SimError::Bind { addr, source })?;
    let (stop, stopped) = oneshot::channel::<()>();
    // Each listener is one node's address: a request knows which it came in on.
    let app = app.clone().layer(axum::Extension(Served(addr)));
    let shutdown = async {
        let _ = stopped.await;
    };
    let task = match tls {
        Some(acceptor) => {
            let listener = crate::tls::TlsListener::new(listener, acceptor.clone(), addr);
            tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await
            })
        }
        None => tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }),
    };
    Ok(Listening {
        addr,
        stop: Some(stop),
        task: Some(task),
    })
}

/// A simulated cluster that is serving. Dropping it stops the server too,
/// without waiting; [`RunningCluster::shutdown`] waits.
pub struct RunningCluster {
    url: String,
    addr: SocketAddr,
    scheme: &'static str,
    sim: Arc<Sim>,
    app: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// What a node serves at its own address instead of `tls`, by address.
    node_tls: std::sync::Mutex<BTreeMap<std::net::IpAddr, tokio_rustls::TlsAcceptor>>,
    /// Every address served, one listener each, all in front of the same
    /// cluster (as each node of a real cluster has its own HTTP port).
    listeners: std::sync::Mutex<BTreeMap<SocketAddr, Listening>>,
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
    /// The address the cluster was started on, such as
    /// `http://127.0.0.1:41234` (`https://` when secured), without a
    /// trailing slash. After [`RunningCluster::set_addrs`] it may no longer
    /// be served; [`RunningCluster::urls`] says what is.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` for a secured cluster, else `http`.
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// Every address served now, in order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.lock_listeners().keys().copied().collect()
    }

    /// The URLs of [`RunningCluster::addrs`].
    pub fn urls(&self) -> Vec<String> {
        self.addrs()
            .into_iter()
            .map(|a| format!("{}://{a}", self.scheme))
            .collect()
    }

    fn lock_listeners(&self) -> std::sync::MutexGuard<'_, BTreeMap<SocketAddr, Listening>> {
        // Each change is one insert or remove: never half done.
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn node_acceptor(&self, ip: std::net::IpAddr) -> Option<tokio_rustls::TlsAcceptor> {
        self.node_tls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&ip)
            .cloned()
    }

    /// Whether the node at `ip` has a certificate of its own.
    pub fn has_node_certificate(&self, ip: std::net::IpAddr) -> bool {
        self.node_acceptor(ip).is_some()
    }

    /// Gives the node at `ip` a certificate of its own (see
    /// [`SimConfig::node_certificates`]), served from its next listener
    /// there: set it before [`RunningCluster::set_addrs`] adds the address.
    /// A cluster without TLS ignores it.
    pub fn set_node_certificate(
        &self,
        ip: std::net::IpAddr,
        cert_chain_pem: &str,
        key_pem: &floe_domain::secret::SecretString,
    ) -> Result<(), SimError> {
        if self.tls.is_none() {
            return Ok(());
        }
        let acceptor = crate::tls::acceptor_for(cert_chain_pem, key_pem)?;
        self.node_tls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(ip, acceptor);
        Ok(())
    }

    /// Serves the cluster on exactly `addrs` (loopback addresses; port 0
    /// picks a free port): listeners are started on the new ones and
    /// stopped on the others (after their requests in flight), as nodes
    /// join and leave. An empty list changes nothing: a cluster with no
    /// address at all could never be reached again.
    pub async fn set_addrs(&self, addrs: &[SocketAddr]) -> Result<(), SimError> {
        if addrs.is_empty() {
            return Ok(());
        }
        if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(SimError::NotLoopback(*bad));
        }
        let leaving: Vec<Listening> = {
            let mut listeners = self.lock_listeners();
            let gone: Vec<SocketAddr> = listeners
                .keys()
                .filter(|a| !addrs.contains(a))
                .copied()
                .collect();
            gone.iter().filter_map(|a| listeners.remove(a)).collect()
        };
        for listening in leaving {
            let addr = listening.addr;
            listening.stop().await?;
            tracing::debug!(cluster = %self.sim.cluster_name, %addr, "simulated cluster stopped listening");
        }
        for addr in addrs {
            if self.lock_listeners().contains_key(addr) {
                continue;
            }
            let own = self.node_acceptor(addr.ip());
            let listening = serve(&self.app, own.as_ref().or(self.tls.as_ref()), *addr).await?;
            tracing::debug!(cluster = %self.sim.cluster_name, addr = %listening.addr, "simulated cluster listening");
            self.lock_listeners().insert(listening.addr, listening);
        }
        Ok(())
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
        if let Err(e) = save(&self.sim) {
            tracing::error!(cluster = %self.sim.cluster_name, error = %e.reason, "simulated cluster could not write its data path");
        }
    }

    /// Like [`RunningCluster::set_nodes`], with each node's roles and
    /// version: master-eligible nodes vote, and the cluster loses its
    /// master when a majority of its voting configuration leaves.
    pub fn set_members(&self, members: &[crate::SimNode]) {
        self.sim.set_members(members);
        // Nodes that left may have taken shards with them.
        if let Err(e) = save(&self.sim) {
            tracing::error!(cluster = %self.sim.cluster_name, error = %e.reason, "simulated cluster could not write its data path");
        }
    }

    /// Whether the cluster has an elected master.
    pub fn has_master(&self) -> bool {
        self.sim.has_master()
    }

    pub fn node_names(&self) -> Vec<String> {
        self.sim.nodes().into_iter().map(|n| n.name).collect()
    }

    /// The nodes' S3 client now.
    pub fn s3_client(&self) -> Option<S3Client> {
        self.sim.s3_client()
    }

    /// Replaces the nodes' S3 client, settings and keys: what restarting
    /// them with another `elasticsearch.yml` and keystore does. Registered
    /// `s3` repositories use it from their next request on.
    pub fn set_s3_client(&self, client: Option<S3Client>) {
        self.sim.set_s3_client(client);
        crate::repositories::rebuild_s3_stores(&self.sim);
    }

    /// Writes the S3 client's keys into the nodes' keystore
    /// (`elasticsearch-keystore add s3.client.NAME.access_key`, …). They
    /// take effect at [`RunningCluster::reload_secure_settings`] (or
    /// `POST _nodes/reload_secure_settings`), as on Elasticsearch.
    pub fn set_keystore_s3_keys(&self, keys: Option<S3Keys>) {
        self.sim.set_keystore_s3_keys(keys);
    }

    /// `POST _nodes/reload_secure_settings`.
    pub fn reload_secure_settings(&self) {
        self.sim.reload_secure_settings();
        crate::repositories::rebuild_s3_stores(&self.sim);
    }

    /// Whether the cluster serves HTTPS and asks for the `elastic` user.
    pub fn is_secured(&self) -> bool {
        self.sim.is_secured()
    }

    /// Stops accepting requests, lets the ones in flight finish, and waits
    /// for the server to end. Snapshots still running are aborted and never
    /// reach their repository, as when a real cluster goes away.
    pub async fn shutdown(self) -> Result<(), SimError> {
        self.sim.abort_running();
        let all: Vec<Listening> = std::mem::take(&mut *self.lock_listeners())
            .into_values()
            .collect();
        let mut outcome = Ok(());
        for listening in all {
            if let Err(e) = listening.stop().await {
                outcome = Err(e);
            }
        }
        tracing::info!(cluster = %self.sim.cluster_name, "simulated Elasticsearch cluster stopped");
        outcome
    }
}

impl Drop for RunningCluster {
    fn drop(&mut self) {
        self.sim.abort_running();
        for listening in self.lock_listeners().values_mut() {
            listening.signal();
        }
    }
}

/// One request, as the APIs see it.
/// The address a request came in on: the node that answers it.
#[derive(Debug, Clone, Copy)]
pub struct Served(pub SocketAddr);

pub struct Req {
    /// The address the request came in on.
    pub served: SocketAddr,
    pub method: Method,
    /// The path alone, as Elasticsearch's messages name it.
    pub uri: String,
    pub content_type: Option<String>,
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
    json_response_as(status, body, false)
}

/// With `pretty` (`?pretty` on the request), the body indented and ending
/// in a newline, as Elasticsearch prints it for people.
fn json_response_as(status: StatusCode, body: &Value, pretty: bool) -> Response {
    let text = if pretty {
        let mut t = serde_json::to_string_pretty(body).unwrap_or_else(|_| body.to_string());
        t.push('\n');
        t
    } else {
        body.to_string()
    };
    let mut response = Response::new(Body::from(text));
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
    axum::Extension(Served(served)): axum::Extension<Served>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Response {
    let head = method == Method::HEAD;
    let header_text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    // The REST layer reads the media types before anything else, security
    // included: a version the node does not serve is refused at once.
    let node_major =
        crate::compat::major_minor(&sim.serving_node(served).version).map_or(8, |(major, _)| major);
    let compatible = match crate::compat::requested_version(
        node_major,
        header_text(header::ACCEPT),
        header_text(header::CONTENT_TYPE),
        !body.is_empty(),
    ) {
        Ok(v) => v,
        Err(error) => {
            let mut response = json_response(error.status, &error.body());
            if head {
                *response.body_mut() = Body::empty();
            }
            return response;
        }
    };
    if sim.is_secured() {
        // Elasticsearch names the request as sent, query string included.
        let request = uri
            .path_and_query()
            .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
        if let Err(refused) = crate::security::authenticate(&sim, &headers, &request) {
            tracing::debug!(%method, path = uri.path(), reason = %refused.reason, "simulated cluster refused a request without valid credentials");
            let mut response = crate::security::unauthorized(&refused);
            if head {
                *response.body_mut() = Body::empty();
            }
            return response;
        }
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // `?pretty` and `?pretty=true` indent; `?pretty=false` does not.
    let pretty = query.get("pretty").is_some_and(|v| v != "false");
    let outcome = match path_segments(uri.path()) {
        Ok(segments) => {
            let req = Req {
                served,
                method: if head { Method::GET } else { method.clone() },
                uri: uri.path().to_string(),
                content_type,
                segments,
                query,
                body,
            };
            let outcome = route(&sim, &req).await;
            // What a request changed is on disk before it is answered (a
            // read changes nothing there is to keep).
            if head || method == Method::GET {
                outcome
            } else {
                save(&sim).and(outcome)
            }
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
        Ok(reply) => json_response_as(reply.status, &reply.body, pretty),
        Err(error) => {
            tracing::debug!(
                %method,
                path = uri.path(),
                status = error.status.as_u16(),
                error_type = error.error_type,
                reason = %error.reason,
                "simulated cluster refused a request"
            );
            json_response_as(error.status, &error.body(), pretty)
        }
    };
    // Asked for a compatible version, Elasticsearch names it in its answer.
    if let Some(v) = compatible
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"))
        && let Ok(ct) = HeaderValue::from_str(&format!(
            "application/vnd.elasticsearch+json;compatible-with={v}"
        ))
    {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    if head {
        *response.body_mut() = Body::empty();
    }
    response
}

/// Brings the cluster's data path up to date, if it has one; a failure is
/// what Elasticsearch answers when it cannot write its translog.
fn save(sim: &Sim) -> Result<(), ApiError> {
    let Some(data) = &sim.data else {
        return Ok(());
    };
    data.save(sim).map_err(|e| {
        tracing::error!(cluster = %sim.cluster_name, error = %e, "simulated cluster could not write its data path");
        ApiError::of(
            StatusCode::INTERNAL_SERVER_ERROR,
            "translog_exception",
            format!("failed to write to the data path: {e}"),
        )
    })
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
    // Only the answering node's own information needs no master; every
    // other API waits for one (`master_timeout`) and gives up with 503.
    if !segments.is_empty() && !sim.has_master() {
        return Err(ApiError::master_not_discovered());
    }
    // A secured cluster whose license is no longer active refuses its
    // health and stats APIs before anything else is done.
    crate::license::refuse_health_and_stats(sim, req)?;
    match segments.as_slice() {
        [] if get => cluster::root(sim, req),
        [] => wrong(&["GET", "HEAD"]),
        ["_cluster", "voting_config_exclusions"] if post => {
            coordination::add_exclusions(sim, req).await
        }
        ["_cluster", "voting_config_exclusions"] if delete => {
            coordination::clear_exclusions(sim, req).await
        }
        ["_cluster", "voting_config_exclusions"] => wrong(&["POST", "DELETE"]),
        ["_cluster", "state"] if get => coordination::cluster_state(sim, req, None),
        ["_cluster", "state", metrics] if get => {
            coordination::cluster_state(sim, req, Some(metrics))
        }
        ["_cluster", "state", metrics, _indices] if get => {
            coordination::cluster_state(sim, req, Some(metrics))
        }
        ["_cluster", "health"] if get => cluster::health(sim, req, None).await,
        ["_cluster", "health", indices] if get => cluster::health(sim, req, Some(indices)).await,
        ["_cat", "health"] if get => cluster::cat_health(sim, req),
        ["_cat", "nodes"] if get => nodes::cat_nodes(sim, req),
        ["_cat", "shards"] if get => nodes::cat_shards(sim, req, None),
        ["_cat", "shards", index] if get => nodes::cat_shards(sim, req, Some(index)),
        ["_nodes", "stats"] if get => node_stats::nodes_stats(sim, req, None, None, None),
        ["_nodes", "stats", metrics] if get && node_stats::are_metrics(metrics) => {
            node_stats::nodes_stats(sim, req, None, Some(metrics), None)
        }
        ["_nodes", "stats", metrics, parts] if get => {
            node_stats::nodes_stats(sim, req, None, Some(metrics), Some(parts))
        }
        ["_nodes", which, "stats"] if get => {
            node_stats::nodes_stats(sim, req, Some(which), None, None)
        }
        ["_nodes", which, "stats", metrics] if get => {
            node_stats::nodes_stats(sim, req, Some(which), Some(metrics), None)
        }
        ["_nodes", which, "stats", metrics, parts] if get => {
            node_stats::nodes_stats(sim, req, Some(which), Some(metrics), Some(parts))
        }
        ["_nodes"] if get => nodes::nodes_info(sim, req, None, None),
        ["_nodes", one] if get && !nodes::OTHER_NODE_APIS.contains(one) => {
            // One part is the metrics when it names only metrics, else the nodes.
            if nodes::are_metrics(one) {
                nodes::nodes_info(sim, req, None, Some(one))
            } else {
                nodes::nodes_info(sim, req, Some(one), None)
            }
        }
        ["_nodes", which, metrics] if get && !nodes::OTHER_NODE_APIS.contains(metrics) => {
            nodes::nodes_info(sim, req, Some(which), Some(metrics))
        }
        ["_nodes", "reload_secure_settings"] if post => nodes::reload_secure_settings(sim, req),
        ["_nodes", node, "reload_secure_settings"] if post => {
            nodes::reload_secure_settings_on(sim, req, node)
        }
        ["_security", "_authenticate"] if get => crate::security::authenticate_api(sim),
        ["_security", "user", user, "_password"] if put || post => {
            crate::security::change_password(sim, req, Some(user))
        }
        ["_security", "user", "_password"] if put || post => {
            crate::security::change_password(sim, req, None)
        }
        ["_bulk"] if put || post => {
            let outcome = crate::bulk::bulk(sim, req, None);
            stats::count_bulk(sim, req.body.len(), &outcome);
            outcome
        }
        ["_cluster", "settings"] if get => nodes::get_settings(sim),
        ["_cluster", "settings"] if put => nodes::put_settings(sim, req),
        ["_cluster", "settings"] => wrong(&["GET", "PUT"]),
        ["_cat", "indices"] if get => scoped(req, all_states(), |r| indices::cat(sim, r, None)),
        ["_cat", "indices", pattern] if get => {
            scoped(req, all_states(), |r| indices::cat(sim, r, Some(pattern)))
        }
        ["_recovery"] if get => restore::recovery(sim, req, None),
        ["_count"] if get || post => scoped(req, IndicesOptions::default(), |r| {
            let outcome = crate::search::count(sim, r, None);
            if outcome.is_ok() {
                stats::count_search(sim, None);
            }
            outcome
        }),
        ["_search"] if get || post => scoped(req, IndicesOptions::default(), |r| {
            let outcome = crate::search::search(sim, r, None);
            if outcome.is_ok() {
                stats::count_search(sim, None);
            }
            outcome
        }),
        ["_search", "scroll"] if get || post => crate::search::scroll(sim, req, None),
        ["_search", "scroll", id] if get || post => crate::search::scroll(sim, req, Some(id)),
        ["_search", "scroll"] if delete => crate::search::clear_scroll(sim, req, None),
        ["_search", "scroll", ids] if delete => crate::search::clear_scroll(sim, req, Some(ids)),
        ["_pit"] if delete => crate::search::close_pit(sim, req),
        ["_mget"] if get || post => crate::search::mget(sim, req, None),
        ["_mapping"] if get => scoped(req, all_states(), |_| indices::get_mapping(sim, None)),
        ["_refresh"] if get || post => scoped(req, IndicesOptions::default(), |_| {
            let outcome = indices::refresh(sim, None);
            if outcome.is_ok() {
                stats::count_refresh(sim, None);
            }
            outcome
        }),
        ["_settings"] if get => scoped(req, all_states(), |_| indices::get_settings(sim, None)),
        ["_flush"] if get || post => index_admin::flush(sim, req, None),
        ["_forcemerge"] if post => index_admin::forcemerge(sim, req, None),
        ["_forcemerge"] => wrong(&["POST"]),
        ["_tasks"] if get => index_admin::list_tasks(),
        ["_tasks", task] if get => index_admin::get_task(sim, task),
        ["_stats"] if get => stats::stats(sim, req, None, None),
        ["_stats", metric] if get => stats::stats(sim, req, None, Some(metric)),
        ["_cluster", "stats"] if get => node_stats::cluster_stats(sim, req),
        ["_aliases"] if post => aliases::update(sim, req),
        ["_aliases"] if get => aliases::get_all(sim, req, None),
        ["_alias"] if get => aliases::get(sim, req, None, None),
        ["_alias", name] if get => aliases::get(sim, req, None, Some(name)),
        ["_index_template"] if get => templates::get_index_templates(sim, None),
        ["_index_template", "_simulate_index", name] if post => {
            templates::simulate_index(sim, name)
        }
        ["_index_template", name] if put || post => templates::put_index_template(sim, req, name),
        // HEAD is answered as GET without a body: the status says it all.
        ["_index_template", name] if get => templates::get_index_templates(sim, Some(name)),
        ["_index_template", name] if delete => templates::delete_index_template(sim, name),
        ["_index_template", _] => wrong(&["GET", "HEAD", "PUT", "POST", "DELETE"]),
        ["_component_template"] if get => templates::get_component_templates(sim, None),
        ["_component_template", name] if put || post => {
            templates::put_component_template(sim, req, name)
        }
        ["_component_template", name] if get => templates::get_component_templates(sim, Some(name)),
        ["_component_template", name] if delete => templates::delete_component_template(sim, name),
        ["_component_template", _] => wrong(&["GET", "HEAD", "PUT", "POST", "DELETE"]),

        ["_license"] if get => crate::license::get(sim, req),
        ["_license"] if put || post => crate::license::put(sim, req),
        ["_license"] if delete => crate::license::delete(sim, req),
        ["_license"] => wrong(&["GET", "PUT", "POST", "DELETE"]),
        ["_license", "start_basic"] if post => crate::license::start_basic(sim, req),
        ["_license", "start_trial"] if post => crate::license::start_trial(sim, req),
        ["_license", "start_basic" | "start_trial"] => wrong(&["POST"]),
        ["_license", "trial_status"] if get => crate::license::trial_status(sim, req),
        ["_license", "basic_status"] if get => crate::license::basic_status(sim, req),
        ["_license", "trial_status" | "basic_status"] => wrong(&["GET", "HEAD"]),
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

        // `_all` is an index expression (`/_all/_stats`), not an API.
        [name, ..] if name.starts_with('_') && *name != "_all" => {
            Err(ApiError::no_handler(m.as_str(), &req.uri))
        }
        [index] if put => indices::create(sim, req, index),
        [index] if delete => {
            resolve::refuse_aliases(&sim.state(), index)?;
            indices::delete(sim, req, index)
        }
        [index] if get => scoped(req, IndicesOptions::default(), |_| indices::get(sim, index)),
        [_] => wrong(&["GET", "HEAD", "PUT", "DELETE"]),
        // Writes through an alias go to its write index.
        [index, "_doc"] if post => {
            let target = resolve::write_index(&sim.state(), index)?;
            let outcome = indices::index_doc(sim, req, &target, None, false);
            stats::count_write(sim, &outcome);
            outcome
        }
        [index, "_doc", id] if put || post => {
            let target = resolve::write_index(&sim.state(), index)?;
            let outcome = indices::index_doc(sim, req, &target, Some(id), false);
            stats::count_write(sim, &outcome);
            outcome
        }
        [index, "_create", id] if put || post => {
            let target = resolve::write_index(&sim.state(), index)?;
            let outcome = indices::index_doc(sim, req, &target, Some(id), true);
            stats::count_write(sim, &outcome);
            outcome
        }
        [index, "_doc", id] if get => {
            let target = resolve::single_index(&sim.state(), index)?;
            let outcome = indices::get_doc(sim, &target, id);
            stats::count_get(sim, &outcome);
            outcome
        }
        [index, "_doc", id] if delete => {
            let target = resolve::write_index(&sim.state(), index)?;
            let outcome = indices::delete_doc(sim, &target, id);
            stats::count_write(sim, &outcome);
            outcome
        }
        [index, "_count"] if get || post => scoped(req, IndicesOptions::default(), |r| {
            let outcome = crate::search::count(sim, r, Some(index));
            if outcome.is_ok() {
                stats::count_search(sim, Some(index));
            }
            outcome
        }),
        [index, "_bulk"] if put || post => {
            let outcome = crate::bulk::bulk(sim, req, Some(index));
            stats::count_bulk(sim, req.body.len(), &outcome);
            outcome
        }
        [index, "_search"] if get || post => scoped(req, IndicesOptions::default(), |r| {
            let outcome = crate::search::search(sim, r, Some(index));
            if outcome.is_ok() {
                stats::count_search(sim, Some(index));
            }
            outcome
        }),
        [index, "_refresh"] if get || post => scoped(req, IndicesOptions::default(), |_| {
            let outcome = indices::refresh(sim, Some(index));
            if outcome.is_ok() {
                stats::count_refresh(sim, Some(index));
            }
            outcome
        }),
        [index, "_settings"] if get => scoped(req, all_states(), |_| {
            indices::get_settings(sim, Some(index))
        }),
        [index, "_close"] if post => scoped(req, IndicesOptions::default(), |_| {
            indices::close(sim, index)
        }),
        [index, "_open"] if post => scoped(req, IndicesOptions::closed_only(), |_| {
            indices::open(sim, index)
        }),
        [index, "_flush"] if get || post => index_admin::flush(sim, req, Some(index)),
        [index, "_forcemerge"] if post => index_admin::forcemerge(sim, req, Some(index)),
        [_, "_forcemerge"] => wrong(&["POST"]),
        [index, "_stats"] if get => stats::stats(sim, req, Some(index), None),
        [index, "_stats", metric] if get => stats::stats(sim, req, Some(index), Some(metric)),
        [index, "_alias"] if get => aliases::get(sim, req, Some(index), None),
        [index, "_aliases"] if get => aliases::get_all(sim, req, Some(index)),
        [index, "_alias" | "_aliases", name] if put || post => aliases::put(sim, req, index, name),
        [index, "_alias" | "_aliases", name] if delete => aliases::delete(sim, index, name),
        [index, "_alias", name] if get => aliases::get(sim, req, Some(index), Some(name)),
        [index, "_mget"] if get || post => crate::search::mget(sim, req, Some(index)),
        [index, "_pit"] if post => scoped(req, IndicesOptions::default(), |r| {
            crate::search::open_pit(sim, r, index)
        }),
        [index, "_delete_by_query"] if post => scoped(req, IndicesOptions::default(), |r| {
            crate::search::delete_by_query(sim, r, index)
        }),
        [index, "_mapping"] if get => scoped(req, all_states(), |_| {
            indices::get_mapping(sim, Some(index))
        }),
        [index, "_mapping"] if put || post => indices::put_mapping(sim, req, index),
        [index, "_recovery"] if get => restore::recovery(sim, req, Some(index)),
        _ => Err(ApiError::no_handler(m.as_str(), &req.uri)),
    }
}

/// Index options whose wildcards match open and closed indices, as the
/// APIs that describe indices (`_cat/indices`, `_settings`) default to.
fn all_states() -> IndicesOptions {
    IndicesOptions {
        closed: true,
        ..IndicesOptions::default()
    }
}
