//! Turning Parameter Store failures into the port's `ComputeError`.
//!
//! The plan engine retries a `Transient` error and reports a `Permanent`
//! one's `failure_type` to the user, so this mapping is the adapter's whole
//! retry policy. Codes are Parameter Store's (and the common AWS ones);
//! a code not listed falls back on the HTTP status.

use aws_sdk_ssm::config::http::HttpResponse;
use aws_sdk_ssm::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use floe_compute::ComputeError;
use floe_compute::parameters::INVALID_PARAMETER;

/// The caller may not use the parameter (or its KMS key), or the
/// credentials are not accepted at all.
pub const ACCESS_DENIED: &str = "parameter_access_denied";
/// The configured KMS key does not exist, is disabled or is not usable.
pub const KMS_KEY_INVALID: &str = "parameter_kms_key_invalid";
/// The account's parameter quota is used up.
pub const QUOTA_EXCEEDED: &str = "parameter_quota_exceeded";
/// 100 versions, and the oldest carries a label, so none can be dropped.
pub const VERSION_LIMIT_EXCEEDED: &str = "parameter_version_limit_exceeded";
/// A refusal this adapter does not know.
pub const REQUEST_FAILED: &str = "parameter_request_failed";
/// The SDK could not build the request.
pub const INVALID_REQUEST: &str = "invalid_request";
/// Parameter Store answered with something this adapter cannot use.
pub const INVALID_RESPONSE: &str = "parameter_response_invalid";

/// What went wrong in one call, before the caller decides whether it is a
/// failure at all (a delete of what is gone is not).
#[derive(Debug)]
pub(crate) struct SsmFailure {
    code: Option<String>,
    origin: Origin,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Service {
        status: u16,
    },
    /// No usable answer: timeout, connection refused, garbled response.
    Transport,
    Construction,
}

impl SsmFailure {
    pub(crate) fn from_sdk<E>(
        operation: &str,
        subject: &str,
        err: &SdkError<E, HttpResponse>,
    ) -> SsmFailure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let origin = match err {
            SdkError::ServiceError(s) => Origin::Service {
                status: s.raw().status().as_u16(),
            },
            SdkError::ConstructionFailure(_) => Origin::Construction,
            _ => Origin::Transport,
        };
        // The service error alone has code, message and request id; the full
        // SdkError would add the raw response. Neither holds a parameter's
        // value: Parameter Store never echoes one in an error.
        let detail = match err.as_service_error() {
            Some(service) => DisplayErrorContext(service).to_string(),
            None => DisplayErrorContext(err).to_string(),
        };
        SsmFailure {
            code: err.code().map(str::to_owned),
            origin,
            message: format!("SSM {operation} {subject}: {detail}"),
        }
    }

    pub(crate) fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    pub(crate) fn into_compute_error(self) -> ComputeError {
        let status = match self.origin {
            Origin::Transport => {
                return ComputeError::Transient {
                    code: "ssm_unreachable".to_owned(),
                    message: self.message,
                };
            }
            Origin::Construction => {
                return permanent(INVALID_REQUEST, self.message);
            }
            Origin::Service { status } => status,
        };
        let code = self.code.unwrap_or_default();
        match classify(&code, status) {
            Class::Transient => ComputeError::Transient {
                code: if code.is_empty() {
                    format!("ssm_http_{status}")
                } else {
                    code
                },
                message: self.message,
            },
            Class::Permanent(failure_type) => permanent(failure_type, self.message),
        }
    }
}

