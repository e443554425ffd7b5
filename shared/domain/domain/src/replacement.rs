//! A deployment's GET body sent back as a PUT.
//!
//! Clients read a deployment, change one field and send the document back
//! (as `kubectl apply`, Terraform and ECE's own console do). The view holds
//! fields the platform owns (its id, status, plans, versions, how to reach
//! the cluster, each node group's derived figures); a PUT may carry them.
//! They are taken out of the body before the spec is parsed, then compared
//! with the deployment as it is: unchanged, they are ignored; changed, the
//! request is refused naming the field, so a client never believes it
//! changed something it cannot.

use crate::catalog;
use crate::deployment::{DeploymentSpec, DeploymentView, NodeGroup, NodeGroupView};
use serde_json::{Map, Value};
use std::sync::LazyLock;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

/// The view's fields that are not the spec's, at the top of the document:
/// every property of [`DeploymentView`]'s schema that [`DeploymentSpec`]'s
/// lacks. Derived from the types (utoipa's schema lists every field, also
/// those a given view leaves out), so a field added to the view is
/// read-only from the start, rather than refused as unknown once a
/// deployment first shows it (issue 33: `healthy` was missing from a
/// hand-written list, and a GET stopped being a valid PUT after the first
/// health check).
pub static READ_ONLY_FIELDS: LazyLock<Vec<String>> =
    LazyLock::new(fields_not_in::<DeploymentView, DeploymentSpec>);

/// A node group view's figures derived from its instance type: the
/// properties of [`NodeGroupView`]'s schema that [`NodeGroup`]'s lacks.
pub static DERIVED_GROUP_FIELDS: LazyLock<Vec<String>> =
    LazyLock::new(fields_not_in::<NodeGroupView, NodeGroup>);

/// Read-only fields a PUT may carry with any value, never compared:
/// - `resource_version` is the precondition, checked as `If-Match`;
/// - `warnings` and `credentials` belong to the answer they came in;
/// - `healthy`, `health_reason`, `nodes` and `health_warnings` are the health check's
///   observations, written without a new version (so that a user's
///   `If-Match` survives the check): a body read before the check looked
///   again would differ from the record at the same version, and a client
///   cannot mistake them for something it sets.
///
/// A test checks that each is a read-only field, so a rename cannot leave
/// one compared by accident.
pub const NOT_COMPARED: &[&str] = &[
    "resource_version",
    "warnings",
    "credentials",
    "healthy",
    "health_reason",
    "nodes",
    "health_warnings",
];

/// The property names of `View`'s schema that are not `Spec`'s.
fn fields_not_in<View: ToSchema, Spec: ToSchema>() -> Vec<String> {
    let spec = property_names::<Spec>();
    property_names::<View>()
        .into_iter()
        .filter(|f| !spec.contains(f))
        .collect()
}

/// Every property name of `T`'s schema, in order: those of an object, and
/// of each part of an `allOf` (what `#[serde(flatten)]` makes), a part
/// given by reference looked up among the schemas `T` refers to.
fn property_names<T: ToSchema>() -> Vec<String> {
    let mut named = Vec::new();
    T::schemas(&mut named);
    let mut names = Vec::new();
    collect_properties(&T::schema(), &named, &mut names);
    names
}

fn collect_properties(
    schema: &RefOr<Schema>,
    named: &[(String, RefOr<Schema>)],
    names: &mut Vec<String>,
) {
    match schema {
        RefOr::T(Schema::Object(object)) => {
            for name in object.properties.keys() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        RefOr::T(Schema::AllOf(all)) => {
            for part in &all.items {
                collect_properties(part, named, names);
            }
        }
        RefOr::Ref(r) => {
            let name = r.ref_location.rsplit('/').next().unwrap_or_default();
            if let Some((_, schema)) = named.iter().find(|(n, _)| n == name) {
                collect_properties(schema, named, names);
            }
        }
        // A view is an object; nothing else has fields to name.
        _ => {}
    }
}

/// The read-only fields a PUT body carried, taken out of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOnlyFields {
    top: Map<String, Value>,
    /// By the group's position in the body.
    groups: Vec<(usize, Map<String, Value>)>,
}

