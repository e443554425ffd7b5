//! The EventBridge Scheduler adapter of the scheduler port: one schedule
//! per snapshot policy attachment, all in one schedule group, each invoking
//! the snapshotter function with a `SnapshotJob` as its input; and one per
//! deployment's drill schedule, sending `{"drill": {...}}` to the work
//! queue, whose worker starts the drill.
//!
//! This is the only crate that links `aws-sdk-scheduler`.
//!
//! Every schedule is written whole, with the same settings:
//! - the configured group; state `ENABLED`;
//! - `FlexibleTimeWindow` `OFF`: a snapshot policy names a time, and a
//!   window would let two deployments' snapshots drift apart unpredictably;
//! - `ScheduleExpressionTimezone` from the policy (UTC for rates);
//! - target: the snapshotter's ARN (the work queue's for a drill), the role
//!   the scheduler assumes to invoke it, the job as JSON input, a retry
//!   policy and the dead-letter queue;
//! - a description naming the organization, deployment and policy (or
//!   drill), because the name is a hash (see `floe_schedules::names`).
//!
//! Retry policy: at most [`RetrySettings::default`]'s 10 attempts within one
//! hour. The scheduler invokes the function asynchronously, so it only
//! retries failed deliveries (throttling, service errors), never a failed
//! snapshot (the snapshotter handles that). A delivery more than an hour late
//! no longer matches the time the user scheduled and would overlap the next
//! run of frequent policies; it goes to the dead-letter queue instead, where
//! the miss is visible and alarmed on.

use async_trait::async_trait;
use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::config::http::HttpResponse;
use aws_sdk_scheduler::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput;
use aws_sdk_scheduler::types::{
    DeadLetterConfig, FlexibleTimeWindow, FlexibleTimeWindowMode, RetryPolicy, ScheduleState,
    Target,
};
use floe_aws_errors::{AwsFailure, Class};
use floe_ports::scheduler::{
    ExistingSchedule, ScheduleSpec, ScheduledJob, Scheduler, SchedulerError,
};

/// Every SDK operation this crate calls, as IAM actions. The role that
/// reconciles (the worker's) also needs `iam:PassRole` on the scheduler's
/// role: see [`PASS_ROLE_ACTION`].
pub const OPERATIONS: &[&str] = &[
    "scheduler:CreateSchedule",
    "scheduler:UpdateSchedule",
    "scheduler:DeleteSchedule",
    "scheduler:ListSchedules",
    "scheduler:GetSchedule",
];

/// Creating or updating a schedule hands the scheduler a role to assume,
/// which IAM checks as a pass of that role by the caller. It is not an SDK
/// call, so it is kept apart from [`OPERATIONS`].
pub const PASS_ROLE_ACTION: &str = "iam:PassRole";

/// The largest page ListSchedules returns.
const PAGE_SIZE: i32 = 100;

/// What EventBridge Scheduler does when it cannot deliver a firing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    /// 0–185.
    pub max_attempts: i32,
    /// 60–86400.
    pub max_event_age_secs: i32,
}

impl Default for RetrySettings {
    fn default() -> RetrySettings {
        RetrySettings {
            max_attempts: 10,
            max_event_age_secs: 3600,
        }
    }
}

/// Where schedules live and what they invoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSchedulerConfig {
    /// The schedule group (created by the deploy template).
    pub group: String,
    /// The snapshotter function's ARN.
    pub target_arn: String,
    /// The role EventBridge Scheduler assumes to invoke the target
    /// (`lambda:InvokeFunction` on it, `sqs:SendMessage` on the DLQ).
    pub role_arn: String,
    /// The SQS queue that receives firings that could not be delivered.
    pub dead_letter_arn: String,
    /// The work queue's ARN, where drill schedules send their job (the
    /// role needs `sqs:SendMessage` on it). Without it a drill schedule
    /// cannot be written, and reconciling says so.
    pub drill_target_arn: Option<String>,
    pub retry: RetrySettings,
}

impl AwsSchedulerConfig {
    pub fn new(
        group: impl Into<String>,
        target_arn: impl Into<String>,
        role_arn: impl Into<String>,
        dead_letter_arn: impl Into<String>,
    ) -> AwsSchedulerConfig {
        AwsSchedulerConfig {
            group: group.into(),
            target_arn: target_arn.into(),
            role_arn: role_arn.into(),
            dead_letter_arn: dead_letter_arn.into(),
            drill_target_arn: None,
            retry: RetrySettings::default(),
        }
    }

