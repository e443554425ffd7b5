//! The reconciliation scenario every [`Scheduler`] adapter must pass, run by
//! this crate's tests against [`crate::LocalScheduler`] and by
//! `floe-scheduler-aws`'s against EventBridge Scheduler on moto, plus the
//! fault-injecting wrapper it uses. Test support: it asserts, and each run
//! works in a fresh organization so that runs can share a schedule group.

use crate::names::deployment_prefix;
use crate::port::{
    DrillJob, ExistingSchedule, ScheduleSpec, ScheduledJob, Scheduler, SchedulerError, SnapshotJob,
};
use crate::reconcile::{ReconcileError, ReconcileSummary, reconcile_deployment, reconcile_policy};
use async_trait::async_trait;
use chrono::Utc;
use floe_domain::deployment::{
    Deployment, DeploymentSpec, DeploymentStatus, Metadata, NodeGroup, NodeRole,
    SnapshotAttachment, Storage, VolumeType,
};
use floe_domain::drill::{DrillRequest, DrillSchedule};
use floe_domain::names::new_resource_id;
use floe_domain::plan::{Plan, PlanParams};
use floe_domain::policy::{Policy, PolicySpec, Schedule};
use floe_domain::repository::{FsSettings, Repository, RepositorySettings};
use floe_store::{Store, Versioned};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

