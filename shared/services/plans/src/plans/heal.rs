//! Heal: nodes the health check found lost started again, each in its
//! group and zone, from a launch template made from the spec the
//! deployment runs (as its nodes were); then the plan waits until they run
//! and have joined the cluster, terminates the lost nodes that are still
//! there (stopped, or impaired: failing an EC2 status check), and records
//! the nodes for the api.
//!
//! Steps: template:{group} and replace:{group} for each group with lost
//! nodes (groups that do not vote first), wait-running, wait-joined, then,
//! when lost nodes of a master-eligible group are named,
//! exclude-lost-masters and wait-lost-masters-excluded, retire-lost,
//! clear-lost-exclusion; and record-access.
//!
//! A heal adds nodes before it removes any: a node that is gone is gone
//! already, and one that is stopped or impaired is terminated only once its
//! replacement has joined, so the cluster never has fewer working nodes
//! than when the check looked. A lost master-eligible node that is gone
//! leaves the voting configuration as Elasticsearch shrinks it by itself;
//! its replacement joins and may vote. One that is still there (an
//! impaired node may still be a member of the cluster and of its voting
//! configuration) is excluded from voting and terminated only once out of
//! the configuration, as an update retires masters, and the exclusions
//! are cleared once it left (see [`crate::steps::heal`]). A cluster that
//! lost a majority of its masters has no master to join: its heal waits,
//! times out and unwinds, terminating only the nodes it started (such a
//! cluster needs an operator). Unwinding clears the exclusions the heal
//! added, and takes joined master-eligible replacements out of the voting
//! configuration before it terminates them.
//!
//! `retire-lost` is the point after which the replacements stay: once the
//! lost nodes may be terminated, unwinding keeps the nodes that took their
//! place.
//!
//! Nodes beyond the spec (`surplus`: a plan ended by force left them, a
//! node was started by hand) are lost nodes with no replacement: after
//! wait-joined, drain-surplus excludes them from shard allocation and
//! wait-surplus-drained waits until no shard is left on them; master-
//! eligible ones leave the voting configuration as any lost master does;
//! retire-lost terminates them, and clear-surplus-exclusion lifts the
//! allocation exclusion. So a surplus node in the cluster goes as an
//! update retires one, never with the only copy of a shard.
//!
//! And a heal restores what Floe owns on the cluster: register-repository
//! registers the deployment's repository again with Floe's settings, in
//! case a tenant changed them (a mount clone's read-only source is
//! registered again by its next start).

use crate::step::{Saga, action};
use crate::steps::heal::replaces_lost_masters;
use crate::steps::voting::is_master_group;
use floe_domain::plan::HealParams;

