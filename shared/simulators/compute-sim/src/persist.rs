//! The state files of [`SimulatedCompute::persisted`] and
//! [`SimulatedParameters::persisted`]: JSON, written whole after every
//! change, atomically (a temporary file beside the target, synced, then
//! renamed over it), readable by the owner only.
//!
//! The port's types do not derive serde (production has no use for it), so
//! the file has mirrors of its own here, converted both ways.
//!
//! [`SimulatedCompute::persisted`]: crate::SimulatedCompute::persisted
//! [`SimulatedParameters::persisted`]: crate::SimulatedParameters::persisted

use crate::parameters::Sealer;
use crate::{Impairment, Launched, SimInstance, Template, World};
use floe_compute::parameters::SecretOrPlain;
use floe_compute::{LaunchRequest, LaunchTemplateSpec, ScheduledEvent, Volume};
use floe_domain::catalog::Arch;
use floe_domain::deployment::VolumeType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// The format of both files; a file of another version is refused rather
/// than misread.
const VERSION: u32 = 1;

/// A state file that cannot be read, parsed or written.
#[derive(Debug, thiserror::Error)]
#[error("simulated state file {}: {cause}", path.display())]
pub struct PersistError {
    pub path: PathBuf,
    pub cause: PersistCause,
}

#[derive(Debug, thiserror::Error)]
pub enum PersistCause {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not the JSON this crate writes (a file cut short, edited by hand).
    #[error("not a state file this version can read: {0}")]
    Format(String),
    #[error("format version {found}, this build reads version {VERSION}")]
    Version { found: u32 },
    /// A secure value could not be sealed or opened (another key, say).
    #[error("a secure value cannot be sealed or opened: {0}")]
    Seal(String),
}

/// Where one simulation keeps its state.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
}

impl StateFile {
    /// Makes sure the folder exists, so that a missing folder shows now
    /// rather than at the first change.
    pub(crate) fn open(path: PathBuf) -> Result<StateFile, PersistError> {
        let file = StateFile { path };
        std::fs::create_dir_all(file.dir()).map_err(|e| file.error(e.into()))?;
        Ok(file)
    }

    pub(crate) fn error(&self, cause: PersistCause) -> PersistError {
        PersistError {
            path: self.path.clone(),
            cause,
        }
    }

    fn dir(&self) -> &Path {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    }

    /// The file's bytes; `None` when there is no file yet (a first start).
    /// Any other failure is an error: starting empty over a file that
    /// exists would lose it at the first write.
    fn read(&self) -> Result<Option<Vec<u8>>, PersistError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.error(e.into())),
        }
    }

    /// Replaces the file with `bytes`: whoever reads it (a restart after a
    /// crash included) sees the old state or the new one, never a mix.
    fn write(&self, bytes: &[u8]) -> Result<(), PersistError> {
        let io = |e: std::io::Error| self.error(e.into());
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Hidden, and in the same folder so that the rename stays on one
        // file system and is atomic.
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(self.dir())
            .map_err(io)?;
        // The parameters hold private keys and passwords; tempfile creates
        // its files 0600 already, this says so whatever its defaults become.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io)?;
        }
        tmp.write_all(bytes).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        // The rename is in place; syncing the folder only makes it survive
        // a power cut. The new state is what the file holds now, so a
        // failure here is no reason to undo the change.
        #[cfg(unix)]
        if let Err(e) = std::fs::File::open(self.dir()).and_then(|d| d.sync_all()) {
            tracing::warn!(error = %e, file = %self.path.display(), "simulated state: cannot sync the folder after a write");
        }
        Ok(())
    }
}

/// One reading of both clocks: the file keeps wall-clock times (an
/// `Instant` means nothing to another process), memory keeps `Instant`s
/// (of tokio's clock, which tests pause).
pub(crate) struct Clock {
    now: Instant,
    wall: Duration,
}

impl Clock {
    pub(crate) fn now() -> Clock {
        Clock {
            now: Instant::now(),
            // A clock before 1970 is broken beyond what this can mend.
            wall: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        }
    }

