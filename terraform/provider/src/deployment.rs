//! `floe_deployment`: an Elasticsearch deployment's spec (node groups,
//! version, user settings, snapshot repository and policies, tags), and
//! optionally the snapshot it starts from (a clone).
//!
//! Every create, update and destroy runs as a plan in the platform; an
//! apply waits for it and logs its steps. A plan checks the change with
//! the API's `validate_only`, so a bad instance type fails `terraform plan`
//! on the attribute. Updates send the version they read (`If-Match`).
//!
//! The clone's `restore_snapshot` is a create-time setting, kept in state
//! with the snapshot it resolved to: later applies restore nothing.

use crate::client::{CallError, Client, encode};
use crate::common::*;
use crate::log;
use crate::plans::{self, pending_plan};
use crate::schema::*;
use async_trait::async_trait;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Map, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tf_provider::schema::{NestedBlock, Schema};
use tf_provider::value::{Value, ValueEmpty, serde_as_vec};
use tf_provider::{AttributePath, Diagnostics, Resource};

pub struct DeploymentResource(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct Storage {
    pub size_gb: Num,
    pub volume_type: Str,
    pub iops: Num,
    pub throughput: Num,
}

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct NodeGroup {
    pub id: Str,
    pub roles: StrList,
    pub instance_type: Str,
    pub count: Num,
    pub zone_count: Num,
    pub shared_cache: Str,
    pub storage: Value<Storage>,
    pub arch: Str,
    pub vcpus: Num,
    pub memory_mib: Num,
    pub jvm_heap_mib: Num,
}

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct RestoreSnapshot {
    pub source_deployment_id: Str,
    pub snapshot_name: Str,
    pub repository: Str,
    pub indices: StrList,
    pub mode: Str,
    pub rename_pattern: Str,
    pub rename_replacement: Str,
    pub resolved_snapshot: Str,
}

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct DeploymentState {
    pub id: Str,
    pub name: Str,
    pub version: Str,
    pub node_group: Value<Vec<NodeGroup>>,
    pub user_settings_json: Str,
    pub snapshot_repository: Str,
    pub snapshot_policies: StrList,
    pub tags: Value<BTreeMap<String, Str>>,
    pub recovery_point_target: Str,
    pub recovery_time_target: Str,
    pub drill_schedule_json: Str,
    #[serde(with = "serde_as_vec")]
    pub restore_snapshot: Value<RestoreSnapshot>,
    pub remove_snapshots_on_destroy: Flag,
    pub status: Str,
    pub resource_version: Num,
    pub endpoint: Str,
    pub ca_certificate: Str,
    pub username: Str,
    pub password: Str,
}

/// A JSON attribute that is not JSON, named.
struct BodyError {
    message: String,
    attribute: &'static str,
}

/// A drill schedule as the API shows it, with the defaults it fills in
/// (the default drill, mode `restore`): what two writings of one schedule
/// both come to.
fn drill_schedule_normal(v: &serde_json::Value) -> serde_json::Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        let drill = o.entry("drill").or_insert_with(|| json!({}));
        if let Some(d) = drill.as_object_mut() {
            d.entry("mode").or_insert_with(|| json!("restore"));
            if d.get("queries")
                .is_some_and(|q| q.as_array().is_some_and(Vec::is_empty))
            {
                d.remove("queries");
            }
        }
    }
    v
}

/// `drill_schedule_json` from the view: the configuration's own text while
/// it says what the API shows, else the API's.
fn drill_schedule_of(seen: &serde_json::Value, prior: &Str) -> Str {
    if seen.is_null() {
        return Value::Null;
    }
    let prior_parsed = prior
        .as_ref_option()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok());
    match prior_parsed {
        Some(p) if drill_schedule_normal(&p) == drill_schedule_normal(seen) => prior.clone(),
        _ => Value::Value(seen.to_string()),
    }
}

fn path(id: &str) -> String {
    format!("/api/v1/deployments/{}", encode(id))
}

/// The API's field (`node_groups[0].instance_type`, `metadata.tags[1].key`,
/// `snapshot.policies[0]`) as the attribute of the configuration that set it.
fn locate(field: &str) -> Option<AttributePath> {
    let steps = field_steps(field);
    let Some(Step::Name(first)) = steps.first() else {
        return None;
    };
    let rest = &steps[1..];
    Some(match first.as_str() {
        "node_groups" => extend(AttributePath::new("node_group"), rest),
        "metadata" => AttributePath::new("tags"),
        "user_settings" => AttributePath::new("user_settings_json"),
        "snapshot" => match rest.first() {
            Some(Step::Name(n)) if n == "policies" => {
                extend(AttributePath::new("snapshot_policies"), &rest[1..])
            }
            _ => AttributePath::new("snapshot_repository"),
        },
        "restore_snapshot" => extend(AttributePath::new("restore_snapshot").index(0), rest),
        "recovery_targets" => match rest.first() {
            Some(Step::Name(n)) if n == "recovery_time" => {
                AttributePath::new("recovery_time_target")
            }
            _ => AttributePath::new("recovery_point_target"),
        },
        "drill_schedule" => AttributePath::new("drill_schedule_json"),
        "name" | "version" => AttributePath::new(first.clone()),
        _ => return None,
    })
}

