//! The router as the wiring builds it (SQLite in memory, simulated clusters,
//! no worker), driven in-process, and tokens for it.

#![allow(dead_code)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use floe_api::{ApiState, app};
use floe_auth::{KeySource, Role, Verifier, VerifierConfig, issue_hs256};
use floe_domain::repository::EndpointPolicy;
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use http_body_util::BodyExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

pub const SECRET: &[u8] = b"router-tests-hs256-secret-0123456789abcdef";
pub const ISSUER: &str = "floe-local";
pub const AUDIENCE: &str = "floe-api";

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub struct Api {
    app: axum::Router,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn etag(&self) -> &str {
        self.headers
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
    pub fn code(&self) -> &str {
        self.body["errors"][0]["code"].as_str().unwrap_or("")
    }
}

pub fn token(org: &str, role: Role) -> String {
    roles_token(org, &[role])
}

pub fn roles_token(org: &str, roles: &[Role]) -> String {
    issue_hs256(
        SECRET,
        ISSUER,
        AUDIENCE,
        "tester",
        org,
        roles,
        Duration::from_secs(600),
    )
    .unwrap_or_default()
}

pub fn api() -> Result<Api, Box<dyn std::error::Error>> {
    Ok(api_and_store()?.0)
}

/// The API and the store it keeps its records in.
pub fn api_and_store() -> Result<(Api, Store), Box<dyn std::error::Error>> {
    let verifier = Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Hs256Secret(SECRET.to_vec()),
        leeway_secs: 0,
    })?;
    // The state as the wiring builds it: the use cases and the verifier.
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let scheduler = Arc::new(floe_schedules::LocalScheduler::new(Arc::new(
        floe_schedules::SystemClock,
    )));
    let kept = store.clone();
    let app_layer = floe_app::App {
        store: store.clone(),
        cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
        endpoint_policy: EndpointPolicy::default(),
        endpoints: floe_domain::access::EndpointNaming::NodeAddress,
        queue: Arc::new(floe_plans::LocalQueue::new().0),
        schedules: Arc::new(floe_schedules::ReconcileNow::new(store, scheduler)),
        clusters: Arc::new(floe_clusters_sim::SimulatedClusters::new(
            Arc::new(floe_compute_sim::SimulatedCompute::new(
                floe_compute_sim::SimulatedConfig::default(),
            )),
            floe_clusters_sim::SimulatedClustersConfig::default(),
        )),
        resolver: Arc::new(floe_ports::FixedResolver::default()),
        views: Default::default(),
        hashing_keys: Default::default(),
    };
    let state = ApiState::new(app_layer, Arc::new(verifier));
    Ok((Api { app: app(state) }, kept))
}

impl Api {
    /// One request; a 500 fails the test whatever the caller expected.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> Result<Reply, Box<dyn std::error::Error>> {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&b)?))?,
            None => req.body(Body::empty())?,
        };
        let res = self.app.clone().oneshot(req).await?;
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await?.to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        assert_ne!(
            status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{method} {path}: {body}"
        );
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    pub async fn admin(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Reply, Box<dyn std::error::Error>> {
        self.admin_of("acme", method, path, body).await
    }

    pub async fn admin_of(
        &self,
        org: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Reply, Box<dyn std::error::Error>> {
        self.call(
            method,
            path,
            Some(&token(org, Role::PlatformAdmin)),
            &[],
            body,
        )
        .await
    }
}
