use crate::common::{MockEs, Reply, TestResult};
use floe_elastic::HealthStatus;
use serde_json::{Value, json};
use std::time::Duration;

fn health_body(status: &str, timed_out: bool) -> Value {
    json!({
        "cluster_name": "floe-d-123",
        "status": status,
        "timed_out": timed_out,
        "number_of_nodes": 3,
        "number_of_data_nodes": 2,
        "active_primary_shards": 10,
        "active_shards": 18,
        "relocating_shards": 0,
        "initializing_shards": 2,
        "unassigned_shards": 0,
        "unassigned_primary_shards": 0,
        "delayed_unassigned_shards": 0,
        "number_of_pending_tasks": 1,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 12,
        "active_shards_percent_as_number": 90.0
    })
}

#[tokio::test]
async fn health_without_waiting() -> TestResult {
    let es = MockEs::always(Reply::json(200, health_body("yellow", false))).await?;

    let health = es.client()?.health(None, None).await?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.path, "/_cluster/health");
    assert_eq!(seen.query, None);
    assert_eq!(seen.header("accept").as_deref(), Some("application/json"));
    assert_eq!(health.cluster_name, "floe-d-123");
    assert_eq!(health.status, HealthStatus::Yellow);
    assert!(!health.timed_out);
    assert_eq!(health.number_of_nodes, 3);
    assert_eq!(health.initializing_shards, 2);
    assert_eq!(health.task_max_waiting_in_queue_millis, 12);
    assert!((health.active_shards_percent_as_number - 90.0).abs() < f64::EPSILON);
    Ok(())
}

#[tokio::test]
async fn health_waiting_for_a_status_sends_it_with_the_timeout() -> TestResult {
    let es = MockEs::always(Reply::json(200, health_body("green", false))).await?;

    let health = es
        .client()?
        .health(Some(HealthStatus::Green), Some(Duration::from_secs(90)))
        .await?;

    let seen = es.only_request()?;
    assert_eq!(
        seen.query.as_deref(),
        Some("wait_for_status=green&timeout=90000ms")
    );
    assert_eq!(health.status, HealthStatus::Green);
    assert!(HealthStatus::Green > HealthStatus::Yellow);
    Ok(())
}

#[tokio::test]
async fn a_wait_that_runs_out_returns_the_health_as_it_stands() -> TestResult {
    // Elasticsearch answers 408 with the health body when the wait times out.
    let es = MockEs::always(Reply::json(408, health_body("red", true))).await?;

    let health = es
        .client()?
        .health(
            Some(HealthStatus::Yellow),
            Some(Duration::from_millis(1500)),
        )
        .await?;

    assert!(health.timed_out);
    assert_eq!(health.status, HealthStatus::Red);
    let seen = es.only_request()?;
    assert_eq!(
        seen.query.as_deref(),
        Some("wait_for_status=yellow&timeout=1500ms")
    );
    Ok(())
}
