//! Rules the API enforces that JSON Schema can state, written into the
//! document after the derives built it: what the derives cannot say
//! (either/or bodies, fields that come together, a node group's roles not
//! empty, the shape of a cursor). A client, a generator or schemathesis
//! then knows them before a request is refused.
//!
//! The keywords utoipa has no field for (`dependentRequired`, `not`) go into the object's map of
//! extra keywords, one keyword per object: that map is a `HashMap`, and a
//! single key keeps the document's bytes the same on every run.

use serde_json::json;
use std::collections::BTreeMap;
use utoipa::openapi::Ref;
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayItems, Object, OneOf, Schema, SchemaType, Type,
};
use utoipa::openapi::{OpenApi, RefOr};

/// A `next_cursor` is a store key (1 to 512 bytes) in unpadded base64url.
pub const CURSOR_PATTERN: &str = "^[A-Za-z0-9_-]{2,683}$";

/// An Elasticsearch time value with its unit, as the API takes lifetimes.
const TIME_VALUE_PATTERN: &str = "^[0-9]+(d|h|m|s|ms|micros|nanos)$";

/// An index name or pattern as a snapshot's `indices` take it: no white
/// space, separator or upper case letter (1 to 255 of them).
const INDEX_PATTERN: &str = r#"^[^A-Z\s\\/"<>|,#?]+$"#;

/// A node group's id: 1 to 32 of a-z, 0-9 and `-`, not first.
const GROUP_ID_PATTERN: &str = "^[a-z0-9][a-z0-9-]{0,31}$";

/// A feature state's name, as the restore checks it.
const FEATURE_PATTERN: &str = "^[a-z0-9_-]+$";

/// A change to one component schema.
type Edit = fn(&mut Object);

/// Writes the rules into `doc`.
pub fn state(doc: &mut OpenApi) {
    cursors(doc);
    resource_ids(doc);
    unstated(doc);
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    schedules(&mut components.schemas);
    let edits: [(&str, Edit); 11] = [
        ("NodeGroup", node_group),
        ("DeploymentSpec", node_groups),
        ("CloneRequest", node_groups),
        ("RestoreRequest", restore),
        ("RestoreSnapshot", rename_together),
        ("DrillRequest", drill),
        ("DrillQuery", drill_query),
        ("SnapshotRequest", index_patterns),
        ("PolicySpec", index_patterns),
        ("NewApiKey", new_api_key),
        ("Tag", tag),
    ];
    for (name, edit) in edits {
        if let Some(RefOr::T(Schema::Object(o))) = components.schemas.get_mut(name) {
            edit(o);
        }
    }
}

/// The heading under which an operation's description names the rules
/// JSON Schema cannot state (tests/contract/schemathesis-minimal.toml
/// allows exactly these, and a test holds the two together).
pub const UNSTATED: &str = "Rules JSON Schema cannot state:";

const PRECONDITIONS: &str = "A stale `If-Match` or `?version=` is 412, checked before the body: whether a version is current depends on the resource, not on the request. `If-Match` and `?version=` sent together must name the same version, or 400: JSON Schema cannot relate a header to a query parameter.";
const CURSOR: &str = "A `cursor` this API never gave is 400: a cursor is opaque, and only a `next_cursor` of this API's answers is one (the pattern says only its alphabet and length).";
const ENDPOINT: &str = "An S3 `endpoint` whose host name does not resolve, or resolves to an address the platform does not allow, is 400 naming it: resolving depends on DNS when the request comes.";
const EXISTS: &str = "What the body names must exist when the request comes (a repository, a snapshot policy, a source deployment and its snapshot), or 400 naming the field: existence is state.";
const MOUNT_LICENSE: &str = "`mode: mount` needs the organization's license to allow searchable snapshots (or a `license` given with it), or 400 naming `license`: the platform license is state.";
const DATE_MATH: &str = "A snapshot name in date math (`<nightly-{now/d}>`) must resolve, as Elasticsearch resolves it when the request comes, to a valid name, or 400: its formats and time zones are a grammar no pattern holds.";
const LICENSE_TIME: &str = "The license is checked against the time of the request, as Elasticsearch checks one before installing it: issued and started by now, its expiry still ahead, or 400.";
const CATALOG: &str = "Each `instance_type` must be in the platform's instance catalog (`GET /api/v1/platform/configuration/instance-types`), or 400 naming it: the catalog is the platform's data, which grows without a new document, so it is no `enum` here.";
const RELATIONS: &str = "Relations between values: node group ids and tag keys are unique, a group's `zone_count` is at most its `count`, and a `shared_cache` is no larger than the node's disk; each refused with 400 naming the field.";
const RETENTION: &str = "A retention's `min_count` is at most its `max_count`, or 400 naming it: a relation between two values.";
const KEY_LIFETIME: &str = "`expiration` lies between 1m and 3650d, or 400: a range over values with units (`90d`, `2160h`), which numeric bounds cannot hold (the pattern gives the form).";

