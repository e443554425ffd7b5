//! Plan records: every change to a deployment runs as a plan, a durable list
//! of named steps. The record is the engine's whole memory (cursor, step
//! outputs, lease), so any worker can pick a plan up after a crash.

use crate::deployment::{DeploymentSpec, DeploymentStatus};
use crate::restore::RestoreTarget;
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
    /// A stopped deployment's nodes started again with its spec.
    Start,
    /// A new `elastic` password applied to the running cluster.
    ResetPassword,
    /// Nodes the health check found lost replaced, in their group and zone.
    Heal,
    /// The organization's platform license installed on the running cluster.
    License,
    /// A restore drill: a short-lived clone created from its source's
    /// snapshot, checked, and deleted (see `crate::drill`).
    Drill,
}

impl PlanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanKind::Create => "create",
            PlanKind::Update => "update",
            PlanKind::Shutdown => "shutdown",
            PlanKind::Delete => "delete",
            PlanKind::Restore => "restore",
            PlanKind::Start => "start",
            PlanKind::ResetPassword => "reset_password",
            PlanKind::Heal => "heal",
            PlanKind::License => "license",
            PlanKind::Drill => "drill",
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
    /// When its current phase began: the run, or, unwinding, the undo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<chrono::DateTime<chrono::Utc>>,
    /// When its undo began; the undo's time limit counts from here, over
    /// every attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_started: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_in_millis: Option<u64>,
    /// How many times `do` (or, unwinding, `undo`) has been tried.
    #[serde(default)]
    pub attempts: u32,
    /// How many of those attempts ended in a transient error that was
    /// retried: the engine's retry budget counts these, and it ends the
    /// step before they grow. Records from before it load as 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    #[serde(default)]
    pub info_log: Vec<String>,
    /// How many lines the engine has dropped from `info_log` to keep the
    /// record small (its second line says so).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub log_lines_dropped: u32,
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
            undo_started: None,
            duration_in_millis: None,
            attempts: 0,
            retries: 0,
            info_log: Vec::new(),
            log_lines_dropped: 0,
            error: None,
            output: serde_json::Value::Null,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A worker's claim on a plan: only the owner runs steps until it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub expires: chrono::DateTime<chrono::Utc>,
}

/// What a plan is to reach: one variant per kind of plan, each with the
/// typed input its steps read. A plan's layout follows from these alone.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanParams {
    /// The spec to create, with the snapshot a clone restores (resolved
    /// before the plan was stored) in `restore_snapshot`.
    Create(DeploymentSpec),
    /// The spec the deployment is to run when the plan succeeds.
    Update(DeploymentSpec),
    Shutdown(ShutdownParams),
    Delete,
    /// A delete that first removes the deployment's unpinned snapshots
    /// through its running cluster (`remove_snapshots=true`).
    DeleteRemovingSnapshots,
    /// A snapshot restored into a running deployment.
    Restore(RestoreTarget),
    /// A stopped deployment started again.
    Start(StartParams),
    /// The password the deployment's record holds sealed
    /// (`password_to_apply`) applied to its cluster.
    ResetPassword,
    /// Lost nodes replaced (the health check starts it).
    Heal(HealParams),
    /// The organization's platform license, as it stands when the step
    /// runs, installed on the running cluster (an upload starts it).
    License,
    /// A drill's clone: created from the snapshot, checked, deleted.
    Drill(Box<crate::drill::DrillParams>),
}

/// What a heal replaces: the spec the deployment runs (its nodes' launch
/// templates are made from it) and how many nodes of which group go to
/// which zone. Decided by the health check when it starts the plan, so the
/// plan's layout follows from these alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealParams {
    pub spec: DeploymentSpec,
    pub replacements: Vec<Replacement>,
    /// Nodes beyond the spec, also named as lost (with a count of none)
    /// in `replacements`: before they are terminated, their shards move
    /// off them (and master-eligible ones leave the voting configuration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub surplus: Vec<String>,
}

/// Nodes of one group to start again in one of its zones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replacement {
    pub group: String,
    /// The zone's index among the group's zones (as a launch counts them).
    pub zone: u32,
    pub count: u32,
    /// The instances found lost there (for the plan's log).
    #[serde(default)]
    pub lost: Vec<String>,
}

