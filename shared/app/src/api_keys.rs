//! API keys (`/api/v1/users/auth/keys`, ECE's shape): made by a signed-in
//! person for their scripts, acting in the organization the person acted
//! in when they made it (their own, or for platform roles the one
//! `x-floe-organization` named) with at most the roles they held there,
//! checked on every request (a deleted key is refused at
//! once, on every runtime: nothing about a key is cached but the
//! organization's hashing key, which never changes).

use crate::{Admin, App, AppError, Caller, Resource};
use floe_auth::Role;
use floe_auth::api_key as text;
use floe_domain::Code;
use floe_domain::api_key::{
    ApiKey, ApiKeyView, ApiKeys, CreatedApiKey, KeyHashingKey, MAX_KEYS_PER_USER,
    MAX_LIFETIME_DAYS, MIN_LIFETIME_SECS, NewApiKey,
};
use floe_domain::validation::Problems;
use floe_secrets::Owner;
use floe_store::{PageRequest, StoreError, Versioned};
use std::collections::HashMap;
use std::sync::Mutex;

/// The organizations' hashing keys, opened, as this process first read
/// them (a hashing key is made once and never replaced).
#[derive(Default)]
pub struct HashingKeys(Mutex<HashMap<String, String>>);

impl HashingKeys {
    fn get(&self, org: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(org)
            .cloned()
    }

    fn keep(&self, org: &str, key: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(org.to_string(), key.to_string());
    }
}

/// Who a valid key speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHolder {
    pub key_id: String,
    pub org: String,
    pub issuer: String,
    pub subject: String,
    pub roles: Vec<Role>,
}

/// How many keys one listing reads at a time.
const LIST_PAGE: u32 = 100;

/// The cipher's owner of an organization's hashing key.
fn sealing_owner(org: &str) -> Owner<'_> {
    Owner {
        org,
        repository: "~api-keys",
        field: "hashing_key",
    }
}

fn refused(code: Code, message: &str) -> AppError {
    AppError::Unauthorized {
        code,
        message: message.to_string(),
    }
}

fn invalid_key() -> AppError {
    refused(
        Code::AUTH_INVALID_API_KEY,
        "the API key is not one this platform issued, or it was deleted",
    )
}

impl App {
    /// A new key for the caller, answered once with its text.
    pub async fn create_api_key(
        &self,
        who: &Caller,
        request: NewApiKey,
    ) -> Result<CreatedApiKey, AppError> {
        if who.api_key.is_some() {
            return Err(AppError::Forbidden(
                "an API key cannot make API keys: sign in with a token",
            ));
        }
        let now = chrono::Utc::now();
        let (roles, expiration) = check_request(who, &request, now)?;
        let mine = self.own_keys(who).await?;
        if mine.len() >= MAX_KEYS_PER_USER {
            return Err(AppError::conflict(
                Code::API_KEYS_TOO_MANY,
                format!(
                    "you hold {MAX_KEYS_PER_USER} API keys, the most one person may; delete one first"
                ),
            ));
        }
        let hashing = self
            .hashing_key(&who.org, true)
            .await?
            .ok_or(AppError::Internal)?;
        let id = floe_domain::names::new_resource_id();
        let (key_text, secret) = text::new_key(&who.org, &id);
        let mac = text::mac(&hashing, &secret).ok_or(AppError::Internal)?;
        let key = ApiKey {
            id,
            org: who.org.clone(),
            issuer: who.issuer.clone(),
            subject: who.subject.clone(),
            description: request.description.clone(),
            roles,
            created: now,
            expiration,
            last_used: None,
            mac,
        };
        self.store.create_api_key(&key).await?;
        tracing::info!(org = %key.org, key = %key.id, subject = %key.subject, roles = ?key.roles, "API key made");
        Ok(CreatedApiKey {
            view: ApiKeyView::new(&key, now),
            key: key_text,
        })
    }

    /// The caller's own keys, oldest first.
    pub async fn list_api_keys(&self, who: &Caller) -> Result<ApiKeys, AppError> {
        let now = chrono::Utc::now();
        Ok(ApiKeys {
            keys: self
                .own_keys(who)
                .await?
                .iter()
                .map(|k| ApiKeyView::new(&k.value, now))
                .collect(),
        })
    }

    /// Deletes one of the caller's own keys; it is refused from then on.
    pub async fn delete_api_key(&self, who: &Caller, id: &str) -> Result<(), AppError> {
        let key = self
            .store
            .get_api_key(&who.org, id)
            .await?
            .filter(|k| k.value.issuer == who.issuer && k.value.subject == who.subject)
            .ok_or_else(|| not_found(id))?;
        self.remove_key(&key).await
    }

