use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::fmt;
use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::accepted::{Accepted, Window, unix_now};
use crate::error::{AuthError, ConfigError};
use crate::remote::{JwksCache, KeySet, Miss};
use crate::role::{Principal, Role};

/// HS256 is only as strong as its key: RFC 7518 §3.2 asks for at least the
/// hash size.
pub const MIN_SECRET_LEN: usize = 32;

/// More skew than this is a broken clock, not drift; it also keeps the
/// `now - leeway` arithmetic inside jsonwebtoken far from underflow.
const MAX_LEEWAY_SECS: u64 = 300;

/// Real tokens are a few KiB at most; a cap stops a huge header from costing
/// base64 and JSON work before anything is verified.
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// OIDC subjects are at most 255 ASCII characters; the subject also ends up
/// in logs and audit records.
const MAX_SUBJECT_LEN: usize = 255;

const MAX_ORG_LEN: usize = 64;

/// aws-lc refuses smaller RSA keys for RS256 anyway; checking at load time
/// turns a per-request failure into a clear start-up message.
const MIN_RSA_MODULUS_BYTES: usize = 256;

/// Where verification keys come from.
pub enum KeySource {
    /// Local mode: a shared secret; only HS256 tokens are accepted.
    Hs256Secret(Vec<u8>),
    /// A fixed set of the issuer's public keys (a file); only RS256 and
    /// ES256 are accepted.
    Jwks(JwkSet),
    /// Production: the issuer's public keys as its JWKS URL serves them now,
    /// refetched as they expire or rotate; only RS256 and ES256 are accepted.
    Remote(JwksCache),
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Hs256Secret(_) => f.write_str("Hs256Secret([redacted])"),
            KeySource::Jwks(set) => {
                let kids: Vec<&str> = set
                    .keys
                    .iter()
                    .map(|jwk| jwk.common.key_id.as_deref().unwrap_or("<no kid>"))
                    .collect();
                f.debug_tuple("Jwks").field(&kids).finish()
            }
            KeySource::Remote(cache) => f.debug_tuple("Remote").field(cache).finish(),
        }
    }
}

#[derive(Debug)]
pub struct VerifierConfig {
    pub issuer: String,
    pub audience: String,
    pub keys: KeySource,
    /// Clock skew tolerated on `exp` and `nbf`, at most 300 seconds.
    pub leeway_secs: u64,
}

/// Checks bearer tokens. Build it once at start-up. `verify` does no I/O
/// except with a [`KeySource::Remote`], and there only when the cached set
/// has expired or lacks the token's key.
pub struct Verifier {
    issuer: String,
    audience: String,
    leeway_secs: u64,
    keys: Keys,
    /// The checks of each algorithm the keys allow, built once: they are
    /// the same for every token, and building them is a few allocations
    /// that every request would pay for.
    validations: Vec<(Algorithm, Validation)>,
    /// Tokens accepted lately, each valid for as long as its own claims
    /// and its keys say (see `accepted.rs`).
    accepted: Accepted,
}

enum Keys {
    Hmac(DecodingKey),
    Public(Vec<PublicKey>),
    Remote(JwksCache),
}

pub(crate) struct PublicKey {
    pub(crate) kid: Option<String>,
    /// The one algorithm this key may verify, fixed by its type: RSA keys
    /// verify RS256 only and EC P-256 keys ES256 only.
    alg: Algorithm,
    key: DecodingKey,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Verifier");
        s.field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("leeway_secs", &self.leeway_secs);
        match &self.keys {
            Keys::Hmac(_) => s.field("keys", &"Hs256Secret([redacted])"),
            Keys::Public(keys) => {
                let kids: Vec<String> = keys
                    .iter()
                    .map(|k| format!("{} ({:?})", k.kid.as_deref().unwrap_or("<no kid>"), k.alg))
                    .collect();
                s.field("keys", &kids)
            }
            Keys::Remote(cache) => s.field("keys", cache),
        };
        s.finish()
    }
}

