//! The nodes' S3 client as Elasticsearch has it: settings and keystore
//! keys, keys reloaded by `_nodes/reload_secure_settings`, and a store that
//! cannot be reached failing verification with a reason that says where
//! and why. Nothing here reaches beyond 127.0.0.1 (port 9 refuses).

use crate::common::{TestResult, call};
use floe_domain::secret::SecretString;
use floe_elastic_sim::{S3Client, S3Keys, SimConfig, SimulatedCluster};
use reqwest::Method;
use serde_json::json;

fn keys() -> S3Keys {
    S3Keys {
        access_key: "AKIASIMULATED".into(),
        secret_key: SecretString::new("secret"),
        session_token: None,
    }
}

fn refused_client(keys: Option<S3Keys>) -> S3Client {
    S3Client {
        endpoint: Some("127.0.0.1:9".into()),
        protocol: Some("http".into()),
        path_style_access: Some(true),
        region: None,
        keys,
    }
}

fn repository() -> serde_json::Value {
    json!({"type": "s3", "settings": {"bucket": "backups", "client": "floe"}})
}

#[tokio::test]
async fn an_unreachable_store_fails_verification_naming_the_endpoint_and_the_cause() -> TestResult {
    let cluster =
        SimulatedCluster::start(SimConfig::new("s3").with_s3(refused_client(Some(keys())))).await?;
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/_snapshot/backups",
        Some(repository()),
    )
    .await?;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["type"], "repository_verification_exception");
    let reason = body["error"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("[backups] path [s3://backups/] is not accessible on master node"),
        "{reason}"
    );
    assert!(
        reason.contains("connection refused to http://127.0.0.1:9"),
        "{reason}"
    );
    assert_eq!(body["error"]["caused_by"]["type"], "i_o_exception");
    // Registered all the same, as Elasticsearch keeps it.
    let (status, _) = call(&cluster, Method::GET, "/_snapshot/backups", None).await?;
    assert_eq!(status, 200);
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn without_a_client_an_s3_repository_fails_as_a_node_without_credentials() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("s3")).await?;
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/_snapshot/backups",
        Some(repository()),
    )
    .await?;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["type"], "repository_verification_exception");
    let reason = body["error"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("Unable to load credentials"), "{reason}");
    assert!(
        !reason.contains("SimConfig") && !reason.contains("simulat"),
        "{reason}"
    );
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn keystore_keys_apply_when_the_secure_settings_are_reloaded() -> TestResult {
    let cluster =
        SimulatedCluster::start(SimConfig::new("s3").with_s3(refused_client(None))).await?;
    call(
        &cluster,
        Method::PUT,
        "/_snapshot/backups?verify=false",
        Some(repository()),
    )
    .await?;
    let verify = |cluster| async move {
        let (status, body) =
            call(cluster, Method::POST, "/_snapshot/backups/_verify", None).await?;
        assert_eq!(status, 500, "{body}");
        Ok::<String, Box<dyn std::error::Error + Send + Sync>>(
            body["error"]["reason"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    assert!(
        verify(&cluster)
            .await?
            .contains("Unable to load credentials")
    );
    cluster.set_keystore_s3_keys(Some(keys()));
    // In the keystore, not yet in the running client.
    assert!(
        verify(&cluster)
            .await?
            .contains("Unable to load credentials")
    );
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/_nodes/reload_secure_settings",
        Some(json!({})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["_nodes"],
        json!({"total": 3, "successful": 3, "failed": 0})
    );
    assert_eq!(body["cluster_name"], "s3");
    assert!(
        verify(&cluster)
            .await?
            .contains("connection refused to http://127.0.0.1:9")
    );
    assert_eq!(cluster.s3_client().and_then(|c| c.keys), Some(keys()));
    cluster.shutdown().await?;
    Ok(())
}
