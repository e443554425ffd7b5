//! Request extractors: JSON bodies with field-precise errors, query
//! parameters, the verified caller, preconditions (`If-Match` /
//! `?version=`) and idempotency keys.

mod json;
mod query;

pub use json::{BodyError, parse_json, parse_value_at};
pub use query::{ParamError, Params, parse_query, refusing};

use crate::error::ApiError;
use crate::state::ApiState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use floe_auth::Role;
use floe_domain::Code;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A JSON body. Refuses wrong content types (415), oversize bodies (413),
/// malformed JSON, unknown fields and wrong types (400, naming the field).
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                Code::REQUEST_UNSUPPORTED_MEDIA_TYPE,
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| match e {
            BytesRejection::FailedToBufferBody(_) => ApiError::new(
                Code::REQUEST_BODY_TOO_LARGE,
                format!("the body must be at most {MAX_BODY_BYTES} bytes"),
            ),
            _ => ApiError::new(
                Code::REQUEST_UNREADABLE_BODY,
                "the request body could not be read",
            ),
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// A body whose type can be serialised again: besides `parse_json`, every
/// place the type has an object must have been an object in the request
/// (serde takes arrays for structs, nested ones too).
pub struct JsonSpec<T>(pub T);

impl<T: DeserializeOwned + Serialize, S: Send + Sync> FromRequest<S> for JsonSpec<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let JsonBody(value) = JsonBody::<Value>::from_request(req, state).await?;
        JsonSpec::from_value(value)
    }
}

/// A deployment's PUT body: the spec, and the read-only fields of the GET
/// body it may have been made from, taken out before the spec is parsed
/// (the use case compares them with the deployment).
pub struct DeploymentReplacement(
    pub floe_domain::deployment::DeploymentSpec,
    pub floe_domain::replacement::ReadOnlyFields,
);

impl<S: Send + Sync> FromRequest<S> for DeploymentReplacement {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let JsonBody(mut value) = JsonBody::<Value>::from_request(req, state).await?;
        let read_only = floe_domain::replacement::split_read_only(&mut value);
        let JsonSpec(spec) = JsonSpec::from_value(value)?;
        Ok(DeploymentReplacement(spec, read_only))
    }
}

impl<T: DeserializeOwned + Serialize> JsonSpec<T> {
    /// Parses `value` as the extractor does a body.
    pub fn from_value(value: Value) -> Result<JsonSpec<T>, ApiError> {
        let parsed: T = parse_value_at(&value, "")?;
        let round_trip = serde_json::to_value(&parsed).map_err(|_| ApiError::internal())?;
        if let Some(path) = shape_mismatch(&value, &round_trip, "") {
            let field = if path.is_empty() {
                "body".to_string()
            } else {
                path
            };
            return Err(ApiError::field(
                Code::VALIDATION_TYPE,
                field,
                "must be a JSON object",
            ));
        }
        Ok(JsonSpec(parsed))
    }
}

/// The first path where `output` has an object but `input` does not.
fn shape_mismatch(input: &Value, output: &Value, path: &str) -> Option<String> {
    let join = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => o
            .iter()
            .find_map(|(k, ov)| i.get(k).and_then(|iv| shape_mismatch(iv, ov, &join(k)))),
        (_, Value::Object(_)) => Some(path.to_string()),
        (Value::Array(i), Value::Array(o)) => i
            .iter()
            .zip(o)
            .enumerate()
            .find_map(|(n, (iv, ov))| shape_mismatch(iv, ov, &format!("{path}[{n}]"))),
        _ => None,
    }
}

/// The verified caller and the organization the request acts in. The
/// use cases take one of its capabilities ([`Caller::reader`],
/// [`Caller::manager`], [`Caller::admin`]).
#[derive(Debug, Clone)]
pub struct Caller(pub floe_app::Caller);

/// Platform roles act on every organization; they pick one with this header.
pub const ORG_HEADER: &str = "x-floe-organization";

impl FromRequestParts<ApiState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let unauthorized = |code: Code, message: &str| ApiError::new(code, message);
        let header = parts.headers.get(header::AUTHORIZATION).ok_or_else(|| {
            unauthorized(
                Code::AUTH_MISSING_TOKEN,
                "send a bearer token (Authorization: Bearer <jwt>) or an API key (Authorization: ApiKey <key>)",
            )
        })?;
        let credential = header
            .to_str()
            .ok()
            .and_then(Credential::read)
            .ok_or_else(|| {
                unauthorized(
                    Code::AUTH_MISSING_TOKEN,
                    "the Authorization header must be: Bearer <jwt>, or ApiKey <key>",
                )
            })?;
        let principal = match credential {
            Credential::Bearer(token) => {
                let p = state.verifier.verify(token).await.map_err(|e| {
                    tracing::info!(reason = %e, "token refused");
                    unauthorized(e.code(), &e.to_string())
                })?;
                Principal {
                    org: p.org,
                    subject: p.subject,
                    issuer: p.issuer,
                    roles: p.roles,
                    api_key: None,
                }
            }
            Credential::ApiKey(key) => {
                let holder = state.app.authenticate_api_key(key).await.map_err(|e| {
                    tracing::info!(reason = %e, "API key refused");
                    ApiError::from(e)
                })?;
                Principal {
                    org: holder.org,
                    subject: holder.subject,
                    issuer: holder.issuer,
                    roles: holder.roles,
                    api_key: Some(holder.key_id),
                }
            }
        };
        let (org, roles) = match parts
            .headers
            .get(ORG_HEADER)
            .map(|v| v.to_str().unwrap_or(""))
        {
            None => (principal.org.clone(), principal.roles),
            Some(requested) if requested == principal.org => {
                (principal.org.clone(), principal.roles)
            }
            Some(requested) => {
                if !principal.is_platform() {
                    return Err(ApiError::forbidden(format!(
                        "only platform roles may act in another organization ({ORG_HEADER})"
                    )));
                }
                floe_domain::names::validate_org(requested)
                    .map_err(|m| ApiError::field(Code::VALIDATION_ORGANIZATION, ORG_HEADER, m))?;
                // Outside its own organization a token holds its platform
                // rights only: platform_viewer reads, platform_admin
                // manages. Its organization's roles stay at home.
                let platform: Vec<Role> = principal
                    .roles
                    .into_iter()
                    .filter(|r| matches!(r, Role::PlatformAdmin | Role::PlatformViewer))
                    .collect();
                (requested.to_string(), platform)
            }
        };
        floe_telemetry::request::record_org(&org);
        Ok(Caller(floe_app::Caller {
            org,
            subject: principal.subject,
            issuer: principal.issuer,
            token_org: principal.org,
            roles,
            api_key: principal.api_key,
        }))
    }
}

