//! Restore drills: a deployment's latest successful snapshot restored into
//! a short-lived clone, checked, measured, and torn down. A snapshot that
//! was never restored is a hope; a drill turns it into a measured fact
//! (does it restore, are the documents all there, how long does it take).
//!
//! The drill runs as one `drill` plan on the clone: the create steps, the
//! checks, then the delete steps; a failure anywhere unwinds the create, so
//! the clone goes whether the drill passes or fails. This module holds the
//! request, the record, and the rules that judge a restored cluster and
//! read the measures off the plan: pure, so they are tested here.

use crate::deployment::{DeploymentSpec, NodeGroup, NodeRole, Storage, VolumeType};
use crate::plan::{Plan, PlanStatus, StepStatus};
use crate::restore::{CloneLicense, RestoreMode};
use crate::snapshot::DocumentCount;
use crate::{Code, Invalid};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// The most query checks one drill runs.
pub const MAX_QUERIES: usize = 10;

/// What a client asks a drill to do (`POST /deployments/{id}/_drill`);
/// every field may be left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrillRequest {
    /// `restore` copies the snapshot onto the clone's disks; `mount`
    /// mounts it as searchable snapshots (needs a license that allows them,
    /// as a mount clone does).
    #[serde(default)]
    pub mode: RestoreMode,
    /// The clone's instance type; by default the smallest of the source's
    /// data nodes' family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "m6g.large")]
    pub instance_type: Option<String>,
    /// Mode `mount` only: the license the clone runs on when the
    /// platform's does not allow searchable snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<CloneLicense>,
    /// Searches the restored data must answer, each with the least number
    /// of hits it must find.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 10)]
    pub queries: Vec<DrillQuery>,
}

/// A search a drill runs on the restored data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrillQuery {
    /// The index (or pattern) searched, as the source names it.
    #[schema(
        example = "logs-2026.12",
        min_length = 1,
        max_length = 255,
        pattern = r#"^[^A-Z\s\\/"<>|,#?]+$"#
    )]
    pub index: String,
    /// An Elasticsearch query (the `query` of a search body): an object
    /// with exactly one query clause; by default `match_all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, example = json!({"match": {"level": "error"}}))]
    pub query: Option<serde_json::Value>,
    /// The least number of hits the search must count.
    #[schema(example = 1, minimum = 0)]
    pub min_hits: u64,
}

impl DrillRequest {
    /// Refuses what no drill can run, naming the field.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.queries.len() > MAX_QUERIES {
            return Err(Invalid::one(
                "queries",
                Code::VALIDATION_LENGTH,
                format!("at most {MAX_QUERIES} queries"),
            ));
        }
        if self.license.is_some() && self.mode != RestoreMode::Mount {
            return Err(Invalid::one(
                "license",
                Code::VALIDATION_LICENSE_FOR_MOUNT,
                "a license is asked for only by a drill in mode mount",
            ));
        }
        for (i, q) in self.queries.iter().enumerate() {
            crate::policy::validate_index_pattern(&q.index).map_err(|m| {
                Invalid::one(
                    format!("queries[{i}].index"),
                    Code::VALIDATION_INDEX_PATTERN,
                    m,
                )
            })?;
            if let Some(query) = &q.query
                && query.as_object().is_none_or(|o| o.len() != 1)
            {
                return Err(Invalid::one(
                    format!("queries[{i}].query"),
                    Code::VALIDATION_INVALID,
                    "must be an object with one query clause, such as {\"match_all\": {}}",
                ));
            }
        }
        Ok(())
    }
}

/// A deployment's drill schedule: at each firing, a drill as `drill`
/// describes it starts (one schedule per deployment: EventBridge
/// Scheduler on AWS, the in-process scheduler in local mode). A firing
/// while a drill still runs is skipped. Changing it needs no plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrillSchedule {
    /// When drills start: `{"interval": "7d"}` or `{"cron": "0 0 3 ? * SUN",
    /// "timezone": "Europe/Berlin"}`, as a snapshot policy's schedule.
    pub schedule: crate::policy::Schedule,
    /// What each drill runs, as `POST …/_drill` takes it; the default
    /// drill when left out.
    #[serde(default)]
    pub drill: DrillRequest,
}

impl DrillSchedule {
    /// The schedule in EventBridge Scheduler's terms; `None` for a
    /// schedule that fails [`DrillSchedule::check`] (never stored).
    pub fn expression(&self) -> Option<crate::policy::ScheduleExpression> {
        self.schedule
            .expression("drill_schedule.schedule", &mut crate::Problems::new())
    }

