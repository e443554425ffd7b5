//! Buckets and objects as files:
//!
//! ```text
//! root/<bucket>/<key>                    the object's bytes, nothing else
//! root/.floe-s3/meta/<bucket>/<key>      its ETag, headers, checksum (JSON)
//! root/.floe-s3/uploads/<upload id>/     a pending multipart upload's parts
//! root/.floe-s3/tmp/                     files being written
//! ```
//!
//! Every write goes to `tmp/` and is renamed into place, so a reader (or a
//! restart after a crash) sees the old object or the new one, never half of
//! one. The metadata file records the identity (inode, size, mtime) of the
//! data file it describes; when they disagree (a crash between the two
//! renames, or a file copied into the folder by hand) the metadata is
//! rebuilt from the data: the ETag is recomputed and the headers are lost,
//! which S3 clients tolerate.
//!
//! Keys map to paths segment by segment, so a key can't both be an object
//! and a "folder" of others (`a` and `a/b`); S3 allows it, Elasticsearch and
//! the CLI never do it, and this store refuses the second with 400.

use crate::checksum::ChecksumAlgorithm;
use crate::error::{ErrorCode, S3Error};
use chrono::{DateTime, Utc};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

const STATE_DIR: &str = ".floe-s3";
/// S3's limits.
pub(crate) const MAX_KEY_BYTES: usize = 1024;
pub(crate) const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
pub(crate) const MAX_PART_NUMBER: u32 = 10_000;

/// Checks a bucket name against S3's rules for new buckets; besides being
/// what clients expect, the rules keep names from ever being `.`, `..` or
/// the state folder.
pub(crate) fn check_bucket_name(name: &str) -> Result<(), &'static str> {
    if !(3..=63).contains(&name.len()) {
        return Err("must be 3 to 63 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
    {
        return Err("may hold only lower-case letters, digits, dots and hyphens");
    }
    let first_last = [name.as_bytes()[0], name.as_bytes()[name.len() - 1]];
    if !first_last
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err("must begin and end with a letter or a digit");
    }
    if name.contains("..") {
        return Err("must not hold two adjacent dots");
    }
    Ok(())
}

pub(crate) fn bucket_name_error(name: &str, reason: &str) -> S3Error {
    S3Error::new(
        ErrorCode::InvalidBucketName,
        format!("The specified bucket is not valid: {reason}"),
    )
    .with_resource(format!("/{name}"))
}

