//! The SQS adapter of the work queue and schedule-sync ports. The API and
//! the sweep send a plan's job here, and the API its schedule
//! reconciliations; the queue's event source mapping wakes the worker
//! function with them.
//!
//! This is the only crate that links `aws-sdk-sqs`. The queue is a standard
//! queue: FIFO queues refuse a per-message delay, and the engine's waits are
//! per-message delays. Standard queues deliver at least once and out of
//! order, which the plan's lease already makes harmless.

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use floe_aws_errors::describe;
use floe_ports::QueueError;
use floe_ports::{PlanJob, ReconcileJob, ScheduleSync, WorkMessage, WorkQueue};
use std::time::Duration;

/// Every IAM action this crate needs, and no other: the deploy template's
/// policy for the roles that enqueue (api, worker) is checked against it.
pub const OPERATIONS: &[&str] = &["sqs:SendMessage"];

/// The longest delay SQS accepts on a message (15 minutes).
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// The work queue on one SQS queue.
#[derive(Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
}

// The client's configuration is left out: it holds the credentials provider.
impl std::fmt::Debug for SqsQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsQueue")
            .field("queue_url", &self.queue_url)
            .finish_non_exhaustive()
    }
}

impl SqsQueue {
    /// The queue at `queue_url`, through a client built from the process's
    /// shared SDK configuration (region, the function role's credentials,
    /// `AWS_ENDPOINT_URL`).
    pub fn new(sdk: &aws_config::SdkConfig, queue_url: impl Into<String>) -> SqsQueue {
        SqsQueue {
            client: Client::new(sdk),
            queue_url: queue_url.into(),
        }
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

/// The message's `DelaySeconds` for a wait of `delay`. Rounded up, so that a
/// job never arrives before it was asked to; capped at SQS's limit, because a
/// longer wait only wakes the worker early and the step looks again.
pub fn delay_seconds(delay: Duration) -> i32 {
    let capped = delay.min(MAX_DELAY);
    let whole = capped.as_secs() + u64::from(capped.subsec_nanos() > 0);
    // At most 900 after the cap: the conversion cannot fail.
    i32::try_from(whole).unwrap_or(900)
}

impl SqsQueue {
    async fn send(&self, message: &WorkMessage, delay: Duration) -> Result<(), QueueError> {
        let body = serde_json::to_string(message)
            .map_err(|e| QueueError(format!("the job cannot be encoded: {e}")))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .delay_seconds(delay_seconds(delay))
            .send()
            .await
            .map_err(|e| QueueError(format!("SendMessage: {}", describe(&e))))?;
        Ok(())
    }
}

#[async_trait]
impl WorkQueue for SqsQueue {
    async fn enqueue(&self, job: PlanJob, delay: Duration) -> Result<(), QueueError> {
        let plan_id = job.plan_id.clone();
        self.send(&WorkMessage::Plan(job), delay).await?;
        tracing::debug!(plan = %plan_id, delay_ms = delay.as_millis() as u64, "plan job enqueued");
        Ok(())
    }
}

/// The sweep hands each shard of the health check to a worker of its own.
#[async_trait]
impl floe_ports::HealthShards for SqsQueue {
    async fn check_shard(&self, shard: u16) -> Result<(), QueueError> {
        self.send(
            &WorkMessage::HealthShard {
                health_shard: shard,
            },
            Duration::ZERO,
        )
        .await
    }
}

/// The api function keeps schedules in step through the worker: it sends
/// the reconciliation as a job, and never calls EventBridge Scheduler.
#[async_trait]
impl ScheduleSync for SqsQueue {
    async fn sync(&self, job: ReconcileJob) -> Result<(), QueueError> {
        self.send(
            &WorkMessage::Reconcile {
                reconcile_schedules: job,
            },
            Duration::ZERO,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::delay_seconds;
    use std::time::Duration;

    #[test]
    fn delays_round_up_to_whole_seconds_and_stop_at_fifteen_minutes() {
        assert_eq!(delay_seconds(Duration::ZERO), 0);
        assert_eq!(delay_seconds(Duration::from_millis(1)), 1);
        assert_eq!(delay_seconds(Duration::from_millis(2_300)), 3);
        assert_eq!(delay_seconds(Duration::from_secs(10)), 10);
        assert_eq!(delay_seconds(Duration::from_secs(900)), 900);
        assert_eq!(delay_seconds(Duration::from_millis(900_001)), 900);
        assert_eq!(delay_seconds(Duration::from_secs(86_400)), 900);
        assert_eq!(delay_seconds(Duration::MAX), 900);
    }
}
