//! A deployment created before Floe named endpoints moves to one with an
//! update (issue 32): on simulated compute whose instances have loopback
//! addresses of their own, with secured simulated clusters that serve
//! those addresses and, once the deployment has it, its endpoint, as local
//! mode runs them. Every node is replaced by one whose certificate names
//! the endpoint; the record takes the endpoint only when the plan
//! succeeds, and until then the functions and the view keep what worked.
//! A deployment whose create kept no CA key gets a CA for HTTP alone.

use floe_clusters::Clusters;
use floe_compute::{Compute, InstanceState, NodeParameters};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{PlanParams, PlanStatus};
use floe_elastic::{Auth, ElasticClient};
use floe_plans::engine::Steps;
use floe_secrets::{Cipher, LocalCipher, Owner};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

mod support;

use support::world::World;
use support::{FailAfter, Twice};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The nodes' HTTP port: any, since every instance has an address of its
/// own.
const PORT: u16 = 19_271;

fn spec(count: u32) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(
        serde_json::json!({"name": "logs", "version": "8.15.3", "node_groups": [
            {"id": "hot", "roles": ["master", "data_hot", "data_content", "ingest"],
             "instance_type": "m6g.xlarge", "count": count, "zone_count": 3, "storage": {"size_gb": 50}}
        ]}),
    )
}

impl World {
    /// A running deployment as Floe made them before endpoints were named.
    async fn legacy(&self) -> Result<Deployment, Box<dyn std::error::Error>> {
        let d = self.create(spec(3)?).await?;
        assert_eq!(d.endpoint, None);
        Ok(d)
    }

    /// An update to `target` as the api records one for a deployment
    /// without an endpoint: moving it to `to`.
    async fn move_to(
        &self,
        id: &str,
        target: &DeploymentSpec,
        to: Option<&str>,
        steps: Arc<dyn Steps>,
    ) -> Result<PlanStatus, Box<dyn std::error::Error>> {
        let moving_to = to.map(str::to_string);
        let edit = |d: &mut Deployment| d.endpoint_moving_to = moving_to;
        let (status, _) = self
            .run_plan(id, PlanParams::Update(target.clone()), edit, steps)
            .await?;
        Ok(status)
    }

    async fn running(&self, id: &str) -> Result<BTreeSet<String>, Box<dyn std::error::Error>> {
        Ok(self
            .compute
            .instances(id)
            .await?
            .into_iter()
            .filter(|i| i.state == InstanceState::Running)
            .map(|i| i.id)
            .collect())
    }

    async fn parameter(
        &self,
        id: &str,
        name: &str,
    ) -> Result<Option<String>, Box<dyn std::error::Error>> {
        Ok(self
            .parameters
            .get(&format!("/floe/{id}/{name}"))
            .await?
            .map(|v| v.expose().to_string()))
    }

    /// The elastic user, with the password the record holds sealed.
    async fn elastic(&self, d: &Deployment) -> Result<Option<Auth>, Box<dyn std::error::Error>> {
        let access = d.access.as_ref().ok_or("access")?;
        let resource = floe_domain::access::sealing_resource(&d.id);
        // The key the world's steps seal with.
        let password = LocalCipher::from_key(&[7u8; 32])
            .open(
                &access.sealed_password,
                &Owner {
                    org: "acme",
                    repository: &resource,
                    field: floe_domain::access::PASSWORD_FIELD,
                },
            )
            .await?;
        Ok(Some(Auth::Basic {
            username: "elastic".into(),
            password: floe_domain::secret::SecretString::new(password),
        }))
    }
}

