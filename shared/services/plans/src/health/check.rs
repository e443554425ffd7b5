//! The health check's round over the fleet: each sweep, every shard of
//! the fleet index, a page of running deployments at a time, each probed,
//! judged and recorded.
//!
//! A write of health alone keeps the record's version (see
//! [`floe_store::Store::record_health`]): a user who read the deployment
//! and sends a change with `If-Match` is not refused because the check
//! looked at it. Starting a heal is a change like any other and moves it.
//!
//! Its cost per deployment is bounded and flat: a page of a shard is one
//! store query; its deployments' instances are listed together (one
//! `DescribeInstances` per page, a status call per hundred running
//! instances); each cluster is probed within a time limit, a few at once;
//! a record is written only when what was found changed or a heal starts.
//! Nothing it does can fail or hold up the plan sweep.

use super::judge::Observation;
use super::probe::{Probe, Survey};
use crate::sweep::{StartPlan, SweepTask};
use async_trait::async_trait;
use chrono::Utc;
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::health::{Health, RecoveryPoint};
use floe_domain::plan::{HealParams, Plan, PlanParams, lifecycle};
use floe_domain::snapshot::SnapshotState;
use floe_store::{PageRequest, Store, StoreError, Versioned};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// Deployments read with one query of a shard (at most 100); a shard's
    /// job reads as many pages as the shard holds.
    pub page_size: u32,
    /// Deployments probed at once.
    pub concurrency: usize,
    /// One probe's time limit: a cluster that does not answer is reported
    /// so, and holds up nothing.
    pub probe_timeout: Duration,
    /// After a heal started, the next waits this long unless the first
    /// succeeded (a cluster that cannot heal must not loop).
    pub heal_retry_after: Duration,
}

impl Default for HealthConfig {
    fn default() -> HealthConfig {
        HealthConfig {
            page_size: 100,
            concurrency: 8,
            probe_timeout: Duration::from_secs(20),
            heal_retry_after: Duration::from_secs(15 * 60),
        }
    }
}

/// The health check each sweep runs beside the plans: where it reads and
/// records, how it looks at a deployment, how it starts a heal, its
/// settings, and where it hands out the shards. It keeps nothing between
/// sweeps.
#[derive(Clone)]
pub struct HealthCheck {
    store: Store,
    heals: Arc<dyn StartPlan>,
    probe: Arc<dyn Probe>,
    config: HealthConfig,
    /// Where the sweep hands out the shards (`None`: it checks them).
    shards: Option<Arc<dyn floe_ports::HealthShards>>,
    /// Where a breached recovery point target is told.
    events: Arc<dyn floe_ports::Events>,
}

/// What one sweep's health check did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthSummary {
    pub checked: usize,
    pub unhealthy: usize,
    pub heals_started: usize,
    /// Fleet copies of an older Floe moved into their shards.
    pub moved: usize,
    /// Shards handed to workers of their own.
    pub shards_sent: usize,
}

impl HealthSummary {
    fn add(&mut self, other: HealthSummary) {
        self.checked += other.checked;
        self.unhealthy += other.unhealthy;
        self.heals_started += other.heals_started;
        self.moved += other.moved;
        self.shards_sent += other.shards_sent;
    }
}

/// How many fleet copies of an older Floe one sweep moves into their
/// shards at most (a write each, no probe): a fleet of 10,000 moves in
/// ten sweeps, each deployment checked by its shard from the sweep that
/// moved it.
const MOVES_PER_SWEEP: usize = 1000;

/// The user a health check's plans are recorded as started by.
pub const HEALTH_CHECK_USER: &str = "floe-health-check";

/// What the record should say after `observation`, and the heal to start
/// (if any), given what it said before.
pub fn assess(
    deployment: &Deployment,
    observation: Observation,
    config: &HealthConfig,
    now: chrono::DateTime<Utc>,
) -> (Health, Option<Plan>) {
    let previous = deployment.health.as_ref();
    let mut health = Health {
        healthy: observation.healthy,
        reason: (!observation.healthy).then(|| observation.problems.join("; ")),
        nodes: observation.nodes,
        warnings: observation.warnings,
        since: now,
        heal_started: previous.and_then(|p| p.heal_started),
        // Judged apart (see `judge_recovery_point`); kept until then.
        recovery_point: previous.and_then(|p| p.recovery_point.clone()),
        recovery_point_breached: previous.and_then(|p| p.recovery_point_breached),
    };
    if let Some(p) = previous
        && p.same_findings(&health)
    {
        health.since = p.since;
    }
    let retry = chrono::Duration::from_std(config.heal_retry_after)
        .unwrap_or(chrono::Duration::minutes(15));
    let may_heal = health.heal_started.is_none_or(|at| now - at >= retry);
    if observation.replacements.is_empty() || !may_heal || deployment.pending_plan.is_some() {
        return (health, None);
    }
    health.heal_started = Some(now);
    let plan = Plan::new(
        &deployment.org,
        &deployment.id,
        PlanParams::Heal(HealParams {
            spec: deployment.spec.clone(),
            replacements: observation.replacements,
            surplus: observation.surplus,
        }),
        "health.heal",
        HEALTH_CHECK_USER,
        now,
    );
    (health, Some(plan))
}

