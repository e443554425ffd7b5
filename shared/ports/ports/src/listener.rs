//! Told when a plan has finished.

use async_trait::async_trait;

/// Told when a plan has finished and its deployment took its new status
/// (schedules follow the status: they exist only while a cluster runs).
#[async_trait]
pub trait PlanListener: Send + Sync + 'static {
    async fn finished(&self, org: &str, deployment_id: &str);
}
