//! Elections and the voting configuration: the cluster keeps a master only
//! while a majority of its voters remains, and voting exclusions let half
//! or more of them leave safely, as in Elasticsearch.

use crate::common::{Fallible, TestResult, call, client};
use floe_elastic::ElasticError;
use floe_elastic_sim::{RunningCluster, SimConfig, SimNode, SimulatedCluster};
use reqwest::Method;
use serde_json::json;

fn node(name: &str, master: bool) -> SimNode {
    SimNode {
        name: name.into(),
        master_eligible: master,
        version: None,
        data: !master,
        addr: None,
    }
}

/// Three masters and a data node, then three new masters join.
async fn six_masters() -> Fallible<RunningCluster> {
    let cluster = SimulatedCluster::start(SimConfig::new("votes").with_members(vec![
        node("m1", true),
        node("m2", true),
        node("m3", true),
        node("d1", false),
    ]))
    .await?;
    cluster.set_members(&[
        node("m1", true),
        node("m2", true),
        node("m3", true),
        node("d1", false),
        node("n1", true),
        node("n2", true),
        node("n3", true),
    ]);
    Ok(cluster)
}

fn after_replacement() -> Vec<SimNode> {
    vec![
        node("d1", false),
        node("n1", true),
        node("n2", true),
        node("n3", true),
    ]
}

#[tokio::test]
async fn removing_most_voters_without_exclusions_leaves_no_master() -> TestResult {
    let cluster = six_masters().await?;
    let (status, state) = call(&cluster, Method::GET, "/_cluster/state/metadata", None).await?;
    assert_eq!(status, 200, "{state}");
    let voters = &state["metadata"]["cluster_coordination"]["last_committed_config"];
    assert_eq!(voters.as_array().map(Vec::len), Some(5), "{state}");

    cluster.set_members(&after_replacement());
    assert!(!cluster.has_master());
    for path in [
        "/_cluster/health",
        "/_cat/nodes",
        "/_cluster/state/metadata",
    ] {
        let (status, body) = call(&cluster, Method::GET, path, None).await?;
        assert_eq!(status, 503, "{path}");
        assert_eq!(
            body,
            json!({
                "error": {
                    "root_cause": [{"type": "master_not_discovered_exception", "reason": null}],
                    "type": "master_not_discovered_exception",
                    "reason": null,
                },
                "status": 503,
            }),
            "{path}"
        );
    }
    // The node's own information needs no master.
    let (status, _) = call(&cluster, Method::GET, "/", None).await?;
    assert_eq!(status, 200);
    // Floe's client sees a transient failure: the plan waits, it does not fail.
    let health = client(&cluster)?.health(None, None).await;
    assert!(
        matches!(&health, Err(e @ ElasticError::Http(_)) if e.is_transient()),
        "{health:?}"
    );
    Ok(())
}

#[tokio::test]
async fn excluded_voters_leave_without_costing_the_quorum() -> TestResult {
    let cluster = six_masters().await?;
    let es = client(&cluster)?;
    let names: Vec<String> = ["m1", "m2", "m3"].map(String::from).to_vec();
    es.add_voting_config_exclusions(&names).await?;
    let config = es.voting_configuration().await?;
    assert_eq!(config.voting_config_exclusions.len(), 3);
    for name in &names {
        assert!(config.has_left(name), "{config:?}");
    }
    assert_eq!(config.last_committed_config.len(), 3);
    // Still in the cluster: clearing with wait_for_removal waits, then times out.
    let (status, body) = call(
        &cluster,
        Method::DELETE,
        "/_cluster/voting_config_exclusions?timeout=50ms",
        None,
    )
    .await?;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["type"], "elasticsearch_timeout_exception");

    cluster.set_members(&after_replacement());
    assert!(cluster.has_master());
    es.clear_voting_config_exclusions(true).await?;
    let config = es.voting_configuration().await?;
    assert!(config.voting_config_exclusions.is_empty());
    assert_eq!(config.last_committed_config.len(), 3);
    Ok(())
}

#[tokio::test]
async fn exclusions_are_checked_as_elasticsearch_checks_them() -> TestResult {
    let cluster = six_masters().await?;
    for query in ["", "?node_names=m1&node_ids=x", "?node_names="] {
        let (status, body) = call(
            &cluster,
            Method::POST,
            &format!("/_cluster/voting_config_exclusions{query}"),
            None,
        )
        .await?;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["type"], "illegal_argument_exception");
    }
    let eleven: Vec<String> = (0..11).map(|i| format!("gone-{i}")).collect();
    let (status, body) = call(
        &cluster,
        Method::POST,
        &format!(
            "/_cluster/voting_config_exclusions?node_names={}",
            eleven.join(",")
        ),
        None,
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cluster.max_voting_config_exclusions")),
        "{body}"
    );
    // Names of nodes not in the cluster are recorded as absent.
    let (status, _) = call(
        &cluster,
        Method::POST,
        "/_cluster/voting_config_exclusions?node_names=gone",
        None,
    )
    .await?;
    assert_eq!(status, 200);
    let config = client(&cluster)?.voting_configuration().await?;
    assert_eq!(
        config.voting_config_exclusions,
        vec![floe_elastic::VotingExclusion {
            node_id: "_absent_".into(),
            node_name: "gone".into(),
        }]
    );
    Ok(())
}

