//! A secured simulated cluster: HTTPS with the deployment's certificate,
//! and the `elastic` user's password on every request, refused as
//! Elasticsearch refuses it.

use crate::common::{Fallible, TestResult};
use floe_domain::secret::SecretString;
use floe_elastic::{Auth, ElasticClient};
use floe_elastic_sim::{RunningCluster, SimConfig, SimSecurity, SimulatedCluster};
use serde_json::{Value, json};
use std::time::Duration;

const DEPLOYMENT: &str = "0123456789abcdef0123456789abcdef";

struct Secured {
    cluster: RunningCluster,
    ca: String,
    password: String,
    http: reqwest::Client,
}

async fn secured() -> Fallible<Secured> {
    secured_with(SimConfig::new("secured")).await
}

async fn secured_with(config: SimConfig) -> Fallible<Secured> {
    let security = floe_node_security::generate(DEPLOYMENT)?;
    let password = security.elastic_password.expose().to_string();
    let cluster = SimulatedCluster::start(config.with_security(SimSecurity {
        cert_chain_pem: security.node_cert_pem.clone(),
        key_pem: security.node_key_pem.clone(),
        elastic_password: security.elastic_password.clone(),
    }))
    .await?;
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(
            security.ca_cert_pem.as_bytes(),
        )?])
        .resolve(&floe_node_security::server_name(DEPLOYMENT), cluster.addr())
        .build()?;
    Ok(Secured {
        cluster,
        ca: security.ca_cert_pem,
        password,
        http,
    })
}

