//! Reset password: the `elastic` password the API handed to the owner (and
//! sealed on the record) applied to the running cluster, then recorded as
//! the one the control plane uses. Nothing to undo: until the cluster took
//! the new password the old one holds, and after it the old one is gone.

use crate::step::{Saga, action};

pub fn saga() -> Saga {
    let mut saga = Saga::default();
    saga.step("apply-password", action!(apply_password), action!(nothing));
    saga.step("record-access", action!(record_access), action!(nothing));
    saga
}
