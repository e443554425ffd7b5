//! Snapshot repositories: create or replace, read, list, delete.

use crate::deployments::check_version;
use crate::{Admin, App, AppError, Reader, Resource};
use floe_domain::Code;
use floe_domain::bucket_claim::{self, BucketClaim};
use floe_domain::repository::{
    Repository, RepositoryRequest, RepositorySettings, RepositoryView, S3Settings,
    validate_repository_name,
};
use floe_domain::secret::{Sealed, SecretString};
use floe_secrets::Owner;
use floe_store::{ClaimChange, PageRequest, StoreError};
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct RepositoryList {
    pub repositories: Vec<RepositoryView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A put's outcome: the repository is new, or replaced an existing one.
#[derive(Debug)]
pub enum Put {
    Created(RepositoryView),
    Replaced(RepositoryView),
}

impl App {
    pub async fn list_repositories(
        &self,
        who: &Reader,
        page: PageRequest,
    ) -> Result<RepositoryList, AppError> {
        let page = self.store.list_repositories(&who.org, &page).await?;
        Ok(RepositoryList {
            repositories: page
                .items
                .iter()
                .map(|v| RepositoryView::new(&v.value, v.version, v.refs))
                .collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// One repository; its secrets show only whether they are set.
    pub async fn get_repository(
        &self,
        who: &Reader,
        name: &str,
    ) -> Result<RepositoryView, AppError> {
        let v = self
            .store
            .get_repository(&who.org, name)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Repository, name))?;
        Ok(RepositoryView::new(&v.value, v.version, v.refs))
    }

    /// Create or replace a repository. Secrets are sealed; on replace,
    /// omitted secrets are kept when the access key, endpoint and protocol
    /// are all unchanged.
    pub async fn put_repository(
        &self,
        who: &Admin,
        name: &str,
        expected: Option<u64>,
        req: RepositoryRequest,
    ) -> Result<Put, AppError> {
        check_name(name)?;
        req.validate(self.endpoint_policy)?;
        self.check_endpoint_resolves(&req).await?;
        let existing = self.store.get_repository(&who.org, name).await?;
        match (&existing, expected) {
            (Some(e), _) => check_version(expected, e.version)?,
            (None, Some(_)) => return Err(AppError::not_found(Resource::Repository, name)),
            (None, None) => {}
        }

        let now = chrono::Utc::now();
        let settings = match &req {
            RepositoryRequest::Fs(fs) => RepositorySettings::Fs(fs.clone()),
            RepositoryRequest::S3(s3) => {
                // Stored secrets go only where they went before: the same
                // access key, at the same endpoint, over the same protocol.
                // A new host (or plain http) gets no secret unless it is sent.
                let stored = existing.as_ref().and_then(|e| match &e.value.settings {
                    RepositorySettings::S3(p) => Some(p),
                    RepositorySettings::Fs(_) => None,
                });
                let previous = stored.filter(|p| {
                    p.access_key == s3.access_key
                        && p.endpoint == s3.endpoint
                        && p.protocol == s3.protocol
                });
                let owner = |field| Owner {
                    org: &who.org,
                    repository: name,
                    field,
                };
                let secret_key = self
                    .seal(
                        owner("secret_key"),
                        s3.secret_key.as_ref(),
                        previous.and_then(|p| p.secret_key.as_ref()),
                    )
                    .await?;
                let session_token = self
                    .seal(
                        owner("session_token"),
                        s3.session_token.as_ref(),
                        previous.and_then(|p: &S3Settings| p.session_token.as_ref()),
                    )
                    .await?;
                RepositorySettings::S3(Repository::s3_settings_from_request(
                    s3,
                    secret_key,
                    session_token,
                ))
            }
        };
        // Snapshots already taken stay where they are: a repository that a
        // deployment or policy uses keeps its place, or they would vanish
        // from the cluster's view and retention would drop their records.
        if let Some(previous) = existing.as_ref().filter(|e| e.refs > 0)
            && let Some(field) = settings.moved_from(&previous.value.settings)
        {
            return Err(AppError::conflict_on(
                Code::REPOSITORIES_LOCATION_IN_USE,
                field,
                format!(
                    "cannot change while {} deployments or policies use snapshot repository '{name}': their snapshots are at the current place; register the new place under another name",
                    previous.refs
                ),
            ));
        }
        let repo = Repository {
            org: who.org.clone(),
            name: name.to_string(),
            settings,
            created: existing.as_ref().map(|e| e.value.created).unwrap_or(now),
            updated: now,
        };
        let claims = self
            .claim_changes(
                &who.org,
                name,
                existing.as_ref().map(|e| &e.value.settings),
                Some(&repo.settings),
            )
            .await?;
        match existing {
            None => match self.store.create_repository_claimed(&repo, &claims).await {
                Ok(()) => {
                    tracing::info!(repository = %name, "repository created");
                    Ok(Put::Created(RepositoryView::new(&repo, 1, 0)))
                }
                // The name taken, or the bucket's claim changed, since read.
                Err(StoreError::AlreadyExists | StoreError::VersionMismatch { .. }) => {
                    Err(AppError::ConcurrentChange)
                }
                Err(e) => Err(e.into()),
            },
            Some(previous) => {
                let version = self
                    .store
                    .replace_repository_claimed(&repo, previous.version, &claims)
                    .await
                    .map_err(|e| match e {
                        StoreError::NotFound | StoreError::AlreadyExists => {
                            AppError::ConcurrentChange
                        }
                        other => AppError::from_write(other, expected, Resource::Repository, name),
                    })?;
                tracing::info!(repository = %name, version, "repository replaced");
                Ok(Put::Replaced(RepositoryView::new(
                    &repo,
                    version,
                    previous.refs,
                )))
            }
        }
    }

    /// The bucket claims a write of repository `name` changes, from the
    /// settings it had (`before`) to those it will have (`after`; `None`:
    /// deleted), each as read now; refused when `after` would put this
    /// organization on a bucket another organization holds without both
    /// marking it shared (see `floe_domain::bucket_claim`).
    async fn claim_changes(
        &self,
        org: &str,
        name: &str,
        before: Option<&RepositorySettings>,
        after: Option<&RepositorySettings>,
    ) -> Result<Vec<ClaimChange>, AppError> {
        let old_key = before.and_then(bucket_claim::claim_key);
        let new_key = after.and_then(bucket_claim::claim_key);
        let mut changes = Vec::new();
        if let Some((endpoint, bucket)) = &old_key
            && old_key != new_key
        {
            // Only a claim that holds this repository: one written before
            // claims existed has none to leave.
            if let Some(read) = self.store.get_bucket_claim(endpoint, bucket).await?
                && read
                    .value
                    .holders
                    .iter()
                    .any(|h| h.org == org && h.repository == name)
            {
                let after = read.value.without(org, name);
                changes.push(ClaimChange {
                    before: Some(read),
                    after,
                });
            }
        }
        if let (Some((endpoint, bucket)), Some(settings)) = (&new_key, after)
            && let Some(me) = bucket_claim::holder(org, name, settings)
        {
            let read = self.store.get_bucket_claim(endpoint, bucket).await?;
            let current = read
                .as_ref()
                .map(|r| r.value.clone())
                .unwrap_or_else(|| BucketClaim::new(endpoint, bucket));
            if current.conflict(&me).is_some() {
                // Which organization holds it is not this one's business.
                return Err(AppError::conflict_on(
                    Code::REPOSITORIES_BUCKET_CLAIMED,
                    "settings.bucket",
                    format!(
                        "another organization has a snapshot repository on bucket '{bucket}' at this endpoint; with keys that reach the bucket, each organization's tenants could read and delete the other's snapshots. Use another bucket, or have a platform admin set settings.shared_across_organizations on both repositories"
                    ),
                ));
            }
            changes.push(ClaimChange {
                before: read,
                after: current.with(me),
            });
        }
        Ok(changes)
    }

    /// An endpoint given as a name is as safe as the addresses behind it:
    /// each must pass the address policy that a literal address passes.
    /// Checked when the repository is written; a name that resolves
    /// nowhere is refused too, since no node could reach it.
    async fn check_endpoint_resolves(&self, req: &RepositoryRequest) -> Result<(), AppError> {
        let RepositoryRequest::S3(s3) = req else {
            return Ok(());
        };
        let Some((name, port)) = s3.endpoint.as_deref().and_then(|e| {
            floe_domain::repository::endpoint_name(e, s3.protocol, self.endpoint_policy)
        }) else {
            return Ok(());
        };
        let refuse = |message: String| {
            AppError::invalid(Code::VALIDATION_ENDPOINT, "settings.endpoint", message)
        };
        let addresses = self
            .resolver
            .resolve(&name, port)
            .await
            .map_err(|e| refuse(e.to_string()))?;
        floe_domain::repository::check_resolved(&name, &addresses, self.endpoint_policy)
            .map_err(refuse)
    }

    /// Seals a newly sent secret, or keeps the stored one when none was sent.
    async fn seal(
        &self,
        owner: Owner<'_>,
        sent: Option<&SecretString>,
        kept: Option<&Sealed>,
    ) -> Result<Option<Sealed>, AppError> {
        let Some(secret) = sent else {
            return Ok(kept.cloned());
        };
        let field = owner.field;
        let sealed = self
            .cipher
            .seal(secret.expose(), &owner)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, field, "could not encrypt a repository secret");
                AppError::Unavailable {
                    code: Code::INTERNAL_SECRETS_UNAVAILABLE,
                    message:
                        "credentials cannot be encrypted right now; nothing was stored, retry later"
                            .into(),
                }
            })?;
        Ok(Some(Sealed::new(sealed)))
    }

    /// Delete a repository that no deployment or policy uses.
    pub async fn delete_repository(
        &self,
        who: &Admin,
        name: &str,
        expected: Option<u64>,
    ) -> Result<(), AppError> {
        let current = self
            .store
            .get_repository(&who.org, name)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Repository, name))?;
        check_version(expected, current.version)?;
        let claims = self
            .claim_changes(&who.org, name, Some(&current.value.settings), None)
            .await?;
        self.store
            .delete_repository_claimed(&who.org, name, current.version, &claims)
            .await
            .map_err(|e| match e {
                StoreError::InUse { refs } => AppError::conflict(
                    Code::REPOSITORIES_REPOSITORY_IN_USE,
                    format!("snapshot repository '{name}' is used by {refs} deployments or policies; detach it first"),
                ),
                other => AppError::from_write(other, expected, Resource::Repository, name),
            })?;
        tracing::info!(repository = %name, "repository deleted");
        Ok(())
    }
}

/// Checks a repository's name (1–63 of a-z, 0-9, '-').
pub fn check_name(name: &str) -> Result<(), AppError> {
    validate_repository_name(name).map_err(|m| AppError::invalid(Code::VALIDATION_NAME, "name", m))
}
