use std::time::Duration;

use floe_auth::{
    AuthError, ConfigError, KeySource, Principal, Role, Verifier, VerifierConfig, issue_hs256,
};
use jsonwebtoken::Algorithm;
use serde_json::{Value, json};

use crate::common::*;

fn claims_with(edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let mut claims = good_claims();
    if let Value::Object(map) = &mut claims {
        edit(map);
    }
    claims
}

async fn verify_claims(claims: &Value) -> Result<Principal, AuthError> {
    hs256_verifier().verify(&hs256(claims)).await
}

#[tokio::test]
async fn issued_token_round_trips() {
    let token = issue_hs256(
        SECRET,
        ISSUER,
        AUDIENCE,
        "alice@example.com",
        "acme",
        &[Role::PlatformViewer, Role::DeploymentManager],
        Duration::from_secs(300),
    )
    .expect("issuing works");
    let principal = hs256_verifier()
        .verify(&token)
        .await
        .expect("own token verifies");
    assert_eq!(
        principal,
        Principal {
            issuer: ISSUER.into(),
            subject: "alice@example.com".into(),
            org: "acme".into(),
            roles: vec![Role::PlatformViewer, Role::DeploymentManager],
        }
    );
    assert!(principal.is_platform());
    assert!(principal.can_read());
    assert!(principal.can_manage_deployments());
    assert!(!principal.can_manage_platform());
}

#[tokio::test]
async fn other_secret_is_a_bad_signature() {
    let token = sign(
        Algorithm::HS256,
        None,
        &hmac_key(b"another-test-only-secret-0123456789abcdef"),
        &good_claims(),
    );
    assert_eq!(
        hs256_verifier().verify(&token).await,
        Err(AuthError::BadSignature)
    );
}

#[tokio::test]
async fn tampered_payload_is_refused() {
    let token = hs256(&good_claims());
    let forged = with_payload(
        &token,
        &claims_with(|c| {
            c.insert("org".into(), json!("victim"));
            c.insert("roles".into(), json!(["platform_admin"]));
        }),
    );
    assert_eq!(
        hs256_verifier().verify(&forged).await,
        Err(AuthError::BadSignature)
    );
}

#[tokio::test]
async fn tampered_signature_is_refused() {
    let token = hs256(&good_claims());
    let (rest, signature) = token.rsplit_once('.').expect("three parts");
    let flipped = if signature.starts_with('A') { "B" } else { "A" };
    let forged = format!("{rest}.{flipped}{}", &signature[1..]);
    assert_eq!(
        hs256_verifier().verify(&forged).await,
        Err(AuthError::BadSignature)
    );
    assert_eq!(
        hs256_verifier().verify(&format!("{rest}.")).await,
        Err(AuthError::BadSignature)
    );
}

#[tokio::test]
async fn rs256_token_is_refused_in_hs256_mode() {
    let token = rs256(Some("test-rsa"), &good_claims());
    assert_eq!(
        hs256_verifier().verify(&token).await,
        Err(AuthError::UnsupportedAlgorithm("RS256".into()))
    );
}

#[tokio::test]
async fn other_hmac_algorithms_are_refused() {
    for (alg, name) in [(Algorithm::HS384, "HS384"), (Algorithm::HS512, "HS512")] {
        let token = sign(alg, None, &hmac_key(SECRET), &good_claims());
        assert_eq!(
            hs256_verifier().verify(&token).await,
            Err(AuthError::UnsupportedAlgorithm(name.into()))
        );
    }
}

#[tokio::test]
async fn alg_none_is_refused() {
    let token = alg_none(&good_claims());
    assert_eq!(
        hs256_verifier().verify(&token).await,
        Err(AuthError::UnsupportedAlgorithm("none".into()))
    );
    // Some libraries compare case-sensitively; this one must not care.
    let shouted = format!(
        "{}.{}.",
        b64url(br#"{"alg":"NONE"}"#),
        b64url(good_claims().to_string().as_bytes())
    );
    assert_eq!(
        hs256_verifier().verify(&shouted).await,
        Err(AuthError::UnsupportedAlgorithm("none".into()))
    );
}

#[tokio::test]
async fn expired_token_is_refused() {
    let claims = claims_with(|c| {
        c.insert("exp".into(), json!(now() - 30));
    });
    assert_eq!(verify_claims(&claims).await, Err(AuthError::Expired));
}

/// A verifier keeps the tokens it accepted (issue 16), but a kept token
/// expires exactly as a checked one does.
#[tokio::test]
async fn an_accepted_token_is_refused_once_it_expires() {
    let verifier = hs256_verifier();
    let exp = now() + 2;
    let token = hs256(&claims_with(|c| {
        c.insert("exp".into(), json!(exp));
    }));
    assert!(verifier.verify(&token).await.is_ok());
    assert!(verifier.verify(&token).await.is_ok(), "accepted again");
    while now() <= exp {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(verifier.verify(&token).await, Err(AuthError::Expired));
    // And a token not yet valid is not made valid by being seen twice.
    let early = hs256(&claims_with(|c| {
        c.insert("nbf".into(), json!(now() + 600));
    }));
    assert_eq!(verifier.verify(&early).await, Err(AuthError::NotYetValid));
    assert_eq!(verifier.verify(&early).await, Err(AuthError::NotYetValid));
}

#[tokio::test]
async fn leeway_tolerates_small_skew() {
    let verifier = Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Hs256Secret(SECRET.to_vec()),
        leeway_secs: 60,
    })
    .expect("verifier builds");
    let recently_expired = claims_with(|c| {
        c.insert("exp".into(), json!(now() - 30));
    });
    assert!(verifier.verify(&hs256(&recently_expired)).await.is_ok());
    let almost_valid = claims_with(|c| {
        c.insert("nbf".into(), json!(now() + 30));
    });
    assert!(verifier.verify(&hs256(&almost_valid)).await.is_ok());
}