/// What starting a stopped deployment again runs: its spec, and the
/// snapshot it starts from, if any (resolved before the plan was stored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartParams {
    pub spec: DeploymentSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreTarget>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ShutdownParams {
    /// Terminate without the final snapshot.
    #[serde(default)]
    pub skip_snapshot: bool,
}

impl PlanParams {
    pub fn kind(&self) -> PlanKind {
        match self {
            PlanParams::Create(_) => PlanKind::Create,
            PlanParams::Update(_) => PlanKind::Update,
            PlanParams::Shutdown(_) => PlanKind::Shutdown,
            PlanParams::Delete | PlanParams::DeleteRemovingSnapshots => PlanKind::Delete,
            PlanParams::Restore(_) => PlanKind::Restore,
            PlanParams::Start(_) => PlanKind::Start,
            PlanParams::ResetPassword => PlanKind::ResetPassword,
            PlanParams::Heal(_) => PlanKind::Heal,
            PlanParams::License => PlanKind::License,
            PlanParams::Drill(_) => PlanKind::Drill,
        }
    }

    /// The spec a create, update or start plan is to reach.
    pub fn target_spec(&self) -> Option<&DeploymentSpec> {
        match self {
            PlanParams::Create(s) | PlanParams::Update(s) => Some(s),
            PlanParams::Start(p) => Some(&p.spec),
            PlanParams::Heal(p) => Some(&p.spec),
            PlanParams::Drill(p) => Some(&p.spec),
            _ => None,
        }
    }

    /// The restore the plan runs: a clone's create, or a restore plan.
    pub fn restore(&self) -> Option<RestoreTarget> {
        match self {
            PlanParams::Create(spec) => Self::clone_restore(spec),
            // A drill's clone is one node: restored indices get no
            // replicas, or they could never be green there.
            PlanParams::Drill(p) => Self::clone_restore(&p.spec).map(|mut t| {
                t.number_of_replicas = Some(0);
                t
            }),
            PlanParams::Restore(t) => Some(t.clone()),
            PlanParams::Start(p) => p.restore.clone(),
            _ => None,
        }
    }

    /// The restore a clone's create runs, from its spec's `restore_snapshot`.
    fn clone_restore(spec: &DeploymentSpec) -> Option<RestoreTarget> {
        spec.restore_snapshot.as_ref().map(|r| {
            let repository = r.repository.clone().unwrap_or_default();
            let mut target = r.target(&repository);
            // A clone that writes to its source's repository (at its
            // own path) reads the source's path under a second name.
            if spec.repository() == Some(repository.as_str()) {
                target.registered_as = Some(crate::restore::source_registration_name(
                    &repository,
                    &r.source_deployment_id,
                ));
            }
            target
        })
    }

    /// The body kept in a record's `params` (the kind is kept beside it).
    fn to_value(&self) -> serde_json::Value {
        let value = match self {
            PlanParams::Create(s) | PlanParams::Update(s) => serde_json::to_value(s),
            PlanParams::Shutdown(p) => serde_json::to_value(p),
            PlanParams::Delete | PlanParams::ResetPassword | PlanParams::License => {
                Ok(serde_json::Value::Null)
            }
            PlanParams::DeleteRemovingSnapshots => {
                Ok(serde_json::json!({"remove_snapshots": true}))
            }
            PlanParams::Restore(t) => serde_json::to_value(t),
            PlanParams::Start(p) => serde_json::to_value(p),
            PlanParams::Heal(p) => serde_json::to_value(p),
            PlanParams::Drill(p) => serde_json::to_value(p),
        };
        // These types serialize to JSON without fail (no maps with
        // non-string keys, no custom serializers that can refuse).
        value.unwrap_or(serde_json::Value::Null)
    }