impl Secured {
    fn url(&self, path: &str) -> String {
        format!(
            "https://{}:{}{path}",
            floe_node_security::server_name(DEPLOYMENT),
            self.cluster.addr().port()
        )
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        user: Option<(&str, &str)>,
        body: Option<Value>,
    ) -> Fallible<(u16, reqwest::header::HeaderMap, Value)> {
        let mut request = self.http.request(method, self.url(path));
        if let Some((user, password)) = user {
            request = request.basic_auth(user, Some(password));
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok((status, headers, body))
    }

    fn pinned(&self, password: &str) -> Fallible<ElasticClient> {
        Ok(ElasticClient::pinned(
            &floe_node_security::server_name(DEPLOYMENT),
            self.cluster.addr(),
            &self.ca,
            Some(Auth::Basic {
                username: "elastic".into(),
                password: SecretString::new(password),
            }),
            Duration::from_secs(10),
        )?)
    }
}

const CHALLENGES: [&str; 3] = [
    "Basic realm=\"security\" charset=\"UTF-8\"",
    "Bearer realm=\"security\"",
    "ApiKey",
];

#[tokio::test]
async fn requests_without_the_elastic_password_are_refused_as_elasticsearch_does() -> TestResult {
    let s = secured().await?;
    assert!(
        s.cluster.url().starts_with("https://127.0.0.1:"),
        "{}",
        s.cluster.url()
    );
    assert!(s.cluster.is_secured());

    let (status, headers, body) = s
        .send(
            reqwest::Method::GET,
            "/_cluster/health?timeout=1s",
            None,
            None,
        )
        .await?;
    assert_eq!(status, 401);
    let challenges: Vec<&str> = headers
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(challenges, CHALLENGES);
    let reason =
        "missing authentication credentials for REST request [/_cluster/health?timeout=1s]";
    let cause = json!({
        "type": "security_exception",
        "reason": reason,
        "header": { "WWW-Authenticate": CHALLENGES },
    });
    let mut error = cause.clone();
    error["root_cause"] = json!([cause]);
    assert_eq!(body, json!({ "error": error, "status": 401 }));

    let (status, headers, body) = s
        .send(reqwest::Method::GET, "/", Some(("elastic", "not-it")), None)
        .await?;
    assert_eq!(status, 401);
    assert_eq!(headers.get_all("www-authenticate").iter().count(), 3);
    assert_eq!(
        body["error"]["reason"],
        "unable to authenticate user [elastic] for REST request [/]"
    );
    let (status, _, body) = s
        .send(
            reqwest::Method::GET,
            "/_cat/health",
            Some(("bob", &s.password)),
            None,
        )
        .await?;
    assert_eq!(status, 401);
    assert_eq!(
        body["error"]["reason"],
        "unable to authenticate user [bob] for REST request [/_cat/health]"
    );
    // HEAD is refused too, without a body.
    let (status, _, body) = s.send(reqwest::Method::HEAD, "/", None, None).await?;
    assert_eq!((status, body), (401, Value::Null));

    let (status, _, body) = s
        .send(
            reqwest::Method::GET,
            "/",
            Some(("elastic", &s.password)),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tagline"], "You Know, for Search");

    // Plain HTTP on the HTTPS port gets no answer at all.
    let plain = reqwest::Client::new()
        .get(format!("http://{}/", s.cluster.addr()))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    s.cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn the_pinned_client_authenticates_and_a_password_change_applies_at_once() -> TestResult {
    let s = secured().await?;
    let es = s.pinned(&s.password)?;
    assert_eq!(es.nodes().await?.len(), 3);

    let (status, _, body) = s
        .send(
            reqwest::Method::GET,
            "/_security/_authenticate",
            Some(("elastic", &s.password)),
            None,
        )
        .await?;
    assert_eq!(status, 200);
    assert_eq!(body["username"], "elastic");
    assert_eq!(body["roles"], json!(["superuser"]));
    assert_eq!(body["authentication_realm"]["type"], "reserved");

    let auth = Some(("elastic", s.password.as_str()));
    let (status, _, body) = s
        .send(
            reqwest::Method::POST,
            "/_security/user/elastic/_password",
            auth,
            Some(json!({ "password": "short" })),
        )
        .await?;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "action_request_validation_exception");
    assert_eq!(
        body["error"]["reason"],
        "Validation Failed: 1: passwords must be at least [6] characters long;"
    );

    let (status, _, body) = s
        .send(
            reqwest::Method::PUT,
            "/_security/user/elastic/_password",
            auth,
            Some(json!({ "password": "a-new-password" })),
        )
        .await?;
    assert_eq!((status, body), (200, json!({})));
    // The old password stops working at once, the new one works.
    assert_eq!(es.nodes().await.err().and_then(|e| e.status()), Some(401));
    assert_eq!(s.pinned("a-new-password")?.nodes().await?.len(), 3);
    s.cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn an_unsecured_cluster_has_no_security_apis() -> TestResult {
    let cluster = SimulatedCluster::start(SimConfig::new("open")).await?;
    assert!(cluster.url().starts_with("http://"));
    let (status, body) = crate::common::call(
        &cluster,
        reqwest::Method::GET,
        "/_security/_authenticate",
        None,
    )
    .await?;
    assert_eq!(
        (status, &body["error"]["type"]),
        (500, &json!("security_exception"))
    );
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn a_broken_certificate_is_a_start_error() -> TestResult {
    let started = SimulatedCluster::start(SimConfig::new("broken").with_security(SimSecurity {
        cert_chain_pem: "not a certificate".into(),
        key_pem: SecretString::new("nor a key"),
        elastic_password: SecretString::new("password"),
    }))
    .await;
    match started {
        Err(floe_elastic_sim::SimError::Tls(_)) => Ok(()),
        other => Err(format!("expected a TLS error, got {other:?}").into()),
    }
}

/// A snapshot with the global state holds the security feature state; a
/// restore with the global state and no `feature_states` brings it back, as
/// Elasticsearch 8 does, and with it the snapshot's `elastic` password.
/// `feature_states: ["none"]` keeps the cluster's own.
#[tokio::test]
async fn restoring_the_global_state_brings_back_the_security_feature_state_unless_told_not_to()
-> TestResult {
    let root = tempfile::tempdir()?;
    let s = secured_with(SimConfig::new("secured").with_fs_root(root.path())).await?;
    let send =
        |method: reqwest::Method, path: &'static str, password: String, body: Option<Value>| {
            let s = &s;
            async move {
                s.send(method, path, Some(("elastic", password.as_str())), body)
                    .await
            }
        };
    let old = s.password.clone();
    let (status, _, _) = send(
        reqwest::Method::PUT,
        "/_snapshot/backups",
        old.clone(),
        Some(json!({"type": "fs", "settings": {"location": "backups"}})),
    )
    .await?;
    assert_eq!(status, 200);
    send(
        reqwest::Method::PUT,
        "/_cluster/settings",
        old.clone(),
        Some(json!({"persistent": {"indices.recovery.max_bytes_per_sec": "40mb"}})),
    )
    .await?;
    let (status, _, body) = send(
        reqwest::Method::PUT,
        "/_snapshot/backups/snap-1?wait_for_completion=true",
        old.clone(),
        Some(json!({})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["snapshot"]["feature_states"],
        json!([{"feature_name": "security", "indices": [".security-7"]}])
    );
    // The snapshot keeps a hash of the password, never the password.
    let mut found = false;
    for entry in walk(root.path()) {
        let bytes = std::fs::read(&entry)?;
        assert!(
            !bytes.windows(old.len()).any(|w| w == old.as_bytes()),
            "{} holds the password",
            entry.display()
        );
        found = true;
    }
    assert!(found);

    let new = "a-new-password".to_string();
    let (status, _, _) = send(
        reqwest::Method::PUT,
        "/_security/user/elastic/_password",
        old.clone(),
        Some(json!({"password": new})),
    )
    .await?;
    assert_eq!(status, 200);
    send(
        reqwest::Method::PUT,
        "/_cluster/settings",
        new.clone(),
        Some(json!({"persistent": {"indices.recovery.max_bytes_per_sec": "100mb"}})),
    )
    .await?;

    // Told `none`: the global state comes back, the password stays.
    let (status, _, body) = send(
        reqwest::Method::POST,
        "/_snapshot/backups/snap-1/_restore?wait_for_completion=true",
        new.clone(),
        Some(json!({"include_global_state": true, "feature_states": ["none"]})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let (status, _, settings) = send(
        reqwest::Method::GET,
        "/_cluster/settings",
        new.clone(),
        None,
    )
    .await?;
    assert_eq!(status, 200);
    assert_eq!(
        settings["persistent"]["indices.recovery.max_bytes_per_sec"],
        json!("40mb"),
        "{settings}"
    );
    // `none` with another name, or a feature the snapshot lacks: refused.
    for (bad, status_wanted, error) in [
        (
            json!(["none", "security"]),
            400,
            "illegal_argument_exception",
        ),
        (json!(["kibana"]), 500, "snapshot_restore_exception"),
    ] {
        let (status, _, body) = send(
            reqwest::Method::POST,
            "/_snapshot/backups/snap-1/_restore",
            new.clone(),
            Some(json!({"feature_states": bad})),
        )
        .await?;
        assert_eq!(
            (status, body["error"]["type"].as_str()),
            (status_wanted, Some(error)),
            "{bad}: {body}"
        );
    }

    // Left out: every feature state comes back with the global state, and
    // the snapshot's password replaces the one the platform holds.
    let (status, _, body) = send(
        reqwest::Method::POST,
        "/_snapshot/backups/snap-1/_restore?wait_for_completion=true",
        new.clone(),
        Some(json!({"include_global_state": true})),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = send(reqwest::Method::GET, "/", new.clone(), None).await?;
    assert_eq!(status, 401);
    let (status, _, _) = send(reqwest::Method::GET, "/", old.clone(), None).await?;
    assert_eq!(status, 200);
    s.cluster.shutdown().await?;
    Ok(())
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Once its license is no longer active, a secured cluster refuses its
/// health and stats APIs (`current license is non-compliant for
/// [security]`), while reads and writes of data go on; a basic license
/// brings them back.
#[tokio::test]
async fn an_expired_license_blocks_health_and_stats_but_not_data() -> TestResult {
    let s = secured().await?;
    let elastic = Some(("elastic", s.password.as_str()));
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis(),
    )?;
    let license = json!({"license": {
        "uid": "5f1e0a1c-7c0d-4f7e-9a55-6c7a1b2c3d4e",
        "type": "platinum",
        "issue_date_in_millis": now - 86_400_000,
        "expiry_date_in_millis": now + 2_000,
        "max_nodes": 10,
        "issued_to": "Floe tests",
        "issuer": "API",
        "signature": "AAAABQAAAA0FakeSignatureForTests",
        "start_date_in_millis": -1
    }});
    let (status, _, body) = s
        .send(reqwest::Method::PUT, "/_license", elastic, Some(license))
        .await?;
    assert_eq!(
        (status, &body["license_status"]),
        (200, &json!("valid")),
        "{body}"
    );
    let (status, _, body) = s
        .send(reqwest::Method::GET, "/_cluster/health", elastic, None)
        .await?;
    assert_eq!(status, 200, "{body}");
    crate::common::eventually("the license expires", || async {
        let (_, _, body) = s
            .send(reqwest::Method::GET, "/_license", elastic, None)
            .await?;
        Ok(body["license"]["status"] == "expired")
    })
    .await?;

    let cause = json!({
        "type": "security_exception",
        "reason": "current license is non-compliant for [security]",
        "license.expired.feature": "security",
    });
    let mut error = cause.clone();
    error["root_cause"] = json!([cause]);
    let refused = json!({ "error": error, "status": 403 });
    for path in [
        "/_cluster/health",
        "/_cluster/stats",
        "/_nodes/stats",
        "/_stats",
        "/_cat/health",
        "/_cat/indices",
    ] {
        let (status, _, body) = s.send(reqwest::Method::GET, path, elastic, None).await?;
        assert_eq!((status, &body), (403, &refused), "{path}");
    }
    let (status, _, body) = s
        .send(
            reqwest::Method::PUT,
            "/notes/_doc/1",
            elastic,
            Some(json!({"n": 1})),
        )
        .await?;
    assert_eq!(status, 201, "{body}");
    let (status, _, body) = s
        .send(reqwest::Method::GET, "/notes/_count", elastic, None)
        .await?;
    assert_eq!((status, &body["count"]), (200, &json!(1)), "{body}");
    let (status, _, body) = s
        .send(reqwest::Method::GET, "/_license", elastic, None)
        .await?;
    assert_eq!(
        (status, &body["license"]["status"]),
        (200, &json!("expired"))
    );

    let (status, _, body) = s
        .send(
            reqwest::Method::POST,
            "/_license/start_basic?acknowledge=true",
            elastic,
            None,
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = s
        .send(reqwest::Method::GET, "/_cluster/health", elastic, None)
        .await?;
    assert_eq!(status, 200, "{body}");
    s.cluster.shutdown().await?;
    Ok(())
}
