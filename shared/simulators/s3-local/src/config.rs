//! What a [`crate::LocalS3`] serves, where, and to whom.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// The region the server names in `GetBucketLocation` and expects nothing
/// of: requests signed for any region are accepted, as the signature still
/// proves the secret.
pub const DEFAULT_REGION: &str = "us-east-1";

/// The one key pair the server accepts. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl Credentials {
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        Credentials {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
        }
    }

    /// A fresh random pair shaped like AWS's (a 20-character id starting
    /// `FLOE`, a 40-character secret), for callers that keep it themselves.
    pub fn generate() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
        let secret = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        Credentials {
            access_key_id: format!("FLOE{}", &id[..16]),
            secret_access_key: secret[..40].to_string(),
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

/// How to start a [`crate::LocalS3`].
#[derive(Clone, Debug)]
pub struct LocalS3Config {
    /// Must be a loopback address; port 0 picks a free port. Default
    /// `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// The folder holding the buckets (one sub-folder each) and, under
    /// `.floe-s3/`, the object metadata, pending multipart uploads and
    /// temporary files. Created if missing.
    pub root: PathBuf,
    pub credentials: Credentials,
    /// Buckets created at start when missing (existing ones are kept).
    pub buckets: Vec<String>,
    /// Default [`DEFAULT_REGION`].
    pub region: String,
    /// With `Some("localhost")` (the default) a request for
    /// `Host: bucket.localhost:port` addresses `bucket` (virtual-host
    /// style); path style (`/bucket/key`) always works.
    pub virtual_host_domain: Option<String>,
}

impl LocalS3Config {
    /// The defaults around a folder and a key pair.
    pub fn new(root: impl Into<PathBuf>, credentials: Credentials) -> Self {
        LocalS3Config {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            root: root.into(),
            credentials,
            buckets: Vec::new(),
            region: DEFAULT_REGION.to_string(),
            virtual_host_domain: Some("localhost".to_string()),
        }
    }

    pub fn with_bucket(mut self, bucket: impl Into<String>) -> Self {
        self.buckets.push(bucket.into());
        self
    }

    pub fn with_listen(mut self, listen: SocketAddr) -> Self {
        self.listen = listen;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let credentials = Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG");
        let config = LocalS3Config::new("/tmp/x", credentials.clone());
        for text in [format!("{credentials:?}"), format!("{config:?}")] {
            assert!(text.contains("AKIDEXAMPLE"), "{text}");
            assert!(!text.contains("wJalr"), "{text}");
        }
    }

    #[test]
    fn generated_credentials_look_like_aws_ones() {
        let a = Credentials::generate();
        let b = Credentials::generate();
        assert_eq!(a.access_key_id.len(), 20);
        assert_eq!(a.secret_access_key.len(), 40);
        assert!(a.access_key_id.starts_with("FLOE"));
        assert_ne!(a, b);
    }
}
