//! A secured cluster's authentication: every request must carry the
//! `elastic` user's password (HTTP basic authentication), refused as
//! Elasticsearch refuses it; and the security APIs a control plane uses,
//! `_security/_authenticate` and changing the password.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req, json_response};
use crate::state::Sim;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use floe_domain::secret::SecretString;
use serde_json::{Map, Value, json};

/// The one user a simulated cluster has: the built-in superuser.
pub const ELASTIC_USER: &str = "elastic";
/// Elasticsearch's minimum for a native user's password.
const MIN_PASSWORD_LEN: usize = 6;

/// The schemes an Elasticsearch 8 node offers when it refuses a request
/// (its realms: basic, bearer tokens, API keys), in its order.
const CHALLENGES: [&str; 3] = [
    "Basic realm=\"security\" charset=\"UTF-8\"",
    "Bearer realm=\"security\"",
    "ApiKey",
];

fn security_exception(reason: String) -> ApiError {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        error_type: "security_exception",
        reason,
        extra: Map::from_iter([(
            "header".to_string(),
            json!({ "WWW-Authenticate": CHALLENGES }),
        )]),
    }
}

/// Checks the request's credentials; `request` is its path and query, as
/// the refusal names it.
pub fn authenticate(sim: &Sim, headers: &HeaderMap, request: &str) -> Result<(), ApiError> {
    let missing = || {
        security_exception(format!(
            "missing authentication credentials for REST request [{request}]"
        ))
    };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(missing());
    };
    let value = value.to_str().map_err(|_| missing())?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("apikey") {
        // The simulator issues no tokens or API keys: none can be valid.
        return Err(security_exception("unable to authenticate with provided credentials and anonymous access is not allowed for this request".to_string()));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(missing());
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| security_exception("invalid basic authentication header encoding".into()))?;
    let Some((user, password)) = decoded.split_once(':') else {
        return Err(security_exception(
            "invalid basic authentication header value".into(),
        ));
    };
    if user == ELASTIC_USER && sim.password_matches(password) {
        return Ok(());
    }
    Err(security_exception(format!(
        "unable to authenticate user [{user}] for REST request [{request}]"
    )))
}

/// The 401 answer, with one `WWW-Authenticate` header per scheme.
pub fn unauthorized(error: &ApiError) -> Response {
    let mut response = json_response(error.status, &error.body());
    for challenge in CHALLENGES {
        response.headers_mut().append(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    response
}

/// What a cluster without security answers to its security APIs.
fn security_disabled() -> ApiError {
    ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        error_type: "security_exception",
        reason: "Security must be explicitly enabled when using a [basic] license. Enable security by setting [xpack.security.enabled] to [true] in the elasticsearch.yml file and restart the node.".into(),
        extra: Map::new(),
    }
}

/// `GET _security/_authenticate`: who the request authenticated as,
/// which on the simulator is always the `elastic` superuser.
pub fn authenticate_api(sim: &Sim) -> ApiResult {
    if !sim.is_secured() {
        return Err(security_disabled());
    }
    let realm = json!({ "name": "reserved", "type": "reserved" });
    Ok(Reply::ok(json!({
        "username": ELASTIC_USER,
        "roles": ["superuser"],
        "full_name": null,
        "email": null,
        "metadata": { "_reserved": true },
        "enabled": true,
        "authentication_realm": realm,
        "lookup_realm": realm,
        "authentication_type": "realm",
    })))
}

/// `POST|PUT _security/user/{user}/_password` (and `_security/user/_password`,
/// the caller's own): the new password works at once, the old one no more.
pub fn change_password(sim: &Sim, req: &Req, user: Option<&str>) -> ApiResult {
    if !sim.is_secured() {
        return Err(security_disabled());
    }
    let body = req.json()?;
    if let Some(key) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "password" && *k != "password_hash"))
    {
        return Err(ApiError::x_content_parse(format!(
            "[1:2] [change_password] unknown field [{key}]"
        )));
    }
    let password = match body.get("password") {
        Some(Value::String(p)) => p.clone(),
        Some(_) => {
            return Err(ApiError::x_content_parse(
                "[change_password] password must be a string",
            ));
        }
        None if body.get("password_hash").is_some() => {
            // Hashes would need the node's hashing settings; the control
            // plane never sends one.
            return Err(ApiError::illegal_argument(
                "the simulated cluster does not take password hashes",
            ));
        }
        None => return Err(ApiError::validation("password is missing")),
    };
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(ApiError::validation(&format!(
            "passwords must be at least [{MIN_PASSWORD_LEN}] characters long"
        )));
    }
    let user = user.unwrap_or(ELASTIC_USER);
    if user != ELASTIC_USER {
        return Err(ApiError::validation(&format!(
            "user [{user}] does not exist"
        )));
    }
    sim.set_password(SecretString::new(password));
    tracing::info!(cluster = %sim.cluster_name, "simulated cluster changed the elastic user's password");
    Ok(Reply::ok(json!({})))
}
