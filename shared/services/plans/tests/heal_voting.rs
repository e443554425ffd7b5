//! Heals of master-eligible nodes on simulated compute, with each
//! deployment's simulated Elasticsearch cluster following its instances
//! and modelling the voting configuration (issue 14, item 3, for the heal
//! plan). An impaired instance still runs, so its node is still a member
//! of the cluster and may hold a vote: terminating impaired masters
//! without voting exclusions loses the elected master once they are half
//! or more of the voting configuration (all three of three, with their
//! replacements joined, are three of five voters; the one of one is the
//! whole configuration). A heal keeps the quorum, leaves no exclusion
//! behind, and clears the ones it added when it unwinds.

use floe_clusters::Clusters;
use floe_compute::{Compute, InstanceState};
use floe_compute_sim::Impairment;
use floe_domain::deployment::{DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanStatus};
use floe_plans::PlanJob;
use floe_plans::engine::Steps;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

mod support;

use support::world::{World, write_documents};
use support::{FailAfter, Twice};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// `masters` dedicated master nodes, and two hot nodes.
fn masters_spec(masters: u32) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({"name": "logs", "version": "8.15.3", "node_groups": [
        {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": masters, "zone_count": masters.min(3), "storage": {"size_gb": 20}},
        {"id": "hot", "roles": ["data_hot", "data_content", "ingest"], "instance_type": "m6g.xlarge", "count": 2, "zone_count": 2, "storage": {"size_gb": 500}}
    ]}))
}

impl World {
    /// The running instances of `group`, sorted.
    async fn running(
        &self,
        deployment_id: &str,
        group: &str,
    ) -> Result<BTreeSet<String>, Box<dyn std::error::Error>> {
        Ok(self
            .compute
            .instances(deployment_id)
            .await?
            .into_iter()
            .filter(|i| i.state == InstanceState::Running)
            .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some(group))
            .map(|i| i.id)
            .collect())
    }

    /// Impairs `count` of the masters (their instance status check
    /// fails; they keep running and stay in the cluster), then lets the
    /// health check find them: the heal plan it started.
    async fn impair_masters(
        &self,
        deployment_id: &str,
        count: usize,
    ) -> Result<(Vec<String>, PlanJob), Box<dyn std::error::Error>> {
        let impaired: Vec<String> = self
            .running(deployment_id, "masters")
            .await?
            .into_iter()
            .take(count)
            .collect();
        for id in &impaired {
            assert!(self.compute.impair(id, Impairment::Instance), "{id}");
        }
        let (queue, mut jobs) = floe_plans::LocalQueue::new();
        let heals = floe_plans::PlanStarter::new(self.store.clone(), Arc::new(queue));
        let check = floe_plans::HealthCheck::new(
            self.store.clone(),
            Arc::new(heals),
            Arc::new(self.steps()),
            floe_plans::HealthConfig::default(),
        );
        let summary = check.check().await;
        assert_eq!(summary.heals_started, 1, "{summary:?}");
        Ok((impaired, jobs.try_recv()?))
    }

    async fn plan(&self, job: &PlanJob) -> Result<Plan, Box<dyn std::error::Error>> {
        Ok(self
            .store
            .get_plan("acme", &job.deployment_id, &job.plan_id)
            .await?
            .ok_or("plan")?
            .value)
    }
}

async fn get(url: &str) -> Result<(u16, Value), Box<dyn std::error::Error>> {
    let r = reqwest::get(url).await?;
    Ok((r.status().as_u16(), r.json().await?))
}

/// An elected master (the cluster state answers), every document, no
/// voting exclusion left, and a voting configuration of an odd number of
/// live master-eligible nodes, none of them `gone`.
async fn quorum_kept(world: &World, deployment_id: &str, gone: &[String]) -> TestResult {
    // Make the simulated cluster look at the instances as they are now.
    let d = world.deployment(deployment_id).await?;
    world.clusters.client(&d, &[]).await?;
    let url = world.url(deployment_id).await?;
    let (status, state) = get(&format!("{url}/_cluster/state/metadata")).await?;
    assert_eq!(status, 200, "an elected master: {state}");
    let coordination = &state["metadata"]["cluster_coordination"];
    assert_eq!(
        coordination["voting_config_exclusions"],
        json!([]),
        "{state}"
    );
    let (_, count) = get(&format!("{url}/orders/_count")).await?;
    assert_eq!(count["count"], 40, "{count}");
    let (_, nodes) = get(&format!("{url}/_nodes")).await?;
    let voters = coordination["last_committed_config"]
        .as_array()
        .ok_or("no voting configuration")?;
    assert_eq!(voters.len() % 2, 1, "{coordination}");
    for v in voters {
        let id = v.as_str().ok_or("voter id")?;
        let node = &nodes["nodes"][id];
        assert!(
            node["roles"]
                .as_array()
                .is_some_and(|r| r.contains(&json!("master"))),
            "voter {id} is a live master-eligible node: {nodes}"
        );
        let name = node["name"].as_str().unwrap_or_default();
        assert!(!gone.iter().any(|g| g == name), "{name} still votes");
    }
    Ok(())
}

