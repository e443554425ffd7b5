//! Delete: every node goes, then the deployment's parameters (keys,
//! certificates, password, bootstrap) and its launch templates; the engine
//! then removes the record. Nothing of the deployment stays in the account.

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
    saga.step(
        "forget-templates",
        action!(forget_all_templates),
        action!(nothing),
    );
    saga.step(
        "forget-identity",
        action!(forget_identity),
        action!(nothing),
    );
    saga
}
