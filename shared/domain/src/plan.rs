//! Plan records. The engine that runs them arrives with the plans issue; here
//! a change is recorded as a pending plan so that nothing a client asked for
//! is lost between the API and the worker.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    Create,
    Update,
    Shutdown,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    Running,
    Unwinding,
    Succeeded,
    Failed,
    Cancelled,
}

impl PlanStatus {
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            PlanStatus::Succeeded | PlanStatus::Failed | PlanStatus::Cancelled
        )
    }
}

/// A pointer from a deployment to its pending plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanRef {
    pub plan_id: String,
    pub kind: PlanKind,
}

/// Who asked for the change, and when (ECE's `source`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanSource {
    /// e.g. `deployments.create`.
    pub action: String,
    pub user: String,
    pub date: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub id: String,
    pub org: String,
    pub deployment_id: String,
    pub kind: PlanKind,
    pub status: PlanStatus,
    /// What the plan is to reach: for create and update, the target spec.
    pub params: serde_json::Value,
    pub source: PlanSource,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
}
