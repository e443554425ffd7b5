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

/// Loads `n` documents through `_bulk`: `n` counts up, `msg` says even or
/// odd, `cat` cycles alpha, beta, gamma.
async fn load(cluster: &floe_elastic_sim::RunningCluster, index: &str, n: usize) -> TestResult {
    let mut lines = String::new();
    for i in 0..n {
        let cat = ["alpha", "beta", "gamma"][i % 3];
        let parity = if i % 2 == 0 { "even" } else { "odd" };
        lines.push_str(&format!(
            "{{\"index\":{{\"_index\":\"{index}\",\"_id\":\"{i}\"}}}}\n"
        ));
        lines.push_str(&format!(
            "{{\"n\":{i},\"msg\":\"number {i} is {parity}\",\"cat\":\"{cat}\"}}\n"
        ));
    }
    let response = reqwest::Client::new()
        .post(format!("{}/_bulk", cluster.url()))
        .header("content-type", "application/x-ndjson")
        .body(lines)
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await?;
    assert_eq!(body["errors"], json!(false), "{body}");
    Ok(())
}

/// Searches answer as Elasticsearch answers them (the issue's
/// reproductions: match, term, range with sort, aggregations, a count
/// with a query, a scroll read to the end); what the simulated cluster
/// does not implement is refused in Elasticsearch's shape, never answered
/// as if it were something else.
#[tokio::test]
async fn searches_answer_as_elasticsearch_or_are_refused() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("search", root.path(), SimFaults::default()).await?;
    load(&cluster, "logs", 300).await?;
    let search = |body: serde_json::Value| {
        let cluster = &cluster;
        async move { call(cluster, Method::POST, "/logs/_search", Some(body)).await }
    };

    let (status, even) = search(json!({"query": {"match": {"msg": "even"}}, "size": 0})).await?;
    assert_eq!(status, 200, "{even}");
    assert_eq!(
        even["hits"]["total"],
        json!({"value": 150, "relation": "eq"})
    );
    let (_, beta) = search(json!({"query": {"term": {"cat.keyword": "beta"}}, "size": 0})).await?;
    assert_eq!(beta["hits"]["total"]["value"], json!(100));
    let (_, sorted) = search(json!({
        "query": {"range": {"n": {"lt": 10}}}, "sort": [{"n": "desc"}], "size": 3,
        "_source": ["n"]
    }))
    .await?;
    let ns: Vec<&serde_json::Value> = sorted["hits"]["hits"]
        .as_array()
        .map(|h| h.iter().map(|h| &h["_source"]["n"]).collect())
        .unwrap_or_default();
    assert_eq!(ns, [&json!(9), &json!(8), &json!(7)], "{sorted}");
    assert_eq!(sorted["hits"]["hits"][0]["_source"], json!({"n": 9}));
    assert_eq!(sorted["hits"]["hits"][0]["sort"], json!([9]));
    assert_eq!(sorted["hits"]["hits"][0]["_score"], json!(null));
    let (_, aggs) = search(json!({"size": 0, "aggs": {
        "cats": {"terms": {"field": "cat.keyword"}, "aggs": {"avg_n": {"avg": {"field": "n"}}}},
        "top": {"max": {"field": "n"}}
    }}))
    .await?;
    assert_eq!(
        aggs["aggregations"]["top"],
        json!({"value": 299.0}),
        "{aggs}"
    );
    assert_eq!(
        aggs["aggregations"]["cats"]["buckets"][0],
        json!({"key": "alpha", "doc_count": 100, "avg_n": {"value": 148.5}})
    );
    let (status, counted) = call(
        &cluster,
        Method::POST,
        "/logs/_count",
        Some(json!({"query": {"range": {"n": {"gte": 100}}}})),
    )
    .await?;
    assert_eq!((status, &counted["count"]), (200, &json!(200)));
    let (_, q) = call(&cluster, Method::GET, "/logs/_count?q=cat:beta", None).await?;
    assert_eq!(q["count"], json!(100), "{q}");

    // A scroll reads every match once, then nothing, until cleared.
    let (status, page) = call(
        &cluster,
        Method::POST,
        "/logs/_search?scroll=1m",
        Some(json!({"size": 128, "query": {"match": {"msg": "odd"}}, "sort": ["_doc"]})),
    )
    .await?;
    assert_eq!(status, 200, "{page}");
    let mut seen = page["hits"]["hits"].as_array().map_or(0, Vec::len);
    let id = page["_scroll_id"].clone();
    loop {
        let (status, next) = call(
            &cluster,
            Method::POST,
            "/_search/scroll",
            Some(json!({"scroll": "1m", "scroll_id": id})),
        )
        .await?;
        assert_eq!(status, 200, "{next}");
        let n = next["hits"]["hits"].as_array().map_or(0, Vec::len);
        if n == 0 {
            break;
        }
        seen += n;
    }
    assert_eq!(seen, 150);
    let (status, cleared) = call(
        &cluster,
        Method::DELETE,
        "/_search/scroll",
        Some(json!({"scroll_id": id})),
    )
    .await?;
    assert_eq!((status, &cleared["num_freed"]), (200, &json!(1)));
    let (status, gone) = call(
        &cluster,
        Method::POST,
        "/_search/scroll",
        Some(json!({"scroll_id": id})),
    )
    .await?;
    assert_eq!(status, 404, "{gone}");
    assert_eq!(
        gone["error"]["type"],
        json!("search_context_missing_exception")
    );

    let refused = [
        (
            "/logs/_search",
            json!({"query": {"fuzzy": {"msg": "evn"}}}),
            400,
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"query": {"match_all": {}, "term": {"a": 1}}}),
            400,
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"aggs": {"where": {"geo_bounds": {"field": "cat"}}}}),
            400,
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"highlight": {"fields": {"msg": {}}}}),
            400,
            "parsing_exception",
        ),
        (
            "/logs/_search",
            json!({"sort": [{"msg": "desc"}]}),
            400,
            "search_phase_execution_exception",
        ),
        (
            "/logs/_search?routing=x",
            json!({}),
            400,
            "illegal_argument_exception",
        ),
        (
            "/logs/_count",
            json!({"query": {"term": {"n": "not a number"}}}),
            400,
            "search_phase_execution_exception",
        ),
    ];
    for (path, body, code, kind) in refused {
        let (status, answer) = call(&cluster, Method::POST, path, Some(body.clone())).await?;
        assert_eq!(status, code, "{path} {body}: {answer}");
        assert_eq!(answer["status"], json!(code), "{answer}");
        assert_eq!(
            answer["error"]["type"],
            json!(kind),
            "{path} {body}: {answer}"
        );
        assert!(answer.get("hits").is_none() && answer.get("count").is_none());
    }
    let (_, text_sort) = search(json!({"sort": [{"msg": "desc"}]})).await?;
    assert_eq!(
        text_sort["error"]["root_cause"][0]["type"],
        json!("illegal_argument_exception"),
        "{text_sort}"
    );

    // Paging and totals as Elasticsearch counts them.
    let (_, all) =
        search(json!({"query": {"match_all": {"boost": 1.0}}, "size": 5, "from": 2})).await?;
    assert_eq!(
        all["hits"]["total"],
        json!({"value": 300, "relation": "eq"})
    );
    assert_eq!(all["hits"]["hits"].as_array().map(Vec::len), Some(5));
    let (_, capped) = search(json!({"track_total_hits": 10, "size": 0})).await?;
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
    let (status, everywhere) =
        call(&cluster, Method::POST, "/_search", Some(json!({"size": 1}))).await?;
    assert_eq!(status, 200, "{everywhere}");
    assert_eq!(everywhere["hits"]["total"]["value"], json!(300));
    let (_, window) = search(json!({"from": 9_995, "size": 10})).await?;
    assert_eq!(
        window["error"]["type"],
        json!("search_phase_execution_exception"),
        "{window}"
    );
    Ok(())
}

