//! Where a repository's blobs live: a folder (`fs`) or an S3 bucket and
//! base path (`s3`). Snapshots are kept there and nowhere else, so another
//! simulated cluster registering the same repository sees them.

use aws_sdk_s3::primitives::ByteStream;
use std::path::PathBuf;
use tokio::io::AsyncWriteExt as _;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    S3(String),
    #[error("the blob [{name}] is not what the simulator writes: {reason}")]
    Corrupt { name: String, reason: String },
}

#[derive(Clone, Debug)]
pub enum BlobStore {
    Fs {
        dir: PathBuf,
    },
    S3 {
        client: aws_sdk_s3::Client,
        /// The URL the client sends to, for messages.
        endpoint: String,
        bucket: String,
        /// Empty, or ends with `/`.
        prefix: String,
    },
    /// A store the nodes have no way to reach (no S3 credentials): every
    /// request fails with `reason`.
    Unreachable {
        describe: String,
        reason: String,
    },
}

impl BlobStore {
    /// For messages: the folder, or `s3://bucket/base_path`.
    pub fn describe(&self) -> String {
        match self {
            BlobStore::Fs { dir } => dir.display().to_string(),
            BlobStore::S3 { bucket, prefix, .. } => format!("s3://{bucket}/{prefix}"),
            BlobStore::Unreachable { describe, .. } => describe.clone(),
        }
    }

    /// `None` when the blob does not exist.
    pub async fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self {
            BlobStore::Fs { dir } => {
                let path = dir.join(name);
                match tokio::fs::read(&path).await {
                    Ok(bytes) => Ok(Some(bytes)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(source) => Err(StoreError::Io {
                        path: path.display().to_string(),
                        source,
                    }),
                }
            }
            BlobStore::Unreachable { reason, .. } => Err(StoreError::S3(reason.clone())),
            BlobStore::S3 {
                client,
                endpoint,
                bucket,
                prefix,
            } => {
                let key = format!("{prefix}{name}");
                let answer = client.get_object().bucket(bucket).key(&key).send().await;
                let object = match answer {
                    Ok(object) => object,
                    Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                        return Ok(None);
                    }
                    Err(e) => return Err(s3_error(endpoint, "GetObject", bucket, &key, &e)),
                };
                let bytes = object.body.collect().await.map_err(|e| {
                    StoreError::S3(format!("reading s3://{bucket}/{key} failed: {e}"))
                })?;
                Ok(Some(bytes.into_bytes().to_vec()))
            }
        }
    }

    pub async fn write(&self, name: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        match self {
            BlobStore::Fs { dir } => {
                let path = dir.join(name);
                let io = |source| StoreError::Io {
                    path: path.display().to_string(),
                    source,
                };
                // Snapshots hold tenants' data: folders are created 0700 and
                // blobs 0600, as local mode's data folder is (issue 33), so
                // no other user of the machine can read them.
                if let Some(parent) = path.parent() {
                    let mut folders = tokio::fs::DirBuilder::new();
                    folders.recursive(true);
                    #[cfg(unix)]
                    folders.mode(0o700);
                    folders.create(parent).await.map_err(io)?;
                }
                // Written aside and renamed into place, so a cluster reading
                // the same folder never sees half a blob.
                let temp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
                let mut options = tokio::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                options.mode(0o600);
                let written = async {
                    let mut file = options.open(&temp).await?;
                    file.write_all(&bytes).await?;
                    file.flush().await
                }
                .await;
                if let Err(e) = written {
                    let _ = tokio::fs::remove_file(&temp).await;
                    return Err(io(e));
                }
                tokio::fs::rename(&temp, &path).await.map_err(io)
            }
            BlobStore::Unreachable { reason, .. } => Err(StoreError::S3(reason.clone())),
            BlobStore::S3 {
                client,
                endpoint,
                bucket,
                prefix,
            } => {
                let key = format!("{prefix}{name}");
                client
                    .put_object()
                    .bucket(bucket)
                    .key(&key)
                    .content_type("application/json")
                    .body(ByteStream::from(bytes))
                    .send()
                    .await
                    .map_err(|e| s3_error(endpoint, "PutObject", bucket, &key, &e))?;
                Ok(())
            }
        }
    }

    /// Deleting a blob that is already gone is not an error.
    pub async fn delete(&self, name: &str) -> Result<(), StoreError> {
        match self {
            BlobStore::Fs { dir } => {
                let path = dir.join(name);
                match tokio::fs::remove_file(&path).await {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(source) => Err(StoreError::Io {
                        path: path.display().to_string(),
                        source,
                    }),
                }
            }
            BlobStore::Unreachable { reason, .. } => Err(StoreError::S3(reason.clone())),
            BlobStore::S3 {
                client,
                endpoint,
                bucket,
                prefix,
            } => {
                let key = format!("{prefix}{name}");
                client
                    .delete_object()
                    .bucket(bucket)
                    .key(&key)
                    .send()
                    .await
                    .map_err(|e| s3_error(endpoint, "DeleteObject", bucket, &key, &e))?;
                Ok(())
            }
        }
    }

    /// Whether the repository's container is there at all: the folder, or
    /// the bucket. Read-only verification checks only this.
    pub async fn container_exists(&self) -> Result<bool, StoreError> {
        match self {
            BlobStore::Fs { dir } => Ok(tokio::fs::metadata(dir).await.is_ok_and(|m| m.is_dir())),
            BlobStore::Unreachable { reason, .. } => Err(StoreError::S3(reason.clone())),
            BlobStore::S3 {
                client,
                endpoint,
                bucket,
                ..
            } => match client.head_bucket().bucket(bucket).send().await {
                Ok(_) => Ok(true),
                Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
                Err(e) => Err(s3_error(endpoint, "HeadBucket", bucket, "", &e)),
            },
        }
    }
}

