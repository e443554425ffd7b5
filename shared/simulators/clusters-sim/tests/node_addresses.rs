//! A deployment's simulated cluster reached as a real Floe node is: on
//! every instance's own (loopback) address at the nodes' HTTP port, over
//! HTTPS with the deployment's certificate, as the `elastic` user, with
//! the S3 client its user data configures and the repository keys its
//! parameters hold. Nothing here reaches beyond loopback (port 9 refuses).

use floe_clusters::Clusters;
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute::parameters::SecretOrPlain;
use floe_compute::{
    Compute, LaunchRequest, LaunchTemplateSpec, NodeParameters, TAG_DEPLOYMENT, Volume,
};
use floe_compute_sim::{AddressPool, SimulatedCompute, SimulatedConfig, SimulatedParameters};
use floe_domain::catalog::Arch;
use floe_domain::deployment::{Deployment, DeploymentStatus, VolumeType};
use floe_domain::secret::SecretString;
use floe_elastic::{Auth, ElasticClient, RepositoryRegistration};
use serde_json::{Map, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const ID: &str = "0123456789abcdef0123456789abcdef";
/// Any port: every instance has an address of its own.
const PORT: u16 = 19243;

fn deployment() -> Result<Deployment, serde_json::Error> {
    Ok(Deployment {
        last_drill: None,
        id: ID.into(),
        org: "acme".into(),
        spec: serde_json::from_value(json!({
            "name": "logs", "version": "8.15.3",
            "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.xlarge",
                             "count": 3, "zone_count": 3, "storage": {"size_gb": 20}}]
        }))?,
        status: DeploymentStatus::Running,
        pending_plan: None,
        access: None,
        password_to_apply: None,
        endpoint: None,
        endpoint_moving_to: None,
        clone_source: None,
        health: None,
        created: chrono::Utc::now(),
        updated: chrono::Utc::now(),
        license: None,
    })
}

/// The S3 client lines of a rendered `elasticsearch.yml`, in a boot script.
const USER_DATA: &str = "#!/bin/bash\ncat > \"${ES_CONF}/elasticsearch.yml\" <<'FLOE_EOF'\ncluster.name: \"logs\"\ns3.client.floe.endpoint: \"127.0.0.1:9\"\ns3.client.floe.protocol: \"http\"\ns3.client.floe.path_style_access: true\nFLOE_EOF\n";

async fn launch(
    compute: &SimulatedCompute,
) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
    compute
        .ensure_launch_template(&LaunchTemplateSpec {
            name: "lt-logs".into(),
            instance_type: "m6g.xlarge".into(),
            arch: Arch::Arm64,
            user_data: USER_DATA.into(),
            volume: Volume {
                size_gb: 20,
                volume_type: VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            tags: BTreeMap::from([(TAG_DEPLOYMENT.to_string(), ID.to_string())]),
            instance_profile: None,
        })
        .await?;
    Ok(compute
        .launch(&LaunchRequest {
            template_name: "lt-logs".into(),
            count: 3,
            zone: 0,
            client_token: "t1".into(),
            tags: BTreeMap::new(),
        })
        .await?)
}

fn pinned(
    ca: &str,
    addr: SocketAddr,
    password: &str,
) -> Result<ElasticClient, floe_elastic::ElasticError> {
    ElasticClient::pinned(
        &floe_node_security::server_name(ID),
        addr,
        ca,
        Some(Auth::Basic {
            username: "elastic".into(),
            password: SecretString::new(password),
        }),
        Duration::from_secs(10),
    )
}

/// What the create plan stores for the nodes and the functions: the CA,
/// the nodes' certificate and key, and the elastic password.
async fn store_security(
    parameters: &SimulatedParameters,
    security: &floe_node_security::ClusterSecurity,
) -> TestResult {
    for (name, value) in [
        (
            "tls/ca.crt",
            SecretOrPlain::plain(security.ca_cert_pem.clone()),
        ),
        (
            "tls/node.crt",
            SecretOrPlain::secret(security.node_cert_pem.clone()),
        ),
        (
            "tls/node.key",
            SecretOrPlain::secret(security.node_key_pem.expose()),
        ),
        (
            "security/elastic_password",
            SecretOrPlain::secret(security.elastic_password.expose()),
        ),
    ] {
        parameters
            .put(&format!("/floe/{ID}/{name}"), &value)
            .await?;
    }
    Ok(())
}