impl Verifier {
    pub fn new(config: VerifierConfig) -> Result<Verifier, ConfigError> {
        if config.issuer.trim().is_empty() {
            return Err(ConfigError::MissingSetting("issuer"));
        }
        if config.audience.trim().is_empty() {
            return Err(ConfigError::MissingSetting("audience"));
        }
        if config.leeway_secs > MAX_LEEWAY_SECS {
            return Err(ConfigError::LeewayTooLarge {
                got: config.leeway_secs,
                max: MAX_LEEWAY_SECS,
            });
        }
        let keys = match config.keys {
            KeySource::Hs256Secret(secret) => {
                let too_short = ConfigError::SecretTooShort {
                    len: secret.len(),
                    min: MIN_SECRET_LEN,
                };
                if secret.len() < MIN_SECRET_LEN {
                    return Err(too_short);
                }
                Keys::Hmac(DecodingKey::from_secret(&secret).map_err(|_| too_short)?)
            }
            KeySource::Jwks(set) => {
                let usable = usable_keys(&set);
                if usable.is_empty() {
                    return Err(ConfigError::NoUsableKeys);
                }
                Keys::Public(usable)
            }
            // The cache refuses a set without a usable key when it fetches.
            KeySource::Remote(cache) => Keys::Remote(cache),
        };
        let algorithms: &[Algorithm] = match &keys {
            Keys::Hmac(_) => &[Algorithm::HS256],
            Keys::Public(_) | Keys::Remote(_) => &[Algorithm::RS256, Algorithm::ES256],
        };
        let validations = algorithms
            .iter()
            .map(|alg| {
                (
                    *alg,
                    validation(*alg, &config.issuer, &config.audience, config.leeway_secs),
                )
            })
            .collect();
        Ok(Verifier {
            issuer: config.issuer,
            audience: config.audience,
            leeway_secs: config.leeway_secs,
            keys,
            validations,
            accepted: Accepted::default(),
        })
    }

    /// Verifies `token` (the bearer value, without the `Bearer ` prefix) and
    /// returns who it speaks for.
    pub async fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::Malformed);
        }
        let now = unix_now();
        // Keys fetched from a URL may change; a token is taken from the
        // cache only while the set it was checked against is current.
        let fetched = match &self.keys {
            Keys::Remote(cache) => Some(cache.keys().await),
            Keys::Hmac(_) | Keys::Public(_) => None,
        };
        if let Some(principal) = self.accepted.get(token, now, fetched.as_ref()) {
            return Ok(principal);
        }
        let (principal, window) = self.verify_fully(token, fetched.as_ref()).await?;
        // A token verified against a set fetched since is not kept: the
        // entry would be tied to the older set.
        let checked_against = match (&self.keys, fetched) {
            (Keys::Remote(cache), Some(before)) => {
                let now_current = cache.keys().await;
                if !Arc::ptr_eq(&before, &now_current) {
                    return Ok(principal);
                }
                Some(before)
            }
            _ => None,
        };
        self.accepted
            .put(token, &principal, window, checked_against);
        Ok(principal)
    }

    /// Every check of [`Verifier::verify`], with no cache; also returns the
    /// window in which the token stays valid. `fetched` is the current set
    /// of keys fetched from a URL.
    async fn verify_fully(
        &self,
        token: &str,
        fetched: Option<&Arc<KeySet>>,
    ) -> Result<(Principal, Window), AuthError> {
        let header = read_header(token)?;

        // The token's `alg` may only pick among what our key material allows,
        // and the chosen key must be of that algorithm's type: that is what
        // shuts out `none` and HS256 keyed with a public key.
        match (&self.keys, fetched) {
            (Keys::Hmac(key), _) => {
                if header.alg != "HS256" {
                    return Err(unsupported(&header.alg));
                }
                self.decode(token, Algorithm::HS256, key)
            }
            (Keys::Public(keys), _) => {
                let alg = public_alg(&header.alg)?;
                self.decode(token, alg, select_key(keys, header.kid.as_deref(), alg)?)
            }
            (Keys::Remote(cache), fetched) => {
                let alg = public_alg(&header.alg)?;
                let kid = header.kid.as_deref();
                let set = match fetched {
                    Some(set) => Arc::clone(set),
                    None => cache.keys().await,
                };
                match select_key(&set.keys, kid, alg) {
                    Ok(key) => self.decode(token, alg, key),
                    // A kid the cache does not hold may be a key the provider
                    // rotated in since the last fetch. Without a kid there is
                    // nothing a fetch could find.
                    Err(AuthError::UnknownKey) if kid.is_some() => {
                        self.verify_after_miss(token, alg, kid, cache, &set).await
                    }
                    Err(other) => Err(other),
                }
            }
        }
    }

    async fn verify_after_miss(
        &self,
        token: &str,
        alg: Algorithm,
        kid: Option<&str>,
        cache: &JwksCache,
        seen: &KeySet,
    ) -> Result<(Principal, Window), AuthError> {
        let set: Arc<KeySet> = cache
            .keys_after_miss(seen)
            .await
            .map_err(|miss| match miss {
                Miss::NotPublished => AuthError::UnknownKey,
                Miss::ProviderUnavailable => AuthError::KeysUnavailable,
            })?;
        self.decode(token, alg, select_key(&set.keys, kid, alg)?)
    }

    fn decode(
        &self,
        token: &str,
        alg: Algorithm,
        key: &DecodingKey,
    ) -> Result<(Principal, Window), AuthError> {
        // `alg` was chosen among the keys' algorithms, so it has checks;
        // if it ever had none, the token is refused, never let through.
        let Some((_, validation)) = self.validations.iter().find(|(a, _)| *a == alg) else {
            return Err(unsupported(&format!("{alg:?}")));
        };
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, validation)
            .map_err(|e| map_jwt_error(e.kind()))?;
        let principal = principal_from_claims(&data.claims)?;
        Ok((principal, self.window(&data.claims)))
    }

    /// Where a token that passed every check stays valid: from `nbf` (or
    /// always) to `exp`, widened by the leeway as jsonwebtoken's checks
    /// widen it. A claim that is not a whole number of seconds gives an
    /// empty window: such a token is checked in full every time.
    fn window(&self, claims: &Map<String, Value>) -> Window {
        let empty = Window {
            not_before: u64::MAX,
            until: 0,
        };
        let Some(exp) = claims.get("exp").and_then(Value::as_u64) else {
            return empty;
        };
        let not_before = match claims.get("nbf") {
            None => 0,
            Some(nbf) => match nbf.as_u64() {
                Some(n) => n.saturating_sub(self.leeway_secs),
                None => return empty,
            },
        };
        Window {
            not_before,
            until: exp.saturating_add(self.leeway_secs),
        }
    }
}

