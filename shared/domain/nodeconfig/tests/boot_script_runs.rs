//! The rendered boot script, run for real as root in a private mount
//! namespace, twice, against a file-backed loop device standing in for the
//! EBS data volume.
//!
//! Real: bash and coreutils, `blkid`, `mkfs.ext4`, `mount` (by the fstab
//! line the script writes), curl (the script's own: it reaches a metadata
//! service and an artifact server on loopback through `connect-to` lines of
//! a test `.curlrc`), `sha512sum`, and the AWS CLI (`awscli` from
//! `scripts/requirements-test.txt`) talking to moto's SSM and EC2: the
//! instance is launched in moto with its data volume at the launch
//! template's device name, so `DescribeInstances` names the volume.
//!
//! Shims (first on PATH, each recording its arguments): `rpm` (lays out the
//! package), `systemctl` (no systemd here), `sysctl` (vm.* is not
//! namespaced), and the package's `elasticsearch-keystore` (entry names
//! only; values read from stdin and recorded as SHA-256) and
//! `elasticsearch-plugin`. The one stand-in for EC2 itself is udev's link
//! `/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol…` to the loop device:
//! a loop device has no NVMe serial that could be moto's volume id.

use floe_domain::catalog::{self, InstanceType};
use floe_domain::deployment::{NodeGroup, NodeRole, Storage, VolumeType};
use floe_nodeconfig::{
    DATA_DIR, NodeGroupConfig, RepositoryClient, elasticsearch_yml, jvm_options, user_data,
};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::error::Error;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type TestResult = Result<(), Box<dyn Error>>;

const REGION: &str = "us-east-1";
const ZONE: &str = "us-east-1b";
const VERSION: &str = "8.15.3";
const INSTANCE_TYPE: &str = "m6g.xlarge";
/// The deployment's stable endpoint, and the node's private address (what
/// the test's metadata service answers for `local-ipv4`).
const ENDPOINT: &str = "d-boot-test.es.floe.internal";
const NODE_IP: &str = "10.0.1.23";

/// Where the boot script writes outside the volume; the namespace mounts a
/// tmpfs over each, so they must exist here (created if missing, removed
/// again when empty).
const MOUNT_POINTS: &[&str] = &[
    "/etc/elasticsearch",
    "/usr/share/elasticsearch",
    DATA_DIR,
    "/var/log/elasticsearch",
    "/etc/systemd/system",
    "/etc/sysctl.d",
    "/dev/disk",
];

/// Everything the test set up, undone on drop, whatever failed.
#[derive(Default)]
struct Cleanup {
    loop_devices: Vec<String>,
    server: Option<Child>,
    created: Vec<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(server) = &mut self.server {
            let _ = server.kill();
            let _ = server.wait();
        }
        for device in &self.loop_devices {
            let _ = Command::new("losetup").args(["-d", device]).status();
        }
        for dir in self.created.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
}

fn output(program: &str, args: &[&str]) -> Result<Output, String> {
    Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))
}

