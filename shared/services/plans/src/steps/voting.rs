//! Master-eligible nodes leave without costing the quorum. Elasticsearch
//! elects its master by a majority of the voting configuration; nodes that
//! leave while still in it count as votes lost, and once half or more of
//! them are gone no master can be elected again. So before an update
//! retires master-eligible nodes they are excluded from voting
//! (`exclude-masters`) and the plan waits until the cluster has
//! reconfigured without them (`wait-masters-excluded`); only then does
//! `retire` terminate them, and `clear-exclusion` clears the exclusions
//! once they are gone.
//!
//! Elasticsearch keeps at most `cluster.max_voting_config_exclusions` (10)
//! exclusions. More master-eligible nodes than that retire in rounds,
//! inside `retire`: the ones whose exclusion has taken effect go, the
//! exclusions of the gone ones are cleared, the next ones are excluded.
//! Each round excludes only as many as Elasticsearch can drop from the
//! configuration while a live majority remains (it commits no
//! configuration without one), and terminates only nodes already out of
//! it, so no round removes a vote the quorum needs.
//!
//! A heal does the same for the lost master-eligible nodes still there
//! (stopped, or impaired: an impaired node may still be a member of the
//! cluster and of its voting configuration): `exclude-lost-masters` and
//! `wait-lost-masters-excluded` after its replacements joined, then
//! `retire-lost` (in rounds, through [`DeploymentSteps::retire_voters`]),
//! then `clear-lost-exclusion` (see [`crate::steps::heal`]).

use super::is_gone;
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::{DrainOutput, OldNode, TerminatedOutput, VotingExclusionsOutput};
use floe_domain::deployment::{DeploymentSpec, NodeRole};
use floe_domain::plan::StepError;
use floe_elastic::{ElasticClient, ElasticError};
use serde_json::Value;
use std::collections::BTreeSet;

/// Elasticsearch's default `cluster.max_voting_config_exclusions`.
pub(crate) const MAX_VOTING_EXCLUSIONS: usize = 10;

/// Whether group `group` of `spec` is master-eligible.
pub(crate) fn is_master_group(spec: &DeploymentSpec, group: &str) -> bool {
    spec.node_groups
        .iter()
        .any(|g| g.id == group && g.roles.contains(&NodeRole::Master))
}

/// Whether any of the `retiring` groups of `current` is master-eligible:
/// the update then needs the voting steps.
pub(crate) fn retires_masters(current: &DeploymentSpec, retiring: &[String]) -> bool {
    retiring.iter().any(|g| is_master_group(current, g))
}

/// The master-eligible nodes among those `drain` recorded, by name
/// (nodes are named after their instance), sorted.
fn old_masters(ctx: &StepContext<'_>) -> Result<Vec<String>, StepError> {
    let old: Vec<OldNode> = ctx
        .optional_output_of::<DrainOutput>("drain")?
        .map(|d| d.nodes)
        .unwrap_or_default();
    let mut names: Vec<String> = old
        .into_iter()
        .filter(|n| is_master_group(&ctx.deployment.spec, &n.group))
        .map(|n| n.id)
        .collect();
    names.sort();
    Ok(names)
}

/// The first round: as many of the old masters as one set of exclusions holds.
fn first_round(ctx: &StepContext<'_>) -> Result<Vec<String>, StepError> {
    let mut masters = old_masters(ctx)?;
    masters.truncate(MAX_VOTING_EXCLUSIONS);
    Ok(masters)
}

fn old_names(ctx: &StepContext<'_>) -> Vec<String> {
    ctx.optional_output_of::<DrainOutput>("drain")
        .ok()
        .flatten()
        .map(|d| d.nodes.into_iter().map(|n| n.id).collect())
        .unwrap_or_default()
}

/// Adding voting exclusions: a wait that ran out leaves them recorded
/// (the next step waits for them to take effect), so it counts as done.
fn recorded(added: Result<(), ElasticError>) -> Result<(), StepFailure> {
    match added {
        Ok(()) | Err(ElasticError::Timeout { .. }) => Ok(()),
        Err(e) => Err(StepFailure::elastic(
            e,
            "excluding master-eligible nodes from voting",
        )),
    }
}

impl DeploymentSteps {
    /// A client through a node that stays (none of `avoid`).
    async fn staying_client(
        &self,
        ctx: &StepContext<'_>,
        avoid: &[String],
    ) -> Result<ElasticClient, StepFailure> {
        Ok(self.clusters.client(ctx.deployment, avoid).await?)
    }

