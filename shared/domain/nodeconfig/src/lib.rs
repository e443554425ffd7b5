//! What an Elasticsearch node of a Floe deployment boots with, rendered for
//! one node group: `elasticsearch.yml`, the JVM options, and the cloud-init
//! script that installs Elasticsearch, writes both files and starts the node.
//!
//! Every function here is pure. Nothing is refused here: the deployment spec
//! was validated upstream (`DeploymentSpec::validate_spec` checks setting
//! names, platform-owned keys, single-line values and the version). What this
//! crate guarantees for any input is structural: each user setting becomes
//! exactly one YAML key with one value, no input reaches the shell unquoted,
//! and no credential is ever rendered (the node reads them from SSM Parameter
//! Store at boot).
//!
//! The settings follow Elastic's published guidance for production nodes:
//! heap at half the RAM below the compressed-oops limit, memory lock,
//! `vm.max_map_count`, low swappiness, a short TCP retransmission timeout,
//! EC2 discovery by tag and zone awareness across availability zones.

mod script;
mod yaml;

use floe_domain::catalog::{self, Arch, InstanceType};
use floe_domain::deployment::{NodeGroup, NodeRole};
use serde_json::Value;
use std::collections::BTreeMap;
use yaml::{quote, yaml_key, yaml_value};

pub use script::user_data;

/// The S3 client name the node's settings and keystore entries use; the
/// repository must be registered with `"client": "floe"`.
pub const S3_CLIENT: &str = "floe";
/// The directories of Elastic's RPM package.
pub const CONFIG_DIR: &str = "/etc/elasticsearch";
/// `path.data`: the mount point of the node's data volume. Everything the
/// node stores lives there, the frozen tier's shared cache file included
/// (Elasticsearch keeps it under `path.data`, and no setting moves it), so a
/// `shared_cache` percentage is a share of the data volume.
pub const DATA_DIR: &str = "/var/lib/elasticsearch";
/// The device name the data volume is attached at: the launch template's
/// block device mapping, `floe_compute_ec2::DATA_VOLUME_DEVICE` (this crate
/// stays free of the adapter; a test keeps the two equal). The boot script
/// asks EC2 which volume is attached there and finds that volume by its id:
/// the name the kernel gives it differs between instance families.
pub const DATA_VOLUME_DEVICE: &str = "/dev/sdf";
/// The filesystem the boot script makes on a blank data volume.
pub const DATA_FILESYSTEM: &str = "ext4";
pub const LOGS_DIR: &str = "/var/log/elasticsearch";
pub const HOME_DIR: &str = "/usr/share/elasticsearch";
/// Where the boot script puts the deployment's certificates, relative to
/// the config directory (as Elasticsearch resolves the ssl paths).
pub const CERTS_DIR: &str = "certs";
/// The environment variable the boot script sets to the instance id, which
/// Elasticsearch substitutes into `node.name`.
pub const NODE_NAME_VARIABLE: &str = "FLOE_NODE_NAME";
/// Set by the boot script to the availability zone, for versions whose EC2
/// plugin cannot read it itself (see [`NodeGroupConfig::plugin_reads_imdsv2`]).
pub const ZONE_VARIABLE: &str = "FLOE_AVAILABILITY_ZONE";
/// The node attribute `cloud.node.auto_attributes` sets, used for awareness.
pub const ZONE_ATTRIBUTE: &str = "aws_availability_zone";
/// The instance tag EC2 discovery filters on: the one the compute port puts
/// on every instance (`floe_compute::TAG_DEPLOYMENT`; this crate stays free
/// of the compute port).
pub const TAG_DEPLOYMENT: &str = "floe:deployment";

/// Everything one node group's nodes are configured from.
#[derive(Debug, Clone, Copy)]
pub struct NodeGroupConfig<'a> {
    pub deployment_id: &'a str,
    pub cluster_name: &'a str,
    /// Not rendered: a node needs no tenant identity, and the instance tags
    /// already carry it.
    pub org: &'a str,
    pub es_version: &'a str,
    pub group: &'a NodeGroup,
    pub instance: &'a InstanceType,
    /// Flat (normalised) settings; a nested object is rendered as a flow map.
    pub user_settings: &'a BTreeMap<String, Value>,
    pub region: &'a str,
    /// The deployment's snapshot repository.
    pub repository: Option<RepositoryClient<'a>>,
    /// Where the node fetches its bootstrap data at boot (an SSM parameter
    /// path prefix the instance role can read), e.g. "/floe/{deployment}".
    /// Read below it: `repository/access_key`, `repository/secret_key`,
    /// `repository/session_token` (SecureStrings) and, on master-eligible
    /// nodes, `initial_master_nodes` (see [`user_data`]).
    pub parameter_prefix: &'a str,
    /// The deployment's stable endpoint host, which each node's HTTP
    /// certificate names (also for a deployment whose shared certificate,
    /// made before it had one, does not).
    pub endpoint: Option<&'a str>,
}

