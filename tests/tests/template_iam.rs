//! The deploy template's IAM grants, held to the adapters' registries: each
//! function's role grants every action its code calls and nothing more, on
//! the resources the stack owns. iam_registry.rs holds the registries to the
//! code; this file holds infra/template.yaml to the registries.
//!
//! The template is read as plain data. CloudFormation's short tags (`!Ref`,
//! `!GetAtt A.B`, `!Sub`, `!If`...) are turned into their long forms first,
//! so that every check sees one shape.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const TEMPLATE: &str = "infra/template.yaml";

/// The Lambda runtime ships the function's log lines with the function's
/// role; every function needs these on its own log group.
const LOG_ACTIONS: &[&str] = &["logs:CreateLogStream", "logs:PutLogEvents"];

/// Lambda's SQS event source mapping polls with the function's role. No
/// Floe code calls these; they are granted for the mapping, and only to a
/// function that has one.
const EVENT_SOURCE_MAPPING_ACTIONS: &[&str] = &[
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
];

/// What Lambda does with a function's role to attach the function to its
/// VPC subnets (the actions of AWS's AWSLambdaVPCAccessExecutionRole). No
/// Floe code calls them; they are granted only to a function in a VPC, on
/// Resource "*" as that managed policy does (the ENIs do not exist before
/// Lambda makes them, and DescribeNetworkInterfaces takes no resource).
const VPC_NETWORKING_ACTIONS: &[&str] = &[
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
];

/// What the SQS adapter calls (its registry).
const QUEUE_OPERATIONS: &[&str] = floe_queue_sqs::OPERATIONS;

/// KMS actions that read or produce plaintext (or hand that power on): a key
/// policy may allow them only to named roles.
const KMS_USE_ACTIONS: &[&str] = &[
    "kms:Encrypt",
    "kms:Decrypt",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:GenerateDataKeyPair",
    "kms:GenerateDataKeyPairWithoutPlaintext",
    "kms:CreateGrant",
];

/// The actions each function's code calls, with the registry each comes
/// from (for the failure message). A function missing here fails the test:
/// a new function has to say what it calls.
fn code_actions(function: &str) -> Option<BTreeMap<String, String>> {
    let mut actions = BTreeMap::new();
    let store = store_iam_actions();
    match function {
        "ApiFunction" => {
            // Records, sealing and the work queue: the api reaches clusters
            // from the records (floe_clusters::StoredClusters) and sends
            // schedule reconciliations to the worker.
            actions.extend(store);
            add(
                &mut actions,
                floe_secrets_kms::OPERATIONS,
                "floe_secrets_kms::OPERATIONS",
            );
            add(&mut actions, QUEUE_OPERATIONS, "floe_queue_sqs::OPERATIONS");
        }
        "SnapshotterFunction" => {
            actions.extend(store);
            add(
                &mut actions,
                floe_clusters::IAM_ACTIONS,
                "floe_clusters::IAM_ACTIONS",
            );
        }
        "WorkerFunction" => {
            add_scheduler(&mut actions);
            add(
                &mut actions,
                floe_parameters_ssm::OPERATIONS,
                "floe_parameters_ssm::OPERATIONS",
            );
            actions.extend(store);
            add(
                &mut actions,
                floe_compute_ec2::IAM_ACTIONS,
                "floe_compute_ec2::IAM_ACTIONS",
            );
            add(&mut actions, QUEUE_OPERATIONS, "floe_queue_sqs::OPERATIONS");
            add(
                &mut actions,
                floe_secrets_kms::OPERATIONS,
                "floe_secrets_kms::OPERATIONS: repository keys opened for the nodes, elastic passwords sealed for the api",
            );
            add(
                &mut actions,
                floe_identity_iam::IAM_ACTIONS,
                "floe_identity_iam::IAM_ACTIONS: each deployment's node role and instance profile",
            );
            add(
                &mut actions,
                floe_records_route53::IAM_ACTIONS,
                "floe_records_route53::IAM_ACTIONS: the deployments' endpoint names",
            );
            add(
                &mut actions,
                floe_events_eventbridge::OPERATIONS,
                "floe_events_eventbridge::OPERATIONS: failed drills and breached recovery targets",
            );
        }
        _ => return None,
    }
    Some(actions)
}

/// The snapshot schedules the api and the worker reconcile: the adapter's
/// calls, and handing each schedule the role it runs with.
fn add_scheduler(into: &mut BTreeMap<String, String>) {
    add(
        into,
        floe_scheduler_aws::OPERATIONS,
        "floe_scheduler_aws::OPERATIONS",
    );
    add(
        into,
        &[floe_scheduler_aws::PASS_ROLE_ACTION],
        "floe_scheduler_aws::PASS_ROLE_ACTION",
    );
}

fn add(into: &mut BTreeMap<String, String>, actions: &[impl AsRef<str>], from: &str) {
    for a in actions {
        into.insert(a.as_ref().to_string(), from.to_string());
    }
}

/// The store's registry in IAM terms. IAM has no TransactWriteItems action:
/// DynamoDB authorises each item operation inside a transaction. Which kinds
/// the store's transactions carry is read from its code, so that a new kind
/// (a condition check, say) asks for its action here.
fn store_iam_actions() -> BTreeMap<String, String> {
    const REGISTRY: &str = "floe_store_dynamo::OPERATIONS";
    let mut actions = BTreeMap::new();
    for op in floe_store_dynamo::OPERATIONS {
        if *op == "dynamodb:TransactWriteItems" {
            let from = format!("{REGISTRY}, inside {op}");
            add(&mut actions, &transaction_item_actions(), &from);
        } else {
            add(&mut actions, &[op], REGISTRY);
        }
    }
    actions
}

