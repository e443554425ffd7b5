//! A Floe repository as Elasticsearch registers it (`PUT _snapshot/{name}`).

use floe_domain::repository::{Protocol, Repository, RepositorySettings};
use floe_elastic::RepositoryRegistration;
use serde_json::{Map, Value};

/// The registration of `repo` for the snapshots of `deployment_id`;
/// `readonly` for every cluster but that deployment's own (a clone reading
/// its source's snapshots).
///
/// Many deployments share one repository record, but Elasticsearch allows
/// one writing cluster per repository path: each deployment's snapshots go
/// under a path of its own, `{base_path}/{deployment_id}` on S3 and
/// `{location}/{deployment_id}` on a shared filesystem (as ECE keeps one
/// base path per cluster in its repository).
///
/// Credentials never go here: the nodes hold them in their keystore under
/// the S3 client `floe` (see `floe_nodeconfig::S3_CLIENT`), which the
/// registration names. `endpoint`, `protocol`, `path_style_access` and
/// `region` are S3 *client* settings in Elasticsearch, rendered into each
/// node's `elasticsearch.yml` with the same values; they are repeated here
/// because the simulated cluster has no per-node client configuration and
/// reads them from the repository, while Elasticsearch ignores them.
pub fn repository_registration(
    repo: &Repository,
    deployment_id: &str,
    readonly: bool,
) -> RepositoryRegistration {
    let mut settings = Map::new();
    let mut put = |key: &str, value: Value| {
        settings.insert(key.to_string(), value);
    };
    let (kind, snapshot_rate, restore_rate) = match &repo.settings {
        RepositorySettings::S3(s) => {
            put("client", Value::from(floe_nodeconfig::S3_CLIENT));
            put("bucket", Value::from(s.bucket.clone()));
            put(
                "base_path",
                Value::from(s3_base_path(s.base_path.as_deref(), deployment_id)),
            );
            if let Some(endpoint) = &s.endpoint {
                put("endpoint", Value::from(endpoint.clone()));
            }
            if let Some(protocol) = s.protocol {
                put(
                    "protocol",
                    Value::from(match protocol {
                        Protocol::Http => "http",
                        Protocol::Https => "https",
                    }),
                );
            }
            if let Some(path_style) = s.path_style_access {
                put("path_style_access", Value::from(path_style));
            }
            if let Some(region) = &s.region {
                put("region", Value::from(region.clone()));
            }
            if let Some(sse) = s.server_side_encryption {
                put("server_side_encryption", Value::from(sse));
            }
            if let Some(compress) = s.compress {
                put("compress", Value::from(compress));
            }
            if let Some(chunk_size) = &s.chunk_size {
                put("chunk_size", Value::from(chunk_size.clone()));
            }
            (
                "s3",
                s.max_snapshot_bytes_per_sec.clone(),
                s.max_restore_bytes_per_sec.clone(),
            )
        }
        RepositorySettings::Fs(f) => {
            put(
                "location",
                Value::from(fs_location(&f.location, deployment_id)),
            );
            if let Some(compress) = f.compress {
                put("compress", Value::from(compress));
            }
            (
                "fs",
                f.max_snapshot_bytes_per_sec.clone(),
                f.max_restore_bytes_per_sec.clone(),
            )
        }
    };
    if let Some(rate) = snapshot_rate {
        settings.insert("max_snapshot_bytes_per_sec".into(), Value::from(rate));
    }
    if let Some(rate) = restore_rate {
        settings.insert("max_restore_bytes_per_sec".into(), Value::from(rate));
    }
    let registration = RepositoryRegistration::new(kind, settings);
    if readonly {
        registration.read_only()
    } else {
        registration
    }
}

/// Where `repo` keeps the snapshots of `deployment_id`, as one string:
/// `s3://{bucket}/{base_path}` or `fs:{location}`. Each snapshot's record
/// keeps the place it was taken at, so that one taken before its
/// repository moved is never looked for, restored from or deleted at the
/// new place (where it is not, and its data would be left behind).
pub fn snapshot_place(repo: &Repository, deployment_id: &str) -> String {
    match &repo.settings {
        RepositorySettings::S3(s) => format!(
            "s3://{}/{}",
            s.bucket,
            s3_base_path(s.base_path.as_deref(), deployment_id)
        ),
        RepositorySettings::Fs(f) => format!("fs:{}", fs_location(&f.location, deployment_id)),
    }
}

/// The bucket and path where an S3 repository keeps the snapshots of
/// `deployment_id` when its nodes reach it with their own credentials (no
/// keys stored with the repository): what the node identity is granted.
/// `None` for a filesystem repository or one with keys of its own, whose
/// reach the identity does not decide.
pub fn instance_role_path(repo: &Repository, deployment_id: &str) -> Option<(String, String)> {
    match &repo.settings {
        RepositorySettings::S3(s) if s.access_key.is_none() => Some((
            s.bucket.clone(),
            s3_base_path(s.base_path.as_deref(), deployment_id),
        )),
        _ => None,
    }
}

