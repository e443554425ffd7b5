//! Turning EC2 failures into the port's `ComputeError`.
//!
//! The plan engine decides from the variant alone whether to retry, move to
//! another zone or give up, so the mapping below is the whole retry policy of
//! the EC2 adapter. Codes are matched exactly (or by their documented prefix);
//! an unknown code falls back on the HTTP status.

use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use floe_compute::ComputeError;

/// What went wrong in one EC2 call, before the caller decides whether it is
/// a failure at all (a delete of something gone is not).
#[derive(Debug)]
pub(crate) struct Ec2Failure {
    code: Option<String>,
    origin: Origin,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// EC2 answered with an error code.
    Service { status: Option<u16> },
    /// No usable answer: timeout, connection refused, garbled response.
    Transport,
    /// The SDK refused to build the request; retrying cannot fix it.
    Construction,
}

impl Ec2Failure {
    pub(crate) fn from_sdk<E>(operation: &'static str, err: &SdkError<E>) -> Ec2Failure
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
        // For a service error the full SdkError display would include the raw
        // response; the service error alone carries code, message and request
        // id, which is what an operator needs. Neither contains credentials:
        // requests are signed, and the signature is never echoed back.
        let detail = match err.as_service_error() {
            Some(service) => DisplayErrorContext(service).to_string(),
            None => DisplayErrorContext(err).to_string(),
        };
        Ec2Failure {
            code: err.code().map(str::to_owned),
            origin,
            message: format!("EC2 {operation}: {detail}"),
        }
    }

    /// EC2's error code, for the callers to which some codes mean success
    /// (a delete of what is already gone).
    pub(crate) fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// EC2 does not know the instance profile yet: right after IAM made
    /// it, RunInstances refuses it (`InvalidParameterValue` naming
    /// `iamInstanceProfile`, or an `InvalidIamInstanceProfile` code) until
    /// it has propagated.
    pub(crate) fn is_profile_not_ready(&self) -> bool {
        let code = self.code.as_deref().unwrap_or("");
        code.starts_with("InvalidIamInstanceProfile")
            || (code == "InvalidParameterValue"
                && self
                    .message
                    .to_ascii_lowercase()
                    .contains("iaminstanceprofile"))
    }

    /// For a code that is usually fatal but known to pass in this context
    /// (EC2's eventual consistency right after a create).
    pub(crate) fn into_transient(self) -> ComputeError {
        ComputeError::Transient {
            code: self.code.unwrap_or_else(|| "ec2_error".to_owned()),
            message: self.message,
        }
    }

    /// `zone` is the zone index of a launch; other operations pass `None`,
    /// and a capacity error outside a launch is then only worth a retry.
    pub(crate) fn into_compute_error(self, zone: Option<usize>) -> ComputeError {
        match self.origin {
            Origin::Transport => {
                return ComputeError::Transient {
                    code: "ec2_unreachable".to_owned(),
                    message: self.message,
                };
            }
            Origin::Construction => {
                return ComputeError::Permanent {
                    failure_type: "invalid_request".to_owned(),
                    message: self.message,
                };
            }
            Origin::Service { .. } => {}
        }
        let code = self.code.as_deref().unwrap_or("");
        match classify(code) {
            Class::Capacity => match zone {
                Some(zone) => ComputeError::InsufficientCapacity {
                    zone,
                    message: self.message,
                },
                None => ComputeError::Transient {
                    code: code.to_owned(),
                    message: self.message,
                },
            },
            Class::Transient => ComputeError::Transient {
                code: code.to_owned(),
                message: self.message,
            },
            Class::Permanent(failure_type) => ComputeError::Permanent {
                failure_type: failure_type.to_owned(),
                message: self.message,
            },
            Class::Unknown => {
                // A code this adapter has never heard of: a 5xx is EC2's own
                // trouble and passes, a 4xx is about the request and will not.
                let server_side =
                    matches!(self.origin, Origin::Service { status: Some(s) } if s >= 500);
                if server_side {
                    ComputeError::Transient {
                        code: if code.is_empty() {
                            "ec2_server_error".to_owned()
                        } else {
                            code.to_owned()
                        },
                        message: self.message,
                    }
                } else {
                    ComputeError::Permanent {
                        failure_type: "ec2_request_failed".to_owned(),
                        message: self.message,
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Capacity,
    Transient,
    Permanent(&'static str),
    Unknown,
}

/// EC2's error codes, from the "Error codes for the Amazon EC2 API" reference.
fn classify(code: &str) -> Class {
    match code {
        // The zone is out of this type (or the subnet out of addresses);
        // another zone's subnet may well have room.
        "InsufficientInstanceCapacity" | "InsufficientFreeAddressesInSubnet" => Class::Capacity,

        "RequestLimitExceeded"
        | "Throttling"
        | "ThrottlingException"
        | "InternalError"
        | "InternalFailure"
        | "ServiceUnavailable"
        | "Unavailable"
        | "RequestTimeout"
        | "RequestExpired"
        | "InsufficientCapacity"
        | "InsufficientReservedInstanceCapacity" => Class::Transient,

        "UnauthorizedOperation"
        | "AuthFailure"
        | "OptInRequired"
        | "Blocked"
        | "PendingVerification"
        | "SignatureDoesNotMatch"
        | "InvalidClientTokenId" => Class::Permanent("unauthorized"),

        "InstanceLimitExceeded" | "VcpuLimitExceeded" => {
            Class::Permanent("instance_limit_exceeded")
        }
        "VolumeLimitExceeded"
        | "ResourceLimitExceeded"
        | "LaunchTemplateLimitExceeded"
        | "MaxIOPSLimitExceeded"
        | "AddressLimitExceeded" => Class::Permanent("quota_exceeded"),

        "IdempotentParameterMismatch" => Class::Permanent("idempotency_mismatch"),

        "Unsupported" | "UnsupportedOperation" | "InvalidInstanceType" => {
            Class::Permanent("unsupported_configuration")
        }

        "InvalidParameterValue"
        | "InvalidParameter"
        | "InvalidParameterCombination"
        | "MissingParameter"
        | "UnknownParameter"
        | "ValidationError"
        | "InvalidBlockDeviceMapping"
        | "InvalidUserData.Malformed" => Class::Permanent("invalid_configuration"),

        _ => classify_by_prefix(code),
    }
}

fn classify_by_prefix(code: &str) -> Class {
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
        Class::Permanent("invalid_image")
    } else if CONFIGURATION.iter().any(|p| code.starts_with(p)) {
        Class::Permanent("invalid_configuration")
    } else {
        Class::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(code: &str, status: u16) -> Ec2Failure {
        Ec2Failure {
            code: Some(code.to_owned()),
            origin: Origin::Service {
                status: Some(status),
            },
            message: format!("EC2 RunInstances: {code}"),
        }
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
        let mut not_ready = service("InvalidParameterValue", 400);
        not_ready.message = "EC2 RunInstances: InvalidParameterValue: Value (arn:aws:iam::1:instance-profile/floe-nodes/floe-node-d) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN".into();
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
        let transport = Ec2Failure {
            code: None,
            origin: Origin::Transport,
            message: "timeout".to_owned(),
        };
        assert_eq!(
            failure_type(transport.into_compute_error(None)),
            "<transient>"
        );
        let construction = Ec2Failure {
            code: None,
            origin: Origin::Construction,
            message: "bad".to_owned(),
        };
        assert_eq!(
            failure_type(construction.into_compute_error(None)),
            "invalid_request"
        );
    }
}