/// What the `Authorization` header carries.
enum Credential<'a> {
    Bearer(&'a str),
    ApiKey(&'a str),
}

impl<'a> Credential<'a> {
    /// The scheme is matched without regard to case (RFC 9110); an empty
    /// credential is none.
    fn read(header: &'a str) -> Option<Credential<'a>> {
        let (scheme, rest) = header.split_once(' ')?;
        let value = rest.trim();
        if value.is_empty() {
            return None;
        }
        if scheme.eq_ignore_ascii_case("bearer") {
            Some(Credential::Bearer(value))
        } else if scheme.eq_ignore_ascii_case("apikey") {
            Some(Credential::ApiKey(value))
        } else {
            None
        }
    }
}

/// The verified caller before an organization is picked.
struct Principal {
    org: String,
    subject: String,
    issuer: String,
    roles: Vec<Role>,
    api_key: Option<String>,
}

impl Principal {
    fn is_platform(&self) -> bool {
        self.roles
            .iter()
            .any(|r| matches!(r, Role::PlatformAdmin | Role::PlatformViewer))
    }
}

impl Caller {
    pub fn reader(&self) -> Result<floe_app::Reader, ApiError> {
        Ok(self.0.reader()?)
    }

    pub fn manager(&self) -> Result<floe_app::Manager, ApiError> {
        Ok(self.0.manager()?)
    }

    pub fn admin(&self) -> Result<floe_app::Admin, ApiError> {
        Ok(self.0.admin()?)
    }
}

/// The version a client expects: `If-Match` (an ETag) or ECE's `?version=`
/// (already checked by [`crate::params::version`]).
pub fn expected_version(
    headers: &HeaderMap,
    from_query: Option<u64>,
) -> Result<Option<u64>, ApiError> {
    let bad_if_match = || {
        ApiError::field(
            Code::VALIDATION_IF_MATCH,
            "If-Match",
            "must be an ETag this API returned, e.g. \"3\"",
        )
    };
    let from_header = match headers.get(header::IF_MATCH) {
        None => None,
        Some(v) => {
            let text = v.to_str().unwrap_or("").trim();
            if text == "*" {
                None
            } else {
                let inner = text.trim_start_matches("W/").trim_matches('"');
                Some(inner.parse::<u64>().map_err(|_| bad_if_match())?)
            }
        }
    };
    // Versions are documented as int64, as the clients generated from the
    // document hold them; a larger number is no version this API gave.
    if from_header.is_some_and(|v| v > i64::MAX as u64) {
        return Err(bad_if_match());
    }
    match (from_header, from_query) {
        (Some(h), Some(q)) if h != q => Err(ApiError::field(
            Code::VALIDATION_VERSION,
            "version",
            "disagrees with If-Match; send one of them",
        )),
        (h, q) => Ok(h.or(q)),
    }
}

/// Idempotency key of a create: `Idempotency-Key` header or ECE's
/// `request_id`, as sent (the use case checks it). A header that is not
/// text is kept as a key no check accepts.
pub fn idempotency_key(headers: &HeaderMap, request_id: Option<String>) -> Option<String> {
    match headers.get("idempotency-key") {
        Some(h) => Some(h.to_str().unwrap_or("\u{0}").to_string()),
        None => request_id,
    }
}

/// One path segment (a name or an id). A segment axum cannot decode (not
/// UTF-8) names nothing that exists: 404 in the API's error shape rather than
/// axum's plain-text 400.
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(p)| PathParam(p))
            .map_err(|_| undecodable())
    }
}

/// Two path segments (`{id}` and `{name}`, in the route's order); as with
/// [`PathParam`], a segment axum cannot decode names nothing.
pub struct PathPair(pub String, pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathPair {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path((a, b))| PathPair(a, b))
            .map_err(|_| undecodable())
    }
}

fn undecodable() -> ApiError {
    ApiError::new(
        Code::ROOT_NOT_FOUND,
        "no such resource: the path is not valid UTF-8",
    )
}
