//! Update: grow and shrink. First, `leftovers`: instances a plan ended by
//! force left that are not in the cluster are terminated (those in it
//! beyond the spec the health check heals out). New nodes first: template:{group} and
//! launch:{group} for every group that changes (all of them when the
//! version, user settings or repository change) after node-security and
//! repository-credentials, then wait-running and wait-joined; then the old
//! nodes go: drain (exclude them from shard allocation), wait-drained,
//! exclude-masters and wait-masters-excluded (when master-eligible nodes
//! go: out of the voting configuration first), retire (terminate them),
//! wait-retired, clear-exclusion (the allocation and voting exclusions),
//! forget-templates. register-repository runs whenever the deployment has
//! a repository, changed or not: it restores Floe's registration if a
//! tenant changed or deleted it.
//!
//! `retire` is the point of no return: before it, unwinding terminates the
//! new nodes and lets shards back onto the old ones, leaving the previous
//! topology; after it, the old nodes are gone, so unwinding keeps the new
//! ones (terminating them would leave no cluster at all).

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext};
use crate::failure::{StepFailure, StepResult};
use crate::step::{Saga, action};
use crate::steps::client_repository_name;
use crate::steps::drain::update_shape;
use crate::steps::voting::{is_master_group, retires_masters};
use floe_domain::deployment::DeploymentSpec;
use floe_domain::plan::StepStatus;
use floe_domain::restore::CloneSource;
use serde_json::Value;

/// The steps that take a deployment running `current` to `target`; a
/// clone's `source` gives new nodes the client its mounted shards need;
/// `renew_all` replaces every node (a move to a stable endpoint).
pub fn saga(
    current: &DeploymentSpec,
    target: &DeploymentSpec,
    source: Option<&CloneSource>,
    renew_all: bool,
) -> Saga {
    let shape = update_shape(current, target, renew_all);
    let mut saga = Saga::default();
    // Does nothing; its undo, the last of an unwinding, lifts the
    // allocation exclusion the other undos leave behind.
    saga.step("begin", action!(nothing), action!(lift_exclusions));
    // A version change starts with a snapshot, as ECE's does: nodes on the
    // new version cannot be undone, a snapshot of the old one restores.
    if current.version != target.version && current.repository().is_some() {
        saga.step(
            "upgrade-snapshot",
            action!(upgrade_snapshot),
            action!(nothing),
        );
    }
    // Instances a plan ended by force left that never joined the cluster
    // go; those in it beyond the spec are the health check's to heal out.
    saga.step(
        crate::steps::nodes::LEFTOVERS_STEP,
        action!(leftovers),
        action!(nothing),
    );
    let grows = !shape.replaced.is_empty();
    // New nodes join with the deployment's certificates (made here for a
    // deployment created before Floe made them); the nodes that stay keep
    // them and the repository's keys, so neither undo removes anything.
    if grows {
        saga.step("node-security", action!(node_security), action!(nothing));
    }
    if grows && client_repository_name(target, source).is_some() {
        saga.step(
            "repository-credentials",
            action!(repository_credentials),
            action!(nothing),
        );
    }
    // Nodes that do not vote first, master-eligible ones last, as
    // Elastic's rolling upgrades go: an older node may not join a cluster
    // whose newest node (an upgraded master) is newer.
    let mut replaced = shape.replaced.clone();
    replaced.sort_by_key(|g| is_master_group(target, g));
    for g in &replaced {
        saga.group_step(
            "template",
            g,
            action!(ensure_template(group)),
            action!(unmake_template(group)),
        );
        saga.group_step(
            "launch",
            g,
            action!(launch(group)),
            action!(unlaunch(group)),
        );
    }
    if grows {
        saga.step("wait-running", action!(wait_running), action!(nothing));
    }
    saga.step("wait-joined", action!(wait_joined), action!(nothing));
    // Registered again even when unchanged: a tenant may have changed or
    // deleted Floe's registrations (the health check warns of it), and an
    // update restores what Floe owns on the cluster.
    if target.repository().is_some() {
        saga.step(
            "register-repository",
            action!(register_repository),
            action!(nothing),
        );
    }

    if !shape.retiring.is_empty() {
        saga.step("drain", action!(drain), action!(nothing));
        saga.step("wait-drained", action!(wait_drained), action!(nothing));
        // Master-eligible nodes leave the voting configuration before
        // they go, and before the point of no return, so that a cluster
        // that cannot reconfigure unwinds to its old topology.
        if retires_masters(current, &shape.retiring) {
            saga.step(
                "exclude-masters",
                action!(exclude_masters),
                action!(restore_voting),
            );
            saga.step(
                "wait-masters-excluded",
                action!(wait_masters_excluded),
                action!(nothing),
            );
        }
        saga.step("retire", action!(retire), action!(past_no_return));
        saga.step("wait-retired", action!(wait_retired), action!(nothing));
        saga.step(
            "clear-exclusion",
            action!(clear_exclusion),
            action!(nothing),
        );
        saga.step(
            "forget-templates",
            action!(forget_templates),
            action!(nothing),
        );
    }
    // Last: the nodes the deployment now runs on, for the api to reach.
    // A deployment from before the platform license, or one busy when it
    // changed, gets it with its next update.
    saga.step(
        crate::steps::license::STEP,
        action!(ensure_license),
        action!(nothing),
    );
    saga.step("record-access", action!(record_access), action!(nothing));
    saga
}

