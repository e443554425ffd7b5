//! The HTTP client.

use crate::encode::{exact_name, index_list, new_snapshot_name};
use crate::error::{ElasticError, failure_from_object, snippet};
use crate::model::{
    ClusterHealth, CreateSnapshot, CreateSnapshotResponse, HealthStatus, IndexRow, MountRequest,
    NodeRow, RepositoryRegistration, RestoreInfo, RestoreRequest, RestoreResponse, ShardRow,
    SnapshotInfo, SnapshotStatus, VotingConfiguration,
};
use crate::recovery::{IndexRecovery, RecoveryProgress};
use chrono::Utc;
use floe_domain::secret::SecretString;
use floe_domain::snapshot_name::resolve_snapshot_name;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Url};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

/// Snapshot listings of large repositories run to megabytes; anything past
/// this is not Elasticsearch talking, and would only exhaust memory.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Elasticsearch's own default for `timeout` when waiting for a health status.
const DEFAULT_HEALTH_WAIT: Duration = Duration::from_secs(30);

/// How the client authenticates. `Debug` never shows a secret.
#[derive(Clone, Debug)]
pub enum Auth {
    Basic {
        username: String,
        password: SecretString,
    },
    /// The `encoded` value Elasticsearch returns when it creates an API key
    /// (base64 of `id:api_key`), sent as `Authorization: ApiKey …`.
    ApiKey { encoded: SecretString },
}

/// A client for one cluster. Cheap to clone: clones share one connection
/// pool, so build it once per cluster and pass it around.
#[derive(Clone)]
pub struct ElasticClient {
    http: reqwest::Client,
    /// Without a trailing slash; may carry a path prefix (a proxy's).
    base: String,
    auth: Option<Auth>,
    /// Prepared once, so a malformed key fails `new` rather than each call.
    api_key_header: Option<HeaderValue>,
    timeout: Duration,
}

impl fmt::Debug for ElasticClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElasticClient")
            .field("base", &self.base)
            .field("auth", &self.auth)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

fn http_builder(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        // Elasticsearch never redirects; a redirect comes from something
        // in between, and following it would hand the credentials on.
        .redirect(reqwest::redirect::Policy::none())
        // Clusters are reached directly on their private addresses. A
        // proxy picked up from the environment would see every request,
        // credentials included.
        .no_proxy()
}

/// An HTTPS-only client that trusts the cluster's CAs (`ca_pem`) and
/// nothing else; with `resolve`, that name reaches that address whatever
/// DNS says.
fn pinned_http(
    timeout: Duration,
    ca_pem: &str,
    resolve: Option<(&str, std::net::SocketAddr)>,
) -> Result<reqwest::Client, ElasticError> {
    let mut builder = http_builder(timeout)
        .tls_certs_only(cluster_cas(ca_pem)?)
        .https_only(true);
    if let Some((name, address)) = resolve {
        builder = builder.resolve(name, address);
    }
    builder
        .build()
        .map_err(|e| ElasticError::invalid(format!("the HTTP client could not be built: {e}")))
}

/// The roots a cluster's certificates may chain to: every certificate of
/// `ca_pem` (one CA, or the old and the new one while a CA is replaced).
fn cluster_cas(ca_pem: &str) -> Result<Vec<reqwest::Certificate>, ElasticError> {
    let cas = reqwest::Certificate::from_pem_bundle(ca_pem.as_bytes())
        .map_err(|e| ElasticError::invalid(format!("the cluster's CA is not PEM: {e}")))?;
    if cas.is_empty() {
        return Err(ElasticError::invalid(
            "the cluster's CA is not PEM: no certificate",
        ));
    }
    Ok(cas)
}