fn s3_repository() -> RepositoryRegistration {
    let mut settings = Map::new();
    settings.insert("bucket".into(), json!("backups"));
    settings.insert("client".into(), json!("floe"));
    RepositoryRegistration::new("s3", settings)
}

#[tokio::test]
async fn every_node_address_serves_the_secured_cluster_until_its_instance_goes() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        addresses: AddressPool::Loopback,
        ..SimulatedConfig::default()
    }));
    let ids = launch(&compute).await?;
    let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
    let security = floe_node_security::generate(ID)?;
    let password = security.elastic_password.expose().to_string();
    let path = format!("/floe/{ID}");
    store_security(&parameters, &security).await?;
    let source = compute.clone();
    let clusters = SimulatedClusters::new(compute.clone(), SimulatedClustersConfig::default())
        .with_http_port(PORT)
        .with_parameters(parameters.clone(), "/floe")
        .with_user_data(Arc::new(move |id: &str| source.user_data(id)));

    let dep = deployment()?;
    let es = clusters.client(&dep, &[]).await?;
    assert_eq!(es.nodes().await?.len(), 3);
    let addrs: Vec<SocketAddr> = compute
        .instances(ID)
        .await?
        .iter()
        .filter_map(|i| i.private_ip.as_deref()?.parse().ok())
        .map(|ip| SocketAddr::new(ip, PORT))
        .collect();
    assert_eq!(addrs.len(), 3);
    let mut served = clusters.addrs(ID).await;
    served.sort_unstable();
    let mut expected = addrs.clone();
    expected.sort_unstable();
    assert_eq!(served, expected);
    assert!(
        addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.ip().to_string() != "127.0.0.1")
    );

    // Each recorded address answers, pinned to the deployment's CA, as
    // StoredClusters connects; a wrong password is refused.
    for addr in &addrs {
        let nodes = pinned(&security.ca_cert_pem, *addr, &password)?
            .nodes()
            .await?;
        assert_eq!(nodes.len(), 3);
        let refused = pinned(&security.ca_cert_pem, *addr, "wrong-password")?
            .nodes()
            .await
            .err();
        assert_eq!(refused.and_then(|e| e.status()), Some(401), "{addr}");
    }

    // The nodes' S3 client comes from their user data; no keys yet.
    let client = clusters.s3_client(ID).await.ok_or("an S3 client")?;
    assert_eq!(client.endpoint.as_deref(), Some("127.0.0.1:9"));
    assert_eq!(client.protocol.as_deref(), Some("http"));
    assert_eq!(client.path_style_access, Some(true));
    assert!(client.keys.is_none());
    let failed = es.put_repository("backups", &s3_repository()).await.err();
    let reason = failed
        .as_ref()
        .and_then(|e| e.failure())
        .map(|f| f.reason.clone())
        .unwrap_or_default();
    assert!(reason.contains("Unable to load credentials"), "{failed:?}");

    // A repository-credentials step stores keys: the next client() reloads them.
    for (name, value) in [
        ("repository/access_key", "AKIASIM"),
        ("repository/secret_key", "secret"),
    ] {
        parameters
            .put(&format!("{path}/{name}"), &SecretOrPlain::secret(value))
            .await?;
    }
    let es = clusters.client(&dep, &[]).await?;
    let keys = clusters
        .s3_client(ID)
        .await
        .and_then(|c| c.keys)
        .ok_or("keys")?;
    assert_eq!(keys.access_key, "AKIASIM");
    let failed = es.verify_repository("backups").await.err();
    let reason = failed
        .as_ref()
        .and_then(|e| e.failure())
        .map(|f| f.reason.clone())
        .unwrap_or_default();
    assert!(
        reason.contains("connection refused to http://127.0.0.1:9"),
        "{failed:?}"
    );

    // An instance terminated: its address stops answering, the others stay.
    compute.terminate(&ids[..1]).await?;
    let gone = compute
        .instances(ID)
        .await?
        .iter()
        .position(|i| i.private_ip.is_none())
        .ok_or("a terminated instance")?;
    let es = clusters.client(&dep, &[]).await?;
    assert_eq!(es.nodes().await?.len(), 2);
    let gone_addr = addrs[gone];
    assert!(
        tokio::net::TcpStream::connect(gone_addr).await.is_err(),
        "{gone_addr} still answers"
    );
    assert_eq!(clusters.addrs(ID).await.len(), 2);
    for addr in addrs.iter().filter(|a| **a != gone_addr) {
        assert_eq!(
            pinned(&security.ca_cert_pem, *addr, &password)?
                .nodes()
                .await?
                .len(),
            2
        );
    }
    clusters.forget(ID).await;
    Ok(())
}

