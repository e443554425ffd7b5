//! Errors of the Elasticsearch client, typed from Elasticsearch's error
//! bodies (`{"error":{"type":…,"reason":…,"root_cause":[…]},"status":N}`).
//!
//! Nothing here ever holds a credential: requests carry them in a header the
//! errors never copy, and base URLs with user information are refused when
//! the client is built.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// How much of an unexpected body an error keeps: enough to recognise a
/// proxy's HTML page or a truncated reply, not enough to bloat log lines.
const SNIPPET_CHARS: usize = 200;

/// An error as Elasticsearch reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The HTTP status of the response.
    pub status: u16,
    /// Elasticsearch's exception type, such as `snapshot_missing_exception`;
    /// empty when the body carried none (an old-style string error, or a
    /// reply from something in front of Elasticsearch).
    pub error_type: String,
    pub reason: String,
    /// The innermost causes Elasticsearch lists in `root_cause`.
    #[serde(default)]
    pub root_causes: Vec<Cause>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub error_type: String,
    pub reason: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.error_type.is_empty() {
            write!(f, "HTTP {}: {}", self.status, self.reason)
        } else {
            write!(
                f,
                "HTTP {} {}: {}",
                self.status, self.error_type, self.reason
            )
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElasticError {
    #[error("the snapshot repository is not registered ({0})")]
    RepositoryMissing(Failure),
    #[error("the snapshot repository failed verification ({0})")]
    RepositoryVerification(Failure),
    #[error("another snapshot operation is running ({0})")]
    ConcurrentSnapshot(Failure),
    #[error("the snapshot name is invalid or already taken ({0})")]
    InvalidSnapshotName(Failure),
    #[error("the snapshot does not exist ({0})")]
    SnapshotMissing(Failure),
    #[error("the restore was refused ({0})")]
    SnapshotRestore(Failure),
    #[error("the repository is registered read-only ({0})")]
    ReadOnlyRepository(Failure),
    #[error("an index with that name already exists ({0})")]
    IndexAlreadyExists(Failure),
    #[error("the index is closed ({0})")]
    IndexClosed(Failure),
    /// The client gave up waiting (`failure` is `None`), or Elasticsearch
    /// itself timed out (a `408`, or a cluster-state update that waited too
    /// long). The request may have taken effect.
    #[error("{}", timeout_message(.failure))]
    Timeout { failure: Option<Failure> },
    /// No connection could be made, so the request never reached the cluster.
    #[error("the cluster could not be reached: {reason}")]
    Unreachable { reason: String },
    /// The connection failed after the request may have been sent.
    #[error("the connection to the cluster failed: {reason}")]
    Transport { reason: String },
    /// Any other error response.
    #[error("Elasticsearch answered with an error ({0})")]
    Http(Failure),
    /// A success status with a body this client cannot read.
    #[error("unexpected response (HTTP {status}): {reason}")]
    Protocol { status: u16, reason: String },
    /// The call was refused before anything was sent.
    #[error("invalid request: {reason}")]
    InvalidArgument { reason: String },
}

fn timeout_message(failure: &Option<Failure>) -> String {
    match failure {
        None => "the request to the cluster timed out".to_string(),
        Some(f) => format!("Elasticsearch timed out ({f})"),
    }
}

impl ElasticError {
    /// A stable snake_case identifier, fit for API error codes and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            ElasticError::RepositoryMissing(_) => "repository_missing",
            ElasticError::RepositoryVerification(_) => "repository_verification_failed",
            ElasticError::ConcurrentSnapshot(_) => "concurrent_snapshot",
            ElasticError::InvalidSnapshotName(_) => "invalid_snapshot_name",
            ElasticError::SnapshotMissing(_) => "snapshot_missing",
            ElasticError::SnapshotRestore(_) => "snapshot_restore_failed",
            ElasticError::ReadOnlyRepository(_) => "read_only_repository",
            ElasticError::IndexAlreadyExists(_) => "index_already_exists",
            ElasticError::IndexClosed(_) => "index_closed",
            ElasticError::Timeout { .. } => "timeout",
            ElasticError::Unreachable { .. } => "unreachable",
            ElasticError::Transport { .. } => "transport_error",
            ElasticError::Http(_) => "http_error",
            ElasticError::Protocol { .. } => "protocol_error",
            ElasticError::InvalidArgument { .. } => "invalid_argument",
        }
    }

    /// Whether trying the same call again later can succeed without anyone
    /// changing anything: the cluster was busy, unreachable or slow.
    pub fn is_transient(&self) -> bool {
        match self {
            ElasticError::Timeout { .. }
            | ElasticError::Unreachable { .. }
            | ElasticError::Transport { .. }
            // Only one snapshot deletion, or a limited number of snapshots,
            // run at once; the running one finishes on its own.
            | ElasticError::ConcurrentSnapshot(_) => true,
            // 429: rejected execution or a tripped circuit breaker; 502-504:
            // no elected master, or a load balancer without a healthy node.
            ElasticError::Http(f) => matches!(f.status, 429 | 502 | 503 | 504),
            _ => false,
        }
    }

    /// What Elasticsearch said, when the error came from a response.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            ElasticError::RepositoryMissing(f)
            | ElasticError::RepositoryVerification(f)
            | ElasticError::ConcurrentSnapshot(f)
            | ElasticError::InvalidSnapshotName(f)
            | ElasticError::SnapshotMissing(f)
            | ElasticError::SnapshotRestore(f)
            | ElasticError::ReadOnlyRepository(f)
            | ElasticError::IndexAlreadyExists(f)
            | ElasticError::IndexClosed(f)
            | ElasticError::Http(f) => Some(f),
            ElasticError::Timeout { failure } => failure.as_ref(),
            _ => None,
        }
    }

    /// The HTTP status, when the error came from a response.
    pub fn status(&self) -> Option<u16> {
        match self {
            ElasticError::Protocol { status, .. } => Some(*status),
            other => other.failure().map(|f| f.status),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> ElasticError {
        ElasticError::InvalidArgument {
            reason: reason.into(),
        }
    }

    pub(crate) fn protocol(status: u16, reason: impl Into<String>) -> ElasticError {
        ElasticError::Protocol {
            status,
            reason: reason.into(),
        }
    }

    /// Maps an error response to its variant.
    pub(crate) fn from_response(status: u16, body: &[u8]) -> ElasticError {
        classify(parse_failure(status, body))
    }

    /// Maps an error Elasticsearch reported inside a successful answer.
    pub(crate) fn from_failure(failure: Failure) -> ElasticError {
        classify(failure)
    }

    /// Maps a `reqwest` error. Its message is rebuilt without the URL, so a
    /// query string never lands in an error either.
    pub(crate) fn from_reqwest(error: reqwest::Error) -> ElasticError {
        let (connect, timeout) = (error.is_connect(), error.is_timeout());
        let reason = describe(&error.without_url());
        if connect {
            ElasticError::Unreachable { reason }
        } else if timeout {
            ElasticError::Timeout { failure: None }
        } else {
            ElasticError::Transport { reason }
        }
    }
}

/// The error and its sources on one line: reqwest's own message alone says
/// little more than "error sending request".
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

pub(crate) fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return "(empty body)".to_string();
    }
    let mut out: String = trimmed.chars().take(SNIPPET_CHARS).collect();
    if trimmed.chars().count() > SNIPPET_CHARS {
        out.push('…');
    }
    out
}

