//! Deployments: create (and clone), read, list, update, shut down, delete.

use crate::error::{Holder, reference_error};
use crate::shown::Shown;
use crate::validation::{self, Checked, DeploymentValidation, Mode, ValidationOutcome};
use crate::{App, AppError, Manager, Reader, Resource};
use floe_domain::access::{ELASTIC_USER, ElasticCredentials, PASSWORD_FIELD, sealing_resource};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus, DeploymentView};
use floe_domain::names::{is_resource_id, new_resource_id};
use floe_domain::plan::{Plan, PlanKind, PlanParams, ShutdownParams, StartParams, lifecycle};
use floe_domain::replacement::ReadOnlyFields;
use floe_domain::restore::CloneSource;
use floe_ports::ReconcileJob;
use floe_secrets::{Owner, SecretError};
use floe_store::{Filter, Idempotency, PageRequest, StoreError, Versioned};
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentList {
    #[schema(value_type = Vec<DeploymentView>)]
    pub deployments: Vec<Shown<DeploymentView>>,
    /// Present when more may follow. A page can hold fewer than `size`
    /// deployments when filters are given; follow the cursor until it is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What a listing asks for. `status` and `tag` are checked here, as the
/// client sent them.
#[derive(Debug, Clone, Default)]
pub struct DeploymentQuery {
    pub page: PageRequest,
    pub name_prefix: Option<String>,
    pub status: Option<String>,
    /// `key:value`.
    pub tag: Option<String>,
}

/// A create's outcome: a new deployment, or the first result of a retry
/// with the same idempotency key and body.
#[derive(Debug)]
pub enum Creation {
    Created(DeploymentView),
    Replayed(DeploymentView),
}

pub(crate) fn view(d: &Versioned<Deployment>) -> DeploymentView {
    DeploymentView::new(&d.value, d.version)
}

pub(crate) fn plan_in_progress(plan_id: &str, kind: PlanKind) -> AppError {
    AppError::conflict(
        "deployments.plan_in_progress",
        format!(
            "plan {plan_id} ({}) is pending; wait for it or cancel it (DELETE …/plans/pending)",
            kind.as_str()
        ),
    )
}

fn hash(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

/// A stored deployment's view, as JSON: what [`crate::shown`] keeps. It
/// depends on the record alone (the catalog it looks instance types up in
/// is fixed at build time).
fn show(d: Versioned<Deployment>) -> Result<Shown<DeploymentView>, AppError> {
    Shown::new(&DeploymentView::of(d.value, d.version), d.version)
}

impl App {
    /// The deployment `id` of the caller's organization.
    pub(crate) async fn load_deployment(
        &self,
        org: &str,
        id: &str,
    ) -> Result<Versioned<Deployment>, AppError> {
        if !is_resource_id(id) {
            return Err(AppError::not_found(Resource::Deployment, id));
        }
        self.store
            .get_deployment(org, id)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Deployment, id))
    }

    /// Stores `plan` as the deployment's pending plan, moves the deployment
    /// to the status its kind shows while it runs, and wakes a worker.
    pub(crate) async fn start_plan(
        &self,
        previous: &Versioned<Deployment>,
        plan: &Plan,
    ) -> Result<DeploymentView, AppError> {
        let mut next = previous.value.clone();
        next.status = lifecycle::while_running(plan.kind());
        next.pending_plan = Some(plan.reference());
        next.updated = plan.created;
        let version = self
            .store
            .replace_deployment(&next, previous, Some(plan))
            .await
            .map_err(|e| AppError::from_write(e, None, Resource::Deployment, &next.id))?;
        self.wake(&plan.org, &plan.deployment_id, &plan.id).await;
        Ok(DeploymentView::new(&next, version))
    }

    /// Create a deployment: stored as `initializing` with a pending create
    /// plan. With `idempotency_key`, a retry with the same body answers the
    /// first result and another body is a conflict.
    pub async fn create_deployment(
        &self,
        who: &Manager,
        spec: DeploymentSpec,
        idempotency_key: Option<&str>,
    ) -> Result<Creation, AppError> {
        match self
            .create_deployment_in(who, spec, idempotency_key, Mode::Apply)
            .await?
        {
            Checked::Done(c) => Ok(c),
            // Apply never stops at a validation.
            Checked::Validated(_) => Err(AppError::Internal),
        }
    }

    /// [`App::create_deployment`], or with [`Mode::ValidateOnly`] every
    /// check it makes and the answer it would give, with nothing stored.
    pub async fn create_deployment_in(
        &self,
        who: &Manager,
        spec: DeploymentSpec,
        idempotency_key: Option<&str>,
        mode: Mode,
    ) -> Result<Checked<Creation>, AppError> {
        self.create_checked(who, spec, idempotency_key, mode).await
    }

    /// Creates a deployment from `spec` (a create's body, or a clone's):
    /// normalized, validated, a clone's source resolved, then stored with
    /// its create plan.
    pub(crate) async fn create_validated(
        &self,
        who: &Manager,
        spec: DeploymentSpec,
        key: Option<&str>,
    ) -> Result<Creation, AppError> {
        match self.create_checked(who, spec, key, Mode::Apply).await? {
            Checked::Done(c) => Ok(c),
            Checked::Validated(_) => Err(AppError::Internal),
        }
    }

    async fn create_checked(
        &self,
        who: &Manager,
        mut spec: DeploymentSpec,
        key: Option<&str>,
        mode: Mode,
    ) -> Result<Checked<Creation>, AppError> {
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
                    request_hash: hash(&[who.subject.as_bytes(), &canonical]),
                })
            }
        };
        if mode == Mode::ValidateOnly {
            // What the write would refuse, read instead: a key used before
            // is a replay (or the conflict of another body, or spent).
            if let Some(idem) = &idempotency
                && let Some(first) = self.replay(&who.org, idem).await?
            {
                let d = self.load_deployment(&who.org, &first.id).await?;
                return Ok(Checked::Validated(Box::new(DeploymentValidation {
                    outcome: ValidationOutcome::Replay,
                    deployment: validation::would_be(&d.value, d.version),
                    plan: None,
                })));
            }
            return self.create_new(who, spec, None, mode).await;
        }
        // The write itself refuses a key that was used: a new key (the
        // usual case) costs one transaction and no read before it, and a
        // retry is told apart only when something refuses it. Whatever
        // refused it, a retry of an earlier create answers as that create
        // did (its result, or the conflict of another body).
        match self.create_new(who, spec, idempotency.as_ref(), mode).await {
            Ok(created) => Ok(created),
            Err(refused) => match &idempotency {
                Some(idem) => match self.replay(&who.org, idem).await? {
                    Some(first) => Ok(Checked::Done(Creation::Replayed(first))),
                    None => Err(refused),
                },
                None => Err(refused),
            },
        }
    }

    /// Stores a new deployment from `spec` with its create plan (and the
    /// idempotency key, which the store refuses if it was used); with
    /// [`Mode::ValidateOnly`], checks what the store would and stops.
    async fn create_new(
        &self,
        who: &Manager,
        mut spec: DeploymentSpec,
        idempotency: Option<&Idempotency>,
        mode: Mode,
    ) -> Result<Checked<Creation>, AppError> {
        let resolved = self.resolve_clone(&who.org, &mut spec).await?;
        let warnings = resolved.warnings;

        let now = chrono::Utc::now();
        // A validation names no deployment: nothing is reserved.
        let id = match mode {
            Mode::Apply => new_resource_id(),
            Mode::ValidateOnly => String::new(),
        };
        // The owner gets the elastic password in this answer; the create
        // plan gives the cluster the same one. A validation makes none.
        let password = match mode {
            Mode::Apply => {
                let password = floe_node_security::new_password();
                let sealed = self.seal_password(&who.org, &id, password.expose()).await?;
                Some((password, sealed))
            }
            Mode::ValidateOnly => None,
        };
        // The plan restores the clone's source; the deployment keeps what it
        // depends on (and pins the snapshot) as its `clone_source`.
        let params = PlanParams::Create(spec.clone());
        let clone_source =
            params
                .restore()
                .zip(resolved.snapshot_sort_millis)
                .map(|(target, millis)| CloneSource {
                    snapshot_version: resolved.snapshot_version,
                    ..CloneSource::of(&target, millis)
                });
        spec.restore_snapshot = None;
        let plan = Plan::new(
            &who.org,
            &id,
            params,
            "deployments.create",
            &who.subject,
            now,
        );
        let mut deployment = Deployment {
            id: id.clone(),
            org: who.org.clone(),
            spec,
            status: lifecycle::while_running(plan.kind()),
            pending_plan: Some(plan.reference()),
            access: None,
            password_to_apply: None,
            clone_source,
            health: None,
            created: now,
            updated: now,
        };
        let Some((password, sealed)) = password else {
            // The store would refuse missing references: look them up.
            self.check_references(&who.org, &deployment.spec).await?;
            let mut would_be = validation::would_be(&deployment, 0);
            would_be.warnings = warnings;
            return Ok(Checked::Validated(Box::new(DeploymentValidation {
                outcome: ValidationOutcome::Create,
                deployment: would_be,
                plan: Some(validation::preview(&plan, &deployment)),
            })));
        };
        deployment.password_to_apply = Some(sealed);
        match self
            .store
            .create_deployment(&deployment, &plan, idempotency)
            .await
        {
            Ok(()) => {}
            // The key's first create (or a concurrent one) won; the caller
            // answers its result when it can still read it.
            Err(StoreError::IdempotencyKeyReused) => return Err(AppError::ConcurrentChange),
            // The snapshot went between its resolving and this write.
            Err(StoreError::MissingReference {
                kind: floe_store::Kind::Snapshot,
                ..
            }) => {
                return Err(AppError::invalid(
                    "restore.snapshot_not_found",
                    "restore_snapshot.snapshot_name",
                    "the snapshot was deleted while the clone was being created",
                ));
            }
            Err(e) => {
                let policies = deployment.spec.policies();
                return Err(reference_error(Holder::Deployment { policies }, e));
            }
        }
        tracing::info!(deployment = %id, plan = %plan.id, "deployment created with a pending create plan");
        self.wake(&who.org, &id, &plan.id).await;
        let stored = Versioned {
            value: deployment,
            version: 1,
            refs: 0,
        };
        let mut created = view(&stored);
        created.warnings = warnings;
        created.credentials = Some(credentials(password.expose()));
        Ok(Checked::Done(Creation::Created(created)))
    }

    /// The first result of an idempotent create, or a conflict when the key
    /// was used with another body.
    async fn replay(
        &self,
        org: &str,
        idem: &Idempotency,
    ) -> Result<Option<DeploymentView>, AppError> {
        let Some(first) = self.store.get_idempotency(org, &idem.key_hash).await? else {
            return Ok(None);
        };
        if first.request_hash != idem.request_hash {
            return Err(AppError::conflict(
                "request.idempotency_key_reused",
                "this idempotency key was already used with a different request body",
            ));
        }
        // The deployment this key created is gone (deleted since): its first
        // answer cannot be given again, and a new deployment under an old
        // key would surprise the caller who retries.
        let d = match self.load_deployment(org, &first.deployment_id).await {
            Err(AppError::NotFound { .. }) => {
                return Err(AppError::conflict(
                    "request.idempotency_key_spent",
                    format!(
                        "this idempotency key created deployment {}, which has been deleted since; send a new key to create another",
                        first.deployment_id
                    ),
                ));
            }
            other => other?,
        };
        // The same caller retrying the same create (its first answer lost
        // on the way) gets the credentials that answer carried.
        let mut replayed = view(&d);
        // The password the cluster has, else the one its create gives it
        // (a reset that never applied must not be handed out).
        let sealed = d
            .value
            .access
            .as_ref()
            .map(|a| a.sealed_password.as_str())
            .or(d.value.password_to_apply.as_deref());
        if let Some(sealed) = sealed {
            let password = self.open_password(org, &d.value.id, sealed).await?;
            replayed.credentials = Some(credentials(&password));
        }
        Ok(Some(replayed))
    }

    /// A new `elastic` password for a running deployment: made here,
    /// returned once in this answer, and applied to the cluster by a
    /// `reset_password` plan (the old one works until the plan's first step
    /// ends).
    pub async fn reset_password(
        &self,
        who: &Manager,
        id: &str,
        ref_id: &str,
    ) -> Result<DeploymentView, AppError> {
        let previous = self.load_deployment(&who.org, id).await?;
        if ref_id != floe_domain::access::ELASTICSEARCH_REF_ID {
            return Err(AppError::not_found(
                Resource::Elasticsearch,
                format!("{id}/{ref_id}"),
            ));
        }
        if let Some(pending) = &previous.value.pending_plan {
            return Err(plan_in_progress(&pending.plan_id, pending.kind));
        }
        if previous.value.status != DeploymentStatus::Running || previous.value.access.is_none() {
            return Err(AppError::conflict(
                "deployments.not_running",
                format!(
                    "deployment {id} is {}; only a running cluster's password can be reset",
                    previous.value.status.as_str()
                ),
            ));
        }
        let password = floe_node_security::new_password();
        let sealed = self.seal_password(&who.org, id, password.expose()).await?;
        let plan = Plan::new(
            &who.org,
            id,
            PlanParams::ResetPassword,
            "deployments.reset_password",
            &who.subject,
            chrono::Utc::now(),
        );
        let mut next = previous.value.clone();
        next.status = lifecycle::while_running(plan.kind());
        next.pending_plan = Some(plan.reference());
        next.password_to_apply = Some(sealed);
        next.updated = plan.created;
        let version = self
            .store
            .replace_deployment(&next, &previous, Some(&plan))
            .await
            .map_err(|e| AppError::from_write(e, None, Resource::Deployment, id))?;
        self.wake(&who.org, id, &plan.id).await;
        tracing::info!(deployment = %id, plan = %plan.id, "password reset plan pending");
        let mut answer = DeploymentView::new(&next, version);
        answer.credentials = Some(credentials(password.expose()));
        Ok(answer)
    }

    /// The repository and policies `spec` names exist in the organization.
    async fn check_references(&self, org: &str, spec: &DeploymentSpec) -> Result<(), AppError> {
        let missing = |kind, key: &str| StoreError::MissingReference {
            kind,
            key: key.to_string(),
        };
        let holder = Holder::Deployment {
            policies: spec.policies(),
        };
        if let Some(repo) = spec.repository()
            && self.store.get_repository(org, repo).await?.is_none()
        {
            return Err(reference_error(
                holder,
                missing(floe_store::Kind::Repository, repo),
            ));
        }
        for policy in spec.policies() {
            if self.store.get_policy(org, policy).await?.is_none() {
                return Err(reference_error(
                    holder,
                    missing(floe_store::Kind::Policy, policy),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a spec that would have a mount clone register the name its
    /// source's path is read under at its own path: as its repository, or
    /// as the repository of an attached policy (the snapshotter registers
    /// that one before each run).
    async fn check_clone_writes(
        &self,
        org: &str,
        d: &Deployment,
        spec: &DeploymentSpec,
    ) -> Result<(), AppError> {
        if !d.clone_source.as_ref().is_some_and(|s| s.reads_source()) {
            return Ok(());
        }
        if let (Some(repo), Some(src)) = (spec.repository(), d.clone_source.as_ref()) {
            crate::restore::check_source_path(d, repo, "snapshot.repository")?;
            // The nodes have one S3 client: a new repository of their own
            // must be reachable with the one that reads the source.
            if d.spec.repository() != Some(repo)
                && let (Some(own), Some(source)) = (
                    self.store.get_repository(org, repo).await?,
                    self.store.get_repository(org, &src.repository).await?,
                )
                && !floe_domain::repository::reachable_with(Some(&own.value), &source.value)
            {
                return Err(AppError::invalid(
                    "restore.repository_unreachable",
                    "snapshot.repository",
                    format!(
                        "the nodes have one S3 client and this clone mounts snapshots of repository {}, which {repo} cannot share (same endpoint, protocol, path style, region and access key needed)",
                        src.repository
                    ),
                ));
            }
        }
        for (i, id) in spec.policies().iter().enumerate() {
            // A missing policy is the reference check's to name.
            if let Some(policy) = self.store.get_policy(org, id).await? {
                crate::restore::check_source_path(
                    d,
                    &policy.value.spec.repository,
                    &format!("snapshot.policies[{i}]"),
                )?;
            }
        }
        Ok(())
    }

    /// Seals a deployment's `elastic` password for its record.
    pub(crate) async fn seal_password(
        &self,
        org: &str,
        deployment_id: &str,
        password: &str,
    ) -> Result<String, AppError> {
        let resource = sealing_resource(deployment_id);
        self.cipher
            .seal(password, &password_owner(org, &resource))
            .await
            .map_err(secret_error)
    }

    async fn open_password(
        &self,
        org: &str,
        deployment_id: &str,
        sealed: &str,
    ) -> Result<String, AppError> {
        let resource = sealing_resource(deployment_id);
        self.cipher
            .open(sealed, &password_owner(org, &resource))
            .await
            .map_err(secret_error)
    }

    /// One page of the organization's deployments, oldest first.
    pub async fn list_deployments(
        &self,
        who: &Reader,
        query: DeploymentQuery,
    ) -> Result<DeploymentList, AppError> {
        let status = match &query.status {
            None => None,
            Some(s) => Some(
                DeploymentStatus::parse(s)
                    .ok_or_else(|| {
                        AppError::invalid(
                            "validation.unknown_value",
                            "status",
                            "must be one of initializing, reconfiguring, running, stopping, stopped, failed",
                        )
                    })?
                    .as_str()
                    .to_string(),
            ),
        };
        if let Some(tag) = &query.tag
            && !tag.contains(':')
        {
            return Err(AppError::invalid(
                "validation.tag",
                "tag",
                "must be key:value",
            ));
        }
        let filter = Filter {
            name_prefix: query.name_prefix,
            status,
            tag: query.tag,
        };
        let result = self
            .store
            .show_deployments(&who.org, filter, &query.page, &self.views.0, show)
            .await?;
        Ok(DeploymentList {
            deployments: result.items,
            next_cursor: result.next_cursor,
        })
    }

    /// A deployment as the API shows it (see [`crate::shown`]).
    pub async fn show_deployment(
        &self,
        who: &Reader,
        id: &str,
    ) -> Result<Shown<DeploymentView>, AppError> {
        if !is_resource_id(id) {
            return Err(AppError::not_found(Resource::Deployment, id));
        }
        self.store
            .show_deployment(&who.org, id, &self.views.0, show)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Deployment, id))
    }

    pub async fn get_deployment(&self, who: &Reader, id: &str) -> Result<DeploymentView, AppError> {
        let d = self.load_deployment(&who.org, id).await?;
        Ok(DeploymentView::of(d.value, d.version))
    }

    /// Replace a deployment's spec (see [`App::replace_deployment`]).
    pub async fn update_deployment(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        spec: DeploymentSpec,
    ) -> Result<DeploymentView, AppError> {
        self.replace_deployment(who, id, expected, spec, &ReadOnlyFields::default())
            .await
    }

    /// Replace a deployment's spec; `read_only` holds the fields of the GET
    /// body the request was made from (ignored when unchanged, refused when
    /// changed; its `resource_version` is a precondition like `If-Match`).
    ///
    /// On a running deployment, changes to the name, tags and policy
    /// attachments apply at once; the others need an update plan, refused
    /// while another plan is pending. A stopped deployment takes any change
    /// into its record: it applies when the deployment starts again. A
    /// failed one is fixed by applying its spec again (ECE's "fix by
    /// applying the plan again"): an update plan when it has run, a start
    /// when it never reached a running cluster.
    pub async fn replace_deployment(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        spec: DeploymentSpec,
        read_only: &ReadOnlyFields,
    ) -> Result<DeploymentView, AppError> {
        match self
            .replace_deployment_in(who, id, expected, spec, read_only, Mode::Apply)
            .await?
        {
            Checked::Done(view) => Ok(view),
            // Apply never stops at a validation.
            Checked::Validated(_) => Err(AppError::Internal),
        }
    }

    /// [`App::replace_deployment`], or with [`Mode::ValidateOnly`] every
    /// check it makes and what it would change, with nothing stored.
    pub async fn replace_deployment_in(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        mut spec: DeploymentSpec,
        read_only: &ReadOnlyFields,
        mode: Mode,
    ) -> Result<Checked<DeploymentView>, AppError> {
        let previous = self.load_deployment(&who.org, id).await?;
        let read_version = read_only
            .resource_version()
            .map_err(|e| AppError::invalid("validation.read_only", e.field, e.message))?;
        check_version(expected, previous.version)?;
        check_version(read_version, previous.version)?;
        spec.normalize()?;
        spec.validate_spec()?;
        read_only
            .check(&view(&previous), &spec)
            .map_err(|e| AppError::invalid("validation.read_only", e.field, e.message))?;
        if spec.restore_snapshot.is_some() {
            return Err(AppError::invalid(
                "validation.create_only",
                "restore_snapshot",
                "is for creating a deployment; restore into this one with POST /api/v1/deployments/{id}/_restore",
            ));
        }

        self.check_clone_writes(&who.org, &previous.value, &spec)
            .await?;

        // A stopped deployment's nodes start fresh on whatever version; a
        // cluster that ran moves only along Elastic's upgrade paths.
        if previous.value.status != DeploymentStatus::Stopped {
            floe_domain::deployment::check_version_change(
                &previous.value.spec.version,
                &spec.version,
            )
            .map_err(|m| AppError::invalid("deployments.version_change", "version", m))?;
        }

        let now = chrono::Utc::now();
        let mut next = previous.value.clone();
        let status = previous.value.status;
        let needs_plan = status == DeploymentStatus::Failed
            || (status != DeploymentStatus::Stopped
                && previous.value.spec.needs_plan_to_become(&spec));
        let mut plan = None;
        if needs_plan {
            if let Some(pending) = &previous.value.pending_plan {
                return Err(plan_in_progress(&pending.plan_id, pending.kind));
            }
            let params = match status {
                DeploymentStatus::Running => PlanParams::Update(spec),
                // It ran: its nodes are brought to the spec as an update does.
                DeploymentStatus::Failed if previous.value.access.is_some() => {
                    PlanParams::Update(spec)
                }
                // It never ran: its nodes are made as a start makes them.
                DeploymentStatus::Failed => PlanParams::Start(StartParams {
                    spec,
                    restore: None,
                }),
                other => {
                    return Err(AppError::conflict(
                        "deployments.not_running",
                        format!(
                            "the deployment is {}; only a running deployment can be reconfigured",
                            other.as_str()
                        ),
                    ));
                }
            };
            // The record keeps the running spec while the plan runs, so the
            // store checks its references, not the target's: check those
            // here, before any node changes.
            if let Some(target) = params.target_spec() {
                self.check_references(&who.org, target).await?;
            }
            if let PlanParams::Start(p) = &params {
                next.spec = p.spec.clone();
            }
            let p = Plan::new(
                &who.org,
                id,
                params,
                "deployments.update",
                &who.subject,
                now,
            );
            next.pending_plan = Some(p.reference());
            next.status = lifecycle::while_running(p.kind());
            plan = Some(p);
        } else {
            // The cluster runs the spec of its last successful plan: a change that
            // needs a plan becomes the record's spec only when that plan
            // succeeds. A stopped deployment runs nothing: its record takes
            // the change, and its next start applies it.
            next.spec = spec;
        }
        next.updated = now;
        if mode == Mode::ValidateOnly {
            let validated = match &plan {
                Some(p) => {
                    // What the deployment would run once the plan succeeds.
                    let mut target = next.clone();
                    if let Some(spec) = p.params.target_spec() {
                        target.spec = spec.clone();
                    }
                    DeploymentValidation {
                        outcome: ValidationOutcome::Plan,
                        deployment: validation::would_be(&target, previous.version),
                        plan: Some(validation::preview(p, &previous.value)),
                    }
                }
                None => {
                    // The store would refuse the record's missing references.
                    self.check_references(&who.org, &next.spec).await?;
                    DeploymentValidation {
                        outcome: ValidationOutcome::Record,
                        deployment: validation::would_be(&next, previous.version),
                        plan: None,
                    }
                }
            };
            return Ok(Checked::Validated(Box::new(validated)));
        }
        let version = self
            .store
            .replace_deployment(&next, &previous, plan.as_ref())
            .await
            .map_err(|e| match e {
                e @ (StoreError::VersionMismatch { .. } | StoreError::NotFound) => {
                    AppError::from_write(e, expected.or(read_version), Resource::Deployment, id)
                }
                other => {
                    let policies = next.spec.policies();
                    reference_error(Holder::Deployment { policies }, other)
                }
            })?;
        tracing::info!(deployment = %id, version, plan = plan.as_ref().map(|p| p.id.as_str()), "deployment updated");
        if let Some(p) = &plan {
            self.wake(&who.org, id, &p.id).await;
        }
        if previous.value.spec.snapshot != next.spec.snapshot
            || previous.value.status != next.status
        {
            self.sync_schedules(ReconcileJob::deployment(&who.org, id))
                .await;
        }
        Ok(Checked::Done(DeploymentView::new(&next, version)))
    }

    /// Start a stopped deployment again with its spec: new nodes, its own
    /// certificates and password, and, when `restore_snapshot` names one
    /// (or `__latest_success__`), the data of its own snapshot.
    pub async fn start_deployment(
        &self,
        who: &Manager,
        id: &str,
        restore_snapshot: Option<&str>,
    ) -> Result<DeploymentView, AppError> {
        let previous = self.load_deployment(&who.org, id).await?;
        if let Some(pending) = &previous.value.pending_plan {
            return Err(plan_in_progress(&pending.plan_id, pending.kind));
        }
        if previous.value.status != DeploymentStatus::Stopped {
            return Err(AppError::conflict(
                "deployments.not_stopped",
                format!(
                    "deployment {id} is {}; only a stopped deployment can be started",
                    previous.value.status.as_str()
                ),
            ));
        }
        let spec = previous.value.spec.clone();
        let restore = match restore_snapshot {
            None => None,
            Some(name) => Some(
                self.own_snapshot_target(&who.org, &previous.value, name)
                    .await?,
            ),
        };
        let plan = Plan::new(
            &who.org,
            id,
            PlanParams::Start(StartParams { spec, restore }),
            "deployments.start",
            &who.subject,
            chrono::Utc::now(),
        );
        let answer = self.start_plan(&previous, &plan).await?;
        tracing::info!(deployment = %id, plan = %plan.id, "start plan pending");
        self.sync_schedules(ReconcileJob::deployment(&who.org, id))
            .await;
        Ok(answer)
    }

    /// Shut a deployment down: a shutdown plan terminates its nodes (after a
    /// final snapshot unless `skip_snapshot`); the record stays.
    pub async fn shutdown_deployment(
        &self,
        who: &Manager,
        id: &str,
        skip_snapshot: bool,
    ) -> Result<DeploymentView, AppError> {
        let previous = self.load_deployment(&who.org, id).await?;
        if let Some(pending) = &previous.value.pending_plan {
            return Err(plan_in_progress(&pending.plan_id, pending.kind));
        }
        if previous.value.status == DeploymentStatus::Stopped {
            return Err(AppError::conflict(
                "deployments.already_stopped",
                format!("deployment {id} is already stopped"),
            ));
        }
        let plan = Plan::new(
            &who.org,
            id,
            PlanParams::Shutdown(ShutdownParams { skip_snapshot }),
            "deployments.shutdown",
            &who.subject,
            chrono::Utc::now(),
        );
        let answer = self.start_plan(&previous, &plan).await?;
        tracing::info!(deployment = %id, plan = %plan.id, "shutdown plan pending");
        self.sync_schedules(ReconcileJob::deployment(&who.org, id))
            .await;
        Ok(answer)
    }

    /// Delete a stopped deployment. A delete plan removes what the
    /// deployment still holds outside the store (any node left, its
    /// parameters and secrets, its launch templates); the record goes when
    /// that plan succeeds. Until then the deployment shows `stopping`, and
    /// a second DELETE answers the same plan. A delete plan that fails
    /// leaves the record `stopped`, to be deleted again.
    pub async fn delete_deployment(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
    ) -> Result<DeploymentView, AppError> {
        let current = self.load_deployment(&who.org, id).await?;
        check_version(expected, current.version)?;
        if current
            .value
            .pending_plan
            .as_ref()
            .is_some_and(|p| p.kind == PlanKind::Delete)
        {
            return Ok(DeploymentView::new(&current.value, current.version));
        }
        if current.value.status != DeploymentStatus::Stopped {
            return Err(AppError::conflict(
                "deployments.deployment_not_stopped",
                format!(
                    "deployment {id} is {}; shut it down before deleting it",
                    current.value.status.as_str()
                ),
            ));
        }
        if let Some(pending) = &current.value.pending_plan {
            return Err(plan_in_progress(&pending.plan_id, pending.kind));
        }
        let plan = Plan::new(
            &who.org,
            id,
            PlanParams::Delete,
            "deployments.delete",
            &who.subject,
            chrono::Utc::now(),
        );
        let answer = self.start_plan(&current, &plan).await?;
        tracing::info!(deployment = %id, plan = %plan.id, "delete plan pending");
        self.sync_schedules(ReconcileJob::deployment(&who.org, id))
            .await;
        Ok(answer)
    }
}

/// What a deployment's sealed password is bound to (`resource` is its
/// [`sealing_resource`]).
fn password_owner<'a>(org: &'a str, resource: &'a str) -> Owner<'a> {
    Owner {
        org,
        repository: resource,
        field: PASSWORD_FIELD,
    }
}

fn credentials(password: &str) -> ElasticCredentials {
    ElasticCredentials {
        username: ELASTIC_USER.to_string(),
        password: password.to_string(),
    }
}

/// A key service that cannot be used right now is worth a retry; any other
/// failure is logged and answered as internal (it carries no user input).
fn secret_error(e: SecretError) -> AppError {
    match e {
        SecretError::KeyUnavailable(m) => {
            tracing::error!(error = %m, "the key service is unavailable");
            AppError::Unavailable {
                code: "internal.secrets_unavailable",
                message: "the key service is unavailable; nothing was stored, retry later".into(),
            }
        }
        other => {
            tracing::error!(error = %other, "sealing or opening a deployment password failed");
            AppError::Internal
        }
    }
}

/// An idempotency key is 1 to 128 visible ASCII characters.
fn check_idempotency_key(key: &str) -> Result<(), AppError> {
    let ok = !key.is_empty() && key.len() <= 128 && key.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(AppError::invalid(
            "validation.idempotency_key",
            "Idempotency-Key",
            "must be 1 to 128 visible ASCII characters",
        ))
    }
}

/// Checks the version a caller expects against the current one.
pub(crate) fn check_version(expected: Option<u64>, current: u64) -> Result<(), AppError> {
    match expected {
        Some(e) if e != current => Err(AppError::PreconditionFailed { current }),
        _ => Ok(()),
    }
}