    pub(crate) fn check(&self, p: &mut crate::Problems) {
        self.schedule.expression("drill_schedule.schedule", p);
        if let Err(Invalid(problems)) = self.drill.validate() {
            for e in problems {
                p.push(
                    format!("drill_schedule.drill.{}", e.field),
                    e.code,
                    e.message,
                );
            }
        }
        if let Some(t) = &self.drill.instance_type
            && crate::catalog::lookup(t).is_none()
        {
            p.push(
                "drill_schedule.drill.instance_type",
                Code::VALIDATION_INSTANCE_TYPE,
                format!("{t} is not in the instance catalog (GET /api/v1/platform/instance-types)"),
            );
        }
    }
}

/// What a drill plan carries beside the clone's spec: which drill it is,
/// and what the snapshot's records say its restore must show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillPlan {
    pub drill_id: String,
    /// The drill's record key (the source and a newest-first sort).
    pub drill_key: String,
    pub source_deployment_id: String,
    /// The indices the snapshot holds, by its record.
    pub indices: Vec<String>,
    /// Each index's document count around the snapshot, when Floe took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_counts: Option<BTreeMap<String, DocumentCount>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queries: Vec<DrillQuery>,
}

/// A drill plan's params: the clone it creates (with `restore_snapshot`
/// resolved) and the drill it runs on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillParams {
    pub spec: DeploymentSpec,
    pub drill: DrillPlan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DrillStatus {
    Running,
    Passed,
    Failed,
}

impl DrillStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DrillStatus::Running => "running",
            DrillStatus::Passed => "passed",
            DrillStatus::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    Passed,
    Failed,
    /// Not checked, and why is in `detail` (no counts were recorded).
    Skipped,
}

/// One check of a drill and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DrillCheck {
    /// `restored`, `green`, `document_count` or `query`.
    #[schema(example = "document_count")]
    pub check: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    pub outcome: CheckOutcome,
    #[schema(example = "1200 documents, recorded 1200 before and 1200 after the snapshot")]
    pub detail: String,
}

/// How long the drill took to get the data back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RecoveryTime {
    /// From the drill's start to all data recovered.
    pub total_millis: u64,
    /// From the drill's start to the restore's start: nodes started and
    /// joined, repository registered.
    pub provisioning_millis: u64,
    /// From the restore's start to its last shard recovered.
    pub recovery_millis: u64,
}

/// Where and why a drill failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DrillFailure {
    /// The plan step that failed.
    #[schema(example = "drill-verdict")]
    pub step: String,
    #[schema(example = "drill_check_failed")]
    pub failure_type: String,
    pub reason: String,
}

/// A drill as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DrillView {
    pub id: String,
    /// The deployment whose snapshot was drilled.
    pub deployment_id: String,
    pub status: DrillStatus,
    pub mode: RestoreMode,
    /// The snapshot restored (the source's newest success when it started).
    pub snapshot: String,
    pub repository: String,
    /// The short-lived clone the drill ran on (deleted when it ends).
    pub clone_deployment_id: String,
    /// The clone's plan: its steps are the drill's log.
    pub plan_id: String,
    pub started: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<DateTime<Utc>>,
    /// The recovery point: the snapshot's age when the drill started.
    pub recovery_point_seconds: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_time: Option<RecoveryTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_recovered: Option<u64>,
    /// Bytes recovered per second of recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_second: Option<u64>,
    #[serde(default)]
    pub checks: Vec<DrillCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<DrillFailure>,
}

/// A drill as stored: its view and its organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drill {
    pub org: String,
    /// The record's key (the source, then newest first).
    pub key: String,
    #[serde(flatten)]
    pub view: DrillView,
}

/// The step that judges the checks, after the one that makes them.
pub const CHECK_STEP: &str = "drill-check";
pub const VERDICT_STEP: &str = "drill-verdict";

/// An index as the restored cluster shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoredIndex {
    pub name: String,
    /// `green`, `yellow` or `red`.
    pub health: String,
    pub documents: u64,
}

/// A query check's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryAnswer {
    pub index: String,
    pub min_hits: u64,
    /// The hits counted, or why the search failed.
    pub hits: Result<u64, String>,
}