fn transaction_item_actions() -> Vec<String> {
    let src = source("shared/adapters/store-dynamo/src/lib.rs");
    let code = src.split("#[cfg(test)]").next().unwrap_or("");
    let compact: String = code.split_whitespace().collect();
    let kinds = [
        ("put", "dynamodb:PutItem"),
        ("update", "dynamodb:UpdateItem"),
        ("delete", "dynamodb:DeleteItem"),
        ("condition_check", "dynamodb:ConditionCheckItem"),
    ];
    let found: Vec<String> = kinds
        .iter()
        .filter(|(method, _)| compact.contains(&format!("TransactWriteItem::builder().{method}(")))
        .map(|(_, action)| (*action).to_string())
        .collect();
    assert!(
        !found.is_empty(),
        "shared/adapters/store-dynamo/src/lib.rs: no TransactWriteItem::builder().put/update/delete/condition_check(...) \
         found; has the call style changed?"
    );
    found
}

// ---------------------------------------------------------------------------
// Reading the template.
// ---------------------------------------------------------------------------

fn source(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn template() -> Value {
    let yaml: serde_yaml::Value = serde_yaml::from_str(&source(TEMPLATE))
        .unwrap_or_else(|e| panic!("{TEMPLATE} is not YAML: {e}"));
    long_form(yaml).unwrap_or_else(|e| panic!("{TEMPLATE}: {e}"))
}

/// YAML to JSON, with CloudFormation's short tags in their long forms.
fn long_form(value: serde_yaml::Value) -> Result<Value, String> {
    use serde_yaml::Value as Yaml;
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => n
            .as_i64()
            .map(Value::from)
            .or_else(|| n.as_u64().map(Value::from))
            .or_else(|| n.as_f64().map(Value::from))
            .unwrap_or(Value::Null),
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => {
            Value::Array(items.into_iter().map(long_form).collect::<Result<_, _>>()?)
        }
        Yaml::Mapping(mapping) => {
            let mut object = Map::new();
            for (key, value) in mapping {
                let key = match key {
                    Yaml::String(s) => s,
                    Yaml::Bool(b) => b.to_string(),
                    Yaml::Number(n) => n.to_string(),
                    other => return Err(format!("unsupported mapping key {other:?}")),
                };
                object.insert(key, long_form(value)?);
            }
            Value::Object(object)
        }
        Yaml::Tagged(tagged) => {
            let name = tagged.tag.to_string();
            let name = name.trim_start_matches('!');
            let inner = long_form(tagged.value)?;
            let (key, inner) = match (name, inner) {
                ("Ref" | "Condition", inner) => (name.to_string(), inner),
                // `!GetAtt Resource.Attribute` is a string; the long form a pair.
                ("GetAtt", Value::String(path)) => {
                    let (resource, attribute) = path
                        .split_once('.')
                        .ok_or_else(|| format!("!GetAtt {path} names no attribute"))?;
                    let pair = vec![Value::from(resource), Value::from(attribute)];
                    ("Fn::GetAtt".to_string(), Value::Array(pair))
                }
                (function, inner) => (format!("Fn::{function}"), inner),
            };
            Value::Object(Map::from_iter([(key, inner)]))
        }
    })
}

fn resources(t: &Value) -> &Map<String, Value> {
    t.get("Resources")
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("{TEMPLATE} has no Resources"))
}

fn resource_type<'a>(t: &'a Value, id: &str) -> Option<&'a str> {
    resources(t)
        .get(id)
        .and_then(|r| r.get("Type"))
        .and_then(Value::as_str)
}

fn of_type<'a>(t: &'a Value, types: &[&str]) -> Vec<(&'a str, &'a Value)> {
    resources(t)
        .iter()
        .filter(|(_, r)| {
            r.get("Type")
                .and_then(Value::as_str)
                .is_some_and(|ty| types.contains(&ty))
        })
        .map(|(id, r)| (id.as_str(), r))
        .collect()
}

/// The logical id a `Ref` or `Fn::GetAtt` points at.
fn target(value: &Value) -> Option<&str> {
    value.get("Ref").and_then(Value::as_str).or_else(|| {
        value
            .get("Fn::GetAtt")
            .and_then(Value::as_array)
            .and_then(|pair| pair.first())
            .and_then(Value::as_str)
    })
}

/// Every logical id (resource or parameter) a value refers to: `Ref`,
/// `Fn::GetAtt` and the `${Name}` / `${Name.Attr}` of `Fn::Sub`; pseudo
/// parameters and a Sub's own variables left out.
fn referenced(value: &Value) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    collect_references(value, &mut ids);
    ids
}

fn collect_references(value: &Value, ids: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            if let Some(id) = target(value)
                && !id.starts_with("AWS::")
            {
                ids.insert(id.to_string());
            }
            if let Some(sub) = object.get("Fn::Sub") {
                let (text, variables) = match sub {
                    Value::String(s) => (Some(s.as_str()), None),
                    Value::Array(parts) => (
                        parts.first().and_then(Value::as_str),
                        parts.get(1).and_then(Value::as_object),
                    ),
                    _ => (None, None),
                };
                for name in text.map(sub_names).unwrap_or_default() {
                    let id = name.split('.').next().unwrap_or("");
                    let local = variables.is_some_and(|v| v.contains_key(id));
                    if !id.starts_with("AWS::") && !local {
                        ids.insert(id.to_string());
                    }
                }
            }
            for v in object.values() {
                collect_references(v, ids);
            }
        }
        Value::Array(items) => {
            for v in items {
                collect_references(v, ids);
            }
        }
        _ => {}
    }
}

