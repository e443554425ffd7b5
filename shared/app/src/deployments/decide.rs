//! What each deployment use case decides, as pure functions of what it
//! read: the record, the records its request names, the caller, the
//! request. Each answers what the call changes (the record, the plan and
//! so its steps) or why it is refused, and touches nothing.
//!
//! A use case reads, decides here, then applies the decision, or, for a
//! `validate_only` call, shows it ([`NewDeployment::validation`],
//! [`Replacement::validation`]). Both start from the same decision, so a
//! validation answers what the real call would do.

use super::{DeploymentQuery, check_version, plan_in_progress, view};
use crate::restore::{ResolvedClone, check_source_path};
use crate::validation::{self, DeploymentValidation, ValidationOutcome};
use crate::{AppError, Caller, Resource};
use chrono::{DateTime, Utc};
use floe_domain::Code;
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus, Tag};
use floe_domain::plan::{Plan, PlanKind, PlanParams, StartParams, lifecycle};
use floe_domain::replacement::ReadOnlyFields;
use floe_domain::repository::{Repository, reachable_with};
use floe_domain::restore::CloneSource;
use floe_store::{Filter, Idempotency, PageRequest, Versioned};
use sha2::{Digest, Sha256};

// ---- create ----------------------------------------------------------

/// A create's request, checked: its spec normalized and valid, and what
/// its idempotency key (if any) is stored as.
#[derive(Debug)]
pub(crate) struct CreateRequest {
    pub spec: DeploymentSpec,
    pub idempotency: Option<Idempotency>,
}

/// Checks a create's key and spec. The request hash covers the caller,
/// named by the token's issuer, its own organization and its subject (a
/// `sub` is unique only within those two): another caller's retry with
/// the same key is another request, and never answered the first one's
/// deployment and password (issue 33).
pub(crate) fn check_create(
    who: &Caller,
    mut spec: DeploymentSpec,
    key: Option<&str>,
) -> Result<CreateRequest, AppError> {
    if let Some(k) = key {
        check_idempotency_key(k)?;
    }
    spec.normalize()?;
    spec.validate_spec()?;
    let idempotency = match key {
        None => None,
        Some(k) => {
            let canonical = serde_json::to_vec(&spec).map_err(|_| AppError::Internal)?;
            Some(Idempotency {
                key_hash: hash(&[k.as_bytes()]),
                request_hash: hash(&[
                    who.issuer.as_bytes(),
                    who.token_org.as_bytes(),
                    who.subject.as_bytes(),
                    &canonical,
                ]),
            })
        }
    };
    Ok(CreateRequest { spec, idempotency })
}

/// A new deployment, stored as `initializing` with its pending create plan.
#[derive(Debug)]
pub(crate) struct NewDeployment {
    /// Without a password: applying the decision makes and seals one.
    pub deployment: Deployment,
    pub plan: Plan,
    /// What the request deserves to be told (a clone's cache size).
    pub warnings: Vec<String>,
}

/// The deployment a create makes from `spec` (a clone's source resolved
/// into it). `id` is the new deployment's; a validation's is empty, as it
/// reserves none. `endpoint` is the host of its stable endpoint, named
/// once, here, for its whole life.
pub(crate) fn decide_create(
    who: &Caller,
    id: &str,
    mut spec: DeploymentSpec,
    clone: ResolvedClone,
    endpoint: Option<String>,
    now: DateTime<Utc>,
) -> NewDeployment {
    // The plan restores the clone's source; the deployment keeps what it
    // depends on (and pins the snapshot) as its `clone_source`.
    let params = PlanParams::Create(spec.clone());
    let clone_source = params
        .restore()
        .zip(clone.snapshot_sort_millis)
        .map(|(target, millis)| CloneSource {
            snapshot_version: clone.snapshot_version,
            ..CloneSource::of(&target, millis)
        });
    spec.restore_snapshot = None;
    let plan = Plan::new(
        &who.org,
        id,
        params,
        "deployments.create",
        &who.subject,
        now,
    );
    let deployment = Deployment {
        clone_source,
        endpoint,
        ..Deployment::first_planned_by(&plan, spec)
    };
    NewDeployment {
        deployment,
        plan,
        warnings: clone.warnings,
    }
}

impl NewDeployment {
    /// What `validate_only` answers for this create.
    pub(crate) fn validation(&self) -> DeploymentValidation {
        let mut would_be = validation::would_be(&self.deployment, 0);
        would_be.warnings = self.warnings.clone();
        DeploymentValidation {
            outcome: ValidationOutcome::Create,
            deployment: would_be,
            plan: Some(validation::preview(&self.plan, &self.deployment)),
        }
    }
}