/// What a user holds after the move: the view's endpoint and CA reach the
/// cluster, and so does every node address it publishes (sniffing).
async fn verifies_with_the_view(world: &World, d: &Deployment) -> TestResult {
    let view = floe_domain::deployment::DeploymentView::new(d, 1);
    let es = view
        .elasticsearch
        .as_ref()
        .ok_or("no elasticsearch in the view")?;
    assert!(es.stable_endpoint);
    assert_eq!(es.moving_to_endpoint, None);
    let host = d.endpoint.as_deref().ok_or("no endpoint")?;
    assert_eq!(es.endpoint, format!("https://{host}:{PORT}"));
    let auth = world.elastic(d).await?;
    let timeout = Duration::from_secs(10);
    let client = ElasticClient::at_endpoint(host, PORT, &es.ca_certificate, auth.clone(), timeout)?;
    let nodes = client.nodes().await?;
    assert_eq!(nodes.len(), 3);
    for node in &es.nodes {
        let direct = ElasticClient::at_endpoint(
            &node.address,
            PORT,
            &es.ca_certificate,
            auth.clone(),
            timeout,
        )?;
        assert_eq!(direct.nodes().await?.len(), 3, "{}", node.address);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_moves_a_deployment_without_an_endpoint_to_one() -> TestResult {
    // Created after Floe kept the CA key (a stack that named no endpoints
    // then), or before (a CA for HTTP is made).
    for kept_ca_key in [true, false] {
        let world = World::secured(PORT)?;
        let d = world.legacy().await?;
        if !kept_ca_key {
            world
                .parameters
                .delete(&format!("/floe/{}/tls/ca.key", d.id))
                .await?;
        }
        let ca_before = world.parameter(&d.id, "tls/ca.crt").await?.ok_or("ca")?;
        let before = world.running(&d.id).await?;
        let host = floe_domain::access::loopback_endpoint(&d.id).to_string();

        // The same spec: the move alone replaces every node.
        let status = world
            .move_to(&d.id, &spec(3)?, Some(&host), Arc::new(world.steps()))
            .await?;
        assert_eq!(status, PlanStatus::Succeeded, "kept_ca_key {kept_ca_key}");
        let moved = world.deployment(&d.id).await?;
        assert_eq!(moved.endpoint.as_deref(), Some(host.as_str()));
        assert_eq!(moved.endpoint_moving_to, None);
        let after = world.running(&d.id).await?;
        assert_eq!(after.len(), 3);
        assert!(
            after.is_disjoint(&before),
            "every node replaced: {before:?} {after:?}"
        );
        let http_ca = world.parameter(&d.id, "tls/http-ca.crt").await?;
        let access = moved.access.as_ref().ok_or("access")?;
        match &http_ca {
            None => {
                assert!(kept_ca_key);
                assert_eq!(access.ca_cert_pem, ca_before);
            }
            Some(http_ca) => {
                assert!(!kept_ca_key);
                assert_eq!(&access.ca_cert_pem, http_ca);
                // Transport keeps the CA the old nodes trusted, and the
                // CA parameter holds both.
                let both = world.parameter(&d.id, "tls/ca.crt").await?.ok_or("ca")?;
                assert_eq!(both, format!("{}\n{http_ca}", ca_before.trim_end()));
            }
        }
        verifies_with_the_view(&world, &moved).await?;
        // The functions reach it by its endpoint now.
        let client = world.clusters.client(&moved, &[]).await?;
        assert!(format!("{client:?}").contains(&host), "{client:?}");

        // A later update keeps the endpoint and the CAs.
        let status = world
            .move_to(&d.id, &spec(4)?, None, Arc::new(world.steps()))
            .await?;
        assert_eq!(status, PlanStatus::Succeeded);
        let later = world.deployment(&d.id).await?;
        assert_eq!(later.endpoint.as_deref(), Some(host.as_str()));
        assert_eq!(world.parameter(&d.id, "tls/http-ca.crt").await?, http_ca);
        assert_eq!(
            later.access.as_ref().map(|a| &a.ca_cert_pem),
            Some(&access.ca_cert_pem)
        );
        world.clusters.forget(&d.id).await;
    }
    Ok(())
}

/// A move that fails before its point of no return unwinds: the old nodes
/// stay, and with them the node address and the CA that work; the record
/// gets no endpoint, and nothing says a move is under way. The next move
/// keeps the HTTP CA made the first time, and succeeds, each of its steps
/// run twice (as a worker that crashed after a step and runs it again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_move_leaves_what_worked_and_the_next_one_finishes() -> TestResult {
    let world = World::secured(PORT)?;
    let d = world.legacy().await?;
    world
        .parameters
        .delete(&format!("/floe/{}/tls/ca.key", d.id))
        .await?;
    let before = world.running(&d.id).await?;
    let host = floe_domain::access::loopback_endpoint(&d.id).to_string();
    let failing = Arc::new(FailAfter {
        inner: world.steps(),
        at: "wait-joined".into(),
    });
    let status = world
        .move_to(&d.id, &spec(3)?, Some(&host), failing)
        .await?;
    assert_eq!(status, PlanStatus::Failed);
    let unwound = world.deployment(&d.id).await?;
    assert_eq!(unwound.endpoint, None);
    assert_eq!(unwound.endpoint_moving_to, None);
    assert_eq!(unwound.status, DeploymentStatus::Running);
    assert_eq!(world.running(&d.id).await?, before);
    let view = floe_domain::deployment::DeploymentView::new(&unwound, 1);
    let es = view
        .elasticsearch
        .as_ref()
        .ok_or("no elasticsearch in the view")?;
    assert!(!es.stable_endpoint);
    assert_eq!(es.moving_to_endpoint, None);
    // The functions still reach the old nodes, and trust them.
    let client = world.clusters.client(&unwound, &[]).await?;
    assert_eq!(client.nodes().await?.len(), 3);
    let http_ca = world
        .parameter(&d.id, "tls/http-ca.crt")
        .await?
        .ok_or("an HTTP CA")?;

    let status = world
        .move_to(
            &d.id,
            &spec(3)?,
            Some(&host),
            Arc::new(Twice(world.steps())),
        )
        .await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let moved = world.deployment(&d.id).await?;
    assert_eq!(moved.endpoint.as_deref(), Some(host.as_str()));
    assert_eq!(
        world.parameter(&d.id, "tls/http-ca.crt").await?.as_deref(),
        Some(http_ca.as_str())
    );
    verifies_with_the_view(&world, &moved).await?;
    world.clusters.forget(&d.id).await;
    Ok(())
}
