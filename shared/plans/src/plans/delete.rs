//! Delete: every node goes, then the deployment's parameters; the engine
//! then removes the record.

use crate::step::{Saga, action};

/// The steps that delete a deployment.
pub fn saga() -> Saga {
    let mut saga = Saga::default();
    saga.step("terminate", action!(terminate_all), action!(nothing));
    saga.step(
        "wait-terminated",
        action!(wait_terminated),
        action!(nothing),
    );
    saga.step(
        "forget-parameters",
        action!(forget_parameters),
        action!(nothing),
    );
    saga
}
