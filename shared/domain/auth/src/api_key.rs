//! The text of an API key and the keyed hash the platform keeps of it.
//!
//! A key is `base64url("{org}:{id}:{secret}")`: the organization and id say
//! which record to check it against (organization names and ids hold no
//! `:`), the secret is 256 random bits. The record keeps only
//! HMAC-SHA256(secret) under the organization's hashing key, which the
//! table does not hold in the clear: a copy of the table checks no guess.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
use rand::RngCore;

/// Random bytes in a key's secret, and in a hashing key.
const SECRET_BYTES: usize = 32;

/// A key's parts, as [`parse`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts {
    pub org: String,
    pub id: String,
    pub secret: String,
}

fn random() -> Vec<u8> {
    let mut bytes = vec![0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// A new hashing key for an organization's API keys (base64url text, to
/// be sealed before it is stored).
pub fn new_hashing_key() -> String {
    URL_SAFE_NO_PAD.encode(random())
}

/// A new key for record `id` of `org`: its text, and the secret in it.
pub fn new_key(org: &str, id: &str) -> (String, String) {
    let secret = URL_SAFE_NO_PAD.encode(random());
    let text = URL_SAFE_NO_PAD.encode(format!("{org}:{id}:{secret}"));
    (text, secret)
}

/// The parts of a key's text; `None` for text no key of this platform has.
pub fn parse(key: &str) -> Option<KeyParts> {
    // Padding is tolerated: some tools add it back.
    let bytes = URL_SAFE_NO_PAD
        .decode(key.trim().trim_end_matches('='))
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let mut parts = text.splitn(3, ':');
    let (org, id, secret) = (parts.next()?, parts.next()?, parts.next()?);
    if org.is_empty() || id.is_empty() || secret.is_empty() {
        return None;
    }
    Some(KeyParts {
        org: org.to_string(),
        id: id.to_string(),
        secret: secret.to_string(),
    })
}

fn hashing_bytes(hashing_key: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD
        .decode(hashing_key)
        .ok()
        .filter(|b| b.len() >= SECRET_BYTES)
}

/// HMAC-SHA256 of `secret` under `hashing_key` (base64url); `None` when the
/// hashing key is not one [`new_hashing_key`] made.
pub fn mac(hashing_key: &str, secret: &str) -> Option<String> {
    let key = EncodingKey::from_secret(&hashing_bytes(hashing_key)?).ok()?;
    jsonwebtoken::crypto::sign(secret.as_bytes(), &key, Algorithm::HS256).ok()
}

/// Whether `secret` hashes to `mac` under `hashing_key`, compared in
/// constant time.
pub fn matches(hashing_key: &str, secret: &str, mac: &str) -> bool {
    let Some(bytes) = hashing_bytes(hashing_key) else {
        return false;
    };
    let Ok(key) = DecodingKey::from_secret(&bytes) else {
        return false;
    };
    jsonwebtoken::crypto::verify(mac, secret.as_bytes(), &key, Algorithm::HS256).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_and_only_its_secret_matches() {
        let hashing = new_hashing_key();
        let (text, secret) = new_key("acme", "0123456789abcdef0123456789abcdef");
        let parts = parse(&text).expect("a key this module made parses");
        assert_eq!(parts.org, "acme");
        assert_eq!(parts.id, "0123456789abcdef0123456789abcdef");
        assert_eq!(parts.secret, secret);
        let stored = mac(&hashing, &secret).expect("a mac");
        assert!(matches(&hashing, &secret, &stored));
        assert!(!matches(&hashing, "another secret", &stored));
        assert!(!matches(&new_hashing_key(), &secret, &stored));
        assert!(!text.contains(&secret), "the secret is not visible as such");
    }

    #[test]
    fn text_no_key_has_is_refused() {
        for text in ["", "not base64 !", "YWNtZQ", "YWNtZTo6", "%%%"] {
            assert_eq!(parse(text), None, "{text}");
        }
        assert!(mac("short", "secret").is_none());
        assert!(!matches("short", "secret", "mac"));
    }
}