    /// Drill schedules send their job to the queue `arn`.
    pub fn with_drill_target(mut self, arn: impl Into<String>) -> AwsSchedulerConfig {
        self.drill_target_arn = Some(arn.into());
        self
    }

    /// Where a schedule carrying `job` delivers it.
    fn target_of(&self, job: &ScheduledJob) -> Result<&str, SchedulerError> {
        match job {
            ScheduledJob::Snapshot(_) => Ok(&self.target_arn),
            ScheduledJob::Drill { .. } => self.drill_target_arn.as_deref().ok_or_else(|| {
                SchedulerError::Failed(
                    "no drill target is configured (FLOE_WORK_QUEUE_ARN): drill schedules cannot be written"
                        .into(),
                )
            }),
        }
    }
}

/// The scheduler port on EventBridge Scheduler.
#[derive(Clone)]
pub struct AwsScheduler {
    client: Client,
    config: AwsSchedulerConfig,
}

// The client's configuration is left out: it holds the credentials provider.
impl std::fmt::Debug for AwsScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsScheduler")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AwsScheduler {
    /// Builds the client from the process's shared SDK configuration
    /// (`AWS_REGION`, the function role's credentials, `AWS_ENDPOINT_URL`...).
    pub fn new(sdk: &aws_config::SdkConfig, config: AwsSchedulerConfig) -> AwsScheduler {
        AwsScheduler {
            client: Client::new(sdk),
            config,
        }
    }

    pub fn config(&self) -> &AwsSchedulerConfig {
        &self.config
    }

    fn window() -> Result<FlexibleTimeWindow, SchedulerError> {
        FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| SchedulerError::Failed(format!("flexible time window: {e}")))
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::builder()
            .maximum_retry_attempts(self.config.retry.max_attempts)
            .maximum_event_age_in_seconds(self.config.retry.max_event_age_secs)
            .build()
    }

    fn target(&self, job: &ScheduledJob) -> Result<Target, SchedulerError> {
        let input = serde_json::to_string(job)
            .map_err(|e| SchedulerError::Failed(format!("the job cannot be encoded: {e}")))?;
        Target::builder()
            .arn(self.config.target_of(job)?)
            .role_arn(&self.config.role_arn)
            .input(input)
            .retry_policy(self.retry_policy())
            .dead_letter_config(
                DeadLetterConfig::builder()
                    .arn(&self.config.dead_letter_arn)
                    .build(),
            )
            .build()
            .map_err(|e| SchedulerError::Failed(format!("target: {e}")))
    }

    /// The spec a schedule stands for, if it is exactly what `put` writes.
    fn read_back(&self, name: &str, got: &GetScheduleOutput) -> Option<ScheduleSpec> {
        let target = got.target()?;
        let ours = got.state() == Some(&ScheduleState::Enabled)
            && got
                .flexible_time_window()
                .is_some_and(|w| *w.mode() == FlexibleTimeWindowMode::Off)
            && target.role_arn() == self.config.role_arn
            && target.retry_policy() == Some(&self.retry_policy())
            && target.dead_letter_config().and_then(|d| d.arn())
                == Some(self.config.dead_letter_arn.as_str());
        if !ours {
            return None;
        }
        let input: ScheduledJob = serde_json::from_str(target.input()?).ok()?;
        // A job delivered anywhere but where `put` sends its kind is not ours.
        if self.config.target_of(&input).ok()? != target.arn() {
            return None;
        }
        Some(ScheduleSpec {
            name: name.to_string(),
            expression: got.schedule_expression()?.to_string(),
            // The service reports UTC when none was given; we always give one.
            timezone: got
                .schedule_expression_timezone()
                .unwrap_or("UTC")
                .to_string(),
            input,
        })
    }

    async fn names_with_prefix(&self, prefix: &str) -> Result<Vec<String>, SchedulerError> {
        let mut names = Vec::new();
        let mut next_token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_schedules()
                .group_name(&self.config.group)
                .name_prefix(prefix)
                .max_results(PAGE_SIZE)
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(|e| classify("ListSchedules", prefix, e))?;
            // Filtered here too: a foreign schedule must never be deleted,
            // and moto documents NamePrefix as not implemented.
            names.extend(
                page.schedules()
                    .iter()
                    .filter_map(|s| s.name())
                    .filter(|n| n.starts_with(prefix))
                    .map(str::to_string),
            );
            match page.next_token() {
                Some(token) if !token.is_empty() => next_token = Some(token.to_string()),
                _ => return Ok(names),
            }
        }
    }
}

