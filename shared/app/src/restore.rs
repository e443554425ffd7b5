//! Restores and clones: restoring into a running deployment, cloning one
//! into a new deployment, and the `restore_snapshot` of a create.
//!
//! Everything a client can get wrong is found here, before a plan exists:
//! the source deployment, the snapshot (`__latest_success__` is resolved
//! from the snapshot records, so the plan records the name it restores),
//! the repository, and whether the nodes can reach it. The plan then only
//! meets what the cluster itself refuses.

use crate::deployments::{Creation, plan_in_progress};
use crate::{App, AppError, Manager};
use floe_domain::Code;
use floe_domain::deployment::{
    Deployment, DeploymentSpec, DeploymentStatus, DeploymentView, NodeGroup,
};
use floe_domain::plan::{Plan, PlanParams};
use floe_domain::repository::{Repository, reachable_with};
use floe_domain::restore::{
    CloneLicense, LATEST_SUCCESS, RestoreMode, RestoreRequest, RestoreSnapshot, RestoreTarget,
};
use floe_domain::snapshot::{SnapshotRecord, SnapshotState};
use floe_store::{PageRequest, Versioned};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The short form of a clone: a new deployment like `{id}`, from its snapshot.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloneRequest {
    /// The new deployment's name.
    #[schema(example = "logs-analysis")]
    pub name: String,
    /// A snapshot name, or `__latest_success__` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_name: Option<String>,
    /// By default the source's node groups; any others may be given, on
    /// another architecture or size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_groups: Option<Vec<NodeGroup>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indices: Vec<String>,
    #[serde(default)]
    pub mode: RestoreMode,
    /// Mode mount only: the license the clone runs on (`trial`), when the
    /// platform's does not allow searchable snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<CloneLicense>,
}

/// A clone's source, checked and resolved: what the request deserves to be
/// told, and where the snapshot's record sorts (for the clone's pin).
pub(crate) struct ResolvedClone {
    pub warnings: Vec<String>,
    pub snapshot_sort_millis: Option<i64>,
    /// The version of the snapshot's record as resolved: the pin holds it.
    pub snapshot_version: Option<u64>,
}

/// Refuses a change that would register the name under which a clone reads
/// its source's path (read-only) again, at the clone's own path: mounted
/// indices would then read a path without their data, and the clone would
/// write where its source's snapshots are read. `field` names the part of
/// the request that asks for `repository`.
pub(crate) fn check_source_path(
    d: &Deployment,
    repository: &str,
    field: &str,
) -> Result<(), AppError> {
    let Some(src) = d.clone_source.as_ref().filter(|s| s.reads_source()) else {
        return Ok(());
    };
    if src.registered_as != repository {
        return Ok(());
    }
    Err(AppError::conflict_on(
        Code::RESTORE_SOURCE_PATH_READ_ONLY,
        field,
        format!(
            "deployment {} mounts snapshot {} of deployment {} through {repository}, registered read-only at the source's path; registering {repository} again at this deployment's path would take the mounted data away (attach a repository under another name, or clone with that repository as snapshot.repository so that the source is read under a second name)",
            d.id, src.snapshot, src.source_deployment_id
        ),
    ))
}

/// A snapshot resolved: its record (and the record's version, at which a
/// clone pins it) and repository.
struct Resolved {
    record: SnapshotRecord,
    version: u64,
    repository: Repository,
}

/// The error with its field `from` named `to` (a use case that exposes the
/// same check under another field).
fn rename_field(e: AppError, from: &str, to: &str) -> AppError {
    match e {
        AppError::Invalid(mut invalid) => {
            for p in &mut invalid.0 {
                if p.field == from {
                    p.field = to.to_string();
                }
            }
            AppError::Invalid(invalid)
        }
        AppError::Conflict {
            code,
            message,
            field: Some(f),
        } if f == from => AppError::Conflict {
            code,
            message,
            field: Some(to.to_string()),
        },
        other => other,
    }
}

fn unreachable(field: &str, repo: &str) -> AppError {
    AppError::invalid(
        Code::RESTORE_REPOSITORY_UNREACHABLE,
        field,
        format!(
            "the nodes cannot reach repository {repo}: they have one S3 client, set up for the deployment's own repository (same endpoint, protocol, path style, region and access key needed)"
        ),
    )
}

