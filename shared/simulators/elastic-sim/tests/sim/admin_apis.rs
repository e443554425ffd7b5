//! The index, node and cluster APIs clients and Rally call: flush, force
//! merge, index stats, aliases, templates, index options, node and
//! cluster stats, with Elasticsearch's shapes and refusals.

use crate::common::{Fallible, TestResult, call, start};
use floe_elastic_sim::SimFaults;
use reqwest::Method;
use serde_json::{Value, json};

async fn put(cluster: &floe_elastic_sim::RunningCluster, path: &str, body: Value) -> TestResult {
    let (status, answer) = call(cluster, Method::PUT, path, Some(body)).await?;
    assert!(
        status == 200 || status == 201,
        "PUT {path}: {status} {answer}"
    );
    Ok(())
}

fn error_type(body: &Value) -> &Value {
    &body["error"]["type"]
}

/// Sends a request Elasticsearch refuses, and checks the status and the
/// error's type.
async fn refused(
    cluster: &floe_elastic_sim::RunningCluster,
    method: Method,
    path: &str,
    body: Option<Value>,
    status: u16,
    error: &str,
) -> Fallible<Value> {
    let (got, answer) = call(cluster, method.clone(), path, body).await?;
    assert_eq!(
        (got, error_type(&answer)),
        (status, &json!(error)),
        "{method} {path}: {answer}"
    );
    Ok(answer)
}

