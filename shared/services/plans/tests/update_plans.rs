//! Grow-and-shrink update plans on simulated compute, with each
//! deployment's simulated Elasticsearch cluster following its instances:
//! resizing keeps every document, and a failure injected after any step
//! either restores the previous topology (before `retire`) or keeps the new
//! nodes and marks the deployment `failed` (after it).

use chrono::Utc;
use floe_clusters::Clusters;
use floe_compute::{Compute, InstanceState};
use floe_domain::deployment::{DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanParams, PlanStatus};
use floe_plans::engine::Steps;
use floe_secrets::LocalCipher;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

mod support;

use support::world::{World, write_documents};
use support::{FailAfter, Twice};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn spec(hot: u32, instance_type: &str) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({"name": "logs", "version": "8.15.3", "node_groups": [
        {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
        {"id": "hot", "roles": ["data_hot", "data_content", "ingest"], "instance_type": instance_type, "count": hot, "zone_count": 2, "storage": {"size_gb": 500}}
    ]}))
}

impl World {
    /// Records an update plan towards `target` and drives it to the end.
    async fn update(
        &self,
        deployment_id: &str,
        target: &DeploymentSpec,
        steps: Arc<dyn Steps>,
    ) -> Result<(PlanStatus, Plan), Box<dyn std::error::Error>> {
        self.run_plan(
            deployment_id,
            PlanParams::Update(target.clone()),
            |_| {},
            steps,
        )
        .await
    }

    /// Running instances per node group, and their ids.
    async fn running(
        &self,
        deployment_id: &str,
    ) -> Result<(usize, usize, BTreeSet<String>), Box<dyn std::error::Error>> {
        let instances = self.compute.instances(deployment_id).await?;
        let running: Vec<_> = instances
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .collect();
        let count = |g: &str| {
            running
                .iter()
                .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some(g))
                .count()
        };
        Ok((
            count("masters"),
            count("hot"),
            running.iter().map(|i| i.id.clone()).collect(),
        ))
    }
}

async fn get(url: &str) -> Result<Value, Box<dyn std::error::Error>> {
    Ok(reqwest::get(url).await?.json().await?)
}

/// The checks a user makes after a resize: every document is there, the
/// index is green, nodes are exactly the running instances, and no node is
/// left excluded from allocation.
async fn cluster_is_whole(world: &World, deployment_id: &str) -> TestResult {
    let url = world.url(deployment_id).await?;
    // Make the simulated cluster look at the instances as they are now.
    let d = world.deployment(deployment_id).await?;
    world.clusters.client(&d, &[]).await?;
    let count = get(&format!("{url}/orders/_count")).await?;
    assert_eq!(count["count"], 40, "{count}");
    let health = get(&format!("{url}/_cluster/health")).await?;
    assert_eq!(health["status"], "green", "{health}");
    let (_, _, running) = world.running(deployment_id).await?;
    let nodes: BTreeSet<String> = world
        .clusters
        .node_names(deployment_id)
        .await
        .into_iter()
        .collect();
    assert_eq!(nodes, running);
    let settings = get(&format!("{url}/_cluster/settings")).await?;
    assert!(
        settings["persistent"]
            .get("cluster.routing.allocation.exclude._name")
            .is_none(),
        "{settings}"
    );
    Ok(())
}

#[tokio::test]
async fn resize_three_to_five_to_three_keeps_every_document() -> TestResult {
    let world = World::new()?;
    let d = world.create(spec(3, "m6g.xlarge")?).await?;
    write_documents(&world.url(&d.id).await?).await?;
    let (_, _, before) = world.running(&d.id).await?;

    let (status, plan) = world
        .update(
            &d.id,
            &spec(5, "m6g.xlarge")?,
            Arc::new(Twice(world.steps())),
        )
        .await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "begin",
            "leftovers",
            "node-security",
            "template:hot",
            "launch:hot",
            "wait-running",
            "wait-joined",
            "drain",
            "wait-drained",
            "retire",
            "wait-retired",
            "clear-exclusion",
            "forget-templates",
            "license",
            "record-access"
        ],
        "only the hot group changes"
    );
    let (masters, hot, after) = world.running(&d.id).await?;
    assert_eq!((masters, hot), (3, 5));
    let masters_kept = before.intersection(&after).count();
    assert_eq!(masters_kept, 3, "the masters were left alone");
    cluster_is_whole(&world, &d.id).await?;
    let grown = world.deployment(&d.id).await?;
    assert_eq!(grown.status, DeploymentStatus::Running);
    assert_eq!(grown.spec.node_groups[1].count, 5);
    assert_eq!(
        world.compute.templates().len(),
        2,
        "the old hot template went: {:?}",
        world.compute.templates()
    );

    let (status, _) = world
        .update(&d.id, &spec(3, "m6g.xlarge")?, Arc::new(world.steps()))
        .await?;
    assert_eq!(status, PlanStatus::Succeeded);
    assert_eq!(world.running(&d.id).await?.1, 3);
    cluster_is_whole(&world, &d.id).await?;
    assert_eq!(world.deployment(&d.id).await?.spec.node_groups[1].count, 3);
    Ok(())
}

