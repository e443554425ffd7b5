//! Turning IAM failures into the port's `ComputeError`: the plan engine
//! retries a `Transient` error and shows a `Permanent` one's type, so this
//! is the adapter's whole retry policy.

use aws_sdk_iam::error::{ProvideErrorMetadata, SdkError};
use floe_aws_errors::{AwsFailure, Judged, Verdict};
use floe_compute::ComputeError;

#[derive(Debug)]
pub(crate) struct IamFailure(AwsFailure);

impl IamFailure {
    pub(crate) fn from_sdk<E>(operation: &str, subject: &str, err: &SdkError<E>) -> IamFailure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        IamFailure(AwsFailure::from_sdk(
            format_args!("IAM {operation} {subject}"),
            err,
        ))
    }

    /// The entity is not there: for a delete or a lookup, not a failure.
    pub(crate) fn is_missing(&self) -> bool {
        self.0.code() == Some("NoSuchEntity")
    }

    pub(crate) fn already_exists(&self) -> bool {
        self.0.code() == Some("EntityAlreadyExists")
    }

    /// An instance profile holds one role, and it has one already.
    pub(crate) fn profile_full(&self) -> bool {
        self.0.code() == Some("LimitExceeded")
    }

    pub(crate) fn into_compute_error(self) -> ComputeError {
        match self.0.judge("iam", classify) {
            Judged::Transient { code, message } => ComputeError::Transient { code, message },
            Judged::Permanent {
                failure_type,
                message,
            } => permanent(&failure_type, message),
        }
    }
}

/// What IAM's own codes mean; the codes every AWS service shares
/// (throttling, internal errors, refused credentials) are
/// `floe_aws_errors`'s.
fn classify(code: &str) -> Option<Verdict> {
    match code {
        // Two writers at once (a retried step racing its first run), or a
        // request signed too long ago: both pass.
        "ConcurrentModification" | "RequestExpired" => Some(Verdict::Transient),
        // Still in use: an instance profile a terminating instance
        // holds, or a policy being detached. It clears.
        "DeleteConflict" => Some(Verdict::Transient),
        "LimitExceeded" => Some(Verdict::Permanent("quota_exceeded")),
        "MalformedPolicyDocument"
        | "InvalidInput"
        | "ValidationError"
        | "PolicyNotAttachable"
        | "UnmodifiableEntity" => Some(Verdict::Permanent("invalid_configuration")),
        "NoSuchEntity" => Some(Verdict::Permanent("node_identity_missing")),
        _ => None,
    }
}

pub(crate) fn permanent(failure_type: &str, message: String) -> ComputeError {
    ComputeError::Permanent {
        failure_type: failure_type.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_aws_errors::Origin;

    fn service(code: &str, status: u16) -> IamFailure {
        let message = format!("IAM CreateRole r: {code}");
        IamFailure(AwsFailure::new(
            Some(code),
            Origin::Service { status },
            message,
        ))
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
        let transport = IamFailure(AwsFailure::new(None, Origin::Transport, "timeout"));
        assert_eq!(kind(transport.into_compute_error()), "<transient>");
    }
}