#[tokio::test]
async fn flush_forcemerge_and_stats() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("admin-stats", root.path(), SimFaults::default()).await?;
    put(
        &cluster,
        "/logs",
        json!({"settings": {"number_of_shards": 2, "number_of_replicas": 0}}),
    )
    .await?;
    for i in 0..5 {
        put(&cluster, &format!("/logs/_doc/{i}"), json!({"n": i})).await?;
    }

    let (status, body) = call(&cluster, Method::POST, "/_flush", None).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["_shards"],
        json!({"total": 2, "successful": 2, "failed": 0})
    );
    let (status, body) = call(&cluster, Method::GET, "/logs/_flush", None).await?;
    assert_eq!((status, &body["_shards"]["total"]), (200, &json!(2)));
    refused(
        &cluster,
        Method::POST,
        "/nope/_flush",
        None,
        404,
        "index_not_found_exception",
    )
    .await?;

    let (status, body) = call(
        &cluster,
        Method::POST,
        "/logs/_forcemerge?max_num_segments=1",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["_shards"],
        json!({"total": 2, "successful": 2, "failed": 0})
    );
    refused(
        &cluster,
        Method::POST,
        "/_forcemerge?bogus=1",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::POST,
        "/_forcemerge?max_num_segments=x",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::POST,
        "/_forcemerge?max_num_segments=1&only_expunge_deletes=true",
        None,
        400,
        "action_request_validation_exception",
    )
    .await?;
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/_forcemerge?wait_for_completion=false",
        None,
    )
    .await?;
    assert_eq!(status, 200);
    let task = body["task"].as_str().ok_or("no task")?.to_string();
    let (status, body) = call(&cluster, Method::GET, &format!("/_tasks/{task}"), None).await?;
    assert_eq!((status, &body["completed"]), (200, &json!(true)), "{body}");
    assert_eq!(body["task"]["action"], "indices:admin/forcemerge");
    assert!(body["response"]["_shards"]["total"].is_number());
    refused(
        &cluster,
        Method::GET,
        "/_tasks/node:999",
        None,
        404,
        "resource_not_found_exception",
    )
    .await?;
    let (status, body) = call(&cluster, Method::GET, "/_tasks", None).await?;
    assert_eq!((status, &body["nodes"]), (200, &json!({})));
    let (status, _) = call(&cluster, Method::GET, "/_forcemerge", None).await?;
    assert_eq!(status, 405);

    // Everything Rally reads at the end of a race.
    let (status, body) = call(&cluster, Method::GET, "/_stats/_all?level=shards", None).await?;
    assert_eq!(status, 200, "{body}");
    let p = &body["_all"]["primaries"];
    assert_eq!(p["docs"]["count"], 5);
    assert_eq!(
        p["segments"]["count"], 2,
        "one segment per shard after the merge"
    );
    for path in [
        ("merges", "total_time_in_millis"),
        ("merges", "total_throttled_time_in_millis"),
        ("indexing", "index_time_in_millis"),
        ("indexing", "throttle_time_in_millis"),
        ("refresh", "total_time_in_millis"),
        ("flush", "total_time_in_millis"),
        ("segments", "memory_in_bytes"),
        ("segments", "doc_values_memory_in_bytes"),
        ("segments", "stored_fields_memory_in_bytes"),
        ("segments", "terms_memory_in_bytes"),
        ("segments", "norms_memory_in_bytes"),
        ("segments", "points_memory_in_bytes"),
    ] {
        assert!(p[path.0][path.1].is_number(), "{path:?} in {p}");
    }
    assert_eq!(p["indexing"]["index_total"], 5);
    assert!(p["merges"]["total"].as_u64().is_some_and(|n| n >= 2));
    assert!(p["flush"]["total"].as_u64().is_some_and(|n| n >= 2));
    let total = &body["_all"]["total"];
    assert!(
        total["store"]["size_in_bytes"]
            .as_u64()
            .is_some_and(|b| b > 225)
    );
    assert!(total["store"]["total_data_set_size_in_bytes"].is_number());
    assert!(total["translog"]["size_in_bytes"].is_number());
    let index = &body["indices"]["logs"];
    assert_eq!(index["health"], "green");
    assert_eq!(index["status"], "open");
    assert!(index["uuid"].is_string());
    let shards = index["shards"].as_object().ok_or("no shards")?;
    assert_eq!(shards.len(), 2);
    assert_eq!(shards["0"][0]["routing"]["primary"], true);
    assert_eq!(body["_shards"]["total"], 2);

    // Rally's index-stats operation names every index as `_all`.
    let (status, body) = call(&cluster, Method::GET, "/_all/_stats/_all", None).await?;
    assert_eq!(
        (status, &body["_all"]["primaries"]["docs"]["count"]),
        (200, &json!(5)),
        "{body}"
    );
    let (status, body) = call(&cluster, Method::GET, "/_all/_count", None).await?;
    assert_eq!((status, &body["count"]), (200, &json!(5)), "{body}");
    let (status, body) = call(&cluster, Method::GET, "/logs/_stats/docs,store", None).await?;
    assert_eq!(status, 200);
    let primaries = body["indices"]["logs"]["primaries"]
        .as_object()
        .ok_or("no primaries")?;
    let mut keys: Vec<&String> = primaries.keys().collect();
    keys.sort();
    assert_eq!(keys, ["docs", "store"]);
    let (status, body) = call(&cluster, Method::GET, "/_stats?level=cluster", None).await?;
    assert_eq!(status, 200);
    assert!(body.get("indices").is_none());
    refused(
        &cluster,
        Method::GET,
        "/_stats/bogus",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;
    let (status, body) = call(&cluster, Method::GET, "/_stats?level=bogus", None).await?;
    assert_eq!(status, 400, "{body}");
    refused(
        &cluster,
        Method::GET,
        "/nope/_stats",
        None,
        404,
        "index_not_found_exception",
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn aliases_resolve_in_index_expressions() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("admin-aliases", root.path(), SimFaults::default()).await?;
    put(&cluster, "/a1", json!({})).await?;
    put(&cluster, "/a2", json!({})).await?;
    put(&cluster, "/a1/_doc/1", json!({"k": 1})).await?;
    put(&cluster, "/a2/_doc/2", json!({"k": 2})).await?;

    let (status, body) = call(
        &cluster,
        Method::POST,
        "/_aliases",
        Some(json!({"actions": [
            {"add": {"index": "a1", "alias": "one"}},
            {"add": {"indices": ["a1", "a2"], "alias": "both"}},
        ]})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["acknowledged"], true);

    // Reads through an alias reach its indices.
    let (_, body) = call(&cluster, Method::GET, "/both/_count", None).await?;
    assert_eq!(body["count"], 2);
    let (_, body) = call(&cluster, Method::GET, "/one/_search", None).await?;
    assert_eq!(body["hits"]["total"]["value"], 1);
    assert_eq!(body["hits"]["hits"][0]["_index"], "a1");
    let (status, body) = call(&cluster, Method::GET, "/one/_doc/1", None).await?;
    assert_eq!((status, &body["_index"]), (200, &json!("a1")));
    let (status, _) = call(&cluster, Method::POST, "/both/_refresh", None).await?;
    assert_eq!(status, 200);

    // A write through an alias of one index goes to it; through an alias
    // of two without a write index, it is refused.
    let (status, body) = call(&cluster, Method::PUT, "/one/_doc/3", Some(json!({"k": 3}))).await?;
    assert_eq!((status, &body["_index"]), (201, &json!("a1")), "{body}");
    let body = refused(
        &cluster,
        Method::PUT,
        "/both/_doc/4",
        Some(json!({"k": 4})),
        400,
        "illegal_argument_exception",
    )
    .await?;
    assert!(
        body["error"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no write index is defined for alias [both]"))
    );
    let (status, body) = call(&cluster, Method::GET, "/both/_doc/1", None).await?;
    assert_eq!(status, 400, "{body}");

    // With a write index, it goes there; bulk too.
    put(&cluster, "/a2/_alias/both", json!({"is_write_index": true})).await?;
    let (status, body) = call(&cluster, Method::POST, "/both/_doc", Some(json!({"k": 5}))).await?;
    assert_eq!((status, &body["_index"]), (201, &json!("a2")), "{body}");
    let response = reqwest::Client::new()
        .post(format!("{}/_bulk", cluster.url()))
        .header("content-type", "application/x-ndjson")
        .body("{\"index\":{\"_index\":\"both\",\"_id\":\"b\"}}\n{\"k\":6}\n")
        .send()
        .await?;
    let body: Value = response.json().await?;
    assert_eq!(body["items"][0]["index"]["_index"], "a2", "{body}");

    // Reads of aliases, in Elasticsearch's shapes.
    let (status, body) = call(&cluster, Method::GET, "/_alias/both", None).await?;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "a1": {"aliases": {"both": {}}},
            "a2": {"aliases": {"both": {"is_write_index": true}}},
        })
    );
    let (status, body) = call(&cluster, Method::GET, "/a1/_alias", None).await?;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"a1": {"aliases": {"both": {}, "one": {}}}}));
    let (status, body) = call(&cluster, Method::GET, "/_alias/both,nope", None).await?;
    assert_eq!(status, 404);
    assert_eq!(body["error"], "alias [nope] missing");
    assert_eq!(body["status"], 404);
    assert!(body["a1"]["aliases"]["both"].is_object());
    let (status, _) = call(&cluster, Method::HEAD, "/_alias/one", None).await?;
    assert_eq!(status, 200);
    let (status, _) = call(&cluster, Method::HEAD, "/_alias/nope", None).await?;
    assert_eq!(status, 404);
    let (status, body) = call(&cluster, Method::GET, "/_aliases", None).await?;
    assert_eq!(status, 200);
    assert!(body["a2"]["aliases"].is_object());

    // Refusals.
    refused(
        &cluster,
        Method::POST,
        "/_aliases",
        Some(json!({"actions": [{"add": {"index": "missing", "alias": "x"}}]})),
        404,
        "index_not_found_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::PUT,
        "/a1/_alias/a2",
        None,
        400,
        "invalid_alias_name_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::PUT,
        "/one",
        Some(json!({})),
        400,
        "invalid_index_name_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::DELETE,
        "/a1/_alias/nope",
        None,
        404,
        "aliases_not_found_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::POST,
        "/_aliases",
        Some(
            json!({"actions": [{"remove": {"index": "a1", "alias": "nope", "must_exist": true}}]}),
        ),
        404,
        "aliases_not_found_exception",
    )
    .await?;

    // Indices are deleted by name, never through an alias.
    refused(
        &cluster,
        Method::DELETE,
        "/one",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;

    // Remove an alias, then an index through remove_index.
    let (status, _) = call(&cluster, Method::DELETE, "/a1/_alias/one", None).await?;
    assert_eq!(status, 200);
    let (status, _) = call(&cluster, Method::GET, "/one/_count", None).await?;
    assert_eq!(status, 404);
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/_aliases",
        Some(json!({"actions": [{"remove_index": {"index": "a1"}}]})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(&cluster, Method::GET, "/a1", None).await?;
    assert_eq!(status, 404);
    Ok(())
}

#[tokio::test]
async fn index_options() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("admin-options", root.path(), SimFaults::default()).await?;
    put(&cluster, "/logs-1", json!({})).await?;
    put(&cluster, "/logs-2", json!({})).await?;
    put(&cluster, "/logs-1/_doc/1", json!({"k": 1})).await?;
    let (status, _) = call(&cluster, Method::POST, "/logs-2/_close", None).await?;
    assert_eq!(status, 200);

    refused(
        &cluster,
        Method::GET,
        "/logs-1,nope/_search",
        None,
        404,
        "index_not_found_exception",
    )
    .await?;
    let (status, body) = call(
        &cluster,
        Method::GET,
        "/logs-1,nope/_search?ignore_unavailable=true",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"]["total"]["value"], 1);
    refused(
        &cluster,
        Method::GET,
        "/nomatch-*/_count?allow_no_indices=false",
        None,
        404,
        "index_not_found_exception",
    )
    .await?;
    let (status, body) = call(&cluster, Method::GET, "/nomatch-*/_count", None).await?;
    assert_eq!((status, &body["count"]), (200, &json!(0)));
    // Wildcards skip closed indices unless asked.
    let (status, body) = call(&cluster, Method::GET, "/logs-*/_stats", None).await?;
    assert_eq!(status, 200);
    assert!(body["indices"].get("logs-2").is_none(), "{body}");
    let (_, body) = call(
        &cluster,
        Method::GET,
        "/logs-*/_stats?expand_wildcards=all&forbid_closed_indices=false",
        None,
    )
    .await?;
    assert_eq!(body["indices"]["logs-2"]["status"], "close");
    refused(
        &cluster,
        Method::GET,
        "/logs-2/_stats",
        None,
        400,
        "index_closed_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::GET,
        "/logs-*/_search?expand_wildcards=bogus",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::POST,
        "/_refresh?ignore_unavailable=maybe",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;
    refused(
        &cluster,
        Method::POST,
        "/nope/_refresh?ignore_unavailable=maybe",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;
    let (status, body) = call(
        &cluster,
        Method::GET,
        "/logs-1,nope/_settings?ignore_unavailable=true",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert!(body["logs-1"]["settings"].is_object());
    let (status, _) = call(
        &cluster,
        Method::GET,
        "/logs-1,nope?ignore_unavailable=true",
        None,
    )
    .await?;
    assert_eq!(status, 200);
    // Opening by wildcard reaches the closed index.
    let (status, _) = call(&cluster, Method::POST, "/logs-*/_open", None).await?;
    assert_eq!(status, 200);
    let (_, body) = call(&cluster, Method::GET, "/logs-*/_stats", None).await?;
    assert_eq!(body["indices"]["logs-2"]["status"], "open");
    Ok(())
}

#[tokio::test]
async fn templates_apply_on_create() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("admin-templates", root.path(), SimFaults::default()).await?;
    refused(
        &cluster,
        Method::PUT,
        "/_index_template/t1",
        Some(json!({"index_patterns": ["logs-*"], "composed_of": ["missing"]})),
        400,
        "invalid_index_template_exception",
    )
    .await?;
    put(
        &cluster,
        "/_component_template/shards",
        json!({"template": {
            "settings": {"number_of_shards": 3, "refresh_interval": "5s"},
            "mappings": {"properties": {"a": {"type": "keyword"}}},
        }}),
    )
    .await?;
    put(
        &cluster,
        "/_index_template/t1",
        json!({
            "index_patterns": ["logs-*"],
            "composed_of": ["shards"],
            "priority": 10,
            "template": {
                "settings": {"number_of_replicas": 0},
                "mappings": {"properties": {"b": {"type": "long"}}},
                "aliases": {"all-logs": {}},
            },
        }),
    )
    .await?;
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/_index_template/t2",
        Some(json!({"index_patterns": ["logs-a*"], "priority": 10})),
    )
    .await?;
    assert_eq!(
        (status, error_type(&body)),
        (400, &json!("illegal_argument_exception"))
    );
    assert!(
        body["error"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("that have the same priority [10]")),
        "{body}"
    );
    put(
        &cluster,
        "/_index_template/t2",
        json!({"index_patterns": ["other-*"], "priority": 10}),
    )
    .await?;

    let (status, body) = call(&cluster, Method::GET, "/_index_template/t1", None).await?;
    assert_eq!(status, 200);
    assert_eq!(body["index_templates"][0]["name"], "t1");
    assert_eq!(
        body["index_templates"][0]["index_template"]["composed_of"],
        json!(["shards"])
    );
    let (_, body) = call(&cluster, Method::GET, "/_index_template", None).await?;
    assert_eq!(body["index_templates"].as_array().map(Vec::len), Some(2));
    refused(
        &cluster,
        Method::GET,
        "/_index_template/nope",
        None,
        404,
        "resource_not_found_exception",
    )
    .await?;
    let (status, _) = call(&cluster, Method::HEAD, "/_index_template/t1", None).await?;
    assert_eq!(status, 200);
    let (status, _) = call(&cluster, Method::HEAD, "/_index_template/nope", None).await?;
    assert_eq!(status, 404);
    let (status, body) = call(&cluster, Method::GET, "/_component_template/shards", None).await?;
    assert_eq!(status, 200);
    assert_eq!(body["component_templates"][0]["name"], "shards");

    // Explicit create: the request's settings win over the template's.
    put(
        &cluster,
        "/logs-x",
        json!({"settings": {"number_of_shards": 2}, "mappings": {"properties": {"c": {"type": "text"}}}}),
    )
    .await?;
    let (_, body) = call(&cluster, Method::GET, "/logs-x", None).await?;
    let index = &body["logs-x"];
    assert_eq!(index["settings"]["index"]["number_of_shards"], "2");
    assert_eq!(index["settings"]["index"]["number_of_replicas"], "0");
    assert_eq!(index["settings"]["index"]["refresh_interval"], "5s");
    let properties = &index["mappings"]["properties"];
    assert_eq!(properties["a"]["type"], "keyword");
    assert_eq!(properties["b"]["type"], "long");
    assert_eq!(properties["c"]["type"], "text");
    assert!(index["aliases"]["all-logs"].is_object());

    // Created by its first document, and by bulk.
    put(&cluster, "/logs-y/_doc/1", json!({"a": "x"})).await?;
    let (_, body) = call(&cluster, Method::GET, "/logs-y/_settings", None).await?;
    assert_eq!(body["logs-y"]["settings"]["index"]["number_of_shards"], "3");
    let response = reqwest::Client::new()
        .post(format!("{}/_bulk", cluster.url()))
        .header("content-type", "application/x-ndjson")
        .body("{\"index\":{\"_index\":\"logs-z\",\"_id\":\"1\"}}\n{\"a\":\"y\"}\n")
        .send()
        .await?;
    assert_eq!(response.status().as_u16(), 200);
    let (_, body) = call(&cluster, Method::GET, "/logs-z", None).await?;
    assert_eq!(body["logs-z"]["settings"]["index"]["number_of_shards"], "3");
    // The template's alias reaches every index it made.
    let (_, body) = call(&cluster, Method::GET, "/all-logs/_count", None).await?;
    assert_eq!(body["count"], 2);

    let (status, body) = call(
        &cluster,
        Method::POST,
        "/_index_template/_simulate_index/logs-new",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["template"]["settings"]["index"]["number_of_shards"],
        "3"
    );

    // A component in use cannot go; templates and components delete.
    refused(
        &cluster,
        Method::DELETE,
        "/_component_template/shards",
        None,
        400,
        "illegal_argument_exception",
    )
    .await?;
    let (status, _) = call(&cluster, Method::DELETE, "/_index_template/t1", None).await?;
    assert_eq!(status, 200);
    let (status, _) = call(
        &cluster,
        Method::DELETE,
        "/_component_template/shards",
        None,
    )
    .await?;
    assert_eq!(status, 200);
    refused(
        &cluster,
        Method::DELETE,
        "/_index_template/t1",
        None,
        404,
        "index_template_missing_exception",
    )
    .await?;
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/_index_template/bad",
        Some(json!({"priority": 1})),
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    Ok(())
}

#[tokio::test]
async fn node_and_cluster_stats() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("admin-nodes", root.path(), SimFaults::default()).await?;
    put(&cluster, "/books", json!({})).await?;
    put(&cluster, "/books/_doc/1", json!({"t": "a"})).await?;

    // What Rally reads before its first task and after its last.
    let (status, body) = call(&cluster, Method::GET, "/_nodes/stats/jvm", None).await?;
    assert_eq!(status, 200, "{body}");
    let nodes = body["nodes"].as_object().ok_or("no nodes")?;
    assert_eq!(nodes.len(), cluster.node_names().len());
    let node = nodes.values().next().ok_or("no node")?;
    assert!(node["name"].is_string());
    let jvm = &node["jvm"];
    assert!(
        jvm["mem"]["heap_used_in_bytes"]
            .as_u64()
            .is_some_and(|b| b > 0)
    );
    assert!(
        jvm["mem"]["heap_max_in_bytes"]
            .as_u64()
            .is_some_and(|b| b > 0)
    );
    for collector in ["young", "old"] {
        assert!(jvm["gc"]["collectors"][collector]["collection_count"].is_number());
        assert!(jvm["gc"]["collectors"][collector]["collection_time_in_millis"].is_number());
    }
    for pool in jvm["mem"]["pools"].as_object().ok_or("no pools")?.values() {
        assert!(pool["peak_used_in_bytes"].is_number());
    }
    assert!(jvm["buffer_pools"]["mapped"]["used_in_bytes"].is_number());
    assert!(node.get("os").is_none(), "only the metric asked for");

    let (status, body) = call(&cluster, Method::GET, "/_nodes/stats", None).await?;
    assert_eq!(status, 200);
    let node = body["nodes"]
        .as_object()
        .and_then(|n| n.values().next())
        .ok_or("no node")?;
    assert!(node["host"].is_string());
    // The primary and its replica, each on its node.
    let docs: u64 = body["nodes"]
        .as_object()
        .ok_or("no nodes")?
        .values()
        .filter_map(|n| n["indices"]["docs"]["count"].as_u64())
        .sum();
    assert_eq!(docs, 2);
    for key in [
        "os",
        "process",
        "fs",
        "thread_pool",
        "breakers",
        "transport",
        "http",
        "ingest",
    ] {
        assert!(node[key].is_object(), "{key} missing");
    }
    assert!(node["ingest"]["pipelines"].is_object());
    assert!(node["fs"]["total"]["available_in_bytes"].is_number());
    let (status, body) = call(&cluster, Method::GET, "/_nodes/stats/ingest", None).await?;
    assert_eq!(status, 200);
    assert!(
        body["nodes"]
            .as_object()
            .is_some_and(|n| n.values().all(|n| n["ingest"]["total"].is_object()))
    );
    let (status, body) = call(
        &cluster,
        Method::GET,
        "/_nodes/_all/stats/indices/docs",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let node = body["nodes"]
        .as_object()
        .and_then(|n| n.values().next())
        .ok_or("no node")?;
    assert_eq!(node["indices"].as_object().map(|o| o.len()), Some(1));
    // Rally's shard-stats telemetry: each node's shards, with routing.
    let (status, body) = call(
        &cluster,
        Method::GET,
        "/_nodes/stats/_all?level=shards",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let copies: Vec<&Value> = body["nodes"]
        .as_object()
        .ok_or("no nodes")?
        .values()
        .filter_map(|n| n["indices"]["shards"]["books"].as_array())
        .flatten()
        .filter_map(|entry| entry.get("0"))
        .collect();
    assert_eq!(copies.len(), 2, "{body}");
    assert_eq!(
        copies
            .iter()
            .filter(|c| c["routing"]["primary"] == true)
            .count(),
        1
    );
    assert!(copies.iter().all(|c| c["docs"]["count"] == 1));
    let (status, body) = call(&cluster, Method::GET, "/_nodes/stats/bogus", None).await?;
    assert_eq!(status, 400, "{body}");

    let (status, body) = call(&cluster, Method::GET, "/_cluster/stats", None).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cluster_name"], "admin-nodes");
    assert_eq!(body["indices"]["count"], 1);
    assert_eq!(body["indices"]["docs"]["count"], 1);
    assert_eq!(body["indices"]["shards"]["total"], 2);
    assert!(
        body["indices"]["store"]["size_in_bytes"]
            .as_u64()
            .is_some_and(|b| b > 0)
    );
    let n = cluster.node_names().len();
    assert_eq!(body["nodes"]["count"]["total"], n);
    assert_eq!(body["nodes"]["count"]["master"], n);
    assert_eq!(
        body["nodes"]["versions"],
        json!([floe_elastic_sim::DEFAULT_VERSION])
    );
    assert!(body["nodes"]["jvm"]["mem"]["heap_max_in_bytes"].is_number());
    assert!(body["nodes"]["fs"]["total_in_bytes"].is_number());
    assert!(body["nodes"]["os"]["mem"]["total_in_bytes"].is_number());
    Ok(())
}

/// A search, count or delete-by-query through an alias with a filter sees
/// only what the filter matches, as Elasticsearch's does; the index named
/// itself, or reached through an alias without one, is searched whole.
#[tokio::test]
async fn alias_filters_apply_to_searches_through_the_alias() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("admin-alias-filters", root.path(), SimFaults::default()).await?;
    put(
        &cluster,
        "/events",
        json!({"mappings": {"properties": {"level": {"type": "keyword"}, "n": {"type": "long"}}}}),
    )
    .await?;
    for i in 0..10 {
        let level = if i % 5 == 0 { "error" } else { "info" };
        put(
            &cluster,
            &format!("/events/_doc/{i}?refresh=true"),
            json!({"level": level, "n": i}),
        )
        .await?;
    }
    put(
        &cluster,
        "/events/_alias/errors",
        json!({"filter": {"term": {"level": "error"}}}),
    )
    .await?;
    put(
        &cluster,
        "/events/_alias/big",
        json!({"filter": {"range": {"n": {"gte": 8}}}}),
    )
    .await?;
    put(&cluster, "/events/_alias/all-events", json!({})).await?;
    let count = |path: &'static str| {
        let cluster = &cluster;
        async move {
            let (status, body) = call(cluster, Method::GET, path, None).await?;
            assert_eq!(status, 200, "{path}: {body}");
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(body["count"].clone())
        }
    };
    assert_eq!(count("/errors/_count").await?, json!(2));
    assert_eq!(count("/big/_count").await?, json!(2));
    // Through two filtered aliases: either filter.
    assert_eq!(count("/errors,big/_count").await?, json!(4));
    // Named, or through an alias without a filter, or everything: whole.
    assert_eq!(count("/errors,events/_count").await?, json!(10));
    assert_eq!(count("/errors,all-events/_count").await?, json!(10));
    assert_eq!(count("/_count").await?, json!(10));
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/errors/_search",
        Some(json!({"query": {"range": {"n": {"gte": 1}}}, "aggs": {"top": {"max": {"field": "n"}}}})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"]["total"]["value"], json!(1));
    assert_eq!(body["hits"]["hits"][0]["_id"], json!("5"));
    assert_eq!(body["aggregations"]["top"]["value"], json!(5.0));
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/errors/_delete_by_query?refresh=true",
        Some(json!({"query": {"match_all": {}}})),
    )
    .await?;
    assert_eq!((status, &body["deleted"]), (200, &json!(2)), "{body}");
    assert_eq!(count("/events/_count").await?, json!(8));
    // Cluster health resolves aliases too.
    let (status, body) = call(&cluster, Method::GET, "/_cluster/health/errors", None).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["active_primary_shards"], json!(1), "{body}");
    refused(
        &cluster,
        Method::GET,
        "/_cluster/health/nope",
        None,
        404,
        "index_not_found_exception",
    )
    .await?;
    Ok(())
}