/// Whether any of `values` is unknown (then the request cannot be made yet).
fn any_unknown(values: &[bool]) -> bool {
    values.iter().any(|u| *u)
}

impl NodeGroup {
    fn unknown(&self) -> bool {
        let storage_unknown = match &self.storage {
            Value::Unknown => true,
            Value::Value(s) => any_unknown(&[
                unknown(&s.size_gb),
                unknown(&s.volume_type),
                unknown(&s.iops),
                unknown(&s.throughput),
            ]),
            Value::Null => false,
        };
        storage_unknown
            || any_unknown(&[
                unknown(&self.id),
                unknown(&self.instance_type),
                unknown(&self.count),
                unknown(&self.zone_count),
                unknown(&self.shared_cache),
                self.roles.is_unknown() || self.roles.iter().flatten().any(|r| r.is_unknown()),
            ])
    }

    fn body(&self) -> serde_json::Value {
        let mut g = Map::new();
        put(&mut g, "id", json_str(&self.id));
        put(&mut g, "roles", json_list(&self.roles));
        put(&mut g, "instance_type", json_str(&self.instance_type));
        put(&mut g, "count", json_num(&self.count));
        put(&mut g, "zone_count", json_num(&self.zone_count));
        put(&mut g, "shared_cache", json_str(&self.shared_cache));
        let mut s = Map::new();
        if let Some(storage) = self.storage.as_ref_option() {
            put(&mut s, "size_gb", json_num(&storage.size_gb));
            put(&mut s, "volume_type", json_str(&storage.volume_type));
            put(&mut s, "iops", json_num(&storage.iops));
            put(&mut s, "throughput", json_num(&storage.throughput));
        }
        g.insert("storage".into(), s.into());
        g.into()
    }

    fn from_view(v: &serde_json::Value) -> NodeGroup {
        let s = &v["storage"];
        NodeGroup {
            id: str_of(&v["id"]),
            roles: list_of(&v["roles"]),
            instance_type: str_of(&v["instance_type"]),
            count: num_of(&v["count"]),
            zone_count: num_of(&v["zone_count"]),
            shared_cache: str_of(&v["shared_cache"]),
            storage: Value::Value(Storage {
                size_gb: num_of(&s["size_gb"]),
                volume_type: str_of(&s["volume_type"]),
                iops: num_of(&s["iops"]),
                throughput: num_of(&s["throughput"]),
            }),
            arch: str_of(&v["arch"]),
            vcpus: num_of(&v["vcpus"]),
            memory_mib: num_of(&v["memory_mib"]),
            jvm_heap_mib: num_of(&v["jvm_heap_mib"]),
        }
    }

    /// The group as the configuration declares it (the platform's derived
    /// figures left out).
    fn declared(&self) -> NodeGroup {
        NodeGroup {
            arch: Value::Null,
            vcpus: Value::Null,
            memory_mib: Value::Null,
            jvm_heap_mib: Value::Null,
            ..self.clone()
        }
    }

    /// Fills what the configuration left to the platform from `view` (the
    /// answer of a `validate_only` call), or marks it unknown without one.
    fn fill(&mut self, view: Option<&NodeGroup>) {
        fn take<T: Clone>(slot: &mut Value<T>, from: Option<&Value<T>>, always: bool) {
            if always || slot.is_null() {
                *slot = from.cloned().unwrap_or(Value::Unknown);
            }
        }
        take(&mut self.zone_count, view.map(|v| &v.zone_count), false);
        take(&mut self.arch, view.map(|v| &v.arch), true);
        take(&mut self.vcpus, view.map(|v| &v.vcpus), true);
        take(&mut self.memory_mib, view.map(|v| &v.memory_mib), true);
        take(&mut self.jvm_heap_mib, view.map(|v| &v.jvm_heap_mib), true);
        let from = view.and_then(|v| v.storage.as_ref_option());
        if let Value::Value(s) = &mut self.storage {
            take(&mut s.volume_type, from.map(|f| &f.volume_type), false);
            take(&mut s.iops, from.map(|f| &f.iops), false);
            take(&mut s.throughput, from.map(|f| &f.throughput), false);
        }
    }
}

impl RestoreSnapshot {
    fn declared(&self) -> RestoreSnapshot {
        RestoreSnapshot {
            resolved_snapshot: Value::Null,
            ..self.clone()
        }
    }

    fn body(&self) -> serde_json::Value {
        let mut r = Map::new();
        put(
            &mut r,
            "source_deployment_id",
            json_str(&self.source_deployment_id),
        );
        put(&mut r, "snapshot_name", json_str(&self.snapshot_name));
        put(&mut r, "repository", json_str(&self.repository));
        put(&mut r, "indices", json_list(&self.indices));
        put(&mut r, "mode", json_str(&self.mode));
        put(&mut r, "rename_pattern", json_str(&self.rename_pattern));
        put(
            &mut r,
            "rename_replacement",
            json_str(&self.rename_replacement),
        );
        r.into()
    }
}

