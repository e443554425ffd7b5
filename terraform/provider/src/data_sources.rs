//! Data sources: a deployment, the deployments the list's filters select,
//! the instance-type catalog, a deployment's snapshot (its latest
//! successful one by default), and a deployment's restore drills.

use crate::client::encode;
use crate::common::*;
use crate::schema::*;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tf_provider::schema::Schema;
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, DataSource, Diagnostics};

fn no_fields(_: &str) -> Option<AttributePath> {
    None
}

// ---- floe_deployment ------------------------------------------------------

pub struct DeploymentData(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct GroupSummary {
    pub id: Str,
    pub instance_type: Str,
    pub count: Num,
    pub arch: Str,
    pub roles: StrList,
}

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct DeploymentDataState {
    pub id: Str,
    pub name: Str,
    pub version: Str,
    pub status: Str,
    pub healthy: Flag,
    pub endpoint: Str,
    pub ca_certificate: Str,
    pub snapshot_repository: Str,
    pub snapshot_policies: StrList,
    pub tags: Value<BTreeMap<String, Str>>,
    pub resource_version: Num,
    pub node_groups: Value<Vec<GroupSummary>>,
}

fn summary_attributes() -> Vec<(&'static str, tf_provider::schema::Attribute)> {
    vec![
        ("id", computed(string(), "The deployment's id.")),
        ("name", computed(string(), "Its name.")),
        ("version", computed(string(), "Its Elasticsearch version.")),
        ("status", computed(string(), "`running`, `stopped`…")),
        (
            "healthy",
            computed(
                bool(),
                "What the last health check found; null before the first.",
            ),
        ),
        (
            "endpoint",
            computed(string(), "The cluster's stable endpoint."),
        ),
    ]
}

fn group_summaries(view: &serde_json::Value) -> Value<Vec<GroupSummary>> {
    Value::Value(
        view["node_groups"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| GroupSummary {
                id: str_of(&g["id"]),
                instance_type: str_of(&g["instance_type"]),
                count: num_of(&g["count"]),
                arch: str_of(&g["arch"]),
                roles: list_of(&g["roles"]),
            })
            .collect(),
    )
}

fn tags_of(view: &serde_json::Value) -> Value<BTreeMap<String, Str>> {
    Value::Value(
        view["metadata"]["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| Some((t["key"].as_str()?.to_string(), str_of(&t["value"]))))
            .collect(),
    )
}

impl DeploymentDataState {
    fn from_view(view: &serde_json::Value) -> DeploymentDataState {
        DeploymentDataState {
            id: str_of(&view["id"]),
            name: str_of(&view["name"]),
            version: str_of(&view["version"]),
            status: str_of(&view["status"]),
            healthy: flag_of(&view["healthy"]),
            endpoint: str_of(&view["elasticsearch"]["endpoint"]),
            ca_certificate: str_of(&view["elasticsearch"]["ca_certificate"]),
            snapshot_repository: str_of(&view["snapshot"]["repository"]),
            snapshot_policies: match view["snapshot"]["policies"].as_array() {
                Some(_) => list_of(&view["snapshot"]["policies"]),
                None => Value::Value(vec![]),
            },
            tags: tags_of(view),
            resource_version: num_of(&view["resource_version"]),
            node_groups: group_summaries(view),
        }
    }
}

#[async_trait]
impl DataSource for DeploymentData {
    type State<'a> = DeploymentDataState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let mut attributes = summary_attributes();
        attributes[0] = ("id", required(string(), "The deployment's id."));
        attributes.extend([
            (
                "ca_certificate",
                computed(string(), "The deployment's CA (PEM)."),
            ),
            (
                "snapshot_repository",
                computed(string(), "The repository its cluster writes snapshots to."),
            ),
            (
                "snapshot_policies",
                computed(strings(), "Ids of its snapshot policies."),
            ),
            ("tags", computed(string_map(), "Its tags.")),
            ("resource_version", computed(number(), "Its version.")),
            (
                "node_groups",
                computed_objects(
                    "Its node groups.",
                    vec![
                        ("id", computed(string(), "The group's id.")),
                        ("instance_type", computed(string(), "Its instance type.")),
                        ("count", computed(number(), "Its nodes.")),
                        ("arch", computed(string(), "`arm64` or `x86_64`.")),
                        ("roles", computed(strings(), "Its roles.")),
                    ],
                ),
            ),
        ]);
        Some(Schema {
            version: 1,
            block: block(
                "One deployment, by id. See docs/terraform/data-sources.md.",
                attributes,
                vec![],
            ),
        })
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let configured = self.0.get(diags)?;
        let id = config.id.as_ref_option()?.clone();
        match configured
            .client
            .get(&format!("/api/v1/deployments/{}", encode(&id)))
            .await
        {
            Ok(view) => Some(DeploymentDataState::from_view(&view)),
            Err(e) => {
                report(diags, "reading the deployment", &e, no_fields);
                None
            }
        }
    }
}

// ---- floe_deployments -----------------------------------------------------

pub struct DeploymentsData(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct Summary {
    pub id: Str,
    pub name: Str,
    pub version: Str,
    pub status: Str,
    pub healthy: Flag,
    pub endpoint: Str,
}

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct DeploymentsState {
    pub name: Str,
    pub status: Str,
    pub tag: Str,
    pub ids: StrList,
    pub deployments: Value<Vec<Summary>>,
}

#[async_trait]
impl DataSource for DeploymentsData {
    type State<'a> = DeploymentsState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "The deployments the list's filters select (every page). See docs/terraform/data-sources.md.",
                vec![
                    (
                        "name",
                        optional(string(), "Only deployments whose name starts with this."),
                    ),
                    (
                        "status",
                        optional(string(), "Only deployments in this status."),
                    ),
                    (
                        "tag",
                        optional(string(), "Only deployments with this tag, as `key:value`."),
                    ),
                    ("ids", computed(strings(), "The selected deployments' ids.")),
                    (
                        "deployments",
                        computed_objects("The selected deployments.", summary_attributes()),
                    ),
                ],
                vec![],
            ),
        })
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let configured = self.0.get(diags)?;
        let mut query = Vec::new();
        for (key, value) in [
            ("name", &config.name),
            ("status", &config.status),
            ("tag", &config.tag),
        ] {
            if let Some(v) = value.as_ref_option() {
                query.push(format!("{key}={}", encode(v)));
            }
        }
        let listing = if query.is_empty() {
            "/api/v1/deployments".to_string()
        } else {
            format!("/api/v1/deployments?{}", query.join("&"))
        };
        let views = match configured.client.list_all(&listing, "deployments").await {
            Ok(v) => v,
            Err(e) => {
                let locate: fn(&str) -> Option<AttributePath> = |f| match f {
                    "name" | "status" | "tag" => Some(AttributePath::new(f.to_string())),
                    _ => None,
                };
                report(diags, "listing the deployments", &e, locate);
                return None;
            }
        };
        let deployments: Vec<Summary> = views
            .iter()
            .map(|v| Summary {
                id: str_of(&v["id"]),
                name: str_of(&v["name"]),
                version: str_of(&v["version"]),
                status: str_of(&v["status"]),
                healthy: flag_of(&v["healthy"]),
                endpoint: str_of(&v["elasticsearch"]["endpoint"]),
            })
            .collect();
        Some(DeploymentsState {
            ids: Value::Value(deployments.iter().map(|d| d.id.clone()).collect()),
            deployments: Value::Value(deployments),
            ..config
        })
    }
}

