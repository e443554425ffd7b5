//! The steps of deployment plans, over the compute port.
//!
//! create:   node-security (the deployment's CA, certificate and password),
//!           repository-credentials (a repository with keys), template:{group}
//!           and launch:{group} for every node group, bootstrap-masters,
//!           wait-running, wait-joined, register-repository
//! shutdown: terminate, wait-terminated
//! delete:   terminate, wait-terminated (then the record goes)
//! update:   grow and shrink. New nodes first: template:{group} and
//!           launch:{group} for every group that changes (all of them when
//!           the version, user settings or repository change) after
//!           repository-credentials (when nodes are replaced), wait-running,
//!           wait-joined; then drain (exclude the old nodes from shard
//!           allocation), wait-drained, retire (terminate them),
//!           wait-retired, clear-exclusion, forget-templates.
//!
//! `retire` is the point of no return: before it, unwinding terminates the
//! new nodes and lets shards back onto the old ones, leaving the previous
//! topology; after it, the old nodes are gone, so unwinding keeps the new
//! ones (terminating them would leave no cluster at all).

mod restore;

use crate::engine::{Outcome, StepContext, Steps, fail};
use async_trait::async_trait;
use floe_clusters::{ClusterError, Clusters};
use floe_compute::NodeParameters;
use floe_compute::parameters::SecretOrPlain;
use floe_compute::{
    Compute, ComputeError, InstanceState, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT,
    TAG_NODE_GROUP, TAG_ORG, TAG_PLAN, Volume,
};
use floe_domain::catalog;
use floe_domain::deployment::{Deployment, DeploymentSpec, NodeGroup, NodeRole};
use floe_domain::plan::{Plan, PlanKind, PlanParams, StepError, StepStatus};
use floe_domain::repository::Repository;
use floe_elastic::ElasticError;
use floe_secrets::Cipher;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct StepSettings {
    /// How often to look again while instances boot or terminate.
    pub poll: Duration,
    /// A node group that is not running after this fails the plan.
    pub boot_timeout: Duration,
    pub region: String,
    /// Where nodes read their bootstrap data (SSM parameter prefix).
    pub parameter_prefix: String,
    /// Moving shards off old nodes may take this long before the plan fails.
    pub drain_timeout: Duration,
}

impl Default for StepSettings {
    fn default() -> StepSettings {
        StepSettings {
            poll: Duration::from_secs(10),
            boot_timeout: Duration::from_secs(20 * 60),
            region: "us-east-1".into(),
            parameter_prefix: "/floe".into(),
            drain_timeout: Duration::from_secs(6 * 3600),
        }
    }
}

pub struct DeploymentSteps {
    compute: Arc<dyn Compute>,
    clusters: Arc<dyn Clusters>,
    settings: StepSettings,
    /// Repositories to register and final snapshots to take; without it a
    /// deployment with a repository cannot be planned (tests of compute
    /// alone leave it out).
    snapshots: Option<floe_snapshots::Snapshotter>,
    /// Where nodes read their bootstrap data (the first masters, the
    /// repository's keys).
    parameters: Option<Arc<dyn NodeParameters>>,
    /// Opens the repository keys the nodes are handed.
    cipher: Option<Arc<dyn Cipher>>,
}

impl DeploymentSteps {
    pub fn new(
        compute: Arc<dyn Compute>,
        clusters: Arc<dyn Clusters>,
        settings: StepSettings,
    ) -> DeploymentSteps {
        DeploymentSteps {
            compute,
            clusters,
            settings,
            snapshots: None,
            parameters: None,
            cipher: None,
        }
    }

    /// Opens the sealed keys of repositories, which the plan writes where
    /// the nodes' boot script reads them.
    pub fn with_cipher(mut self, cipher: Arc<dyn Cipher>) -> DeploymentSteps {
        self.cipher = Some(cipher);
        self
    }

    /// Writes the first masters for new clusters, and removes a deleted
    /// deployment's bootstrap parameters.
    pub fn with_parameters(mut self, parameters: Arc<dyn NodeParameters>) -> DeploymentSteps {
        self.parameters = Some(parameters);
        self
    }

    fn parameter_path(&self, deployment_id: &str) -> String {
        floe_compute::parameters::deployment_path(&self.settings.parameter_prefix, deployment_id)
    }

    /// Registers repositories (create, update) and takes the final snapshot
    /// of a shutdown through this snapshotter and its store.
    pub fn with_snapshots(mut self, snapshots: floe_snapshots::Snapshotter) -> DeploymentSteps {
        self.snapshots = Some(snapshots);
        self
    }
}

/// See [`DeploymentSteps::client_repository`].
fn client_repository_name(spec: &DeploymentSpec) -> Option<&str> {
    spec.repository().or_else(|| {
        spec.restore_snapshot
            .as_ref()
            .and_then(|r| r.repository.as_deref())
    })
}

/// The spec a plan builds: its params for create and update.
fn target(plan: &Plan) -> Result<DeploymentSpec, StepError> {
    plan.params.target_spec().cloned().ok_or_else(|| StepError {
        failure_type: "invalid_plan".into(),
        message: format!("a {} plan has no target spec", plan.kind().as_str()),
    })
}

/// The plan's target spec and one of its node groups.
fn target_group(plan: &Plan, id: &str) -> Result<(DeploymentSpec, NodeGroup), StepError> {
    let spec = target(plan)?;
    let group = spec
        .node_groups
        .iter()
        .find(|g| g.id == id)
        .cloned()
        .ok_or_else(|| StepError {
            failure_type: "invalid_plan".into(),
            message: format!("node group {id} is not in the plan"),
        })?;
    Ok((spec, group))
}

fn tags(plan: &Plan, group: Option<&str>) -> BTreeMap<String, String> {
    let mut t = BTreeMap::from([
        (TAG_DEPLOYMENT.to_string(), plan.deployment_id.clone()),
        (TAG_ORG.to_string(), plan.org.clone()),
        (TAG_PLAN.to_string(), plan.id.clone()),
    ]);
    if let Some(g) = group {
        t.insert(TAG_NODE_GROUP.to_string(), g.to_string());
    }
    t
}

