//! The steps that start and stop a deployment's nodes: its launch
//! templates, its instances, and waiting for them to run, to join the
//! cluster, or to be gone.

use super::spread;
use super::{is_gone, tags, target, target_group, template_name};
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::{
    JoinedOutput, LaunchOutput, LeftoversOutput, RunningOutput, TemplateOutput, TerminatedOutput,
};
use floe_compute::{
    ComputeError, Instance, InstanceState, LaunchRequest, LaunchTemplateSpec, TAG_LAUNCH,
    TAG_NODE_GROUP, TAG_PLAN, Volume,
};
use floe_domain::catalog;
use serde_json::Value;

/// The step that deals with what a plan ended by force left.
pub(crate) const LEFTOVERS_STEP: &str = "leftovers";

/// The leftovers this plan adopted (none when it adopted nothing, or has
/// no `leftovers` step).
pub(crate) fn adopted(ctx: &StepContext<'_>) -> Result<LeftoversOutput, StepFailure> {
    Ok(ctx
        .optional_output_of::<LeftoversOutput>(LEFTOVERS_STEP)?
        .unwrap_or_default())
}

impl DeploymentSteps {
    /// `leftovers`, first of a start (and of an update, after `begin`): the
    /// instances of the deployment that a plan ended by force left behind
    /// (its launches, which it never recorded as the deployment's nodes)
    /// would otherwise run beside the ones this plan launches, a second
    /// bootstrapped cluster on EC2. So:
    ///
    /// - none in a cluster that answers (they never formed one, or are
    ///   still booting): they are terminated, and the step waits until
    ///   they are gone, so that the new nodes bootstrap a fresh cluster and
    ///   can join no other;
    /// - in a cluster: a start adopts it. Each group keeps up to its count
    ///   of them (members first), the launches start only what it still
    ///   lacks, and the new nodes join that cluster (its bootstrap is not
    ///   written again). Leftovers beyond the spec that are members stay
    ///   for the health check, which finds them surplus and heals them
    ///   out safely; the others are terminated.
    ///
    /// An update keeps the nodes the record names and terminates only the
    /// leftovers that are not members of its cluster; members beyond the
    /// spec are the health check's, as above.
    pub(crate) async fn leftovers(&self, ctx: &StepContext<'_>) -> StepResult {
        let spec = target(ctx.plan)?;
        let recorded: Vec<&str> = ctx
            .deployment
            .access
            .as_ref()
            .map(|a| a.nodes.iter().map(|n| n.name.as_str()).collect())
            .unwrap_or_default();
        let is_update = matches!(ctx.plan.params, floe_domain::plan::PlanParams::Update(_));
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        // Not this plan's, not the deployment's recorded nodes (an update
        // runs on those), and not terminated yet.
        let left: Vec<&Instance> = instances
            .iter()
            .filter(|i| i.tags.get(TAG_PLAN) != Some(&ctx.plan.id))
            .filter(|i| !(is_update && recorded.contains(&i.id.as_str())))
            .filter(|i| i.state != InstanceState::Terminated)
            .collect();
        // Shutting down: on their way out already, waited for.
        let going: Vec<&Instance> = left.iter().copied().filter(|i| is_gone(i.state)).collect();
        let there: Vec<&Instance> = left.iter().copied().filter(|i| !is_gone(i.state)).collect();
        let earlier = ctx
            .optional_output_of::<LeftoversOutput>(LEFTOVERS_STEP)?
            .unwrap_or_default();
        if there.is_empty() && going.is_empty() {
            if earlier == LeftoversOutput::default() {
                ctx.log("no instance left by an earlier plan");
            }
            return Ok(done(&earlier));
        }
        // The cluster they formed, if one answers.
        let members: Vec<String> = match self.clusters.client(ctx.deployment, &[]).await {
            Ok(client) => client
                .nodes()
                .await
                .map(|n| n.into_iter().map(|n| n.name).collect())
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        if is_update && members.is_empty() {
            // Which instances the cluster has cannot be told: none is touched.
            ctx.log(format!(
                "{} instances not recorded as the deployment's nodes, and no cluster answers: left as they are",
                there.len() + going.len()
            ));
            return Ok(done(&earlier));
        }
        let member = |i: &Instance| members.contains(&i.id);
        let cluster = is_update || there.iter().any(|i| member(i));
        let mut adopted = Vec::new();
        let mut terminate = Vec::new();
        let mut surplus = Vec::new();
        if !cluster {
            terminate.extend(there.iter().map(|i| i.id.clone()));
        } else {
            for g in &spec.node_groups {
                let mut of_group: Vec<&Instance> = there
                    .iter()
                    .copied()
                    .filter(|i| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
                    .collect();
                of_group.sort_by_key(|i| (!member(i), i.id.clone()));
                for (n, i) in of_group.into_iter().enumerate() {
                    if !is_update && (n as u32) < g.count {
                        adopted.push(i.id.clone());
                    } else if member(i) {
                        surplus.push(i.id.clone());
                    } else {
                        terminate.push(i.id.clone());
                    }
                }
            }
            // Of no group of the spec.
            for i in there.iter().filter(|i| {
                !spec
                    .node_groups
                    .iter()
                    .any(|g| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
            }) {
                if member(i) {
                    surplus.push(i.id.clone());
                } else {
                    terminate.push(i.id.clone());
                }
            }
        }
        if !terminate.is_empty() {
            self.compute.terminate(&terminate).await?;
            ctx.log(format!(
                "terminated {}, left by an earlier plan{}",
                terminate.join(", "),
                if cluster {
                    ", not in the cluster"
                } else {
                    ": they formed no cluster, the new nodes bootstrap a fresh one"
                }
            ));
        }
        if !adopted.is_empty() {
            ctx.log(format!(
                "adopted {}, left by an earlier plan in the cluster they formed: the new nodes join it",
                adopted.join(", ")
            ));
        }
        if !surplus.is_empty() {
            ctx.log(format!(
                "{} beyond the spec, in the cluster: the health check heals them out",
                surplus.join(", ")
            ));
        }
        let mut output = LeftoversOutput {
            cluster: cluster || earlier.cluster,
            adopted,
            terminated: earlier.terminated,
        };
        output.terminated.extend(terminate.iter().cloned());
        output.terminated.sort();
        output.terminated.dedup();
        // Nothing new starts while a terminated one may still answer.
        let waiting = going.len() + terminate.len();
        if waiting > 0 && !cluster {
            if ctx.elapsed() > self.settings.boot_timeout {
                return Err(StepFailure::permanent(
                    "terminate_timeout",
                    format!(
                        "{waiting} instances left by an earlier plan still not terminated after {} s",
                        ctx.elapsed().as_secs()
                    ),
                ));
            }
            return Ok(Outcome::Wait {
                after: self.settings.poll,
                note: format!("{waiting} instances left by an earlier plan still terminating"),
            });
        }
        Ok(done(&output))
    }

    /// `template:{group}`: the group's launch template, with the boot
    /// script of its nodes (named per deployment, group and plan, so a
    /// second run finds the first one's).
    pub(crate) async fn ensure_template(
        &self,
        ctx: &StepContext<'_>,
        group_id: &str,
    ) -> StepResult {
        let (spec, g) = target_group(ctx.plan, group_id)?;
        let g = &g;
        let Some(instance) = catalog::lookup(&g.instance_type) else {
            return Err(StepFailure::permanent(
                "unknown_instance_type",
                format!("{} is not in the instance catalog", g.instance_type),
            ));
        };
        let repo = self.client_repository(ctx, &spec).await?;
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
            endpoint: ctx.deployment.endpoint_for_nodes(),
        };
        let instance_profile = self.instance_profile(ctx).await?;
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
            instance_profile,
        };
        let id = self.compute.ensure_launch_template(&template).await?;
        ctx.log(format!(
            "launch template {name} ({id}) for {} ({})",
            g.instance_type,
            instance.arch.as_str()
        ));
        Ok(done(&TemplateOutput { name, id }))
    }

    /// `launch:{group}`: the group's instances, spread over its zones, each
    /// zone's launch with a client token of its own so that a second run
    /// starts nothing more.
    pub(crate) async fn launch(&self, ctx: &StepContext<'_>, group_id: &str) -> StepResult {
        let (spec, g) = target_group(ctx.plan, group_id)?;
        let g = &g;
        let template = ctx
            .output_of::<TemplateOutput>(&format!("template:{group_id}"))?
            .name;
        let index = spec
            .node_groups
            .iter()
            .position(|x| x.id == g.id)
            .unwrap_or(0);
        // What earlier runs of this step started, by launch: a launch that
        // fell back to another zone used another client token, so only its
        // tag finds it again.
        let earlier = self.compute.instances(&ctx.plan.deployment_id).await?;
        // Nodes of the group adopted from a plan ended by force count
        // towards their zone's share.
        let adopted = adopted(ctx)?.adopted;
        let adopted_in = |zone: usize| {
            earlier
                .iter()
                .filter(|i| adopted.contains(&i.id))
                .filter(|i| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
                .filter(|i| super::heal::launch_zone(i) == Some(zone as u32))
                .count() as u32
        };
        let mut ids = Vec::new();
        let kept = earlier
            .iter()
            .filter(|i| adopted.contains(&i.id))
            .filter(|i| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
            .count() as u32;
        let mut remaining = g.count.saturating_sub(kept);
        for (zone, count) in spread(g.count, g.zone_count).into_iter().enumerate() {
            let count = count.saturating_sub(adopted_in(zone)).min(remaining);
            remaining -= count;
            if count == 0 {
                continue;
            }
            // Deterministic per plan, group and zone: a re-run after a crash
            // gets the same instances back instead of starting more.
            let token_base = format!(
                "{}-{index}-{zone}",
                ctx.plan.id.get(..24).unwrap_or(&ctx.plan.id)
            );
            let started: Vec<String> = earlier
                .iter()
                .filter(|i| i.tags.get(TAG_LAUNCH) == Some(&token_base) && !is_gone(i.state))
                .map(|i| i.id.clone())
                .collect();
            if !started.is_empty() {
                // Any zone's attempt counts: launching again in the first
                // zone after another zone's answer was lost would start the
                // share twice.
                ctx.log(format!(
                    "{} nodes of {group_id} already started",
                    started.len()
                ));
                ids.extend(started);
                continue;
            }
            let mut launch_tags = tags(ctx.plan, Some(group_id));
            launch_tags.insert(TAG_LAUNCH.to_string(), token_base.clone());
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
                    template_name: template.clone(),
                    count,
                    zone: z,
                    client_token: token,
                    tags: launch_tags.clone(),
                };
                let got = match self.compute.launch(&request).await {
                    Err(ComputeError::InsufficientCapacity { zone, message }) => {
                        ctx.log(format!(
                            "zone {zone} has no capacity for {}: {message}",
                            g.instance_type
                        ));
                        last_error = Some(ComputeError::InsufficientCapacity { zone, message });
                        continue;
                    }
                    other => other?,
                };
                ctx.log(format!("{} nodes of {group_id} in zone {z}", got.len()));
                launched = Some(got);
                break;
            }
            match launched {
                Some(got) => ids.extend(got),
                None => {
                    return Err(last_error.map_or_else(
                        || StepFailure::transient("no zone accepted the launch"),
                        StepFailure::from,
                    ));
                }
            }
        }
        Ok(done(&LaunchOutput { instance_ids: ids }))
    }

    /// Terminates the instances this plan started for one group (or all groups).
    pub(crate) async fn terminate_own(
        &self,
        ctx: &StepContext<'_>,
        group_id: Option<&str>,
    ) -> StepResult {
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
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
            self.compute.terminate(&ids).await?;
            ctx.log(format!("terminated {}", ids.join(", ")));
        }
        Ok(done(&TerminatedOutput { terminated: ids }))
    }

