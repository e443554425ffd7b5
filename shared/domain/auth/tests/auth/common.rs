use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use floe_auth::{KeySource, Verifier, VerifierConfig};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

pub const ISSUER: &str = "https://issuer.test";
pub const AUDIENCE: &str = "floe-api";
pub const SECRET: &[u8] = b"test-only-hs256-secret-0123456789abcdef";

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn read_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("fixture is readable")
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Claims every verifier in these tests accepts; tests edit them to break
/// one rule at a time.
pub fn good_claims() -> Value {
    json!({
        "sub": "alice",
        "org": "acme",
        "roles": ["deployment_manager"],
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now(),
        "exp": now() + 600,
    })
}

pub fn hs256_verifier() -> Verifier {
    Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Hs256Secret(SECRET.to_vec()),
        leeway_secs: 0,
    })
    .expect("HS256 verifier builds")
}

pub fn fixture_jwks() -> floe_auth::JwkSet {
    floe_auth::load_jwks_file(&fixture("test-only-jwks.json")).expect("fixture JWKS loads")
}

pub fn jwks_verifier_for(set: floe_auth::JwkSet) -> Verifier {
    Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Jwks(set),
        leeway_secs: 0,
    })
    .expect("JWKS verifier builds")
}

pub fn jwks_verifier() -> Verifier {
    jwks_verifier_for(fixture_jwks())
}

pub fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).expect("test token signs")
}

pub fn hs256(claims: &Value) -> String {
    sign(Algorithm::HS256, None, &hmac_key(SECRET), claims)
}

pub fn rsa_key() -> EncodingKey {
    EncodingKey::from_rsa_pem(&read_fixture("test-only-rsa-private.pem")).expect("RSA PEM loads")
}

pub fn ec_key() -> EncodingKey {
    EncodingKey::from_ec_pem(&read_fixture("test-only-ec-private.pem")).expect("EC PEM loads")
}

pub fn rs256(kid: Option<&str>, claims: &Value) -> String {
    sign(Algorithm::RS256, kid, &rsa_key(), claims)
}

pub fn es256(kid: Option<&str>, claims: &Value) -> String {
    sign(Algorithm::ES256, kid, &ec_key(), claims)
}

/// `base64url({"alg":"none","typ":"JWT"}).base64url(claims).` — what an
/// attacker sends to a verifier that trusts the header's `alg`.
pub fn alg_none(claims: &Value) -> String {
    format!(
        "{}.{}.",
        b64url(br#"{"alg":"none","typ":"JWT"}"#),
        b64url(claims.to_string().as_bytes())
    )
}

/// Replaces the payload and keeps the original header and signature.
pub fn with_payload(token: &str, claims: &Value) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    format!(
        "{}.{}.{}",
        parts[0],
        b64url(claims.to_string().as_bytes()),
        parts[2]
    )
}

pub fn hmac_key(secret: &[u8]) -> EncodingKey {
    EncodingKey::from_secret(secret).expect("non-empty HMAC key")
}
