use crate::{Cipher, Owner, SecretError};
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::io::Write;
use std::path::Path;

pub(crate) const PREFIX: &str = "local:v1:";
const NONCE_LEN: usize = 12;

/// AES-256-GCM with a 32-byte key kept in a file only its owner can read.
pub struct LocalCipher {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for LocalCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalCipher(<key redacted>)")
    }
}

fn unavailable(e: impl std::fmt::Display) -> SecretError {
    SecretError::KeyUnavailable(e.to_string())
}

impl LocalCipher {
    pub fn from_key(key: &[u8; 32]) -> LocalCipher {
        LocalCipher {
            cipher: Aes256Gcm::new(key.into()),
        }
    }

    /// Loads the key file, creating it (mode 0600, parent folders too) with a
    /// fresh random key when absent. A key file others can read is refused:
    /// it would make encryption at rest pointless.
    pub fn load_or_create(path: &Path) -> Result<LocalCipher, SecretError> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(unavailable)?;
        }
        match std::fs::metadata(path) {
            Ok(meta) => {
                if meta.permissions().mode() & 0o077 != 0 {
                    return Err(SecretError::KeyUnavailable(format!(
                        "{} is readable by group or others; chmod 600 it",
                        path.display()
                    )));
                }
                let text = std::fs::read_to_string(path).map_err(unavailable)?;
                let bytes = hex_decode(text.trim()).ok_or_else(|| {
                    SecretError::KeyUnavailable(format!(
                        "{} does not hold a 64-digit hex key",
                        path.display()
                    ))
                })?;
                Ok(LocalCipher::from_key(&bytes))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key: [u8; 32] = rand::random();
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(unavailable)?;
                file.write_all(hex_encode(&key).as_bytes())
                    .map_err(unavailable)?;
                file.sync_all().map_err(unavailable)?;
                Ok(LocalCipher::from_key(&key))
            }
            Err(e) => Err(unavailable(e)),
        }
    }
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
        let text = std::str::from_utf8(chunk).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

#[async_trait]
impl Cipher for LocalCipher {
    async fn seal(&self, plaintext: &str, owner: &Owner<'_>) -> Result<String, SecretError> {
        let nonce_bytes: [u8; NONCE_LEN] = rand::random();
        let aad = owner.associated_data();
        let ct = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce_bytes),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| SecretError::KeyUnavailable("encryption failed".into()))?;
        let mut blob = nonce_bytes.to_vec();
        blob.extend_from_slice(&ct);
        Ok(format!("{PREFIX}{}", STANDARD.encode(blob)))
    }

    async fn open(&self, sealed: &str, owner: &Owner<'_>) -> Result<String, SecretError> {
        let body = sealed
            .strip_prefix(PREFIX)
            .ok_or_else(|| SecretError::CannotOpen("not sealed with the local key".into()))?;
        let blob = STANDARD
            .decode(body)
            .map_err(|_| SecretError::CannotOpen("not base64".into()))?;
        if blob.len() < NONCE_LEN + 16 {
            return Err(SecretError::CannotOpen("too short".into()));
        }
        let (nonce, ct) = blob.split_at(NONCE_LEN);
        let aad = owner.associated_data();
        let pt = self
            .cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| SecretError::CannotOpen("wrong key or owner, or damaged".into()))?;
        String::from_utf8(pt).map_err(|_| SecretError::CannotOpen("not UTF-8".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner<'a>(repo: &'a str) -> Owner<'a> {
        Owner {
            org: "acme",
            repository: repo,
            field: "secret_key",
        }
    }

    #[tokio::test]
    async fn round_trip_and_binding() -> Result<(), SecretError> {
        let dir = tempfile::tempdir().map_err(unavailable)?;
        let path = dir.path().join("keys/secret.key");
        let c = LocalCipher::load_or_create(&path)?;
        let sealed = c.seal("YYYYY-plain", &owner("a")).await?;
        assert!(sealed.starts_with(PREFIX));
        assert!(!sealed.contains("YYYYY"));
        assert_eq!(c.open(&sealed, &owner("a")).await?, "YYYYY-plain");
        assert!(
            c.open(&sealed, &owner("b")).await.is_err(),
            "bound to its owner"
        );
        // Same key after reload; two seals of one value differ (random nonce).
        let again = LocalCipher::load_or_create(&path)?;
        assert_eq!(again.open(&sealed, &owner("a")).await?, "YYYYY-plain");
        assert_ne!(
            c.seal("x", &owner("a")).await?,
            c.seal("x", &owner("a")).await?
        );
        Ok(())
    }

    #[test]
    fn key_file_is_private() -> Result<(), SecretError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().map_err(unavailable)?;
        let path = dir.path().join("secret.key");
        LocalCipher::load_or_create(&path)?;
        let mode = std::fs::metadata(&path)
            .map_err(unavailable)?
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .map_err(unavailable)?;
        assert!(LocalCipher::load_or_create(&path).is_err());
        Ok(())
    }
}
