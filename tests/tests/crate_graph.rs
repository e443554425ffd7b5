//! The crate graph keeps the layering: dependencies point one way, from the
//! functions down through the wiring, the API, the use cases and the
//! services to the ports, with the adapters beside the services on top of
//! the ports. An adapter depends on ports (and domain-level libraries) only,
//! never on the engine or on another adapter; nothing but an adapter links
//! an AWS SDK; no Lambda function links a simulator. The folders show the
//! same layers: `shared/domain/`, `shared/ports/`, `shared/adapters/`,
//! `shared/simulators/`, `shared/services/`, then `shared/app`, `shared/api`
//! and `shared/wiring` (see [`folder_of`]).
//!
//! Read from `cargo metadata`, normal dependencies only: tests and benches
//! may use whatever they like. A new crate fails [`every_crate_has_a_layer`]
//! until it is given a layer in [`LAYERS`], and
//! [`every_crate_sits_in_its_layers_folder`] until it is in that layer's folder.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    /// Entities, validation, clients and rendering with no port behind them.
    Domain,
    /// The traits adapters implement, and what is shared between them.
    Ports,
    /// One backing service (and its SDK) each, or a simulator of local mode.
    Adapters,
    /// The plan engine, the snapshotter, schedule reconciliation.
    Services,
    /// The use cases.
    App,
    /// The axum router.
    Api,
    /// Chooses the adapters from configuration.
    Wiring,
    /// The Lambda binaries, and local mode's server.
    Functions,
    /// Black-box tests and benchmark baselines: above everything.
    Tests,
}

impl Layer {
    fn name(self) -> &'static str {
        match self {
            Layer::Domain => "domain",
            Layer::Ports => "ports",
            Layer::Adapters => "adapter",
            Layer::Services => "services",
            Layer::App => "app",
            Layer::Api => "api",
            Layer::Wiring => "wiring",
            Layer::Functions => "functions",
            Layer::Tests => "tests",
        }
    }
}

/// Every workspace crate's layer.
const LAYERS: &[(&str, Layer)] = &[
    ("floe-domain", Layer::Domain),
    ("floe-elastic", Layer::Domain),
    ("floe-nodeconfig", Layer::Domain),
    ("floe-node-security", Layer::Domain),
    ("floe-auth", Layer::Domain),
    ("floe-telemetry", Layer::Domain),
    ("floe-ports", Layer::Ports),
    ("floe-compute", Layer::Ports),
    // The clusters port, and NodeAddresses: no SDK, only the compute and
    // node parameters ports and the Elasticsearch client.
    ("floe-clusters", Layer::Ports),
    ("floe-store", Layer::Ports),
    ("floe-secrets", Layer::Ports),
    // The one reading of an AWS SDK error that every AWS adapter shares:
    // below the adapters, since no adapter may depend on another, and on
    // the smithy types alone, since only adapters link an SDK.
    ("floe-aws-errors", Layer::Ports),
    ("floe-compute-ec2", Layer::Adapters),
    ("floe-compute-sim", Layer::Adapters),
    ("floe-parameters-ssm", Layer::Adapters),
    // The nodes' per-deployment IAM role and instance profile: the only
    // crate linking aws-sdk-iam (the worker's, never the api's).
    ("floe-identity-iam", Layer::Adapters),
    ("floe-records-route53", Layer::Adapters),
    ("floe-clusters-sim", Layer::Adapters),
    ("floe-elastic-sim", Layer::Adapters),
    // The simulated clusters' search semantics on tantivy.
    ("floe-search-index", Layer::Adapters),
    // Local mode's S3-compatible store: what the simulated nodes' S3
    // client talks to.
    ("floe-s3-local", Layer::Adapters),
    ("floe-store-sqlite", Layer::Adapters),
    ("floe-store-dynamo", Layer::Adapters),
    ("floe-secrets-kms", Layer::Adapters),
    ("floe-queue-sqs", Layer::Adapters),
    ("floe-events-eventbridge", Layer::Adapters),
    ("floe-scheduler-aws", Layer::Adapters),
    ("floe-plans", Layer::Services),
    ("floe-snapshots", Layer::Services),
    ("floe-schedules", Layer::Services),
    ("floe-app", Layer::App),
    ("floe-api", Layer::Api),
    ("floe-wiring", Layer::Wiring),
    ("floe-api-function", Layer::Functions),
    ("floe-worker-function", Layer::Functions),
    ("floe-snapshotter-function", Layer::Functions),
    // Local mode's server: the three functions' work in one process.
    ("floe-local", Layer::Functions),
    // The operators' command line: a client of the HTTP API, on top.
    ("floe-cli", Layer::Functions),
    ("floe-tests", Layer::Tests),
    ("floe-hello-lambda", Layer::Tests),
    ("floe-dynamo-baseline", Layer::Tests),
    ("floe-axum-baseline", Layer::Tests),
];

