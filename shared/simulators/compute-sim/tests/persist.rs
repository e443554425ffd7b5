//! The persisted simulations: what a restart of local mode finds. Each test
//! builds a simulation on a file, changes it, drops it, builds another on
//! the same file and compares what both answer.

use floe_compute::parameters::{NodeParameters, SecretOrPlain};
use floe_compute::{
    CheckStatus, Compute, ComputeError, Instance, InstanceState, LaunchRequest, LaunchTemplateSpec,
    StatusChecks, TAG_DEPLOYMENT, TAG_NODE_GROUP, Volume,
};
use floe_compute_sim::{
    AddressPool, Impairment, PersistCause, Sealer, SimulatedCompute, SimulatedConfig,
    SimulatedParameters,
};
use floe_domain::catalog::Arch;
use floe_domain::deployment::VolumeType;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const DEP: &str = "dep-1";

/// Seals by reversing and marking, bound to the name: enough to show the
/// file holds no secret in the clear and that a value moved to another
/// name does not open.
struct Reversed;

impl Sealer for Reversed {
    fn seal(&self, name: &str, plaintext: &str) -> Result<String, String> {
        Ok(format!(
            "sealed:{name}:{}",
            plaintext.chars().rev().collect::<String>()
        ))
    }

    fn open(&self, name: &str, sealed: &str) -> Result<String, String> {
        let body = sealed
            .strip_prefix(&format!("sealed:{name}:"))
            .ok_or("sealed for another name")?;
        Ok(body.chars().rev().collect())
    }
}

fn parameters(path: PathBuf) -> Result<SimulatedParameters, floe_compute_sim::PersistError> {
    SimulatedParameters::persisted(Vec::new(), path, Arc::new(Reversed))
}

fn spec(name: &str, instance_type: &str, arch: Arch, user_data: &str) -> LaunchTemplateSpec {
    LaunchTemplateSpec {
        name: name.into(),
        instance_type: instance_type.into(),
        arch,
        user_data: user_data.into(),
        volume: Volume {
            size_gb: 120,
            volume_type: VolumeType::Gp3,
            iops: Some(4000),
            throughput: None,
        },
        tags: BTreeMap::from([
            (TAG_DEPLOYMENT.to_string(), DEP.to_string()),
            (TAG_NODE_GROUP.to_string(), "template-group".to_string()),
        ]),
        instance_profile: Some("arn:aws:iam::1:instance-profile/floe-dep-1".into()),
    }
}

fn request(template: &str, count: u32, zone: usize, token: &str) -> LaunchRequest {
    LaunchRequest {
        template_name: template.into(),
        count,
        zone,
        client_token: token.into(),
        tags: BTreeMap::from([
            (TAG_DEPLOYMENT.to_string(), DEP.to_string()),
            (TAG_NODE_GROUP.to_string(), "hot".to_string()),
            ("floe:launch".to_string(), token.to_string()),
        ]),
    }
}

fn config(boot: Duration, terminate: Duration, addresses: AddressPool) -> SimulatedConfig {
    SimulatedConfig {
        boot_delay: boot,
        terminate_delay: terminate,
        addresses,
        ..SimulatedConfig::default()
    }
}

/// Everything a caller can ask the simulated compute about `ids`.
#[derive(Debug, PartialEq)]
struct Answers {
    instances: Vec<Instance>,
    checks: Vec<StatusChecks>,
    user_data: Vec<Option<String>>,
    templates: Vec<String>,
    deployment_templates: Vec<String>,
}

async fn answers(sim: &SimulatedCompute) -> Result<Answers, ComputeError> {
    let instances = sim.instances(DEP).await?;
    let ids: Vec<String> = instances.iter().map(|i| i.id.clone()).collect();
    let mut checks = sim.status_checks(&ids).await?;
    checks.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(Answers {
        user_data: ids.iter().map(|id| sim.user_data(id)).collect(),
        checks,
        templates: sim.templates(),
        deployment_templates: sim.launch_templates(DEP).await?,
        instances,
    })
}