    /// Reads a record's `params` for its kind, in every layout Floe has
    /// written (they have not changed: `kind` plus the variant's body).
    fn from_value(kind: PlanKind, value: serde_json::Value) -> Result<PlanParams, String> {
        let e = |e: serde_json::Error| {
            format!("the {} plan's params cannot be read: {e}", kind.as_str())
        };
        Ok(match kind {
            PlanKind::Create => PlanParams::Create(serde_json::from_value(value).map_err(e)?),
            PlanKind::Update => PlanParams::Update(serde_json::from_value(value).map_err(e)?),
            PlanKind::Shutdown => PlanParams::Shutdown(if value.is_null() {
                ShutdownParams::default()
            } else {
                serde_json::from_value(value).map_err(e)?
            }),
            PlanKind::Delete => {
                if value.get("remove_snapshots") == Some(&serde_json::Value::Bool(true)) {
                    PlanParams::DeleteRemovingSnapshots
                } else {
                    PlanParams::Delete
                }
            }
            PlanKind::Restore => PlanParams::Restore(serde_json::from_value(value).map_err(e)?),
            PlanKind::Start => PlanParams::Start(serde_json::from_value(value).map_err(e)?),
            PlanKind::ResetPassword => PlanParams::ResetPassword,
            PlanKind::License => PlanParams::License,
            PlanKind::Heal => PlanParams::Heal(serde_json::from_value(value).map_err(e)?),
            PlanKind::Drill => PlanParams::Drill(serde_json::from_value(value).map_err(e)?),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub id: String,
    pub org: String,
    pub deployment_id: String,
    /// What the plan is to reach; its kind follows from it.
    pub params: PlanParams,
    pub status: PlanStatus,
    pub source: PlanSource,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
    /// The steps, fixed when the plan starts.
    pub steps: Vec<StepRecord>,
    /// Running: index of the next step to do. Unwinding: how many of the
    /// first steps still need their undo.
    pub cursor: usize,
    pub lease: Option<Lease>,
    pub cancel_requested: bool,
    /// When a re-queued wake-up is due; the sweep leaves the plan alone until then.
    pub wake_at: Option<chrono::DateTime<chrono::Utc>>,
    pub error: Option<StepError>,
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
}

/// A plan as stored: the layout of every plan record Floe has written,
/// `kind` beside an untyped `params`. [`Plan`] reads and writes through it,
/// so records written before the params were typed load unchanged.
#[derive(Serialize, Deserialize)]
struct PlanRecord {
    id: String,
    org: String,
    deployment_id: String,
    kind: PlanKind,
    status: PlanStatus,
    #[serde(default)]
    params: serde_json::Value,
    source: PlanSource,
    created: chrono::DateTime<chrono::Utc>,
    updated: chrono::DateTime<chrono::Utc>,
    #[serde(default)]
    steps: Vec<StepRecord>,
    #[serde(default)]
    cursor: usize,
    #[serde(default)]
    lease: Option<Lease>,
    #[serde(default)]
    cancel_requested: bool,
    #[serde(default)]
    wake_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    error: Option<StepError>,
    #[serde(default)]
    finished: Option<chrono::DateTime<chrono::Utc>>,
}

impl Serialize for Plan {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PlanRecord {
            id: self.id.clone(),
            org: self.org.clone(),
            deployment_id: self.deployment_id.clone(),
            kind: self.kind(),
            status: self.status,
            params: self.params.to_value(),
            source: self.source.clone(),
            created: self.created,
            updated: self.updated,
            steps: self.steps.clone(),
            cursor: self.cursor,
            lease: self.lease.clone(),
            cancel_requested: self.cancel_requested,
            wake_at: self.wake_at,
            error: self.error.clone(),
            finished: self.finished,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Plan {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Plan, D::Error> {
        let r = PlanRecord::deserialize(deserializer)?;
        let params = PlanParams::from_value(r.kind, r.params).map_err(serde::de::Error::custom)?;
        Ok(Plan {
            id: r.id,
            org: r.org,
            deployment_id: r.deployment_id,
            params,
            status: r.status,
            source: r.source,
            created: r.created,
            updated: r.updated,
            steps: r.steps,
            cursor: r.cursor,
            lease: r.lease,
            cancel_requested: r.cancel_requested,
            wake_at: r.wake_at,
            error: r.error,
            finished: r.finished,
        })
    }
}

impl Plan {
    /// A new pending plan; its steps are laid out when the engine starts it.
    pub fn new(
        org: &str,
        deployment_id: &str,
        params: PlanParams,
        action: &str,
        user: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Plan {
        Plan {
            id: crate::names::new_resource_id(),
            org: org.to_string(),
            deployment_id: deployment_id.to_string(),
            params,
            status: PlanStatus::Pending,
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

    pub fn kind(&self) -> PlanKind {
        self.params.kind()
    }

    pub fn reference(&self) -> PlanRef {
        PlanRef {
            plan_id: self.id.clone(),
            kind: self.kind(),
        }
    }

    /// Ends the plan where it stands, at an operator's word, without
    /// running its remaining steps or undos (ECE's `force_delete`): the way
    /// out of a plan stuck waiting on something that will never come. The
    /// step that was running or waiting is marked failed, so the record
    /// shows where it stopped; the error says what the nodes may be left as.
    pub fn force_end(&mut self, by: &str, now: chrono::DateTime<chrono::Utc>) {
        let was_unwinding = self.status == PlanStatus::Unwinding;
        for step in &mut self.steps {
            if matches!(step.status, StepStatus::Running | StepStatus::Waiting) {
                step.status = if was_unwinding {
                    StepStatus::UndoFailed
                } else {
                    StepStatus::Failed
                };
                step.error = Some(StepError {
                    failure_type: FORCE_ENDED.into(),
                    message: format!("ended by {by} while it was waiting"),
                });
            }
        }
        self.status = PlanStatus::Failed;
        self.error = Some(StepError {
            failure_type: FORCE_ENDED.into(),
            message: format!(
                "ended by {by} without finishing its steps or undos: the nodes are as the plan left them; send the spec again (PUT) to converge, or shut the deployment down"
            ),
        });
        self.lease = None;
        self.wake_at = None;
        self.finished = Some(now);
        self.updated = now;
    }
}

/// The failure type of a plan that an operator ended by force.
pub const FORCE_ENDED: &str = "force_ended";

/// How a plan ended, as far as its deployment is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanEnd {
    Succeeded,
    /// Failed or cancelled, and every undo that ran succeeded.
    RolledBack,
    /// An undo failed for good: something may be left half-changed.
    UndoFailed,
    /// An operator ended it by force, mid-way: its nodes are as it left them.
    ForceEnded,
}

/// The deployment state machine: which status a deployment takes while a
/// plan of `kind` runs, and which it takes when that plan ends. The use
/// cases that start plans and the engine that finishes them both ask here.
pub mod lifecycle {
    use super::{DeploymentStatus, Plan, PlanEnd, PlanKind, StepStatus};

    /// The status a deployment shows while a plan of `kind` is pending.
    pub fn while_running(kind: PlanKind) -> DeploymentStatus {
        match kind {
            PlanKind::Create | PlanKind::Start | PlanKind::Drill => DeploymentStatus::Initializing,
            PlanKind::Update => DeploymentStatus::Reconfiguring,
            PlanKind::Shutdown | PlanKind::Delete => DeploymentStatus::Stopping,
            // The cluster keeps serving while a snapshot is restored into
            // it, but a plan runs: clients wait for `running` again.
            PlanKind::Restore | PlanKind::ResetPassword | PlanKind::License => {
                DeploymentStatus::Reconfiguring
            }
            // Its cluster keeps serving on the nodes it has left while the
            // lost ones are replaced; clients wait for `running` again.
            PlanKind::Heal => DeploymentStatus::Reconfiguring,
        }
    }

    /// The status a deployment takes when `plan` ends so. A shutdown whose
    /// `terminate` step began has passed its point of no return: its nodes
    /// are gone or going, so it ends `stopped` (terminate did its work) or
    /// `failed` (it did not finish), never `running` with no nodes.
    pub fn after_plan(plan: &Plan, end: PlanEnd) -> DeploymentStatus {
        if plan.kind() == PlanKind::Shutdown && end == PlanEnd::RolledBack {
            let terminate = plan.steps.iter().find(|s| s.step_id == "terminate");
            match terminate.map(|s| s.status) {
                // Undone: it had succeeded, and its undo keeps nodes gone.
                Some(StepStatus::Succeeded | StepStatus::Undone) => {
                    return DeploymentStatus::Stopped;
                }
                Some(
                    StepStatus::Running
                    | StepStatus::Waiting
                    | StepStatus::Failed
                    | StepStatus::UndoFailed,
                ) => return DeploymentStatus::Failed,
                Some(StepStatus::Pending) | None => {}
            }
        }
        after(plan.kind(), end)
    }

    /// The status a deployment takes when its plan of `kind` ends so.
    pub fn after(kind: PlanKind, end: PlanEnd) -> DeploymentStatus {
        match (kind, end) {
            (_, PlanEnd::UndoFailed | PlanEnd::ForceEnded) => DeploymentStatus::Failed,
            (PlanKind::Create, PlanEnd::Succeeded) => DeploymentStatus::Running,
            (PlanKind::Create, PlanEnd::RolledBack) => DeploymentStatus::Stopped,
            (PlanKind::Start, PlanEnd::Succeeded) => DeploymentStatus::Running,
            // Its nodes are gone again, its record and snapshots stay.
            (PlanKind::Start, PlanEnd::RolledBack) => DeploymentStatus::Stopped,
            (PlanKind::Update, _) => DeploymentStatus::Running,
            (PlanKind::Shutdown, PlanEnd::Succeeded) => DeploymentStatus::Stopped,
            (PlanKind::Shutdown, PlanEnd::RolledBack) => DeploymentStatus::Running,
            (PlanKind::Delete, _) => DeploymentStatus::Stopped,
            // The cluster kept running whatever the restore did.
            (PlanKind::Restore, _) => DeploymentStatus::Running,
            // The cluster kept serving, with the old password or the new.
            (PlanKind::ResetPassword, _) => DeploymentStatus::Running,
            // The cluster kept serving, on the old license or the new.
            (PlanKind::License, _) => DeploymentStatus::Running,
            // A heal that did not finish left the cluster as it found it
            // (its undos terminate only the replacements): still running,
            // still unhealthy, for the next check to try again.
            (PlanKind::Heal, _) => DeploymentStatus::Running,
            // A drill's clone is deleted however it ended; this is the
            // status it shows only if its record must stay (an undo failed).
            (PlanKind::Drill, _) => DeploymentStatus::Stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A create plan as session 3's code stored it (`kind` and an untyped
    /// `params`), with its steps under way: it must load, and write back
    /// in the same layout.
    const STORED_BEFORE_TYPED_PARAMS: &str = r#"{
        "id": "0193a0c4d2b87c3e9a4b5c6d7e8f9a0c", "org": "acme",
        "deployment_id": "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b", "kind": "shutdown",
        "status": "running", "params": {"skip_snapshot": true},
        "source": {"action": "deployments.shutdown", "user": "alice", "date": "2026-11-29T10:00:00Z"},
        "created": "2026-11-29T10:00:00Z", "updated": "2026-11-29T10:00:05Z",
        "steps": [{"step_id": "terminate", "status": "succeeded", "attempts": 1, "info_log": []},
                  {"step_id": "wait-terminated", "status": "waiting", "attempts": 2, "info_log": ["1 of 3 nodes gone"]}],
        "cursor": 1, "lease": null, "cancel_requested": false, "wake_at": null, "error": null, "finished": null
    }"#;

    /// Once `terminate` began, a shutdown that is cancelled or fails ends
    /// stopped or failed, never running with its nodes gone.
    #[test]
    fn a_shutdown_past_terminate_never_ends_running() {
        use super::lifecycle::after_plan;
        let at = |status: &str| -> Plan {
            let mut v: serde_json::Value =
                serde_json::from_str(STORED_BEFORE_TYPED_PARAMS).expect("json");
            v["steps"][0]["status"] = status.into();
            serde_json::from_value(v).expect("plan")
        };
        for (terminate, status) in [
            ("succeeded", DeploymentStatus::Stopped),
            ("undone", DeploymentStatus::Stopped),
            ("failed", DeploymentStatus::Failed),
            ("running", DeploymentStatus::Failed),
            ("pending", DeploymentStatus::Running),
        ] {
            assert_eq!(
                after_plan(&at(terminate), PlanEnd::RolledBack),
                status,
                "terminate {terminate}"
            );
        }
        assert_eq!(
            after_plan(&at("succeeded"), PlanEnd::Succeeded),
            DeploymentStatus::Stopped
        );
    }

    #[test]
    fn records_written_before_typed_params_load_and_round_trip() {
        let plan: Plan = serde_json::from_str(STORED_BEFORE_TYPED_PARAMS).expect("loads");
        assert_eq!(
            plan.params,
            PlanParams::Shutdown(ShutdownParams {
                skip_snapshot: true
            })
        );
        assert_eq!(plan.kind(), PlanKind::Shutdown);
        assert_eq!(plan.cursor, 1);
        let written = serde_json::to_value(&plan).expect("writes");
        assert_eq!(written["kind"], "shutdown");
        assert_eq!(
            written["params"],
            serde_json::json!({"skip_snapshot": true})
        );
        let again: Plan = serde_json::from_value(written).expect("reloads");
        assert_eq!(again, plan);
    }

    #[test]
    fn a_delete_plan_needs_no_params_and_a_bad_body_is_an_error() {
        let mut v: serde_json::Value =
            serde_json::from_str(STORED_BEFORE_TYPED_PARAMS).expect("json");
        v["kind"] = "delete".into();
        v["params"] = serde_json::Value::Null;
        let plan: Plan = serde_json::from_value(v.clone()).expect("loads");
        assert_eq!(plan.params, PlanParams::Delete);
        v["kind"] = "update".into();
        v["params"] = serde_json::json!({"name": 3});
        let e = serde_json::from_value::<Plan>(v).expect_err("an update needs a spec");
        assert!(e.to_string().contains("update plan's params"), "{e}");
    }

    #[test]
    fn a_delete_removing_snapshots_is_a_delete_that_says_so_in_its_params() {
        let now = chrono::Utc::now();
        let plan = Plan::new(
            "acme",
            "d1",
            PlanParams::DeleteRemovingSnapshots,
            "t",
            "alice",
            now,
        );
        assert_eq!(plan.kind(), PlanKind::Delete);
        let written = serde_json::to_value(&plan).expect("writes");
        assert_eq!(written["kind"], "delete");
        assert_eq!(written["params"]["remove_snapshots"], true);
        let again: Plan = serde_json::from_value(written).expect("reloads");
        assert_eq!(again.params, PlanParams::DeleteRemovingSnapshots);
    }

    #[test]
    fn a_forced_end_fails_the_plan_and_the_step_it_stood_in() {
        let now = chrono::Utc::now();
        let mut plan = Plan::new("acme", "d1", PlanParams::Delete, "t", "alice", now);
        plan.steps = ["terminate", "wait-terminated", "forget-parameters"]
            .into_iter()
            .map(StepRecord::new)
            .collect();
        plan.steps[0].status = StepStatus::Succeeded;
        plan.steps[1].status = StepStatus::Waiting;
        plan.status = PlanStatus::Running;
        plan.lease = Some(Lease {
            owner: "w".into(),
            expires: now,
        });
        plan.force_end("bob", now);
        assert_eq!(plan.status, PlanStatus::Failed);
        assert_eq!(plan.finished, Some(now));
        assert!(plan.lease.is_none());
        let error = plan.error.as_ref().map(|e| e.failure_type.as_str());
        assert_eq!(error, Some(FORCE_ENDED));
        let statuses: Vec<StepStatus> = plan.steps.iter().map(|s| s.status).collect();
        assert_eq!(
            statuses,
            [
                StepStatus::Succeeded,
                StepStatus::Failed,
                StepStatus::Pending
            ]
        );

        // Unwinding, the undo that waited is what failed.
        let mut unwinding = Plan::new("acme", "d1", PlanParams::Delete, "t", "alice", now);
        unwinding.steps = vec![StepRecord::new("terminate")];
        unwinding.steps[0].status = StepStatus::Waiting;
        unwinding.status = PlanStatus::Unwinding;
        unwinding.force_end("bob", now);
        assert_eq!(unwinding.steps[0].status, StepStatus::UndoFailed);
        assert_eq!(unwinding.status, PlanStatus::Failed);
    }

    #[test]
    fn every_kind_has_a_status_while_running_and_after_each_end() {
        use DeploymentStatus as S;
        for kind in [
            PlanKind::Create,
            PlanKind::Update,
            PlanKind::Shutdown,
            PlanKind::Delete,
            PlanKind::Restore,
            PlanKind::Heal,
        ] {
            assert_eq!(lifecycle::after(kind, PlanEnd::UndoFailed), S::Failed);
            assert_eq!(lifecycle::after(kind, PlanEnd::ForceEnded), S::Failed);
        }
        assert_eq!(lifecycle::while_running(PlanKind::Heal), S::Reconfiguring);
        assert_eq!(
            lifecycle::after(PlanKind::Heal, PlanEnd::RolledBack),
            S::Running
        );
        assert_eq!(lifecycle::while_running(PlanKind::Create), S::Initializing);
        assert_eq!(
            lifecycle::while_running(PlanKind::Restore),
            S::Reconfiguring
        );
        assert_eq!(
            lifecycle::after(PlanKind::Create, PlanEnd::RolledBack),
            S::Stopped
        );
        assert_eq!(
            lifecycle::after(PlanKind::Shutdown, PlanEnd::RolledBack),
            S::Running
        );
        assert_eq!(
            lifecycle::after(PlanKind::Update, PlanEnd::Succeeded),
            S::Running
        );
    }
}
