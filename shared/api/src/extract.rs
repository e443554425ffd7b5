//! Request extractors: JSON bodies with field-precise errors, the verified
//! caller, preconditions (`If-Match` / `?version=`) and idempotency keys.

use crate::error::ApiError;
use crate::state::ApiState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use floe_auth::Role;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;

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
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "request.unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| match e {
            BytesRejection::FailedToBufferBody(_) => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request.body_too_large",
                format!("the body must be at most {MAX_BODY_BYTES} bytes"),
            ),
            _ => ApiError::bad_request(
                "request.unreadable_body",
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

/// Parses a JSON object body, then deserialises it with the path of the
/// first offending field. Only objects are accepted at the top: serde would
/// otherwise take an array as a struct's fields in order.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::bad_request(
            "request.body_required",
            "a JSON body is required",
        ));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(
            "request.malformed_json",
            format!("malformed JSON at line {} column {}", e.line(), e.column()),
        )
    })?;
    if !value.is_object() {
        return Err(ApiError::invalid_field(
            "validation.type",
            "body",
            "must be a JSON object",
        ));
    }
    parse_value_at(value, "")
}

/// Deserialises `value`, naming fields relative to `prefix` (a request body
/// parsed in parts keeps exact field paths whatever its key order).
///
/// JSON has one kind of number: `2344.0` is the integer 2344 to JSON Schema
/// (and so to the document's `integer` fields and the clients generated from
/// it). Where the type wants an integer and finds a whole float, that field
/// alone becomes the integer and parsing goes on; free-form maps
/// (`user_settings`) keep their floats.
pub fn parse_value_at<T: DeserializeOwned>(mut value: Value, prefix: &str) -> Result<T, ApiError> {
    // A bound on the fields mended, so that no body loops.
    for _ in 0..64 {
        let e = match serde_path_to_error::deserialize(&value) {
            Ok(parsed) => return Ok(parsed),
            Err(e) => e,
        };
        if !e
            .inner()
            .to_string()
            .starts_with("invalid type: floating point")
            || !whole_float_to_integer(&mut value, e.path())
        {
            return Err(json_error(&e, prefix));
        }
    }
    serde_path_to_error::deserialize(&value).map_err(|e| json_error(&e, prefix))
}

/// Turns the whole float at `path` into the same integer; false when there
/// is none there.
fn whole_float_to_integer(value: &mut Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let mut at = value;
    for segment in path.iter() {
        let next = match segment {
            Segment::Seq { index } => at.get_mut(*index),
            Segment::Map { key } => at.get_mut(key.as_str()),
            Segment::Enum { .. } | Segment::Unknown => return false,
        };
        match next {
            Some(v) => at = v,
            None => return false,
        }
    }
    let Some(f) = at.as_f64().filter(|f| f.fract() == 0.0 && f.is_finite()) else {
        return false;
    };
    // Within i64/u64 the float converts exactly (it is whole); beyond, it
    // stays a float and the type's own error names the field.
    *at = if f < 0.0 && f >= i64::MIN as f64 {
        Value::from(f as i64)
    } else if f >= 0.0 && f < u64::MAX as f64 {
        Value::from(f as u64)
    } else {
        return false;
    };
    true
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
        let parsed: T = parse_value_at(value.clone(), "")?;
        let round_trip = serde_json::to_value(&parsed).map_err(|_| ApiError::internal())?;
        if let Some(path) = shape_mismatch(&value, &round_trip, "") {
            let field = if path.is_empty() {
                "body".to_string()
            } else {
                path
            };
            return Err(ApiError::invalid_field(
                "validation.type",
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

fn json_error(e: &serde_path_to_error::Error<serde_json::Error>, prefix: &str) -> ApiError {
    let path = e.path().to_string();
    let path = match (prefix, path.as_str()) {
        (p, ".") => p.to_string(),
        ("", rest) => rest.to_string(),
        (p, rest) => format!("{p}.{rest}"),
    };
    let message = strip_position(&e.inner().to_string());
    let join = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    if let Some(name) = backticked(&message, "unknown field `") {
        // The path already ends at the unknown field.
        let field = if path == name || path.ends_with(&format!(".{name}")) {
            path.clone()
        } else {
            join(&name)
        };
        ApiError::invalid_field(
            "validation.unknown_field",
            field,
            format!("is not a known field ({message})"),
        )
    } else if let Some(name) = backticked(&message, "missing field `") {
        ApiError::invalid_field("validation.required", join(&name), "is required")
    } else if message.starts_with("unknown variant") {
        let field = if path.is_empty() {
            "type".to_string()
        } else {
            path
        };
        ApiError::invalid_field("validation.unknown_value", field, message)
    } else {
        let field = if path.is_empty() {
            "body".to_string()
        } else {
            path
        };
        ApiError::invalid_field("validation.type", field, message)
    }
}

fn backticked(message: &str, after: &str) -> Option<String> {
    let rest = message.strip_prefix(after)?;
    rest.split('`').next().map(str::to_string)
}

/// serde_json appends " at line L column C"; the field path says more.
fn strip_position(m: &str) -> String {
    match m.rfind(" at line ") {
        Some(i) => m[..i].to_string(),
        None => m.to_string(),
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
        let unauthorized =
            |code: &str, message: &str| ApiError::new(StatusCode::UNAUTHORIZED, code, message);
        let header = parts.headers.get(header::AUTHORIZATION).ok_or_else(|| {
            unauthorized(
                "auth.missing_token",
                "send a bearer token: Authorization: Bearer <jwt>",
            )
        })?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                unauthorized(
                    "auth.missing_token",
                    "the Authorization header must be: Bearer <jwt>",
                )
            })?;
        let principal = state.verifier.verify(token).await.map_err(|e| {
            tracing::info!(reason = %e, "token refused");
            unauthorized(e.code(), &e.to_string())
        })?;
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
                floe_domain::names::validate_org(requested).map_err(|m| {
                    ApiError::invalid_field("validation.organization", ORG_HEADER, m)
                })?;
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
            roles,
        }))
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

/// The version a client expects: `If-Match` (an ETag) or ECE's `?version=`.
pub fn expected_version(
    headers: &HeaderMap,
    query: &BTreeMap<String, String>,
) -> Result<Option<u64>, ApiError> {
    let from_header = match headers.get(header::IF_MATCH) {
        None => None,
        Some(v) => {
            let text = v.to_str().unwrap_or("").trim();
            if text == "*" {
                None
            } else {
                let inner = text.trim_start_matches("W/").trim_matches('"');
                Some(inner.parse::<u64>().map_err(|_| {
                    ApiError::invalid_field(
                        "validation.if_match",
                        "If-Match",
                        "must be an ETag this API returned, e.g. \"3\"",
                    )
                })?)
            }
        }
    };
    let from_query = match query.get("version") {
        None => None,
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            ApiError::invalid_field("validation.version", "version", "must be a whole number")
        })?),
    };
    // Versions are documented as int64, as the clients generated from the
    // document hold them; a larger number is no version this API gave.
    let too_large = |v: &Option<u64>| v.is_some_and(|v| v > i64::MAX as u64);
    if too_large(&from_header) {
        return Err(ApiError::invalid_field(
            "validation.if_match",
            "If-Match",
            "must be an ETag this API returned, e.g. \"3\"",
        ));
    }
    if too_large(&from_query) {
        return Err(ApiError::invalid_field(
            "validation.version",
            "version",
            format!("must be a whole number from 0 to {}", i64::MAX),
        ));
    }
    match (from_header, from_query) {
        (Some(h), Some(q)) if h != q => Err(ApiError::invalid_field(
            "validation.version",
            "version",
            "disagrees with If-Match; send one of them",
        )),
        (h, q) => Ok(h.or(q)),
    }
}