/// A read-only field that differs from the deployment's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyChanged {
    pub field: String,
    pub message: String,
}

/// Takes the read-only fields out of `body` (a PUT's JSON object), leaving
/// what parses as a [`DeploymentSpec`]. Anything that is not an object is
/// left as it is, for the spec's parser to name.
pub fn split_read_only(body: &mut Value) -> ReadOnlyFields {
    let mut taken = ReadOnlyFields::default();
    let Value::Object(doc) = body else {
        return taken;
    };
    for field in READ_ONLY_FIELDS.iter() {
        if let Some(v) = doc.remove(field) {
            taken.top.insert(field.clone(), v);
        }
    }
    if let Some(Value::Array(groups)) = doc.get_mut("node_groups") {
        for (n, group) in groups.iter_mut().enumerate() {
            let Value::Object(g) = group else { continue };
            let mut derived = Map::new();
            for field in DERIVED_GROUP_FIELDS.iter() {
                if let Some(v) = g.remove(field) {
                    derived.insert(field.clone(), v);
                }
            }
            if !derived.is_empty() {
                taken.groups.push((n, derived));
            }
        }
    }
    taken
}

impl ReadOnlyFields {
    pub fn is_empty(&self) -> bool {
        self.top.is_empty() && self.groups.is_empty()
    }

