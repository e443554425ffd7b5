//! `_bulk`, the `_cat` tables and `HEAD`, as Elasticsearch answers them.

use crate::common::{Fallible, TestResult, call, count};
use floe_elastic_sim::{SimConfig, SimulatedCluster};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn bulk(
    url: &str,
    path: &str,
    content_type: Option<&str>,
    body: String,
) -> Fallible<(u16, Value)> {
    let mut request = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    Ok((status, response.json().await?))
}

async fn text(url: &str) -> Fallible<(u16, String)> {
    let response = reqwest::get(url).await?;
    Ok((response.status().as_u16(), response.text().await?))
}

const NDJSON: Option<&str> = Some("application/x-ndjson");

#[tokio::test]
async fn ten_thousand_documents_through_bulk_are_counted() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("bulk")).await?;
    let mut body = String::new();
    for i in 0..10_000 {
        body.push_str(&format!(
            "{{\"index\":{{\"_id\":\"{i}\"}}}}\n{{\"n\":{i}}}\n"
        ));
    }
    let started = Instant::now();
    let (status, answer) = bulk(cluster.url(), "/logs/_bulk?refresh=true", NDJSON, body).await?;
    assert_eq!(status, 200);
    assert_eq!(answer["errors"], false);
    let items = answer["items"].as_array().ok_or("items")?;
    assert_eq!(items.len(), 10_000);
    assert_eq!(items[0]["index"]["result"], "created");
    assert_eq!(items[0]["index"]["status"], 201);
    assert_eq!(items[0]["index"]["forced_refresh"], true);
    assert_eq!(count(&cluster, "logs").await?, 10_000);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn bulk_items_succeed_and_fail_one_by_one() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("bulk")).await?;
    let lines = [
        r#"{"index":{"_index":"books","_id":"1"}}"#,
        r#"{"title":"one","tags":{"a":1}}"#,
        r#"{"create":{"_index":"books","_id":"1"}}"#,
        r#"{"title":"again"}"#,
        r#"{"update":{"_index":"books","_id":"1"}}"#,
        r#"{"doc":{"tags":{"b":2}}}"#,
        r#"{"update":{"_index":"books","_id":"1"}}"#,
        r#"{"doc":{"tags":{"b":2}}}"#,
        r#"{"update":{"_index":"books","_id":"missing"}}"#,
        r#"{"doc":{"x":1}}"#,
        r#"{"delete":{"_index":"books","_id":"nothing"}}"#,
        r#"{"create":{"_index":"books"}}"#,
        r#"{"title":"auto id"}"#,
        r#"{"delete":{"_index":"books","_id":"1"}}"#,
    ];
    let body = format!("{}\n", lines.join("\n"));
    let (status, answer) = bulk(cluster.url(), "/_bulk", Some("application/json"), body).await?;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["errors"], true);
    let results: Vec<(String, Value, Value)> = answer["items"]
        .as_array()
        .ok_or("items")?
        .iter()
        .filter_map(|item| {
            let (action, body) = item.as_object()?.iter().next()?;
            Some((
                action.clone(),
                body["status"].clone(),
                body["result"].clone(),
            ))
        })
        .collect();
    assert_eq!(
        results,
        [
            ("index".into(), json!(201), json!("created")),
            ("create".into(), json!(409), Value::Null),
            ("update".into(), json!(200), json!("updated")),
            ("update".into(), json!(200), json!("noop")),
            ("update".into(), json!(404), Value::Null),
            ("delete".into(), json!(404), json!("not_found")),
            ("create".into(), json!(201), json!("created")),
            ("delete".into(), json!(200), json!("deleted")),
        ]
    );
    let conflict = &answer["items"][1]["create"]["error"];
    assert_eq!(conflict["type"], "version_conflict_engine_exception");
    assert_eq!(
        conflict["reason"],
        "[1]: version conflict, document already exists (current version [1])"
    );
    assert_eq!(conflict["index"], "books");
    assert_eq!(
        answer["items"][4]["update"]["error"]["type"],
        "document_missing_exception"
    );
    assert_eq!(answer["items"][2]["update"]["_version"], 2);
    assert_eq!(count(&cluster, "books").await?, 1);
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn malformed_bulk_requests_are_refused_whole() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("bulk")).await?;
    let unterminated = "{\"index\":{\"_index\":\"a\"}}\n{\"x\":1}".to_string();
    let (status, body) = bulk(cluster.url(), "/_bulk", NDJSON, unterminated).await?;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "illegal_argument_exception");
    assert_eq!(
        body["error"]["reason"],
        "The bulk request must be terminated by a newline [\\n]"
    );
    let ok = "{\"index\":{\"_index\":\"a\"}}\n{\"x\":1}\n".to_string();
    let (status, body) = bulk(cluster.url(), "/_bulk", Some("text/plain"), ok.clone()).await?;
    assert_eq!(
        (status, body),
        (
            406,
            json!({"error": "Content-Type header [text/plain] is not supported", "status": 406})
        )
    );
    let (status, body) = bulk(cluster.url(), "/_bulk?refresh=soon", NDJSON, ok).await?;
    assert_eq!(
        (status, &body["error"]["reason"]),
        (400, &json!("Unknown value for refresh: [soon]."))
    );
    let no_index = "{\"index\":{}}\n{\"x\":1}\n".to_string();
    let (status, body) = bulk(cluster.url(), "/_bulk", NDJSON, no_index).await?;
    assert_eq!(
        (status, &body["error"]["reason"]),
        (400, &json!("Validation Failed: 1: index is missing;"))
    );
    let (_, body) = call(&cluster, Method::GET, "/_cat/indices?format=json", None).await?;
    assert_eq!(body, json!([]));
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn cat_tables_and_head_answer_as_elasticsearch() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("tables")).await?;
    let url = cluster.url();
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/books",
        Some(json!({"settings": {"number_of_shards": 2, "number_of_replicas": 1}})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    call(
        &cluster,
        Method::PUT,
        "/books/_doc/1",
        Some(json!({"t": "a"})),
    )
    .await?;

    let (status, health) = text(&format!("{url}/_cat/health?v")).await?;
    assert_eq!(status, 200);
    let mut lines = health.lines();
    let header: Vec<&str> = lines.next().ok_or("header")?.split_whitespace().collect();
    assert_eq!(
        header,
        [
            "epoch",
            "timestamp",
            "cluster",
            "status",
            "node.total",
            "node.data",
            "shards",
            "pri",
            "relo",
            "init",
            "unassign",
            "pending_tasks",
            "max_task_wait_time",
            "active_shards_percent"
        ]
    );
    let row: Vec<&str> = lines.next().ok_or("row")?.split_whitespace().collect();
    assert_eq!(
        &row[2..],
        [
            "tables", "green", "3", "3", "4", "2", "0", "0", "0", "0", "-", "100.0%"
        ]
    );
    let (_, rows) = call(
        &cluster,
        Method::GET,
        "/_cat/health?format=json&h=cluster,status,shards",
        None,
    )
    .await?;
    assert_eq!(
        rows,
        json!([{"cluster": "tables", "status": "green", "shards": "4"}])
    );

    // Default columns, text aligned per column, `h` picking by alias.
    let (_, nodes) = text(&format!("{url}/_cat/nodes?v")).await?;
    let header: Vec<&str> = nodes
        .lines()
        .next()
        .ok_or("header")?
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "ip",
            "heap.percent",
            "ram.percent",
            "cpu",
            "load_1m",
            "load_5m",
            "load_15m",
            "node.role",
            "master",
            "name"
        ]
    );
    assert_eq!(nodes.lines().count(), 4);
    let (_, ids) = call(
        &cluster,
        Method::GET,
        "/_cat/nodes?format=json&h=id,n",
        None,
    )
    .await?;
    let first = ids.get(0).ok_or("a node")?;
    assert_eq!(first["id"].as_str().map(str::len), Some(4));
    assert!(
        first["n"]
            .as_str()
            .is_some_and(|n| n.starts_with("tables-node-"))
    );

    let (_, indices) = text(&format!(
        "{url}/_cat/indices?v&h=index,docs.count,pri.store.size"
    ))
    .await?;
    let lines: Vec<&str> = indices.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].starts_with("index docs.count pri.store.size"),
        "{indices}"
    );
    assert!(lines[1].starts_with("books"), "{indices}");
    assert!(
        lines[1].ends_with('b'),
        "human byte sizes by default: {indices}"
    );
    let (_, rows) = call(
        &cluster,
        Method::GET,
        "/_cat/indices?format=json&bytes=b&h=i,dc",
        None,
    )
    .await?;
    assert_eq!(rows, json!([{"i": "books", "dc": "1"}]));

    let (_, shards) = call(&cluster, Method::GET, "/_cat/shards?format=json", None).await?;
    let shards = shards.as_array().ok_or("shards")?;
    assert_eq!(shards.len(), 4);
    let keys: Vec<&String> = shards[0].as_object().ok_or("row")?.keys().collect();
    let mut expected = [
        "index", "shard", "prirep", "state", "docs", "store", "dataset", "ip", "node",
    ];
    expected.sort_unstable();
    let mut keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(keys, expected);

    let (_, counted) = call(&cluster, Method::GET, "/books/_count", None).await?;
    assert_eq!(
        counted,
        json!({"count": 1, "_shards": {"total": 2, "successful": 2, "skipped": 0, "failed": 0}})
    );

    let http = reqwest::Client::new();
    for (path, expected) in [("/", 200), ("/books", 200), ("/nothing", 404)] {
        let response = http.head(format!("{url}{path}")).send().await?;
        assert_eq!(response.status().as_u16(), expected, "HEAD {path}");
        assert!(response.bytes().await?.is_empty(), "HEAD {path}");
    }
    cluster.shutdown().await?;
    Ok(())
}