/// The deployment's recovery point as found now, and since when it breaks
/// the deployment's recovery point target (kept from `previous` while it
/// still does): a snapshot older than the target, or none at all in a
/// deployment older than it.
pub fn judge_recovery_point(
    deployment: &Deployment,
    found: Option<RecoveryPoint>,
    previous: Option<&Health>,
    now: chrono::DateTime<Utc>,
) -> (Option<RecoveryPoint>, Option<chrono::DateTime<Utc>>) {
    let Some(target) = deployment
        .spec
        .recovery_targets
        .as_ref()
        .and_then(|t| t.recovery_point())
    else {
        return (found, None);
    };
    let breached = match &found {
        Some(point) => point.older_than(target, now),
        None => (now - deployment.created)
            .to_std()
            .is_ok_and(|age| age > target),
    };
    let since = breached.then(|| {
        previous
            .and_then(|h| h.recovery_point_breached)
            .unwrap_or(now)
    });
    (found, since)
}

/// The event of a recovery point target found breached, when `health`
/// says it is.
pub fn recovery_point_breached(
    deployment: &Deployment,
    health: &Health,
) -> Option<floe_ports::PlatformEvent> {
    let since = health.recovery_point_breached?;
    let target = deployment
        .spec
        .recovery_targets
        .as_ref()
        .and_then(|t| t.recovery_point.clone())
        .unwrap_or_default();
    let point = health.recovery_point.as_ref();
    let reason = floe_domain::health::RecoveryPoint::breach(point, &target, since);
    Some(floe_ports::PlatformEvent {
        detail_type: floe_ports::PlatformEvent::RECOVERY_TARGET_BREACHED,
        detail: serde_json::json!({
            "org": deployment.org,
            "deployment_id": deployment.id,
            "deployment_name": deployment.spec.name,
            "target": "recovery_point",
            "target_value": target,
            "recovery_point": point,
            "since": since,
            "reason": reason,
        }),
    })
}

/// The deployment's newest successful snapshot by its records: newest
/// first, the first success that is neither being deleted nor gone from
/// its repository (what `__latest_success__` restores).
async fn newest_success(
    store: &Store,
    deployment: &Deployment,
) -> Result<Option<RecoveryPoint>, StoreError> {
    let mut pages = store.snapshot_pages(&deployment.org, &deployment.id, None);
    while let Some(items) = pages.next_page().await? {
        if let Some(s) = items.into_iter().map(|i| i.value).find(|s| {
            s.state == SnapshotState::Success && s.deleting.is_none() && s.missing.is_none()
        }) {
            return Ok(Some(RecoveryPoint {
                end: s.end.unwrap_or(s.start),
                snapshot: s.name,
            }));
        }
    }
    Ok(None)
}

impl HealthCheck {
    pub fn new(
        store: Store,
        heals: Arc<dyn StartPlan>,
        probe: Arc<dyn Probe>,
        config: HealthConfig,
    ) -> HealthCheck {
        HealthCheck {
            store,
            heals,
            probe,
            config,
            shards: None,
            events: Arc::new(floe_ports::LoggedEvents),
        }
    }

    /// Publishes a recovery point target found breached to `events` (else
    /// it is logged).
    pub fn with_events(mut self, events: Arc<dyn floe_ports::Events>) -> HealthCheck {
        self.events = events;
        self
    }

    /// Hands each shard to a worker of its own through `shards` (the
    /// worker's queue); without it, a sweep checks the shards itself, one
    /// after the other (local mode, tests).
    pub fn with_shards(mut self, shards: Arc<dyn floe_ports::HealthShards>) -> HealthCheck {
        self.shards = Some(shards);
        self
    }

    /// One sweep's health check: the fleet copies an older Floe left
    /// unsharded are moved into their shards (up to [`MOVES_PER_SWEEP`]),
    /// then every shard is checked, by a worker of its own when the check
    /// has a queue for them. Nothing is remembered from one sweep to the
    /// next: a cold worker's sweep checks the whole fleet as a warm one's.
    pub async fn check(&self) -> HealthSummary {
        let mut summary = HealthSummary {
            moved: self.move_unsharded().await,
            ..HealthSummary::default()
        };
        for shard in 0..floe_store::FLEET_SHARDS {
            match &self.shards {
                Some(queue) => match queue.check_shard(shard).await {
                    Ok(()) => summary.shards_sent += 1,
                    // The next sweep sends it again; its deployments wait
                    // a minute more.
                    Err(e) => {
                        tracing::warn!(shard, error = %e, "health check: cannot hand out a shard")
                    }
                },
                None => summary.add(self.check_shard(shard).await),
            }
        }
        summary
    }

