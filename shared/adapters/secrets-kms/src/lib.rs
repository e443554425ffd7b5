//! The AWS KMS adapter of the cipher port of `floe-secrets` (the only crate
//! that links `aws-sdk-kms`): sealed secrets `kms:v1:base64`, bound to
//! their owner by the encryption context.

use async_trait::async_trait;
use aws_sdk_kms::primitives::Blob;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use floe_aws_errors::describe;
use floe_secrets::{Cipher, Owner, SecretError};

const PREFIX: &str = "kms:v1:";

/// The KMS actions this cipher calls (what IAM must grant).
pub const OPERATIONS: &[&str] = &["kms:Encrypt", "kms:Decrypt"];

/// AWS KMS `Encrypt`/`Decrypt` with the owner as encryption context.
/// Credentials are far below KMS's 4 KiB plaintext limit, so no data key
/// (envelope) layer is needed.
pub struct KmsCipher {
    client: aws_sdk_kms::Client,
    key_id: String,
}

impl KmsCipher {
    /// Seals with the key `key_id`, through a client built from the
    /// process's shared SDK configuration.
    pub fn new(sdk: &aws_config::SdkConfig, key_id: impl Into<String>) -> KmsCipher {
        KmsCipher {
            client: aws_sdk_kms::Client::new(sdk),
            key_id: key_id.into(),
        }
    }

    fn context(owner: &Owner<'_>) -> [(String, String); 3] {
        [
            ("floe:org".to_string(), owner.org.to_string()),
            ("floe:repository".to_string(), owner.repository.to_string()),
            ("floe:field".to_string(), owner.field.to_string()),
        ]
    }
}

#[async_trait]
impl Cipher for KmsCipher {
    async fn seal(&self, plaintext: &str, owner: &Owner<'_>) -> Result<String, SecretError> {
        let mut req = self
            .client
            .encrypt()
            .key_id(&self.key_id)
            .plaintext(Blob::new(plaintext.as_bytes()));
        for (k, v) in Self::context(owner) {
            req = req.encryption_context(k, v);
        }
        let out = req
            .send()
            .await
            .map_err(|e| SecretError::KeyUnavailable(describe(&e)))?;
        let blob = out
            .ciphertext_blob()
            .ok_or_else(|| SecretError::KeyUnavailable("KMS returned no ciphertext".into()))?;
        Ok(format!("{PREFIX}{}", STANDARD.encode(blob.as_ref())))
    }

    async fn open(&self, sealed: &str, owner: &Owner<'_>) -> Result<String, SecretError> {
        let body = sealed
            .strip_prefix(PREFIX)
            .ok_or_else(|| SecretError::CannotOpen("not sealed with KMS".into()))?;
        let blob = STANDARD
            .decode(body)
            .map_err(|_| SecretError::CannotOpen("not base64".into()))?;
        let mut req = self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(blob));
        for (k, v) in Self::context(owner) {
            req = req.encryption_context(k, v);
        }
        let out = req.send().await.map_err(|e| {
            // Only KMS's verdict on the ciphertext says it cannot be
            // opened; throttling, an internal error or a lost connection
            // say nothing about it, and a later try may open it.
            let verdict = e.as_service_error().is_some_and(|s| {
                s.is_invalid_ciphertext_exception() || s.is_incorrect_key_exception()
            });
            if verdict {
                SecretError::CannotOpen(describe(&e))
            } else {
                SecretError::KeyUnavailable(describe(&e))
            }
        })?;
        let pt = out
            .plaintext()
            .ok_or_else(|| SecretError::CannotOpen("KMS returned no plaintext".into()))?;
        String::from_utf8(pt.as_ref().to_vec())
            .map_err(|_| SecretError::CannotOpen("not UTF-8".into()))
    }
}