fn template_name(plan: &Plan, group: &str) -> String {
    template_name_of(&plan.deployment_id, group, &plan.id)
}

fn template_name_of(deployment_id: &str, group: &str, plan_id: &str) -> String {
    format!(
        "floe-{deployment_id}-{group}-{}",
        plan_id
            .get(plan_id.len().saturating_sub(12)..)
            .unwrap_or(plan_id)
    )
}

/// The setting that keeps shards off nodes being retired.
const EXCLUDE_SETTING: &str = "cluster.routing.allocation.exclude._name";

/// What an update changes: the groups that get new nodes, and the groups
/// whose current nodes go.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UpdateShape {
    pub replaced: Vec<String>,
    pub retiring: Vec<String>,
}

/// A group is replaced when it is new or differs in anything; every group
/// is, when the version, user settings or repository change (they are in
/// every node's configuration). Groups that are no longer wanted retire.
pub fn update_shape(current: &DeploymentSpec, target: &DeploymentSpec) -> UpdateShape {
    let everything = current.version != target.version
        || current.user_settings != target.user_settings
        || current.repository() != target.repository();
    let mut shape = UpdateShape::default();
    for g in &target.node_groups {
        let before = current.node_groups.iter().find(|c| c.id == g.id);
        if everything || before != Some(g) {
            shape.replaced.push(g.id.clone());
            if before.is_some() {
                shape.retiring.push(g.id.clone());
            }
        }
    }
    for c in &current.node_groups {
        if !target.node_groups.iter().any(|g| g.id == c.id) {
            shape.retiring.push(c.id.clone());
        }
    }
    shape
}

/// An old node the update retires, as recorded by `drain`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct OldNode {
    id: String,
    group: String,
    plan: String,
}

fn old_nodes(ctx: &StepContext<'_>) -> Result<Vec<OldNode>, StepError> {
    let Some(v) = ctx.output("drain") else {
        return Ok(Vec::new());
    };
    serde_json::from_value(v["nodes"].clone()).map_err(|e| StepError {
        failure_type: "invalid_plan".into(),
        message: format!("the drain step's output cannot be read: {e}"),
    })
}

/// Shard copies on the named nodes, and copies still moving anywhere.
fn shards_on(shards: &[floe_elastic::ShardRow], names: &[String]) -> (usize, usize) {
    // A relocating copy shows as "from -> address id to".
    let on = shards
        .iter()
        .filter(|s| {
            s.node.as_deref().is_some_and(|n| {
                names
                    .iter()
                    .any(|name| n == name || n.starts_with(&format!("{name} ")))
            })
        })
        .count();
    let moving = shards
        .iter()
        .filter(|s| s.state == "RELOCATING" || s.state == "INITIALIZING")
        .count();
    (on, moving)
}

fn cluster_outcome(e: ClusterError, doing: &str, poll: Duration) -> Outcome {
    if e.is_transient() {
        Outcome::Wait {
            after: poll,
            note: format!("{doing}: {e}"),
        }
    } else {
        fail("cluster_unreachable", format!("{doing}: {e}"))
    }
}

fn elastic_outcome(e: ElasticError, doing: &str, poll: Duration) -> Outcome {
    if e.is_transient() {
        Outcome::Wait {
            after: poll,
            note: format!("{doing}: {e}"),
        }
    } else {
        fail("elasticsearch_error", format!("{doing}: {e}"))
    }
}

/// How many of `count` nodes go to each of `zones` zones: as even as can be.
pub fn spread(count: u32, zones: u32) -> Vec<u32> {
    let zones = zones.max(1);
    (0..zones)
        .map(|z| count / zones + u32::from(z < count % zones))
        .collect()
}

fn outcome_of(e: ComputeError) -> Outcome {
    match e {
        ComputeError::Transient { code, message } => Outcome::Retry(format!("{code}: {message}")),
        ComputeError::InsufficientCapacity { zone, message } => {
            Outcome::Retry(format!("no capacity in zone {zone}: {message}"))
        }
        ComputeError::Permanent {
            failure_type,
            message,
        } => fail(&failure_type, message),
    }
}

fn is_gone(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::Terminated | InstanceState::ShuttingDown
    )
}

impl DeploymentSteps {
    async fn ensure_template(&self, ctx: &StepContext<'_>, group_id: &str) -> Outcome {
        let (spec, g) = match target_group(ctx.plan, group_id) {
            Ok(found) => found,
            Err(e) => return Outcome::Fail(e),
        };
        let g = &g;
        let Some(instance) = catalog::lookup(&g.instance_type) else {
            return fail(
                "unknown_instance_type",
                format!("{} is not in the instance catalog", g.instance_type),
            );
        };
        let repo = match self.client_repository(ctx, &spec).await {
            Ok(r) => r,
            Err(stop) => return stop,
        };
        // Each deployment reads only its own bootstrap parameters.
        let prefix = self.parameter_path(&ctx.plan.deployment_id);
        let config = floe_nodeconfig::NodeGroupConfig {
            deployment_id: &ctx.plan.deployment_id,
            cluster_name: &spec.name,
            org: &ctx.plan.org,
            es_version: &spec.version,
            group: g,
            instance,
            user_settings: &spec.user_settings,
            region: &self.settings.region,
            repository: repo
                .as_ref()
                .and_then(crate::repository_access::client_settings),
            parameter_prefix: &prefix,
        };
        let name = template_name(ctx.plan, group_id);
        let template = LaunchTemplateSpec {
            name: name.clone(),
            instance_type: g.instance_type.clone(),
            arch: instance.arch,
            user_data: floe_nodeconfig::user_data(&config),
            volume: Volume {
                size_gb: g.storage.size_gb,
                volume_type: g.storage.volume_type,
                iops: g.storage.iops,
                throughput: g.storage.throughput,
            },
            tags: tags(ctx.plan, Some(group_id)),
        };
        match self.compute.ensure_launch_template(&template).await {
            Ok(id) => {
                ctx.log(format!(
                    "launch template {name} ({id}) for {} ({})",
                    g.instance_type,
                    instance.arch.as_str()
                ));
                Outcome::Done(json!({"name": name, "id": id}))
            }
            Err(e) => outcome_of(e),
        }
    }

