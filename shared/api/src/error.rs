//! The one error type of the HTTP layer, in ECE's wire shape:
//! `{"errors":[{"code":"…","message":"…","fields":["…"]}]}` plus the codes
//! again in `x-cloud-error-codes`. Every other layer's error is converted
//! into it exactly once, here; internal detail is logged, never returned.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use floe_domain::validation::Invalid;
use floe_store::{Kind, StoreError};
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

    /// Maps a store failure that the handler did not handle specifically.
    pub fn from_store(e: StoreError) -> ApiError {
        match e {
            StoreError::Unavailable(detail) => {
                tracing::error!(error = %detail, "store unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "internal.store_unavailable",
                    "storage is unavailable right now; nothing was changed, retry later",
                )
            }
            StoreError::VersionMismatch { .. } => ApiError::concurrent_change(),
            StoreError::BadCursor => ApiError::invalid_field(
                "validation.cursor",
                "cursor",
                "is not a cursor this API returned",
            ),
            StoreError::MissingReference { kind, key } => {
                let (field, what) = match kind {
                    Kind::Repository => ("repository", "snapshot repository"),
                    Kind::Policy => ("policies", "snapshot policy"),
                    _ => ("reference", "resource"),
                };
                ApiError::invalid_field(
                    "validation.reference_not_found",
                    field,
                    format!("{what} '{key}' does not exist"),
                )
            }
            other => {
                tracing::error!(error = %other, "unexpected store error");
                ApiError::internal()
            }
        }
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