/// The checks of a drill: every index of the snapshot restored and green,
/// each count within what was recorded around the snapshot, each query
/// finding enough hits.
pub fn judge(
    plan: &DrillPlan,
    found: &[RestoredIndex],
    answers: &[QueryAnswer],
) -> Vec<DrillCheck> {
    let mut checks = Vec::new();
    for name in &plan.indices {
        let index = Some(name.clone());
        let Some(got) = found.iter().find(|i| &i.name == name) else {
            checks.push(DrillCheck {
                check: "restored".into(),
                index,
                outcome: CheckOutcome::Failed,
                detail: "the index is in the snapshot but not on the restored cluster".into(),
            });
            continue;
        };
        checks.push(DrillCheck {
            check: "green".into(),
            index: index.clone(),
            outcome: if got.health == "green" {
                CheckOutcome::Passed
            } else {
                CheckOutcome::Failed
            },
            detail: format!("health {}", got.health),
        });
        let counted = plan.document_counts.as_ref().map(|c| c.get(name));
        let (outcome, detail) = match counted {
            None => (
                CheckOutcome::Skipped,
                format!(
                    "{} documents; Floe did not take this snapshot, so no counts were recorded",
                    got.documents
                ),
            ),
            Some(None) => (
                CheckOutcome::Skipped,
                format!(
                    "{} documents; no count was recorded for this index",
                    got.documents
                ),
            ),
            Some(Some(c)) => {
                let low = c.after.map_or(c.before, |a| a.min(c.before));
                let high = c.after.map_or(c.before, |a| a.max(c.before));
                let within = (low..=high).contains(&got.documents);
                let recorded = match c.after {
                    Some(a) => format!("recorded {} before and {a} after the snapshot", c.before),
                    None => format!("recorded {} before the snapshot", c.before),
                };
                (
                    if within {
                        CheckOutcome::Passed
                    } else {
                        CheckOutcome::Failed
                    },
                    format!("{} documents, {recorded}", got.documents),
                )
            }
        };
        checks.push(DrillCheck {
            check: "document_count".into(),
            index,
            outcome,
            detail,
        });
    }
    for a in answers {
        let (outcome, detail) = match &a.hits {
            Ok(h) if *h >= a.min_hits => (
                CheckOutcome::Passed,
                format!("{h} hits, at least {} wanted", a.min_hits),
            ),
            Ok(h) => (
                CheckOutcome::Failed,
                format!("{h} hits, at least {} wanted", a.min_hits),
            ),
            Err(e) => (CheckOutcome::Failed, format!("the search failed: {e}")),
        };
        checks.push(DrillCheck {
            check: "query".into(),
            index: Some(a.index.clone()),
            outcome,
            detail,
        });
    }
    checks
}

/// The first failed check, said as a reason that names its index.
pub fn failed_reason(checks: &[DrillCheck]) -> Option<String> {
    let failed: Vec<&DrillCheck> = checks
        .iter()
        .filter(|c| c.outcome == CheckOutcome::Failed)
        .collect();
    let first = failed.first()?;
    let more = match failed.len() {
        1 => String::new(),
        n => format!(" ({} more checks failed)", n - 1),
    };
    Some(format!(
        "{} check failed on index {}: {}{more}",
        first.check,
        first.index.as_deref().unwrap_or("-"),
        first.detail
    ))
}

/// The smallest clone a snapshot of `size_bytes` restores onto: one node
/// holding every role, its disk the data and half as much again (merges
/// and the disk watermarks need room), in the source's family unless the
/// caller named an instance type. Restored indices get no replicas there.
pub fn clone_groups(
    source: &DeploymentSpec,
    instance_type: Option<&str>,
    size_bytes: u64,
) -> Vec<NodeGroup> {
    let family_of_data = source
        .node_groups
        .iter()
        .find(|g| g.roles.iter().any(NodeRole::is_data))
        .or(source.node_groups.first())
        .map(|g| g.instance_type.as_str())
        .and_then(crate::catalog::lookup)
        .map(|t| t.family);
    let smallest = family_of_data.and_then(|family| {
        crate::catalog::all()
            .iter()
            .filter(|t| t.family == family)
            .min_by_key(|t| (t.memory_mib, t.vcpus))
    });
    let instance_type = instance_type
        .map(str::to_string)
        .or_else(|| smallest.map(|t| t.name.to_string()))
        .unwrap_or_else(|| {
            source
                .node_groups
                .first()
                .map(|g| g.instance_type.clone())
                .unwrap_or_default()
        });
    let needed_gb = (size_bytes.saturating_mul(3) / 2).div_ceil(1_000_000_000);
    let size_gb = u32::try_from(needed_gb)
        .unwrap_or(u32::MAX)
        .clamp(10, 16_384);
    vec![NodeGroup {
        id: "drill".into(),
        roles: vec![
            NodeRole::Master,
            NodeRole::DataHot,
            NodeRole::DataContent,
            NodeRole::Ingest,
        ],
        instance_type,
        count: 1,
        zone_count: 1,
        storage: Storage {
            size_gb,
            volume_type: VolumeType::default(),
            iops: None,
            throughput: None,
        },
        shared_cache: None,
    }]
}

