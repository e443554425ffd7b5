//! Start, shut down, delete, reset the password: each reads the record,
//! asks [`decide::lifecycle_allowed`] (through its own `decide_*` where it
//! has more to check) whether its plan may start, then stores the plan.

use super::decide::{self, Deletion, Lifecycle};
use super::passwords::credentials;
use crate::{App, AppError, Manager, Resource};
use floe_domain::deployment::DeploymentView;
use floe_domain::plan::{Plan, PlanParams, ShutdownParams, StartParams, lifecycle};
use floe_ports::ReconcileJob;

impl App {
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
        decide::lifecycle_allowed(&previous.value, Lifecycle::Start)?;
        // Read once the start is allowed: a refused start names its
        // refusal, not a problem with the snapshot.
        let restore = match restore_snapshot {
            None => None,
            Some(name) => Some(
                self.own_snapshot_target(&who.org, &previous.value, name)
                    .await?,
            ),
        };
        let spec = previous.value.spec.clone();
        let plan = new_plan(
            who,
            id,
            PlanParams::Start(StartParams { spec, restore }),
            "deployments.start",
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
        decide::lifecycle_allowed(&previous.value, Lifecycle::Shutdown)?;
        let plan = new_plan(
            who,
            id,
            PlanParams::Shutdown(ShutdownParams { skip_snapshot }),
            "deployments.shutdown",
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
        self.delete_deployment_with(who, id, expected, false).await
    }

    /// Delete a deployment; with `remove_snapshots`, its unpinned snapshots
    /// are removed first, through its running cluster (see
    /// docs/snapshot-records.md). The pinned ones are named in the
    /// answer's warnings.
    pub async fn delete_deployment_with(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        remove_snapshots: bool,
    ) -> Result<DeploymentView, AppError> {
        let current = self.load_deployment(&who.org, id).await?;
        let decided = if remove_snapshots {
            self.decide_delete_removing(&current, expected).await?
        } else {
            decide::decide_delete(&current, expected)?
        };
        match decided {
            Deletion::Pending => Ok(DeploymentView::new(&current.value, current.version)),
            Deletion::Plan => {
                let params = if remove_snapshots {
                    PlanParams::DeleteRemovingSnapshots
                } else {
                    PlanParams::Delete
                };
                let plan = new_plan(who, id, params, "deployments.delete");
                let mut answer = self.start_plan(&current, &plan).await?;
                if remove_snapshots {
                    answer
                        .warnings
                        .extend(self.pinned_snapshots(&current.value).await?);
                }
                tracing::info!(deployment = %id, plan = %plan.id, "delete plan pending");
                self.sync_schedules(ReconcileJob::deployment(&who.org, id))
                    .await;
                Ok(answer)
            }
        }
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
        decide::decide_reset_password(&previous.value, ref_id)?;
        let password = floe_node_security::new_password();
        let sealed = self.seal_password(&who.org, id, password.expose()).await?;
        let plan = new_plan(
            who,
            id,
            PlanParams::ResetPassword,
            "deployments.reset_password",
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
}

/// A plan of deployment `id` by the caller, made now.
fn new_plan(who: &Manager, id: &str, params: PlanParams, action: &str) -> Plan {
    Plan::new(
        &who.org,
        id,
        params,
        action,
        &who.subject,
        chrono::Utc::now(),
    )
}
