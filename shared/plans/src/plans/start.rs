//! Start: a stopped deployment's nodes again, from its spec, and the
//! snapshot it starts from when one was asked for. Its certificates,
//! password and repository keys are the ones it had: a failure terminates
//! what it launched and keeps them for the next start.

use super::create::{Secrets, nodes_saga};
use crate::step::Saga;
use floe_domain::plan::StartParams;

pub fn saga(params: &StartParams) -> Saga {
    nodes_saga(&params.spec, params.restore.as_ref(), Secrets::Kept)
}
