use floe_domain::Code;
use std::io;
use std::path::PathBuf;

/// Why a bearer token was refused.
///
/// The `Display` texts go back to API clients verbatim, so they name the rule
/// that failed and never echo a secret or the token's contents; the only
/// token-derived text is a sanitised algorithm name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the bearer token is not a well-formed JWT")]
    Malformed,
    #[error("tokens signed with algorithm `{0}` are not accepted")]
    UnsupportedAlgorithm(String),
    #[error("the token was signed with a key this service does not know")]
    UnknownKey,
    #[error(
        "the token was signed with a key this service does not know, and the identity \
         provider's key set cannot be fetched right now to look for it; try again later"
    )]
    KeysUnavailable,
    #[error("the token signature is invalid")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued by an issuer this service does not trust")]
    WrongIssuer,
    #[error("the token is not intended for this service (wrong audience)")]
    WrongAudience,
    #[error("the token claims are invalid: {0}")]
    InvalidClaims(String),
    #[error("the token grants none of the Floe roles")]
    NoRole,
}

impl AuthError {
    /// A stable, machine-readable code for API error bodies; the texts may
    /// be reworded, these may not.
    pub fn code(&self) -> Code {
        match self {
            AuthError::Malformed => Code::AUTH_INVALID_TOKEN,
            AuthError::UnsupportedAlgorithm(_) => Code::AUTH_UNSUPPORTED_ALGORITHM,
            AuthError::UnknownKey => Code::AUTH_UNKNOWN_KEY,
            AuthError::KeysUnavailable => Code::AUTH_KEYS_UNAVAILABLE,
            AuthError::BadSignature => Code::AUTH_BAD_SIGNATURE,
            AuthError::Expired => Code::AUTH_TOKEN_EXPIRED,
            AuthError::NotYetValid => Code::AUTH_TOKEN_NOT_YET_VALID,
            AuthError::WrongIssuer => Code::AUTH_WRONG_ISSUER,
            AuthError::WrongAudience => Code::AUTH_WRONG_AUDIENCE,
            AuthError::InvalidClaims(_) => Code::AUTH_INVALID_CLAIMS,
            AuthError::NoRole => Code::AUTH_NO_ROLE,
        }
    }
}

/// A verifier, key set or secret file that cannot be used. These are for
/// operators (they may name paths and URLs), never for API clients.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("the auth setting `{0}` must not be empty")]
    MissingSetting(&'static str),
    #[error("the HS256 secret must be at least {min} bytes long (got {len})")]
    SecretTooShort { len: usize, min: usize },
    #[error("a clock leeway of {got} s is above the maximum of {max} s")]
    LeewayTooLarge { got: u64, max: u64 },
    #[error(
        "the JWKS holds no usable signing key (an RSA key of at least 2048 bits for RS256, \
         or an EC P-256 key for ES256)"
    )]
    NoUsableKeys,
    #[error("the JWKS is invalid: {0}")]
    InvalidJwks(String),
    #[error("the JWKS URL `{url}` is invalid: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error(
        "refusing to fetch the JWKS from `{0}`: only https is allowed, or http to a loopback host"
    )]
    InsecureUrl(String),
    #[error("fetching the JWKS from `{url}` failed: {error}")]
    Fetch { url: String, error: reqwest::Error },
    #[error("the JWKS endpoint `{url}` answered HTTP {status}")]
    HttpStatus { url: String, status: u16 },
    #[error("the JWKS is larger than the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error(
        "{path} can be accessed by group or others (mode {mode:03o}); \
         it holds a signing secret, so restrict it with `chmod 600`"
    )]
    InsecurePermissions { path: PathBuf, mode: u32 },
    #[error("{path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error("{path} holds {len} bytes, but a secret needs at least {min}")]
    SecretFileTooShort {
        path: PathBuf,
        len: usize,
        min: usize,
    },
    #[error("the operating system's random number generator failed: {0}")]
    Random(String),
}

impl ConfigError {
    pub(crate) fn io(path: impl Into<PathBuf>, error: io::Error) -> Self {
        ConfigError::Io {
            path: path.into(),
            error,
        }
    }
}

/// Why `issue_hs256` could not sign a token.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("the HS256 secret must be at least {min} bytes long (got {len})")]
    SecretTooShort { len: usize, min: usize },
    #[error("cannot issue the token: {0}")]
    InvalidInput(String),
    #[error("signing the token failed: {0}")]
    Signing(jsonwebtoken::errors::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_namespaced() {
        let all = [
            AuthError::Malformed,
            AuthError::UnsupportedAlgorithm("HS512".into()),
            AuthError::UnknownKey,
            AuthError::KeysUnavailable,
            AuthError::BadSignature,
            AuthError::Expired,
            AuthError::NotYetValid,
            AuthError::WrongIssuer,
            AuthError::WrongAudience,
            AuthError::InvalidClaims("`org` is missing".into()),
            AuthError::NoRole,
        ];
        let mut codes: Vec<_> = all.iter().map(AuthError::code).collect();
        assert!(codes.iter().all(|c| c.name().starts_with("auth.")));
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), all.len());
        assert_eq!(AuthError::Expired.code(), "auth.token_expired");
        assert_eq!(AuthError::Malformed.code(), "auth.invalid_token");
        assert_eq!(AuthError::WrongAudience.code(), "auth.wrong_audience");
    }
}
