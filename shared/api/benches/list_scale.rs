//! Benchmark (not a test): the time of one `GET /api/v1/deployments?size=100`
//! page, with no filter and with each list filter, when the organization
//! holds 100 deployments and again when it holds 100,000, on SQLite (a file)
//! and on DynamoDB (moto). The API runs in this process; the figure is the
//! median of the page's time through the router. A page examines `size`
//! records in key order whatever the filter (the store's contract), so the
//! ratio should stay near 1; one that grows with the table is a defect.
//!
//! Moto is not DynamoDB: its Query sorts and filters the whole partition in
//! Python before it applies `Limit`, so its large figure grows with the
//! table where DynamoDB's reads `Limit` items. Its rows are printed as
//! measured, marked as moto's.
//!
//! Run by scripts/bench.sh, or with moto on loopback:
//! `FLOE_TEST_AWS_ENDPOINT=http://127.0.0.1:PORT cargo bench --profile dev
//! --workspace --bench list_scale`. FLOE_LIST_SCALE_LARGE (default 100000)
//! sets the large size.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use axum::body::Body;
use axum::http::Request;
use floe_api::{ApiState, app};
use floe_auth::Role;
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::repository::EndpointPolicy;
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store::backend::{Backend, Kind, Record, RecordKey};
use floe_store_dynamo::DynamoBackend;
use floe_store_sqlite::SqliteBackend;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tower::ServiceExt;

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const ORG: &str = "bench";
const SMALL: usize = 100;
const STATUSES: [DeploymentStatus; 4] = [
    DeploymentStatus::Running,
    DeploymentStatus::Stopped,
    DeploymentStatus::Initializing,
    DeploymentStatus::Failed,
];
/// Each filter matches a part of the records, none all of them.
const QUERIES: [(&str, &str); 4] = [
    ("no filter", "size=100"),
    ("name prefix", "size=100&name=list-00"),
    ("status", "size=100&status=running"),
    ("tag", "size=100&tag=team:search"),
];

fn spec() -> Fallible<DeploymentSpec> {
    Ok(serde_json::from_value(serde_json::json!({
        "name": "list", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"],
                         "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3,
                         "storage": {"size_gb": 100}}],
        "metadata": {"tags": [{"key": "team", "value": "search"}]}
    }))?)
}

/// Deployment number `n` as the store keeps it: a quarter of each status,
/// one in ten tagged `team:search`, names `list-NNNNNN`.
fn deployment_record(template: &DeploymentSpec, n: usize) -> Fallible<Record> {
    let now = chrono::Utc::now();
    let mut spec = template.clone();
    spec.name = format!("list-{n:06}");
    if !n.is_multiple_of(10) {
        spec.metadata.tags.clear();
    }
    let d = Deployment {
        last_drill: None,
        id: floe_domain::names::new_resource_id(),
        org: ORG.into(),
        spec,
        status: STATUSES[n % STATUSES.len()],
        pending_plan: None,
        access: None,
        password_to_apply: None,
        endpoint: None,
        endpoint_moving_to: None,
        clone_source: None,
        health: None,
        created: now,
        updated: now,
        license: None,
    };
    Ok(Record {
        key: RecordKey::new(ORG, Kind::Deployment, &d.id),
        body: serde_json::to_string(&d)?,
        version: 1,
        refs: 0,
        attrs: floe_store::stores::deployment_attrs(&d),
        expires_at: None,
    })
}

fn router(backend: Arc<dyn Backend>) -> Fallible<axum::Router> {
    let store = Store::new(backend);
    let compute = Arc::new(floe_compute_sim::SimulatedCompute::new(
        floe_compute_sim::SimulatedConfig::default(),
    ));
    let (queue, _jobs) = floe_plans::LocalQueue::new();
    let state = ApiState::new(
        floe_app::App {
            store: store.clone(),
            cipher: Arc::new(LocalCipher::from_key(&[5u8; 32])),
            endpoint_policy: EndpointPolicy::default(),
            endpoints: floe_domain::access::EndpointNaming::NodeAddress,
            queue: Arc::new(queue),
            clusters: Arc::new(floe_clusters_sim::SimulatedClusters::new(
                compute,
                floe_clusters_sim::SimulatedClustersConfig::default(),
            )),
            schedules: Arc::new(floe_schedules::ReconcileNow::new(
                store,
                Arc::new(floe_schedules::NoScheduler),
            )),
            resolver: Arc::new(floe_ports::FixedResolver::default()),
            views: Default::default(),
            hashing_keys: Default::default(),
        },
        support::verifier()?,
    );
    Ok(app(state))
}

/// The median time of `runs` pages of `query`, and how many deployments
/// the last one held.
async fn page_time(
    app: &axum::Router,
    token: &str,
    query: &str,
    runs: usize,
) -> Fallible<(Duration, usize)> {
    let mut times = Vec::with_capacity(runs);
    let mut held = 0;
    for _ in 0..runs {
        let req = Request::builder()
            .uri(format!("/api/v1/deployments?{query}"))
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())?;
        let t = Instant::now();
        let res = app.clone().oneshot(req).await?;
        let status = res.status();
        let bytes = res.into_body().collect().await?.to_bytes();
        times.push(t.elapsed());
        if !status.is_success() {
            return Err(format!("GET ?{query}: {status}").into());
        }
        let body: serde_json::Value = serde_json::from_slice(&bytes)?;
        held = body["deployments"].as_array().map_or(0, Vec::len);
    }
    times.sort();
    Ok((times[times.len() / 2], held))
}

