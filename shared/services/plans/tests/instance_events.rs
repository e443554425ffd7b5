//! EC2's instance state-change notifications (issue 36, item 1), on
//! simulated compute: a Floe node that stops serving starts its
//! deployment's health check at once, and the heal with it; anything else
//! (an instance that starts, one that is not a node, one whose deployment
//! has a plan running) starts nothing.

use floe_compute::{Compute, InstanceState};
use floe_domain::deployment::DeploymentSpec;
use floe_plans::{EventOutcome, InstanceEvents};
use floe_ports::{InstanceStateChange, InstanceStateDetail};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedReceiver;

// The plan tests' shared world; its step wrappers are not used here.
#[allow(dead_code)]
mod support;

use support::world::World;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn spec() -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({"name": "logs", "version": "8.15.3", "node_groups": [
        {"id": "hot", "roles": ["master", "data_hot", "data_content"], "instance_type": "m6g.xlarge",
         "count": 3, "zone_count": 3, "storage": {"size_gb": 100}}
    ]}))
}

fn change(instance_id: &str, state: &str) -> InstanceStateChange {
    InstanceStateChange {
        source: InstanceStateChange::SOURCE.into(),
        detail_type: InstanceStateChange::DETAIL_TYPE.into(),
        detail: InstanceStateDetail {
            instance_id: instance_id.into(),
            state: state.into(),
        },
    }
}

/// The handler, with a queue whose jobs the test reads.
fn events(world: &World) -> (InstanceEvents, UnboundedReceiver<floe_plans::PlanJob>) {
    let (queue, jobs) = floe_plans::LocalQueue::new();
    let health = floe_plans::HealthCheck::new(
        world.store.clone(),
        Arc::new(floe_plans::PlanStarter::new(
            world.store.clone(),
            Arc::new(queue),
        )),
        Arc::new(world.steps()),
        floe_plans::HealthConfig::default(),
    );
    let compute: Arc<dyn Compute> = world.compute.clone();
    (InstanceEvents::new(Arc::new(health), compute), jobs)
}

#[tokio::test]
async fn a_lost_node_starts_its_deployments_heal_and_nothing_else_does() -> TestResult {
    let world = World::new()?;
    let d = world.create(spec()?).await?;
    let instances = world.compute.instances(&d.id).await?;
    let victim = instances
        .iter()
        .find(|i| i.state == InstanceState::Running)
        .ok_or("no running node")?
        .id
        .clone();
    let (events, mut jobs) = events(&world);

    // A node that runs, an instance that is none of Floe's: nothing.
    assert_eq!(
        events.handle(&change(&victim, "running")).await?,
        EventOutcome::Ignored
    );
    assert_eq!(
        events
            .handle(&change("i-0000000000000000f", "terminated"))
            .await?,
        EventOutcome::Ignored
    );
    // Another source or kind of event is none of EC2's state changes.
    let mut other = change(&victim, "terminated");
    other.source = "aws.autoscaling".into();
    assert_eq!(events.handle(&other).await?, EventOutcome::Ignored);
    assert!(jobs.try_recv().is_err(), "something was started");

    // The node goes: its deployment is checked, and healed.
    world
        .compute
        .terminate(std::slice::from_ref(&victim))
        .await?;
    let outcome = events.handle(&change(&victim, "shutting-down")).await?;
    assert_eq!(
        outcome,
        EventOutcome::Checked {
            org: "acme".into(),
            deployment_id: d.id.clone(),
            healthy: false,
            healing: true,
        }
    );
    let job = jobs.try_recv()?;
    assert_eq!(job.deployment_id, d.id);
    let healing = world.deployment(&d.id).await?;
    let pending = healing.pending_plan.as_ref().ok_or("no plan pending")?;
    assert_eq!(pending.kind.as_str(), "heal");

    // Its `terminated` notification comes while the heal runs: the plan's
    // deployment is left alone, as are the heal's own terminations.
    assert_eq!(
        events.handle(&change(&victim, "terminated")).await?,
        EventOutcome::Left {
            org: "acme".into(),
            deployment_id: d.id.clone(),
        }
    );
    assert!(jobs.try_recv().is_err(), "a second plan was started");
    Ok(())
}