    /// The `resource_version` the body carried: the version the client read,
    /// which a PUT treats as `If-Match`.
    pub fn resource_version(&self) -> Result<Option<u64>, ReadOnlyChanged> {
        match self.top.get("resource_version") {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| ReadOnlyChanged {
                field: "resource_version".into(),
                message: "must be the resource_version the deployment was read at (a whole number)"
                    .into(),
            }),
        }
    }

    /// Compares every field taken with the deployment as it is now, but
    /// those in [`NOT_COMPARED`].
    /// A node group's derived figures may be those of the group as it runs
    /// or those of the instance type the body asks for (a client changing
    /// the type keeps the figures it read).
    pub fn check(
        &self,
        current: &DeploymentView,
        spec: &DeploymentSpec,
    ) -> Result<(), ReadOnlyChanged> {
        let now = serde_json::to_value(current).unwrap_or(Value::Null);
        for (field, sent) in &self.top {
            if NOT_COMPARED.contains(&field.as_str()) {
                continue;
            }
            let held = now.get(field).unwrap_or(&Value::Null);
            if !same(sent, held) {
                return Err(ReadOnlyChanged {
                    field: field.clone(),
                    message: "is read-only: it is set by the platform (send it unchanged from a GET, or leave it out)".to_string(),
                });
            }
        }
        for (n, derived) in &self.groups {
            let Some(group) = spec.node_groups.get(*n) else {
                continue;
            };
            let running = now
                .get("node_groups")
                .and_then(Value::as_array)
                .and_then(|gs| {
                    gs.iter()
                        .find(|g| g.get("id") == Some(&Value::from(group.id.as_str())))
                });
            let wanted = catalog::lookup(&group.instance_type).map(|t| {
                serde_json::json!({
                    "arch": t.arch,
                    "vcpus": t.vcpus,
                    "memory_mib": t.memory_mib,
                    "jvm_heap_mib": catalog::jvm_heap_mib(t.memory_mib),
                })
            });
            for (field, sent) in derived {
                let matches = |figures: Option<&Value>| {
                    figures.is_some_and(|f| same(sent, f.get(field).unwrap_or(&Value::Null)))
                };
                if !matches(running) && !matches(wanted.as_ref()) {
                    return Err(ReadOnlyChanged {
                        field: format!("node_groups[{n}].{field}"),
                        message: format!(
                            "is derived from instance_type {}: leave it out or send it as read",
                            group.instance_type
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Equal as JSON, where an absent value, `null` and an empty list or object
/// are the same (the view leaves empty ones out).
fn same(a: &Value, b: &Value) -> bool {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    a == b || (empty(a) && empty(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{ClusterAccess, NodeEndpoint};
    use crate::deployment::{Deployment, DeploymentStatus};
    use crate::health::{Health, NodeStatus};
    use serde_json::json;

    fn deployment() -> Deployment {
        let spec: DeploymentSpec = serde_json::from_value(json!({
            "name": "logs", "version": "8.15.3",
            "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "ingest"],
                             "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3,
                             "storage": {"size_gb": 100}}],
            "user_settings": {"thread_pool.snapshot.max": 8},
            "snapshot": {"repository": "shared", "policies": []},
            "metadata": {"tags": [{"key": "team", "value": "search"}]},
            "recovery_targets": {"recovery_time": "30m"}
        }))
        .expect("spec");
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .expect("date")
            .with_timezone(&chrono::Utc);
        Deployment {
            last_drill: None,
            id: "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b".into(),
            org: "acme".into(),
            spec,
            status: DeploymentStatus::Running,
            pending_plan: None,
            access: Some(ClusterAccess {
                ca_cert_pem: "-----BEGIN CERTIFICATE-----\n".into(),
                sealed_password: "sealed".into(),
                nodes: vec![NodeEndpoint {
                    name: "i-1".into(),
                    address: "10.0.0.5".into(),
                }],
                http_port: 9200,
            }),
            password_to_apply: None,
            endpoint: None,
            endpoint_moving_to: None,
            clone_source: None,
            health: None,
            created: at,
            updated: at,
            license: None,
        }
    }

    fn get_body() -> (DeploymentView, Value) {
        let view = DeploymentView::new(&deployment(), 4);
        let body = serde_json::to_value(&view).expect("view");
        (view, body)
    }

    fn put(mut body: Value) -> Result<(DeploymentSpec, ReadOnlyFields), String> {
        let taken = split_read_only(&mut body);
        let spec: DeploymentSpec = serde_json::from_value(body).map_err(|e| e.to_string())?;
        Ok((spec, taken))
    }

    /// A deployment whose view shows every optional field: checked by the
    /// health check, a clone, with a plan pending.
    fn everything_shown() -> Deployment {
        let mut d = deployment();
        d.health = Some(Health {
            healthy: false,
            reason: Some("node group hot has 2 of 3 nodes running".into()),
            nodes: vec![node("i-1")],
            warnings: vec!["repository shared is no longer registered".into()],
            since: d.created,
            heal_started: None,
            recovery_point: None,
            recovery_point_breached: None,
        });
        d.clone_source = Some(
            serde_json::from_value(json!({
                "source_deployment_id": "0193a0c4d2b77c3e9a4b5c6d7e8f0000",
                "repository": "shared", "registered_as": "shared", "snapshot": "snap-1",
                "snapshot_sort_millis": 1, "mode": "restore", "pinned": false
            }))
            .expect("clone source"),
        );
        d.pending_plan = Some(
            serde_json::from_value(json!({"plan_id": "p1", "kind": "update"})).expect("plan ref"),
        );
        d.license = Some(crate::license::ClusterLicense {
            license_type: "trial".into(),
            expiry: Some(d.created),
            uid: None,
        });
        d.last_drill = Some(crate::drill::LastDrill {
            id: "d1".into(),
            status: crate::drill::DrillStatus::Passed,
            snapshot: "snap-1".into(),
            started: d.created,
            finished: Some(d.created),
            recovery_point_seconds: 60,
            recovery_time_millis: Some(1000),
            failure: None,
        });
        d
    }

    fn node(id: &str) -> NodeStatus {
        NodeStatus {
            instance_id: id.into(),
            group: "hot".into(),
            zone: "eu-west-1a".into(),
            private_address: Some("10.0.0.5".into()),
            state: "running".into(),
            version: "8.15.3".into(),
            roles: vec!["master".into()],
            joined: true,
        }
    }

    #[test]
    fn the_read_only_list_is_the_views_fields_that_are_not_the_specs() {
        let mut view = DeploymentView::new(&everything_shown(), 4);
        // Shown only in some answers.
        view.warnings = vec!["advice".into()];
        view.credentials = Some(crate::access::ElasticCredentials {
            username: "elastic".into(),
            password: "p".into(),
        });
        let body = serde_json::to_value(&view).expect("view");
        let spec = serde_json::to_value(&deployment().spec).expect("spec");
        let shown: Vec<&String> = body.as_object().expect("object").keys().collect();
        for key in &shown {
            assert!(
                spec.get(key.as_str()).is_some() != READ_ONLY_FIELDS.contains(key),
                "view field {key} is either the spec's or read-only"
            );
        }
        // And the list names nothing the view cannot show.
        for field in READ_ONLY_FIELDS.iter() {
            assert!(shown.contains(&field), "{field} is not a view field");
        }
        for field in ["healthy", "health_reason", "nodes", "clone_source", "plans"] {
            assert!(READ_ONLY_FIELDS.iter().any(|f| f == field), "{field}");
        }
        for field in NOT_COMPARED {
            assert!(READ_ONLY_FIELDS.iter().any(|f| f == field), "{field}");
        }
        let group = &body["node_groups"][0];
        let spec_group = &spec["node_groups"][0];
        for key in group.as_object().expect("group").keys() {
            assert!(
                spec_group.get(key).is_some() != DERIVED_GROUP_FIELDS.contains(key),
                "node group field {key}"
            );
        }
        assert_eq!(
            *DERIVED_GROUP_FIELDS,
            ["arch", "vcpus", "memory_mib", "jvm_heap_mib"]
        );
    }

    /// Issue 33: after the first health check, the GET body carried
    /// `healthy`, `health_reason` and `nodes`, which the PUT refused as
    /// unknown fields.
    #[test]
    fn the_get_body_of_a_checked_clone_with_a_plan_pending_is_a_valid_put() {
        let d = everything_shown();
        let view = DeploymentView::new(&d, 4);
        let mut body = serde_json::to_value(&view).expect("view");
        body["metadata"]["tags"][0]["value"] = json!("logs");
        let (spec, taken) = put(body).expect("parses as a spec");
        assert_eq!(spec.metadata.tags[0].value, "logs");
        assert_eq!(taken.check(&view, &spec), Ok(()));

        // The check looked again meanwhile, without a new version: what
        // it saw is not the client's to match.
        let mut checked = d;
        if let Some(h) = checked.health.as_mut() {
            h.healthy = true;
            h.reason = None;
            h.nodes.push(node("i-2"));
        }
        let now = DeploymentView::new(&checked, 4);
        assert_eq!(taken.check(&now, &spec), Ok(()));
    }

    #[test]
    fn a_get_body_with_one_field_changed_is_a_valid_put() {
        let (view, mut body) = get_body();
        body["node_groups"][0]["count"] = json!(4);
        let (spec, taken) = put(body.clone()).expect("parses as a spec");
        assert_eq!(spec.node_groups[0].count, 4);
        assert_eq!(taken.check(&view, &spec), Ok(()));
        assert_eq!(taken.resource_version(), Ok(Some(4)));
        // Another instance type keeps the figures read from the old one.
        body["node_groups"][0]["instance_type"] = json!("m6i.xlarge");
        let (spec, taken) = put(body).expect("parses");
        assert_eq!(taken.check(&view, &spec), Ok(()));
    }

    #[test]
    fn a_changed_read_only_field_is_named() {
        let (view, body) = get_body();
        for (pointer, value, field) in [
            ("/id", json!("0193a0c4d2b77c3e9a4b5c6d7e8f9fff"), "id"),
            ("/status", json!("stopped"), "status"),
            ("/created", json!("2020-01-01T00:00:00Z"), "created"),
            ("/elasticsearch/port", json!(9243), "elasticsearch"),
            ("/node_groups/0/vcpus", json!(64), "node_groups[0].vcpus"),
        ] {
            let mut b = body.clone();
            *b.pointer_mut(pointer).expect("pointer") = value;
            let (spec, taken) = put(b).expect("parses");
            let e = taken.check(&view, &spec).expect_err(pointer);
            assert_eq!(e.field, field);
        }
        let mut b = body;
        b["resource_version"] = json!("four");
        let (_, taken) = put(b).expect("parses");
        assert!(taken.resource_version().is_err());
    }

    #[test]
    fn an_unknown_field_is_still_refused() {
        let (_, mut body) = get_body();
        body["colour"] = json!("blue");
        assert!(put(body).expect_err("unknown").contains("colour"));
    }
}
