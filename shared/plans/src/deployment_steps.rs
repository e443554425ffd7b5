//! The steps of deployment plans, over the compute port.
//!
//! create:   template:{group} and launch:{group} for every node group, then wait-running
//! shutdown: terminate, wait-terminated
//! delete:   terminate, wait-terminated (then the record goes)
//! update:   refused at layout for now: grow-and-shrink must move shards off
//!           old nodes before terminating them, which needs the Elasticsearch
//!           client; until then a failed layout leaves the cluster untouched.

use crate::engine::{Outcome, StepContext, Steps, fail};
use async_trait::async_trait;
use floe_clusters::Clusters;
use floe_compute::{
    Compute, ComputeError, InstanceState, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT,
    TAG_NODE_GROUP, TAG_ORG, TAG_PLAN, Volume,
};
use floe_domain::catalog;
use floe_domain::deployment::{Deployment, DeploymentSpec, NodeGroup};
use floe_domain::plan::{Plan, PlanKind, StepError};
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
}

impl Default for StepSettings {
    fn default() -> StepSettings {
        StepSettings {
            poll: Duration::from_secs(10),
            boot_timeout: Duration::from_secs(20 * 60),
            region: "us-east-1".into(),
            parameter_prefix: "/floe".into(),
        }
    }
}

pub struct DeploymentSteps {
    compute: Arc<dyn Compute>,
    // Read by the update plan's join and drain steps.
    #[allow(dead_code)]
    clusters: Arc<dyn Clusters>,
    settings: StepSettings,
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
        }
    }
}

/// The spec a plan builds: its params for create and update.
fn target(plan: &Plan) -> Result<DeploymentSpec, StepError> {
    serde_json::from_value(plan.params.clone()).map_err(|e| StepError {
        failure_type: "invalid_plan".into(),
        message: format!("the plan's target spec cannot be read: {e}"),
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
    format!(
        "floe-{}-{}-{}",
        plan.deployment_id,
        group,
        &plan.id[plan.id.len().saturating_sub(12)..]
    )
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
        // Each deployment reads only its own bootstrap parameters.
        let prefix = format!(
            "{}/{}",
            self.settings.parameter_prefix.trim_end_matches('/'),
            ctx.plan.deployment_id
        );
        let config = floe_nodeconfig::NodeGroupConfig {
            deployment_id: &ctx.plan.deployment_id,
            cluster_name: &spec.name,
            org: &ctx.plan.org,
            es_version: &spec.version,
            group: g,
            instance,
            user_settings: &spec.user_settings,
            region: &self.settings.region,
            repository: None,
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
        let expected: u32 = spec.node_groups.iter().map(|g| g.count).sum();
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

#[async_trait]
impl Steps for DeploymentSteps {
    fn layout(&self, plan: &Plan, _deployment: &Deployment) -> Result<Vec<String>, StepError> {
        match plan.kind {
            PlanKind::Create => {
                let spec = target(plan)?;
                let mut steps = Vec::new();
                for g in &spec.node_groups {
                    steps.push(format!("template:{}", g.id));
                    steps.push(format!("launch:{}", g.id));
                }
                steps.push("wait-running".into());
                Ok(steps)
            }
            PlanKind::Shutdown | PlanKind::Delete => Ok(vec!["terminate".into(), "wait-terminated".into()]),
            PlanKind::Update => Err(StepError {
                failure_type: "not_supported".into(),
                message: "changing node groups, version, settings or repository needs shard migration, which arrives with the Elasticsearch client; nothing was changed".into(),
            }),
        }
    }

    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        match step_id.split_once(':') {
            Some(("template", g)) => self.ensure_template(ctx, g).await,
            Some(("launch", g)) => self.launch(ctx, g).await,
            _ => match step_id {
                "wait-running" => self.wait_running(ctx).await,
                "terminate" => self.terminate_all(ctx).await,
                "wait-terminated" => self.wait_terminated(ctx).await,
                other => fail("invalid_plan", format!("unknown step {other}")),
            },
        }
    }

    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
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