/// Reads `{"error": {...}, "status": N}`, the older `{"error": "text"}`,
/// or anything else (a proxy's page) into a `Failure`.
fn parse_failure(status: u16, body: &[u8]) -> Failure {
    let fallback = || Failure {
        status,
        error_type: String::new(),
        reason: snippet(body),
        root_causes: Vec::new(),
    };
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return fallback();
    };
    match value.get("error") {
        Some(Value::String(text)) => Failure {
            status,
            error_type: String::new(),
            reason: text.clone(),
            root_causes: Vec::new(),
        },
        Some(error @ Value::Object(_)) => failure_from_object(status, error),
        _ => fallback(),
    }
}

/// Builds a `Failure` from one error object (the top-level `error`, or one
/// per repository in multi-repository answers).
pub(crate) fn failure_from_object(status: u16, error: &Value) -> Failure {
    let (error_type, reason) = type_and_reason(error);
    let root_causes = error
        .get("root_cause")
        .and_then(Value::as_array)
        .map(|causes| {
            causes
                .iter()
                .map(|cause| {
                    let (error_type, reason) = type_and_reason(cause);
                    Cause { error_type, reason }
                })
                .collect()
        })
        .unwrap_or_default();
    Failure {
        status,
        error_type,
        reason,
        root_causes,
    }
}

