//! The error responses an operation gives because of how it is reached,
//! documented from types: the role its use case needs (the capability it
//! takes from the caller) and the JSON body its extractor reads. An
//! operation lists one of these next to the answers of its use case. They
//! are never built (hence `dead_code`): only their documentation is used.

use crate::error::ErrorBody;
use utoipa::IntoResponses;

/// A read: any role of the organization.
#[allow(dead_code)]
#[derive(IntoResponses)]
pub enum ReadErrors {
    #[response(status = 401, description = "No or bad token.")]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "Role too weak.")]
    Forbidden(ErrorBody),
}

/// A change to deployments or policies: the `Manager` capability.
#[allow(dead_code)]
#[derive(IntoResponses)]
pub enum ManageErrors {
    #[response(status = 401, description = "No or bad token.")]
    Unauthorized(ErrorBody),
    #[response(
        status = 403,
        description = "Needs deployment_manager or platform_admin."
    )]
    Forbidden(ErrorBody),
}

/// A change to the platform's configuration: the `Admin` capability.
#[allow(dead_code)]
#[derive(IntoResponses)]
pub enum AdminErrors {
    #[response(status = 401, description = "No or bad token.")]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "Needs platform_admin.")]
    Forbidden(ErrorBody),
}

/// What the JSON body extractors refuse before a use case runs.
#[allow(dead_code)]
#[derive(IntoResponses)]
pub enum BodyErrors {
    #[response(status = 413, description = "Body over 1 MiB.")]
    TooLarge(ErrorBody),
    #[response(status = 415, description = "Body is not JSON.")]
    NotJson(ErrorBody),
}