// ---- floe_instance_types --------------------------------------------------

pub struct InstanceTypesData(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct InstanceType {
    pub name: Str,
    pub family: Str,
    pub arch: Str,
    pub vcpus: Num,
    pub memory_mib: Num,
    pub jvm_heap_mib: Num,
}

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct InstanceTypesState {
    pub arch: Str,
    pub names: StrList,
    pub instance_types: Value<Vec<InstanceType>>,
}

#[async_trait]
impl DataSource for InstanceTypesData {
    type State<'a> = InstanceTypesState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "The platform's instance-type catalog. See docs/terraform/data-sources.md.",
                vec![
                    (
                        "arch",
                        optional(string(), "Only `arm64` (Graviton) or `x86_64` types."),
                    ),
                    ("names", computed(strings(), "The types' names.")),
                    (
                        "instance_types",
                        computed_objects(
                            "The types.",
                            vec![
                                ("name", computed(string(), "Such as `m6g.xlarge`.")),
                                ("family", computed(string(), "Such as `m6g`.")),
                                ("arch", computed(string(), "`arm64` or `x86_64`.")),
                                ("vcpus", computed(number(), "vCPUs.")),
                                ("memory_mib", computed(number(), "Memory, MiB.")),
                                (
                                    "jvm_heap_mib",
                                    computed(number(), "The heap the platform sets on it."),
                                ),
                            ],
                        ),
                    ),
                ],
                vec![],
            ),
        })
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let configured = self.0.get(diags)?;
        let listing = match config.arch.as_ref_option() {
            Some(a) => format!(
                "/api/v1/platform/configuration/instance-types?arch={}",
                encode(a)
            ),
            None => "/api/v1/platform/configuration/instance-types".to_string(),
        };
        let answer = match configured.client.get(&listing).await {
            Ok(a) => a,
            Err(e) => {
                let locate: fn(&str) -> Option<AttributePath> =
                    |f| (f == "arch").then(|| AttributePath::new("arch"));
                report(diags, "listing the instance types", &e, locate);
                return None;
            }
        };
        let types: Vec<InstanceType> = answer["instance_types"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| InstanceType {
                name: str_of(&t["name"]),
                family: str_of(&t["family"]),
                arch: str_of(&t["arch"]),
                vcpus: num_of(&t["vcpus"]),
                memory_mib: num_of(&t["memory_mib"]),
                jvm_heap_mib: num_of(&t["jvm_heap_mib"]),
            })
            .collect();
        Some(InstanceTypesState {
            names: Value::Value(types.iter().map(|t| t.name.clone()).collect()),
            instance_types: Value::Value(types),
            ..config
        })
    }
}

