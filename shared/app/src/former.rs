//! The snapshots of deleted deployments, by the repository that holds
//! them. A delete keeps a deployment's snapshots (see
//! docs/snapshot-records.md): the deployment's record goes, a former
//! deployment's record (`FormerDeployment`) lists them under their
//! repository, and the repository counts it as a user. They are listed
//! here, and a clone restores one by naming the deleted deployment's id as
//! `restore_snapshot.source_deployment_id`.

use crate::{App, AppError, Reader, Resource};
use floe_domain::snapshot::{FormerDeploymentView, SnapshotView};
use floe_store::PageRequest;
use serde::Serialize;
use utoipa::ToSchema;

/// One page of the deleted deployments whose snapshots a repository holds.
#[derive(Debug, Serialize, ToSchema)]
pub struct FormerDeploymentList {
    /// By id.
    pub deployments: Vec<FormerDeploymentView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One page of a deleted deployment's snapshots, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct FormerSnapshotList {
    pub deployment: FormerDeploymentView,
    pub snapshots: Vec<SnapshotView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl App {
    pub async fn list_former_deployments(
        &self,
        who: &Reader,
        repository: &str,
        page: PageRequest,
    ) -> Result<FormerDeploymentList, AppError> {
        self.store
            .get_repository(&who.org, repository)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Repository, repository))?;
        let listed = self
            .store
            .list_former_deployments(&who.org, repository, &page)
            .await?;
        Ok(FormerDeploymentList {
            deployments: listed
                .items
                .iter()
                .map(|f| FormerDeploymentView::new(&f.value))
                .collect(),
            next_cursor: listed.next_cursor,
        })
    }

    pub async fn list_former_snapshots(
        &self,
        who: &Reader,
        repository: &str,
        id: &str,
        page: PageRequest,
    ) -> Result<FormerSnapshotList, AppError> {
        let former = self
            .store
            .get_former_deployment(&who.org, repository, id)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::Deployment, id))?;
        let listed = self.store.list_snapshots(&who.org, id, None, &page).await?;
        Ok(FormerSnapshotList {
            deployment: FormerDeploymentView::new(&former.value),
            snapshots: listed
                .items
                .iter()
                .map(|s| SnapshotView::pinned_by(&s.value, s.refs))
                .collect(),
            next_cursor: listed.next_cursor,
        })
    }
}
