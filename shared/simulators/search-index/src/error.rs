//! What a search, a mapping or a document is refused with: Elasticsearch's
//! exception type and reason, which the simulated cluster answers in its
//! error shape.

/// Where Elasticsearch raises the error, which decides how the cluster
/// wraps it: a request it cannot parse fails before any shard is asked;
/// a query that parses but fails on a shard comes back as a
/// `search_phase_execution_exception` with the shard's error inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The REST layer or the request parser (400, the error itself).
    Request,
    /// A shard, while running the query (400, wrapped).
    Shard,
    /// The search library failed: a 500, as Elasticsearch answers its own
    /// failures.
    Internal,
}

/// An error in Elasticsearch's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchError {
    /// Elasticsearch's exception type, e.g. `parsing_exception`.
    pub error_type: &'static str,
    pub reason: String,
    pub phase: Phase,
}

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error_type, self.reason)
    }
}

impl std::error::Error for SearchError {}

impl SearchError {
    fn request(error_type: &'static str, reason: impl Into<String>) -> SearchError {
        SearchError {
            error_type,
            reason: reason.into(),
            phase: Phase::Request,
        }
    }

    fn shard(error_type: &'static str, reason: impl Into<String>) -> SearchError {
        SearchError {
            error_type,
            reason: reason.into(),
            phase: Phase::Shard,
        }
    }

    /// The request's JSON is not what the parser expects.
    pub fn parsing(reason: impl Into<String>) -> SearchError {
        SearchError::request("parsing_exception", reason)
    }

    /// A value the parser read but cannot take.
    pub fn x_content(reason: impl Into<String>) -> SearchError {
        SearchError::request("x_content_parse_exception", reason)
    }

    pub fn illegal_argument(reason: impl Into<String>) -> SearchError {
        SearchError::request("illegal_argument_exception", reason)
    }

    /// A query that fails on a shard (an unparsable value for a field's
    /// type, a `query_string` it cannot read).
    pub fn query_shard(reason: impl Into<String>) -> SearchError {
        SearchError::shard("query_shard_exception", reason)
    }

    /// An argument a shard refuses (sorting or aggregating a text field).
    pub fn shard_argument(reason: impl Into<String>) -> SearchError {
        SearchError::shard("illegal_argument_exception", reason)
    }

    pub fn mapper_parsing(reason: impl Into<String>) -> SearchError {
        SearchError::request("mapper_parsing_exception", reason)
    }

    /// A document whose values its mapping cannot take.
    pub fn document_parsing(reason: impl Into<String>) -> SearchError {
        SearchError::request("document_parsing_exception", reason)
    }

    /// A new field in a document under `"dynamic": "strict"`.
    pub fn strict_dynamic(reason: impl Into<String>) -> SearchError {
        SearchError::request("strict_dynamic_mapping_exception", reason)
    }

    /// The search library itself failed: not the client's doing.
    pub fn engine(reason: impl std::fmt::Display) -> SearchError {
        SearchError {
            error_type: "exception",
            reason: format!("the simulated cluster's search engine failed: {reason}"),
            phase: Phase::Internal,
        }
    }

    /// What the simulated cluster does not implement, refused as
    /// Elasticsearch refuses what it cannot parse.
    pub fn unsupported(what: &str, name: &str) -> SearchError {
        SearchError::parsing(format!(
            "unknown {what} [{name}]: Floe's simulated Elasticsearch does not support it"
        ))
    }
}

impl From<tantivy::TantivyError> for SearchError {
    fn from(e: tantivy::TantivyError) -> SearchError {
        SearchError::engine(e)
    }
}