/// What every token verified with `alg` must pass: signature, `exp` and
/// `nbf` (with `leeway_secs` of skew), and `exp`, `iss` and `aud` present
/// and equal to ours.
fn validation(alg: Algorithm, issuer: &str, audience: &str, leeway_secs: u64) -> Validation {
    let mut validation = Validation::new(alg);
    validation.leeway = leeway_secs;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[audience]);
    validation
}

fn public_alg(alg: &str) -> Result<Algorithm, AuthError> {
    match alg {
        "RS256" => Ok(Algorithm::RS256),
        "ES256" => Ok(Algorithm::ES256),
        other => Err(unsupported(other)),
    }
}

#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

fn read_header(token: &str) -> Result<RawHeader, AuthError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed);
    };
    // Unpadded base64url, the only encoding RFC 7515 allows in a compact
    // JWS; the engine refuses non-zero trailing bits, so a header has one
    // spelling. Read only to choose a key: jsonwebtoken decodes it again.
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| AuthError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| AuthError::Malformed)
}

/// The `alg` goes back to the client in the error text, so anything that
/// does not look like an algorithm name is not echoed.
fn unsupported(alg: &str) -> AuthError {
    let shown = if alg.eq_ignore_ascii_case("none") {
        "none".to_owned()
    } else if !alg.is_empty()
        && alg.len() <= 16
        && alg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+'))
    {
        alg.to_owned()
    } else {
        "unrecognised".to_owned()
    };
    AuthError::UnsupportedAlgorithm(shown)
}

fn select_key<'k>(
    keys: &'k [PublicKey],
    kid: Option<&str>,
    alg: Algorithm,
) -> Result<&'k DecodingKey, AuthError> {
    let matches_kid = |k: &&PublicKey| match kid {
        Some(kid) => k.kid.as_deref() == Some(kid),
        // Without a kid there is nothing to choose by, so it only works when
        // there is nothing to choose from.
        None => keys.len() == 1,
    };
    let mut candidates = keys.iter().filter(matches_kid).peekable();
    if candidates.peek().is_none() {
        return Err(AuthError::UnknownKey);
    }
    candidates
        .find(|k| k.alg == alg)
        .map(|k| &k.key)
        .ok_or_else(|| unsupported(&format!("{alg:?}")))
}

/// The set's verification keys, in its order.
pub(crate) fn usable_keys(set: &JwkSet) -> Vec<PublicKey> {
    set.keys.iter().filter_map(usable_key).collect()
}

