//! Turning EC2 failures into the port's `ComputeError`.
//!
//! The plan engine decides from the variant alone whether to retry, move to
//! another zone or give up, so the mapping below is the whole retry policy of
//! the EC2 adapter. Codes are matched exactly (or by their documented prefix);
//! an unknown code falls back on the HTTP status.

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use floe_aws_errors::{AwsFailure, Class};
use floe_compute::ComputeError;

/// What went wrong in one EC2 call, before the caller decides whether it is
/// a failure at all (a delete of something gone is not).
#[derive(Debug)]
pub(crate) struct Ec2Failure(AwsFailure);

impl Ec2Failure {
    pub(crate) fn from_sdk<E>(operation: &'static str, err: &SdkError<E>) -> Ec2Failure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        Ec2Failure(AwsFailure::from_sdk(format_args!("EC2 {operation}"), err))
    }

    /// EC2's error code, for the callers to which some codes mean success
    /// (a delete of what is already gone).
    pub(crate) fn code(&self) -> Option<&str> {
        self.0.code()
    }

    /// EC2 does not know the instance profile yet: right after IAM made
    /// it, RunInstances refuses it (`InvalidParameterValue` naming
    /// `iamInstanceProfile`, or an `InvalidIamInstanceProfile` code) until
    /// it has propagated.
    pub(crate) fn is_profile_not_ready(&self) -> bool {
        let code = self.code().unwrap_or("");
        code.starts_with("InvalidIamInstanceProfile")
            || (code == "InvalidParameterValue"
                && self
                    .0
                    .message()
                    .to_ascii_lowercase()
                    .contains("iaminstanceprofile"))
    }

    /// For a code that is usually fatal but known to pass in this context
    /// (EC2's eventual consistency right after a create).
    pub(crate) fn into_transient(self) -> ComputeError {
        ComputeError::Transient {
            code: self.code().unwrap_or("ec2_error").to_owned(),
            message: self.0.into_message(),
        }
    }

    /// `zone` is the zone index of a launch; other operations pass `None`,
    /// and a capacity error outside a launch is then only worth a retry.
    pub(crate) fn into_compute_error(self, zone: Option<usize>) -> ComputeError {
        let class = self.0.classify(classify);
        let code = self.code().unwrap_or("").to_owned();
        let message = self.0.into_message();
        match class {
            Class::Unreachable => transient("ec2_unreachable".to_owned(), message),
            Class::Unbuildable => permanent("invalid_request", message),
            Class::Known(Ec2Class::Capacity) => match zone {
                Some(zone) => ComputeError::InsufficientCapacity { zone, message },
                None => transient(code, message),
            },
            Class::Known(Ec2Class::Transient) => transient(code, message),
            Class::Known(Ec2Class::Permanent(failure_type)) => permanent(failure_type, message),
            Class::Denied { .. } => permanent("unauthorized", message),
            // Throttling, or EC2's own trouble: it passes.
            Class::Retryable { code, .. } if code.is_empty() => {
                transient("ec2_server_error".to_owned(), message)
            }
            Class::Retryable { code, .. } => transient(code, message),
            // A code this adapter has never heard of, about the request.
            Class::Refused { .. } => permanent("ec2_request_failed", message),
        }
    }
}

fn transient(code: String, message: String) -> ComputeError {
    ComputeError::Transient { code, message }
}

pub(crate) fn permanent(failure_type: &str, message: String) -> ComputeError {
    ComputeError::Permanent {
        failure_type: failure_type.to_owned(),
        message,
    }
}

/// What EC2's own codes mean; the codes every AWS service shares
/// (throttling, internal errors, refused credentials) are
/// `floe_aws_errors`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ec2Class {
    Capacity,
    Transient,
    Permanent(&'static str),
}

/// EC2's error codes, from the "Error codes for the Amazon EC2 API" reference.
fn classify(code: &str) -> Option<Ec2Class> {
    match code {
        // The zone is out of this type (or the subnet out of addresses);
        // another zone's subnet may well have room.
        "InsufficientInstanceCapacity" | "InsufficientFreeAddressesInSubnet" => {
            Some(Ec2Class::Capacity)
        }

        "RequestExpired" | "InsufficientCapacity" | "InsufficientReservedInstanceCapacity" => {
            Some(Ec2Class::Transient)
        }

        "UnauthorizedOperation"
        | "AuthFailure"
        | "OptInRequired"
        | "Blocked"
        | "PendingVerification" => Some(Ec2Class::Permanent("unauthorized")),

        "InstanceLimitExceeded" | "VcpuLimitExceeded" => {
            Some(Ec2Class::Permanent("instance_limit_exceeded"))
        }
        "VolumeLimitExceeded"
        | "ResourceLimitExceeded"
        | "LaunchTemplateLimitExceeded"
        | "MaxIOPSLimitExceeded"
        | "AddressLimitExceeded" => Some(Ec2Class::Permanent("quota_exceeded")),

        "IdempotentParameterMismatch" => Some(Ec2Class::Permanent("idempotency_mismatch")),

        "Unsupported" | "UnsupportedOperation" | "InvalidInstanceType" => {
            Some(Ec2Class::Permanent("unsupported_configuration"))
        }

        "InvalidParameterValue"
        | "InvalidParameter"
        | "InvalidParameterCombination"
        | "MissingParameter"
        | "UnknownParameter"
        | "ValidationError"
        | "InvalidBlockDeviceMapping"
        | "InvalidUserData.Malformed" => Some(Ec2Class::Permanent("invalid_configuration")),

        _ => classify_by_prefix(code),
    }
}

