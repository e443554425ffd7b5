//! What a step's action returns, and the one place where the errors of the
//! ports it calls are judged: transient (tried again) or permanent (the
//! plan unwinds).
//!
//! An action returns a [`StepResult`]: `Ok` with its outcome, or `Err`
//! with a [`StepFailure`], into which every port error converts, so that
//! actions use `?`. The steps' boundary ([`crate::DeploymentSteps`]) turns
//! a failure into the engine's [`Outcome`] once.

use crate::engine::{Outcome, fail};
use floe_clusters::ClusterError;
use floe_compute::ComputeError;
use floe_domain::plan::StepError;
use floe_elastic::ElasticError;
use floe_store::StoreError;
use std::time::Duration;

/// What a step's action returns.
pub type StepResult = Result<Outcome, StepFailure>;

/// Why a step's action stopped short of done.
#[derive(Debug, Clone, PartialEq)]
pub enum StepFailure {
    /// Not yet (a cluster that does not answer yet, shards or votes that
    /// have not moved yet): look again after the steps' poll interval,
    /// without spending a retry.
    NotYet(String),
    /// Any other outcome: a wait of its own, a retry, a failure.
    Outcome(Outcome),
}

impl StepFailure {
    /// The engine's outcome, a not-yet waiting `poll`.
    pub fn into_outcome(self, poll: Duration) -> Outcome {
        match self {
            StepFailure::NotYet(note) => Outcome::Wait { after: poll, note },
            StepFailure::Outcome(outcome) => outcome,
        }
    }

    /// A permanent failure of kind `failure_type`.
    pub fn permanent(failure_type: &str, message: impl Into<String>) -> StepFailure {
        StepFailure::Outcome(fail(failure_type, message))
    }

    /// A transient failure: retried with backoff.
    pub fn transient(message: impl Into<String>) -> StepFailure {
        StepFailure::Outcome(Outcome::Retry(message.into()))
    }

    /// The cluster could not be reached while `doing`.
    pub fn cluster(e: ClusterError, doing: &str) -> StepFailure {
        if e.is_transient() {
            StepFailure::NotYet(format!("{doing}: {e}"))
        } else {
            StepFailure::permanent("cluster_unreachable", format!("{doing}: {e}"))
        }
    }

    /// Elasticsearch refused or failed a request made while `doing`.
    pub fn elastic(e: ElasticError, doing: &str) -> StepFailure {
        if e.is_transient() {
            StepFailure::NotYet(format!("{doing}: {e}"))
        } else {
            StepFailure::permanent("elasticsearch_error", format!("{doing}: {e}"))
        }
    }
}

impl StepFailure {
    /// Elasticsearch failed a request made while `doing` that is retried
    /// with backoff rather than polled (a restore's): any error that is not
    /// transient fails the step as `failure_type`.
    pub fn elastic_retried(e: ElasticError, doing: &str, failure_type: &str) -> StepFailure {
        if e.is_transient() {
            StepFailure::transient(format!("{doing}: {e}"))
        } else {
            StepFailure::permanent(failure_type, format!("{doing}: {e}"))
        }
    }
}

/// Reaching a deployment's cluster, the first thing a step asks of it.
impl From<ClusterError> for StepFailure {
    fn from(e: ClusterError) -> StepFailure {
        StepFailure::cluster(e, "reaching the cluster")
    }
}

impl From<ComputeError> for StepFailure {
    fn from(e: ComputeError) -> StepFailure {
        match e {
            ComputeError::Transient { code, message } => {
                StepFailure::transient(format!("{code}: {message}"))
            }
            ComputeError::InsufficientCapacity { zone, message } => {
                StepFailure::transient(format!("no capacity in zone {zone}: {message}"))
            }
            ComputeError::Permanent {
                failure_type,
                message,
            } => StepFailure::permanent(&failure_type, message),
        }
    }
}

/// The store the steps read (repositories, policies): any error is worth
/// another try.
impl From<StoreError> for StepFailure {
    fn from(e: StoreError) -> StepFailure {
        StepFailure::transient(format!("store: {e}"))
    }
}

/// A plan record that does not hold what its steps need.
impl From<StepError> for StepFailure {
    fn from(e: StepError) -> StepFailure {
        StepFailure::Outcome(Outcome::Fail(e))
    }
}

/// A helper that already decided the step's outcome.
impl From<Outcome> for StepFailure {
    fn from(outcome: Outcome) -> StepFailure {
        StepFailure::Outcome(outcome)
    }
}
