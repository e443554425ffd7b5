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

/// The summary scan reads at most this many records; a deployment whose
/// retention keeps more reports `count` as a lower bound.
const SUMMARY_SCAN_LIMIT: usize = 2_000;
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
    /// The summary is on the first page only (no `cursor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
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
    fn snapshotter(&self) -> Snapshotter {
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
    /// repository by itself (through its endpoint or the proxy). A cluster
    /// that cannot be asked leaves the records as they are: reads must not
    /// fail because a cluster is busy.
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
    /// page carries the summary.
    pub async fn list_snapshots(
        &self,
        who: &Reader,
        id: &str,
        page: PageRequest,
    ) -> Result<SnapshotList, AppError> {
        let deployment = self.load_deployment(&who.org, id).await?.value;
        let first_page = page.cursor.is_none();
        if first_page {
            self.adopt_cluster_snapshots(&who.org, id).await;
        }
        let listed = self.store.list_snapshots(&who.org, id, None, &page).await?;
        let snapshotter = self.snapshotter();
        let mut snapshots = Vec::with_capacity(listed.items.len());
        for stored in listed.items {
            let stored = snapshotter.refresh(&deployment, stored).await;
            snapshots.push(SnapshotView::pinned_by(&stored.value, stored.refs));
        }
        let mut list = SnapshotList {
            snapshots,
            next_cursor: listed.next_cursor,
            count: None,
            latest_status: None,
            latest_successful_end_time: None,
            healthy: None,
        };
        if first_page {
            self.summarize(&deployment, &mut list).await?;
        }
        Ok(list)
    }

    /// Fills in the summary from the deployment's records, newest first.
    async fn summarize(
        &self,
        deployment: &Deployment,
        list: &mut SnapshotList,
    ) -> Result<(), AppError> {
        let mut count = 0u64;
        let mut latest_finished: Option<SnapshotState> = None;
        let mut latest_success: Option<SnapshotRecord> = None;
        let mut page = PageRequest {
            size: Some(floe_store::stores::MAX_PAGE_SIZE),
            cursor: None,
        };
        let mut scanned = 0usize;
        loop {
            let listed = self
                .store
                .list_snapshots(&deployment.org, &deployment.id, None, &page)
                .await?;
            for Versioned { value, .. } in listed.items {
                count += 1;
                scanned += 1;
                if latest_finished.is_none() && value.state.is_finished() {
                    latest_finished = Some(value.state);
                }
                if latest_success.is_none() && value.state == SnapshotState::Success {
                    latest_success = Some(value);
                }
            }
            match listed.next_cursor {
                Some(c) if scanned < SUMMARY_SCAN_LIMIT => page.cursor = Some(c),
                _ => break,
            }
        }
        let latest_end = latest_success.as_ref().map(|s| s.end.unwrap_or(s.start));
        let window = self.shortest_interval(deployment).await?;
        let recent = match window {
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
            || (window.is_none() && latest_finished.is_none());
        list.count = Some(count);
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
