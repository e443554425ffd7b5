//! An in-memory node parameters store for local mode and tests, checking
//! names and values as Parameter Store does.

use crate::Fault;
use async_trait::async_trait;
use floe_compute::ComputeError;
use floe_compute::parameters::{
    NodeParameters, SecretOrPlain, check_name, check_path, check_value,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The operations of [`NodeParameters`], as [`Fault::FailCall`] and
/// [`SimulatedParameters::calls`] name them.
pub const OPERATIONS: [&str; 4] = [OP_PUT, OP_GET, OP_DELETE, OP_DELETE_UNDER];
const OP_PUT: &str = "put";
const OP_GET: &str = "get";
const OP_DELETE: &str = "delete";
const OP_DELETE_UNDER: &str = "delete_under";

/// An in-memory parameter store for local mode and tests. It checks names and
/// values as Parameter Store does, and fails the calls chosen by
/// [`Fault::FailCall`] (with an operation of [`OPERATIONS`]) without effect;
/// [`Fault::NoCapacityInZone`] means nothing here.
#[derive(Debug, Default)]
pub struct SimulatedParameters {
    faults: Vec<Fault>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    calls: HashMap<&'static str, u32>,
    parameters: BTreeMap<String, SecretOrPlain>,
}

impl SimulatedParameters {
    pub fn new(faults: Vec<Fault>) -> SimulatedParameters {
        SimulatedParameters {
            faults,
            state: Mutex::new(State::default()),
        }
    }

    /// Every parameter stored now, by name.
    pub fn written(&self) -> BTreeMap<String, SecretOrPlain> {
        self.lock().parameters.clone()
    }

    /// How many times `operation` was called, failed calls included; 0 for a
    /// name that is not an operation.
    pub fn calls(&self, operation: &str) -> u32 {
        self.lock().calls.get(operation).copied().unwrap_or(0)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a single map operation, so the state behind a
        // poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn enter(&self, state: &mut State, operation: &'static str) -> Result<(), ComputeError> {
        let n = state.calls.entry(operation).or_insert(0);
        *n = n.saturating_add(1);
        let n = *n;
        let injected = self.faults.iter().find_map(|fault| match fault {
            Fault::FailCall {
                operation: op,
                nth,
                times,
                error,
            } if op == operation && n >= *nth && n - nth < *times => Some(error),
            _ => None,
        });
        match injected {
            Some(error) => {
                tracing::info!(operation, call = n, %error, "simulated parameters: injected fault");
                Err(error.clone())
            }
            None => Ok(()),
        }
    }
}

#[async_trait]
impl NodeParameters for SimulatedParameters {
    async fn put(&self, name: &str, value: &SecretOrPlain) -> Result<(), ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_PUT)?;
        check_name(name)?;
        check_value(name, value)?;
        state.parameters.insert(name.to_owned(), value.clone());
        Ok(())
    }

    async fn get(&self, name: &str) -> Result<Option<SecretOrPlain>, ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_GET)?;
        check_name(name)?;
        Ok(state.parameters.get(name).cloned())
    }

    async fn delete(&self, name: &str) -> Result<(), ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_DELETE)?;
        check_name(name)?;
        state.parameters.remove(name);
        Ok(())
    }

    async fn delete_under(&self, path: &str) -> Result<usize, ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_DELETE_UNDER)?;
        check_path(path)?;
        let below = format!("{}/", path.trim_end_matches('/'));
        let before = state.parameters.len();
        state.parameters.retain(|name, _| !name.starts_with(&below));
        Ok(before - state.parameters.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_simulation_keeps_what_was_written() -> Result<(), ComputeError> {
        let sim = SimulatedParameters::default();
        sim.put("/f/d/a", &SecretOrPlain::plain("1")).await?;
        sim.put("/f/d/b/c", &SecretOrPlain::secret("2")).await?;
        sim.put("/f/d/a", &SecretOrPlain::plain("3")).await?;
        let written = sim.written();
        assert_eq!(written.len(), 2);
        assert_eq!(written.get("/f/d/a"), Some(&SecretOrPlain::plain("3")));
        assert_eq!(written.get("/f/d/b/c"), Some(&SecretOrPlain::secret("2")));
        assert_eq!(sim.calls("put"), 3);
        assert_eq!(sim.delete_under("/f/d").await?, 2);
        assert!(sim.written().is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn injected_faults_fail_the_chosen_calls_without_effect() -> Result<(), ComputeError> {
        let throttled = ComputeError::Transient {
            code: "ThrottlingException".into(),
            message: "slow down".into(),
        };
        let faults = OPERATIONS
            .iter()
            .map(|op| Fault::FailCall {
                operation: op.to_string(),
                nth: 2,
                times: 1,
                error: throttled.clone(),
            })
            .collect();
        let sim = SimulatedParameters::new(faults);
        let v = SecretOrPlain::plain("v");
        sim.put("/f/a", &v).await?;
        assert_eq!(sim.put("/f/b", &v).await, Err(throttled.clone()));
        assert_eq!(sim.get("/f/a").await?, Some(v.clone()));
        assert_eq!(sim.get("/f/a").await, Err(throttled.clone()));
        sim.delete("/f/missing").await?;
        assert_eq!(sim.delete("/f/a").await, Err(throttled.clone()));
        assert_eq!(sim.delete_under("/g").await?, 0);
        assert_eq!(sim.delete_under("/f").await, Err(throttled.clone()));
        assert_eq!(sim.written().keys().collect::<Vec<_>>(), ["/f/a"]);
        for op in OPERATIONS {
            assert_eq!(sim.calls(op), 2, "{op}");
        }
        assert_eq!(sim.delete_under("/f").await?, 1);
        Ok(())
    }
}
