//! The health check: on the sweep's schedule, the worker compares each
//! running deployment's instances with its spec and reads its cluster's
//! health and nodes, writes what it found onto the deployment record (the
//! api shows it from there, reaching nothing but the store), and starts a
//! heal plan when nodes are lost: terminated, stopped (by a person in the
//! console, say) or impaired (failing an EC2 status check).
//!
//! A write of health alone keeps the record's version (see
//! [`floe_store::Store::record_health`]): a user who read the deployment
//! and sends a change with `If-Match` is not refused because the check
//! looked at it. Starting a heal is a change like any other and moves it.
//!
//! Its cost is bounded: each sweep reads one page of running deployments
//! (one store query, from the fleet copies of every organization), probes
//! them a few at a time, each within a time limit, and writes a record
//! only when what it found changed or a heal starts. The next sweep takes
//! the next page. Nothing it does can fail or hold up the plan sweep.

use crate::deployment_steps::DeploymentSteps;
use crate::steps::heal::launch_zone;
use crate::steps::{is_gone, spread};
use async_trait::async_trait;
use chrono::Utc;
use floe_compute::{ComputeError, Instance, InstanceState, TAG_NODE_GROUP};
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::health::{Health, NodeStatus};
use floe_domain::plan::{HealParams, Plan, PlanParams, Replacement, lifecycle};
use floe_elastic::HealthStatus;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one probe of a deployment found, and the nodes to replace.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub healthy: bool,
    pub problems: Vec<String>,
    pub nodes: Vec<NodeStatus>,
    pub replacements: Vec<Replacement>,
}

/// Looks at one deployment's instances and cluster.
#[async_trait]
pub trait Probe: Send + Sync + 'static {
    async fn probe(&self, deployment: &Deployment) -> Result<Observation, ComputeError>;
}

#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// Deployments one sweep checks (one page of the fleet, at most 100).
    pub per_sweep: u32,
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
            per_sweep: 100,
            concurrency: 8,
            probe_timeout: Duration::from_secs(20),
            heal_retry_after: Duration::from_secs(15 * 60),
        }
    }
}

/// The health check the engine runs after each sweep: the probe, its
/// settings, and where in the fleet the next sweep goes on (kept for as
/// long as the worker stays warm; a cold start begins at the first page).
#[derive(Clone)]
pub struct HealthCheck {
    pub(crate) probe: Arc<dyn Probe>,
    pub(crate) config: HealthConfig,
    pub(crate) cursor: Arc<Mutex<Option<String>>>,
}

impl HealthCheck {
    pub fn new(probe: Arc<dyn Probe>, config: HealthConfig) -> HealthCheck {
        HealthCheck {
            probe,
            config,
            cursor: Arc::new(Mutex::new(None)),
        }
    }
}

/// What one sweep's health check did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthSummary {
    pub checked: usize,
    pub unhealthy: usize,
    pub heals_started: usize,
}

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
        since: now,
        heal_started: previous.and_then(|p| p.heal_started),
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
        }),
        "health.heal",
        HEALTH_CHECK_USER,
        now,
    );
    (health, Some(plan))
}

