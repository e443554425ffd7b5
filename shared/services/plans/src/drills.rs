//! A drill's record brought in step with its plan: written when the plan
//! ends (by the engine, as it removes the clone), and again by any reader
//! that finds the record still running behind a plan that has ended (the
//! engine's write lost to a crash). Either way the drilled deployment's
//! lock is released with it, so the next drill may start.
//!
//! The engine, as it finishes the plan (once), also tells the operators'
//! event bus: a drill that failed (`Floe Drill Failed`), and one that
//! passed but took longer than the deployment's recovery time target
//! (`Floe Recovery Target Breached`), whoever wrote the drill's end. A
//! worker that dies between finishing the plan and publishing loses the
//! event (the drill's record still says how it ended).

use floe_domain::deployment::Deployment;
use floe_domain::drill::{Drill, DrillFailure, DrillPlan, DrillStatus, LastDrill, settle};
use floe_domain::plan::Plan;
use floe_ports::{Events, PlatformEvent};
use floe_store::{Store, StoreError, Versioned};
use serde_json::json;

/// Writes the outcome of `plan`, a drill plan that has ended, onto its
/// drill's record, and publishes what it means to `events`. A failure is
/// logged: the next reader settles it.
pub async fn end(store: &Store, plan: &Plan, drill: &DrillPlan, events: &dyn Events) {
    let record = match store.get_drill(&plan.org, &drill.drill_key).await {
        Ok(Some(record)) => record,
        Ok(None) => {
            tracing::warn!(drill = %drill.drill_id, "a drill's plan ended, but its record is gone");
            return;
        }
        Err(e) => {
            tracing::warn!(drill = %drill.drill_id, error = %e, "cannot read a drill to record its outcome; its next reader will");
            return;
        }
    };
    match settle_record(store, record, Some(plan)).await {
        Ok(Settled {
            drill: d,
            here,
            deployment,
        }) => {
            tracing::info!(drill = %d.view.id, deployment = %d.view.deployment_id, status = d.view.status.as_str(), "drill ended");
            // The engine finishes a plan once, so it tells once, whoever
            // wrote the drill's end (a reader may have been first).
            let deployment = match (here, deployment) {
                (true, d) => d,
                (false, _) => store
                    .get_deployment(&d.org, &d.view.deployment_id)
                    .await
                    .ok()
                    .flatten()
                    .map(|v| v.value),
            };
            if d.view.status != DrillStatus::Running {
                for event in drill_events(&d, deployment.as_ref()) {
                    if let Err(e) = events.publish(&event).await {
                        tracing::warn!(drill = %d.view.id, error = %e, detail_type = event.detail_type, "drill event not published");
                    }
                }
            }
        }
        Err(e) => {
            tracing::warn!(drill = %drill.drill_id, error = %e, "cannot record a drill's outcome; its next reader will");
        }
    }
}

/// What a drill that ended means to the operators: its failure, or a
/// recovery time longer than its deployment's target.
pub fn drill_events(drill: &Drill, deployment: Option<&Deployment>) -> Vec<PlatformEvent> {
    let v = &drill.view;
    let mut events = Vec::new();
    if v.status == DrillStatus::Failed {
        events.push(PlatformEvent {
            detail_type: PlatformEvent::DRILL_FAILED,
            detail: json!({
                "org": drill.org,
                "deployment_id": v.deployment_id,
                "deployment_name": deployment.map(|d| d.spec.name.as_str()),
                "drill_id": v.id,
                "mode": v.mode,
                "snapshot": v.snapshot,
                "repository": v.repository,
                "started": v.started,
                "finished": v.finished,
                "failure": v.failure,
            }),
        });
    }
    let targets = deployment.and_then(|d| d.spec.recovery_targets.as_ref());
    let target = targets.and_then(|t| t.recovery_time.clone());
    let limit = targets.and_then(|t| t.recovery_time());
    if v.status == DrillStatus::Passed
        && let (Some(target), Some(limit), Some(took)) = (target, limit, &v.recovery_time)
        && u128::from(took.total_millis) > limit.as_millis()
    {
        events.push(PlatformEvent {
            detail_type: PlatformEvent::RECOVERY_TARGET_BREACHED,
            detail: json!({
                "org": drill.org,
                "deployment_id": v.deployment_id,
                "deployment_name": deployment.map(|d| d.spec.name.as_str()),
                "target": "recovery_time",
                "target_value": target,
                "recovery_time_millis": took.total_millis,
                "drill_id": v.id,
                "snapshot": v.snapshot,
                "reason": format!(
                    "drill {} recovered the data in {} ms, longer than the recovery time target of {target}",
                    v.id, took.total_millis
                ),
            }),
        });
    }
    events
}

