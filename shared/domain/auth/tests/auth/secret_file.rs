use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use floe_auth::{
    ConfigError, KeySource, Role, Verifier, VerifierConfig, issue_hs256, load_or_create_secret,
};

use crate::common::{AUDIENCE, ISSUER};

fn mode(path: &std::path::Path) -> u32 {
    fs::metadata(path)
        .expect("path exists")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn creates_a_private_secret_and_its_directories() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state/keys/auth.secret");
    let secret = load_or_create_secret(&path).expect("secret is created");
    assert_eq!(secret.len(), 32);
    assert_ne!(secret, vec![0u8; 32]);
    assert_eq!(fs::read(&path).expect("file written"), secret);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir.path().join("state/keys")), 0o700);
    // Nothing but the secret is left behind.
    let names: Vec<_> = fs::read_dir(dir.path().join("state/keys"))
        .expect("dir lists")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("auth.secret")]);
}

#[test]
fn reuses_an_existing_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("auth.secret");
    let first = load_or_create_secret(&path).expect("created");
    let second = load_or_create_secret(&path).expect("reused");
    assert_eq!(first, second);

    // A hand-made secret of any length from 32 bytes up is used as it is.
    let own = b"an operator's own secret, longer than 32 bytes".to_vec();
    fs::write(&path, &own).expect("overwrite");
    assert_eq!(load_or_create_secret(&path).expect("read"), own);
}

#[test]
fn refuses_a_secret_others_can_access() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("auth.secret");
    load_or_create_secret(&path).expect("created");
    for bad in [0o644, 0o640, 0o604, 0o620, 0o602, 0o660] {
        fs::set_permissions(&path, fs::Permissions::from_mode(bad)).expect("chmod");
        match load_or_create_secret(&path) {
            Err(ConfigError::InsecurePermissions { mode, .. }) => assert_eq!(mode, bad),
            other => panic!("mode {bad:o}: expected InsecurePermissions, got {other:?}"),
        }
    }
    let err = load_or_create_secret(&path).expect_err("still refused");
    assert!(err.to_string().contains("chmod 600"), "{err}");
    // Stricter than 0600 is fine.
    fs::set_permissions(&path, fs::Permissions::from_mode(0o400)).expect("chmod");
    assert!(load_or_create_secret(&path).is_ok());
}

#[test]
fn refuses_a_short_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("auth.secret");
    fs::write(&path, b"only sixteen byt").expect("write");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(matches!(
        load_or_create_secret(&path),
        Err(ConfigError::SecretFileTooShort {
            len: 16,
            min: 32,
            ..
        })
    ));
    // And it is not silently replaced: the operator has to look at it.
    assert_eq!(fs::read(&path).expect("still there"), b"only sixteen byt");
}

#[test]
fn refuses_a_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("auth.secret");
    fs::create_dir(&path).expect("mkdir");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).expect("chmod");
    assert!(matches!(
        load_or_create_secret(&path),
        Err(ConfigError::NotAFile { .. })
    ));
}

#[test]
fn concurrent_starts_agree_on_one_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("shared/auth.secret");
    let secrets: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| load_or_create_secret(&path).expect("loaded")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread finished"))
            .collect()
    });
    let on_disk = fs::read(&path).expect("file exists");
    assert!(secrets.iter().all(|s| *s == on_disk));
}

#[tokio::test]
async fn created_secret_signs_and_verifies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = load_or_create_secret(&dir.path().join("auth.secret")).expect("created");
    let token = issue_hs256(
        &secret,
        ISSUER,
        AUDIENCE,
        "admin",
        "platform",
        &[Role::PlatformAdmin],
        Duration::from_secs(60),
    )
    .expect("issued");
    let verifier = Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Hs256Secret(secret),
        leeway_secs: 5,
    })
    .expect("verifier");
    let principal = verifier.verify(&token).await.expect("verifies");
    assert!(principal.can_manage_platform());
}
