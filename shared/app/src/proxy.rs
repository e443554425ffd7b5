//! The proxy to a deployment's Elasticsearch, in ECE's shape
//! (`/deployments/{id}/elasticsearch/{ref_id}/proxy/{path}`): the caller's
//! token decides, the cluster is reached only through what the store
//! holds (the recorded nodes, CA and sealed `elastic` password), and the
//! cluster's answer comes back as it is.

use crate::{App, AppError, Caller, Resource};
use floe_domain::Code;
use floe_domain::access::ELASTICSEARCH_REF_ID;
use floe_domain::deployment::DeploymentStatus;
pub use floe_elastic::FORWARDED_REQUEST_HEADERS;
use floe_elastic::{ForwardRequest, Forwarded};

/// The largest request body passed on (API Gateway's own limit is 10 MB);
/// the HTTP layer refuses a larger one with 413.
pub const MAX_PROXY_REQUEST_BYTES: usize = 10 * 1024 * 1024;
/// The largest answer passed back; a Lambda response cannot be larger.
pub const MAX_PROXY_RESPONSE_BYTES: usize = 6 * 1024 * 1024;

/// One request for the cluster. `method` is an HTTP method name.
#[derive(Debug, Clone)]
pub struct ProxyRequest {
    pub method: String,
    /// The path below the cluster's root, as the caller encoded it,
    /// without a leading `/`. An encoded `/` (`%2F`, as a generated client
    /// sends the one path parameter) separates segments as a raw one does,
    /// but inside a date-math name (`%3C…%3E`), where Elasticsearch reads
    /// it as part of the name ([`wire_path`]).
    pub path: String,
    pub query: Option<String>,
    /// The caller's request headers; only those Elasticsearch reads
    /// (`floe_elastic::FORWARDED_REQUEST_HEADERS`) are passed on.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// Reading methods: a viewer may send these, and only these.
fn reads(method: &str) -> bool {
    matches!(method, "GET" | "HEAD")
}

impl App {
    /// Passes `request` to the deployment's cluster. Reading methods need a
    /// reader, the others a manager. The cluster's status and body come
    /// back unchanged; an `AppError` means it gave no answer.
    pub async fn proxy(
        &self,
        caller: &Caller,
        deployment_id: &str,
        ref_id: &str,
        request: ProxyRequest,
    ) -> Result<Forwarded, AppError> {
        let method = request.method.to_ascii_uppercase();
        let org = if reads(&method) {
            caller.reader()?.org.clone()
        } else if matches!(
            method.as_str(),
            "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS"
        ) {
            caller.manager()?.org.clone()
        } else {
            return Err(AppError::invalid(
                Code::PROXY_METHOD,
                "method",
                "must be one of GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS",
            ));
        };
        let deployment = self.load_deployment(&org, deployment_id).await?;
        if ref_id != ELASTICSEARCH_REF_ID {
            return Err(AppError::not_found(
                Resource::Elasticsearch,
                format!("{deployment_id}/{ref_id}"),
            ));
        }
        let path = wire_path(&request.path)?;
        let reachable = matches!(
            deployment.value.status,
            DeploymentStatus::Running | DeploymentStatus::Reconfiguring
        ) && deployment
            .value
            .access
            .as_ref()
            .is_some_and(|a| !a.nodes.is_empty());
        if !reachable {
            return Err(AppError::conflict(
                Code::DEPLOYMENTS_NOT_REACHABLE,
                format!(
                    "deployment {deployment_id} is {} and has no node to reach",
                    deployment.value.status.as_str()
                ),
            ));
        }
        let client = self
            .clusters
            .client(&deployment.value, &[])
            .await
            .map_err(|e| AppError::Unavailable {
                code: Code::PROXY_CLUSTER_UNREACHABLE,
                message: format!("the cluster cannot be reached: {e}"),
            })?;
        let method = floe_elastic::Method::from_bytes(method.as_bytes()).map_err(|_| {
            AppError::invalid(Code::PROXY_METHOD, "method", "is not an HTTP method")
        })?;
        client
            .forward(
                ForwardRequest {
                    method,
                    path,
                    query: request.query,
                    headers: request.headers,
                    body: request.body,
                },
                MAX_PROXY_RESPONSE_BYTES,
            )
            .await
            .map_err(|e| AppError::Unavailable {
                code: Code::PROXY_CLUSTER_UNREACHABLE,
                message: format!("the cluster gave no answer: {e}"),
            })
    }
}

/// The path as it goes to the cluster: each `%2F` outside a date-math
/// name turned into the `/` a generated client meant by it, then checked
/// to stay below the cluster's root: no dot segments (raw or
/// percent-encoded), no control characters or backslashes, no malformed
/// percent-encoding (a `%` without two hex digits, or escapes that do not
/// decode to UTF-8, which no Elasticsearch name is). Every other escape is
/// passed on as the caller wrote it, for Elasticsearch to decode.
fn wire_path(path: &str) -> Result<String, AppError> {
    let bad = |why: &str| Err(AppError::invalid(Code::PROXY_PATH, "path", why));
    if path.len() > 4096 {
        return bad("is longer than 4096 characters");
    }
    if path.bytes().any(|b| b.is_ascii_control() || b == b'\\') {
        return bad("must not contain control characters or backslashes");
    }
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    // Inside `<…>` (sent as `%3C…%3E`), a date-math name such as
    // `<logs-{now/d}>`: its `/` is part of the name.
    let mut in_date_math = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            // Only ASCII was let through above, or a multi-byte character
            // that is passed on whole.
            let ch = path[i..].chars().next().unwrap_or_default();
            out.push(ch);
            i += ch.len_utf8().max(1);
            continue;
        }
        let hex = path
            .get(i + 1..i + 3)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(hex) = hex else {
            return bad("has a % not followed by two hexadecimal digits");
        };
        match hex.to_ascii_uppercase().as_str() {
            "3C" => in_date_math = true,
            "3E" => in_date_math = false,
            "2F" if !in_date_math => {
                out.push('/');
                i += 3;
                continue;
            }
            _ => {}
        }
        out.push('%');
        out.push_str(hex);
        i += 3;
    }
    if std::str::from_utf8(&percent_decoded(&out)).is_err() {
        return bad("has percent-escapes that do not decode to UTF-8");
    }
    for segment in out.split('/') {
        let dots = segment.to_ascii_lowercase().replace("%2e", ".");
        if dots == "." || dots == ".." {
            return bad("must not contain . or .. segments");
        }
    }
    Ok(out)
}

