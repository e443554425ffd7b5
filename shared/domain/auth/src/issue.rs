use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

use crate::error::IssueError;
use crate::role::Role;
use crate::verify::{MIN_SECRET_LEN, check_org, check_subject};

#[derive(Serialize)]
struct Claims<'a> {
    sub: &'a str,
    org: &'a str,
    roles: Vec<&'static str>,
    iss: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
}

/// Signs an HS256 token for `floe-api token` (local use and tests).
///
/// Inputs are held to the rules `Verifier::verify` applies, so a token this
/// returns is one the verifier accepts until it expires.
pub fn issue_hs256(
    secret: &[u8],
    issuer: &str,
    audience: &str,
    subject: &str,
    org: &str,
    roles: &[Role],
    ttl: Duration,
) -> Result<String, IssueError> {
    if secret.len() < MIN_SECRET_LEN {
        return Err(IssueError::SecretTooShort {
            len: secret.len(),
            min: MIN_SECRET_LEN,
        });
    }
    if issuer.trim().is_empty() {
        return Err(IssueError::InvalidInput(
            "the issuer must not be empty".into(),
        ));
    }
    if audience.trim().is_empty() {
        return Err(IssueError::InvalidInput(
            "the audience must not be empty".into(),
        ));
    }
    check_subject(subject)
        .map_err(|rule| IssueError::InvalidInput(format!("the subject {rule}")))?;
    check_org(org).map_err(|rule| IssueError::InvalidInput(format!("the organization {rule}")))?;
    let mut role_names: Vec<&'static str> = Vec::with_capacity(roles.len());
    for role in roles {
        if !role_names.contains(&role.as_str()) {
            role_names.push(role.as_str());
        }
    }
    if role_names.is_empty() {
        return Err(IssueError::InvalidInput(
            "at least one role is required".into(),
        ));
    }
    if ttl < Duration::from_secs(1) {
        return Err(IssueError::InvalidInput(
            "the lifetime must be at least one second".into(),
        ));
    }

    let iat = chrono::Utc::now().timestamp();
    let exp = i64::try_from(ttl.as_secs())
        .ok()
        .and_then(|secs| iat.checked_add(secs))
        .ok_or_else(|| IssueError::InvalidInput("the lifetime is too long".into()))?;

    let claims = Claims {
        sub: subject,
        org,
        roles: role_names,
        iss: issuer,
        aud: audience,
        iat,
        exp,
    };
    let key = EncodingKey::from_secret(secret).map_err(IssueError::Signing)?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).map_err(IssueError::Signing)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8; 32] = b"0123456789abcdef0123456789abcdef";
    const HOUR: Duration = Duration::from_secs(3600);

    fn issue(
        subject: &str,
        org: &str,
        roles: &[Role],
        ttl: Duration,
    ) -> Result<String, IssueError> {
        issue_hs256(SECRET, "floe-local", "floe-api", subject, org, roles, ttl)
    }

    #[test]
    fn refuses_inputs_the_verifier_would_refuse() {
        let admin = [Role::PlatformAdmin];
        assert!(matches!(
            issue_hs256(b"short", "i", "a", "alice", "acme", &admin, HOUR),
            Err(IssueError::SecretTooShort { len: 5, min: 32 })
        ));
        assert!(matches!(
            issue_hs256(SECRET, " ", "a", "alice", "acme", &admin, HOUR),
            Err(IssueError::InvalidInput(_))
        ));
        assert!(matches!(
            issue_hs256(SECRET, "i", "", "alice", "acme", &admin, HOUR),
            Err(IssueError::InvalidInput(_))
        ));
        assert!(matches!(
            issue("", "acme", &admin, HOUR),
            Err(IssueError::InvalidInput(_))
        ));
        assert!(matches!(
            issue("alice", "Acme", &admin, HOUR),
            Err(IssueError::InvalidInput(_))
        ));
        assert!(matches!(
            issue("alice", "acme", &[], HOUR),
            Err(IssueError::InvalidInput(_))
        ));
        assert!(matches!(
            issue("alice", "acme", &admin, Duration::from_millis(999)),
            Err(IssueError::InvalidInput(_))
        ));
        assert!(matches!(
            issue("alice", "acme", &admin, Duration::from_secs(u64::MAX)),
            Err(IssueError::InvalidInput(_))
        ));
    }

    #[test]
    fn claims_carry_deduplicated_roles_and_lifetime() {
        let token = issue(
            "alice",
            "acme",
            &[
                Role::DeploymentViewer,
                Role::DeploymentViewer,
                Role::PlatformViewer,
            ],
            HOUR,
        )
        .expect("issuing works");
        let claims: serde_json::Value =
            jsonwebtoken::dangerous::insecure_decode_claims(&token).expect("claims decode");
        assert_eq!(
            claims["roles"],
            serde_json::json!(["deployment_viewer", "platform_viewer"])
        );
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["org"], "acme");
        assert_eq!(claims["iss"], "floe-local");
        assert_eq!(claims["aud"], "floe-api");
        let iat = claims["iat"].as_i64().expect("iat is a number");
        let exp = claims["exp"].as_i64().expect("exp is a number");
        assert_eq!(exp - iat, 3600);
    }
}
