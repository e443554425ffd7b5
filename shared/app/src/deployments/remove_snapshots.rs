//! A delete with `remove_snapshots=true` (see docs/snapshot-records.md):
//! Elasticsearch alone knows which files of the repository a snapshot
//! shares with the others, so the snapshots are removed through the
//! deployment's own cluster. Such a delete is taken from a running
//! deployment (no shutdown first), and refused on a stopped one that has
//! snapshots; the snapshots clones pin stay and are named in the answer.

use super::decide::{self, Deletion};
use super::{check_version, plan_in_progress};
use crate::{App, AppError};
use floe_domain::Code;
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::plan::PlanKind;
use floe_store::{PageRequest, Versioned};

impl App {
    pub(crate) async fn decide_delete_removing(
        &self,
        current: &Versioned<Deployment>,
        expected: Option<u64>,
    ) -> Result<Deletion, AppError> {
        let d = &current.value;
        match d.status {
            DeploymentStatus::Running => {
                check_version(expected, current.version)?;
                match &d.pending_plan {
                    Some(p) if p.kind == PlanKind::Delete => Ok(Deletion::Pending),
                    Some(p) => Err(plan_in_progress(&p.plan_id, p.kind)),
                    None => Ok(Deletion::Plan),
                }
            }
            DeploymentStatus::Stopped => {
                let decided = decide::decide_delete(current, expected)?;
                let one = PageRequest {
                    size: Some(1),
                    cursor: None,
                };
                let has_snapshots = !self
                    .store
                    .list_snapshots(&d.org, &d.id, None, &one)
                    .await?
                    .items
                    .is_empty();
                if has_snapshots && decided == Deletion::Plan {
                    return Err(AppError::conflict(
                        Code::DEPLOYMENTS_NOT_RUNNING,
                        format!(
                            "deployment {} is stopped: its snapshots are removed through its cluster, which a stopped deployment does not have; start it and delete it with remove_snapshots=true, or delete it without and keep them (listed under its repository's deleted-deployments)",
                            d.id
                        ),
                    ));
                }
                Ok(decided)
            }
            _ => decide::decide_delete(current, expected),
        }
    }

    /// The deployment's snapshots that clones pin, each with the clones:
    /// what a delete with `remove_snapshots` leaves.
    pub(crate) async fn pinned_snapshots(&self, d: &Deployment) -> Result<Vec<String>, AppError> {
        let mut pinned = Vec::new();
        let mut pages = self.store.snapshot_pages(&d.org, &d.id, None);
        while let Some(items) = pages.next_page().await? {
            for s in items.iter().filter(|s| s.refs > 0) {
                let by = self
                    .store
                    .snapshot_pins(&d.org, &d.id, &s.value.name)
                    .await?
                    .into_iter()
                    .map(|p| p.deployment_id)
                    .collect::<Vec<_>>();
                pinned.push(format!(
                    "snapshot {} stays: pinned by clone {}; it stays listed under repository {}'s deleted-deployments",
                    s.value.name,
                    if by.is_empty() {
                        "(unnamed)".to_string()
                    } else {
                        by.join(", ")
                    },
                    s.value.repository
                ));
            }
        }
        Ok(pinned)
    }
}
