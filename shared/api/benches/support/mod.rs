//! What every benchmark of the router needs: a verifier of HS256 tokens, as
//! local mode has it, and tokens it accepts.

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