fn versioned(name: &str, version: &str) -> SimNode {
    SimNode {
        name: name.into(),
        master_eligible: true,
        version: Some(version.into()),
        data: true,
        addr: None,
    }
}

#[tokio::test]
async fn a_node_older_than_the_newest_may_not_join() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("versions").with_members(vec![
        versioned("a", "8.15.3"),
        versioned("b", "8.15.3"),
        versioned("c", "8.15.3"),
    ]))
    .await?;
    // Newer nodes join an older cluster.
    cluster.set_members(&[
        versioned("a", "8.15.3"),
        versioned("b", "8.15.3"),
        versioned("c", "8.15.3"),
        versioned("d", "8.17.0"),
    ]);
    assert_eq!(cluster.node_names().len(), 4);
    // Once a newer node is in, an older one is refused.
    cluster.set_members(&[
        versioned("a", "8.15.3"),
        versioned("b", "8.15.3"),
        versioned("c", "8.15.3"),
        versioned("d", "8.17.0"),
        versioned("e", "8.15.3"),
    ]);
    assert!(!cluster.node_names().contains(&"e".to_string()));
    let (status, nodes) = call(
        &cluster,
        Method::GET,
        "/_cat/nodes?format=json&h=name,version",
        None,
    )
    .await?;
    assert_eq!(status, 200);
    assert_eq!(nodes.as_array().map(Vec::len), Some(4), "{nodes}");
    Ok(())
}

/// `_cluster/health` counts every node of the cluster and, apart, those
/// with a data role; `_cat/nodes` lists each with its roles and version.
/// A node lost is one fewer in both, while the masters keep a majority.
#[tokio::test]
async fn health_and_cat_nodes_count_the_nodes_and_a_lost_one() -> TestResult {
    let members = vec![
        node("m1", true),
        node("m2", true),
        node("m3", true),
        node("d1", false),
        node("d2", false),
    ];
    let cluster = SimulatedCluster::start(SimConfig::new("counts").with_members(members)).await?;
    let (status, health) = call(&cluster, Method::GET, "/_cluster/health", None).await?;
    assert_eq!(status, 200, "{health}");
    assert_eq!(
        (&health["number_of_nodes"], &health["number_of_data_nodes"]),
        (&json!(5), &json!(2)),
        "{health}"
    );
    let (status, nodes) = call(
        &cluster,
        Method::GET,
        "/_cat/nodes?format=json&h=name,node.role,version",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{nodes}");
    let role_of = |nodes: &serde_json::Value, name: &str| {
        nodes
            .as_array()
            .and_then(|n| n.iter().find(|n| n["name"] == json!(name)))
            .map(|n| (n["node.role"].clone(), n["version"].clone()))
    };
    assert_eq!(role_of(&nodes, "m1").map(|r| r.0), Some(json!("m")));
    assert_eq!(
        role_of(&nodes, "d1").map(|r| r.0),
        Some(json!("cdfhilrstw"))
    );
    assert!(role_of(&nodes, "d1").is_some_and(|r| r.1.is_string()));

    // d2 is lost (its instance went): the cluster has four nodes.
    cluster.set_members(&[
        node("m1", true),
        node("m2", true),
        node("m3", true),
        node("d1", false),
    ]);
    let (status, health) = call(&cluster, Method::GET, "/_cluster/health", None).await?;
    assert_eq!(status, 200, "{health}");
    assert_eq!(
        (&health["number_of_nodes"], &health["number_of_data_nodes"]),
        (&json!(4), &json!(1)),
        "{health}"
    );
    let (_, nodes) = call(
        &cluster,
        Method::GET,
        "/_cat/nodes?format=json&h=name",
        None,
    )
    .await?;
    assert_eq!(nodes.as_array().map(Vec::len), Some(4), "{nodes}");
    // A master lost too: two of three voters remain, the cluster answers.
    cluster.set_members(&[node("m1", true), node("m2", true), node("d1", false)]);
    let (status, health) = call(&cluster, Method::GET, "/_cluster/health", None).await?;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["number_of_nodes"], json!(3), "{health}");
    Ok(())
}
