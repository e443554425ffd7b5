//! The index APIs and cluster health.

use crate::common::{TestResult, call, client, start};
use floe_elastic::HealthStatus;
use floe_elastic_sim::{SimConfig, SimFaults, SimulatedCluster};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn indices_documents_and_cat() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("indices", root.path(), SimFaults::default()).await?;

    let (status, body) = call(&cluster, Method::GET, "/", None).await?;
    assert_eq!(status, 200);
    assert_eq!(body["cluster_name"], "indices");
    assert_eq!(body["version"]["number"], floe_elastic_sim::DEFAULT_VERSION);

    let (status, body) = call(&cluster, Method::PUT, "/books", Some(json!({}))).await?;
    assert_eq!((status, &body["index"]), (200, &json!("books")));
    let (status, body) = call(&cluster, Method::PUT, "/books", None).await?;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "resource_already_exists_exception");
    assert_eq!(body["error"]["root_cause"][0]["index"], "books");
    let (status, body) = call(&cluster, Method::PUT, "/Books", None).await?;
    assert_eq!(
        (status, &body["error"]["type"]),
        (400, &json!("invalid_index_name_exception"))
    );

    let (status, body) = call(
        &cluster,
        Method::POST,
        "/books/_doc",
        Some(json!({"t": "a"})),
    )
    .await?;
    assert_eq!((status, &body["result"]), (201, &json!("created")));
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/books/_doc/x",
        Some(json!({"t": "b"})),
    )
    .await?;
    assert_eq!((status, &body["_version"]), (201, &json!(1)));
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/books/_doc/x",
        Some(json!({"t": "c"})),
    )
    .await?;
    assert_eq!((status, &body["_version"]), (200, &json!(2)));
    let (_, body) = call(&cluster, Method::GET, "/books/_count", None).await?;
    assert_eq!(body["count"], 2);
    let (_, body) = call(&cluster, Method::GET, "/books/_doc/x", None).await?;
    assert_eq!(body["_source"]["t"], "c");

    let (status, rows) = call(
        &cluster,
        Method::GET,
        "/_cat/indices?format=json&bytes=b",
        None,
    )
    .await?;
    assert_eq!(status, 200);
    assert_eq!(rows[0]["index"], "books");
    assert_eq!(rows[0]["docs.count"], "2");
    assert_eq!(rows[0]["health"], "green");
    let size: u64 = rows[0]["store.size"].as_str().unwrap_or_default().parse()?;
    assert!(size > 0);

    let (status, body) = call(&cluster, Method::POST, "/books/_close", None).await?;
    assert_eq!(
        (status, &body["indices"]["books"]["closed"]),
        (200, &json!(true))
    );
    let (status, body) = call(&cluster, Method::PUT, "/books/_doc/y", Some(json!({}))).await?;
    assert_eq!(
        (status, &body["error"]["type"]),
        (400, &json!("index_closed_exception"))
    );
    call(&cluster, Method::POST, "/books/_open", None).await?;
    let (status, _) = call(&cluster, Method::PUT, "/books/_doc/y", Some(json!({}))).await?;
    assert_eq!(status, 201);

    let (status, _) = call(&cluster, Method::DELETE, "/books", None).await?;
    assert_eq!(status, 200);
    let (status, body) = call(&cluster, Method::DELETE, "/books", None).await?;
    assert_eq!(
        (status, &body["error"]["type"]),
        (404, &json!("index_not_found_exception"))
    );
    let (status, body) = call(&cluster, Method::GET, "/_nothing_here", None).await?;
    assert_eq!(status, 400, "{body}");
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn a_single_node_with_replicas_is_yellow_and_a_green_wait_times_out() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("single").with_nodes(1)).await?;
    call(&cluster, Method::PUT, "/logs", None).await?;
    let es = client(&cluster)?;
    let health = es.health(None, None).await?;
    assert_eq!(
        (health.status, health.number_of_nodes),
        (HealthStatus::Yellow, 1)
    );
    assert_eq!(health.unassigned_shards, 1);
    let waited = es
        .health(Some(HealthStatus::Green), Some(Duration::from_millis(200)))
        .await?;
    assert_eq!(
        (waited.status, waited.timed_out),
        (HealthStatus::Yellow, true)
    );
    let yellow = es
        .health(Some(HealthStatus::Yellow), Some(Duration::from_millis(200)))
        .await?;
    assert!(!yellow.timed_out);
    cluster.shutdown().await?;
    Ok(())
}

/// `?pretty` indents the answer and ends it with a newline, errors too;
/// without it (or with `pretty=false`) the answer is one line.
#[tokio::test]
async fn pretty_answers_are_indented() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("pretty", root.path(), SimFaults::default()).await?;
    let http = reqwest::Client::new();
    let text = |path: &str| {
        let http = http.clone();
        let url = format!("{}{path}", cluster.url());
        async move { http.get(url).send().await?.text().await }
    };
    let pretty = text("/?pretty").await?;
    assert!(pretty.contains("\n  \"cluster_name\""), "{pretty}");
    assert!(pretty.ends_with('\n'));
    let plain = text("/").await?;
    assert!(!plain.contains('\n'), "{plain}");
    assert!(!text("/?pretty=false").await?.contains('\n'));
    let missing = text("/nothing?pretty").await?;
    assert!(missing.contains("\n  \"error\""), "{missing}");
    Ok(())
}

