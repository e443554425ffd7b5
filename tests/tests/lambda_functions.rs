//! Each function's real binary, started under the Lambda runtime emulator
//! (floe_tests::lambda_emulator) with the environment Lambda gives it, and
//! answering the events its triggers send: API Gateway requests for `api`,
//! SQS batches and the sweep schedule for `worker`.
//!
//! The store is SQLite for the api's local case and DynamoDB on moto
//! (`FLOE_TEST_AWS_ENDPOINT`, which scripts/test.sh sets) otherwise; the
//! work queue is SQS on the same moto. Nothing here reaches beyond loopback.
//!
//! A new function gets one more test: `Function::built("<binary>")`, its
//! template's environment, `start()`, and `invoke()` with its trigger's event.

use floe_auth::Role;
use floe_tests::lambda_emulator::{Function, Moto, Running, SqsRecord, http_api_event, sqs_event};
use floe_tests::{AUDIENCE, DEPLOYMENTS, ISSUER, TestResult, assert_ece_error, deployment};
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ORG: &str = "acme";
/// The api's HS256 secret in these tests (production verifies RS256 tokens
/// against the issuer's JWKS instead).
const JWT_SECRET: &str = "lambda-emulator-test-secret-0123456789";

fn token(org: &str, role: Role) -> String {
    floe_auth::issue_hs256(
        JWT_SECRET.as_bytes(),
        ISSUER,
        AUDIENCE,
        "lambda-test",
        org,
        &[role],
        Duration::from_secs(600),
    )
    .unwrap_or_else(|e| panic!("cannot issue a token: {e}"))
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// The moto endpoint scripts/test.sh started. Panics when it is not set: a
/// skipped backend would look like a passing one.
fn aws_endpoint() -> String {
    let Ok(endpoint) = std::env::var("FLOE_TEST_AWS_ENDPOINT") else {
        panic!(
            "FLOE_TEST_AWS_ENDPOINT is not set, so the functions cannot run on DynamoDB and SQS. \
             Run scripts/test.sh, which starts moto on 127.0.0.1 and sets it \
             (or start moto yourself and export FLOE_TEST_AWS_ENDPOINT=http://127.0.0.1:PORT)"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:") || endpoint.starts_with("http://localhost:"),
        "FLOE_TEST_AWS_ENDPOINT={endpoint}: the tests only talk to a local endpoint"
    );
    endpoint
}

/// The api function as infra/template.yaml configures it, but with an HS256
/// secret instead of the issuer's JWKS, and the AWS endpoint at moto.
fn api_on_aws(endpoint: &str, table: &str, queue_url: &str, key_arn: &str) -> Function {
    Function::built("floe-api")
        .memory_mb(512)
        .timeout(Duration::from_secs(20))
        .env("FLOE_STORE", format!("dynamodb://{table}"))
        // The stack creates the table; here the first function to start does.
        .env("FLOE_CREATE_TABLE", "true")
        .env("FLOE_QUEUE_URL", queue_url)
        .env("FLOE_KMS_KEY_ID", key_arn)
        .env("FLOE_JWT_SECRET", JWT_SECRET)
        .env("FLOE_ALLOW_PRIVATE_ENDPOINTS", "false")
        .env("AWS_ENDPOINT_URL", endpoint)
}

/// The worker as the template configures it, on simulated compute (no EC2
/// in these tests) and the AWS endpoint at moto.
/// A key ARN for runs that never seal or open anything (the worker needs
/// one named to start, as the template always names one).
const UNUSED_KEY: &str =
    "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000";

fn worker_on_aws(endpoint: &str, table: &str, queue_url: &str, key_arn: &str) -> Function {
    Function::built("floe-worker")
        .memory_mb(512)
        .timeout(Duration::from_secs(120))
        .env("FLOE_STORE", format!("dynamodb://{table}"))
        .env("FLOE_KMS_KEY_ID", key_arn)
        .env("FLOE_QUEUE_URL", queue_url)
        .env("FLOE_COMPUTE", "simulated")
        .env("FLOE_SIM_BOOT_DELAY_MS", "0")
        .env("FLOE_PARAMETER_PREFIX", "/floe")
        .env("AWS_ENDPOINT_URL", endpoint)
}

async fn get(
    api: &mut Running,
    path: &str,
    token: Option<&str>,
) -> floe_tests::lambda_emulator::HttpAnswer {
    let auth = token.map(bearer);
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let event = http_api_event("GET", path, &headers, None);
    api.invoke(&event)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
        .http()
}

/// The api function takes API Gateway's events on its DynamoDB table (the
/// only store it has on Lambda).
#[tokio::test]
async fn api_answers_gateway_requests() -> TestResult {
    let endpoint = aws_endpoint();
    let table = unique("floe-gateway");
    let mut api = Function::built("floe-api")
        .env("FLOE_STORE", format!("dynamodb://{table}"))
        .env("FLOE_CREATE_TABLE", "true")
        .env("FLOE_JWT_SECRET", JWT_SECRET)
        .env("AWS_ENDPOINT_URL", &endpoint)
        .start()
        .await?;

    let viewer = token(ORG, Role::DeploymentViewer);
    let list = get(&mut api, DEPLOYMENTS, Some(&viewer)).await;
    list.expect_status(200);
    assert!(
        list.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{}",
        list.describe()
    );
    let body = list.json();
    assert_eq!(body["deployments"], json!([]), "{}", list.describe());

    let anonymous = get(&mut api, DEPLOYMENTS, None).await;
    anonymous.expect_status(401);
    let reply = floe_tests::Reply {
        method: "GET".into(),
        path: DEPLOYMENTS.into(),
        status: anonymous.status,
        headers: anonymous.headers.clone(),
        body: anonymous.body.clone(),
    };
    assert_ece_error(&reply);

    // Public, and the same process answers one event after another.
    let health = get(&mut api, "/api/v1/health", None).await;
    health.expect_status(200);
    assert!(api.first_poll_at().is_some());
    Ok(())
}

/// The whole path of a plan on AWS: the api records a deployment and sends
/// its plan job to SQS; the job, delivered as the event source mapping
/// would, runs in the worker; the api then shows the plan under way.
#[tokio::test]
async fn api_and_worker_run_a_plan_through_sqs_on_dynamodb() -> TestResult {
    let endpoint = aws_endpoint();
    let sqs = Moto::new(&endpoint);
    let queue_name = unique("floe-work");
    let queue_url = sqs.create_queue(&queue_name).await?;
    let table = unique("floe-lambda");

    let key_arn = sqs.create_kms_key().await?;
    let mut api = api_on_aws(&endpoint, &table, &queue_url, &key_arn)
        .start()
        .await?;
    let manager = token(ORG, Role::DeploymentManager);
    let auth = bearer(&manager);
    let body = deployment("lambda-logs", None, &[]).to_string();
    let created = api
        .invoke(&http_api_event(
            "POST",
            DEPLOYMENTS,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            Some(&body),
        ))
        .await?
        .http();
    created.expect_status(201);
    let id = created.json()["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!id.is_empty(), "{}", created.describe());

    let listed = get(&mut api, DEPLOYMENTS, Some(&manager)).await;
    listed.expect_status(200);
    let ids: Vec<Value> = listed.json()["deployments"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| d["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(id)], "{}", listed.describe());

    let messages = sqs.receive(&queue_url).await?;
    assert_eq!(
        messages.len(),
        1,
        "one plan job per new deployment: {messages:?}"
    );
    let job: Value = serde_json::from_str(&messages[0].body)?;
    assert_eq!(job["deployment_id"], json!(id), "{job}");

    let mut worker = worker_on_aws(&endpoint, &table, &queue_url, &key_arn)
        .start()
        .await?;
    let ran = worker.invoke(&sqs_event(&queue_name, &messages)).await?;
    assert_eq!(
        ran.response_json(),
        json!({"batchItemFailures": []}),
        "{}",
        ran.describe()
    );

    let plans = get(
        &mut api,
        &format!("{DEPLOYMENTS}/{id}/plans"),
        Some(&manager),
    )
    .await;
    plans.expect_status(200);
    let plan = plans.json();
    let current = if plan["current"].is_object() {
        &plan["current"]
    } else {
        &plan["pending"]
    };
    let steps = current["steps"].as_array().cloned().unwrap_or_default();
    assert!(!steps.is_empty(), "{}", plans.describe());
    assert!(
        steps[0]["attempts"].as_u64().is_some_and(|a| a >= 1),
        "the worker ran no step of the plan: {}",
        plans.describe()
    );

    // The one-minute schedule's event: nothing is stuck, nothing re-queued.
    let swept = worker.invoke(&json!({"sweep": true})).await?;
    let requeued = swept.response_json()["requeued"].as_u64();
    assert!(requeued.is_some(), "{}", swept.describe());
    Ok(())
}

/// A record the worker could not run is reported by its message id, and only
/// it: SQS deletes the others. Here the table does not exist, so every job
/// fails; a body that is no job is dropped, never retried.
#[tokio::test]
async fn worker_reports_exactly_the_failed_records() -> TestResult {
    let endpoint = aws_endpoint();
    let sqs = Moto::new(&endpoint);
    let queue_name = unique("floe-work");
    let queue_url = sqs.create_queue(&queue_name).await?;
    // These runs never seal or open a secret: the key is only named.
    let mut worker = worker_on_aws(&endpoint, &unique("floe-missing"), &queue_url, UNUSED_KEY)
        .start()
        .await?;

    let job = |plan: &str| {
        SqsRecord::new(
            json!({"org": ORG, "deployment_id": "d-0000000000000000", "plan_id": plan}).to_string(),
        )
    };
    let first = job("p-1");
    let garbage = SqsRecord::new("not a plan job");
    let second = job("p-2");
    let answer = worker
        .invoke(&sqs_event(
            &queue_name,
            &[first.clone(), garbage, second.clone()],
        ))
        .await?;
    assert_eq!(
        answer.response_json(),
        json!({"batchItemFailures": [
            {"itemIdentifier": first.message_id},
            {"itemIdentifier": second.message_id}
        ]}),
        "{}",
        answer.describe()
    );
    Ok(())
}

/// An event from an integration the worker does not serve is an invocation
/// error with a stable type, and the process stays up for the next event.
#[tokio::test]
async fn worker_refuses_an_unknown_event_and_keeps_serving() -> TestResult {
    let endpoint = aws_endpoint();
    let sqs = Moto::new(&endpoint);
    let queue_url = sqs.create_queue(&unique("floe-work")).await?;
    // These runs never seal or open a secret: the key is only named.
    let mut worker = worker_on_aws(&endpoint, &unique("floe-missing"), &queue_url, UNUSED_KEY)
        .start()
        .await?;

    let refused = worker
        .invoke(&json!({"detail-type": "Scheduled Event"}))
        .await?;
    let (kind, message) = refused.error();
    assert_eq!(
        kind,
        "floe.worker.unrecognised_event",
        "{}",
        refused.describe()
    );
    assert!(message.contains("detail-type"), "{}", refused.describe());

    let answered = worker.invoke(&sqs_event("floe-work", &[])).await?;
    assert_eq!(answered.response_json(), json!({"batchItemFailures": []}));
    Ok(())
}

/// A configuration mistake stops the function at its start, naming the
/// variable, instead of failing every event.
#[tokio::test]
async fn worker_without_its_queue_fails_at_start() -> TestResult {
    let mut worker = Function::built("floe-worker")
        .env("FLOE_STORE", "dynamodb://floe")
        .env("FLOE_COMPUTE", "simulated")
        .start()
        .await?;
    let answer = worker.invoke(&json!({"sweep": true})).await?;
    assert!(
        matches!(
            answer.outcome,
            floe_tests::lambda_emulator::Outcome::Exited(_)
                | floe_tests::lambda_emulator::Outcome::InitError(_)
        ),
        "{}",
        answer.describe()
    );
    assert!(
        answer.output.contains("FLOE_QUEUE_URL"),
        "{}",
        answer.describe()
    );
    Ok(())
}

/// The snapshotter answers EventBridge Scheduler's payload: a malformed one
/// is refused for good (no retry can fix it), and a job whose records
/// cannot be read is an invocation error, so the scheduler's retry policy
/// tries again.
#[tokio::test]
async fn snapshotter_answers_scheduler_payloads() -> TestResult {
    let endpoint = aws_endpoint();
    let mut snapshotter = Function::built("floe-snapshotter")
        .env(
            "FLOE_STORE",
            format!("dynamodb://{}", unique("floe-missing")),
        )
        .env("AWS_ENDPOINT_URL", endpoint)
        .start()
        .await?;

    let refused = snapshotter.invoke(&json!({"org": "acme"})).await?;
    assert_eq!(
        refused.response_json()["outcome"],
        json!("rejected"),
        "{}",
        refused.describe()
    );

    let job = json!({"org": "acme", "deployment_id": "0123456789abcdef0123456789abcdef", "policy_id": "0123456789abcdef0123456789abcdef"});
    let failed = snapshotter.invoke(&job).await?;
    let (kind, message) = failed.error();
    assert!(!kind.is_empty(), "{}", failed.describe());
    assert!(!message.is_empty(), "{}", failed.describe());
    Ok(())
}

/// How many deployments the shard jobs of one invocation's output checked
/// (the worker logs each job's summary), and how many jobs it logged.
fn shard_jobs_checked(output: &str) -> (usize, usize) {
    let mut jobs = 0;
    let mut checked = 0;
    for line in output
        .lines()
        .filter(|l| l.contains("health check shard done"))
    {
        jobs += 1;
        let after = line
            .split_once("\"checked\":")
            .or_else(|| line.split_once("checked="))
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        checked += digits.parse::<usize>().unwrap_or(0);
    }
    (checked, jobs)
}

/// A cold start misses no deployment (issue 36): a fleet of 350 running
/// deployments in three organizations, on DynamoDB, is checked completely
/// by each of two consecutive sweeps, where the sweep and every shard job
/// it hands out run in a worker process of their own, started for that
/// one event and stopped after it: nothing is carried from one invocation
/// to the next but the table, the queue and the (simulated) instances.
#[tokio::test]
async fn a_cold_worker_process_misses_no_deployment_of_a_fleet_of_350() -> TestResult {
    use floe_compute::{Compute, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT, TAG_ORG};
    use std::collections::BTreeMap;

    const FLEET: usize = 350;
    // A moto of its own: 350 deployments' records and two sweeps' worth
    // of calls, which no other suite waits behind.
    let moto = floe_tests::moto_server::MotoServer::start("fleet_350")?;
    let endpoint = moto.endpoint().to_owned();
    let sqs = Moto::new(&endpoint);
    let queue_name = unique("floe-fleet");
    let queue_url = sqs.create_queue(&queue_name).await?;
    let table = unique("floe-fleet");
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(&endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .load()
        .await;
    let backend = floe_store_dynamo::DynamoBackend::new(&sdk, table.clone());
    backend.ensure_table().await?;
    let store = floe_store::Store::new(std::sync::Arc::new(backend));

    // The fleet's nodes, in a simulated EC2 that every worker process
    // reads from the same file.
    let state = tempfile::tempdir()?;
    let compute = floe_compute_sim::SimulatedCompute::persisted(
        floe_compute_sim::SimulatedConfig::default(),
        state.path().join("compute.json"),
    )?;
    compute
        .ensure_launch_template(&LaunchTemplateSpec {
            name: "lt".into(),
            instance_type: "m6g.xlarge".into(),
            arch: floe_domain::catalog::Arch::Arm64,
            user_data: String::new(),
            volume: floe_compute::Volume {
                size_gb: 20,
                volume_type: floe_domain::deployment::VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            tags: BTreeMap::new(),
            instance_profile: None,
        })
        .await?;
    let mut fleet = Vec::new();
    for n in 0..FLEET {
        let org = ["acme", "globex", "initech"][n % 3];
        let d: floe_domain::deployment::Deployment = serde_json::from_value(json!({
            "id": format!("0193a0c4d2b77c3e9a4b{n:012x}"), "org": org,
            "spec": {"name": format!("fleet-{n}"), "version": "8.15.3", "node_groups": [
                {"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.xlarge",
                 "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}]},
            "status": "running", "pending_plan": null,
            "created": "2026-11-29T10:00:00Z", "updated": "2026-11-29T10:00:00Z"
        }))?;
        let mut plan = floe_domain::plan::Plan::new(
            org,
            &d.id,
            floe_domain::plan::PlanParams::Create(d.spec.clone()),
            "t",
            "t",
            d.created,
        );
        // Asleep past the test: no sweep hands the seeded plans out.
        plan.wake_at = Some(chrono::Utc::now() + chrono::Duration::days(1));
        store.create_deployment(&d, &plan, None).await?;
        compute
            .launch(&LaunchRequest {
                template_name: "lt".into(),
                count: 1,
                zone: n % 3,
                client_token: d.id.clone(),
                tags: BTreeMap::from([
                    (TAG_DEPLOYMENT.to_string(), d.id.clone()),
                    (TAG_ORG.to_string(), org.to_string()),
                    ("floe:node-group".to_string(), "hot".to_string()),
                ]),
            })
            .await?;
        fleet.push(d);
    }
    drop(compute);

    let worker = || {
        worker_on_aws(&endpoint, &table, &queue_url, UNUSED_KEY)
            .env("FLOE_SIM_STATE_DIR", state.path().display().to_string())
    };
    for sweep in 0..2 {
        // The sweep, in a process of its own, hands out every shard.
        let mut sweeper = worker().start().await?;
        let swept = sweeper.invoke(&json!({"sweep": true})).await?;
        assert!(
            swept.response_json()["requeued"].is_u64(),
            "{}",
            swept.describe()
        );
        drop(sweeper);
        // The sweep's messages, each taken off the queue as the event
        // source mapping would once its job ran.
        let mut jobs = BTreeMap::new();
        for _ in 0..10 {
            if jobs.len() >= usize::from(floe_store::FLEET_SHARDS) {
                break;
            }
            for message in sqs.receive(&queue_url).await? {
                sqs.delete(&queue_url, &message.receipt_handle).await?;
                jobs.entry(message.body.clone()).or_insert(message);
            }
        }
        assert_eq!(
            jobs.len(),
            usize::from(floe_store::FLEET_SHARDS),
            "sweep {sweep}: {:?}",
            jobs.keys()
        );
        assert!(
            jobs.keys().all(|body| body.contains("health_shard")),
            "{:?}",
            jobs.keys()
        );
        // Each shard's job in a fresh process.
        let mut checked = 0;
        for job in jobs.values() {
            let mut cold = worker().start().await?;
            let ran = cold
                .invoke(&sqs_event(&queue_name, std::slice::from_ref(job)))
                .await?;
            assert_eq!(
                ran.response_json(),
                json!({"batchItemFailures": []}),
                "{}",
                ran.describe()
            );
            let (n, logged) = shard_jobs_checked(&ran.output);
            assert_eq!(logged, 1, "{}", ran.describe());
            checked += n;
        }
        assert_eq!(checked, FLEET, "sweep {sweep}: every deployment once");
    }
    // What the checks found is on every record.
    for d in &fleet {
        let stored = store.get_deployment(&d.org, &d.id).await?.ok_or("stored")?;
        assert!(stored.value.health.is_some(), "{} was never checked", d.id);
    }
    Ok(())
}