// ---- floe_snapshot --------------------------------------------------------

pub struct SnapshotData(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct SnapshotState {
    pub deployment_id: Str,
    pub name: Str,
    pub snapshot: Str,
    pub repository: Str,
    pub uuid: Str,
    pub state: Str,
    pub start_time: Str,
    pub end_time: Str,
    pub indices: StrList,
    pub size_in_bytes: Num,
    pub policy_id: Str,
}

/// The snapshot name the API resolves to its deployment's newest
/// successful snapshot.
const LATEST_SUCCESS: &str = "__latest_success__";

#[async_trait]
impl DataSource for SnapshotData {
    type State<'a> = SnapshotState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "One of a deployment's snapshots: its latest successful one by default. See docs/terraform/data-sources.md.",
                vec![
                    ("deployment_id", required(string(), "The deployment.")),
                    (
                        "name",
                        optional(
                            string(),
                            "A snapshot's name; `__latest_success__` (the default) is the newest successful one.",
                        ),
                    ),
                    ("snapshot", computed(string(), "The snapshot's name.")),
                    ("repository", computed(string(), "The repository it is in.")),
                    ("uuid", computed(string(), "Its uuid.")),
                    (
                        "state",
                        computed(string(), "`SUCCESS`, `PARTIAL`, `FAILED`…"),
                    ),
                    (
                        "start_time",
                        computed(string(), "When it started (RFC 3339)."),
                    ),
                    ("end_time", computed(string(), "When it ended.")),
                    ("indices", computed(strings(), "The indices it holds.")),
                    ("size_in_bytes", computed(number(), "Its size, when known.")),
                    (
                        "policy_id",
                        computed(
                            string(),
                            "The policy that took it; null for a manual snapshot.",
                        ),
                    ),
                ],
                vec![],
            ),
        })
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let configured = self.0.get(diags)?;
        let id = config.deployment_id.as_ref_option()?.clone();
        let name = config
            .name
            .as_ref_option()
            .cloned()
            .unwrap_or_else(|| LATEST_SUCCESS.to_string());
        let view = if name == LATEST_SUCCESS {
            latest_success(configured, &id).await
        } else {
            configured
                .client
                .get(&format!(
                    "/api/v1/deployments/{}/snapshots/{}",
                    encode(&id),
                    encode(&name)
                ))
                .await
                .map(Some)
        };
        let view = match view {
            Ok(Some(v)) => v,
            Ok(None) => {
                diags.error(
                    "no successful snapshot",
                    format!("deployment {id} has no successful snapshot yet"),
                    AttributePath::new("deployment_id"),
                );
                return None;
            }
            Err(e) => {
                report(diags, "reading the snapshot", &e, no_fields);
                return None;
            }
        };
        Some(SnapshotState {
            snapshot: str_of(&view["snapshot"]),
            repository: str_of(&view["repository"]),
            uuid: str_of(&view["uuid"]),
            state: str_of(&view["state"]),
            start_time: str_of(&view["start_time"]),
            end_time: str_of(&view["end_time"]),
            indices: list_of(&view["indices"]),
            size_in_bytes: num_of(&view["size_in_bytes"]),
            policy_id: str_of(&view["policy_id"]),
            ..config
        })
    }
}

/// The newest successful snapshot that is not missing: the list is newest
/// first, so the first page usually holds it.
async fn latest_success(
    configured: &Configured,
    id: &str,
) -> Result<Option<serde_json::Value>, crate::client::CallError> {
    let mut cursor: Option<String> = None;
    loop {
        let page_path = match &cursor {
            Some(c) => format!(
                "/api/v1/deployments/{}/snapshots?size=100&cursor={}",
                encode(id),
                encode(c)
            ),
            None => format!("/api/v1/deployments/{}/snapshots?size=100", encode(id)),
        };
        let page = configured.client.get(&page_path).await?;
        if let Some(s) = page["snapshots"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["state"] == "SUCCESS" && s["missing"] != true)
        {
            return Ok(Some(s.clone()));
        }
        match page["next_cursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(None),
        }
    }
}

