//! A floe-local restart keeps every deployment as it was: its nodes, its
//! endpoint and credentials, and its cluster's indices, documents and
//! mappings (issue 34). Local mode is where a newcomer keeps a cluster
//! for days; losing its data to a Ctrl-C, or to a crash, would teach them
//! not to trust it.

use floe_tests::{Reachable, Server, TestResult};
use serde_json::{Value, json};
use std::time::Duration;

const ORG: &str = "restart-org";
const DOCS: usize = 300;

/// Calls the deployment's endpoint as its user does: the CA and basic auth.
struct Cluster {
    client: reqwest::Client,
    d: Reachable,
}

impl Cluster {
    fn new(d: Reachable) -> Result<Cluster, Box<dyn std::error::Error>> {
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(d.ca_certificate.as_bytes())?)
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Cluster { client, d })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), Box<dyn std::error::Error>> {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.d.endpoint))
            .basic_auth("elastic", Some(&self.d.password));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await?;
        let status = answer.status().as_u16();
        Ok((status, answer.json().await?))
    }

    /// What a user checks of their data: the count, a term query's hits,
    /// a range sorted, an aggregation, and the mappings.
    async fn what_it_holds(&self) -> Result<Value, Box<dyn std::error::Error>> {
        use reqwest::Method;
        let (_, count) = self.call(Method::GET, "/logs/_count", None).await?;
        let (_, term) = self
            .call(
                Method::POST,
                "/logs/_search",
                Some(json!({"query": {"term": {"cat": "beta"}}, "size": 0})),
            )
            .await?;
        let (_, range) = self
            .call(
                Method::POST,
                "/logs/_search",
                Some(json!({
                    "query": {"range": {"n": {"gte": 10, "lt": 15}}},
                    "sort": [{"n": "desc"}],
                    "_source": ["n"]
                })),
            )
            .await?;
        let (_, agg) = self
            .call(
                Method::POST,
                "/logs/_search",
                Some(json!({"size": 0, "aggs": {"by_cat": {"terms": {"field": "cat"}}}})),
            )
            .await?;
        let (_, mapping) = self.call(Method::GET, "/logs/_mapping", None).await?;
        let (_, doc) = self.call(Method::GET, "/logs/_doc/7", None).await?;
        Ok(json!({
            "count": count["count"],
            "term": term["hits"]["total"],
            "range": range["hits"]["hits"].as_array().map(|h| h.iter().map(|h| h["_source"]["n"].clone()).collect::<Vec<_>>()),
            "agg": agg["aggregations"],
            "mapping": mapping,
            "doc": {"source": doc["_source"], "version": doc["_version"]},
        }))
    }
}

async fn fill(cluster: &Cluster) -> TestResult {
    use reqwest::Method;
    let (status, created) = cluster
        .call(
            Method::PUT,
            "/logs",
            Some(json!({
                "settings": {"number_of_shards": 2, "number_of_replicas": 0},
                "mappings": {"properties": {"n": {"type": "long"}, "cat": {"type": "keyword"}}}
            })),
        )
        .await?;
    assert_eq!(status, 200, "{created}");
    let mut bulk = String::new();
    for i in 0..DOCS {
        let cat = ["alpha", "beta", "gamma"][i % 3];
        bulk.push_str(&format!("{{\"index\":{{\"_id\":\"{i}\"}}}}\n"));
        bulk.push_str(&json!({"n": i, "cat": cat, "msg": format!("line {i}")}).to_string());
        bulk.push('\n');
    }
    let answer: Value = cluster
        .client
        .post(format!("{}/logs/_bulk?refresh=true", cluster.d.endpoint))
        .basic_auth("elastic", Some(&cluster.d.password))
        .header("content-type", "application/x-ndjson")
        .body(bulk)
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(answer["errors"], json!(false), "{}", answer["items"][0]);
    // A second version of one document, and a deleted one.
    let (status, _) = cluster
        .call(
            Method::PUT,
            "/logs/_doc/7?refresh=true",
            Some(json!({"n": 7, "cat": "beta", "msg": "edited"})),
        )
        .await?;
    assert_eq!(status, 200);
    let (status, _) = cluster
        .call(Method::DELETE, "/logs/_doc/8?refresh=true", None)
        .await?;
    assert_eq!(status, 200);
    Ok(())
}

/// Restarts `s` (gracefully or killed) and checks that the deployment is
/// still running on the same endpoint and its cluster holds `before`.
async fn restart_and_compare(
    s: &mut Server,
    kill: bool,
    cluster: &Cluster,
    before: &Value,
) -> TestResult {
    s.restart(kill);
    let token = s.token(ORG, &["deployment_manager"]);
    let d = s
        .until(
            &token,
            &format!("/api/v1/deployments/{}", cluster.d.id),
            "running and healthy after the restart",
            |d| d["status"] == json!("running") && d["healthy"] == json!(true),
        )
        .await?;
    assert_eq!(
        d["elasticsearch"]["endpoint"].as_str(),
        Some(cluster.d.endpoint.as_str()),
        "the endpoint a user saved is still the deployment's"
    );
    let after = floe_tests::poll_until(
        "the cluster answers as before",
        Duration::from_secs(60),
        || async {
            match cluster.what_it_holds().await {
                Ok(after) if &after == before => floe_tests::Look::Done(after),
                Ok(after) => floe_tests::Look::NotYet(after.to_string()),
                Err(e) => floe_tests::Look::NotYet(e.to_string()),
            }
        },
    )
    .await?;
    assert_eq!(&after, before);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_or_a_crash_keeps_every_deployments_documents() -> TestResult {
    let mut s = Server::start_quick();
    let token = s.token(ORG, &["deployment_manager"]);
    let admin = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&admin, "restart-backups", "restart-backups")
        .await;
    let d = s
        .reachable_deployment(&token, "kept", "restart-backups")
        .await?;
    let cluster = Cluster::new(d)?;
    fill(&cluster).await?;
    let before = cluster.what_it_holds().await?;
    assert_eq!(before["count"], json!(DOCS - 1), "{before}");
    assert_eq!(before["range"], json!([14, 13, 12, 11, 10]), "{before}");

    // Ctrl-C, as an operator stops it.
    restart_and_compare(&mut s, false, &cluster, &before).await?;

    // A write after the restart, then a crash: what was acknowledged
    // before the crash is there after it.
    let (status, _) = cluster
        .call(
            reqwest::Method::PUT,
            "/logs/_doc/8?refresh=true",
            Some(json!({"n": 8, "cat": "gamma", "msg": "back"})),
        )
        .await?;
    assert_eq!(status, 201);
    let before = cluster.what_it_holds().await?;
    assert_eq!(before["count"], json!(DOCS), "{before}");
    restart_and_compare(&mut s, true, &cluster, &before).await?;
    Ok(())
}