/// Each operation's rules that JSON Schema cannot state.
const UNSTATED_RULES: &[(&str, &[&str])] = &[
    (
        "create-deployment",
        &[EXISTS, MOUNT_LICENSE, CATALOG, RELATIONS],
    ),
    (
        "update-deployment",
        &[PRECONDITIONS, EXISTS, MOUNT_LICENSE, CATALOG, RELATIONS],
    ),
    ("delete-deployment", &[PRECONDITIONS]),
    (
        "clone-deployment",
        &[EXISTS, MOUNT_LICENSE, CATALOG, RELATIONS],
    ),
    ("restore-deployment", &[EXISTS]),
    ("start-deployment", &[EXISTS]),
    ("start-deployment-drill", &[MOUNT_LICENSE, CATALOG]),
    ("take-deployment-snapshot", &[DATE_MATH]),
    ("put-snapshot-repository", &[PRECONDITIONS, ENDPOINT]),
    ("delete-snapshot-repository", &[PRECONDITIONS]),
    ("create-snapshot-policy", &[EXISTS, RETENTION]),
    (
        "update-snapshot-policy",
        &[PRECONDITIONS, EXISTS, RETENTION],
    ),
    ("delete-snapshot-policy", &[PRECONDITIONS]),
    ("set-license", &[LICENSE_TIME]),
    ("create-api-key", &[KEY_LIFETIME]),
    ("list-deployments", &[CURSOR]),
    ("list-snapshot-repositories", &[CURSOR]),
    ("list-snapshot-policies", &[CURSOR]),
    ("list-repository-deleted-deployments", &[CURSOR]),
    ("list-deleted-deployment-snapshots", &[CURSOR]),
    ("get-deployment-plans", &[CURSOR]),
    ("list-deployment-snapshots", &[CURSOR]),
    ("list-deployment-drills", &[CURSOR]),
];

/// Names, in each operation's description, the rules it enforces that
/// JSON Schema cannot state, with the reason.
fn unstated(doc: &mut OpenApi) {
    for op in crate::links::operations_mut(doc) {
        let Some(id) = op.operation_id.as_deref() else {
            continue;
        };
        let Some((_, rules)) = UNSTATED_RULES.iter().find(|(name, _)| *name == id) else {
            continue;
        };
        let mut text = op.description.take().unwrap_or_default();
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(UNSTATED);
        for rule in *rules {
            text.push_str("\n- ");
            text.push_str(rule);
        }
        op.description = Some(text);
    }
}

/// The ids Floe makes (deployments, policies, API keys): 32 lower-case hex
/// digits, a UUID v7 without dashes.
pub const RESOURCE_ID_PATTERN: &str = "^[0-9a-f]{32}$";