#[tokio::test]
async fn missing_exp_is_refused() {
    let claims = claims_with(|c| {
        c.remove("exp");
    });
    assert_eq!(
        verify_claims(&claims).await,
        Err(AuthError::InvalidClaims("`exp` is missing".into()))
    );
    let claims = claims_with(|c| {
        c.insert("exp".into(), json!("tomorrow"));
    });
    assert!(matches!(
        verify_claims(&claims).await,
        Err(AuthError::InvalidClaims(_))
    ));
}

#[tokio::test]
async fn nbf_in_the_future_is_refused() {
    let claims = claims_with(|c| {
        c.insert("nbf".into(), json!(now() + 600));
    });
    assert_eq!(verify_claims(&claims).await, Err(AuthError::NotYetValid));
    let past = claims_with(|c| {
        c.insert("nbf".into(), json!(now() - 600));
    });
    assert!(verify_claims(&past).await.is_ok());
}

#[tokio::test]
async fn wrong_or_missing_issuer_is_refused() {
    let wrong = claims_with(|c| {
        c.insert("iss".into(), json!("https://evil.test"));
    });
    assert_eq!(verify_claims(&wrong).await, Err(AuthError::WrongIssuer));
    let missing = claims_with(|c| {
        c.remove("iss");
    });
    assert_eq!(
        verify_claims(&missing).await,
        Err(AuthError::InvalidClaims("`iss` is missing".into()))
    );
    let array = claims_with(|c| {
        c.insert("iss".into(), json!([ISSUER]));
    });
    assert!(matches!(
        verify_claims(&array).await,
        Err(AuthError::InvalidClaims(_))
    ));
}

#[tokio::test]
async fn wrong_or_missing_audience_is_refused() {
    let wrong = claims_with(|c| {
        c.insert("aud".into(), json!("another-service"));
    });
    assert_eq!(verify_claims(&wrong).await, Err(AuthError::WrongAudience));
    let missing = claims_with(|c| {
        c.remove("aud");
    });
    assert_eq!(
        verify_claims(&missing).await,
        Err(AuthError::InvalidClaims("`aud` is missing".into()))
    );
    let others = claims_with(|c| {
        c.insert("aud".into(), json!(["a", "b"]));
    });
    assert_eq!(verify_claims(&others).await, Err(AuthError::WrongAudience));
    let empty = claims_with(|c| {
        c.insert("aud".into(), json!([]));
    });
    assert_eq!(verify_claims(&empty).await, Err(AuthError::WrongAudience));
}

#[tokio::test]
async fn audience_array_containing_ours_is_accepted() {
    let claims = claims_with(|c| {
        c.insert("aud".into(), json!(["another-service", AUDIENCE]));
    });
    assert!(verify_claims(&claims).await.is_ok());
}

