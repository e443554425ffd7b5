//! What the benchmarks of the router share: a verifier of HS256 tokens, as
//! local mode has it, tokens it accepts, and the AWS settings for moto.

// Each benchmark is its own crate and uses only some of these.
#![allow(dead_code)]

use floe_auth::{KeySource, Role, Verifier, VerifierConfig, issue_hs256};
use std::sync::Arc;
use std::time::Duration;

const SECRET: &[u8] = b"router-benchmark-hs256-secret-0123456789abc";
const ISSUER: &str = "floe-local";
const AUDIENCE: &str = "floe-api";

/// The verifier for [`token`]'s tokens.
pub fn verifier() -> Result<Arc<Verifier>, floe_auth::ConfigError> {
    Ok(Arc::new(Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Hs256Secret(SECRET.to_vec()),
        leeway_secs: 0,
    })?))
}

/// An hour's token of `org` with one role.
pub fn token(org: &str, role: Role) -> Result<String, floe_auth::IssueError> {
    issue_hs256(
        SECRET,
        ISSUER,
        AUDIENCE,
        "bench",
        org,
        &[role],
        Duration::from_secs(3600),
    )
}

/// AWS settings for the moto that `scripts/bench.sh` starts: its endpoint
/// from `FLOE_TEST_AWS_ENDPOINT`, refused unless it is on loopback, with
/// fake credentials.
pub async fn moto_config() -> Result<aws_config::SdkConfig, String> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT")
        .map_err(|_| "FLOE_TEST_AWS_ENDPOINT is not set: start moto on 127.0.0.1 first")?;
    if !(endpoint.starts_with("http://127.0.0.1:") || endpoint.starts_with("http://localhost:")) {
        return Err(format!(
            "FLOE_TEST_AWS_ENDPOINT={endpoint} is not on loopback"
        ));
    }
    Ok(aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "floe-bench",
        ))
        .load()
        .await)
}