/// Every path parameter that is an id Floe made has that id's form (a
/// malformed one is 404, as an id of nothing).
fn resource_ids(doc: &mut OpenApi) {
    for op in crate::links::operations_mut(doc) {
        for p in op.parameters.iter_mut().flatten() {
            if matches!(p.name.as_str(), "id" | "api_key_id")
                && matches!(p.parameter_in, ParameterIn::Path)
                && let Some(RefOr::T(Schema::Object(o))) = p.schema.as_mut()
            {
                o.pattern = Some(RESOURCE_ID_PATTERN.into());
            }
        }
    }
}

/// A tag's key is 1 to 64 characters without `:` or control characters,
/// its value 1 to 256 without control characters.
fn tag(o: &mut Object) {
    for (name, pattern) in [
        ("key", r"^[^:\u0000-\u001f\u007f-\u009f]{1,64}$"),
        ("value", r"^[^\u0000-\u001f\u007f-\u009f]{1,256}$"),
    ] {
        if let Some(Schema::Object(p)) = property(o, name) {
            p.pattern = Some(pattern.into());
        }
    }
}

/// Every `cursor` query parameter takes only what a `next_cursor` can be.
fn cursors(doc: &mut OpenApi) {
    for op in crate::links::operations_mut(doc) {
        for p in op.parameters.iter_mut().flatten() {
            if p.name == "cursor"
                && matches!(p.parameter_in, ParameterIn::Query)
                && let Some(RefOr::T(Schema::Object(o))) = p.schema.as_mut()
            {
                o.schema_type = SchemaType::Type(Type::String);
                o.pattern = Some(CURSOR_PATTERN.into());
            }
        }
    }
}

fn keyword(o: &mut Object, name: &str, value: serde_json::Value) {
    o.extensions
        .get_or_insert_with(Default::default)
        .insert(name.into(), value);
}

fn property<'a>(o: &'a mut Object, name: &str) -> Option<&'a mut Schema> {
    match o.properties.get_mut(name) {
        Some(RefOr::T(s)) => Some(s),
        _ => None,
    }
}

/// The items' schema of an array property (nullable or not).
fn items<'a>(o: &'a mut Object, name: &str) -> Option<&'a mut Object> {
    match property(o, name)? {
        Schema::Array(a) => match &mut a.items {
            ArrayItems::RefOrSchema(s) => match s.as_mut() {
                RefOr::T(Schema::Object(i)) => Some(i),
                _ => None,
            },
            ArrayItems::False => None,
        },
        _ => None,
    }
}

fn array_bounds(o: &mut Object, name: &str, min: usize, max: Option<usize>) {
    if let Some(Schema::Array(a)) = property(o, name) {
        a.min_items = Some(min);
        a.max_items = max;
    }
}

/// A schedule is one of two shapes, `{"interval"}` or `{"cron",
/// "timezone"}`: `oneOf` two closed objects, which generated clients read
/// as a union and linters can see are exclusive. Their fields are text
/// when sent (the API refuses `null` for them).
fn schedules(schemas: &mut BTreeMap<String, RefOr<Schema>>) {
    let Some(RefOr::T(Schema::Object(both))) = schemas.get("Schedule") else {
        return;
    };
    let shape = |fields: &[&str], title: &str| {
        let mut o = Object::with_type(Type::Object);
        o.title = Some(title.into());
        o.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
        for field in fields {
            if let Some(RefOr::T(Schema::Object(p))) = both.properties.get(*field) {
                let mut p = p.clone();
                p.schema_type = SchemaType::Type(Type::String);
                o.properties
                    .insert((*field).into(), RefOr::T(Schema::Object(p)));
            }
        }
        o.required = vec![fields[0].to_string()];
        o
    };
    let interval = shape(&["interval"], "An interval");
    let cron = shape(&["cron", "timezone"], "A cron expression");
    let mut one = OneOf::new();
    one.description = both.description.clone();
    one.items = vec![
        RefOr::Ref(Ref::from_schema_name("IntervalSchedule")),
        RefOr::Ref(Ref::from_schema_name("CronSchedule")),
    ];
    schemas.insert(
        "IntervalSchedule".into(),
        RefOr::T(Schema::Object(interval)),
    );
    schemas.insert("CronSchedule".into(), RefOr::T(Schema::Object(cron)));
    schemas.insert("Schedule".into(), RefOr::T(Schema::OneOf(one)));
}