#[tokio::test]
async fn subject_and_org_are_required() {
    let cases: [(&str, Value, &str); 7] = [
        ("sub", Value::Null, "`sub` is missing"),
        ("sub", json!(""), "`sub` must"),
        ("sub", json!(42), "`sub` must"),
        ("org", Value::Null, "`org` is missing"),
        ("org", json!(""), "`org` must"),
        ("org", json!("Acme/../x"), "`org` must"),
        ("org", json!("a".repeat(65)), "`org` must"),
    ];
    for (claim, value, expected) in cases {
        let claims = claims_with(|c| {
            if value.is_null() {
                c.remove(claim);
            } else {
                c.insert(claim.into(), value.clone());
            }
        });
        match verify_claims(&claims).await {
            Err(AuthError::InvalidClaims(what)) => {
                assert!(what.starts_with(expected), "{claim}={value}: got {what:?}")
            }
            other => panic!("{claim}={value}: expected InvalidClaims, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn roles_must_be_an_array_with_a_known_role() {
    let missing = claims_with(|c| {
        c.remove("roles");
    });
    assert_eq!(
        verify_claims(&missing).await,
        Err(AuthError::InvalidClaims("`roles` is missing".into()))
    );
    for bad in [
        json!("platform_admin"),
        json!(["platform_admin", 7]),
        json!({}),
    ] {
        let claims = claims_with(|c| {
            c.insert("roles".into(), bad.clone());
        });
        assert_eq!(
            verify_claims(&claims).await,
            Err(AuthError::InvalidClaims(
                "`roles` must be an array of strings".into()
            )),
            "roles = {bad}"
        );
    }
    let empty = claims_with(|c| {
        c.insert("roles".into(), json!([]));
    });
    assert_eq!(verify_claims(&empty).await, Err(AuthError::NoRole));
    let unknown = claims_with(|c| {
        c.insert(
            "roles".into(),
            json!(["superuser", "PLATFORM_ADMIN", "admin"]),
        );
    });
    assert_eq!(verify_claims(&unknown).await, Err(AuthError::NoRole));
}

#[tokio::test]
async fn unknown_roles_are_ignored_and_duplicates_collapsed() {
    let claims = claims_with(|c| {
        c.insert(
            "roles".into(),
            json!([
                "billing_admin",
                "deployment_viewer",
                "deployment_viewer",
                "platform_admin"
            ]),
        );
    });
    let principal = verify_claims(&claims).await.expect("known roles suffice");
    assert_eq!(
        principal.roles,
        vec![Role::DeploymentViewer, Role::PlatformAdmin]
    );
    assert!(principal.can_manage_platform());
}

#[tokio::test]
async fn garbage_is_malformed() {
    let verifier = hs256_verifier();
    let oversized = format!("{}.e30.x", "A".repeat(20_000));
    for token in [
        "",
        "Bearer",
        "a.b",
        "a.b.c.d",
        "!!!.e30.sig",
        "e30.e30.sig",
        oversized.as_str(),
    ] {
        assert_eq!(
            verifier.verify(token).await,
            Err(AuthError::Malformed),
            "{token:.40}"
        );
    }
    let not_json_payload = format!("{}.{}.sig", b64url(br#"{"alg":"HS256"}"#), b64url(b"[1,2"));
    assert!(verifier.verify(&not_json_payload).await.is_err());
}

#[tokio::test]
async fn error_texts_do_not_echo_token_contents() {
    let claims = claims_with(|c| {
        c.insert("org".into(), json!("SECRET-ORG-<script>"));
        c.insert("sub".into(), json!("\nforged log line"));
    });
    let err = verify_claims(&claims).await.expect_err("refused");
    let text = err.to_string();
    assert!(!text.contains("SECRET-ORG"), "{text}");
    assert!(!text.contains("forged"), "{text}");

    let weird_alg = format!(
        "{}.{}.",
        b64url(br#"{"alg":"<img src=x onerror=alert(1)>"}"#),
        b64url(good_claims().to_string().as_bytes())
    );
    let err = hs256_verifier()
        .verify(&weird_alg)
        .await
        .expect_err("refused");
    assert_eq!(err, AuthError::UnsupportedAlgorithm("unrecognised".into()));
    assert!(!err.to_string().contains("onerror"));
}

#[test]
fn config_is_checked() {
    let config = |secret: &[u8], issuer: &str, audience: &str, leeway_secs| VerifierConfig {
        issuer: issuer.into(),
        audience: audience.into(),
        keys: KeySource::Hs256Secret(secret.to_vec()),
        leeway_secs,
    };
    assert!(matches!(
        Verifier::new(config(b"too short", ISSUER, AUDIENCE, 0)),
        Err(ConfigError::SecretTooShort { len: 9, min: 32 })
    ));
    assert!(matches!(
        Verifier::new(config(SECRET, "", AUDIENCE, 0)),
        Err(ConfigError::MissingSetting("issuer"))
    ));
    assert!(matches!(
        Verifier::new(config(SECRET, ISSUER, " ", 0)),
        Err(ConfigError::MissingSetting("audience"))
    ));
    assert!(matches!(
        Verifier::new(config(SECRET, ISSUER, AUDIENCE, u64::MAX)),
        Err(ConfigError::LeewayTooLarge { .. })
    ));
}

#[test]
fn debug_does_not_print_the_secret() {
    let secret_text = std::str::from_utf8(SECRET).expect("test secret is text");
    let source = KeySource::Hs256Secret(SECRET.to_vec());
    let source_debug = format!("{source:?}");
    assert!(!source_debug.contains(secret_text), "{source_debug}");
    assert!(!source_debug.contains("116"), "bytes leak: {source_debug}");
    let config_debug = format!(
        "{:?}",
        VerifierConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            keys: source,
            leeway_secs: 0,
        }
    );
    assert!(!config_debug.contains(secret_text), "{config_debug}");
    let verifier_debug = format!("{:?}", hs256_verifier());
    assert!(!verifier_debug.contains(secret_text), "{verifier_debug}");
    assert!(verifier_debug.contains("redacted"), "{verifier_debug}");
}