impl crate::Engine {
    /// One sweep's health check: the next page of running deployments.
    pub async fn check_health(&self) -> HealthSummary {
        let Some(check) = &self.health else {
            return HealthSummary::default();
        };
        let cursor = check
            .cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let page = floe_store::PageRequest {
            size: Some(check.config.per_sweep.clamp(1, 100)),
            cursor,
        };
        let fleet = match self.store.list_running_fleet(&page).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "health check: cannot list the running deployments");
                return HealthSummary::default();
            }
        };
        *check
            .cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fleet.next_cursor;
        use futures_util::StreamExt;
        let results: Vec<Option<(bool, bool)>> = futures_util::stream::iter(fleet.items)
            .map(|d| self.check_one(check, d))
            .buffer_unordered(check.config.concurrency.max(1))
            .collect()
            .await;
        let mut summary = HealthSummary::default();
        for (healthy, healing) in results.into_iter().flatten() {
            summary.checked += 1;
            summary.unhealthy += usize::from(!healthy);
            summary.heals_started += usize::from(healing);
        }
        summary
    }

    /// Probes one deployment and records what changed; `(healthy, heal
    /// started)`, or `None` when it could not be checked this time.
    async fn check_one(
        &self,
        check: &HealthCheck,
        d: floe_store::Versioned<Deployment>,
    ) -> Option<(bool, bool)> {
        if d.value.status != DeploymentStatus::Running || d.value.pending_plan.is_some() {
            return None;
        }
        let id = d.value.id.clone();
        let observation = match tokio::time::timeout(
            check.config.probe_timeout,
            check.probe.probe(&d.value),
        )
        .await
        {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => {
                tracing::warn!(deployment = %id, error = %e, "health check: cannot list the instances");
                return None;
            }
            Err(_) => Observation {
                healthy: false,
                problems: vec![format!(
                    "no answer within {} s",
                    check.config.probe_timeout.as_secs()
                )],
                nodes: d
                    .value
                    .health
                    .as_ref()
                    .map(|h| h.nodes.clone())
                    .unwrap_or_default(),
                replacements: Vec::new(),
            },
        };
        let (health, heal) = assess(&d.value, observation, &check.config, Utc::now());
        let healthy = health.healthy;
        if heal.is_none()
            && d.value
                .health
                .as_ref()
                .is_some_and(|h| h.same_findings(&health) && h.since == health.since)
        {
            return Some((healthy, false));
        }
        let written = match &heal {
            Some(plan) => {
                let mut next = d.value.clone();
                next.health = Some(health.clone());
                next.status = lifecycle::while_running(plan.kind());
                next.pending_plan = Some(plan.reference());
                self.store
                    .replace_deployment(&next, &d, Some(plan))
                    .await
                    .map(drop)
            }
            // What the check saw is no change of the deployment: its
            // version stays, so that no user's If-Match fails over it.
            None => self.store.record_health(&d, &health).await,
        };
        match written {
            Ok(()) => {}
            // A user's change won the race: the next sweep looks again.
            Err(floe_store::StoreError::VersionMismatch { .. }) => return None,
            Err(e) => {
                tracing::warn!(deployment = %id, error = %e, "health check: cannot record the deployment's health");
                return None;
            }
        }
        if !healthy {
            tracing::warn!(deployment = %id, reason = health.reason.as_deref().unwrap_or(""), "deployment is unhealthy");
        }
        let Some(plan) = heal else {
            return Some((healthy, false));
        };
        tracing::info!(deployment = %id, plan = %plan.id, "health check started a heal plan");
        let job = floe_ports::PlanJob {
            org: plan.org.clone(),
            deployment_id: plan.deployment_id.clone(),
            plan_id: plan.id.clone(),
        };
        // A lost wake-up is found by the next sweep, as any plan's is.
        if let Err(e) = self.queue.enqueue(job, Duration::ZERO).await {
            tracing::warn!(deployment = %id, error = %e, "health check: the heal plan waits for the next sweep");
        }
        Some((healthy, true))
    }
}

