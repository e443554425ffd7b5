//! The adapters every process builds the same way, one constructor each.

use crate::Aws;
use crate::env::ConfigError;
use crate::sections::{AuthConfig, SecretsConfig, StoreChoice, TokenKeys};
use floe_auth::{KeySource, Verifier, VerifierConfig};
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
        TokenKeys::JwksUrl(_) | TokenKeys::JwksFile(_) => None,
    })
}

/// Checks bearer tokens against the configured keys.
pub async fn verifier(config: &AuthConfig) -> Result<Verifier, WiringError> {
    let keys = match &config.keys {
        TokenKeys::JwksUrl(url) => KeySource::Jwks(floe_auth::fetch_jwks(url).await?),
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
