//! One reading of an AWS SDK error, shared by every AWS adapter.
//!
//! Every SDK client fails with the same `SdkError`: the service answered
//! with an error code and an HTTP status, or there was no usable answer
//! (a timeout, a dropped connection, a garbled response), or the SDK could
//! not build the request at all. [`AwsFailure::from_sdk`] keeps what an
//! operator and a retry policy need of it, and [`AwsFailure::classify`]
//! sorts it: first by the adapter's own table of its service's codes, then
//! by what holds for every AWS service (throttling and the service's own
//! trouble pass, credentials that are refused do not), and last by the
//! HTTP status (a 5xx or a 429 is the service's trouble, another 4xx is
//! about the request). Each adapter then maps the class into its port's
//! error.
//!
//! This crate links no `aws-sdk-*` crate, only the smithy crates every SDK
//! is built on, so that adapters can share it without depending on one
//! another.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// What went wrong in one AWS call, before the caller decides whether it
/// is a failure at all (a delete of what is already gone is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsFailure {
    code: Option<String>,
    origin: Origin,
    message: String,
}

/// Where a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The service answered with an error, with this HTTP status.
    Service { status: u16 },
    /// No usable answer: timeout, connection refused, garbled response.
    Transport,
    /// The SDK refused to build the request; retrying cannot fix it.
    Construction,
}

/// An [`AwsFailure`], sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class<T> {
    /// What the adapter's own table made of the service's code.
    Known(T),
    /// No usable answer: worth another try.
    Unreachable,
    /// The SDK could not build the request: it will fail again.
    Unbuildable,
    /// Throttled, or the service's own trouble (a 5xx or 429 status):
    /// worth another try. `code` is empty when the answer had none.
    Retryable { code: String, status: u16 },
    /// The credentials, or their permissions, were refused: they will be
    /// again.
    Denied { code: String },
    /// Refused, with a code the adapter does not know, for something in the
    /// request: it will fail again.
    Refused { code: String, status: u16 },
}

/// What an adapter's table says of one of its service's codes, when that
/// is all it needs to say: another try passes, or this is the permanent
/// failure's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Transient,
    Permanent(&'static str),
}

/// A failure judged by a [`Verdict`] table: the two outcomes a port's
/// error has (another try, or a failure of a type the user sees).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// Another try may pass; `code` says why (the service's code, or
    /// `{service}_unreachable`, `{service}_server_error`).
    Transient { code: String, message: String },
    /// It will fail again as it is; `failure_type` is shown to the user.
    Permanent {
        failure_type: String,
        message: String,
    },
}

impl AwsFailure {
    /// Judges the failure with `known` (the adapter's table of its
    /// service's codes) and the codes and statuses every service shares:
    /// no answer and the service's own trouble pass; refused credentials
    /// are `unauthorized`; a request the SDK could not build is
    /// `invalid_request`; any other refusal is `{service}_request_failed`.
    pub fn judge(self, service: &str, known: impl FnOnce(&str) -> Option<Verdict>) -> Judged {
        let class = self.classify(known);
        let code = self.code.clone().unwrap_or_default();
        let message = self.message;
        let permanent = |failure_type: &str, message: String| Judged::Permanent {
            failure_type: failure_type.to_owned(),
            message,
        };
        match class {
            Class::Unreachable => Judged::Transient {
                code: format!("{service}_unreachable"),
                message,
            },
            Class::Unbuildable => permanent("invalid_request", message),
            Class::Known(Verdict::Transient) => Judged::Transient { code, message },
            Class::Known(Verdict::Permanent(failure_type)) => permanent(failure_type, message),
            Class::Denied { .. } => permanent("unauthorized", message),
            Class::Retryable { code, .. } => Judged::Transient {
                code: if code.is_empty() {
                    format!("{service}_server_error")
                } else {
                    code
                },
                message,
            },
            Class::Refused { .. } => permanent(&format!("{service}_request_failed"), message),
        }
    }
}

impl<T> Class<T> {
    /// Whether another try can pass; `None` for the adapter's own classes.
    pub fn is_transient(&self) -> Option<bool> {
        match self {
            Class::Known(_) => None,
            Class::Unreachable | Class::Retryable { .. } => Some(true),
            Class::Unbuildable | Class::Denied { .. } | Class::Refused { .. } => Some(false),
        }
    }
}

