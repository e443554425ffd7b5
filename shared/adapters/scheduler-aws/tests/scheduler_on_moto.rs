//! The EventBridge Scheduler adapter against moto (127.0.0.1, started by
//! scripts/test.sh), through the real `aws-sdk-scheduler` client: what a put
//! writes, updates, listing by prefix, idempotent deletes, error kinds, and
//! the same reconciliation scenario the in-process scheduler passes.

use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::config::http::{HttpRequest, HttpResponse};
use aws_sdk_scheduler::config::retry::RetryConfig;
use aws_sdk_scheduler::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use aws_sdk_scheduler::error::BoxError;
use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, ScheduleState, Target};
use aws_smithy_runtime_api::client::http::{
    HttpClient as _, HttpConnector, HttpConnectorFuture, SharedHttpConnector, http_client_fn,
};
use floe_scheduler_aws::{AwsScheduler, AwsSchedulerConfig, RetrySettings};
use floe_schedules::conformance::reconciliation_scenario;
use floe_schedules::names::{deployment_prefix, drill_schedule_name, schedule_name};
use floe_schedules::{
    DrillJob, ScheduleSpec, ScheduledJob, Scheduler, SchedulerError, SnapshotJob,
};
use floe_store::{Backend, Store};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const TARGET: &str = "arn:aws:lambda:us-east-1:123456789012:function:floe-snapshotter";
const ROLE: &str = "arn:aws:iam::123456789012:role/floe-scheduler-invoke";
const DLQ: &str = "arn:aws:sqs:us-east-1:123456789012:floe-schedules-dlq";
const WORK_QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:floe-work";

/// Moto's endpoint, region and test credentials: what the adapter and the
/// test's own client are built from.
fn sdk_config() -> Result<aws_config::SdkConfig, Box<dyn std::error::Error + Send + Sync>> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    Ok(aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "test",
            "test",
            None,
            None,
            "floe-tests",
        )))
        .build())
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", floe_domain_id())
}

fn floe_domain_id() -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{nanos:x}{:x}{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A client, and a scheduler on a schedule group of its own.
async fn setup() -> Result<(Client, AwsScheduler), Box<dyn std::error::Error + Send + Sync>> {
    let sdk = sdk_config()?;
    let client = Client::new(&sdk);
    let group = unique("floe-test");
    client.create_schedule_group().name(&group).send().await?;
    let config = AwsSchedulerConfig::new(group, TARGET, ROLE, DLQ).with_drill_target(WORK_QUEUE);
    Ok((client.clone(), AwsScheduler::new(&sdk, config)))
}

fn job(org: &str, deployment: &str, policy: &str) -> SnapshotJob {
    SnapshotJob {
        org: org.into(),
        deployment_id: deployment.into(),
        policy_id: policy.into(),
    }
}

fn spec(job: SnapshotJob, expression: &str, timezone: &str) -> ScheduleSpec {
    ScheduleSpec {
        name: schedule_name(&job.org, &job.deployment_id, &job.policy_id),
        expression: expression.into(),
        timezone: timezone.into(),
        input: job.into(),
    }
}

#[tokio::test]
async fn put_writes_every_setting() -> TestResult {
    let (client, scheduler) = setup().await?;
    let s = spec(
        job("acme", "dep1", "pol1"),
        "cron(30 1 * * ? *)",
        "Europe/Berlin",
    );
    scheduler.put(&s).await?;

    let got = client
        .get_schedule()
        .name(&s.name)
        .group_name(&scheduler.config().group)
        .send()
        .await?;
    assert_eq!(got.name(), Some(s.name.as_str()));
    assert_eq!(got.group_name(), Some(scheduler.config().group.as_str()));
    assert_eq!(got.schedule_expression(), Some("cron(30 1 * * ? *)"));
    assert_eq!(got.schedule_expression_timezone(), Some("Europe/Berlin"));
    assert_eq!(got.state(), Some(&ScheduleState::Enabled));
    assert_eq!(
        got.flexible_time_window().map(|w| w.mode()),
        Some(&FlexibleTimeWindowMode::Off)
    );
    assert!(
        got.description()
            .is_some_and(|d| d.contains("pol1") && d.contains("dep1") && d.contains("acme")),
        "{:?}",
        got.description()
    );
    let target = got.target().ok_or("no target")?;
    assert_eq!(target.arn(), TARGET);
    assert_eq!(target.role_arn(), ROLE);
    let input: ScheduledJob = serde_json::from_str(target.input().ok_or("no input")?)?;
    assert_eq!(input, s.input);
    let retry = target.retry_policy().ok_or("no retry policy")?;
    let wanted = RetrySettings::default();
    assert_eq!(retry.maximum_retry_attempts(), Some(wanted.max_attempts));
    assert_eq!(
        retry.maximum_event_age_in_seconds(),
        Some(wanted.max_event_age_secs)
    );
    assert_eq!(target.dead_letter_config().and_then(|d| d.arn()), Some(DLQ));

    // And the adapter reads it back as its own.
    let listed = scheduler.list(&deployment_prefix("acme", "dep1")).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed.first().and_then(|e| e.spec.clone()), Some(s));
    Ok(())
}

