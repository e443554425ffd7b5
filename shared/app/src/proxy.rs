//! The proxy to a deployment's Elasticsearch, in ECE's shape
//! (`/deployments/{id}/elasticsearch/{ref_id}/proxy/{path}`): the caller's
//! token decides, the cluster is reached only through what the store
//! holds (the recorded nodes, CA and sealed `elastic` password), and the
//! cluster's answer comes back as it is.

use crate::{App, AppError, Caller, Resource};
use floe_domain::Code;
use floe_domain::access::ELASTICSEARCH_REF_ID;
use floe_domain::deployment::DeploymentStatus;
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
    /// without a leading `/`.
    pub path: String,
    pub query: Option<String>,
    pub content_type: Option<String>,
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
        check_path(&request.path)?;
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
                    path: request.path,
                    query: request.query,
                    content_type: request.content_type,
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

/// The path stays below the cluster's root: no dot segments (raw or
/// percent-encoded), no empty segments that would change its meaning, no
/// control characters.
fn check_path(path: &str) -> Result<(), AppError> {
    let bad = |why: &str| Err(AppError::invalid(Code::PROXY_PATH, "path", why));
    if path.len() > 4096 {
        return bad("is longer than 4096 characters");
    }
    if path.bytes().any(|b| b.is_ascii_control() || b == b'\\') {
        return bad("must not contain control characters or backslashes");
    }
    for segment in path.split('/') {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        if decoded == "." || decoded == ".." {
            return bad("must not contain . or .. segments");
        }
        if segment.to_ascii_lowercase().contains("%2f") {
            return bad("must not contain an encoded /");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_path;

    #[test]
    fn paths_stay_below_the_root() {
        for ok in [
            "",
            "_cat/health",
            "logs-1/_doc/a%20b",
            "_snapshot/repo/joshua_1",
        ] {
            assert!(check_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "..", "a/../b", "%2e%2e/x", "a/%2E./b", "a%2fb", "a\\b", "a\nb",
        ] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
    }
}
