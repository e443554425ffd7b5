//! Local mode's S3-compatible store: served on loopback so that the
//! walk-through (and any S3 repository) works on one machine with nothing
//! else installed. Its keys are made once and kept in `s3.env` under the
//! data folder, with the endpoint and bucket, for a shell to source:
//! repositories registered with them keep working across restarts.

use floe_s3_local::{Credentials, LocalS3, LocalS3Config, RunningS3};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The bucket local mode makes for snapshots.
pub const BUCKET: &str = "floe-snapshots";

#[derive(Debug, thiserror::Error)]
pub enum LocalS3Error {
    #[error("the local S3 store could not start on {addr}: {source}")]
    Start {
        addr: SocketAddr,
        source: floe_s3_local::S3LocalError,
    },
    #[error("{path}: {source}")]
    Keys {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Starts the store on `addr` with objects under `data_dir/s3`, and writes
/// `data_dir/s3.env`.
pub async fn start(data_dir: &Path, addr: SocketAddr) -> Result<RunningS3, LocalS3Error> {
    let env_file = data_dir.join("s3.env");
    let keys = |source| LocalS3Error::Keys {
        path: env_file.clone(),
        source,
    };
    let credentials = match std::fs::read_to_string(&env_file) {
        Ok(text) => kept_keys(&text).unwrap_or_else(Credentials::generate),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Credentials::generate(),
        Err(e) => return Err(keys(e)),
    };
    let config = LocalS3Config::new(data_dir.join("s3"), credentials.clone()).with_bucket(BUCKET);
    let running = LocalS3::start(config.with_listen(addr))
        .await
        .map_err(|source| LocalS3Error::Start { addr, source })?;
    let text = format!(
        "# Local mode's S3-compatible store (written by floe-local at each start).\n\
         S3_ENDPOINT={}\nS3_BUCKET={BUCKET}\nS3_ACCESS_KEY={}\nS3_SECRET_KEY={}\n",
        running.addr(),
        credentials.access_key_id,
        credentials.secret_access_key
    );
    write_private(&env_file, &text).map_err(keys)?;
    Ok(running)
}

/// The keys of an earlier start, if the file holds both.
fn kept_keys(text: &str) -> Option<Credentials> {
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    Some(Credentials::new(
        value("S3_ACCESS_KEY")?,
        value("S3_SECRET_KEY")?,
    ))
}

/// Writes `text` readable by its owner only (it holds a secret key).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("env.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_are_kept_across_starts_and_the_file_is_private()
    -> Result<(), Box<dyn std::error::Error>> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir()?;
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let first = start(dir.path(), loopback).await?;
        let text = std::fs::read_to_string(dir.path().join("s3.env"))?;
        assert!(
            text.contains(&format!("S3_ENDPOINT={}", first.addr())),
            "{text}"
        );
        assert!(text.contains("S3_BUCKET=floe-snapshots"));
        let mode = std::fs::metadata(dir.path().join("s3.env"))?
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        first.shutdown().await?;
        let second = start(dir.path(), loopback).await?;
        let again = std::fs::read_to_string(dir.path().join("s3.env"))?;
        let key = |t: &str| kept_keys(t).map(|c| (c.access_key_id, c.secret_access_key));
        assert_eq!(key(&text), key(&again), "the same keys");
        second.shutdown().await?;
        Ok(())
    }
}
