//! A node parameters store for local mode and tests, checking names and
//! values as Parameter Store does: in memory, or also in a file that a
//! restart reads back ([`SimulatedParameters::persisted`]).

use crate::Fault;
use crate::persist::{PersistError, StateFile};
use async_trait::async_trait;
use floe_compute::ComputeError;
use floe_compute::parameters::{
    NodeParameters, SecretOrPlain, check_name, check_path, check_value,
};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Seals the secure values a parameters file keeps, as KMS seals
/// Parameter Store's `SecureString`s: the file never holds a key or a
/// password in the clear (local mode seals with its credential key).
/// `name` is the parameter's, bound to the sealed value so that one cannot
/// be passed off as another.
pub trait Sealer: Send + Sync {
    fn seal(&self, name: &str, plaintext: &str) -> Result<String, String>;
    fn open(&self, name: &str, sealed: &str) -> Result<String, String>;
}

/// The operations of [`NodeParameters`], as [`Fault::FailCall`] and
/// [`SimulatedParameters::calls`] name them.
pub const OPERATIONS: [&str; 4] = [OP_PUT, OP_GET, OP_DELETE, OP_DELETE_UNDER];
const OP_PUT: &str = "put";
const OP_GET: &str = "get";
const OP_DELETE: &str = "delete";
const OP_DELETE_UNDER: &str = "delete_under";

/// A parameter store for local mode and tests. It checks names and
/// values as Parameter Store does, and fails the calls chosen by
/// [`Fault::FailCall`] (with an operation of [`OPERATIONS`]) without effect;
/// [`Fault::NoCapacityInZone`] means nothing here.
#[derive(Default)]
pub struct SimulatedParameters {
    faults: Vec<Fault>,
    /// Where the parameters are kept across restarts, if anywhere, and
    /// what seals their secure values there.
    file: Option<(StateFile, Arc<dyn Sealer>)>,
    state: Mutex<State>,
}

impl std::fmt::Debug for SimulatedParameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedParameters")
            .field("faults", &self.faults)
            .field("file", &self.file.as_ref().map(|(file, _)| file))
            .finish_non_exhaustive()
    }
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
            file: None,
            state: Mutex::new(State::default()),
        }
    }

    /// As [`SimulatedParameters::new`], keeping every parameter (secure
    /// ones sealed by `sealer`, in a file only its owner can read) in the
    /// file at `path`: what it holds is loaded now, and every change is
    /// written to it before the call that makes it returns. No file yet is
    /// a first start; a file that cannot be read, parsed or opened is an
    /// error, never an empty store.
    pub fn persisted(
        faults: Vec<Fault>,
        path: PathBuf,
        sealer: Arc<dyn Sealer>,
    ) -> Result<SimulatedParameters, PersistError> {
        let file = StateFile::open(path)?;
        let parameters = file.load_parameters(sealer.as_ref())?;
        Ok(SimulatedParameters {
            faults,
            file: Some((file, sealer)),
            state: Mutex::new(State {
                calls: HashMap::new(),
                parameters,
            }),
        })
    }

    /// Applies `change` to the parameters; for a persisted store, to a copy
    /// that is written first and kept only once written, so that a change
    /// that cannot be saved is not made and the call fails. Called with the
    /// state lock held, so two writes cannot interleave.
    fn commit<R>(
        &self,
        parameters: &mut BTreeMap<String, SecretOrPlain>,
        change: impl FnOnce(&mut BTreeMap<String, SecretOrPlain>) -> R,
    ) -> Result<R, ComputeError> {
        let Some((file, sealer)) = &self.file else {
            return Ok(change(parameters));
        };
        let mut next = parameters.clone();
        let out = change(&mut next);
        if let Err(e) = file.save_parameters(&next, sealer.as_ref()) {
            tracing::warn!(error = %e, "simulated parameters: not saved, change not made");
            // Nothing changed, and a retry may find room on the disk.
            return Err(ComputeError::Transient {
                code: "simulated_state_not_saved".into(),
                message: e.to_string(),
            });
        }
        *parameters = next;
        Ok(out)
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
        // Plans put the same values again when a step runs twice: no write.
        if state.parameters.get(name) != Some(value) {
            self.commit(&mut state.parameters, |p| {
                p.insert(name.to_owned(), value.clone())
            })?;
        }
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
        if state.parameters.contains_key(name) {
            self.commit(&mut state.parameters, |p| p.remove(name))?;
        }
        Ok(())
    }

    async fn delete_under(&self, path: &str) -> Result<usize, ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_DELETE_UNDER)?;
        check_path(path)?;
        let below = format!("{}/", path.trim_end_matches('/'));
        let gone = state
            .parameters
            .keys()
            .filter(|name| name.starts_with(&below))
            .count();
        if gone > 0 {
            self.commit(&mut state.parameters, |p| {
                p.retain(|name, _| !name.starts_with(&below))
            })?;
        }
        Ok(gone)
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
