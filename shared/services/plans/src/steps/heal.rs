//! A heal's `replace:{group}`: the group's lost nodes started again in the
//! zones they were lost from, and what the health check reads of a zone;
//! its `retire-lost`: the lost nodes still there (stopped, impaired)
//! terminated once their replacements joined; and, when master-eligible
//! nodes were lost, `exclude-lost-masters`, `wait-lost-masters-excluded`
//! and `clear-lost-exclusion` around it.
//!
//! An impaired master-eligible node may still be a member of the cluster
//! and hold a vote: terminating it (or several at once) without a voting
//! exclusion costs the quorum as retiring any master does (see
//! [`crate::steps::voting`]). So the lost master-eligible nodes still
//! there leave the voting configuration first, the voting steps of an
//! update doing it. A lost node that is gone already needs no exclusion:
//! Elasticsearch shrinks the configuration without it by itself once
//! the replacements join.

use super::drain::shards_on;
use super::voting::{MAX_VOTING_EXCLUSIONS, is_master_group};
use super::{EXCLUDE_SETTING, is_gone, tags, template_name};
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::{LaunchOutput, TerminatedOutput, VotingExclusionsOutput};
use floe_compute::{Instance, LaunchRequest, TAG_LAUNCH};
use floe_domain::plan::{HealParams, Plan, PlanParams, StepStatus};
use std::collections::BTreeSet;

/// The instances a heal replaces (none for any other plan).
pub(crate) fn lost_ids(plan: &Plan) -> BTreeSet<&str> {
    match &plan.params {
        PlanParams::Heal(p) => p
            .replacements
            .iter()
            .flat_map(|r| r.lost.iter().map(String::as_str))
            .collect(),
        _ => BTreeSet::new(),
    }
}

/// Whether a heal replaces lost nodes of a master-eligible group: its
/// layout then takes them out of the voting configuration before
/// `retire-lost` and clears the exclusions after it.
pub fn replaces_lost_masters(params: &HealParams) -> bool {
    params
        .replacements
        .iter()
        .any(|r| !r.lost.is_empty() && is_master_group(&params.spec, &r.group))
}

/// The lost instances of the heal's master-eligible groups.
fn lost_masters(plan: &Plan) -> BTreeSet<&str> {
    match &plan.params {
        PlanParams::Heal(p) => p
            .replacements
            .iter()
            .filter(|r| is_master_group(&p.spec, &r.group))
            .flat_map(|r| r.lost.iter().map(String::as_str))
            .collect(),
        _ => BTreeSet::new(),
    }
}

/// The nodes a heal talks to the cluster without: the lost ones (an
/// impaired node may not answer, or answer late).
fn avoid_lost(plan: &Plan) -> Vec<String> {
    lost_ids(plan).into_iter().map(String::from).collect()
}

/// Whether step `id` is in the plan's layout (a plan recorded before
/// the step existed has none).
fn has_step(plan: &Plan, id: &str) -> bool {
    plan.steps.iter().any(|s| s.step_id == id)
}

/// Once `retire-lost` has started, lost nodes may be terminated even if
/// its result was never recorded (a crash, a failure mid-way).
fn retire_started(plan: &Plan) -> bool {
    plan.steps
        .iter()
        .any(|s| s.step_id == "retire-lost" && s.status != StepStatus::Pending)
}

/// The zone index a node was launched for: the last part of its launch
/// tag (`{plan}-{group index}-{zone}`, as `launch:{group}` and
/// `replace:{group}` write it); `None` for a node without one.
pub fn launch_zone(instance: &Instance) -> Option<u32> {
    instance
        .tags
        .get(TAG_LAUNCH)?
        .rsplit('-')
        .next()?
        .parse()
        .ok()
}

/// The nodes beyond the spec a heal takes out (none for another plan).
fn surplus_of(plan: &Plan) -> Vec<String> {
    match &plan.params {
        PlanParams::Heal(p) => p.surplus.clone(),
        _ => Vec::new(),
    }
}

impl DeploymentSteps {
    /// The surplus nodes still there (not terminated or shutting down).
    async fn surplus_there(&self, ctx: &StepContext<'_>) -> Result<Vec<String>, StepFailure> {
        let surplus = surplus_of(ctx.plan);
        if surplus.is_empty() {
            return Ok(Vec::new());
        }
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        Ok(instances
            .into_iter()
            .filter(|i| surplus.contains(&i.id) && !is_gone(i.state))
            .map(|i| i.id)
            .collect())
    }