    async fn launch(&self, ctx: &StepContext<'_>, group_id: &str) -> Outcome {
        let (spec, g) = match target_group(ctx.plan, group_id) {
            Ok(found) => found,
            Err(e) => return Outcome::Fail(e),
        };
        let g = &g;
        let Some(template) = ctx
            .output(&format!("template:{group_id}"))
            .and_then(|o| o["name"].as_str())
        else {
            return fail("invalid_plan", "the launch template step has no output");
        };
        let index = spec
            .node_groups
            .iter()
            .position(|x| x.id == g.id)
            .unwrap_or(0);
        let mut ids = Vec::new();
        for (zone, count) in spread(g.count, g.zone_count).into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            // Deterministic per plan, group and zone: a re-run after a crash
            // gets the same instances back instead of starting more.
            let token_base = format!(
                "{}-{index}-{zone}",
                ctx.plan.id.get(..24).unwrap_or(&ctx.plan.id)
            );
            let mut launched = None;
            let mut last_error = None;
            // On a capacity shortage, try the group's other zones in turn.
            for offset in 0..g.zone_count.max(1) as usize {
                let z = (zone + offset) % g.zone_count.max(1) as usize;
                let token = if offset == 0 {
                    token_base.clone()
                } else {
                    format!("{token_base}-{z}")
                };
                let request = LaunchRequest {
                    template_name: template.to_string(),
                    count,
                    zone: z,
                    client_token: token,
                    tags: tags(ctx.plan, Some(group_id)),
                };
                match self.compute.launch(&request).await {
                    Ok(got) => {
                        ctx.log(format!("{} nodes of {group_id} in zone {z}", got.len()));
                        launched = Some(got);
                        break;
                    }
                    Err(ComputeError::InsufficientCapacity { zone, message }) => {
                        ctx.log(format!(
                            "zone {zone} has no capacity for {}: {message}",
                            g.instance_type
                        ));
                        last_error = Some(ComputeError::InsufficientCapacity { zone, message });
                    }
                    Err(e) => return outcome_of(e),
                }
            }
            match launched {
                Some(got) => ids.extend(got),
                None => {
                    return last_error
                        .map(outcome_of)
                        .unwrap_or_else(|| Outcome::Retry("no zone accepted the launch".into()));
                }
            }
        }
        Outcome::Done(json!({"instance_ids": ids}))
    }

    /// Terminates the instances this plan started for one group (or all groups).
    async fn terminate_own(&self, ctx: &StepContext<'_>, group_id: Option<&str>) -> Outcome {
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return outcome_of(e),
        };
        let ids: Vec<String> = instances
            .into_iter()
            .filter(|i| i.tags.get(TAG_PLAN) == Some(&ctx.plan.id))
            .filter(|i| {
                group_id.is_none_or(|g| i.tags.get(TAG_NODE_GROUP).map(String::as_str) == Some(g))
            })
            .filter(|i| !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        if !ids.is_empty() {
            if let Err(e) = self.compute.terminate(&ids).await {
                return outcome_of(e);
            }
            ctx.log(format!("terminated {}", ids.join(", ")));
        }
        Outcome::Done(json!({"terminated": ids}))
    }

    async fn wait_running(&self, ctx: &StepContext<'_>) -> Outcome {
        let spec = match target(ctx.plan) {
            Ok(s) => s,
            Err(e) => return Outcome::Fail(e),
        };
        // Only the groups this plan launches (an update leaves the others be).
        let launched: Vec<&str> = ctx
            .plan
            .steps
            .iter()
            .filter_map(|s| s.step_id.strip_prefix("launch:"))
            .collect();
        let expected: u32 = spec
            .node_groups
            .iter()
            .filter(|g| launched.contains(&g.id.as_str()))
            .map(|g| g.count)
            .sum();
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return outcome_of(e),
        };
        let ours: Vec<_> = instances
            .iter()
            .filter(|i| i.tags.get(TAG_PLAN) == Some(&ctx.plan.id))
            .collect();
        if let Some(lost) = ours.iter().find(|i| is_gone(i.state)) {
            return fail(
                "instance_lost",
                format!("instance {} stopped while the plan waited for it", lost.id),
            );
        }
        let running = ours
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .count() as u32;
        if running >= expected {
            return Outcome::Done(json!({"running": running}));
        }
        if ctx.elapsed() > self.settings.boot_timeout {
            return fail(
                "boot_timeout",
                format!(
                    "{running} of {expected} nodes running after {} s",
                    ctx.elapsed().as_secs()
                ),
            );
        }
        Outcome::Wait {
            after: self.settings.poll,
            note: format!("{running} of {expected} nodes running"),
        }
    }

    async fn terminate_all(&self, ctx: &StepContext<'_>) -> Outcome {
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return outcome_of(e),
        };
        let ids: Vec<String> = instances
            .into_iter()
            .filter(|i| !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        if !ids.is_empty()
            && let Err(e) = self.compute.terminate(&ids).await
        {
            return outcome_of(e);
        }
        ctx.log(format!("terminating {} nodes", ids.len()));
        Outcome::Done(json!({"terminated": ids}))
    }

    async fn wait_terminated(&self, ctx: &StepContext<'_>) -> Outcome {
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return outcome_of(e),
        };
        let left = instances
            .iter()
            .filter(|i| i.state != InstanceState::Terminated)
            .count();
        if left == 0 {
            // No node is left of the cluster: nothing kept for it is of use.
            self.clusters.forget(&ctx.plan.deployment_id).await;
            return Outcome::Done(Value::Null);
        }
        if ctx.elapsed() > self.settings.boot_timeout {
            return fail(
                "terminate_timeout",
                format!("{left} nodes still not terminated"),
            );
        }
        Outcome::Wait {
            after: self.settings.poll,
            note: format!("{left} nodes still terminating"),
        }
    }
}

