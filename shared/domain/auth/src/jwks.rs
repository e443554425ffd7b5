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
    let fetcher = Fetcher::new(url)?;
    Ok(fetcher.fetch().await?.set)
}

/// What one successful download brought.
pub(crate) struct Fetched {
    pub(crate) set: JwkSet,
    /// The response's `Cache-Control: max-age`, unbounded: the cache decides
    /// how far to trust it.
    pub(crate) max_age: Option<Duration>,
}

/// A checked JWKS URL and the HTTP client that fetches it, built once so a
/// cache that refetches does not rebuild the TLS configuration each time.
pub(crate) struct Fetcher {
    url: String,
    target: Url,
    client: reqwest::Client,
}

impl Fetcher {
    pub(crate) fn new(url: &str) -> Result<Fetcher, ConfigError> {
        let target = checked_url(url)?;
        let loopback = is_loopback(&target);

        let mut builder = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            // Fetches are minutes apart; a pooled connection would mostly be
            // one the server has long closed.
            .pool_max_idle_per_host(0)
            .redirect(Policy::custom(move |attempt| {
                follow_redirect(attempt, loopback)
            }));
        if loopback {
            // A proxy from the environment would see (and could answer) a
            // request meant for this machine.
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|error| ConfigError::Fetch {
            url: url.to_owned(),
            error,
        })?;
        Ok(Fetcher {
            url: url.to_owned(),
            target,
            client,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) async fn fetch(&self) -> Result<Fetched, ConfigError> {
        let fetch_error = |error| ConfigError::Fetch {
            url: self.url.clone(),
            error,
        };
        let mut response = self
            .client
            .get(self.target.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(fetch_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(ConfigError::HttpStatus {
                url: self.url.clone(),
                status: status.as_u16(),
            });
        }
        let max_age = response
            .headers()
            .get_all(reqwest::header::CACHE_CONTROL)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(max_age);
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
        Ok(Fetched {
            set: parse_jwks(&text)?,
            max_age,
        })
    }
}

/// The freshness lifetime one `Cache-Control` header value grants, if it
/// speaks of one. `no-store` and `no-cache` grant none (zero, which the cache
/// raises to its minimum); an unparsable `max-age` is ignored rather than
/// trusted.
fn max_age(header: &str) -> Option<Duration> {
    header.split(',').map(str::trim).find_map(|directive| {
        if directive.eq_ignore_ascii_case("no-store") || directive.eq_ignore_ascii_case("no-cache")
        {
            return Some(Duration::ZERO);
        }
        let (name, value) = directive.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("max-age") {
            return None;
        }
        let value = value.trim().trim_matches('"');
        // RFC 9111 §1.2.2: a delta-seconds too large to represent means
        // "a very long time", which the cache's maximum then bounds.
        if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
            Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)))
        } else {
            None
        }
    })
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
    fn cache_control_max_age() {
        assert_eq!(max_age("max-age=300"), Some(Duration::from_secs(300)));
        assert_eq!(
            max_age("public, MAX-AGE = 60 , must-revalidate"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(max_age("max-age=\"30\""), Some(Duration::from_secs(30)));
        assert_eq!(max_age("no-cache"), Some(Duration::ZERO));
        assert_eq!(max_age("private, no-store"), Some(Duration::ZERO));
        assert_eq!(
            max_age("max-age=99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=-1"), None);
        assert_eq!(max_age("max-age=1h"), None);
        assert_eq!(max_age("max-age="), None);
        assert_eq!(max_age("s-maxage=10"), None);
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
