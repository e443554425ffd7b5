//! A deployment's snapshots: take one by hand, list them (newest first, with
//! an ECE-like health summary), look at one, delete one.
//!
//! `healthy` means: the newest finished snapshot succeeded, or the newest
//! successful one (the deployment's creation when there is none yet) ended
//! less than twice the shortest attached policy interval ago (a cron policy
//! counts as daily). A deployment with no policy attached is healthy when
//! its newest finished snapshot, if any, succeeded.

use crate::{App, AppError, Manager, Reader};
use chrono::{DateTime, Utc};
use floe_domain::deployment::Deployment;
use floe_domain::snapshot::{SnapshotRecord, SnapshotState, SnapshotView};
use floe_domain::timevalue::parse_time_value;
use floe_snapshots::Snapshotter;
use floe_store::{PageRequest, Versioned};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use utoipa::ToSchema;

/// The summary is made from at most this many of the newest records (one
/// store query); a deployment whose retention keeps more reports `count`
/// as a lower bound (`count_is_lower_bound`).
pub const SUMMARY_WINDOW: u32 = floe_store::stores::MAX_PAGE_SIZE;
/// A cron schedule's interval, for `healthy`.
const CRON_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// `wait_for_completion` waits at most this long: well inside the api
/// function's 20 s timeout (which is under API Gateway's 30 s), with room
/// for the request's own work, so the client gets the documented 202 and
/// never a gateway timeout whose retry would start a second snapshot.
pub const API_WAIT: Duration = Duration::from_secs(12);