    /// `exclude-masters`: the first round of old master-eligible nodes is
    /// excluded from voting.
    pub(crate) async fn exclude_masters(&self, ctx: &StepContext<'_>) -> StepResult {
        let nodes = first_round(ctx)?;
        self.exclude_voters(ctx, nodes, &old_names(ctx)).await
    }

    /// `nodes` (one round, at most [`MAX_VOTING_EXCLUSIONS`]) excluded
    /// from voting, through a node that is none of `avoid`.
    pub(crate) async fn exclude_voters(
        &self,
        ctx: &StepContext<'_>,
        nodes: Vec<String>,
        avoid: &[String],
    ) -> StepResult {
        if nodes.is_empty() {
            return Ok(done(&VotingExclusionsOutput { nodes }));
        }
        let client = self.staying_client(ctx, avoid).await?;
        recorded(client.add_voting_config_exclusions(&nodes).await)?;
        ctx.log(format!("excluded {} from voting", nodes.join(", ")));
        Ok(done(&VotingExclusionsOutput { nodes }))
    }

    /// `wait-masters-excluded`: the cluster's voting configuration no
    /// longer holds the excluded nodes.
    pub(crate) async fn wait_masters_excluded(&self, ctx: &StepContext<'_>) -> StepResult {
        let nodes = first_round(ctx)?;
        self.wait_voters_excluded(ctx, nodes, &old_names(ctx)).await
    }

    /// Waits until the voting configuration no longer holds `nodes`,
    /// read through a node that is none of `avoid`; gives up after the
    /// boot timeout.
    pub(crate) async fn wait_voters_excluded(
        &self,
        ctx: &StepContext<'_>,
        nodes: Vec<String>,
        avoid: &[String],
    ) -> StepResult {
        let left = self.voters_left(ctx, nodes, avoid).await;
        self.waiting(ctx, left, "voting_exclusion_timeout")
    }