impl DeploymentState {
    /// Whether anything the request is made of is still unknown.
    fn unknown(&self) -> bool {
        let groups = match &self.node_group {
            Value::Unknown => true,
            Value::Value(gs) => gs.iter().any(NodeGroup::unknown),
            Value::Null => false,
        };
        let tags = match &self.tags {
            Value::Unknown => true,
            Value::Value(t) => t.values().any(|v| v.is_unknown()),
            Value::Null => false,
        };
        let restore = match &self.restore_snapshot {
            Value::Unknown => true,
            Value::Value(r) => any_unknown(&[
                unknown(&r.source_deployment_id),
                unknown(&r.snapshot_name),
                unknown(&r.repository),
                unknown(&r.mode),
                unknown(&r.rename_pattern),
                unknown(&r.rename_replacement),
                r.indices.is_unknown(),
            ]),
            Value::Null => false,
        };
        groups
            || tags
            || restore
            || any_unknown(&[
                unknown(&self.name),
                unknown(&self.version),
                unknown(&self.user_settings_json),
                unknown(&self.snapshot_repository),
                unknown(&self.recovery_point_target),
                unknown(&self.recovery_time_target),
                unknown(&self.drill_schedule_json),
                self.snapshot_policies.is_unknown()
                    || self
                        .snapshot_policies
                        .iter()
                        .flatten()
                        .any(|p| p.is_unknown()),
            ])
    }

    /// The `DeploymentSpec` of a create (`with_restore`) or a replace; a
    /// JSON attribute that is not JSON is named.
    fn body(&self, with_restore: bool) -> Result<serde_json::Value, BodyError> {
        let mut b = Map::new();
        put(&mut b, "name", json_str(&self.name));
        put(&mut b, "version", json_str(&self.version));
        let groups: Vec<serde_json::Value> = self
            .node_group
            .iter()
            .flatten()
            .map(NodeGroup::body)
            .collect();
        b.insert("node_groups".into(), groups.into());
        if let Some(text) = self.user_settings_json.as_ref_option() {
            let settings: serde_json::Value =
                serde_json::from_str(text).map_err(|e| BodyError {
                    message: format!("user_settings_json is not JSON: {e}"),
                    attribute: "user_settings_json",
                })?;
            b.insert("user_settings".into(), settings);
        }
        if let Some(text) = self.drill_schedule_json.as_ref_option() {
            let schedule: serde_json::Value =
                serde_json::from_str(text).map_err(|e| BodyError {
                    message: format!("drill_schedule_json is not JSON: {e}"),
                    attribute: "drill_schedule_json",
                })?;
            b.insert("drill_schedule".into(), schedule);
        }
        if self.snapshot_repository.is_value() || self.snapshot_policies.is_value() {
            let mut s = Map::new();
            put(&mut s, "repository", json_str(&self.snapshot_repository));
            put(&mut s, "policies", json_list(&self.snapshot_policies));
            b.insert("snapshot".into(), s.into());
        }
        let tags: Vec<serde_json::Value> = self
            .tags
            .iter()
            .flatten()
            .filter_map(|(k, v)| v.as_ref_option().map(|v| json!({"key": k, "value": v})))
            .collect();
        b.insert("metadata".into(), json!({ "tags": tags }));
        if self.recovery_point_target.is_value() || self.recovery_time_target.is_value() {
            let mut t = Map::new();
            put(
                &mut t,
                "recovery_point",
                json_str(&self.recovery_point_target),
            );
            put(
                &mut t,
                "recovery_time",
                json_str(&self.recovery_time_target),
            );
            b.insert("recovery_targets".into(), t.into());
        }
        if with_restore && let Some(r) = self.restore_snapshot.as_ref_option() {
            b.insert("restore_snapshot".into(), r.body());
        }
        Ok(b.into())
    }