/// The S3 client settings of the deployment's repository. The credentials
/// themselves never come here, only whether they exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepositoryClient<'a> {
    /// `host` or `host:port` of an S3-compatible store.
    pub endpoint: Option<&'a str>,
    /// `http` or `https`.
    pub protocol: Option<&'a str>,
    pub path_style_access: Option<bool>,
    pub region: Option<&'a str>,
    /// Access and secret key are stored; without them the node uses its
    /// instance role.
    pub has_credentials: bool,
    /// A session token is stored too (used only with `has_credentials`).
    pub has_session_token: bool,
}

impl NodeGroupConfig<'_> {
    /// Major and minor version; an unparsable version (refused upstream) is
    /// treated as the newest, whose defaults are the safest.
    fn version(&self) -> (u32, u32) {
        let mut parts = self.es_version.split('.').map(|p| p.parse::<u32>().ok());
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(major), Some(minor)) => (major, minor),
            _ => (u32::MAX, u32::MAX),
        }
    }

    /// From 8.0 the S3 repository is part of Elasticsearch; before, it is a
    /// plugin. EC2 discovery is a plugin in every version.
    pub fn needs_repository_s3_plugin(&self) -> bool {
        self.version().0 < 8
    }

    /// The EC2 plugin asks the instance metadata service for the private IP
    /// (`_ec2:privateIp_`) and the zone (`cloud.node.auto_attributes`) with
    /// IMDSv2 tokens only from 8.2 (elastic/elasticsearch#84410); before, it
    /// fails on instances that require IMDSv2, so the boot script supplies
    /// both instead.
    pub fn plugin_reads_imdsv2(&self) -> bool {
        self.version() >= (8, 2)
    }

    fn master_eligible(&self) -> bool {
        self.group.roles.contains(&NodeRole::Master)
    }

    /// The prefix without a trailing slash, so that joined names stay valid
    /// SSM parameter names.
    fn parameter(&self, name: &str) -> String {
        format!("{}/{name}", self.parameter_prefix.trim_end_matches('/'))
    }
}

/// The Elasticsearch name of a role (as `node.roles` takes it).
pub fn role_name(role: NodeRole) -> &'static str {
    match role {
        NodeRole::Master => "master",
        NodeRole::DataHot => "data_hot",
        NodeRole::DataWarm => "data_warm",
        NodeRole::DataCold => "data_cold",
        NodeRole::DataFrozen => "data_frozen",
        NodeRole::DataContent => "data_content",
        NodeRole::Ingest => "ingest",
        NodeRole::Ml => "ml",
        NodeRole::RemoteClusterClient => "remote_cluster_client",
        NodeRole::Transform => "transform",
    }
}

/// The package architecture name in Elastic's artifact file names.
pub fn package_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::Arm64 => "aarch64",
        Arch::X86_64 => "x86_64",
    }
}

/// The regional EC2 endpoint the discovery plugin queries; it defaults to
/// us-east-1 otherwise. China regions live under their own domain.
fn ec2_endpoint(region: &str) -> String {
    let domain = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    format!("ec2.{region}.{domain}")
}

/// One rendered setting. `overridable` settings are defaults a user setting
/// of the same key replaces; the others wire the node into its cluster, and a
/// user setting of that key is dropped (Elasticsearch refuses to start on a
/// duplicate key, and upstream validation refuses those keys anyway).
struct Setting {
    key: String,
    value: String,
    overridable: bool,
}