impl DeploymentSteps {
    /// Every running node of the deployment has joined its cluster.
    async fn wait_joined(&self, ctx: &StepContext<'_>) -> Outcome {
        let poll = self.settings.poll;
        let running = match floe_clusters::running_nodes(
            self.compute.as_ref(),
            &ctx.plan.deployment_id,
        )
        .await
        {
            Ok(n) => n,
            Err(e) => return outcome_of(e),
        };
        let client = match self.clusters.client(ctx.deployment, &[]).await {
            Ok(c) => c,
            Err(e) => {
                return self.waiting(
                    ctx,
                    cluster_outcome(e, "reaching the cluster", poll),
                    "join_timeout",
                );
            }
        };
        let joined = match client.nodes().await {
            Ok(n) => n,
            Err(e) => {
                return self.waiting(
                    ctx,
                    elastic_outcome(e, "listing nodes", poll),
                    "join_timeout",
                );
            }
        };
        let missing: Vec<&str> = running
            .iter()
            .filter(|r| !joined.iter().any(|j| j.name == r.node_name))
            .map(|r| r.node_name.as_str())
            .collect();
        if missing.is_empty() {
            ctx.log(format!("{} nodes in the cluster", joined.len()));
            return Outcome::Done(json!({"nodes": joined.len()}));
        }
        self.waiting(
            ctx,
            Outcome::Wait {
                after: poll,
                note: format!("waiting for {} to join", missing.join(", ")),
            },
            "join_timeout",
        )
    }

    /// Turns a wait into a failure once the step has waited too long.
    fn waiting(&self, ctx: &StepContext<'_>, outcome: Outcome, failure_type: &str) -> Outcome {
        match outcome {
            Outcome::Wait { note, .. } if ctx.elapsed() > self.settings.boot_timeout => fail(
                failure_type,
                format!("gave up after {} s: {note}", ctx.elapsed().as_secs()),
            ),
            other => other,
        }
    }