/// What `validate_only` answers for a create whose key made `first`: the
/// real call answers that deployment and creates nothing.
pub(crate) fn replay_validation(first: &Versioned<Deployment>) -> DeploymentValidation {
    DeploymentValidation {
        outcome: ValidationOutcome::Replay,
        deployment: validation::would_be(&first.value, first.version),
        plan: None,
    }
}

/// An idempotency key is 1 to 128 visible ASCII characters.
fn check_idempotency_key(key: &str) -> Result<(), AppError> {
    let ok = !key.is_empty() && key.len() <= 128 && key.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(AppError::invalid(
            Code::VALIDATION_IDEMPOTENCY_KEY,
            "Idempotency-Key",
            "must be 1 to 128 visible ASCII characters",
        ))
    }
}

fn hash(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

// ---- replace ---------------------------------------------------------

/// A replace's request, checked against the record it replaces.
#[derive(Debug)]
pub(crate) struct ReplaceRequest {
    /// Normalized and valid.
    pub spec: DeploymentSpec,
    /// The version the caller expects (`If-Match`, else the read-only
    /// body's `resource_version`), to name when the write finds another.
    pub precondition: Option<u64>,
}

/// Checks a replace's preconditions and spec: the versions the caller
/// expects, the read-only fields of the GET body it was made from, and no
/// `restore_snapshot` (a create's).
pub(crate) fn check_replace(
    previous: &Versioned<Deployment>,
    expected: Option<u64>,
    mut spec: DeploymentSpec,
    read_only: &ReadOnlyFields,
) -> Result<ReplaceRequest, AppError> {
    let read_version = read_only
        .resource_version()
        .map_err(|e| AppError::invalid(Code::VALIDATION_READ_ONLY, e.field, e.message))?;
    check_version(expected, previous.version)?;
    check_version(read_version, previous.version)?;
    spec.normalize()?;
    spec.validate_spec()?;
    read_only
        .check(&view(previous), &spec)
        .map_err(|e| AppError::invalid(Code::VALIDATION_READ_ONLY, e.field, e.message))?;
    if spec.restore_snapshot.is_some() {
        return Err(AppError::invalid(
            Code::VALIDATION_CREATE_ONLY,
            "restore_snapshot",
            "is for creating a deployment; restore into this one with POST /api/v1/deployments/{id}/_restore",
        ));
    }
    Ok(ReplaceRequest {
        spec,
        precondition: expected.or(read_version),
    })
}

/// The records a mount clone's new spec names, read for
/// [`decide_replace`]; empty for any other deployment.
#[derive(Debug, Default)]
pub(crate) struct NamedRecords {
    /// When the spec changes the repository: the new one and the clone
    /// source's, as found.
    pub repositories: Option<(Option<Repository>, Option<Repository>)>,
    /// The repository of each policy the spec attaches, in its order;
    /// `None` for a missing policy (the reference check names it).
    pub policy_repositories: Vec<Option<String>>,
}

/// What a replace changes.
#[derive(Debug)]
pub(crate) enum Replacement {
    /// Recorded at once: a change to the name, tags or policies of a
    /// running deployment, or any change to a stopped one (its next start
    /// applies it).
    Record(Deployment),
    /// A plan brings the nodes to the spec; the record shows it pending
    /// (and keeps the running spec, unless the plan is a start).
    Plan { next: Deployment, plan: Box<Plan> },
}

/// Decides a replace of `previous` with the checked `spec`.
///
/// On a running deployment, changes to the name, tags and policy
/// attachments apply at once; the others need an update plan, refused
/// while another plan is pending. A stopped deployment takes any change
/// into its record. A failed one is fixed by applying its spec again: an
/// update plan when it has run, a start when it never reached a running
/// cluster.
/// `moves_to`: the stable endpoint the platform would give this
/// deployment, if it has none (created before Floe named endpoints).
pub(crate) fn decide_replace(
    previous: &Versioned<Deployment>,
    spec: DeploymentSpec,
    named: &NamedRecords,
    who: &Caller,
    now: DateTime<Utc>,
    moves_to: Option<String>,
) -> Result<Replacement, AppError> {
    let current = &previous.value;
    check_clone_writes(current, &spec, named)?;
    // A stopped deployment's nodes start fresh on whatever version; a
    // cluster that ran moves only along Elastic's upgrade paths.
    if current.status != DeploymentStatus::Stopped {
        floe_domain::deployment::check_version_change(&current.spec.version, &spec.version)
            .map_err(|m| AppError::invalid(Code::DEPLOYMENTS_VERSION_CHANGE, "version", m))?;
    }
    let mut next = current.clone();
    next.updated = now;
    let status = current.status;
    // A running deployment without a stable endpoint moves to one with its
    // next update, or a PUT of its unchanged spec: every node is replaced
    // by ones whose certificates name it (a stopped one moves at the next
    // update after its start).
    let moves_to = moves_to.filter(|_| current.endpoint.is_none() && current.access.is_some());
    let needs_plan = status == DeploymentStatus::Failed
        || (status != DeploymentStatus::Stopped
            && (current.spec.needs_plan_to_become(&spec) || moves_to.is_some()));
    if !needs_plan {
        // The cluster runs the spec of its last successful plan: a change
        // that needs a plan becomes the record's spec only when that plan
        // succeeds. A stopped deployment runs nothing: its record takes
        // the change, and its next start applies it.
        next.spec = spec;
        return Ok(Replacement::Record(next));
    }
    if let Some(pending) = &current.pending_plan {
        return Err(plan_in_progress(&pending.plan_id, pending.kind));
    }
    let params = match status {
        DeploymentStatus::Running => PlanParams::Update(spec),
        // It ran: its nodes are brought to the spec as an update does.
        DeploymentStatus::Failed if current.access.is_some() => PlanParams::Update(spec),
        // It never ran: its nodes are made as a start makes them.
        DeploymentStatus::Failed => PlanParams::Start(StartParams {
            spec,
            restore: None,
        }),
        other => {
            return Err(AppError::conflict(
                Code::DEPLOYMENTS_NOT_RUNNING,
                format!(
                    "the deployment is {}; only a running deployment can be reconfigured",
                    other.as_str()
                ),
            ));
        }
    };
    match &params {
        PlanParams::Start(p) => next.spec = p.spec.clone(),
        PlanParams::Update(_) => next.endpoint_moving_to = moves_to,
        _ => {}
    }
    let plan = Plan::new(
        &who.org,
        &current.id,
        params,
        "deployments.update",
        &who.subject,
        now,
    );
    next.pending_plan = Some(plan.reference());
    next.status = lifecycle::while_running(plan.kind());
    Ok(Replacement::Plan {
        next,
        plan: Box::new(plan),
    })
}

impl Replacement {
    pub(crate) fn plan(&self) -> Option<&Plan> {
        match self {
            Replacement::Record(_) => None,
            Replacement::Plan { plan, .. } => Some(plan.as_ref()),
        }
    }

    /// The spec the deployment runs once the change is applied: a plan's
    /// target, else the record's.
    pub(crate) fn target_spec(&self) -> &DeploymentSpec {
        match self {
            Replacement::Record(next) => &next.spec,
            Replacement::Plan { next, plan } => plan.params.target_spec().unwrap_or(&next.spec),
        }
    }

    /// What `validate_only` answers for this change of `previous`.
    pub(crate) fn validation(&self, previous: &Versioned<Deployment>) -> DeploymentValidation {
        match self {
            Replacement::Plan { next, plan } => {
                // What the deployment would run once the plan succeeds.
                let mut target = next.clone();
                target.spec = self.target_spec().clone();
                DeploymentValidation {
                    outcome: ValidationOutcome::Plan,
                    deployment: validation::would_be(&target, previous.version),
                    plan: Some(validation::preview(plan, &previous.value)),
                }
            }
            Replacement::Record(next) => DeploymentValidation {
                outcome: ValidationOutcome::Record,
                deployment: validation::would_be(next, previous.version),
                plan: None,
            },
        }
    }
}

/// Refuses a spec that would have a mount clone register the name its
/// source's path is read under at its own path: as its repository, or
/// as the repository of an attached policy (the snapshotter registers
/// that one before each run).
fn check_clone_writes(
    d: &Deployment,
    spec: &DeploymentSpec,
    named: &NamedRecords,
) -> Result<(), AppError> {
    let Some(src) = d.clone_source.as_ref().filter(|s| s.reads_source()) else {
        return Ok(());
    };
    if let Some(repo) = spec.repository() {
        check_source_path(d, repo, "snapshot.repository")?;
        // The nodes have one S3 client: a new repository of their own
        // must be reachable with the one that reads the source.
        if d.spec.repository() != Some(repo)
            && let Some((Some(own), Some(source))) = &named.repositories
            && !reachable_with(Some(own), source)
        {
            return Err(AppError::invalid(
                Code::RESTORE_REPOSITORY_UNREACHABLE,
                "snapshot.repository",
                format!(
                    "the nodes have one S3 client and this clone mounts snapshots of repository {}, which {repo} cannot share (same endpoint, protocol, path style, region and access key needed)",
                    src.repository
                ),
            ));
        }
    }
    for (i, repository) in named.policy_repositories.iter().enumerate() {
        if let Some(repository) = repository {
            check_source_path(d, repository, &format!("snapshot.policies[{i}]"))?;
        }
    }
    Ok(())
}

// ---- start, shutdown, delete, reset password -------------------------

/// An operation that runs a plan on a deployment as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    Start,
    Shutdown,
    Delete,
    ResetPassword,
}