#[tokio::test]
async fn changing_the_instance_type_moves_to_the_other_architecture() -> TestResult {
    let world = World::new()?;
    let d = world.create(spec(3, "m5.xlarge")?).await?;
    write_documents(&world.url(&d.id).await?).await?;
    let (status, _) = world
        .update(&d.id, &spec(3, "m6g.xlarge")?, Arc::new(world.steps()))
        .await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let types: BTreeSet<String> = world
        .compute
        .instances(&d.id)
        .await?
        .into_iter()
        .filter(|i| i.state == InstanceState::Running)
        .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("hot"))
        .map(|i| i.instance_type)
        .collect();
    assert_eq!(types, BTreeSet::from(["m6g.xlarge".to_string()]));
    cluster_is_whole(&world, &d.id).await
}

#[tokio::test]
async fn a_failure_after_any_update_step_unwinds_or_keeps_the_new_nodes() -> TestResult {
    let steps = [
        "begin",
        "node-security",
        "template:hot",
        "launch:hot",
        "wait-running",
        "wait-joined",
        "drain",
        "wait-drained",
        "retire",
        "wait-retired",
        "clear-exclusion",
        "forget-templates",
        "license",
        "record-access",
    ];
    for (i, at) in steps.iter().enumerate() {
        let world = World::new()?;
        let d = world.create(spec(3, "m6g.xlarge")?).await?;
        write_documents(&world.url(&d.id).await?).await?;
        let (_, _, before) = world.running(&d.id).await?;
        let templates_before = world.compute.templates();
        let failing = Arc::new(FailAfter {
            inner: world.steps(),
            at: at.to_string(),
        });
        let (status, plan) = world
            .update(&d.id, &spec(5, "m6g.xlarge")?, failing)
            .await?;
        assert_eq!(status, PlanStatus::Failed, "failure after {at}");
        let retire = steps.iter().position(|s| *s == "retire").ok_or("retire")?;
        let after_retire = i >= retire;
        let d_now = world.deployment(&d.id).await?;
        let (masters, hot, running) = world.running(&d.id).await?;
        if after_retire {
            // Past the point of no return: the new nodes carry the cluster.
            assert_eq!(d_now.status, DeploymentStatus::Failed, "after {at}");
            assert_eq!((masters, hot), (3, 5), "after {at}");
            assert!(
                plan.steps.iter().any(|s| s.step_id == "retire"
                    && s.error
                        .as_ref()
                        .is_some_and(|e| e.failure_type == "point_of_no_return")),
                "after {at}"
            );
        } else {
            // Before it: exactly the old nodes and templates, shards back home.
            assert_eq!(d_now.status, DeploymentStatus::Running, "after {at}");
            assert_eq!(running, before, "after {at}");
            assert_eq!(world.compute.templates(), templates_before, "after {at}");
            assert_eq!(d_now.spec.node_groups[1].count, 3, "after {at}");
        }
        assert_eq!(d_now.pending_plan, None, "after {at}");
        cluster_is_whole(&world, &d.id).await?;
    }
    Ok(())
}