/// Refuses keys that are not a relative path of plain segments: they could
/// name something outside the bucket's folder (`..`, an absolute path) or
/// could not be stored as files (empty segments, NUL).
pub(crate) fn check_key(key: &str) -> Result<(), S3Error> {
    let refuse = |why: &str| {
        Err(S3Error::new(
            ErrorCode::InvalidArgument,
            format!("Invalid object key {key:?}: {why}"),
        ))
    };
    if key.len() > MAX_KEY_BYTES {
        return Err(S3Error::new(
            ErrorCode::KeyTooLongError,
            "Your key is too long",
        ));
    }
    if key.is_empty() {
        return refuse("empty");
    }
    if key.starts_with('/') {
        return refuse("absolute paths are not accepted");
    }
    if key.contains('\0') {
        return refuse("NUL is not accepted");
    }
    if cfg!(windows) && (key.contains('\\') || key.contains(':')) {
        return refuse("\\ and : are not accepted on Windows");
    }
    for segment in key.split('/') {
        match segment {
            "" => return refuse("empty path segments (// or a trailing /) are not supported"),
            "." | ".." => return refuse(". and .. segments are not accepted"),
            s if s.len() > 255 => {
                return Err(S3Error::new(
                    ErrorCode::KeyTooLongError,
                    "A segment of your key is longer than 255 bytes",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The headers S3 stores with an object and returns on GET and HEAD.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct ObjectHeaders {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content_disposition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content_language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_control: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expires: Option<String>,
    /// `x-amz-meta-*`, names without the prefix.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) user: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct StoredChecksum {
    pub(crate) algorithm: ChecksumAlgorithm,
    /// Base64, as in the `x-amz-checksum-*` header.
    pub(crate) value: String,
}

/// Which data file a metadata record describes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
struct Identity {
    size: u64,
    inode: u64,
    mtime_ns: u64,
}

impl Identity {
    fn of(metadata: &fs::Metadata) -> Identity {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(metadata);
        #[cfg(not(unix))]
        let inode = 0;
        let mtime_ns = metadata
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Identity {
            size: metadata.len(),
            inode,
            mtime_ns,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct MetaRecord {
    /// Without quotes: hex MD5, or `hex-N` for a multipart object.
    etag: String,
    #[serde(default)]
    headers: ObjectHeaders,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checksum: Option<StoredChecksum>,
    identity: Identity,
}

/// What a write stores besides the bytes.
pub(crate) struct NewObject {
    /// Without quotes.
    pub(crate) etag: String,
    pub(crate) headers: ObjectHeaders,
    pub(crate) checksum: Option<StoredChecksum>,
}

/// An object as GET, HEAD and listings see it.
#[derive(Debug, Clone)]
pub(crate) struct ObjectInfo {
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    pub(crate) etag: String,
    pub(crate) last_modified: DateTime<Utc>,
    pub(crate) headers: ObjectHeaders,
    pub(crate) checksum: Option<StoredChecksum>,
}

impl ObjectInfo {
    /// As S3 sends it: in double quotes.
    pub(crate) fn quoted_etag(&self) -> String {
        format!("\"{}\"", self.etag)
    }
}

/// An object found by a listing.
pub(crate) struct Listed {
    pub(crate) key: String,
    pub(crate) info: ObjectInfo,
}

/// A pending multipart upload, as `CreateMultipartUpload` recorded it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct UploadRecord {
    pub(crate) bucket: String,
    pub(crate) key: String,
    pub(crate) headers: ObjectHeaders,
    pub(crate) initiated: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartRecord {
    etag: String,
    size: u64,
}

/// The file an upload is streamed into before it is renamed into place;
/// removed when dropped unless it was.
pub(crate) struct TempFile {
    path: PathBuf,
    file: Option<tokio::fs::File>,
    kept: bool,
}

impl TempFile {
    pub(crate) async fn write(&mut self, data: &[u8]) -> Result<(), S3Error> {
        use tokio::io::AsyncWriteExt;
        let Some(file) = &mut self.file else {
            return Err(S3Error::internal(
                "writing a temporary file",
                "already closed",
            ));
        };
        file.write_all(data)
            .await
            .map_err(|e| S3Error::internal("writing a temporary file", e))
    }

    /// Flushes the data to disk, so that the rename that follows never
    /// publishes a file whose bytes are still only in memory.
    async fn close(&mut self) -> Result<(), S3Error> {
        use tokio::io::AsyncWriteExt;
        if let Some(mut file) = self.file.take() {
            file.flush()
                .await
                .map_err(|e| S3Error::internal("flushing a temporary file", e))?;
            file.sync_all()
                .await
                .map_err(|e| S3Error::internal("syncing a temporary file", e))?;
        }
        Ok(())
    }
}

impl TempFile {
    /// The file was renamed into place: nothing to clean up.
    fn keep(&mut self) {
        self.kept = true;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.kept {
            // A failed or cancelled upload; nothing refers to the file.
            let _ = fs::remove_file(&self.path);
        }
    }
}

struct Paths {
    root: PathBuf,
    meta: PathBuf,
    uploads: PathBuf,
    tmp: PathBuf,
}

/// The folder, shared by all requests.
#[derive(Clone)]
pub(crate) struct Store {
    paths: Arc<Paths>,
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, S3Error> + Send + 'static,
) -> Result<T, S3Error> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| S3Error::internal("a storage task failed", e))?
}

fn io_error(context: &str, path: &Path, error: io::Error) -> S3Error {
    S3Error::internal(context, format!("{}: {error}", path.display()))
}

fn is_not_found(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn key_conflict(key: &str) -> S3Error {
    S3Error::new(
        ErrorCode::InvalidArgument,
        format!(
            "Object key {key:?} conflicts with an existing key: this store keeps keys as files, so a key cannot also be the folder of other keys"
        ),
    )
}

fn md5_of_file(path: &Path) -> io::Result<String> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Md5::new();
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn modified(metadata: &fs::Metadata) -> DateTime<Utc> {
    metadata
        .modified()
        .map(DateTime::<Utc>::from)
        .unwrap_or_else(|_| Utc::now())
}

/// Folders hold tenants' snapshots: they are created 0700 and files 0600,
/// as local mode's data folder is (issue 33), so no other user of the
/// machine can read them. Modes are a unix notion; elsewhere the defaults
/// stay.
fn private_dir_builder(recursive: bool) -> fs::DirBuilder {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(recursive);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
}

/// `fs::create_dir_all`, new folders 0700.
fn create_private_dirs(dir: &Path) -> io::Result<()> {
    private_dir_builder(true).create(dir)
}

/// `fs::write` of a new file, 0600.
fn write_private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// Writes `bytes` to `path` through a temporary file and a rename.
fn write_atomically(tmp_dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        create_private_dirs(parent)?;
    }
    let temp = tmp_dir.join(format!("{}.json", uuid::Uuid::new_v4().simple()));
    write_private_file(&temp, bytes)?;
    fs::rename(&temp, path).inspect_err(|_| {
        let _ = fs::remove_file(&temp);
    })
}

/// Removes empty folders from `dir` up to (not including) `stop`, so that
/// deleted keys leave no empty "folders" behind.
fn prune_empty_dirs(mut dir: &Path, stop: &Path) {
    while dir != stop && dir.starts_with(stop) {
        if fs::remove_dir(dir).is_err() {
            break;
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => break,
        }
    }
}

impl Store {
    /// Creates the state folders; files left in `tmp/` by a crash are
    /// removed.
    pub(crate) fn open(root: &Path) -> io::Result<Store> {
        create_private_dirs(root)?;
        let state = root.join(STATE_DIR);
        let paths = Paths {
            root: root.to_path_buf(),
            meta: state.join("meta"),
            uploads: state.join("uploads"),
            tmp: state.join("tmp"),
        };
        match fs::remove_dir_all(&paths.tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        for dir in [&paths.meta, &paths.uploads, &paths.tmp] {
            create_private_dirs(dir)?;
        }
        Ok(Store {
            paths: Arc::new(paths),
        })
    }

    fn bucket_dir(&self, bucket: &str) -> PathBuf {
        self.paths.root.join(bucket)
    }

    fn meta_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.paths.meta.join(bucket).join(key)
    }

    fn upload_dir(&self, upload_id: &str) -> Result<PathBuf, S3Error> {
        // The id comes from the client and becomes a path: only ids this
        // store could have made are looked up.
        if upload_id.len() == 32 && upload_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(self.paths.uploads.join(upload_id))
        } else {
            Err(S3Error::no_such_upload(upload_id))
        }
    }

    /// Creates the bucket if missing; used at start.
    pub(crate) fn ensure_bucket_sync(&self, bucket: &str) -> io::Result<()> {
        create_private_dirs(&self.bucket_dir(bucket))
    }

    pub(crate) async fn create_bucket(&self, bucket: &str) -> Result<(), S3Error> {
        let dir = self.bucket_dir(bucket);
        let name = bucket.to_string();
        blocking(move || match private_dir_builder(false).create(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(S3Error::new(
                ErrorCode::BucketAlreadyOwnedByYou,
                "Your previous request to create the named bucket succeeded and you already own it.",
            )
            .with_resource(format!("/{name}"))),
            Err(e) => Err(io_error("creating a bucket", &dir, e)),
        })
        .await
    }

    /// `NoSuchBucket` unless the bucket exists.
    pub(crate) async fn check_bucket(&self, bucket: &str) -> Result<(), S3Error> {
        let dir = self.bucket_dir(bucket);
        match tokio::fs::metadata(&dir).await {
            Ok(m) if m.is_dir() => Ok(()),
            _ => Err(S3Error::no_such_bucket(bucket)),
        }
    }

    pub(crate) async fn delete_bucket(&self, bucket: &str) -> Result<(), S3Error> {
        self.check_bucket(bucket).await?;
        let dir = self.bucket_dir(bucket);
        let meta = self.paths.meta.join(bucket);
        let name = bucket.to_string();
        blocking(move || {
            let mut entries =
                fs::read_dir(&dir).map_err(|e| io_error("reading a bucket", &dir, e))?;
            if entries.next().is_some() {
                return Err(S3Error::new(
                    ErrorCode::BucketNotEmpty,
                    "The bucket you tried to delete is not empty",
                )
                .with_resource(format!("/{name}")));
            }
            fs::remove_dir(&dir).map_err(|e| io_error("deleting a bucket", &dir, e))?;
            match fs::remove_dir_all(&meta) {
                Ok(()) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(io_error("deleting a bucket's metadata", &meta, e)),
            }
        })
        .await
    }

    /// Bucket names and creation times, sorted by name.
    pub(crate) async fn list_buckets(&self) -> Result<Vec<(String, DateTime<Utc>)>, S3Error> {
        let root = self.paths.root.clone();
        blocking(move || {
            let mut buckets = Vec::new();
            let entries = fs::read_dir(&root).map_err(|e| io_error("listing buckets", &root, e))?;
            for entry in entries.flatten() {
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let Ok(metadata) = entry.metadata() else {
                    continue;
                };
                if metadata.is_dir() && check_bucket_name(&name).is_ok() {
                    let created = metadata
                        .created()
                        .or_else(|_| metadata.modified())
                        .map(DateTime::<Utc>::from)
                        .unwrap_or_else(|_| Utc::now());
                    buckets.push((name, created));
                }
            }
            buckets.sort();
            Ok(buckets)
        })
        .await
    }

    pub(crate) async fn temp_file(&self) -> Result<TempFile, S3Error> {
        let path = self
            .paths
            .tmp
            .join(uuid::Uuid::new_v4().simple().to_string());
        let mut options = tokio::fs::OpenOptions::new();
        options.write(true).create_new(true);
        // 0600, as every file of the store (see `write_private_file`).
        #[cfg(unix)]
        options.mode(0o600);
        let file = options
            .open(&path)
            .await
            .map_err(|e| io_error("creating a temporary file", &path, e))?;
        Ok(TempFile {
            path,
            file: Some(file),
            kept: false,
        })
    }

    /// Publishes `temp` as the object; `if_absent` makes it fail with 412
    /// when the key exists (`If-None-Match: *`), atomically.
    pub(crate) async fn commit_object(
        &self,
        bucket: &str,
        key: &str,
        mut temp: TempFile,
        object: NewObject,
        if_absent: bool,
    ) -> Result<ObjectInfo, S3Error> {
        temp.close().await?;
        let data_path = self.bucket_dir(bucket).join(key);
        let meta_path = self.meta_path(bucket, key);
        let tmp_dir = self.paths.tmp.clone();
        let key = key.to_string();
        blocking(move || {
            let metadata = fs::metadata(&temp.path)
                .map_err(|e| io_error("reading a temporary file", &temp.path, e))?;
            let identity = Identity::of(&metadata);
            publish(&temp.path, &data_path, &key, if_absent)?;
            temp.keep();
            let record = MetaRecord {
                etag: object.etag,
                headers: object.headers,
                checksum: object.checksum,
                identity,
            };
            let json = serde_json::to_vec(&record)
                .map_err(|e| S3Error::internal("encoding object metadata", e))?;
            write_atomically(&tmp_dir, &meta_path, &json)
                .map_err(|e| io_error("writing object metadata", &meta_path, e))?;
            Ok(ObjectInfo {
                path: data_path,
                size: identity.size,
                etag: record.etag,
                last_modified: modified(&metadata),
                headers: record.headers,
                checksum: record.checksum,
            })
        })
        .await
    }

    /// The object, or `NoSuchKey`.
    pub(crate) async fn object(&self, bucket: &str, key: &str) -> Result<ObjectInfo, S3Error> {
        self.check_bucket(bucket).await?;
        let data_path = self.bucket_dir(bucket).join(key);
        let meta_path = self.meta_path(bucket, key);
        let tmp_dir = self.paths.tmp.clone();
        let (bucket, key) = (bucket.to_string(), key.to_string());
        blocking(move || {
            let metadata = match fs::symlink_metadata(&data_path) {
                Ok(m) if m.is_file() => m,
                Ok(_) => return Err(S3Error::no_such_key(&bucket, &key)),
                Err(e) if is_not_found(&e) => return Err(S3Error::no_such_key(&bucket, &key)),
                Err(e) => return Err(io_error("reading an object", &data_path, e)),
            };
            load_info(&tmp_dir, data_path, &meta_path, &metadata)
        })
        .await
    }

    pub(crate) async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), S3Error> {
        let bucket_dir = self.bucket_dir(bucket);
        let data_path = bucket_dir.join(key);
        let meta_root = self.paths.meta.join(bucket);
        let meta_path = meta_root.join(key);
        blocking(move || {
            // Deleting a key that is not there succeeds, as in S3; a
            // "folder" is not an object either.
            match fs::symlink_metadata(&data_path) {
                Ok(m) if m.is_dir() => return Ok(()),
                _ => {}
            }
            match fs::remove_file(&data_path) {
                Ok(()) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(io_error("deleting an object", &data_path, e)),
            }
            match fs::remove_file(&meta_path) {
                Ok(()) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(io_error("deleting object metadata", &meta_path, e)),
            }
            if let Some(parent) = data_path.parent() {
                prune_empty_dirs(parent, &bucket_dir);
            }
            if let Some(parent) = meta_path.parent() {
                prune_empty_dirs(parent, &meta_root);
            }
            Ok(())
        })
        .await
    }

    /// Every object whose key starts with `prefix`, sorted by key (bytes,
    /// as S3 sorts).
    pub(crate) async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<Listed>, S3Error> {
        self.check_bucket(bucket).await?;
        let bucket_dir = self.bucket_dir(bucket);
        let meta_root = self.paths.meta.join(bucket);
        let tmp_dir = self.paths.tmp.clone();
        let prefix = prefix.to_string();
        blocking(move || {
            let mut found = Vec::new();
            // Start at the deepest folder the prefix names. The prefix comes
            // from the client: when its folder part is not a valid key path
            // no key can match it, and walking it could leave the bucket.
            let (start_key, start_dir) = match prefix.rsplit_once('/') {
                Some((dir, _)) => {
                    if check_key(dir).is_err() {
                        return Ok(found);
                    }
                    (format!("{dir}/"), bucket_dir.join(dir))
                }
                None => (String::new(), bucket_dir.clone()),
            };
            let mut stack = vec![(start_dir, start_key)];
            while let Some((dir, base)) = stack.pop() {
                let entries = match fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) if is_not_found(&e) => continue,
                    Err(e) => return Err(io_error("listing a bucket", &dir, e)),
                };
                for entry in entries.flatten() {
                    let Ok(name) = entry.file_name().into_string() else {
                        continue;
                    };
                    let Ok(file_type) = entry.file_type() else {
                        continue;
                    };
                    let key = format!("{base}{name}");
                    if file_type.is_dir() {
                        let folder = format!("{key}/");
                        if folder.starts_with(&prefix) || prefix.starts_with(&folder) {
                            stack.push((entry.path(), folder));
                        }
                    } else if file_type.is_file() && key.starts_with(&prefix) {
                        // Only keys this store would accept are listed, so
                        // every listed key can be read back.
                        if check_key(&key).is_err() {
                            continue;
                        }
                        let Ok(metadata) = entry.metadata() else {
                            continue;
                        };
                        let info =
                            load_info(&tmp_dir, entry.path(), &meta_root.join(&key), &metadata)?;
                        found.push(Listed { key, info });
                    }
                }
            }
            found.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(found)
        })
        .await
    }

    pub(crate) async fn create_upload(&self, record: UploadRecord) -> Result<String, S3Error> {
        let upload_id = uuid::Uuid::new_v4().simple().to_string();
        let dir = self.upload_dir(&upload_id)?;
        let tmp_dir = self.paths.tmp.clone();
        blocking(move || {
            create_private_dirs(&dir).map_err(|e| io_error("creating an upload", &dir, e))?;
            let json = serde_json::to_vec(&record)
                .map_err(|e| S3Error::internal("encoding an upload", e))?;
            let path = dir.join("upload.json");
            write_atomically(&tmp_dir, &path, &json)
                .map_err(|e| io_error("writing an upload", &path, e))?;
            Ok(upload_id)
        })
        .await
    }

    /// The upload, if it exists and is for this bucket and key.
    pub(crate) async fn upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<UploadRecord, S3Error> {
        let path = self.upload_dir(upload_id)?.join("upload.json");
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(e) if is_not_found(&e) => return Err(S3Error::no_such_upload(upload_id)),
            Err(e) => return Err(io_error("reading an upload", &path, e)),
        };
        let record: UploadRecord = serde_json::from_slice(&bytes)
            .map_err(|e| S3Error::internal("decoding an upload", e))?;
        if record.bucket != bucket || record.key != key {
            return Err(S3Error::no_such_upload(upload_id));
        }
        Ok(record)
    }

    pub(crate) async fn commit_part(
        &self,
        upload_id: &str,
        part_number: u32,
        mut temp: TempFile,
        etag: String,
    ) -> Result<(), S3Error> {
        temp.close().await?;
        let dir = self.upload_dir(upload_id)?;
        let tmp_dir = self.paths.tmp.clone();
        let upload_id = upload_id.to_string();
        blocking(move || {
            let size = fs::metadata(&temp.path)
                .map_err(|e| io_error("reading a temporary file", &temp.path, e))?
                .len();
            let data = dir.join(format!("{part_number:05}"));
            match fs::rename(&temp.path, &data) {
                Ok(()) => temp.keep(),
                // Aborted meanwhile.
                Err(e) if is_not_found(&e) => return Err(S3Error::no_such_upload(&upload_id)),
                Err(e) => return Err(io_error("storing a part", &data, e)),
            }
            let json = serde_json::to_vec(&PartRecord { etag, size })
                .map_err(|e| S3Error::internal("encoding a part", e))?;
            let meta = dir.join(format!("{part_number:05}.json"));
            write_atomically(&tmp_dir, &meta, &json)
                .map_err(|e| io_error("storing a part", &meta, e))
        })
        .await
    }

    /// Concatenates the listed parts (number, quoted or bare ETag) into a
    /// temporary file; returns it with the multipart ETag (MD5 of the parts'
    /// MD5s, `-N`).
    pub(crate) async fn assemble_parts(
        &self,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<(TempFile, String), S3Error> {
        let dir = self.upload_dir(upload_id)?;
        let mut md5s = Md5::new();
        let mut files = Vec::with_capacity(parts.len());
        for (i, (number, etag)) in parts.iter().enumerate() {
            let invalid_part = || {
                S3Error::new(
                    ErrorCode::InvalidPart,
                    format!(
                        "One or more of the specified parts could not be found or its entity tag did not match (part {number})."
                    ),
                )
            };
            let meta = dir.join(format!("{number:05}.json"));
            let record: PartRecord = match tokio::fs::read(&meta).await {
                Ok(bytes) => serde_json::from_slice(&bytes)
                    .map_err(|e| S3Error::internal("decoding a part", e))?,
                Err(e) if is_not_found(&e) => return Err(invalid_part()),
                Err(e) => return Err(io_error("reading a part", &meta, e)),
            };
            if record.etag != etag.trim().trim_matches('"') {
                return Err(invalid_part());
            }
            if i + 1 < parts.len() && record.size < MIN_PART_SIZE {
                return Err(S3Error::new(
                    ErrorCode::EntityTooSmall,
                    format!(
                        "Your proposed upload is smaller than the minimum allowed object size (part {number} is {} bytes; all but the last part must be at least 5 MiB).",
                        record.size
                    ),
                ));
            }
            let mut digest = [0u8; 16];
            hex::decode_to_slice(&record.etag, &mut digest)
                .map_err(|e| S3Error::internal("decoding a part's ETag", e))?;
            md5s.update(digest);
            files.push((dir.join(format!("{number:05}")), record.size));
        }
        let mut temp = self.temp_file().await?;
        for (path, size) in files {
            let mut source = tokio::fs::File::open(&path)
                .await
                .map_err(|e| io_error("reading a part", &path, e))?;
            let Some(target) = &mut temp.file else {
                return Err(S3Error::internal("assembling parts", "file closed"));
            };
            let copied = tokio::io::copy(&mut source, target)
                .await
                .map_err(|e| io_error("assembling parts", &path, e))?;
            if copied != size {
                return Err(S3Error::internal("assembling parts", "a part changed size"));
            }
        }
        let etag = format!("{}-{}", hex::encode(md5s.finalize()), parts.len());
        Ok((temp, etag))
    }

    pub(crate) async fn remove_upload(&self, upload_id: &str) -> Result<(), S3Error> {
        let dir = self.upload_dir(upload_id)?;
        let upload_id = upload_id.to_string();
        blocking(move || match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Err(S3Error::no_such_upload(&upload_id)),
            Err(e) => Err(io_error("removing an upload", &dir, e)),
        })
        .await
    }
}

/// Renames `temp` to `data_path`, creating folders, mapping the ways a key
/// can clash with a folder to 400.
fn publish(temp: &Path, data_path: &Path, key: &str, if_absent: bool) -> Result<(), S3Error> {
    let place = || -> io::Result<()> {
        if let Some(parent) = data_path.parent() {
            create_private_dirs(parent)?;
        }
        if if_absent {
            // A hard link fails when the target exists, which makes
            // "create only if absent" atomic; the temp name then goes.
            fs::hard_link(temp, data_path)?;
            let _ = fs::remove_file(temp);
            Ok(())
        } else {
            fs::rename(temp, data_path)
        }
    };
    // A concurrent delete may prune the folder between the two steps: one
    // retry covers it.
    let result = match place() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => place(),
        other => other,
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if if_absent && e.kind() == io::ErrorKind::AlreadyExists => Err(S3Error::new(
            ErrorCode::PreconditionFailed,
            "At least one of the pre-conditions you specified did not hold",
        )),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotADirectory
                    | io::ErrorKind::IsADirectory
                    | io::ErrorKind::AlreadyExists
                    | io::ErrorKind::DirectoryNotEmpty
            ) =>
        {
            Err(key_conflict(key))
        }
        Err(e) => Err(io_error("storing an object", data_path, e)),
    }
}

