//! How the functions reach a secured node: a real TLS server on 127.0.0.1
//! presents the deployment's node certificate (made by floe-node-security).
//! The pinned client connects by the certificate's name resolved to the
//! address, trusts only that deployment's CA, and sends the elastic user's
//! credentials; another deployment's CA, another name, or a client trusting
//! the public CAs gets nowhere. `NodeAddresses` does all of it from the
//! deployment's parameters and the node's address.

use async_trait::async_trait;
use base64::Engine as _;
use floe_clusters::{Clusters, NodeAddresses};
use floe_compute::parameters::SecretOrPlain;
use floe_compute::{
    Compute, ComputeError, Instance, InstanceState, LaunchRequest, LaunchTemplateSpec,
    NodeParameters,
};
use floe_compute_sim::SimulatedParameters;
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::secret::SecretString;
use floe_elastic::{Auth, ElasticClient};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const HEALTH: &str = r#"{"cluster_name":"logs","status":"green","timed_out":false,"number_of_nodes":3,"number_of_data_nodes":3,"active_primary_shards":1,"active_shards":2,"relocating_shards":0,"initializing_shards":0,"unassigned_shards":0,"delayed_unassigned_shards":0,"number_of_pending_tasks":0,"number_of_in_flight_fetch":0,"task_max_waiting_in_queue_millis":0,"active_shards_percent_as_number":100.0}"#;

/// Serves `_cluster/health` over TLS with `security`'s node certificate,
/// and keeps the Authorization header of each request it answers.
async fn node(
    security: &floe_node_security::ClusterSecurity,
) -> Result<(SocketAddr, Arc<Mutex<Vec<String>>>), Box<dyn std::error::Error>> {
    let certs = vec![CertificateDer::from_pem_slice(
        security.node_cert_pem.as_bytes(),
    )?];
    let key = PrivateKeyDer::from_pem_slice(security.node_key_pem.expose().as_bytes())?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let kept = kept.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).to_string();
                let auth = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .starts_with("authorization:")
                            .then(|| l["authorization:".len()..].trim().to_string())
                    })
                    .unwrap_or_default();
                if let Ok(mut k) = kept.lock() {
                    k.push(auth);
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{HEALTH}",
                    HEALTH.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Ok((address, seen))
}

/// What the create plan stores for the functions: the CA and the elastic
/// password, under the deployment's path below `/floe`.
async fn store_secrets(
    parameters: &SimulatedParameters,
    id: &str,
    security: &floe_node_security::ClusterSecurity,
) -> TestResult {
    for (name, value) in [
        (
            "tls/ca.crt",
            SecretOrPlain::plain(security.ca_cert_pem.clone()),
        ),
        (
            "security/elastic_password",
            SecretOrPlain::secret(security.elastic_password.expose()),
        ),
    ] {
        parameters
            .put(&format!("/floe/{id}/{name}"), &value)
            .await?;
    }
    Ok(())
}

fn elastic(password: &SecretString) -> Option<Auth> {
    Some(Auth::Basic {
        username: "elastic".into(),
        password: password.clone(),
    })
}

#[tokio::test]
async fn a_pinned_client_trusts_its_deployments_ca_and_nothing_else() -> TestResult {
    let deployment = "0123456789abcdef0123456789abcdef";
    let security = floe_node_security::generate(deployment)?;
    let (address, seen) = node(&security).await?;
    let name = floe_node_security::server_name(deployment);
    let timeout = Duration::from_secs(10);

    let client = ElasticClient::pinned(
        &name,
        address,
        &security.ca_cert_pem,
        elastic(&security.elastic_password),
        timeout,
    )?;
    let health = client.health(None, None).await?;
    assert_eq!(health.number_of_nodes, 3);
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("elastic:{}", security.elastic_password.expose()))
    );
    assert_eq!(
        seen.lock().map(|s| s.clone()).unwrap_or_default(),
        [expected]
    );

    // Another deployment's CA does not vouch for this node.
    let other = floe_node_security::generate(deployment)?;
    let wrong_ca = ElasticClient::pinned(
        &name,
        address,
        &other.ca_cert_pem,
        elastic(&other.elastic_password),
        timeout,
    )?;
    assert!(wrong_ca.health(None, None).await.is_err());
    // Nor does the certificate name another deployment.
    let wrong_name = ElasticClient::pinned(
        &floe_node_security::server_name("ffffffffffffffffffffffffffffffff"),
        address,
        &security.ca_cert_pem,
        None,
        timeout,
    )?;
    assert!(wrong_name.health(None, None).await.is_err());
    // A client trusting the public CAs, by address, is refused too.
    let public = ElasticClient::new(&format!("https://{address}"), None, timeout)?;
    assert!(public.health(None, None).await.is_err());
    assert_eq!(
        seen.lock().map(|s| s.len()).unwrap_or_default(),
        1,
        "no refused client got a request through"
    );
    Ok(())
}