/// The bytes `path` names, each `%XX` decoded (`path` is checked: every
/// `%` is followed by two hex digits).
fn percent_decoded(path: &str) -> Vec<u8> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| path.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wire_path;

    #[test]
    fn paths_stay_below_the_root() {
        for ok in [
            "",
            "_cat/health",
            "logs-1/_doc/a%20b",
            "_snapshot/repo/joshua_1",
        ] {
            assert_eq!(wire_path(ok).ok().as_deref(), Some(ok));
        }
        for bad in [
            "..",
            "a/../b",
            "%2e%2e/x",
            "a/%2E./b",
            "a\\b",
            "a\nb",
            "a%2F..%2Fb",
            "%2e%2E",
            "a%zz",
            "a%2",
            "%",
            // Not UTF-8 once decoded (issue 33: axum's plain-text 400).
            "a%ff",
            "a%C3",
        ] {
            assert!(wire_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_encoded_slash_separates_segments_but_in_date_math() {
        for (sent, wire) in [
            ("_cat%2Fhealth", "_cat/health"),
            ("logs%2F_doc%2Fa%20b", "logs/_doc/a%20b"),
            ("_snapshot%2frepo%2F_all", "_snapshot/repo/_all"),
            (
                "%3Clogs-%7Bnow%2Fd%7D%3E/_search",
                "%3Clogs-%7Bnow%2Fd%7D%3E/_search",
            ),
            (
                "%3Clogs-%7Bnow%2Fd%7D%3E%2F_search",
                "%3Clogs-%7Bnow%2Fd%7D%3E/_search",
            ),
            ("caf\u{e9}/_doc/1", "caf\u{e9}/_doc/1"),
            ("caf%C3%A9/_doc/1", "caf%C3%A9/_doc/1"),
        ] {
            assert_eq!(wire_path(sent).ok().as_deref(), Some(wire), "{sent}");
        }
    }
}
