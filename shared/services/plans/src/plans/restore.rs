//! Restore: a snapshot restored into a running deployment. Its undos leave
//! what was restored in place (there was nothing under those names, and
//! removing data is not an undo's call).

use crate::step::{Saga, action};
use floe_domain::restore::{RestoreMode, RestoreTarget};

/// The steps that restore `t`.
pub fn saga(t: &RestoreTarget) -> Saga {
    let mut saga = Saga::default();
    if t.foreign_repository {
        saga.step(
            "register-source",
            action!(register_source),
            action!(leave_restored),
        );
    }
    match t.mode {
        RestoreMode::Restore => saga.step("restore", action!(restore), action!(leave_restored)),
        RestoreMode::Mount => {
            saga.step(
                crate::steps::license::STEP,
                action!(ensure_license),
                action!(nothing),
            );
            saga.step("mount", action!(mount), action!(leave_restored))
        }
    }
    saga.step("wait-restored", action!(wait_restored), action!(nothing));
    saga
}
