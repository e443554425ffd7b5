//! The proxy to a deployment's Elasticsearch:
//! `/api/v1/deployments/{id}/elasticsearch/{ref_id}/proxy/{path}`, any
//! method, as ECE has it. The caller's token decides (viewers read with
//! GET and HEAD only); the cluster's status and body come back as they are.

use crate::error::{ApiError, ErrorBody};
use crate::extract::Caller;
use crate::state::ApiState;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{MethodFilter, on};
use floe_app::proxy::FORWARDED_REQUEST_HEADERS;
use floe_app::proxy::{MAX_PROXY_REQUEST_BYTES, ProxyRequest};
use floe_domain::Code;
use utoipa::OpenApi;

pub const TAG: &str = "deployments";
const PREFIX: &str = "/api/v1/deployments/{id}/elasticsearch/{ref_id}/proxy";

/// The proxy's routes: with a path below the cluster's root, and the root
/// itself (`…/proxy` and `…/proxy/`).
pub fn router() -> Router<ApiState> {
    // The methods the proxy passes on; any other (TRACE, CONNECT) gets the
    // router's 405 with `Allow`, as a method the document does not list.
    let methods = MethodFilter::GET
        .or(MethodFilter::HEAD)
        .or(MethodFilter::POST)
        .or(MethodFilter::PUT)
        .or(MethodFilter::DELETE)
        .or(MethodFilter::PATCH)
        .or(MethodFilter::OPTIONS);
    let handler = on(methods, proxy).layer(DefaultBodyLimit::max(MAX_PROXY_REQUEST_BYTES));
    Router::new()
        .route(&format!("{PREFIX}/{{*path}}"), handler.clone())
        .route(&format!("{PREFIX}/"), handler.clone())
        .route(PREFIX, handler)
}

/// The proxy's entries in the OpenAPI document, one operation per method
/// (its route is a catch-all, which the document spells as one path
/// parameter).
#[derive(OpenApi)]
#[openapi(paths(
    proxy_get,
    proxy_head,
    proxy_post,
    proxy_put,
    proxy_delete,
    proxy_patch,
    proxy_options
))]
pub struct ProxyDoc;

/// One documented operation of the proxy. Reading methods take no body.
macro_rules! proxy_operation {
    ($fn_name:ident, $method:ident, $id:literal, $who:literal, $roles:ident) => {
        proxy_operation!(@doc $fn_name, $method, $id, $who, $roles,
            request_body(content = Object, description = "Passed on as it is, with its Content-Type (JSON, or NDJSON for `_bulk`).",
                example = json!({"query": {"match_all": {}}})),
        );
    };
    ($fn_name:ident, $method:ident, $id:literal, $who:literal, $roles:ident, reads) => {
        proxy_operation!(@doc $fn_name, $method, $id, $who, $roles,);
    };
    (@doc $fn_name:ident, $method:ident, $id:literal, $who:literal, $roles:ident, $($body:tt)*) => {
        /// Send a request to the deployment's Elasticsearch.
        ///
        /// The path below the cluster's root, with its query and body, is
        /// passed on with the request headers Elasticsearch reads
        /// (`Content-Type`, `Accept` with its `compatible-with` version,
        /// `X-Opaque-Id`, `Content-Encoding`, `Accept-Encoding`,
        /// `traceparent`, `tracestate`). The cluster's status, headers
        /// (`X-Elastic-Product`, `Warning`, `Content-Type`, …; a `Location`
        /// rewritten below this proxy) and body come back unchanged, but for
        /// hop-by-hop headers, `WWW-Authenticate` and `Set-Cookie`, so the
        /// official Elasticsearch clients work through it (point one at
        /// `…/proxy` with the bearer token). The control plane
        /// authenticates to the cluster itself (as `elastic`), from what its
        /// store holds: the caller's `Authorization` is never passed on.
        /// `ref_id` is `main-elasticsearch`, the one Elasticsearch resource
        /// of a Floe deployment. Bodies up to 10 MiB; answers up to 6 MiB.
        #[utoipa::path(
            $method,
            path = "/api/v1/deployments/{id}/elasticsearch/{ref_id}/proxy/{path}",
            operation_id = $id,
            tag = TAG,
            description = $who,
            params(
                ("id" = String, Path, description = "Deployment id."),
                ("ref_id" = String, Path, description = "`main-elasticsearch`."),
                ("path" = String, Path, description = "The Elasticsearch path, such as `_cat/health` or `logs/_doc/1`; its query string is passed on. Its segments may be sent with raw `/` or with `/` encoded as `%2F` (as a generated client sends this parameter): both reach the same path. Inside a date-math name (`%3Clogs-%7Bnow%2Fd%7D%3E`), `%2F` stays part of the name. Other escapes are passed on for Elasticsearch to decode; `.` and `..` segments, control characters, backslashes and malformed escapes are refused (400 `proxy.path`)."),
            ),
            $($body)*
            extensions(("x-floe-roles" = json!(floe_app::caller::$roles))),
            responses(
                (status = 200, description = "Elasticsearch's answer, as it gave it (any status it gives is passed back).", body = Object,
                 example = json!({"cluster_name": "logs-prod", "status": "green", "number_of_nodes": 3, "active_shards_percent_as_number": 100.0})),
                (status = 401, description = "No valid token.", body = ErrorBody),
                (status = 403, description = "The token's roles do not allow this method.", body = ErrorBody),
                (status = 404, description = "No such deployment or Elasticsearch resource in this organization.", body = ErrorBody),
                (status = 409, description = "The deployment has no running node to reach.", body = ErrorBody),
                (status = 413, description = "Body over 10 MiB.", body = ErrorBody),
                (status = 503, description = "The cluster gave no answer.", body = ErrorBody),
            ),
            security(("bearer" = []))
        )]
        #[allow(dead_code)]
        async fn $fn_name() {}
    };
}

