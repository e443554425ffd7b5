//! The steps that retire an update's old nodes: shards move off them
//! (drain, wait-drained), they go (retire, in [`super::voting`], since
//! master-eligible ones first leave the voting configuration;
//! wait-retired), and the cluster and the compute provider forget them
//! (clear-exclusion, forget-templates).

use super::template_name_of;
use super::{EXCLUDE_SETTING, is_gone, target};
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::{DrainOutput, DrainedOutput, ForgottenTemplatesOutput, OldNode};
use floe_compute::{InstanceState, TAG_NODE_GROUP, TAG_PLAN};
use floe_domain::deployment::DeploymentSpec;
use floe_domain::plan::StepError;
use floe_elastic::ElasticClient;
use serde_json::Value;

/// What an update changes: the groups that get new nodes, and the groups
/// whose current nodes go.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UpdateShape {
    pub replaced: Vec<String>,
    pub retiring: Vec<String>,
}

/// A group is replaced when it is new or differs in anything; every group
/// is, when the version, user settings or repository change (they are in
/// every node's configuration), or when `renew_all` (an update moving the
/// deployment to a stable endpoint: every node gets certificates naming
/// it). Groups that are no longer wanted retire.
pub fn update_shape(
    current: &DeploymentSpec,
    target: &DeploymentSpec,
    renew_all: bool,
) -> UpdateShape {
    let everything = renew_all
        || current.version != target.version
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

/// The old nodes `drain` recorded (none before it ran).
fn old_nodes(ctx: &StepContext<'_>) -> Result<Vec<OldNode>, StepError> {
    Ok(ctx
        .optional_output_of::<DrainOutput>("drain")?
        .map(|d| d.nodes)
        .unwrap_or_default())
}

/// Shard copies on the named nodes, and copies still moving anywhere.
pub(crate) fn shards_on(shards: &[floe_elastic::ShardRow], names: &[String]) -> (usize, usize) {
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

impl DeploymentSteps {
    /// Excludes the retiring groups' old nodes from shard allocation, so
    /// Elasticsearch moves their shards to the new ones.
    pub(crate) async fn drain(&self, ctx: &StepContext<'_>) -> StepResult {
        let target = target(ctx.plan)?;
        let shape = update_shape(
            &ctx.deployment.spec,
            &target,
            ctx.deployment.endpoint_moving_to.is_some(),
        );
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
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
        let client = self.clusters.client(ctx.deployment, &names).await?;
        let mut settings = serde_json::Map::new();
        settings.insert(EXCLUDE_SETTING.into(), Value::String(names.join(",")));
        client
            .put_persistent_settings(settings)
            .await
            .map_err(|e| StepFailure::elastic(e, "excluding the old nodes"))?;
        ctx.log(format!("moving shards off {}", names.join(", ")));
        Ok(done(&DrainOutput { nodes: old }))
    }

    /// Excludes this plan's nodes from allocation; `Ok` once they hold no
    /// shard, a not-yet while shards are on them or moving.
    pub(crate) async fn drain_new_nodes(&self, ctx: &StepContext<'_>) -> Result<(), StepFailure> {
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let names: Vec<String> = instances
            .into_iter()
            .filter(|i| i.tags.get(TAG_PLAN) == Some(&ctx.plan.id) && !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        let client = self.clusters.client(ctx.deployment, &names).await?;
        let mut settings = serde_json::Map::new();
        settings.insert(EXCLUDE_SETTING.into(), Value::String(names.join(",")));
        client
            .put_persistent_settings(settings)
            .await
            .map_err(|e| StepFailure::elastic(e, "excluding the new nodes"))?;
        let shards = client
            .shards()
            .await
            .map_err(|e| StepFailure::elastic(e, "listing shards"))?;
        let (on, moving) = shards_on(&shards, &names);
        if on != 0 || moving != 0 {
            return Err(StepFailure::NotYet(format!(
                "{on} shard copies still on the new nodes, {moving} moving"
            )));
        }
        ctx.log(format!(
            "no shard left on the new nodes {}",
            names.join(", ")
        ));
        Ok(())
    }

    /// No shard copy is left on (or moving off) an old node.
    pub(crate) async fn wait_drained(&self, ctx: &StepContext<'_>) -> StepResult {
        let old = old_nodes(ctx)?;
        let names: Vec<String> = old.iter().map(|n| n.id.clone()).collect();
        let client = self.clusters.client(ctx.deployment, &names).await?;
        let shards = client
            .shards()
            .await
            .map_err(|e| StepFailure::elastic(e, "listing shards"))?;
        let (on_old, moving) = shards_on(&shards, &names);
        if on_old == 0 && moving == 0 {
            ctx.log(format!("no shard left on {} old nodes", names.len()));
            return Ok(done(&DrainedOutput {
                shards: shards.len(),
            }));
        }
        if ctx.elapsed() > self.settings.drain_timeout {
            return Err(StepFailure::permanent(
                "drain_timeout",
                format!(
                    "{on_old} shard copies still on the old nodes after {} s",
                    ctx.elapsed().as_secs()
                ),
            ));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!("{on_old} shard copies still on the old nodes, {moving} moving"),
        })
    }

    pub(crate) async fn wait_retired(&self, ctx: &StepContext<'_>) -> StepResult {
        let old = old_nodes(ctx)?;
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let left = instances
            .iter()
            .filter(|i| old.iter().any(|o| o.id == i.id))
            .filter(|i| i.state != InstanceState::Terminated)
            .count();
        if left == 0 {
            return Ok(Outcome::Done(Value::Null));
        }
        if ctx.elapsed() > self.settings.boot_timeout {
            return Err(StepFailure::permanent(
                "terminate_timeout",
                format!("{left} old nodes still not terminated"),
            ));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!("{left} old nodes still terminating"),
        })
    }

    /// `clear-exclusion`, once the old nodes are gone: neither the
    /// allocation exclusion nor any voting exclusion is left (Elasticsearch
    /// waits until the excluded nodes have left the cluster).
    pub(crate) async fn clear_exclusion(&self, ctx: &StepContext<'_>) -> StepResult {
        self.clear_exclusions(ctx, true).await
    }

    /// The undo of `begin`, the last of an unwinding: the old nodes stay,
    /// so their voting exclusions go without waiting for them to leave.
    pub(crate) async fn lift_exclusions(&self, ctx: &StepContext<'_>) -> StepResult {
        self.clear_exclusions(ctx, false).await
    }

    /// Clearing waits on the cluster and gives up after the boot timeout;
    /// reaching it does not.
    async fn clear_exclusions(&self, ctx: &StepContext<'_>, nodes_gone: bool) -> StepResult {
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let cleared = clear_both_exclusions(&client, nodes_gone).await;
        self.waiting(ctx, cleared, "exclusion_timeout")
    }

    /// The old nodes' launch templates (one per group and plan that made them).
    pub(crate) async fn forget_templates(&self, ctx: &StepContext<'_>) -> StepResult {
        let old = old_nodes(ctx)?;
        let mut names: Vec<String> = old
            .iter()
            .filter(|n| !n.plan.is_empty())
            .map(|n| template_name_of(&ctx.plan.deployment_id, &n.group, &n.plan))
            .collect();
        names.sort();
        names.dedup();
        for name in &names {
            self.compute.delete_launch_template(name).await?;
        }
        Ok(done(&ForgottenTemplatesOutput { deleted: names }))
    }
}

/// The voting exclusions, then the allocation exclusion, cleared.
async fn clear_both_exclusions(client: &ElasticClient, nodes_gone: bool) -> StepResult {
    client
        .clear_voting_config_exclusions(nodes_gone)
        .await
        .map_err(|e| StepFailure::elastic(e, "clearing the voting exclusions"))?;
    let mut settings = serde_json::Map::new();
    settings.insert(EXCLUDE_SETTING.into(), Value::Null);
    client
        .put_persistent_settings(settings)
        .await
        .map_err(|e| StepFailure::elastic(e, "clearing the allocation exclusion"))?;
    Ok(Outcome::Done(Value::Null))
}
