//! Floe's configuration, typed. Every environment variable that the three
//! functions and local mode read is read here, once, by one function; a
//! mistake is a [`ConfigError`] naming the variable. The manual's
//! configuration page (docs/configuration.md) lists the same variables.
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
/// value instead of resolving the chain again. Every call made with it is
/// bounded ([`AWS_ATTEMPT_TIMEOUT`], [`AWS_CALL_TIMEOUT`]); a function with
/// a shorter budget (the api) bounds it further with [`with_timeouts`].
pub async fn aws() -> &'static aws_config::SdkConfig {
    static SDK: tokio::sync::OnceCell<aws_config::SdkConfig> = tokio::sync::OnceCell::const_new();
    SDK.get_or_init(|| async {
        let loaded = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        with_timeouts(&loaded, AWS_ATTEMPT_TIMEOUT, AWS_CALL_TIMEOUT)
    })
    .await
}

/// One attempt of any AWS call in a process that does not narrow it: the
/// slowest calls Floe makes (EC2 RunInstances, IAM role changes) answer in
/// a few seconds, so an attempt still silent after this is a hung one
/// and is retried.
pub const AWS_ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A whole AWS call with its retries, unless narrowed. A quarter of the
/// worker's 120 s timeout: a step whose call hangs ends as a transient
/// error that the engine retries or records, instead of the function being
/// killed with every plan of its batch (the snapshotter's 900 s and local
/// mode have more room still).
pub const AWS_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `sdk` with a bound on every AWS call: each attempt ends after `attempt`,
/// and the call with its retries after `total`. The SDK's defaults bound
/// only the connection, so a service that accepts a request and never
/// answers would hold the caller until its Lambda timeout: for the api,
/// the gateway's 5xx instead of a 503, and a write that may land after the
/// client gave up (issue 12: fault injection, a delay on DynamoDB).
pub fn with_timeouts(
    sdk: &aws_config::SdkConfig,
    attempt: std::time::Duration,
    total: std::time::Duration,
) -> aws_config::SdkConfig {
    sdk.to_builder()
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(attempt.min(std::time::Duration::from_millis(3100)))
                .operation_attempt_timeout(attempt)
                .operation_timeout(total)
                .build(),
        )
        .build()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every process's AWS calls are bounded (the worker, the snapshotter
    /// and local mode use [`aws`] as it is), and the api's narrower bound
    /// replaces it rather than adding to it.
    #[tokio::test]
    async fn every_aws_call_is_bounded_and_a_function_may_narrow_it() -> Result<(), &'static str> {
        let sdk = aws().await;
        let t = sdk.timeout_config().ok_or("no timeouts")?;
        assert_eq!(t.operation_attempt_timeout(), Some(AWS_ATTEMPT_TIMEOUT));
        assert_eq!(t.operation_timeout(), Some(AWS_CALL_TIMEOUT));
        assert!(
            t.connect_timeout()
                .is_some_and(|c| c <= AWS_ATTEMPT_TIMEOUT)
        );

        let narrowed = with_timeouts(sdk, Duration::from_secs(5), Duration::from_secs(10));
        let t = narrowed.timeout_config().ok_or("no timeouts")?;
        assert_eq!(t.operation_attempt_timeout(), Some(Duration::from_secs(5)));
        assert_eq!(t.operation_timeout(), Some(Duration::from_secs(10)));
        Ok(())
    }
}
