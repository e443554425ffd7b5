//! Deployments: create (and clone), read, list, update, start, shut down,
//! delete, reset the password.
//!
//! Each use case that changes a deployment reads what it needs, asks
//! [`decide`] (pure functions) what the call changes or why it is refused,
//! then applies that decision; a `validate_only` call shows the same
//! decision instead. `create`, `replace` and `lifecycle` hold the use
//! cases; `passwords` seals and opens the `elastic` password.

mod create;
pub(crate) mod decide;
mod lifecycle;
mod passwords;
mod remove_snapshots;
mod replace;

use crate::shown::Shown;
use crate::{App, AppError, Reader, Resource};
use floe_domain::Code;
use floe_domain::deployment::{Deployment, DeploymentView, Metadata, Tag};
use floe_domain::names::is_resource_id;
use floe_domain::plan::{Plan, PlanKind, lifecycle as plan_lifecycle};
use floe_store::{PageRequest, Versioned};
use serde::Serialize;
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
        Code::DEPLOYMENTS_PLAN_IN_PROGRESS,
        format!(
            "plan {plan_id} ({}) is pending; wait for it or cancel it (DELETE …/plans/pending)",
            kind.as_str()
        ),
    )
}

/// A stored deployment's view, as JSON: what [`crate::shown`] keeps. It
/// depends on the record alone (the catalog it looks instance types up in
/// is fixed at build time).
fn show(d: Versioned<Deployment>) -> Result<Shown<DeploymentView>, AppError> {
    Shown::new(&DeploymentView::of(d.value, d.version), d.version)
}

/// Whether the deployment shown carries `tag` itself. The store matched
/// its `key:value` form, which names one tag only for keys without `:`;
/// older records may hold such a key. A view that cannot be read back is
/// left to the store's match.
fn carries(d: &Shown<DeploymentView>, tag: &Tag) -> bool {
    #[derive(serde::Deserialize)]
    struct Tagged {
        metadata: Metadata,
    }
    serde_json::from_str::<Tagged>(d.json()).map_or(true, |t| t.metadata.tags.contains(tag))
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
        next.status = plan_lifecycle::while_running(plan.kind());
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

    /// One page of the organization's deployments, oldest first.
    pub async fn list_deployments(
        &self,
        who: &Reader,
        query: DeploymentQuery,
    ) -> Result<DeploymentList, AppError> {
        let decide::Listing { filter, page, tag } = decide::listing_filter(query)?;
        let mut result = self
            .store
            .show_deployments(&who.org, filter, &page, &self.views.0, show)
            .await?;
        if let Some(tag) = &tag {
            result.items.retain(|d| carries(d, tag));
        }
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
        // The record says all the view shows, health warnings included (a
        // mount clone's missing source snapshot too: the health check
        // writes it there).
        self.store
            .show_deployment(&who.org, id, &self.views.0, show)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Deployment, id))
    }

    pub async fn get_deployment(&self, who: &Reader, id: &str) -> Result<DeploymentView, AppError> {
        let d = self.load_deployment(&who.org, id).await?;
        Ok(DeploymentView::of(d.value, d.version))
    }
}

/// Checks the version a caller expects against the current one.
pub(crate) fn check_version(expected: Option<u64>, current: u64) -> Result<(), AppError> {
    match expected {
        Some(e) if e != current => Err(AppError::PreconditionFailed { current }),
        _ => Ok(()),
    }
}
