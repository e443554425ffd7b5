//! The snapshotter: takes a policy's scheduled snapshot (or a manual one)
//! on the deployment's cluster, records it, and applies the policy's
//! retention. The same code runs in the `floe-snapshotter` Lambda function
//! and, in local mode, from the in-process scheduler.

use crate::error::{SnapshotError, from_elastic};
use crate::registration::{repository_registration, snapshot_place};
use crate::retention::{RetentionRules, expired};
use chrono::{DateTime, Utc};
use floe_clusters::Clusters;
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::policy::{Policy, validate_index_pattern};
use floe_domain::repository::Repository;
use floe_domain::snapshot::{
    DocumentCount, PolicyRun, RunOutcome, SnapshotRecord, SnapshotShards, SnapshotState,
};
use floe_domain::snapshot_name::resolve_snapshot_name;
use floe_elastic::{CreateSnapshot, ElasticClient, ElasticError, SnapshotInfo};
use floe_store::{PageRequest, Store, StoreError, Versioned};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A page of snapshot records brought in step with the repository.
#[derive(Debug)]
pub struct Reconciled {
    /// The page's records, as written now.
    pub records: Vec<Versioned<SnapshotRecord>>,
    /// How many snapshots the cluster took by itself were recorded.
    pub adopted: usize,
}

/// What a removal of a deployment's snapshots did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Removal {
    pub removed: Vec<String>,
    /// `{snapshot}: {why it stays}`.
    pub kept: Vec<String>,
}

/// At most this many indices in a manual snapshot, as in a policy.
pub const MAX_INDICES: usize = 100;

#[derive(Debug, Clone)]
pub struct SnapshotterSettings {
    /// How long one call waits for a snapshot to finish before leaving it
    /// recorded `IN_PROGRESS` for a later refresh. A Lambda function runs at
    /// most 15 minutes, so the default leaves room for retention after it.
    pub wait: Duration,
    /// How often a running snapshot is looked at while waiting.
    pub poll: Duration,
}

impl Default for SnapshotterSettings {
    fn default() -> SnapshotterSettings {
        SnapshotterSettings {
            wait: Duration::from_secs(10 * 60),
            poll: Duration::from_secs(2),
        }
    }
}

/// Cheap to clone: the store and the clusters are shared.
#[derive(Clone)]
pub struct Snapshotter {
    store: Store,
    clusters: Arc<dyn Clusters>,
    settings: SnapshotterSettings,
}

/// What one scheduled run did; the Lambda function returns it as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    pub org: String,
    pub deployment_id: String,
    pub policy_id: String,
    pub outcome: RunOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<SnapshotState>,
    /// Why it skipped, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Snapshots retention deleted.
    pub deleted: Vec<String>,
    /// Snapshots retention wanted to delete but could not (tried again on
    /// the next run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retention_errors: Vec<String>,
    /// Snapshots retention would have deleted but kept, because clones
    /// depend on them (`{snapshot}: pinned by {deployments}`). Nothing
    /// else is deleted in their place.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retention_skipped: Vec<String>,
}

/// What one application of retention did.
#[derive(Debug, Default)]
struct RetentionDone {
    deleted: Vec<String>,
    errors: Vec<String>,
    skipped: Vec<String>,
}

/// Random enough to keep a policy's names apart when its name pattern
/// resolves to the same text twice (every run of `<nightly-{now/d}>` on one
/// day), as SLM appends a random suffix.
/// How often a delete tries to mark a snapshot's record when other
/// writes keep winning (a refresh, another delete): each loss is read
/// back, so a few tries settle any real race.
const MARK_ATTEMPTS: usize = 4;

fn unique_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

fn record_state(info: &SnapshotInfo) -> SnapshotState {
    match info.state {
        Some(floe_elastic::SnapshotState::Success) => SnapshotState::Success,
        Some(floe_elastic::SnapshotState::Failed) => SnapshotState::Failed,
        Some(floe_elastic::SnapshotState::Partial) => SnapshotState::Partial,
        Some(floe_elastic::SnapshotState::Incompatible) => SnapshotState::Incompatible,
        Some(floe_elastic::SnapshotState::InProgress)
        | Some(floe_elastic::SnapshotState::Unknown)
        | None => SnapshotState::InProgress,
    }
}

/// Elasticsearch's reason for a failed snapshot, or the first shard failure
/// of a partial one.
fn failure_reason(info: &SnapshotInfo) -> Option<String> {
    if let Some(reason) = info.reason.as_deref().filter(|r| !r.is_empty()) {
        return Some(reason.to_string());
    }
    let first = info.failures.first()?;
    let shards = info.shards.map(|s| s.failed).unwrap_or(0);
    Some(format!(
        "{shards} shard(s) failed; first: [{}][{}] {}",
        first.index.as_deref().unwrap_or("?"),
        first.shard_id.map(|s| s.to_string()).unwrap_or_default(),
        first.reason.as_deref().unwrap_or("no reason given")
    ))
}

/// Each open, visible index's document count, or `None` when the cluster
/// cannot say: the snapshot is then recorded without counts (a restore of
/// it is checked without them), never refused for it.
async fn document_counts(client: &ElasticClient) -> Option<BTreeMap<String, u64>> {
    match client.indices().await {
        Ok(rows) => Some(
            rows.into_iter()
                .filter_map(|r| Some((r.index.clone(), r.documents()?)))
                .collect(),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "document counts unavailable: the snapshot is recorded without them");
            None
        }
    }
}

