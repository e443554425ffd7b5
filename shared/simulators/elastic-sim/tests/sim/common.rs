//! Starting simulated clusters and talking to them: Floe's client for the
//! snapshot APIs, plain HTTP for the index APIs it does not cover.

use floe_elastic::{ElasticClient, ElasticError, RepositoryRegistration};
use floe_elastic_sim::{RunningCluster, SimConfig, SimFaults, SimulatedCluster};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::time::Duration;

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;
pub type Fallible<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

pub async fn start(name: &str, fs_root: &Path, faults: SimFaults) -> Fallible<RunningCluster> {
    let config = SimConfig::new(name)
        .with_fs_root(fs_root)
        .with_faults(faults);
    Ok(SimulatedCluster::start(config).await?)
}

pub fn client(cluster: &RunningCluster) -> Fallible<ElasticClient> {
    Ok(ElasticClient::new(
        cluster.url(),
        None,
        Duration::from_secs(30),
    )?)
}

pub fn fs_repo(location: &str) -> RepositoryRegistration {
    let mut settings = Map::new();
    settings.insert("location".to_string(), json!(location));
    RepositoryRegistration::new("fs", settings)
}

/// Sends a request and returns its status and JSON body.
pub async fn call(
    cluster: &RunningCluster,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Fallible<(u16, Value)> {
    let http = reqwest::Client::new();
    let mut request = http.request(method, format!("{}{path}", cluster.url()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await?;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)?
    };
    Ok((status, body))
}

/// Starts the cluster's 30-day trial, as a user does before mounting
/// searchable snapshots: a new cluster's `basic` license refuses them.
pub async fn start_trial(cluster: &RunningCluster) -> TestResult {
    let (status, body) = call(
        cluster,
        reqwest::Method::POST,
        "/_license/start_trial?acknowledge=true",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["trial_was_started"], json!(true), "{body}");
    Ok(())
}

/// Creates an index and puts `docs` documents in it.
pub async fn seed(cluster: &RunningCluster, index: &str, docs: usize) -> TestResult {
    let (status, body) = call(
        cluster,
        reqwest::Method::PUT,
        &format!("/{index}"),
        Some(json!({ "settings": { "number_of_shards": 1, "number_of_replicas": 1 } })),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    for i in 0..docs {
        let (status, body) = call(
            cluster,
            reqwest::Method::PUT,
            &format!("/{index}/_doc/{i}"),
            Some(json!({ "message": format!("document {i} of {index}") })),
        )
        .await?;
        assert_eq!(status, 201, "{body}");
    }
    Ok(())
}

pub async fn count(cluster: &RunningCluster, index: &str) -> Fallible<u64> {
    let (status, body) = call(
        cluster,
        reqwest::Method::GET,
        &format!("/{index}/_count"),
        None,
    )
    .await?;
    if status != 200 {
        return Err(format!("count of {index} answered {status}: {body}").into());
    }
    body["count"]
        .as_u64()
        .ok_or_else(|| format!("no count in {body}").into())
}

/// The error's status and Elasticsearch type, for asserting on both.
pub fn wire(error: &ElasticError) -> (Option<u16>, String) {
    (
        error.status(),
        error
            .failure()
            .map(|f| f.error_type.clone())
            .unwrap_or_default(),
    )
}

pub fn reason(error: &ElasticError) -> String {
    error
        .failure()
        .map(|f| f.reason.clone())
        .unwrap_or_default()
}

/// Waits (briefly) until `check` holds.
pub async fn eventually<F, Fut>(what: &str, mut check: F) -> TestResult
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Fallible<bool>>,
{
    for _ in 0..200 {
        if check().await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!("timed out waiting until {what}").into())
}
