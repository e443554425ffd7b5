//! Drill: a restore drill on a short-lived clone. The clone is created as
//! a clone's create makes one (nodes, the source registered read-only, the
//! snapshot restored or mounted), then checked (drill-check reads what the
//! cluster holds and judges it, drill-verdict fails the plan when a check
//! failed), then deleted as a delete plan deletes. A failure anywhere
//! unwinds the create's steps, which remove everything it made: so the
//! clone goes whether the drill passes or fails, and the engine removes its
//! record either way.

use super::create::{Secrets, nodes_saga};
use crate::step::{Saga, action};
use floe_domain::drill::{CHECK_STEP, DrillParams, VERDICT_STEP};
use floe_domain::restore::RestoreTarget;

/// The steps of a drill on `params.spec`, restoring `restore`.
pub fn saga(params: &DrillParams, restore: Option<&RestoreTarget>) -> Saga {
    let mut saga = nodes_saga(&params.spec, restore, None, Secrets::New);
    saga.step(CHECK_STEP, action!(drill_check), action!(nothing));
    saga.step(VERDICT_STEP, action!(drill_verdict), action!(nothing));
    super::delete::delete_steps(&mut saga);
    saga
}