    /// Excludes the retiring groups' old nodes from shard allocation, so
    /// Elasticsearch moves their shards to the new ones.
    async fn drain(&self, ctx: &StepContext<'_>) -> Outcome {
        let poll = self.settings.poll;
        let (current, target) = match target(ctx.plan) {
            Ok(t) => (&ctx.deployment.spec, t),
            Err(e) => return Outcome::Fail(e),
        };
        let shape = update_shape(current, &target);
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return outcome_of(e),
        };
        let old: Vec<OldNode> = instances
            .into_iter()
            .filter(|i| !is_gone(i.state))
            .filter(|i| i.tags.get(TAG_PLAN) != Some(&ctx.plan.id))
            .filter_map(|i| {
                let group = i.tags.get(TAG_NODE_GROUP)?.clone();
                shape.retiring.contains(&group).then(|| OldNode {
                    plan: i.tags.get(TAG_PLAN).cloned().unwrap_or_default(),
                    id: i.id,
                    group,
                })
            })
            .collect();
        let names: Vec<String> = old.iter().map(|n| n.id.clone()).collect();
        let client = match self.clusters.client(ctx.deployment, &names).await {
            Ok(c) => c,
            Err(e) => return cluster_outcome(e, "reaching the cluster", poll),
        };
        let mut settings = serde_json::Map::new();
        settings.insert(EXCLUDE_SETTING.into(), Value::String(names.join(",")));
        if let Err(e) = client.put_persistent_settings(settings).await {
            return elastic_outcome(e, "excluding the old nodes", poll);
        }
        ctx.log(format!("moving shards off {}", names.join(", ")));
        Outcome::Done(json!({"nodes": old}))
    }

    /// Excludes this plan's nodes from allocation and waits until no shard
    /// is left on them; `None` once they hold nothing.
    async fn drain_new_nodes(&self, ctx: &StepContext<'_>) -> Option<Outcome> {
        let poll = self.settings.poll;
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return Some(outcome_of(e)),
        };
        let names: Vec<String> = instances
            .into_iter()
            .filter(|i| i.tags.get(TAG_PLAN) == Some(&ctx.plan.id) && !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        if names.is_empty() {
            return None;
        }
        let client = match self.clusters.client(ctx.deployment, &names).await {
            Ok(c) => c,
            Err(e) => return Some(cluster_outcome(e, "reaching the cluster", poll)),
        };
        let mut settings = serde_json::Map::new();
        settings.insert(EXCLUDE_SETTING.into(), Value::String(names.join(",")));
        if let Err(e) = client.put_persistent_settings(settings).await {
            return Some(elastic_outcome(e, "excluding the new nodes", poll));
        }
        match client.shards().await {
            Ok(shards) => {
                let (on, moving) = shards_on(&shards, &names);
                if on == 0 && moving == 0 {
                    ctx.log(format!(
                        "no shard left on the new nodes {}",
                        names.join(", ")
                    ));
                    None
                } else {
                    Some(Outcome::Wait {
                        after: poll,
                        note: format!("{on} shard copies still on the new nodes, {moving} moving"),
                    })
                }
            }
            Err(e) => Some(elastic_outcome(e, "listing shards", poll)),
        }
    }

    /// No shard copy is left on (or moving off) an old node.
    async fn wait_drained(&self, ctx: &StepContext<'_>) -> Outcome {
        let poll = self.settings.poll;
        let old = match old_nodes(ctx) {
            Ok(o) => o,
            Err(e) => return Outcome::Fail(e),
        };
        let names: Vec<String> = old.iter().map(|n| n.id.clone()).collect();
        let client = match self.clusters.client(ctx.deployment, &names).await {
            Ok(c) => c,
            Err(e) => return cluster_outcome(e, "reaching the cluster", poll),
        };
        let shards = match client.shards().await {
            Ok(s) => s,
            Err(e) => return elastic_outcome(e, "listing shards", poll),
        };
        let (on_old, moving) = shards_on(&shards, &names);
        if on_old == 0 && moving == 0 {
            ctx.log(format!("no shard left on {} old nodes", names.len()));
            return Outcome::Done(json!({"shards": shards.len()}));
        }
        if ctx.elapsed() > self.settings.drain_timeout {
            return fail(
                "drain_timeout",
                format!(
                    "{on_old} shard copies still on the old nodes after {} s",
                    ctx.elapsed().as_secs()
                ),
            );
        }
        Outcome::Wait {
            after: poll,
            note: format!("{on_old} shard copies still on the old nodes, {moving} moving"),
        }
    }

    async fn retire(&self, ctx: &StepContext<'_>) -> Outcome {
        let old = match old_nodes(ctx) {
            Ok(o) => o,
            Err(e) => return Outcome::Fail(e),
        };
        let ids: Vec<String> = old.iter().map(|n| n.id.clone()).collect();
        if !ids.is_empty() {
            if let Err(e) = self.compute.terminate(&ids).await {
                return outcome_of(e);
            }
            ctx.log(format!("terminated {}", ids.join(", ")));
        }
        Outcome::Done(json!({"terminated": ids}))
    }

    async fn wait_retired(&self, ctx: &StepContext<'_>) -> Outcome {
        let old = match old_nodes(ctx) {
            Ok(o) => o,
            Err(e) => return Outcome::Fail(e),
        };
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return outcome_of(e),
        };
        let left = instances
            .iter()
            .filter(|i| old.iter().any(|o| o.id == i.id))
            .filter(|i| i.state != InstanceState::Terminated)
            .count();
        if left == 0 {
            return Outcome::Done(Value::Null);
        }
        if ctx.elapsed() > self.settings.boot_timeout {
            return fail(
                "terminate_timeout",
                format!("{left} old nodes still not terminated"),
            );
        }
        Outcome::Wait {
            after: self.settings.poll,
            note: format!("{left} old nodes still terminating"),
        }
    }

    async fn clear_exclusion(&self, ctx: &StepContext<'_>) -> Outcome {
        let poll = self.settings.poll;
        let client = match self.clusters.client(ctx.deployment, &[]).await {
            Ok(c) => c,
            Err(e) => return cluster_outcome(e, "reaching the cluster", poll),
        };
        let mut settings = serde_json::Map::new();
        settings.insert(EXCLUDE_SETTING.into(), Value::Null);
        match client.put_persistent_settings(settings).await {
            Ok(()) => Outcome::Done(Value::Null),
            Err(e) => elastic_outcome(e, "clearing the allocation exclusion", poll),
        }
    }

    /// The old nodes' launch templates (one per group and plan that made them).
    async fn forget_templates(&self, ctx: &StepContext<'_>) -> Outcome {
        let old = match old_nodes(ctx) {
            Ok(o) => o,
            Err(e) => return Outcome::Fail(e),
        };
        let mut names: Vec<String> = old
            .iter()
            .filter(|n| !n.plan.is_empty())
            .map(|n| template_name_of(&ctx.plan.deployment_id, &n.group, &n.plan))
            .collect();
        names.sort();
        names.dedup();
        for name in &names {
            if let Err(e) = self.compute.delete_launch_template(name).await {
                return outcome_of(e);
            }
        }
        Outcome::Done(json!({"deleted": names}))
    }

    /// The master-eligible instances this plan launched bootstrap the new
    /// cluster: their ids go where their boot script reads
    /// `cluster.initial_master_nodes`. Written right after the launches,
    /// long before a node has booted far enough to read it.
    async fn bootstrap_masters(&self, ctx: &StepContext<'_>) -> Outcome {
        let Some(parameters) = &self.parameters else {
            return fail(
                "not_configured",
                "this worker has no parameter store for the nodes",
            );
        };
        let spec = match target(ctx.plan) {
            Ok(s) => s,
            Err(e) => return Outcome::Fail(e),
        };
        let mut ids: Vec<String> = Vec::new();
        for g in spec
            .node_groups
            .iter()
            .filter(|g| g.roles.contains(&NodeRole::Master))
        {
            if let Some(launched) = ctx.output(&format!("launch:{}", g.id))
                && let Some(list) = launched["instance_ids"].as_array()
            {
                ids.extend(list.iter().filter_map(Value::as_str).map(String::from));
            }
        }
        let value = match floe_compute::parameters::initial_master_nodes(&ids) {
            Ok(v) => v,
            Err(e) => return outcome_of(e),
        };
        let name = floe_compute::parameters::parameter_name(
            &self.parameter_path(&ctx.plan.deployment_id),
            floe_compute::parameters::INITIAL_MASTER_NODES,
        );
        match parameters.put(&name, &value).await {
            Ok(()) => {
                ctx.log(format!("{} initial masters in {name}", ids.len()));
                Outcome::Done(json!({"parameter": name, "masters": ids}))
            }
            Err(e) => outcome_of(e),
        }
    }

    /// Every bootstrap parameter of the deployment (a failed create, a delete).
    async fn forget_parameters(&self, ctx: &StepContext<'_>) -> Outcome {
        let Some(parameters) = &self.parameters else {
            return Outcome::Done(Value::Null);
        };
        match parameters
            .delete_under(&self.parameter_path(&ctx.plan.deployment_id))
            .await
        {
            Ok(n) => {
                if n > 0 {
                    ctx.log(format!("{n} bootstrap parameters deleted"));
                }
                Outcome::Done(Value::Null)
            }
            Err(e) => outcome_of(e),
        }
    }

    /// The repository `spec` names, read now: its settings may have changed
    /// since the plan was made, and the nodes need the current ones.
    async fn repository_of(
        &self,
        ctx: &StepContext<'_>,
        spec: &DeploymentSpec,
    ) -> Result<Option<Repository>, Outcome> {
        let Some(name) = spec.repository() else {
            return Ok(None);
        };
        self.repository_named(ctx, name).await
    }

    /// The repository whose S3 client the nodes get: the deployment's own,
    /// else, for a clone, its source's (the API refuses a clone whose own
    /// repository needs another client than its source).
    async fn client_repository(
        &self,
        ctx: &StepContext<'_>,
        spec: &DeploymentSpec,
    ) -> Result<Option<Repository>, Outcome> {
        match client_repository_name(spec) {
            Some(name) => self.repository_named(ctx, name).await,
            None => Ok(None),
        }
    }

    async fn repository_named(
        &self,
        ctx: &StepContext<'_>,
        name: &str,
    ) -> Result<Option<Repository>, Outcome> {
        let Some(snapshots) = &self.snapshots else {
            return Err(fail(
                "not_configured",
                "this worker has no store to read repositories from",
            ));
        };
        match snapshots.store().get_repository(&ctx.plan.org, name).await {
            Ok(Some(r)) => Ok(Some(r.value)),
            Ok(None) => Err(fail(
                "repository_missing",
                format!("snapshot repository {name} no longer exists"),
            )),
            Err(e) => Err(Outcome::Retry(format!("store: {e}"))),
        }
    }

    /// Stores `values` under the deployment's parameter path (names
    /// relative to it) and returns their full names.
    async fn put_parameters(
        &self,
        parameters: &dyn NodeParameters,
        deployment_id: &str,
        values: &[(&str, SecretOrPlain)],
    ) -> Result<Vec<String>, Outcome> {
        let path = self.parameter_path(deployment_id);
        let mut written = Vec::new();
        for (name, value) in values {
            let full = floe_compute::parameters::parameter_name(&path, name);
            parameters.put(&full, value).await.map_err(outcome_of)?;
            written.push(full);
        }
        Ok(written)
    }

    /// Deletes the deployment's parameters `names` (relative to its path);
    /// ones already gone are fine.
    async fn delete_parameters(&self, deployment_id: &str, names: &[&str]) -> Result<(), Outcome> {
        let Some(parameters) = &self.parameters else {
            return Ok(());
        };
        let path = self.parameter_path(deployment_id);
        for name in names {
            let full = floe_compute::parameters::parameter_name(&path, name);
            parameters.delete(&full).await.map_err(outcome_of)?;
        }
        Ok(())
    }

    /// The deployment's CA, node certificate and elastic password, made
    /// once and kept: every node of the deployment, now and after any
    /// resize, must share them. The password goes last, so its presence
    /// says the set is complete.
    async fn node_security(&self, ctx: &StepContext<'_>) -> Outcome {
        use floe_compute::parameters::{
            ELASTIC_PASSWORD, SecretOrPlain, TLS_CA_CERT, TLS_NODE_CERT, TLS_NODE_KEY,
            parameter_name,
        };
        let Some(parameters) = &self.parameters else {
            return fail(
                "not_configured",
                "this worker has no parameter store for the nodes",
            );
        };
        let path = self.parameter_path(&ctx.plan.deployment_id);
        match parameters
            .get(&parameter_name(&path, ELASTIC_PASSWORD))
            .await
        {
            Ok(Some(_)) => {
                ctx.log("the deployment's certificates and password exist: kept");
                return Outcome::Done(json!({"kept": true}));
            }
            Ok(None) => {}
            Err(e) => return outcome_of(e),
        }
        let security = match floe_node_security::generate(&ctx.plan.deployment_id) {
            Ok(s) => s,
            Err(e) => return fail("node_security_failed", e.to_string()),
        };
        let values = [
            (TLS_CA_CERT, SecretOrPlain::plain(security.ca_cert_pem)),
            (TLS_NODE_CERT, SecretOrPlain::secret(security.node_cert_pem)),
            (
                TLS_NODE_KEY,
                SecretOrPlain::secret(security.node_key_pem.expose()),
            ),
            (
                ELASTIC_PASSWORD,
                SecretOrPlain::secret(security.elastic_password.expose()),
            ),
        ];
        if let Err(stop) = self
            .put_parameters(parameters.as_ref(), &ctx.plan.deployment_id, &values)
            .await
        {
            return stop;
        }
        ctx.log(format!(
            "a CA, a node certificate for {} and the elastic password stored for the nodes",
            floe_node_security::server_name(&ctx.plan.deployment_id)
        ));
        Outcome::Done(json!({"kept": false}))
    }

    /// A failed create's certificates and password go with it.
    async fn forget_node_security(&self, ctx: &StepContext<'_>) -> Outcome {
        use floe_compute::parameters::{
            ELASTIC_PASSWORD, TLS_CA_CERT, TLS_NODE_CERT, TLS_NODE_KEY,
        };
        self.delete_parameters(
            &ctx.plan.deployment_id,
            &[ELASTIC_PASSWORD, TLS_NODE_KEY, TLS_NODE_CERT, TLS_CA_CERT],
        )
        .await
        .map_or_else(|stop| stop, |()| Outcome::Done(Value::Null))
    }

    /// Writes the repository's keys where the new nodes' boot script pipes
    /// them into the keystore, before any of them is launched; removes keys
    /// left from an earlier repository when this one has none.
    async fn repository_credentials(&self, ctx: &StepContext<'_>) -> Outcome {
        let spec = match target(ctx.plan) {
            Ok(s) => s,
            Err(e) => return Outcome::Fail(e),
        };
        let repo = match self.client_repository(ctx, &spec).await {
            Ok(Some(r)) => r,
            Ok(None) => return Outcome::Done(Value::Null),
            Err(stop) => return stop,
        };
        let Some(parameters) = &self.parameters else {
            return fail(
                "not_configured",
                "this worker has no parameter store for the nodes",
            );
        };
        let Some(cipher) = &self.cipher else {
            return fail(
                "not_configured",
                "this worker cannot open repository credentials (FLOE_KMS_KEY_ID is not set)",
            );
        };
        let wanted = match crate::repository_access::credential_parameters(cipher.as_ref(), &repo)
            .await
        {
            Ok(w) => w,
            Err(floe_secrets::SecretError::KeyUnavailable(e)) => {
                return Outcome::Retry(format!("opening the credentials of {}: {e}", repo.name));
            }
            Err(e) => {
                return fail(
                    "repository_credentials_unreadable",
                    format!(
                        "the stored credentials of repository {} cannot be opened ({e}); send them again with PUT on the repository",
                        repo.name
                    ),
                );
            }
        };
        let written = match self
            .put_parameters(parameters.as_ref(), &ctx.plan.deployment_id, &wanted.put)
            .await
        {
            Ok(w) => w,
            Err(stop) => return stop,
        };
        if let Err(stop) = self
            .delete_parameters(&ctx.plan.deployment_id, &wanted.delete)
            .await
        {
            return stop;
        }
        if !written.is_empty() {
            ctx.log(format!(
                "the keys of repository {} stored for the nodes ({} parameters)",
                repo.name,
                written.len()
            ));
        }
        Outcome::Done(json!({"repository": repo.name, "parameters": written}))
    }

    /// Removes the keys a failed create wrote (an update leaves them: the
    /// nodes that stay booted with the same parameters' names).
    async fn forget_repository_credentials(&self, ctx: &StepContext<'_>) -> Outcome {
        use floe_compute::parameters::{
            REPOSITORY_ACCESS_KEY, REPOSITORY_SECRET_KEY, REPOSITORY_SESSION_TOKEN,
        };
        self.delete_parameters(
            &ctx.plan.deployment_id,
            &[
                REPOSITORY_ACCESS_KEY,
                REPOSITORY_SECRET_KEY,
                REPOSITORY_SESSION_TOKEN,
            ],
        )
        .await
        .map_or_else(|stop| stop, |()| Outcome::Done(Value::Null))
    }

    /// Registers the deployment's repository on its cluster (the only
    /// writer), with the repository's throttles.
    async fn register_repository(&self, ctx: &StepContext<'_>) -> Outcome {
        let poll = self.settings.poll;
        let spec = match target(ctx.plan) {
            Ok(s) => s,
            Err(e) => return Outcome::Fail(e),
        };
        let repo = match self.repository_of(ctx, &spec).await {
            Ok(Some(r)) => r,
            Ok(None) => return Outcome::Done(Value::Null),
            Err(stop) => return stop,
        };
        let name = &repo.name;
        let client = match self.clusters.client(ctx.deployment, &[]).await {
            Ok(c) => c,
            Err(e) => return cluster_outcome(e, "reaching the cluster", poll),
        };
        let registration =
            floe_snapshots::repository_registration(&repo, &ctx.plan.deployment_id, false);
        match client.put_repository(name, &registration).await {
            Ok(()) => {
                ctx.log(format!(
                    "repository {name} registered ({})",
                    registration.repository_type
                ));
                Outcome::Done(json!({"repository": name}))
            }
            Err(e) if e.is_transient() => Outcome::Retry(format!("registering {name}: {e}")),
            Err(e) => fail(
                "repository_registration_failed",
                format!("registering {name}: {e}"),
            ),
        }
    }

    /// The last snapshot before the nodes go, unless the shutdown said
    /// `skip_snapshot`, or there is no repository to take it into.
    async fn final_snapshot(&self, ctx: &StepContext<'_>) -> Outcome {
        if ctx.deployment.spec.repository().is_none() {
            ctx.log("no snapshot repository: no final snapshot");
            return Outcome::Done(Value::Null);
        }
        let Some(snapshots) = &self.snapshots else {
            return fail("not_configured", "this worker cannot take snapshots");
        };
        if let Some(done) = ctx.output("final-snapshot") {
            return Outcome::Done(done.clone());
        }
        let name = format!("shutdown-{}", ctx.plan.id.get(..12).unwrap_or(&ctx.plan.id));
        match snapshots
            .take_final(&ctx.plan.org, &ctx.plan.deployment_id, &name)
            .await
        {
            Ok(taken) => {
                let state = taken.value.state.as_str();
                ctx.log(format!("snapshot {name}: {state}"));
                if state == "SUCCESS" || state == "PARTIAL" {
                    Outcome::Done(json!({"snapshot": name, "state": state}))
                } else if state == "IN_PROGRESS" {
                    Outcome::Wait {
                        after: self.settings.poll,
                        note: format!("snapshot {name} still in progress"),
                    }
                } else {
                    fail(
                        "final_snapshot_failed",
                        format!(
                            "the final snapshot {name} ended {state}; shut down with skip_snapshot=true to go ahead without it"
                        ),
                    )
                }
            }
            Err(e) if e.is_transient() => Outcome::Retry(format!("final snapshot: {e}")),
            Err(e) => fail("final_snapshot_failed", format!("final snapshot: {e}")),
        }
    }

    /// Whether new nodes of `spec` get repository keys through the
    /// parameter store: whenever it has a repository and there is a store
    /// (the step itself finds out whether the repository holds keys, at the
    /// time it runs).
    fn hands_out_credentials(&self, spec: &DeploymentSpec) -> bool {
        client_repository_name(spec).is_some() && self.parameters.is_some()
    }

    fn update_layout(
        &self,
        plan: &Plan,
        deployment: &Deployment,
    ) -> Result<Vec<String>, StepError> {
        let target = target(plan)?;
        let shape = update_shape(&deployment.spec, &target);
        // Does nothing; its undo, the last of an unwinding, lifts the
        // allocation exclusion the other undos leave behind.
        let mut steps = vec!["begin".to_string()];
        // New nodes join with the deployment's certificates (made here for
        // a deployment created before Floe made them).
        if !shape.replaced.is_empty() && self.parameters.is_some() {
            steps.push("node-security".into());
        }
        if !shape.replaced.is_empty() && self.hands_out_credentials(&target) {
            steps.push("repository-credentials".into());
        }
        for g in &shape.replaced {
            steps.push(format!("template:{g}"));
            steps.push(format!("launch:{g}"));
        }
        if !shape.replaced.is_empty() {
            steps.push("wait-running".into());
        }
        steps.push("wait-joined".into());
        if target.repository().is_some() && target.repository() != deployment.spec.repository() {
            steps.push("register-repository".into());
        }
        if !shape.retiring.is_empty() {
            for s in [
                "drain",
                "wait-drained",
                "retire",
                "wait-retired",
                "clear-exclusion",
                "forget-templates",
            ] {
                steps.push(s.into());
            }
        }
        Ok(steps)
    }
}