/// What went wrong with an S3 request, said the way an operator reads it:
/// a store that cannot be reached names its endpoint and why ("connection
/// refused to http://127.0.0.1:9"); a store that answered gives its answer.
fn s3_error<E, R>(
    endpoint: &str,
    operation: &str,
    bucket: &str,
    key: &str,
    error: &aws_sdk_s3::error::SdkError<E, R>,
) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    use aws_sdk_s3::error::SdkError;
    let detail = aws_sdk_s3::error::DisplayErrorContext(error).to_string();
    let cause = match error {
        SdkError::DispatchFailure(_) => {
            format!("{} to {endpoint}", connection_failure(error, &detail))
        }
        SdkError::TimeoutError(_) => format!("timed out talking to {endpoint}"),
        _ => detail,
    };
    StoreError::S3(format!("{operation} s3://{bucket}/{key} failed: {cause}"))
}

/// Why a connection failed, from the I/O error at the bottom of the chain
/// (or, when a layer hid it, from the text).
fn connection_failure(error: &(dyn std::error::Error + 'static), detail: &str) -> String {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                std::io::ErrorKind::TimedOut => "connection timed out".to_string(),
                _ => format!("connection failed ({io})"),
            };
        }
        next = e.source();
    }
    let lowered = detail.to_ascii_lowercase();
    if lowered.contains("connection refused") {
        "connection refused".to_string()
    } else if lowered.contains("dns error") || lowered.contains("failed to lookup") {
        "unknown host".to_string()
    } else {
        format!("connection failed ({detail})")
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &std::path::Path) -> std::io::Result<u32> {
        Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
    }

    /// Issue 33: an `fs` repository's blobs and the folders made for them
    /// are the user's alone (they were 0644 and 0755).
    #[tokio::test]
    async fn fs_blobs_are_written_0600_in_folders_0700() -> Result<(), Box<dyn std::error::Error>> {
        let root = tempfile::tempdir()?;
        let dir = root.path().join("repo");
        let store = BlobStore::Fs { dir: dir.clone() };
        store.write("indices/abc/0/__blob", b"{}".to_vec()).await?;
        store.write("index-0", b"{}".to_vec()).await?;
        assert_eq!(store.read("index-0").await?, Some(b"{}".to_vec()));
        for folder in [&dir, &dir.join("indices"), &dir.join("indices/abc/0")] {
            assert_eq!(mode(folder)?, 0o700, "{}", folder.display());
        }
        for file in [dir.join("indices/abc/0/__blob"), dir.join("index-0")] {
            assert_eq!(mode(&file)?, 0o600, "{}", file.display());
        }
        // Nothing is left aside.
        let names: Vec<_> = std::fs::read_dir(&dir)?.collect::<Result<_, _>>()?;
        assert_eq!(names.len(), 2, "{names:?}");
        Ok(())
    }
}