/// Edges that break the layering on purpose, each with its reason.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "floe-clusters-sim",
        "floe-elastic-sim",
        // The simulated clusters adapter runs one simulated Elasticsearch per
        // deployment: the simulator is what it adapts, not a port it could
        // depend on instead. Both are local mode only.
        "the simulated clusters are simulated Elasticsearch clusters",
    ),
    (
        "floe-elastic-sim",
        "floe-search-index",
        // The simulated Elasticsearch searches with it: its search semantics,
        // split out so that each crate has one job. Local mode only.
        "the simulated Elasticsearch's search engine is a part of it",
    ),
];

/// The crates of local mode and tests that no Lambda function may link.
const SIMULATORS: &[&str] = &[
    "floe-compute-sim",
    "floe-clusters-sim",
    "floe-elastic-sim",
    "floe-search-index",
    "floe-s3-local",
];

const LAMBDA_FUNCTIONS: &[&str] = &[
    "floe-api-function",
    "floe-worker-function",
    "floe-snapshotter-function",
];

/// The workspace's crates and, for every crate in the resolved graph, its
/// normal (not dev, not build) dependencies, by name.
struct Graph {
    members: BTreeSet<String>,
    /// Each member's folder, relative to the workspace root.
    folders: BTreeMap<String, String>,
    normal: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    fn load() -> Graph {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let out = std::process::Command::new(env!("CARGO"))
            .args(["metadata", "--format-version", "1"])
            .current_dir(root)
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
        let names: BTreeMap<&str, &str> = meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
            .collect();
        let name_of = |id: &str| -> String {
            names
                .get(id)
                .map(|n| n.to_string())
                .unwrap_or_else(|| panic!("no package {id}"))
        };
        let root_dir = meta["workspace_root"].as_str().expect("workspace_root");
        let folders = meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .filter_map(|p| {
                let manifest = p["manifest_path"].as_str()?;
                let folder = manifest
                    .strip_prefix(root_dir)?
                    .strip_suffix("/Cargo.toml")?;
                Some((
                    p["name"].as_str()?.to_string(),
                    folder.trim_start_matches('/').to_string(),
                ))
            })
            .collect();
        let members = meta["workspace_members"]
            .as_array()
            .expect("workspace_members")
            .iter()
            .filter_map(Value::as_str)
            .map(name_of)
            .collect();
        let mut normal = BTreeMap::new();
        for node in meta["resolve"]["nodes"].as_array().expect("resolve.nodes") {
            let from = name_of(node["id"].as_str().expect("node id"));
            let deps: BTreeSet<String> = node["deps"]
                .as_array()
                .expect("deps")
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
                })
                .filter_map(|d| d["pkg"].as_str())
                .map(name_of)
                .collect();
            normal
                .entry(from)
                .or_insert_with(BTreeSet::new)
                .extend(deps);
        }
        Graph {
            members,
            folders,
            normal,
        }
    }

    /// The workspace crates `from` depends on directly.
    fn member_deps(&self, from: &str) -> Vec<&str> {
        self.normal
            .get(from)
            .into_iter()
            .flatten()
            .filter(|d| self.members.contains(*d))
            .map(String::as_str)
            .collect()
    }

    /// Everything `from` links, itself excluded, with the path to each.
    fn closure(&self, from: &str) -> BTreeMap<String, Vec<String>> {
        let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut todo = vec![(from.to_string(), vec![from.to_string()])];
        while let Some((at, path)) = todo.pop() {
            for dep in self.normal.get(&at).into_iter().flatten() {
                if dep != from && !seen.contains_key(dep) {
                    let mut p = path.clone();
                    p.push(dep.clone());
                    seen.insert(dep.clone(), p.clone());
                    todo.push((dep.clone(), p));
                }
            }
        }
        seen
    }
}

