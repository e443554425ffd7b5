use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use floe_auth::{AuthError, ConfigError, JwkSet, KeySource, Role, Verifier, VerifierConfig};
use jsonwebtoken::Algorithm;
use jsonwebtoken::jwk::AlgorithmParameters;
use serde_json::json;

use crate::common::*;

fn set_of(json: serde_json::Value) -> JwkSet {
    floe_auth::parse_jwks(&json.to_string()).expect("test JWKS parses")
}

fn only(kid: &str) -> JwkSet {
    let mut set = fixture_jwks();
    set.keys.retain(|k| k.common.key_id.as_deref() == Some(kid));
    assert_eq!(set.keys.len(), 1);
    set
}

fn rsa_modulus() -> String {
    let set = only("test-rsa");
    match &set.keys[0].algorithm {
        AlgorithmParameters::RSA(params) => params.n.clone(),
        other => panic!("test-rsa is not an RSA key: {other:?}"),
    }
}

#[tokio::test]
async fn rs256_with_kid_verifies() {
    let principal = jwks_verifier()
        .verify(&rs256(Some("test-rsa"), &good_claims()))
        .await
        .expect("RS256 token verifies");
    assert_eq!(principal.subject, "alice");
    assert_eq!(principal.org, "acme");
    assert_eq!(principal.roles, vec![Role::DeploymentManager]);
}

#[tokio::test]
async fn es256_with_kid_verifies() {
    let principal = jwks_verifier()
        .verify(&es256(Some("test-ec"), &good_claims()))
        .await
        .expect("ES256 token verifies");
    assert_eq!(principal.org, "acme");
}

#[tokio::test]
async fn unknown_kid_is_refused() {
    let token = rs256(Some("rotated-away"), &good_claims());
    assert_eq!(
        jwks_verifier().verify(&token).await,
        Err(AuthError::UnknownKey)
    );
}

#[tokio::test]
async fn missing_kid_needs_a_single_key_set() {
    let token = rs256(None, &good_claims());
    assert_eq!(
        jwks_verifier().verify(&token).await,
        Err(AuthError::UnknownKey)
    );
    let single = jwks_verifier_for(only("test-rsa"));
    assert!(single.verify(&token).await.is_ok());
    // The single key must still be of the token's type.
    let single_ec = jwks_verifier_for(only("test-ec"));
    assert_eq!(
        single_ec.verify(&token).await,
        Err(AuthError::UnsupportedAlgorithm("RS256".into()))
    );
}

#[tokio::test]
async fn key_type_must_match_the_algorithm() {
    // An RS256 header pointing at the EC key, and the other way round.
    let rs_on_ec = rs256(Some("test-ec"), &good_claims());
    assert_eq!(
        jwks_verifier().verify(&rs_on_ec).await,
        Err(AuthError::UnsupportedAlgorithm("RS256".into()))
    );
    let es_on_rsa = es256(Some("test-rsa"), &good_claims());
    assert_eq!(
        jwks_verifier().verify(&es_on_rsa).await,
        Err(AuthError::UnsupportedAlgorithm("ES256".into()))
    );
}

#[tokio::test]
async fn tampered_payload_is_refused() {
    for token in [
        rs256(Some("test-rsa"), &good_claims()),
        es256(Some("test-ec"), &good_claims()),
    ] {
        let mut forged_claims = good_claims();
        forged_claims["org"] = json!("victim");
        let forged = with_payload(&token, &forged_claims);
        assert_eq!(
            jwks_verifier().verify(&forged).await,
            Err(AuthError::BadSignature)
        );
    }
}

#[tokio::test]
async fn expired_and_wrong_audience_apply_in_jwks_mode() {
    let mut expired = good_claims();
    expired["exp"] = json!(now() - 30);
    assert_eq!(
        jwks_verifier()
            .verify(&es256(Some("test-ec"), &expired))
            .await,
        Err(AuthError::Expired)
    );
    let mut wrong_aud = good_claims();
    wrong_aud["aud"] = json!("someone-else");
    assert_eq!(
        jwks_verifier()
            .verify(&rs256(Some("test-rsa"), &wrong_aud))
            .await,
        Err(AuthError::WrongAudience)
    );
    let mut wrong_iss = good_claims();
    wrong_iss["iss"] = json!("https://evil.test");
    assert_eq!(
        jwks_verifier()
            .verify(&rs256(Some("test-rsa"), &wrong_iss))
            .await,
        Err(AuthError::WrongIssuer)
    );
}

#[tokio::test]
async fn alg_none_is_refused() {
    assert_eq!(
        jwks_verifier().verify(&alg_none(&good_claims())).await,
        Err(AuthError::UnsupportedAlgorithm("none".into()))
    );
}