fn platform_settings(c: &NodeGroupConfig) -> Vec<Setting> {
    let mut out = Vec::new();
    let mut wire = |key: &str, value: String| {
        out.push(Setting {
            key: key.to_string(),
            value,
            overridable: false,
        });
    };
    let roles: Vec<&str> = c.group.roles.iter().map(|r| role_name(*r)).collect();
    wire("cluster.name", quote(c.cluster_name));
    // Elasticsearch resolves `${VAR}` from its environment at start; the
    // instance id is only known on the instance.
    wire("node.name", format!("${{{NODE_NAME_VARIABLE}}}"));
    wire("node.roles", format!("[{}]", roles.join(", ")));
    wire("node.attr.floe_node_group", quote(&c.group.id));
    wire("path.data", DATA_DIR.to_string());
    wire("path.logs", LOGS_DIR.to_string());
    wire("bootstrap.memory_lock", "true".to_string());
    let host = if c.plugin_reads_imdsv2() {
        "_ec2:privateIp_"
    } else {
        "_site_"
    };
    wire("network.host", host.to_string());
    wire("discovery.seed_providers", "ec2".to_string());
    wire("discovery.ec2.endpoint", quote(&ec2_endpoint(c.region)));
    wire(
        &format!("discovery.ec2.tag.{TAG_DEPLOYMENT}"),
        quote(c.deployment_id),
    );
    if !c.plugin_reads_imdsv2() {
        wire(
            &format!("node.attr.{ZONE_ATTRIBUTE}"),
            format!("${{{ZONE_VARIABLE}}}"),
        );
    }
    // The deployment's own CA secures both layers: transport (mutual, which
    // Elasticsearch 8 requires once security is on) and HTTP, which the
    // functions reach by the certificate's name (floe-node-security).
    wire("xpack.security.enabled", "true".to_string());
    // HTTP serves the node's own certificate, which also names its address
    // (the boot script makes it).
    for (layer, own) in [("transport", "node"), ("http", "http")] {
        let ssl = |name: &str| format!("xpack.security.{layer}.ssl.{name}");
        wire(&ssl("enabled"), "true".to_string());
        wire(&ssl("key"), quote(&format!("{CERTS_DIR}/{own}.key")));
        wire(
            &ssl("certificate"),
            quote(&format!("{CERTS_DIR}/{own}.crt")),
        );
        wire(
            &ssl("certificate_authorities"),
            format!("[{}]", quote(&format!("{CERTS_DIR}/ca.crt"))),
        );
    }
    // Nodes prove they belong to the deployment; their addresses are not
    // on the one certificate they share.
    wire(
        "xpack.security.transport.ssl.verification_mode",
        "certificate".to_string(),
    );
    if let Some(cache) = &c.group.shared_cache
        && c.group.roles.contains(&NodeRole::DataFrozen)
    {
        wire("xpack.searchable.snapshot.shared_cache.size", quote(cache));
    }
    if let Some(r) = &c.repository {
        let client = |name: &str| format!("s3.client.{S3_CLIENT}.{name}");
        if let Some(endpoint) = r.endpoint {
            wire(&client("endpoint"), quote(endpoint));
        }
        if let Some(protocol) = r.protocol {
            wire(&client("protocol"), quote(protocol));
        }
        if let Some(path_style) = r.path_style_access {
            wire(&client("path_style_access"), path_style.to_string());
        }
        if let Some(region) = r.region {
            wire(&client("region"), quote(region));
        }
    }
    let mut default = |key: &str, value: &str| {
        out.push(Setting {
            key: key.to_string(),
            value: value.to_string(),
            overridable: true,
        });
    };
    // The zone attribute is set on every node, even in single-zone groups:
    // once awareness is on, the elected master allocates no shard to a node
    // that lacks the attribute.
    if c.plugin_reads_imdsv2() {
        default("cloud.node.auto_attributes", "true");
    }
    if c.group.zone_count > 1 {
        default(
            "cluster.routing.allocation.awareness.attributes",
            ZONE_ATTRIBUTE,
        );
    }
    out
}

