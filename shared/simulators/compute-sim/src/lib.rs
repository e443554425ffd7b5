//! The simulated compute provider and node parameters: local mode and tests
//! run the same plans as production against them, without AWS. They
//! implement the ports of `floe-compute`.
//!
//! It keeps EC2's observable behaviour where plans depend on it: instances go
//! `pending` → `running` and `shutting_down` → `terminated` as time passes
//! (measured with `tokio::time`, so a test with a paused clock controls it),
//! a client token replays the first launch, deleting what is gone succeeds,
//! terminated instances stay listed. Failures are injected by configuration
//! ([`Fault`]) so that undo paths and retries can be exercised, and what
//! befalls instances on EC2 without Floe asking (a host lost, an instance
//! impaired, a person stopping one) by [`SimulatedCompute::kill`],
//! [`SimulatedCompute::impair`] and [`SimulatedCompute::stop`], or by files
//! in the folders of [`SimulatedConfig`].
//!
//! [`SimulatedCompute::new`] and [`SimulatedParameters::new`] keep their
//! state in memory only. [`SimulatedCompute::persisted`] and
//! [`SimulatedParameters::persisted`] also keep it in a JSON file (local
//! mode: `sim/compute.json` and `sim/parameters.json` in its data folder),
//! so that a restart finds what was there: launch templates, instances
//! (ids, addresses, tags, user data, launch, stop and terminate times,
//! impairments), the client tokens of past launches (a launch retried
//! after a restart starts nothing new), the id counters, and every
//! parameter, secure ones in the clear as the nodes read them (the file is
//! readable by its owner only, as local mode's data folder is). Times are kept as
//! wall-clock times and become `Instant`s again on loading, so an instance
//! that was booting goes on booting and one that ran runs. Each change is
//! written whole and atomically before the call returns; a change that
//! cannot be written is not made and the call fails. Injected faults and
//! call counts are not kept.

pub mod identity;
pub mod parameters;
mod persist;

pub use identity::SimulatedIdentity;
pub use parameters::{Sealer, SimulatedParameters};
pub use persist::{PersistCause, PersistError};

use async_trait::async_trait;
use floe_compute::{
    CheckStatus, Compute, ComputeError, Instance, InstanceState, LaunchRequest, LaunchTemplateSpec,
    ScheduledEvent, StatusChecks, TAG_DEPLOYMENT,
};
use floe_domain::catalog;
use persist::StateFile;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// The operations of [`Compute`], as [`Fault::FailCall`] and
/// [`SimulatedCompute::calls`] name them.
pub const OPERATIONS: [&str; 7] = [
    OP_ENSURE_TEMPLATE,
    OP_DELETE_TEMPLATE,
    OP_TEMPLATES,
    OP_LAUNCH,
    OP_INSTANCES,
    OP_TERMINATE,
    OP_STATUS_CHECKS,
];
const OP_ENSURE_TEMPLATE: &str = "ensure_launch_template";
const OP_DELETE_TEMPLATE: &str = "delete_launch_template";
const OP_TEMPLATES: &str = "launch_templates";
const OP_LAUNCH: &str = "launch";
const OP_INSTANCES: &str = "instances";
const OP_TERMINATE: &str = "terminate";
const OP_STATUS_CHECKS: &str = "status_checks";

const DEFAULT_ZONES: [&str; 3] = ["sim-a", "sim-b", "sim-c"];

/// AWS keeps the first four addresses of a subnet (network, router, DNS,
/// reserved) and the last (broadcast); the simulated /24 subnets do the same.
const FIRST_HOST: u8 = 4;
const LAST_HOST: u8 = 254;

#[derive(Debug, Clone, Default)]
pub struct SimulatedConfig {
    /// Zone names, indexed by [`LaunchRequest::zone`]; empty means
    /// `sim-a`, `sim-b`, `sim-c`.
    pub zones: Vec<String>,
    /// How long a launched instance stays `pending` (zero: running at once).
    pub boot_delay: Duration,
    /// How long a terminated instance stays `shutting_down`.
    pub terminate_delay: Duration,
    /// Failures to inject.
    pub faults: Vec<Fault>,
    /// Which addresses instances get.
    pub addresses: AddressPool,
    /// Local mode's way to lose an instance, as EC2 may (a host failure, a
    /// retirement): an empty file named after an instance id in this
    /// folder terminates that instance when instances are next listed,
    /// and is removed. `None`: no such folder.
    pub kill_dir: Option<std::path::PathBuf>,
    /// Local mode's way to impair an instance, as a failing EC2 status
    /// check does: a file named after a running instance in this folder
    /// fails its instance status check (its system status check when the
    /// file says `system`, its attached EBS status check when it says
    /// `ebs`) from when instances are next listed; the file is removed. The instance keeps running, impaired, until terminated.
    pub impair_dir: Option<std::path::PathBuf>,
    /// Local mode's way to stop an instance, as someone may in the EC2
    /// console: a file named after a running instance in this folder
    /// stops it (`stopping`, then `stopped` after the terminate delay)
    /// when instances are next listed; the file is removed.
    pub stop_dir: Option<std::path::PathBuf>,
}

/// Where simulated instances' private addresses come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AddressPool {
    /// `10.0.{zone}.{host}`, a /24 per zone, as a VPC's subnets: addresses
    /// nothing on this machine answers.
    #[default]
    Private,
    /// A random `127.a.b.c` (each of `a`, `b`, `c` from 1 to 254) per
    /// instance, never one this process handed out before: every instance
    /// has an address of its own on this machine, where local mode serves
    /// its simulated node.
    Loopback,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The `nth` call (1-based) of `operation` (one of [`OPERATIONS`]) and
    /// the `times - 1` calls after it fail with `error`, without effect.
    FailCall {
        operation: String,
        nth: u32,
        times: u32,
        error: ComputeError,
    },
    /// Launches in this zone index (after wrapping) always fail with
    /// `InsufficientCapacity`.
    NoCapacityInZone(usize),
}

impl SimulatedConfig {
    /// Local mode's simulated instances from its settings (floe-wiring's
    /// `SimSettings`: `FLOE_SIM_BOOT_DELAY_MS`, `FLOE_SIM_TERMINATE_DELAY_MS`
    /// and the text of `FLOE_SIM_FAULTS`).
    ///
    /// `faults` is a comma-separated list of faults; empty (or spaces) means
    /// none. Each item is one of
    /// - `OPERATION:NTH:TIMES:KIND[=CODE]`: [`Fault::FailCall`]. `OPERATION`
    ///   is one of [`OPERATIONS`]; `NTH` (from 1) is the first failing call
    ///   and `TIMES` (from 1) how many consecutive calls fail; `KIND` is
    ///   `transient` (a `Transient` error whose code is `CODE`, default
    ///   `simulated_transient`) or `permanent` (a `Permanent` error whose
    ///   failure type is `CODE`, default `simulated_failure`).
    /// - `capacity:ZONE`: [`Fault::NoCapacityInZone`] for zone index `ZONE`.
    ///
    /// For example `launch:1:1:permanent,terminate:2:3:transient,capacity:0`
    /// fails the first launch, the second to fourth terminate calls, and
    /// every launch in the first zone. Items are trimmed of spaces.
    ///
    /// Zones are always the default three. An unusable fault is an error
    /// saying which item and why (the caller names the variable).
    pub fn parse(
        boot_delay: Duration,
        terminate_delay: Duration,
        faults: &str,
    ) -> Result<SimulatedConfig, String> {
        let faults = if faults.trim().is_empty() {
            Vec::new()
        } else {
            faults
                .split(',')
                .map(parse_fault)
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(SimulatedConfig {
            zones: DEFAULT_ZONES.iter().map(|z| z.to_string()).collect(),
            boot_delay,
            terminate_delay,
            faults,
            addresses: AddressPool::Private,
            kill_dir: None,
            impair_dir: None,
            stop_dir: None,
        })
    }
}

fn parse_fault(item: &str) -> Result<Fault, String> {
    let item = item.trim();
    let parts: Vec<&str> = item.split(':').collect();
    match parts.as_slice() {
        ["capacity", zone] => zone
            .parse::<usize>()
            .map(Fault::NoCapacityInZone)
            .map_err(|_| format!("{item:?}: the zone must be an index such as 0")),
        [operation, nth, times, kind] => {
            if !OPERATIONS.contains(operation) {
                return Err(format!(
                    "{item:?}: unknown operation {operation:?} (expected one of {})",
                    OPERATIONS.join(", ")
                ));
            }
            let count = |what: &str, v: &str| match v.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!("{item:?}: {what} must be a whole number from 1")),
            };
            let nth = count("NTH", nth)?;
            let times = count("TIMES", times)?;
            let (kind, code) = match kind.split_once('=') {
                Some((kind, code)) if !code.is_empty() => (kind, Some(code)),
                Some(_) => return Err(format!("{item:?}: the code after '=' is empty")),
                None => (*kind, None),
            };
            let message = format!("injected fault on {operation} call {nth}");
            let error = match kind {
                "transient" => ComputeError::Transient {
                    code: code.unwrap_or("simulated_transient").to_string(),
                    message,
                },
                "permanent" => ComputeError::Permanent {
                    failure_type: code.unwrap_or("simulated_failure").to_string(),
                    message,
                },
                other => {
                    return Err(format!(
                        "{item:?}: unknown kind {other:?} (expected transient or permanent)"
                    ));
                }
            };
            Ok(Fault::FailCall {
                operation: operation.to_string(),
                nth,
                times,
                error,
            })
        }
        _ => Err(format!(
            "{item:?} is neither OPERATION:NTH:TIMES:KIND[=CODE] nor capacity:ZONE"
        )),
    }
}

