//! The judgement of one deployment's health: from the facts a probe read
//! to what the record says and which nodes a heal replaces. Pure, so that
//! every case is a row of a table test.

use crate::steps::heal::launch_zone;
use crate::steps::{is_gone, spread};
use floe_compute::{Instance, InstanceState, TAG_NODE_GROUP};
use floe_domain::deployment::DeploymentSpec;
use floe_domain::health::NodeStatus;
use floe_domain::plan::Replacement;
use floe_elastic::{HealthStatus, NodeRow};
use std::collections::BTreeMap;

/// What one probe of a deployment found, and the nodes to replace.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub healthy: bool,
    pub problems: Vec<String>,
    pub nodes: Vec<NodeStatus>,
    pub replacements: Vec<Replacement>,
}

/// What a probe read of one deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// Its instances, in every state.
    pub instances: Vec<Instance>,
    /// The running instances that fail a status check, with the names of
    /// the failing checks.
    pub impaired: BTreeMap<String, Vec<&'static str>>,
    pub cluster: ClusterFacts,
}

/// What the cluster said, from a node that runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterFacts {
    /// No node answered; why.
    Unreachable(String),
    Reached {
        /// Its members (`_cat/nodes`); `None` when they could not be read.
        members: Option<Vec<NodeRow>>,
        /// Its health status, or why it could not be read.
        health: Result<HealthStatus, String>,
    },
}

