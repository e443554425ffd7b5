//! License: the organization's platform license installed on a running
//! cluster, after an upload changed it. One step, whose undo leaves the
//! cluster as it is: a license Elasticsearch installed replaced the one
//! before, and taking it off again is a change of its own.

use crate::step::{Saga, action};

pub fn saga() -> Saga {
    let mut saga = Saga::default();
    saga.step(
        crate::steps::license::STEP,
        action!(ensure_license),
        action!(nothing),
    );
    saga
}