#[tokio::test]
async fn nodes_terminated_without_draining_lose_their_shards() -> TestResult {
    // What the drain steps are for: the simulated cluster loses the shards
    // of nodes that leave with data still on them.
    let world = World::new()?;
    let d = world.create(spec(3, "m6g.xlarge")?).await?;
    let url = world.url(&d.id).await?;
    write_documents(&url).await?;
    let hot: Vec<String> = world
        .compute
        .instances(&d.id)
        .await?
        .into_iter()
        .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("hot"))
        .map(|i| i.id)
        .collect();
    // Masters hold shards too in the simulator, so take away two hot nodes
    // and a master, which between them hold both copies of one shard of
    // `orders` (copies go round the nodes in order); the two masters left
    // keep the quorum.
    let masters: Vec<String> = world
        .compute
        .instances(&d.id)
        .await?
        .into_iter()
        .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("masters"))
        .map(|i| i.id)
        .collect();
    let (mut hot, mut masters) = (hot, masters);
    hot.sort();
    masters.sort();
    let gone = vec![hot[0].clone(), hot[1].clone(), masters[0].clone()];
    world.compute.terminate(&gone).await?;
    world.clusters.client(&d, &[]).await?;
    let health = get(&format!("{url}/_cluster/health")).await?;
    assert_eq!(health["status"], "red", "{health}");
    Ok(())
}

/// The nodes and how to reach them, as create and update plans record them
/// for the api (which calls neither EC2 nor SSM): after each plan the record
/// names exactly the running nodes, carries the CA the nodes were given, and
/// a password that opens, for this deployment only, to the nodes' password.
#[tokio::test]
async fn create_and_update_plans_record_how_to_reach_the_cluster() -> TestResult {
    use floe_compute::NodeParameters;
    use floe_domain::access::{PASSWORD_FIELD, sealing_resource};
    use floe_secrets::{Cipher, Owner};
    let world = World::new()?;
    let d = world.create(spec(3, "m6g.xlarge")?).await?;
    let cipher = LocalCipher::from_key(&[7u8; 32]);
    let password_param = format!("/floe/{}/security/elastic_password", d.id);
    let password = world
        .parameters
        .get(&password_param)
        .await?
        .ok_or("no password parameter")?;
    for count in [3, 5] {
        if count == 5 {
            let (status, _) = world
                .update(&d.id, &spec(5, "m6g.xlarge")?, Arc::new(world.steps()))
                .await?;
            assert_eq!(status, PlanStatus::Succeeded);
        }
        let record = world.deployment(&d.id).await?;
        let access = record.access.ok_or("no access recorded")?;
        let recorded: BTreeSet<String> = access.nodes.iter().map(|n| n.name.clone()).collect();
        let (_, _, running) = world.running(&d.id).await?;
        assert_eq!(recorded, running, "after the plan to {count} hot nodes");
        assert!(
            access
                .nodes
                .iter()
                .all(|n| n.address.parse::<std::net::IpAddr>().is_ok())
        );
        let ca = world
            .parameters
            .get(&format!("/floe/{}/tls/ca.crt", d.id))
            .await?
            .ok_or("no CA parameter")?;
        assert_eq!(access.ca_cert_pem, ca.expose());
        assert!(!access.sealed_password.contains(password.expose()));
        let resource = sealing_resource(&d.id);
        let opened = cipher
            .open(
                &access.sealed_password,
                &Owner {
                    org: "acme",
                    repository: &resource,
                    field: PASSWORD_FIELD,
                },
            )
            .await?;
        assert_eq!(opened, password.expose());
        let other = sealing_resource("ffffffffffffffffffffffffffffffff");
        assert!(
            cipher
                .open(
                    &access.sealed_password,
                    &Owner {
                        org: "acme",
                        repository: &other,
                        field: PASSWORD_FIELD,
                    },
                )
                .await
                .is_err(),
            "the sealed password is bound to its deployment"
        );
    }
    Ok(())
}