/// A drill schedule sends `{"drill": {...}}` to the work queue (which the
/// worker reads as a message), and reads back as the adapter's own; the
/// same job aimed at the snapshotter does not.
#[tokio::test]
async fn a_drill_schedule_sends_its_job_to_the_work_queue() -> TestResult {
    let (client, scheduler) = setup().await?;
    let s = ScheduleSpec {
        name: drill_schedule_name("acme", "dep1"),
        expression: "rate(7 days)".into(),
        timezone: "UTC".into(),
        input: DrillJob {
            org: "acme".into(),
            deployment_id: "dep1".into(),
        }
        .into(),
    };
    scheduler.put(&s).await?;
    let got = client
        .get_schedule()
        .name(&s.name)
        .group_name(&scheduler.config().group)
        .send()
        .await?;
    let target = got.target().ok_or("no target")?;
    assert_eq!(target.arn(), WORK_QUEUE);
    let body: serde_json::Value = serde_json::from_str(target.input().ok_or("no input")?)?;
    assert_eq!(
        body,
        serde_json::json!({"drill": {"org": "acme", "deployment_id": "dep1"}})
    );
    assert!(
        got.description()
            .is_some_and(|d| d.contains("drill") && d.contains("dep1")),
        "{:?}",
        got.description()
    );
    let listed = scheduler.list(&deployment_prefix("acme", "dep1")).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].spec.as_ref(), Some(&s));

    // Aimed at the snapshotter, it is not what `put` writes: foreign.
    client
        .update_schedule()
        .name(&s.name)
        .group_name(&scheduler.config().group)
        .schedule_expression("rate(7 days)")
        .flexible_time_window(
            FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()?,
        )
        .target(
            Target::builder()
                .arn(TARGET)
                .role_arn(ROLE)
                .set_input(target.input().map(str::to_string))
                .set_retry_policy(target.retry_policy().cloned())
                .set_dead_letter_config(target.dead_letter_config().cloned())
                .build()?,
        )
        .send()
        .await?;
    let listed = scheduler.list(&deployment_prefix("acme", "dep1")).await?;
    assert_eq!(listed[0].spec, None);

    // Without a work queue configured, a drill schedule is refused, and
    // says what is missing.
    let sdk = sdk_config()?;
    let plain = AwsScheduler::new(
        &sdk,
        AwsSchedulerConfig::new(scheduler.config().group.clone(), TARGET, ROLE, DLQ),
    );
    match plain.put(&s).await {
        Err(SchedulerError::Failed(m)) => assert!(m.contains("FLOE_WORK_QUEUE_ARN"), "{m}"),
        other => return Err(format!("expected a refusal, got {other:?}").into()),
    }
    scheduler.delete(&s.name).await?;
    Ok(())
}