/// EC2 as `NodeAddresses` sees it: one running instance, at the loopback
/// address the test's node listens on.
struct OneNode;

#[async_trait]
impl Compute for OneNode {
    async fn ensure_launch_template(&self, _: &LaunchTemplateSpec) -> Result<String, ComputeError> {
        Err(unused())
    }
    async fn delete_launch_template(&self, _: &str) -> Result<(), ComputeError> {
        Err(unused())
    }
    async fn launch_templates(&self, _: &str) -> Result<Vec<String>, ComputeError> {
        Err(unused())
    }
    async fn launch(&self, _: &LaunchRequest) -> Result<Vec<String>, ComputeError> {
        Err(unused())
    }
    async fn instances(&self, _: &str) -> Result<Vec<Instance>, ComputeError> {
        Ok(vec![Instance {
            id: "i-0123456789abcdef0".into(),
            state: InstanceState::Running,
            instance_type: "m6g.xlarge".into(),
            zone: "us-east-1a".into(),
            private_ip: Some("127.0.0.1".into()),
            tags: BTreeMap::new(),
        }])
    }
    async fn terminate(&self, _: &[String]) -> Result<(), ComputeError> {
        Err(unused())
    }
}

fn unused() -> ComputeError {
    ComputeError::Permanent {
        failure_type: "unused".into(),
        message: "NodeAddresses only lists instances".into(),
    }
}