/// Turns one JWKS entry into a verification key, or says (in the log) why it
/// is skipped. Skipping rather than failing keeps a provider's unrelated
/// keys (encryption keys, other curves) from breaking start-up.
fn usable_key(jwk: &Jwk) -> Option<PublicKey> {
    let kid = jwk.common.key_id.clone();
    let skip = |reason: &str| {
        tracing::warn!(
            kid = kid.as_deref().unwrap_or("<none>"),
            reason,
            "ignoring JWKS key"
        );
    };

    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        skip("its `use` is not `sig`");
        return None;
    }
    if let Some(ops) = &jwk.common.key_operations
        && !ops.contains(&KeyOperations::Verify)
    {
        skip("its `key_ops` do not include `verify`");
        return None;
    }

    let declared = jwk.common.key_algorithm;
    let (alg, key) = match &jwk.algorithm {
        AlgorithmParameters::RSA(params) => {
            if declared.is_some_and(|a| a != KeyAlgorithm::RS256) {
                skip("it is declared for an algorithm other than RS256");
                return None;
            }
            let Ok(key) = DecodingKey::from_rsa_components(&params.n, &params.e) else {
                skip("its `n` or `e` is not base64url");
                return None;
            };
            if let DecodingKeyKind::RsaModulusExponent { n, .. } = key.kind() {
                let significant = n.iter().skip_while(|b| **b == 0).count();
                if significant < MIN_RSA_MODULUS_BYTES {
                    skip("its RSA modulus is shorter than 2048 bits");
                    return None;
                }
            }
            (Algorithm::RS256, key)
        }
        AlgorithmParameters::EllipticCurve(params) => {
            if params.curve != EllipticCurve::P256 {
                skip("its curve is not P-256");
                return None;
            }
            if declared.is_some_and(|a| a != KeyAlgorithm::ES256) {
                skip("it is declared for an algorithm other than ES256");
                return None;
            }
            let Ok(key) = DecodingKey::from_ec_components(&params.x, &params.y) else {
                skip("its `x` or `y` is not base64url");
                return None;
            };
            // An uncompressed P-256 point: 0x04, then 32 bytes each of x and y.
            if key.try_get_as_bytes().map(<[u8]>::len).ok() != Some(65) {
                skip("its `x` or `y` is not 32 bytes long");
                return None;
            }
            (Algorithm::ES256, key)
        }
        _ => {
            skip("only RSA and EC P-256 keys are used");
            return None;
        }
    };
    Some(PublicKey { kid, alg, key })
}

fn map_jwt_error(kind: &ErrorKind) -> AuthError {
    match kind {
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidKeyFormat => AuthError::BadSignature,
        ErrorKind::ExpiredSignature => AuthError::Expired,
        ErrorKind::ImmatureSignature => AuthError::NotYetValid,
        ErrorKind::InvalidIssuer => AuthError::WrongIssuer,
        ErrorKind::InvalidAudience => AuthError::WrongAudience,
        ErrorKind::MissingRequiredClaim(claim) => {
            AuthError::InvalidClaims(format!("`{}` is missing", registered_claim(claim)))
        }
        ErrorKind::InvalidClaimFormat(claim) => {
            AuthError::InvalidClaims(format!("`{}` has the wrong type", registered_claim(claim)))
        }
        _ => AuthError::Malformed,
    }
}

/// jsonwebtoken names only registered claims here, but the name reaches the
/// client, so it is checked against the list rather than trusted.
fn registered_claim(name: &str) -> &'static str {
    ["exp", "nbf", "iat", "iss", "aud", "sub"]
        .into_iter()
        .find(|c| *c == name)
        .unwrap_or("a registered claim")
}