/// The `${...}` names in a Sub string (`${!Literal}` is no reference).
fn sub_names(text: &str) -> Vec<String> {
    text.split("${")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
        .filter(|name| !name.starts_with('!'))
        .map(str::to_string)
        .collect()
}

/// A statement's `Action` (or `Resource`) entries: one value or a list.
fn entries(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v) => vec![v],
        None => Vec::new(),
    }
}

fn action_names(statement: &Map<String, Value>) -> Vec<String> {
    entries(statement.get("Action"))
        .into_iter()
        .map(|a| match a {
            Value::String(s) => s.clone(),
            // An intrinsic as an action cannot be checked; name it so a
            // check fails on it.
            other => format!("<computed action {other}>"),
        })
        .collect()
}

fn statements(document: &Value) -> Vec<&Map<String, Value>> {
    entries(document.get("Statement"))
        .into_iter()
        .filter_map(Value::as_object)
        .collect()
}

fn is_allow(statement: &Map<String, Value>) -> bool {
    statement.get("Effect").and_then(Value::as_str) == Some("Allow")
}

/// One Allow statement of a role's policies, with where it was found.
struct Grant<'a> {
    origin: String,
    statement: &'a Map<String, Value>,
}

impl Grant<'_> {
    fn actions(&self) -> Vec<String> {
        action_names(self.statement)
    }

    fn resources(&self) -> Vec<&Value> {
        entries(self.statement.get("Resource"))
    }
}

/// Every statement the template grants the role: its inline policies, and
/// the RolePolicy, Policy and ManagedPolicy resources attached to it.
/// Grants the test cannot see (managed policy ARNs) or cannot reason about
/// (NotAction, NotResource) fail here.
fn grants<'a>(t: &'a Value, role: &str) -> Vec<Grant<'a>> {
    let Some(properties) = resources(t).get(role).and_then(|r| r.get("Properties")) else {
        panic!("{role}: no such resource, or it has no Properties");
    };
    assert!(
        properties.get("ManagedPolicyArns").is_none(),
        "{role}: ManagedPolicyArns grant actions this test cannot check; write the statements out"
    );
    let mut documents: Vec<(String, &Value)> = Vec::new();
    for policy in entries(properties.get("Policies")) {
        let name = policy
            .get("PolicyName")
            .and_then(Value::as_str)
            .unwrap_or("?");
        if let Some(document) = policy.get("PolicyDocument") {
            documents.push((format!("{role}/{name}"), document));
        }
    }
    for (id, resource) in of_type(
        t,
        &[
            "AWS::IAM::RolePolicy",
            "AWS::IAM::Policy",
            "AWS::IAM::ManagedPolicy",
        ],
    ) {
        let Some(p) = resource.get("Properties") else {
            continue;
        };
        let attached = p.get("RoleName").and_then(target) == Some(role)
            || entries(p.get("Roles"))
                .into_iter()
                .any(|r| target(r) == Some(role));
        if attached && let Some(document) = p.get("PolicyDocument") {
            documents.push((id.to_string(), document));
        }
    }
    let mut out = Vec::new();
    for (origin, document) in documents {
        for statement in statements(document) {
            let sid = statement.get("Sid").and_then(Value::as_str).unwrap_or("");
            assert!(
                !statement.contains_key("NotAction") && !statement.contains_key("NotResource"),
                "{origin}#{sid}: NotAction/NotResource grant more than they name"
            );
            if is_allow(statement) {
                out.push(Grant {
                    origin: format!("{origin}#{sid}"),
                    statement,
                });
            }
        }
    }
    out
}

/// A Lambda function of the template and the role it runs as.
struct Function {
    id: String,
    role: String,
    log_group: Option<String>,
    /// It has a VpcConfig (its own, or the template's Globals).
    in_vpc: bool,
}

fn functions(t: &Value) -> Vec<Function> {
    let global_vpc = t.pointer("/Globals/Function/VpcConfig").is_some();
    let found: Vec<Function> = of_type(t, &["AWS::Serverless::Function", "AWS::Lambda::Function"])
        .into_iter()
        .map(|(id, f)| {
            let properties = f.get("Properties");
            // SAM's Policies would create or extend a role outside this check.
            assert!(
                properties.and_then(|p| p.get("Policies")).is_none(),
                "{id}: SAM Policies grant outside the role; put the statements on its role"
            );
            let role = properties
                .and_then(|p| p.get("Role"))
                .and_then(target)
                .unwrap_or_else(|| panic!("{id}: Role must name a role of this template"));
            let log_group = properties
                .and_then(|p| p.pointer("/LoggingConfig/LogGroup"))
                .and_then(target)
                .map(str::to_string);
            Function {
                id: id.to_string(),
                role: role.to_string(),
                log_group,
                in_vpc: global_vpc || properties.and_then(|p| p.get("VpcConfig")).is_some(),
            }
        })
        .collect();
    assert!(!found.is_empty(), "{TEMPLATE} declares no function");
    found
}