fn description(job: &ScheduledJob) -> String {
    match job {
        ScheduledJob::Snapshot(job) => format!(
            "Floe snapshot policy {} of deployment {} (organization {})",
            job.policy_id, job.deployment_id, job.org
        ),
        ScheduledJob::Drill { drill } => format!(
            "Floe restore drill of deployment {} (organization {})",
            drill.deployment_id, drill.org
        ),
    }
}

fn is_code<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>, code: &str) -> bool {
    matches!(e, SdkError::ServiceError(s) if s.err().code() == Some(code))
}

/// Sorts an SDK failure into the port's error kinds.
fn classify<E>(operation: &str, name: &str, e: SdkError<E, HttpResponse>) -> SchedulerError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let failure = AwsFailure::from_sdk(format_args!("{operation} {name}"), &e);
    let class = failure.classify(|code| (code == "ValidationException").then_some(()));
    let message = failure.into_message();
    match class {
        Class::Known(()) => SchedulerError::Rejected {
            name: name.to_string(),
            message,
        },
        class if class.is_transient() == Some(true) => SchedulerError::Transient(message),
        _ => SchedulerError::Failed(message),
    }
}

#[async_trait]
impl Scheduler for AwsScheduler {
    async fn put(&self, spec: &ScheduleSpec) -> Result<(), SchedulerError> {
        let target = self.target(&spec.input)?;
        let created = self
            .client
            .create_schedule()
            .name(&spec.name)
            .group_name(&self.config.group)
            .description(description(&spec.input))
            .schedule_expression(&spec.expression)
            .schedule_expression_timezone(&spec.timezone)
            .flexible_time_window(Self::window()?)
            .state(ScheduleState::Enabled)
            .target(target.clone())
            .send()
            .await;
        match created {
            Ok(_) => {
                tracing::debug!(schedule = %spec.name, "schedule created");
                return Ok(());
            }
            Err(e) if is_code(&e, "ConflictException") => {}
            Err(e) => return Err(classify("CreateSchedule", &spec.name, e)),
        }
        // UpdateSchedule replaces every setting, so it gets all of them.
        self.client
            .update_schedule()
            .name(&spec.name)
            .group_name(&self.config.group)
            .description(description(&spec.input))
            .schedule_expression(&spec.expression)
            .schedule_expression_timezone(&spec.timezone)
            .flexible_time_window(Self::window()?)
            .state(ScheduleState::Enabled)
            .target(target)
            .send()
            .await
            .map_err(|e| {
                if is_code(&e, "ResourceNotFoundException") {
                    // Deleted between the two calls: the next run creates it.
                    SchedulerError::Transient(format!(
                        "UpdateSchedule {}: the schedule was deleted meanwhile",
                        spec.name
                    ))
                } else {
                    classify("UpdateSchedule", &spec.name, e)
                }
            })?;
        tracing::debug!(schedule = %spec.name, "schedule updated");
        Ok(())
    }

    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        match self
            .client
            .delete_schedule()
            .name(name)
            .group_name(&self.config.group)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, "ResourceNotFoundException") => Ok(()),
            Err(e) => Err(classify("DeleteSchedule", name, e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ExistingSchedule>, SchedulerError> {
        // ListSchedules reports names and states only; the expression,
        // target and input take one GetSchedule each. A deployment has a
        // handful of policies, so this stays a few calls.
        let mut found = Vec::new();
        for name in self.names_with_prefix(prefix).await? {
            match self
                .client
                .get_schedule()
                .name(&name)
                .group_name(&self.config.group)
                .send()
                .await
            {
                Ok(got) => found.push(ExistingSchedule {
                    spec: self.read_back(&name, &got),
                    name,
                }),
                // Deleted since it was listed: it is gone, as wanted or not.
                Err(e) if is_code(&e, "ResourceNotFoundException") => {}
                Err(e) => return Err(classify("GetSchedule", &name, e)),
            }
        }
        Ok(found)
    }
}
