use std::fs::File;
use std::io::Read;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use reqwest::Url;
use reqwest::redirect::{Attempt, Policy};
use serde::Deserialize;

use crate::error::ConfigError;

/// A provider's key set is a few KiB; a cap keeps a misconfigured URL or
/// file from eating the memory of a 128 MiB Lambda.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// Start-up (and a cold start) waits on this; a JWKS endpoint that takes
/// longer is down.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

const MAX_REDIRECTS: usize = 3;

/// Parses a JWKS document (`{"keys": [...]}`).
///
/// An entry that does not parse as a JWK is skipped with a warning rather
/// than failing the set: providers publish key types this crate does not
/// know, and those must not take the keys it does know down with them.
pub fn parse_jwks(json: &str) -> Result<JwkSet, ConfigError> {
    #[derive(Deserialize)]
    struct RawSet {
        keys: Vec<serde_json::Value>,
    }

    if json.len() > MAX_JWKS_BYTES {
        return Err(ConfigError::TooLarge {
            limit: MAX_JWKS_BYTES,
        });
    }
    let raw: RawSet =
        serde_json::from_str(json).map_err(|e| ConfigError::InvalidJwks(e.to_string()))?;
    let mut keys = Vec::with_capacity(raw.keys.len());
    for (index, entry) in raw.keys.into_iter().enumerate() {
        match serde_json::from_value::<Jwk>(entry) {
            Ok(jwk) => keys.push(jwk),
            Err(error) => {
                tracing::warn!(index, %error, "ignoring a JWKS entry that is not a valid JWK");
            }
        }
    }
    Ok(JwkSet { keys })
}

/// Reads a JWKS document from a file, for deployments that ship the issuer's
/// keys with their configuration instead of fetching them.
pub fn load_jwks_file(path: &Path) -> Result<JwkSet, ConfigError> {
    let file = File::open(path).map_err(|e| ConfigError::io(path, e))?;
    let mut text = String::new();
    // One byte over the cap tells "too large" apart from "exactly at the cap".
    file.take(MAX_JWKS_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| ConfigError::io(path, e))?;
    parse_jwks(&text)
}

/// Downloads the issuer's JWKS.
///
/// Keys fetched over plain http could be swapped in transit, which would let
/// anyone mint tokens; so https is required, except to a loopback host
/// (local identity providers and tests), which never leaves the machine.
pub async fn fetch_jwks(url: &str) -> Result<JwkSet, ConfigError> {
    let target = checked_url(url)?;
    let loopback = is_loopback(&target);

    let mut builder = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT)
        .redirect(Policy::custom(move |attempt| {
            follow_redirect(attempt, loopback)
        }));
    if loopback {
        // A proxy from the environment would see (and could answer) a
        // request meant for this machine.
        builder = builder.no_proxy();
    }
    let fetch_error = |error| ConfigError::Fetch {
        url: url.to_owned(),
        error,
    };
    let client = builder.build().map_err(fetch_error)?;

    let mut response = client
        .get(target)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(fetch_error)?;
    let status = response.status();
    if !status.is_success() {
        return Err(ConfigError::HttpStatus {
            url: url.to_owned(),
            status: status.as_u16(),
        });
    }
    let too_large = ConfigError::TooLarge {
        limit: MAX_JWKS_BYTES,
    };
    if response
        .content_length()
        .is_some_and(|len| len > MAX_JWKS_BYTES as u64)
    {
        return Err(too_large);
    }
    // Content-Length may be absent or wrong, so the cap is enforced on what
    // actually arrives.
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(fetch_error)? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body)
        .map_err(|_| ConfigError::InvalidJwks("the response is not UTF-8".into()))?;
    parse_jwks(&text)
}

