use crate::common::{MockEs, Reply, TestResult};
use floe_domain::secret::SecretString;
use floe_elastic::{Auth, ElasticClient, ElasticError, RepositoryRegistration};
use serde_json::{Map, Value, json};
use std::time::Duration;

fn settings(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[tokio::test]
async fn put_repository_sends_type_and_settings_with_readonly_and_no_verification() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"acknowledged": true}))).await?;
    let repo = RepositoryRegistration::new(
        "s3",
        settings(json!({"bucket": "floe-snapshots", "client": "floe", "base_path": "prod"})),
    )
    .read_only()
    .without_verification();

    es.client()?.put_repository("shared-backups", &repo).await?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.path, "/_snapshot/shared-backups");
    assert_eq!(seen.query.as_deref(), Some("verify=false"));
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        seen.json()?,
        json!({
            "type": "s3",
            "settings": {
                "bucket": "floe-snapshots",
                "client": "floe",
                "base_path": "prod",
                "readonly": true,
            }
        })
    );
    Ok(())
}

#[tokio::test]
async fn a_writable_repository_is_verified_and_carries_no_readonly_flag() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"acknowledged": true}))).await?;
    // A stray readonly in the settings must not contradict the flag.
    let repo = RepositoryRegistration::new(
        "fs",
        settings(json!({"location": "/mnt/backups", "readonly": true})),
    );

    es.client()?.put_repository("local", &repo).await?;

    let seen = es.only_request()?;
    assert_eq!(seen.query, None);
    assert_eq!(
        seen.json()?,
        json!({"type": "fs", "settings": {"location": "/mnt/backups"}})
    );
    Ok(())
}

#[tokio::test]
async fn verify_repository_returns_the_node_ids() -> TestResult {
    let es = MockEs::always(Reply::json(
        200,
        json!({
            "nodes": {
                "p8HPLBLpSA2cbbP0l5RnbA": {"name": "es-data-1"},
                "K5tWq0BZQ2eRVSsAvgtgqw": {"name": "es-data-0"},
            }
        }),
    ))
    .await?;

    let nodes = es.client()?.verify_repository("shared-backups").await?;

    let seen = es.only_request()?;
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/_snapshot/shared-backups/_verify");
    assert_eq!(seen.query, None);
    assert!(seen.body.is_empty());
    assert_eq!(nodes, ["K5tWq0BZQ2eRVSsAvgtgqw", "p8HPLBLpSA2cbbP0l5RnbA"]);
    Ok(())
}

#[tokio::test]
async fn a_failed_verification_is_its_own_error() -> TestResult {
    let reason = "[shared-backups] [[K5tWq0BZQ2eRVSsAvgtgqw, 'RemoteTransportException[[es-data-0][10.0.1.8:9300][internal:admin/repository/verify]]; nested: RepositoryVerificationException[[shared-backups] store location [/mnt/backups] is not accessible on the node]']]";
    let es = MockEs::always(Reply::error(
        500,
        "repository_verification_exception",
        reason,
    ))
    .await?;

    let error = es.client()?.verify_repository("shared-backups").await;

    let Err(error @ ElasticError::RepositoryVerification(_)) = error else {
        return Err(format!("expected RepositoryVerification, got {error:?}").into());
    };
    assert_eq!(error.code(), "repository_verification_failed");
    assert!(!error.is_transient());
    assert_eq!(error.failure().map(|f| f.reason.as_str()), Some(reason));
    assert_eq!(error.status(), Some(500));
    Ok(())
}

