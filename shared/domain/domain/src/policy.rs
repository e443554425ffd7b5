//! Snapshot policies: when to snapshot, what, where, and how long to keep it.

use crate::codes::Code;
use crate::names::validate_name;
use crate::schedule::{interval_to_rate, slm_cron_to_eventbridge, validate_timezone};
use crate::snapshot_name::validate_snapshot_name;
use crate::timevalue::parse_time_value;
use crate::validation::{Invalid, Problems};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use validator::Validate;

/// `{"interval":"30m"}` or `{"cron":"0 30 1 * * ?","timezone":"Europe/Berlin"}`:
/// exactly one of `interval` and `cron` (400 `validation.schedule` naming
/// `schedule` otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Elasticsearch time value, at least `1m` and whole minutes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::validation::text_not_null"
    )]
    #[schema(example = "30m")]
    pub interval: Option<String>,
    /// Elasticsearch SLM cron: `sec min hour day-of-month month day-of-week [year]`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::validation::text_not_null"
    )]
    #[schema(example = "0 30 1 * * ?")]
    pub cron: Option<String>,
    /// IANA time zone of `cron`; UTC when absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::validation::text_not_null"
    )]
    #[schema(example = "Europe/Berlin")]
    pub timezone: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// Elasticsearch time value, e.g. `30d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1, max = 10000))]
    #[schema(minimum = 1, maximum = 10000)]
    pub min_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1, max = 10000))]
    #[schema(minimum = 1, maximum = 10000)]
    pub max_count: Option<u32>,
}

fn yes() -> bool {
    true
}

/// What a client sends to create or replace a policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    #[schema(
        example = "every-30-minutes",
        pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
    )]
    pub name: String,
    pub schedule: Schedule,
    /// A snapshot name, or Elasticsearch date math such as `<nightly-{now/d}>`.
    #[schema(example = "<floe-{now/d}>")]
    pub snapshot_name: String,
    #[schema(
        example = "main-backups",
        pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
    )]
    pub repository: String,
    /// Index patterns; all indices when empty.
    #[serde(default)]
    #[validate(length(max = 100))]
    pub indices: Vec<String>,
    #[serde(default = "yes")]
    pub include_global_state: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(nested)]
    pub retention: Option<Retention>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// The schedule in EventBridge Scheduler's terms, derived once at write time
/// so that later readers (the schedule reconciler) never re-parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleExpression {
    /// `rate(30 minutes)` or `cron(30 1 * * ? *)`.
    #[schema(example = "rate(30 minutes)")]
    pub expression: String,
    #[schema(example = "UTC")]
    pub timezone: String,
}

impl PolicySpec {
    /// Validates the policy and derives its EventBridge Scheduler expression.
    pub fn validate_spec(&self) -> Result<ScheduleExpression, Invalid> {
        let mut p = Problems::new();
        if let Err(e) = Validate::validate(self) {
            p.extend_validator("", &e);
        }
        p.check("name", Code::VALIDATION_NAME, validate_name(&self.name));
        p.check(
            "repository",
            Code::VALIDATION_NAME,
            validate_name(&self.repository),
        );
        p.check(
            "snapshot_name",
            Code::VALIDATION_SNAPSHOT_NAME,
            validate_snapshot_name(&self.snapshot_name),
        );
        for (i, index) in self.indices.iter().enumerate() {
            p.check(
                format!("indices[{i}]"),
                Code::VALIDATION_INDEX_PATTERN,
                validate_index_pattern(index),
            );
        }
        let expression = self.schedule.expression("schedule", &mut p);
        if let Some(r) = &self.retention {
            if let Some(e) = &r.expire_after {
                p.check(
                    "retention.expire_after",
                    Code::VALIDATION_TIME_VALUE,
                    parse_time_value(e).map(|_| ()),
                );
            }
            if let (Some(min), Some(max)) = (r.min_count, r.max_count)
                && min > max
            {
                p.push(
                    "retention.min_count",
                    Code::VALIDATION_RANGE,
                    format!("must not exceed max_count ({max})"),
                );
            }
        }
        p.finish()?;
        expression.ok_or_else(|| Invalid::one("schedule", Code::VALIDATION_SCHEDULE, "is invalid"))
    }
}

impl Schedule {
    /// This schedule in EventBridge Scheduler's terms; its problems are
    /// named under `path` (`schedule`, `drill_schedule.schedule`).
    pub fn expression(&self, path: &str, p: &mut Problems) -> Option<ScheduleExpression> {
        let field = |name: &str| format!("{path}.{name}");
        match (&self.interval, &self.cron) {
            (Some(interval), None) => {
                if self.timezone.is_some() {
                    p.push(
                        field("timezone"),
                        Code::VALIDATION_NOT_ALLOWED,
                        "applies only to cron schedules",
                    );
                }
                match interval_to_rate(interval) {
                    Ok((expression, _)) => Some(ScheduleExpression {
                        expression,
                        timezone: "UTC".into(),
                    }),
                    Err(m) => {
                        p.push(field("interval"), Code::VALIDATION_INTERVAL, m);
                        None
                    }
                }
            }
            (None, Some(cron)) => {
                let timezone = self.timezone.clone().unwrap_or_else(|| "UTC".into());
                let tz_ok = match validate_timezone(&timezone) {
                    Ok(_) => true,
                    Err(m) => {
                        p.push(field("timezone"), Code::VALIDATION_TIMEZONE, m);
                        false
                    }
                };
                match slm_cron_to_eventbridge(cron) {
                    Ok(expression) if tz_ok => Some(ScheduleExpression {
                        expression,
                        timezone,
                    }),
                    Ok(_) => None,
                    Err(m) => {
                        p.push(field("cron"), Code::VALIDATION_CRON, m);
                        None
                    }
                }
            }
            (Some(_), Some(_)) => {
                p.push(
                    path,
                    Code::VALIDATION_SCHEDULE,
                    "give either interval or cron, not both",
                );
                None
            }
            (None, None) => {
                p.push(
                    path,
                    Code::VALIDATION_SCHEDULE,
                    "give an interval (e.g. 30m) or a cron expression",
                );
                None
            }
        }
    }
}

/// Index names and patterns as Elasticsearch accepts them in a snapshot's
/// `indices`: wildcards and `-` exclusions allowed, separators not.
pub fn validate_index_pattern(i: &str) -> Result<(), String> {
    if i.is_empty() || i.len() > 255 {
        return Err("must be 1 to 255 characters".into());
    }
    if i.chars().any(|c| {
        c.is_whitespace() || matches!(c, '\\' | '/' | '"' | '<' | '>' | '|' | ',' | '#' | '?')
    }) {
        return Err("must not contain white space or any of \\ / \" < > | , # ?".into());
    }
    if i.chars().any(|c| c.is_ascii_uppercase()) {
        return Err("must be lower case".into());
    }
    Ok(())
}

/// A policy as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub id: String,
    pub org: String,
    pub spec: PolicySpec,
    pub schedule_expression: ScheduleExpression,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyView {
    pub id: String,
    #[serde(flatten)]
    pub spec: PolicySpec,
    pub schedule_expression: ScheduleExpression,
    /// Deployments this policy is attached to.
    pub attached_deployments: u64,
    pub resource_version: u64,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
}

impl PolicyView {
    pub fn new(p: &Policy, version: u64, attached: u64) -> PolicyView {
        PolicyView {
            id: p.id.clone(),
            spec: p.spec.clone(),
            schedule_expression: p.schedule_expression.clone(),
            attached_deployments: attached,
            resource_version: version,
            created: p.created,
            updated: p.updated,
        }
    }
}
