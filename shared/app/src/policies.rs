//! Snapshot policies: create, read, list, replace, delete.

use crate::deployments::check_version;
use crate::error::{Holder, reference_error};
use crate::{App, AppError, Manager, Reader, Resource};
use floe_domain::Code;
use floe_domain::names::{is_resource_id, new_resource_id};
use floe_domain::policy::{Policy, PolicySpec, PolicyView};
use floe_ports::ReconcileJob;
use floe_store::{PageRequest, StoreError, Versioned};
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyList {
    pub policies: Vec<PolicyView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

fn view(p: &Versioned<Policy>) -> PolicyView {
    PolicyView::new(&p.value, p.version, p.refs)
}

impl App {
    async fn load_policy(&self, org: &str, id: &str) -> Result<Versioned<Policy>, AppError> {
        if !is_resource_id(id) {
            return Err(AppError::not_found(Resource::Policy, id));
        }
        self.store
            .get_policy(org, id)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Policy, id))
    }

    /// Create a snapshot policy; its schedule is checked and translated
    /// into an EventBridge Scheduler expression stored with it.
    pub async fn create_policy(
        &self,
        who: &Manager,
        spec: PolicySpec,
    ) -> Result<PolicyView, AppError> {
        let schedule_expression = spec.validate_spec()?;
        let now = chrono::Utc::now();
        let policy = Policy {
            id: new_resource_id(),
            org: who.org.clone(),
            spec,
            schedule_expression,
            created: now,
            updated: now,
        };
        self.store
            .create_policy(&policy)
            .await
            .map_err(|e| reference_error(Holder::Policy, e))?;
        tracing::info!(policy = %policy.id, "snapshot policy created");
        Ok(PolicyView::new(&policy, 1, 0))
    }

    pub async fn list_policies(
        &self,
        who: &Reader,
        page: PageRequest,
    ) -> Result<PolicyList, AppError> {
        let page = self.store.list_policies(&who.org, &page).await?;
        Ok(PolicyList {
            policies: page.items.iter().map(view).collect(),
            next_cursor: page.next_cursor,
        })
    }

    pub async fn get_policy(&self, who: &Reader, id: &str) -> Result<PolicyView, AppError> {
        Ok(view(&self.load_policy(&who.org, id).await?))
    }

    /// Replace a snapshot policy; the schedules of the deployments that
    /// attach it follow.
    pub async fn update_policy(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
        spec: PolicySpec,
    ) -> Result<PolicyView, AppError> {
        let previous = self.load_policy(&who.org, id).await?;
        check_version(expected, previous.version)?;
        let schedule_expression = spec.validate_spec()?;
        let policy = Policy {
            spec,
            schedule_expression,
            updated: chrono::Utc::now(),
            ..previous.value.clone()
        };
        let version = self
            .store
            .replace_policy(&policy, &previous)
            .await
            .map_err(|e| match e {
                e @ (StoreError::VersionMismatch { .. } | StoreError::NotFound) => {
                    AppError::from_write(e, expected, Resource::Policy, id)
                }
                other => reference_error(Holder::Policy, other),
            })?;
        tracing::info!(policy = %id, version, "snapshot policy updated");
        self.sync_schedules(ReconcileJob::policy(&who.org, id))
            .await;
        Ok(PolicyView::new(&policy, version, previous.refs))
    }

    /// Delete a snapshot policy that no deployment has attached.
    pub async fn delete_policy(
        &self,
        who: &Manager,
        id: &str,
        expected: Option<u64>,
    ) -> Result<(), AppError> {
        let current = self.load_policy(&who.org, id).await?;
        check_version(expected, current.version)?;
        self.store
            .delete_policy(&current)
            .await
            .map_err(|e| match e {
                StoreError::InUse { refs } => AppError::conflict(
                    Code::POLICIES_POLICY_IN_USE,
                    format!(
                        "snapshot policy {id} is attached to {refs} deployments; detach it first"
                    ),
                ),
                other => AppError::from_write(other, expected, Resource::Policy, id),
            })?;
        tracing::info!(policy = %id, "snapshot policy deleted");
        Ok(())
    }
}
