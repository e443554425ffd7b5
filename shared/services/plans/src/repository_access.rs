//! What a node needs to reach its deployment's snapshot repository: the S3
//! client settings rendered into `elasticsearch.yml`, and the credentials
//! the plan hands to its boot script through the parameter store.
//!
//! Elasticsearch reads an S3 client's endpoint, protocol and path style only
//! from the node's settings and its keys only from the keystore, so a
//! repository on a store other than AWS S3 works only when both are there
//! before the node starts.

use floe_compute::parameters::{
    REPOSITORY_ACCESS_KEY, REPOSITORY_SECRET_KEY, REPOSITORY_SESSION_TOKEN, SecretOrPlain,
};
use floe_domain::repository::{Protocol, Repository, RepositorySettings};
use floe_nodeconfig::RepositoryClient;
use floe_secrets::{Cipher, Owner, SecretError};

/// The S3 client settings of `repo`; `None` for a shared-filesystem
/// repository, which needs no client.
pub fn client_settings(repo: &Repository) -> Option<RepositoryClient<'_>> {
    let RepositorySettings::S3(s) = &repo.settings else {
        return None;
    };
    Some(RepositoryClient {
        endpoint: s.endpoint.as_deref(),
        protocol: s.protocol.map(|p| match p {
            Protocol::Http => "http",
            Protocol::Https => "https",
        }),
        path_style_access: s.path_style_access,
        region: s.region.as_deref(),
        has_credentials: s.access_key.is_some() && s.secret_key.is_some(),
        has_session_token: s.access_key.is_some()
            && s.secret_key.is_some()
            && s.session_token.is_some(),
    })
}

/// The credential parameters a node of a deployment using `repo` reads
/// (names relative to the deployment's path) with their values, and the
/// ones it must not find (a session token left from earlier credentials
/// would be sent with keys it does not belong to).
pub struct CredentialParameters {
    pub put: Vec<(&'static str, SecretOrPlain)>,
    pub delete: Vec<&'static str>,
}

/// Opens the repository's sealed keys. Without stored keys (the nodes use
/// their instance role) every credential parameter is to be deleted.
pub async fn credential_parameters(
    cipher: &dyn Cipher,
    repo: &Repository,
) -> Result<CredentialParameters, SecretError> {
    let all = [
        REPOSITORY_ACCESS_KEY,
        REPOSITORY_SECRET_KEY,
        REPOSITORY_SESSION_TOKEN,
    ];
    let s = match &repo.settings {
        RepositorySettings::S3(s) => s,
        RepositorySettings::Fs(_) => {
            return Ok(CredentialParameters {
                put: Vec::new(),
                delete: all.to_vec(),
            });
        }
    };
    let (Some(access_key), Some(secret_key)) = (&s.access_key, &s.secret_key) else {
        return Ok(CredentialParameters {
            put: Vec::new(),
            delete: all.to_vec(),
        });
    };
    let open = |field: &'static str, sealed: &floe_domain::secret::Sealed| {
        let owner = Owner {
            org: &repo.org,
            repository: &repo.name,
            field,
        };
        let sealed = sealed.ciphertext().to_string();
        async move { cipher.open(&sealed, &owner).await }
    };
    // The access key id is not a secret, but a node reads all three the same
    // way, and its value is no one else's business either.
    let mut put = vec![
        (
            REPOSITORY_ACCESS_KEY,
            SecretOrPlain::secret(access_key.clone()),
        ),
        (
            REPOSITORY_SECRET_KEY,
            SecretOrPlain::secret(open("secret_key", secret_key).await?),
        ),
    ];
    let mut delete = Vec::new();
    match &s.session_token {
        Some(token) => put.push((
            REPOSITORY_SESSION_TOKEN,
            SecretOrPlain::secret(open("session_token", token).await?),
        )),
        None => delete.push(REPOSITORY_SESSION_TOKEN),
    }
    Ok(CredentialParameters { put, delete })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use floe_domain::repository::{FsSettings, S3Settings};
    use floe_domain::secret::Sealed;
    use floe_secrets::LocalCipher;

    fn repo(settings: RepositorySettings) -> Repository {
        Repository {
            org: "acme".into(),
            name: "backups".into(),
            settings,
            created: Utc::now(),
            updated: Utc::now(),
        }
    }

    async fn sealed(cipher: &LocalCipher, org: &str, field: &str, value: &str) -> Sealed {
        let owner = Owner {
            org,
            repository: "backups",
            field,
        };
        match cipher.seal(value, &owner).await {
            Ok(s) => Sealed::new(s),
            Err(e) => panic!("sealing: {e}"),
        }
    }

    fn names(p: &CredentialParameters) -> (Vec<&str>, Vec<&str>) {
        (p.put.iter().map(|(n, _)| *n).collect(), p.delete.clone())
    }

    #[tokio::test]
    async fn keys_are_opened_and_stale_ones_removed() -> Result<(), SecretError> {
        let cipher = LocalCipher::from_key(&[9u8; 32]);
        let with_keys = repo(RepositorySettings::S3(S3Settings {
            bucket: "b".into(),
            access_key: Some("AKIAEXAMPLE".into()),
            secret_key: Some(sealed(&cipher, "acme", "secret_key", "s3cr3t").await),
            ..S3Settings::default()
        }));
        let p = credential_parameters(&cipher, &with_keys).await?;
        assert_eq!(
            names(&p),
            (
                vec![REPOSITORY_ACCESS_KEY, REPOSITORY_SECRET_KEY],
                vec![REPOSITORY_SESSION_TOKEN]
            )
        );
        assert!(p.put.iter().all(|(_, v)| v.is_secret()));
        assert_eq!(p.put[1].1.expose(), "s3cr3t");
        let settings = client_settings(&with_keys);
        assert_eq!(
            settings.map(|c| (c.has_credentials, c.has_session_token)),
            Some((true, false))
        );

        // Instance-role access and shared filesystems hand out no key.
        let all = vec![
            REPOSITORY_ACCESS_KEY,
            REPOSITORY_SECRET_KEY,
            REPOSITORY_SESSION_TOKEN,
        ];
        let role = repo(RepositorySettings::S3(S3Settings {
            bucket: "b".into(),
            ..S3Settings::default()
        }));
        let fs = repo(RepositorySettings::Fs(FsSettings {
            location: "/mnt/backups".into(),
            compress: None,
            max_snapshot_bytes_per_sec: None,
            max_restore_bytes_per_sec: None,
        }));
        for r in [&role, &fs] {
            assert_eq!(
                names(&credential_parameters(&cipher, r).await?),
                (vec![], all.clone())
            );
        }
        assert_eq!(client_settings(&fs), None);
        Ok(())
    }

    #[tokio::test]
    async fn a_key_sealed_for_another_owner_does_not_open() {
        let cipher = LocalCipher::from_key(&[9u8; 32]);
        let copied = repo(RepositorySettings::S3(S3Settings {
            bucket: "b".into(),
            access_key: Some("AKIAEXAMPLE".into()),
            secret_key: Some(sealed(&cipher, "other-org", "secret_key", "s3cr3t").await),
            ..S3Settings::default()
        }));
        assert!(matches!(
            credential_parameters(&cipher, &copied).await,
            Err(SecretError::CannotOpen(_))
        ));
    }
}
