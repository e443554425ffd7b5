//! Keeping snapshot schedules in step with the records.
//!
//! The use cases say what changed; an adapter makes the schedules follow.
//! In the worker and in local mode that is a reconciliation on the spot; in
//! the api function it is a message to the worker, so that the api never
//! calls EventBridge Scheduler itself.

use crate::queue::{PlanJob, QueueError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What to reconcile: one deployment's schedules, or those of every
/// deployment that attaches one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileJob {
    pub org: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
}

impl ReconcileJob {
    pub fn deployment(org: &str, deployment_id: &str) -> ReconcileJob {
        ReconcileJob {
            org: org.into(),
            deployment_id: Some(deployment_id.into()),
            policy_id: None,
        }
    }

    pub fn policy(org: &str, policy_id: &str) -> ReconcileJob {
        ReconcileJob {
            org: org.into(),
            deployment_id: None,
            policy_id: Some(policy_id.into()),
        }
    }
}

#[async_trait]
pub trait ScheduleSync: Send + Sync + 'static {
    /// The records behind `job` changed: make their schedules follow. The
    /// records are already written, so an adapter that cannot do it now
    /// reports the error and the next change (or plan end) catches up.
    async fn sync(&self, job: ReconcileJob) -> Result<(), QueueError>;
}

/// One message on the work queue. A plan's job keeps the layout it always
/// had (`{"org", "deployment_id", "plan_id"}`), so messages sent before
/// reconciliation jobs existed still decode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WorkMessage {
    Reconcile {
        reconcile_schedules: ReconcileJob,
    },
    /// A drill schedule fired (EventBridge Scheduler puts its input on
    /// the queue as it is): start the deployment's drill.
    Drill {
        drill: crate::scheduler::DrillJob,
    },
    Plan(PlanJob),
    /// One shard of the fleet's health check, handed out by the sweep.
    HealthShard {
        health_shard: u16,
    },
    /// An EC2 instance changed state: the stack's EventBridge rule puts
    /// EC2's notifications on the queue as they are.
    InstanceState(InstanceStateChange),
}

/// EC2's "EC2 Instance State-change Notification", as EventBridge sends
/// it: `{"source": "aws.ec2", "detail-type": …, "detail": {"instance-id",
/// "state"}, …}` (the other fields are not read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceStateChange {
    pub source: String,
    #[serde(rename = "detail-type")]
    pub detail_type: String,
    pub detail: InstanceStateDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceStateDetail {
    #[serde(rename = "instance-id")]
    pub instance_id: String,
    pub state: String,
}

impl InstanceStateChange {
    pub const SOURCE: &'static str = "aws.ec2";
    pub const DETAIL_TYPE: &'static str = "EC2 Instance State-change Notification";
    /// The states in which an instance no longer serves: each starts its
    /// deployment's health check at once.
    pub const LOST_STATES: [&'static str; 4] =
        ["stopping", "stopped", "shutting-down", "terminated"];

    /// Whether this is EC2's notification of an instance that stopped
    /// serving.
    pub fn is_loss(&self) -> bool {
        self.source == Self::SOURCE
            && self.detail_type == Self::DETAIL_TYPE
            && Self::LOST_STATES.contains(&self.detail.state.as_str())
    }
}

/// Hands one shard of the fleet's health check to a worker of its own
/// (the sweep sends one per shard, so that no worker checks the whole
/// fleet and none depends on what another remembers).
#[async_trait]
pub trait HealthShards: Send + Sync {
    async fn check_shard(&self, shard: u16) -> Result<(), QueueError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec2_state_change_notifications_are_read_as_eventbridge_sends_them() {
        let event = r#"{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602",
            "detail-type":"EC2 Instance State-change Notification","source":"aws.ec2",
            "account":"123456789012","time":"2026-12-05T12:00:00Z","region":"us-east-1",
            "resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"],
            "detail":{"instance-id":"i-0123456789abcdef0","state":"terminated"}}"#;
        let WorkMessage::InstanceState(change) =
            serde_json::from_str::<WorkMessage>(event).expect("a message")
        else {
            panic!("not read as an instance's state change");
        };
        assert_eq!(change.detail.instance_id, "i-0123456789abcdef0");
        assert!(change.is_loss());
        let running = event.replace("\"terminated\"", "\"running\"");
        let Ok(WorkMessage::InstanceState(change)) = serde_json::from_str::<WorkMessage>(&running)
        else {
            panic!("not read");
        };
        assert!(!change.is_loss(), "a running instance is no loss");
    }

    #[test]
    fn plan_jobs_keep_their_layout_and_reconcile_jobs_are_told_apart() {
        let plan: WorkMessage =
            serde_json::from_str(r#"{"org":"acme","deployment_id":"d1","plan_id":"p1"}"#)
                .expect("a plan job");
        assert_eq!(
            plan,
            WorkMessage::Plan(PlanJob {
                org: "acme".into(),
                deployment_id: "d1".into(),
                plan_id: "p1".into()
            })
        );
        let job = WorkMessage::Reconcile {
            reconcile_schedules: ReconcileJob::policy("acme", "pol"),
        };
        let text = serde_json::to_string(&job).expect("encodes");
        assert_eq!(
            text,
            r#"{"reconcile_schedules":{"org":"acme","policy_id":"pol"}}"#
        );
        assert_eq!(
            serde_json::from_str::<WorkMessage>(&text).expect("decodes"),
            job
        );
        assert!(serde_json::from_str::<WorkMessage>(r#"{"org":"acme"}"#).is_err());
    }
}