/// The services a role's trust policy lets assume it.
fn trusted_services(t: &Value, role: &str) -> BTreeSet<String> {
    let document = resources(t)
        .get(role)
        .and_then(|r| r.pointer("/Properties/AssumeRolePolicyDocument"))
        .cloned()
        .unwrap_or(Value::Null);
    statements(&document)
        .into_iter()
        .flat_map(|s| entries(s.get("Principal").and_then(|p| p.get("Service"))))
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// Functions an SQS event source mapping feeds (explicit mappings, or SAM
/// `SQS` events), each with its `FunctionResponseTypes`.
fn queue_mappings(t: &Value) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (id, mapping) in of_type(t, &["AWS::Lambda::EventSourceMapping"]) {
        let Some(p) = mapping.get("Properties") else {
            continue;
        };
        let from_queue = p
            .get("EventSourceArn")
            .and_then(target)
            .is_some_and(|source| resource_type(t, source) == Some("AWS::SQS::Queue"));
        if !from_queue {
            continue;
        }
        let function = p
            .get("FunctionName")
            .and_then(target)
            .unwrap_or_else(|| panic!("{id}: FunctionName must name a function of this template"));
        out.push((function.to_string(), response_types(p)));
    }
    for (id, function) in of_type(t, &["AWS::Serverless::Function"]) {
        let events = function
            .pointer("/Properties/Events")
            .and_then(Value::as_object);
        for event in events.into_iter().flat_map(|e| e.values()) {
            if event.get("Type").and_then(Value::as_str) == Some("SQS") {
                let p = event.get("Properties").cloned().unwrap_or(Value::Null);
                out.push((id.to_string(), response_types(&p)));
            }
        }
    }
    out
}

