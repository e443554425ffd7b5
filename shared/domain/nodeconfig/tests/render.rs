//! The rendered files as a node sees them: the script parses as bash, the
//! YAML parses to exactly the intended keys, and no secret appears anywhere.

use floe_domain::catalog::{self, InstanceType};
use floe_domain::deployment::{NodeGroup, NodeRole, Storage, VolumeType};
use floe_nodeconfig::{
    NodeGroupConfig, RepositoryClient, elasticsearch_yml, jvm_options, user_data,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn group(id: &str, roles: Vec<NodeRole>, instance_type: &str, zone_count: u32) -> NodeGroup {
    NodeGroup {
        id: id.into(),
        roles,
        instance_type: instance_type.into(),
        count: 3,
        zone_count,
        storage: Storage {
            size_gb: 200,
            volume_type: VolumeType::Gp3,
            iops: None,
            throughput: None,
        },
        shared_cache: None,
    }
}

fn instance(name: &str) -> Result<&'static InstanceType, String> {
    catalog::lookup(name).ok_or_else(|| format!("{name} is not in the catalog"))
}

fn settings() -> BTreeMap<String, Value> {
    [
        ("thread_pool.snapshot.max", json!(8)),
        ("indices.recovery.max_bytes_per_sec", json!("200mb")),
        ("a.hostile", json!("x\nnode.roles: []")),
        ("a.dollar", json!("$(touch /tmp/pwned) ${HOME} `id`")),
        ("a.quote", json!("it's \"quoted\" \\ FLOE_EOF")),
        ("a.list", json!(["one", 2, true])),
        ("on", json!("yes")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

const REPOSITORY: RepositoryClient<'static> = RepositoryClient {
    endpoint: Some("minio.internal:9000"),
    protocol: Some("https"),
    path_style_access: Some(true),
    region: Some("us-east-1"),
    has_credentials: true,
    has_session_token: true,
};

fn config<'a>(
    group: &'a NodeGroup,
    instance: &'a InstanceType,
    settings: &'a BTreeMap<String, Value>,
    version: &'a str,
) -> NodeGroupConfig<'a> {
    NodeGroupConfig {
        deployment_id: "d-0123456789abcdef",
        cluster_name: "logs-prod",
        org: "org-1",
        es_version: version,
        group,
        instance,
        user_settings: settings,
        region: "eu-central-1",
        repository: Some(REPOSITORY),
        parameter_prefix: "/floe/d-0123456789abcdef",
        endpoint: Some("d-0123456789abcdef.es.floe.internal"),
    }
}