/// A policy the target names is deleted while the update runs: the end
/// cannot be written as planned, so the plan ends failed and says why (no
/// endless retry), and the deployment keeps its spec and runs again.
#[tokio::test]
async fn a_reference_deleted_while_an_update_runs_fails_the_plan_once() -> TestResult {
    use floe_domain::repository::{FsSettings, Repository, RepositorySettings};
    let w = World::new()?;
    let now = Utc::now();
    w.store
        .create_repository(&Repository {
            org: "acme".into(),
            name: "main".into(),
            settings: RepositorySettings::Fs(FsSettings {
                location: "main".into(),
                compress: None,
                max_snapshot_bytes_per_sec: None,
                max_restore_bytes_per_sec: None,
            }),
            created: now,
            updated: now,
        })
        .await?;
    let policy = support::policy("acme", "main");
    w.store.create_policy(&policy).await?;
    let d = w.create(spec(1, "m6g.large")?).await?;
    let mut target = spec(2, "m6g.large")?;
    target.snapshot = Some(floe_domain::deployment::SnapshotAttachment {
        repository: None,
        policies: vec![policy.id.clone()],
    });
    // Nothing holds the policy yet (the record names the running spec).
    let stored = w
        .store
        .get_policy("acme", &policy.id)
        .await?
        .ok_or("policy")?;
    w.store.delete_policy(&stored).await?;
    let (status, plan) = w.update(&d.id, &target, Arc::new(w.steps())).await?;
    assert_eq!(status, PlanStatus::Failed, "{plan:?}");
    let error = plan.error.ok_or("an error")?;
    assert_eq!(error.failure_type, "reference_missing");
    assert!(error.message.contains(&policy.id), "{}", error.message);
    let after = w.deployment(&d.id).await?;
    assert_eq!(after.status, DeploymentStatus::Running);
    assert!(after.pending_plan.is_none());
    assert_eq!(after.spec, d.spec, "the record keeps its spec");
    Ok(())
}

/// A tag edit accepted while an update plan runs (tags need no plan) is not
/// reverted by the plan's end: the node change comes from the plan, the
/// tags from the record.
#[tokio::test]
async fn a_tag_edit_during_an_update_survives_its_end() -> TestResult {
    let w = World::new()?;
    let d = w.create(spec(1, "m6g.large")?).await?;
    let target = spec(2, "m6g.large")?;
    let previous = w
        .store
        .get_deployment("acme", &d.id)
        .await?
        .ok_or("deployment")?;
    let plan = Plan::new(
        "acme",
        &d.id,
        PlanParams::Update(target.clone()),
        "deployments.update",
        "tester",
        Utc::now(),
    );
    let mut next = previous.value.clone();
    next.status = DeploymentStatus::Reconfiguring;
    next.pending_plan = Some(plan.reference());
    next.updated = plan.created;
    w.store
        .replace_deployment(&next, &previous, Some(&plan))
        .await?;
    // The PUT of a tag, while the plan is pending.
    let pending = w
        .store
        .get_deployment("acme", &d.id)
        .await?
        .ok_or("deployment")?;
    let mut tagged = pending.value.clone();
    tagged.spec.metadata.tags = vec![floe_domain::deployment::Tag {
        key: "team".into(),
        value: "search".into(),
    }];
    tagged.updated = Utc::now() + chrono::Duration::milliseconds(1);
    w.store.replace_deployment(&tagged, &pending, None).await?;

    let status = w.run(Arc::new(w.steps()), &d.id, &plan.id).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let after = w.deployment(&d.id).await?;
    assert_eq!(
        after.spec.node_groups, target.node_groups,
        "the plan's nodes"
    );
    assert_eq!(
        after.spec.metadata.tags, tagged.spec.metadata.tags,
        "the PUT's tags"
    );
    Ok(())
}

/// `masters` dedicated master nodes of `master_type`, and two hot nodes.
fn masters_spec(masters: u32, master_type: &str) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({"name": "logs", "version": "8.15.3", "node_groups": [
        {"id": "masters", "roles": ["master"], "instance_type": master_type, "count": masters, "zone_count": masters.min(3), "storage": {"size_gb": 20}},
        {"id": "hot", "roles": ["data_hot", "data_content", "ingest"], "instance_type": "m6g.xlarge", "count": 2, "zone_count": 2, "storage": {"size_gb": 500}}
    ]}))
}