/// The simulated compute provider. Cheap to share behind an `Arc`; all state
/// is behind one mutex that no `.await` ever holds.
#[derive(Debug)]
pub struct SimulatedCompute {
    zones: Vec<String>,
    boot_delay: Duration,
    terminate_delay: Duration,
    faults: Vec<Fault>,
    addresses: AddressPool,
    kill_dir: Option<std::path::PathBuf>,
    impair_dir: Option<std::path::PathBuf>,
    stop_dir: Option<std::path::PathBuf>,
    /// Where the world is kept across restarts, if anywhere.
    file: Option<StateFile>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    calls: HashMap<&'static str, u32>,
    world: World,
}

/// What EC2 would remember: everything but the call counts, which belong
/// to this process.
#[derive(Debug, Default, Clone)]
struct World {
    templates: BTreeMap<String, Template>,
    /// In launch order, which is the order `instances` lists them in.
    instances: Vec<SimInstance>,
    /// Client token → what was launched with it.
    tokens: HashMap<String, Launched>,
    next_template: u64,
    next_instance: u64,
}

#[derive(Debug, Clone)]
struct Template {
    id: String,
    spec: LaunchTemplateSpec,
}

#[derive(Debug, Clone)]
struct Launched {
    request: LaunchRequest,
    ids: Vec<String>,
}

#[derive(Debug, Clone)]
struct SimInstance {
    id: String,
    instance_type: String,
    zone: usize,
    host: u8,
    tags: BTreeMap<String, String>,
    /// The launch template's user data at launch, which the instance keeps
    /// (EC2's `userData` attribute) whatever happens to the template.
    user_data: String,
    /// Its address in the loopback pool.
    loopback: Option<std::net::Ipv4Addr>,
    launched_at: Instant,
    terminated_at: Option<Instant>,
    /// When it was stopped (it stays stopped: Floe never starts one again).
    stopped_at: Option<Instant>,
    /// The status checks it fails, if any.
    impaired: Option<Impairment>,
    /// The maintenance EC2 has scheduled for it, if any.
    scheduled: Option<ScheduledEvent>,
}

/// Which of EC2's status checks a simulated instance fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impairment {
    /// The instance's own check (its OS, say).
    Instance,
    /// AWS's side (the host).
    System,
    /// Its EBS volumes cannot be reached (I/O hangs).
    AttachedEbs,
}

impl SimInstance {
    fn state(&self, now: Instant, boot: Duration, terminate: Duration) -> InstanceState {
        match (self.terminated_at, self.stopped_at) {
            (Some(at), _) if now.duration_since(at) >= terminate => InstanceState::Terminated,
            (Some(_), _) => InstanceState::ShuttingDown,
            // Stopping takes as long as shutting down.
            (None, Some(at)) if now.duration_since(at) >= terminate => InstanceState::Stopped,
            (None, Some(_)) => InstanceState::Stopping,
            (None, None) if now.duration_since(self.launched_at) >= boot => InstanceState::Running,
            (None, None) => InstanceState::Pending,
        }
    }

    /// What EC2 would report of its checks, while it runs.
    fn checks(&self, now: Instant, boot: Duration) -> StatusChecks {
        let failing = |which| {
            if self.impaired == Some(which) {
                CheckStatus::Impaired
            } else if now.duration_since(self.launched_at) < boot * 2 {
                // EC2 takes a while after boot before a check has a verdict.
                CheckStatus::Initializing
            } else {
                CheckStatus::Ok
            }
        };
        StatusChecks {
            id: self.id.clone(),
            system: failing(Impairment::System),
            instance: failing(Impairment::Instance),
            attached_ebs: failing(Impairment::AttachedEbs),
            scheduled_events: self.scheduled.iter().cloned().collect(),
        }
    }
}

impl SimulatedCompute {
    pub fn new(config: SimulatedConfig) -> SimulatedCompute {
        let zones = if config.zones.is_empty() {
            DEFAULT_ZONES.iter().map(|z| z.to_string()).collect()
        } else {
            config.zones
        };
        SimulatedCompute {
            zones,
            boot_delay: config.boot_delay,
            terminate_delay: config.terminate_delay,
            faults: config.faults,
            addresses: config.addresses,
            kill_dir: config.kill_dir,
            impair_dir: config.impair_dir,
            stop_dir: config.stop_dir,
            file: None,
            state: Mutex::new(State::default()),
        }
    }

    /// As [`SimulatedCompute::new`], keeping the simulated world in the
    /// file at `path` (see the crate's documentation): what the file holds
    /// is loaded now, and every change is written to it before the call
    /// that makes it returns. No file yet is a first start; a file that
    /// cannot be read or parsed is an error, never an empty world.
    pub fn persisted(
        config: SimulatedConfig,
        path: PathBuf,
    ) -> Result<SimulatedCompute, PersistError> {
        let mut sim = SimulatedCompute::new(config);
        let file = StateFile::open(path)?;
        // Older than this, an instance's state and checks no longer change.
        let longest = (sim.boot_delay * 2).max(sim.terminate_delay) + Duration::from_secs(1);
        let world = file.load_world(longest)?;
        // The loaded instances' loopback addresses are theirs: the pool
        // must not hand them out again (the simulated nodes serve on them).
        for ip in world.instances.iter().filter_map(|i| i.loopback) {
            reserve_loopback(ip);
        }
        sim.state = Mutex::new(State {
            calls: HashMap::new(),
            world,
        });
        sim.file = Some(file);
        Ok(sim)
    }

    /// Applies `change` to `world`; for a persisted simulation, to a copy
    /// that is written to the file first and kept only once written, so
    /// that memory never holds a change a restart would lose. Called with
    /// the state lock held, so two writes cannot interleave.
    fn commit<R>(
        &self,
        world: &mut World,
        change: impl FnOnce(&mut World) -> R,
    ) -> Result<R, PersistError> {
        let Some(file) = &self.file else {
            return Ok(change(world));
        };
        let mut next = world.clone();
        let out = change(&mut next);
        file.save_world(&next)?;
        *world = next;
        Ok(out)
    }

    /// The user data an instance was launched with (what EC2's
    /// `DescribeInstanceAttribute userData` returns, decoded): the boot
    /// script and the `elasticsearch.yml` in it. `None` for an unknown id.
    /// Not part of the compute port, which has no use for it in
    /// production; local mode's simulated nodes read their settings here.
    pub fn user_data(&self, instance_id: &str) -> Option<String> {
        self.lock()
            .world
            .instances
            .iter()
            .find(|i| i.id == instance_id)
            .map(|i| i.user_data.clone())
    }