impl App {
    /// Finds the snapshot `name` (or the newest success) of `deployment_id`,
    /// in `repository` when given. `field` prefixes the error fields.
    async fn resolve(
        &self,
        org: &str,
        deployment_id: &str,
        name: &str,
        repository: Option<&str>,
        field: &str,
    ) -> Result<Resolved, AppError> {
        self.adopt_cluster_snapshots(org, deployment_id).await;
        // The source, when it still exists, says whether its repository
        // holds the snapshot found (its cluster is asked when it runs).
        let source = self
            .store
            .get_deployment(org, deployment_id)
            .await?
            .map(|d| d.value);
        let snapshotter = self.snapshotter();
        let mut found = None;
        // A named snapshot is read by its name (one pointer read), not
        // looked for page after page.
        if name != LATEST_SUCCESS {
            let named = self
                .store
                .get_snapshot(org, deployment_id, name)
                .await?
                .filter(|s| repository.is_none_or(|r| r == s.value.repository));
            found = match (named, &source) {
                (Some(item), Some(d)) => Some(snapshotter.check_present(d, item).await),
                (named, _) => named,
            };
        }
        // The newest success: newest first, a page at a time.
        if name == LATEST_SUCCESS {
            let mut pages = self.store.snapshot_pages(org, deployment_id, None);
            'pages: while let Some(items) = pages.next_page().await? {
                for item in items {
                    let s = &item.value;
                    if repository.is_some_and(|r| r != s.repository) {
                        continue;
                    }
                    // A snapshot being deleted, or gone from the repository, is
                    // never the newest success.
                    let wanted = s.state == SnapshotState::Success
                        && s.deleting.is_none()
                        && s.missing.is_none();
                    if !wanted {
                        continue;
                    }
                    let item = match &source {
                        Some(d) => snapshotter.check_present(d, item).await,
                        None => item,
                    };
                    if item.value.missing.is_some() {
                        // Found gone just now: the next older success stands in.
                        continue;
                    }
                    found = Some(item);
                    break 'pages;
                }
            }
        }
        let in_repo = repository
            .map(|r| format!(" in repository {r}"))
            .unwrap_or_default();
        let Some(Versioned {
            value: record,
            version,
            ..
        }) = found
        else {
            return Err(if name == LATEST_SUCCESS {
                AppError::conflict_on(
                    Code::RESTORE_NO_SUCCESSFUL_SNAPSHOT,
                    format!("{field}snapshot_name"),
                    format!("deployment {deployment_id} has no successful snapshot{in_repo}"),
                )
            } else {
                AppError::invalid(
                    Code::RESTORE_SNAPSHOT_NOT_FOUND,
                    format!("{field}snapshot_name"),
                    format!("deployment {deployment_id} has no snapshot {name}{in_repo}"),
                )
            });
        };
        if let Some(since) = record.missing {
            return Err(AppError::conflict_on(
                Code::RESTORE_SNAPSHOT_NOT_RESTORABLE,
                format!("{field}snapshot_name"),
                format!(
                    "snapshot {} is missing: repository {} no longer holds it (deleted outside Floe; found so at {})",
                    record.name,
                    record.repository,
                    since.to_rfc3339()
                ),
            ));
        }
        if record.deleting.is_some() {
            return Err(AppError::conflict_on(
                Code::RESTORE_SNAPSHOT_NOT_RESTORABLE,
                format!("{field}snapshot_name"),
                format!(
                    "snapshot {} is being deleted; it can no longer be restored",
                    record.name
                ),
            ));
        }
        if !matches!(
            record.state,
            SnapshotState::Success | SnapshotState::Partial
        ) {
            return Err(AppError::conflict_on(
                Code::RESTORE_SNAPSHOT_NOT_RESTORABLE,
                format!("{field}snapshot_name"),
                format!(
                    "snapshot {} is {}; only a SUCCESS or PARTIAL snapshot can be restored",
                    record.name,
                    record.state.as_str()
                ),
            ));
        }
        let repository = self
            .store
            .get_repository(org, &record.repository)
            .await?
            .ok_or_else(|| {
                AppError::invalid(
                    Code::RESTORE_REPOSITORY_NOT_FOUND,
                    format!("{field}repository"),
                    format!(
                        "snapshot {} is in repository {}, which no longer exists",
                        record.name, record.repository
                    ),
                )
            })?
            .value;
        if let Some(taken_at) = &record.place {
            let now_at = floe_snapshots::snapshot_place(&repository, deployment_id);
            if *taken_at != now_at {
                return Err(AppError::conflict_on(
                    Code::RESTORE_SNAPSHOT_NOT_RESTORABLE,
                    format!("{field}snapshot_name"),
                    format!(
                        "snapshot {} was taken at {taken_at}, but repository {} now keeps this deployment's snapshots at {now_at}; it cannot be restored from there",
                        record.name, repository.name
                    ),
                ));
            }
        }
        Ok(Resolved {
            record,
            version,
            repository,
        })
    }

    async fn repository_named(
        &self,
        org: &str,
        name: Option<&str>,
    ) -> Result<Option<Repository>, AppError> {
        match name {
            None => Ok(None),
            Some(n) => Ok(self.store.get_repository(org, n).await?.map(|r| r.value)),
        }
    }

    /// Checks a create's `restore_snapshot` and resolves it in place: the
    /// snapshot's name and repository are what the plan restores.
    /// Returns the warnings the request deserves.
    pub(crate) async fn resolve_clone(
        &self,
        org: &str,
        spec: &mut DeploymentSpec,
    ) -> Result<ResolvedClone, AppError> {
        let Some(r) = spec.restore_snapshot.as_mut() else {
            return Ok(ResolvedClone {
                warnings: Vec::new(),
                snapshot_sort_millis: None,
                snapshot_version: None,
            });
        };
        // Elasticsearch mounts searchable snapshots on the enterprise
        // license or during its trial; a new cluster runs basic. A mount
        // clone runs on the platform license when that allows them, or on
        // the trial it asks for; else it is refused before anything runs.
        if r.mode == RestoreMode::Mount && r.license.is_none() {
            let now = chrono::Utc::now();
            let platform = self.store.get_platform_license(org).await?;
            let allows = platform.as_ref().is_some_and(|p| {
                p.value
                    .license
                    .cluster_license()
                    .allows_searchable_snapshots(now)
            });
            if !allows {
                let has = match &platform {
                    Some(p) => format!(
                        "the platform license is {} ({}), which does not allow them",
                        p.value.license.license_type,
                        if p.value.license.expiry().is_some_and(|e| e > now) {
                            "active"
                        } else {
                            "expired"
                        }
                    ),
                    None => "the organization has no platform license".to_string(),
                };
                return Err(AppError::invalid(
                    Code::RESTORE_LICENSE_REQUIRED,
                    "restore_snapshot.license",
                    format!(
                        "mounting searchable snapshots needs an Elasticsearch enterprise license or its trial, \
                         and {has}: upload an enterprise platform license (PUT /api/v1/platform/license), \
                         ask for the 30-day trial with \"license\": \"trial\", or clone with mode restore"
                    ),
                ));
            }
        }
        let source = self
            .store
            .get_deployment(org, &r.source_deployment_id)
            .await?;
        // A deleted deployment whose snapshots were kept is a source too:
        // its records are still found by its id (see `former`).
        let kept = match source {
            Some(_) => false,
            None => !self
                .store
                .list_snapshots(
                    org,
                    &r.source_deployment_id,
                    None,
                    &PageRequest {
                        size: Some(1),
                        cursor: None,
                    },
                )
                .await?
                .items
                .is_empty(),
        };
        if source.is_none() && !kept {
            // Another organization's deployment is as absent as a missing one.
            return Err(AppError::invalid(
                Code::RESTORE_SOURCE_NOT_FOUND,
                "restore_snapshot.source_deployment_id",
                format!("deployment {} was not found", r.source_deployment_id),
            ));
        }
        let resolved = self
            .resolve(
                org,
                &r.source_deployment_id,
                &r.snapshot_name,
                r.repository.as_deref(),
                "restore_snapshot.",
            )
            .await?;
        // A clone may write to its source's repository: it writes at its
        // own path and registers the source's path read-only under a
        // second name, so it never writes where it reads.
        let source_repo = &resolved.repository;
        if let Some(own) = self.repository_named(org, spec.repository()).await?
            && !reachable_with(Some(&own), source_repo)
        {
            return Err(unreachable(
                "restore_snapshot.repository",
                &source_repo.name,
            ));
        }
        if let Some(r) = spec.restore_snapshot.as_mut() {
            tracing::info!(source = %r.source_deployment_id, requested = %r.snapshot_name, snapshot = %resolved.record.name, repository = %source_repo.name, "clone source resolved");
            r.resolved_snapshot = Some(resolved.record.name.clone());
            r.repository = Some(source_repo.name.clone());
        }
        Ok(ResolvedClone {
            warnings: cache_warnings(spec, &resolved.record),
            snapshot_sort_millis: Some(resolved.record.sort_millis),
            snapshot_version: Some(resolved.version),
        })
    }

    /// The restore of deployment `d`'s own snapshot `name` (or its newest
    /// success) from its own repository: what a start from a snapshot runs.
    pub(crate) async fn own_snapshot_target(
        &self,
        org: &str,
        d: &Deployment,
        name: &str,
    ) -> Result<RestoreTarget, AppError> {
        let Some(own) = d.spec.repository() else {
            return Err(AppError::invalid(
                Code::RESTORE_REPOSITORY_REQUIRED,
                "restore_snapshot",
                "the deployment has no snapshot repository to start from",
            ));
        };
        if name != LATEST_SUCCESS {
            floe_domain::snapshot_name::validate_snapshot_name(name).map_err(|m| {
                AppError::invalid(Code::VALIDATION_SNAPSHOT_NAME, "restore_snapshot", m)
            })?;
        }
        let resolved = self
            .resolve(org, &d.id, name, Some(own), "")
            .await
            .map_err(|e| rename_field(e, "snapshot_name", "restore_snapshot"))?;
        let request = RestoreRequest {
            snapshot_name: name.to_string(),
            repository: Some(own.to_string()),
            indices: Vec::new(),
            rename_pattern: None,
            rename_replacement: None,
            include_global_state: false,
            include_aliases: true,
            partial: false,
            feature_states: Vec::new(),
        };
        Ok(request.target(&d.id, own, Some(own), &resolved.record.name))
    }

    /// Restore a snapshot into a running deployment, as a `restore` plan.
    pub async fn restore_deployment(
        &self,
        who: &Manager,
        id: &str,
        request: RestoreRequest,
    ) -> Result<DeploymentView, AppError> {
        request.validate_request()?;
        let previous = self.load_deployment(&who.org, id).await?;
        if let Some(pending) = &previous.value.pending_plan {
            return Err(plan_in_progress(&pending.plan_id, pending.kind));
        }
        if previous.value.status != DeploymentStatus::Running {
            return Err(AppError::conflict(
                Code::DEPLOYMENTS_NOT_RUNNING,
                format!(
                    "deployment {id} is {}; only a running deployment can restore",
                    previous.value.status.as_str()
                ),
            ));
        }
        let own = previous.value.spec.repository();
        let Some(wanted) = request.repository.as_deref().or(own) else {
            return Err(AppError::invalid(
                Code::RESTORE_REPOSITORY_REQUIRED,
                "repository",
                "the deployment has no repository of its own: name the one to restore from",
            ));
        };
        // A foreign repository's snapshots are found through the deployment
        // that took them only when it is this one; otherwise the name is
        // trusted and the cluster says whether it exists.
        let (snapshot, repo) = match self
            .resolve(&who.org, id, &request.snapshot_name, Some(wanted), "")
            .await
        {
            Ok(r) => (r.record.name, r.repository),
            Err(e) if request.snapshot_name != LATEST_SUCCESS && request.repository.is_some() => {
                let Some(repo) = self.repository_named(&who.org, Some(wanted)).await? else {
                    return Err(AppError::invalid(
                        Code::RESTORE_REPOSITORY_NOT_FOUND,
                        "repository",
                        format!("snapshot repository {wanted} does not exist"),
                    ));
                };
                tracing::debug!(error = %e, "snapshot not among this deployment's records");
                (request.snapshot_name.clone(), repo)
            }
            Err(e) => return Err(e),
        };
        if own != Some(repo.name.as_str()) {
            // Registered read-only at this deployment's own path, it would
            // replace a mount clone's registration of its source.
            check_source_path(&previous.value, &repo.name, "repository")?;
            let own_repo = self.repository_named(&who.org, own).await?;
            if !reachable_with(own_repo.as_ref(), &repo) {
                return Err(unreachable("repository", &repo.name));
            }
        }
        let target = request.target(id, &repo.name, own, &snapshot);
        let plan = Plan::new(
            &who.org,
            id,
            PlanParams::Restore(target),
            "deployments.restore",
            &who.subject,
            chrono::Utc::now(),
        );
        let answer = self.start_plan(&previous, &plan).await?;
        tracing::info!(deployment = %id, plan = %plan.id, snapshot = %snapshot, repository = %repo.name, "restore plan pending");
        Ok(answer)
    }

    /// Clone a deployment from its snapshot: the short form of a create
    /// with `restore_snapshot`, with the source's version, user settings
    /// and (unless given) node groups.
    pub async fn clone_deployment(
        &self,
        who: &Manager,
        source_id: &str,
        request: CloneRequest,
        idempotency_key: Option<&str>,
    ) -> Result<Creation, AppError> {
        let source = self.load_deployment(&who.org, source_id).await?.value;
        let spec = DeploymentSpec {
            recovery_targets: None,
            drill_schedule: None,
            name: request.name,
            version: source.spec.version.clone(),
            node_groups: request
                .node_groups
                .unwrap_or_else(|| source.spec.node_groups.clone()),
            user_settings: source.spec.user_settings.clone(),
            snapshot: None,
            metadata: Default::default(),
            restore_snapshot: Some(RestoreSnapshot {
                source_deployment_id: source_id.to_string(),
                snapshot_name: request
                    .snapshot_name
                    .unwrap_or_else(|| LATEST_SUCCESS.to_string()),
                repository: None,
                indices: request.indices,
                rename_pattern: None,
                rename_replacement: None,
                mode: request.mode,
                resolved_snapshot: None,
                license: request.license,
            }),
        };
        self.create_deployment(who, spec, idempotency_key)
            .await
            .map_err(clone_fields)
    }
}