fn ips(instances: &[Instance]) -> BTreeSet<String> {
    instances
        .iter()
        .filter_map(|i| i.private_ip.clone())
        .collect()
}

#[cfg(unix)]
fn mode(path: &Path) -> Result<u32, std::io::Error> {
    use std::os::unix::fs::PermissionsExt;
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
}

/// Instances that run at once, and delays of zero so that nothing moves
/// between the answers before and after the restart: every state is
/// there (running, stopped, terminated, impaired).
#[tokio::test]
async fn a_restart_keeps_instances_templates_and_launch_tokens() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("sim").join("compute.json");
    let conf = || config(Duration::ZERO, Duration::ZERO, AddressPool::Loopback);

    let sim = SimulatedCompute::persisted(conf(), path.clone())?;
    let hot = spec(
        "lt-hot",
        "m6g.xlarge",
        Arch::Arm64,
        "node.roles: [data_hot]\n",
    );
    sim.ensure_launch_template(&hot).await?;
    sim.ensure_launch_template(&spec("lt-warm", "m5.xlarge", Arch::X86_64, "#!/bin/sh\n"))
        .await?;
    sim.ensure_launch_template(&spec("lt-gone", "m5.xlarge", Arch::X86_64, ""))
        .await?;
    sim.delete_launch_template("lt-gone").await?;
    let first = sim.launch(&request("lt-hot", 4, 0, "t1")).await?;
    let second = sim.launch(&request("lt-warm", 2, 1, "t2")).await?;
    sim.terminate(&first[..1]).await?;
    assert!(sim.stop(&first[1]));
    assert!(sim.impair(&first[2], Impairment::System));
    assert!(sim.impair(&second[0], Impairment::AttachedEbs));
    assert!(sim.kill(&second[1]));
    let before = answers(&sim).await?;
    let states: Vec<InstanceState> = before.instances.iter().map(|i| i.state).collect();
    assert_eq!(
        states,
        [
            InstanceState::Terminated,
            InstanceState::Stopped,
            InstanceState::Running,
            InstanceState::Running,
            InstanceState::Running,
            InstanceState::Terminated,
        ]
    );
    drop(sim);

    let sim = SimulatedCompute::persisted(conf(), path.clone())?;
    assert_eq!(answers(&sim).await?, before);
    assert_eq!(
        sim.user_data(&first[0]).as_deref(),
        Some(hot.user_data.as_str())
    );
    assert_eq!(sim.calls("launch"), 0, "call counts belong to the process");
    let failing: Vec<(String, Vec<&str>)> = before
        .checks
        .iter()
        .map(|c| (c.id.clone(), c.failing()))
        .collect();
    assert!(failing.contains(&(first[2].clone(), vec!["system status check"])));
    assert!(failing.contains(&(second[0].clone(), vec!["attached EBS status check"])));

    // The same token after the restart: the first answer, nothing new.
    assert_eq!(sim.launch(&request("lt-hot", 4, 0, "t1")).await?, first);
    assert_eq!(sim.launch(&request("lt-warm", 2, 1, "t2")).await?, second);
    assert_eq!(sim.instances(DEP).await?.len(), 6);
    // And still refused for another request.
    let mismatch = sim.launch(&request("lt-hot", 3, 0, "t1")).await;
    assert!(
        matches!(&mismatch, Err(ComputeError::Permanent { failure_type, .. }) if failure_type == "idempotent_parameter_mismatch"),
        "{mismatch:?}"
    );

    // A new launch: a new id, an address nobody holds.
    let third = sim.launch(&request("lt-hot", 1, 0, "t3")).await?;
    assert_eq!(third, ["i-sim000000000007"]);
    let listed = sim.instances(DEP).await?;
    let new_ip = listed
        .iter()
        .find(|i| i.id == third[0])
        .and_then(|i| i.private_ip.clone())
        .ok_or("the new instance has no address")?;
    assert!(!ips(&before.instances).contains(&new_ip), "{new_ip}");
    assert_eq!(ips(&listed).len(), 5, "four kept and one new: {listed:?}");
    // Template ids go on from where they were, past the deleted one.
    let cold = sim
        .ensure_launch_template(&spec("lt-cold", "m5.xlarge", Arch::X86_64, ""))
        .await?;
    assert_eq!(cold, "lt-sim000000000004");

    #[cfg(unix)]
    assert_eq!(mode(&path)?, 0o600);
    // Nothing but the state file is left in its folder.
    let parent = path.parent().ok_or("no folder")?;
    let names: Vec<String> = std::fs::read_dir(parent)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    assert_eq!(names, ["compute.json"]);
    Ok(())
}

