//! The same scenario on an S3 repository, through moto.

use crate::common::{Fallible, TestResult, client, count, seed, wire};
use floe_domain::secret::SecretString;
use floe_elastic::{
    CreateSnapshot, CreateSnapshotResponse, ElasticError, RepositoryRegistration, RestoreRequest,
    SnapshotState,
};
use floe_elastic_sim::{RunningCluster, S3Access, SimConfig, SimulatedCluster};
use serde_json::{Map, json};

fn endpoint() -> String {
    match std::env::var("FLOE_TEST_AWS_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => endpoint,
        _ => panic!(
            "FLOE_TEST_AWS_ENDPOINT is not set: the S3 tests need moto; run them with scripts/test.sh"
        ),
    }
}

fn access(endpoint: &str) -> S3Access {
    S3Access {
        endpoint_url: Some(endpoint.to_string()),
        region: "us-east-1".to_string(),
        access_key: "test".to_string(),
        secret_key: SecretString::new("test"),
        force_path_style: true,
    }
}

async fn create_bucket(endpoint: &str, bucket: &str) -> TestResult {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
        .create_bucket()
        .bucket(bucket)
        .send()
        .await?;
    Ok(())
}

async fn start(name: &str, endpoint: &str) -> Fallible<RunningCluster> {
    Ok(SimulatedCluster::start(SimConfig::new(name).with_s3(access(endpoint))).await?)
}

fn s3_repo(bucket: &str) -> RepositoryRegistration {
    let mut settings = Map::new();
    settings.insert("bucket".to_string(), json!(bucket));
    settings.insert("base_path".to_string(), json!("clusters/source"));
    settings.insert("path_style_access".to_string(), json!(true));
    RepositoryRegistration::new("s3", settings)
}

#[tokio::test]
async fn snapshots_in_an_s3_bucket_restore_on_another_cluster() -> TestResult {
    let endpoint = endpoint();
    let bucket = format!("floe-sim-{}", uuid::Uuid::new_v4().simple());
    create_bucket(&endpoint, &bucket).await?;

    let source = start("s3-source", &endpoint).await?;
    seed(&source, "metrics", 7).await?;
    let es = client(&source)?;
    es.put_repository("s3", &s3_repo(&bucket)).await?;
    let created = es
        .create_snapshot("s3", "snap-1", &CreateSnapshot::default(), true)
        .await?;
    let CreateSnapshotResponse::Completed(info) = created else {
        return Err(format!("expected a completed snapshot, got {created:?}").into());
    };
    assert_eq!(info.state, Some(SnapshotState::Success));

    let clone = start("s3-clone", &endpoint).await?;
    let es2 = client(&clone)?;
    es2.put_repository("s3", &s3_repo(&bucket).read_only())
        .await?;
    let listed = es2.list_snapshots("s3", true).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].uuid, info.uuid);
    es2.restore("s3", "snap-1", &RestoreRequest::default(), true)
        .await?;
    assert_eq!(count(&clone, "metrics").await?, 7);
    let refused = es2
        .create_snapshot("s3", "snap-2", &CreateSnapshot::default(), true)
        .await;
    assert!(
        matches!(refused, Err(ElasticError::ReadOnlyRepository(_))),
        "{refused:?}"
    );

    es.delete_snapshot("s3", "snap-1").await?;
    assert!(es2.list_snapshots("s3", true).await?.is_empty());

    let missing = es
        .put_repository("nowhere", &s3_repo("no-such-bucket-floe"))
        .await;
    let Err(error @ ElasticError::RepositoryVerification(_)) = missing else {
        return Err(format!("expected a verification failure, got {missing:?}").into());
    };
    assert_eq!(
        wire(&error),
        (Some(500), "repository_verification_exception".to_string())
    );
    source.shutdown().await?;
    clone.shutdown().await?;
    Ok(())
}