/// Completes a finished snapshot's counts: only the indices it holds
/// stay, each with its count now (`after`). Without a count now (the
/// cluster could not say) the `after`s stay empty.
fn count_after(record: &mut SnapshotRecord, now: Option<&BTreeMap<String, u64>>) {
    let held: Option<std::collections::BTreeSet<&String>> =
        (!record.indices.is_empty()).then(|| record.indices.iter().collect());
    if let Some(counts) = record.document_counts.as_mut() {
        if let Some(held) = &held {
            counts.retain(|index, _| held.contains(index));
        }
        for (index, count) in counts.iter_mut() {
            count.after = now.and_then(|n| n.get(index).copied());
        }
    }
}

/// The record of a snapshot of `deployment` started at `start`, before the
/// cluster has said more about it. Its storage key sorts by `start`.
fn started_record(
    deployment: &Deployment,
    repository: &Repository,
    name: String,
    start: DateTime<Utc>,
) -> SnapshotRecord {
    SnapshotRecord {
        org: deployment.org.clone(),
        deployment_id: deployment.id.clone(),
        repository: repository.name.clone(),
        name,
        uuid: String::new(),
        state: SnapshotState::InProgress,
        start,
        end: None,
        duration_in_millis: None,
        indices: Vec::new(),
        shards: SnapshotShards::default(),
        size_in_bytes: None,
        policy_id: None,
        failure: None,
        sort_millis: start.timestamp_millis(),
        updated: start,
        deleting: None,
        place: Some(snapshot_place(repository, &deployment.id)),
        missing: None,
        document_counts: None,
    }
}

/// Copies what the cluster says about the snapshot into the record.
fn apply_info(record: &mut SnapshotRecord, info: &SnapshotInfo, now: DateTime<Utc>) {
    record.state = record_state(info);
    if !info.uuid.is_empty() {
        record.uuid = info.uuid.clone();
    }
    if let Some(start) = info.start_time() {
        record.start = start;
    }
    record.end = info.end_time();
    record.duration_in_millis = info
        .duration_in_millis
        .filter(|_| record.state.is_finished())
        .and_then(|d| u64::try_from(d).ok());
    if !info.indices.is_empty() {
        record.indices = info.indices.clone();
    }
    if let Some(shards) = info.shards {
        record.shards = SnapshotShards {
            total: shards.total,
            successful: shards.successful,
            failed: shards.failed,
        };
    }
    record.failure = match record.state {
        SnapshotState::Failed | SnapshotState::Partial => failure_reason(info),
        _ => None,
    };
    record.updated = now;
}

impl Snapshotter {
    pub fn new(store: Store, clusters: Arc<dyn Clusters>) -> Snapshotter {
        Snapshotter {
            store,
            clusters,
            settings: SnapshotterSettings::default(),
        }
    }