/// Long delays, on tokio's paused clock: what was booting or shutting down
/// when the process stopped goes on from where it was.
#[tokio::test(start_paused = true)]
async fn booting_and_shutting_down_instances_go_on_after_a_restart() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("compute.json");
    let hour = Duration::from_secs(3600);
    let conf = || config(hour, hour, AddressPool::Private);

    let sim = SimulatedCompute::persisted(conf(), path.clone())?;
    sim.ensure_launch_template(&spec("lt-hot", "m6g.xlarge", Arch::Arm64, ""))
        .await?;
    let ids = sim.launch(&request("lt-hot", 3, 0, "t1")).await?;
    sim.terminate(&ids[2..]).await?;
    let before = sim.instances(DEP).await?;
    drop(sim);

    let sim = SimulatedCompute::persisted(conf(), path.clone())?;
    let after = sim.instances(DEP).await?;
    assert_eq!(after, before);
    let states: Vec<InstanceState> = after.iter().map(|i| i.state).collect();
    assert_eq!(
        states,
        [
            InstanceState::Pending,
            InstanceState::Pending,
            InstanceState::ShuttingDown
        ]
    );
    // The shutting down instance still holds its address: a new one in
    // the same subnet gets the next.
    let more = sim.launch(&request("lt-hot", 1, 0, "t2")).await?;
    assert_eq!(more, ["i-sim000000000004"]);
    let listed = sim.instances(DEP).await?;
    assert_eq!(
        listed.last().and_then(|i| i.private_ip.as_deref()),
        Some("10.0.0.7")
    );

    tokio::time::advance(hour + Duration::from_secs(1)).await;
    let states: Vec<InstanceState> = sim.instances(DEP).await?.iter().map(|i| i.state).collect();
    assert_eq!(
        states,
        [
            InstanceState::Running,
            InstanceState::Running,
            InstanceState::Terminated,
            InstanceState::Running
        ]
    );
    // EC2's checks have no verdict until a while after boot: the launch
    // time was kept, not reset to the restart's.
    let checks = sim.status_checks(&ids).await?;
    assert_eq!(checks.len(), 2);
    assert!(
        checks
            .iter()
            .all(|c| c.instance == CheckStatus::Initializing),
        "{checks:?}"
    );
    Ok(())
}

#[tokio::test]
async fn concurrent_changes_are_all_kept() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("compute.json");
    let sim = Arc::new(SimulatedCompute::persisted(
        SimulatedConfig::default(),
        path.clone(),
    )?);
    sim.ensure_launch_template(&spec("lt-hot", "m6g.xlarge", Arch::Arm64, ""))
        .await?;
    let mut tasks = Vec::new();
    for n in 0..20 {
        let sim = Arc::clone(&sim);
        tasks.push(tokio::spawn(async move {
            sim.launch(&request("lt-hot", 2, n % 3, &format!("t{n}")))
                .await
        }));
    }
    for task in tasks {
        task.await??;
    }
    let before = sim.instances(DEP).await?;
    assert_eq!(before.len(), 40);
    drop(sim);
    let sim = SimulatedCompute::persisted(SimulatedConfig::default(), path)?;
    assert_eq!(sim.instances(DEP).await?, before);
    Ok(())
}