/// The node's `elasticsearch.yml`: the platform's settings, then every user
/// setting as `key: <value as JSON>`.
///
/// Each line is one key. Keys other than plain dotted names are
/// double-quoted, and string values always are, with every line break,
/// quote, backslash and control character escaped, so no value can end its
/// line or open a new key. A user setting overrides the platform's defaults
/// (zone attributes, awareness) but never its wiring (names, paths, network,
/// discovery, memory lock, the S3 client): validation refuses those keys
/// upstream, and a duplicate key would stop Elasticsearch from starting.
pub fn elasticsearch_yml(c: &NodeGroupConfig) -> String {
    let mut platform = platform_settings(c);
    let mut user = Vec::new();
    for (key, value) in c.user_settings {
        match platform.iter().position(|s| s.key == *key) {
            Some(i) if platform[i].overridable => {
                platform.remove(i);
            }
            Some(_) => continue,
            None => {}
        }
        user.push((key, value));
    }

    let mut out = String::new();
    out.push_str("# Rendered by Floe for one node group. Do not edit: a plan rewrites it.\n");
    for s in &platform {
        out.push_str(&format!("{}: {}\n", yaml_key(&s.key), s.value));
    }
    if !user.is_empty() {
        out.push_str("# The deployment's user settings.\n");
        for (key, value) in user {
            out.push_str(&format!("{}: {}\n", yaml_key(key), yaml_value(value)));
        }
    }
    out
}