/// The clone's name: the source's, marked as a drill's, within the 63
/// characters a name may have.
pub fn clone_name(source_name: &str) -> String {
    let mut base: String = source_name.chars().take(63 - "drill-".len()).collect();
    while base.ends_with('-') {
        base.pop();
    }
    format!("drill-{base}")
}

/// The drill as its plan left it: status, measures and checks read off the
/// steps. A drill whose plan has not finished is still running.
pub fn settle(drill: &DrillView, plan: &Plan) -> DrillView {
    let mut next = drill.clone();
    if !plan.status.is_finished() {
        return next;
    }
    next.finished = plan.finished.or(Some(plan.updated));
    let step = |id: &str| plan.steps.iter().find(|s| s.step_id == id);
    let ended = |s: &crate::plan::StepRecord| {
        s.started.map(|t| {
            t + chrono::Duration::milliseconds(
                i64::try_from(s.duration_in_millis.unwrap_or(0)).unwrap_or(i64::MAX),
            )
        })
    };
    let restore = step("restore").or_else(|| step("mount"));
    let restored = step("wait-restored")
        .filter(|s| s.status == StepStatus::Succeeded || s.status == StepStatus::Undone);
    if let (Some(r), Some(w)) = (restore, restored)
        && let (Some(r_start), Some(w_end)) = (r.started, ended(w))
    {
        let millis = |a: DateTime<Utc>, b: DateTime<Utc>| {
            u64::try_from((b - a).num_milliseconds()).unwrap_or(0)
        };
        let recovery = millis(r_start, w_end);
        let provisioning = millis(drill.started, r_start);
        next.recovery_time = Some(RecoveryTime {
            total_millis: provisioning + recovery,
            provisioning_millis: provisioning,
            recovery_millis: recovery,
        });
        let bytes = w.output.get("bytes_recovered").and_then(|b| b.as_u64());
        next.bytes_recovered = bytes;
        // No rate from a recovery too quick to time.
        next.bytes_per_second = bytes.and_then(|b| b.saturating_mul(1000).checked_div(recovery));
    }
    if let Some(c) = step(CHECK_STEP)
        && let Some(checks) = c.output.get("checks")
        && let Ok(checks) = serde_json::from_value::<Vec<DrillCheck>>(checks.clone())
    {
        next.checks = checks;
    }
    if plan.status == PlanStatus::Succeeded {
        next.status = DrillStatus::Passed;
        return next;
    }
    next.status = DrillStatus::Failed;
    // The step that failed: the one still marked failed, else (its undo
    // ran since, and cleared its mark) the last one that ran: the steps
    // after it never started. A plan cancelled mid-way has no error.
    let failed = plan
        .steps
        .iter()
        .find(|s| s.status == StepStatus::Failed)
        .or_else(|| {
            plan.steps
                .iter()
                .rev()
                .find(|s| s.status != StepStatus::Pending)
        });
    next.failure = Some(match &plan.error {
        Some(e) => DrillFailure {
            step: failed.map(|s| s.step_id.clone()).unwrap_or_default(),
            failure_type: e.failure_type.clone(),
            reason: e.message.clone(),
        },
        None => DrillFailure {
            step: failed.map(|s| s.step_id.clone()).unwrap_or_default(),
            failure_type: if plan.status == PlanStatus::Cancelled {
                "cancelled".into()
            } else {
                "failed".into()
            },
            reason: format!("the drill's plan ended {}", plan.status.as_str()),
        },
    });
    next
}

/// What the operator expects of a restore, as Elasticsearch time values
/// (`15m`, `1d`): judged against the last drill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoveryTargets {
    /// The oldest a restored snapshot may be when the drill starts (the
    /// data a restore then would lose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "1d")]
    pub recovery_point: Option<String>,
    /// The longest a drill may take from its start to all data recovered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "30m")]
    pub recovery_time: Option<String>,
}

impl RecoveryTargets {
    pub(crate) fn check(&self, p: &mut crate::Problems) {
        for (field, value) in [
            ("recovery_targets.recovery_point", &self.recovery_point),
            ("recovery_targets.recovery_time", &self.recovery_time),
        ] {
            if let Some(v) = value {
                let parsed = crate::timevalue::parse_time_value(v).and_then(|d| {
                    if d.is_zero() {
                        Err("must be more than 0".to_string())
                    } else {
                        Ok(d)
                    }
                });
                p.check(field, Code::VALIDATION_TIME_VALUE, parsed.map(|_| ()));
            }
        }
    }