impl ElasticClient {
    /// `base_url` is the cluster's HTTP endpoint, such as
    /// `https://10.0.1.7:9200`. `timeout` bounds every call, except that a
    /// health call waiting for a status gets that wait on top.
    ///
    /// Credentials go in `auth`: a URL with user information is refused,
    /// because URLs end up in logs.
    pub fn new(
        base_url: &str,
        auth: Option<Auth>,
        timeout: Duration,
    ) -> Result<ElasticClient, ElasticError> {
        // The URL itself is never echoed: it might hold a password.
        let url = Url::parse(base_url)
            .map_err(|e| ElasticError::invalid(format!("the base URL is not valid: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ElasticError::invalid(
                "the base URL must start with http:// or https://",
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ElasticError::invalid(
                "the base URL must not contain credentials; pass them as auth",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(ElasticError::invalid(
                "the base URL must not have a query or a fragment",
            ));
        }
        if timeout.is_zero() {
            return Err(ElasticError::invalid("the timeout must be above zero"));
        }
        let http = http_builder(timeout).build().map_err(|e| {
            ElasticError::invalid(format!("the HTTP client could not be built: {e}"))
        })?;
        ElasticClient::with_http(http, url, auth, timeout)
    }

    /// A client for one node of a cluster whose nodes present a certificate
    /// for `server_name` from the cluster's own CA (`ca_pem`), reached at
    /// `address`: the name is resolved to that address, and only that CA is
    /// trusted, so neither a public CA nor another cluster's CA can stand in.
    pub fn pinned(
        server_name: &str,
        address: std::net::SocketAddr,
        ca_pem: &str,
        auth: Option<Auth>,
        timeout: Duration,
    ) -> Result<ElasticClient, ElasticError> {
        if timeout.is_zero() {
            return Err(ElasticError::invalid("the timeout must be above zero"));
        }
        let url = Url::parse(&format!("https://{server_name}:{}", address.port()))
            .map_err(|e| ElasticError::invalid(format!("the server name is not valid: {e}")))?;
        let http = pinned_http(timeout, ca_pem, Some((server_name, address)))?;
        ElasticClient::with_http(http, url, auth, timeout)
    }

    /// A client for a cluster's stable endpoint `host` (a DNS name, or an
    /// address the cluster serves for good), whose certificates name it and
    /// chain to the cluster's own CA (`ca_pem`, maybe several during a CA
    /// change). The name is resolved anew for each new connection, so a
    /// call after a node is replaced reaches one that runs.
    pub fn at_endpoint(
        host: &str,
        port: u16,
        ca_pem: &str,
        auth: Option<Auth>,
        timeout: Duration,
    ) -> Result<ElasticClient, ElasticError> {
        if timeout.is_zero() {
            return Err(ElasticError::invalid("the timeout must be above zero"));
        }
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let url = Url::parse(&format!("https://{authority}"))
            .map_err(|e| ElasticError::invalid(format!("the endpoint is not valid: {e}")))?;
        let http = pinned_http(timeout, ca_pem, None)?;
        ElasticClient::with_http(http, url, auth, timeout)
    }

    fn with_http(
        http: reqwest::Client,
        url: Url,
        auth: Option<Auth>,
        timeout: Duration,
    ) -> Result<ElasticClient, ElasticError> {
        let api_key_header = match &auth {
            Some(Auth::ApiKey { encoded }) => {
                let mut value = HeaderValue::from_str(&format!("ApiKey {}", encoded.expose()))
                    .map_err(|_| {
                        ElasticError::invalid("the API key has characters a header cannot carry")
                    })?;
                // Keeps the value out of HTTP-level debug output.
                value.set_sensitive(true);
                Some(value)
            }
            _ => None,
        };
        Ok(ElasticClient {
            http,
            base: url.as_str().trim_end_matches('/').to_string(),
            auth,
            api_key_header,
            timeout,
        })
    }

    /// The cluster's base URL, without a trailing slash.
    pub(crate) fn base_url(&self) -> &str {
        &self.base
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// `request` with the client's credentials.
    pub(crate) fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match (&self.auth, &self.api_key_header) {
            (_, Some(header)) => request.header(AUTHORIZATION, header.clone()),
            (Some(Auth::Basic { username, password }), None) => {
                request.basic_auth(username, Some(password.expose()))
            }
            _ => request,
        }
    }

    /// The same cluster and connection pool, authenticating as `username`
    /// with `password` instead.
    pub fn with_basic_auth(&self, username: &str, password: SecretString) -> ElasticClient {
        ElasticClient {
            http: self.http.clone(),
            base: self.base.clone(),
            auth: Some(Auth::Basic {
                username: username.to_string(),
                password,
            }),
            api_key_header: None,
            timeout: self.timeout,
        }
    }

    /// `GET _security/_authenticate`: whether these credentials are good.
    pub async fn authenticate(&self) -> Result<(), ElasticError> {
        let (status, body) = self
            .execute(
                Method::GET,
                "_security/_authenticate",
                &[],
                None,
                Duration::ZERO,
            )
            .await?;
        success(status, &body)
    }

    /// `POST _security/user/{username}/_password`: the user's new password,
    /// in force at once on every node (it lives in the security index).
    pub async fn change_password(
        &self,
        username: &str,
        password: &SecretString,
    ) -> Result<(), ElasticError> {
        let path = format!(
            "_security/user/{}/_password",
            exact_name("username", username)?
        );
        let body = to_body(&serde_json::json!({"password": password.expose()}))?;
        let (status, answer) = self
            .execute(Method::POST, &path, &[], Some(body), Duration::ZERO)
            .await?;
        success(status, &answer)
    }

    /// `GET _cluster/health`, optionally waiting (up to `timeout`, or
    /// Elasticsearch's 30 s) for the cluster to reach `wait_for_status`.
    ///
    /// A wait that runs out is not an error: the health comes back as it
    /// stands, with `timed_out` set (Elasticsearch answers 408 with it).
    pub async fn health(
        &self,
        wait_for_status: Option<HealthStatus>,
        timeout: Option<Duration>,
    ) -> Result<ClusterHealth, ElasticError> {
        let mut query = Vec::new();
        if let Some(status) = wait_for_status {
            query.push(("wait_for_status", status.as_str().to_string()));
        }
        if let Some(timeout) = timeout {
            query.push(("timeout", time_value(timeout)));
        }
        let wait = match wait_for_status {
            Some(_) => timeout.unwrap_or(DEFAULT_HEALTH_WAIT),
            None => Duration::ZERO,
        };
        let (status, body) = self
            .execute(Method::GET, "_cluster/health", &query, None, wait)
            .await?;
        if status == 408
            && let Ok(health) = serde_json::from_slice::<ClusterHealth>(&body)
        {
            return Ok(health);
        }
        success(status, &body)?;
        parse(status, &body)
    }

    /// `PUT _snapshot/{name}`: registers the repository, or replaces its
    /// settings. Registering with `verify` (the default) fails with
    /// `RepositoryVerification` when some node cannot use it.
    pub async fn put_repository(
        &self,
        name: &str,
        repo: &RepositoryRegistration,
    ) -> Result<(), ElasticError> {
        let path = format!("_snapshot/{}", exact_name("repository", name)?);
        let mut query = Vec::new();
        if !repo.verify {
            query.push(("verify", "false".to_string()));
        }
        let body = to_body(&repo.body())?;
        let (status, body) = self
            .execute(Method::PUT, &path, &query, Some(body), Duration::ZERO)
            .await?;
        success(status, &body)?;
        acknowledged(status, &body, &path)
    }

    /// `GET _snapshot`: every registered repository, by name, with its
    /// `type` and `settings` as the cluster reports them (settings come
    /// back as strings: `"readonly": "true"`).
    pub async fn repositories(&self) -> Result<BTreeMap<String, Value>, ElasticError> {
        let (status, body) = self
            .execute(Method::GET, "_snapshot", &[], None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        parse(status, &body)
    }

    /// `GET _license`: the cluster's license (`license.type`,
    /// `license.status`, ...), as Elasticsearch reports it.
    pub async fn license(&self) -> Result<Value, ElasticError> {
        let (status, body) = self
            .execute(Method::GET, "_license", &[], None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        let answer: Value = parse(status, &body)?;
        Ok(answer.get("license").cloned().unwrap_or(Value::Null))
    }

    /// `PUT _license?acknowledge=true` with `body` (`{"license": {...}}`):
    /// installs a license. Elasticsearch answers 200 whether it took it or
    /// not; the answer's `license_status` says which (`valid` when it was
    /// installed; `invalid` or `expired` when it was not).
    pub async fn put_license(&self, license: &Value) -> Result<Value, ElasticError> {
        let body = to_body(license)?;
        let (status, answer) = self
            .execute(
                Method::PUT,
                "_license",
                &[("acknowledge", "true".to_string())],
                Some(body),
                Duration::ZERO,
            )
            .await?;
        success(status, &answer)?;
        parse(status, &answer)
    }

    /// `POST _license/start_trial?acknowledge=true`: starts Elasticsearch's
    /// 30-day trial. `Ok(true)` when it started; `Ok(false)` when the
    /// cluster answered without starting one (its `error_message` in the
    /// error a caller builds from the license it then reads). A cluster
    /// that used its trial already answers 403, an error here.
    pub async fn start_trial(&self) -> Result<bool, ElasticError> {
        let (status, body) = self
            .execute(
                Method::POST,
                "_license/start_trial",
                &[("acknowledge", "true".to_string())],
                None,
                Duration::ZERO,
            )
            .await?;
        success(status, &body)?;
        let answer: Value = parse(status, &body)?;
        Ok(answer
            .get("trial_was_started")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    /// `POST _snapshot/{name}/_verify`: checks that every master and data
    /// node can use the repository, and returns the ids of the nodes that
    /// took part.
    pub async fn verify_repository(&self, name: &str) -> Result<Vec<String>, ElasticError> {
        #[derive(Deserialize)]
        struct Verified {
            #[serde(default)]
            nodes: BTreeMap<String, Value>,
        }
        let path = format!("_snapshot/{}/_verify", exact_name("repository", name)?);
        let (status, body) = self
            .execute(Method::POST, &path, &[], None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        let verified: Verified = parse(status, &body)?;
        Ok(verified.nodes.into_keys().collect())
    }

    /// `DELETE _snapshot/{name}`: unregisters the repository. Its contents
    /// stay where they are.
    pub async fn delete_repository(&self, name: &str) -> Result<(), ElasticError> {
        let path = format!("_snapshot/{}", exact_name("repository", name)?);
        let (status, body) = self
            .execute(Method::DELETE, &path, &[], None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        acknowledged(status, &body, &path)
    }

    /// `PUT _snapshot/{repo}/{name}`. `name` may be date math such as
    /// `<nightly-{now/d}>`; it is sent percent-encoded and Elasticsearch
    /// resolves it (see [`crate::encode_snapshot_name`]).
    ///
    /// With `wait_for_completion`, the client's timeout bounds the wait.
    /// A snapshot that ran and failed is not an error here: it comes back
    /// `Completed` with state `FAILED` (or `PARTIAL`) and its reason.
    pub async fn create_snapshot(
        &self,
        repo: &str,
        name: &str,
        req: &CreateSnapshot,
        wait_for_completion: bool,
    ) -> Result<CreateSnapshotResponse, ElasticError> {
        #[derive(Deserialize)]
        struct Created {
            accepted: Option<bool>,
            snapshot: Option<SnapshotInfo>,
            error: Option<Value>,
        }
        let path = format!(
            "_snapshot/{}/{}",
            exact_name("repository", repo)?,
            new_snapshot_name(name)?
        );
        let query = [("wait_for_completion", wait_for_completion.to_string())];
        let body = to_body(req)?;
        let predicted_name = resolve_snapshot_name(name, Utc::now()).ok();
        let (status, body) = self
            .execute(Method::PUT, &path, &query, Some(body), Duration::ZERO)
            .await?;
        // Elasticsearch answers a finished but failed snapshot with a 5xx
        // status and the snapshot itself, rather than an error body.
        match serde_json::from_slice::<Created>(&body) {
            Ok(Created {
                snapshot: Some(info),
                error: None,
                ..
            }) => Ok(CreateSnapshotResponse::Completed(Box::new(info))),
            Ok(Created {
                accepted: Some(true),
                error: None,
                ..
            }) if is_success(status) => Ok(CreateSnapshotResponse::Accepted { predicted_name }),
            _ => {
                success(status, &body)?;
                Err(unexpected(status, &body, "neither accepted nor a snapshot"))
            }
        }
    }

    /// `GET _snapshot/{repo}/_all`, oldest first. With `verbose` false,
    /// Elasticsearch answers faster but leaves out times, shard counts and
    /// failures (and, on old versions, the state).
    pub async fn list_snapshots(
        &self,
        repo: &str,
        verbose: bool,
    ) -> Result<Vec<SnapshotInfo>, ElasticError> {
        let path = format!("_snapshot/{}/_all", exact_name("repository", repo)?);
        let mut query = Vec::new();
        if !verbose {
            query.push(("verbose", "false".to_string()));
        }
        self.get_snapshots(&path, &query).await
    }

    /// `GET _snapshot/{repo}/{name}`.
    pub async fn get_snapshot(&self, repo: &str, name: &str) -> Result<SnapshotInfo, ElasticError> {
        let path = format!(
            "_snapshot/{}/{}",
            exact_name("repository", repo)?,
            exact_name("snapshot", name)?
        );
        self.get_snapshots(&path, &[])
            .await?
            .into_iter()
            .find(|info| info.snapshot == name)
            .ok_or_else(|| missing_snapshot(repo, name))
    }

    /// `GET _snapshot/{repo}/{name}/_status`: shard and byte counts. This
    /// reads the repository for finished snapshots, so poll it only while a
    /// snapshot runs.
    pub async fn snapshot_status(
        &self,
        repo: &str,
        name: &str,
    ) -> Result<SnapshotStatus, ElasticError> {
        #[derive(Deserialize)]
        struct Statuses {
            #[serde(default)]
            snapshots: Vec<SnapshotStatus>,
        }
        let path = format!(
            "_snapshot/{}/{}/_status",
            exact_name("repository", repo)?,
            exact_name("snapshot", name)?
        );
        let (status, body) = self
            .execute(Method::GET, &path, &[], None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        let statuses: Statuses = parse(status, &body)?;
        statuses
            .snapshots
            .into_iter()
            .find(|s| s.snapshot == name)
            .ok_or_else(|| missing_snapshot(repo, name))
    }

    /// `DELETE _snapshot/{repo}/{name}`. A snapshot already gone is
    /// `SnapshotMissing`, which an undo step can take as done; a repository
    /// registered read-only answers `ReadOnlyRepository`.
    pub async fn delete_snapshot(&self, repo: &str, name: &str) -> Result<(), ElasticError> {
        let path = format!(
            "_snapshot/{}/{}",
            exact_name("repository", repo)?,
            exact_name("snapshot", name)?
        );
        let (status, body) = self
            .execute(Method::DELETE, &path, &[], None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        acknowledged(status, &body, &path)
    }

    /// `POST _snapshot/{repo}/{name}/_restore`. An open index in the way is
    /// `IndexAlreadyExists`; rename on restore or close it first.
    pub async fn restore(
        &self,
        repo: &str,
        name: &str,
        req: &RestoreRequest,
        wait_for_completion: bool,
    ) -> Result<RestoreResponse, ElasticError> {
        let path = format!(
            "_snapshot/{}/{}/_restore",
            exact_name("repository", repo)?,
            exact_name("snapshot", name)?
        );
        let query = [("wait_for_completion", wait_for_completion.to_string())];
        self.restore_like(&path, &query, to_body(req)?).await
    }

    /// `POST _snapshot/{repo}/{name}/_mount?storage=…`: mounts one index of
    /// the snapshot as a searchable snapshot. Whether its shards then come
    /// up is for `health` and `recovery` to tell.
    pub async fn mount(
        &self,
        repo: &str,
        name: &str,
        req: &MountRequest,
        wait_for_completion: bool,
    ) -> Result<(), ElasticError> {
        let path = format!(
            "_snapshot/{}/{}/_mount",
            exact_name("repository", repo)?,
            exact_name("snapshot", name)?
        );
        let query = [
            ("wait_for_completion", wait_for_completion.to_string()),
            ("storage", req.storage.as_str().to_string()),
        ];
        self.restore_like(&path, &query, to_body(req)?)
            .await
            .map(|_| ())
    }

    /// `GET {indices}/_recovery` (every index when `indices` is empty):
    /// every shard recovery the cluster still reports, finished ones
    /// included, so the totals say how far a restore has got.
    /// `GET _cat/nodes`: the nodes in the cluster, by id, name and version.
    pub async fn nodes(&self) -> Result<Vec<NodeRow>, ElasticError> {
        let query = [
            ("format", "json".to_string()),
            ("full_id", "true".to_string()),
            ("h", "id,name,version".to_string()),
        ];
        let (status, body) = self
            .execute(Method::GET, "_cat/nodes", &query, None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        parse(status, &body)
    }

    /// `GET _cat/indices`: every open, visible index (hidden and system
    /// indices are left out, as `_cat/indices` does by default), its health
    /// and its primaries' document count.
    pub async fn indices(&self) -> Result<Vec<IndexRow>, ElasticError> {
        let query = [
            ("format", "json".to_string()),
            ("h", "index,health,status,docs.count".to_string()),
        ];
        let (status, body) = self
            .execute(Method::GET, "_cat/indices", &query, None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        parse(status, &body)
    }

    /// `POST {index}/_count`: how many documents of `index` (a name or a
    /// pattern) match `query` (every document when `None`).
    pub async fn count(&self, index: &str, query: Option<&Value>) -> Result<u64, ElasticError> {
        #[derive(serde::Deserialize)]
        struct Counted {
            count: u64,
        }
        let body = match query {
            Some(q) => to_body(&serde_json::json!({ "query": q }))?,
            None => to_body(&serde_json::json!({}))?,
        };
        let (status, body) = self
            .execute(
                Method::POST,
                &format!("{index}/_count"),
                &[],
                Some(body),
                Duration::ZERO,
            )
            .await?;
        success(status, &body)?;
        parse::<Counted>(status, &body).map(|c| c.count)
    }

    /// `GET _cat/shards`: every shard copy and the node it is on (none
    /// while unassigned).
    pub async fn shards(&self) -> Result<Vec<ShardRow>, ElasticError> {
        let query = [
            ("format", "json".to_string()),
            ("h", "index,shard,prirep,state,node".to_string()),
        ];
        let (status, body) = self
            .execute(Method::GET, "_cat/shards", &query, None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        parse(status, &body)
    }

    /// `PUT _cluster/settings` with persistent settings (flat keys; `null`
    /// removes one).
    pub async fn put_persistent_settings(
        &self,
        settings: serde_json::Map<String, Value>,
    ) -> Result<(), ElasticError> {
        let body = to_body(&serde_json::json!({ "persistent": settings }))?;
        let (status, body) = self
            .execute(
                Method::PUT,
                "_cluster/settings",
                &[],
                Some(body),
                Duration::ZERO,
            )
            .await?;
        success(status, &body)?;
        acknowledged(status, &body, "_cluster/settings")
    }

    /// `POST _cluster/voting_config_exclusions?node_names=…`: excludes the
    /// named master-eligible nodes from voting, so that they can leave
    /// without costing the cluster its quorum. Elasticsearch waits until
    /// they are out of the voting configuration; when that wait (half the
    /// client's timeout) runs out, the answer is a `Timeout` and the
    /// exclusions stay recorded. Excluding a node twice is harmless.
    pub async fn add_voting_config_exclusions(
        &self,
        node_names: &[String],
    ) -> Result<(), ElasticError> {
        if node_names.is_empty() {
            return Err(ElasticError::invalid("no node to exclude from voting"));
        }
        // A wildcard or comma would exclude other nodes than these; the
        // names themselves go in the query, encoded there.
        for name in node_names {
            exact_name("node", name)?;
        }
        let names = node_names;
        let wait = self.timeout / 2;
        let query = [
            ("node_names", names.join(",")),
            ("timeout", time_value(wait)),
        ];
        let (status, body) = self
            .execute(
                Method::POST,
                "_cluster/voting_config_exclusions",
                &query,
                None,
                Duration::ZERO,
            )
            .await?;
        success(status, &body)
    }

    /// `DELETE _cluster/voting_config_exclusions`. With `wait_for_removal`
    /// (Elasticsearch's default) it answers only once every excluded node
    /// has left the cluster; without, at once (for nodes that stay).
    pub async fn clear_voting_config_exclusions(
        &self,
        wait_for_removal: bool,
    ) -> Result<(), ElasticError> {
        let wait = self.timeout / 2;
        let query = [
            ("wait_for_removal", wait_for_removal.to_string()),
            ("timeout", time_value(wait)),
        ];
        let (status, body) = self
            .execute(
                Method::DELETE,
                "_cluster/voting_config_exclusions",
                &query,
                None,
                Duration::ZERO,
            )
            .await?;
        success(status, &body)
    }

    /// `GET _cluster/state/metadata`: the voting configuration and its
    /// exclusions (`metadata.cluster_coordination`).
    pub async fn voting_configuration(&self) -> Result<VotingConfiguration, ElasticError> {
        #[derive(Deserialize)]
        struct State {
            metadata: Metadata,
        }
        #[derive(Deserialize)]
        struct Metadata {
            #[serde(default)]
            cluster_coordination: VotingConfiguration,
        }
        let (status, body) = self
            .execute(
                Method::GET,
                "_cluster/state/metadata",
                &[],
                None,
                Duration::ZERO,
            )
            .await?;
        success(status, &body)?;
        let state: State = parse(status, &body)?;
        Ok(state.metadata.cluster_coordination)
    }

    pub async fn recovery(&self, indices: &[String]) -> Result<RecoveryProgress, ElasticError> {
        self.recovery_query(indices, false).await
    }

    /// Like [`ElasticClient::recovery`] with `active_only=true`: only the
    /// recoveries still running, so an empty answer means nothing is
    /// copying any more (or nothing has started).
    pub async fn active_recoveries(
        &self,
        indices: &[String],
    ) -> Result<RecoveryProgress, ElasticError> {
        self.recovery_query(indices, true).await
    }

    async fn recovery_query(
        &self,
        indices: &[String],
        active_only: bool,
    ) -> Result<RecoveryProgress, ElasticError> {
        let path = if indices.is_empty() {
            "_recovery".to_string()
        } else {
            format!("{}/_recovery", index_list(indices)?)
        };
        let mut query = Vec::new();
        if active_only {
            query.push(("active_only", "true".to_string()));
        }
        let (status, body) = self
            .execute(Method::GET, &path, &query, None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        let recoveries: BTreeMap<String, IndexRecovery> = parse(status, &body)?;
        Ok(RecoveryProgress::from_response(recoveries))
    }

    async fn get_snapshots(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<Vec<SnapshotInfo>, ElasticError> {
        /// 7.13 and later answer `snapshots` (with `failures` per
        /// repository); earlier 7.x versions wrap each repository in
        /// `responses`.
        #[derive(Deserialize)]
        struct Listing {
            #[serde(default)]
            snapshots: Vec<SnapshotInfo>,
            #[serde(default)]
            failures: BTreeMap<String, Value>,
            #[serde(default)]
            responses: Vec<PerRepository>,
        }
        #[derive(Deserialize)]
        struct PerRepository {
            #[serde(default)]
            snapshots: Vec<SnapshotInfo>,
            error: Option<Value>,
        }
        let (status, body) = self
            .execute(Method::GET, path, query, None, Duration::ZERO)
            .await?;
        success(status, &body)?;
        let listing: Listing = parse(status, &body)?;
        let per_repository_error = listing
            .failures
            .values()
            .chain(listing.responses.iter().filter_map(|r| r.error.as_ref()))
            .next();
        if let Some(error) = per_repository_error {
            return Err(ElasticError::from_failure(failure_from_object(
                status, error,
            )));
        }
        let mut snapshots = listing.snapshots;
        for repository in listing.responses {
            snapshots.extend(repository.snapshots);
        }
        Ok(snapshots)
    }

    async fn restore_like(
        &self,
        path: &str,
        query: &[(&str, String)],
        body: Vec<u8>,
    ) -> Result<RestoreResponse, ElasticError> {
        #[derive(Deserialize)]
        struct Restored {
            accepted: Option<bool>,
            snapshot: Option<RestoreInfo>,
        }
        let (status, body) = self
            .execute(Method::POST, path, query, Some(body), Duration::ZERO)
            .await?;
        success(status, &body)?;
        match parse::<Restored>(status, &body)? {
            Restored {
                snapshot: Some(info),
                ..
            } => Ok(RestoreResponse::Completed(info)),
            Restored {
                accepted: Some(true),
                ..
            } => Ok(RestoreResponse::Accepted),
            _ => Err(unexpected(status, &body, "neither accepted nor a restore")),
        }
    }

    /// Sends one request and reads the whole answer, whatever its status.
    /// `extra_wait` lengthens the timeout for calls that ask Elasticsearch
    /// to wait before answering.
    async fn execute(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Vec<u8>>,
        extra_wait: Duration,
    ) -> Result<(u16, Vec<u8>), ElasticError> {
        let mut url = Url::parse(&format!("{}/{}", self.base, path))
            .map_err(|e| ElasticError::invalid(format!("the request URL is not valid: {e}")))?;
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        let mut request = self
            .http
            .request(method.clone(), url)
            .header(ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        request = self.authorized(request);
        if !extra_wait.is_zero() {
            request = request.timeout(self.timeout.saturating_add(extra_wait));
        }

        let started = Instant::now();
        let outcome = async {
            let mut response = request.send().await.map_err(ElasticError::from_reqwest)?;
            let status = response.status().as_u16();
            // Content-Length can be absent or wrong; the cap applies to
            // what arrives.
            let mut bytes = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(ElasticError::from_reqwest)? {
                if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(ElasticError::protocol(
                        status,
                        format!("the response is larger than {MAX_RESPONSE_BYTES} bytes"),
                    ));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok((status, bytes))
        }
        .await;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match &outcome {
            Ok((status, _)) => {
                tracing::debug!(%method, path, status, elapsed_ms, "elasticsearch request");
            }
            Err(error) => {
                tracing::debug!(%method, path, elapsed_ms, code = error.code(), %error, "elasticsearch request failed");
            }
        }
        outcome
    }
}

/// Elasticsearch time units; milliseconds are exact for any `Duration` a
/// caller would pass.
fn time_value(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

fn success(status: u16, body: &[u8]) -> Result<(), ElasticError> {
    if is_success(status) {
        Ok(())
    } else {
        Err(ElasticError::from_response(status, body))
    }
}

fn parse<T: DeserializeOwned>(status: u16, body: &[u8]) -> Result<T, ElasticError> {
    serde_json::from_slice(body).map_err(|e| unexpected(status, body, &e.to_string()))
}

fn unexpected(status: u16, body: &[u8], problem: &str) -> ElasticError {
    ElasticError::protocol(
        status,
        format!("{problem}; the body was: {}", snippet(body)),
    )
}

fn to_body<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, ElasticError> {
    serde_json::to_vec(value)
        .map_err(|e| ElasticError::invalid(format!("the request body could not be written: {e}")))
}

/// `{"acknowledged": false}` means the change is in the cluster state but
/// not every node confirmed it in time: done, though worth a trace.
fn acknowledged(status: u16, body: &[u8], path: &str) -> Result<(), ElasticError> {
    #[derive(Deserialize)]
    struct Acknowledged {
        #[serde(default)]
        acknowledged: bool,
    }
    let answer: Acknowledged = parse(status, body)?;
    if !answer.acknowledged {
        tracing::warn!(
            path,
            "elasticsearch applied the change but did not acknowledge it in time"
        );
    }
    Ok(())
}

/// What Elasticsearch itself would say, for an answer that left the
/// snapshot out without an error.
fn missing_snapshot(repo: &str, name: &str) -> ElasticError {
    ElasticError::SnapshotMissing(crate::error::Failure {
        status: 404,
        error_type: "snapshot_missing_exception".to_string(),
        reason: format!("[{repo}:{name}] is missing"),
        root_causes: Vec::new(),
    })
}