fn available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn checked(program: &str, args: &[&str]) -> Result<String, String> {
    let out = output(program, args)?;
    if !out.status.success() {
        return Err(format!(
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The directory of `program` on PATH.
fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).find(|dir| dir.join(program).is_file())
}

fn sha256(value: &str) -> String {
    format!("{:x}", Sha256::digest(value.as_bytes()))
}

/// A file the namespace run wrote, or nothing.
fn read_in(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn sha256_file(path: &Path) -> Result<String, Box<dyn Error>> {
    Ok(format!("{:x}", Sha256::digest(fs::read(path)?)))
}

/// Every file under `dir`, recursively (symbolic links not followed).
fn files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Box<dyn Error>> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            files(&entry.path(), out)?;
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// `key=value` lines.
fn facts(path: &Path) -> Result<BTreeMap<String, String>, Box<dyn Error>> {
    Ok(fs::read_to_string(path)?
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

struct Aws<'a> {
    bin: &'a Path,
    endpoint: &'a str,
    home: &'a Path,
}

impl Aws<'_> {
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(self.bin)
            .args(args)
            .args(["--region", REGION, "--output", "text"])
            .env("AWS_ENDPOINT_URL", self.endpoint)
            .env("HOME", self.home)
            .output()
            .map_err(|e| format!("aws: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "aws {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Seeds a parameter from a file, so that its value is on no command
    /// line of this test either.
    fn put_parameter(&self, dir: &Path, name: &str, value: &str, secure: bool) -> TestResult {
        let input = dir.join("parameter.json");
        let body = serde_json::json!({
            "Name": name,
            "Value": value,
            "Type": if secure { "SecureString" } else { "String" },
            "Overwrite": true,
        });
        fs::write(&input, body.to_string())?;
        let result = self.run(&[
            "ssm",
            "put-parameter",
            "--cli-input-json",
            &format!("file://{}", input.display()),
        ]);
        fs::remove_file(&input)?;
        result?;
        Ok(())
    }
}

#[test]
fn boot_script_formats_mounts_and_configures_a_node() -> TestResult {
    let started = Instant::now();
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    if checked("id", &["-u"])? != "0" {
        eprintln!(
            "\n!!!!!!!! SKIPPED boot_script_formats_mounts_and_configures_a_node: it needs root \
             (loop devices, mkfs, mount namespaces); CI runs it as root\n"
        );
        return Ok(());
    }
    for tool in ["unshare", "losetup"] {
        if !available(tool) {
            eprintln!(
                "\n!!!!!!!! SKIPPED boot_script_formats_mounts_and_configures_a_node: \
                 {tool} is not installed\n"
            );
            return Ok(());
        }
    }
    let aws_dir = on_path("aws").ok_or(
        "the AWS CLI (aws) is not on PATH: scripts/test.sh installs it into .venv from \
         scripts/requirements-test.txt and puts .venv/bin on PATH",
    )?;
    for tool in ["openssl", "python3", "mkfs.ext4", "blkid", "curl"] {
        if !available(tool) && on_path(tool).is_none() {
            return Err(format!("{tool} is needed by this test and not installed").into());
        }
    }

    // The mount points are host folders this test creates and removes: two
    // test runs on one machine (a CI clone beside a working tree) take
    // turns, or one would remove a folder the other is about to mount on.
    let turn = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("floe-boot-script-test.lock"))?;
    turn.lock()?;
    let mut cleanup = Cleanup::default();
    let scratch = tempfile::Builder::new().prefix("floe-boot-").tempdir()?;
    let dir = scratch.path();
    let nonce = format!(
        "{}{}",
        std::process::id(),
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos()
    );
    let home = dir.join("home");
    fs::create_dir_all(&home)?;
    let aws = Aws {
        bin: &aws_dir.join("aws"),
        endpoint: &endpoint,
        home: &home,
    };

    // The instance, launched in moto with its data volume where the launch
    // template puts it.
    let image = aws.run(&["ec2", "describe-images", "--query", "Images[0].ImageId"])?;
    let mapping = format!(
        "DeviceName={},Ebs={{VolumeSize=1}}",
        floe_nodeconfig::DATA_VOLUME_DEVICE
    );
    let instance = aws.run(&[
        "ec2",
        "run-instances",
        "--image-id",
        &image,
        "--instance-type",
        INSTANCE_TYPE,
        "--block-device-mappings",
        &mapping,
        "--query",
        "Instances[0].InstanceId",
    ])?;
    let volume = aws.run(&[
        "ec2",
        "describe-volumes",
        "--filters",
        &format!("Name=attachment.instance-id,Values={instance}"),
        &format!(
            "Name=attachment.device,Values={}",
            floe_nodeconfig::DATA_VOLUME_DEVICE
        ),
        "--query",
        "Volumes[0].VolumeId",
    ])?;
    assert!(volume.starts_with("vol-"), "{volume}");

    // The deployment's parameters, with values that must go nowhere but the
    // keystore (and the key nowhere but its file).
    let prefix = format!("/floe-boot-test/{nonce}");
    let secret = |name: &str| format!("floe-secret-{name}-{nonce}");
    let keystore_values = [
        ("bootstrap.password", "security/elastic_password"),
        ("s3.client.floe.access_key", "repository/access_key"),
        ("s3.client.floe.secret_key", "repository/secret_key"),
        ("s3.client.floe.session_token", "repository/session_token"),
    ];
    for (_, parameter) in keystore_values {
        aws.put_parameter(
            dir,
            &format!("{prefix}/{parameter}"),
            &secret(parameter),
            true,
        )?;
    }
    // The deployment's real CA and shared certificate, as a create made
    // them before endpoints were named (the certificate names none), and
    // the HTTP CA its move to the endpoint made, whose key each node signs
    // its own HTTP certificate with: the script's longest path. (A newer
    // deployment's nodes sign with the deployment CA's key, `tls/ca.crt`
    // standing in for the HTTP CA.)
    let security =
        floe_node_security::generate_with("d-boot-test", floe_node_security::new_password(), None)?;
    let (http_ca, http_ca_key) = floe_node_security::generate_http_ca("d-boot-test")?;
    let certs = [
        ("ca.crt", security.ca_cert_pem.trim_end().to_string()),
        ("node.crt", security.node_cert_pem.trim_end().to_string()),
        (
            "node.key",
            security.node_key_pem.expose().trim_end().to_string(),
        ),
    ];
    for (file, value) in &certs {
        aws.put_parameter(dir, &format!("{prefix}/tls/{file}"), value, true)?;
    }
    let ca_key = http_ca_key.expose().trim_end().to_string();
    aws.put_parameter(dir, &format!("{prefix}/tls/ca.key"), &ca_key, true)?;
    let http_ca = http_ca.trim_end().to_string();
    aws.put_parameter(dir, &format!("{prefix}/tls/http-ca.crt"), &http_ca, false)?;
    let masters = format!("i-0aaaaaaaaaaaaaaaa,{instance}");
    aws.put_parameter(
        dir,
        &format!("{prefix}/initial_master_nodes"),
        &masters,
        false,
    )?;

    // The node: master and frozen, so the shared cache is in its settings.
    let group = NodeGroup {
        id: "frozen".into(),
        roles: vec![NodeRole::Master, NodeRole::DataFrozen],
        instance_type: INSTANCE_TYPE.into(),
        count: 1,
        zone_count: 1,
        storage: Storage {
            size_gb: 1,
            volume_type: VolumeType::Gp3,
            iops: None,
            throughput: None,
        },
        shared_cache: Some("90%".into()),
    };
    let instance_type: &InstanceType =
        catalog::lookup(INSTANCE_TYPE).ok_or("m6g.xlarge is not in the catalog")?;
    let settings = BTreeMap::new();
    let config = NodeGroupConfig {
        deployment_id: "d-boot-test",
        cluster_name: "boot-test",
        org: "org-1",
        es_version: VERSION,
        group: &group,
        instance: instance_type,
        user_settings: &settings,
        region: REGION,
        repository: Some(RepositoryClient {
            endpoint: Some("minio.internal:9000"),
            protocol: Some("https"),
            path_style_access: Some(true),
            region: Some(REGION),
            has_credentials: true,
            has_session_token: true,
        }),
        parameter_prefix: &prefix,
        endpoint: Some(ENDPOINT),
    };
    let script = user_data(&config);
    fs::write(dir.join("user-data.sh"), &script)?;

    // Elastic's artifact server: a package and its checksum file, as
    // published, over TLS with a certificate made here.
    let artifacts = dir.join("artifacts");
    fs::create_dir_all(&artifacts)?;
    let package = format!("elasticsearch-{VERSION}-aarch64.rpm");
    let package_bytes = format!("not really an rpm {nonce}\n");
    fs::write(artifacts.join(&package), &package_bytes)?;
    let sum = Command::new("sha512sum")
        .arg(&package)
        .current_dir(&artifacts)
        .output()?;
    assert!(sum.status.success());
    fs::write(artifacts.join(format!("{package}.sha512")), &sum.stdout)?;
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    checked(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=artifacts.elastic.co",
            "-addext",
            "subjectAltName=DNS:artifacts.elastic.co",
            "-keyout",
            &key.to_string_lossy(),
            "-out",
            &cert.to_string_lossy(),
        ],
    )?;
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/boot");
    let endpoints_log = dir.join("endpoints.log");
    let mut server = Command::new("python3")
        .arg(manifest.join("endpoints.py"))
        .args([&instance, ZONE])
        .args([&artifacts, &cert, &key, &endpoints_log])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = server.stdout.take().ok_or("no stdout")?;
    cleanup.server = Some(server);
    let mut ports = String::new();
    BufReader::new(stdout).read_line(&mut ports)?;
    let ports: Vec<&str> = ports.split_whitespace().collect();
    let [imds_port, https_port] = ports[..] else {
        return Err(format!("endpoints.py printed {ports:?}").into());
    };
    let curl_home = dir.join("curl");
    fs::create_dir_all(&curl_home)?;
    fs::write(
        curl_home.join(".curlrc"),
        format!(
            "connect-to = 169.254.169.254:80:127.0.0.1:{imds_port}\n\
             connect-to = artifacts.elastic.co:443:127.0.0.1:{https_port}\n\
             cacert = {}\nnoproxy = *\n",
            cert.display()
        ),
    )?;

    // Shims, the machine's files the script edits, the volume.
    let bin = dir.join("bin");
    let package_tools = dir.join("package");
    for (from, to) in [("shims", &bin), ("package", &package_tools)] {
        fs::create_dir_all(to)?;
        for entry in fs::read_dir(manifest.join(from))? {
            let entry = entry?;
            let target = to.join(entry.file_name());
            fs::copy(entry.path(), &target)?;
            fs::set_permissions(&target, fs::Permissions::from_mode(0o755))?;
        }
    }
    let etc = dir.join("etc");
    fs::create_dir_all(&etc)?;
    fs::write(etc.join("fstab"), "# the test's /etc/fstab\n")?;
    fs::copy("/etc/passwd", etc.join("passwd"))?;
    fs::copy("/etc/group", etc.join("group"))?;
    let state = dir.join("state");
    fs::create_dir_all(&state)?;
    let shim_log = dir.join("shims.log");
    fs::write(&shim_log, "")?;

    for point in MOUNT_POINTS {
        let mut missing: Vec<PathBuf> = Path::new(point)
            .ancestors()
            .take_while(|p| !p.exists())
            .map(Path::to_path_buf)
            .collect();
        missing.reverse();
        for p in missing {
            fs::create_dir(&p)?;
            cleanup.created.push(p);
        }
    }
    let mut attach = |name: &str, prepare: &dyn Fn(&Path) -> TestResult| {
        let backing = dir.join(name);
        fs::File::create(&backing)?.set_len(64 << 20)?;
        prepare(&backing)?;
        let device = checked("losetup", &["--find", "--show", &backing.to_string_lossy()])?;
        cleanup.loop_devices.push(device.clone());
        Ok::<_, Box<dyn Error>>((backing, device))
    };
    let (_, device) = attach("volume.img", &|_| Ok(()))?;
    let (garbage, garbage_device) = attach("garbage.img", &|f| {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = fs::OpenOptions::new().write(true).open(f)?;
        file.seek(SeekFrom::Start(8192))?;
        file.write_all(b"floe: data without a signature")?;
        Ok(())
    })?;
    let (swap, swap_device) = attach("swap.img", &|f| {
        checked("mkswap", &[&f.to_string_lossy()])?;
        Ok(())
    })?;

    let marker = format!("written between the runs {nonce}");
    let path = format!(
        "{}:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        bin.display(),
        aws_dir.display()
    );
    let in_namespace = |device: &str, args: &[&str], shim_log: &Path| {
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "bash"])
            .arg(manifest.join("namespace.sh"))
            .args([dir, Path::new(device)])
            .arg(&volume)
            .args(args)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .env("LANG", "C")
            .env("CURL_HOME", &curl_home)
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("FLOE_TEST_SHIM_LOG", shim_log)
            .env("FLOE_TEST_PACKAGE", &package_tools)
            .env("FLOE_TEST_STATE", &state)
            .output()
    };
    let run_started = Instant::now();
    let out = in_namespace(&device, &["twice", &marker], &shim_log)?;
    let run_time = run_started.elapsed();
    let timings = [read_in(dir, "status-1"), read_in(dir, "status-2")];
    let read = |name: &str| read_in(dir, name);
    if !out.status.success() {
        return Err(format!(
            "the namespace run failed: {}{}\n--- first run:\n{}\n--- second run:\n{}\n--- shims:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            read("console-1"),
            read("console-2"),
            read("shims.log"),
        )
        .into());
    }

    // The filesystem was made once, is mounted at path.data, and is there
    // again after a reboot, with what was written on it.
    let console = [read("console-1"), read("console-2")];
    let first = facts(&dir.join("facts-1"))?;
    let second = facts(&dir.join("facts-2"))?;
    let rebooted = facts(&dir.join("facts-reboot"))?;
    let uuid = first.get("uuid").cloned().unwrap_or_default();
    assert!(!uuid.is_empty(), "no filesystem on the volume: {first:?}");
    assert_eq!(first.get("type").map(String::as_str), Some("ext4"));
    for (when, f) in [
        ("first run", &first),
        ("second run", &second),
        ("reboot", &rebooted),
    ] {
        assert_eq!(f.get("uuid"), Some(&uuid), "{when}: reformatted? {f:?}");
        assert_eq!(
            f.get("mounted"),
            f.get("device"),
            "{when}: {DATA_DIR} is not the volume"
        );
    }
    assert_eq!(
        second.get("marker"),
        Some(&marker),
        "the second run lost data"
    );
    assert_eq!(rebooted.get("marker"), Some(&marker));
    let formats = |c: &str| c.matches("formatting the blank data volume").count();
    assert_eq!(formats(&console[0]), 1, "{}", console[0]);
    assert_eq!(formats(&console[1]), 0, "{}", console[1]);
    assert!(console[0].contains(&volume), "{}", console[0]);
    let fstab = fs::read_to_string(etc.join("fstab"))?;
    let entry = format!("UUID={uuid} {DATA_DIR} ext4 defaults,noatime,nofail 0 2");
    assert_eq!(fstab.lines().filter(|l| *l == entry).count(), 1, "{fstab}");
    assert_eq!(fstab.lines().count(), 2, "{fstab}");
    for status in ["status-1", "status-2"] {
        assert!(read(status).starts_with("status=0 "), "{status}");
    }

    // Owners and modes, as the script intends.
    let stat = read("stat");
    for expected in [
        // The package makes the config directory setgid (2750); its new
        // directories inherit that.
        "/etc/elasticsearch/certs root elasticsearch 2750".to_string(),
        "/etc/elasticsearch/certs/ca.crt root elasticsearch 640".into(),
        "/etc/elasticsearch/certs/node.crt root elasticsearch 640".into(),
        "/etc/elasticsearch/certs/node.key root elasticsearch 640".into(),
        "/etc/elasticsearch/certs/http.crt root elasticsearch 640".into(),
        "/etc/elasticsearch/certs/http-ca.crt root elasticsearch 640".into(),
        "/etc/elasticsearch/certs/http.key root elasticsearch 640".into(),
        "/etc/elasticsearch/elasticsearch.yml root elasticsearch 660".into(),
        "/etc/elasticsearch/jvm.options.d/floe.options root elasticsearch 660".into(),
        "/etc/elasticsearch/elasticsearch.keystore root elasticsearch 660".into(),
        format!("{DATA_DIR} elasticsearch elasticsearch 2750"),
    ] {
        assert!(
            stat.lines().any(|l| l == expected),
            "{expected:?} not in\n{stat}"
        );
    }

    // The files, as rendered.
    let copy = dir.join("copy");
    let conf = copy.join("etc/elasticsearch");
    for (file, value) in &certs {
        assert_eq!(
            fs::read_to_string(conf.join("certs").join(file))?,
            format!("{value}\n")
        );
    }
    // The node's own HTTP certificate: the HTTP CA's, naming the shared
    // certificate's names, the endpoint and the node's address.
    let certs_dir = conf.join("certs");
    assert_eq!(
        fs::read_to_string(certs_dir.join("http-ca.crt"))?,
        format!("{http_ca}\n")
    );
    let verify = |ca: &str| {
        output(
            "openssl",
            &[
                "verify",
                "-CAfile",
                &certs_dir.join(ca).to_string_lossy(),
                &certs_dir.join("http.crt").to_string_lossy(),
            ],
        )
    };
    let verified = verify("http-ca.crt")?;
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
    assert!(!verify("ca.crt")?.status.success(), "signed by the old CA");
    let sans = output(
        "openssl",
        &[
            "x509",
            "-noout",
            "-ext",
            "subjectAltName",
            "-in",
            &certs_dir.join("http.crt").to_string_lossy(),
        ],
    )?;
    let sans = String::from_utf8_lossy(&sans.stdout);
    for name in [
        format!("IP Address:{NODE_IP}"),
        format!("DNS:{ENDPOINT}"),
        "DNS:d-boot-test.nodes.floe.internal".to_string(),
    ] {
        assert!(sans.contains(&name), "{name} not in {sans}");
    }
    assert!(!certs_dir.join("ca.key").exists(), "the CA key stayed");
    assert_ne!(
        fs::read_to_string(certs_dir.join("http.key"))?,
        fs::read_to_string(certs_dir.join("node.key"))?,
        "the node's HTTP key is its own"
    );
    let yml = fs::read_to_string(conf.join("elasticsearch.yml"))?;
    assert_eq!(
        yml,
        format!(
            "{}cluster.initial_master_nodes: [{}]\n",
            elasticsearch_yml(&config),
            masters.replace(',', ", ")
        )
    );
    assert!(yml.contains(&format!("\npath.data: {DATA_DIR}\n")), "{yml}");
    assert!(yml.contains("\nxpack.searchable.snapshot.shared_cache.size: \"90%\"\n"));
    assert_eq!(
        yml.matches("path.").count(),
        2,
        "only path.data and path.logs: {yml}"
    );
    let jvm = fs::read_to_string(conf.join("jvm.options.d/floe.options"))?;
    assert_eq!(jvm, jvm_options(&config));
    // m6g.xlarge has 16 GiB: half of it (the cap, 31 GiB, is for larger types).
    let heap = 8192;
    assert_eq!(instance_type.memory_mib, 2 * heap);
    assert!(heap <= catalog::MAX_HEAP_MIB && catalog::MAX_HEAP_MIB <= 31 * 1024);
    assert!(jvm.lines().any(|l| l == format!("-Xms{heap}m")), "{jvm}");
    assert!(jvm.lines().any(|l| l == format!("-Xmx{heap}m")), "{jvm}");
    let dropins = copy.join("etc/systemd/system/elasticsearch.service.d");
    assert_eq!(
        fs::read_to_string(dropins.join("floe-memlock.conf"))?,
        "[Service]\nLimitMEMLOCK=infinity\n"
    );
    assert_eq!(
        fs::read_to_string(dropins.join("floe-data.conf"))?,
        format!("[Unit]\nRequiresMountsFor={DATA_DIR}\n")
    );
    assert_eq!(
        fs::read_to_string(dropins.join("floe-node.conf"))?,
        format!("[Service]\nEnvironment=FLOE_NODE_NAME={instance}\n")
    );
    assert_eq!(
        fs::read_to_string(copy.join("etc/sysctl.d/90-elasticsearch.conf"))?,
        "vm.max_map_count=262144\nvm.swappiness=1\nnet.ipv4.tcp_retries2=5\n"
    );
    // The package came from the artifact server, checked, once.
    assert_eq!(
        fs::read_to_string(state.join("installed.rpm"))?,
        package_bytes
    );
    let shims = read("shims.log");
    let installs = shims
        .lines()
        .filter(|l| l.starts_with("rpm --install"))
        .count();
    assert_eq!(installs, 1, "{shims}");
    let plugin_installs: Vec<&str> = shims
        .lines()
        .filter(|l| l.starts_with("elasticsearch-plugin"))
        .collect();
    assert_eq!(
        plugin_installs,
        ["elasticsearch-plugin install --batch discovery-ec2"]
    );
    let endpoints = read("endpoints.log");
    assert!(
        endpoints.lines().all(|l| !l.contains("token=missing")),
        "{endpoints}"
    );
    assert!(endpoints.contains("imds GET /latest/meta-data/instance-id token=valid"));
    for systemctl in [
        "daemon-reload",
        "enable elasticsearch.service",
        "start elasticsearch.service",
    ] {
        assert!(
            shims.lines().any(|l| l == format!("systemctl {systemctl}")),
            "{shims}"
        );
    }

    // Keystore entries by name, each with its own value, read from stdin.
    let keystore = fs::read_to_string(conf.join("elasticsearch.keystore"))?;
    let values = fs::read_to_string(state.join("keystore-values"))?;
    for (entry, parameter) in keystore_values {
        assert!(
            keystore.lines().any(|l| l == entry),
            "{entry} not in {keystore}"
        );
        assert!(
            shims
                .lines()
                .any(|l| l == format!("elasticsearch-keystore add --stdin --force {entry}")),
            "{shims}"
        );
        let line = format!("{entry} {}", sha256(&secret(parameter)));
        assert_eq!(values.lines().filter(|l| *l == line).count(), 2, "{values}");
    }

    // No secret in any file written, any command line, any console output.
    let mut written = Vec::new();
    files(&copy, &mut written)?;
    written.extend(
        [
            "shims.log",
            "console-1",
            "console-2",
            "endpoints.log",
            "etc/fstab",
            "state/keystore-values",
        ]
        .map(|f| dir.join(f)),
    );
    let key = &certs[2].1;
    for file in &written {
        let bytes = fs::read(file)?;
        for (_, parameter) in keystore_values {
            assert!(
                !contains(&bytes, &secret(parameter)),
                "{parameter} in {}",
                file.display()
            );
        }
        if !file.ends_with("etc/elasticsearch/certs/node.key") {
            assert!(!contains(&bytes, key), "the node key in {}", file.display());
        }
        // The CA key is used and gone: no file keeps it.
        assert!(
            !contains(&bytes, &ca_key),
            "the CA key in {}",
            file.display()
        );
    }
    for stream in [&out.stdout, &out.stderr] {
        for (_, parameter) in keystore_values {
            assert!(!contains(stream, &secret(parameter)));
        }
    }

    // A volume that is not blank is never formatted: neither data without a
    // signature blkid knows, nor a signature of something else.
    let refused_log = dir.join("refused.log");
    for (backing, device, message) in [
        (
            &garbage,
            &garbage_device,
            "is not blank but holds no known signature",
        ),
        (
            &swap,
            &swap_device,
            "holds 'swap', not an ext4 or xfs filesystem",
        ),
    ] {
        let before = sha256_file(backing)?;
        fs::write(&refused_log, "")?;
        let out = in_namespace(device, &["once"], &refused_log)?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let console = read("console-1");
        assert!(!read("status-1").starts_with("status=0 "), "{console}");
        assert!(console.contains(message), "{console}");
        assert!(!console.contains("formatting the"), "{console}");
        assert_eq!(
            sha256_file(backing)?,
            before,
            "{} was written",
            backing.display()
        );
        assert_eq!(fs::read_to_string(etc.join("fstab"))?, fstab);
        let shims = fs::read_to_string(&refused_log)?;
        assert!(!shims.contains("systemctl start"), "{shims}");
    }

    eprintln!(
        "boot script ran twice in {:.1} s ({} and {}); the whole test took {:.1} s",
        run_time.as_secs_f64(),
        timings[0].trim(),
        timings[1].trim(),
        started.elapsed().as_secs_f64()
    );
    assert!(run_time < Duration::from_secs(300));
    drop(cleanup);
    Ok(())
}