    /// How many times `operation` was called, failed calls and replays
    /// included; 0 for a name that is not an operation.
    pub fn calls(&self, operation: &str) -> u32 {
        self.lock().calls.get(operation).copied().unwrap_or(0)
    }

    /// Terminates instance `id` as EC2 might without being asked (a host
    /// failure): the deployment loses the node. `false` for an unknown or
    /// already terminated id, or a change a persisted simulation cannot
    /// save (it is then not made).
    pub fn kill(&self, id: &str) -> bool {
        let mut state = self.lock();
        let Some(n) = state
            .world
            .instances
            .iter()
            .position(|i| i.id == id && i.terminated_at.is_none())
        else {
            return false;
        };
        let now = Instant::now();
        match self.commit(&mut state.world, |world| {
            if let Some(instance) = world.instances.get_mut(n) {
                instance.terminated_at = Some(now);
            }
        }) {
            Ok(()) => {
                tracing::warn!(instance = id, "simulated compute: instance lost");
                true
            }
            Err(e) => {
                tracing::warn!(instance = id, error = %e, "simulated compute: instance not lost, its state cannot be saved");
                false
            }
        }
    }

    /// Fails one of the status checks of running instance `id` (as EC2
    /// reports a host or an OS that stopped working); it keeps running.
    /// `false` for an unknown id or an instance that does not run, or a
    /// change a persisted simulation cannot save (it is then not made).
    pub fn impair(&self, id: &str, which: Impairment) -> bool {
        let impaired = self.change_running(id, |instance, _| instance.impaired = Some(which));
        if impaired {
            tracing::warn!(instance = id, check = ?which, "simulated compute: instance impaired");
        }
        impaired
    }

    /// Schedules `event` for running instance `id`, as EC2 announces a
    /// host's maintenance or an instance's retirement: the instance keeps
    /// running, and its status reports the event. `false` for an unknown id
    /// or an instance that does not run, or a change a persisted simulation
    /// cannot save (it is then not made).
    pub fn schedule_event(&self, id: &str, event: ScheduledEvent) -> bool {
        let code = event.code.clone();
        let scheduled = self.change_running(id, |instance, _| instance.scheduled = Some(event));
        if scheduled {
            tracing::warn!(instance = id, event = %code, "simulated compute: maintenance scheduled");
        }
        scheduled
    }

    /// Stops instance `id`, as a person may in the EC2 console: it goes
    /// `stopping`, then `stopped`, and keeps its address and volume.
    /// `false` for an unknown id or an instance that does not run, or a
    /// change a persisted simulation cannot save (it is then not made).
    pub fn stop(&self, id: &str) -> bool {
        let stopped = self.change_running(id, |instance, now| instance.stopped_at = Some(now));
        if stopped {
            tracing::warn!(instance = id, "simulated compute: instance stopped");
        }
        stopped
    }

    /// Applies `change` to instance `id` if it is running now; `false` for
    /// an unknown id or an instance that does not run.
    /// A change that cannot be saved is not made (and logged): `false`.
    fn change_running(&self, id: &str, change: impl FnOnce(&mut SimInstance, Instant)) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        let Some(n) = state.world.instances.iter().position(|i| {
            i.id == id
                && i.state(now, self.boot_delay, self.terminate_delay) == InstanceState::Running
        }) else {
            return false;
        };
        let saved = self.commit(&mut state.world, |world| {
            if let Some(instance) = world.instances.get_mut(n) {
                change(instance, now);
            }
        });
        match saved {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(instance = id, error = %e, "simulated compute: instance unchanged, its state cannot be saved");
                false
            }
        }
    }

    /// Kills, impairs and stops the instances named by the files in their
    /// folders, and removes those files.
    fn faults_requested(&self) {
        for_each_request(self.kill_dir.as_deref(), |name, _| {
            if !self.kill(name) {
                tracing::warn!(instance = %name, "simulated compute: no such running instance to kill");
            }
        });
        for_each_request(self.impair_dir.as_deref(), |name, content| {
            let which = match content.trim() {
                "system" => Impairment::System,
                "ebs" => Impairment::AttachedEbs,
                _ => Impairment::Instance,
            };
            if !self.impair(name, which) {
                tracing::warn!(instance = %name, "simulated compute: no such running instance to impair");
            }
        });
        for_each_request(self.stop_dir.as_deref(), |name, _| {
            if !self.stop(name) {
                tracing::warn!(instance = %name, "simulated compute: no such running instance to stop");
            }
        });
    }

    /// Names of the launch templates that exist now, sorted.
    pub fn templates(&self) -> Vec<String> {
        self.lock().world.templates.keys().cloned().collect()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update below is complete before anything can panic, so the
        // state behind a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts the call and returns the injected error, if this call is one
    /// that should fail.
    fn enter(&self, state: &mut State, operation: &'static str) -> Result<(), ComputeError> {
        let n = state.calls.entry(operation).or_insert(0);
        *n = n.saturating_add(1);
        let n = *n;
        for fault in &self.faults {
            if let Fault::FailCall {
                operation: op,
                nth,
                times,
                error,
            } = fault
                && op == operation
                && n >= *nth
                && n - nth < *times
            {
                tracing::info!(operation, call = n, %error, "simulated compute: injected fault");
                return Err(error.clone());
            }
        }
        Ok(())
    }

    fn wrap_zone(&self, zone: usize) -> usize {
        // `new` guarantees at least one zone.
        zone % self.zones.len().max(1)
    }

    fn zone_name(&self, zone: usize) -> String {
        self.zones.get(zone).cloned().unwrap_or_default()
    }

    /// An instance as EC2 would describe it at `now`.
    fn seen(&self, i: &SimInstance, now: Instant) -> Instance {
        let state = i.state(now, self.boot_delay, self.terminate_delay);
        Instance {
            id: i.id.clone(),
            state,
            instance_type: i.instance_type.clone(),
            zone: self.zone_name(i.zone),
            // A terminated instance has lost its network interface.
            private_ip: (state != InstanceState::Terminated).then(|| match i.loopback {
                Some(ip) => ip.to_string(),
                None => format!("10.0.{}.{}", i.zone, i.host),
            }),
            tags: i.tags.clone(),
        }
    }
}

