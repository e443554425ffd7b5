//! Heal: nodes the health check found lost started again, each in its
//! group and zone, from a launch template made from the spec the
//! deployment runs (as its nodes were); then the plan waits until they run
//! and have joined the cluster, and records the nodes for the api.
//!
//! A heal only adds nodes: the lost ones are gone already, and no node
//! that runs is stopped, so it never takes a vote from the cluster's
//! masters. A lost master-eligible node leaves the voting configuration as
//! Elasticsearch shrinks it by itself; its replacement joins and may vote.
//! A cluster that lost a majority of its masters has no master to join:
//! its heal waits, times out and unwinds, terminating only the nodes it
//! started (such a cluster needs an operator).

use crate::step::{Saga, action};
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
            action!(terminate_launched(group)),
        );
    }
    saga.step("wait-running", action!(wait_running), action!(nothing));
    saga.step("wait-joined", action!(wait_joined), action!(nothing));
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
        let params = HealParams {
            spec,
            replacements: vec![r("masters", 0), r("hot", 1), r("hot", 0)],
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
                "record-access"
            ]
        );
        Ok(())
    }
}