/// After a change of masters: an elected master (the cluster answers),
/// every document, the nodes are the running instances, and the voting
/// configuration is an odd number of them with no exclusion left.
async fn masters_are_whole(world: &World, deployment_id: &str) -> TestResult {
    cluster_is_whole(world, deployment_id).await?;
    let url = world.url(deployment_id).await?;
    let state = get(&format!("{url}/_cluster/state/metadata")).await?;
    let coordination = &state["metadata"]["cluster_coordination"];
    assert_eq!(
        coordination["voting_config_exclusions"],
        json!([]),
        "{state}"
    );
    let nodes = get(&format!("{url}/_nodes")).await?;
    let voters = coordination["last_committed_config"]
        .as_array()
        .ok_or("no voting configuration")?;
    assert_eq!(voters.len() % 2, 1, "{coordination}");
    for v in voters {
        let id = v.as_str().ok_or("voter id")?;
        let roles = &nodes["nodes"][id]["roles"];
        assert!(
            roles
                .as_array()
                .is_some_and(|r| r.contains(&json!("master"))),
            "voter {id} is a live master-eligible node: {nodes}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn replacing_the_masters_keeps_the_quorum() -> TestResult {
    // (masters before, after, instance type after). Replacing half or more
    // of the voters at once loses the quorum without voting exclusions.
    let cases = [
        (3, 3, "c7g.xlarge"),
        (1, 3, "c7g.large"),
        (3, 1, "c7g.large"),
        (5, 5, "c7g.xlarge"),
        (1, 1, "c7g.xlarge"),
    ];
    for (before, after, instance_type) in cases {
        let world = World::new()?;
        let d = world.create(masters_spec(before, "c7g.large")?).await?;
        write_documents(&world.url(&d.id).await?).await?;
        let (old_masters, _, old_ids) = world.running(&d.id).await?;
        assert_eq!(old_masters, before as usize);
        let (status, plan) = world
            .update(
                &d.id,
                &masters_spec(after, instance_type)?,
                Arc::new(Twice(world.steps())),
            )
            .await?;
        let case = format!("{before} -> {after} masters");
        assert_eq!(status, PlanStatus::Succeeded, "{case}: {plan:?}");
        let ids: Vec<&str> = plan.steps.iter().map(|s| s.step_id.as_str()).collect();
        let excluded = ids.iter().position(|s| *s == "wait-masters-excluded");
        let retire = ids.iter().position(|s| *s == "retire");
        assert!(
            excluded.is_some() && excluded < retire,
            "{case}: the old masters leave the voting configuration before they go: {ids:?}"
        );
        let (masters, hot, now) = world.running(&d.id).await?;
        assert_eq!((masters, hot), (after as usize, 2), "{case}");
        let masters_left = world
            .compute
            .instances(&d.id)
            .await?
            .into_iter()
            .filter(|i| old_ids.contains(&i.id))
            .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("masters"))
            .filter(|i| i.state == InstanceState::Running)
            .count();
        assert_eq!(masters_left, 0, "{case}: every old master went");
        assert!(now.len() == after as usize + 2, "{case}");
        masters_are_whole(&world, &d.id).await?;
    }
    Ok(())
}

#[tokio::test]
async fn more_masters_than_one_set_of_exclusions_go_in_rounds() -> TestResult {
    // Twelve master-eligible data nodes replaced: Elasticsearch holds ten
    // voting exclusions at most, so they leave in two rounds.
    let group = |count: u32, instance_type: &str| {
        serde_json::from_value::<DeploymentSpec>(
            json!({"name": "logs", "version": "8.15.3", "node_groups": [
                {"id": "hot", "roles": ["master", "data_hot", "data_content", "ingest"], "instance_type": instance_type, "count": count, "zone_count": 3, "storage": {"size_gb": 100}}
            ]}),
        )
    };
    let world = World::new()?;
    let d = world.create(group(12, "m6g.xlarge")?).await?;
    write_documents(&world.url(&d.id).await?).await?;
    let (status, plan) = world
        .update(&d.id, &group(12, "m6g.2xlarge")?, Arc::new(world.steps()))
        .await?;
    assert_eq!(status, PlanStatus::Succeeded, "{plan:?}");
    let retire_log: Vec<&String> = plan
        .steps
        .iter()
        .filter(|s| s.step_id == "retire")
        .flat_map(|s| s.info_log.iter())
        .collect();
    assert!(
        retire_log.iter().any(|l| l.starts_with("excluded ")),
        "a second round was excluded inside retire: {retire_log:?}"
    );
    let url = world.url(&d.id).await?;
    let d_now = world.deployment(&d.id).await?;
    world.clusters.client(&d_now, &[]).await?;
    let count = get(&format!("{url}/orders/_count")).await?;
    assert_eq!(count["count"], 40, "{count}");
    let state = get(&format!("{url}/_cluster/state/metadata")).await?;
    assert_eq!(
        state["metadata"]["cluster_coordination"]["voting_config_exclusions"],
        json!([]),
        "{state}"
    );
    Ok(())
}

#[tokio::test]
async fn a_failure_during_a_master_replacement_unwinds_with_the_voters_back() -> TestResult {
    let steps = [
        "begin",
        "leftovers",
        "node-security",
        "template:masters",
        "launch:masters",
        "wait-running",
        "wait-joined",
        "drain",
        "wait-drained",
        "exclude-masters",
        "wait-masters-excluded",
        "retire",
        "wait-retired",
        "clear-exclusion",
    ];
    for (i, at) in steps.iter().enumerate() {
        let world = World::new()?;
        let d = world.create(masters_spec(3, "c7g.large")?).await?;
        write_documents(&world.url(&d.id).await?).await?;
        let (_, _, before) = world.running(&d.id).await?;
        let failing = Arc::new(FailAfter {
            inner: world.steps(),
            at: at.to_string(),
        });
        let (status, plan) = world
            .update(&d.id, &masters_spec(3, "c7g.xlarge")?, failing)
            .await?;
        assert_eq!(status, PlanStatus::Failed, "failure after {at}");
        let ids: Vec<&str> = plan.steps.iter().map(|s| s.step_id.as_str()).collect();
        assert_eq!(ids.get(i), Some(at), "{ids:?}");
        let retire = steps.iter().position(|s| *s == "retire").ok_or("retire")?;
        let d_now = world.deployment(&d.id).await?;
        let (masters, _, running) = world.running(&d.id).await?;
        assert_eq!(masters, 3, "after {at}");
        if i < retire {
            assert_eq!(d_now.status, DeploymentStatus::Running, "after {at}");
            assert_eq!(running, before, "after {at}: the old nodes, and only they");
        } else {
            assert_eq!(d_now.status, DeploymentStatus::Failed, "after {at}");
        }
        // Either way a master is elected and no exclusion is left behind.
        masters_are_whole(&world, &d.id).await?;
    }
    Ok(())
}

/// An update recorded before the voting steps existed (its layout has no
/// `exclude-masters` or `wait-masters-excluded`) still finishes with the
/// quorum kept: `retire` itself takes the master-eligible nodes out of the
/// voting configuration before it terminates them.
#[tokio::test]
async fn an_update_recorded_without_the_voting_steps_still_keeps_the_quorum() -> TestResult {
    let world = World::new()?;
    let d = world.create(masters_spec(3, "c7g.large")?).await?;
    write_documents(&world.url(&d.id).await?).await?;
    let previous = world
        .store
        .get_deployment("acme", &d.id)
        .await?
        .ok_or("deployment")?;
    let mut plan = Plan::new(
        "acme",
        &d.id,
        PlanParams::Update(masters_spec(3, "c7g.xlarge")?),
        "deployments.update",
        "tester",
        Utc::now(),
    );
    // The layout the release before wrote, the plan already running.
    plan.status = PlanStatus::Running;
    plan.steps = [
        "begin",
        "node-security",
        "template:masters",
        "launch:masters",
        "wait-running",
        "wait-joined",
        "drain",
        "wait-drained",
        "retire",
        "wait-retired",
        "clear-exclusion",
        "forget-templates",
        "record-access",
    ]
    .into_iter()
    .map(floe_domain::plan::StepRecord::new)
    .collect();
    let mut next = previous.value.clone();
    next.status = DeploymentStatus::Reconfiguring;
    next.pending_plan = Some(plan.reference());
    world
        .store
        .replace_deployment(&next, &previous, Some(&plan))
        .await?;
    let status = world.run(Arc::new(world.steps()), &d.id, &plan.id).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let (masters, hot, _) = world.running(&d.id).await?;
    assert_eq!((masters, hot), (3, 2));
    masters_are_whole(&world, &d.id).await
}

/// Masters, hot and warm groups on `version`.
fn versioned_spec(version: &str) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({"name": "logs", "version": version, "node_groups": [
        {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
        {"id": "hot", "roles": ["data_hot", "data_content", "ingest"], "instance_type": "m6g.xlarge", "count": 2, "zone_count": 2, "storage": {"size_gb": 500}},
        {"id": "warm", "roles": ["data_warm"], "instance_type": "m6g.xlarge", "count": 1, "zone_count": 1, "storage": {"size_gb": 500}}
    ]}))
}

