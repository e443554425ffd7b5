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
/// `AWS_ENDPOINT_URL`), loaded the first time it is asked for and at most
/// once per process: every AWS adapter's client is built from this one
/// value instead of resolving the chain again.
pub async fn aws() -> &'static aws_config::SdkConfig {
    static SDK: tokio::sync::OnceCell<aws_config::SdkConfig> = tokio::sync::OnceCell::const_new();
    SDK.get_or_init(|| aws_config::load_defaults(aws_config::BehaviorVersion::latest()))
        .await
}

/// The SDK configuration [`build`] gives the AWS adapters it builds.
#[derive(Debug, Clone, Copy)]
pub enum Aws<'a> {
    /// The process's ([`aws`]), loaded only when an AWS adapter is built: a
    /// process on SQLite with a local key never loads it.
    Shared,
    /// This one (tests pointing at moto).
    Given(&'a aws_config::SdkConfig),
}

impl<'a> Aws<'a> {
    pub async fn config(self) -> &'a aws_config::SdkConfig {
        match self {
            Aws::Shared => aws().await,
            Aws::Given(sdk) => sdk,
        }
    }
}

impl<'a> From<&'a aws_config::SdkConfig> for Aws<'a> {
    fn from(sdk: &'a aws_config::SdkConfig) -> Aws<'a> {
        Aws::Given(sdk)
    }
}