    /// Every key of the organization the admin acts in, oldest first.
    pub async fn list_all_api_keys(&self, who: &Admin) -> Result<ApiKeys, AppError> {
        let now = chrono::Utc::now();
        Ok(ApiKeys {
            keys: self
                .org_keys(&who.org)
                .await?
                .iter()
                .map(|k| ApiKeyView::new(&k.value, now))
                .collect(),
        })
    }

    /// Deletes a key of user `user_id` in the organization the admin acts
    /// in.
    pub async fn delete_user_api_key(
        &self,
        who: &Admin,
        user_id: &str,
        id: &str,
    ) -> Result<(), AppError> {
        let key = self
            .store
            .get_api_key(&who.org, id)
            .await?
            .filter(|k| k.value.subject == user_id)
            .ok_or_else(|| not_found(id))?;
        self.remove_key(&key).await?;
        tracing::info!(org = %who.org, key = %id, user = %user_id, by = %who.subject, "API key deleted by a platform admin");
        Ok(())
    }

    /// Who `key` speaks for, if it is a live key of this platform; its use
    /// is written down (to the minute).
    pub async fn authenticate_api_key(&self, key: &str) -> Result<KeyHolder, AppError> {
        let parts = text::parse(key).ok_or_else(invalid_key)?;
        if floe_domain::names::validate_org(&parts.org).is_err()
            || !floe_domain::names::is_resource_id(&parts.id)
        {
            return Err(invalid_key());
        }
        let stored = self
            .store
            .get_api_key(&parts.org, &parts.id)
            .await?
            .ok_or_else(invalid_key)?;
        let hashing = self
            .hashing_key(&parts.org, false)
            .await?
            .ok_or_else(invalid_key)?;
        if !text::matches(&hashing, &parts.secret, &stored.value.mac) {
            return Err(invalid_key());
        }
        let now = chrono::Utc::now();
        if stored.value.expired(now) {
            return Err(refused(
                Code::AUTH_API_KEY_EXPIRED,
                "the API key has expired; make a new one",
            ));
        }
        let roles: Vec<Role> = stored
            .value
            .roles
            .iter()
            .filter_map(|r| Role::parse(r))
            .collect();
        if roles.is_empty() {
            return Err(refused(Code::AUTH_NO_ROLE, "the API key grants no role"));
        }
        if stored.value.use_is_news(now) {
            let mut used = stored.value.clone();
            used.last_used = Some(now);
            // Another request may have written the same minute's use.
            if let Err(e) = self.store.update_api_key(&used, &stored).await
                && !matches!(e, StoreError::VersionMismatch { .. } | StoreError::NotFound)
            {
                tracing::warn!(key = %used.id, error = %e, "could not record the API key's use");
            }
        }
        let k = stored.value;
        Ok(KeyHolder {
            key_id: k.id,
            org: k.org,
            issuer: k.issuer,
            subject: k.subject,
            roles,
        })
    }