#[async_trait]
impl Compute for SimulatedCompute {
    async fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<String, ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_ENSURE_TEMPLATE)?;
        // The EC2 adapter checks the type against the catalog before calling
        // AWS, because EC2 itself would accept the mismatch and fail at boot.
        let Some(known) = catalog::lookup(&spec.instance_type) else {
            return Err(ComputeError::Permanent {
                failure_type: "instance_type_not_found".into(),
                message: format!(
                    "instance type {} is not in the instance catalog",
                    spec.instance_type
                ),
            });
        };
        if known.arch != spec.arch {
            return Err(ComputeError::Permanent {
                failure_type: "architecture_mismatch".into(),
                message: format!(
                    "instance type {} is {}, the template asks for {}",
                    spec.instance_type, known.arch, spec.arch
                ),
            });
        }
        if let Some(existing) = state.world.templates.get(&spec.name) {
            return Ok(existing.id.clone());
        }
        let id = self
            .commit(&mut state.world, |world| {
                world.next_template += 1;
                let id = format!("lt-sim{:012x}", world.next_template);
                world.templates.insert(
                    spec.name.clone(),
                    Template {
                        id: id.clone(),
                        spec: spec.clone(),
                    },
                );
                id
            })
            .map_err(not_saved)?;
        tracing::info!(template = %spec.name, id = %id, "simulated compute: created launch template");
        Ok(id)
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_DELETE_TEMPLATE)?;
        if state.world.templates.contains_key(name) {
            self.commit(&mut state.world, |world| world.templates.remove(name))
                .map_err(not_saved)?;
            tracing::info!(template = %name, "simulated compute: deleted launch template");
        }
        Ok(())
    }

    async fn launch_templates(&self, deployment_id: &str) -> Result<Vec<String>, ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_TEMPLATES)?;
        // The map is sorted by name, as the port promises.
        Ok(state
            .world
            .templates
            .iter()
            .filter(|(_, t)| {
                t.spec.tags.get(TAG_DEPLOYMENT).map(String::as_str) == Some(deployment_id)
            })
            .map(|(name, _)| name.clone())
            .collect())
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Vec<String>, ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_LAUNCH)?;
        if let Some(first) = state.world.tokens.get(&request.client_token) {
            // EC2 answers a replay with the first result, and refuses the
            // token for a different request rather than guessing.
            if first.request != *request {
                return Err(ComputeError::Permanent {
                    failure_type: "idempotent_parameter_mismatch".into(),
                    message: format!(
                        "client token {} was used for a different launch",
                        request.client_token
                    ),
                });
            }
            return Ok(first.ids.clone());
        }
        if request.count == 0 {
            return Err(ComputeError::Permanent {
                failure_type: "invalid_parameter".into(),
                message: "count must be at least 1".into(),
            });
        }
        let Some(template) = state.world.templates.get(&request.template_name) else {
            return Err(ComputeError::Permanent {
                failure_type: "launch_template_not_found".into(),
                message: format!("launch template {} does not exist", request.template_name),
            });
        };
        let zone = self.wrap_zone(request.zone);
        if self.faults.contains(&Fault::NoCapacityInZone(zone)) {
            return Err(ComputeError::InsufficientCapacity {
                zone: request.zone,
                message: format!(
                    "simulated: no {} capacity in {}",
                    template.spec.instance_type,
                    self.zone_name(zone)
                ),
            });
        }
        let instance_type = template.spec.instance_type.clone();
        let user_data = template.spec.user_data.clone();
        // Tags given at launch win over the template's, as in EC2.
        let mut tags = template.spec.tags.clone();
        tags.extend(request.tags.clone());

        let now = Instant::now();
        let hosts = free_hosts(&state.world, zone, now, self.terminate_delay);
        if hosts.len() < request.count as usize {
            return Err(ComputeError::InsufficientCapacity {
                zone: request.zone,
                message: format!(
                    "simulated: not enough free addresses in the subnet of {}",
                    self.zone_name(zone)
                ),
            });
        }
        let ids = self
            .commit(&mut state.world, |world| {
                let mut ids = Vec::with_capacity(request.count as usize);
                for host in hosts.into_iter().take(request.count as usize) {
                    world.next_instance += 1;
                    let id = format!("i-sim{:012x}", world.next_instance);
                    // An address drawn for a launch that is then not saved
                    // stays used: never handing one out twice is the
                    // pool's only promise.
                    let loopback = match self.addresses {
                        AddressPool::Private => None,
                        AddressPool::Loopback => Some(draw_loopback()),
                    };
                    world.instances.push(SimInstance {
                        id: id.clone(),
                        instance_type: instance_type.clone(),
                        zone,
                        host,
                        tags: tags.clone(),
                        user_data: user_data.clone(),
                        loopback,
                        launched_at: now,
                        terminated_at: None,
                        stopped_at: None,
                        impaired: None,
                        scheduled: None,
                    });
                    ids.push(id);
                }
                world.tokens.insert(
                    request.client_token.clone(),
                    Launched {
                        request: request.clone(),
                        ids: ids.clone(),
                    },
                );
                ids
            })
            .map_err(not_saved)?;
        tracing::info!(
            template = %request.template_name,
            zone = %self.zone_name(zone),
            instances = ?ids,
            "simulated compute: launched instances"
        );
        Ok(ids)
    }

    async fn instances(&self, deployment_id: &str) -> Result<Vec<Instance>, ComputeError> {
        self.faults_requested();
        let mut state = self.lock();
        self.enter(&mut state, OP_INSTANCES)?;
        let now = Instant::now();
        Ok(state
            .world
            .instances
            .iter()
            .filter(|i| {
                i.tags
                    .get(TAG_DEPLOYMENT)
                    .is_some_and(|d| d == deployment_id)
            })
            .map(|i| self.seen(i, now))
            .collect())
    }

    /// One listing for them all, as EC2's by tag: a fault injected on
    /// `instances` fails it whole.
    async fn instances_of(
        &self,
        deployment_ids: &[String],
    ) -> Result<BTreeMap<String, Vec<Instance>>, ComputeError> {
        self.faults_requested();
        let mut state = self.lock();
        self.enter(&mut state, OP_INSTANCES)?;
        let now = Instant::now();
        let mut found: BTreeMap<String, Vec<Instance>> = deployment_ids
            .iter()
            .map(|id| (id.clone(), Vec::new()))
            .collect();
        for i in &state.world.instances {
            if let Some(list) = i.tags.get(TAG_DEPLOYMENT).and_then(|d| found.get_mut(d)) {
                list.push(self.seen(i, now));
            }
        }
        Ok(found)
    }

    async fn instance(&self, id: &str) -> Result<Option<Instance>, ComputeError> {
        self.faults_requested();
        let mut state = self.lock();
        self.enter(&mut state, OP_INSTANCES)?;
        let now = Instant::now();
        Ok(state
            .world
            .instances
            .iter()
            .find(|i| i.id == id)
            .map(|i| self.seen(i, now)))
    }

    async fn terminate(&self, ids: &[String]) -> Result<(), ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_TERMINATE)?;
        let now = Instant::now();
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        // A second terminate must not restart the shutdown clock.
        let terminated: Vec<String> = state
            .world
            .instances
            .iter()
            .filter(|i| wanted.contains(i.id.as_str()) && i.terminated_at.is_none())
            .map(|i| i.id.clone())
            .collect();
        if terminated.is_empty() {
            return Ok(());
        }
        self.commit(&mut state.world, |world| {
            for instance in world
                .instances
                .iter_mut()
                .filter(|i| wanted.contains(i.id.as_str()) && i.terminated_at.is_none())
            {
                instance.terminated_at = Some(now);
            }
        })
        .map_err(not_saved)?;
        tracing::info!(instances = ?terminated, "simulated compute: terminating instances");
        Ok(())
    }

    async fn status_checks(&self, ids: &[String]) -> Result<Vec<StatusChecks>, ComputeError> {
        let mut state = self.lock();
        self.enter(&mut state, OP_STATUS_CHECKS)?;
        let now = Instant::now();
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        // As EC2 without `IncludeAllInstances`: running instances only.
        Ok(state
            .world
            .instances
            .iter()
            .filter(|i| wanted.contains(i.id.as_str()))
            .filter(|i| {
                i.state(now, self.boot_delay, self.terminate_delay) == InstanceState::Running
            })
            .map(|i| i.checks(now, self.boot_delay))
            .collect())
    }
}

/// A change the simulation could not save: it was not made, so the call
/// failed without effect and may be retried (the disk may have room again).
fn not_saved(e: PersistError) -> ComputeError {
    tracing::warn!(error = %e, "simulated compute: state not saved, change not made");
    ComputeError::Transient {
        code: "simulated_state_not_saved".into(),
        message: e.to_string(),
    }
}

/// Calls `act` with the name and text of each file in `dir` (hidden ones
/// aside), then removes the file: each request acts once.
fn for_each_request(dir: Option<&std::path::Path>, mut act: impl FnMut(&str, &str)) {
    let Some(dir) = dir else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        let content = std::fs::read_to_string(entry.path()).unwrap_or_default();
        act(&name, &content);
        let _ = std::fs::remove_file(entry.path());
    }
}

/// Every loopback address this process has handed out: an address is
/// never given twice, so a listener left behind by one instance can never
/// answer for another.
static LOOPBACK_USED: std::sync::LazyLock<Mutex<BTreeSet<std::net::Ipv4Addr>>> =
    std::sync::LazyLock::new(|| Mutex::new(BTreeSet::new()));