fn response_types(properties: &Value) -> Vec<String> {
    entries(properties.get("FunctionResponseTypes"))
        .into_iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn report(problems: &[String]) -> String {
    format!(
        "{TEMPLATE} does not match the code:\n  {}",
        problems.join("\n  ")
    )
}

// ---------------------------------------------------------------------------
// The checks.
// ---------------------------------------------------------------------------

#[test]
fn every_function_role_grants_exactly_what_its_code_calls() {
    let t = template();
    let mapped: BTreeSet<String> = queue_mappings(&t).into_iter().map(|(f, _)| f).collect();
    let mut problems = Vec::new();
    for f in functions(&t) {
        let Some(mut expected) = code_actions(&f.id) else {
            problems.push(format!(
                "{}: unknown to tests/tests/template_iam.rs; add the actions its code calls to code_actions",
                f.id
            ));
            continue;
        };
        add(&mut expected, LOG_ACTIONS, "its log lines");
        if f.in_vpc {
            add(
                &mut expected,
                VPC_NETWORKING_ACTIONS,
                "granted for Lambda's network interfaces in the VPC",
            );
        }
        if mapped.contains(&f.id) {
            add(
                &mut expected,
                EVENT_SOURCE_MAPPING_ACTIONS,
                "granted for the SQS event source mapping",
            );
        }
        let mut granted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for grant in grants(&t, &f.role) {
            for action in grant.actions() {
                granted
                    .entry(action)
                    .or_default()
                    .push(grant.origin.clone());
            }
        }
        for (action, from) in &expected {
            if !granted.contains_key(action) {
                problems.push(format!(
                    "{} (role {}): calls {action} ({from}), which the role does not grant",
                    f.id, f.role
                ));
            }
        }
        for (action, origins) in &granted {
            if !expected.contains_key(action) {
                problems.push(format!(
                    "{} (role {}): grants {action} in {}, which no code of it calls",
                    f.id,
                    f.role,
                    origins.join(", ")
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

/// Every function reaches Elasticsearch nodes at their private addresses
/// (plans, snapshots, the API's manual snapshots), so each runs in the
/// VPC, and the nodes let its security group in on the HTTP port.
#[test]
fn every_function_runs_in_the_vpc_and_the_nodes_let_it_in() {
    let t = template();
    let outside: Vec<String> = functions(&t)
        .into_iter()
        .filter(|f| !f.in_vpc)
        .map(|f| f.id)
        .collect();
    assert!(outside.is_empty(), "outside the VPC: {outside:?}");
    let ingress: Vec<&Value> = of_type(&t, &["AWS::EC2::SecurityGroupIngress"])
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| {
            r.pointer("/Properties/SourceSecurityGroupId")
                .and_then(target)
                == Some("FunctionSecurityGroup")
        })
        .collect();
    assert_eq!(
        ingress.len(),
        1,
        "one rule lets the functions reach the nodes"
    );
    let port = ingress[0]
        .pointer("/Properties/FromPort")
        .and_then(Value::as_u64);
    assert_eq!(
        port,
        Some(9200),
        "the nodes' HTTP port (FLOE_ES_PORT's default)"
    );
}

#[test]
fn every_role_is_a_function_role_or_the_scheduler_role() {
    let t = template();
    let function_roles: BTreeSet<String> = functions(&t).into_iter().map(|f| f.role).collect();
    let problems: Vec<String> = of_type(&t, &["AWS::IAM::Role"])
        .into_iter()
        .filter(|(id, _)| {
            !function_roles.contains(*id)
                && trusted_services(&t, id) != BTreeSet::from(["scheduler.amazonaws.com".to_string()])
        })
        .map(|(id, _)| {
            format!("{id}: neither a function's role nor the scheduler's, so nothing here checks its grants")
        })
        .collect();
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn no_grant_uses_a_wildcard_action() {
    let t = template();
    let mut problems = Vec::new();
    for (role, _) in of_type(&t, &["AWS::IAM::Role"]) {
        for grant in grants(&t, role) {
            for action in grant.actions() {
                // "*", "ec2:*" and "ec2:Describe*" alike grant actions that
                // no registry lists, including ones AWS adds later.
                if action.contains('*') {
                    problems.push(format!("{}: wildcard action {action}", grant.origin));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn only_describe_actions_apply_to_every_resource() {
    let t = template();
    let mut problems = Vec::new();
    for (role, _) in of_type(&t, &["AWS::IAM::Role"]) {
        for grant in grants(&t, role) {
            let everything = grant.resources().iter().any(|r| r.as_str() == Some("*"));
            if !everything {
                continue;
            }
            // EC2's Describe actions take no resource-level permissions:
            // "*" is the only Resource IAM accepts for them.
            for action in grant.actions() {
                // ListSchedules has no resource type either.
                if !action.starts_with("ec2:Describe")
                    && action != "scheduler:ListSchedules"
                    && !VPC_NETWORKING_ACTIONS.contains(&action.as_str())
                {
                    problems.push(format!(
                        "{}: {action} on Resource \"*\"; name the resource",
                        grant.origin
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn pass_role_names_one_role_and_the_one_service_it_is_for() {
    let t = template();
    let mut found = 0;
    let mut problems = Vec::new();
    for (role, _) in of_type(&t, &["AWS::IAM::Role"]) {
        for grant in grants(&t, role) {
            if !grant.actions().iter().any(|a| a == "iam:PassRole") {
                continue;
            }
            found += 1;
            if grant.actions() != ["iam:PassRole"] {
                problems.push(format!(
                    "{}: iam:PassRole shares its statement (and so its resource and condition) with {:?}",
                    grant.origin,
                    grant.actions()
                ));
            }
            let resources = grant.resources();
            // A named role (a parameter or resource), or the node roles'
            // path, which only the worker creates, each one bounded.
            let named_or_node_path = |r: &&Value| {
                sub_text(r).is_some_and(|text| text == node_role_pattern())
                    || (!r.as_str().is_some_and(|s| s.contains('*')) && !referenced(r).is_empty())
            };
            if resources.is_empty() || !resources.iter().all(named_or_node_path) {
                problems.push(format!(
                    "{}: iam:PassRole must name a role (a parameter or resource) or {}, not {resources:?}",
                    grant.origin,
                    node_role_pattern()
                ));
            }
            let service = grant
                .statement
                .get("Condition")
                .and_then(|c| c.get("StringEquals"))
                .and_then(|c| c.get("iam:PassedToService"));
            let services: Vec<&str> = entries(service)
                .into_iter()
                .filter_map(Value::as_str)
                .collect();
            // The node role goes to EC2 only, the scheduler's role to
            // EventBridge Scheduler only.
            let passed: BTreeSet<String> = resources.iter().flat_map(|r| referenced(r)).collect();
            let wanted = if passed.contains("SchedulerRole") {
                "scheduler.amazonaws.com"
            } else {
                "ec2.amazonaws.com"
            };
            // AddRoleToInstanceProfile passes a node role with the EC2
            // instances it will serve as the associated resource instead
            // (IAM's API reference gives the one ARN form that works).
            let associated = grant
                .statement
                .get("Condition")
                .and_then(|c| c.get("ArnLike"))
                .and_then(|c| c.get("iam:AssociatedResourceArn"))
                .and_then(sub_text);
            let for_ec2_instances = wanted == "ec2.amazonaws.com"
                && services.is_empty()
                && associated == Some("arn:${AWS::Partition}:ec2:*:${AWS::AccountId}:instance/*");
            if !for_ec2_instances
                && (services != [wanted] || (passed.contains("SchedulerRole") && passed.len() > 1))
            {
                problems.push(format!(
                    "{}: iam:PassRole of {passed:?} needs Condition StringEquals iam:PassedToService: {wanted} (one role per statement), or for a node role ArnLike iam:AssociatedResourceArn on the account's EC2 instances; has {services:?}",
                    grant.origin
                ));
            }
        }
    }
    assert!(
        found > 0,
        "no statement grants iam:PassRole, which launching with an instance profile needs"
    );
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn data_plane_statements_name_the_stack_resources() {
    let t = template();
    let mut problems = Vec::new();
    for f in functions(&t) {
        for grant in grants(&t, &f.role) {
            let services: BTreeSet<String> = grant
                .actions()
                .iter()
                .map(|a| a.split(':').next().unwrap_or("").to_string())
                .collect();
            let Some(service) = services.first() else {
                continue;
            };
            if services.len() > 1 {
                problems.push(format!(
                    "{}: one service per statement, so that each names its own resources ({services:?})",
                    grant.origin
                ));
                continue;
            }
            let wanted: &[&str] = match service.as_str() {
                "dynamodb" => &["AWS::DynamoDB::Table"],
                "sqs" => &["AWS::SQS::Queue"],
                "kms" => &["AWS::KMS::Key"],
                "logs" => &["AWS::Logs::LogGroup"],
                // EC2 and IAM have their own checks: tag conditions and ARN
                // patterns, not stack resources.
                _ => continue,
            };
            let resources = grant.resources();
            if resources.is_empty() {
                problems.push(format!("{}: no Resource", grant.origin));
            }
            for resource in resources {
                let ids = referenced(resource);
                let ok = !ids.is_empty()
                    && ids
                        .iter()
                        .all(|id| resource_type(&t, id).is_some_and(|ty| wanted.contains(&ty)));
                if !ok {
                    problems.push(format!(
                        "{}: {service} actions must name this stack's {}, not {resource}",
                        grant.origin,
                        wanted.join(" or ")
                    ));
                }
                if service == "logs" && f.log_group.as_ref().is_none_or(|own| !ids.contains(own)) {
                    problems.push(format!(
                        "{}: {} may write only to its own log group (LoggingConfig.LogGroup, {:?}), not {resource}",
                        grant.origin, f.id, f.log_group
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn key_policies_let_only_the_granted_roles_use_the_key() {
    let t = template();
    let mut problems = Vec::new();
    // Per role: the use actions the key policies allow it.
    let mut allowed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (key, resource) in of_type(&t, &["AWS::KMS::Key"]) {
        let policy = resource
            .pointer("/Properties/KeyPolicy")
            .cloned()
            .unwrap_or(Value::Null);
        for statement in statements(&policy) {
            let sid = statement.get("Sid").and_then(Value::as_str).unwrap_or("");
            let using: Vec<String> = action_names(statement)
                .into_iter()
                .filter(|a| a.contains('*') || KMS_USE_ACTIONS.contains(&a.as_str()))
                .collect();
            if !is_allow(statement) || using.is_empty() {
                continue;
            }
            // The role named as principal, or in an aws:PrincipalArn condition.
            let mut roles = BTreeSet::new();
            for principal in entries(statement.get("Principal").and_then(|p| p.get("AWS"))) {
                roles.extend(referenced(principal));
            }
            let condition = statement
                .get("Condition")
                .and_then(|c| c.get("ArnEquals"))
                .and_then(|c| c.get("aws:PrincipalArn"));
            for arn in entries(condition) {
                roles.extend(referenced(arn));
            }
            roles.retain(|id| resource_type(&t, id) == Some("AWS::IAM::Role"));
            if roles.is_empty() {
                problems.push(format!(
                    "{key}#{sid}: allows {using:?} without naming the roles that may use the key"
                ));
            }
            for role in roles {
                allowed
                    .entry(role)
                    .or_default()
                    .extend(using.iter().cloned());
            }
        }
    }
    for f in functions(&t) {
        let granted: BTreeSet<String> = grants(&t, &f.role)
            .iter()
            .flat_map(Grant::actions)
            .filter(|a| a.starts_with("kms:"))
            .collect();
        let by_key = allowed.remove(&f.role).unwrap_or_default();
        if granted != by_key {
            problems.push(format!(
                "{} (role {}): its policies grant {granted:?} on the key, the key policy allows {by_key:?}",
                f.id, f.role
            ));
        }
    }
    for (role, actions) in allowed {
        problems.push(format!(
            "the key policy allows {role}, which runs no function, to use the key ({actions:?})"
        ));
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn the_worker_queue_mapping_reports_batch_item_failures() {
    let t = template();
    let mappings = queue_mappings(&t);
    assert!(
        mappings.iter().any(|(f, _)| f == "WorkerFunction"),
        "no SQS event source mapping feeds WorkerFunction"
    );
    for (function, types) in mappings {
        // Without it, one failed job sends the whole batch back to the queue.
        assert!(
            types.iter().any(|ty| ty == "ReportBatchItemFailures"),
            "{function}: the SQS mapping needs FunctionResponseTypes [ReportBatchItemFailures], has {types:?}"
        );
    }
}

#[test]
fn the_scheduler_role_invokes_exactly_the_scheduled_functions_and_dead_letters() {
    // ...and sends to exactly the queues schedules deliver to: the
    // dead-letter queue, and the work queue drill schedules target.
    let t = template();
    let scheduled: BTreeSet<String> = of_type(&t, &["AWS::Scheduler::Schedule"])
        .into_iter()
        .filter_map(|(_, s)| s.pointer("/Properties/Target/Arn"))
        .flat_map(referenced)
        .collect();
    assert!(!scheduled.is_empty(), "no schedule targets a function");
    // The functions create snapshot schedules at run time: their target and
    // dead-letter queue come from the functions' settings.
    let setting = |name: &str| -> BTreeSet<String> {
        of_type(&t, &["AWS::Serverless::Function"])
            .into_iter()
            .filter_map(|(_, f)| f.pointer(&format!("/Properties/Environment/Variables/{name}")))
            .flat_map(referenced)
            .collect()
    };
    let runtime_targets = setting("FLOE_SNAPSHOTTER_ARN");
    let dead_letters = setting("FLOE_SCHEDULE_DLQ_ARN");
    let drill_targets = setting("FLOE_WORK_QUEUE_ARN");
    assert!(
        !drill_targets.is_empty(),
        "no function names the queue drill schedules target"
    );
    let queues: BTreeSet<String> = dead_letters.union(&drill_targets).cloned().collect();
    let mut sent_to = BTreeSet::new();
    let scheduled: BTreeSet<String> = scheduled.union(&runtime_targets).cloned().collect();
    let mut problems = Vec::new();
    let roles: Vec<&str> = of_type(&t, &["AWS::IAM::Role"])
        .into_iter()
        .map(|(id, _)| id)
        .filter(|id| trusted_services(&t, id).contains("scheduler.amazonaws.com"))
        .collect();
    assert!(
        !roles.is_empty(),
        "no role for EventBridge Scheduler to assume"
    );
    for role in roles {
        let mut invoked = BTreeSet::new();
        for grant in grants(&t, role) {
            if grant.actions() == ["sqs:SendMessage"] {
                let to: BTreeSet<String> = grant
                    .resources()
                    .iter()
                    .flat_map(|r| referenced(r))
                    .collect();
                if to.is_empty() || !to.is_subset(&queues) {
                    problems.push(format!(
                        "{}: the scheduler sends only to the schedules' dead-letter and drill queues {queues:?}, not {to:?}",
                        grant.origin
                    ));
                }
                sent_to.extend(to);
                continue;
            }
            if grant.actions() != ["lambda:InvokeFunction"] {
                problems.push(format!(
                    "{}: the scheduler only invokes functions, not {:?}",
                    grant.origin,
                    grant.actions()
                ));
            }
            for resource in grant.resources() {
                invoked.extend(referenced(resource));
                if resource.is_string() {
                    problems.push(format!(
                        "{}: invokes {resource}, not a function of this stack",
                        grant.origin
                    ));
                }
            }
        }
        if invoked != scheduled {
            problems.push(format!(
                "{role}: may invoke {invoked:?}, the schedules target {scheduled:?}"
            ));
        }
    }
    if sent_to != queues {
        problems.push(format!(
            "the scheduler may send to {sent_to:?}, the schedules deliver to {queues:?}"
        ));
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn short_tags_read_as_their_long_forms() {
    let yaml = "a: !Ref Table\nb: !GetAtt Queue.Arn\nc: !Sub 'arn:${AWS::Partition}:x:${Key.Arn}/${!Literal}'\nd: !If [C, !Ref X, !Ref AWS::NoValue]\n";
    let value = serde_yaml::from_str(yaml)
        .map_err(|e| e.to_string())
        .and_then(long_form);
    let Ok(value) = value else {
        panic!("the sample does not parse: {value:?}");
    };
    assert_eq!(value["a"], serde_json::json!({"Ref": "Table"}));
    assert_eq!(
        value["b"],
        serde_json::json!({"Fn::GetAtt": ["Queue", "Arn"]})
    );
    assert_eq!(referenced(&value["c"]), BTreeSet::from(["Key".to_string()]));
    // The condition name is a plain string, not a reference; NoValue is a
    // pseudo parameter.
    assert_eq!(referenced(&value["d"]), BTreeSet::from(["X".to_string()]));
}

/// The IAM path the worker creates node roles under (its
/// `FLOE_NODE_IAM_PATH` in the template must say the same).
const NODE_PATH: &str = "/floe-nodes/";

fn node_role_pattern() -> String {
    format!("arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:role{NODE_PATH}*")
}

fn node_profile_pattern() -> String {
    format!("arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:instance-profile{NODE_PATH}*")
}

/// The text of a `Fn::Sub` with no variables of its own.
fn sub_text(value: &Value) -> Option<&str> {
    value.get("Fn::Sub").and_then(Value::as_str)
}

/// The IAM actions that change a node role's permissions: IAM checks
/// `iam:PermissionsBoundary` on each, so the worker may use them only on a
/// role bounded by the stack's boundary.
const BOUNDED_ROLE_ACTIONS: &[&str] = &[
    "iam:CreateRole",
    "iam:PutRolePolicy",
    "iam:DeleteRolePolicy",
    "iam:DetachRolePolicy",
];

/// Each deployment's nodes run with a role of their own (issue 12, defect
/// 7): the worker's IAM grants reach only the node path, every write to a
/// role's permissions is conditioned on the stack's boundary, the boundary
/// reads parameters under the prefix only, and no shared node role or
/// instance profile is left that could read every deployment's.
#[test]
fn node_identities_are_bounded_and_confined_to_the_node_path() {
    let t = template();
    let mut problems = Vec::new();
    let worker = resources(&t)
        .get("WorkerFunction")
        .unwrap_or_else(|| panic!("{TEMPLATE}: no WorkerFunction"));
    let env = worker
        .pointer("/Properties/Environment/Variables")
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("WorkerFunction has no environment"));
    if env.contains_key("FLOE_EC2_INSTANCE_PROFILE") {
        problems.push(
            "WorkerFunction: FLOE_EC2_INSTANCE_PROFILE names one profile for every node"
                .to_string(),
        );
    }
    if env.get("FLOE_NODE_IAM_PATH").and_then(Value::as_str) != Some(NODE_PATH) {
        problems.push(format!(
            "WorkerFunction: FLOE_NODE_IAM_PATH must be {NODE_PATH}, the path its grants name"
        ));
    }
    let boundary = env
        .get("FLOE_NODE_PERMISSIONS_BOUNDARY")
        .and_then(target)
        .filter(|id| resource_type(&t, id) == Some("AWS::IAM::ManagedPolicy"));
    let Some(boundary) = boundary else {
        panic!(
            "WorkerFunction: FLOE_NODE_PERMISSIONS_BOUNDARY must !Ref a managed policy of the stack"
        );
    };
    for (id, _) in of_type(&t, &["AWS::IAM::InstanceProfile"]) {
        problems.push(format!(
            "{id}: a shared instance profile; each deployment makes its own"
        ));
    }
    for (name, p) in t["Parameters"].as_object().into_iter().flatten() {
        let pattern = p
            .get("AllowedPattern")
            .and_then(Value::as_str)
            .unwrap_or("");
        if pattern.contains("instance-profile") || pattern.contains(":role/") {
            problems.push(format!(
                "parameter {name}: the nodes' role comes from outside the stack"
            ));
        }
    }

    // The boundary: attached to nothing, parameters under the prefix only.
    let policy = &resources(&t)[boundary]["Properties"];
    if policy.get("Roles").is_some()
        || policy.get("Users").is_some()
        || policy.get("Groups").is_some()
    {
        problems.push(format!("{boundary}: a boundary, attached to no one"));
    }
    let prefix =
        "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${ParameterPrefix}/*";
    let mut reads_parameters = false;
    for statement in statements(&policy["PolicyDocument"]) {
        let sid = statement.get("Sid").and_then(Value::as_str).unwrap_or("");
        let actions = action_names(statement);
        if actions.iter().any(|a| a.contains('*')) {
            problems.push(format!("{boundary}#{sid}: wildcard action in {actions:?}"));
        }
        if actions.iter().any(|a| a.starts_with("ssm:")) {
            reads_parameters = true;
            let resources = entries(statement.get("Resource"));
            if resources.iter().any(|r| sub_text(r) != Some(prefix)) {
                problems.push(format!(
                    "{boundary}#{sid}: SSM only under the prefix ({prefix}), not {resources:?}"
                ));
            }
            if actions
                .iter()
                .any(|a| a != "ssm:GetParameter" && a != "ssm:GetParameters")
            {
                problems.push(format!(
                    "{boundary}#{sid}: nodes only read parameters, not {actions:?}"
                ));
            }
        }
    }
    if !reads_parameters {
        problems.push(format!("{boundary}: lets no node read its parameters"));
    }

    // The worker's IAM grants.
    let mut bounded: BTreeSet<String> = BTreeSet::new();
    for grant in grants(&t, "WorkerRole") {
        let iam: Vec<String> = grant
            .actions()
            .into_iter()
            .filter(|a| a.starts_with("iam:"))
            .collect();
        if iam.is_empty() {
            continue;
        }
        let resources = grant.resources();
        // The schedules' role, handed to EventBridge Scheduler.
        if resources
            .iter()
            .all(|r| referenced(r).contains("SchedulerRole"))
        {
            continue;
        }
        for r in &resources {
            let text = sub_text(r).unwrap_or("");
            if text != node_role_pattern() && text != node_profile_pattern() {
                problems.push(format!(
                    "{}: {iam:?} on {r}, outside {} and {}",
                    grant.origin,
                    node_role_pattern(),
                    node_profile_pattern()
                ));
            }
        }
        let condition = grant
            .statement
            .get("Condition")
            .and_then(|c| c.get("StringEquals"))
            .and_then(|c| c.get("iam:PermissionsBoundary"));
        let is_bounded = condition.and_then(target) == Some(boundary);
        for action in &iam {
            if BOUNDED_ROLE_ACTIONS.contains(&action.as_str()) {
                if is_bounded {
                    bounded.insert(action.clone());
                } else {
                    problems.push(format!(
                        "{}: {action} needs Condition StringEquals iam:PermissionsBoundary: !Ref {boundary}",
                        grant.origin
                    ));
                }
            }
        }
        if iam.iter().any(|a| a == "iam:AttachRolePolicy") {
            problems.push(format!(
                "{}: iam:AttachRolePolicy could hand a node role any managed policy",
                grant.origin
            ));
        }
    }
    for action in BOUNDED_ROLE_ACTIONS {
        if !bounded.contains(*action) {
            problems.push(format!("WorkerRole: no bounded grant of {action}"));
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

/// The manual's page on deploying to AWS: its `sam deploy` command and
/// its table of the template's parameters.
const DEPLOY_GUIDE: &str = "docs/deploying.md";

/// The `sam deploy` command of a deploy guide: the lines from `sam deploy`
/// to the end of its code block.
fn deploy_command(guide: &str) -> String {
    let text = source(guide);
    let start = text
        .find("sam deploy --template-file")
        .unwrap_or_else(|| panic!("{guide} has no sam deploy command"));
    let end = text[start..].find("```").map_or(text.len(), |e| start + e);
    text[start..end].to_string()
}

/// An operator copies the deploy command and fills the table's values:
/// every parameter the template requires (no Default) is in both deploy
/// guides' commands (the manual's deploy page and infra/README.md), every
/// parameter is in the manual's parameters table, and neither names a
/// parameter the template does not have.
#[test]
fn the_deploy_guides_name_exactly_the_template_parameters() {
    let t = template();
    let parameters = t["Parameters"].as_object().expect("Parameters");
    let required: Vec<&String> = parameters
        .iter()
        .filter(|(_, p)| p.get("Default").is_none())
        .map(|(name, _)| name)
        .collect();
    let mut problems = Vec::new();
    for guide in [DEPLOY_GUIDE, "infra/README.md"] {
        let command = deploy_command(guide);
        for name in &required {
            if !command.contains(&format!("{name}=")) {
                problems.push(format!("{guide}: sam deploy lacks the required {name}"));
            }
        }
        for word in command.split_whitespace() {
            if let Some((name, _)) = word.split_once('=')
                && name.chars().all(|c| c.is_ascii_alphanumeric())
                && !parameters.contains_key(name)
            {
                problems.push(format!(
                    "{guide}: sam deploy sets {name}, no parameter of the template"
                ));
            }
        }
    }
    let guide = source(DEPLOY_GUIDE);
    for name in parameters.keys() {
        if !guide.contains(&format!("`{name}`")) {
            problems.push(format!(
                "{DEPLOY_GUIDE}: the parameters table lacks `{name}`"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

/// The api waits for a manual snapshot (`wait_for_completion`) inside its
/// own function, so the wait must end well before the function's timeout:
/// otherwise the client gets a gateway error instead of the documented 202,
/// and its retry starts a second snapshot.
#[test]
fn the_apis_snapshot_wait_fits_inside_its_function() {
    let t = template();
    let timeout = t
        .pointer("/Resources/ApiFunction/Properties/Timeout")
        .or_else(|| t.pointer("/Globals/Function/Timeout"))
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{TEMPLATE}: ApiFunction has no Timeout"));
    let wait = floe_app::snapshots::API_WAIT.as_secs();
    assert!(
        wait + 5 <= timeout,
        "the api waits up to {wait} s for a snapshot inside a {timeout} s function: leave 5 s for the rest of the request"
    );
}