    /// The state a deployment's view gives. What the API never shows again
    /// (the password, the clone's origin) and what the configuration wrote
    /// in its own form (the user settings' JSON) come from `prior`.
    fn from_view(view: &serde_json::Value, prior: &DeploymentState) -> DeploymentState {
        let user_settings = {
            let seen = &view["user_settings"];
            let prior_parsed = prior
                .user_settings_json
                .as_ref_option()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok());
            match prior_parsed {
                Some(p) if &p == seen => prior.user_settings_json.clone(),
                _ if seen.as_object().is_none_or(Map::is_empty)
                    && !prior.user_settings_json.is_value() =>
                {
                    Value::Null
                }
                _ => Value::Value(seen.to_string()),
            }
        };
        let policies = match view["snapshot"]["policies"].as_array() {
            Some(p) if !p.is_empty() => list_of(&view["snapshot"]["policies"]),
            _ if prior.snapshot_policies.is_value() => Value::Value(vec![]),
            _ => Value::Null,
        };
        let tags: BTreeMap<String, Str> = view["metadata"]["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| Some((t["key"].as_str()?.to_string(), str_of(&t["value"]))))
            .collect();
        let tags = if tags.is_empty() && !prior.tags.is_value() {
            Value::Null
        } else {
            Value::Value(tags)
        };
        let es = &view["elasticsearch"];
        let restore_snapshot = match prior.restore_snapshot.clone() {
            Value::Value(mut r) => {
                if let Some(s) = view["clone_source"]["snapshot"].as_str() {
                    r.resolved_snapshot = Value::Value(s.to_string());
                } else if r.resolved_snapshot.is_unknown() {
                    r.resolved_snapshot = Value::Null;
                }
                Value::Value(r)
            }
            other => other,
        };
        let password = match view["credentials"]["password"].as_str() {
            Some(p) => Value::Value(p.to_string()),
            None if prior.password.is_unknown() => Value::Null,
            None => prior.password.clone(),
        };
        DeploymentState {
            id: str_of(&view["id"]),
            name: str_of(&view["name"]),
            version: str_of(&view["version"]),
            node_group: Value::Value(
                view["node_groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(NodeGroup::from_view)
                    .collect(),
            ),
            user_settings_json: user_settings,
            snapshot_repository: str_of(&view["snapshot"]["repository"]),
            snapshot_policies: policies,
            tags,
            recovery_point_target: str_of(&view["recovery_targets"]["recovery_point"]),
            recovery_time_target: str_of(&view["recovery_targets"]["recovery_time"]),
            drill_schedule_json: drill_schedule_of(
                &view["drill_schedule"],
                &prior.drill_schedule_json,
            ),
            restore_snapshot,
            remove_snapshots_on_destroy: match prior.remove_snapshots_on_destroy {
                Value::Value(b) => Value::Value(b),
                _ => Value::Value(false),
            },
            status: str_of(&view["status"]),
            resource_version: num_of(&view["resource_version"]),
            endpoint: str_of(&es["endpoint"]),
            ca_certificate: str_of(&es["ca_certificate"]),
            username: str_of(&es["username"]),
            password,
        }
    }

    /// The spec as the configuration declares it, to tell whether a plan
    /// changes anything.
    fn declared(&self) -> DeploymentState {
        DeploymentState {
            node_group: self
                .node_group
                .clone()
                .map(|gs| gs.iter().map(NodeGroup::declared).collect()),
            restore_snapshot: self.restore_snapshot.clone().map(|r| r.declared()),
            status: Value::Null,
            resource_version: Value::Null,
            endpoint: Value::Null,
            ca_certificate: Value::Null,
            username: Value::Null,
            password: Value::Null,
            ..self.clone()
        }
    }

    /// What an update sends: the declared spec without the clone's origin
    /// (create only) and the provider's own destroy setting.
    fn spec(&self) -> DeploymentState {
        DeploymentState {
            restore_snapshot: Value::Null,
            remove_snapshots_on_destroy: Value::Null,
            ..self.declared()
        }
    }

    /// Fills each group's platform-derived figures from a validation's view.
    fn fill(&mut self, view: Option<&DeploymentState>) {
        let from: Vec<NodeGroup> = view
            .and_then(|v| v.node_group.as_ref_option().cloned())
            .unwrap_or_default();
        if let Value::Value(groups) = &mut self.node_group {
            for (i, g) in groups.iter_mut().enumerate() {
                g.fill(view.and(from.get(i)));
            }
        }
    }
}

/// Checks a create (`id` none) or an update with the API's `validate_only`:
/// its errors become the plan's, on the attributes they name; its answer
/// gives the figures the platform derives. `None` when the check could not
/// run yet (a value known only at apply).
async fn validate(
    client: &Client,
    diags: &mut Diagnostics,
    state: &DeploymentState,
    id: Option<(&str, Option<i64>)>,
) -> Option<DeploymentState> {
    if state.unknown() {
        return None;
    }
    let body = match state.body(id.is_none()) {
        Ok(b) => b,
        Err(e) => {
            diags.error_short(e.message, AttributePath::new(e.attribute));
            return None;
        }
    };
    let answer = match id {
        None => {
            client
                .call(
                    Method::POST,
                    "/api/v1/deployments?validate_only=true",
                    Some(&body),
                    None,
                )
                .await
        }
        Some((id, version)) => {
            client
                .call(
                    Method::PUT,
                    &format!("{}?validate_only=true", path(id)),
                    Some(&body),
                    version,
                )
                .await
        }
    };
    match answer {
        Ok(a) => {
            for w in a.body["deployment"]["warnings"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(w) = w.as_str() {
                    diags.root_warning_short(w.to_string());
                }
            }
            Some(DeploymentState::from_view(&a.body["deployment"], state))
        }
        Err(e) if e.status() == Some(412) => {
            stale(diags, &e);
            None
        }
        Err(e) => {
            report(diags, "checking the deployment (validate_only)", &e, locate);
            None
        }
    }
}

/// A 412: the deployment's version is no longer the one Terraform read.
fn stale(diags: &mut Diagnostics, e: &CallError) {
    diags.root_error(
        "the deployment changed outside Terraform since it was read",
        format!(
            "{e}. Nothing was changed: run terraform plan again to see the change, then apply."
        ),
    );
}

/// Waits for the plan an answer started, reporting a failure on `diags`.
async fn follow(
    configured: &Configured,
    diags: &mut Diagnostics,
    id: &str,
    answer: &serde_json::Value,
    what: &str,
) -> bool {
    let Some(plan_id) = pending_plan(answer) else {
        return true;
    };
    match plans::wait(
        &configured.client,
        id,
        &plan_id,
        what,
        configured.plan_timeout,
    )
    .await
    {
        Ok(()) => true,
        Err(f) => {
            diags.root_error(f.summary(what), f.detail());
            false
        }
    }
}

/// Follows the plan `answer` started, then reads the deployment as the
/// plan left it (its endpoint and CA appear once nodes run). A failed plan
/// or read is reported; `state` is what the apply then records.
async fn settle(
    configured: &Configured,
    diags: &mut Diagnostics,
    id: &str,
    answer: &serde_json::Value,
    what: &str,
    state: DeploymentState,
) -> DeploymentState {
    if !follow(configured, diags, id, answer, what).await {
        return state;
    }
    match get_view(&configured.client, id).await {
        Ok(Some(view)) => DeploymentState::from_view(&view, &state),
        Ok(None) => {
            diags.root_error_short(format!("deployment {id} is gone after its {what}"));
            state
        }
        Err(e) => {
            report(
                diags,
                &format!("reading the deployment after its {what}"),
                &e,
                locate,
            );
            state
        }
    }
}

async fn get_view(client: &Client, id: &str) -> Result<Option<serde_json::Value>, CallError> {
    client.get_optional(&path(id)).await
}

#[async_trait]
impl Resource for DeploymentResource {
    type State<'a> = DeploymentState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let storage = block(
            "Each node's EBS volume.",
            vec![
                (
                    "size_gb",
                    required(number(), "Size per node, in GB (10 to 16384)."),
                ),
                (
                    "volume_type",
                    defaulted(string(), "`gp3` (default), `gp2`, `io1` or `io2`."),
                ),
                (
                    "iops",
                    defaulted(number(), "Provisioned IOPS (gp3, io1, io2)."),
                ),
                ("throughput", defaulted(number(), "MiB/s, gp3 only.")),
            ],
            vec![],
        );
        let node_group = block(
            "A group of identical nodes. The list is the deployment's node groups, in order.",
            vec![
                ("id", required(string(), "The group's id, such as `hot`.")),
                (
                    "roles",
                    required(
                        strings(),
                        "Elasticsearch node roles: `master`, `data_hot`, `data_warm`, `data_cold`, `data_frozen`, `data_content`, `ingest`, `ml`, `remote_cluster_client`, `transform`.",
                    ),
                ),
                (
                    "instance_type",
                    required(
                        string(),
                        "An EC2 instance type of the catalog (`floe_instance_types`); it decides the architecture (Graviton `m6g`/`r6g`/`c6g`… are arm64).",
                    ),
                ),
                (
                    "count",
                    required(number(), "Nodes in the group (1 to 100)."),
                ),
                (
                    "zone_count",
                    defaulted(
                        number(),
                        "Availability zones the nodes spread over (1 to 3).",
                    ),
                ),
                (
                    "shared_cache",
                    optional(
                        string(),
                        "`data_frozen` groups only: the searchable-snapshot cache, as a size (`50gb`) or a share of the disk (`90%`).",
                    ),
                ),
                (
                    "arch",
                    computed(string(), "`arm64` or `x86_64`, from the instance type."),
                ),
                ("vcpus", computed(number(), "vCPUs per node.")),
                ("memory_mib", computed(number(), "Memory per node, MiB.")),
                (
                    "jvm_heap_mib",
                    computed(
                        number(),
                        "The heap the platform sets: half the memory, at most 31 GiB.",
                    ),
                ),
            ],
            vec![("storage", NestedBlock::Single(storage))],
        );
        let restore = block(
            "Create only: the deployment starts as a copy of another deployment's snapshot (a clone). Kept in state with the snapshot it resolved to: later applies restore nothing. Changing it replaces the deployment; removing the block only forgets it.",
            vec![
                (
                    "source_deployment_id",
                    required(
                        string(),
                        "The deployment whose snapshot is read (same organization).",
                    ),
                ),
                (
                    "snapshot_name",
                    optional(
                        string(),
                        "A snapshot's name, or `__latest_success__` (the default).",
                    ),
                ),
                (
                    "repository",
                    optional(
                        string(),
                        "The repository to read from; by default the one the snapshot was taken into.",
                    ),
                ),
                (
                    "indices",
                    optional(
                        strings(),
                        "Indices or patterns to restore; all when absent.",
                    ),
                ),
                (
                    "mode",
                    optional(
                        string(),
                        "`restore` (default: the data is copied) or `mount` (searchable snapshots: near-instant).",
                    ),
                ),
                (
                    "rename_pattern",
                    optional(
                        string(),
                        "A regular expression over the restored indices' names (restore mode).",
                    ),
                ),
                (
                    "rename_replacement",
                    optional(string(), "Its replacement, `$1` for a group."),
                ),
                (
                    "resolved_snapshot",
                    computed(string(), "The snapshot the clone was made from."),
                ),
            ],
            vec![],
        );
        Some(Schema {
            version: 1,
            block: block(
                "An Elasticsearch deployment. Creates, updates and destroys wait for the deployment's plan. See docs/terraform/deployment.md.",
                vec![
                    ("id", computed(string(), "The deployment's id.")),
                    (
                        "name",
                        required(string(), "DNS-safe name, also the cluster's name."),
                    ),
                    (
                        "version",
                        required(string(), "Elasticsearch version, such as `8.15.3`."),
                    ),
                    (
                        "user_settings_json",
                        optional(
                            string(),
                            "`elasticsearch.yml` overrides as JSON (`jsonencode({...})`), flat or nested; only keys on the platform's allowlist.",
                        ),
                    ),
                    (
                        "snapshot_repository",
                        optional(
                            string(),
                            "The repository the cluster registers for its snapshots.",
                        ),
                    ),
                    (
                        "snapshot_policies",
                        optional(
                            strings(),
                            "Ids of the snapshot policies attached to the deployment.",
                        ),
                    ),
                    ("tags", optional(string_map(), "Tags, key to value.")),
                    (
                        "recovery_point_target",
                        optional(
                            string(),
                            "The oldest a restore drill's snapshot may be when the drill starts, as a time value (`1d`); judged in the deployment's `recovery`. Changes need no plan.",
                        ),
                    ),
                    (
                        "recovery_time_target",
                        optional(
                            string(),
                            "The longest a restore drill may take to recover the data, as a time value (`30m`). Changes need no plan.",
                        ),
                    ),
                    (
                        "drill_schedule_json",
                        optional(
                            string(),
                            "Restore drills on a schedule, as JSON (`jsonencode({schedule = {interval = \"7d\"}, drill = {...}})`): `schedule` takes `interval` or `cron` and `timezone`, `drill` what `POST …/_drill` takes. Changes need no plan. See docs/drills.md.",
                        ),
                    ),
                    (
                        "remove_snapshots_on_destroy",
                        defaulted(
                            bool(),
                            "What a destroy does with the deployment's snapshots. `false` (default): shut down (a final snapshot), then delete, keeping every snapshot in the repository (listed under its deleted deployments, restorable; the repository stays in use). `true`: delete the running deployment with its unpinned snapshots, without a final snapshot. Like any setting, it takes effect once applied.",
                        ),
                    ),
                    (
                        "status",
                        computed(string(), "`running`, `stopped`…, as the last read saw it."),
                    ),
                    (
                        "resource_version",
                        computed(
                            number(),
                            "The deployment's version; updates send it (`If-Match`).",
                        ),
                    ),
                    (
                        "endpoint",
                        computed(
                            string(),
                            "`https://host:port`: the cluster's stable endpoint; its certificate chains to `ca_certificate`.",
                        ),
                    ),
                    (
                        "ca_certificate",
                        computed(string(), "The deployment's CA (PEM)."),
                    ),
                    (
                        "username",
                        computed(string(), "The user `password` is for (`elastic`)."),
                    ),
                    (
                        "password",
                        sensitive(computed(
                            string(),
                            "The `elastic` user's password. The API gives it once, to the create: Terraform knows it only for deployments it created (not imported ones).",
                        )),
                    ),
                ],
                vec![
                    ("node_group", NestedBlock::List(node_group)),
                    ("restore_snapshot", NestedBlock::Optional(restore)),
                ],
            ),
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        if let Some(text) = config.user_settings_json.as_ref_option()
            && let Err(e) = serde_json::from_str::<serde_json::Value>(text)
        {
            diags.error(
                "user_settings_json is not JSON",
                e.to_string(),
                AttributePath::new("user_settings_json"),
            );
        }
        if let Some(text) = config.drill_schedule_json.as_ref_option()
            && let Err(e) = serde_json::from_str::<serde_json::Value>(text)
        {
            diags.error(
                "drill_schedule_json is not JSON",
                e.to_string(),
                AttributePath::new("drill_schedule_json"),
            );
        }
        if config.node_group.as_ref_option().is_some_and(Vec::is_empty) {
            diags.error_short(
                "a deployment needs at least one node_group",
                AttributePath::new("node_group"),
            );
        }
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let configured = self.0.get(diags)?;
        let id = state.id.as_ref_option()?.clone();
        match get_view(&configured.client, &id).await {
            Ok(Some(view)) => Some((DeploymentState::from_view(&view, &state), private_state)),
            Ok(None) => None,
            Err(e) => {
                report(diags, "reading the deployment", &e, locate);
                Some((state, private_state))
            }
        }
    }

    async fn plan_create<'a>(
        &self,
        diags: &mut Diagnostics,
        proposed: Self::State<'a>,
        _config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let configured = self.0.get(diags)?;
        let mut state = proposed;
        let checked = validate(&configured.client, diags, &state, None).await;
        state.fill(checked.as_ref());
        if state.remove_snapshots_on_destroy.is_null() {
            state.remove_snapshots_on_destroy = Value::Value(false);
        }
        state.id = Value::Unknown;
        state.status = Value::Unknown;
        state.resource_version = Value::Unknown;
        state.endpoint = Value::Unknown;
        state.ca_certificate = Value::Unknown;
        state.username = Value::Unknown;
        state.password = Value::Unknown;
        if let Value::Value(r) = &mut state.restore_snapshot {
            r.resolved_snapshot = Value::Unknown;
        }
        Some((state, Default::default()))
    }

