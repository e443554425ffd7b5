use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rand::TryRngCore;
use rand::rngs::OsRng;

use crate::error::ConfigError;
use crate::verify::MIN_SECRET_LEN;

/// Anyone who can read the secret can mint tokens for any organization, and
/// anyone who can write it can swap in their own; so neither group nor
/// others may have any access.
const FORBIDDEN_MODE_BITS: u32 = 0o077;

/// Local mode: a 32-byte random HS256 secret kept in a file created with
/// mode 0600 (parent directories are created with 0700). An existing file is
/// reused, so tokens survive restarts, but refused if group or others can
/// access it or if it holds fewer than 32 bytes.
pub fn load_or_create_secret(path: &Path) -> Result<Vec<u8>, ConfigError> {
    // Two processes may start at once (the server and `floe-api token`);
    // whichever loses the race to create the file reads the winner's.
    for _ in 0..3 {
        if let Some(secret) = read_secret(path)? {
            return Ok(secret);
        }
        if let Some(secret) = create_secret(path)? {
            return Ok(secret);
        }
    }
    read_secret(path)?.ok_or_else(|| {
        ConfigError::io(
            path,
            io::Error::new(
                io::ErrorKind::NotFound,
                "the secret file keeps disappearing while it is being created",
            ),
        )
    })
}

/// `None` when the file does not exist.
fn read_secret(path: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ConfigError::io(path, e)),
    };
    // Metadata of the opened file, not the path: what is checked is what is
    // read, even if the path is swapped in between.
    let meta = file.metadata().map_err(|e| ConfigError::io(path, e))?;
    if !meta.is_file() {
        return Err(ConfigError::NotAFile { path: path.into() });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & FORBIDDEN_MODE_BITS != 0 {
        return Err(ConfigError::InsecurePermissions {
            path: path.into(),
            mode,
        });
    }
    let mut secret = Vec::with_capacity(MIN_SECRET_LEN);
    file.read_to_end(&mut secret)
        .map_err(|e| ConfigError::io(path, e))?;
    if secret.len() < MIN_SECRET_LEN {
        return Err(ConfigError::SecretFileTooShort {
            path: path.into(),
            len: secret.len(),
            min: MIN_SECRET_LEN,
        });
    }
    Ok(Some(secret))
}

/// `None` when another process created the file first.
///
/// The secret is written to a private temporary file and then hard-linked
/// into place: the link fails if the name exists, so a reader never sees a
/// half-written secret and a concurrent creator never overwrites one that is
/// already in use.
fn create_secret(path: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    let Some(file_name) = path.file_name() else {
        return Err(ConfigError::NotAFile { path: path.into() });
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| ConfigError::io(&dir, e))?;

    let mut secret = vec![0u8; MIN_SECRET_LEN];
    OsRng
        .try_fill_bytes(&mut secret)
        .map_err(|e| ConfigError::Random(e.to_string()))?;
    let nonce = OsRng
        .try_next_u64()
        .map_err(|e| ConfigError::Random(e.to_string()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".{nonce:016x}.tmp"));
    let tmp = dir.join(tmp_name);

    let written = write_private(&tmp, &secret);
    let linked = written.and_then(|()| fs::hard_link(&tmp, path));
    // Best effort: once linked the temporary name is redundant, and if
    // anything failed it is garbage; a leftover is harmless (mode 0600).
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(Some(secret)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(ConfigError::io(path, e)),
    }
}

fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}
