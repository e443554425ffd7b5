//! A mount clone's source snapshot, looked at when the clone is read: a
//! clone that mounts a snapshot its source's repository no longer holds
//! (deleted outside Floe, found `missing`) cannot read its mounted indices
//! once their cache is gone. That is said as a health warning beside
//! `healthy`, which stays about the nodes: no heal can bring the snapshot
//! back, so the warning starts none.
//!
//! Kept apart from the health check (which judges nodes, on its own
//! schedule) so that the warning follows the snapshot record as soon as a
//! listing or a resolution marks it, at one store read per GET of a mount
//! clone.

use crate::App;
use floe_domain::deployment::Deployment;

impl App {
    /// The warning a mount clone deserves when its source snapshot is
    /// missing from its repository; `None` for any other deployment, or
    /// when the record cannot be read now (a read must not fail for it).
    pub(crate) async fn mount_source_warning(&self, d: &Deployment) -> Option<String> {
        let src = d.clone_source.as_ref().filter(|s| s.reads_source())?;
        let record = self
            .store
            .get_snapshot(&d.org, &src.source_deployment_id, &src.snapshot)
            .await
            .ok()?;
        match record {
            Some(r) => r.value.missing.map(|since| {
                format!(
                    "source snapshot {} of deployment {} is missing from repository {} (deleted outside Floe; found so at {}): the mounted indices cannot be read again once their cache is gone; restore another snapshot or delete this clone",
                    src.snapshot,
                    src.source_deployment_id,
                    src.repository,
                    since.to_rfc3339()
                )
            }),
            None => Some(format!(
                "source snapshot {} of deployment {} is no longer recorded: the mounted indices may not be readable",
                src.snapshot, src.source_deployment_id
            )),
        }
    }
}