fn principal_from_claims(claims: &Map<String, Value>) -> Result<Principal, AuthError> {
    // jsonwebtoken also accepts an array `iss`; RFC 7519 says it is a string.
    let Some(Value::String(issuer)) = claims.get("iss") else {
        return Err(AuthError::InvalidClaims("`iss` must be a string".into()));
    };

    let subject = match claims.get("sub") {
        None => return Err(AuthError::InvalidClaims("`sub` is missing".into())),
        Some(Value::String(s)) if check_subject(s).is_ok() => s.clone(),
        Some(_) => {
            return Err(AuthError::InvalidClaims(format!("`sub` {}", SUBJECT_RULE)));
        }
    };

    let org = match claims.get("org") {
        None => return Err(AuthError::InvalidClaims("`org` is missing".into())),
        Some(Value::String(s)) if check_org(s).is_ok() => s.clone(),
        Some(_) => return Err(AuthError::InvalidClaims(format!("`org` {}", ORG_RULE))),
    };

    let raw_roles = match claims.get("roles") {
        None => return Err(AuthError::InvalidClaims("`roles` is missing".into())),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(AuthError::InvalidClaims(
                "`roles` must be an array of strings".into(),
            ));
        }
    };
    let mut roles = Vec::with_capacity(raw_roles.len().min(Role::ALL.len()));
    for item in raw_roles {
        let Value::String(name) = item else {
            return Err(AuthError::InvalidClaims(
                "`roles` must be an array of strings".into(),
            ));
        };
        // Identity providers put other applications' roles in the same
        // claim; those are none of our business.
        if let Some(role) = Role::parse(name)
            && !roles.contains(&role)
        {
            roles.push(role);
        }
    }
    if roles.is_empty() {
        return Err(AuthError::NoRole);
    }

    Ok(Principal {
        issuer: issuer.clone(),
        subject,
        org,
        roles,
    })
}

pub(crate) const SUBJECT_RULE: &str =
    "must be a non-empty string of at most 255 bytes without control characters";
pub(crate) const ORG_RULE: &str =
    "must be 1 to 64 characters of lower-case letters, digits, '-' and '_'";

/// The subject is logged and stored in audit records, so control characters
/// (newlines forging log lines) are refused along with empty values.
pub(crate) fn check_subject(subject: &str) -> Result<(), &'static str> {
    if subject.is_empty()
        || subject.len() > MAX_SUBJECT_LEN
        || subject.chars().any(char::is_control)
    {
        return Err(SUBJECT_RULE);
    }
    Ok(())
}

/// The same rule as `floe_domain::names::validate_org`: the org id is part of
/// storage keys, so it must never carry a separator or a path segment.
pub(crate) fn check_org(org: &str) -> Result<(), &'static str> {
    if org.is_empty()
        || org.len() > MAX_ORG_LEN
        || !org
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err(ORG_RULE);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_algorithm_names_are_sanitised() {
        assert_eq!(
            unsupported("none"),
            AuthError::UnsupportedAlgorithm("none".into())
        );
        assert_eq!(
            unsupported("nOnE"),
            AuthError::UnsupportedAlgorithm("none".into())
        );
        assert_eq!(
            unsupported("HS512"),
            AuthError::UnsupportedAlgorithm("HS512".into())
        );
        assert_eq!(
            unsupported("<script>alert(1)</script>"),
            AuthError::UnsupportedAlgorithm("unrecognised".into())
        );
        assert_eq!(
            unsupported(""),
            AuthError::UnsupportedAlgorithm("unrecognised".into())
        );
    }

    #[test]
    fn org_rule() {
        assert!(check_org("acme").is_ok());
        assert!(check_org("team_a-1").is_ok());
        assert!(check_org(&"a".repeat(64)).is_ok());
        assert!(check_org(&"a".repeat(65)).is_err());
        assert!(check_org("").is_err());
        assert!(check_org("Acme").is_err());
        assert!(check_org("a/b").is_err());
        assert!(check_org("a#b").is_err());
        assert!(check_org("a b").is_err());
    }

    #[test]
    fn subject_rule() {
        assert!(check_subject("alice@example.com").is_ok());
        assert!(check_subject("").is_err());
        assert!(check_subject("alice\nINFO forged").is_err());
        assert!(check_subject(&"x".repeat(256)).is_err());
    }

    #[test]
    fn header_must_have_three_parts_and_decode() {
        assert_eq!(read_header("").err(), Some(AuthError::Malformed));
        assert_eq!(read_header("a.b").err(), Some(AuthError::Malformed));
        assert_eq!(read_header("a.b.c.d").err(), Some(AuthError::Malformed));
        // `{"alg":1}`: alg must be a string.
        assert_eq!(
            read_header("eyJhbGciOjF9.e30.x").err(),
            Some(AuthError::Malformed)
        );
        // `{"alg":"RS256","kid":"k"}`
        let header =
            read_header("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.e30.x").expect("a valid header parses");
        assert_eq!(header.alg, "RS256");
        assert_eq!(header.kid.as_deref(), Some("k"));
    }
}