    async fn remove_key(&self, key: &Versioned<ApiKey>) -> Result<(), AppError> {
        match self.store.delete_api_key(key).await {
            // Deleted meanwhile by another request: gone either way.
            Ok(()) | Err(StoreError::NotFound) => Ok(()),
            // Its use was written meanwhile: delete what is there now.
            Err(StoreError::VersionMismatch { .. }) => {
                match self
                    .store
                    .get_api_key(&key.value.org, &key.value.id)
                    .await?
                {
                    Some(now) => match self.store.delete_api_key(&now).await {
                        Ok(()) | Err(StoreError::NotFound) => Ok(()),
                        Err(StoreError::VersionMismatch { .. }) => Err(AppError::ConcurrentChange),
                        Err(e) => Err(e.into()),
                    },
                    None => Ok(()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn own_keys(&self, who: &Caller) -> Result<Vec<Versioned<ApiKey>>, AppError> {
        Ok(self
            .org_keys(&who.org)
            .await?
            .into_iter()
            .filter(|k| k.value.issuer == who.issuer && k.value.subject == who.subject)
            .collect())
    }

    async fn org_keys(&self, org: &str) -> Result<Vec<Versioned<ApiKey>>, AppError> {
        let mut keys = Vec::new();
        let mut page = PageRequest {
            size: Some(LIST_PAGE),
            cursor: None,
        };
        loop {
            let found = self.store.list_api_keys(org, &page).await?;
            keys.extend(found.items);
            match found.next_cursor {
                Some(next) => page.cursor = Some(next),
                None => return Ok(keys),
            }
        }
    }

    /// The organization's hashing key, opened; made (with `create`) when
    /// it has none yet. `None`: it has none.
    async fn hashing_key(&self, org: &str, create: bool) -> Result<Option<String>, AppError> {
        if let Some(key) = self.hashing_keys.get(org) {
            return Ok(Some(key));
        }
        let stored = match self.store.get_key_hashing_key(org).await? {
            Some(stored) => stored,
            None if !create => return Ok(None),
            None => {
                let fresh = text::new_hashing_key();
                let sealed = self
                    .cipher
                    .seal(&fresh, &sealing_owner(org))
                    .await
                    .map_err(|e| {
                        tracing::error!(org, error = %e, "could not seal a hashing key");
                        AppError::Internal
                    })?;
                let record = KeyHashingKey {
                    org: org.to_string(),
                    sealed,
                    created: chrono::Utc::now(),
                };
                match self.store.create_key_hashing_key(&record).await {
                    Ok(()) => record,
                    // Another request made the organization's first key at
                    // the same moment: its hashing key is the one.
                    Err(StoreError::AlreadyExists) => self
                        .store
                        .get_key_hashing_key(org)
                        .await?
                        .ok_or(AppError::ConcurrentChange)?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let opened = self
            .cipher
            .open(&stored.sealed, &sealing_owner(org))
            .await
            .map_err(|e| {
                tracing::error!(org, error = %e, "could not open the organization's hashing key");
                AppError::Internal
            })?;
        self.hashing_keys.keep(org, &opened);
        Ok(Some(opened))
    }
}

fn not_found(id: &str) -> AppError {
    AppError::not_found(Resource::ApiKey, id)
}

/// Whether holding `roles` lets one give a key `role`: a role is within
/// those that may do all it may (platform_admin may do everything;
/// deployment_manager and platform_viewer may read what deployment_viewer
/// reads).
fn grants(roles: &[Role], role: Role) -> bool {
    roles.iter().any(|held| {
        *held == role
            || *held == Role::PlatformAdmin
            || (role == Role::DeploymentViewer
                && matches!(held, Role::DeploymentManager | Role::PlatformViewer))
    })
}

/// The key's roles and expiry, or every field at fault.
fn check_request(
    who: &Caller,
    request: &NewApiKey,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(Vec<String>, Option<chrono::DateTime<chrono::Utc>>), AppError> {
    let mut bad = Problems::new();
    let description = request.description.as_str();
    if description.is_empty() || description.chars().count() > 255 {
        bad.push(
            "description",
            Code::VALIDATION_LENGTH,
            "must be 1 to 255 characters",
        );
    } else if description.chars().any(char::is_control) {
        bad.push(
            "description",
            Code::VALIDATION_NOT_ALLOWED,
            "must not contain control characters",
        );
    }
    let expiration = match &request.expiration {
        None => None,
        Some(value) => match floe_domain::timevalue::parse_time_value(value) {
            Err(m) => {
                bad.push("expiration", Code::VALIDATION_TIME_VALUE, m);
                None
            }
            Ok(d) => {
                let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                if !(MIN_LIFETIME_SECS..=MAX_LIFETIME_DAYS * 86_400).contains(&secs) {
                    bad.push(
                        "expiration",
                        Code::VALIDATION_RANGE,
                        format!("must be from 1m to {MAX_LIFETIME_DAYS}d"),
                    );
                    None
                } else {
                    Some(now + chrono::Duration::seconds(secs))
                }
            }
        },
    };
    let roles: Vec<String> = match &request.roles {
        None => who.roles.iter().map(|r| r.as_str().to_string()).collect(),
        Some(asked) => {
            let mut roles = Vec::new();
            if asked.is_empty() {
                bad.push(
                    "roles",
                    Code::VALIDATION_LENGTH,
                    "must name at least one role (or be left out: all of yours)",
                );
            }
            for (i, asked) in asked.iter().enumerate() {
                let field = format!("roles[{i}]");
                let name = asked.as_str();
                match Role::parse(name) {
                    None => bad.push(field, Code::VALIDATION_UNKNOWN_VALUE, "is not a role"),
                    Some(role) if !grants(&who.roles, role) => bad.push(
                        field,
                        Code::VALIDATION_NOT_ALLOWED,
                        format!(
                            "{name} is not one of your roles nor within one: a key acts with at most its maker's"
                        ),
                    ),
                    Some(role) if roles.contains(&role.as_str().to_string()) => {
                        bad.push(field, Code::VALIDATION_DUPLICATE, "is named twice")
                    }
                    Some(role) => roles.push(role.as_str().to_string()),
                }
            }
            roles
        }
    };
    bad.finish()?;
    Ok((roles, expiration))
}
