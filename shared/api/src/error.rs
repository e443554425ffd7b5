//! The one error type of the HTTP layer, in ECE's wire shape:
//! `{"errors":[{"code":"…","message":"…","fields":["…"]}]}` plus the codes
//! again in `x-cloud-error-codes`. Every other layer's error is converted
//! into it exactly once, here; internal detail is logged, never returned.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use floe_app::{AppError, Resource};
use floe_domain::Code;
use floe_domain::validation::Invalid;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"errors": [{"code": "deployments.deployment_not_found", "message": "deployment 0190c4d2b7f07c3e9a4b5c6d7e8f9a0b was not found", "fields": []}]}))]
pub struct ErrorBody {
    pub errors: Vec<ErrorItem>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorItem {
    /// Stable, documented machine-readable code.
    pub code: String,
    pub message: String,
    /// Request fields at fault, e.g. `node_groups[0].instance_type`.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub fields: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub errors: Vec<ErrorItem>,
}

/// The status a code is answered with: the code list's.
fn status_of(code: Code) -> StatusCode {
    StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl ApiError {
    /// A refusal with one code; its status is the code's (see
    /// [`floe_domain::codes`]).
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            status: status_of(code),
            errors: vec![ErrorItem {
                code: code.name().to_string(),
                message: message.into(),
                fields: Vec::new(),
            }],
        }
    }

    /// A refusal of one request field.
    pub fn field(code: Code, field: impl Into<String>, message: impl Into<String>) -> ApiError {
        let field = field.into();
        let message = message.into();
        ApiError {
            status: status_of(code),
            errors: vec![ErrorItem {
                code: code.name().to_string(),
                message: format!("{field}: {message}"),
                fields: vec![field],
            }],
        }
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(Code::AUTH_FORBIDDEN, message)
    }

    pub fn precondition_failed(current: u64) -> ApiError {
        ApiError::new(
            Code::REQUEST_VERSION_MISMATCH,
            format!(
                "the resource is at version {current}; read it again and retry with that version"
            ),
        )
    }

    /// Concurrent writers raced and this request lost; nothing was changed.
    pub fn concurrent_change() -> ApiError {
        ApiError::new(
            Code::REQUEST_CONCURRENT_CHANGE,
            "the resource was changed by another request at the same time; nothing was changed, read it again and retry",
        )
    }

    pub fn internal() -> ApiError {
        ApiError::new(
            Code::INTERNAL_ERROR,
            "an internal error occurred; it has been logged",
        )
    }

    pub fn codes(&self) -> Vec<&str> {
        self.errors.iter().map(|e| e.code.as_str()).collect()
    }
}

impl From<Invalid> for ApiError {
    fn from(invalid: Invalid) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            errors: invalid
                .0
                .into_iter()
                .map(|p| ErrorItem {
                    code: p.code.name().to_string(),
                    message: format!("{}: {}", p.field, p.message),
                    fields: vec![p.field],
                })
                .collect(),
        }
    }
}

/// The one place an app error becomes a code, and so a status.
impl From<AppError> for ApiError {
    fn from(e: AppError) -> ApiError {
        match e {
            AppError::Forbidden(message) => ApiError::forbidden(message),
            AppError::Unauthorized { code, message } => ApiError::new(code, message),
            AppError::NotFound { what, id } => {
                let (code, message) = match what {
                    Resource::Deployment => (
                        Code::DEPLOYMENTS_DEPLOYMENT_NOT_FOUND,
                        format!("deployment {id} was not found"),
                    ),
                    Resource::Repository => (
                        Code::REPOSITORIES_REPOSITORY_NOT_FOUND,
                        format!("snapshot repository '{id}' was not found"),
                    ),
                    Resource::Policy => (
                        Code::POLICIES_POLICY_NOT_FOUND,
                        format!("snapshot policy {id} was not found"),
                    ),
                    Resource::Snapshot => (
                        Code::SNAPSHOTS_SNAPSHOT_NOT_FOUND,
                        format!("snapshot {id} was not found"),
                    ),
                    Resource::PendingPlan => (
                        Code::DEPLOYMENTS_NO_PENDING_PLAN,
                        format!("deployment {id} has no pending plan"),
                    ),
                    Resource::Elasticsearch => (
                        Code::DEPLOYMENTS_DEPLOYMENT_RESOURCE_NOT_FOUND,
                        format!(
                            "no Elasticsearch resource {id}: a Floe deployment has one, main-elasticsearch"
                        ),
                    ),
                    Resource::PlatformLicense => (
                        Code::LICENSE_LICENSE_NOT_FOUND,
                        format!("organization {id} has no platform license"),
                    ),
                    Resource::ApiKey => (
                        Code::API_KEYS_API_KEY_NOT_FOUND,
                        format!("API key {id} was not found"),
                    ),
                };
                ApiError::new(code, message)
            }
            AppError::Invalid(invalid) => invalid.into(),
            AppError::Conflict {
                code,
                message,
                field: None,
            } => ApiError::new(code, message),
            AppError::Conflict {
                code,
                message,
                field: Some(field),
            } => ApiError::field(code, field, message),
            AppError::PreconditionFailed { current } => ApiError::precondition_failed(current),
            AppError::ConcurrentChange => ApiError::concurrent_change(),
            AppError::Unavailable { code, message } | AppError::Upstream { code, message } => {
                ApiError::new(code, message)
            }
            AppError::Internal => ApiError::internal(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let codes = self.codes().join(",");
        let mut response = (
            self.status,
            axum::Json(ErrorBody {
                errors: self.errors,
            }),
        )
            .into_response();
        if let Ok(v) = HeaderValue::from_str(&codes) {
            response.headers_mut().insert("x-cloud-error-codes", v);
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