/// Marks `ip` as handed out (to an instance loaded from a state file).
fn reserve_loopback(ip: std::net::Ipv4Addr) {
    LOOPBACK_USED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(ip);
}

/// A fresh random `127.a.b.c`, `a` in 1..=127, `b`, `c` in 1..=254 (never
/// `127.0.0.1` nor a network or broadcast-looking address). `127.128` and
/// above hold the deployments' endpoints
/// (`floe_domain::access::loopback_endpoint`).
fn draw_loopback() -> std::net::Ipv4Addr {
    use rand::Rng;
    let mut used = LOOPBACK_USED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut rng = rand::rng();
    loop {
        let ip = std::net::Ipv4Addr::new(
            127,
            rng.random_range(1..=127),
            rng.random_range(1..=254),
            rng.random_range(1..=254),
        );
        // 127 × 254² addresses: a process would need millions of instances
        // before this loops more than a few times.
        if used.insert(ip) {
            return ip;
        }
    }
}

/// Host numbers of `zone`'s subnet not held by an instance: an address is
/// free again once its instance is terminated, as in a VPC.
fn free_hosts(world: &World, zone: usize, now: Instant, terminate: Duration) -> Vec<u8> {
    let taken: BTreeSet<u8> = world
        .instances
        .iter()
        .filter(|i| i.zone == zone)
        .filter(|i| i.state(now, Duration::ZERO, terminate) != InstanceState::Terminated)
        .map(|i| i.host)
        .collect();
    (FIRST_HOST..=LAST_HOST)
        .filter(|h| !taken.contains(h))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_compute::{TAG_NODE_GROUP, Volume};
    use floe_domain::catalog::Arch;
    use floe_domain::deployment::VolumeType;
    use std::sync::Arc;

    type TestResult = Result<(), ComputeError>;

    fn spec(name: &str, instance_type: &str, arch: Arch) -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            name: name.into(),
            instance_type: instance_type.into(),
            arch,
            user_data: "#!/bin/bash\n".into(),
            volume: Volume {
                size_gb: 100,
                volume_type: VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            tags: BTreeMap::from([
                (TAG_DEPLOYMENT.to_string(), "dep-1".to_string()),
                (TAG_NODE_GROUP.to_string(), "template-group".to_string()),
            ]),
            instance_profile: None,
        }
    }

    fn request(template: &str, count: u32, zone: usize, token: &str, dep: &str) -> LaunchRequest {
        LaunchRequest {
            template_name: template.into(),
            count,
            zone,
            client_token: token.into(),
            tags: BTreeMap::from([
                (TAG_DEPLOYMENT.to_string(), dep.to_string()),
                (TAG_NODE_GROUP.to_string(), "hot".to_string()),
            ]),
        }
    }

    fn delays(boot_ms: u64, terminate_ms: u64) -> SimulatedConfig {
        SimulatedConfig {
            boot_delay: Duration::from_millis(boot_ms),
            terminate_delay: Duration::from_millis(terminate_ms),
            ..SimulatedConfig::default()
        }
    }

    fn fail(operation: &str, nth: u32, times: u32, error: ComputeError) -> Fault {
        Fault::FailCall {
            operation: operation.into(),
            nth,
            times,
            error,
        }
    }

    fn transient() -> ComputeError {
        ComputeError::Transient {
            code: "RequestLimitExceeded".into(),
            message: "slow down".into(),
        }
    }

    async fn with_template(sim: &SimulatedCompute) -> Result<String, ComputeError> {
        sim.ensure_launch_template(&spec("lt-hot", "m6g.xlarge", Arch::Arm64))
            .await
    }

    async fn states(sim: &SimulatedCompute, dep: &str) -> Result<Vec<InstanceState>, ComputeError> {
        Ok(sim.instances(dep).await?.iter().map(|i| i.state).collect())
    }

    fn failure_type(e: &ComputeError) -> Option<&str> {
        match e {
            ComputeError::Permanent { failure_type, .. } => Some(failure_type),
            _ => None,
        }
    }

    #[tokio::test]
    async fn templates_are_ensured_once_and_deleted_idempotently() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        let id = with_template(&sim).await?;
        assert_eq!(id, "lt-sim000000000001");
        // Same name, even with another spec: the existing template stands.
        let again = sim
            .ensure_launch_template(&spec("lt-hot", "m5.xlarge", Arch::X86_64))
            .await?;
        assert_eq!(again, id);
        let other = sim
            .ensure_launch_template(&spec("lt-warm", "m5.xlarge", Arch::X86_64))
            .await?;
        assert_eq!(other, "lt-sim000000000002");
        assert_eq!(sim.templates(), ["lt-hot", "lt-warm"]);
        // Found by the deployment's tag, not by name.
        let mut elsewhere = spec("lt-other", "m5.xlarge", Arch::X86_64);
        elsewhere
            .tags
            .insert(TAG_DEPLOYMENT.to_string(), "dep-2".to_string());
        sim.ensure_launch_template(&elsewhere).await?;
        assert_eq!(sim.launch_templates("dep-1").await?, ["lt-hot", "lt-warm"]);
        assert_eq!(sim.launch_templates("dep-2").await?, ["lt-other"]);
        sim.delete_launch_template("lt-other").await?;

        sim.delete_launch_template("lt-hot").await?;
        sim.delete_launch_template("lt-hot").await?;
        sim.delete_launch_template("never-existed").await?;
        assert_eq!(sim.templates(), ["lt-warm"]);
        assert_eq!(sim.calls("ensure_launch_template"), 4);
        assert_eq!(sim.calls("delete_launch_template"), 4);
        Ok(())
    }

    #[tokio::test]
    async fn template_architecture_must_match_the_catalog() {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        let err = sim
            .ensure_launch_template(&spec("lt-hot", "m6g.xlarge", Arch::X86_64))
            .await
            .err();
        assert_eq!(
            err.as_ref().and_then(failure_type),
            Some("architecture_mismatch")
        );
        let err = sim
            .ensure_launch_template(&spec("lt-hot", "m5.xlarge", Arch::Arm64))
            .await
            .err();
        assert_eq!(
            err.as_ref().and_then(failure_type),
            Some("architecture_mismatch")
        );
        let err = sim
            .ensure_launch_template(&spec("lt-hot", "t2.nano", Arch::X86_64))
            .await
            .err();
        assert_eq!(
            err.as_ref().and_then(failure_type),
            Some("instance_type_not_found")
        );
        assert!(sim.templates().is_empty());
    }

    #[tokio::test]
    async fn mismatch_is_refused_even_for_an_existing_name() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        let err = sim
            .ensure_launch_template(&spec("lt-hot", "m6g.xlarge", Arch::X86_64))
            .await
            .err();
        assert_eq!(
            err.as_ref().and_then(failure_type),
            Some("architecture_mismatch")
        );
        Ok(())
    }

    #[tokio::test]
    async fn launch_needs_an_existing_template() {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        let err = sim
            .launch(&request("missing", 1, 0, "t1", "dep-1"))
            .await
            .err();
        assert_eq!(
            err.as_ref().and_then(failure_type),
            Some("launch_template_not_found")
        );
    }

    #[tokio::test]
    async fn launch_of_zero_instances_is_refused() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        let err = sim
            .launch(&request("lt-hot", 0, 0, "t1", "dep-1"))
            .await
            .err();
        assert_eq!(
            err.as_ref().and_then(failure_type),
            Some("invalid_parameter")
        );
        Ok(())
    }

    #[tokio::test]
    async fn launched_instances_carry_ids_tags_zone_and_addresses() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        let first = sim.launch(&request("lt-hot", 2, 0, "t1", "dep-1")).await?;
        let second = sim.launch(&request("lt-hot", 1, 4, "t2", "dep-1")).await?;
        assert_eq!(first, ["i-sim000000000001", "i-sim000000000002"]);
        assert_eq!(second, ["i-sim000000000003"]);

        let listed = sim.instances("dep-1").await?;
        assert_eq!(listed.len(), 3);
        let zones: Vec<&str> = listed.iter().map(|i| i.zone.as_str()).collect();
        // Zone 4 wraps to index 1 of three zones.
        assert_eq!(zones, ["sim-a", "sim-a", "sim-b"]);
        let ips: Vec<Option<&str>> = listed.iter().map(|i| i.private_ip.as_deref()).collect();
        assert_eq!(ips, [Some("10.0.0.4"), Some("10.0.0.5"), Some("10.0.1.4")]);
        for i in &listed {
            assert_eq!(i.instance_type, "m6g.xlarge");
            assert_eq!(i.state, InstanceState::Running);
            // The request's tag wins over the template's.
            assert_eq!(i.tags.get(TAG_NODE_GROUP).map(String::as_str), Some("hot"));
            assert_eq!(
                i.tags.get(TAG_DEPLOYMENT).map(String::as_str),
                Some("dep-1")
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn configured_zones_are_used_and_wrapped() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig {
            zones: vec!["eu-central-1a".into(), "eu-central-1b".into()],
            ..SimulatedConfig::default()
        });
        with_template(&sim).await?;
        sim.launch(&request("lt-hot", 1, 3, "t1", "dep-1")).await?;
        let listed = sim.instances("dep-1").await?;
        assert_eq!(listed[0].zone, "eu-central-1b");
        assert_eq!(listed[0].private_ip.as_deref(), Some("10.0.1.4"));
        Ok(())
    }

    #[tokio::test]
    async fn a_client_token_replays_the_first_launch() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        let req = request("lt-hot", 3, 1, "plan-1/step-2", "dep-1");
        let first = sim.launch(&req).await?;
        let again = sim.launch(&req).await?;
        assert_eq!(first, again);
        assert_eq!(sim.instances("dep-1").await?.len(), 3);
        assert_eq!(sim.calls("launch"), 2);

        // Even after the template is gone, as EC2 remembers the token.
        sim.delete_launch_template("lt-hot").await?;
        assert_eq!(sim.launch(&req).await?, first);

        let mut changed = req.clone();
        changed.count = 4;
        let err = sim.launch(&changed).await.err();
        assert_eq!(
            err.as_ref().and_then(failure_type),
            Some("idempotent_parameter_mismatch")
        );
        assert_eq!(sim.instances("dep-1").await?.len(), 3);
        Ok(())
    }

    #[tokio::test]
    async fn instances_are_filtered_by_deployment_tag() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        sim.launch(&request("lt-hot", 2, 0, "a", "dep-a")).await?;
        sim.launch(&request("lt-hot", 1, 0, "b", "dep-b")).await?;
        let mut untagged = request("lt-hot", 1, 0, "c", "x");
        untagged.tags.clear();
        sim.launch(&untagged).await?;

        assert_eq!(sim.instances("dep-a").await?.len(), 2);
        assert_eq!(sim.instances("dep-b").await?.len(), 1);
        // The untagged launch inherits the template's deployment tag.
        assert_eq!(sim.instances("dep-1").await?.len(), 1);
        assert!(sim.instances("dep-c").await?.is_empty());
        assert!(sim.instances("").await?.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn instances_of_many_deployments_are_one_listing() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        sim.launch(&request("lt-hot", 2, 0, "a", "dep-a")).await?;
        sim.launch(&request("lt-hot", 1, 0, "b", "dep-b")).await?;
        sim.launch(&request("lt-hot", 1, 0, "c", "dep-c")).await?;
        let before = sim.calls("instances");
        let ids = ["dep-a", "dep-b", "dep-none", "dep-a*"].map(String::from);
        let found = sim.instances_of(&ids).await?;
        assert_eq!(sim.calls("instances") - before, 1);
        let counts: Vec<(&str, usize)> = found.iter().map(|(d, i)| (d.as_str(), i.len())).collect();
        // dep-c was not asked for; a wildcard is a name like any other.
        assert_eq!(
            counts,
            [("dep-a", 2), ("dep-a*", 0), ("dep-b", 1), ("dep-none", 0)]
        );
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn instances_boot_after_the_boot_delay() -> TestResult {
        let sim = SimulatedCompute::new(delays(30_000, 10_000));
        with_template(&sim).await?;
        sim.launch(&request("lt-hot", 2, 0, "t1", "dep-1")).await?;
        assert_eq!(
            states(&sim, "dep-1").await?,
            [InstanceState::Pending, InstanceState::Pending]
        );
        tokio::time::advance(Duration::from_millis(29_999)).await;
        assert_eq!(states(&sim, "dep-1").await?[0], InstanceState::Pending);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            states(&sim, "dep-1").await?,
            [InstanceState::Running, InstanceState::Running]
        );
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn terminated_instances_shut_down_then_stay_listed() -> TestResult {
        let sim = SimulatedCompute::new(delays(1_000, 5_000));
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 2, 0, "t1", "dep-1")).await?;
        tokio::time::advance(Duration::from_secs(2)).await;

        sim.terminate(&ids[..1]).await?;
        assert_eq!(
            states(&sim, "dep-1").await?,
            [InstanceState::ShuttingDown, InstanceState::Running]
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        // Terminating again does not restart the shutdown clock.
        sim.terminate(&ids[..1]).await?;
        tokio::time::advance(Duration::from_secs(2)).await;
        let listed = sim.instances("dep-1").await?;
        assert_eq!(listed[0].state, InstanceState::Terminated);
        assert_eq!(listed[0].private_ip, None);
        assert_eq!(listed[1].state, InstanceState::Running);
        assert_eq!(listed[1].private_ip.as_deref(), Some("10.0.0.5"));

        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(
            states(&sim, "dep-1").await?,
            [InstanceState::Terminated, InstanceState::Running]
        );
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn a_pending_instance_can_be_terminated() -> TestResult {
        let sim = SimulatedCompute::new(delays(60_000, 1_000));
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 1, 0, "t1", "dep-1")).await?;
        sim.terminate(&ids).await?;
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::ShuttingDown]);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::Terminated]);
        // It never becomes running afterwards.
        tokio::time::advance(Duration::from_secs(120)).await;
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::Terminated]);
        Ok(())
    }

    #[tokio::test]
    async fn zero_delays_change_state_at_once() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 1, 0, "t1", "dep-1")).await?;
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::Running]);
        sim.terminate(&ids).await?;
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::Terminated]);
        Ok(())
    }

    #[tokio::test]
    async fn terminating_unknown_or_terminated_ids_succeeds() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 1, 0, "t1", "dep-1")).await?;
        sim.terminate(&ids).await?;
        sim.terminate(&ids).await?;
        sim.terminate(&["i-doesnotexist".to_string()]).await?;
        sim.terminate(&[]).await?;
        assert_eq!(sim.calls("terminate"), 4);
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn addresses_are_reused_only_after_termination() -> TestResult {
        let sim = SimulatedCompute::new(delays(0, 10_000));
        with_template(&sim).await?;
        let first = sim.launch(&request("lt-hot", 1, 2, "t1", "dep-1")).await?;
        sim.terminate(&first).await?;
        sim.launch(&request("lt-hot", 1, 2, "t2", "dep-1")).await?;
        tokio::time::advance(Duration::from_secs(10)).await;
        sim.launch(&request("lt-hot", 1, 2, "t3", "dep-1")).await?;
        let ips: Vec<Option<String>> = sim
            .instances("dep-1")
            .await?
            .into_iter()
            .map(|i| i.private_ip)
            .collect();
        assert_eq!(
            ips,
            [None, Some("10.0.2.5".into()), Some("10.0.2.4".into())]
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_full_subnet_is_a_capacity_error() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        with_template(&sim).await?;
        let all = u32::from(LAST_HOST - FIRST_HOST) + 1;
        sim.launch(&request("lt-hot", all, 0, "t1", "dep-1"))
            .await?;
        let err = sim
            .launch(&request("lt-hot", 1, 0, "t2", "dep-1"))
            .await
            .err();
        assert!(matches!(
            err,
            Some(ComputeError::InsufficientCapacity { zone: 0, .. })
        ));
        // Another zone still has room.
        sim.launch(&request("lt-hot", 1, 1, "t3", "dep-1")).await?;
        Ok(())
    }

    #[tokio::test]
    async fn no_capacity_fault_fails_one_zone_only() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig {
            faults: vec![Fault::NoCapacityInZone(1)],
            ..SimulatedConfig::default()
        });
        with_template(&sim).await?;
        for zone in [1, 4] {
            let token = format!("t{zone}");
            let err = sim
                .launch(&request("lt-hot", 1, zone, &token, "dep-1"))
                .await
                .err();
            assert!(
                matches!(err, Some(ComputeError::InsufficientCapacity { zone: z, .. }) if z == zone),
                "{err:?}"
            );
        }
        // A failed launch does not burn the token: the retry elsewhere works.
        let ids = sim.launch(&request("lt-hot", 1, 2, "t1", "dep-1")).await?;
        assert_eq!(ids.len(), 1);
        assert_eq!(sim.instances("dep-1").await?.len(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn injected_faults_hit_the_chosen_calls_without_effect() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig {
            faults: vec![
                fail("launch", 2, 2, transient()),
                fail(
                    "terminate",
                    1,
                    1,
                    ComputeError::Permanent {
                        failure_type: "unauthorized".into(),
                        message: "no".into(),
                    },
                ),
            ],
            ..SimulatedConfig::default()
        });
        with_template(&sim).await?;
        let req = request("lt-hot", 1, 0, "t1", "dep-1");
        let first = sim.launch(&req).await?;
        assert_eq!(sim.launch(&req).await, Err(transient()));
        assert_eq!(sim.launch(&req).await, Err(transient()));
        assert_eq!(sim.launch(&req).await?, first);
        assert_eq!(sim.calls("launch"), 4);

        let err = sim.terminate(&first).await.err();
        assert_eq!(err.as_ref().and_then(failure_type), Some("unauthorized"));
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::Running]);
        sim.terminate(&first).await?;
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::Terminated]);
        Ok(())
    }

    #[tokio::test]
    async fn a_failed_first_launch_starts_nothing() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig {
            faults: vec![fail("launch", 1, 1, transient())],
            ..SimulatedConfig::default()
        });
        with_template(&sim).await?;
        let req = request("lt-hot", 2, 0, "t1", "dep-1");
        assert_eq!(sim.launch(&req).await, Err(transient()));
        assert!(sim.instances("dep-1").await?.is_empty());
        assert_eq!(sim.launch(&req).await?.len(), 2);
        Ok(())
    }

    #[tokio::test]
    async fn every_operation_can_fail() -> TestResult {
        let faults = OPERATIONS
            .iter()
            .map(|op| fail(op, 1, 1, transient()))
            .collect();
        let sim = SimulatedCompute::new(SimulatedConfig {
            faults,
            ..SimulatedConfig::default()
        });
        let lt = spec("lt-hot", "m6g.xlarge", Arch::Arm64);
        assert_eq!(sim.ensure_launch_template(&lt).await, Err(transient()));
        assert!(sim.templates().is_empty());
        assert_eq!(sim.delete_launch_template("x").await, Err(transient()));
        assert_eq!(sim.launch_templates("dep-1").await, Err(transient()));
        let req = request("lt-hot", 1, 0, "t1", "dep-1");
        assert_eq!(sim.launch(&req).await, Err(transient()));
        assert_eq!(sim.instances("dep-1").await, Err(transient()));
        assert_eq!(sim.terminate(&[]).await, Err(transient()));
        assert_eq!(sim.status_checks(&[]).await, Err(transient()));
        for op in OPERATIONS {
            assert_eq!(sim.calls(op), 1, "{op}");
        }
        assert_eq!(sim.calls("reboot"), 0);

        sim.ensure_launch_template(&lt).await?;
        sim.delete_launch_template("x").await?;
        sim.launch_templates("dep-1").await?;
        sim.launch(&req).await?;
        sim.instances("dep-1").await?;
        sim.terminate(&[]).await?;
        sim.status_checks(&[]).await?;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn an_impaired_instance_runs_and_fails_its_check() -> TestResult {
        let sim = SimulatedCompute::new(delays(1_000, 1_000));
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 3, 0, "t1", "dep-1")).await?;
        // Pending: nothing to impair, no checks reported.
        assert!(!sim.impair(&ids[0], Impairment::Instance));
        assert_eq!(sim.status_checks(&ids).await?, Vec::new());
        tokio::time::advance(Duration::from_millis(1_500)).await;
        let checks = sim.status_checks(&ids).await?;
        assert_eq!(checks.len(), 3);
        assert!(
            checks
                .iter()
                .all(|c| c.instance == CheckStatus::Initializing),
            "{checks:?}"
        );
        tokio::time::advance(Duration::from_secs(1)).await;

        assert!(sim.impair(&ids[0], Impairment::Instance));
        assert!(sim.impair(&ids[1], Impairment::System));
        assert!(!sim.impair("i-unknown", Impairment::System));
        let checks = sim.status_checks(&ids).await?;
        let of = |id: &str| checks.iter().find(|c| c.id == id).cloned();
        assert_eq!(
            of(&ids[0]).map(|c| c.failing()),
            Some(vec!["instance status check"])
        );
        assert_eq!(
            of(&ids[1]).map(|c| c.failing()),
            Some(vec!["system status check"])
        );
        assert_eq!(of(&ids[2]).map(|c| c.impaired()), Some(false));
        // Impaired instances still run.
        assert_eq!(states(&sim, "dep-1").await?, [InstanceState::Running; 3]);

        // Terminated: no checks any more.
        sim.terminate(&ids[..1]).await?;
        let checks = sim.status_checks(&ids).await?;
        assert_eq!(checks.len(), 2);
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_instance_keeps_its_address_until_terminated() -> TestResult {
        let sim = SimulatedCompute::new(delays(0, 1_000));
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 2, 0, "t1", "dep-1")).await?;
        assert!(sim.stop(&ids[0]));
        assert!(
            !sim.stop(&ids[0]),
            "a stopping instance does not stop again"
        );
        assert_eq!(
            states(&sim, "dep-1").await?,
            [InstanceState::Stopping, InstanceState::Running]
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        let listed = sim.instances("dep-1").await?;
        assert_eq!(listed[0].state, InstanceState::Stopped);
        assert!(listed[0].private_ip.is_some());
        assert_eq!(
            sim.status_checks(&ids).await?.len(),
            1,
            "a stopped instance has no status checks"
        );
        // Terminating a stopped instance ends it.
        sim.terminate(&ids[..1]).await?;
        assert_eq!(
            states(&sim, "dep-1").await?,
            [InstanceState::ShuttingDown, InstanceState::Running]
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            states(&sim, "dep-1").await?,
            [InstanceState::Terminated, InstanceState::Running]
        );
        Ok(())
    }

    #[tokio::test]
    async fn files_in_the_fault_folders_kill_impair_and_stop_once() -> TestResult {
        let root = std::env::temp_dir().join(format!("floe-sim-faults-{}", std::process::id()));
        let dir = |name: &str| -> Result<std::path::PathBuf, ComputeError> {
            let d = root.join(name);
            std::fs::create_dir_all(&d).map_err(|e| ComputeError::Permanent {
                failure_type: "test_setup".into(),
                message: e.to_string(),
            })?;
            Ok(d)
        };
        let (kill, impair, stop) = (dir("kill")?, dir("impair")?, dir("stop")?);
        let sim = SimulatedCompute::new(SimulatedConfig {
            kill_dir: Some(kill.clone()),
            impair_dir: Some(impair.clone()),
            stop_dir: Some(stop.clone()),
            ..SimulatedConfig::default()
        });
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 5, 0, "t1", "dep-1")).await?;
        let write = |d: &std::path::Path, name: &str, text: &str| {
            std::fs::write(d.join(name), text).map_err(|e| ComputeError::Permanent {
                failure_type: "test_setup".into(),
                message: e.to_string(),
            })
        };
        write(&kill, &ids[0], "")?;
        write(&impair, &ids[1], "")?;
        write(&impair, &ids[2], "system\n")?;
        write(&stop, &ids[3], "")?;
        write(&impair, &ids[4], "ebs")?;
        write(&stop, "i-unknown", "")?;
        let listed = sim.instances("dep-1").await?;
        let states: Vec<InstanceState> = listed.iter().map(|i| i.state).collect();
        assert_eq!(
            states,
            [
                InstanceState::Terminated,
                InstanceState::Running,
                InstanceState::Running,
                InstanceState::Stopped,
                InstanceState::Running
            ]
        );
        let checks = sim.status_checks(&ids).await?;
        let failing: Vec<(String, Vec<&str>)> =
            checks.iter().map(|c| (c.id.clone(), c.failing())).collect();
        assert_eq!(
            failing,
            [
                (ids[1].clone(), vec!["instance status check"]),
                (ids[2].clone(), vec!["system status check"]),
                (ids[4].clone(), vec!["attached EBS status check"])
            ]
        );
        // Each file acted once and is gone.
        for d in [&kill, &impair, &stop] {
            let left = std::fs::read_dir(d).map(|e| e.count()).unwrap_or(0);
            assert_eq!(left, 0, "{}", d.display());
        }
        let _ = std::fs::remove_dir_all(&root);
        Ok(())
    }

    #[tokio::test]
    async fn concurrent_launches_get_distinct_ids_and_addresses() -> TestResult {
        let sim = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
        with_template(&sim).await?;
        let mut tasks = Vec::new();
        for n in 0..20 {
            let sim = Arc::clone(&sim);
            tasks.push(tokio::spawn(async move {
                let token = format!("t{n}");
                sim.launch(&request("lt-hot", 2, n % 3, &token, "dep-1"))
                    .await
            }));
        }
        for task in tasks {
            let launched = task.await.map_err(|e| ComputeError::Transient {
                code: "join".into(),
                message: e.to_string(),
            })??;
            assert_eq!(launched.len(), 2);
        }
        let listed = sim.instances("dep-1").await?;
        let ids: BTreeSet<&str> = listed.iter().map(|i| i.id.as_str()).collect();
        let ips: BTreeSet<Option<&str>> = listed.iter().map(|i| i.private_ip.as_deref()).collect();
        assert_eq!(ids.len(), 40);
        assert_eq!(ips.len(), 40);
        Ok(())
    }

    #[tokio::test]
    async fn the_loopback_pool_gives_each_instance_its_own_loopback_address() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig {
            addresses: AddressPool::Loopback,
            ..SimulatedConfig::default()
        });
        with_template(&sim).await?;
        let ids = sim.launch(&request("lt-hot", 20, 0, "t1", "dep-1")).await?;
        sim.launch(&request("lt-hot", 5, 1, "t2", "dep-1")).await?;
        let listed = sim.instances("dep-1").await?;
        let ips: BTreeSet<std::net::Ipv4Addr> = listed
            .iter()
            .filter_map(|i| i.private_ip.as_deref()?.parse().ok())
            .collect();
        assert_eq!(ips.len(), 25, "{listed:?}");
        for ip in &ips {
            let [a, b, c, d] = ip.octets();
            assert_eq!(a, 127, "{ip}");
            assert!([b, c, d].iter().all(|o| (1..=254).contains(o)), "{ip}");
            // Below the deployments' endpoints.
            assert!(b <= 127, "{ip}");
        }
        // A terminated instance's address is never handed out again.
        sim.terminate(&ids[..1]).await?;
        sim.launch(&request("lt-hot", 1, 0, "t3", "dep-1")).await?;
        let again: BTreeSet<std::net::Ipv4Addr> = sim
            .instances("dep-1")
            .await?
            .iter()
            .filter_map(|i| i.private_ip.as_deref()?.parse().ok())
            .collect();
        assert_eq!(again.len(), 25);
        assert!(again.difference(&ips).count() == 1);
        Ok(())
    }

    #[tokio::test]
    async fn instances_keep_the_user_data_they_were_launched_with() -> TestResult {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        let mut lt = spec("lt-hot", "m6g.xlarge", Arch::Arm64);
        lt.user_data = "s3.client.floe.endpoint: \"minio:9000\"\n".into();
        sim.ensure_launch_template(&lt).await?;
        let ids = sim.launch(&request("lt-hot", 1, 0, "t1", "dep-1")).await?;
        sim.delete_launch_template("lt-hot").await?;
        assert_eq!(
            sim.user_data(&ids[0]).as_deref(),
            Some(lt.user_data.as_str())
        );
        assert_eq!(sim.user_data("i-unknown"), None);
        Ok(())
    }

    #[test]
    fn parse_defaults_to_no_fault() -> Result<(), String> {
        let c = SimulatedConfig::parse(Duration::ZERO, Duration::ZERO, "")?;
        assert_eq!(c.zones, ["sim-a", "sim-b", "sim-c"]);
        assert_eq!(c.boot_delay, Duration::ZERO);
        assert_eq!(c.terminate_delay, Duration::ZERO);
        assert!(c.faults.is_empty());
        let c = SimulatedConfig::parse(Duration::ZERO, Duration::ZERO, "  ")?;
        assert!(c.faults.is_empty());
        assert_eq!(c.boot_delay, Duration::ZERO);
        Ok(())
    }

    #[test]
    fn parse_keeps_the_delays_and_reads_the_faults() -> Result<(), String> {
        let c = SimulatedConfig::parse(
            Duration::from_millis(1500),
            Duration::from_millis(200),
            "launch:1:1:permanent, terminate:2:3:transient,capacity:0,instances:4:1:transient=Throttling,ensure_launch_template:1:2:permanent=unauthorized",
        )?;
        assert_eq!(c.boot_delay, Duration::from_millis(1500));
        assert_eq!(c.terminate_delay, Duration::from_millis(200));
        let message = |op: &str, n: u32| format!("injected fault on {op} call {n}");
        assert_eq!(
            c.faults,
            [
                fail(
                    "launch",
                    1,
                    1,
                    ComputeError::Permanent {
                        failure_type: "simulated_failure".into(),
                        message: message("launch", 1),
                    }
                ),
                fail(
                    "terminate",
                    2,
                    3,
                    ComputeError::Transient {
                        code: "simulated_transient".into(),
                        message: message("terminate", 2),
                    }
                ),
                Fault::NoCapacityInZone(0),
                fail(
                    "instances",
                    4,
                    1,
                    ComputeError::Transient {
                        code: "Throttling".into(),
                        message: message("instances", 4),
                    }
                ),
                fail(
                    "ensure_launch_template",
                    1,
                    2,
                    ComputeError::Permanent {
                        failure_type: "unauthorized".into(),
                        message: message("ensure_launch_template", 1),
                    }
                ),
            ]
        );
        Ok(())
    }

    #[test]
    fn parse_refuses_a_bad_fault() {
        // The delays arrive parsed (floe-wiring's tests cover their
        // mistakes); the caller names FLOE_SIM_FAULTS on these.
        let cases = [
            "launch:1:1",
            "reboot:1:1:transient",
            "launch:0:1:transient",
            "launch:1:0:transient",
            "launch:x:1:transient",
            "launch:1:1:fatal",
            "launch:1:1:permanent=",
            "capacity:a",
            "capacity:-1",
            "launch:1:1:transient,,capacity:0",
            "launch:1:1:transient,",
        ];
        for value in cases {
            match SimulatedConfig::parse(Duration::ZERO, Duration::ZERO, value) {
                Ok(c) => panic!("{value:?} was accepted: {c:?}"),
                Err(e) => assert!(!e.is_empty(), "{value:?}"),
            }
        }
    }

    #[test]
    fn simulated_config_default_uses_the_default_zones() {
        let sim = SimulatedCompute::new(SimulatedConfig::default());
        assert_eq!(sim.zones, ["sim-a", "sim-b", "sim-c"]);
        assert_eq!(sim.calls("launch"), 0);
        assert!(sim.templates().is_empty());
    }
}
