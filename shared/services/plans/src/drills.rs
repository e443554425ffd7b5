//! A drill's record brought in step with its plan: written when the plan
//! ends (by the engine, as it removes the clone), and again by any reader
//! that finds the record still running behind a plan that has ended (the
//! engine's write lost to a crash). Either way the drilled deployment's
//! lock is released with it, so the next drill may start.

use floe_domain::drill::{Drill, DrillFailure, DrillPlan, DrillStatus, LastDrill, settle};
use floe_domain::plan::Plan;
use floe_store::{Store, StoreError, Versioned};

/// Writes the outcome of `plan`, a drill plan that has ended, onto its
/// drill's record. A failure is logged: the next reader settles it.
pub async fn end(store: &Store, plan: &Plan, drill: &DrillPlan) {
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
    match settled(store, record, Some(plan)).await {
        Ok(d) => {
            tracing::info!(drill = %d.view.id, deployment = %d.view.deployment_id, status = d.view.status.as_str(), "drill ended");
        }
        Err(e) => {
            tracing::warn!(drill = %drill.drill_id, error = %e, "cannot record a drill's outcome; its next reader will");
        }
    }
}

/// The drill as its plan says it stands, written back (and its lock
/// released) when the plan has ended since the record was written.
/// `plan` is the drill's plan when the caller holds it; else it is read.
pub async fn settled(
    store: &Store,
    record: Versioned<Drill>,
    plan: Option<&Plan>,
) -> Result<Drill, StoreError> {
    let drill = &record.value;
    if drill.view.status != DrillStatus::Running {
        return Ok(record.value);
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
        return Ok(record.value);
    }
    let next = Drill {
        view,
        ..drill.clone()
    };
    // The deployment's record first: whoever sees the drill ended (its
    // record, or a free lock) then sees it as the deployment's last drill
    // too. Settling is deterministic, so a second settler writes the same.
    keep_last_drill(store, &next).await;
    let lock = store
        .get_drill_lock(&drill.org, &drill.view.deployment_id)
        .await?;
    match store.end_drill(&next, record.version, lock.as_ref()).await {
        Ok(()) => Ok(next),
        // Another writer settled it first: theirs is the record.
        Err(StoreError::VersionMismatch { .. } | StoreError::NotFound) => {
            match store.get_drill(&drill.org, &drill.key).await? {
                Some(now) => Ok(now.value),
                None => Ok(next),
            }
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
/// is logged; the drill's own record holds the outcome either way.
async fn keep_last_drill(store: &Store, drill: &Drill) {
    let last = LastDrill::of(&drill.view);
    for _ in 0..LAST_DRILL_TRIES {
        let previous = match store
            .get_deployment(&drill.org, &drill.view.deployment_id)
            .await
        {
            Ok(Some(d)) => d,
            // Deleted since: nothing shows it.
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(drill = %drill.view.id, error = %e, "cannot read the drilled deployment to record its last drill");
                return;
            }
        };
        if previous
            .value
            .last_drill
            .as_ref()
            .is_some_and(|l| l.id == last.id || l.started > last.started)
        {
            return;
        }
        let mut next = previous.value.clone();
        next.last_drill = Some(last.clone());
        match store.replace_deployment(&next, &previous, None).await {
            Ok(_) => return,
            Err(StoreError::VersionMismatch { .. }) => continue,
            Err(e) => {
                tracing::warn!(drill = %drill.view.id, error = %e, "cannot record the deployment's last drill");
                return;
            }
        }
    }
    tracing::warn!(drill = %drill.view.id, "the drilled deployment kept changing; its last drill is not recorded on it");
}