/// A change that cannot be written is not made: the call fails, and a
/// retry once the file can be written again does it.
#[tokio::test]
async fn a_change_that_cannot_be_saved_is_not_made() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("compute.json");
    let sim = SimulatedCompute::persisted(SimulatedConfig::default(), path.clone())?;
    sim.ensure_launch_template(&spec("lt-hot", "m6g.xlarge", Arch::Arm64, ""))
        .await?;
    let ids = sim.launch(&request("lt-hot", 1, 0, "t1")).await?;
    // A folder in the file's place: the rename fails, even for root.
    std::fs::remove_file(&path)?;
    std::fs::create_dir_all(path.join("in-the-way"))?;

    let failed = sim.launch(&request("lt-hot", 1, 0, "t2")).await;
    assert!(
        matches!(&failed, Err(ComputeError::Transient { code, .. }) if code == "simulated_state_not_saved"),
        "{failed:?}"
    );
    assert!(!sim.stop(&ids[0]));
    assert!(!sim.kill(&ids[0]));
    assert!(sim.terminate(&ids).await.is_err());
    assert!(sim.delete_launch_template("lt-hot").await.is_err());
    let listed = sim.instances(DEP).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, InstanceState::Running);
    assert_eq!(sim.templates(), ["lt-hot"]);

    std::fs::remove_dir_all(&path)?;
    let again = sim.launch(&request("lt-hot", 1, 0, "t2")).await?;
    assert_eq!(again, ["i-sim000000000002"], "the failed launch took no id");
    drop(sim);
    let sim = SimulatedCompute::persisted(SimulatedConfig::default(), path)?;
    assert_eq!(sim.instances(DEP).await?.len(), 2);
    Ok(())
}

#[tokio::test]
async fn a_restart_keeps_every_parameter() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("sim").join("parameters.json");
    let sim = parameters(path.clone())?;
    let key = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
    sim.put("/floe/dep-1/tls/node.key", &SecretOrPlain::secret(key))
        .await?;
    sim.put(
        "/floe/dep-1/security/elastic_password",
        &SecretOrPlain::secret("s3cr3t\"with'quotes"),
    )
    .await?;
    sim.put("/floe/dep-1/tls/ca.crt", &SecretOrPlain::plain("CERT"))
        .await?;
    sim.put(
        "/floe/dep-1/initial_master_nodes",
        &SecretOrPlain::plain("i-1"),
    )
    .await?;
    sim.put("/floe/dep-1/gone", &SecretOrPlain::plain("x"))
        .await?;
    sim.delete("/floe/dep-1/gone").await?;
    sim.put("/floe/dep-2/a", &SecretOrPlain::secret("y"))
        .await?;
    assert_eq!(sim.delete_under("/floe/dep-2").await?, 1);
    let before = sim.written();
    assert_eq!(before.len(), 4);
    drop(sim);

    let sim = parameters(path.clone())?;
    assert_eq!(sim.written(), before);
    let read = sim.get("/floe/dep-1/tls/node.key").await?;
    assert_eq!(read.as_ref().map(SecretOrPlain::expose), Some(key));
    assert_eq!(read.map(|v| v.is_secret()), Some(true));
    assert_eq!(
        sim.get("/floe/dep-1/tls/ca.crt").await?,
        Some(SecretOrPlain::plain("CERT"))
    );
    assert_eq!(sim.get("/floe/dep-1/gone").await?, None);
    assert_eq!(sim.calls("put"), 0);
    // The file holds the secure values sealed, the plain ones as they are.
    let text = std::fs::read_to_string(&path)?;
    assert!(
        !text.contains("BEGIN PRIVATE KEY") && !text.contains("s3cr3t"),
        "{text}"
    );
    assert!(text.contains("CERT"), "{text}");
    #[cfg(unix)]
    assert_eq!(mode(&path)?, 0o600);

    // And what changes after the restart is kept too.
    assert_eq!(sim.delete_under("/floe/dep-1").await?, 4);
    drop(sim);
    let sim = parameters(path)?;
    assert!(sim.written().is_empty());
    Ok(())
}