#[tokio::test]
async fn registering_can_fail_verification_too() -> TestResult {
    let es = MockEs::always(Reply::error(
        500,
        "repository_verification_exception",
        "[shared-backups] path  is not accessible on master node",
    ))
    .await?;
    let repo = RepositoryRegistration::new("s3", settings(json!({"bucket": "b"})));
    let error = es.client()?.put_repository("shared-backups", &repo).await;
    assert!(
        matches!(error, Err(ElasticError::RepositoryVerification(_))),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn delete_repository_and_a_missing_repository() -> TestResult {
    let es = MockEs::start(|seen| {
        if seen.path == "/_snapshot/gone" {
            Reply::error(404, "repository_missing_exception", "[gone] missing")
        } else {
            Reply::json(200, json!({"acknowledged": true}))
        }
    })
    .await?;
    let client = es.client()?;

    client.delete_repository("shared-backups").await?;
    let error = client.delete_repository("gone").await;

    let seen = es.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].method, "DELETE");
    assert_eq!(seen[0].path, "/_snapshot/shared-backups");
    let Err(error @ ElasticError::RepositoryMissing(_)) = error else {
        return Err(format!("expected RepositoryMissing, got {error:?}").into());
    };
    assert_eq!(error.code(), "repository_missing");
    assert_eq!(error.status(), Some(404));
    assert!(!error.is_transient());
    Ok(())
}

#[tokio::test]
async fn names_that_would_address_several_repositories_are_never_sent() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"acknowledged": true}))).await?;
    let client = es.client()?;
    for name in ["", "*", "_all", "a,b", ".."] {
        let error = client.delete_repository(name).await;
        assert!(
            matches!(error, Err(ElasticError::InvalidArgument { .. })),
            "{name:?}: {error:?}"
        );
    }
    assert!(es.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn basic_auth_is_sent_on_every_request_and_never_printed() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"acknowledged": true}))).await?;
    let auth = Auth::Basic {
        username: "elastic".to_string(),
        password: SecretString::new("changeme"),
    };
    let client = ElasticClient::new(&es.url, Some(auth), Duration::from_secs(5))?;

    client.delete_repository("a").await?;
    client.delete_repository("b").await?;

    for seen in es.requests() {
        // base64("elastic:changeme")
        assert_eq!(
            seen.header("authorization").as_deref(),
            Some("Basic ZWxhc3RpYzpjaGFuZ2VtZQ==")
        );
    }
    let printed = format!("{client:?}");
    assert!(!printed.contains("changeme"), "{printed}");
    assert!(printed.contains("redacted"), "{printed}");
    Ok(())
}

#[tokio::test]
async fn an_api_key_is_sent_as_such() -> TestResult {
    let es = MockEs::always(Reply::json(200, json!({"acknowledged": true}))).await?;
    let encoded = "VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw==";
    let auth = Auth::ApiKey {
        encoded: SecretString::new(encoded),
    };
    let client = ElasticClient::new(&es.url, Some(auth), Duration::from_secs(5))?;

    client.delete_repository("a").await?;

    let seen = es.only_request()?;
    assert_eq!(
        seen.header("authorization"),
        Some(format!("ApiKey {encoded}"))
    );
    assert!(!format!("{client:?}").contains(encoded));
    Ok(())
}

#[tokio::test]
async fn credentials_in_the_base_url_are_refused_without_echoing_them() -> TestResult {
    let result = ElasticClient::new(
        "http://elastic:hunter2@127.0.0.1:9200",
        None,
        Duration::from_secs(5),
    );
    let Err(error @ ElasticError::InvalidArgument { .. }) = result else {
        return Err(format!("expected InvalidArgument, got {result:?}").into());
    };
    assert!(!error.to_string().contains("hunter2"), "{error}");
    assert_eq!(error.code(), "invalid_argument");

    for bad in ["ftp://127.0.0.1", "not a url", "http://127.0.0.1:9200/?x=1"] {
        let result = ElasticClient::new(bad, None, Duration::from_secs(5));
        assert!(
            matches!(result, Err(ElasticError::InvalidArgument { .. })),
            "{bad}: {result:?}"
        );
    }
    let result = ElasticClient::new("http://127.0.0.1:9200", None, Duration::ZERO);
    assert!(matches!(result, Err(ElasticError::InvalidArgument { .. })));
    Ok(())
}