fn type_and_reason(error: &Value) -> (String, String) {
    let text = |key: &str| {
        error
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let error_type = text("type");
    let mut reason = text("reason");
    // Some exceptions carry no message; the type is then all there is.
    if reason.is_empty() {
        reason.clone_from(&error_type);
    }
    (error_type, reason)
}

#[derive(Clone, Copy)]
enum Kind {
    RepositoryMissing,
    RepositoryVerification,
    ConcurrentSnapshot,
    InvalidSnapshotName,
    SnapshotMissing,
    SnapshotRestore,
    ReadOnlyRepository,
    IndexAlreadyExists,
    IndexClosed,
    Timeout,
}

fn kind_of(error_type: &str, reason: &str) -> Option<Kind> {
    Some(match error_type {
        "repository_missing_exception" => Kind::RepositoryMissing,
        "repository_verification_exception" => Kind::RepositoryVerification,
        "concurrent_snapshot_execution_exception" => Kind::ConcurrentSnapshot,
        // Registering a repository again while a snapshot runs in it (one a
        // schedule started after we looked) is refused with a conflict:
        // the same situation as a concurrent snapshot, for the caller.
        "repository_conflict_exception" if reason.contains("currently used") => {
            Kind::ConcurrentSnapshot
        }
        "invalid_snapshot_name_exception" => Kind::InvalidSnapshotName,
        "snapshot_missing_exception" => Kind::SnapshotMissing,
        // Elasticsearch reports restoring over an open index as a generic
        // restore failure; only its message tells the conflict apart.
        "snapshot_restore_exception" if reason.contains("open index with same name") => {
            Kind::IndexAlreadyExists
        }
        "snapshot_restore_exception" => Kind::SnapshotRestore,
        "resource_already_exists_exception" => Kind::IndexAlreadyExists,
        "index_closed_exception" => Kind::IndexClosed,
        // Writes to a read-only repository fail with the generic repository
        // exception ("cannot create snapshot in a readonly repository").
        "repository_exception" if mentions_read_only(reason) => Kind::ReadOnlyRepository,
        "process_cluster_event_timeout_exception" => Kind::Timeout,
        // A wait on the cluster state (voting configuration exclusions
        // taking effect, excluded nodes leaving) that ran out; what was
        // asked for is recorded and may still happen.
        "elasticsearch_timeout_exception" => Kind::Timeout,
        _ => return None,
    })
}

fn mentions_read_only(reason: &str) -> bool {
    let lower = reason.to_ascii_lowercase();
    lower.contains("readonly") || lower.contains("read-only")
}

fn classify(failure: Failure) -> ElasticError {
    // The top-level type is what Elasticsearch threw; a wrapper (a transport
    // exception, say) can hide it, and then the root causes still name it.
    let kind = kind_of(&failure.error_type, &failure.reason).or_else(|| {
        failure
            .root_causes
            .iter()
            .find_map(|cause| kind_of(&cause.error_type, &cause.reason))
    });
    let kind = match kind {
        None if failure.status == 408 => Some(Kind::Timeout),
        other => other,
    };
    match kind {
        Some(Kind::RepositoryMissing) => ElasticError::RepositoryMissing(failure),
        Some(Kind::RepositoryVerification) => ElasticError::RepositoryVerification(failure),
        Some(Kind::ConcurrentSnapshot) => ElasticError::ConcurrentSnapshot(failure),
        Some(Kind::InvalidSnapshotName) => ElasticError::InvalidSnapshotName(failure),
        Some(Kind::SnapshotMissing) => ElasticError::SnapshotMissing(failure),
        Some(Kind::SnapshotRestore) => ElasticError::SnapshotRestore(failure),
        Some(Kind::ReadOnlyRepository) => ElasticError::ReadOnlyRepository(failure),
        Some(Kind::IndexAlreadyExists) => ElasticError::IndexAlreadyExists(failure),
        Some(Kind::IndexClosed) => ElasticError::IndexClosed(failure),
        Some(Kind::Timeout) => ElasticError::Timeout {
            failure: Some(failure),
        },
        None => ElasticError::Http(failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_body(error_type: &str, reason: &str, status: u16) -> Vec<u8> {
        serde_json::json!({
            "error": {
                "root_cause": [{"type": error_type, "reason": reason}],
                "type": error_type,
                "reason": reason,
            },
            "status": status,
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn each_documented_type_maps_to_its_variant() {
        let cases = [
            (
                "repository_missing_exception",
                "[r] missing",
                404,
                "repository_missing",
            ),
            (
                "repository_verification_exception",
                "[r] path is not accessible on master node",
                500,
                "repository_verification_failed",
            ),
            (
                "concurrent_snapshot_execution_exception",
                "[r:s] a snapshot is already running",
                503,
                "concurrent_snapshot",
            ),
            (
                "repository_conflict_exception",
                "[r] trying to modify or unregister repository that is currently used (snapshot is in progress)",
                409,
                "concurrent_snapshot",
            ),
            (
                "invalid_snapshot_name_exception",
                "[r:s] Invalid snapshot name [s], snapshot with the same name already exists",
                400,
                "invalid_snapshot_name",
            ),
            (
                "snapshot_missing_exception",
                "[r:s] is missing",
                404,
                "snapshot_missing",
            ),
            (
                "snapshot_restore_exception",
                "[r:s/u] cannot restore index [i] with [2] shards from a snapshot of index [i] with [1] shards",
                500,
                "snapshot_restore_failed",
            ),
            (
                "snapshot_restore_exception",
                "[r:s/u] cannot restore index [i] because an open index with same name already exists in the cluster.",
                500,
                "index_already_exists",
            ),
            (
                "resource_already_exists_exception",
                "index [i/u] already exists",
                400,
                "index_already_exists",
            ),
            ("index_closed_exception", "closed", 400, "index_closed"),
            (
                "repository_exception",
                "[r] cannot create snapshot in a readonly repository",
                500,
                "read_only_repository",
            ),
            (
                "repository_exception",
                "[r] cannot delete snapshot from a readonly repository",
                500,
                "read_only_repository",
            ),
            (
                "repository_exception",
                "[r] could not read repository data from index blob",
                500,
                "http_error",
            ),
            (
                "process_cluster_event_timeout_exception",
                "failed to process cluster event (put_repository [r]) within 30s",
                503,
                "timeout",
            ),
            (
                "security_exception",
                "missing authentication credentials for REST request [/_snapshot]",
                401,
                "http_error",
            ),
        ];
        for (error_type, reason, status, code) in cases {
            let error =
                ElasticError::from_response(status, &error_body(error_type, reason, status));
            assert_eq!(error.code(), code, "{error_type}: {reason}");
            assert_eq!(error.status(), Some(status));
            let failure = error.failure();
            assert_eq!(failure.map(|f| f.reason.as_str()), Some(reason));
            assert_eq!(failure.map(|f| f.error_type.as_str()), Some(error_type));
        }
    }

    #[test]
    fn a_wrapped_error_is_recognised_by_its_root_cause() {
        let body = serde_json::json!({
            "error": {
                "root_cause": [{"type": "snapshot_missing_exception", "reason": "[r:s] is missing"}],
                "type": "remote_transport_exception",
                "reason": "[node][127.0.0.1:9300][cluster:admin/snapshot/get]",
            },
            "status": 404,
        });
        let error = ElasticError::from_response(404, body.to_string().as_bytes());
        assert_eq!(error.code(), "snapshot_missing");
    }

    #[test]
    fn status_408_is_a_timeout_and_other_statuses_fall_back_to_http() -> Result<(), String> {
        let error = ElasticError::from_response(408, br#"{"error":"timed out","status":408}"#);
        assert!(matches!(error, ElasticError::Timeout { failure: Some(_) }));
        assert!(error.is_transient());

        let error = ElasticError::from_response(405, br#"{"error":"Incorrect HTTP method for uri [/_snapshot/r/_verify] and method [GET], allowed: [POST]","status":405}"#);
        let ElasticError::Http(failure) = &error else {
            return Err(format!("expected Http, got {error:?}"));
        };
        assert_eq!(failure.error_type, "");
        assert!(failure.reason.starts_with("Incorrect HTTP method"));
        assert!(!error.is_transient());
        Ok(())
    }

    #[test]
    fn a_body_that_is_not_json_is_kept_as_a_short_snippet() -> Result<(), String> {
        let page = format!("<html>{}</html>", "x".repeat(1000));
        let error = ElasticError::from_response(502, page.as_bytes());
        let ElasticError::Http(failure) = &error else {
            return Err(format!("expected Http, got {error:?}"));
        };
        assert_eq!(failure.status, 502);
        assert!(failure.reason.starts_with("<html>xxx"));
        assert_eq!(failure.reason.chars().count(), SNIPPET_CHARS + 1);
        assert!(error.is_transient());

        let error = ElasticError::from_response(503, b"");
        assert_eq!(
            error.failure().map(|f| f.reason.as_str()),
            Some("(empty body)")
        );
        Ok(())
    }

    #[test]
    fn transient_errors_are_the_ones_worth_retrying() {
        let failure = |status| Failure {
            status,
            error_type: String::new(),
            reason: String::new(),
            root_causes: Vec::new(),
        };
        assert!(ElasticError::Http(failure(429)).is_transient());
        assert!(ElasticError::Http(failure(503)).is_transient());
        assert!(!ElasticError::Http(failure(500)).is_transient());
        assert!(!ElasticError::Http(failure(401)).is_transient());
        assert!(ElasticError::ConcurrentSnapshot(failure(503)).is_transient());
        assert!(!ElasticError::SnapshotMissing(failure(404)).is_transient());
        assert!(!ElasticError::RepositoryVerification(failure(500)).is_transient());
        assert!(
            ElasticError::Unreachable {
                reason: String::new()
            }
            .is_transient()
        );
        assert!(
            !ElasticError::Protocol {
                status: 200,
                reason: String::new()
            }
            .is_transient()
        );
        assert!(!ElasticError::invalid("x").is_transient());
    }
}
