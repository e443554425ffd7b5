//! The SQS work queue against moto's SQS (127.0.0.1, started by
//! scripts/test.sh), through the real `aws-sdk-sqs` client: jobs arrive as
//! JSON, and a delayed job stays invisible until its delay has passed.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use floe_ports::{PlanJob, WorkQueue};
use floe_queue_sqs::SqsQueue;
use std::time::{Duration, Instant};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// How long a test waits for a message before it gives up.
const PATIENCE: Duration = Duration::from_secs(10);

/// Moto's endpoint, region and test credentials: the adapter and the test's
/// own client are built from this one SDK configuration.
fn sdk() -> Result<aws_config::SdkConfig, Box<dyn std::error::Error>> {
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

fn client() -> Result<Client, Box<dyn std::error::Error>> {
    Ok(Client::new(&sdk()?))
}

async fn new_queue(client: &Client) -> Result<String, Box<dyn std::error::Error>> {
    let name = format!("floe-test-{}", uuid::Uuid::new_v4().simple());
    let created = client.create_queue().queue_name(&name).send().await?;
    Ok(created.queue_url().ok_or("no queue url")?.to_string())
}

fn job(plan_id: &str) -> PlanJob {
    PlanJob {
        org: "acme".into(),
        deployment_id: "d-0123456789".into(),
        plan_id: plan_id.into(),
    }
}

/// One short poll (moto_serial.py serves one request at a time, so a long
/// poll would hold up every other test): the jobs visible now.
async fn receive(client: &Client, url: &str) -> Result<Vec<PlanJob>, Box<dyn std::error::Error>> {
    let out = client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(0)
        .send()
        .await?;
    let mut jobs = Vec::new();
    for m in out.messages() {
        jobs.push(serde_json::from_str(
            m.body().ok_or("a message without a body")?,
        )?);
        if let Some(handle) = m.receipt_handle() {
            client
                .delete_message()
                .queue_url(url)
                .receipt_handle(handle)
                .send()
                .await?;
        }
    }
    Ok(jobs)
}

/// Polls until `want` shows up, returning everything received on the way.
async fn receive_until(
    client: &Client,
    url: &str,
    want: &PlanJob,
) -> Result<Vec<PlanJob>, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < PATIENCE {
        seen.extend(receive(client, url).await?);
        if seen.contains(want) {
            return Ok(seen);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(format!("{want:?} did not arrive within {PATIENCE:?}; saw {seen:?}").into())
}

#[tokio::test]
async fn jobs_arrive_as_json_and_a_delayed_job_waits_for_its_delay() -> TestResult {
    let client = client()?;
    let url = new_queue(&client).await?;
    let queue = SqsQueue::new(&sdk()?, url.clone());
    let now = job("p-now");
    let later = job("p-later");
    let delay = Duration::from_secs(2);

    queue.enqueue(now.clone(), Duration::ZERO).await?;
    let later_sent = Instant::now();
    queue.enqueue(later.clone(), delay).await?;

    let first = receive_until(&client, &url, &now).await?;
    // Only meaningful if this look came before the delay ran out; on a
    // machine slow enough to take longer, the check says nothing and is skipped.
    if later_sent.elapsed() < delay {
        assert!(
            !first.contains(&later),
            "the delayed job was visible before its delay: {first:?}"
        );
    }
    let rest = receive_until(&client, &url, &later).await?;
    assert!(
        later_sent.elapsed() >= delay,
        "the delayed job arrived after {:?}, before its {delay:?} delay",
        later_sent.elapsed()
    );
    let all: Vec<_> = first.into_iter().chain(rest).collect();
    assert_eq!(
        all.iter().filter(|j| **j == now).count(),
        1,
        "each job is received once here (it is deleted after receipt): {all:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_body_is_the_job_as_json() -> TestResult {
    let client = client()?;
    let url = new_queue(&client).await?;
    SqsQueue::new(&sdk()?, url.clone())
        .enqueue(job("p-json"), Duration::ZERO)
        .await?;
    let start = Instant::now();
    while start.elapsed() < PATIENCE {
        let out = client
            .receive_message()
            .queue_url(&url)
            .wait_time_seconds(0)
            .send()
            .await?;
        if let Some(m) = out.messages().first() {
            let body: serde_json::Value = serde_json::from_str(m.body().ok_or("no body")?)?;
            assert_eq!(
                body,
                serde_json::json!({"org": "acme", "deployment_id": "d-0123456789", "plan_id": "p-json"})
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err("the job did not arrive".into())
}

#[tokio::test]
async fn a_missing_queue_is_a_queue_error_with_the_service_message() -> TestResult {
    let client = client()?;
    let url = new_queue(&client).await?;
    client.delete_queue().queue_url(&url).send().await?;
    let err = SqsQueue::new(&sdk()?, url)
        .enqueue(job("p-lost"), Duration::ZERO)
        .await
        .err()
        .ok_or("sending to a deleted queue succeeded")?;
    assert!(err.0.starts_with("SendMessage: "), "{err}");
    assert!(
        err.0.to_lowercase().contains("queue"),
        "the service's own words are kept: {err}"
    );
    Ok(())
}
