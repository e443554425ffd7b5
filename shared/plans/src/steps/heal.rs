//! A heal's `replace:{group}`: the group's lost nodes started again in the
//! zones they were lost from, and what the health check reads of a zone;
//! and its `retire-lost`: the lost nodes still there (stopped, impaired)
//! terminated once their replacements joined.

use super::{is_gone, outcome_of, tags, template_name};
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done, fail};
use crate::outputs::{LaunchOutput, TerminatedOutput};
use floe_compute::{ComputeError, Instance, LaunchRequest, TAG_LAUNCH};
use floe_domain::plan::{Plan, PlanParams, StepStatus};
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

impl DeploymentSteps {
    /// `replace:{group}`: the group's replacements, each zone's with a
    /// launch tag and client token of its own, so that a second run starts
    /// nothing more.
    pub(crate) async fn replace(&self, ctx: &StepContext<'_>, group_id: &str) -> Outcome {
        let PlanParams::Heal(params) = &ctx.plan.params else {
            return fail("invalid_plan", "replace is a step of heal plans");
        };
        let index = params
            .spec
            .node_groups
            .iter()
            .position(|g| g.id == group_id)
            .unwrap_or(0);
        let earlier = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(all) => all,
            Err(e) => return outcome_of(e),
        };
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
            match self.compute.launch(&request).await {
                Ok(got) => {
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
                // The zone the node was lost from has none of its type
                // now: the next check tries again (a heal keeps its zone).
                Err(ComputeError::InsufficientCapacity { zone, message }) => {
                    return Outcome::Retry(format!("no capacity in zone {zone}: {message}"));
                }
                Err(e) => return outcome_of(e),
            }
        }
        done(&LaunchOutput { instance_ids: ids })
    }

    /// Undoes `replace:{group}`: the replacements go, unless the nodes
    /// they replace may be gone already.
    pub(crate) async fn unreplace(&self, ctx: &StepContext<'_>, group_id: &str) -> Outcome {
        if retire_started(ctx.plan) {
            ctx.log("the lost nodes may be terminated: their replacements stay");
            return Outcome::Done(serde_json::Value::Null);
        }
        self.terminate_launched(ctx, group_id).await
    }

    /// `retire-lost`: the nodes the heal replaced that are still there
    /// (stopped, impaired) are terminated, so that none keeps its volume,
    /// its address or a stale place in the cluster. Only the deployment's
    /// own instances are looked at; those gone already need nothing.
    pub(crate) async fn retire_lost(&self, ctx: &StepContext<'_>) -> Outcome {
        let lost = lost_ids(ctx.plan);
        if lost.is_empty() {
            return done(&TerminatedOutput { terminated: vec![] });
        }
        let instances = match self.compute.instances(&ctx.plan.deployment_id).await {
            Ok(i) => i,
            Err(e) => return outcome_of(e),
        };
        let there: Vec<String> = instances
            .into_iter()
            .filter(|i| lost.contains(i.id.as_str()) && !is_gone(i.state))
            .map(|i| i.id)
            .collect();
        if there.is_empty() {
            ctx.log("the replaced nodes are gone already");
        } else {
            if let Err(e) = self.compute.terminate(&there).await {
                return outcome_of(e);
            }
            ctx.log(format!("terminated {}, replaced", there.join(", ")));
        }
        done(&TerminatedOutput { terminated: there })
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