    /// `drain-surplus`: the nodes beyond the spec are excluded from shard
    /// allocation, so that Elasticsearch moves their shards to the nodes
    /// that stay before `retire-lost` terminates them.
    pub(crate) async fn drain_surplus(&self, ctx: &StepContext<'_>) -> StepResult {
        let names = self.surplus_there(ctx).await?;
        if names.is_empty() {
            ctx.log("the surplus nodes are gone already");
            return Ok(done(&TerminatedOutput { terminated: vec![] }));
        }
        let client = self.clusters.client(ctx.deployment, &names).await?;
        let mut settings = serde_json::Map::new();
        settings.insert(
            EXCLUDE_SETTING.into(),
            serde_json::Value::String(names.join(",")),
        );
        client
            .put_persistent_settings(settings)
            .await
            .map_err(|e| StepFailure::elastic(e, "excluding the surplus nodes"))?;
        ctx.log(format!(
            "moving shards off the surplus {}",
            names.join(", ")
        ));
        Ok(Outcome::Done(serde_json::json!({ "nodes": names })))
    }

    /// `wait-surplus-drained`: no shard copy is left on (or moving off) a
    /// surplus node.
    pub(crate) async fn wait_surplus_drained(&self, ctx: &StepContext<'_>) -> StepResult {
        let names = self.surplus_there(ctx).await?;
        if names.is_empty() {
            return Ok(Outcome::Done(serde_json::Value::Null));
        }
        let client = self.clusters.client(ctx.deployment, &names).await?;
        let shards = client
            .shards()
            .await
            .map_err(|e| StepFailure::elastic(e, "listing shards"))?;
        let (on, moving) = shards_on(&shards, &names);
        if on == 0 && moving == 0 {
            ctx.log(format!("no shard left on the surplus {}", names.join(", ")));
            return Ok(Outcome::Done(serde_json::Value::Null));
        }
        if ctx.elapsed() > self.settings.drain_timeout {
            return Err(StepFailure::permanent(
                "drain_timeout",
                format!(
                    "{on} shard copies still on the surplus nodes after {} s",
                    ctx.elapsed().as_secs()
                ),
            ));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!("{on} shard copies still on the surplus nodes, {moving} moving"),
        })
    }

    /// `clear-surplus-exclusion`, and the undo of `drain-surplus`: the
    /// allocation exclusion goes (the surplus nodes are gone, or stay).
    pub(crate) async fn lift_surplus_exclusion(&self, ctx: &StepContext<'_>) -> StepResult {
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let mut settings = serde_json::Map::new();
        settings.insert(EXCLUDE_SETTING.into(), serde_json::Value::Null);
        client
            .put_persistent_settings(settings)
            .await
            .map_err(|e| StepFailure::elastic(e, "clearing the allocation exclusion"))?;
        Ok(Outcome::Done(serde_json::Value::Null))
    }

    /// `replace:{group}`: the group's replacements, each zone's with a
    /// launch tag and client token of its own, so that a second run starts
    /// nothing more.
    pub(crate) async fn replace(&self, ctx: &StepContext<'_>, group_id: &str) -> StepResult {
        let PlanParams::Heal(params) = &ctx.plan.params else {
            return Err(StepFailure::permanent(
                "invalid_plan",
                "replace is a step of heal plans",
            ));
        };
        let index = params
            .spec
            .node_groups
            .iter()
            .position(|g| g.id == group_id)
            .unwrap_or(0);
        let earlier = self.compute.instances(&ctx.plan.deployment_id).await?;
        let mut ids = Vec::new();
        // A replacement of none only names nodes for `retire-lost`.
        for r in params
            .replacements
            .iter()
            .filter(|r| r.group == group_id && r.count > 0)
        {
            let token = format!(
                "{}-{index}-{}",
                ctx.plan.id.get(..24).unwrap_or(&ctx.plan.id),
                r.zone
            );
            let started: Vec<String> = earlier
                .iter()
                .filter(|i| i.tags.get(TAG_LAUNCH) == Some(&token) && !is_gone(i.state))
                .map(|i| i.id.clone())
                .collect();
            if !started.is_empty() {
                ctx.log(format!(
                    "{} replacements of {group_id} in zone {} already started",
                    started.len(),
                    r.zone
                ));
                ids.extend(started);
                continue;
            }
            let mut launch_tags = tags(ctx.plan, Some(group_id));
            launch_tags.insert(TAG_LAUNCH.to_string(), token.clone());
            let request = LaunchRequest {
                template_name: template_name(ctx.plan, group_id),
                count: r.count,
                zone: r.zone as usize,
                client_token: token,
                tags: launch_tags,
            };
            // A zone without capacity is a transient failure (see
            // `StepFailure`'s `From<ComputeError>`): the zone the node was
            // lost from has none of its type now, and the next check tries
            // again (a heal keeps its zone).
            let got = self.compute.launch(&request).await?;
            ctx.log(format!(
                "{} of {group_id} in zone {} replacing {}",
                got.join(", "),
                r.zone,
                if r.lost.is_empty() {
                    "lost nodes".to_string()
                } else {
                    r.lost.join(", ")
                }
            ));
            ids.extend(got);
        }
        Ok(done(&LaunchOutput { instance_ids: ids }))
    }

    /// Undoes `replace:{group}`: the replacements go, unless the nodes
    /// they replace may be gone already. Master-eligible replacements
    /// that joined may hold votes the quorum needs (the lost nodes vote
    /// again once the undo of `exclude-lost-masters` cleared their
    /// exclusions): they leave the voting configuration before they go,
    /// as an unwinding update's new nodes do, and their exclusions are
    /// cleared once they have left the cluster.
    pub(crate) async fn unreplace(&self, ctx: &StepContext<'_>, group_id: &str) -> StepResult {
        if retire_started(ctx.plan) {
            ctx.log("the lost nodes may be terminated: their replacements stay");
            return Ok(Outcome::Done(serde_json::Value::Null));
        }
        // Replacements that never joined hold no vote, and a cluster
        // that could not take them (no elected master) could not drop
        // them from its configuration either. `wait-joined` keeps its
        // output once undone.
        let joined = ctx.output("wait-joined").is_some();
        if joined {
            self.unvote_new_nodes(ctx, group_id).await?;
        }
        let terminated = self.terminate_launched(ctx, group_id).await?;
        let voted = match &ctx.plan.params {
            PlanParams::Heal(p) => joined && is_master_group(&p.spec, group_id),
            _ => false,
        };
        if !voted || !matches!(terminated, Outcome::Done(_)) {
            return Ok(terminated);
        }
        // Clearing gives `Done` or a failure, which waits at most the boot timeout.
        let cleared = self.clear_voting(ctx, &[], true).await;
        self.waiting(ctx, cleared, "exclusion_timeout")?;
        Ok(terminated)
    }

    /// The lost master-eligible nodes still there (not terminated or
    /// shutting down): the ones that may still hold a vote, sorted.
    async fn lost_masters_there(&self, ctx: &StepContext<'_>) -> Result<Vec<String>, StepFailure> {
        let masters = lost_masters(ctx.plan);
        if masters.is_empty() {
            return Ok(Vec::new());
        }
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let mut there: Vec<String> = instances
            .into_iter()
            .filter(|i| masters.contains(i.id.as_str()) && !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        there.sort();
        Ok(there)
    }

    /// `exclude-lost-masters`: the lost master-eligible nodes still there
    /// (one round of them: more go in rounds inside `retire-lost`) are
    /// excluded from voting, through a node that was not lost, once their
    /// replacements have joined and can take their votes.
    pub(crate) async fn exclude_lost_masters(&self, ctx: &StepContext<'_>) -> StepResult {
        let mut nodes = self.lost_masters_there(ctx).await?;
        if nodes.is_empty() {
            ctx.log(
                "the lost master-eligible nodes are gone already: Elasticsearch drops them from the voting configuration by itself",
            );
        }
        nodes.truncate(MAX_VOTING_EXCLUSIONS);
        self.exclude_voters(ctx, nodes, &avoid_lost(ctx.plan)).await
    }

    /// `wait-lost-masters-excluded`: the nodes `exclude-lost-masters`
    /// excluded are out of the voting configuration.
    pub(crate) async fn wait_lost_masters_excluded(&self, ctx: &StepContext<'_>) -> StepResult {
        let nodes = ctx
            .optional_output_of::<VotingExclusionsOutput>("exclude-lost-masters")?
            .map(|o| o.nodes)
            .unwrap_or_default();
        self.wait_voters_excluded(ctx, nodes, &avoid_lost(ctx.plan))
            .await
    }

    /// Undoes `exclude-lost-masters`: the lost nodes were not terminated,
    /// so they vote again as before the heal (a stopped or impaired
    /// master keeps counting towards the quorum either way).
    pub(crate) async fn restore_lost_voting(&self, ctx: &StepContext<'_>) -> StepResult {
        self.clear_voting(ctx, &avoid_lost(ctx.plan), false).await
    }

    /// `clear-lost-exclusion`: the voting exclusions of the lost nodes
    /// go once they have left the cluster, so that none counts towards
    /// Elasticsearch's limit or keeps a node of that name from voting.
    pub(crate) async fn clear_lost_exclusion(&self, ctx: &StepContext<'_>) -> StepResult {
        let cleared = self.clear_voting(ctx, &avoid_lost(ctx.plan), true).await;
        self.waiting(ctx, cleared, "exclusion_timeout")
    }

    /// `retire-lost`: the nodes the heal replaced that are still there
    /// (stopped, impaired) are terminated, so that none keeps its volume,
    /// its address or a stale place in the cluster. Only the deployment's
    /// own instances are looked at; those gone already need nothing.
    /// Nodes that do not vote go at once; master-eligible ones only once
    /// out of the voting configuration, in rounds as an update's `retire`
    /// takes them. Each run looks at what is, so a second run (or a
    /// resumed one) carries on where the first stopped.
    pub(crate) async fn retire_lost(&self, ctx: &StepContext<'_>) -> StepResult {
        let lost = lost_ids(ctx.plan);
        if lost.is_empty() {
            return Ok(done(&TerminatedOutput { terminated: vec![] }));
        }
        let masters = lost_masters(ctx.plan);
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let there: Vec<String> = instances
            .into_iter()
            .filter(|i| lost.contains(i.id.as_str()) && !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        let (voters, others): (Vec<String>, Vec<String>) = there
            .iter()
            .cloned()
            .partition(|id| masters.contains(id.as_str()));
        // The replaced nodes leave the endpoint before they are terminated.
        self.set_endpoint_records(ctx, &there).await?;
        if there.is_empty() {
            ctx.log("the replaced nodes are gone already");
        }
        if !others.is_empty() {
            self.compute.terminate(&others).await?;
            ctx.log(format!("terminated {}, replaced", others.join(", ")));
        }
        if !voters.is_empty()
            && !self
                .retire_voters(ctx, &voters, &avoid_lost(ctx.plan))
                .await?
        {
            return Ok(Outcome::Wait {
                after: self.settings.poll,
                note: format!("{} lost master-eligible nodes to retire", voters.len()),
            });
        }
        // A heal recorded before the voting steps existed has no
        // `clear-lost-exclusion`: the exclusions `retire_voters` added
        // are cleared here.
        if !masters.is_empty() && !has_step(ctx.plan, "clear-lost-exclusion") {
            let cleared = self.clear_lost_exclusion(ctx).await?;
            if !matches!(cleared, Outcome::Done(_)) {
                return Ok(cleared);
            }
        }
        Ok(done(&TerminatedOutput { terminated: there }))
    }
}

#[cfg(test)]
mod tests {
    use super::launch_zone;
    use floe_compute::{Instance, InstanceState, TAG_LAUNCH};
    use std::collections::BTreeMap;

    #[test]
    fn the_zone_is_read_from_the_launch_tag() {
        let with = |tag: Option<&str>| Instance {
            id: "i-1".into(),
            state: InstanceState::Running,
            instance_type: "m6g.large".into(),
            zone: "eu-west-1b".into(),
            private_ip: None,
            tags: tag
                .map(|t| BTreeMap::from([(TAG_LAUNCH.to_string(), t.to_string())]))
                .unwrap_or_default(),
        };
        assert_eq!(
            launch_zone(&with(Some("0193a0c4d2b87c3e9a4b5c6d-1-2"))),
            Some(2)
        );
        assert_eq!(launch_zone(&with(None)), None);
        assert_eq!(launch_zone(&with(Some("x-y"))), None);
    }
}
