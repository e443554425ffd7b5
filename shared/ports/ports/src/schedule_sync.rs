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
    Reconcile { reconcile_schedules: ReconcileJob },
    Plan(PlanJob),
}

#[cfg(test)]
mod tests {
    use super::*;

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
