//! Replace (update) a deployment's spec: read the record and what the new
//! spec names, decide what changes (the record at once, or a plan), then
//! store it, or with `validate_only` show it.

use super::decide::{self, NamedRecords, Replacement};
use crate::error::{Holder, reference_error};
use crate::validation::DeploymentValidation;
use crate::{App, AppError, Manager, Resource};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentView};
use floe_domain::replacement::ReadOnlyFields;
use floe_ports::ReconcileJob;
use floe_store::{StoreError, Versioned};

/// A replace, read and decided.
struct Decided {
    previous: Versioned<Deployment>,
    /// The version the caller expected, if any.
    precondition: Option<u64>,
    decision: Replacement,
}

impl App {
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
    /// What changes is [`decide::decide_replace`]'s to say: the record at
    /// once, or a plan.
    pub async fn replace_deployment(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        spec: DeploymentSpec,
        read_only: &ReadOnlyFields,
    ) -> Result<DeploymentView, AppError> {
        let Decided {
            previous,
            precondition,
            decision,
        } = self
            .decide_replacement(who, id, expected, spec, read_only)
            .await?;
        // The record keeps the running spec while a plan runs, so the store
        // checks its references, not the target's: check those here,
        // before any node changes.
        if let Some(target) = decision.plan().and_then(|p| p.params.target_spec()) {
            self.check_references(&who.org, target).await?;
        }
        let (next, plan) = match decision {
            Replacement::Record(next) => (next, None),
            Replacement::Plan { next, plan } => (next, Some(*plan)),
        };
        let version = self
            .store
            .replace_deployment(&next, &previous, plan.as_ref())
            .await
            .map_err(|e| match e {
                e @ (StoreError::VersionMismatch { .. } | StoreError::NotFound) => {
                    AppError::from_write(e, precondition, Resource::Deployment, id)
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
            || previous.value.spec.drill_schedule != next.spec.drill_schedule
            || previous.value.status != next.status
        {
            self.sync_schedules(ReconcileJob::deployment(&who.org, id))
                .await;
        }
        Ok(DeploymentView::new(&next, version))
    }

    /// What [`App::replace_deployment`] would change, with every check it
    /// makes, and nothing stored or woken.
    pub async fn validate_replace_deployment(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        spec: DeploymentSpec,
        read_only: &ReadOnlyFields,
    ) -> Result<DeploymentValidation, AppError> {
        let Decided {
            previous, decision, ..
        } = self
            .decide_replacement(who, id, expected, spec, read_only)
            .await?;
        // A plan's target is checked before it runs, and the store would
        // refuse the record's missing references: look them up.
        self.check_references(&who.org, decision.target_spec())
            .await?;
        Ok(decision.validation(&previous))
    }

    /// Reads the record and what the new spec names, and decides.
    async fn decide_replacement(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        spec: DeploymentSpec,
        read_only: &ReadOnlyFields,
    ) -> Result<Decided, AppError> {
        let previous = self.load_deployment(&who.org, id).await?;
        let request = decide::check_replace(&previous, expected, spec, read_only)?;
        let named = self
            .named_records(&who.org, &previous.value, &request.spec)
            .await?;
        let moves_to = previous
            .value
            .endpoint
            .is_none()
            .then(|| self.endpoints.host_for(id))
            .flatten();
        let decision = decide::decide_replace(
            &previous,
            request.spec,
            &named,
            who,
            chrono::Utc::now(),
            moves_to,
        )?;
        Ok(Decided {
            previous,
            precondition: request.precondition,
            decision,
        })
    }

    /// What [`decide::decide_replace`] needs to know of the records `spec`
    /// names: read for a mount clone only (see [`NamedRecords`]).
    async fn named_records(
        &self,
        org: &str,
        d: &Deployment,
        spec: &DeploymentSpec,
    ) -> Result<NamedRecords, AppError> {
        let Some(src) = d.clone_source.as_ref().filter(|s| s.reads_source()) else {
            return Ok(NamedRecords::default());
        };
        let repositories = match spec.repository() {
            Some(repo) if d.spec.repository() != Some(repo) => Some((
                self.store.get_repository(org, repo).await?.map(|r| r.value),
                self.store
                    .get_repository(org, &src.repository)
                    .await?
                    .map(|r| r.value),
            )),
            _ => None,
        };
        let mut policy_repositories = Vec::new();
        for id in spec.policies() {
            let policy = self.store.get_policy(org, id).await?;
            policy_repositories.push(policy.map(|p| p.value.spec.repository));
        }
        Ok(NamedRecords {
            repositories,
            policy_repositories,
        })
    }

    /// The repository and policies `spec` names exist in the organization.
    pub(super) async fn check_references(
        &self,
        org: &str,
        spec: &DeploymentSpec,
    ) -> Result<(), AppError> {
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
}