    async fn plan_update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        proposed: Self::State<'a>,
        _config: Self::State<'a>,
        prior_private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        let configured = self.0.get(diags)?;
        let mut state = proposed;
        if state.remove_snapshots_on_destroy.is_null() {
            state.remove_snapshots_on_destroy = Value::Value(false);
        }
        let mut replace = Vec::new();
        // The clone's origin: the same as created keeps what it resolved
        // to; another one is another deployment; none forgets it.
        match (
            &mut state.restore_snapshot,
            prior.restore_snapshot.as_ref_option(),
        ) {
            (Value::Value(now), Some(before)) if now.declared() == before.declared() => {
                now.resolved_snapshot = before.resolved_snapshot.clone();
            }
            (Value::Value(now), _) => {
                now.resolved_snapshot = Value::Unknown;
                replace.push(AttributePath::new("restore_snapshot"));
            }
            _ => {}
        }
        if !replace.is_empty() {
            state.fill(None);
            return Some((state, prior_private, replace));
        }
        if state.spec() != prior.spec() {
            let id = prior.id.as_ref_option().cloned().unwrap_or_default();
            let version = prior.resource_version.as_ref_option().copied();
            let checked = validate(&configured.client, diags, &state, Some((&id, version))).await;
            state.fill(checked.as_ref());
            state.resource_version = Value::Unknown;
        }
        Some((state, prior_private, replace))
    }

    async fn plan_destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior: Self::State<'a>,
        prior_private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::PrivateState<'a>> {
        Some(prior_private)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned: Self::State<'a>,
        _config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let configured = self.0.get(diags)?;
        let body = match planned.body(true) {
            Ok(b) => b,
            Err(e) => {
                diags.error_short(e.message, AttributePath::new(e.attribute));
                return None;
            }
        };
        let created = match configured.client.create("/api/v1/deployments", &body).await {
            Ok(a) => a.body,
            Err(e) => {
                report(diags, "creating the deployment", &e, locate);
                return None;
            }
        };
        let state = DeploymentState::from_view(&created, &planned);
        let Some(id) = state.id.as_ref_option().cloned() else {
            diags.root_error_short("the create's answer has no deployment id");
            return None;
        };
        log::info(format!(
            "deployment {id} ({}) created",
            state
                .name
                .as_ref_option()
                .map(String::as_str)
                .unwrap_or_default()
        ));
        // From here the deployment exists: whatever its plan does, the
        // state records it (a failed plan leaves it tainted, to replace).
        let state = settle(configured, diags, &id, &created, "create", state).await;
        Some((state, private))
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        planned: Self::State<'a>,
        _config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let configured = self.0.get(diags)?;
        let id = prior.id.as_ref_option()?.clone();
        if planned.spec() == prior.spec() {
            // Only the provider's own settings changed (the destroy setting,
            // the clone's origin dropped from the configuration): no call.
            let mut state = prior;
            state.restore_snapshot = planned.restore_snapshot;
            state.remove_snapshots_on_destroy = planned.remove_snapshots_on_destroy;
            return Some((state, private));
        }
        let body = match planned.body(false) {
            Ok(b) => b,
            Err(e) => {
                diags.error_short(e.message, AttributePath::new(e.attribute));
                return None;
            }
        };
        let version = prior.resource_version.as_ref_option().copied();
        let answer = match configured
            .client
            .call(Method::PUT, &path(&id), Some(&body), version)
            .await
        {
            Ok(a) => a.body,
            Err(e) if e.status() == Some(412) => {
                stale(diags, &e);
                return None;
            }
            Err(e) => {
                report(diags, "updating the deployment", &e, locate);
                return None;
            }
        };
        let state = DeploymentState::from_view(&answer, &planned);
        let state = settle(configured, diags, &id, &answer, "update", state).await;
        Some((state, private))
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        _private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        let configured = self.0.get(diags)?;
        let id = prior.id.as_ref_option()?.clone();
        let client = &configured.client;
        let Some(view) = (match get_view(client, &id).await {
            Ok(v) => v,
            Err(e) => {
                report(diags, "reading the deployment", &e, locate);
                return None;
            }
        }) else {
            return Some(());
        };
        let remove = prior.remove_snapshots_on_destroy.as_ref_option() == Some(&true);
        // Keeping the snapshots: shut down first (a final snapshot when it
        // has a repository), then delete; the API deletes only stopped
        // deployments that way. Removing them: the running cluster deletes
        // them in the delete's own plan (no final snapshot is taken).
        if !remove && view["status"] != "stopped" {
            let answer = match client
                .call(
                    Method::POST,
                    &format!("{}/_shutdown", path(&id)),
                    None,
                    None,
                )
                .await
            {
                Ok(a) => a.body,
                Err(e) => {
                    report(diags, "shutting the deployment down", &e, locate);
                    return None;
                }
            };
            if !follow(configured, diags, &id, &answer, "shutdown").await {
                return None;
            }
        }
        let version = match get_view(client, &id).await {
            Ok(Some(v)) => v["resource_version"].as_i64(),
            Ok(None) => return Some(()),
            Err(e) => {
                report(diags, "reading the deployment", &e, locate);
                return None;
            }
        };
        let target = if remove {
            format!("{}?remove_snapshots=true", path(&id))
        } else {
            path(&id)
        };
        let answer = match client.call(Method::DELETE, &target, None, version).await {
            Ok(a) => a.body,
            Err(e) if e.is_not_found() => return Some(()),
            Err(e) => {
                report(diags, "deleting the deployment", &e, locate);
                return None;
            }
        };
        if !follow(configured, diags, &id, &answer, "delete").await {
            return None;
        }
        // The delete's plan ends with the record's removal: wait for 404.
        let started = Instant::now();
        loop {
            match get_view(client, &id).await {
                Ok(None) => return Some(()),
                Ok(Some(_)) if started.elapsed() < configured.plan_timeout => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Ok(Some(_)) => {
                    diags.root_error_short(format!(
                        "deployment {id} is still there after its delete"
                    ));
                    return None;
                }
                Err(e) => {
                    report(diags, "waiting for the deployment to go", &e, locate);
                    return None;
                }
            }
        }
    }

    async fn import<'a>(
        &self,
        _diags: &mut Diagnostics,
        id: String,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        Some((
            DeploymentState {
                id: Value::Value(id),
                ..Default::default()
            },
            Default::default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_fields_point_at_the_configuration() {
        assert_eq!(
            locate("node_groups[0].instance_type"),
            Some(
                AttributePath::new("node_group")
                    .index(0)
                    .attribute("instance_type")
            )
        );
        assert_eq!(
            locate("metadata.tags[1].key"),
            Some(AttributePath::new("tags"))
        );
        assert_eq!(
            locate("snapshot.policies[0]"),
            Some(AttributePath::new("snapshot_policies").index(0))
        );
        assert_eq!(
            locate("recovery_targets.recovery_time"),
            Some(AttributePath::new("recovery_time_target"))
        );
        assert_eq!(
            locate("restore_snapshot.snapshot_name"),
            Some(
                AttributePath::new("restore_snapshot")
                    .index(0)
                    .attribute("snapshot_name")
            )
        );
    }

    #[test]
    fn a_drill_schedule_the_api_fills_in_keeps_the_configuration_s_text() {
        let prior = DeploymentState {
            drill_schedule_json: Value::Value("{\"schedule\": {\"interval\": \"7d\"}}".into()),
            ..Default::default()
        };
        let view = json!({"id": "x", "node_groups": [],
            "drill_schedule": {"schedule": {"interval": "7d"}, "drill": {"mode": "restore"}}});
        let state = DeploymentState::from_view(&view, &prior);
        assert_eq!(state.drill_schedule_json, prior.drill_schedule_json);
        let view = json!({"id": "x", "node_groups": [],
            "drill_schedule": {"schedule": {"interval": "1d"}, "drill": {"mode": "restore"}}});
        let state = DeploymentState::from_view(&view, &prior);
        assert_eq!(
            state.drill_schedule_json,
            Value::Value(
                "{\"drill\":{\"mode\":\"restore\"},\"schedule\":{\"interval\":\"1d\"}}".into()
            )
        );
        let state = DeploymentState::from_view(&json!({"id": "x", "node_groups": []}), &prior);
        assert_eq!(state.drill_schedule_json, Value::Null);
        assert_eq!(
            locate("drill_schedule.drill.instance_type"),
            Some(AttributePath::new("drill_schedule_json"))
        );
    }

    #[test]
    fn settings_written_differently_but_equal_keep_the_configuration_s_text() {
        let prior = DeploymentState {
            user_settings_json: Value::Value("{ \"a\": 1 }".into()),
            ..Default::default()
        };
        let view = json!({"id": "x", "user_settings": {"a": 1}, "node_groups": []});
        let state = DeploymentState::from_view(&view, &prior);
        assert_eq!(state.user_settings_json, prior.user_settings_json);
        let view = json!({"id": "x", "user_settings": {"a": 2}, "node_groups": []});
        let state = DeploymentState::from_view(&view, &prior);
        assert_eq!(state.user_settings_json, Value::Value("{\"a\":2}".into()));
    }
}
