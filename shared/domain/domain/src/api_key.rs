//! API keys: credentials for scripts, in ECE's shape
//! (`/api/v1/users/auth/keys`, sent as `Authorization: ApiKey {key}`).
//!
//! A key belongs to the person who made it (issuer and subject of their
//! token) and acts in the organization they acted in with at most the
//! roles they held there. The record never holds the key: only a keyed hash (HMAC) of
//! its secret part, under the organization's hashing key, which is itself
//! kept sealed by the platform's cipher ([`KeyHashingKey`]). The key's
//! text is shown once, in the answer to its creation.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Most keys one person may hold in an organization.
pub const MAX_KEYS_PER_USER: usize = 100;
/// The longest lifetime a key may be given (ten years).
pub const MAX_LIFETIME_DAYS: i64 = 3650;
/// The shortest (a minute): a key that expires sooner is no use to a script.
pub const MIN_LIFETIME_SECS: i64 = 60;
/// How stale `last_used` may get: a key's use is recorded at most this
/// often, so that a busy script does not write its record on every call.
pub const LAST_USED_GRANULARITY_SECS: i64 = 60;

/// The stored key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    /// The organization it acts in: the one its maker acted in.
    pub org: String,
    /// Its maker, as their token named them.
    pub issuer: String,
    pub subject: String,
    pub description: String,
    /// The roles it acts with (wire names), at most its maker's.
    pub roles: Vec<String>,
    pub created: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used: Option<DateTime<Utc>>,
    /// HMAC-SHA256 of the key's secret under the organization's
    /// [`KeyHashingKey`] (base64url).
    pub mac: String,
}

impl ApiKey {
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expiration.is_some_and(|e| e <= now)
    }

    /// Whether a use at `now` should be written down.
    pub fn use_is_news(&self, now: DateTime<Utc>) -> bool {
        self.last_used
            .is_none_or(|last| (now - last).num_seconds() >= LAST_USED_GRANULARITY_SECS)
    }
}

/// An organization's key for hashing its API keys' secrets, sealed by the
/// platform's cipher (KMS on AWS): the table alone cannot check a guess.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyHashingKey {
    pub org: String,
    pub sealed: String,
    pub created: DateTime<Utc>,
}

/// `POST /api/v1/users/auth/keys`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewApiKey {
    /// What the key is for (1 to 255 characters, none of them a control
    /// character).
    #[schema(
        min_length = 1,
        max_length = 255,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$",
        example = "nightly export job"
    )]
    pub description: String,
    /// How long the key lives, as an Elasticsearch time value (`30d`,
    /// `12h`), from a minute to ten years. Without it, the key lives until
    /// it is deleted.
    #[serde(default)]
    #[schema(example = "90d")]
    pub expiration: Option<String>,
    /// The roles the key acts with: any the caller holds or one within
    /// them. Without it, all of the caller's.
    #[serde(default)]
    #[schema(value_type = Option<std::collections::BTreeSet<KeyRole>>, min_items = 1, example = json!(["deployment_manager"]))]
    pub roles: Option<Vec<KeyRole>>,
}

/// A role a key may be given: ECE's four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyRole {
    PlatformAdmin,
    PlatformViewer,
    DeploymentManager,
    DeploymentViewer,
}

impl KeyRole {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyRole::PlatformAdmin => "platform_admin",
            KeyRole::PlatformViewer => "platform_viewer",
            KeyRole::DeploymentManager => "deployment_manager",
            KeyRole::DeploymentViewer => "deployment_viewer",
        }
    }
}

/// A key as listed: never its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub description: String,
    /// Its maker (their token's `sub`).
    pub user_id: String,
    pub roles: Vec<String>,
    pub creation_date: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiration_date: Option<DateTime<Utc>>,
    /// Its last use, to the minute; absent until it is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used_date: Option<DateTime<Utc>>,
    /// Whether it has expired (an expired key is refused; delete it or let
    /// it be).
    pub expired: bool,
}

impl ApiKeyView {
    pub fn new(key: &ApiKey, now: DateTime<Utc>) -> ApiKeyView {
        ApiKeyView {
            id: key.id.clone(),
            description: key.description.clone(),
            user_id: key.subject.clone(),
            roles: key.roles.clone(),
            creation_date: key.created,
            expiration_date: key.expiration,
            last_used_date: key.last_used,
            expired: key.expired(now),
        }
    }
}

/// The answer to a creation: the key, this once.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub view: ApiKeyView,
    /// The key: send it as `Authorization: ApiKey {key}`. It is shown only
    /// here; the platform keeps only a hash of it.
    pub key: String,
}

/// `GET /api/v1/users/auth/keys`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ApiKeys {
    pub keys: Vec<ApiKeyView>,
}