proxy_operation!(
    proxy_get,
    get,
    "proxy-elasticsearch-get",
    "Readers may send it (any role).",
    READ_ROLES,
    reads
);
proxy_operation!(
    proxy_head,
    head,
    "proxy-elasticsearch-head",
    "Readers may send it (any role).",
    READ_ROLES,
    reads
);
proxy_operation!(
    proxy_post,
    post,
    "proxy-elasticsearch-post",
    "Needs deployment_manager or platform_admin.",
    MANAGE_ROLES
);
proxy_operation!(
    proxy_put,
    put,
    "proxy-elasticsearch-put",
    "Needs deployment_manager or platform_admin.",
    MANAGE_ROLES
);
proxy_operation!(
    proxy_delete,
    delete,
    "proxy-elasticsearch-delete",
    "Needs deployment_manager or platform_admin.",
    MANAGE_ROLES,
    reads
);
proxy_operation!(
    proxy_patch,
    patch,
    "proxy-elasticsearch-patch",
    "Needs deployment_manager or platform_admin.",
    MANAGE_ROLES
);

/// What a proxy request names: the deployment, its Elasticsearch resource
/// and the path below the cluster's root, read from the path as the caller
/// encoded it.
///
/// Not axum's `Path`: it decodes every parameter, the proxied path too,
/// and answers one it cannot decode (`%ff`, not UTF-8) with a plain-text
/// 400 before the handler runs (issue 33). The proxied path's escapes are
/// the cluster's to decode, and the use case refuses the malformed ones in
/// the API's shape. The ids are plain ASCII, so one sent escaped names
/// nothing (404).
struct ProxyTarget {
    id: String,
    ref_id: String,
    path: String,
}

impl<S: Send + Sync> FromRequestParts<S> for ProxyTarget {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        // "", api, v1, deployments, {id}, elasticsearch, {ref_id}, proxy…
        let mut segments = parts.uri.path().splitn(8, '/');
        let id = segments.nth(4);
        let ref_id = segments.nth(1);
        let path = segments
            .next()
            .and_then(|rest| rest.strip_prefix("proxy"))
            .map(|rest| rest.trim_start_matches('/'));
        match (id, ref_id, path) {
            (Some(id), Some(ref_id), Some(path)) => Ok(ProxyTarget {
                id: id.to_string(),
                ref_id: ref_id.to_string(),
                path: path.to_string(),
            }),
            // The router sends only the proxy's routes here.
            _ => Err(ApiError::internal()),
        }
    }
}

async fn proxy(
    State(state): State<ApiState>,
    caller: Caller,
    ProxyTarget { id, ref_id, path }: ProxyTarget,
    request: Request,
) -> Result<Response, ApiError> {
    let method = request.method().as_str().to_string();
    let query = request.uri().query().map(str::to_string);
    let headers = request
        .headers()
        .iter()
        .filter(|(name, _)| FORWARDED_REQUEST_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| (name.as_str().to_string(), value.as_bytes().to_vec()))
        .collect();
    let body = Bytes::from_request(request, &state).await.map_err(|_| {
        ApiError::new(
            Code::REQUEST_BODY_TOO_LARGE,
            format!("the body must be at most {MAX_PROXY_REQUEST_BYTES} bytes"),
        )
    })?;
    let answer = state
        .app
        .proxy(
            &caller.0,
            &id,
            &ref_id,
            ProxyRequest {
                method,
                path,
                query,
                headers,
                body: body.to_vec(),
            },
        )
        .await?;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = status;
    let out = response.headers_mut();
    for (name, value) in answer.headers {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(&value),
        ) else {
            continue;
        };
        // A `Location` on the cluster's root (a document just created)
        // names the same thing below the proxy.
        let value = if name == header::LOCATION {
            below_proxy(&id, &ref_id, &value).unwrap_or(value)
        } else {
            value
        };
        out.append(name, value);
    }
    out.insert(
        "x-found-handling-cluster",
        HeaderValue::from_str(&id).unwrap_or(HeaderValue::from_static("-")),
    );
    Ok(response)
}
/// `location`, a path on the cluster's root, as the same path below this
/// deployment's proxy; `None` for anything else (an absolute URL).
fn below_proxy(id: &str, ref_id: &str, location: &HeaderValue) -> Option<HeaderValue> {
    let path = location.to_str().ok()?.strip_prefix('/')?;
    if path.starts_with('/') {
        return None;
    }
    HeaderValue::from_str(&format!(
        "/api/v1/deployments/{id}/elasticsearch/{ref_id}/proxy/{path}"
    ))
    .ok()
}

proxy_operation!(
    proxy_options,
    options,
    "proxy-elasticsearch-options",
    "Needs deployment_manager or platform_admin.",
    MANAGE_ROLES,
    reads
);

#[cfg(test)]
mod tests {
    use super::below_proxy;
    use axum::http::HeaderValue;

    #[test]
    fn a_location_on_the_clusters_root_is_named_below_the_proxy() {
        let rewritten = below_proxy(
            "d1",
            "main-elasticsearch",
            &HeaderValue::from_static("/logs/_doc/1"),
        );
        assert_eq!(
            rewritten.as_ref().and_then(|v| v.to_str().ok()),
            Some("/api/v1/deployments/d1/elasticsearch/main-elasticsearch/proxy/logs/_doc/1")
        );
        // An absolute URL or a network-path reference is left as it is.
        for kept in ["https://elsewhere/x", "//elsewhere/x", "logs/_doc/1"] {
            assert!(
                below_proxy("d1", "main-elasticsearch", &HeaderValue::from_static(kept)).is_none(),
                "{kept}"
            );
        }
    }
}