/// What the simulated cluster cannot search, it refuses in Elasticsearch's
/// shape: a `term` query, an aggregation, a sort or a scroll must never be
/// answered as if it were `match_all` (every document, in index order).
#[tokio::test]
async fn searches_it_cannot_run_are_refused_never_answered_wrong() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("search", root.path(), SimFaults::default()).await?;
    crate::common::seed(&cluster, "logs", 30).await?;

    let refused = [
        (
            "/logs/_search",
            json!({"query": {"term": {"cat": "beta"}}}),
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"query": {"match": {"msg": "even"}}}),
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"query": {"match_all": {}, "term": {"a": 1}}}),
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"aggs": {"by_cat": {"terms": {"field": "cat"}}}}),
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"sort": [{"n": "desc"}]}),
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"_source": ["n"]}),
            "parsing_exception",
        ),
        (
            "/logs/_search?scroll=1m",
            json!({}),
            "illegal_argument_exception",
        ),
        (
            "/logs/_search?q=cat:beta",
            json!({}),
            "illegal_argument_exception",
        ),
        (
            "/logs/_count",
            json!({"query": {"range": {"n": {"gte": 5}}}}),
            "parsing_exception",
        ),
        (
            "/logs/_count?q=n:5",
            json!({}),
            "illegal_argument_exception",
        ),
    ];
    for (path, body, kind) in refused {
        let (status, answer) = call(&cluster, Method::POST, path, Some(body.clone())).await?;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert_eq!(answer["status"], json!(400), "{answer}");
        assert_eq!(
            answer["error"]["type"],
            json!(kind),
            "{path} {body}: {answer}"
        );
        assert_eq!(
            answer["error"]["root_cause"][0]["type"],
            json!(kind),
            "{answer}"
        );
        assert!(answer.get("hits").is_none() && answer.get("count").is_none());
    }

    // What it does run, it runs as Elasticsearch does.
    let (status, all) = call(
        &cluster,
        Method::POST,
        "/logs/_search",
        Some(json!({"query": {"match_all": {"boost": 1.0}}, "size": 5, "from": 2})),
    )
    .await?;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["hits"]["total"], json!({"value": 30, "relation": "eq"}));
    assert_eq!(all["hits"]["hits"].as_array().map(Vec::len), Some(5));
    let (_, capped) = call(
        &cluster,
        Method::POST,
        "/logs/_search",
        Some(json!({"track_total_hits": 10, "size": 0})),
    )
    .await?;
    assert_eq!(
        capped["hits"]["total"],
        json!({"value": 10, "relation": "gte"})
    );
    let (_, untracked) = call(
        &cluster,
        Method::GET,
        "/logs/_search?track_total_hits=false",
        None,
    )
    .await?;
    assert!(untracked["hits"].get("total").is_none(), "{untracked}");
    // Without an index: every index, here the one.
    let (status, everywhere) =
        call(&cluster, Method::POST, "/_search", Some(json!({"size": 1}))).await?;
    assert_eq!(status, 200, "{everywhere}");
    assert_eq!(everywhere["hits"]["total"]["value"], json!(30));
    let (status, refused) = call(&cluster, Method::GET, "/_search?scroll=1m", None).await?;
    assert_eq!(
        (status, &refused["error"]["type"]),
        (400, &json!("illegal_argument_exception"))
    );
    let (status, counted) = call(
        &cluster,
        Method::POST,
        "/logs/_count",
        Some(json!({"query": {"match_all": {}}})),
    )
    .await?;
    assert_eq!((status, &counted["count"]), (200, &json!(30)));
    Ok(())
}

/// `DELETE` with `ignore_unavailable` removes what exists and answers 200,
/// as Elasticsearch does; without it a missing index is a 404 and nothing
/// goes. `GET _settings` shows what `GET /{index}` shows.
#[tokio::test]
async fn deletes_ignore_unavailable_and_settings_are_read_back() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("deletes", root.path(), SimFaults::default()).await?;
    let (status, _) = call(
        &cluster,
        Method::PUT,
        "/a",
        Some(json!({"settings": {"number_of_shards": 2, "number_of_replicas": 0}})),
    )
    .await?;
    assert_eq!(status, 200);
    let (status, settings) = call(&cluster, Method::GET, "/a/_settings", None).await?;
    assert_eq!(status, 200, "{settings}");
    let (_, whole) = call(&cluster, Method::GET, "/a", None).await?;
    assert_eq!(settings["a"]["settings"], whole["a"]["settings"]);
    assert_eq!(
        settings["a"]["settings"]["index"]["number_of_shards"],
        json!("2")
    );
    let (status, all) = call(&cluster, Method::GET, "/_settings", None).await?;
    assert_eq!((status, &all["a"]), (200, &settings["a"]));

    let (status, body) = call(&cluster, Method::DELETE, "/a,b", None).await?;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["type"], json!("index_not_found_exception"));
    let (status, _) = call(&cluster, Method::GET, "/a", None).await?;
    assert_eq!(status, 200, "a 404 delete removes nothing");
    let (status, body) = call(
        &cluster,
        Method::DELETE,
        "/a,b?ignore_unavailable=true",
        None,
    )
    .await?;
    assert_eq!((status, &body["acknowledged"]), (200, &json!(true)));
    let (status, _) = call(&cluster, Method::GET, "/a", None).await?;
    assert_eq!(status, 404);
    Ok(())
}
