//! One request passed through to the cluster as the caller sent it, and
//! its answer passed back as the cluster gave it: the control plane's
//! proxy to Elasticsearch.
//!
//! The method, the path, the query, the body and the request headers
//! Elasticsearch reads ([`FORWARDED_REQUEST_HEADERS`]) cross. No other
//! header of the caller's does: hop-by-hop headers, cookies and the
//! caller's own `Authorization` (a token for the control plane, not for the
//! cluster) stay behind, and the client's own credentials go in their
//! place. The answer's headers come back but for those that describe one
//! hop of the connection ([`passes_back`]).

use crate::client::ElasticClient;
use crate::error::ElasticError;
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};

/// The request headers Elasticsearch reads, passed on as the caller sent
/// them: the body's media type (and the compatibility version a client
/// asks for in it), the answer's media type, the opaque id that tags the
/// request in Elasticsearch's tasks and logs, the body's compression and
/// the compressions the caller accepts, and the trace context APM reads.
pub const FORWARDED_REQUEST_HEADERS: &[&str] = &[
    "content-type",
    "accept",
    "x-opaque-id",
    "content-encoding",
    "accept-encoding",
    "traceparent",
    "tracestate",
];

/// Whether a header of the cluster's answer goes back to the caller. The
/// hop-by-hop headers (RFC 9110 §7.6.1) describe the proxy's connection to
/// the cluster, not the caller's; `Content-Length` is set again for the
/// body as passed; `WWW-Authenticate` would ask the caller for the
/// cluster's credentials, which the control plane holds, not the caller;
/// `Set-Cookie` would hand the caller a session of the control plane's.
fn passes_back(name: &str) -> bool {
    !matches!(
        name.to_ascii_lowercase().as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
            | "www-authenticate"
            | "set-cookie"
    )
}

/// What is forwarded.
#[derive(Debug, Clone)]
pub struct ForwardRequest {
    pub method: Method,
    /// The path below the cluster's root, without a leading `/`,
    /// percent-encoded as it goes on the wire.
    pub path: String,
    /// The raw query string, without `?`.
    pub query: Option<String>,
    /// Request headers by name; only those named in
    /// [`FORWARDED_REQUEST_HEADERS`] are sent.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// The cluster's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    pub status: u16,
    /// The answer's headers that go back to the caller ([`passes_back`]),
    /// in the order the cluster sent them.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl ElasticClient {
    /// Sends `request` to the cluster and returns its status, headers and
    /// body whatever they are: a 4xx or 5xx from Elasticsearch is an
    /// answer, not an error. Errors are only failures to get an answer
    /// (the cluster unreachable, a timeout, a body over
    /// `max_response_bytes`).
    pub async fn forward(
        &self,
        request: ForwardRequest,
        max_response_bytes: usize,
    ) -> Result<Forwarded, ElasticError> {
        let mut target = format!("{}/{}", self.base_url(), request.path);
        if let Some(q) = request.query.as_deref().filter(|q| !q.is_empty()) {
            target.push('?');
            target.push_str(q);
        }
        let url = reqwest::Url::parse(&target)
            .map_err(|e| ElasticError::invalid(format!("the request URL is not valid: {e}")))?;
        let mut builder = self.authorized(self.http().request(request.method, url));
        for (name, value) in &request.headers {
            let lower = name.to_ascii_lowercase();
            if !FORWARDED_REQUEST_HEADERS.contains(&lower.as_str()) {
                continue;
            }
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(lower.as_bytes()),
                HeaderValue::from_bytes(value),
            ) else {
                return Err(ElasticError::invalid(format!(
                    "header {lower} is not a valid HTTP header"
                )));
            };
            builder = builder.header(name, value);
        }
        if !request.body.is_empty() {
            builder = builder.body(request.body);
        }
        let mut response = builder.send().await.map_err(ElasticError::from_reqwest)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter(|(name, _)| passes_back(name.as_str()))
            .map(|(name, value)| (name.as_str().to_string(), value.as_bytes().to_vec()))
            .collect();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(ElasticError::from_reqwest)? {
            if body.len() + chunk.len() > max_response_bytes {
                return Err(ElasticError::protocol(
                    status,
                    format!("the cluster's answer is larger than {max_response_bytes} bytes"),
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Forwarded {
            status,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::passes_back;

    #[test]
    fn hop_by_hop_and_credential_headers_stay_behind() {
        for kept in ["X-Elastic-Product", "warning", "content-type", "Location"] {
            assert!(passes_back(kept), "{kept}");
        }
        for dropped in [
            "Connection",
            "transfer-encoding",
            "content-length",
            "WWW-Authenticate",
            "set-cookie",
        ] {
            assert!(!passes_back(dropped), "{dropped}");
        }
    }
}