#[tokio::test]
async fn upgrades_replace_every_node_masters_last_and_keep_the_quorum() -> TestResult {
    // Minor, major from the last 7.x minor, and a patch, over three groups.
    let cases = [
        ("8.15.3", "8.17.0"),
        ("7.17.25", "8.15.3"),
        ("8.15.0", "8.15.3"),
    ];
    for (from, to) in cases {
        let world = World::new()?;
        let d = world.create(versioned_spec(from)?).await?;
        write_documents(&world.url(&d.id).await?).await?;
        let (status, plan) = world
            .update(&d.id, &versioned_spec(to)?, Arc::new(Twice(world.steps())))
            .await?;
        let case = format!("{from} -> {to}");
        assert_eq!(status, PlanStatus::Succeeded, "{case}: {plan:?}");
        let ids: Vec<&str> = plan.steps.iter().map(|s| s.step_id.as_str()).collect();
        let at = |id: &str| ids.iter().position(|s| *s == id);
        assert!(at("launch:hot") < at("launch:masters"), "{case}: {ids:?}");
        assert!(at("launch:warm") < at("launch:masters"), "{case}: {ids:?}");
        assert!(
            at("wait-masters-excluded") < at("retire"),
            "{case}: {ids:?}"
        );
        assert_eq!(at("upgrade-snapshot"), None, "{case}: no repository");
        masters_are_whole(&world, &d.id).await?;
        let url = world.url(&d.id).await?;
        let nodes = get(&format!("{url}/_nodes")).await?;
        let versions: BTreeSet<String> = nodes["nodes"]
            .as_object()
            .ok_or("nodes")?
            .values()
            .filter_map(|n| n["version"].as_str().map(String::from))
            .collect();
        assert_eq!(
            versions,
            BTreeSet::from([to.to_string()]),
            "{case}: {nodes}"
        );
    }
    Ok(())
}