fn layer(name: &str) -> Option<Layer> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

#[test]
fn every_crate_has_a_layer() {
    let graph = Graph::load();
    let missing: Vec<&String> = graph
        .members
        .iter()
        .filter(|m| layer(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "crates without a layer in tests/tests/crate_graph.rs LAYERS: {missing:?}"
    );
}

/// The folder a crate of `layer` lives under. A simulator is an adapter of
/// local mode and sits apart from the AWS and SQLite adapters, so that
/// what no Lambda function may link is one folder.
fn folder_of(name: &str, layer: Layer) -> &'static [&'static str] {
    match layer {
        Layer::Domain => &["shared/domain/"],
        Layer::Ports => &["shared/ports/"],
        Layer::Adapters if SIMULATORS.contains(&name) => &["shared/simulators/"],
        Layer::Adapters => &["shared/adapters/"],
        Layer::Services => &["shared/services/"],
        Layer::App => &["shared/app"],
        Layer::Api => &["shared/api"],
        Layer::Wiring => &["shared/wiring"],
        Layer::Functions => &["functions/", "local", "cli"],
        Layer::Tests => &["tests", "tests/"],
    }
}

#[test]
fn every_crate_sits_in_its_layers_folder() {
    let graph = Graph::load();
    let mut wrong = Vec::new();
    for member in &graph.members {
        let Some(l) = layer(member) else { continue };
        let folder = graph.folders.get(member).map(String::as_str).unwrap_or("");
        let expected = folder_of(member, l);
        let fits = expected.iter().any(|want| {
            // A folder that names one crate is that crate's; one that ends
            // in `/` holds several.
            if want.ends_with('/') {
                folder.starts_with(want) && !folder[want.len()..].contains('/')
            } else {
                folder == *want
            }
        });
        if !fits {
            wrong.push(format!(
                "{member} is at {folder}/, but its layer ({}) lives in {expected:?}",
                l.name()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn dependencies_point_down_and_adapters_stand_alone() {
    let graph = Graph::load();
    let mut wrong = Vec::new();
    let mut allowed_used = BTreeSet::new();
    for from in &graph.members {
        let Some(from_layer) = layer(from) else {
            continue; // every_crate_has_a_layer says so
        };
        for to in graph.member_deps(from) {
            let Some(to_layer) = layer(to) else { continue };
            let why = if to_layer > from_layer {
                format!(
                    "{} must not depend on {}",
                    from_layer.name(),
                    to_layer.name()
                )
            } else if to_layer == Layer::Adapters && from_layer == Layer::Adapters {
                "adapter must not depend on another adapter".to_string()
            } else {
                continue;
            };
            if ALLOWED.iter().any(|(f, t, _)| f == from && *t == to) {
                allowed_used.insert((from.clone(), to.to_string()));
                continue;
            }
            wrong.push(format!("{from} -> {to}: {why}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "edges against the layering:\n{}",
        wrong.join("\n")
    );
    let stale: Vec<String> = ALLOWED
        .iter()
        .filter(|(f, t, _)| !allowed_used.contains(&(f.to_string(), t.to_string())))
        .map(|(f, t, _)| format!("{f} -> {t}"))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed edges that no longer exist (remove them from ALLOWED): {stale:?}"
    );
}

/// `floe` talks to the API over HTTP only: it links no Floe crate, so it
/// works against any Floe and cannot lean on the server's internals.
#[test]
fn the_cli_links_no_floe_crate() {
    let graph = Graph::load();
    assert!(
        graph.members.contains("floe-cli"),
        "floe-cli is a workspace member"
    );
    let deps = graph.member_deps("floe-cli");
    assert!(deps.is_empty(), "floe-cli depends on {deps:?}");
}

#[test]
fn only_adapters_link_an_aws_sdk_and_each_sdk_has_one_adapter() {
    let graph = Graph::load();
    let mut by_sdk: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for from in &graph.members {
        for dep in graph.normal.get(from).into_iter().flatten() {
            if !dep.starts_with("aws-sdk-") {
                continue;
            }
            by_sdk.entry(dep).or_default().push(from);
            if layer(from) != Some(Layer::Adapters) {
                wrong.push(format!("{from} -> {dep}: only an adapter links an SDK"));
            }
        }
    }
    for (sdk, users) in &by_sdk {
        if users.len() > 1 {
            wrong.push(format!("{sdk} is linked by {users:?}: one adapter per SDK"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_engine_and_the_api_link_no_sdk_and_no_simulator() {
    let graph = Graph::load();
    let mut wrong = Vec::new();
    for from in &graph.members {
        let Some(l) = layer(from) else { continue };
        if l == Layer::Adapters || l > Layer::Api {
            continue;
        }
        for (dep, path) in graph.closure(from) {
            if dep.starts_with("aws-sdk-") || SIMULATORS.contains(&dep.as_str()) {
                wrong.push(format!("{from} links {dep}: {}", path.join(" -> ")));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What `function` links when it is built on its own, as its Lambda zip
/// is (`cargo tree -p`, default features). The workspace graph above unifies
/// the features every member asks for, so it shows the simulators that the
/// test crate turns on in the worker for the emulator tests.
fn linked_alone(function: &str) -> BTreeSet<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree", "-p", function, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .current_dir(root)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {function} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != function)
        .map(str::to_string)
        .collect()
}

#[test]
fn no_lambda_function_links_a_simulator() {
    let mut wrong = Vec::new();
    for function in LAMBDA_FUNCTIONS {
        for dep in linked_alone(function) {
            if SIMULATORS.contains(&dep.as_str()) {
                wrong.push(format!(
                    "{function} links {dep} (cargo tree -p {function} -i {dep})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The Lambda functions keep their records in DynamoDB: SQLite (local
/// mode's embedded store) stays out of their zips.
#[test]
fn no_lambda_function_links_sqlite() {
    let mut wrong = Vec::new();
    for function in LAMBDA_FUNCTIONS {
        for dep in linked_alone(function) {
            if matches!(
                dep.as_str(),
                "floe-store-sqlite" | "rusqlite" | "libsqlite3-sys"
            ) {
                wrong.push(format!(
                    "{function} links {dep} (cargo tree -p {function} -i {dep})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The api function records, seals and enqueues: DynamoDB, KMS and SQS,
/// and the STS and SSO clients aws-config brings for credentials. It
/// reaches clusters from the records (no EC2, no SSM) and keeps schedules
/// in step through the worker (no EventBridge Scheduler).
#[test]
fn the_api_function_links_only_the_sdks_it_calls() {
    const ALLOWED_SDKS: &[&str] = &[
        "aws-sdk-dynamodb",
        "aws-sdk-kms",
        "aws-sdk-sqs",
        "aws-sdk-sts",
        "aws-sdk-sso",
        "aws-sdk-ssooidc",
    ];
    let linked = linked_alone("floe-api-function");
    let extra: Vec<&String> = linked
        .iter()
        .filter(|d| d.starts_with("aws-sdk-") && !ALLOWED_SDKS.contains(&d.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "floe-api-function links {extra:?} (cargo tree -p floe-api-function -i <sdk>)"
    );
    assert!(
        linked.contains("aws-sdk-dynamodb"),
        "the scan found no SDK: {linked:?}"
    );
}
