//! Errors: the simulator's own ([`SimError`]), and the ones it answers with
//! over HTTP in Elasticsearch's shape ([`ApiError`]).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::net::SocketAddr;

/// Starting or stopping a simulated cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Nothing but the local machine may reach a simulator: it writes
    /// wherever its repositories point.
    #[error("the simulated cluster must listen on a loopback address, not {0}")]
    NotLoopback(SocketAddr),
    #[error("the simulated cluster could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the simulated cluster's TLS setup failed: {0}")]
    Tls(String),
    #[error("the simulated cluster's HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("the simulated cluster's server task ended abnormally: {0}")]
    Task(String),
    /// Its data path holds something it cannot read back: it refuses to
    /// start rather than start empty over a user's data.
    #[error("the simulated cluster cannot use its data path {path}: {message}")]
    DataPath {
        path: std::path::PathBuf,
        message: String,
    },
}

/// An error response as Elasticsearch writes it:
/// `{"error":{"root_cause":[…],"type":…,"reason":…},"status":N}`, or, for
/// the REST layer's own refusals, `{"error":"text","status":N}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    /// Elasticsearch's exception type; empty for a plain-text error.
    pub error_type: &'static str,
    pub reason: String,
    /// Extra fields some exceptions carry (`index`, `resource.id`, …).
    pub extra: Map<String, Value>,
}