    pub(crate) async fn wait_running(&self, ctx: &StepContext<'_>) -> StepResult {
        let spec = target(ctx.plan)?;
        // Only the groups this plan launches (an update leaves the others
        // be), or the nodes a heal replaces.
        let launched: Vec<&str> = ctx
            .plan
            .steps
            .iter()
            .filter_map(|s| s.step_id.strip_prefix("launch:"))
            .collect();
        let expected: u32 = match &ctx.plan.params {
            floe_domain::plan::PlanParams::Heal(p) => p.replacements.iter().map(|r| r.count).sum(),
            _ => {
                let adopted = adopted(ctx)?.adopted;
                let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
                spec.node_groups
                    .iter()
                    .filter(|g| launched.contains(&g.id.as_str()))
                    .map(|g| {
                        let kept = instances
                            .iter()
                            .filter(|i| adopted.contains(&i.id))
                            .filter(|i| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
                            .count() as u32;
                        g.count.saturating_sub(kept)
                    })
                    .sum()
            }
        };
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let ours: Vec<_> = instances
            .iter()
            .filter(|i| i.tags.get(TAG_PLAN) == Some(&ctx.plan.id))
            .collect();
        if let Some(lost) = ours.iter().find(|i| is_gone(i.state)) {
            return Err(StepFailure::permanent(
                "instance_lost",
                format!("instance {} stopped while the plan waited for it", lost.id),
            ));
        }
        let running = ours
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .count() as u32;
        if running >= expected {
            return Ok(done(&RunningOutput { running }));
        }
        if ctx.elapsed() > self.settings.boot_timeout {
            return Err(StepFailure::permanent(
                "boot_timeout",
                format!(
                    "{running} of {expected} nodes running after {} s",
                    ctx.elapsed().as_secs()
                ),
            ));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!("{running} of {expected} nodes running"),
        })
    }

