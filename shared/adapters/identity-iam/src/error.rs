//! Turning IAM failures into the port's `ComputeError`: the plan engine
//! retries a `Transient` error and shows a `Permanent` one's type, so this
//! is the adapter's whole retry policy.

use aws_sdk_iam::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use floe_compute::ComputeError;

#[derive(Debug)]
pub(crate) struct IamFailure {
    code: Option<String>,
    origin: Origin,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Service {
        status: Option<u16>,
    },
    /// No usable answer: timeout, connection refused, garbled response.
    Transport,
    Construction,
}

impl IamFailure {
    pub(crate) fn from_sdk<E>(operation: &str, subject: &str, err: &SdkError<E>) -> IamFailure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let origin = match err {
            SdkError::ServiceError(_) => Origin::Service {
                status: err.raw_response().map(|r| r.status().as_u16()),
            },
            SdkError::ConstructionFailure(_) => Origin::Construction,
            _ => Origin::Transport,
        };
        let detail = match err.as_service_error() {
            Some(service) => DisplayErrorContext(service).to_string(),
            None => DisplayErrorContext(err).to_string(),
        };
        IamFailure {
            code: err.code().map(str::to_owned),
            origin,
            message: format!("IAM {operation} {subject}: {detail}"),
        }
    }

    /// The entity is not there: for a delete or a lookup, not a failure.
    pub(crate) fn is_missing(&self) -> bool {
        self.code.as_deref() == Some("NoSuchEntity")
    }

    pub(crate) fn already_exists(&self) -> bool {
        self.code.as_deref() == Some("EntityAlreadyExists")
    }

    /// An instance profile holds one role, and it has one already.
    pub(crate) fn profile_full(&self) -> bool {
        self.code.as_deref() == Some("LimitExceeded")
    }

    pub(crate) fn into_compute_error(self) -> ComputeError {
        let code = match self.origin {
            Origin::Transport => {
                return ComputeError::Transient {
                    code: "iam_unreachable".into(),
                    message: self.message,
                };
            }
            Origin::Construction => {
                return permanent("invalid_request", self.message);
            }
            Origin::Service { .. } => self.code.clone().unwrap_or_default(),
        };
        match code.as_str() {
            // IAM's own trouble, throttling, or two writers at once (a
            // retried step racing its first run): all pass.
            "Throttling"
            | "ThrottlingException"
            | "ServiceFailure"
            | "ServiceUnavailable"
            | "ConcurrentModification"
            | "RequestExpired" => ComputeError::Transient {
                code,
                message: self.message,
            },
            // Still in use: an instance profile a terminating instance
            // holds, or a policy being detached. It clears.
            "DeleteConflict" => ComputeError::Transient {
                code,
                message: self.message,
            },
            "AccessDenied"
            | "AccessDeniedException"
            | "InvalidClientTokenId"
            | "SignatureDoesNotMatch"
            | "UnrecognizedClientException" => permanent("unauthorized", self.message),
            "LimitExceeded" => permanent("quota_exceeded", self.message),
            "MalformedPolicyDocument"
            | "InvalidInput"
            | "ValidationError"
            | "PolicyNotAttachable"
            | "UnmodifiableEntity" => permanent("invalid_configuration", self.message),
            "NoSuchEntity" => permanent("node_identity_missing", self.message),
            _ => {
                let server_side =
                    matches!(self.origin, Origin::Service { status: Some(s) } if s >= 500);
                if server_side {
                    ComputeError::Transient {
                        code: if code.is_empty() {
                            "iam_server_error".into()
                        } else {
                            code
                        },
                        message: self.message,
                    }
                } else {
                    permanent("iam_request_failed", self.message)
                }
            }
        }
    }
}

fn permanent(failure_type: &str, message: String) -> ComputeError {
    ComputeError::Permanent {
        failure_type: failure_type.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(code: &str, status: u16) -> IamFailure {
        IamFailure {
            code: Some(code.to_owned()),
            origin: Origin::Service {
                status: Some(status),
            },
            message: format!("IAM CreateRole r: {code}"),
        }
    }

    fn kind(e: ComputeError) -> String {
        match e {
            ComputeError::Permanent { failure_type, .. } => failure_type,
            ComputeError::Transient { .. } => "<transient>".into(),
            ComputeError::InsufficientCapacity { .. } => "<capacity>".into(),
        }
    }

    #[test]
    fn throttling_conflicts_and_server_errors_pass() {
        for (code, status) in [
            ("Throttling", 400),
            ("ServiceFailure", 500),
            ("ConcurrentModification", 409),
            ("DeleteConflict", 409),
            ("SomethingNew", 503),
        ] {
            assert_eq!(
                kind(service(code, status).into_compute_error()),
                "<transient>",
                "{code}"
            );
        }
    }

    #[test]
    fn refusals_are_permanent_with_a_stable_type() {
        for (code, expected) in [
            ("AccessDenied", "unauthorized"),
            ("LimitExceeded", "quota_exceeded"),
            ("MalformedPolicyDocument", "invalid_configuration"),
            ("SomethingNew", "iam_request_failed"),
        ] {
            assert_eq!(
                kind(service(code, 400).into_compute_error()),
                expected,
                "{code}"
            );
        }
        let transport = IamFailure {
            code: None,
            origin: Origin::Transport,
            message: "timeout".into(),
        };
        assert_eq!(kind(transport.into_compute_error()), "<transient>");
    }
}
