//! Start: a stopped deployment's nodes again, from its spec, and the
//! snapshot it starts from when one was asked for. Its certificates,
//! password and repository keys are the ones it had: a failure terminates
//! what it launched and keeps them for the next start.

use super::create::{Secrets, nodes_saga};
use crate::step::Saga;
use floe_domain::plan::StartParams;
use floe_domain::restore::CloneSource;

/// A mount clone's nodes read its source again: its client, and the
/// read-only registration its mounted indices name.
pub fn saga(params: &StartParams, source: Option<&CloneSource>) -> Saga {
    nodes_saga(&params.spec, params.restore.as_ref(), source, Secrets::Kept)
}