impl ApiError {
    fn new(status: StatusCode, error_type: &'static str, reason: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error_type,
            reason: reason.into(),
            extra: Map::new(),
        }
    }

    /// An error of any type: for errors whose type comes from elsewhere
    /// (the search library's).
    pub fn of(status: StatusCode, error_type: &'static str, reason: impl Into<String>) -> ApiError {
        ApiError::new(status, error_type, reason)
    }

    /// Adds a field to the error (`root_cause` replaces the one made of
    /// the error itself, as a wrapping exception's names the inner one).
    pub fn with_field(self, key: &str, value: Value) -> ApiError {
        self.with(key, value)
    }

    fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    /// The exception underneath, as Elasticsearch nests it.
    pub fn caused_by(self, error_type: &str, reason: &str) -> ApiError {
        self.with("caused_by", json!({ "type": error_type, "reason": reason }))
    }

    fn with_index(self, index: &str, uuid: &str) -> ApiError {
        self.with("index_uuid", uuid).with("index", index)
    }

    pub fn repository_missing(repo: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "repository_missing_exception",
            format!("[{repo}] missing"),
        )
    }

    pub fn snapshot_missing(repo: &str, snapshot: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "snapshot_missing_exception",
            format!("[{repo}:{snapshot}] is missing"),
        )
    }

    pub fn index_not_found(index: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "index_not_found_exception",
            format!("no such index [{index}]"),
        )
        .with("resource.type", "index_or_alias")
        .with("resource.id", index)
        .with_index(index, "_na_")
    }

    pub fn index_exists(index: &str, uuid: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "resource_already_exists_exception",
            format!("index [{index}/{uuid}] already exists"),
        )
        .with_index(index, uuid)
    }

    pub fn invalid_index_name(index: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_index_name_exception",
            format!("Invalid index name [{index}], {why}"),
        )
        .with_index(index, "_na_")
    }

    pub fn index_closed(index: &str, uuid: &str) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "index_closed_exception", "closed")
            .with_index(index, uuid)
    }

    /// A write to an index with a write block, which every mounted
    /// searchable snapshot has.
    pub fn write_blocked(index: &str) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "cluster_block_exception",
            format!("index [{index}] blocked by: [FORBIDDEN/8/index write (api)];"),
        )
    }

    /// Primaries still recovering (a restore in progress) take no writes.
    pub fn unavailable_shards(index: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable_shards_exception",
            format!("[{index}][0] primary shard is not active Timeout: [1m]"),
        )
    }

    /// A search over shards that are not started yet.
    pub fn all_shards_failed() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "search_phase_execution_exception",
            "all shards failed",
        )
        .with("phase", "query")
        .with("grouped", true)
    }

    pub fn invalid_snapshot_name(repo: &str, snapshot: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_snapshot_name_exception",
            format!("[{repo}:{snapshot}] Invalid snapshot name [{snapshot}], {why}"),
        )
    }

    pub fn concurrent_snapshot(repo: &str, snapshot: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "concurrent_snapshot_execution_exception",
            format!("[{repo}:{snapshot}] {why}"),
        )
    }

    pub fn repository(repo: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "repository_exception",
            format!("[{repo}] {why}"),
        )
    }

    pub fn repository_verification(repo: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "repository_verification_exception",
            format!("[{repo}] {why}"),
        )
    }

    /// `snapshot` is how Elasticsearch names it in the message:
    /// `repo:name` or `repo:name/uuid`.
    pub fn snapshot_restore(snapshot: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "snapshot_restore_exception",
            format!("[{snapshot}] {why}"),
        )
    }

    /// What Elasticsearch's parser answers to a request it cannot read:
    /// an unknown key, query or aggregation type.
    pub fn parsing(why: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "parsing_exception", why)
    }

    pub fn illegal_argument(why: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "illegal_argument_exception", why)
    }

    pub fn parse(why: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "parse_exception", why)
    }

    pub fn x_content_parse(why: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "x_content_parse_exception", why)
    }

    pub fn validation(why: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "action_request_validation_exception",
            format!("Validation Failed: 1: {why};"),
        )
    }

    /// The REST layer's refusal of `Accept` and `Content-Type` headers that
    /// ask for a REST API version it does not serve (400).
    pub fn media_type_header(why: &str) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "media_type_header_exception", why)
    }

    /// The REST layer's refusal of a body it cannot read (406).
    pub fn not_acceptable(why: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_ACCEPTABLE, "", why)
    }

    /// The REST layer's answer for a path no API serves.
    pub fn no_handler(method: &str, uri: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "",
            format!("no handler found for uri [{uri}] and method [{method}]"),
        )
    }

    pub fn method_not_allowed(method: &str, uri: &str, allowed: &[&str]) -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "",
            format!(
                "Incorrect HTTP method for uri [{uri}] and method [{method}], allowed: [{}]",
                allowed.join(", ")
            ),
        )
    }

    /// No elected master: a majority of the voting configuration is gone.
    /// Elasticsearch gives no reason (`"reason": null`).
    pub fn master_not_discovered() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "master_not_discovered_exception",
            "",
        )
    }

    /// A wait for the cluster state that ran out.
    pub fn timeout(why: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "elasticsearch_timeout_exception",
            why,
        )
    }

    /// A health wait that ran out is answered with the health itself, so
    /// this is only for errors the simulator cannot say better.
    pub fn internal(why: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "exception", why)
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        if self.error_type.is_empty() {
            return json!({ "error": self.reason, "status": self.status.as_u16() });
        }
        let mut cause = Map::new();
        cause.insert("type".to_string(), Value::from(self.error_type));
        // Exceptions made without a message print `null`, not "".
        let reason = if self.reason.is_empty() {
            Value::Null
        } else {
            Value::from(self.reason.clone())
        };
        cause.insert("reason".to_string(), reason);
        let mut extra = self.extra.clone();
        let root = extra.remove("root_cause");
        cause.extend(extra);
        let mut error = cause.clone();
        error.insert(
            "root_cause".to_string(),
            root.unwrap_or_else(|| Value::Array(vec![Value::Object(cause)])),
        );
        json!({ "error": error, "status": self.status.as_u16() })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        crate::server::json_response(self.status, &self.body())
    }
}

/// Refusals of the index, alias and template APIs.
impl ApiError {
    pub fn invalid_index_template(name: &str, why: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_index_template_exception",
            format!("index_template [{name}] invalid, cause [{why}]"),
        )
    }

    pub fn resource_not_found(why: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "resource_not_found_exception", why)
    }

    pub fn index_template_missing(name: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "index_template_missing_exception",
            format!("index_template [{name}] missing"),
        )
    }

    pub fn invalid_alias_name(alias: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_alias_name_exception",
            format!(
                "Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias"
            ),
        )
    }

    pub fn aliases_not_found(aliases: &[String]) -> ApiError {
        let names = aliases.join(",");
        ApiError::new(
            StatusCode::NOT_FOUND,
            "aliases_not_found_exception",
            format!("aliases [{names}] missing"),
        )
        .with("resource.type", "aliases")
        .with("resource.id", names)
    }
}
