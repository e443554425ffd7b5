//! The snapshotter function: EventBridge Scheduler invokes it once per
//! firing of a policy attachment's schedule, with the input
//! `{"org": "...", "deployment_id": "...", "policy_id": "..."}`. It takes the
//! snapshot, records it and applies retention (`floe_snapshots`), and answers
//! a JSON summary.
//!
//! Only what may succeed later is returned as an error (storage or cluster
//! unreachable, a node booting), so the schedule's retry policy and
//! dead-letter queue see exactly those. Skips and failed snapshots are
//! recorded on the attachment and answered normally.

pub mod adapters;

/// The AWS actions this function's role needs. It calls no SDK itself: the
/// store's DynamoDB adapter reads and writes records (`GetItem`, `Query`,
/// and the item actions inside `TransactWriteItems`), the EC2 adapter only
/// lists a deployment's instances to find a node's address, and the SSM
/// adapter reads the cluster's CA and elastic password.
pub const IAM_ACTIONS: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "ec2:DescribeInstances",
    "ssm:GetParameter",
];

use floe_domain::names::{is_resource_id, validate_org};
use floe_snapshots::{RunSummary, SnapshotError, Snapshotter};
use serde::Deserialize;
use serde_json::{Value, json};

/// The schedule's input, as the schedule reconciler writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduledEvent {
    pub org: String,
    pub deployment_id: String,
    pub policy_id: String,
}

impl ScheduledEvent {
    /// Ids go into storage keys: only well-formed ones are accepted.
    pub fn parse(value: Value) -> Result<ScheduledEvent, String> {
        let event: ScheduledEvent =
            serde_json::from_value(value).map_err(|e| format!("not a scheduled event: {e}"))?;
        validate_org(&event.org).map_err(|e| format!("org {e}"))?;
        if !is_resource_id(&event.deployment_id) {
            return Err("deployment_id is not a Floe id".into());
        }
        if !is_resource_id(&event.policy_id) {
            return Err("policy_id is not a Floe id".into());
        }
        Ok(event)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RetryLater(pub SnapshotError);

impl RetryLater {
    pub fn kind(&self) -> &'static str {
        match &self.0 {
            SnapshotError::Store(_) => "StoreUnavailable",
            SnapshotError::Cluster(_) | SnapshotError::Elastic(_) => "ClusterUnavailable",
            _ => "RetryLater",
        }
    }
}

/// One invocation. A malformed event is logged and answered `rejected`
/// (retrying it cannot help); transient failures are `Err`.
pub async fn handle(snapshotter: &Snapshotter, payload: Value) -> Result<Value, RetryLater> {
    let event = match ScheduledEvent::parse(payload) {
        Ok(e) => e,
        Err(reason) => {
            tracing::error!(%reason, "rejected an event that is not a schedule's input");
            return Ok(json!({"outcome": "rejected", "reason": reason}));
        }
    };
    match snapshotter
        .run_scheduled(&event.org, &event.deployment_id, &event.policy_id)
        .await
    {
        Ok(summary) => Ok(summary_json(&summary)),
        Err(e) if e.is_transient() => Err(RetryLater(e)),
        Err(e) => {
            tracing::error!(error = %e, deployment = %event.deployment_id, policy = %event.policy_id, "scheduled snapshot failed for good");
            Ok(json!({
                "org": event.org, "deployment_id": event.deployment_id, "policy_id": event.policy_id,
                "outcome": "failed", "reason": e.to_string(), "deleted": [],
            }))
        }
    }
}

fn summary_json(summary: &RunSummary) -> Value {
    serde_json::to_value(summary)
        .unwrap_or_else(|e| json!({"outcome": "unknown", "reason": e.to_string()}))
}