/// Judges `facts` against `spec`: which nodes are missing, stopped or
/// impaired (each a problem, and a replacement in the zone that lacks it),
/// what the cluster says of itself, and each node's status.
pub fn judge(spec: &DeploymentSpec, facts: &Facts) -> Observation {
    let mut problems = Vec::new();
    let members = match &facts.cluster {
        ClusterFacts::Unreachable(e) => {
            problems.push(format!("the cluster cannot be reached: {e}"));
            None
        }
        ClusterFacts::Reached { members, health } => {
            match health {
                Ok(HealthStatus::Red) => problems.push("the cluster's health is red".to_string()),
                Ok(_) => {}
                Err(e) => problems.push(format!("the cluster's health cannot be read: {e}")),
            }
            members.as_ref()
        }
    };
    let mut nodes = Vec::new();
    let mut replacements = Vec::new();
    let mut expected_total = 0u32;
    for g in &spec.node_groups {
        expected_total += g.count;
        let judged = judge_group(spec, g, facts, members);
        problems.extend(judged.problems);
        nodes.extend(judged.nodes);
        replacements.extend(judged.replacements);
    }
    if let Some(members) = members {
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
    Observation {
        healthy: problems.is_empty(),
        problems,
        nodes,
        replacements,
    }
}

/// One node group's share of an [`Observation`].
struct GroupJudgement {
    problems: Vec<String>,
    nodes: Vec<NodeStatus>,
    replacements: Vec<Replacement>,
}

fn judge_group(
    spec: &DeploymentSpec,
    g: &floe_domain::deployment::NodeGroup,
    facts: &Facts,
    members: Option<&Vec<NodeRow>>,
) -> GroupJudgement {
    let mut problems = Vec::new();
    let ours: Vec<&Instance> = facts
        .instances
        .iter()
        .filter(|i| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
        .collect();
    // Stopped or impaired: there, but no use to the cluster.
    let broken = |i: &Instance| {
        matches!(i.state, InstanceState::Stopping | InstanceState::Stopped)
            || facts.impaired.contains_key(&i.id)
    };
    let live: Vec<&Instance> = ours
        .iter()
        .copied()
        .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
        .filter(|i| !broken(i))
        .collect();
    for i in ours.iter().filter(|i| broken(i)) {
        problems.push(match facts.impaired.get(&i.id) {
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
    let nodes = ours
        .iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .map(|i| {
            let member = members.and_then(|m| m.iter().find(|n| n.name == i.id));
            NodeStatus {
                instance_id: i.id.clone(),
                group: g.id.clone(),
                zone: i.zone.clone(),
                private_address: i.private_ip.clone(),
                state: state_name(i.state).to_string(),
                version: member
                    .map(|m| m.version.clone())
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| spec.version.clone()),
                roles: g
                    .roles
                    .iter()
                    .filter_map(|r| serde_json::to_value(r).ok())
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                joined: member.is_some(),
            }
        })
        .collect();
    let live_count = live.len() as u32;
    if live_count < g.count {
        problems.push(format!(
            "node group {} has {live_count} of {} nodes running",
            g.id, g.count
        ));
    }
    let mut replacements = Vec::new();
    // Each missing node goes back to the zone that lacks it; the stopped or
    // impaired ones it replaces first (the heal terminates those), then
    // ones already gone.
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
    // A stopped or impaired instance the group does not lack (its zone
    // runs enough others) still goes: a heal that launches nothing for it
    // terminates it, so that no stale node keeps a volume and an address.
    let named: Vec<&String> = replacements.iter().flat_map(|r| &r.lost).collect();
    let mut extra: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for i in ours.iter().filter(|i| broken(i) && !named.contains(&&i.id)) {
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
    GroupJudgement {
        problems,
        nodes,
        replacements,
    }
}

pub(crate) fn state_name(state: InstanceState) -> &'static str {
    match state {
        InstanceState::Pending => "pending",
        InstanceState::Running => "running",
        InstanceState::Stopping => "stopping",
        InstanceState::Stopped => "stopped",
        InstanceState::ShuttingDown => "shutting_down",
        InstanceState::Terminated => "terminated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_compute::TAG_LAUNCH;

    /// Three hot nodes over three zones.
    fn spec() -> DeploymentSpec {
        serde_json::from_value(serde_json::json!({"name": "logs", "version": "8.15.3", "node_groups": [
            {"id": "hot", "roles": ["data_hot"], "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3, "storage": {"size_gb": 50}}
        ]}))
        .unwrap_or_else(|e| panic!("spec: {e}"))
    }

    /// Instance `i-{zone}` of the hot group, launched for `zone`.
    fn node(zone: u32, state: InstanceState) -> Instance {
        Instance {
            id: format!("i-{zone}"),
            state,
            instance_type: "m6g.xlarge".into(),
            zone: format!("us-east-1{}", ["a", "b", "c", "d"][zone as usize]),
            private_ip: Some(format!("10.0.0.{zone}")),
            tags: BTreeMap::from([
                (TAG_NODE_GROUP.to_string(), "hot".to_string()),
                (TAG_LAUNCH.to_string(), format!("plan-0-{zone}")),
            ]),
        }
    }

    fn member(id: &str) -> NodeRow {
        NodeRow {
            id: format!("node-{id}"),
            name: id.to_string(),
            version: "8.15.3".into(),
        }
    }

    /// A cluster that answers green, with `members` joined.
    fn green(members: &[&str]) -> ClusterFacts {
        ClusterFacts::Reached {
            members: Some(members.iter().map(|m| member(m)).collect()),
            health: Ok(HealthStatus::Green),
        }
    }

    fn replacement(zone: u32, count: u32, lost: &[&str]) -> Replacement {
        Replacement {
            group: "hot".into(),
            zone,
            count,
            lost: lost.iter().map(|l| l.to_string()).collect(),
        }
    }

    use InstanceState::{Running, Stopped, Terminated};

    struct Row {
        case: &'static str,
        facts: Facts,
        healthy: bool,
        problems: &'static [&'static str],
        replacements: Vec<Replacement>,
    }

    fn facts(instances: Vec<Instance>, impaired: &[&str], cluster: ClusterFacts) -> Facts {
        Facts {
            instances,
            impaired: impaired
                .iter()
                .map(|i| (i.to_string(), vec!["instance status check"]))
                .collect(),
            cluster,
        }
    }

    #[test]
    fn the_judgement_of_each_kind_of_finding() {
        let all = || vec![node(0, Running), node(1, Running), node(2, Running)];
        let rows = [
            Row {
                case: "every node running and joined",
                facts: facts(all(), &[], green(&["i-0", "i-1", "i-2"])),
                healthy: true,
                problems: &[],
                replacements: vec![],
            },
            Row {
                case: "a node terminated: replaced in its zone",
                facts: facts(
                    vec![node(0, Running), node(1, Terminated), node(2, Running)],
                    &[],
                    green(&["i-0", "i-2"]),
                ),
                healthy: false,
                problems: &[
                    "node group hot has 2 of 3 nodes running",
                    "the cluster has 2 of 3 nodes",
                ],
                replacements: vec![replacement(1, 1, &["i-1"])],
            },
            Row {
                case: "a node gone without a trace: replaced, naming none",
                facts: facts(
                    vec![node(0, Running), node(2, Running)],
                    &[],
                    green(&["i-0", "i-2"]),
                ),
                healthy: false,
                problems: &[
                    "node group hot has 2 of 3 nodes running",
                    "the cluster has 2 of 3 nodes",
                ],
                replacements: vec![replacement(1, 1, &[])],
            },
            Row {
                case: "a node stopped",
                facts: facts(
                    vec![node(0, Running), node(1, Running), node(2, Stopped)],
                    &[],
                    green(&["i-0", "i-1"]),
                ),
                healthy: false,
                problems: &[
                    "instance i-2 of node group hot is stopped",
                    "node group hot has 2 of 3 nodes running",
                    "the cluster has 2 of 3 nodes",
                ],
                replacements: vec![replacement(2, 1, &["i-2"])],
            },
            Row {
                case: "a node impaired, still in the cluster",
                facts: facts(all(), &["i-0"], green(&["i-0", "i-1", "i-2"])),
                healthy: false,
                problems: &[
                    "instance i-0 of node group hot is impaired (instance status check failing)",
                    "node group hot has 2 of 3 nodes running",
                ],
                replacements: vec![replacement(0, 1, &["i-0"])],
            },
            Row {
                case: "a stopped node the group does not lack: terminated, nothing launched",
                facts: facts(
                    {
                        let mut extra = node(1, Stopped);
                        extra.id = "i-9".into();
                        let mut v = all();
                        v.push(extra);
                        v
                    },
                    &[],
                    green(&["i-0", "i-1", "i-2"]),
                ),
                healthy: false,
                problems: &["instance i-9 of node group hot is stopped"],
                replacements: vec![replacement(1, 0, &["i-9"])],
            },
            Row {
                case: "a running node not in the cluster",
                facts: facts(all(), &[], green(&["i-0", "i-1"])),
                healthy: false,
                problems: &["i-2 not in the cluster", "the cluster has 2 of 3 nodes"],
                replacements: vec![],
            },
            Row {
                case: "the cluster cannot be reached: a finding, no heal",
                facts: facts(all(), &[], ClusterFacts::Unreachable("refused".into())),
                healthy: false,
                problems: &["the cluster cannot be reached: refused"],
                replacements: vec![],
            },
            Row {
                case: "the cluster is red: a finding, no heal",
                facts: facts(
                    all(),
                    &[],
                    ClusterFacts::Reached {
                        members: Some(vec![member("i-0"), member("i-1"), member("i-2")]),
                        health: Ok(HealthStatus::Red),
                    },
                ),
                healthy: false,
                problems: &["the cluster's health is red"],
                replacements: vec![],
            },
            Row {
                case: "nothing readable from the cluster but that it answered",
                facts: facts(
                    all(),
                    &[],
                    ClusterFacts::Reached {
                        members: None,
                        health: Err("timed out".into()),
                    },
                ),
                healthy: false,
                problems: &["the cluster's health cannot be read: timed out"],
                replacements: vec![],
            },
        ];
        for row in rows {
            let o = judge(&spec(), &row.facts);
            assert_eq!(o.healthy, row.healthy, "{}: {o:?}", row.case);
            assert_eq!(o.problems, row.problems, "{}", row.case);
            assert_eq!(o.replacements, row.replacements, "{}", row.case);
        }
    }

    #[test]
    fn each_node_but_the_terminated_is_listed_with_what_the_cluster_says() {
        let facts = facts(
            vec![node(0, Running), node(1, Stopped), node(2, Terminated)],
            &[],
            green(&["i-0"]),
        );
        let o = judge(&spec(), &facts);
        let listed: Vec<(&str, &str, bool)> = o
            .nodes
            .iter()
            .map(|n| (n.instance_id.as_str(), n.state.as_str(), n.joined))
            .collect();
        assert_eq!(
            listed,
            [("i-0", "running", true), ("i-1", "stopped", false)]
        );
        assert!(o.nodes.iter().all(|n| n.version == "8.15.3"));
        assert_eq!(o.nodes[0].roles, ["data_hot"]);
    }
}
