//! The work queue port: how the API and the sweep wake a worker for a plan.
//! SQS in production (with a dead-letter queue), an in-process channel in
//! local mode. Delivery is at least once; the plan's lease makes duplicates
//! harmless.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanJob {
    pub org: String,
    pub deployment_id: String,
    pub plan_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("work queue unavailable: {0}")]
pub struct QueueError(pub String);

#[async_trait]
pub trait WorkQueue: Send + Sync + 'static {
    /// Delivers `job` to a worker after `delay` (at most 15 minutes, SQS's limit).
    async fn enqueue(&self, job: PlanJob, delay: Duration) -> Result<(), QueueError>;
}

/// Local mode's queue: a channel, with delays as timers.
#[derive(Clone)]
pub struct LocalQueue {
    tx: mpsc::UnboundedSender<PlanJob>,
}

impl LocalQueue {
    pub fn new() -> (LocalQueue, mpsc::UnboundedReceiver<PlanJob>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (LocalQueue { tx }, rx)
    }
}

#[async_trait]
impl WorkQueue for LocalQueue {
    async fn enqueue(&self, job: PlanJob, delay: Duration) -> Result<(), QueueError> {
        if delay.is_zero() {
            return self
                .tx
                .send(job)
                .map_err(|_| QueueError("the local worker has stopped".into()));
        }
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            // A closed channel means the process is shutting down; the sweep
            // of the next start picks the plan up.
            let _ = tx.send(job);
        });
        Ok(())
    }
}