/// A deployment's own path in an S3 repository: `{base_path}/{id}`.
fn s3_base_path(base_path: Option<&str>, deployment_id: &str) -> String {
    match base_path.map(|b| b.trim_matches('/')) {
        Some(b) if !b.is_empty() => format!("{b}/{deployment_id}"),
        _ => deployment_id.to_string(),
    }
}

/// A deployment's own folder in a shared filesystem repository.
fn fs_location(location: &str, deployment_id: &str) -> String {
    format!("{}/{deployment_id}", location.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_domain::repository::{FsSettings, S3Settings};
    use floe_domain::secret::Sealed;
    use serde_json::json;

    fn repo(settings: RepositorySettings) -> Repository {
        Repository {
            org: "acme".into(),
            name: "main".into(),
            settings,
            created: chrono::Utc::now(),
            updated: chrono::Utc::now(),
        }
    }

    #[test]
    fn s3_carries_bucket_client_and_throttles_but_never_credentials() {
        let r = repo(RepositorySettings::S3(S3Settings {
            bucket: "backups".into(),
            base_path: Some("prod/logs".into()),
            region: Some("eu-west-1".into()),
            endpoint: Some("flashblade.internal:443".into()),
            protocol: Some(Protocol::Https),
            path_style_access: Some(true),
            access_key: Some("AKIAEXAMPLEKEY".into()),
            secret_key: Some(Sealed::new("sealed-secret")),
            session_token: Some(Sealed::new("sealed-token")),
            server_side_encryption: Some(true),
            compress: Some(true),
            chunk_size: Some("1gb".into()),
            max_snapshot_bytes_per_sec: Some("150mb".into()),
            max_restore_bytes_per_sec: Some("0".into()),
            shared_across_organizations: false,
        }));
        let reg = repository_registration(&r, "d1", false);
        assert_eq!(reg.repository_type, "s3");
        assert!(!reg.readonly);
        assert_eq!(
            Value::Object(reg.settings.clone()),
            json!({
                "client": "floe", "bucket": "backups", "base_path": "prod/logs/d1",
                "endpoint": "flashblade.internal:443", "protocol": "https",
                "path_style_access": true, "region": "eu-west-1",
                "server_side_encryption": true, "compress": true, "chunk_size": "1gb",
                "max_snapshot_bytes_per_sec": "150mb", "max_restore_bytes_per_sec": "0"
            })
        );
        let text = format!("{reg:?}");
        for secret in [
            "AKIAEXAMPLEKEY",
            "sealed-secret",
            "sealed-token",
            "access_key",
            "secret_key",
        ] {
            assert!(!text.contains(secret), "{secret} leaked into {text}");
        }
    }

    #[test]
    fn fs_and_read_only() {
        let r = repo(RepositorySettings::Fs(FsSettings {
            location: "main".into(),
            compress: None,
            max_snapshot_bytes_per_sec: None,
            max_restore_bytes_per_sec: Some("40mb".into()),
        }));
        let reg = repository_registration(&r, "d1", true);
        assert_eq!(reg.repository_type, "fs");
        assert!(reg.readonly);
        assert_eq!(
            Value::Object(reg.settings),
            json!({"location": "main/d1", "max_restore_bytes_per_sec": "40mb"})
        );
        // Without a base path each deployment still writes under its own.
        let bare = repo(RepositorySettings::S3(S3Settings {
            bucket: "backups".into(),
            ..S3Settings::default()
        }));
        assert_eq!(
            repository_registration(&bare, "d2", false).settings["base_path"],
            "d2"
        );
    }

    #[test]
    fn the_place_of_a_deployments_snapshots_moves_with_bucket_and_path_only() {
        let s3 = |bucket: &str, base: Option<&str>, endpoint: Option<&str>| {
            repo(RepositorySettings::S3(S3Settings {
                bucket: bucket.into(),
                base_path: base.map(String::from),
                endpoint: endpoint.map(String::from),
                ..S3Settings::default()
            }))
        };
        let place = |r: &Repository| snapshot_place(r, "d1");
        assert_eq!(place(&s3("b", Some("/prod/"), None)), "s3://b/prod/d1");
        assert_eq!(place(&s3("b", None, None)), "s3://b/d1");
        assert_eq!(place(&s3("b", Some(""), None)), "s3://b/d1");
        // A client setting is not a place.
        assert_eq!(
            place(&s3("b", Some("prod"), Some("minio.internal:9000"))),
            place(&s3("b", Some("prod"), None))
        );
        assert_ne!(
            place(&s3("b", Some("prod"), None)),
            place(&s3("c", Some("prod"), None))
        );
        assert_ne!(
            place(&s3("b", Some("prod"), None)),
            place(&s3("b", Some("dev"), None))
        );
        let fs = repo(RepositorySettings::Fs(FsSettings {
            location: "/mnt/backups/".into(),
            compress: None,
            max_snapshot_bytes_per_sec: None,
            max_restore_bytes_per_sec: None,
        }));
        assert_eq!(place(&fs), "fs:/mnt/backups/d1");
        assert_eq!(
            repository_registration(&fs, "d1", false)
                .settings
                .get("location"),
            Some(&json!("/mnt/backups/d1"))
        );
    }
}
