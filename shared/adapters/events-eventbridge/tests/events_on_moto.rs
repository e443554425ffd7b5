//! The EventBridge events adapter against moto (127.0.0.1, started by
//! scripts/test.sh), through the real `aws-sdk-eventbridge` client, and
//! read the way an operator reads it: a rule on the bus matching Floe's
//! source routes each event to a queue, whose messages are EventBridge's
//! envelope of what Floe published.

use aws_sdk_eventbridge::Client as Bus;
use aws_sdk_eventbridge::config::{
    BehaviorVersion, Credentials, Region, SharedCredentialsProvider,
};
use aws_sdk_eventbridge::types::Target;
use floe_events_eventbridge::EventBridgeEvents;
use floe_ports::{Events, PlatformEvent};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const PATIENCE: Duration = Duration::from_secs(10);

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

/// A bus of its own, with a rule sending Floe's events to a new queue:
/// (bus name, queue url).
async fn routed_bus(
    sdk: &aws_config::SdkConfig,
) -> Result<(String, String), Box<dyn std::error::Error>> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let bus_name = format!("floe-test-{id}");
    let bus = Bus::new(sdk);
    bus.create_event_bus().name(&bus_name).send().await?;
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let url = sqs
        .create_queue()
        .queue_name(format!("floe-events-{id}"))
        .send()
        .await?
        .queue_url()
        .ok_or("no queue url")?
        .to_string();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
        .ok_or("no queue arn")?
        .clone();
    bus.put_rule()
        .name("floe-alerts")
        .event_bus_name(&bus_name)
        .event_pattern(json!({"source": ["floe"]}).to_string())
        .send()
        .await?;
    bus.put_targets()
        .rule("floe-alerts")
        .event_bus_name(&bus_name)
        .targets(Target::builder().id("alerts").arn(arn).build()?)
        .send()
        .await?;
    Ok((bus_name, url))
}

/// The envelopes that reached the queue within the test's patience.
async fn received(
    sdk: &aws_config::SdkConfig,
    url: &str,
    want: usize,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut all = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while all.len() < want && Instant::now() < deadline {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await?;
        for m in out.messages() {
            all.push(serde_json::from_str(m.body().ok_or("no body")?)?);
        }
        if all.len() < want {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(all)
}

#[tokio::test]
async fn an_event_reaches_the_operators_rule_as_published() -> TestResult {
    let sdk = sdk()?;
    let (bus, url) = routed_bus(&sdk).await?;
    let events = EventBridgeEvents::new(&sdk, &bus);
    let detail = json!({
        "org": "acme", "deployment_id": "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c",
        "drill_id": "0193a0d5a1b27c3e9a4b5c6d7e8f9a10",
        "failure": {"step": "drill-verdict", "failure_type": "drill_check_failed", "reason": "index orders: 3 documents, recorded 30"}
    });
    events
        .publish(&PlatformEvent {
            detail_type: PlatformEvent::DRILL_FAILED,
            detail: detail.clone(),
        })
        .await?;
    let got = received(&sdk, &url, 1).await?;
    assert_eq!(got.len(), 1, "{got:?}");
    let envelope = &got[0];
    assert_eq!(envelope["source"], "floe", "{envelope}");
    assert_eq!(envelope["detail-type"], "Floe Drill Failed", "{envelope}");
    assert_eq!(envelope["detail"], detail, "{envelope}");
    Ok(())
}

#[tokio::test]
async fn a_bus_that_is_not_there_is_an_error() -> TestResult {
    let sdk = sdk()?;
    let events = EventBridgeEvents::new(
        &sdk,
        format!("floe-missing-{}", uuid::Uuid::new_v4().simple()),
    );
    let result = events
        .publish(&PlatformEvent {
            detail_type: PlatformEvent::RECOVERY_TARGET_BREACHED,
            detail: json!({"org": "acme", "deployment_id": "d"}),
        })
        .await;
    assert!(result.is_err(), "{result:?}");
    Ok(())
}
