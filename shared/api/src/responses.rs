//! The error responses an operation documents, as types: the role its use
//! case needs (the capability it takes from the caller, which also reaches
//! the store, hence 503), the JSON body its extractor reads, and the kinds
//! of refusal its use case gives (`AppError`'s variants, mapped to a status
//! in `error.rs`). An operation lists these beside its answer type; what a
//! refusal means for that operation is said in the operation's text. They
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
    #[response(
        status = 503,
        description = "The store or a cloud service is unavailable or throttling; retry with backoff."
    )]
    Unavailable(ErrorBody),
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
    #[response(
        status = 503,
        description = "The store or a cloud service is unavailable or throttling; retry with backoff."
    )]
    Unavailable(ErrorBody),
}

/// A change to the platform's configuration: the `Admin` capability.
#[allow(dead_code)]
#[derive(IntoResponses)]
pub enum AdminErrors {
    #[response(status = 401, description = "No or bad token.")]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "Needs platform_admin.")]
    Forbidden(ErrorBody),
    #[response(
        status = 503,
        description = "The store or a cloud service is unavailable or throttling; retry with backoff."
    )]
    Unavailable(ErrorBody),
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

/// A use case refused the input: 400, with the offending fields named.
#[allow(dead_code)]
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "Invalid input: `code` says which rule, `fields` names every offending field, and nothing changed.",
    example = json!({"errors": [{"code": "validation.instance_type", "message": "node_groups[0].instance_type: 'm6g.huge' is not in the instance catalog", "fields": ["node_groups[0].instance_type"]}]})
)]
pub struct Invalid(ErrorBody);

/// A resource the operation names is not in the caller's organization.
#[allow(dead_code)]
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such resource in the caller's organization; `code` says which."
)]
pub struct NotFound(ErrorBody);

/// The resource's state refuses the operation now.
#[allow(dead_code)]
#[derive(IntoResponses)]
#[response(
    status = 409,
    description = "The resource's state refuses this now; `code` says why, and nothing changed.",
    example = json!({"errors": [{"code": "deployments.plan_in_progress", "message": "plan 0193a0c4d2b87c3e9a4b5c6d7e8f9a0c (create) is pending; wait for it or cancel it"}]})
)]
pub struct Conflict(ErrorBody);

/// `If-Match` or `?version=` named an older version.
#[allow(dead_code)]
#[derive(IntoResponses)]
#[response(
    status = 412,
    description = "`If-Match` or `?version=` does not match the current version; the message gives it."
)]
pub struct Stale(ErrorBody);

/// The cluster answered with an error the operation cannot pass on as its own.
#[allow(dead_code)]
#[derive(IntoResponses)]
#[response(
    status = 502,
    description = "The cluster refused or failed the request; the message gives its reason."
)]
pub struct Upstream(ErrorBody);