#[tokio::test]
async fn without_parameters_or_loopback_addresses_nothing_changes() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    launch(&compute).await?;
    let clusters = SimulatedClusters::new(compute.clone(), SimulatedClustersConfig::default());
    let dep = deployment()?;
    let es = clusters.client(&dep, &[]).await?;
    assert_eq!(es.nodes().await?.len(), 3);
    let url = clusters.url(ID).await.ok_or("a url")?;
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    clusters.forget(ID).await;
    Ok(())
}

/// Once a plan has recorded its nodes, a deployment with a stable endpoint
/// is reached by that endpoint, as the functions reach one by its DNS name
/// on AWS: a client taken before a node goes keeps answering after, where a
/// client of that node's address would be stranded. A caller that avoids a
/// node, or a deployment whose nodes no plan has recorded yet (its name has
/// no records), is given a node's address.
#[tokio::test]
async fn a_recorded_deployment_is_reached_by_its_endpoint_through_node_loss() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        addresses: AddressPool::Loopback,
        ..SimulatedConfig::default()
    }));
    let ids = launch(&compute).await?;
    let endpoint = floe_domain::access::loopback_endpoint(ID).to_string();
    let security =
        floe_node_security::generate_with(ID, floe_node_security::new_password(), Some(&endpoint))?;
    let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
    store_security(&parameters, &security).await?;
    let source = compute.clone();
    let clusters = SimulatedClusters::new(compute.clone(), SimulatedClustersConfig::default())
        .with_http_port(PORT)
        .with_parameters(parameters.clone(), "/floe")
        .with_user_data(Arc::new(move |id: &str| source.user_data(id)));

    // Being created: no plan has recorded the nodes, so a node's address.
    let mut dep = deployment()?;
    dep.endpoint = Some(endpoint.clone());
    let by_node = clusters.client(&dep, &[]).await?;
    assert!(!format!("{by_node:?}").contains(&endpoint), "{by_node:?}");

    // Recorded: the endpoint, unless the caller leaves a node out.
    dep.access = Some(floe_domain::access::ClusterAccess {
        ca_cert_pem: security.ca_cert_pem.clone(),
        sealed_password: "sealed".into(),
        nodes: vec![floe_domain::access::NodeEndpoint {
            name: ids[0].clone(),
            address: "127.1.0.1".into(),
        }],
        http_port: PORT,
    });
    let by_endpoint = clusters.client(&dep, &[]).await?;
    assert!(format!("{by_endpoint:?}").contains(&format!("https://{endpoint}:{PORT}")));
    let avoiding = clusters.client(&dep, &[ids[1].clone()]).await?;
    assert!(!format!("{avoiding:?}").contains(&endpoint), "{avoiding:?}");
    assert_eq!(by_endpoint.nodes().await?.len(), 3);

    // The node a node-address client would use goes: the endpoint client
    // taken before keeps answering, through the nodes that remain.
    compute.terminate(&ids[..1]).await?;
    clusters.client(&dep, &[]).await?;
    assert_eq!(by_endpoint.nodes().await?.len(), 2);
    assert!(
        by_node.nodes().await.is_err(),
        "the first node's address still answers"
    );
    clusters.forget(ID).await;
    Ok(())
}