fn checked_url(raw: &str) -> Result<Url, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidUrl {
        url: raw.to_owned(),
        reason,
    };
    let url = Url::parse(raw).map_err(|e| invalid(e.to_string()))?;
    if !url.username().is_empty() || url.password().is_some() {
        // The URL is echoed in errors and logs; credentials must not be.
        return Err(ConfigError::InvalidUrl {
            url: "<redacted>".into(),
            reason: "it must not contain credentials".into(),
        });
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(ConfigError::InsecureUrl(raw.to_owned())),
        other => Err(invalid(format!("the scheme `{other}` is not supported"))),
    }
}

/// A redirect must meet the same bar as the configured URL, and may only go
/// to plain-http loopback when the configured URL itself was loopback: a
/// remote server must not be able to steer the fetch onto this machine.
fn follow_redirect(attempt: Attempt<'_>, origin_is_loopback: bool) -> reqwest::redirect::Action {
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error("too many redirects");
    }
    let next = attempt.url();
    let allowed = next.username().is_empty()
        && next.password().is_none()
        && match next.scheme() {
            "https" => origin_is_loopback || !is_loopback(next),
            "http" => origin_is_loopback && is_loopback(next),
            _ => false,
        };
    if allowed {
        attempt.follow()
    } else {
        attempt.error("redirect to a URL that is not allowed for a JWKS")
    }
}

fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<IpAddr>()
        .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("test URLs parse")
    }

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback(&url("http://127.0.0.1:8080/jwks")));
        assert!(is_loopback(&url("http://127.1.2.3/jwks")));
        assert!(is_loopback(&url("http://localhost/jwks")));
        assert!(is_loopback(&url("http://LOCALHOST/jwks")));
        assert!(is_loopback(&url("http://[::1]:9000/jwks")));
        assert!(is_loopback(&url("http://[::ffff:127.0.0.1]/jwks")));
        assert!(!is_loopback(&url("http://10.0.0.1/jwks")));
        assert!(!is_loopback(&url("http://169.254.169.254/latest")));
        assert!(!is_loopback(&url("http://localhost.example.com/jwks")));
        assert!(!is_loopback(&url("http://127.0.0.1.nip.io/jwks")));
    }

    #[test]
    fn url_rules() {
        assert!(
            checked_url("https://cognito-idp.eu-west-1.amazonaws.com/x/.well-known/jwks.json")
                .is_ok()
        );
        assert!(checked_url("http://127.0.0.1:1/jwks").is_ok());
        assert!(matches!(
            checked_url("http://issuer.example.com/jwks"),
            Err(ConfigError::InsecureUrl(_))
        ));
        assert!(matches!(
            checked_url("ftp://127.0.0.1/jwks"),
            Err(ConfigError::InvalidUrl { .. })
        ));
        assert!(matches!(
            checked_url("not a url"),
            Err(ConfigError::InvalidUrl { .. })
        ));
        let err = checked_url("https://user:hunter2@issuer.example.com/jwks")
            .expect_err("credentials are refused");
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn parse_skips_entries_that_are_not_jwks() {
        let set = parse_jwks(
            r#"{"keys": [
                {"kty": "RSA", "kid": 5, "n": "AQAB", "e": "AQAB"},
                {"kty": "EC", "kid": "ok", "crv": "P-256", "x": "AA", "y": "AA"}
            ]}"#,
        )
        .expect("the set parses");
        assert_eq!(set.keys.len(), 1);
        assert_eq!(set.keys[0].common.key_id.as_deref(), Some("ok"));
    }

    #[test]
    fn parse_refuses_what_is_not_a_set() {
        assert!(matches!(parse_jwks("[]"), Err(ConfigError::InvalidJwks(_))));
        assert!(matches!(parse_jwks("{}"), Err(ConfigError::InvalidJwks(_))));
        assert!(matches!(
            parse_jwks("not json"),
            Err(ConfigError::InvalidJwks(_))
        ));
        let huge = format!(r#"{{"keys": [], "pad": "{}"}}"#, "x".repeat(MAX_JWKS_BYTES));
        assert!(matches!(
            parse_jwks(&huge),
            Err(ConfigError::TooLarge { .. })
        ));
    }
}