/// Issue 12, defect 3 (b): a mount clone has no repository of its own,
/// and its shards live in its source's. An update's new nodes get the
/// source's S3 client (settings and the credentials step), as the create's
/// did, so that mounted shards can move onto them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_gives_a_clones_new_nodes_its_sources_client() -> TestResult {
    use floe_domain::repository::{Repository, RepositorySettings, S3Settings};
    use floe_domain::restore::{CloneSource, RestoreMode};
    let world = World::new()?;
    let now = Utc::now();
    world
        .store
        .create_repository(&Repository {
            org: "acme".into(),
            name: "main".into(),
            settings: RepositorySettings::S3(S3Settings {
                bucket: "snapshots".into(),
                endpoint: Some("minio.internal:9000".into()),
                ..S3Settings::default()
            }),
            created: now,
            updated: now,
        })
        .await?;
    let d = world.create(spec(2, "m6g.xlarge")?).await?;
    // Recorded as a mount clone of another deployment's snapshot in `main`.
    let previous = world
        .store
        .get_deployment("acme", &d.id)
        .await?
        .ok_or("deployment")?;
    let mut clone = previous.value.clone();
    clone.clone_source = Some(CloneSource {
        source_deployment_id: floe_domain::names::new_resource_id(),
        repository: "main".into(),
        registered_as: "main".into(),
        snapshot: "nightly-1".into(),
        snapshot_sort_millis: 0,
        mode: RestoreMode::Mount,
        pinned: false,
        snapshot_version: None,
        license: None,
    });
    world
        .store
        .replace_deployment(&clone, &previous, None)
        .await?;
    let (_, _, before) = world.running(&d.id).await?;

    let (status, plan) = world
        .update(&d.id, &spec(3, "m6g.xlarge")?, Arc::new(world.steps()))
        .await?;
    assert_eq!(status, PlanStatus::Succeeded, "{:?}", plan.error);
    assert!(
        plan.steps
            .iter()
            .any(|s| s.step_id == "repository-credentials"),
        "{:?}",
        plan.steps.iter().map(|s| &s.step_id).collect::<Vec<_>>()
    );
    let (_, _, after) = world.running(&d.id).await?;
    let new: Vec<&String> = after.difference(&before).collect();
    assert!(!new.is_empty(), "new nodes");
    for id in new {
        let user_data = world.compute.user_data(id).ok_or("user data")?;
        assert!(
            user_data.contains("minio.internal:9000"),
            "node {id} has no client for the source's repository"
        );
    }
    Ok(())
}
