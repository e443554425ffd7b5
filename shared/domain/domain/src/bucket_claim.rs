//! Which organizations keep snapshots in one S3 bucket.
//!
//! A repository with keys of its own hands those keys to every node of the
//! deployments that use it, and through the cluster's `elastic` user to
//! the tenant: a key that reaches one path of a bucket usually reaches all
//! of it. So two organizations' repositories on the same endpoint and
//! bucket would let each read and delete the other's snapshots. Floe keeps
//! one claim per endpoint and bucket, naming every repository on it, and
//! refuses a repository that would put a second organization there, unless
//! a platform admin marked every repository involved as shared across
//! organizations. Repositories that reach AWS S3 with the nodes' own
//! instance roles are kept apart by those roles (each reaches only its
//! deployment's path), so two of those never conflict.

use crate::repository::{Protocol, RepositorySettings, S3Settings};
use serde::{Deserialize, Serialize};

/// What the view and the documentation say sharing allows.
pub const SHARING_MEANS: &str = "Repositories of other organizations may be on this endpoint and bucket. Their deployments' nodes, and so their tenants, hold keys that can read, overwrite and delete every snapshot in the bucket, this organization's included.";

/// One repository on a claimed endpoint and bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimHolder {
    pub org: String,
    pub repository: String,
    /// The repository has keys of its own (else the nodes' instance roles,
    /// which reach only their own paths).
    pub keyed: bool,
    /// A platform admin marked it `shared_across_organizations`.
    pub shared: bool,
}

/// Every repository on one endpoint and bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BucketClaim {
    pub endpoint: String,
    pub bucket: String,
    pub holders: Vec<ClaimHolder>,
}

/// The endpoint and bucket `settings` keep snapshots in, as one key: AWS S3
/// (no endpoint, or any `amazonaws.com` host: bucket names are global
/// there) or the endpoint's host in lower case with its port, default
/// ports dropped. `None` for a filesystem repository.
pub fn claim_key(settings: &RepositorySettings) -> Option<(String, String)> {
    let RepositorySettings::S3(s) = settings else {
        return None;
    };
    Some((endpoint_key(s), s.bucket.clone()))
}

fn endpoint_key(s: &S3Settings) -> String {
    let Some(endpoint) = s.endpoint.as_deref() else {
        return "aws".into();
    };
    let endpoint = endpoint.trim().to_ascii_lowercase();
    let endpoint = endpoint.trim_end_matches('.');
    let default_port = match s.protocol {
        Some(Protocol::Http) => ":80",
        _ => ":443",
    };
    let endpoint = endpoint.strip_suffix(default_port).unwrap_or(endpoint);
    let host = endpoint
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(endpoint, |(host, _)| host);
    if host == "amazonaws.com" || host.ends_with(".amazonaws.com") {
        "aws".into()
    } else {
        endpoint.to_string()
    }
}

/// The holder `settings` makes of repository `name` of `org`.
pub fn holder(org: &str, name: &str, settings: &RepositorySettings) -> Option<ClaimHolder> {
    let RepositorySettings::S3(s) = settings else {
        return None;
    };
    Some(ClaimHolder {
        org: org.to_string(),
        repository: name.to_string(),
        keyed: s.access_key.is_some(),
        shared: s.shared_across_organizations,
    })
}

impl BucketClaim {
    pub fn new(endpoint: &str, bucket: &str) -> BucketClaim {
        BucketClaim {
            endpoint: endpoint.to_string(),
            bucket: bucket.to_string(),
            holders: Vec::new(),
        }
    }

    /// The holder of another organization that `me` may not sit beside:
    /// either of them has keys, and not both are marked shared.
    pub fn conflict(&self, me: &ClaimHolder) -> Option<&ClaimHolder> {
        self.holders.iter().find(|other| {
            other.org != me.org && (me.keyed || other.keyed) && !(me.shared && other.shared)
        })
    }

    /// The claim with `org`'s repository `name` taken out.
    pub fn without(&self, org: &str, name: &str) -> BucketClaim {
        BucketClaim {
            holders: self
                .holders
                .iter()
                .filter(|h| !(h.org == org && h.repository == name))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// The claim with `me` in it (replacing what it held before).
    pub fn with(&self, me: ClaimHolder) -> BucketClaim {
        let mut next = self.without(&me.org, &me.repository);
        next.holders.push(me);
        next.holders
            .sort_by(|a, b| (&a.org, &a.repository).cmp(&(&b.org, &b.repository)));
        next
    }

    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(endpoint: Option<&str>, protocol: Option<Protocol>) -> RepositorySettings {
        RepositorySettings::S3(S3Settings {
            bucket: "b".into(),
            endpoint: endpoint.map(String::from),
            protocol,
            ..S3Settings::default()
        })
    }

    fn key(endpoint: Option<&str>, protocol: Option<Protocol>) -> Option<String> {
        claim_key(&s3(endpoint, protocol)).map(|(e, _)| e)
    }

    #[test]
    fn one_store_is_one_key_however_it_is_written() {
        assert_eq!(key(None, None).as_deref(), Some("aws"));
        assert_eq!(
            key(Some("s3.eu-west-1.amazonaws.com"), None).as_deref(),
            Some("aws")
        );
        assert_eq!(
            key(Some("Minio.Example.com:443"), Some(Protocol::Https)),
            key(Some("minio.example.com"), None)
        );
        assert_eq!(
            key(Some("10.0.0.5:80"), Some(Protocol::Http)),
            key(Some("10.0.0.5"), Some(Protocol::Http))
        );
        assert_ne!(
            key(Some("10.0.0.5:9000"), None),
            key(Some("10.0.0.5"), None)
        );
        let fs = RepositorySettings::Fs(crate::repository::FsSettings {
            location: "x".into(),
            compress: None,
            max_snapshot_bytes_per_sec: None,
            max_restore_bytes_per_sec: None,
        });
        assert_eq!(claim_key(&fs), None);
    }

    fn h(org: &str, keyed: bool, shared: bool) -> ClaimHolder {
        ClaimHolder {
            org: org.into(),
            repository: format!("{org}-repo"),
            keyed,
            shared,
        }
    }

    #[test]
    fn two_organizations_share_a_bucket_only_when_both_say_so_or_neither_has_keys() {
        // (existing holder, newcomer, refused)
        let table = [
            (h("acme", true, false), h("globex", true, false), true),
            (h("acme", true, false), h("globex", false, false), true),
            (h("acme", false, false), h("globex", true, false), true),
            // Instance roles reach their own paths only.
            (h("acme", false, false), h("globex", false, false), false),
            // Shared only when both are marked.
            (h("acme", true, false), h("globex", true, true), true),
            (h("acme", true, true), h("globex", true, false), true),
            (h("acme", true, true), h("globex", true, true), false),
            // One organization's repositories never conflict.
            (
                h("acme", true, false),
                ClaimHolder {
                    repository: "other".into(),
                    ..h("acme", true, false)
                },
                false,
            ),
        ];
        for (existing, newcomer, refused) in table {
            let claim = BucketClaim::new("aws", "b").with(existing.clone());
            assert_eq!(
                claim.conflict(&newcomer).is_some(),
                refused,
                "{existing:?} then {newcomer:?}"
            );
        }
    }

    #[test]
    fn with_and_without_replace_a_repositorys_holding() {
        let claim = BucketClaim::new("aws", "b")
            .with(h("acme", true, false))
            .with(h("acme", true, true));
        assert_eq!(claim.holders, [h("acme", true, true)]);
        assert!(claim.without("acme", "acme-repo").is_empty());
        assert_eq!(claim.without("globex", "acme-repo"), claim);
    }
}