/// The node's `jvm.options.d/floe.options`: the heap, fixed (`-Xms` equal to
/// `-Xmx`) so that it is never resized while serving.
pub fn jvm_options(c: &NodeGroupConfig) -> String {
    let heap = catalog::jvm_heap_mib(c.instance.memory_mib);
    format!(
        "# Rendered by Floe: half the RAM of {} ({} MiB), at most {} MiB so that\n\
         # the JVM keeps compressed object pointers; the rest is filesystem cache.\n\
         -Xms{heap}m\n-Xmx{heap}m\n",
        c.instance.name,
        c.instance.memory_mib,
        catalog::MAX_HEAP_MIB,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_domain::deployment::{Storage, VolumeType};
    use serde_json::json;

    pub(crate) fn group(roles: Vec<NodeRole>, zone_count: u32) -> NodeGroup {
        NodeGroup {
            id: "hot".into(),
            roles,
            instance_type: "m6g.xlarge".into(),
            count: 3,
            zone_count,
            storage: Storage {
                size_gb: 100,
                volume_type: VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            shared_cache: None,
        }
    }

    fn instance(name: &str) -> &'static InstanceType {
        catalog::lookup(name).unwrap_or_else(|| panic!("{name} is in the catalog"))
    }

    fn config<'a>(
        group: &'a NodeGroup,
        instance: &'a InstanceType,
        settings: &'a BTreeMap<String, Value>,
    ) -> NodeGroupConfig<'a> {
        NodeGroupConfig {
            deployment_id: "dep-1",
            cluster_name: "logs-prod",
            org: "org-1",
            es_version: "8.15.3",
            group,
            instance,
            user_settings: settings,
            region: "eu-central-1",
            repository: None,
            parameter_prefix: "/floe/dep-1",
            endpoint: None,
        }
    }

    fn lines(s: &str) -> Vec<&str> {
        s.lines().collect()
    }

    #[test]
    fn heap_is_half_the_ram_capped() {
        let g = group(vec![NodeRole::Master], 1);
        let s = BTreeMap::new();
        let small = jvm_options(&config(&g, instance("m6g.xlarge"), &s));
        assert!(lines(&small).contains(&"-Xms8192m"), "{small}");
        assert!(lines(&small).contains(&"-Xmx8192m"), "{small}");
        let big = jvm_options(&config(&g, instance("r6g.16xlarge"), &s));
        assert!(lines(&big).contains(&"-Xms31744m"), "{big}");
        assert!(lines(&big).contains(&"-Xmx31744m"), "{big}");
        for line in lines(&big) {
            assert!(line.starts_with('#') || line.starts_with("-X"), "{line}");
        }
    }

    #[test]
    fn platform_settings_wire_the_node_into_its_cluster() {
        let g = group(vec![NodeRole::Master, NodeRole::DataHot], 1);
        let s = BTreeMap::new();
        let yml = elasticsearch_yml(&config(&g, instance("m6g.xlarge"), &s));
        let l = lines(&yml);
        for expected in [
            "cluster.name: \"logs-prod\"",
            "node.name: ${FLOE_NODE_NAME}",
            "node.roles: [master, data_hot]",
            "node.attr.floe_node_group: \"hot\"",
            "path.data: /var/lib/elasticsearch",
            "path.logs: /var/log/elasticsearch",
            "bootstrap.memory_lock: true",
            "network.host: _ec2:privateIp_",
            "discovery.seed_providers: ec2",
            "discovery.ec2.endpoint: \"ec2.eu-central-1.amazonaws.com\"",
            "\"discovery.ec2.tag.floe:deployment\": \"dep-1\"",
            "cloud.node.auto_attributes: true",
        ] {
            assert!(l.contains(&expected), "missing {expected:?} in\n{yml}");
        }
        assert!(!yml.contains("s3.client"), "{yml}");
        assert!(!yml.contains("user settings"), "{yml}");
    }

    #[test]
    fn every_role_has_its_elasticsearch_name() {
        let all = vec![
            NodeRole::Master,
            NodeRole::DataHot,
            NodeRole::DataWarm,
            NodeRole::DataCold,
            NodeRole::DataFrozen,
            NodeRole::DataContent,
            NodeRole::Ingest,
            NodeRole::Ml,
            NodeRole::RemoteClusterClient,
            NodeRole::Transform,
        ];
        for role in &all {
            // The API's names are Elasticsearch's names.
            assert_eq!(
                serde_json::to_value(role).ok(),
                Some(json!(role_name(*role)))
            );
        }
        let g = group(all, 1);
        let s = BTreeMap::new();
        let yml = elasticsearch_yml(&config(&g, instance("m6g.xlarge"), &s));
        assert!(yml.contains(
            "node.roles: [master, data_hot, data_warm, data_cold, data_frozen, data_content, ingest, ml, remote_cluster_client, transform]\n"
        ));
        let none = group(vec![], 1);
        let yml = elasticsearch_yml(&config(&none, instance("m6g.xlarge"), &s));
        assert!(yml.contains("node.roles: []\n"));
    }

    #[test]
    fn awareness_only_across_zones() {
        let s = BTreeMap::new();
        let one = group(vec![NodeRole::DataHot], 1);
        let yml = elasticsearch_yml(&config(&one, instance("m6g.xlarge"), &s));
        assert!(!yml.contains("awareness"), "{yml}");
        for zones in [2, 3] {
            let g = group(vec![NodeRole::DataHot], zones);
            let yml = elasticsearch_yml(&config(&g, instance("m6g.xlarge"), &s));
            assert!(
                yml.contains(
                    "\ncluster.routing.allocation.awareness.attributes: aws_availability_zone\n"
                ),
                "{yml}"
            );
            assert!(yml.contains("\ncloud.node.auto_attributes: true\n"));
        }
    }

    #[test]
    fn versions_before_8_2_take_address_and_zone_from_the_script() {
        let g = group(vec![NodeRole::DataHot], 3);
        let s = BTreeMap::new();
        for version in ["7.10.2", "7.17.25", "8.1.3"] {
            let c = NodeGroupConfig {
                es_version: version,
                ..config(&g, instance("m5.xlarge"), &s)
            };
            let yml = elasticsearch_yml(&c);
            assert!(yml.contains("\nnetwork.host: _site_\n"), "{version}");
            assert!(
                yml.contains("\nnode.attr.aws_availability_zone: ${FLOE_AVAILABILITY_ZONE}\n"),
                "{version}"
            );
            assert!(!yml.contains("auto_attributes"), "{version}");
            assert!(yml.contains("awareness.attributes: aws_availability_zone"));
        }
        for version in ["8.2.0", "8.15.3", "9.0.0", "not-a-version"] {
            let c = NodeGroupConfig {
                es_version: version,
                ..config(&g, instance("m5.xlarge"), &s)
            };
            assert!(c.plugin_reads_imdsv2(), "{version}");
            let yml = elasticsearch_yml(&c);
            assert!(
                yml.contains("\nnetwork.host: _ec2:privateIp_\n"),
                "{version}"
            );
            assert!(!yml.contains("FLOE_AVAILABILITY_ZONE"), "{version}");
        }
    }

    #[test]
    fn repository_client_settings_are_rendered_without_credentials() {
        let g = group(vec![NodeRole::DataHot], 1);
        let s = BTreeMap::new();
        let c = NodeGroupConfig {
            repository: Some(RepositoryClient {
                endpoint: Some("minio.internal:9000"),
                protocol: Some("http"),
                path_style_access: Some(true),
                region: Some("us-east-1"),
                has_credentials: true,
                has_session_token: true,
            }),
            ..config(&g, instance("m6g.xlarge"), &s)
        };
        let yml = elasticsearch_yml(&c);
        let l = lines(&yml);
        for expected in [
            "s3.client.floe.endpoint: \"minio.internal:9000\"",
            "s3.client.floe.protocol: \"http\"",
            "s3.client.floe.path_style_access: true",
            "s3.client.floe.region: \"us-east-1\"",
        ] {
            assert!(l.contains(&expected), "missing {expected:?} in\n{yml}");
        }
        for secret in ["access_key", "secret_key", "session_token"] {
            assert!(!yml.contains(secret), "{yml}");
        }

        let bare = NodeGroupConfig {
            repository: Some(RepositoryClient::default()),
            ..config(&g, instance("m6g.xlarge"), &s)
        };
        assert!(!elasticsearch_yml(&bare).contains("s3.client"));
    }

    /// Every key the platform wires (never overridable) is refused as
    /// platform-owned by the deployment's validation, and every default it
    /// lets a user replace is one the allowlist accepts or none at all
    /// (issue 33): a wired key missing from PLATFORM_OWNED_SETTINGS would
    /// be dropped silently from a user's settings.
    #[test]
    fn every_wired_key_is_refused_as_platform_owned() {
        use floe_domain::user_settings::{Refusal, check_key};
        let mut g = group(vec![NodeRole::Master, NodeRole::DataFrozen], 3);
        g.shared_cache = Some("90%".to_string());
        let s = BTreeMap::new();
        for version in ["7.17.25", "8.15.3"] {
            let c = NodeGroupConfig {
                es_version: version,
                repository: Some(RepositoryClient {
                    endpoint: Some("minio.internal:9000"),
                    protocol: Some("http"),
                    path_style_access: Some(true),
                    region: Some("us-east-1"),
                    has_credentials: true,
                    has_session_token: true,
                }),
                ..config(&g, instance("m6g.xlarge"), &s)
            };
            for setting in platform_settings(&c) {
                let refusal = check_key(&setting.key);
                if setting.overridable {
                    assert!(
                        !matches!(refusal, Err(Refusal::PlatformOwned(_))),
                        "{version}: {} is a default users may replace",
                        setting.key
                    );
                } else {
                    assert!(
                        matches!(refusal, Err(Refusal::PlatformOwned(_))),
                        "{version}: {} is wired but not platform-owned",
                        setting.key
                    );
                }
            }
        }
    }

    #[test]
    fn user_settings_are_rendered_as_json_values() {
        let g = group(vec![NodeRole::DataHot], 1);
        let s: BTreeMap<String, Value> = [
            ("thread_pool.snapshot.max", json!(8)),
            ("indices.recovery.max_bytes_per_sec", json!("200mb")),
            ("action.destructive_requires_name", json!(true)),
            ("cluster.max_shards_per_node", json!(1.5)),
            ("xpack.monitoring.exporters", json!(["a", 1, false])),
            ("weird key", json!("v")),
            ("on", json!("yes")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let yml = elasticsearch_yml(&config(&g, instance("m6g.xlarge"), &s));
        let user: Vec<&str> = yml
            .split("# The deployment's user settings.\n")
            .nth(1)
            .map(|u| u.lines().collect())
            .unwrap_or_default();
        assert_eq!(
            user,
            [
                "action.destructive_requires_name: true",
                "cluster.max_shards_per_node: 1.5",
                "indices.recovery.max_bytes_per_sec: \"200mb\"",
                "\"on\": \"yes\"",
                "thread_pool.snapshot.max: 8",
                "\"weird key\": \"v\"",
                "xpack.monitoring.exporters: [\"a\", 1, false]",
            ]
        );
    }

    #[test]
    fn a_hostile_value_cannot_add_a_key() {
        let g = group(vec![NodeRole::DataHot], 1);
        let hostile = [
            "x\nnode.roles: []",
            "x\r\nnode.roles: []",
            "x\u{85}node.roles: []",
            "x\u{2028}node.roles: []",
            "x\"\nnode.roles: []",
            "x\\\"\nnode.roles: []",
            "x' # \nnode.roles: []\n- y",
        ];
        for value in hostile {
            let s = BTreeMap::from([("a.b".to_string(), json!(value))]);
            let yml = elasticsearch_yml(&config(&g, instance("m6g.xlarge"), &s));
            let roles = yml.lines().filter(|l| l.contains("node.roles")).count();
            assert_eq!(roles, 2, "{yml}");
            let settings = yml.lines().filter(|l| !l.starts_with('#')).count();
            let without = elasticsearch_yml(&config(&g, instance("m6g.xlarge"), &BTreeMap::new()));
            let baseline = without.lines().filter(|l| !l.starts_with('#')).count();
            assert_eq!(settings, baseline + 1, "{yml}");
            assert!(yml.lines().any(|l| l.starts_with("a.b: \"x")), "{yml}");
        }
        // Hostile keys are quoted as a whole too.
        let s = BTreeMap::from([("a\nnode.roles: []\nb".to_string(), json!(1))]);
        let yml = elasticsearch_yml(&config(&g, instance("m6g.xlarge"), &s));
        assert!(yml.contains("\n\"a\\nnode.roles: []\\nb\": 1\n"), "{yml}");
    }

    #[test]
    fn user_settings_replace_defaults_but_never_wiring() {
        let g = group(vec![NodeRole::DataHot], 3);
        let s: BTreeMap<String, Value> = [
            (
                "cluster.routing.allocation.awareness.attributes",
                json!("rack"),
            ),
            ("node.roles", json!([])),
            ("cluster.name", json!("other")),
            ("s3.client.floe.endpoint", json!("evil.example")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let c = NodeGroupConfig {
            repository: Some(RepositoryClient {
                endpoint: Some("s3.internal"),
                ..RepositoryClient::default()
            }),
            ..config(&g, instance("m6g.xlarge"), &s)
        };
        let yml = elasticsearch_yml(&c);
        let count = |key: &str| yml.lines().filter(|l| l.starts_with(key)).count();
        assert_eq!(count("cluster.routing.allocation.awareness.attributes:"), 1);
        assert!(yml.contains("cluster.routing.allocation.awareness.attributes: \"rack\"\n"));
        assert_eq!(count("node.roles:"), 1);
        assert!(yml.contains("node.roles: [data_hot]\n"));
        assert_eq!(count("cluster.name:"), 1);
        assert!(yml.contains("cluster.name: \"logs-prod\"\n"));
        assert_eq!(count("s3.client.floe.endpoint:"), 1);
        assert!(!yml.contains("evil.example"));
    }

    #[test]
    fn platform_values_are_quoted_too() {
        let mut g = group(vec![NodeRole::DataHot], 1);
        g.id = "hot\"\nnode.roles: []".into();
        let s = BTreeMap::new();
        let c = NodeGroupConfig {
            cluster_name: "a\nb",
            deployment_id: "d\"\n",
            ..config(&g, instance("m6g.xlarge"), &s)
        };
        let yml = elasticsearch_yml(&c);
        assert_eq!(yml.lines().filter(|l| l.contains("node.roles")).count(), 2);
        assert!(yml.contains("cluster.name: \"a\\nb\"\n"));
        assert!(yml.contains("\"discovery.ec2.tag.floe:deployment\": \"d\\\"\\n\"\n"));
    }

    #[test]
    fn discovery_uses_the_regional_endpoint() {
        assert_eq!(ec2_endpoint("eu-west-3"), "ec2.eu-west-3.amazonaws.com");
        assert_eq!(
            ec2_endpoint("cn-north-1"),
            "ec2.cn-north-1.amazonaws.com.cn"
        );
    }

    #[test]
    fn plugins_follow_the_version() {
        let g = group(vec![NodeRole::DataHot], 1);
        let s = BTreeMap::new();
        let at = |v: &'static str| NodeGroupConfig {
            es_version: v,
            ..config(&g, instance("m6g.xlarge"), &s)
        };
        assert!(at("7.10.2").needs_repository_s3_plugin());
        assert!(at("7.17.0").needs_repository_s3_plugin());
        assert!(!at("8.0.0").needs_repository_s3_plugin());
        assert!(!at("9.1.0").needs_repository_s3_plugin());
        assert!(!at("8.1.9").plugin_reads_imdsv2());
        assert!(at("8.2.0").plugin_reads_imdsv2());
        assert!(at("10.0.0").plugin_reads_imdsv2());
    }

    #[test]
    fn parameter_names_join_the_prefix_once() {
        let g = group(vec![NodeRole::DataHot], 1);
        let s = BTreeMap::new();
        for prefix in ["/floe/dep-1", "/floe/dep-1/", "/floe/dep-1//"] {
            let c = NodeGroupConfig {
                parameter_prefix: prefix,
                ..config(&g, instance("m6g.xlarge"), &s)
            };
            assert_eq!(c.parameter("a/b"), "/floe/dep-1/a/b");
        }
    }
}
