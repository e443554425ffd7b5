//! A cluster started again on its data path holds what it held: indices
//! with their documents, versions, mappings, settings and aliases,
//! registered repositories, templates, persistent settings, its UUID and
//! license; and loses what Elasticsearch loses in a full restart
//! (transient settings).

use crate::common::{Fallible, TestResult, call};
use floe_elastic_sim::{RunningCluster, SimConfig, SimError, SimulatedCluster};
use reqwest::Method;
use serde_json::{Value, json};
use std::path::Path;

async fn start(fs_root: &Path, data: &Path) -> Fallible<RunningCluster> {
    let config = SimConfig::new("kept")
        .with_fs_root(fs_root)
        .with_data_path(data);
    Ok(SimulatedCluster::start(config).await?)
}

async fn ok(
    cluster: &RunningCluster,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Fallible<Value> {
    let (status, answer) = call(cluster, method.clone(), path, body).await?;
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {answer}"
    );
    Ok(answer)
}

async fn fill(cluster: &RunningCluster) -> TestResult {
    ok(
        cluster,
        Method::PUT,
        "/_snapshot/backups",
        Some(json!({"type": "fs", "settings": {"location": "backups"}})),
    )
    .await?;
    ok(cluster, Method::PUT, "/_index_template/logs", Some(json!({"index_patterns": ["logs-*"], "template": {"settings": {"number_of_shards": 2}}}))).await?;
    ok(
        cluster,
        Method::PUT,
        "/_cluster/settings",
        Some(json!({
            "persistent": {"cluster.routing.allocation.exclude._name": "gone"},
            "transient": {"indices.recovery.max_bytes_per_sec": "50mb"}
        })),
    )
    .await?;
    ok(
        cluster,
        Method::PUT,
        "/logs-1",
        Some(json!({
            "mappings": {"properties": {"n": {"type": "long"}, "cat": {"type": "keyword"}}},
            "aliases": {"logs": {}}
        })),
    )
    .await?;
    let mut bulk = String::new();
    for i in 0..50 {
        bulk.push_str(&format!("{{\"index\":{{\"_id\":\"{i}\"}}}}\n"));
        let cat = ["a", "b"][i % 2];
        bulk.push_str(&json!({"n": i, "cat": cat, "note": format!("line {i}")}).to_string());
        bulk.push('\n');
    }
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/logs-1/_bulk?refresh=true", cluster.url()))
        .header("content-type", "application/x-ndjson")
        .body(bulk)
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(answer["errors"], json!(false), "{answer}");
    ok(
        cluster,
        Method::PUT,
        "/logs-1/_doc/3?refresh=true",
        Some(json!({"n": 3, "cat": "b", "note": "edited"})),
    )
    .await?;
    ok(cluster, Method::DELETE, "/logs-1/_doc/4?refresh=true", None).await?;
    ok(cluster, Method::PUT, "/scratch", None).await?;
    ok(cluster, Method::DELETE, "/scratch", None).await?;
    Ok(())
}

/// What the cluster holds, as a user would look at it.
async fn looks(cluster: &RunningCluster) -> Fallible<Value> {
    let search =
        |body: Value| async move { ok(cluster, Method::POST, "/logs/_search", Some(body)).await };
    let term = search(json!({"query": {"term": {"cat": "b"}}, "size": 0})).await?;
    let sorted = search(json!({"query": {"range": {"n": {"lt": 6}}}, "sort": [{"n": "desc"}], "_source": ["n", "note"]})).await?;
    let agg = search(json!({"size": 0, "aggs": {"cats": {"terms": {"field": "cat"}}, "top": {"max": {"field": "n"}}}})).await?;
    let doc = ok(cluster, Method::GET, "/logs-1/_doc/3", None).await?;
    let root = ok(cluster, Method::GET, "/", None).await?;
    Ok(json!({
        "cluster_uuid": root["cluster_uuid"],
        "indices": ok(cluster, Method::GET, "/_cat/indices?h=index,docs.count,pri&s=index&format=json", None).await?,
        "mapping": ok(cluster, Method::GET, "/logs-1/_mapping", None).await?,
        "settings": ok(cluster, Method::GET, "/logs-1/_settings?filter_path=*.settings.index.number_of_shards,*.settings.index.uuid", None).await?,
        "alias": ok(cluster, Method::GET, "/_alias/logs", None).await?,
        "template": ok(cluster, Method::GET, "/_index_template/logs", None).await?,
        "repositories": ok(cluster, Method::GET, "/_snapshot", None).await?,
        "persistent": ok(cluster, Method::GET, "/_cluster/settings", None).await?["persistent"],
        "term": term["hits"]["total"],
        "sorted": sorted["hits"]["hits"].as_array().map(|h| h.iter().map(|h| h["_source"].clone()).collect::<Vec<_>>()),
        "agg": agg["aggregations"],
        "doc": [doc["_version"], doc["_seq_no"].is_u64(), doc["_source"]],
    }))
}