/// The classic confusion attack: the RSA public key is public, so an
/// attacker HMACs a token with it and hopes the verifier feeds the same
/// bytes to HS256. Every form of the public key is tried.
#[tokio::test]
async fn hs256_signed_with_the_rsa_public_key_is_refused() {
    let pem = read_fixture("test-only-rsa-public.pem");
    let pem_text = String::from_utf8(pem.clone()).expect("PEM is text");
    let der_b64: String = pem_text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = STANDARD.decode(der_b64).expect("PEM body is base64");
    let n = rsa_modulus();
    let n_bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&n)
        .expect("n is base64url");

    let verifier = jwks_verifier();
    for secret in [pem, der, n.into_bytes(), n_bytes] {
        for kid in [Some("test-rsa"), None] {
            let token = sign(Algorithm::HS256, kid, &hmac_key(&secret), &good_claims());
            assert_eq!(
                verifier.verify(&token).await,
                Err(AuthError::UnsupportedAlgorithm("HS256".into()))
            );
        }
    }
}

#[tokio::test]
async fn symmetric_keys_in_a_jwks_are_never_used() {
    let secret = b"test-only-oct-key-0123456789abcdef";
    let mut set = fixture_jwks();
    set.keys.extend(
        set_of(json!({"keys": [{"kty": "oct", "kid": "test-oct", "k": b64url(secret)}]})).keys,
    );
    let verifier = jwks_verifier_for(set);
    let token = sign(
        Algorithm::HS256,
        Some("test-oct"),
        &hmac_key(secret),
        &good_claims(),
    );
    assert_eq!(
        verifier.verify(&token).await,
        Err(AuthError::UnsupportedAlgorithm("HS256".into()))
    );

    let oct_only =
        set_of(json!({"keys": [{"kty": "oct", "kid": "test-oct", "k": b64url(secret)}]}));
    assert!(matches!(
        Verifier::new(VerifierConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            keys: KeySource::Jwks(oct_only),
            leeway_secs: 0,
        }),
        Err(ConfigError::NoUsableKeys)
    ));
}

#[tokio::test]
async fn other_rsa_and_ec_algorithms_are_refused() {
    let verifier = jwks_verifier();
    for (alg, name) in [
        (Algorithm::RS384, "RS384"),
        (Algorithm::RS512, "RS512"),
        (Algorithm::PS256, "PS256"),
    ] {
        let token = sign(alg, Some("test-rsa"), &rsa_key(), &good_claims());
        assert_eq!(
            verifier.verify(&token).await,
            Err(AuthError::UnsupportedAlgorithm(name.into()))
        );
    }
}

#[tokio::test]
async fn unusable_keys_are_skipped() {
    let rsa = only("test-rsa").keys.remove(0);
    let n = rsa_modulus();
    let with = |edit: serde_json::Value| {
        let mut value = serde_json::to_value(&rsa).expect("JWK serialises");
        if let (Some(target), Some(fields)) = (value.as_object_mut(), edit.as_object()) {
            for (k, v) in fields {
                target.insert(k.clone(), v.clone());
            }
        }
        value
    };
    let no_usable = [
        // Declared for another algorithm.
        with(json!({"alg": "RS512"})),
        // An encryption key.
        with(json!({"use": "enc"})),
        // Allowed only to encrypt.
        with(json!({"key_ops": ["encrypt"]})),
        // A 1032-bit modulus.
        with(json!({"n": &n[..172]})),
        // Not P-256.
        json!({"kty": "EC", "kid": "p384", "crv": "P-384",
               "x": b64url(&[1; 48]), "y": b64url(&[2; 48])}),
        // P-256 named, but coordinates of the wrong size.
        json!({"kty": "EC", "kid": "short", "crv": "P-256",
               "x": b64url(&[1; 31]), "y": b64url(&[2; 32])}),
        // Ed25519.
        json!({"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": b64url(&[3; 32])}),
    ];
    for entry in no_usable {
        let set = set_of(json!({ "keys": [entry.clone()] }));
        let result = Verifier::new(VerifierConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            keys: KeySource::Jwks(set),
            leeway_secs: 0,
        });
        assert!(
            matches!(result, Err(ConfigError::NoUsableKeys)),
            "{entry} should be unusable"
        );
    }
    // A declared RS256 with `use: sig` and `key_ops: [verify]` is fine.
    let set = set_of(
        json!({"keys": [with(json!({"alg": "RS256", "use": "sig", "key_ops": ["verify"]}))]}),
    );
    assert!(
        jwks_verifier_for(set)
            .verify(&rs256(Some("test-rsa"), &good_claims()))
            .await
            .is_ok()
    );
}

#[test]
fn empty_set_is_a_config_error() {
    let result = Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Jwks(JwkSet { keys: vec![] }),
        leeway_secs: 0,
    });
    assert!(matches!(result, Err(ConfigError::NoUsableKeys)));
}

#[test]
fn load_jwks_file_reports_missing_files() {
    let missing = fixture("does-not-exist.json");
    assert!(matches!(
        floe_auth::load_jwks_file(&missing),
        Err(ConfigError::Io { .. })
    ));
    assert_eq!(fixture_jwks().keys.len(), 2);
}

#[test]
fn debug_lists_kids() {
    let text = format!("{:?}", jwks_verifier());
    assert!(text.contains("test-rsa"), "{text}");
    assert!(text.contains("test-ec"), "{text}");
    let source = format!("{:?}", KeySource::Jwks(fixture_jwks()));
    assert!(source.contains("test-rsa"), "{source}");
}