/// Runs `program args` with `input` on stdin; `None` when the program is not
/// installed here, so the test checks what it can.
fn run(program: &str, args: &[&str], input: &str) -> Result<Option<String>, String> {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{program}: {e}")),
    };
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(input.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn variants() -> Result<Vec<(NodeGroup, &'static InstanceType, &'static str)>, String> {
    Ok(vec![
        (
            group(
                "hot",
                vec![NodeRole::Master, NodeRole::DataHot],
                "m6g.xlarge",
                3,
            ),
            instance("m6g.xlarge")?,
            "8.15.3",
        ),
        (
            group("warm", vec![NodeRole::DataWarm], "r5.2xlarge", 1),
            instance("r5.2xlarge")?,
            "7.17.25",
        ),
        (
            group("master", vec![NodeRole::Master], "c7g.large", 2),
            instance("c7g.large")?,
            "7.10.2",
        ),
        (
            group("ml", vec![NodeRole::Ml], "m7i.4xlarge", 1),
            instance("m7i.4xlarge")?,
            "9.0.0",
        ),
    ])
}

#[test]
fn boot_script_is_valid_bash() -> TestResult {
    let s = settings();
    for (g, t, version) in variants()? {
        let script = user_data(&config(&g, t, &s, version));
        match run("bash", &["-n"], &script)? {
            Some(_) => {}
            None => {
                eprintln!("bash is not installed; syntax not checked");
                return Ok(());
            }
        }
    }
    Ok(())
}

#[test]
fn boot_script_writes_the_rendered_files_verbatim() -> TestResult {
    let s = settings();
    let g = group(
        "hot",
        vec![NodeRole::Master, NodeRole::DataHot],
        "m6g.xlarge",
        3,
    );
    let c = config(&g, instance("m6g.xlarge")?, &s, "8.15.3");
    let script = user_data(&c);
    // Run only the file-writing part of the script, redirected into a
    // scratch directory, to see what the heredocs really produce.
    let yml_start = script
        .find("cat > \"${ES_CONF}/elasticsearch.yml\"")
        .ok_or("no elasticsearch.yml")?;
    let jvm_end = script
        .find("mkdir -p \"${ES_CONF}/jvm.options.d\"")
        .ok_or("no jvm.options.d")?;
    let snippet = format!(
        "set -euo pipefail\nES_CONF=\"$(mktemp -d)\"\n{}cat \"${{ES_CONF}}/elasticsearch.yml\"\nrm -rf \"${{ES_CONF}}\"\n",
        &script[yml_start..jvm_end]
    );
    if let Some(written) = run("bash", &[], &snippet)? {
        assert_eq!(written, elasticsearch_yml(&c));
    }
    Ok(())
}

#[test]
fn yaml_parses_to_exactly_the_intended_settings() -> TestResult {
    let s = settings();
    let g = group(
        "hot",
        vec![NodeRole::Master, NodeRole::DataHot],
        "m6g.xlarge",
        3,
    );
    let c = config(&g, instance("m6g.xlarge")?, &s, "8.15.3");
    let yml = elasticsearch_yml(&c);
    // PyYAML follows YAML 1.1, as Elasticsearch's SnakeYAML does.
    let parsed = run(
        "python3",
        &[
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))",
        ],
        &yml,
    );
    let parsed: Value = match parsed {
        Ok(Some(json)) => serde_json::from_str(&json)?,
        Ok(None) => {
            eprintln!("python3 is not installed; YAML not parsed");
            return Ok(());
        }
        Err(e) if e.contains("No module named") => {
            eprintln!("PyYAML is not installed; YAML not parsed");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let expected = json!({
        "cluster.name": "logs-prod",
        "node.name": "${FLOE_NODE_NAME}",
        "node.roles": ["master", "data_hot"],
        "node.attr.floe_node_group": "hot",
        "path.data": "/var/lib/elasticsearch",
        "path.logs": "/var/log/elasticsearch",
        "bootstrap.memory_lock": true,
        "network.host": "_ec2:privateIp_",
        "discovery.seed_providers": "ec2",
        "discovery.ec2.endpoint": "ec2.eu-central-1.amazonaws.com",
        "discovery.ec2.tag.floe:deployment": "d-0123456789abcdef",
        "xpack.security.enabled": true,
        "xpack.security.transport.ssl.enabled": true,
        "xpack.security.transport.ssl.key": "certs/node.key",
        "xpack.security.transport.ssl.certificate": "certs/node.crt",
        "xpack.security.transport.ssl.certificate_authorities": ["certs/ca.crt"],
        "xpack.security.http.ssl.enabled": true,
        "xpack.security.http.ssl.key": "certs/http.key",
        "xpack.security.http.ssl.certificate": "certs/http.crt",
        "xpack.security.http.ssl.certificate_authorities": ["certs/ca.crt"],
        "xpack.security.transport.ssl.verification_mode": "certificate",
        "s3.client.floe.endpoint": "minio.internal:9000",
        "s3.client.floe.protocol": "https",
        "s3.client.floe.path_style_access": true,
        "s3.client.floe.region": "us-east-1",
        "cloud.node.auto_attributes": true,
        "cluster.routing.allocation.awareness.attributes": "aws_availability_zone",
        "thread_pool.snapshot.max": 8,
        "indices.recovery.max_bytes_per_sec": "200mb",
        "a.hostile": "x\nnode.roles: []",
        "a.dollar": "$(touch /tmp/pwned) ${HOME} `id`",
        "a.quote": "it's \"quoted\" \\ FLOE_EOF",
        "a.list": ["one", 2, true],
        "on": "yes",
    });
    assert_eq!(parsed, expected);
    Ok(())
}

#[test]
fn no_credential_ever_appears() -> TestResult {
    let s = settings();
    for (g, t, version) in variants()? {
        let c = config(&g, t, &s, version);
        let script = user_data(&c);
        for file in [elasticsearch_yml(&c), jvm_options(&c)] {
            for word in ["access_key", "secret_key", "session_token", "keystore"] {
                assert!(!file.contains(word), "{word} in\n{file}");
            }
        }
        // The script only names the parameters and pipes them into the keystore.
        for secret in ["access_key", "secret_key", "session_token"] {
            let fetch = format!(
                "--name '/floe/d-0123456789abcdef/repository/{secret}' \\\n  --query Parameter.Value --output text \\\n  | \"${{ES_HOME}}/bin/elasticsearch-keystore\" add --stdin --force s3.client.floe.{secret}\n"
            );
            assert!(
                script.contains(&fetch),
                "{secret} fetch missing in\n{script}"
            );
            let mentions = script.matches(secret).count();
            assert_eq!(mentions, 2, "{secret} in\n{script}");
        }
        // Three repository keys, and the one function that reads the
        // deployment's certificates and password.
        assert_eq!(
            script
                .matches("aws ssm get-parameter --region \"${AWS_REGION}\" --with-decryption")
                .count(),
            4
        );
        assert!(!script.contains("BEGIN"), "no PEM in the script");
    }
    Ok(())
}

#[test]
fn credentials_are_fetched_only_when_stored() -> TestResult {
    let s = BTreeMap::new();
    let g = group("hot", vec![NodeRole::DataHot], "m6g.xlarge", 1);
    let t = instance("m6g.xlarge")?;
    let keys_only = NodeGroupConfig {
        repository: Some(RepositoryClient {
            has_session_token: false,
            ..REPOSITORY
        }),
        ..config(&g, t, &s, "8.15.3")
    };
    let script = user_data(&keys_only);
    assert!(script.contains("s3.client.floe.access_key"));
    assert!(script.contains("s3.client.floe.secret_key"));
    assert!(!script.contains("session_token"));

    for repository in [
        None,
        Some(RepositoryClient {
            has_credentials: false,
            has_session_token: true,
            ..REPOSITORY
        }),
    ] {
        let c = NodeGroupConfig {
            repository,
            ..config(&g, t, &s, "8.15.3")
        };
        let script = user_data(&c);
        assert!(!script.contains("repository/"), "{script}");
        assert!(
            !script.contains("keystore\" add --stdin --force s3.client"),
            "{script}"
        );
    }
    Ok(())
}

/// Every node trusts the deployment's own CA on both layers, presents the
/// deployment's certificate, and gets the elastic password in its keystore;
/// the script names the parameters and never holds their values.
#[test]
fn nodes_are_secured_with_the_deployments_own_ca() -> TestResult {
    let s = BTreeMap::new();
    for (g, t, version) in variants()? {
        let c = config(&g, t, &s, version);
        let yml = elasticsearch_yml(&c);
        let lines: Vec<&str> = yml.lines().collect();
        for expected in [
            "xpack.security.enabled: true",
            "xpack.security.transport.ssl.enabled: true",
            "xpack.security.transport.ssl.verification_mode: certificate",
            "xpack.security.transport.ssl.key: \"certs/node.key\"",
            "xpack.security.transport.ssl.certificate: \"certs/node.crt\"",
            "xpack.security.transport.ssl.certificate_authorities: [\"certs/ca.crt\"]",
            "xpack.security.http.ssl.enabled: true",
            "xpack.security.http.ssl.key: \"certs/http.key\"",
            "xpack.security.http.ssl.certificate: \"certs/http.crt\"",
            "xpack.security.http.ssl.certificate_authorities: [\"certs/ca.crt\"]",
        ] {
            assert!(
                lines.contains(&expected),
                "{version}: missing {expected:?} in\n{yml}"
            );
        }
        let script = user_data(&c);
        for (parameter, file) in [
            ("tls/ca.crt", "ca.crt"),
            ("tls/node.crt", "node.crt"),
            ("tls/node.key", "node.key"),
        ] {
            let fetch = format!(
                "(umask 0027 && ssm_value '/floe/d-0123456789abcdef/{parameter}' >\"${{ES_CONF}}/certs/{file}\")"
            );
            assert!(script.contains(&fetch), "{fetch} missing in\n{script}");
        }
        assert!(script.contains(
            "ssm_value '/floe/d-0123456789abcdef/security/elastic_password' | \"${ES_HOME}/bin/elasticsearch-keystore\" add --stdin --force bootstrap.password"
        ));
        // The certificates are written before the node starts.
        let written = script.find("certs/node.key\")").unwrap_or(usize::MAX);
        let started = script.find("systemctl start").unwrap_or(0);
        assert!(written < started);
    }
    Ok(())
}

#[test]
fn package_matches_the_architecture() -> TestResult {
    let s = BTreeMap::new();
    let arm = group("hot", vec![NodeRole::DataHot], "m6g.xlarge", 1);
    let x86 = group("hot", vec![NodeRole::DataHot], "m5.xlarge", 1);
    let arm_script = user_data(&config(&arm, instance("m6g.xlarge")?, &s, "8.15.3"));
    let x86_script = user_data(&config(&x86, instance("m5.xlarge")?, &s, "8.15.3"));
    assert!(arm_script.contains("\nES_ARCH='aarch64'\n"));
    assert!(x86_script.contains("\nES_ARCH='x86_64'\n"));
    for script in [&arm_script, &x86_script] {
        assert!(script.contains("\nES_VERSION='8.15.3'\n"));
        assert!(script.contains("package=\"elasticsearch-${ES_VERSION}-${ES_ARCH}.rpm\""));
        assert!(script.contains("https://artifacts.elastic.co/downloads/elasticsearch/${package}"));
        assert!(script.contains("sha512sum --check"));
    }
    assert!(!arm_script.contains("x86_64"));
    assert!(!x86_script.contains("aarch64"));
    Ok(())
}

#[test]
fn boot_script_follows_elastic_system_guidance() -> TestResult {
    let s = BTreeMap::new();
    let g = group("hot", vec![NodeRole::DataHot], "m6g.xlarge", 1);
    let script = user_data(&config(&g, instance("m6g.xlarge")?, &s, "8.15.3"));
    assert!(script.starts_with("#!/bin/bash\n"));
    assert!(script.contains("\nset -euo pipefail\n"));
    assert!(script.contains(
        "cat > /etc/sysctl.d/90-elasticsearch.conf <<'FLOE_EOF'\nvm.max_map_count=262144\nvm.swappiness=1\n"
    ));
    assert!(script.contains("[Service]\nLimitMEMLOCK=infinity\n"));
    assert!(script.contains("/etc/systemd/system/elasticsearch.service.d"));
    // IMDSv2: token first, then the instance id with it.
    let put = script.find("-X PUT").ok_or("no token request")?;
    let get = script.find("$(imds instance-id)").ok_or("no instance id")?;
    assert!(put < get);
    assert!(script.contains("X-aws-ec2-metadata-token-ttl-seconds"));
    assert!(script.contains("X-aws-ec2-metadata-token: ${imds_token}"));
    // Files are written with quoted heredocs only.
    assert!(script.contains("cat > \"${ES_CONF}/elasticsearch.yml\" <<'FLOE_EOF'\n"));
    assert!(script.contains("cat > \"${ES_CONF}/jvm.options.d/floe.options\" <<'FLOE_EOF'\n"));
    assert!(!script.contains("<<EOF") && !script.contains("<< EOF"));
    assert!(script.contains("\n-Xms8192m\n-Xmx8192m\n"));
    let enable = script
        .find("systemctl enable elasticsearch.service")
        .ok_or("no enable")?;
    let start = script
        .find("systemctl start elasticsearch.service")
        .ok_or("no start")?;
    let yml = script.find("elasticsearch.yml\" <<").ok_or("no yml")?;
    assert!(yml < enable && enable < start);
    Ok(())
}

#[test]
fn plugins_are_installed_only_where_needed() -> TestResult {
    let s = BTreeMap::new();
    let g = group("hot", vec![NodeRole::DataHot], "m6g.xlarge", 1);
    let t = instance("m6g.xlarge")?;
    for (version, s3_plugin) in [
        ("7.10.2", true),
        ("7.17.25", true),
        ("8.0.0", false),
        ("8.15.3", false),
        ("9.0.0", false),
    ] {
        let script = user_data(&config(&g, t, &s, version));
        assert!(
            script.contains("\ninstall_plugin discovery-ec2\n"),
            "{version}"
        );
        assert_eq!(
            script.contains("\ninstall_plugin repository-s3\n"),
            s3_plugin,
            "{version}"
        );
    }
    Ok(())
}

#[test]
fn initial_masters_are_read_only_by_master_eligible_nodes() -> TestResult {
    let s = BTreeMap::new();
    let t = instance("m6g.xlarge")?;
    let master = group("m", vec![NodeRole::Master], "m6g.xlarge", 1);
    let data = group("d", vec![NodeRole::DataHot], "m6g.xlarge", 1);
    let m = user_data(&config(&master, t, &s, "8.15.3"));
    let d = user_data(&config(&data, t, &s, "8.15.3"));
    assert!(m.contains("--name '/floe/d-0123456789abcdef/initial_master_nodes'"));
    assert!(m.contains("cluster.initial_master_nodes"));
    assert!(!d.contains("initial_master_nodes"));
    Ok(())
}

#[test]
fn old_versions_get_zone_and_address_from_the_script() -> TestResult {
    let s = BTreeMap::new();
    let g = group("hot", vec![NodeRole::DataHot], "m5.xlarge", 3);
    let t = instance("m5.xlarge")?;
    let old = user_data(&config(&g, t, &s, "7.17.25"));
    assert!(old.contains("FLOE_AVAILABILITY_ZONE=$(imds placement/availability-zone)"));
    assert!(old.contains("Environment=%s=%s\\n' FLOE_AVAILABILITY_ZONE"));
    assert!(old.contains("node.attr.aws_availability_zone: ${FLOE_AVAILABILITY_ZONE}"));
    let new = user_data(&config(&g, t, &s, "8.15.3"));
    assert!(!new.contains("FLOE_AVAILABILITY_ZONE"));
    Ok(())
}

#[test]
fn shell_values_are_single_quoted() -> TestResult {
    let s = BTreeMap::new();
    let g = group("hot", vec![NodeRole::Master], "m6g.xlarge", 1);
    let c = NodeGroupConfig {
        region: "eu'; rm -rf / #",
        parameter_prefix: "/floe/$(id)",
        es_version: "8.15.3`id`",
        ..config(&g, instance("m6g.xlarge")?, &s, "8.15.3")
    };
    let script = user_data(&c);
    assert!(script.contains("\nAWS_REGION='eu'\\''; rm -rf / #'\n"));
    assert!(script.contains("\nES_VERSION='8.15.3`id`'\n"));
    assert!(script.contains("--name '/floe/$(id)/repository/access_key'"));
    if run("bash", &["-n"], &script)?.is_none() {
        eprintln!("bash is not installed; syntax not checked");
    }
    Ok(())
}

/// Every supported version on both architectures, master-eligible or not,
/// with and without repository credentials.
fn every_variant() -> Result<Vec<(NodeGroup, &'static InstanceType, &'static str, bool)>, String> {
    let mut out = Vec::new();
    for version in ["7.10.2", "7.17.25", "8.1.3", "8.15.3", "9.0.0"] {
        for (instance_type, roles) in [
            ("m6g.xlarge", vec![NodeRole::Master, NodeRole::DataHot]),
            ("m5.xlarge", vec![NodeRole::DataFrozen]),
        ] {
            for credentials in [true, false] {
                let mut g = group("g", roles.clone(), instance_type, 3);
                g.shared_cache = Some("90%".into());
                out.push((g, instance(instance_type)?, version, credentials));
            }
        }
    }
    Ok(out)
}

#[test]
fn boot_script_passes_shellcheck() -> TestResult {
    let s = settings();
    for (g, t, version, credentials) in every_variant()? {
        let c = NodeGroupConfig {
            repository: credentials.then_some(REPOSITORY),
            ..config(&g, t, &s, version)
        };
        let script = user_data(&c);
        let out = Command::new("shellcheck")
            .args(["--shell=bash", "--severity=style", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match out {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err("shellcheck is not installed: scripts/test.sh installs it \
                            (apt-get install -y shellcheck)"
                    .into());
            }
            Err(e) => return Err(e.into()),
        };
        child
            .stdin
            .take()
            .ok_or("no stdin")?
            .write_all(script.as_bytes())?;
        let out = child.wait_with_output()?;
        assert!(
            out.status.success(),
            "shellcheck on the script of {version} on {} ({:?}):\n{}{}",
            t.name,
            g.roles,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// EC2 refuses user data above 16 KiB; the script keeps 3 KiB of it free.
#[test]
fn boot_script_fits_in_user_data() -> TestResult {
    let s = settings();
    for (g, t, version, credentials) in every_variant()? {
        let c = NodeGroupConfig {
            repository: credentials.then_some(REPOSITORY),
            ..config(&g, t, &s, version)
        };
        let len = user_data(&c).len();
        assert!(len < 13 * 1024, "{version} on {}: {len} bytes", t.name);
    }
    Ok(())
}

/// The script asks EC2 for the volume at the device name the launch
/// template maps it to; the EC2 adapter is not a dependency of this crate,
/// so its source is read.
#[test]
fn data_volume_device_is_the_launch_templates() -> TestResult {
    let adapter = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../adapters/compute-ec2/src/lib.rs");
    let source = std::fs::read_to_string(&adapter)?;
    let declared = format!(
        "pub const DATA_VOLUME_DEVICE: &str = \"{}\";",
        floe_nodeconfig::DATA_VOLUME_DEVICE
    );
    assert!(
        source.contains(&declared),
        "{} no longer declares {declared}",
        adapter.display()
    );
    let s = BTreeMap::new();
    let g = group("hot", vec![NodeRole::DataHot], "m6g.xlarge", 1);
    let script = user_data(&config(&g, instance("m6g.xlarge")?, &s, "8.15.3"));
    assert!(script.contains("\nDATA_DEVICE_NAME='/dev/sdf'\n"));
    Ok(())
}

/// The data volume is found by its id, formatted only when blank, and
/// mounted at path.data before anything is written for Elasticsearch.
#[test]
fn data_volume_is_mounted_before_the_node_is_configured() -> TestResult {
    let s = BTreeMap::new();
    for (g, t, version, _) in every_variant()? {
        let script = user_data(&config(&g, t, &s, version));
        let find = |needle: &str| {
            script
                .find(needle)
                .ok_or_else(|| format!("{needle:?} not in\n{script}"))
        };
        let install = find("rpm --install")?;
        let describe = find("aws ec2 describe-instances")?;
        let blank = find("blkid -p \"${data_dev}\"")?;
        let mkfs = find("\"mkfs.${DATA_FS}\" -q")?;
        let fstab = find(">/etc/fstab")?;
        let mount = find("mount \"${ES_DATA}\"")?;
        let certs = find("install -d -m 0750 -o root -g elasticsearch")?;
        let start = find("systemctl start elasticsearch.service")?;
        assert!(install < describe && describe < blank && blank < mkfs);
        assert!(mkfs < fstab && fstab < mount && mount < certs && certs < start);
        assert!(script.contains("nvme-Amazon_Elastic_Block_Store_${serial}"));
        assert!(script.contains("defaults,noatime,nofail 0 2"));
        assert!(script.contains("\nES_DATA='/var/lib/elasticsearch'\n"));
        assert!(script.contains("\nDATA_FS='ext4'\n"));
        assert!(script.contains("[Unit]\nRequiresMountsFor=/var/lib/elasticsearch\n"));
        assert_eq!(script.matches("mkfs.").count(), 2, "{script}");
    }
    Ok(())
}
