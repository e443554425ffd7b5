//! Shutdown: the last snapshot, then every node goes; the record stays.
//! Terminated nodes are not restarted by an undo (their data is in the
//! snapshots, and a new plan can recreate them).

use crate::step::{Saga, action};
use floe_domain::deployment::DeploymentSpec;
use floe_domain::plan::ShutdownParams;

/// The steps that shut down a deployment running `current`.
pub fn saga(params: &ShutdownParams, current: &DeploymentSpec) -> Saga {
    let mut saga = Saga::default();
    if !params.skip_snapshot && current.repository().is_some() {
        saga.step("final-snapshot", action!(final_snapshot), action!(nothing));
    }
    saga.step("terminate", action!(terminate_all), action!(nothing));
    saga.step(
        "wait-terminated",
        action!(wait_terminated),
        action!(nothing),
    );
    saga
}