/// Whether `op` may start its plan on `d`: never while another plan is
/// pending, and only from the status it starts from.
pub(crate) fn lifecycle_allowed(d: &Deployment, op: Lifecycle) -> Result<(), AppError> {
    let id = &d.id;
    let status = d.status;
    let refusal = match op {
        Lifecycle::Start => (status != DeploymentStatus::Stopped).then(|| {
            AppError::conflict(
                Code::DEPLOYMENTS_NOT_STOPPED,
                format!(
                    "deployment {id} is {}; only a stopped deployment can be started",
                    status.as_str()
                ),
            )
        }),
        Lifecycle::Shutdown => (status == DeploymentStatus::Stopped).then(|| {
            AppError::conflict(
                Code::DEPLOYMENTS_ALREADY_STOPPED,
                format!("deployment {id} is already stopped"),
            )
        }),
        Lifecycle::Delete => (status != DeploymentStatus::Stopped).then(|| {
            AppError::conflict(
                Code::DEPLOYMENTS_DEPLOYMENT_NOT_STOPPED,
                format!(
                    "deployment {id} is {}; shut it down before deleting it",
                    status.as_str()
                ),
            )
        }),
        Lifecycle::ResetPassword => (status != DeploymentStatus::Running || d.access.is_none())
            .then(|| {
                AppError::conflict(
                    Code::DEPLOYMENTS_NOT_RUNNING,
                    format!(
                        "deployment {id} is {}; only a running cluster's password can be reset",
                        status.as_str()
                    ),
                )
            }),
    };
    let pending = d
        .pending_plan
        .as_ref()
        .map(|p| plan_in_progress(&p.plan_id, p.kind));
    // A deployment that is not stopped is told to shut down before a
    // delete, whatever plan it runs; the others name the plan first.
    let first = match op {
        Lifecycle::Delete => refusal.or(pending),
        _ => pending.or(refusal),
    };
    first.map_or(Ok(()), Err)
}