/// Once `retire` has started, old nodes may be gone even if its result was
/// never recorded (a crash, a failure mid-way).
fn retire_started(ctx: &StepContext<'_>) -> bool {
    ctx.plan
        .steps
        .iter()
        .any(|s| s.step_id == "retire" && s.status != StepStatus::Pending)
}

impl DeploymentSteps {
    /// Undoes `template:{group}`, unless the old nodes are gone.
    async fn unmake_template(&self, ctx: &StepContext<'_>, group: &str) -> StepResult {
        if retire_started(ctx) {
            ctx.log("the old nodes are gone: the new ones stay");
            return Ok(Outcome::Done(Value::Null));
        }
        self.delete_template(ctx, group).await
    }

    /// Undoes `launch:{group}`, unless the old nodes are gone. The cluster
    /// may already keep shards on the new nodes (it rebalances onto nodes
    /// that join): they move back first; and new master-eligible nodes may
    /// vote: they leave the voting configuration first.
    async fn unlaunch(&self, ctx: &StepContext<'_>, group: &str) -> StepResult {
        if retire_started(ctx) {
            ctx.log("the old nodes are gone: the new ones stay");
            return Ok(Outcome::Done(Value::Null));
        }
        self.drain_new_nodes(ctx).await?;
        self.unvote_new_nodes(ctx, group).await?;
        self.terminate_launched(ctx, group).await
    }

    /// `retire` has no undo: undoing anything after it would leave no
    /// cluster at all. Failing the undo marks the deployment `failed` for a
    /// person to look at (re-applying the change finishes it).
    async fn past_no_return(&self, _ctx: &StepContext<'_>) -> StepResult {
        Err(StepFailure::permanent(
            "point_of_no_return",
            "the old nodes were terminated and the cluster runs on the new ones; apply the change again to finish it",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::saga;
    use floe_domain::deployment::DeploymentSpec;
    use serde_json::json;

    fn spec(version: &str, repository: bool) -> Result<DeploymentSpec, serde_json::Error> {
        let mut s = json!({"name": "logs", "version": version, "node_groups": [
            {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
            {"id": "hot", "roles": ["data_hot", "data_content"], "instance_type": "m6g.xlarge", "count": 2, "zone_count": 2, "storage": {"size_gb": 100}},
            {"id": "warm", "roles": ["data_warm"], "instance_type": "m6g.xlarge", "count": 2, "zone_count": 2, "storage": {"size_gb": 100}}
        ]});
        if repository {
            s["snapshot"] = json!({"repository": "main"});
        }
        serde_json::from_value(s)
    }

    /// Issue 12, defect 3 (b): a mount clone has no repository of its own;
    /// new nodes still need the client of the source its shards live in.
    #[test]
    fn new_nodes_of_a_clone_get_its_sources_client() -> Result<(), serde_json::Error> {
        use floe_domain::restore::{CloneSource, RestoreMode};
        let current = spec("8.15.3", false)?;
        let mut grown = current.clone();
        grown.node_groups[1].count = 3;
        let source = CloneSource {
            source_deployment_id: "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c".into(),
            repository: "main".into(),
            registered_as: "main".into(),
            snapshot: "nightly-1".into(),
            snapshot_sort_millis: 0,
            mode: RestoreMode::Mount,
            pinned: true,
            snapshot_version: None,
            license: None,
        };
        let ids = saga(&current, &grown, Some(&source), false).ids();
        assert!(ids.iter().any(|s| s == "repository-credentials"), "{ids:?}");
        let plain = saga(&current, &grown, None, false).ids();
        assert!(
            !plain.iter().any(|s| s == "repository-credentials"),
            "{plain:?}"
        );

        // A start registers the source again, before anything restores.
        let params = floe_domain::plan::StartParams {
            spec: current.clone(),
            restore: None,
        };
        let ids = super::super::start::saga(&params, Some(&source)).ids();
        let at = |id: &str| ids.iter().position(|s| s == id);
        assert!(at("repository-credentials") < at("launch:hot"), "{ids:?}");
        assert!(at("register-source") > at("wait-joined"), "{ids:?}");
        let restored = CloneSource {
            mode: RestoreMode::Restore,
            ..source
        };
        let ids = super::super::start::saga(&params, Some(&restored)).ids();
        assert!(!ids.iter().any(|s| s == "register-source"), "{ids:?}");
        Ok(())
    }

    #[test]
    fn a_version_change_snapshots_first_and_replaces_the_masters_last()
    -> Result<(), serde_json::Error> {
        // (from, to, repository attached, snapshot first)
        let cases = [
            ("8.15.3", "8.17.0", true, true),
            ("8.15.3", "8.17.0", false, false),
            ("7.17.25", "8.15.3", true, true),
            ("7.17.25", "8.15.3", false, false),
            ("8.15.3", "8.15.3", true, false),
        ];
        for (from, to, repository, snapshot) in cases {
            let ids = saga(
                &spec(from, repository)?,
                &spec(to, repository)?,
                None,
                false,
            )
            .ids();
            let case = format!("{from} -> {to}, repository {repository}");
            assert_eq!(
                ids.get(1).map(String::as_str) == Some("upgrade-snapshot"),
                snapshot,
                "{case}: {ids:?}"
            );
            if from == to {
                continue;
            }
            let at = |id: &str| ids.iter().position(|s| s == id);
            assert!(at("launch:hot") < at("launch:masters"), "{case}: {ids:?}");
            assert!(at("launch:warm") < at("launch:masters"), "{case}: {ids:?}");
            assert!(at("upgrade-snapshot") < at("launch:hot"), "{case}: {ids:?}");
        }
        Ok(())
    }
}