/// A node group has an id of its form, at least one role and none twice,
/// and a `shared_cache` only with the `data_frozen` role.
fn node_group(o: &mut Object) {
    array_bounds(o, "roles", 1, None);
    if let Some(Schema::Array(roles)) = property(o, "roles") {
        roles.unique_items = true;
    }
    if let Some(Schema::Object(id)) = property(o, "id") {
        id.pattern = Some(GROUP_ID_PATTERN.into());
    }
    keyword(
        o,
        "not",
        json!({
            "required": ["shared_cache"],
            "properties": {
                "shared_cache": {"type": "string"},
                "roles": {"not": {"contains": {"const": "data_frozen"}}}
            }
        }),
    );
}

/// A deployment has 1 to 20 node groups, one of them with the `master`
/// role and one with `data_hot` or `data_content` (the two may be one).
fn node_groups(o: &mut Object) {
    array_bounds(o, "node_groups", 1, Some(20));
    let lacking = |roles: serde_json::Value| {
        json!({
            "required": ["node_groups"],
            "properties": {"node_groups": {
                "type": "array",
                "minItems": 1,
                "items": {"not": {"properties": {"roles": {"contains": {"enum": roles}}}}}
            }}
        })
    };
    keyword(
        o,
        "not",
        json!({"anyOf": [lacking(json!(["master"])), lacking(json!(["data_hot", "data_content"]))]}),
    );
}

/// `rename_pattern` and `rename_replacement` come together, each a
/// non-empty text (never `null`, which the API refuses for them).
fn rename_together(o: &mut Object) {
    for name in ["rename_pattern", "rename_replacement"] {
        if let Some(Schema::Object(p)) = property(o, name) {
            p.schema_type = SchemaType::Type(Type::String);
            p.min_length = Some(1);
        }
    }
    keyword(
        o,
        "dependentRequired",
        json!({
            "rename_pattern": ["rename_replacement"],
            "rename_replacement": ["rename_pattern"]
        }),
    );
}

fn restore(o: &mut Object) {
    rename_together(o);
    if let Some(f) = items(o, "feature_states") {
        f.pattern = Some(FEATURE_PATTERN.into());
    }
}

/// A drill's `license` is asked for only in mode `mount` (the default mode
/// is `restore`): no license (an object, or `"trial"`) beside another mode.
fn drill(o: &mut Object) {
    keyword(
        o,
        "not",
        json!({
            "required": ["license"],
            "properties": {
                "license": {"not": {"type": "null"}},
                "mode": {"not": {"const": "mount"}}
            }
        }),
    );
}

/// A drill's query is one query clause: an object with one key whose
/// value is an object.
fn drill_query(o: &mut Object) {
    if let Some(Schema::Object(q)) = property(o, "query") {
        q.min_properties = Some(1);
        q.max_properties = Some(1);
        q.additional_properties = Some(Box::new(AdditionalProperties::RefOr(RefOr::T(
            Schema::Object(Object::with_type(Type::Object)),
        ))));
    }
}

/// Each index pattern of a snapshot (taken now, or by a policy) is 1 to
/// 255 characters without separators or upper case.
fn index_patterns(o: &mut Object) {
    if let Some(i) = items(o, "indices") {
        i.min_length = Some(1);
        i.max_length = Some(255);
        i.pattern = Some(INDEX_PATTERN.into());
    }
}

/// A key's lifetime is a time value.
fn new_api_key(o: &mut Object) {
    if let Some(Schema::Object(e)) = property(o, "expiration") {
        e.pattern = Some(TIME_VALUE_PATTERN.into());
    }
}