#[test]
fn an_unreadable_file_is_an_error_naming_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let cases: [(&str, &str); 4] = [
        ("compute.json", "{\"version\": 1, \"templates\": ["),
        ("compute-empty.json", ""),
        ("parameters.json", "not json"),
        ("parameters-v9.json", "{\"version\": 9, \"parameters\": {}}"),
    ];
    for (name, text) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text)?;
        let e = if name.starts_with("compute") {
            SimulatedCompute::persisted(SimulatedConfig::default(), path.clone()).err()
        } else {
            parameters(path.clone()).err()
        }
        .ok_or(format!("{name} was accepted"))?;
        assert_eq!(e.path, path);
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        match (name, &e.cause) {
            ("parameters-v9.json", PersistCause::Version { found: 9 }) => {}
            ("parameters-v9.json", other) => panic!("{other:?}"),
            (_, PersistCause::Format(_)) => {}
            (_, other) => panic!("{name}: {other:?}"),
        }
        // Refused, not overwritten.
        assert_eq!(std::fs::read_to_string(&path)?, text);
    }
    // A folder where the file should be cannot be read either.
    let folder: PathBuf = dir.path().join("a-folder.json");
    std::fs::create_dir(&folder)?;
    let e = SimulatedCompute::persisted(SimulatedConfig::default(), folder.clone())
        .err()
        .ok_or("a folder was accepted")?;
    assert!(matches!(e.cause, PersistCause::Io(_)), "{e}");
    assert_eq!(e.path, folder);
    Ok(())
}

/// serde_json quotes a string it did not expect: the parameters' error
/// must not, since that string may be a key or a password.
#[test]
fn a_parameters_file_error_does_not_show_its_values() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("parameters.json");
    std::fs::write(
        &path,
        "{\"version\": 1, \"parameters\": {\"/f/a\": {\"type\": \"SecureString\", \"value\": [\"hunter2\"]}}}",
    )?;
    let e = parameters(path).err().ok_or("accepted")?;
    assert!(!e.to_string().contains("hunter2"), "{e}");
    std::fs::write(
        dir.path().join("p2.json"),
        "{\"version\": \"hunter2\", \"parameters\": {}}",
    )?;
    let e = parameters(dir.path().join("p2.json"))
        .err()
        .ok_or("accepted")?;
    assert!(!e.to_string().contains("hunter2"), "{e}");
    Ok(())
}

#[tokio::test]
async fn no_file_yet_is_a_first_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("new").join("compute.json");
    let sim = SimulatedCompute::persisted(SimulatedConfig::default(), path.clone())?;
    assert!(sim.instances(DEP).await?.is_empty());
    assert!(!path.exists(), "nothing changed, nothing written");
    // Asking changes nothing either.
    sim.terminate(&["i-unknown".to_string()]).await?;
    sim.delete_launch_template("none").await?;
    assert!(!path.exists());
    let params = parameters(dir.path().join("p.json"))?;
    params.delete("/f/none").await?;
    assert!(params.written().is_empty());
    assert!(!dir.path().join("p.json").exists());
    Ok(())
}

/// A sealed value is bound to its parameter's name: moved under another
/// name in the file, it does not open, and the start is refused.
#[tokio::test]
async fn a_sealed_value_moved_to_another_name_does_not_open() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("parameters.json");
    let sim = parameters(path.clone())?;
    sim.put("/floe/a/key", &SecretOrPlain::secret("one"))
        .await?;
    drop(sim);
    let text = std::fs::read_to_string(&path)?.replace("\"/floe/a/key\"", "\"/floe/b/key\"");
    std::fs::write(&path, text)?;
    let e = parameters(path).err().ok_or("a moved value opened")?;
    assert!(matches!(e.cause, PersistCause::Seal(_)), "{e}");
    assert!(!e.to_string().contains("eno"), "{e}");
    Ok(())
}
