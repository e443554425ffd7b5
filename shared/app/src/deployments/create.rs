//! Create a deployment (a clone is a create too): check the request,
//! resolve a clone's source, decide the record and its create plan, then
//! store them, or with `validate_only` show them.

use super::decide::{self, NewDeployment};
use super::passwords::credentials;
use super::{Creation, view};
use crate::error::{Holder, reference_error};
use crate::validation::DeploymentValidation;
use crate::{App, AppError, Manager};
use floe_domain::Code;
use floe_domain::deployment::{DeploymentSpec, DeploymentView};
use floe_domain::names::new_resource_id;
use floe_store::{Idempotency, StoreError, Versioned};

impl App {
    /// Create a deployment: stored as `initializing` with a pending create
    /// plan. With `idempotency_key`, a retry with the same body answers the
    /// first result and another body is a conflict.
    pub async fn create_deployment(
        &self,
        who: &Manager,
        spec: DeploymentSpec,
        idempotency_key: Option<&str>,
    ) -> Result<Creation, AppError> {
        let request = decide::check_create(who, spec, idempotency_key)?;
        // The write itself refuses a key that was used: a new key (the
        // usual case) costs one transaction and no read before it, and a
        // retry is told apart only when something refuses it. Whatever
        // refused it, a retry of an earlier create answers as that create
        // did (its result, or the conflict of another body).
        let idempotency = request.idempotency.as_ref();
        match self.create_new(who, request.spec, idempotency).await {
            Ok(created) => Ok(Creation::Created(created)),
            Err(refused) => match idempotency {
                Some(idem) => match self.replay(&who.org, idem).await? {
                    Some(first) => Ok(Creation::Replayed(first)),
                    None => Err(refused),
                },
                None => Err(refused),
            },
        }
    }

    /// What [`App::create_deployment`] would do, with every check it makes,
    /// and nothing stored, sealed or woken. What its write would refuse is
    /// read instead: a key used before, a missing reference.
    pub async fn validate_create_deployment(
        &self,
        who: &Manager,
        spec: DeploymentSpec,
        idempotency_key: Option<&str>,
    ) -> Result<DeploymentValidation, AppError> {
        let request = decide::check_create(who, spec, idempotency_key)?;
        // A key used before is a replay (or the conflict of another body,
        // or spent).
        if let Some(idem) = &request.idempotency
            && let Some(first) = self.replay(&who.org, idem).await?
        {
            let d = self.load_deployment(&who.org, &first.id).await?;
            return Ok(decide::replay_validation(&d));
        }
        // A validation names no deployment: nothing is reserved.
        let decision = self.decide_new(who, request.spec, "").await?;
        self.check_references(&who.org, &decision.deployment.spec)
            .await?;
        Ok(decision.validation())
    }

    /// Reads what a create needs (a clone's source, resolved into `spec`)
    /// and decides the deployment `id`.
    async fn decide_new(
        &self,
        who: &Manager,
        mut spec: DeploymentSpec,
        id: &str,
    ) -> Result<NewDeployment, AppError> {
        let clone = self.resolve_clone(&who.org, &mut spec).await?;
        // A validation reserves no id, and so names no endpoint.
        let endpoint = (!id.is_empty())
            .then(|| self.endpoints.host_for(id))
            .flatten();
        Ok(decide::decide_create(
            who,
            id,
            spec,
            clone,
            endpoint,
            chrono::Utc::now(),
        ))
    }

    /// Stores a new deployment from `spec` with its create plan (and the
    /// idempotency key, which the store refuses if it was used).
    async fn create_new(
        &self,
        who: &Manager,
        spec: DeploymentSpec,
        idempotency: Option<&Idempotency>,
    ) -> Result<DeploymentView, AppError> {
        let decision = self.decide_new(who, spec, &new_resource_id()).await?;
        let NewDeployment {
            mut deployment,
            plan,
            warnings,
        } = decision;
        let id = deployment.id.clone();
        // The owner gets the elastic password in this answer; the create
        // plan gives the cluster the same one.
        let password = floe_node_security::new_password();
        deployment.password_to_apply =
            Some(self.seal_password(&who.org, &id, password.expose()).await?);
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
                    Code::RESTORE_SNAPSHOT_NOT_FOUND,
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
        Ok(created)
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
                Code::REQUEST_IDEMPOTENCY_KEY_REUSED,
                "this idempotency key was already used by another caller or with a different request body",
            ));
        }
        // The deployment this key created is gone (deleted since): its first
        // answer cannot be given again, and a new deployment under an old
        // key would surprise the caller who retries.
        let d = match self.load_deployment(org, &first.deployment_id).await {
            Err(AppError::NotFound { .. }) => {
                return Err(AppError::conflict(
                    Code::REQUEST_IDEMPOTENCY_KEY_SPENT,
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
}
