//! The node parameters conformance scenario of `floe-compute`, run against
//! the simulation (and shown to catch a broken store).

use floe_compute::ComputeError;
use floe_compute::parameters::{NodeParameters, SecretOrPlain};
use floe_compute::parameters_conformance::{ScenarioResult, scenario};
use floe_compute_sim::SimulatedParameters;

#[tokio::test]
async fn the_simulation_passes_the_scenario() -> ScenarioResult {
    let sim = SimulatedParameters::default();
    scenario(&sim, "/floe-test/run-1").await?;
    assert!(sim.written().is_empty(), "{:?}", sim.written().keys());
    Ok(())
}

#[tokio::test]
async fn the_scenario_can_fail() {
    // A store that forgets overwrites must not pass.
    struct FirstWriteWins(SimulatedParameters);
    #[async_trait::async_trait]
    impl NodeParameters for FirstWriteWins {
        async fn put(&self, name: &str, value: &SecretOrPlain) -> Result<(), ComputeError> {
            if self.0.get(name).await?.is_some() {
                return Ok(());
            }
            self.0.put(name, value).await
        }
        async fn get(&self, name: &str) -> Result<Option<SecretOrPlain>, ComputeError> {
            self.0.get(name).await
        }
        async fn delete(&self, name: &str) -> Result<(), ComputeError> {
            self.0.delete(name).await
        }
        async fn delete_under(&self, path: &str) -> Result<usize, ComputeError> {
            self.0.delete_under(path).await
        }
    }
    let broken = FirstWriteWins(SimulatedParameters::default());
    let err = scenario(&broken, "/floe-test/run-2").await.err();
    assert!(
        err.as_ref()
            .is_some_and(|e| e.to_string().contains("overwritten")),
        "{err:?}"
    );
}