pub(crate) fn permanent(failure_type: &str, message: String) -> ComputeError {
    ComputeError::Permanent {
        failure_type: failure_type.to_owned(),
        message,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Transient,
    Permanent(&'static str),
}

fn classify(code: &str, status: u16) -> Class {
    match code {
        "ThrottlingException"
        | "Throttling"
        | "TooManyRequestsException"
        // Another writer is updating the same parameter right now.
        | "TooManyUpdates"
        | "InternalServerError"
        | "InternalFailure"
        | "ServiceUnavailable"
        | "RequestTimeout"
        | "RequestTimeoutException"
        // The next call signs with refreshed credentials.
        | "ExpiredTokenException"
        // A pagination token that expired: the operation starts over.
        | "InvalidNextToken" => Class::Transient,

        "AccessDeniedException"
        | "AccessDenied"
        | "UnrecognizedClientException"
        | "InvalidClientTokenId"
        | "MissingAuthenticationToken"
        | "InvalidSignatureException"
        | "SignatureDoesNotMatch" => Class::Permanent(ACCESS_DENIED),

        "InvalidKeyId" => Class::Permanent(KMS_KEY_INVALID),
        "ParameterLimitExceeded" => Class::Permanent(QUOTA_EXCEEDED),
        "ParameterMaxVersionLimitExceeded" => Class::Permanent(VERSION_LIMIT_EXCEEDED),

        "ValidationException"
        | "ParameterPatternMismatchException"
        | "HierarchyLevelLimitExceededException"
        | "HierarchyTypeMismatchException"
        | "UnsupportedParameterType"
        | "InvalidAllowedPatternException"
        | "InvalidFilterKey"
        | "InvalidFilterOption"
        | "InvalidFilterValue" => Class::Permanent(INVALID_PARAMETER),

        // Parameter Store's own trouble passes; a refusal of the request will not.
        _ if status == 429 || status >= 500 => Class::Transient,
        _ => Class::Permanent(REQUEST_FAILED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(code: &str, status: u16) -> SsmFailure {
        SsmFailure {
            code: (!code.is_empty()).then(|| code.to_owned()),
            origin: Origin::Service { status },
            message: format!("SSM PutParameter /p: {code}"),
        }
    }

    fn kind(err: ComputeError) -> String {
        match err {
            ComputeError::Transient { code, .. } => format!("<transient {code}>"),
            ComputeError::Permanent { failure_type, .. } => failure_type,
            ComputeError::InsufficientCapacity { .. } => "<capacity>".to_owned(),
        }
    }

    #[test]
    fn throttling_and_server_trouble_are_transient() {
        for (code, status) in [
            ("ThrottlingException", 400),
            ("TooManyUpdates", 400),
            ("InternalServerError", 500),
            ("ExpiredTokenException", 400),
            ("SomethingNew", 503),
            ("SomethingNew", 429),
        ] {
            assert_eq!(
                kind(service(code, status).into_compute_error()),
                format!("<transient {code}>")
            );
        }
        assert_eq!(
            kind(service("", 502).into_compute_error()),
            "<transient ssm_http_502>"
        );
        let transport = SsmFailure {
            code: None,
            origin: Origin::Transport,
            message: "timeout".to_owned(),
        };
        assert_eq!(
            kind(transport.into_compute_error()),
            "<transient ssm_unreachable>"
        );
    }

    #[test]
    fn refusals_are_permanent_with_a_stable_type() {
        for (code, expected) in [
            ("AccessDeniedException", ACCESS_DENIED),
            ("UnrecognizedClientException", ACCESS_DENIED),
            ("InvalidKeyId", KMS_KEY_INVALID),
            ("ParameterLimitExceeded", QUOTA_EXCEEDED),
            ("ParameterMaxVersionLimitExceeded", VERSION_LIMIT_EXCEEDED),
            ("ValidationException", INVALID_PARAMETER),
            ("HierarchyLevelLimitExceededException", INVALID_PARAMETER),
            ("SomethingNew", REQUEST_FAILED),
        ] {
            assert_eq!(
                kind(service(code, 400).into_compute_error()),
                expected,
                "{code}"
            );
        }
        let construction = SsmFailure {
            code: None,
            origin: Origin::Construction,
            message: "bad".to_owned(),
        };
        assert_eq!(kind(construction.into_compute_error()), INVALID_REQUEST);
    }
}