    pub(crate) async fn terminate_all(&self, ctx: &StepContext<'_>) -> StepResult {
        self.remove_endpoint_records(ctx).await?;
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let ids: Vec<String> = instances
            .into_iter()
            .filter(|i| !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        if !ids.is_empty() {
            self.compute.terminate(&ids).await?;
        }
        ctx.log(format!("terminating {} nodes", ids.len()));
        Ok(done(&TerminatedOutput { terminated: ids }))
    }

    pub(crate) async fn wait_terminated(&self, ctx: &StepContext<'_>) -> StepResult {
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let left = instances
            .iter()
            .filter(|i| i.state != InstanceState::Terminated)
            .count();
        if left == 0 {
            // No node is left of the cluster: nothing kept for it is of use.
            self.clusters.forget(&ctx.plan.deployment_id).await;
            return Ok(Outcome::Done(Value::Null));
        }
        if ctx.elapsed() > self.settings.boot_timeout {
            return Err(StepFailure::permanent(
                "terminate_timeout",
                format!("{left} nodes still not terminated"),
            ));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!("{left} nodes still terminating"),
        })
    }

    /// Every running node of the deployment has joined its cluster (but
    /// those a heal replaces).
    pub(crate) async fn wait_joined(&self, ctx: &StepContext<'_>) -> StepResult {
        let joined = self.all_joined(ctx).await;
        self.waiting(ctx, joined, "join_timeout")
    }