    fn millis(v: Option<&String>) -> Option<u64> {
        v.and_then(|s| crate::timevalue::parse_time_value(s).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// The recovery point target, when one is set.
    pub fn recovery_point(&self) -> Option<std::time::Duration> {
        self.recovery_point
            .as_deref()
            .and_then(|s| crate::timevalue::parse_time_value(s).ok())
    }

    /// The recovery time target, when one is set.
    pub fn recovery_time(&self) -> Option<std::time::Duration> {
        self.recovery_time
            .as_deref()
            .and_then(|s| crate::timevalue::parse_time_value(s).ok())
    }
}

/// A deployment's last drill, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LastDrill {
    pub id: String,
    pub status: DrillStatus,
    pub snapshot: String,
    pub started: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<DateTime<Utc>>,
    /// The snapshot's age when the drill started.
    pub recovery_point_seconds: u64,
    /// From the drill's start to all data recovered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_time_millis: Option<u64>,
    /// Why it failed, with the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl LastDrill {
    pub fn of(d: &DrillView) -> LastDrill {
        LastDrill {
            id: d.id.clone(),
            status: d.status,
            snapshot: d.snapshot.clone(),
            started: d.started,
            finished: d.finished,
            recovery_point_seconds: d.recovery_point_seconds,
            recovery_time_millis: d.recovery_time.map(|t| t.total_millis),
            failure: d
                .failure
                .as_ref()
                .map(|f| format!("{}: {}", f.step, f.reason)),
        }
    }
}

/// A deployment's recovery, as its view shows it: apart from the
/// cluster's `healthy`, and never a cause of a heal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RecoveryView {
    /// False when the last drill failed, or its recovery point or time
    /// exceeded a target.
    pub healthy: bool,
    /// Why not, one line per cause.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Absent before the first drill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_drill: Option<LastDrill>,
    /// The current recovery point: the newest successful snapshot, as the
    /// health check (each minute) last found it. A restore now would lose
    /// what was written after its `end`. Absent before the first one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point: Option<crate::health::RecoveryPoint>,
}

impl RecoveryView {
    /// The recovery a deployment with `targets`, `last` drill and health
    /// check findings shows; none before its first drill and snapshot when
    /// it sets no targets.
    pub fn of(
        targets: Option<&RecoveryTargets>,
        last: Option<&LastDrill>,
        health: Option<&crate::health::Health>,
    ) -> Option<RecoveryView> {
        let recovery_point = health.and_then(|h| h.recovery_point.clone());
        let mut reasons = Vec::new();
        if let Some(since) = health.and_then(|h| h.recovery_point_breached) {
            let target = targets
                .and_then(|t| t.recovery_point.clone())
                .unwrap_or_default();
            reasons.push(crate::health::RecoveryPoint::breach(
                recovery_point.as_ref(),
                &target,
                since,
            ));
        }
        let Some(drill) = last else {
            if targets.is_some() {
                reasons.push("no restore drill has run yet".into());
            } else if recovery_point.is_none() && reasons.is_empty() {
                return None;
            }
            return Some(RecoveryView {
                healthy: reasons.is_empty(),
                reasons,
                last_drill: None,
                recovery_point,
            });
        };
        match drill.status {
            DrillStatus::Failed => reasons.push(format!(
                "the last drill failed{}",
                drill
                    .failure
                    .as_ref()
                    .map(|f| format!(" at {f}"))
                    .unwrap_or_default()
            )),
            DrillStatus::Running | DrillStatus::Passed => {}
        }
        if let Some(target) =
            targets.and_then(|t| RecoveryTargets::millis(t.recovery_time.as_ref()))
            && let Some(took) = drill.recovery_time_millis
            && took > target
        {
            reasons.push(format!(
                "the last drill recovered the data in {took} ms, longer than the recovery time target of {}",
                targets.and_then(|t| t.recovery_time.clone()).unwrap_or_default()
            ));
        }
        if let Some(target) =
            targets.and_then(|t| RecoveryTargets::millis(t.recovery_point.as_ref()))
            && drill.recovery_point_seconds.saturating_mul(1000) > target
        {
            reasons.push(format!(
                "the last drill restored a snapshot {} s old, older than the recovery point target of {}",
                drill.recovery_point_seconds,
                targets.and_then(|t| t.recovery_point.clone()).unwrap_or_default()
            ));
        }
        Some(RecoveryView {
            healthy: reasons.is_empty(),
            reasons,
            last_drill: Some(drill.clone()),
            recovery_point,
        })
    }
}

#[cfg(test)]
mod tests;