    /// Milliseconds since the epoch of `at` (an instant of the past).
    fn wall_ms(&self, at: Instant) -> u64 {
        let age = self.now.saturating_duration_since(at);
        millis(self.wall.saturating_sub(age))
    }

    /// The instant of `wall_ms` as seen now: as long ago as it was by the
    /// wall clock (a time in the future counts as now). `longest` is an
    /// age past which nothing about an instance changes any more: an age
    /// the monotonic clock cannot go back to (a machine booted since) is
    /// shortened to it.
    fn instant(&self, wall_ms: u64, longest: Duration) -> Instant {
        let age = self.wall.saturating_sub(Duration::from_millis(wall_ms));
        self.now
            .checked_sub(age)
            .or_else(|| self.now.checked_sub(age.min(longest)))
            .unwrap_or(self.now)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

// ---- The simulated compute ----

#[derive(Serialize, Deserialize)]
struct ComputeFile {
    version: u32,
    next_template: u64,
    next_instance: u64,
    /// Each by its spec's name.
    templates: Vec<TemplateFile>,
    /// In launch order.
    instances: Vec<InstanceFile>,
    /// Client token → what was launched with it; sorted, so that the file
    /// only changes where the state does.
    tokens: BTreeMap<String, LaunchedFile>,
}

#[derive(Serialize, Deserialize)]
struct TemplateFile {
    id: String,
    spec: SpecFile,
}

#[derive(Serialize, Deserialize)]
struct SpecFile {
    name: String,
    instance_type: String,
    arch: Arch,
    user_data: String,
    volume: VolumeFile,
    tags: BTreeMap<String, String>,
    instance_profile: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct VolumeFile {
    size_gb: u32,
    volume_type: VolumeType,
    iops: Option<u32>,
    throughput: Option<u32>,
}

#[derive(Serialize, Deserialize)]
struct LaunchedFile {
    request: RequestFile,
    ids: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct RequestFile {
    template_name: String,
    count: u32,
    zone: usize,
    client_token: String,
    tags: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct InstanceFile {
    id: String,
    instance_type: String,
    zone: usize,
    host: u8,
    tags: BTreeMap<String, String>,
    user_data: String,
    loopback: Option<Ipv4Addr>,
    /// Wall-clock milliseconds since the epoch.
    launched_at_ms: u64,
    terminated_at_ms: Option<u64>,
    stopped_at_ms: Option<u64>,
    impaired: Option<ImpairmentFile>,
    #[serde(default)]
    scheduled: Option<ScheduledEvent>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ImpairmentFile {
    Instance,
    System,
    AttachedEbs,
}

impl From<&Volume> for VolumeFile {
    fn from(v: &Volume) -> VolumeFile {
        VolumeFile {
            size_gb: v.size_gb,
            volume_type: v.volume_type,
            iops: v.iops,
            throughput: v.throughput,
        }
    }
}

impl From<VolumeFile> for Volume {
    fn from(v: VolumeFile) -> Volume {
        Volume {
            size_gb: v.size_gb,
            volume_type: v.volume_type,
            iops: v.iops,
            throughput: v.throughput,
        }
    }
}

impl From<&LaunchTemplateSpec> for SpecFile {
    fn from(s: &LaunchTemplateSpec) -> SpecFile {
        SpecFile {
            name: s.name.clone(),
            instance_type: s.instance_type.clone(),
            arch: s.arch,
            user_data: s.user_data.clone(),
            volume: (&s.volume).into(),
            tags: s.tags.clone(),
            instance_profile: s.instance_profile.clone(),
        }
    }
}

impl From<SpecFile> for LaunchTemplateSpec {
    fn from(s: SpecFile) -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            name: s.name,
            instance_type: s.instance_type,
            arch: s.arch,
            user_data: s.user_data,
            volume: s.volume.into(),
            tags: s.tags,
            instance_profile: s.instance_profile,
        }
    }
}

impl From<&LaunchRequest> for RequestFile {
    fn from(r: &LaunchRequest) -> RequestFile {
        RequestFile {
            template_name: r.template_name.clone(),
            count: r.count,
            zone: r.zone,
            client_token: r.client_token.clone(),
            tags: r.tags.clone(),
        }
    }
}

impl From<RequestFile> for LaunchRequest {
    fn from(r: RequestFile) -> LaunchRequest {
        LaunchRequest {
            template_name: r.template_name,
            count: r.count,
            zone: r.zone,
            client_token: r.client_token,
            tags: r.tags,
        }
    }
}

impl From<Impairment> for ImpairmentFile {
    fn from(i: Impairment) -> ImpairmentFile {
        match i {
            Impairment::Instance => ImpairmentFile::Instance,
            Impairment::System => ImpairmentFile::System,
            Impairment::AttachedEbs => ImpairmentFile::AttachedEbs,
        }
    }
}

impl From<ImpairmentFile> for Impairment {
    fn from(i: ImpairmentFile) -> Impairment {
        match i {
            ImpairmentFile::Instance => Impairment::Instance,
            ImpairmentFile::System => Impairment::System,
            ImpairmentFile::AttachedEbs => Impairment::AttachedEbs,
        }
    }
}

impl StateFile {
    /// The simulated compute's state as the file has it; an empty world
    /// when there is no file yet. `longest`: see [`Clock::instant`].
    pub(crate) fn load_world(&self, longest: Duration) -> Result<World, PersistError> {
        let Some(bytes) = self.read()? else {
            return Ok(World::default());
        };
        let file: ComputeFile = serde_json::from_slice(&bytes)
            .map_err(|e| self.error(PersistCause::Format(e.to_string())))?;
        if file.version != VERSION {
            return Err(self.error(PersistCause::Version {
                found: file.version,
            }));
        }
        let clock = Clock::now();
        let templates: BTreeMap<String, Template> = file
            .templates
            .into_iter()
            .map(|t| {
                let spec = LaunchTemplateSpec::from(t.spec);
                (spec.name.clone(), Template { id: t.id, spec })
            })
            .collect();
        let instances: Vec<SimInstance> = file
            .instances
            .into_iter()
            .map(|i| SimInstance {
                id: i.id,
                instance_type: i.instance_type,
                zone: i.zone,
                host: i.host,
                tags: i.tags,
                user_data: i.user_data,
                loopback: i.loopback,
                launched_at: clock.instant(i.launched_at_ms, longest),
                terminated_at: i.terminated_at_ms.map(|t| clock.instant(t, longest)),
                stopped_at: i.stopped_at_ms.map(|t| clock.instant(t, longest)),
                impaired: i.impaired.map(Impairment::from),
                scheduled: i.scheduled,
            })
            .collect();
        let tokens = file
            .tokens
            .into_iter()
            .map(|(token, l)| {
                (
                    token,
                    Launched {
                        request: l.request.into(),
                        ids: l.ids,
                    },
                )
            })
            .collect();
        // The counters make the ids; a file whose counter lags its own ids
        // (edited by hand) must still never give an id twice.
        let highest = |prefix: &str, ids: &mut dyn Iterator<Item = &String>| {
            ids.filter_map(|id| u64::from_str_radix(id.strip_prefix(prefix)?, 16).ok())
                .max()
                .unwrap_or(0)
        };
        let next_template = file
            .next_template
            .max(highest("lt-sim", &mut templates.values().map(|t| &t.id)));
        let next_instance = file
            .next_instance
            .max(highest("i-sim", &mut instances.iter().map(|i| &i.id)));
        Ok(World {
            templates,
            instances,
            tokens,
            next_template,
            next_instance,
        })
    }

    /// Writes `world` over the file.
    pub(crate) fn save_world(&self, world: &World) -> Result<(), PersistError> {
        let clock = Clock::now();
        let file = ComputeFile {
            version: VERSION,
            next_template: world.next_template,
            next_instance: world.next_instance,
            templates: world
                .templates
                .values()
                .map(|t| TemplateFile {
                    id: t.id.clone(),
                    spec: (&t.spec).into(),
                })
                .collect(),
            instances: world
                .instances
                .iter()
                .map(|i| InstanceFile {
                    id: i.id.clone(),
                    instance_type: i.instance_type.clone(),
                    zone: i.zone,
                    host: i.host,
                    tags: i.tags.clone(),
                    user_data: i.user_data.clone(),
                    loopback: i.loopback,
                    launched_at_ms: clock.wall_ms(i.launched_at),
                    terminated_at_ms: i.terminated_at.map(|t| clock.wall_ms(t)),
                    stopped_at_ms: i.stopped_at.map(|t| clock.wall_ms(t)),
                    impaired: i.impaired.map(ImpairmentFile::from),
                    scheduled: i.scheduled.clone(),
                })
                .collect(),
            tokens: world
                .tokens
                .iter()
                .map(|(token, l)| {
                    (
                        token.clone(),
                        LaunchedFile {
                            request: (&l.request).into(),
                            ids: l.ids.clone(),
                        },
                    )
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file)
            .map_err(|e| self.error(PersistCause::Format(e.to_string())))?;
        self.write(&bytes)
    }
}

// ---- The simulated parameters ----

/// Secure values are sealed ([`crate::parameters::Sealer`]).
#[derive(Serialize, Deserialize)]
struct ParametersFile {
    version: u32,
    parameters: BTreeMap<String, ParameterFile>,
}

/// Named as Parameter Store names its types.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", content = "value")]
enum ParameterFile {
    String(String),
    SecureString(String),
}

impl StateFile {
    /// The parameters the file holds; none when there is no file yet.
    pub(crate) fn load_parameters(
        &self,
        sealer: &dyn Sealer,
    ) -> Result<BTreeMap<String, SecretOrPlain>, PersistError> {
        let Some(bytes) = self.read()? else {
            return Ok(BTreeMap::new());
        };
        // serde_json's messages may quote a value it did not expect, which
        // here may be a secret: say only what went wrong and where.
        let file: ParametersFile = serde_json::from_slice(&bytes).map_err(|e| {
            self.error(PersistCause::Format(format!(
                "{:?} error at line {} column {}",
                e.classify(),
                e.line(),
                e.column()
            )))
        })?;
        if file.version != VERSION {
            return Err(self.error(PersistCause::Version {
                found: file.version,
            }));
        }
        file.parameters
            .into_iter()
            .map(|(name, v)| {
                let value = match v {
                    ParameterFile::String(v) => SecretOrPlain::plain(v),
                    ParameterFile::SecureString(sealed) => SecretOrPlain::secret(
                        sealer
                            .open(&name, &sealed)
                            .map_err(|e| self.error(PersistCause::Seal(format!("{name}: {e}"))))?,
                    ),
                };
                Ok((name, value))
            })
            .collect()
    }

    /// Writes `parameters` over the file.
    pub(crate) fn save_parameters(
        &self,
        parameters: &BTreeMap<String, SecretOrPlain>,
        sealer: &dyn Sealer,
    ) -> Result<(), PersistError> {
        let mut kept = BTreeMap::new();
        for (name, v) in parameters {
            let value = match v {
                SecretOrPlain::Plain(v) => ParameterFile::String(v.clone()),
                SecretOrPlain::Secret(s) => ParameterFile::SecureString(
                    sealer
                        .seal(name, s.expose())
                        .map_err(|e| self.error(PersistCause::Seal(format!("{name}: {e}"))))?,
                ),
            };
            kept.insert(name.clone(), value);
        }
        let file = ParametersFile {
            version: VERSION,
            parameters: kept,
        };
        let bytes = serde_json::to_vec_pretty(&file)
            .map_err(|e| self.error(PersistCause::Format(format!("{:?}", e.classify()))))?;
        self.write(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LOOPBACK_USED, SimulatedCompute, SimulatedConfig};
    use floe_compute::{Compute, InstanceState, TAG_DEPLOYMENT};
    use std::sync::PoisonError;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn times_go_through_the_wall_clock_and_back() {
        let clock = Clock::now();
        let longest = Duration::from_secs(60);
        let ten_ago = clock.now - Duration::from_secs(10);
        let wall = clock.wall_ms(ten_ago);
        let back = clock.instant(wall, longest);
        let error = back
            .max(ten_ago)
            .saturating_duration_since(back.min(ten_ago));
        assert!(error < Duration::from_millis(2), "{error:?}");
        // A time in the future (a clock set back since) counts as now.
        let future = millis(clock.wall) + 60_000;
        assert_eq!(clock.instant(future, longest), clock.now);
    }

    /// A file as another process wrote it: its instance's loopback address
    /// is one this process never drew, and its counter lags its ids.
    #[tokio::test]
    async fn loading_reserves_addresses_and_keeps_ids_unique() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("compute.json");
        let held = Ipv4Addr::new(127, 77, 1, 201);
        let now_ms = millis(Clock::now().wall);
        let file = serde_json::json!({
            "version": 1,
            "next_template": 0,
            "next_instance": 0,
            "templates": [{
                "id": "lt-sim000000000009",
                "spec": {
                    "name": "lt-hot",
                    "instance_type": "m6g.xlarge",
                    "arch": "arm64",
                    "user_data": "",
                    "volume": {"size_gb": 10, "volume_type": "gp3", "iops": null, "throughput": null},
                    "tags": {TAG_DEPLOYMENT: "dep-1"},
                    "instance_profile": null
                }
            }],
            "instances": [{
                "id": "i-sim00000000000a",
                "instance_type": "m6g.xlarge",
                "zone": 0,
                "host": 4,
                "tags": {TAG_DEPLOYMENT: "dep-1"},
                "user_data": "",
                "loopback": held.to_string(),
                "launched_at_ms": now_ms - 5_000,
                "terminated_at_ms": null,
                "stopped_at_ms": null,
                "impaired": "instance",
                "scheduled": {"code": "system-reboot", "description": "Scheduled reboot"}
            }],
            "tokens": {}
        });
        std::fs::write(&path, serde_json::to_vec(&file)?)?;
        let in_use = || {
            LOOPBACK_USED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&held)
        };
        assert!(!in_use());
        let sim = SimulatedCompute::persisted(
            SimulatedConfig {
                boot_delay: Duration::from_secs(1),
                ..SimulatedConfig::default()
            },
            path,
        )?;
        assert!(in_use(), "the loaded instance's address is reserved");
        let listed = sim.instances("dep-1").await?;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].state, InstanceState::Running);
        assert_eq!(listed[0].private_ip, Some(held.to_string()));
        let checks = sim
            .status_checks(&["i-sim00000000000a".to_string()])
            .await?;
        assert_eq!(
            checks.first().map(|c| c.scheduled_events.len()),
            Some(1),
            "the scheduled event is kept: {checks:?}"
        );
        let ids = sim
            .launch(&floe_compute::LaunchRequest {
                template_name: "lt-hot".into(),
                count: 1,
                zone: 0,
                client_token: "t1".into(),
                tags: BTreeMap::new(),
            })
            .await?;
        assert_eq!(ids, ["i-sim00000000000b"]);
        let mut spec = sim_spec();
        spec.name = "lt-warm".into();
        assert_eq!(
            sim.ensure_launch_template(&spec).await?,
            "lt-sim00000000000a"
        );
        Ok(())
    }

    fn sim_spec() -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            name: "lt-hot".into(),
            instance_type: "m6g.xlarge".into(),
            arch: Arch::Arm64,
            user_data: String::new(),
            volume: Volume {
                size_gb: 10,
                volume_type: VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            tags: BTreeMap::new(),
            instance_profile: None,
        }
    }
}
