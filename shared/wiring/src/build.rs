//! The adapters every process builds the same way, one constructor each.

use crate::Aws;
use crate::env::ConfigError;
use crate::sections::{AuthConfig, SecretsConfig, StoreChoice, TokenKeys};
use floe_auth::{JwksCache, KeySource, Verifier, VerifierConfig};
use floe_secrets::{Cipher, Ciphers, LocalCipher};
use floe_secrets_kms::KmsCipher;
use floe_store::Store;
use floe_store_dynamo::DynamoBackend;
use std::sync::Arc;

/// A start-up failure: a setting is wrong, or what it names cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("FLOE_STORE: {0}")]
    Store(#[from] floe_store::BackendError),
    #[error("FLOE_JWT_SECRET / FLOE_JWKS_URL / FLOE_JWKS_FILE: {0}")]
    Auth(#[from] floe_auth::ConfigError),
    #[error("FLOE_SECRET_KEY_FILE / FLOE_KMS_KEY_ID: {0}")]
    Secrets(#[from] floe_secrets::SecretError),
    /// A Lambda build names a SQLite file: its records belong in DynamoDB.
    #[error(
        "FLOE_STORE: this build keeps records in DynamoDB only (dynamodb://TABLE), not in the SQLite file {0}"
    )]
    NoSqlite(String),
}

/// The records. SQLite opens (and migrates) its file; DynamoDB is created
/// only when `FLOE_CREATE_TABLE` asks; only DynamoDB takes the SDK
/// configuration.
pub async fn store(choice: &StoreChoice, sdk: Aws<'_>) -> Result<Store, WiringError> {
    Ok(match choice {
        #[cfg(feature = "sqlite")]
        StoreChoice::Sqlite(path) => {
            Store::new(Arc::new(floe_store_sqlite::SqliteBackend::open(path)?))
        }
        #[cfg(not(feature = "sqlite"))]
        StoreChoice::Sqlite(path) => {
            return Err(WiringError::NoSqlite(path.display().to_string()));
        }
        StoreChoice::Dynamo { table, create } => {
            let backend = DynamoBackend::new(sdk.config().await, table.clone());
            if *create {
                backend.ensure_table().await?;
            }
            Store::new(Arc::new(backend))
        }
    })
}

/// How secrets are sealed: KMS when a key is configured (values an earlier
/// local key sealed stay readable while its file is there), else the local
/// key file, created with mode 0600. Only KMS takes the SDK configuration.
pub async fn cipher(config: &SecretsConfig, sdk: Aws<'_>) -> Result<Arc<dyn Cipher>, WiringError> {
    match &config.kms_key_id {
        Some(key_id) => {
            let local = if config.key_file.exists() {
                Some(LocalCipher::load_or_create(&config.key_file)?)
            } else {
                None
            };
            Ok(Arc::new(Ciphers::new(
                Box::new(KmsCipher::new(sdk.config().await, key_id.clone())),
                local,
            )))
        }
        None => Ok(Arc::new(LocalCipher::load_or_create(&config.key_file)?)),
    }
}

/// The HS256 secret that signs local tokens (`token` command) and checks
/// them; `None` with a JWKS.
pub fn jwt_secret(config: &AuthConfig) -> Result<Option<Vec<u8>>, WiringError> {
    Ok(match &config.keys {
        TokenKeys::Secret(s) => Some(s.clone().into_bytes()),
        TokenKeys::SecretFile(path) => Some(floe_auth::load_or_create_secret(path)?),
        TokenKeys::JwksUrl { .. } | TokenKeys::JwksFile(_) => None,
    })
}

/// Checks bearer tokens against the configured keys. A JWKS URL is fetched
/// now (a wrong one stops start-up) and again as its keys expire or rotate.
pub async fn verifier(config: &AuthConfig) -> Result<Verifier, WiringError> {
    let keys = match &config.keys {
        TokenKeys::JwksUrl { url, cache } => {
            KeySource::Remote(JwksCache::connect(url, *cache).await?)
        }
        TokenKeys::JwksFile(file) => KeySource::Jwks(floe_auth::load_jwks_file(file)?),
        TokenKeys::Secret(_) | TokenKeys::SecretFile(_) => {
            KeySource::Hs256Secret(jwt_secret(config)?.unwrap_or_default())
        }
    };
    Ok(Verifier::new(VerifierConfig {
        issuer: config.issuer.clone(),
        audience: config.audience.clone(),
        keys,
        leeway_secs: 30,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Serves the auth crate's test-only JWKS on 127.0.0.1 to every request,
    /// one per connection, and counts them.
    async fn jwks_server() -> (String, Arc<AtomicUsize>) {
        let body = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../domain/auth/tests/fixtures/test-only-jwks.json"),
        )
        .expect("the auth crate's fixture JWKS");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!(
            "http://{}/jwks.json",
            listener.local_addr().expect("local addr")
        );
        let served = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&served);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.write_all(&body).await;
                let _ = stream.shutdown().await;
            }
        });
        (url, served)
    }

    /// The verifier the wiring builds from a JWKS URL looks again when a
    /// token names a key it does not hold (a provider's rotation), once per
    /// `FLOE_JWKS_REFETCH_SECS`, rather than holding the start-up set for
    /// the life of the process.
    #[tokio::test]
    async fn a_jwks_url_verifier_refetches_for_an_unknown_kid() {
        let (url, served) = jwks_server().await;
        let env = Env::from_pairs(&[
            ("FLOE_JWKS_URL", &url),
            ("FLOE_JWT_ISSUER", "https://issuer.test"),
            ("FLOE_JWT_AUDIENCE", "floe-api"),
            ("FLOE_JWKS_REFETCH_SECS", "1"),
        ]);
        let config = AuthConfig::read(&env).expect("the settings read");
        let verifier = verifier(&config).await.expect("the verifier builds");
        assert_eq!(served.load(Ordering::SeqCst), 1);

        // `{"alg":"RS256","kid":"k"}`: a kid the fixture set does not hold.
        // No signature is needed: the key is looked up before it is checked.
        let token = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.e30.x";
        // The start-up fetch counts as an attempt, so wait out the shortest
        // interval the setting allows; what is asserted is the server's
        // count, which no slowness of this machine can change.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let refused = verifier.verify(token).await;
        assert_eq!(refused, Err(floe_auth::AuthError::UnknownKey));
        assert_eq!(served.load(Ordering::SeqCst), 2);
    }
}