    /// Checks every running deployment of one shard of the fleet index,
    /// a page (one query) at a time.
    pub async fn check_shard(&self, shard: u16) -> HealthSummary {
        let mut summary = HealthSummary::default();
        let mut page = PageRequest {
            size: Some(self.config.page_size.clamp(1, 100)),
            cursor: None,
        };
        loop {
            let fleet = match self.store.list_fleet_shard(shard, &page).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(shard, error = %e, "health check: cannot list the shard's running deployments");
                    return summary;
                }
            };
            summary.add(self.check_page(fleet.items).await);
            match fleet.next_cursor {
                Some(c) => page.cursor = Some(c),
                None => return summary,
            }
        }
    }

    /// Checks a page of deployments: their instances and status checks
    /// read together (one survey), then each one's cluster, a few at once.
    async fn check_page(&self, page: Vec<Versioned<Deployment>>) -> HealthSummary {
        use futures_util::StreamExt;
        let mut summary = HealthSummary::default();
        let due: Vec<Versioned<Deployment>> = page.into_iter().filter(checkable).collect();
        if due.is_empty() {
            return summary;
        }
        let Some(survey) = self.survey(&due).await else {
            return summary;
        };
        let results: Vec<Option<(bool, bool)>> = futures_util::stream::iter(due)
            .map(|d| self.check_one(d, &survey))
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        for (healthy, healing) in results.into_iter().flatten() {
            summary.checked += 1;
            summary.unhealthy += usize::from(!healthy);
            summary.heals_started += usize::from(healing);
        }
        summary
    }

    /// The survey of `due`, within the probe's time limit; `None` (logged)
    /// when the instances cannot be listed: those deployments wait for
    /// the next sweep rather than being judged on nothing.
    async fn survey(&self, due: &[Versioned<Deployment>]) -> Option<Survey> {
        let deployments: Vec<&Deployment> = due.iter().map(|d| &d.value).collect();
        match tokio::time::timeout(self.config.probe_timeout, self.probe.survey(&deployments)).await
        {
            Ok(Ok(survey)) => Some(survey),
            Ok(Err(e)) => {
                tracing::warn!(deployments = due.len(), error = %e, "health check: cannot list the instances");
                None
            }
            Err(_) => {
                tracing::warn!(
                    deployments = due.len(),
                    "health check: the instances' listing did not answer in time"
                );
                None
            }
        }
    }

    /// Moves up to [`MOVES_PER_SWEEP`] fleet copies of an older Floe into
    /// their shards; how many moved. Each copy is moved by its record
    /// written again as it is now, so a copy behind its record never
    /// moves stale.
    async fn move_unsharded(&self) -> usize {
        use futures_util::StreamExt;
        let mut moved = 0;
        while moved < MOVES_PER_SWEEP {
            let page = PageRequest {
                size: Some(100),
                cursor: None,
            };
            let unsharded = match self.store.list_unsharded_fleet(&page).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "health check: cannot list the unsharded fleet copies");
                    return moved;
                }
            };
            if unsharded.items.is_empty() {
                return moved;
            }
            let results: Vec<bool> = futures_util::stream::iter(unsharded.items)
                .map(|copy| async move {
                    let current = self
                        .store
                        .get_deployment(&copy.value.org, &copy.value.id)
                        .await;
                    let result = match current {
                        Ok(Some(d)) => self.store.move_to_shard(&d).await,
                        // A record gone without its copy: the copy's own
                        // version removes it.
                        Ok(None) => self.store.drop_unsharded_copy(&copy).await,
                        Err(e) => Err(e),
                    };
                    match result {
                        Ok(()) => true,
                        // Written meanwhile: that write moved it.
                        Err(StoreError::VersionMismatch { .. }) => true,
                        Err(e) => {
                            tracing::warn!(deployment = %copy.value.id, error = %e, "health check: cannot move a fleet copy into its shard");
                            false
                        }
                    }
                })
                .buffer_unordered(self.config.concurrency.max(1))
                .collect()
                .await;
            let done = results.iter().filter(|m| **m).count();
            moved += done;
            // Nothing moved this round: the next sweep tries again rather
            // than this one looping on the same page.
            if done == 0 {
                return moved;
            }
        }
        moved
    }

    /// What one deployment's probe found, within the time limit: a cluster
    /// that does not answer is unhealthy, with the nodes last seen.
    async fn observe(&self, d: &Deployment, survey: &Survey) -> Option<Observation> {
        match tokio::time::timeout(self.config.probe_timeout, self.probe.probe(d, survey)).await {
            Ok(found) => found,
            Err(_) => Some(Observation {
                healthy: false,
                problems: vec![format!(
                    "no answer within {} s",
                    self.config.probe_timeout.as_secs()
                )],
                nodes: d
                    .health
                    .as_ref()
                    .map(|h| h.nodes.clone())
                    .unwrap_or_default(),
                replacements: Vec::new(),
                surplus: Vec::new(),
                warnings: d
                    .health
                    .as_ref()
                    .map(|h| h.warnings.clone())
                    .unwrap_or_default(),
            }),
        }
    }

    /// One deployment's check, now (an instance of it stopped serving):
    /// whether it is healthy and whether a heal started; `None` when it is
    /// gone, not running, or has a plan pending (which the check leaves
    /// alone, as the sweep does).
    pub async fn check_now(
        &self,
        org: &str,
        deployment_id: &str,
    ) -> Result<Option<(bool, bool)>, StoreError> {
        let Some(d) = self
            .store
            .get_deployment(org, deployment_id)
            .await?
            .filter(checkable)
        else {
            return Ok(None);
        };
        let Some(survey) = self.survey(std::slice::from_ref(&d)).await else {
            return Ok(None);
        };
        Ok(self.check_one(d, &survey).await)
    }

    /// Probes one deployment of `survey` and records what changed;
    /// `(healthy, heal started)`, or `None` when it could not be checked
    /// this time.
    async fn check_one(&self, d: Versioned<Deployment>, survey: &Survey) -> Option<(bool, bool)> {
        let id = d.value.id.clone();
        let observation = self.observe(&d.value, survey).await?;
        let now = Utc::now();
        let (mut health, heal) = assess(&d.value, observation, &self.config, now);
        // A deployment that never had a repository has no snapshots to
        // look for (one that had keeps its records).
        if d.value.spec.snapshot.is_some() || d.value.spec.recovery_targets.is_some() {
            match newest_success(&self.store, &d.value).await {
                Ok(found) => {
                    (health.recovery_point, health.recovery_point_breached) =
                        judge_recovery_point(&d.value, found, d.value.health.as_ref(), now);
                }
                // Kept as last found: the next sweep looks again.
                Err(e) => {
                    tracing::warn!(deployment = %id, error = %e, "health check: cannot read the snapshot records");
                }
            }
        }
        let healthy = health.healthy;
        if heal.is_none()
            && d.value.health.as_ref().is_some_and(|h| {
                h.same_findings(&health) && h.since == health.since && h.same_recovery(&health)
            })
        {
            return Some((healthy, false));
        }
        let written = match &heal {
            Some(plan) => {
                let mut next = d.value.clone();
                next.health = Some(health.clone());
                next.status = lifecycle::while_running(plan.kind());
                next.pending_plan = Some(plan.reference());
                self.heals.start(&d, &next, plan).await
            }
            // What the check saw is no change of the deployment: its
            // version stays, so that no user's If-Match fails over it.
            None => self.store.record_health(&d, &health).await,
        };
        match written {
            Ok(()) => {}
            // A user's change won the race: the next sweep looks again.
            Err(StoreError::VersionMismatch { .. }) => return None,
            Err(e) => {
                tracing::warn!(deployment = %id, error = %e, "health check: cannot record the deployment's health");
                return None;
            }
        }
        if !healthy {
            tracing::warn!(deployment = %id, reason = health.reason.as_deref().unwrap_or(""), "deployment is unhealthy");
        }
        let was_breached = d
            .value
            .health
            .as_ref()
            .is_some_and(|h| h.recovery_point_breached.is_some());
        if !was_breached
            && let Some(event) = recovery_point_breached(&d.value, &health)
            && let Err(e) = self.events.publish(&event).await
        {
            tracing::warn!(deployment = %id, error = %e, "recovery point event not published");
        }
        let Some(plan) = heal else {
            return Some((healthy, false));
        };
        tracing::info!(deployment = %id, plan = %plan.id, "health check started a heal plan");
        Some((healthy, true))
    }
}

/// Whether the check looks at `d`: a running deployment without a plan
/// pending (a plan's own changes are not losses to heal).
fn checkable(d: &Versioned<Deployment>) -> bool {
    d.value.status == DeploymentStatus::Running && d.value.pending_plan.is_none()
}

#[async_trait]
impl SweepTask for HealthCheck {
    async fn sweep(&self) {
        let summary = self.check().await;
        tracing::info!(
            checked = summary.checked,
            unhealthy = summary.unhealthy,
            heals_started = summary.heals_started,
            moved = summary.moved,
            shards_sent = summary.shards_sent,
            "health check done"
        );
    }
}