/// Mappings as Elasticsearch makes them: dynamic ones from the first
/// documents, explicit ones on create and `PUT _mapping`, a value a field
/// cannot take refused with the document, a type that would change
/// refused with the mapping.
#[tokio::test]
async fn mappings_are_made_read_and_enforced() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("mappings", root.path(), SimFaults::default()).await?;
    let (status, created) = call(
        &cluster,
        Method::PUT,
        "/typed",
        Some(
            json!({"mappings": {"properties": {"n": {"type": "integer"}, "at": {"type": "date"}}}}),
        ),
    )
    .await?;
    assert_eq!(status, 200, "{created}");
    let (status, doc) = call(
        &cluster,
        Method::PUT,
        "/typed/_doc/1",
        Some(json!({"n": 5, "at": "2024-05-01", "tag": "new"})),
    )
    .await?;
    assert_eq!(status, 201, "{doc}");
    let (status, mapping) = call(&cluster, Method::GET, "/typed/_mapping", None).await?;
    assert_eq!(status, 200, "{mapping}");
    assert_eq!(
        mapping,
        json!({"typed": {"mappings": {"properties": {
            "at": {"type": "date"},
            "n": {"type": "integer"},
            "tag": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
        }}}})
    );
    let (status, refused) = call(
        &cluster,
        Method::PUT,
        "/typed/_doc/2",
        Some(json!({"n": "five"})),
    )
    .await?;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["error"]["type"],
        json!("document_parsing_exception")
    );
    let (_, missing) = call(&cluster, Method::GET, "/typed/_doc/2", None).await?;
    assert_eq!(
        missing["found"],
        json!(false),
        "a refused document is not written"
    );
    let (status, put) = call(
        &cluster,
        Method::PUT,
        "/typed/_mapping",
        Some(json!({"properties": {"extra": {"type": "keyword"}}})),
    )
    .await?;
    assert_eq!((status, &put["acknowledged"]), (200, &json!(true)), "{put}");
    let (status, changed) = call(
        &cluster,
        Method::PUT,
        "/typed/_mapping",
        Some(json!({"properties": {"n": {"type": "keyword"}}})),
    )
    .await?;
    assert_eq!(status, 400, "{changed}");
    assert_eq!(
        changed["error"]["type"],
        json!("illegal_argument_exception")
    );
    let (status, unknown) = call(
        &cluster,
        Method::PUT,
        "/geo",
        Some(json!({"mappings": {"properties": {"where": {"type": "geo_point"}}}})),
    )
    .await?;
    assert_eq!(status, 400, "{unknown}");
    assert_eq!(unknown["error"]["type"], json!("mapper_parsing_exception"));
    let (status, _) = call(&cluster, Method::GET, "/geo", None).await?;
    assert_eq!(status, 404, "a refused create makes no index");
    let (_, range) = call(
        &cluster,
        Method::POST,
        "/typed/_count",
        Some(json!({"query": {"range": {"at": {"gte": "2024-04-30", "lt": "2024-05-02"}}}})),
    )
    .await?;
    assert_eq!(range["count"], json!(1), "{range}");
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