fn classify_by_prefix(code: &str) -> Option<Ec2Class> {
    // These families each have several suffixes (.NotFound, .Malformed,
    // .Unavailable...), all meaning the configuration names something wrong.
    const IMAGE: &[&str] = &["InvalidAMIID.", "InvalidAMIName."];
    const CONFIGURATION: &[&str] = &[
        "InvalidSubnetID.",
        "InvalidSubnet.",
        "InvalidGroup.",
        "InvalidGroupId.",
        "InvalidSecurityGroupID.",
        "InvalidKeyPair.",
        "InvalidVpcID.",
        "InvalidIamInstanceProfile",
        "InvalidLaunchTemplateId.",
        "InvalidLaunchTemplateName.",
        "InvalidKmsKeyId",
        "InvalidVolume.",
    ];
    if IMAGE.iter().any(|p| code.starts_with(p)) {
        Some(Ec2Class::Permanent("invalid_image"))
    } else if CONFIGURATION.iter().any(|p| code.starts_with(p)) {
        Some(Ec2Class::Permanent("invalid_configuration"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_aws_errors::Origin;

    fn service(code: &str, status: u16) -> Ec2Failure {
        let message = format!("EC2 RunInstances: {code}");
        Ec2Failure(AwsFailure::new(
            Some(code),
            Origin::Service { status },
            message,
        ))
    }

    fn failure_type(err: ComputeError) -> String {
        match err {
            ComputeError::Permanent { failure_type, .. } => failure_type,
            ComputeError::Transient { .. } => "<transient>".to_owned(),
            ComputeError::InsufficientCapacity { zone, .. } => format!("<capacity {zone}>"),
        }
    }

    #[test]
    fn a_profile_iam_has_not_propagated_yet_is_recognised() {
        let not_ready = Ec2Failure(AwsFailure::new(
            Some("InvalidParameterValue"),
            Origin::Service { status: 400 },
            "EC2 RunInstances: InvalidParameterValue: Value (arn:aws:iam::1:instance-profile/floe-nodes/floe-node-d) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN",
        ));
        assert!(not_ready.is_profile_not_ready());
        assert!(service("InvalidIamInstanceProfile.NotFound", 400).is_profile_not_ready());
        assert!(!service("InvalidParameterValue", 400).is_profile_not_ready());
        assert!(!service("InvalidSubnetID.NotFound", 400).is_profile_not_ready());
    }

    #[test]
    fn capacity_names_the_zone_of_the_launch() {
        let err = service("InsufficientInstanceCapacity", 500).into_compute_error(Some(2));
        assert_eq!(failure_type(err), "<capacity 2>");
        let err = service("InsufficientInstanceCapacity", 500).into_compute_error(None);
        assert_eq!(failure_type(err), "<transient>");
    }

    #[test]
    fn throttling_and_server_trouble_are_transient() {
        for code in [
            "RequestLimitExceeded",
            "Throttling",
            "InternalError",
            "Unavailable",
        ] {
            assert_eq!(
                failure_type(service(code, 503).into_compute_error(Some(0))),
                "<transient>",
                "{code}"
            );
        }
        // Unknown code, but EC2 says it is its own fault.
        assert_eq!(
            failure_type(service("SomethingNew", 500).into_compute_error(None)),
            "<transient>"
        );
    }

    #[test]
    fn configuration_errors_are_permanent_with_a_stable_type() {
        let cases = [
            ("InvalidParameterValue", "invalid_configuration"),
            ("InvalidSubnetID.NotFound", "invalid_configuration"),
            ("InvalidGroup.NotFound", "invalid_configuration"),
            ("InvalidAMIID.NotFound", "invalid_image"),
            ("InvalidAMIID.Malformed", "invalid_image"),
            ("UnauthorizedOperation", "unauthorized"),
            ("InstanceLimitExceeded", "instance_limit_exceeded"),
            ("VcpuLimitExceeded", "instance_limit_exceeded"),
            ("IdempotentParameterMismatch", "idempotency_mismatch"),
            ("SomethingNew", "ec2_request_failed"),
        ];
        for (code, expected) in cases {
            assert_eq!(
                failure_type(service(code, 400).into_compute_error(Some(0))),
                expected,
                "{code}"
            );
        }
    }

    #[test]
    fn transport_failures_are_transient_and_bad_requests_permanent() {
        let transport = Ec2Failure(AwsFailure::new(None, Origin::Transport, "timeout"));
        assert_eq!(
            failure_type(transport.into_compute_error(None)),
            "<transient>"
        );
        let construction = Ec2Failure(AwsFailure::new(None, Origin::Construction, "bad"));
        assert_eq!(
            failure_type(construction.into_compute_error(None)),
            "invalid_request"
        );
    }
}