/// A drill brought in step with its plan.
struct Settled {
    drill: Drill,
    /// Whether this call wrote its end (and no other writer did).
    here: bool,
    /// Its deployment's record as the end was recorded on it.
    deployment: Option<Deployment>,
}

/// The drill as its plan says it stands, written back (and its lock
/// released) when the plan has ended since the record was written.
/// `plan` is the drill's plan when the caller holds it; else it is read.
pub async fn settled(
    store: &Store,
    record: Versioned<Drill>,
    plan: Option<&Plan>,
) -> Result<Drill, StoreError> {
    Ok(settle_record(store, record, plan).await?.drill)
}

async fn settle_record(
    store: &Store,
    record: Versioned<Drill>,
    plan: Option<&Plan>,
) -> Result<Settled, StoreError> {
    let unchanged = |record: Versioned<Drill>| Settled {
        drill: record.value,
        here: false,
        deployment: None,
    };
    let drill = &record.value;
    if drill.view.status != DrillStatus::Running {
        return Ok(unchanged(record));
    }
    let read;
    let plan = match plan {
        Some(p) => Some(p),
        None => {
            read = store
                .get_plan(
                    &drill.org,
                    &drill.view.clone_deployment_id,
                    &drill.view.plan_id,
                )
                .await?;
            read.as_ref().map(|p| &p.value)
        }
    };
    let view = match plan {
        Some(p) => settle(&drill.view, p),
        // Its plan's record is gone (removed by hand): the drill cannot
        // have passed, and nothing will ever end it otherwise.
        None => {
            let mut v = drill.view.clone();
            v.status = DrillStatus::Failed;
            v.finished = Some(chrono::Utc::now());
            v.failure = Some(DrillFailure {
                step: String::new(),
                failure_type: "plan_missing".into(),
                reason: "the drill's plan record is gone".into(),
            });
            v
        }
    };
    if view.status == DrillStatus::Running {
        return Ok(unchanged(record));
    }
    let next = Drill {
        view,
        ..drill.clone()
    };
    // The deployment's record first: whoever sees the drill ended (its
    // record, or a free lock) then sees it as the deployment's last drill
    // too. Settling is deterministic, so a second settler writes the same.
    let deployment = keep_last_drill(store, &next).await;
    let lock = store
        .get_drill_lock(&drill.org, &drill.view.deployment_id)
        .await?;
    match store.end_drill(&next, record.version, lock.as_ref()).await {
        Ok(()) => Ok(Settled {
            drill: next,
            here: true,
            deployment,
        }),
        // Another writer settled it first: theirs is the record.
        Err(StoreError::VersionMismatch { .. } | StoreError::NotFound) => {
            let drill = match store.get_drill(&drill.org, &drill.key).await? {
                Some(now) => now.value,
                None => next,
            };
            Ok(Settled {
                drill,
                here: false,
                deployment: None,
            })
        }
        Err(e) => Err(e),
    }
}

/// How often a drill's end is tried on its deployment's record when other
/// writes keep moving it.
const LAST_DRILL_TRIES: usize = 5;

/// Records `drill`, which has just ended, as its deployment's last drill
/// (its view's `recovery`), unless a newer one is there already. A new
/// version: the record changed (a reader's `If-Match` sees it). A failure
/// is logged; the drill's own record holds the outcome either way. The
/// deployment as read, when it could be.
async fn keep_last_drill(store: &Store, drill: &Drill) -> Option<Deployment> {
    let last = LastDrill::of(&drill.view);
    for _ in 0..LAST_DRILL_TRIES {
        let previous = match store
            .get_deployment(&drill.org, &drill.view.deployment_id)
            .await
        {
            Ok(Some(d)) => d,
            // Deleted since: nothing shows it.
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(drill = %drill.view.id, error = %e, "cannot read the drilled deployment to record its last drill");
                return None;
            }
        };
        if previous
            .value
            .last_drill
            .as_ref()
            .is_some_and(|l| l.id == last.id || l.started > last.started)
        {
            return Some(previous.value);
        }
        let mut next = previous.value.clone();
        next.last_drill = Some(last.clone());
        match store.replace_deployment(&next, &previous, None).await {
            Ok(_) => return Some(next),
            Err(StoreError::VersionMismatch { .. }) => continue,
            Err(e) => {
                tracing::warn!(drill = %drill.view.id, error = %e, "cannot record the deployment's last drill");
                return Some(previous.value);
            }
        }
    }
    tracing::warn!(drill = %drill.view.id, "the drilled deployment kept changing; its last drill is not recorded on it");
    None
}