/// The metadata of a data file: its record when the record describes this
/// very file, else rebuilt from the bytes (and saved, best effort).
fn load_info(
    tmp_dir: &Path,
    data_path: PathBuf,
    meta_path: &Path,
    metadata: &fs::Metadata,
) -> Result<ObjectInfo, S3Error> {
    let identity = Identity::of(metadata);
    let record = fs::read(meta_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<MetaRecord>(&bytes).ok())
        .filter(|record| record.identity == identity);
    let record = match record {
        Some(record) => record,
        None => {
            let etag = md5_of_file(&data_path)
                .map_err(|e| io_error("hashing an object", &data_path, e))?;
            let record = MetaRecord {
                etag,
                headers: ObjectHeaders::default(),
                checksum: None,
                identity,
            };
            if let Ok(json) = serde_json::to_vec(&record)
                && let Err(error) = write_atomically(tmp_dir, meta_path, &json)
            {
                tracing::warn!(%error, path = %meta_path.display(), "floe-s3-local: could not save rebuilt metadata");
            }
            record
        }
    };
    Ok(ObjectInfo {
        path: data_path,
        size: identity.size,
        etag: record.etag,
        last_modified: modified(metadata),
        headers: record.headers,
        checksum: record.checksum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_could_leave_the_bucket_are_refused() {
        for key in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a//b",
            "a/",
            ".",
            "a/./b",
            "a\0b",
        ] {
            assert!(check_key(key).is_err(), "{key:?}");
        }
        for key in [
            "a",
            "a/b/c",
            "indices/x/0/__abc",
            "a..b",
            ".hidden",
            "sp ace/ü",
        ] {
            assert!(check_key(key).is_ok(), "{key:?}");
        }
        assert_eq!(
            check_key(&"k".repeat(1025)).err().map(|e| e.code),
            Some(ErrorCode::KeyTooLongError)
        );
    }

    #[test]
    fn bucket_names_follow_s3() {
        for name in ["floe-snapshots", "a.b-c", "abc", "x1y"] {
            assert!(check_bucket_name(name).is_ok(), "{name}");
        }
        for name in [
            "ab",
            "Upper",
            "-abc",
            "abc-",
            "a..b",
            ".floe-s3",
            "a_b",
            &"a".repeat(64),
        ] {
            assert!(check_bucket_name(name).is_err(), "{name}");
        }
    }

    /// Every folder and file an object write, its metadata and a multipart
    /// upload leave behind.
    #[cfg(unix)]
    fn modes(dir: &Path, out: &mut Vec<(PathBuf, u32)>) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            let metadata = fs::symlink_metadata(&path)?;
            out.push((path.clone(), metadata.permissions().mode() & 0o777));
            if metadata.is_dir() {
                modes(&path, out)?;
            }
        }
        Ok(())
    }

    /// Issue 33: the local S3 store's objects are tenants' snapshots, so
    /// its folders are 0700 and its files 0600 (they were 0755 and 0644).
    #[cfg(unix)]
    #[tokio::test]
    async fn objects_metadata_and_uploads_are_private_to_the_user()
    -> Result<(), Box<dyn std::error::Error>> {
        let root = tempfile::tempdir()?;
        let store = Store::open(&root.path().join("s3"))?;
        store.create_bucket("snapshots").await?;
        store.ensure_bucket_sync("started")?;
        let mut temp = store.temp_file().await?;
        temp.write(b"{}").await?;
        let object = NewObject {
            etag: "99914b932bd37a50b983c5e7c90ae93b".into(),
            headers: ObjectHeaders::default(),
            checksum: None,
        };
        store
            .commit_object("snapshots", "indices/x/0/__blob", temp, object, false)
            .await?;
        let upload = store
            .create_upload(UploadRecord {
                bucket: "snapshots".into(),
                key: "indices/y/big".into(),
                headers: ObjectHeaders::default(),
                initiated: Utc::now(),
            })
            .await?;
        let mut part = store.temp_file().await?;
        part.write(b"part").await?;
        store
            .commit_part(&upload, 1, part, "d41d8cd98f00b204e9800998ecf8427e".into())
            .await?;

        let mut found = Vec::new();
        modes(&root.path().join("s3"), &mut found)?;
        let (mut dirs, mut files) = (0, 0);
        for (path, mode) in &found {
            if path.is_dir() {
                dirs += 1;
                assert_eq!(*mode, 0o700, "{} is {mode:03o}", path.display());
            } else {
                files += 1;
                assert_eq!(*mode, 0o600, "{} is {mode:03o}", path.display());
            }
        }
        // The object, its metadata, the upload's record, the part and its record.
        assert!(files >= 5 && dirs >= 8, "{found:?}");
        Ok(())
    }
}
