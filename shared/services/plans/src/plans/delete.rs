//! Delete: every node goes, then the deployment's parameters (keys,
//! certificates, password, bootstrap) and its launch templates; the engine
//! then removes the record. Nothing of the deployment stays in the account
//! but its snapshots, which a delete keeps (see docs/snapshot-records.md)
//! unless asked to remove them: then, on a running deployment, the
//! unpinned ones are removed through its cluster first.

use crate::step::{Saga, action};

/// The steps that delete a deployment, removing its unpinned snapshots
/// through its cluster before the nodes go.
pub fn saga_removing_snapshots() -> Saga {
    let mut saga = Saga::default();
    saga.step(
        "remove-snapshots",
        action!(remove_snapshots),
        action!(nothing),
    );
    delete_steps(&mut saga);
    saga
}

/// The steps that delete a deployment.
pub fn saga() -> Saga {
    let mut saga = Saga::default();
    delete_steps(&mut saga);
    saga
}

pub(crate) fn delete_steps(saga: &mut Saga) {
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
}