#[async_trait]
impl Steps for DeploymentSteps {
    fn layout(&self, plan: &Plan, deployment: &Deployment) -> Result<Vec<String>, StepError> {
        match plan.kind() {
            PlanKind::Create => {
                let spec = target(plan)?;
                let mut steps = Vec::new();
                if self.parameters.is_some() {
                    steps.push("node-security".into());
                }
                if self.hands_out_credentials(&spec) {
                    steps.push("repository-credentials".into());
                }
                for g in &spec.node_groups {
                    steps.push(format!("template:{}", g.id));
                    steps.push(format!("launch:{}", g.id));
                }
                if self.parameters.is_some()
                    && spec
                        .node_groups
                        .iter()
                        .any(|g| g.roles.contains(&NodeRole::Master))
                {
                    steps.push("bootstrap-masters".into());
                }
                steps.push("wait-running".into());
                steps.push("wait-joined".into());
                if spec.repository().is_some() {
                    steps.push("register-repository".into());
                }
                if let Some(t) = restore::restore_target(plan)? {
                    steps.extend(restore::restore_layout(&t));
                }
                Ok(steps)
            }
            PlanKind::Restore => match restore::restore_target(plan)? {
                Some(t) => Ok(restore::restore_layout(&t)),
                None => Ok(Vec::new()),
            },
            PlanKind::Shutdown => {
                let skip = matches!(plan.params, PlanParams::Shutdown(p) if p.skip_snapshot);
                let mut steps = Vec::new();
                if !skip && deployment.spec.repository().is_some() {
                    steps.push("final-snapshot".into());
                }
                steps.push("terminate".into());
                steps.push("wait-terminated".into());
                Ok(steps)
            }
            PlanKind::Delete => Ok(vec![
                "terminate".into(),
                "wait-terminated".into(),
                "forget-parameters".into(),
            ]),
            PlanKind::Update => self.update_layout(plan, deployment),
        }
    }

    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        match step_id.split_once(':') {
            Some(("template", g)) => self.ensure_template(ctx, g).await,
            Some(("launch", g)) => self.launch(ctx, g).await,
            _ => match step_id {
                "wait-running" => self.wait_running(ctx).await,
                "begin" => Outcome::Done(Value::Null),
                "register-repository" => self.register_repository(ctx).await,
                "repository-credentials" => self.repository_credentials(ctx).await,
                "node-security" => self.node_security(ctx).await,
                "bootstrap-masters" => self.bootstrap_masters(ctx).await,
                "forget-parameters" => self.forget_parameters(ctx).await,
                "final-snapshot" => self.final_snapshot(ctx).await,
                "wait-joined" => self.wait_joined(ctx).await,
                "drain" => self.drain(ctx).await,
                "wait-drained" => self.wait_drained(ctx).await,
                "retire" => self.retire(ctx).await,
                "wait-retired" => self.wait_retired(ctx).await,
                "clear-exclusion" => self.clear_exclusion(ctx).await,
                "forget-templates" => self.forget_templates(ctx).await,
                "register-source" => self.register_source(ctx).await,
                "restore" => self.restore(ctx).await,
                "mount" => self.mount(ctx).await,
                "wait-restored" => self.wait_restored(ctx).await,
                "terminate" => self.terminate_all(ctx).await,
                "wait-terminated" => self.wait_terminated(ctx).await,
                other => fail("invalid_plan", format!("unknown step {other}")),
            },
        }
    }

    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        // Once `retire` has started, old nodes may be gone even if its
        // result was never recorded (a crash, a failure mid-way).
        let past_no_return = ctx.plan.kind() == PlanKind::Update
            && ctx
                .plan
                .steps
                .iter()
                .any(|s| s.step_id == "retire" && s.status != StepStatus::Pending);
        if past_no_return && (step_id.starts_with("template:") || step_id.starts_with("launch:")) {
            ctx.log("the old nodes are gone: the new ones stay");
            return Outcome::Done(Value::Null);
        }
        if step_id == "retire" {
            // Undoing anything after this would leave no cluster at all;
            // failing the undo marks the deployment `failed` for a person
            // to look at (re-applying the change finishes it).
            return fail(
                "point_of_no_return",
                "the old nodes were terminated and the cluster runs on the new ones; apply the change again to finish it",
            );
        }
        if step_id == "begin" {
            return self.clear_exclusion(ctx).await;
        }
        if step_id == "bootstrap-masters" {
            return self.forget_parameters(ctx).await;
        }
        if matches!(
            step_id,
            "register-source" | "restore" | "mount" | "wait-restored"
        ) {
            return self.undo_restore_step(ctx, step_id).await;
        }
        if step_id == "node-security" && ctx.plan.kind() == PlanKind::Create {
            return self.forget_node_security(ctx).await;
        }
        if step_id == "repository-credentials" && ctx.plan.kind() == PlanKind::Create {
            return self.forget_repository_credentials(ctx).await;
        }
        if ctx.plan.kind() == PlanKind::Update
            && let Some(("launch", group)) = step_id.split_once(':')
        {
            // The cluster may already keep shards on the new nodes (it
            // rebalances onto nodes that join): move them back first.
            if let Some(waiting) = self.drain_new_nodes(ctx).await {
                return waiting;
            }
            return self.terminate_own(ctx, Some(group)).await;
        }
        match step_id.split_once(':') {
            Some(("template", g)) => match self
                .compute
                .delete_launch_template(&template_name(ctx.plan, g))
                .await
            {
                Ok(()) => Outcome::Done(Value::Null),
                Err(e) => outcome_of(e),
            },
            Some(("launch", g)) => self.terminate_own(ctx, Some(g)).await,
            // Waiting changed nothing; terminated nodes are not restarted
            // (their data is in the snapshots, and a new plan can recreate them).
            _ => Outcome::Done(Value::Null),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn nodes_spread_evenly_over_zones() {
        assert_eq!(spread(3, 3), [1, 1, 1]);
        assert_eq!(spread(5, 3), [2, 2, 1]);
        assert_eq!(spread(1, 1), [1]);
        assert_eq!(spread(2, 3), [1, 1, 0]);
    }
}
