use crate::common::{MockEs, Reply, TestResult, closed_port};
use floe_elastic::{CreateSnapshot, ElasticClient, ElasticError, HealthStatus};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_server_slower_than_the_timeout_is_a_timeout() -> TestResult {
    let es = MockEs::always(
        Reply::json(200, json!({"acknowledged": true})).after(Duration::from_millis(1500)),
    )
    .await?;
    let client = ElasticClient::new(&es.url, None, Duration::from_millis(300))?;

    let started = Instant::now();
    let result = client.delete_snapshot("backups", "snap-1").await;
    let elapsed = started.elapsed();

    let Err(error @ ElasticError::Timeout { failure: None }) = result else {
        return Err(format!("expected a client timeout, got {result:?}").into());
    };
    assert!(elapsed < Duration::from_millis(1200), "{elapsed:?}");
    assert!(error.is_transient());
    assert_eq!(error.code(), "timeout");
    assert_eq!(error.status(), None);
    Ok(())
}

#[tokio::test]
async fn a_health_wait_gets_its_wait_on_top_of_the_timeout() -> TestResult {
    let body = json!({"cluster_name": "c", "status": "green", "timed_out": false});
    let es = MockEs::always(Reply::json(200, body).after(Duration::from_millis(600))).await?;
    let client = ElasticClient::new(&es.url, None, Duration::from_millis(300))?;

    // 600 ms is past the 300 ms timeout, but within it plus the 500 ms wait.
    let health = client
        .health(Some(HealthStatus::Green), Some(Duration::from_millis(500)))
        .await?;
    assert_eq!(health.status, HealthStatus::Green);

    // Without a wait the plain timeout applies.
    let result = client.health(None, None).await;
    assert!(
        matches!(result, Err(ElasticError::Timeout { failure: None })),
        "{result:?}"
    );
    Ok(())
}

#[tokio::test]
async fn connection_refused_is_unreachable() -> TestResult {
    let port = closed_port().await?;
    let client = ElasticClient::new(
        &format!("http://127.0.0.1:{port}"),
        None,
        Duration::from_secs(2),
    )?;

    let result = client.health(None, None).await;

    let Err(error @ ElasticError::Unreachable { .. }) = result else {
        return Err(format!("expected Unreachable, got {result:?}").into());
    };
    assert!(error.is_transient());
    assert_eq!(error.code(), "unreachable");
    // Rebuilt without the URL, so no query string can leak through it.
    assert!(!error.to_string().contains("127.0.0.1"), "{error}");
    Ok(())
}

#[tokio::test]
async fn elasticsearch_timing_out_itself_is_a_timeout_with_its_reason() -> TestResult {
    let es = MockEs::always(Reply::error(
        503,
        "process_cluster_event_timeout_exception",
        "failed to process cluster event (delete snapshot) within 30s",
    ))
    .await?;
    let result = es.client()?.delete_snapshot("backups", "snap-1").await;
    let Err(ElasticError::Timeout {
        failure: Some(failure),
    }) = result
    else {
        return Err(format!("expected Timeout, got {result:?}").into());
    };
    assert_eq!(failure.status, 503);
    assert_eq!(
        failure.error_type,
        "process_cluster_event_timeout_exception"
    );

    let es = MockEs::always(Reply::json(
        408,
        json!({"error": "request timed out", "status": 408}),
    ))
    .await?;
    let result = es.client()?.delete_snapshot("backups", "snap-1").await;
    assert!(
        matches!(result, Err(ElasticError::Timeout { failure: Some(_) })),
        "{result:?}"
    );
    Ok(())
}

#[tokio::test]
async fn an_unreadable_success_is_a_protocol_error() -> TestResult {
    let es = MockEs::always(Reply::text(200, "<html>login</html>", "text/html")).await?;
    let result = es
        .client()?
        .create_snapshot("backups", "snap-1", &CreateSnapshot::default(), false)
        .await;
    let Err(error @ ElasticError::Protocol { status: 200, .. }) = result else {
        return Err(format!("expected Protocol, got {result:?}").into());
    };
    assert!(error.to_string().contains("<html>login</html>"), "{error}");
    assert!(!error.is_transient());

    let es = MockEs::always(Reply::json(200, json!({"unexpected": true}))).await?;
    let result = es.client()?.list_snapshots("backups", true).await;
    // A listing without snapshots is simply empty.
    assert_eq!(result?.len(), 0);
    let result = es
        .client()?
        .restore("backups", "snap-1", &Default::default(), false)
        .await;
    assert!(
        matches!(result, Err(ElasticError::Protocol { .. })),
        "{result:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_gateway_error_page_is_a_transient_http_error() -> TestResult {
    let es = MockEs::always(Reply::text(502, "<html>Bad Gateway</html>", "text/html")).await?;
    let result = es.client()?.health(None, None).await;
    let Err(error @ ElasticError::Http(_)) = result else {
        return Err(format!("expected Http, got {result:?}").into());
    };
    assert!(error.is_transient());
    assert_eq!(error.status(), Some(502));
    assert_eq!(
        error.failure().map(|f| f.reason.as_str()),
        Some("<html>Bad Gateway</html>")
    );
    Ok(())
}

#[tokio::test]
async fn redirects_are_not_followed() -> TestResult {
    let es = MockEs::always(
        Reply::text(307, "", "text/plain").redirect_to("http://127.0.0.1:1/_cluster/health"),
    )
    .await?;
    let result = es.client()?.health(None, None).await;
    assert!(
        matches!(&result, Err(ElasticError::Http(f)) if f.status == 307),
        "{result:?}"
    );
    assert_eq!(es.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_base_url_with_a_path_prefix_keeps_it() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({"cluster_name": "c", "status": "green"}),
    ))
    .await?;
    let client = ElasticClient::new(&format!("{}/es/", es.url), None, Duration::from_secs(5))?;
    client.health(None, None).await?;
    assert_eq!(es.only_request()?.path, "/es/_cluster/health");
    Ok(())
}