    /// Done once the voting configuration no longer holds `nodes`, a
    /// wait else.
    async fn voters_left(
        &self,
        ctx: &StepContext<'_>,
        nodes: Vec<String>,
        avoid: &[String],
    ) -> StepResult {
        if nodes.is_empty() {
            return Ok(done(&VotingExclusionsOutput { nodes }));
        }
        let client = self.staying_client(ctx, avoid).await?;
        let config = client
            .voting_configuration()
            .await
            .map_err(|e| StepFailure::elastic(e, "reading the voting configuration"))?;
        let voting: Vec<&str> = nodes
            .iter()
            .filter(|n| !config.has_left(n))
            .map(String::as_str)
            .collect();
        if voting.is_empty() {
            ctx.log(format!("{} no longer vote", nodes.join(", ")));
            return Ok(done(&VotingExclusionsOutput { nodes }));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!("{} still in the voting configuration", voting.join(", ")),
        })
    }

    /// Undoes `exclude-masters` (and, from `begin`, whatever an unwinding
    /// plan left): the old masters stay, so they vote again. Not waiting
    /// for them to leave: they are not leaving.
    pub(crate) async fn restore_voting(&self, ctx: &StepContext<'_>) -> StepResult {
        self.clear_voting(ctx, &[], false).await
    }

    /// Every voting exclusion cleared, through a node that is none of
    /// `avoid`. With `nodes_gone` Elasticsearch first waits until the
    /// excluded nodes have left the cluster (clearing the exclusion of a
    /// node still there would let it vote again); without, at once (for
    /// nodes that stay).
    pub(crate) async fn clear_voting(
        &self,
        ctx: &StepContext<'_>,
        avoid: &[String],
        nodes_gone: bool,
    ) -> StepResult {
        let client = self.clusters.client(ctx.deployment, avoid).await?;
        client
            .clear_voting_config_exclusions(nodes_gone)
            .await
            .map_err(|e| StepFailure::elastic(e, "clearing the voting exclusions"))?;
        Ok(Outcome::Done(Value::Null))
    }

    /// `retire`: the old nodes go. Nodes that do not vote go at once;
    /// master-eligible ones only once out of the voting configuration,
    /// in rounds of at most [`MAX_VOTING_EXCLUSIONS`] (see the module).
    /// Each run looks at what is, so a second run (or a resumed one)
    /// carries on where the first stopped.
    pub(crate) async fn retire(&self, ctx: &StepContext<'_>) -> StepResult {
        let old: Vec<OldNode> = ctx
            .optional_output_of::<DrainOutput>("drain")?
            .map(|d| d.nodes)
            .unwrap_or_default();
        let masters: BTreeSet<String> = old_masters(ctx)?.into_iter().collect();
        let all: Vec<String> = old.iter().map(|n| n.id.clone()).collect();
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let alive: BTreeSet<String> = instances
            .iter()
            .filter(|i| !is_gone(i.state))
            .map(|i| i.id.clone())
            .collect();
        let others: Vec<String> = all
            .iter()
            .filter(|id| !masters.contains(*id) && alive.contains(*id))
            .cloned()
            .collect();
        // Clients stop being sent to the old nodes before any of them goes.
        self.set_endpoint_records(ctx, &all).await?;
        if !others.is_empty() {
            self.compute.terminate(&others).await?;
            ctx.log(format!("terminated {}", others.join(", ")));
        }
        let pending: Vec<String> = masters
            .iter()
            .filter(|id| alive.contains(*id))
            .cloned()
            .collect();
        if pending.is_empty() || self.retire_voters(ctx, &pending, &all).await? {
            return Ok(done(&TerminatedOutput { terminated: all }));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!("{} master-eligible nodes to retire", pending.len()),
        })
    }

    /// One pass over master-eligible nodes that must go (`pending`, all
    /// running), through a client avoiding `avoid`: the ones out of the
    /// voting configuration are terminated, or else the next round of them
    /// is excluded. `Ok(true)` once every one of them was terminated.
    /// Gives up after the boot timeout.
    pub(crate) async fn retire_voters(
        &self,
        ctx: &StepContext<'_>,
        pending: &[String],
        avoid: &[String],
    ) -> Result<bool, StepFailure> {
        self.voting_round(ctx, pending, avoid)
            .await
            .map_err(|stop| self.stop_waiting(ctx, stop, "voting_exclusion_timeout"))
    }

    /// [`DeploymentSteps::retire_voters`]'s pass, before the timeout.
    async fn voting_round(
        &self,
        ctx: &StepContext<'_>,
        pending: &[String],
        avoid: &[String],
    ) -> Result<bool, StepFailure> {
        let client = self.clusters.client(ctx.deployment, avoid).await?;
        let config = client
            .voting_configuration()
            .await
            .map_err(|e| StepFailure::elastic(e, "reading the voting configuration"))?;
        let ready: Vec<String> = pending
            .iter()
            .filter(|n| config.has_left(n))
            .cloned()
            .collect();
        if !ready.is_empty() {
            // A compute error is never a wait: the timeout leaves it be.
            self.compute.terminate(&ready).await?;
            ctx.log(format!("terminated {}, no longer voting", ready.join(", ")));
            return Ok(ready.len() == pending.len());
        }
        // Excluded, but the cluster has not reconfigured yet: wait for it.
        let excluded_pending = config
            .voting_config_exclusions
            .iter()
            .any(|e| pending.contains(&e.node_name));
        if excluded_pending {
            return Err(StepFailure::NotYet(
                "waiting for the voting configuration to drop the excluded nodes".into(),
            ));
        }
        // The next round. The exclusions left are of nodes already gone;
        // they count towards the limit, so they are cleared first.
        if !config.voting_config_exclusions.is_empty() {
            client
                .clear_voting_config_exclusions(true)
                .await
                .map_err(|e| {
                    StepFailure::elastic(e, "clearing the voting exclusions of gone nodes")
                })?;
        }
        let mut round = pending.to_vec();
        round.truncate(MAX_VOTING_EXCLUSIONS);
        recorded(client.add_voting_config_exclusions(&round).await)?;
        ctx.log(format!("excluded {} from voting", round.join(", ")));
        Ok(false)
    }
}

impl DeploymentSteps {
    /// Before an unwinding update (or heal) terminates the
    /// master-eligible nodes it launched in `group`: once they joined they
    /// may hold votes the old nodes' quorum needs, so they leave the
    /// voting configuration first.
    /// `Ok` once none of them is running any more or they hold no vote; a
    /// not-yet while they are still retiring.
    pub(crate) async fn unvote_new_nodes(
        &self,
        ctx: &StepContext<'_>,
        group: &str,
    ) -> Result<(), StepFailure> {
        let target = super::target(ctx.plan)?;
        if !is_master_group(&target, group) {
            return Ok(());
        }
        let instances = self.compute.instances(&ctx.plan.deployment_id).await?;
        let pending: Vec<String> = instances
            .into_iter()
            .filter(|i| i.tags.get(floe_compute::TAG_PLAN) == Some(&ctx.plan.id))
            .filter(|i| i.tags.get(floe_compute::TAG_NODE_GROUP).map(String::as_str) == Some(group))
            .filter(|i| i.state == floe_compute::InstanceState::Running)
            .map(|i| i.id)
            .collect();
        if pending.is_empty() || self.retire_voters(ctx, &pending, &pending).await? {
            return Ok(());
        }
        Err(StepFailure::NotYet(format!(
            "{} new master-eligible nodes to retire",
            pending.len()
        )))
    }
}
