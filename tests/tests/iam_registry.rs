//! Every AWS operation an adapter's code can call is in that adapter's
//! registry, and every registered operation is called: the registries are
//! what the deploy template's least-privilege policies are checked against,
//! so they must not drift from the code.

use std::collections::BTreeSet;
use std::path::Path;

/// The SDK operations called in `src` (tests excluded): `client.op_name(`.
fn called_operations(src: &str) -> BTreeSet<String> {
    let code = src.split("#[cfg(test)]").next().unwrap_or("");
    let compact: String = code.split_whitespace().collect::<Vec<_>>().join("");
    let mut ops = BTreeSet::new();
    for (i, _) in compact.match_indices("client.") {
        let rest = &compact[i + "client.".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
            .collect();
        let after = &rest[name.len()..];
        // A builder call `op()` starts an operation; `clone()` and the like do not.
        if !name.is_empty()
            && after.starts_with("()")
            && !["clone", "config"].contains(&name.as_str())
        {
            ops.insert(pascal(&name));
        }
    }
    ops
}

fn pascal(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn source(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn registered(service: &str, actions: &[&str]) -> BTreeSet<String> {
    actions
        .iter()
        .map(|a| {
            a.strip_prefix(&format!("{service}:"))
                .unwrap_or(a)
                .to_string()
        })
        .collect()
}

fn check(adapter: &str, called: BTreeSet<String>, registry: BTreeSet<String>) {
    assert!(
        !called.is_empty(),
        "{adapter}: the scan found no SDK call at all; has the call style changed?"
    );
    let unregistered: Vec<_> = called.difference(&registry).collect();
    let uncalled: Vec<_> = registry.difference(&called).collect();
    assert!(
        unregistered.is_empty(),
        "{adapter} calls operations missing from its registry: {unregistered:?}"
    );
    assert!(
        uncalled.is_empty(),
        "{adapter} registers operations it never calls: {uncalled:?}"
    );
}

#[test]
fn dynamodb_store_registry_matches_its_calls() {
    let mut registry = registered("dynamodb", floe_store_dynamo::OPERATIONS);
    registry.extend(registered("dynamodb", floe_store_dynamo::SETUP_OPERATIONS));
    check(
        "shared/adapters/store-dynamo/src/lib.rs",
        called_operations(&source("shared/adapters/store-dynamo/src/lib.rs")),
        registry,
    );
}

#[test]
fn kms_cipher_registry_matches_its_calls() {
    check(
        "shared/adapters/secrets-kms/src/lib.rs",
        called_operations(&source("shared/adapters/secrets-kms/src/lib.rs")),
        registered("kms", floe_secrets_kms::OPERATIONS),
    );
}

#[test]
fn ec2_compute_registry_matches_its_calls() {
    check(
        "shared/adapters/compute-ec2/src/lib.rs",
        called_operations(&source("shared/adapters/compute-ec2/src/lib.rs")),
        registered("ec2", floe_compute_ec2::EC2_OPERATIONS),
    );
}

/// The snapshotter function reaches AWS only through the store and EC2
/// adapters; its registry names what those adapters call for it.
#[test]
fn snapshotter_function_calls_aws_only_through_its_adapters() {
    for file in ["lib.rs", "main.rs", "adapters.rs"] {
        let path = format!("functions/snapshotter/src/{file}");
        let called = called_operations(&source(&path));
        assert!(called.is_empty(), "{path} calls the SDK itself: {called:?}");
    }
    let registry: BTreeSet<&str> = floe_snapshotter::IAM_ACTIONS.iter().copied().collect();
    for op in floe_store_dynamo::OPERATIONS {
        if *op != "dynamodb:TransactWriteItems" {
            assert!(registry.contains(op), "snapshotter registry lacks {op}");
        }
    }
    let ec2: Vec<&str> = registry
        .iter()
        .filter_map(|a| a.strip_prefix("ec2:"))
        .collect();
    assert_eq!(ec2, ["DescribeInstances"]);
    assert!(floe_compute_ec2::EC2_OPERATIONS.contains(&"DescribeInstances"));
}

#[test]
fn eventbridge_events_registry_matches_its_calls() {
    check(
        "shared/adapters/events-eventbridge/src/lib.rs",
        called_operations(&source("shared/adapters/events-eventbridge/src/lib.rs")),
        registered("events", floe_events_eventbridge::OPERATIONS),
    );
}

#[test]
fn eventbridge_scheduler_registry_matches_its_calls() {
    check(
        "shared/adapters/scheduler-aws/src/lib.rs",
        called_operations(&source("shared/adapters/scheduler-aws/src/lib.rs")),
        registered("scheduler", floe_scheduler_aws::OPERATIONS),
    );
}

#[test]
fn ssm_parameters_registry_matches_its_calls() {
    check(
        "shared/adapters/parameters-ssm/src/lib.rs",
        called_operations(&source("shared/adapters/parameters-ssm/src/lib.rs")),
        registered("ssm", floe_parameters_ssm::OPERATIONS),
    );
}

#[test]
fn iam_node_identity_registry_matches_its_calls() {
    check(
        "shared/adapters/identity-iam/src/lib.rs",
        called_operations(&source("shared/adapters/identity-iam/src/lib.rs")),
        registered("iam", floe_identity_iam::OPERATIONS),
    );
}

#[test]
fn route53_records_registry_matches_its_calls() {
    check(
        "shared/adapters/records-route53/src/lib.rs",
        called_operations(&source("shared/adapters/records-route53/src/lib.rs")),
        registered("route53", floe_records_route53::OPERATIONS),
    );
}

/// The worker reaches IAM only through the node identity adapter, whose
/// registry the template's grants are held to (template_iam.rs): a call
/// made in the function itself would escape that check. It does build the
/// adapter, or the node-identity step would do nothing on AWS.
#[test]
fn worker_function_calls_aws_only_through_its_adapters() {
    let mut files = Vec::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions/worker/src");
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.map(|e| e.path()).unwrap_or_default();
        if path.extension().is_some_and(|x| x == "rs") {
            files.push(path);
        }
    }
    assert!(!files.is_empty(), "no source in {}", dir.display());
    let mut builds_identity = false;
    for path in files {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let called = called_operations(&text);
        assert!(
            called.is_empty(),
            "{} calls the SDK itself: {called:?}",
            path.display()
        );
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        builds_identity |= code.contains("IamIdentity::new(") && code.contains(".with_identity(");
    }
    assert!(
        builds_identity,
        "functions/worker/src never builds IamIdentity and hands it to the steps (with_identity)"
    );
}

#[test]
fn the_scanner_finds_calls_split_over_lines() {
    let src = "let x = self\n    .client\n    .transact_write_items()\n    .send();\nlet y = client.clone();\n#[cfg(test)]\nmod tests { fn f() { client.delete_table(); } }";
    assert_eq!(
        called_operations(src),
        BTreeSet::from(["TransactWriteItems".to_string()])
    );
}