#[tokio::test]
async fn put_again_updates_in_place() -> TestResult {
    let (_client, scheduler) = setup().await?;
    let first = spec(job("acme", "dep1", "pol1"), "rate(30 minutes)", "UTC");
    scheduler.put(&first).await?;
    let second = spec(
        job("acme", "dep1", "pol1"),
        "cron(0 12 ? * MON-FRI *)",
        "America/New_York",
    );
    scheduler.put(&second).await?;
    let listed = scheduler.list(&deployment_prefix("acme", "dep1")).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed.first().and_then(|e| e.spec.clone()), Some(second));
    Ok(())
}

#[tokio::test]
async fn list_returns_exactly_the_deployments_schedules_over_pages() -> TestResult {
    let (client, scheduler) = setup().await?;
    // More than one page of ListSchedules (100) under one prefix.
    let mine: Vec<ScheduleSpec> = (0..105)
        .map(|i| {
            spec(
                job("acme", "dep1", &format!("pol{i}")),
                "rate(1 day)",
                "UTC",
            )
        })
        .collect();
    for s in &mine {
        scheduler.put(s).await?;
    }
    scheduler
        .put(&spec(job("acme", "dep2", "pol0"), "rate(1 day)", "UTC"))
        .await?;
    scheduler
        .put(&spec(job("other", "dep1", "pol0"), "rate(1 day)", "UTC"))
        .await?;
    // A schedule Floe did not write, in the same group.
    client
        .create_schedule()
        .name("someone-elses")
        .group_name(&scheduler.config().group)
        .schedule_expression("rate(1 hour)")
        .flexible_time_window(
            FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()?,
        )
        .target(Target::builder().arn(TARGET).role_arn(ROLE).build()?)
        .send()
        .await?;

    let mut listed: Vec<String> = scheduler
        .list(&deployment_prefix("acme", "dep1"))
        .await?
        .into_iter()
        .map(|e| e.name)
        .collect();
    listed.sort();
    let mut wanted: Vec<String> = mine.iter().map(|s| s.name.clone()).collect();
    wanted.sort();
    assert_eq!(listed, wanted);
    assert_eq!(
        scheduler
            .list(&deployment_prefix("acme", "dep2"))
            .await?
            .len(),
        1
    );
    assert!(
        scheduler
            .list(&deployment_prefix("acme", "none"))
            .await?
            .is_empty()
    );
    Ok(())
}

#[tokio::test]
async fn schedules_changed_behind_floes_back_read_as_foreign() -> TestResult {
    let (client, scheduler) = setup().await?;
    let s = spec(job("acme", "dep1", "pol1"), "rate(1 hour)", "UTC");
    scheduler.put(&s).await?;
    // Someone disables it and points it elsewhere in the console.
    client
        .update_schedule()
        .name(&s.name)
        .group_name(&scheduler.config().group)
        .schedule_expression("rate(1 hour)")
        .state(ScheduleState::Disabled)
        .flexible_time_window(
            FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()?,
        )
        .target(
            Target::builder()
                .arn("arn:aws:lambda:us-east-1:123456789012:function:elsewhere")
                .role_arn(ROLE)
                .build()?,
        )
        .send()
        .await?;
    let listed = scheduler.list(&deployment_prefix("acme", "dep1")).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed.first().map(|e| e.spec.is_none()), Some(true));
    // A put restores it.
    scheduler.put(&s).await?;
    let listed = scheduler.list(&deployment_prefix("acme", "dep1")).await?;
    assert_eq!(listed.first().and_then(|e| e.spec.clone()), Some(s));
    Ok(())
}

#[tokio::test]
async fn delete_is_idempotent() -> TestResult {
    let (_client, scheduler) = setup().await?;
    let keep = spec(job("acme", "dep1", "keep"), "rate(1 hour)", "UTC");
    let gone = spec(job("acme", "dep1", "gone"), "rate(1 hour)", "UTC");
    scheduler.put(&keep).await?;
    scheduler.put(&gone).await?;
    scheduler.delete(&gone.name).await?;
    scheduler.delete(&gone.name).await?;
    scheduler
        .delete(&schedule_name("acme", "never", "existed"))
        .await?;
    let listed: Vec<String> = scheduler
        .list(&deployment_prefix("acme", "dep1"))
        .await?
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(listed, [keep.name]);
    Ok(())
}