pub type ScenarioResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Wraps a scheduler and fails its n-th write (`put` or `delete`, counted
/// from 1) with a transient error, without passing it on.
pub struct FailingWrite<S> {
    inner: S,
    fail_at: usize,
    writes: AtomicUsize,
}

impl<S> FailingWrite<S> {
    pub fn new(inner: S, fail_at: usize) -> FailingWrite<S> {
        FailingWrite {
            inner,
            fail_at,
            writes: AtomicUsize::new(0),
        }
    }

    fn should_fail(&self) -> bool {
        self.writes.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at
    }
}

#[async_trait]
impl<S: Scheduler> Scheduler for FailingWrite<S> {
    async fn put(&self, spec: &ScheduleSpec) -> Result<(), SchedulerError> {
        if self.should_fail() {
            return Err(SchedulerError::Transient("injected failure".into()));
        }
        self.inner.put(spec).await
    }

    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        if self.should_fail() {
            return Err(SchedulerError::Transient("injected failure".into()));
        }
        self.inner.delete(name).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ExistingSchedule>, SchedulerError> {
        self.inner.list(prefix).await
    }
}

/// An organization no other run uses.
pub fn fresh_org() -> String {
    format!("sched-{}", &new_resource_id()[16..])
}

pub fn repository(org: &str, name: &str) -> Repository {
    let now = Utc::now();
    Repository {
        org: org.into(),
        name: name.into(),
        settings: RepositorySettings::Fs(FsSettings {
            location: format!("/snapshots/{name}"),
            compress: None,
            max_snapshot_bytes_per_sec: None,
            max_restore_bytes_per_sec: None,
        }),
        created: now,
        updated: now,
    }
}

/// A policy with an interval (`"30m"`) or a cron and time zone, its
/// EventBridge expression derived by the domain as the API derives it.
pub fn policy(
    org: &str,
    repository: &str,
    schedule: Schedule,
) -> Result<Policy, Box<dyn std::error::Error + Send + Sync>> {
    let spec = PolicySpec {
        name: "scheduled".into(),
        schedule,
        snapshot_name: "<floe-{now/d}>".into(),
        repository: repository.into(),
        indices: vec![],
        include_global_state: true,
        retention: None,
        enabled: true,
    };
    let schedule_expression = spec
        .validate_spec()
        .map_err(|e| format!("invalid test policy: {e:?}"))?;
    let now = Utc::now();
    Ok(Policy {
        id: new_resource_id(),
        org: org.into(),
        spec,
        schedule_expression,
        created: now,
        updated: now,
    })
}

pub fn interval(every: &str) -> Schedule {
    Schedule {
        interval: Some(every.into()),
        cron: None,
        timezone: None,
    }
}

pub fn cron(expression: &str, timezone: &str) -> Schedule {
    Schedule {
        interval: None,
        cron: Some(expression.into()),
        timezone: Some(timezone.into()),
    }
}

/// A deployment with its create plan, in `status`, attaching `policies`.
pub fn deployment(org: &str, status: DeploymentStatus, policies: &[&str]) -> (Deployment, Plan) {
    let now = Utc::now();
    let id = new_resource_id();
    let spec = DeploymentSpec {
        recovery_targets: None,
        drill_schedule: None,
        name: format!("d-{}", &id[24..]),
        version: "8.15.3".into(),
        node_groups: vec![NodeGroup {
            id: "hot".into(),
            roles: vec![NodeRole::Master, NodeRole::DataHot],
            instance_type: "m6g.xlarge".into(),
            count: 1,
            zone_count: 1,
            storage: Storage {
                size_gb: 100,
                volume_type: VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            shared_cache: None,
        }],
        user_settings: BTreeMap::new(),
        snapshot: Some(SnapshotAttachment {
            repository: None,
            policies: policies.iter().map(|p| p.to_string()).collect(),
        }),
        metadata: Metadata::default(),
        restore_snapshot: None,
    };
    let plan = Plan::new(
        org,
        &id,
        PlanParams::Create(spec.clone()),
        "deployments.create",
        "tester",
        now,
    );
    let deployment = Deployment {
        last_drill: None,
        id,
        org: org.into(),
        spec,
        status,
        pending_plan: None,
        access: None,
        password_to_apply: None,
        endpoint: None,
        endpoint_moving_to: None,
        clone_source: None,
        health: None,
        created: now,
        updated: now,
        license: None,
    };
    (deployment, plan)
}

/// Stores a changed copy of the deployment and returns it as now stored.
pub async fn change_deployment(
    store: &Store,
    current: &Versioned<Deployment>,
    change: impl FnOnce(&mut Deployment),
) -> Result<Versioned<Deployment>, Box<dyn std::error::Error + Send + Sync>> {
    let mut next = current.value.clone();
    change(&mut next);
    store.replace_deployment(&next, current, None).await?;
    Ok(store
        .get_deployment(&next.org, &next.id)
        .await?
        .ok_or("the deployment vanished")?)
}

pub async fn change_policy(
    store: &Store,
    current: &Versioned<Policy>,
    change: impl FnOnce(&mut Policy),
) -> Result<Versioned<Policy>, Box<dyn std::error::Error + Send + Sync>> {
    let mut next = current.value.clone();
    change(&mut next);
    store.replace_policy(&next, current).await?;
    Ok(store
        .get_policy(&next.org, &next.id)
        .await?
        .ok_or("the policy vanished")?)
}

/// The deployment's schedules, sorted by name, as the scheduler reports them.
pub async fn schedules_of(
    scheduler: &dyn Scheduler,
    org: &str,
    deployment_id: &str,
) -> Result<Vec<ExistingSchedule>, SchedulerError> {
    let mut listed = scheduler
        .list(&deployment_prefix(org, deployment_id))
        .await?;
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listed)
}

/// (expression, timezone, policy id or `drill`) of each schedule, sorted;
/// fails on a schedule the adapter could not read back as its own.
async fn timings(
    scheduler: &dyn Scheduler,
    org: &str,
    deployment_id: &str,
) -> Result<Vec<(String, String, String)>, Box<dyn std::error::Error + Send + Sync>> {
    let mut out = Vec::new();
    for s in schedules_of(scheduler, org, deployment_id).await? {
        let spec = s
            .spec
            .ok_or_else(|| format!("schedule {} does not read back as written", s.name))?;
        if spec.name != s.name {
            return Err(format!("schedule {} reads back as {}", s.name, spec.name).into());
        }
        if spec.input.org() != org || spec.input.deployment_id() != deployment_id {
            return Err(format!("schedule {} carries {:?}", s.name, spec.input).into());
        }
        let what = match spec.input {
            ScheduledJob::Snapshot(job) => job.policy_id,
            ScheduledJob::Drill { .. } => "drill".to_string(),
        };
        out.push((spec.expression, spec.timezone, what));
    }
    out.sort();
    Ok(out)
}

fn summary(created: usize, updated: usize, deleted: usize, unchanged: usize) -> ReconcileSummary {
    ReconcileSummary {
        created,
        updated,
        deleted,
        unchanged,
    }
}

fn timing(expression: &str, timezone: &str, policy: &Policy) -> (String, String, String) {
    (expression.into(), timezone.into(), policy.id.clone())
}

/// Attach, attach a second, rerun, disable, change, re-enable, detach,
/// status changes, delete, and a partial failure that a rerun repairs.
pub async fn reconciliation_scenario(store: &Store, scheduler: &dyn Scheduler) -> ScenarioResult {
    let org = fresh_org();
    store.create_repository(&repository(&org, "main")).await?;
    let every_30m = policy(&org, "main", interval("30m"))?;
    let nightly = policy(&org, "main", cron("0 30 1 * * ?", "Europe/Berlin"))?;
    store.create_policy(&every_30m).await?;
    store.create_policy(&nightly).await?;

    let (d, plan) = deployment(&org, DeploymentStatus::Running, &[&every_30m.id]);
    store.create_deployment(&d, &plan, None).await?;
    let (other, plan) = deployment(&org, DeploymentStatus::Running, &[&every_30m.id]);
    store.create_deployment(&other, &plan, None).await?;

    // Attach one policy: one schedule, carrying the job.
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &d.id).await?,
        summary(1, 0, 0, 0)
    );
    assert_eq!(
        timings(scheduler, &org, &d.id).await?,
        vec![timing("rate(30 minutes)", "UTC", &every_30m)]
    );
    let listed = schedules_of(scheduler, &org, &d.id).await?;
    assert_eq!(
        listed
            .first()
            .and_then(|s| s.spec.as_ref())
            .map(|s| &s.input),
        Some(&ScheduledJob::Snapshot(SnapshotJob {
            org: org.clone(),
            deployment_id: d.id.clone(),
            policy_id: every_30m.id.clone(),
        }))
    );
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &other.id).await?,
        summary(1, 0, 0, 0)
    );

    // Attach a second: two schedules, each in its own time zone.
    let mut current = store
        .get_deployment(&org, &d.id)
        .await?
        .ok_or("deployment missing")?;
    current = change_deployment(store, &current, |d| {
        d.spec.snapshot = Some(SnapshotAttachment {
            repository: None,
            policies: vec![every_30m.id.clone(), nightly.id.clone()],
        });
    })
    .await?;
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &d.id).await?,
        summary(1, 0, 0, 1)
    );
    let both = {
        let mut v = vec![
            timing("cron(30 1 * * ? *)", "Europe/Berlin", &nightly),
            timing("rate(30 minutes)", "UTC", &every_30m),
        ];
        v.sort();
        v
    };
    assert_eq!(timings(scheduler, &org, &d.id).await?, both);

    // Rerun: nothing to do.
    let rerun = reconcile_deployment(store, scheduler, &org, &d.id).await?;
    assert!(rerun.is_noop(), "{rerun:?}");
    assert_eq!(rerun.unchanged, 2);

    // Disable the nightly policy: its schedule goes, the other stays.
    let nightly_v = store
        .get_policy(&org, &nightly.id)
        .await?
        .ok_or("policy missing")?;
    let nightly_v = change_policy(store, &nightly_v, |p| p.spec.enabled = false).await?;
    assert_eq!(
        reconcile_policy(store, scheduler, &org, &nightly.id).await?,
        summary(0, 0, 1, 1)
    );
    assert_eq!(
        timings(scheduler, &org, &d.id).await?,
        vec![timing("rate(30 minutes)", "UTC", &every_30m)]
    );

    // Change the 30-minute policy to 15 minutes: both deployments using it
    // get the new expression.
    let every_v = store
        .get_policy(&org, &every_30m.id)
        .await?
        .ok_or("policy missing")?;
    let changed = policy(&org, "main", interval("15m"))?;
    change_policy(store, &every_v, |p| {
        p.spec.schedule = changed.spec.schedule.clone();
        p.schedule_expression = changed.schedule_expression.clone();
    })
    .await?;
    assert_eq!(
        reconcile_policy(store, scheduler, &org, &every_30m.id).await?,
        summary(0, 2, 0, 0)
    );
    for id in [&d.id, &other.id] {
        assert_eq!(
            timings(scheduler, &org, id).await?,
            vec![timing("rate(15 minutes)", "UTC", &every_30m)]
        );
    }

    // Enable the nightly policy again.
    change_policy(store, &nightly_v, |p| p.spec.enabled = true).await?;
    assert_eq!(
        reconcile_policy(store, scheduler, &org, &nightly.id).await?,
        summary(1, 0, 0, 1)
    );

    // Detach the 15-minute policy.
    current = change_deployment(store, &current, |d| {
        d.spec.snapshot = Some(SnapshotAttachment {
            repository: None,
            policies: vec![nightly.id.clone()],
        });
    })
    .await?;
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &d.id).await?,
        summary(0, 0, 1, 1)
    );
    assert_eq!(
        timings(scheduler, &org, &d.id).await?,
        vec![timing("cron(30 1 * * ? *)", "Europe/Berlin", &nightly)]
    );

    // A drill schedule: one more schedule, carrying the drill job; a
    // changed one is rewritten; removed, it goes.
    let nightly_timing = timing("cron(30 1 * * ? *)", "Europe/Berlin", &nightly);
    let drill = |schedule: Schedule| DrillSchedule {
        schedule,
        drill: DrillRequest::default(),
    };
    current = change_deployment(store, &current, |d| {
        d.spec.drill_schedule = Some(drill(interval("7d")));
    })
    .await?;
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &d.id).await?,
        summary(1, 0, 0, 1)
    );
    let mut with_drill = vec![
        nightly_timing.clone(),
        ("rate(7 days)".into(), "UTC".into(), "drill".into()),
    ];
    with_drill.sort();
    assert_eq!(timings(scheduler, &org, &d.id).await?, with_drill);
    let drill_input = schedules_of(scheduler, &org, &d.id)
        .await?
        .into_iter()
        .filter_map(|s| s.spec)
        .map(|s| s.input)
        .find(|i| matches!(i, ScheduledJob::Drill { .. }));
    assert_eq!(
        drill_input,
        Some(ScheduledJob::Drill {
            drill: DrillJob {
                org: org.clone(),
                deployment_id: d.id.clone(),
            }
        })
    );
    current = change_deployment(store, &current, |d| {
        d.spec.drill_schedule = Some(drill(cron("0 0 3 ? * SUN", "Europe/Paris")));
    })
    .await?;
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &d.id).await?,
        summary(0, 1, 0, 1)
    );
    current = change_deployment(store, &current, |d| d.spec.drill_schedule = None).await?;
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &d.id).await?,
        summary(0, 0, 1, 1)
    );
    assert_eq!(timings(scheduler, &org, &d.id).await?, vec![nightly_timing]);

    // Reconfiguring keeps the schedules; stopping and stopped drop them;
    // running brings them back.
    let statuses = [
        (DeploymentStatus::Reconfiguring, summary(0, 0, 0, 1), 1),
        (DeploymentStatus::Stopping, summary(0, 0, 1, 0), 0),
        (DeploymentStatus::Stopped, summary(0, 0, 0, 0), 0),
        (DeploymentStatus::Failed, summary(0, 0, 0, 0), 0),
        (DeploymentStatus::Running, summary(1, 0, 0, 0), 1),
    ];
    for (status, expected, count) in statuses {
        current = change_deployment(store, &current, |d| d.status = status).await?;
        assert_eq!(
            reconcile_deployment(store, scheduler, &org, &d.id).await?,
            expected,
            "{status:?}"
        );
        assert_eq!(
            schedules_of(scheduler, &org, &d.id).await?.len(),
            count,
            "{status:?}"
        );
    }

    // Deleted: nothing left, and the other deployment keeps its schedule.
    store.delete_deployment(&current).await?;
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &d.id).await?,
        summary(0, 0, 1, 0)
    );
    assert!(schedules_of(scheduler, &org, &d.id).await?.is_empty());
    assert_eq!(schedules_of(scheduler, &org, &other.id).await?.len(), 1);

    // A deployment that never existed: nothing to do.
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &new_resource_id()).await?,
        summary(0, 0, 0, 0)
    );

    partial_failure_then_rerun(store, scheduler, &org, &[&every_30m, &nightly]).await?;

    // Leave the shared group as it was found.
    let other_v = store
        .get_deployment(&org, &other.id)
        .await?
        .ok_or("deployment missing")?;
    store.delete_deployment(&other_v).await?;
    assert_eq!(
        reconcile_deployment(store, scheduler, &org, &other.id).await?,
        summary(0, 0, 1, 0)
    );
    Ok(())
}