/// Data keeps its meaning through snapshots: a restored index, and a
/// searchable-snapshot mount on another cluster, answer the same hits and
/// aggregations as the source did when the snapshot was taken, though
/// the source changed since.
#[tokio::test]
async fn restored_and_mounted_indices_search_as_the_source_did() -> TestResult {
    use crate::common::fs_repo;
    use floe_elastic::CreateSnapshot;
    let root = tempfile::tempdir()?;
    let source = start("source", root.path(), SimFaults::default()).await?;
    let clone = start("clone", root.path(), SimFaults::default()).await?;
    crate::common::start_trial(&clone).await?;
    load(&source, "logs", 120).await?;
    let question = json!({
        "query": {"bool": {"filter": [{"range": {"n": {"gte": 30}}}], "must": [{"match": {"msg": "even"}}]}},
        "sort": [{"n": "desc"}],
        "size": 5,
        "aggs": {"cats": {"terms": {"field": "cat.keyword"}}, "stats": {"stats": {"field": "n"}}}
    });
    let before = ask(&source, "logs", &question).await?;
    assert_eq!(before["hits"]["total"]["value"], json!(45), "{before}");
    for es in [client(&source)?, client(&clone)?] {
        es.put_repository("repo", &fs_repo("repo")).await?;
    }
    client(&source)?
        .create_snapshot("repo", "snap", &CreateSnapshot::default(), true)
        .await?;
    // The source moves on.
    load(&source, "logs", 10).await?;
    call(&source, Method::DELETE, "/logs/_doc/100", None).await?;

    let (status, restored) = call(
        &source,
        Method::POST,
        "/_snapshot/repo/snap/_restore?wait_for_completion=true",
        Some(
            json!({"indices": "logs", "rename_pattern": "logs", "rename_replacement": "restored"}),
        ),
    )
    .await?;
    assert_eq!(status, 200, "{restored}");
    assert_eq!(ask(&source, "restored", &question).await?, before);
    let (status, mounted) = call(
        &clone,
        Method::POST,
        "/_snapshot/repo/snap/_mount?wait_for_completion=true",
        Some(json!({"index": "logs", "renamed_index": "mounted"})),
    )
    .await?;
    assert_eq!(status, 200, "{mounted}");
    assert_eq!(ask(&clone, "mounted", &question).await?, before);
    let (_, mapping) = call(&clone, Method::GET, "/mounted/_mapping", None).await?;
    let (_, original) = call(&source, Method::GET, "/logs/_mapping", None).await?;
    assert_eq!(mapping["mounted"], original["logs"]);
    Ok(())
}

/// A search's answer without what differs by nature between two indices
/// holding the same documents: the time taken and the index's name.
async fn ask(
    cluster: &floe_elastic_sim::RunningCluster,
    index: &str,
    question: &serde_json::Value,
) -> crate::common::Fallible<serde_json::Value> {
    let path = format!("/{index}/_search");
    let (status, mut answer) = call(cluster, Method::POST, &path, Some(question.clone())).await?;
    assert_eq!(status, 200, "{answer}");
    answer["took"] = json!(0);
    if let Some(hits) = answer["hits"]["hits"].as_array_mut() {
        for hit in hits {
            hit["_index"] = json!("");
        }
    }
    Ok(answer)
}