// ---- floe_drills ----------------------------------------------------------

pub struct DrillsData(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct DrillSummary {
    pub id: Str,
    pub status: Str,
    pub mode: Str,
    pub snapshot: Str,
    pub started: Str,
    pub finished: Str,
    pub recovery_point_seconds: Num,
    pub recovery_time_millis: Num,
    pub bytes_recovered: Num,
    pub failure_step: Str,
    pub failure_reason: Str,
}

#[derive(Serialize, Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct DrillsState {
    pub deployment_id: Str,
    pub limit: Num,
    pub last_status: Str,
    pub drills: Value<Vec<DrillSummary>>,
}

/// How many drills a read returns when `limit` is unset, and at most.
const DEFAULT_DRILLS: i64 = 10;
const MAX_DRILLS: i64 = 100;

#[async_trait]
impl DataSource for DrillsData {
    type State<'a> = DrillsState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "A deployment's restore drills, newest first. See docs/terraform/data-drills.md.",
                vec![
                    (
                        "deployment_id",
                        required(string(), "The deployment drilled."),
                    ),
                    (
                        "limit",
                        optional(
                            number(),
                            "How many of the newest drills to read: 1 to 100, 10 by default.",
                        ),
                    ),
                    (
                        "last_status",
                        computed(
                            string(),
                            "The newest drill's status (`running`, `passed`, `failed`); null before the first drill.",
                        ),
                    ),
                    (
                        "drills",
                        computed_objects(
                            "The drills, newest first.",
                            vec![
                                ("id", computed(string(), "The drill's id.")),
                                (
                                    "status",
                                    computed(string(), "`running`, `passed` or `failed`."),
                                ),
                                ("mode", computed(string(), "`restore` or `mount`.")),
                                ("snapshot", computed(string(), "The snapshot restored.")),
                                ("started", computed(string(), "When it started (RFC 3339).")),
                                (
                                    "finished",
                                    computed(string(), "When it ended; null while it runs."),
                                ),
                                (
                                    "recovery_point_seconds",
                                    computed(
                                        number(),
                                        "The snapshot's age when the drill started.",
                                    ),
                                ),
                                (
                                    "recovery_time_millis",
                                    computed(
                                        number(),
                                        "From the drill's start to all data recovered; null if it never got there.",
                                    ),
                                ),
                                (
                                    "bytes_recovered",
                                    computed(number(), "What the restore read."),
                                ),
                                (
                                    "failure_step",
                                    computed(string(), "A failed drill's failed step."),
                                ),
                                (
                                    "failure_reason",
                                    computed(string(), "Why it failed, naming the index."),
                                ),
                            ],
                        ),
                    ),
                ],
                vec![],
            ),
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        if let Value::Value(n) = config.limit
            && !(1..=MAX_DRILLS).contains(&n)
        {
            diags.error(
                "limit is out of range",
                format!("limit must be 1 to {MAX_DRILLS}, not {n}"),
                AttributePath::new("limit"),
            );
            return None;
        }
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let configured = self.0.get(diags)?;
        let Some(id) = config.deployment_id.as_ref_option() else {
            diags.error_short(
                "deployment_id is required",
                AttributePath::new("deployment_id"),
            );
            return None;
        };
        let limit = config
            .limit
            .as_ref_option()
            .copied()
            .unwrap_or(DEFAULT_DRILLS)
            .clamp(1, MAX_DRILLS);
        let path = format!("/api/v1/deployments/{}/drills?size={limit}", encode(id));
        let page = match configured.client.get(&path).await {
            Ok(p) => p,
            Err(e) => {
                let locate: fn(&str) -> Option<AttributePath> =
                    |_| Some(AttributePath::new("deployment_id"));
                report(diags, "reading the deployment's drills", &e, locate);
                return None;
            }
        };
        let drills: Vec<DrillSummary> = page["drills"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| DrillSummary {
                id: str_of(&d["id"]),
                status: str_of(&d["status"]),
                mode: str_of(&d["mode"]),
                snapshot: str_of(&d["snapshot"]),
                started: str_of(&d["started"]),
                finished: str_of(&d["finished"]),
                recovery_point_seconds: num_of(&d["recovery_point_seconds"]),
                recovery_time_millis: num_of(&d["recovery_time"]["total_millis"]),
                bytes_recovered: num_of(&d["bytes_recovered"]),
                failure_step: str_of(&d["failure"]["step"]),
                failure_reason: str_of(&d["failure"]["reason"]),
            })
            .collect();
        Some(DrillsState {
            last_status: drills.first().map_or(Value::Null, |d| d.status.clone()),
            drills: Value::Value(drills),
            ..config
        })
    }
}