/// What a delete does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deletion {
    /// Start a delete plan.
    Plan,
    /// A delete plan is pending already: a second DELETE answers it.
    Pending,
}

pub(crate) fn decide_delete(
    current: &Versioned<Deployment>,
    expected: Option<u64>,
) -> Result<Deletion, AppError> {
    check_version(expected, current.version)?;
    if current
        .value
        .pending_plan
        .as_ref()
        .is_some_and(|p| p.kind == PlanKind::Delete)
    {
        return Ok(Deletion::Pending);
    }
    lifecycle_allowed(&current.value, Lifecycle::Delete)?;
    Ok(Deletion::Plan)
}

/// Whether `d`'s password may be reset through its resource `ref_id`.
pub(crate) fn decide_reset_password(d: &Deployment, ref_id: &str) -> Result<(), AppError> {
    if ref_id != floe_domain::access::ELASTICSEARCH_REF_ID {
        return Err(AppError::not_found(
            Resource::Elasticsearch,
            format!("{}/{ref_id}", d.id),
        ));
    }
    lifecycle_allowed(d, Lifecycle::ResetPassword)
}

// ---- list ------------------------------------------------------------

/// A listing's filters, checked as the client sent them.
#[derive(Debug)]
pub(crate) struct Listing {
    /// What the store matches.
    pub filter: Filter,
    pub page: PageRequest,
    /// The tag `filter` names, which each deployment listed must carry:
    /// a record written before keys were refused a `:` may carry a key
    /// `a:b` that the store's `a:b:c` also matches.
    pub tag: Option<Tag>,
}

/// The store's filter for a listing, its `status` and `tag` checked as the
/// client sent them; the tag is split at its first `:`.
pub(crate) fn listing_filter(query: DeploymentQuery) -> Result<Listing, AppError> {
    let status = match &query.status {
        None => None,
        Some(s) => Some(
            DeploymentStatus::parse(s)
                .ok_or_else(|| {
                    AppError::invalid(
                        Code::VALIDATION_UNKNOWN_VALUE,
                        "status",
                        "must be one of initializing, reconfiguring, running, stopping, stopped, failed",
                    )
                })?
                .as_str()
                .to_string(),
        ),
    };
    let tag = match &query.tag {
        None => None,
        Some(t) => Some(Tag::parse_filter(t).ok_or_else(|| {
            AppError::invalid(
                Code::VALIDATION_TAG,
                "tag",
                "must be key:value, split at the first ':' (a key holds no ':', a value may)",
            )
        })?),
    };
    let filter = Filter {
        name_prefix: query.name_prefix,
        status,
        tag: tag.as_ref().map(Tag::filter_form),
    };
    Ok(Listing {
        filter,
        page: query.page,
        tag,
    })
}

#[cfg(test)]
mod tests;