    pub fn with_settings(mut self, settings: SnapshotterSettings) -> Snapshotter {
        self.settings = settings;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    async fn deployment(&self, org: &str, id: &str) -> Result<Deployment, SnapshotError> {
        self.store
            .get_deployment(org, id)
            .await?
            .map(|v| v.value)
            .ok_or_else(|| SnapshotError::DeploymentNotFound(id.to_string()))
    }

    async fn repository(&self, org: &str, name: &str) -> Result<Repository, SnapshotError> {
        self.store
            .get_repository(org, name)
            .await?
            .map(|v| v.value)
            .ok_or_else(|| SnapshotError::RepositoryNotFound(name.to_string()))
    }

    fn require_running(d: &Deployment) -> Result<(), SnapshotError> {
        if d.status == DeploymentStatus::Running {
            Ok(())
        } else {
            Err(SnapshotError::NotRunning {
                id: d.id.clone(),
                status: d.status,
            })
        }
    }

    /// Registers the repository on the cluster (an idempotent PUT), after
    /// checking that no snapshot of this cluster runs in it: Elasticsearch
    /// refuses to change a repository in use, and one snapshot at a time per
    /// repository keeps a slow repository from piling them up.
    async fn ensure_repository(
        &self,
        client: &ElasticClient,
        repo: &Repository,
        deployment_id: &str,
    ) -> Result<(), SnapshotError> {
        let registration = repository_registration(repo, deployment_id, false);
        match client.list_snapshots(&repo.name, false).await {
            Ok(listed) => {
                if listed
                    .iter()
                    .any(|s| s.state == Some(floe_elastic::SnapshotState::InProgress))
                {
                    return Err(SnapshotError::AlreadyRunning {
                        repository: repo.name.clone(),
                    });
                }
                // Already registered (and verified then): refresh settings
                // such as throttles without touching every node again.
                client
                    .put_repository(&repo.name, &registration.without_verification())
                    .await
                    .map_err(|e| from_elastic(e, &repo.name))
            }
            Err(ElasticError::RepositoryMissing(_)) => client
                .put_repository(&repo.name, &registration)
                .await
                .map_err(|e| from_elastic(e, &repo.name)),
            Err(e) => Err(from_elastic(e, &repo.name)),
        }
    }

    /// Starts the snapshot, records it `IN_PROGRESS`, and with `wait`
    /// follows it until it ends or `settings.wait` runs out.
    #[allow(clippy::too_many_arguments)]
    async fn take(
        &self,
        deployment: &Deployment,
        client: &ElasticClient,
        repo: &Repository,
        name: String,
        request: CreateSnapshot,
        policy_id: Option<&str>,
        wait: bool,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        self.ensure_repository(client, repo, &deployment.id).await?;
        // Counted before the snapshot starts: a restore of it holds at
        // least these documents (of what was not deleted meanwhile).
        let before = document_counts(client).await;
        // Started without waiting: the client's timeout would cut a long
        // wait short and lose the answer; polling is bounded by our own.
        client
            .create_snapshot(&repo.name, &name, &request, false)
            .await
            .map_err(|e| match e {
                ElasticError::InvalidSnapshotName(f) => SnapshotError::Invalid {
                    field: "name".into(),
                    message: f.reason,
                },
                other => from_elastic(other, &repo.name),
            })?;
        let now = Utc::now();
        let mut record = started_record(deployment, repo, name, now);
        record.indices.clone_from(&request.indices);
        record.policy_id = policy_id.map(str::to_string);
        record.document_counts = before.map(|counts| {
            counts
                .into_iter()
                .map(|(index, before)| {
                    (
                        index,
                        DocumentCount {
                            before,
                            after: None,
                        },
                    )
                })
                .collect()
        });
        self.store.create_snapshot(&record).await?;
        let stored = Versioned {
            value: record,
            version: 1,
            refs: 0,
        };
        let deadline = Instant::now()
            + if wait {
                self.settings.wait
            } else {
                Duration::ZERO
            };
        self.follow(client, stored, deadline).await
    }

    /// Looks at a running snapshot until it ends or `deadline` passes, and
    /// writes what changed. A finished record is returned as it is.
    async fn follow(
        &self,
        client: &ElasticClient,
        mut stored: Versioned<SnapshotRecord>,
        deadline: Instant,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        if stored.value.state.is_finished() {
            return Ok(stored);
        }
        let (repo, name) = (stored.value.repository.clone(), stored.value.name.clone());
        let mut missing_before = false;
        loop {
            match client.get_snapshot(&repo, &name).await {
                Ok(info) => {
                    let mut next = stored.value.clone();
                    apply_info(&mut next, &info, Utc::now());
                    if next.state.is_finished() && next.document_counts.is_some() {
                        let after = document_counts(client).await;
                        count_after(&mut next, after.as_ref());
                    }
                    if next.state.is_finished() {
                        next.size_in_bytes = client
                            .snapshot_status(&repo, &name)
                            .await
                            .ok()
                            .and_then(|s| u64::try_from(s.stats.total.size_in_bytes).ok());
                    }
                    if next.state.is_finished() || next.uuid != stored.value.uuid {
                        stored = self.save(next, &stored).await?;
                    }
                    if stored.value.state.is_finished() {
                        return Ok(stored);
                    }
                }
                // A snapshot that just finished can drop out of the running
                // set a moment before the repository lists it: only a
                // second miss means it is gone.
                Err(ElasticError::SnapshotMissing(_)) if !missing_before => {
                    missing_before = true;
                    tokio::time::sleep(self.settings.poll).await;
                    continue;
                }
                Err(ElasticError::SnapshotMissing(_)) => {
                    // Deleted (aborted) on the cluster behind Floe's back.
                    let mut next = stored.value.clone();
                    next.state = SnapshotState::Failed;
                    next.failure = Some("the snapshot is no longer in the repository".into());
                    next.updated = Utc::now();
                    return self.save(next, &stored).await;
                }
                // A busy cluster: keep the record and look again.
                Err(e) if e.is_transient() => {
                    tracing::debug!(snapshot = %name, error = %e, "snapshot not readable yet");
                }
                Err(e) => return Err(from_elastic(e, &repo)),
            }
            if Instant::now() >= deadline {
                return Ok(stored);
            }
            tokio::time::sleep(self.settings.poll).await;
        }
    }

    /// Writes what the cluster said about a snapshot. When another reader
    /// (a listing's refresh, the scheduled run) wrote first, its record is
    /// as current as ours, both being read from the cluster: it is loaded
    /// and followed on, never turned into an error.
    async fn save(
        &self,
        next: SnapshotRecord,
        stored: &Versioned<SnapshotRecord>,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        match self.store.update_snapshot(&next, stored.version).await {
            Ok(version) => Ok(Versioned {
                value: next,
                version,
                refs: stored.refs,
            }),
            Err(StoreError::VersionMismatch { .. }) => self
                .store
                .get_snapshot(&next.org, &next.deployment_id, &next.name)
                .await?
                .ok_or_else(|| SnapshotError::SnapshotNotFound(next.name.clone())),
            Err(e) => Err(e.into()),
        }
    }

    /// The snapshot's record, brought up to date from the cluster when it
    /// was still running (and the cluster can be reached).
    pub async fn get(
        &self,
        org: &str,
        deployment_id: &str,
        name: &str,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        let deployment = self.deployment(org, deployment_id).await?;
        let stored = self
            .store
            .get_snapshot(org, deployment_id, name)
            .await?
            .ok_or_else(|| SnapshotError::SnapshotNotFound(name.to_string()))?;
        let stored = self.refresh(&deployment, stored).await;
        Ok(self.check_present(&deployment, stored).await)
    }

    /// Brings an `IN_PROGRESS` record up to date with one look at the
    /// cluster. A cluster that cannot be asked leaves the record as it is:
    /// listing must not fail because a cluster is busy.
    pub async fn refresh(
        &self,
        deployment: &Deployment,
        stored: Versioned<SnapshotRecord>,
    ) -> Versioned<SnapshotRecord> {
        // A stopping deployment's nodes still run (its final snapshot).
        if stored.value.state.is_finished()
            || !matches!(
                deployment.status,
                DeploymentStatus::Running | DeploymentStatus::Stopping
            )
        {
            return stored;
        }
        let client = match self.clusters.client(deployment, &[]).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(deployment = %deployment.id, error = %e, "cannot refresh a running snapshot");
                return stored;
            }
        };
        let fallback = stored.clone();
        match self.follow(&client, stored, Instant::now()).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(deployment = %deployment.id, snapshot = %fallback.value.name, error = %e, "cannot refresh a running snapshot");
                fallback
            }
        }
    }

    /// Brings the records of one page of the deployment's snapshots in
    /// step with its repository, as its cluster lists it (one request):
    ///
    /// - a finished record the repository no longer lists (deleted outside
    ///   Floe, through the cluster's own API) is marked `missing`; one
    ///   marked before that the repository lists again is unmarked;
    /// - with `adopt`, the snapshots the cluster took by itself
    ///   (`PUT _snapshot/{repo}/{name}` through the endpoint or the
    ///   proxy) that belong on this page are recorded, so that listings,
    ///   retention and `__latest_success__` know them. A page is the
    ///   newest records down to its oldest one (or all of them when no
    ///   page follows), so only the snapshots that started since that one
    ///   are looked for: the store work stays one page, whatever the
    ///   number of snapshots.
    ///
    /// Returns the page as it is now. A deployment whose cluster cannot be
    /// asked (stopped, busy) keeps its records as they are: reads must not
    /// fail because a cluster is busy.
    pub async fn reconcile(
        &self,
        deployment: &Deployment,
        page: Vec<Versioned<SnapshotRecord>>,
        more_follow: bool,
        adopt: bool,
    ) -> Result<Reconciled, SnapshotError> {
        let mut done = Reconciled {
            records: page,
            adopted: 0,
        };
        let Some(repo_name) = deployment.spec.repository() else {
            return Ok(done);
        };
        if !matches!(
            deployment.status,
            DeploymentStatus::Running | DeploymentStatus::Reconfiguring
        ) {
            return Ok(done);
        }
        let client = self.clusters.client(deployment, &[]).await?;
        let listed = match client.list_snapshots(repo_name, false).await {
            Ok(l) => l,
            // Not registered yet (a plan registers it): nothing to compare.
            Err(ElasticError::RepositoryMissing(_)) => return Ok(done),
            Err(e) => return Err(from_elastic(e, repo_name)),
        };
        let repo = self.repository(&deployment.org, repo_name).await?;
        let here = snapshot_place(&repo, &deployment.id);
        let on_cluster: std::collections::BTreeSet<&str> =
            listed.iter().map(|i| i.snapshot.as_str()).collect();
        for stored in &mut done.records {
            let s = &stored.value;
            // Only what the cluster's listing speaks for: records of this
            // repository at its present place, finished and not being
            // deleted by Floe itself.
            if s.repository != repo.name
                || s.place.as_deref().is_some_and(|p| p != here)
                || !s.state.is_finished()
                || s.deleting.is_some()
            {
                continue;
            }
            let listed_now = on_cluster.contains(s.name.as_str());
            if listed_now == s.missing.is_none() {
                continue;
            }
            let mut next = s.clone();
            next.missing = if listed_now { None } else { Some(Utc::now()) };
            next.updated = Utc::now();
            if !listed_now {
                tracing::warn!(deployment = %deployment.id, snapshot = %s.name, "a snapshot was deleted outside Floe: recorded as missing");
            }
            match self.save(next, stored).await {
                Ok(saved) => *stored = saved,
                Err(e) => {
                    tracing::warn!(deployment = %deployment.id, snapshot = %s.name, error = %e, "cannot record a snapshot's presence");
                }
            }
        }
        if !adopt {
            return Ok(done);
        }
        let known: std::collections::BTreeSet<&str> =
            done.records.iter().map(|r| r.value.name.as_str()).collect();
        // Below the page's oldest record start the records of the next
        // pages, which this page does not show: the cluster's start time of
        // a snapshot Floe took is never after its record's sort time.
        let oldest = if more_follow {
            done.records.last().map(|r| r.value.sort_millis)
        } else {
            None
        };
        let new: Vec<&SnapshotInfo> = listed
            .iter()
            .filter(|info| {
                !matches!(
                    info.state,
                    None | Some(floe_elastic::SnapshotState::InProgress)
                ) && !known.contains(info.snapshot.as_str())
                    && oldest.is_none_or(|o| {
                        info.start_time().is_some_and(|t| t.timestamp_millis() >= o)
                    })
            })
            .collect();
        for info in new {
            let now = Utc::now();
            let start = info.start_time().unwrap_or(now);
            let mut record = started_record(deployment, &repo, info.snapshot.clone(), start);
            apply_info(&mut record, info, now);
            match self.store.create_snapshot(&record).await {
                Ok(()) => done.adopted += 1,
                // Recorded already (on another page), or by another reader.
                Err(StoreError::AlreadyExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if done.adopted > 0 {
            tracing::info!(deployment = %deployment.id, adopted = done.adopted, "snapshots taken on the cluster recorded");
        }
        Ok(done)
    }

    /// Whether the repository still holds the recorded snapshot `stored`,
    /// asked of its deployment's cluster when it runs: a snapshot found
    /// gone is marked `missing` (and returned so), one found again
    /// unmarked. A cluster that cannot say leaves the record as it is.
    pub async fn check_present(
        &self,
        deployment: &Deployment,
        stored: Versioned<SnapshotRecord>,
    ) -> Versioned<SnapshotRecord> {
        if !matches!(
            deployment.status,
            DeploymentStatus::Running | DeploymentStatus::Reconfiguring
        ) || !stored.value.state.is_finished()
            || stored.value.deleting.is_some()
            || deployment.spec.repository() != Some(stored.value.repository.as_str())
        {
            return stored;
        }
        let Ok(client) = self.clusters.client(deployment, &[]).await else {
            return stored;
        };
        let present = match client
            .get_snapshot(&stored.value.repository, &stored.value.name)
            .await
        {
            Ok(_) => true,
            Err(ElasticError::SnapshotMissing(_)) => false,
            Err(_) => return stored,
        };
        if present == stored.value.missing.is_none() {
            return stored;
        }
        if let Some(taken_at) = &stored.value.place {
            match self
                .repository(&deployment.org, &stored.value.repository)
                .await
            {
                Ok(repo) if snapshot_place(&repo, &deployment.id) == *taken_at => {}
                _ => return stored,
            }
        }
        let mut next = stored.value.clone();
        next.missing = if present { None } else { Some(Utc::now()) };
        next.updated = Utc::now();
        if !present {
            tracing::warn!(deployment = %deployment.id, snapshot = %next.name, "a snapshot was deleted outside Floe: recorded as missing");
        }
        let fallback = Versioned {
            value: next.clone(),
            version: stored.version,
            refs: stored.refs,
        };
        self.save(next, &stored).await.unwrap_or(fallback)
    }

    /// Records the snapshots the cluster took by itself since the newest
    /// page of records (see [`Snapshotter::reconcile`]), and marks the
    /// missing ones among that page. Returns how many were new.
    pub async fn adopt(&self, deployment: &Deployment) -> Result<usize, SnapshotError> {
        let page = PageRequest {
            size: Some(floe_store::stores::MAX_PAGE_SIZE),
            cursor: None,
        };
        let listed = self
            .store
            .list_snapshots(&deployment.org, &deployment.id, None, &page)
            .await?;
        let more = listed.next_cursor.is_some();
        Ok(self
            .reconcile(deployment, listed.items, more, true)
            .await?
            .adopted)
    }

    /// A manual snapshot into the deployment's repository. `name` may be
    /// date math; without one Floe picks `manual-{time}-{suffix}`. With
    /// `wait`, returns once it ended (or `settings.wait` ran out).
    pub async fn take_manual(
        &self,
        org: &str,
        deployment_id: &str,
        name: Option<&str>,
        indices: Option<Vec<String>>,
        wait: bool,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        let now = Utc::now();
        let name = match name {
            Some(n) => resolve_snapshot_name(n, now).map_err(|message| SnapshotError::Invalid {
                field: "name".into(),
                message,
            })?,
            None => format!(
                "manual-{}-{}",
                now.format("%Y.%m.%d-%H.%M.%S"),
                unique_suffix()
            ),
        };
        let indices = indices.unwrap_or_default();
        if indices.len() > MAX_INDICES {
            return Err(SnapshotError::Invalid {
                field: "indices".into(),
                message: format!("at most {MAX_INDICES} index patterns"),
            });
        }
        for (i, index) in indices.iter().enumerate() {
            validate_index_pattern(index).map_err(|message| SnapshotError::Invalid {
                field: format!("indices[{i}]"),
                message,
            })?;
        }
        let deployment = self.deployment(org, deployment_id).await?;
        Self::require_running(&deployment)?;
        let taken = self.take_named(&deployment, name, indices, wait).await?;
        tracing::info!(deployment = deployment_id, snapshot = %taken.value.name, state = taken.value.state.as_str(), "manual snapshot");
        Ok(taken)
    }

    /// The shutdown plan's last snapshot, taken while the deployment is
    /// already `stopping` (its nodes still run), or an upgrade's first,
    /// taken while it is `reconfiguring` (before any node changed), waiting
    /// for the end. A record of that name from an earlier attempt is
    /// refreshed, not taken again.
    pub async fn take_final(
        &self,
        org: &str,
        deployment_id: &str,
        name: &str,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        let deployment = self.deployment(org, deployment_id).await?;
        if !matches!(
            deployment.status,
            DeploymentStatus::Running
                | DeploymentStatus::Stopping
                | DeploymentStatus::Reconfiguring
        ) {
            return Err(SnapshotError::NotRunning {
                id: deployment.id.clone(),
                status: deployment.status,
            });
        }
        if let Some(earlier) = self.store.get_snapshot(org, deployment_id, name).await? {
            return Ok(self.refresh(&deployment, earlier).await);
        }
        let taken = self
            .take_named(&deployment, name.to_string(), Vec::new(), true)
            .await?;
        tracing::info!(
            deployment = deployment_id,
            snapshot = name,
            state = taken.value.state.as_str(),
            "final snapshot"
        );
        Ok(taken)
    }

    async fn take_named(
        &self,
        deployment: &Deployment,
        name: String,
        indices: Vec<String>,
        wait: bool,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        let repo_name = deployment
            .spec
            .repository()
            .ok_or_else(|| SnapshotError::NoRepository(deployment.id.clone()))?
            .to_string();
        if self
            .store
            .get_snapshot(&deployment.org, &deployment.id, &name)
            .await?
            .is_some()
        {
            return Err(SnapshotError::SnapshotExists(name));
        }
        let repo = self.repository(&deployment.org, &repo_name).await?;
        let client = self.clusters.client(deployment, &[]).await?;
        let request = CreateSnapshot {
            indices,
            ..CreateSnapshot::default()
        };
        self.take(deployment, &client, &repo, name, request, None, wait)
            .await
    }

    /// Deletes the snapshot from the repository (one already gone is
    /// fine), then its record.
    pub async fn delete(
        &self,
        org: &str,
        deployment_id: &str,
        name: &str,
    ) -> Result<(), SnapshotError> {
        let deployment = self.deployment(org, deployment_id).await?;
        let stored = self
            .store
            .get_snapshot(org, deployment_id, name)
            .await?
            .ok_or_else(|| SnapshotError::SnapshotNotFound(name.to_string()))?;
        // Before anything is deleted on the cluster: clones that restore or
        // mount it read it from there.
        if stored.refs > 0 {
            return Err(SnapshotError::Pinned {
                snapshot: name.to_string(),
                by: self.pinned_by(&stored.value).await,
            });
        }
        Self::require_running(&deployment)?;
        let client = self.clusters.client(&deployment, &[]).await?;
        self.delete_unpinned(&client, org, stored).await
    }

    /// Removes every snapshot of the deployment that no clone pins, through
    /// its cluster, with their records (a delete with `remove_snapshots`).
    /// The pinned ones, and those taken where the repository no longer
    /// points, stay and are named in `kept`. A page at a time; a cluster
    /// error stops it (the plan retries: what was removed is gone).
    pub async fn remove_all(&self, deployment: &Deployment) -> Result<Removal, SnapshotError> {
        let client = self.clusters.client(deployment, &[]).await?;
        let mut removal = Removal::default();
        let mut pages = self
            .store
            .snapshot_pages(&deployment.org, &deployment.id, None);
        while let Some(items) = pages.next_page().await? {
            for stored in items {
                let name = stored.value.name.clone();
                match self.delete_unpinned(&client, &deployment.org, stored).await {
                    Ok(()) => removal.removed.push(name),
                    Err(SnapshotError::Pinned { by, .. }) => removal
                        .kept
                        .push(format!("{name}: pinned by {}", by.join(", "))),
                    Err(SnapshotError::Moved { taken_at, .. }) => removal.kept.push(format!(
                        "{name}: taken at {taken_at}, where the repository no longer points"
                    )),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(removal)
    }

    /// Deletes the recorded snapshot `stored` on the cluster, then its
    /// record, unless a clone pins it (`Pinned`, and nothing is deleted).
    ///
    /// A clone pins a snapshot's record at the version it read
    /// (`Write::RefsAt`), so a pin and a delete cannot both win: the delete
    /// first marks the record (`deleting`, a new version: from then on no
    /// clone can pin it), then reads it again, where a pin counted before
    /// the mark shows; then it stops and clears its mark. Only a record
    /// marked and unpinned is deleted on the cluster. A cluster error
    /// leaves the mark (the snapshot may be gone already), so no clone
    /// starts from it; the next delete finishes the job.
    async fn delete_unpinned(
        &self,
        client: &ElasticClient,
        org: &str,
        stored: Versioned<SnapshotRecord>,
    ) -> Result<(), SnapshotError> {
        self.check_place(org, &stored.value).await?;
        let Some(marked) = self.mark_deleting(stored).await? else {
            return Ok(());
        };
        let Some(now) = self
            .store
            .get_snapshot(org, &marked.value.deployment_id, &marked.value.name)
            .await?
        else {
            return Ok(());
        };
        if now.refs > 0 {
            let by = self.pinned_by(&now.value).await;
            self.unmark_deleting(now).await;
            return Err(SnapshotError::Pinned {
                snapshot: marked.value.name,
                by,
            });
        }
        self.delete_on_cluster(client, org, &now.value).await?;
        match self.store.delete_snapshot(&now).await {
            Ok(()) | Err(StoreError::NotFound) => Ok(()),
            // Written since the re-read: by another delete finishing the
            // same job, or a refresh; the record is as good as deleted and
            // the next delete (or retention run) removes it.
            Err(StoreError::VersionMismatch { .. }) => Ok(()),
            Err(StoreError::InUse { .. }) => Err(SnapshotError::Pinned {
                snapshot: now.value.name.clone(),
                by: self.pinned_by(&now.value).await,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// `Moved` when `s` was taken where its repository no longer keeps the
    /// deployment's snapshots: deleting it at the new place would delete
    /// nothing there and drop the record of data left at the old one.
    async fn check_place(&self, org: &str, s: &SnapshotRecord) -> Result<(), SnapshotError> {
        let Some(taken_at) = &s.place else {
            return Ok(());
        };
        let repo = self.repository(org, &s.repository).await?;
        let now_at = snapshot_place(&repo, &s.deployment_id);
        if *taken_at == now_at {
            Ok(())
        } else {
            Err(SnapshotError::Moved {
                snapshot: s.name.clone(),
                taken_at: taken_at.clone(),
                now_at,
            })
        }
    }

    /// The record `stored` marked as being deleted (or as it is, when an
    /// earlier delete marked it and stopped half-way); `None` once it is
    /// gone. A write that won the race is read back and looked at again.
    async fn mark_deleting(
        &self,
        stored: Versioned<SnapshotRecord>,
    ) -> Result<Option<Versioned<SnapshotRecord>>, SnapshotError> {
        let mut current = stored;
        for _ in 0..MARK_ATTEMPTS {
            if current.refs > 0 {
                return Err(SnapshotError::Pinned {
                    snapshot: current.value.name.clone(),
                    by: self.pinned_by(&current.value).await,
                });
            }
            if current.value.deleting.is_some() {
                return Ok(Some(current));
            }
            let mut next = current.value.clone();
            next.deleting = Some(Utc::now());
            match self.store.update_snapshot(&next, current.version).await {
                Ok(version) => {
                    return Ok(Some(Versioned {
                        value: next,
                        version,
                        refs: current.refs,
                    }));
                }
                Err(StoreError::VersionMismatch { .. }) => {
                    let s = &current.value;
                    match self
                        .store
                        .get_snapshot(&s.org, &s.deployment_id, &s.name)
                        .await?
                    {
                        Some(again) => current = again,
                        None => return Ok(None),
                    }
                }
                Err(StoreError::NotFound) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Err(SnapshotError::Store(StoreError::VersionMismatch {
            current: current.version,
        }))
    }

    /// Clears the mark of a delete that stopped because a clone pins the
    /// snapshot. A lost race leaves it to the writer that won; a failure
    /// leaves the mark, which only refuses new clones until a delete ends.
    async fn unmark_deleting(&self, marked: Versioned<SnapshotRecord>) {
        let mut next = marked.value.clone();
        next.deleting = None;
        if let Err(e) = self.store.update_snapshot(&next, marked.version).await {
            tracing::warn!(deployment = %next.deployment_id, snapshot = %next.name, error = %e, "cannot clear a refused delete's mark");
        }
    }

    async fn delete_on_cluster(
        &self,
        client: &ElasticClient,
        org: &str,
        s: &SnapshotRecord,
    ) -> Result<(), SnapshotError> {
        match client.delete_snapshot(&s.repository, &s.name).await {
            Ok(()) | Err(ElasticError::SnapshotMissing(_)) => Ok(()),
            // The repository was unregistered (a restarted cluster): put it
            // back and try once more.
            Err(ElasticError::RepositoryMissing(_)) => {
                let repo = self.repository(org, &s.repository).await?;
                client
                    .put_repository(
                        &repo.name,
                        &repository_registration(&repo, &s.deployment_id, false),
                    )
                    .await
                    .map_err(|e| from_elastic(e, &repo.name))?;
                match client.delete_snapshot(&s.repository, &s.name).await {
                    Ok(()) | Err(ElasticError::SnapshotMissing(_)) => Ok(()),
                    Err(e) => Err(from_elastic(e, &s.repository)),
                }
            }
            Err(e) => Err(from_elastic(e, &s.repository)),
        }
    }

    /// One firing of a policy attachment's schedule: snapshot, record,
    /// retention. Skips and failures are recorded in the attachment's run
    /// state and answered `Ok`; `Err` means "try again later" (storage or
    /// cluster unavailable), for the scheduler's retry policy.
    pub async fn run_scheduled(
        &self,
        org: &str,
        deployment_id: &str,
        policy_id: &str,
    ) -> Result<RunSummary, SnapshotError> {
        let now = Utc::now();
        let mut summary = RunSummary {
            org: org.into(),
            deployment_id: deployment_id.into(),
            policy_id: policy_id.into(),
            outcome: RunOutcome::Skipped,
            snapshot: None,
            state: None,
            reason: None,
            deleted: Vec::new(),
            retention_errors: Vec::new(),
            retention_skipped: Vec::new(),
        };
        let Some(deployment) = self
            .store
            .get_deployment(org, deployment_id)
            .await?
            .map(|v| v.value)
        else {
            // A schedule outliving its deployment: nothing to record it on.
            summary.reason = Some("the deployment no longer exists".into());
            return Ok(summary);
        };
        let policy = self
            .store
            .get_policy(org, policy_id)
            .await?
            .map(|v| v.value);
        let skip = match &policy {
            None => Some("the policy no longer exists".to_string()),
            Some(_) if !deployment.spec.policies().iter().any(|p| p == policy_id) => {
                Some("the policy is not attached to the deployment".to_string())
            }
            Some(p) if !p.spec.enabled => Some("the policy is disabled".to_string()),
            // Registered at the clone's own path, the policy's repository
            // would replace the read-only registration its mounted
            // indices read the source through (the API refuses attaching
            // it; a policy moved to that repository later ends here).
            Some(p)
                if deployment
                    .clone_source
                    .as_ref()
                    .is_some_and(|s| s.reads_source() && s.registered_as == p.spec.repository) =>
            {
                Some(format!(
                    "repository {} is this clone's read-only registration of its source's path",
                    p.spec.repository
                ))
            }
            Some(_) if deployment.status != DeploymentStatus::Running => Some(format!(
                "the deployment is {}, not running",
                deployment.status.as_str()
            )),
            Some(_) => None,
        };
        let (Some(policy), None) = (policy, skip.clone()) else {
            summary.reason = skip;
            self.record_run(&summary, now).await?;
            return Ok(summary);
        };

        let result = self.snapshot_for_policy(&deployment, &policy, now).await;
        match result {
            Ok(taken) => {
                let state = taken.value.state;
                summary.snapshot = Some(taken.value.name.clone());
                summary.state = Some(state);
                if matches!(state, SnapshotState::Failed | SnapshotState::Partial) {
                    summary.outcome = RunOutcome::Failed;
                    summary.reason =
                        Some(
                            taken.value.failure.clone().unwrap_or_else(|| {
                                format!("the snapshot ended {}", state.as_str())
                            }),
                        );
                } else {
                    summary.outcome = RunOutcome::Snapshot;
                }
            }
            Err(SnapshotError::AlreadyRunning { repository }) => {
                summary.reason = Some(format!(
                    "a snapshot is already running in repository {repository}"
                ));
            }
            Err(e) => {
                summary.outcome = RunOutcome::Failed;
                summary.reason = Some(e.to_string());
                self.record_run(&summary, now).await?;
                tracing::warn!(deployment = deployment_id, policy = policy_id, error = %e, "scheduled snapshot failed");
                return if e.is_transient() {
                    Err(e)
                } else {
                    Ok(summary)
                };
            }
        }

        if let Some(retention) = &policy.spec.retention {
            match self.apply_retention(&deployment, &policy, retention).await {
                Ok(kept) => {
                    summary.deleted = kept.deleted;
                    summary.retention_errors = kept.errors;
                    summary.retention_skipped = kept.skipped;
                }
                Err(e) => summary.retention_errors.push(e.to_string()),
            }
        }
        self.record_run(&summary, now).await?;
        tracing::info!(
            deployment = deployment_id,
            policy = policy_id,
            outcome = ?summary.outcome,
            snapshot = summary.snapshot.as_deref().unwrap_or("-"),
            deleted = summary.deleted.len(),
            pinned = ?summary.retention_skipped,
            "scheduled snapshot run"
        );
        Ok(summary)
    }

    async fn snapshot_for_policy(
        &self,
        deployment: &Deployment,
        policy: &Policy,
        now: DateTime<Utc>,
    ) -> Result<Versioned<SnapshotRecord>, SnapshotError> {
        let base = resolve_snapshot_name(&policy.spec.snapshot_name, now).map_err(|message| {
            SnapshotError::Invalid {
                field: "snapshot_name".into(),
                message,
            }
        })?;
        let name = format!("{base}-{}", unique_suffix());
        let repo = self
            .repository(&deployment.org, &policy.spec.repository)
            .await?;
        let client = self.clusters.client(deployment, &[]).await?;
        let request = CreateSnapshot {
            indices: policy.spec.indices.clone(),
            include_global_state: Some(policy.spec.include_global_state),
            ..CreateSnapshot::default()
        };
        self.take(
            deployment,
            &client,
            &repo,
            name,
            request,
            Some(&policy.id),
            true,
        )
        .await
    }

    /// Deletes the policy's snapshots its retention no longer keeps: on the
    /// cluster first, then the record, so a failure half-way leaves a record
    /// that the next run deletes again. A snapshot a clone pins is kept and
    /// reported; it still counts as kept for the rules, so nothing else is
    /// deleted in its place.
    async fn apply_retention(
        &self,
        deployment: &Deployment,
        policy: &Policy,
        retention: &floe_domain::policy::Retention,
    ) -> Result<RetentionDone, SnapshotError> {
        let rules =
            RetentionRules::from_policy(retention).map_err(|message| SnapshotError::Invalid {
                field: "retention.expire_after".into(),
                message,
            })?;
        if rules.is_empty() {
            return Ok(RetentionDone::default());
        }
        let client = self.clusters.client(deployment, &[]).await?;
        let listed = self
            .store
            .snapshot_pages(&deployment.org, &deployment.id, Some(&policy.id))
            .all()
            .await?;
        let mut all = Vec::with_capacity(listed.len());
        for stored in listed {
            // Older runs left running are settled first, so they count.
            let stored = match self.follow(&client, stored.clone(), Instant::now()).await {
                Ok(v) => v,
                Err(_) => stored,
            };
            all.push(stored);
        }
        let records: Vec<SnapshotRecord> = all.iter().map(|v| v.value.clone()).collect();
        let doomed = expired(&records, &rules, Utc::now());
        let mut done = RetentionDone::default();
        for name in doomed {
            let Some(stored) = all.iter().find(|v| v.value.name == name) else {
                continue;
            };
            match self
                .delete_unpinned(&client, &deployment.org, stored.clone())
                .await
            {
                Ok(()) => done.deleted.push(name),
                Err(SnapshotError::Pinned { by, .. }) => {
                    tracing::info!(deployment = %deployment.id, policy = %policy.id, snapshot = %name, pinned_by = %by.join(","), "retention keeps a snapshot clones depend on");
                    done.skipped
                        .push(format!("{name}: pinned by {}", by.join(", ")));
                }
                Err(SnapshotError::Moved { taken_at, .. }) => {
                    tracing::info!(deployment = %deployment.id, policy = %policy.id, snapshot = %name, taken_at = %taken_at, "retention keeps a snapshot taken before its repository moved");
                    done.skipped.push(format!(
                        "{name}: taken at {taken_at}, where the repository no longer points"
                    ));
                }
                Err(e) => done.errors.push(format!("{name}: {e}")),
            }
        }
        Ok(done)
    }

    /// The clones that pin `s` (by id), or a count when none can be named.
    async fn pinned_by(&self, s: &SnapshotRecord) -> Vec<String> {
        match self
            .store
            .snapshot_pins(&s.org, &s.deployment_id, &s.name)
            .await
        {
            Ok(pins) if !pins.is_empty() => pins
                .into_iter()
                .map(|p| format!("deployment {}", p.deployment_id))
                .collect(),
            _ => vec!["a clone".to_string()],
        }
    }

    /// Writes the run into the attachment's run state, retrying a lost race
    /// with another run of the same attachment.
    async fn record_run(&self, s: &RunSummary, now: DateTime<Utc>) -> Result<(), SnapshotError> {
        for _ in 0..5 {
            let previous = self
                .store
                .get_policy_run(&s.org, &s.deployment_id, &s.policy_id)
                .await?;
            let mut run = previous
                .as_ref()
                .map(|v| v.value.clone())
                .unwrap_or_else(|| PolicyRun::new(&s.org, &s.deployment_id, &s.policy_id, now));
            run.last_run = now;
            run.last_outcome = s.outcome;
            run.total_deleted += s.deleted.len() as u64;
            if s.outcome != RunOutcome::Skipped {
                run.last_retention_skipped.clone_from(&s.retention_skipped);
            }
            match s.outcome {
                RunOutcome::Skipped => run.last_skip_reason = s.reason.clone(),
                RunOutcome::Failed => {
                    run.last_failure = s.reason.clone();
                    run.consecutive_failures = run.consecutive_failures.saturating_add(1);
                    run.total_failures += 1;
                    if s.snapshot.is_some() {
                        run.last_snapshot = s.snapshot.clone();
                        run.total_snapshots += 1;
                    }
                }
                RunOutcome::Snapshot => {
                    run.last_snapshot = s.snapshot.clone();
                    run.total_snapshots += 1;
                    if s.state == Some(SnapshotState::Success) {
                        run.last_success = Some(now);
                        run.consecutive_failures = 0;
                    }
                }
            }
            match self
                .store
                .save_policy_run(&run, previous.map(|v| v.version))
                .await
            {
                Ok(_) => return Ok(()),
                Err(StoreError::VersionMismatch { .. } | StoreError::AlreadyExists) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::VersionMismatch { current: 0 }.into())
    }
}