/// A clone request's fields are the create's `restore_snapshot` ones one
/// level up: a refusal names them as the caller sent them (`license`, not
/// `restore_snapshot.license`).
fn clone_fields(e: AppError) -> AppError {
    match e {
        AppError::Invalid(mut invalid) => {
            for f in &mut invalid.0 {
                for (create, clone) in [
                    ("restore_snapshot.snapshot_name", "snapshot_name"),
                    ("restore_snapshot.indices", "indices"),
                    ("restore_snapshot.mode", "mode"),
                    ("restore_snapshot.license", "license"),
                ] {
                    if let Some(rest) = f.field.strip_prefix(create)
                        && (rest.is_empty() || rest.starts_with(['.', '[']))
                    {
                        f.field = format!("{clone}{rest}");
                    }
                }
            }
            AppError::Invalid(invalid)
        }
        other => other,
    }
}

/// A frozen tier's cache is worth its disk between 1 % and 10 % of the
/// data it mounts: below, most searches miss it; above, it is paid for and
/// idle.
fn cache_warnings(spec: &DeploymentSpec, snapshot: &SnapshotRecord) -> Vec<String> {
    let mounting = spec
        .restore_snapshot
        .as_ref()
        .is_some_and(|r| r.mode == RestoreMode::Mount);
    let cache: u64 = spec
        .node_groups
        .iter()
        .map(|g| g.shared_cache_bytes() * u64::from(g.count))
        .sum();
    let Some(data) = snapshot.size_in_bytes.filter(|d| *d > 0) else {
        return Vec::new();
    };
    if !mounting || cache == 0 {
        return Vec::new();
    }
    let percent = cache as f64 * 100.0 / data as f64;
    if (1.0..=10.0).contains(&percent) {
        return Vec::new();
    }
    vec![format!(
        "the frozen tier's shared cache ({}) is {percent:.1} % of the snapshot's data ({}); 1 % to 10 % is the useful range (node_groups[].shared_cache)",
        floe_domain::bytesize::format_byte_size(cache),
        floe_domain::bytesize::format_byte_size(data)
    )]
}