#[tokio::test]
async fn healing_impaired_masters_keeps_the_quorum() -> TestResult {
    // (masters, impaired). Three of three, and one of one, are half or
    // more of the voting configuration once the replacements joined:
    // without exclusions their termination leaves no elected master.
    let cases = [(3, 3), (1, 1), (3, 1), (3, 2), (5, 5)];
    for (masters, impaired) in cases {
        let case = format!("{impaired} of {masters} masters impaired");
        let world = World::new()?;
        let d = world.create(masters_spec(masters)?).await?;
        write_documents(&world.url(&d.id).await?).await?;
        let (lost, job) = world.impair_masters(&d.id, impaired).await?;
        let status =
            support::run_to_end(&world.store, Arc::new(Twice(world.steps())), &job).await?;
        let plan = world.plan(&job).await?;
        assert_eq!(status, PlanStatus::Succeeded, "{case}: {plan:?}");
        let ids: Vec<&str> = plan.steps.iter().map(|s| s.step_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "template:masters",
                "replace:masters",
                "wait-running",
                "wait-joined",
                "exclude-lost-masters",
                "wait-lost-masters-excluded",
                "retire-lost",
                "clear-lost-exclusion",
                "record-access"
            ],
            "{case}"
        );
        let now = world.running(&d.id, "masters").await?;
        assert_eq!(now.len(), masters as usize, "{case}: {now:?}");
        assert!(
            lost.iter().all(|id| !now.contains(id)),
            "{case}: the impaired masters went"
        );
        let retired = plan
            .steps
            .iter()
            .find(|s| s.step_id == "retire-lost")
            .ok_or("retire-lost")?;
        for id in &lost {
            assert!(
                retired
                    .info_log
                    .iter()
                    .any(|l| l.starts_with("terminated ") && l.contains(id.as_str())),
                "{case}: {:?}",
                retired.info_log
            );
        }
        quorum_kept(&world, &d.id, &lost)
            .await
            .map_err(|e| format!("{case}: {e}"))?;
        let healed = world.deployment(&d.id).await?;
        assert_eq!(healed.status, DeploymentStatus::Running, "{case}");
    }
    Ok(())
}

/// A failure injected after any step of a heal of impaired masters: the
/// cluster keeps an elected master and no voting exclusion is left.
/// Before `retire-lost` the impaired masters stay and their replacements
/// go (out of the voting configuration first: with all three masters
/// excluded, the replacements hold every vote); from it on the
/// replacements stay.
#[tokio::test]
async fn a_failure_after_any_step_of_a_master_heal_clears_the_exclusions() -> TestResult {
    let mut layout: Option<Vec<String>> = None;
    let mut index = 0;
    loop {
        let world = World::new()?;
        let d = world.create(masters_spec(3)?).await?;
        write_documents(&world.url(&d.id).await?).await?;
        let before = world.running(&d.id, "masters").await?;
        let (lost, job) = world.impair_masters(&d.id, 3).await?;
        let plan = world.plan(&job).await?;
        let ids = layout
            .get_or_insert_with(|| world.steps().layout(&plan, &d).unwrap_or_default())
            .clone();
        let Some(at) = ids.get(index).cloned() else {
            break;
        };
        index += 1;
        let failing = Arc::new(FailAfter {
            inner: world.steps(),
            at: at.clone(),
        });
        let status = support::run_to_end(&world.store, failing, &job).await?;
        assert_eq!(status, PlanStatus::Failed, "failure after {at}");
        let retire = ids
            .iter()
            .position(|s| s == "retire-lost")
            .ok_or("retire-lost")?;
        let now = world.running(&d.id, "masters").await?;
        let gone: Vec<String> = if index <= retire {
            assert_eq!(
                now, before,
                "failure after {at}: the old masters, and only they"
            );
            Vec::new()
        } else {
            assert_eq!(now.len(), 3, "failure after {at}: {now:?}");
            assert!(now.is_disjoint(&before), "failure after {at}: {now:?}");
            lost.clone()
        };
        quorum_kept(&world, &d.id, &gone)
            .await
            .map_err(|e| format!("failure after {at}: {e}"))?;
        let after = world.deployment(&d.id).await?;
        assert_eq!(
            (after.status, after.pending_plan),
            (DeploymentStatus::Running, None),
            "failure after {at}"
        );
    }
    assert_eq!(index, 9, "{layout:?}");
    Ok(())
}

/// A heal recorded before the voting steps existed (its layout has
/// `retire-lost` alone) still keeps the quorum: `retire-lost` itself takes
/// the lost masters out of the voting configuration before it terminates
/// them, and clears the exclusions once they are gone.
#[tokio::test]
async fn a_heal_recorded_without_the_voting_steps_still_keeps_the_quorum() -> TestResult {
    let world = World::new()?;
    let d = world.create(masters_spec(3)?).await?;
    write_documents(&world.url(&d.id).await?).await?;
    let (lost, job) = world.impair_masters(&d.id, 3).await?;
    let stored = world
        .store
        .get_plan("acme", &job.deployment_id, &job.plan_id)
        .await?
        .ok_or("plan")?;
    let mut plan = stored.value;
    // The layout the release before wrote, the plan already running.
    plan.status = PlanStatus::Running;
    plan.steps = [
        "template:masters",
        "replace:masters",
        "wait-running",
        "wait-joined",
        "retire-lost",
        "record-access",
    ]
    .into_iter()
    .map(floe_domain::plan::StepRecord::new)
    .collect();
    world.store.update_plan(&plan, stored.version).await?;
    let status = support::run_to_end(&world.store, Arc::new(Twice(world.steps())), &job).await?;
    assert_eq!(
        status,
        PlanStatus::Succeeded,
        "{:?}",
        world.plan(&job).await?
    );
    let retired = world.plan(&job).await?;
    let log: Vec<&String> = retired
        .steps
        .iter()
        .filter(|s| s.step_id == "retire-lost")
        .flat_map(|s| s.info_log.iter())
        .collect();
    assert!(
        log.iter().any(|l| l.starts_with("excluded ")),
        "retire-lost excluded them itself: {log:?}"
    );
    let now = world.running(&d.id, "masters").await?;
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(lost.iter().all(|id| !now.contains(id)));
    quorum_kept(&world, &d.id, &lost).await
}