fn deployment(id: &str) -> Result<Deployment, serde_json::Error> {
    Ok(Deployment {
        last_drill: None,
        id: id.into(),
        org: "acme".into(),
        spec: serde_json::from_value(serde_json::json!({
            "name": "logs", "version": "8.15.3",
            "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.xlarge",
                             "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}]
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

#[tokio::test]
async fn node_addresses_reach_a_secured_node_with_its_deployments_parameters() -> TestResult {
    let id = "0123456789abcdef0123456789abcdef";
    let security = floe_node_security::generate(id)?;
    let (address, seen) = node(&security).await?;
    let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
    let clusters = NodeAddresses::new(
        Arc::new(OneNode),
        true,
        address.port(),
        None,
        Duration::from_secs(10),
    )
    .with_security(parameters.clone(), "/floe");

    // Before the plan has stored them, the node cannot be reached securely.
    match clusters.client(&deployment(id)?, &[]).await {
        Err(floe_clusters::ClusterError::NotSecured { .. }) => {}
        other => return Err(format!("expected NotSecured, got {other:?}").into()),
    }
    store_secrets(&parameters, id, &security).await?;
    let client = clusters.client(&deployment(id)?, &[]).await?;
    assert_eq!(client.health(None, None).await?.status.as_str(), "green");
    let sent = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("elastic:{}", security.elastic_password.expose()))
    );
    assert_eq!(sent, [expected]);
    Ok(())
}

/// The api function's way in: the record a plan wrote (nodes, CA, sealed
/// password) and the cipher, nothing else. A deployment without the record,
/// a password sealed for another deployment, or another org's record gets
/// no request through.
#[tokio::test]
async fn stored_clusters_reach_a_secured_node_from_the_record_alone() -> TestResult {
    use floe_domain::access::{ClusterAccess, NodeEndpoint, PASSWORD_FIELD, sealing_resource};
    use floe_secrets::{Cipher, LocalCipher, Owner};
    let id = "0123456789abcdef0123456789abcdef";
    let security = floe_node_security::generate(id)?;
    let (address, seen) = node(&security).await?;
    let cipher: Arc<dyn Cipher> = Arc::new(LocalCipher::from_key(&[9u8; 32]));
    let clusters =
        floe_clusters::StoredClusters::new(cipher.clone(), address.port(), Duration::from_secs(10));
    let mut d = deployment(id)?;
    match clusters.client(&d, &[]).await {
        Err(floe_clusters::ClusterError::NotSecured { .. }) => {}
        other => return Err(format!("expected NotSecured, got {other:?}").into()),
    }
    let seal = |org: &'static str, of: &'static str| {
        let cipher = cipher.clone();
        let password = security.elastic_password.expose().to_string();
        async move {
            let resource = sealing_resource(of);
            cipher
                .seal(
                    &password,
                    &Owner {
                        org,
                        repository: &resource,
                        field: PASSWORD_FIELD,
                    },
                )
                .await
        }
    };
    let access = |sealed_password: String| ClusterAccess {
        ca_cert_pem: security.ca_cert_pem.clone(),
        sealed_password,
        nodes: vec![
            NodeEndpoint {
                name: "i-0gone".into(),
                address: "127.0.0.1".into(),
            },
            NodeEndpoint {
                name: "i-0123456789abcdef0".into(),
                address: "127.0.0.1".into(),
            },
        ],
        http_port: floe_domain::access::DEFAULT_HTTP_PORT,
    };
    // Sealed for another deployment, or another org: it does not open.
    for (org, of) in [("acme", "ffffffffffffffffffffffffffffffff"), ("globex", id)] {
        d.access = Some(access(seal(org, of).await?));
        match clusters.client(&d, &[]).await {
            Err(floe_clusters::ClusterError::NotSecured { .. }) => {}
            other => return Err(format!("{org}/{of}: expected NotSecured, got {other:?}").into()),
        }
    }
    d.access = Some(access(seal("acme", id).await?));
    let client = clusters.client(&d, &["i-0gone".to_string()]).await?;
    assert_eq!(client.health(None, None).await?.status.as_str(), "green");
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("elastic:{}", security.elastic_password.expose()))
    );
    assert_eq!(
        seen.lock().map(|s| s.clone()).unwrap_or_default(),
        [expected]
    );
    // No node recorded (after a shutdown): nothing to reach.
    if let Some(a) = &mut d.access {
        a.nodes.clear();
    }
    clusters.forget(id).await;
    match clusters.client(&d, &[]).await {
        Err(floe_clusters::ClusterError::NoRunningNode { .. }) => {}
        other => return Err(format!("expected NoRunningNode, got {other:?}").into()),
    }
    Ok(())
}

/// A deployment whose nodes a plan has recorded, and which has a stable
/// endpoint, is reached by that name (here `localhost`, which needs no DNS
/// server), verified against the certificate's name for it: the recorded
/// node address below answers nothing, and a node avoided by the caller
/// sends it back to node addresses.
#[tokio::test]
async fn a_recorded_deployment_is_reached_by_its_endpoints_name() -> TestResult {
    use floe_domain::access::{ClusterAccess, NodeEndpoint, PASSWORD_FIELD, sealing_resource};
    use floe_secrets::{Cipher, LocalCipher, Owner};
    let id = "0123456789abcdef0123456789abcdef";
    let security = floe_node_security::generate_with(
        id,
        floe_node_security::new_password(),
        Some("localhost"),
    )?;
    let (address, seen) = node(&security).await?;
    let cipher: Arc<dyn Cipher> = Arc::new(LocalCipher::from_key(&[9u8; 32]));
    let resource = sealing_resource(id);
    let sealed_password = cipher
        .seal(
            security.elastic_password.expose(),
            &Owner {
                org: "acme",
                repository: &resource,
                field: PASSWORD_FIELD,
            },
        )
        .await?;
    let mut d = deployment(id)?;
    d.endpoint = Some("localhost".into());
    d.access = Some(ClusterAccess {
        ca_cert_pem: security.ca_cert_pem.clone(),
        sealed_password,
        nodes: vec![NodeEndpoint {
            name: "i-0123456789abcdef0".into(),
            // Nothing listens here: only the name gets through.
            address: "127.0.0.9".into(),
        }],
        http_port: address.port(),
    });
    let stored =
        floe_clusters::StoredClusters::new(cipher.clone(), address.port(), Duration::from_secs(10));
    let client = stored.client(&d, &[]).await?;
    assert!(format!("{client:?}").contains(&format!("https://localhost:{}", address.port())));
    assert_eq!(client.health(None, None).await?.status.as_str(), "green");
    let avoiding = stored.client(&d, &["i-0other".to_string()]).await?;
    assert!(
        avoiding.health(None, None).await.is_err(),
        "reached by name"
    );

    let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
    store_secrets(&parameters, id, &security).await?;
    let addresses = NodeAddresses::new(
        Arc::new(OneNode),
        true,
        address.port(),
        None,
        Duration::from_secs(10),
    )
    .with_security(parameters, "/floe");
    let client = addresses.client(&d, &[]).await?;
    assert!(format!("{client:?}").contains(&format!("https://localhost:{}", address.port())));
    assert_eq!(client.health(None, None).await?.status.as_str(), "green");
    // Being created (no nodes recorded): the node's address, by server name.
    d.access = None;
    let client = addresses.client(&d, &[]).await?;
    assert!(
        format!("{client:?}").contains("nodes.floe.internal"),
        "{client:?}"
    );
    assert_eq!(client.health(None, None).await?.status.as_str(), "green");
    assert_eq!(seen.lock().map(|s| s.len()).unwrap_or_default(), 3);

    // A certificate that does not name the endpoint is refused by name.
    let other = floe_node_security::generate(id)?;
    let (unnamed, _) = node(&other).await?;
    let refused = ElasticClient::at_endpoint(
        "localhost",
        unnamed.port(),
        &other.ca_cert_pem,
        elastic(&other.elastic_password),
        Duration::from_secs(10),
    )?;
    assert!(
        refused.health(None, None).await.is_err(),
        "a certificate without the name"
    );
    Ok(())
}
