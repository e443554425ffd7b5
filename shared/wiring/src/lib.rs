//! Floe's configuration, typed. Every environment variable that the three
//! functions and local mode read is read here, once, by one function; a
//! mistake is a [`ConfigError`] naming the variable. The README's
//! configuration table lists the same variables.
//!
//! It also builds what every process builds the same way ([`build`]: the
//! store, the cipher, the token verifier). Function-specific adapters (EC2,
//! SSM, EventBridge Scheduler, SQS) are built by the functions that use
//! them from the sections here, so each function links only the SDKs it
//! calls.

pub mod build;
mod env;
mod sections;

pub use build::WiringError;
pub use env::{ConfigError, Env};
pub use sections::*;

/// The AWS SDK's shared configuration (region, credentials chain,
/// `AWS_ENDPOINT_URL`), loaded once per cold start: every adapter's client
/// is built from this one value instead of resolving the chain again.
pub async fn aws() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}