/// Answers the next `remaining` responses with an error of EventBridge
/// Scheduler's (moto never throttles nor fails on its own).
#[derive(Debug)]
struct Inject {
    status: u16,
    code: &'static str,
    remaining: AtomicUsize,
}

impl Inject {
    fn replace(&self, response: &mut HttpResponse) -> Result<(), BoxError> {
        let inject = self
            .remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if inject {
            *response.status_mut() = self.status.try_into()?;
            response.headers_mut().remove("content-length");
            response.headers_mut().remove("x-amzn-errortype");
            *response.body_mut() = format!(
                r#"{{"__type":"{}","message":"injected by the test"}}"#,
                self.code
            )
            .into();
        }
        Ok(())
    }
}

/// The SDK configuration's HTTP connector, with `Inject` on the way back.
#[derive(Debug)]
struct Injecting {
    inner: SharedHttpConnector,
    inject: Arc<Inject>,
}

impl HttpConnector for Injecting {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let answer = self.inner.call(request);
        let inject = self.inject.clone();
        HttpConnectorFuture::new(async move {
            let mut response = answer.await?;
            inject.replace(&mut response).map_err(|e| {
                aws_smithy_runtime_api::client::result::ConnectorError::other(e, None)
            })?;
            Ok(response)
        })
    }
}

/// Whether an error is of the kind a case expects.
type Expectation = fn(&SchedulerError) -> bool;

#[tokio::test]
async fn errors_are_sorted_into_kinds() -> TestResult {
    let (_client, scheduler) = setup().await?;
    let s = spec(job("acme", "dep1", "pol1"), "rate(1 hour)", "UTC");
    let cases: [(u16, &str, Expectation); 5] = [
        (400, "ThrottlingException", |e| {
            matches!(e, SchedulerError::Transient(_)) && e.is_transient()
        }),
        (500, "InternalServerException", |e| {
            matches!(e, SchedulerError::Transient(_))
        }),
        (
            400,
            "ValidationException",
            |e| matches!(e, SchedulerError::Rejected { name, .. } if name.starts_with("floe-")),
        ),
        (403, "AccessDeniedException", |e| {
            matches!(e, SchedulerError::Failed(_)) && !e.is_transient()
        }),
        (402, "ServiceQuotaExceededException", |e| {
            matches!(e, SchedulerError::Failed(_))
        }),
    ];
    for (status, code, expected) in cases {
        let inject = Arc::new(Inject {
            status,
            code,
            remaining: AtomicUsize::new(1),
        });
        let inner = aws_smithy_http_client::Builder::new().build_http();
        let sdk = sdk_config()?
            .to_builder()
            // The SDK would retry the transient ones itself.
            .retry_config(RetryConfig::disabled())
            .http_client(http_client_fn(move |settings, components| {
                SharedHttpConnector::new(Injecting {
                    inner: inner.http_connector(settings, components),
                    inject: inject.clone(),
                })
            }))
            .build();
        let injected = AwsScheduler::new(&sdk, scheduler.config().clone());
        let result = injected.put(&s).await;
        assert!(
            result.as_ref().err().is_some_and(expected),
            "{code}: {result:?}"
        );
        // The next call goes through.
        injected.put(&s).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciliation_scenario_passes_on_eventbridge() -> TestResult {
    let (_client, scheduler) = setup().await?;
    let dir = tempfile::tempdir()?;
    let backend: Arc<dyn Backend> = Arc::new(floe_store_sqlite::SqliteBackend::open(
        &dir.path().join("floe.db"),
    )?);
    let store = Store::new(backend);
    reconciliation_scenario(&store, &scheduler).await?;
    assert!(
        scheduler.list("floe-").await?.is_empty(),
        "the scenario cleans up"
    );
    Ok(())
}