/// The median time of `runs` bare Queries for one page of the organization's
/// deployments (the key condition and `Limit` a list page uses, through the
/// SDK alone): the baseline that shows how much of a page's growth with the
/// table is the endpoint's own (moto's Query reads the whole partition).
async fn bare_query_time(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    runs: usize,
) -> Fallible<Duration> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :dep)")
            .expression_attribute_values(":pk", AttributeValue::S(format!("ORG#{ORG}")))
            .expression_attribute_values(
                ":dep",
                AttributeValue::S(format!("{}#", Kind::Deployment.prefix())),
            )
            .limit(100)
            .send()
            .await?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

async fn measure(
    label: &str,
    loader: support::Loader,
    backend: Arc<dyn Backend>,
    large: usize,
    runs: (usize, usize),
) -> Fallible<()> {
    let app = router(backend)?;
    let token = support::token(ORG, Role::DeploymentViewer)?;
    let template = spec()?;
    let records = |from: usize, to: usize| -> Fallible<Vec<Record>> {
        (from..to)
            .map(|n| deployment_record(&template, n))
            .collect()
    };
    loader.load(records(0, SMALL)?).await?;
    let mut small = Vec::new();
    for (_, query) in QUERIES {
        small.push(page_time(&app, &token, query, runs.0).await?);
    }
    let bare_small = match &loader {
        support::Loader::Dynamo(client, table) => {
            Some(bare_query_time(client, table, runs.0).await?)
        }
        support::Loader::Port(_) => None,
    };
    let t = Instant::now();
    loader.load(records(SMALL, large)?).await?;
    println!(
        "{label}: loaded {} more deployments in {:.1?}",
        large - SMALL,
        t.elapsed()
    );
    if let (support::Loader::Dynamo(client, table), Some(bare_small)) = (&loader, bare_small) {
        let bare_large = bare_query_time(client, table, runs.1).await?;
        let ratio = bare_large.as_secs_f64() / bare_small.as_secs_f64().max(f64::MIN_POSITIVE);
        println!(
            "{label:<16} bare Query   {SMALL:>7}: {bare_small:>10.2?}              {large:>7}: {bare_large:>10.2?}              ratio {ratio:.2} (the endpoint's own growth)"
        );
        println!(
            "BENCH\tbare Query, Limit 100 ({label}) at {large} vs {SMALL} records, ms\t{:.2}\t{:.2}\t{ratio:.2}x\t-",
            bare_large.as_secs_f64() * 1000.0,
            bare_small.as_secs_f64() * 1000.0,
        );
    }
    for ((filter, query), (small_time, small_held)) in QUERIES.into_iter().zip(small) {
        let (large_time, large_held) = page_time(&app, &token, query, runs.1).await?;
        let ratio = large_time.as_secs_f64() / small_time.as_secs_f64().max(f64::MIN_POSITIVE);
        println!(
            "{label:<16} {filter:<12} {SMALL:>7}: {small_time:>10.2?} ({small_held:>3} held)   {large:>7}: {large_time:>10.2?} ({large_held:>3} held)   ratio {ratio:.2}"
        );
        println!(
            "BENCH\tlist page ({label}, {filter}) at {large} vs {SMALL} records, ms\t{:.2}\t{:.2}\t{ratio:.2}x\t<= 1.2x",
            large_time.as_secs_f64() * 1000.0,
            small_time.as_secs_f64() * 1000.0,
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Fallible<()> {
    let large: usize = std::env::var("FLOE_LIST_SCALE_LARGE")
        .ok()
        .map(|v| v.parse())
        .transpose()
        .map_err(|_| "FLOE_LIST_SCALE_LARGE must be a number")?
        .unwrap_or(100_000)
        .max(SMALL + 1);
    println!(
        "GET /api/v1/deployments?size=100 at {SMALL} and {large} deployments in one organization (median of the runs)"
    );
    let dir = tempfile::tempdir()?;
    let sqlite = Arc::new(SqliteBackend::open(&dir.path().join("list.db"))?);
    measure(
        "SQLite",
        support::Loader::Port(sqlite.clone()),
        sqlite,
        large,
        (50, 50),
    )
    .await?;

    let sdk = support::moto_config().await?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let table = format!("floe-list-{nanos}");
    let dynamo = DynamoBackend::new(&sdk, table.clone());
    dynamo.ensure_table().await?;
    measure(
        "DynamoDB (moto)",
        support::Loader::Dynamo(aws_sdk_dynamodb::Client::new(&sdk), table),
        Arc::new(dynamo),
        large,
        (20, 5),
    )
    .await?;
    Ok(())
}
