//! The one error type of the HTTP layer, in ECE's wire shape:
//! `{"errors":[{"code":"…","message":"…","fields":["…"]}]}` plus the codes
//! again in `x-cloud-error-codes`. Every other layer's error is converted
//! into it exactly once, here; internal detail is logged, never returned.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use floe_app::{AppError, Resource};
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

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            errors: vec![ErrorItem {
                code: code.to_string(),
                message: message.into(),
                fields: Vec::new(),
            }],
        }
    }

    pub fn field(
        status: StatusCode,
        code: &str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ApiError {
        let field = field.into();
        let message = message.into();
        ApiError {
            status,
            errors: vec![ErrorItem {
                code: code.to_string(),
                message: format!("{field}: {message}"),
                fields: vec![field],
            }],
        }
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn invalid_field(
        code: &str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError::field(StatusCode::BAD_REQUEST, code, field, message)
    }

    pub fn not_found(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn conflict(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, code, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "auth.forbidden", message)
    }

    pub fn precondition_failed(current: u64) -> ApiError {
        ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "request.version_mismatch",
            format!(
                "the resource is at version {current}; read it again and retry with that version"
            ),
        )
    }

    /// Concurrent writers raced and this request lost; nothing was changed.
    pub fn concurrent_change() -> ApiError {
        ApiError::conflict(
            "request.concurrent_change",
            "the resource was changed by another request at the same time; nothing was changed, read it again and retry",
        )
    }

    pub fn internal() -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal.error",
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
                    code: p.code.into_owned(),
                    message: format!("{}: {}", p.field, p.message),
                    fields: vec![p.field],
                })
                .collect(),
        }
    }
}

/// The one place an app error becomes a status and a code.
impl From<AppError> for ApiError {
    fn from(e: AppError) -> ApiError {
        match e {
            AppError::Forbidden(message) => ApiError::forbidden(message),
            AppError::NotFound { what, id } => {
                let (code, message) = match what {
                    Resource::Deployment => (
                        "deployments.deployment_not_found",
                        format!("deployment {id} was not found"),
                    ),
                    Resource::Repository => (
                        "repositories.repository_not_found",
                        format!("snapshot repository '{id}' was not found"),
                    ),
                    Resource::Policy => (
                        "policies.policy_not_found",
                        format!("snapshot policy {id} was not found"),
                    ),
                    Resource::Snapshot => (
                        "snapshots.snapshot_not_found",
                        format!("snapshot {id} was not found"),
                    ),
                    Resource::PendingPlan => (
                        "deployments.no_pending_plan",
                        format!("deployment {id} has no pending plan"),
                    ),
                    Resource::Elasticsearch => (
                        "deployments.deployment_resource_not_found",
                        format!(
                            "no Elasticsearch resource {id}: a Floe deployment has one, main-elasticsearch"
                        ),
                    ),
                };
                ApiError::not_found(code, message)
            }
            AppError::Invalid(invalid) => invalid.into(),
            AppError::Conflict {
                code,
                message,
                field: None,
            } => ApiError::conflict(code, message),
            AppError::Conflict {
                code,
                message,
                field: Some(field),
            } => ApiError::field(StatusCode::CONFLICT, code, field, message),
            AppError::PreconditionFailed { current } => ApiError::precondition_failed(current),
            AppError::ConcurrentChange => ApiError::concurrent_change(),
            AppError::Unavailable { code, message } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
            }
            AppError::Upstream { code, message } => {
                ApiError::new(StatusCode::BAD_GATEWAY, code, message)
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