/// Refuses query parameters a route does not know, so a typo is not silently ignored.
/// A `true`/`false` query parameter; absent is false.
pub fn bool_param(query: &BTreeMap<String, String>, name: &str) -> Result<bool, ApiError> {
    match query.get(name).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ApiError::invalid_field(
            "validation.boolean",
            name,
            "must be true or false",
        )),
    }
}

pub fn only_params(query: &BTreeMap<String, String>, allowed: &[&str]) -> Result<(), ApiError> {
    for k in query.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(ApiError::invalid_field(
                "validation.unknown_parameter",
                k.clone(),
                format!(
                    "is not a parameter of this operation (known: {})",
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

pub fn page_request(query: &BTreeMap<String, String>) -> Result<floe_store::PageRequest, ApiError> {
    let size = match query.get("size") {
        None => None,
        Some(s) => match s.parse::<u32>() {
            Ok(n) if (1..=floe_store::stores::MAX_PAGE_SIZE).contains(&n) => Some(n),
            _ => {
                return Err(ApiError::invalid_field(
                    "validation.range",
                    "size",
                    format!(
                        "must be a whole number from 1 to {}",
                        floe_store::stores::MAX_PAGE_SIZE
                    ),
                ));
            }
        },
    };
    Ok(floe_store::PageRequest {
        size,
        cursor: query.get("cursor").cloned(),
    })
}

/// Idempotency key of a create: `Idempotency-Key` header or ECE's
/// `request_id`, as sent (the use case checks it). A header that is not
/// text is kept as a key no check accepts.
pub fn idempotency_key(headers: &HeaderMap, query: &BTreeMap<String, String>) -> Option<String> {
    match (headers.get("idempotency-key"), query.get("request_id")) {
        (Some(h), _) => Some(h.to_str().unwrap_or("\u{0}").to_string()),
        (None, Some(q)) => Some(q.clone()),
        (None, None) => None,
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
            .map_err(|_| {
                ApiError::not_found(
                    "root.not_found",
                    "no such resource: the path is not valid UTF-8",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Storage {
        size_gb: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Group {
        storage: Storage,
        count: u32,
        settings: BTreeMap<String, Value>,
    }

    /// Schemathesis found `2344.0` refused where the document says integer.
    #[test]
    fn a_whole_float_is_the_integer_it_equals() {
        let body = br#"{"storage":{"size_gb":1470.0},"count":3.0,"settings":{"ratio":1.0}}"#;
        let group: Group = parse_json(body).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(group.storage.size_gb, 1470);
        assert_eq!(group.count, 3);
        // A free-form map keeps its float.
        assert_eq!(group.settings["ratio"], serde_json::json!(1.0));
    }

    /// Schemathesis sent `?version=9223372036854775808` (past int64) and
    /// got 412 for a request the document says is malformed.
    #[test]
    fn a_version_past_int64_is_malformed() {
        let query = BTreeMap::from([("version".to_string(), "9223372036854775808".to_string())]);
        assert!(expected_version(&HeaderMap::new(), &query).is_err());
        let query = BTreeMap::from([("version".to_string(), i64::MAX.to_string())]);
        assert_eq!(
            expected_version(&HeaderMap::new(), &query).ok().flatten(),
            Some(i64::MAX as u64)
        );
    }

    #[test]
    fn a_fraction_is_still_refused_naming_its_field() {
        let body = br#"{"storage":{"size_gb":1.5},"count":3,"settings":{}}"#;
        let err = parse_json::<Group>(body).err().map(|e| format!("{e:?}"));
        let err = err.unwrap_or_default();
        assert!(err.contains("storage.size_gb"), "{err}");
    }
}
