//! Plan records: every change to a deployment runs as a plan, a durable list
//! of named steps. The record is the engine's whole memory (cursor, step
//! outputs, lease), so any worker can pick a plan up after a crash.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    Create,
    Update,
    Shutdown,
    Delete,
    /// A snapshot restored into a running deployment.
    Restore,
}

impl PlanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanKind::Create => "create",
            PlanKind::Update => "update",
            PlanKind::Shutdown => "shutdown",
            PlanKind::Delete => "delete",
            PlanKind::Restore => "restore",
        }
    }
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

    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Pending => "pending",
            PlanStatus::Running => "running",
            PlanStatus::Unwinding => "unwinding",
            PlanStatus::Succeeded => "succeeded",
            PlanStatus::Failed => "failed",
            PlanStatus::Cancelled => "cancelled",
        }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Running,
    /// Waiting for something outside (instances booting) before running again.
    Waiting,
    Succeeded,
    Failed,
    /// Its undo ran after a later step failed or the plan was cancelled.
    Undone,
    /// Its undo failed for good: something may be left behind.
    UndoFailed,
}

/// Why a step or plan failed, as ECE reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StepError {
    pub message: String,
    /// Stable kind of failure, e.g. `insufficient_capacity`, `architecture_mismatch`.
    pub failure_type: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StepRecord {
    pub step_id: String,
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_in_millis: Option<u64>,
    /// How many times `do` (or, unwinding, `undo`) has been tried.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub info_log: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// What `do` produced, for later steps and for its `undo`.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    #[schema(value_type = Object)]
    pub output: serde_json::Value,
}

impl StepRecord {
    pub fn new(step_id: impl Into<String>) -> StepRecord {
        StepRecord {
            step_id: step_id.into(),
            status: StepStatus::Pending,
            started: None,
            duration_in_millis: None,
            attempts: 0,
            info_log: Vec::new(),
            error: None,
            output: serde_json::Value::Null,
        }
    }
}

/// A worker's claim on a plan: only the owner runs steps until it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub expires: chrono::DateTime<chrono::Utc>,
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
    /// The steps, fixed when the plan starts.
    #[serde(default)]
    pub steps: Vec<StepRecord>,
    /// Running: index of the next step to do. Unwinding: how many of the
    /// first steps still need their undo.
    #[serde(default)]
    pub cursor: usize,
    #[serde(default)]
    pub lease: Option<Lease>,
    #[serde(default)]
    pub cancel_requested: bool,
    /// When a re-queued wake-up is due; the sweep leaves the plan alone until then.
    #[serde(default)]
    pub wake_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    pub error: Option<StepError>,
    #[serde(default)]
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
}

impl Plan {
    /// A new pending plan; its steps are laid out when the engine starts it.
    pub fn new(
        org: &str,
        deployment_id: &str,
        kind: PlanKind,
        params: serde_json::Value,
        action: &str,
        user: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Plan {
        Plan {
            id: crate::names::new_resource_id(),
            org: org.to_string(),
            deployment_id: deployment_id.to_string(),
            kind,
            status: PlanStatus::Pending,
            params,
            source: PlanSource {
                action: action.to_string(),
                user: user.to_string(),
                date: now,
            },
            created: now,
            updated: now,
            steps: Vec::new(),
            cursor: 0,
            lease: None,
            cancel_requested: false,
            wake_at: None,
            error: None,
            finished: None,
        }
    }

    pub fn reference(&self) -> PlanRef {
        PlanRef {
            plan_id: self.id.clone(),
            kind: self.kind,
        }
    }
}