#[tokio::test]
async fn a_cluster_started_again_on_its_data_path_holds_what_it_held() -> TestResult {
    let root = tempfile::tempdir()?;
    let data = root.path().join("data");
    let first = start(root.path(), &data).await?;
    fill(&first).await?;
    let before = looks(&first).await?;
    assert_eq!(before["term"]["value"], json!(25), "{before}");
    first.shutdown().await?;

    let again = start(root.path(), &data).await?;
    let after = looks(&again).await?;
    assert_eq!(after, before);
    // A full restart loses transient settings, as Elasticsearch's does.
    let settings = ok(&again, Method::GET, "/_cluster/settings", None).await?;
    assert_eq!(settings["transient"], json!({}), "{settings}");
    // The shards recovered from the nodes' own disks.
    let recovery = ok(&again, Method::GET, "/logs-1/_recovery", None).await?;
    assert_eq!(
        recovery["logs-1"]["shards"][0]["type"],
        json!("EXISTING_STORE"),
        "{recovery}"
    );
    // A write after the restart lands beside the old ones; the template
    // still applies to a new index.
    ok(
        &again,
        Method::PUT,
        "/logs-1/_doc/new?refresh=true",
        Some(json!({"n": 100, "cat": "c"})),
    )
    .await?;
    let count = ok(&again, Method::GET, "/logs-1/_count", None).await?;
    assert_eq!(count["count"], json!(50));
    ok(&again, Method::PUT, "/logs-2", None).await?;
    let shards = ok(&again, Method::GET, "/logs-2/_settings", None).await?;
    assert_eq!(
        shards["logs-2"]["settings"]["index"]["number_of_shards"],
        json!("2")
    );
    // Only the indices that exist keep a folder.
    let folders = std::fs::read_dir(data.join("indices"))?.count();
    assert_eq!(folders, 2);
    Ok(())
}

#[tokio::test]
async fn a_crash_keeps_every_answered_write_and_drops_a_torn_one() -> TestResult {
    let root = tempfile::tempdir()?;
    let data = root.path().join("data");
    let first = start(root.path(), &data).await?;
    fill(&first).await?;
    ok(
        &first,
        Method::PUT,
        "/logs-1/_doc/late",
        Some(json!({"n": 99, "cat": "a"})),
    )
    .await?;
    let before = looks(&first).await?;
    // Dropped without a shutdown: nothing more is written.
    drop(first);
    // A line the process was writing when it died.
    let journal = std::fs::read_dir(data.join("indices"))?
        .filter_map(Result::ok)
        .map(|e| e.path().join("journal.jsonl"))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
        .ok_or("no journal holds the writes since the last checkpoint")?;
    let mut torn = std::fs::read(&journal)?;
    torn.extend_from_slice(b"{\"id\":\"torn\",\"version\":1,\"sou");
    std::fs::write(&journal, torn)?;

    let again = start(root.path(), &data).await?;
    assert_eq!(looks(&again).await?, before);
    let late = ok(&again, Method::GET, "/logs-1/_doc/late", None).await?;
    assert_eq!(late["_source"], json!({"n": 99, "cat": "a"}));
    let (status, _) = call(&again, Method::GET, "/logs-1/_doc/torn", None).await?;
    assert_eq!(status, 404);
    Ok(())
}

#[tokio::test]
async fn a_data_path_it_cannot_read_stops_the_start() -> TestResult {
    let root = tempfile::tempdir()?;
    let data = root.path().join("data");
    std::fs::create_dir_all(&data)?;
    std::fs::write(data.join("cluster.json"), "{not json")?;
    match start(root.path(), &data).await {
        Err(e) => match e.downcast_ref::<SimError>() {
            Some(SimError::DataPath { path, .. }) => assert!(path.ends_with("cluster.json")),
            _ => return Err(format!("another error: {e}").into()),
        },
        Ok(_) => return Err("a cluster started on a data path it cannot read".into()),
    }
    Ok(())
}