#[async_trait]
impl Probe for DeploymentSteps {
    async fn probe(&self, d: &Deployment) -> Result<Observation, ComputeError> {
        let instances = self.compute.instances(&d.id).await?;
        let mut problems = Vec::new();
        let impaired = self.impaired(&instances).await;
        // The cluster, from a node that runs.
        let (members, cluster) = match self.clusters.client(d, &[]).await {
            Ok(client) => {
                let members = client.nodes().await;
                let health = client.health(None, None).await;
                (members.ok(), Some(health))
            }
            Err(e) => {
                problems.push(format!("the cluster cannot be reached: {e}"));
                (None, None)
            }
        };
        match cluster {
            Some(Ok(h)) if h.status == HealthStatus::Red => {
                problems.push("the cluster's health is red".to_string())
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => problems.push(format!("the cluster's health cannot be read: {e}")),
        }
        let mut nodes = Vec::new();
        let mut replacements = Vec::new();
        let mut expected_total = 0u32;
        for g in &d.spec.node_groups {
            expected_total += g.count;
            let ours: Vec<_> = instances
                .iter()
                .filter(|i| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
                .collect();
            // Stopped or impaired: there, but no use to the cluster.
            let broken = |i: &Instance| {
                matches!(i.state, InstanceState::Stopping | InstanceState::Stopped)
                    || impaired.contains_key(&i.id)
            };
            let live: Vec<_> = ours
                .iter()
                .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
                .filter(|i| !broken(i))
                .collect();
            for i in ours.iter().filter(|i| broken(i)) {
                problems.push(match impaired.get(&i.id) {
                    Some(failing) => format!(
                        "instance {} of node group {} is impaired ({} failing)",
                        i.id,
                        g.id,
                        failing.join(" and ")
                    ),
                    None => format!(
                        "instance {} of node group {} is {}",
                        i.id,
                        g.id,
                        state_name(i.state)
                    ),
                });
            }
            for i in ours.iter().filter(|i| i.state != InstanceState::Terminated) {
                let member = members
                    .as_ref()
                    .and_then(|m| m.iter().find(|n| n.name == i.id));
                nodes.push(NodeStatus {
                    instance_id: i.id.clone(),
                    group: g.id.clone(),
                    zone: i.zone.clone(),
                    private_address: i.private_ip.clone(),
                    state: state_name(i.state).to_string(),
                    version: member
                        .map(|m| m.version.clone())
                        .filter(|v| !v.is_empty())
                        .unwrap_or_else(|| d.spec.version.clone()),
                    roles: g
                        .roles
                        .iter()
                        .filter_map(|r| serde_json::to_value(r).ok())
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect(),
                    joined: member.is_some(),
                });
            }
            let live_count = live.len() as u32;
            let before = replacements.len();
            if live_count < g.count {
                problems.push(format!(
                    "node group {} has {live_count} of {} nodes running",
                    g.id, g.count
                ));
            }
            // Each missing node goes back to the zone that lacks it; the
            // stopped or impaired ones it replaces first (the heal
            // terminates those), then ones already gone.
            let mut missing = g.count.saturating_sub(live_count);
            for (zone, want) in spread(g.count, g.zone_count).into_iter().enumerate() {
                let zone = zone as u32;
                let have = live.iter().filter(|i| launch_zone(i) == Some(zone)).count() as u32;
                let count = want.saturating_sub(have).min(missing);
                if count == 0 {
                    continue;
                }
                missing -= count;
                let in_zone = || ours.iter().filter(move |i| launch_zone(i) == Some(zone));
                let lost = in_zone()
                    .filter(|i| broken(i))
                    .chain(in_zone().filter(|i| is_gone(i.state)))
                    .map(|i| i.id.clone())
                    .take(count as usize)
                    .collect();
                replacements.push(Replacement {
                    group: g.id.clone(),
                    zone,
                    count,
                    lost,
                });
            }
            if missing > 0 {
                replacements.push(Replacement {
                    group: g.id.clone(),
                    zone: 0,
                    count: missing,
                    lost: Vec::new(),
                });
            }
            // A stopped or impaired instance the group does not lack (its
            // zone runs enough others) still goes: a heal that launches
            // nothing for it terminates it, so that no stale node keeps a
            // volume and an address.
            let named: Vec<String> = replacements[before..]
                .iter()
                .flat_map(|r| r.lost.iter().cloned())
                .collect();
            let mut extra: BTreeMap<u32, Vec<String>> = BTreeMap::new();
            for i in ours.iter().filter(|i| broken(i) && !named.contains(&i.id)) {
                extra
                    .entry(launch_zone(i).unwrap_or(0))
                    .or_default()
                    .push(i.id.clone());
            }
            for (zone, lost) in extra {
                replacements.push(Replacement {
                    group: g.id.clone(),
                    zone,
                    count: 0,
                    lost,
                });
            }
        }
        if let Some(members) = &members {
            let absent: Vec<&str> = nodes
                .iter()
                .filter(|n| n.state == "running" && !n.joined)
                .map(|n| n.instance_id.as_str())
                .collect();
            if !absent.is_empty() {
                problems.push(format!("{} not in the cluster", absent.join(", ")));
            }
            if (members.len() as u32) < expected_total {
                problems.push(format!(
                    "the cluster has {} of {expected_total} nodes",
                    members.len()
                ));
            }
        }
        Ok(Observation {
            healthy: problems.is_empty(),
            problems,
            nodes,
            replacements,
        })
    }
}

impl DeploymentSteps {
    /// The running instances that fail a status check, with the names of
    /// the checks. Status checks that cannot be read judge nothing this
    /// time (the instances' states still do): a missing permission or an
    /// EC2 hiccup must not make every deployment look broken.
    async fn impaired(&self, instances: &[Instance]) -> BTreeMap<String, Vec<&'static str>> {
        let running: Vec<String> = instances
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .map(|i| i.id.clone())
            .collect();
        if running.is_empty() {
            return BTreeMap::new();
        }
        match self.compute.status_checks(&running).await {
            Ok(checks) => checks
                .iter()
                .filter(|c| c.impaired())
                .map(|c| (c.id.clone(), c.failing()))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "health check: cannot read the instances' status checks");
                BTreeMap::new()
            }
        }
    }
}

fn state_name(state: InstanceState) -> &'static str {
    match state {
        InstanceState::Pending => "pending",
        InstanceState::Running => "running",
        InstanceState::Stopping => "stopping",
        InstanceState::Stopped => "stopped",
        InstanceState::ShuttingDown => "shutting_down",
        InstanceState::Terminated => "terminated",
    }
}
