//! Turning Parameter Store failures into the port's `ComputeError`.
//!
//! The plan engine retries a `Transient` error and reports a `Permanent`
//! one's `failure_type` to the user, so this mapping is the adapter's whole
//! retry policy. Codes are Parameter Store's (and the common AWS ones);
//! a code not listed falls back on the HTTP status.

use aws_sdk_ssm::config::http::HttpResponse;
use aws_sdk_ssm::error::{ProvideErrorMetadata, SdkError};
use floe_aws_errors::{AwsFailure, Class, Verdict};
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
pub(crate) struct SsmFailure(AwsFailure);

impl SsmFailure {
    /// The message holds no parameter's value: Parameter Store never echoes
    /// one in an error.
    pub(crate) fn from_sdk<E>(
        operation: &str,
        subject: &str,
        err: &SdkError<E, HttpResponse>,
    ) -> SsmFailure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        SsmFailure(AwsFailure::from_sdk(
            format_args!("SSM {operation} {subject}"),
            err,
        ))
    }

    pub(crate) fn code(&self) -> Option<&str> {
        self.0.code()
    }

    pub(crate) fn into_compute_error(self) -> ComputeError {
        let class = self.0.classify(classify);
        let code = self.0.code().unwrap_or("").to_owned();
        let message = self.0.into_message();
        match class {
            Class::Unreachable => ComputeError::Transient {
                code: "ssm_unreachable".to_owned(),
                message,
            },
            Class::Unbuildable => permanent(INVALID_REQUEST, message),
            Class::Known(Verdict::Transient) => ComputeError::Transient { code, message },
            Class::Known(Verdict::Permanent(failure_type)) => permanent(failure_type, message),
            Class::Denied { .. } => permanent(ACCESS_DENIED, message),
            // Parameter Store's own trouble passes; a refusal of the request will not.
            Class::Retryable { code, status } => ComputeError::Transient {
                code: if code.is_empty() {
                    format!("ssm_http_{status}")
                } else {
                    code
                },
                message,
            },
            Class::Refused { .. } => permanent(REQUEST_FAILED, message),
        }
    }
}

pub(crate) fn permanent(failure_type: &str, message: String) -> ComputeError {
    ComputeError::Permanent {
        failure_type: failure_type.to_owned(),
        message,
    }
}

/// What Parameter Store's own codes mean; the codes every AWS service
/// shares (throttling, internal errors, refused credentials) are
/// `floe_aws_errors`'s.
fn classify(code: &str) -> Option<Verdict> {
    match code {
        // Another writer is updating the same parameter right now.
        "TooManyUpdates"
        // The next call signs with refreshed credentials.
        | "ExpiredTokenException"
        // A pagination token that expired: the operation starts over.
        | "InvalidNextToken" => Some(Verdict::Transient),

        "InvalidKeyId" => Some(Verdict::Permanent(KMS_KEY_INVALID)),
        "ParameterLimitExceeded" => Some(Verdict::Permanent(QUOTA_EXCEEDED)),
        "ParameterMaxVersionLimitExceeded" => Some(Verdict::Permanent(VERSION_LIMIT_EXCEEDED)),

        "ValidationException"
        | "ParameterPatternMismatchException"
        | "HierarchyLevelLimitExceededException"
        | "HierarchyTypeMismatchException"
        | "UnsupportedParameterType"
        | "InvalidAllowedPatternException"
        | "InvalidFilterKey"
        | "InvalidFilterOption"
        | "InvalidFilterValue" => Some(Verdict::Permanent(INVALID_PARAMETER)),

        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_aws_errors::Origin;

    fn service(code: &str, status: u16) -> SsmFailure {
        let message = format!("SSM PutParameter /p: {code}");
        SsmFailure(AwsFailure::new(
            (!code.is_empty()).then_some(code),
            Origin::Service { status },
            message,
        ))
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
        let transport = SsmFailure(AwsFailure::new(None, Origin::Transport, "timeout"));
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
        let construction = SsmFailure(AwsFailure::new(None, Origin::Construction, "bad"));
        assert_eq!(kind(construction.into_compute_error()), INVALID_REQUEST);
    }
}