    /// Done once every running node has joined, a wait else.
    async fn all_joined(&self, ctx: &StepContext<'_>) -> StepResult {
        let poll = self.settings.poll;
        let running =
            floe_clusters::running_nodes(self.compute.as_ref(), &ctx.plan.deployment_id).await?;
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let joined = client
            .nodes()
            .await
            .map_err(|e| StepFailure::elastic(e, "listing nodes"))?;
        // A heal's stopped or impaired nodes may never join again: they
        // are what it replaces.
        let replaced = super::heal::lost_ids(ctx.plan);
        let missing: Vec<&str> = running
            .iter()
            .filter(|r| !replaced.contains(r.node_name.as_str()))
            .filter(|r| !joined.iter().any(|j| j.name == r.node_name))
            .map(|r| r.node_name.as_str())
            .collect();
        if missing.is_empty() {
            ctx.log(format!("{} nodes in the cluster", joined.len()));
            return Ok(done(&JoinedOutput {
                nodes: joined.len(),
            }));
        }
        Ok(Outcome::Wait {
            after: poll,
            note: format!("waiting for {} to join", missing.join(", ")),
        })
    }

    /// The one place that turns a long wait into a failure: a wait (or a
    /// not-yet) once the step has waited longer than the boot timeout
    /// fails it as `failure_type`. Steps that wait on the cluster read it
    /// in a helper that uses `?`, then hand the result here.
    pub(crate) fn waiting(
        &self,
        ctx: &StepContext<'_>,
        result: StepResult,
        failure_type: &str,
    ) -> StepResult {
        match result {
            Ok(Outcome::Wait { note, .. }) if self.waited_too_long(ctx) => {
                Err(self.gave_up(ctx, failure_type, &note))
            }
            Ok(outcome) => Ok(outcome),
            Err(stop) => Err(self.stop_waiting(ctx, stop, failure_type)),
        }
    }

    /// [`DeploymentSteps::waiting`] for a failure alone (of a helper that
    /// returns something else than an outcome when it succeeds).
    pub(crate) fn stop_waiting(
        &self,
        ctx: &StepContext<'_>,
        stop: StepFailure,
        failure_type: &str,
    ) -> StepFailure {
        match stop {
            StepFailure::NotYet(note) | StepFailure::Outcome(Outcome::Wait { note, .. })
                if self.waited_too_long(ctx) =>
            {
                self.gave_up(ctx, failure_type, &note)
            }
            other => other,
        }
    }

    fn waited_too_long(&self, ctx: &StepContext<'_>) -> bool {
        ctx.elapsed() > self.settings.boot_timeout
    }

    fn gave_up(&self, ctx: &StepContext<'_>, failure_type: &str, note: &str) -> StepFailure {
        StepFailure::permanent(
            failure_type,
            format!("gave up after {} s: {note}", ctx.elapsed().as_secs()),
        )
    }

    /// Undoes `template:{group}`: the group's launch template goes.
    pub(crate) async fn delete_template(
        &self,
        ctx: &StepContext<'_>,
        group_id: &str,
    ) -> StepResult {
        self.compute
            .delete_launch_template(&template_name(ctx.plan, group_id))
            .await?;
        Ok(Outcome::Done(Value::Null))
    }

    /// Undoes `launch:{group}`: the group's instances this plan started go.
    pub(crate) async fn terminate_launched(
        &self,
        ctx: &StepContext<'_>,
        group_id: &str,
    ) -> StepResult {
        self.terminate_own(ctx, Some(group_id)).await
    }
}
