//! Encryption at rest of repository credentials.
//!
//! A sealed secret is a string `scheme:v1:base64`, so a stored record says
//! which key can open it: `local` (AES-256-GCM with a key file, for local
//! mode and tests) or `kms` (AWS KMS, production: `floe-secrets-kms`, the
//! adapter of the [`Cipher`] port this crate defines). The secret's owner (an
//! organization and repository) is bound in as associated data / encryption
//! context, so a ciphertext copied onto another record does not open.

mod local;

pub use local::LocalCipher;

use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The key file or KMS key could not be used (configuration or I/O).
    #[error("secret key unavailable: {0}")]
    KeyUnavailable(String),
    /// The ciphertext is damaged, was sealed for another owner, or by another key.
    #[error("sealed secret cannot be opened: {0}")]
    CannotOpen(String),
}

/// Binds a secret to the record it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner<'a> {
    pub org: &'a str,
    pub repository: &'a str,
    pub field: &'a str,
}

impl Owner<'_> {
    fn associated_data(&self) -> String {
        format!("floe:{}:{}:{}", self.org, self.repository, self.field)
    }
}

#[async_trait]
pub trait Cipher: Send + Sync + 'static {
    async fn seal(&self, plaintext: &str, owner: &Owner<'_>) -> Result<String, SecretError>;
    async fn open(&self, sealed: &str, owner: &Owner<'_>) -> Result<String, SecretError>;
}

/// Seals with the primary cipher; opens whichever scheme a value names.
/// Production seals with KMS and can still open values sealed locally (for
/// example records written by tests or a migration).
pub struct Ciphers {
    primary: Box<dyn Cipher>,
    local: Option<LocalCipher>,
}

impl Ciphers {
    pub fn new(primary: Box<dyn Cipher>, local: Option<LocalCipher>) -> Ciphers {
        Ciphers { primary, local }
    }
}

#[async_trait]
impl Cipher for Ciphers {
    async fn seal(&self, plaintext: &str, owner: &Owner<'_>) -> Result<String, SecretError> {
        self.primary.seal(plaintext, owner).await
    }

    async fn open(&self, sealed: &str, owner: &Owner<'_>) -> Result<String, SecretError> {
        match (sealed.starts_with(local::PREFIX), &self.local) {
            (true, Some(local)) => local.open(sealed, owner).await,
            _ => self.primary.open(sealed, owner).await,
        }
    }
}
