//! One request passed through to the cluster as the caller sent it, and
//! its answer passed back as the cluster gave it: the control plane's
//! proxy to Elasticsearch.
//!
//! Only the method, the path, the query, the body and its content type
//! cross. No header of the caller's does: hop-by-hop headers, cookies and
//! the caller's own `Authorization` (a token for the control plane, not
//! for the cluster) stay behind, and the client's own credentials go in
//! their place.

use crate::client::ElasticClient;
use crate::error::ElasticError;
use reqwest::Method;

/// What is forwarded.
#[derive(Debug, Clone)]
pub struct ForwardRequest {
    pub method: Method,
    /// The path below the cluster's root, without a leading `/`, as the
    /// caller percent-encoded it.
    pub path: String,
    /// The raw query string, without `?`.
    pub query: Option<String>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// The cluster's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

impl ElasticClient {
    /// Sends `request` to the cluster and returns its status and body
    /// whatever they are: a 4xx or 5xx from Elasticsearch is an answer,
    /// not an error. Errors are only failures to get an answer (the
    /// cluster unreachable, a timeout, a body over `max_response_bytes`).
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
        if let Some(ct) = &request.content_type {
            builder = builder.header(reqwest::header::CONTENT_TYPE, ct);
        }
        if !request.body.is_empty() {
            builder = builder.body(request.body);
        }
        let mut response = builder.send().await.map_err(ElasticError::from_reqwest)?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
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
            content_type,
            body,
        })
    }
}