/// A manual snapshot; every field is optional, and so is the body.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// A snapshot name, or date math such as `<manual-{now/d}>`; by default
    /// `manual-{date}-{suffix}`.
    #[serde(default)]
    #[schema(example = "<before-upgrade-{now/d}>")]
    pub name: Option<String>,
    /// Index patterns, each 1 to 255 characters; every index when absent.
    #[serde(default)]
    pub indices: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotList {
    /// Newest first (one page; see `next_cursor`).
    pub snapshots: Vec<SnapshotView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The summary is on the first page only (no `cursor`). It is made
    /// from the newest 100 snapshots: `count` counts at most those (see
    /// `count_is_lower_bound`); missing snapshots are counted but never
    /// the latest status or success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The deployment has more snapshots than `count`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub count_is_lower_bound: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_status: Option<SnapshotState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_successful_end_time: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// A manual snapshot as taken: `finished` when it ended before the answer.
#[derive(Debug)]
pub struct Taken {
    pub snapshot: SnapshotView,
    pub finished: bool,
}

impl App {
    pub(crate) fn snapshotter(&self) -> Snapshotter {
        Snapshotter::new(self.store.clone(), self.clusters.clone()).with_settings(
            floe_snapshots::SnapshotterSettings {
                wait: API_WAIT,
                poll: Duration::from_millis(250),
            },
        )
    }

    /// Take a snapshot of the deployment now, into its repository; with
    /// `wait`, answer once it ended (or the API's wait is over).
    pub async fn take_snapshot(
        &self,
        who: &Manager,
        id: &str,
        request: SnapshotRequest,
        wait: bool,
    ) -> Result<Taken, AppError> {
        // Checks the deployment's organization and id before anything else.
        self.load_deployment(&who.org, id).await?;
        let taken = self
            .snapshotter()
            .take_manual(&who.org, id, request.name.as_deref(), request.indices, wait)
            .await?;
        tracing::info!(deployment = %id, snapshot = %taken.value.name, "manual snapshot taken");
        Ok(Taken {
            finished: taken.value.state.is_finished(),
            snapshot: SnapshotView::new(&taken.value),
        })
    }

    /// Records the snapshots a running deployment's cluster took into its
    /// repository by itself (through its endpoint or the proxy), and marks
    /// the newest records the repository no longer holds as missing. A
    /// cluster that cannot be asked leaves the records as they are: reads
    /// must not fail because a cluster is busy.
    pub(crate) async fn adopt_cluster_snapshots(&self, org: &str, deployment_id: &str) {
        let deployment = match self.store.get_deployment(org, deployment_id).await {
            Ok(Some(d)) => d.value,
            _ => return,
        };
        if let Err(e) = self.snapshotter().adopt(&deployment).await {
            tracing::warn!(deployment = deployment_id, error = %e, "cannot look for snapshots taken on the cluster");
        }
    }

    /// One page of the deployment's snapshots, newest first; the first
    /// page carries the summary. Each page costs one cluster listing and
    /// at most two store queries of one page each (the first page reads
    /// the summary's window, [`SUMMARY_WINDOW`] records, and the page),
    /// whatever the number of snapshots.
    pub async fn list_snapshots(
        &self,
        who: &Reader,
        id: &str,
        page: PageRequest,
    ) -> Result<SnapshotList, AppError> {
        let deployment = self.load_deployment(&who.org, id).await?.value;
        let first_page = page.cursor.is_none();
        let snapshotter = self.snapshotter();
        // The first page: the summary's window, brought in step with the
        // repository (snapshots the cluster took recorded, the ones gone
        // marked missing) before the page is read from it.
        let window = if first_page {
            let window_page = PageRequest {
                size: Some(SUMMARY_WINDOW),
                cursor: None,
            };
            let listed = self
                .store
                .list_snapshots(&who.org, id, None, &window_page)
                .await?;
            let more = listed.next_cursor.is_some();
            match snapshotter
                .reconcile(&deployment, listed.items.clone(), more, true)
                .await
            {
                Ok(done) if done.adopted > 0 => {
                    let again = self
                        .store
                        .list_snapshots(&who.org, id, None, &window_page)
                        .await?;
                    Some((again.items, again.next_cursor.is_some()))
                }
                Ok(done) => Some((done.records, more)),
                Err(e) => {
                    tracing::warn!(deployment = %id, error = %e, "cannot compare the snapshot records with the repository");
                    Some((listed.items, more))
                }
            }
        } else {
            None
        };
        let listed = self.store.list_snapshots(&who.org, id, None, &page).await?;
        let records = if first_page {
            listed.items
        } else {
            match snapshotter
                .reconcile(&deployment, listed.items.clone(), false, false)
                .await
            {
                Ok(done) => done.records,
                Err(e) => {
                    tracing::warn!(deployment = %id, error = %e, "cannot compare the snapshot records with the repository");
                    listed.items
                }
            }
        };
        let mut snapshots = Vec::with_capacity(records.len());
        for stored in records {
            let stored = snapshotter.refresh(&deployment, stored).await;
            snapshots.push(SnapshotView::pinned_by(&stored.value, stored.refs));
        }
        let mut list = SnapshotList {
            snapshots,
            next_cursor: listed.next_cursor,
            count: None,
            count_is_lower_bound: false,
            latest_status: None,
            latest_successful_end_time: None,
            healthy: None,
        };
        if let Some((window, more)) = window {
            self.summarize(&deployment, &window, more, &mut list)
                .await?;
        }
        Ok(list)
    }

    /// Fills in the summary from the newest records (`window`, newest
    /// first; `more` when older ones follow). A missing snapshot is never
    /// the latest success. When the window holds no success, the attached
    /// policies' last successes stand in.
    async fn summarize(
        &self,
        deployment: &Deployment,
        window: &[Versioned<SnapshotRecord>],
        more: bool,
        list: &mut SnapshotList,
    ) -> Result<(), AppError> {
        let present = || {
            window
                .iter()
                .map(|v| &v.value)
                .filter(|s| s.missing.is_none())
        };
        let latest_finished = present().find(|s| s.state.is_finished()).map(|s| s.state);
        let mut latest_end = present()
            .find(|s| s.state == SnapshotState::Success)
            .map(|s| s.end.unwrap_or(s.start));
        if latest_end.is_none() && more {
            for policy_id in deployment.spec.policies() {
                if let Some(run) = self
                    .store
                    .get_policy_run(&deployment.org, &deployment.id, policy_id)
                    .await?
                    && let Some(at) = run.value.last_success
                {
                    latest_end = Some(latest_end.map_or(at, |l: DateTime<Utc>| l.max(at)));
                }
            }
        }
        let window_len = self.shortest_interval(deployment).await?;
        let recent = match window_len {
            Some(interval) => {
                let since = latest_end.unwrap_or(deployment.created);
                let allowed = interval
                    .checked_mul(2)
                    .and_then(|twice| chrono::TimeDelta::from_std(twice).ok())
                    .unwrap_or(chrono::TimeDelta::MAX);
                Utc::now().signed_duration_since(since) < allowed
            }
            None => false,
        };
        let healthy = latest_finished == Some(SnapshotState::Success)
            || recent
            || (window_len.is_none() && latest_finished.is_none());
        list.count = Some(window.len() as u64);
        list.count_is_lower_bound = more;
        list.latest_status = latest_finished;
        list.latest_successful_end_time = latest_end;
        list.healthy = Some(healthy);
        Ok(())
    }

    /// The shortest interval of the enabled policies attached to the deployment.
    async fn shortest_interval(
        &self,
        deployment: &Deployment,
    ) -> Result<Option<Duration>, AppError> {
        let mut shortest: Option<Duration> = None;
        for policy_id in deployment.spec.policies() {
            let Some(policy) = self.store.get_policy(&deployment.org, policy_id).await? else {
                continue;
            };
            if !policy.value.spec.enabled {
                continue;
            }
            let interval = match &policy.value.spec.schedule.interval {
                Some(i) => parse_time_value(i).unwrap_or(CRON_INTERVAL),
                None => CRON_INTERVAL,
            };
            shortest = Some(shortest.map_or(interval, |s| s.min(interval)));
        }
        Ok(shortest)
    }

    /// One snapshot; a running one is brought up to date from the cluster.
    pub async fn get_snapshot(
        &self,
        who: &Reader,
        id: &str,
        name: &str,
    ) -> Result<SnapshotView, AppError> {
        self.load_deployment(&who.org, id).await?;
        let stored = self.snapshotter().get(&who.org, id, name).await?;
        Ok(SnapshotView::pinned_by(&stored.value, stored.refs))
    }

    /// Delete a snapshot from the repository and forget it.
    pub async fn delete_snapshot(
        &self,
        who: &Manager,
        id: &str,
        name: &str,
    ) -> Result<(), AppError> {
        self.load_deployment(&who.org, id).await?;
        self.snapshotter().delete(&who.org, id, name).await?;
        tracing::info!(deployment = %id, snapshot = %name, "snapshot deleted");
        Ok(())
    }
}
