//! Bearer-token authentication for the Floe API.
//!
//! Local mode signs and checks HS256 tokens with a secret kept in a 0600 file;
//! production checks RS256/ES256 tokens against the issuer's JWKS (Cognito or
//! any OIDC provider), cached and refetched as the provider rotates its keys.
//! Either way the result is a [`Principal`]: who is calling, for which
//! organization, with which of ECE's four roles.

mod accepted;
pub mod api_key;
mod error;
mod issue;
mod jwks;
mod remote;
mod role;
mod secret;
mod verify;

pub use error::{AuthError, ConfigError, IssueError};
pub use issue::issue_hs256;
pub use jsonwebtoken::jwk::JwkSet;
pub use jwks::{fetch_jwks, load_jwks_file, parse_jwks};
pub use remote::{Clock, JwksCache, JwksCacheSettings, SystemClock};
pub use role::{Principal, Role};
pub use secret::load_or_create_secret;
pub use verify::{KeySource, MIN_SECRET_LEN, Verifier, VerifierConfig};