/// The second write fails: the first schedule is in place, the error says
/// what is missing, and a rerun converges.
async fn partial_failure_then_rerun(
    store: &Store,
    scheduler: &dyn Scheduler,
    org: &str,
    policies: &[&Policy],
) -> ScenarioResult {
    let ids: Vec<&str> = policies.iter().map(|p| p.id.as_str()).collect();
    let (d, plan) = deployment(org, DeploymentStatus::Running, &ids);
    store.create_deployment(&d, &plan, None).await?;

    let failing = FailingWrite::new(scheduler, 2);
    match reconcile_deployment(store, &failing, org, &d.id).await {
        Err(e @ ReconcileError::Incomplete { .. }) => {
            assert!(e.is_transient(), "{e}");
            let ReconcileError::Incomplete {
                summary: s,
                failures,
            } = e
            else {
                return Err("unreachable".into());
            };
            assert_eq!(s, summary(1, 0, 0, 0));
            assert_eq!(failures.len(), 1);
        }
        other => return Err(format!("expected a partial failure, got {other:?}").into()),
    }
    assert_eq!(schedules_of(scheduler, org, &d.id).await?.len(), 1);

    assert_eq!(
        reconcile_deployment(store, scheduler, org, &d.id).await?,
        summary(1, 0, 0, 1)
    );
    assert_eq!(timings(scheduler, org, &d.id).await?.len(), policies.len());
    assert!(
        reconcile_deployment(store, scheduler, org, &d.id)
            .await?
            .is_noop()
    );

    // A failed delete is repaired the same way.
    let current = store
        .get_deployment(org, &d.id)
        .await?
        .ok_or("deployment missing")?;
    store.delete_deployment(&current).await?;
    let failing = FailingWrite::new(scheduler, 1);
    let partial = reconcile_deployment(store, &failing, org, &d.id).await;
    assert!(
        matches!(&partial, Err(ReconcileError::Incomplete { summary: s, .. }) if *s == summary(0, 0, 1, 0)),
        "{partial:?}"
    );
    assert_eq!(schedules_of(scheduler, org, &d.id).await?.len(), 1);
    assert_eq!(
        reconcile_deployment(store, scheduler, org, &d.id).await?,
        summary(0, 0, 1, 0)
    );
    assert!(schedules_of(scheduler, org, &d.id).await?.is_empty());
    Ok(())
}