impl AwsFailure {
    /// `context` names the call (the service, the operation, its subject);
    /// the message is the context, then the error's code, message and
    /// request id, or for an error without a response its chain of causes.
    pub fn from_sdk<E>(context: impl std::fmt::Display, err: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let origin = match err {
            SdkError::ServiceError(service) => Origin::Service {
                status: service.raw().status().as_u16(),
            },
            SdkError::ConstructionFailure(_) => Origin::Construction,
            _ => Origin::Transport,
        };
        AwsFailure {
            code: err.code().map(str::to_owned),
            origin,
            message: format!("{context}: {}", describe(err)),
        }
    }

    /// A failure as [`AwsFailure::from_sdk`] would make it, for tests of
    /// the adapters' mappings.
    pub fn new(code: Option<&str>, origin: Origin, message: impl Into<String>) -> Self {
        AwsFailure {
            code: code.map(str::to_owned),
            origin,
            message: message.into(),
        }
    }

    /// The service's error code, for the callers to which some codes mean
    /// success (a delete of what is already gone).
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    pub fn origin(&self) -> Origin {
        self.origin
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn into_message(self) -> String {
        self.message
    }

    /// Sorts the failure: a service's code by `known` (the adapter's table
    /// of its service's codes) first, then by the codes every AWS service
    /// shares, then by the HTTP status.
    pub fn classify<T>(&self, known: impl FnOnce(&str) -> Option<T>) -> Class<T> {
        let status = match self.origin {
            Origin::Transport => return Class::Unreachable,
            Origin::Construction => return Class::Unbuildable,
            Origin::Service { status } => status,
        };
        let code = self.code.as_deref().unwrap_or("");
        if let Some(class) = known(code) {
            return Class::Known(class);
        }
        let code = code.to_owned();
        if is_retryable_code(&code) {
            Class::Retryable { code, status }
        } else if is_denied_code(&code) {
            Class::Denied { code }
        } else if status == 429 || status >= 500 {
            Class::Retryable { code, status }
        } else {
            Class::Refused { code, status }
        }
    }
}

/// Throttling, the service's own trouble and its timeouts, under the names
/// AWS services use for them (the Query services' and the JSON ones').
fn is_retryable_code(code: &str) -> bool {
    matches!(
        code,
        "Throttling"
            | "ThrottlingException"
            | "TooManyRequestsException"
            | "RequestLimitExceeded"
            | "InternalError"
            | "InternalFailure"
            | "InternalServerError"
            | "InternalServerException"
            | "ServiceFailure"
            | "ServiceUnavailable"
            | "Unavailable"
            | "RequestTimeout"
            | "RequestTimeoutException"
    )
}

/// Credentials that are refused or lack a permission: the same for every
/// AWS service, since every request is signed the same way.
fn is_denied_code(code: &str) -> bool {
    matches!(
        code,
        "AccessDenied"
            | "AccessDeniedException"
            | "UnrecognizedClientException"
            | "InvalidClientTokenId"
            | "MissingAuthenticationToken"
            | "InvalidSignatureException"
            | "SignatureDoesNotMatch"
    )
}

/// The error's code, message and request id, or for an error without a
/// response its chain of causes. `DisplayErrorContext` on the whole
/// `SdkError` of a service error would also dump the raw response. Neither
/// holds credentials: requests are signed, and the signature is never
/// echoed back.
pub fn describe<E>(err: &SdkError<E, HttpResponse>) -> String
where
    E: std::error::Error + 'static,
{
    match err.as_service_error() {
        Some(service) => DisplayErrorContext(service).to_string(),
        None => DisplayErrorContext(err).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    type Err = SdkError<ErrorMetadata, HttpResponse>;

    #[test]
    fn a_judgement_names_the_service_where_the_answer_had_no_code() {
        let judge = |code: Option<&str>, origin: Origin| {
            AwsFailure::new(code, origin, "m").judge("svc", |c| match c {
                "Busy" => Some(Verdict::Transient),
                "Gone" => Some(Verdict::Permanent("svc_gone")),
                _ => None,
            })
        };
        let transient = |code: &str| Judged::Transient {
            code: code.into(),
            message: "m".into(),
        };
        let permanent = |t: &str| Judged::Permanent {
            failure_type: t.into(),
            message: "m".into(),
        };
        assert_eq!(judge(None, Origin::Transport), transient("svc_unreachable"));
        assert_eq!(
            judge(None, Origin::Construction),
            permanent("invalid_request")
        );
        assert_eq!(
            judge(Some("Busy"), Origin::Service { status: 400 }),
            transient("Busy")
        );
        assert_eq!(
            judge(Some("Gone"), Origin::Service { status: 404 }),
            permanent("svc_gone")
        );
        assert_eq!(
            judge(Some("AccessDenied"), Origin::Service { status: 403 }),
            permanent("unauthorized")
        );
        assert_eq!(
            judge(None, Origin::Service { status: 503 }),
            transient("svc_server_error")
        );
        assert_eq!(
            judge(Some("Odd"), Origin::Service { status: 400 }),
            permanent("svc_request_failed")
        );
    }

    fn answered(code: &str, status: u16) -> Err {
        let raw = HttpResponse::new(
            StatusCode::try_from(status).expect("a valid status"),
            SdkBody::empty(),
        );
        let meta = ErrorMetadata::builder()
            .code(code)
            .message("the service's words")
            .build();
        SdkError::service_error(meta, raw)
    }

    fn service(code: &str, status: u16) -> AwsFailure {
        AwsFailure::new(
            (!code.is_empty()).then_some(code),
            Origin::Service { status },
            code,
        )
    }

    fn no_table(_: &str) -> Option<()> {
        None
    }

    #[test]
    fn a_service_error_keeps_code_status_and_the_services_words() {
        let failure = AwsFailure::from_sdk("EC2 RunInstances", &answered("Throttling", 400));
        assert_eq!(failure.code(), Some("Throttling"));
        assert_eq!(failure.origin(), Origin::Service { status: 400 });
        assert!(
            failure.message().starts_with("EC2 RunInstances: "),
            "{}",
            failure.message()
        );
        assert!(
            failure.message().contains("the service's words"),
            "{}",
            failure.message()
        );
    }

    #[test]
    fn no_answer_is_transport_and_an_unbuilt_request_construction() {
        let timeout: Err = SdkError::timeout_error("too slow");
        let failure = AwsFailure::from_sdk("SSM GetParameter /p", &timeout);
        assert_eq!(failure.origin(), Origin::Transport);
        assert_eq!(failure.code(), None);
        assert_eq!(failure.classify(no_table), Class::Unreachable);
        let unbuilt: Err = SdkError::construction_failure("no region");
        let failure = AwsFailure::from_sdk("SSM GetParameter /p", &unbuilt);
        assert_eq!(failure.origin(), Origin::Construction);
        assert_eq!(failure.classify(no_table), Class::Unbuildable);
    }

    #[test]
    fn the_adapters_table_comes_first() {
        let failure = service("InsufficientInstanceCapacity", 500);
        assert_eq!(
            failure.classify(|_| Some("capacity")),
            Class::Known("capacity")
        );
        assert_eq!(
            failure.classify(no_table),
            Class::Retryable {
                code: "InsufficientInstanceCapacity".into(),
                status: 500
            }
        );
    }

    #[test]
    fn throttling_server_trouble_and_429_pass_other_refusals_do_not() {
        for (code, status) in [
            ("Throttling", 400),
            ("ThrottlingException", 400),
            ("TooManyRequestsException", 400),
            ("RequestLimitExceeded", 503),
            ("SomethingNew", 500),
            ("SomethingNew", 429),
            ("", 502),
        ] {
            assert_eq!(
                service(code, status).classify(no_table).is_transient(),
                Some(true),
                "{code} {status}"
            );
        }
        assert_eq!(
            service("AccessDeniedException", 400).classify(no_table),
            Class::Denied {
                code: "AccessDeniedException".into()
            }
        );
        assert_eq!(
            service("SomethingNew", 400).classify(no_table),
            Class::Refused {
                code: "SomethingNew".into(),
                status: 400
            }
        );
    }
}