/// The steps that replace `params.replacements`.
pub fn saga(params: &HealParams) -> Saga {
    let mut saga = Saga::default();
    let mut groups: Vec<&str> = Vec::new();
    for r in &params.replacements {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    // Nodes that do not vote first, as an update orders them.
    groups.sort_by_key(|g| is_master_group(&params.spec, g));
    for g in groups {
        saga.group_step(
            "template",
            g,
            action!(ensure_template(group)),
            action!(delete_template(group)),
        );
        saga.group_step(
            "replace",
            g,
            action!(replace(group)),
            action!(unreplace(group)),
        );
    }
    saga.step("wait-running", action!(wait_running), action!(nothing));
    saga.step("wait-joined", action!(wait_joined), action!(nothing));
    let surplus = !params.surplus.is_empty();
    if surplus {
        saga.step(
            "drain-surplus",
            action!(drain_surplus),
            action!(lift_surplus_exclusion),
        );
        saga.step(
            "wait-surplus-drained",
            action!(wait_surplus_drained),
            action!(nothing),
        );
    }
    // Lost masters still there leave the voting configuration before they
    // go, once their replacements joined to take the votes.
    let voting = replaces_lost_masters(params);
    if voting {
        saga.step(
            "exclude-lost-masters",
            action!(exclude_lost_masters),
            action!(restore_lost_voting),
        );
        saga.step(
            "wait-lost-masters-excluded",
            action!(wait_lost_masters_excluded),
            action!(nothing),
        );
    }
    saga.step("retire-lost", action!(retire_lost), action!(nothing));
    if voting {
        saga.step(
            "clear-lost-exclusion",
            action!(clear_lost_exclusion),
            action!(nothing),
        );
    }
    if surplus {
        saga.step(
            "clear-surplus-exclusion",
            action!(lift_surplus_exclusion),
            action!(nothing),
        );
    }
    // What Floe owns on the cluster, as Floe set it.
    if params.spec.repository().is_some() {
        saga.step(
            "register-repository",
            action!(register_repository),
            action!(nothing),
        );
    }
    saga.step("record-access", action!(record_access), action!(nothing));
    saga
}

#[cfg(test)]
mod tests {
    use super::saga;
    use floe_domain::plan::{HealParams, Replacement};
    use serde_json::json;

    #[test]
    fn a_heal_replaces_data_nodes_before_masters_and_ends_recording_access()
    -> Result<(), serde_json::Error> {
        let spec = serde_json::from_value(
            json!({"name": "logs", "version": "8.15.3", "node_groups": [
                {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
                {"id": "hot", "roles": ["data_hot", "data_content"], "instance_type": "m6g.xlarge", "count": 2, "zone_count": 2, "storage": {"size_gb": 100}}
            ]}),
        )?;
        let r = |group: &str, zone| Replacement {
            group: group.into(),
            zone,
            count: 1,
            lost: vec![],
        };
        let lost = |group: &str, zone, id: &str| Replacement {
            lost: vec![id.to_string()],
            ..r(group, zone)
        };
        let params = HealParams {
            spec,
            replacements: vec![r("masters", 0), r("hot", 1), r("hot", 0)],
            surplus: Vec::new(),
        };
        assert_eq!(
            saga(&params).ids(),
            [
                "template:hot",
                "replace:hot",
                "template:masters",
                "replace:masters",
                "wait-running",
                "wait-joined",
                "retire-lost",
                "record-access"
            ]
        );
        // Lost masters named: they leave the voting configuration first.
        let params = HealParams {
            replacements: vec![lost("masters", 0, "i-1"), lost("hot", 1, "i-2")],
            ..params
        };
        assert_eq!(
            saga(&params).ids(),
            [
                "template:hot",
                "replace:hot",
                "template:masters",
                "replace:masters",
                "wait-running",
                "wait-joined",
                "exclude-lost-masters",
                "wait-lost-masters-excluded",
                "retire-lost",
                "clear-lost-exclusion",
                "record-access"
            ]
        );
        // Only data nodes lost: no voting steps.
        let params = HealParams {
            replacements: vec![lost("hot", 1, "i-2")],
            ..params
        };
        assert_eq!(
            saga(&params).ids(),
            [
                "template:hot",
                "replace:hot",
                "wait-running",
                "wait-joined",
                "retire-lost",
                "record-access"
            ]
        );
        // Surplus master-eligible nodes: drained and out of the voting
        // configuration before they go; the repository registered again.
        let mut spec = params.spec.clone();
        spec.snapshot = serde_json::from_value(json!({"repository": "main"}))?;
        let params = HealParams {
            spec,
            replacements: vec![Replacement {
                count: 0,
                ..lost("masters", 2, "i-9")
            }],
            surplus: vec!["i-9".into()],
        };
        assert_eq!(
            saga(&params).ids(),
            [
                "template:masters",
                "replace:masters",
                "wait-running",
                "wait-joined",
                "drain-surplus",
                "wait-surplus-drained",
                "exclude-lost-masters",
                "wait-lost-masters-excluded",
                "retire-lost",
                "clear-lost-exclusion",
                "clear-surplus-exclusion",
                "register-repository",
                "record-access"
            ]
        );
        Ok(())
    }
}
