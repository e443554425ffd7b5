//! Deployments: an Elasticsearch version and its node groups.

use crate::catalog::{self, Arch};
use crate::codes::Code;
use crate::names::validate_name;
use crate::plan::PlanRef;
use crate::restore::RestoreSnapshot;
use crate::user_settings::{self, Refusal};
use crate::validation::{Invalid, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use utoipa::ToSchema;
use validator::Validate;

pub const MAX_NODE_GROUPS: usize = 20;
pub const MAX_NODES_PER_GROUP: u32 = 100;
pub const MAX_USER_SETTINGS: usize = 200;
pub const MAX_TAGS: usize = 32;
/// Policies one deployment may attach: each attachment is one more write in
/// the transaction that stores the deployment (DynamoDB takes 100).
pub const MAX_POLICIES: usize = 20;
/// A spec's size as stored, in bytes. The record holds it, and so does its
/// plan; a DynamoDB item holds at most 400 KB, so a bigger spec would be
/// accepted by the API and refused by the store.
pub const MAX_SPEC_BYTES: usize = 96 * 1024;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NodeRole {
    Master,
    DataHot,
    DataWarm,
    DataCold,
    DataFrozen,
    DataContent,
    Ingest,
    Ml,
    RemoteClusterClient,
    Transform,
}

impl NodeRole {
    /// A data tier role: its nodes hold shards.
    pub fn is_data(&self) -> bool {
        matches!(
            self,
            NodeRole::DataHot
                | NodeRole::DataWarm
                | NodeRole::DataCold
                | NodeRole::DataFrozen
                | NodeRole::DataContent
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeType {
    #[default]
    Gp3,
    Gp2,
    Io1,
    Io2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentStatus {
    Initializing,
    Reconfiguring,
    Running,
    Stopping,
    Stopped,
    Failed,
}

impl DeploymentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentStatus::Initializing => "initializing",
            DeploymentStatus::Reconfiguring => "reconfiguring",
            DeploymentStatus::Running => "running",
            DeploymentStatus::Stopping => "stopping",
            DeploymentStatus::Stopped => "stopped",
            DeploymentStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<DeploymentStatus> {
        serde_json::from_value(Value::String(s.to_string())).ok()
    }
}

/// What a client sends to create or replace a deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct DeploymentSpec {
    /// DNS-safe name, also the Elasticsearch cluster name.
    #[schema(
        example = "logs-prod",
        pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
    )]
    pub name: String,
    /// Elasticsearch version.
    #[schema(example = "8.15.3")]
    pub version: String,
    #[validate(length(min = 1, max = 20), nested)]
    pub node_groups: Vec<NodeGroup>,
    /// `elasticsearch.yml` overrides, flat (`thread_pool.snapshot.max`) or nested.
    /// Only keys on the allowlist in `docs/user-settings.md` are accepted.
    #[serde(default)]
    #[schema(value_type = Object, example = json!({"thread_pool.snapshot.max": 8}))]
    pub user_settings: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotAttachment>,
    #[serde(default)]
    pub metadata: Metadata,
    /// Create only: the new deployment starts as a copy of another one's
    /// snapshot (a clone). Not kept on the deployment; its create plan
    /// records the snapshot it restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_snapshot: Option<RestoreSnapshot>,
    /// What the operator expects of a restore, judged against the last
    /// restore drill (see `recovery` in the view). Changing them needs no
    /// plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_targets: Option<crate::drill::RecoveryTargets>,
    /// Restore drills on a schedule (see `POST …/_drill`): one schedule
    /// per deployment, kept while it runs. Changing it needs no plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drill_schedule: Option<crate::drill::DrillSchedule>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    #[schema(example = "hot")]
    pub id: String,
    pub roles: Vec<NodeRole>,
    /// An EC2 instance type from the catalog; it decides the architecture.
    #[schema(example = "m6g.xlarge")]
    pub instance_type: String,
    #[validate(range(min = 1, max = 100))]
    #[schema(example = 3, minimum = 1, maximum = 100)]
    pub count: u32,
    #[serde(default = "one")]
    #[validate(range(min = 1, max = 3))]
    #[schema(example = 3, minimum = 1, maximum = 3)]
    pub zone_count: u32,
    #[validate(nested)]
    pub storage: Storage,
    /// `data_frozen` groups only: the searchable-snapshot cache on each
    /// node's disk, as a size (`50gb`) or a share of the disk (`90%`,
    /// Elasticsearch's default for a dedicated frozen node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "90%")]
    pub shared_cache: Option<String>,
}

impl NodeGroup {
    /// The shared cache of one node in bytes: the configured size, or its
    /// share of the disk (90 % when unset); 0 for a group that is not frozen.
    pub fn shared_cache_bytes(&self) -> u64 {
        if !self.roles.contains(&NodeRole::DataFrozen) {
            return 0;
        }
        let disk = u64::from(self.storage.size_gb) * 1_000_000_000;
        match self.shared_cache.as_deref().map(parse_shared_cache) {
            Some(Ok(SharedCache::Bytes(b))) => b,
            Some(Ok(SharedCache::Percent(p))) => disk / 100 * u64::from(p),
            _ => disk / 100 * 90,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedCache {
    Bytes(u64),
    Percent(u8),
}

/// `N%` (1 to 100) or a byte size.
pub fn parse_shared_cache(s: &str) -> Result<SharedCache, String> {
    if let Some(p) = s.strip_suffix('%') {
        return match p.parse::<u8>() {
            Ok(p @ 1..=100) => Ok(SharedCache::Percent(p)),
            _ => Err("a share must be 1% to 100%".to_string()),
        };
    }
    match crate::bytesize::parse_byte_size(s)? {
        0 => Err("must not be 0".to_string()),
        b => Ok(SharedCache::Bytes(b)),
    }
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// EBS volume size per node, in GB.
    #[validate(range(min = 10, max = 16384))]
    #[schema(example = 200, minimum = 10, maximum = 16384)]
    pub size_gb: u32,
    #[serde(default)]
    pub volume_type: VolumeType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<u32>,
    /// MiB/s, gp3 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotAttachment {
    /// The repository the deployment's cluster registers (writable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub repository: Option<String>,
    /// Ids of snapshot policies attached to this deployment.
    #[serde(default)]
    pub policies: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    #[serde(default)]
    pub tags: Vec<Tag>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Tag {
    /// 1 to 64 characters, without `:` (which ends the key in the list
    /// filter `tag=key:value`).
    #[schema(example = "team")]
    pub key: String,
    /// 1 to 256 characters; may contain `:`.
    #[schema(example = "search")]
    pub value: String,
}

impl Tag {
    /// The form list filters use: `key:value`. A key holds no `:` (refused
    /// on write), so the first `:` ends it and the form names one tag.
    pub fn filter_form(&self) -> String {
        format!("{}:{}", self.key, self.value)
    }

    /// The tag a list filter names: `key:value`, split at the first `:`
    /// (`env:eu:west` is key `env`, value `eu:west`). `None` when either
    /// part is empty, which no tag can match.
    pub fn parse_filter(filter: &str) -> Option<Tag> {
        let (key, value) = filter.split_once(':')?;
        (!key.is_empty() && !value.is_empty()).then(|| Tag {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

impl DeploymentSpec {
    /// Flattens nested `user_settings` into dotted keys, the form Elasticsearch
    /// itself reports, so that equal settings compare equal however they were sent.
    pub fn normalize(&mut self) -> Result<(), Invalid> {
        let mut flat = BTreeMap::new();
        let mut p = Problems::new();
        for (k, v) in std::mem::take(&mut self.user_settings) {
            flatten_setting(&k, v, &mut flat, &mut p);
        }
        self.user_settings = flat;
        self.metadata.tags.sort();
        p.finish()
    }

    /// Checks everything that can be checked without the store.
    pub fn validate_spec(&self) -> Result<(), Invalid> {
        let mut p = Problems::new();
        if let Err(e) = Validate::validate(self) {
            p.extend_validator("", &e);
        }
        if let Some(t) = &self.recovery_targets {
            t.check(&mut p);
        }
        if let Some(s) = &self.drill_schedule {
            s.check(&mut p);
        }
        p.check("name", Code::VALIDATION_NAME, validate_name(&self.name));
        p.check(
            "version",
            Code::VALIDATION_VERSION,
            validate_es_version(&self.version),
        );

        let mut ids = BTreeSet::new();
        let (mut master, mut data) = (false, false);
        for (i, g) in self.node_groups.iter().enumerate() {
            let f = |name: &str| format!("node_groups[{i}].{name}");
            p.check(f("id"), Code::VALIDATION_NAME, validate_group_id(&g.id));
            if !ids.insert(g.id.as_str()) {
                p.push(
                    f("id"),
                    Code::VALIDATION_DUPLICATE,
                    format!("node group id '{}' is used twice", g.id),
                );
            }
            if g.roles.is_empty() {
                p.push(
                    f("roles"),
                    Code::VALIDATION_REQUIRED,
                    "must name at least one role",
                );
            }
            let unique: BTreeSet<_> = g.roles.iter().collect();
            if unique.len() != g.roles.len() {
                p.push(
                    f("roles"),
                    Code::VALIDATION_DUPLICATE,
                    "must not repeat a role",
                );
            }
            master |= g.roles.contains(&NodeRole::Master);
            data |=
                g.roles.contains(&NodeRole::DataHot) || g.roles.contains(&NodeRole::DataContent);
            if let Some(cache) = &g.shared_cache {
                if !g.roles.contains(&NodeRole::DataFrozen) {
                    p.push(
                        f("shared_cache"),
                        Code::VALIDATION_SHARED_CACHE,
                        "is for data_frozen groups only",
                    );
                } else {
                    match parse_shared_cache(cache) {
                        Err(m) => p.push(f("shared_cache"), Code::VALIDATION_SHARED_CACHE, m),
                        Ok(SharedCache::Bytes(b))
                            if b > u64::from(g.storage.size_gb) * 1_000_000_000 =>
                        {
                            p.push(
                                f("shared_cache"),
                                Code::VALIDATION_SHARED_CACHE,
                                "is larger than the node's disk (storage.size_gb)",
                            )
                        }
                        Ok(_) => {}
                    }
                }
            }
            if catalog::lookup(&g.instance_type).is_none() {
                let hint = catalog::suggest(&g.instance_type)
                    .map(|s| format!(" (did you mean {s}?)"))
                    .unwrap_or_default();
                p.push(
                    f("instance_type"),
                    Code::VALIDATION_INSTANCE_TYPE,
                    format!("'{}' is not in the instance catalog{hint}; see GET /api/v1/platform/configuration/instance-types", g.instance_type),
                );
            }
            if g.zone_count > g.count {
                p.push(
                    f("zone_count"),
                    Code::VALIDATION_RANGE,
                    "must not exceed count: every zone needs a node",
                );
            }
            check_storage(&mut p, &format!("node_groups[{i}].storage"), &g.storage);
        }
        if !self.node_groups.is_empty() && !master {
            p.push(
                "node_groups",
                Code::VALIDATION_TOPOLOGY,
                "at least one node group needs the master role",
            );
        }
        if !self.node_groups.is_empty() && !data {
            p.push(
                "node_groups",
                Code::VALIDATION_TOPOLOGY,
                "at least one node group needs the data_hot or data_content role",
            );
        }

        if self.user_settings.len() > MAX_USER_SETTINGS {
            p.push(
                "user_settings",
                Code::VALIDATION_LENGTH,
                format!("at most {MAX_USER_SETTINGS} settings"),
            );
        }
        for (k, v) in &self.user_settings {
            let field = format!("user_settings.{k}");
            if let Err(m) = validate_setting_key(k) {
                p.push(field, Code::VALIDATION_SETTING_KEY, m);
                continue;
            }
            match user_settings::check_key(k) {
                Ok(()) => {}
                Err(Refusal::PlatformOwned(owned)) => {
                    p.push(
                        field,
                        Code::VALIDATION_PLATFORM_OWNED_SETTING,
                        format!("is set by the platform ({owned}) and cannot be overridden"),
                    );
                    continue;
                }
                Err(Refusal::NotAllowed) => {
                    p.push(
                        field,
                        Code::VALIDATION_SETTING_KEY,
                        "is not among the settings a deployment may set; \
                         docs/user-settings.md lists them",
                    );
                    continue;
                }
            }
            p.check(
                field,
                Code::VALIDATION_SETTING_VALUE,
                validate_setting_value(k, v),
            );
        }

        if let Some(s) = &self.snapshot {
            if let Some(r) = &s.repository {
                p.check(
                    "snapshot.repository",
                    Code::VALIDATION_NAME,
                    validate_name(r),
                );
            }
            if s.policies.len() > MAX_POLICIES {
                p.push(
                    "snapshot.policies",
                    Code::VALIDATION_LENGTH,
                    format!("at most {MAX_POLICIES} policies"),
                );
            }
            let mut seen = BTreeSet::new();
            for (i, id) in s.policies.iter().enumerate() {
                if !crate::names::is_resource_id(id) {
                    p.push(
                        format!("snapshot.policies[{i}]"),
                        Code::VALIDATION_ID,
                        "must be a snapshot policy id",
                    );
                } else if !seen.insert(id) {
                    p.push(
                        format!("snapshot.policies[{i}]"),
                        Code::VALIDATION_DUPLICATE,
                        "is attached twice",
                    );
                }
            }
        }

        if let Some(r) = &self.restore_snapshot {
            r.check(&mut p);
        }

        if self.metadata.tags.len() > MAX_TAGS {
            p.push(
                "metadata.tags",
                Code::VALIDATION_LENGTH,
                format!("at most {MAX_TAGS} tags"),
            );
        }
        let mut keys = BTreeSet::new();
        for (i, t) in self.metadata.tags.iter().enumerate() {
            p.check(
                format!("metadata.tags[{i}].key"),
                Code::VALIDATION_TAG,
                validate_tag_text(&t.key, 64).and_then(|()| validate_tag_key(&t.key)),
            );
            p.check(
                format!("metadata.tags[{i}].value"),
                Code::VALIDATION_TAG,
                validate_tag_text(&t.value, 256),
            );
            if !keys.insert(&t.key) {
                p.push(
                    format!("metadata.tags[{i}].key"),
                    Code::VALIDATION_DUPLICATE,
                    "tag keys must be unique",
                );
            }
        }
        self.check_size(&mut p);
        p.finish()
    }

    /// Refuses a spec too big to store, naming its biggest part, so that
    /// what each field allows on its own cannot add up past the store's
    /// item limit.
    fn check_size(&self, p: &mut Problems) {
        let Ok(Value::Object(fields)) = serde_json::to_value(self) else {
            return;
        };
        let sizes: Vec<(String, usize)> = fields
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string().len()))
            .collect();
        let total: usize = sizes.iter().map(|(k, n)| k.len() + n + 4).sum();
        if total <= MAX_SPEC_BYTES {
            return;
        }
        let biggest = sizes
            .iter()
            .max_by_key(|(_, n)| *n)
            .map(|(k, _)| k.clone())
            .unwrap_or_default();
        p.push(
            biggest,
            Code::VALIDATION_TOO_LARGE,
            format!(
                "the spec is {total} bytes as stored, more than {MAX_SPEC_BYTES}; this is its biggest part"
            ),
        );
    }

    /// Whether going from `self` to `next` changes the cluster (and so needs
    /// a plan), or only the record (name, tags, policy attachments).
    pub fn needs_plan_to_become(&self, next: &DeploymentSpec) -> bool {
        self.version != next.version
            || self.node_groups != next.node_groups
            || self.user_settings != next.user_settings
            || self.snapshot.as_ref().and_then(|s| s.repository.as_ref())
                != next.snapshot.as_ref().and_then(|s| s.repository.as_ref())
    }

    pub fn repository(&self) -> Option<&str> {
        self.snapshot.as_ref().and_then(|s| s.repository.as_deref())
    }

    pub fn policies(&self) -> &[String] {
        self.snapshot
            .as_ref()
            .map(|s| s.policies.as_slice())
            .unwrap_or(&[])
    }
}

fn flatten_setting(key: &str, value: Value, out: &mut BTreeMap<String, Value>, p: &mut Problems) {
    match value {
        Value::Object(map) => {
            if map.is_empty() {
                p.push(
                    format!("user_settings.{key}"),
                    Code::VALIDATION_SETTING_VALUE,
                    "must not be an empty object",
                );
            }
            for (k, v) in map {
                flatten_setting(&format!("{key}.{k}"), v, out, p);
            }
        }
        other => {
            if out.insert(key.to_string(), other).is_some() {
                p.push(
                    format!("user_settings.{key}"),
                    Code::VALIDATION_DUPLICATE,
                    "is given twice (flat and nested)",
                );
            }
        }
    }
}

fn validate_setting_key(k: &str) -> Result<(), String> {
    let ok = !k.is_empty()
        && k.len() <= 256
        && k.split('.').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err("is not an Elasticsearch setting name (dot-separated words of letters, digits, '_' and '-')".into())
    }
}

fn validate_setting_value(key: &str, v: &Value) -> Result<(), String> {
    let scalar = |v: &Value| match v {
        Value::String(s) if s.len() > 1024 => {
            Err("string values must be at most 1024 characters".to_string())
        }
        Value::String(s) if s.contains('\n') => Err("must be a single line".to_string()),
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
        Value::Null => Err("must not be null".to_string()),
        _ => Err("must be a string, number, boolean or a list of them".to_string()),
    };
    match v {
        Value::Array(items) => {
            if items.len() > 100 {
                return Err("lists must have at most 100 items".into());
            }
            items.iter().try_for_each(scalar)?;
        }
        other => scalar(other)?,
    }
    // Thread pool sizes are whole numbers; Elasticsearch would refuse to start otherwise.
    if key.starts_with("thread_pool.")
        && (key.ends_with(".max") || key.ends_with(".size") || key.ends_with(".core"))
    {
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse::<u64>().ok(),
            _ => None,
        };
        match n {
            Some(n) if (1..=4096).contains(&n) => {}
            _ => return Err("must be a whole number from 1 to 4096".into()),
        }
    }
    Ok(())
}

fn validate_group_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 32
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !id.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err("must be 1 to 32 characters of a-z, 0-9 and '-'".into())
    }
}

fn validate_tag_text(t: &str, max: usize) -> Result<(), String> {
    if t.is_empty() || t.chars().count() > max {
        return Err(format!("must be 1 to {max} characters"));
    }
    if t.chars().any(|c| c.is_control()) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

/// A key holds no `:`: the list filter `tag=key:value` splits at the first
/// one, so `a:b:c` names key `a` with value `b:c`, and a key `a:b` would
/// make it name two tags (issue 33).
fn validate_tag_key(key: &str) -> Result<(), String> {
    if key.contains(':') {
        return Err(
            "must not contain ':' (it separates key and value in the tag=key:value filter)".into(),
        );
    }
    Ok(())
}

/// Elasticsearch versions the platform can run: 7.10 and later.
pub fn validate_es_version(v: &str) -> Result<(), String> {
    let parts: Vec<&str> = v.split('.').collect();
    let nums: Option<Vec<u32>> = if parts.len() == 3 {
        parts
            .iter()
            .map(|p| {
                if p.is_empty() || p.len() > 4 {
                    None
                } else {
                    p.parse().ok()
                }
            })
            .collect()
    } else {
        None
    };
    match nums.as_deref() {
        Some([7, minor, _]) if *minor >= 10 => Ok(()),
        Some([8 | 9, _, _]) => Ok(()),
        Some(_) => Err("must be 7.10.0 or later".into()),
        None => Err("must be a version such as 8.15.3".into()),
    }
}

/// `major.minor.patch` of a version [`validate_es_version`] accepted.
fn version_parts(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(Some(a)), Some(Some(b)), Some(Some(c)), None) => Some((a, b, c)),
        _ => None,
    }
}

/// The minor of the previous major a new major upgrades from, as Elastic
/// supports it (8.x from 7.17; 9.x from 8.18).
fn upgrade_base(major: u32) -> Option<(u32, u32)> {
    match major {
        8 => Some((7, 17)),
        9 => Some((8, 18)),
        _ => None,
    }
}

/// Whether a running cluster on `from` may be moved to `to`: never down,
/// within a major freely, and to the next major only from the minor Elastic
/// upgrades from. The error names the path that is allowed.
pub fn check_version_change(from: &str, to: &str) -> Result<(), String> {
    let (Some(f), Some(t)) = (version_parts(from), version_parts(to)) else {
        return Ok(());
    };
    if t < f {
        return Err(format!(
            "{from} cannot become {to}: Elasticsearch cannot be downgraded (restore a snapshot into a new deployment on {to} instead)"
        ));
    }
    if t.0 == f.0 {
        return Ok(());
    }
    match upgrade_base(t.0) {
        Some((major, minor)) if t.0 == f.0 + 1 && (f.0, f.1) >= (major, minor) => Ok(()),
        Some((major, minor)) => Err(format!(
            "{from} cannot become {to} directly: upgrade to {major}.{minor} first, then to {to}"
        )),
        None => Err(format!(
            "{from} cannot become {to}: no supported upgrade path"
        )),
    }
}

fn check_storage(p: &mut Problems, at: &str, s: &Storage) {
    let field = |name: &str| format!("{at}.{name}");
    match s.volume_type {
        VolumeType::Gp3 => {
            if let Some(iops) = s.iops
                && !(3000..=16000).contains(&iops)
            {
                p.push(
                    field("iops"),
                    Code::VALIDATION_RANGE,
                    "must be between 3000 and 16000 for gp3",
                );
            }
            if let Some(t) = s.throughput
                && !(125..=1000).contains(&t)
            {
                p.push(
                    field("throughput"),
                    Code::VALIDATION_RANGE,
                    "must be between 125 and 1000 MiB/s for gp3",
                );
            }
        }
        VolumeType::Gp2 => {
            if s.iops.is_some() {
                p.push(
                    field("iops"),
                    Code::VALIDATION_NOT_ALLOWED,
                    "gp2 volumes do not take provisioned iops",
                );
            }
        }
        VolumeType::Io1 | VolumeType::Io2 => {
            let max = if s.volume_type == VolumeType::Io1 {
                64000
            } else {
                256000
            };
            match s.iops {
                Some(iops) if (100..=max).contains(&iops) => {}
                Some(_) => p.push(
                    field("iops"),
                    Code::VALIDATION_RANGE,
                    format!("must be between 100 and {max}"),
                ),
                None => p.push(
                    field("iops"),
                    Code::VALIDATION_REQUIRED,
                    "is required for io1 and io2 volumes",
                ),
            }
        }
    }
    if s.throughput.is_some() && s.volume_type != VolumeType::Gp3 {
        p.push(
            field("throughput"),
            Code::VALIDATION_NOT_ALLOWED,
            "only gp3 volumes take a throughput",
        );
    }
}

/// A deployment as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    pub id: String,
    pub org: String,
    pub spec: DeploymentSpec,
    pub status: DeploymentStatus,
    /// The plan waiting for, or being run by, the plan engine.
    #[serde(default)]
    pub pending_plan: Option<PlanRef>,
    /// How to reach the cluster, as the last plan that changed its nodes
    /// recorded it (absent before the first such plan finishes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<crate::access::ClusterAccess>,
    /// The `elastic` password handed to the owner (by the create, or a
    /// reset) that the pending plan applies to the cluster, sealed like
    /// [`crate::access::ClusterAccess::sealed_password`]. Cleared when the
    /// plan that applies it succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_to_apply: Option<String>,
    /// The host of the deployment's stable endpoint (a DNS name the plans
    /// keep pointing at its nodes, or in local mode a loopback address its
    /// cluster serves for its whole life), chosen at its create and named
    /// by its node certificate. Absent for deployments created before Floe
    /// gave each one (their endpoint is a node's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The stable endpoint the pending update moves a deployment without
    /// one to (its nodes all replaced, with certificates naming it);
    /// [`Deployment::endpoint`] when that plan succeeds. The view keeps
    /// showing the node address meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_moving_to: Option<String>,
    /// A clone's source: what it was made from and still depends on.
    /// Absent for other deployments (and for clones recorded before Floe
    /// kept it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_source: Option<crate::restore::CloneSource>,
    /// What the worker's last health check saw (absent until the first
    /// check of the running deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::health::Health>,
    /// The license a plan installed or started on the cluster (a mount
    /// clone's trial); absent while it runs the basic license a new
    /// cluster starts on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<crate::license::ClusterLicense>,
    /// The last restore drill of this deployment, as it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_drill: Option<crate::drill::LastDrill>,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
}

impl Deployment {
    /// A new deployment of `spec` whose first plan is `plan` (a create):
    /// in the plan's organization, under the plan's id for it, with the
    /// status that plan runs under and the plan pending, made when the
    /// plan was.
    pub fn first_planned_by(plan: &crate::plan::Plan, spec: DeploymentSpec) -> Deployment {
        Deployment {
            id: plan.deployment_id.clone(),
            org: plan.org.clone(),
            spec,
            status: crate::plan::lifecycle::while_running(plan.kind()),
            pending_plan: Some(plan.reference()),
            access: None,
            password_to_apply: None,
            endpoint: None,
            endpoint_moving_to: None,
            clone_source: None,
            health: None,
            created: plan.created,
            updated: plan.created,
            license: None,
            last_drill: None,
        }
    }

    /// The endpoint host the nodes of its plans are made for and the
    /// records name: its own, or the one the pending update moves it to.
    pub fn endpoint_for_nodes(&self) -> Option<&str> {
        self.endpoint
            .as_deref()
            .or(self.endpoint_moving_to.as_deref())
    }
}

/// A node group as a client sees it: the spec plus what the catalog derives.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NodeGroupView {
    #[serde(flatten)]
    pub spec: NodeGroup,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,
    pub vcpus: u32,
    pub memory_mib: u32,
    /// The JVM heap the platform sets: half the RAM, at most 31 GiB.
    pub jvm_heap_mib: u32,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeploymentView {
    pub id: String,
    pub name: String,
    pub version: String,
    pub status: DeploymentStatus,
    pub node_groups: Vec<NodeGroupView>,
    #[schema(value_type = Object)]
    pub user_settings: BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotAttachment>,
    pub metadata: Metadata,
    pub plans: PlansSummary,
    /// Advice about the request that did not stop it (such as a frozen
    /// tier's cache out of proportion with the data it mounts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// How to reach the cluster: its endpoint, nodes, CA and the proxy
    /// through the control plane. Absent until the first plan that starts
    /// nodes succeeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elasticsearch: Option<crate::access::ElasticsearchAccess>,
    /// The `elastic` user's credentials: in the create's answer only (and
    /// a password reset's), never in a read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials: Option<crate::access::ElasticCredentials>,
    /// A clone's source, which it depends on: while `pinned`, the source's
    /// snapshot cannot be deleted, and the clone never writes at the
    /// source's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clone_source: Option<crate::restore::CloneSource>,
    /// What the worker's last health check (once a minute) found: every
    /// node of the spec running and in the cluster, none beyond the spec
    /// (surplus), and the cluster not red. Only the nodes decide it (see
    /// `health_warnings`). Absent until the first check of the running
    /// deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// Why the deployment is not healthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "node group hot has 1 of 2 nodes running")]
    pub health_reason: Option<String>,
    /// Each live node, as the last health check saw it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<crate::health::NodeStatus>,
    /// What the last health check found changed of what Floe owns on the
    /// cluster (its repository registrations, the license, whether the
    /// `elastic` password Floe holds is still accepted), and the
    /// maintenance EC2 has scheduled for a node (`scheduled maintenance:
    /// EC2 plans instance-retirement for instance …`, with its window).
    /// Warnings beside `healthy`, which stays about the nodes: none starts
    /// a heal, and the next plan that registers repositories restores them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(example = json!(["repository main: base_path is tenant/elsewhere on the cluster, Floe registered deployments/0193a0c4e1f07d2a8b9c0d1e2f3a4b5c"]))]
    pub health_warnings: Vec<String>,
    /// The targets a restore must meet (the spec's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_targets: Option<crate::drill::RecoveryTargets>,
    /// The restore drills run on a schedule (the spec's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drill_schedule: Option<crate::drill::DrillSchedule>,
    /// What the last restore drill proved, apart from the cluster's
    /// `healthy`: its status, time and figures, and whether it met the
    /// targets. A recovery warning never starts a heal. Absent before the
    /// first drill and without targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<crate::drill::RecoveryView>,
    /// The Elasticsearch license a plan put in force on the cluster (a
    /// mount clone's trial), with its expiry; absent on the basic license
    /// a new cluster runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<crate::license::LicenseView>,
    pub resource_version: u64,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PlansSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PlanRef>,
}

impl DeploymentView {
    pub fn new(d: &Deployment, version: u64) -> DeploymentView {
        DeploymentView::of(d.clone(), version)
    }

    /// The view of a deployment read to be shown: its fields move into the
    /// view rather than being copied (a list page shows a hundred).
    pub fn of(d: Deployment, version: u64) -> DeploymentView {
        let elasticsearch = d.access.as_ref().filter(|a| !a.nodes.is_empty()).map(|a| {
            crate::access::ElasticsearchAccess::of(&d.id, a, d.endpoint.as_deref())
                .moving_to(d.endpoint_moving_to.as_deref())
        });
        let recovery = crate::drill::RecoveryView::of(
            d.spec.recovery_targets.as_ref(),
            d.last_drill.as_ref(),
            d.health.as_ref(),
        );
        let (healthy, health_reason, nodes, health_warnings) = match d.health {
            Some(h) => (Some(h.healthy), h.reason, h.nodes, h.warnings),
            None => (None, None, Vec::new(), Vec::new()),
        };
        let spec = d.spec;
        let node_groups = spec
            .node_groups
            .into_iter()
            .map(|g| {
                // Stored specs were validated, so the type is in the catalog;
                // a type later removed from it is shown without derived figures
                // rather than failing the whole read.
                let t = catalog::lookup(&g.instance_type);
                NodeGroupView {
                    arch: t.map(|t| t.arch),
                    vcpus: t.map(|t| t.vcpus).unwrap_or(0),
                    memory_mib: t.map(|t| t.memory_mib).unwrap_or(0),
                    jvm_heap_mib: t.map(|t| catalog::jvm_heap_mib(t.memory_mib)).unwrap_or(0),
                    spec: g,
                }
            })
            .collect();
        DeploymentView {
            id: d.id,
            name: spec.name,
            version: spec.version,
            status: d.status,
            node_groups,
            user_settings: spec.user_settings,
            snapshot: spec.snapshot,
            metadata: spec.metadata,
            plans: PlansSummary {
                pending: d.pending_plan,
            },
            warnings: Vec::new(),
            elasticsearch,
            credentials: None,
            clone_source: d.clone_source,
            healthy,
            health_reason,
            nodes,
            health_warnings,
            recovery,
            recovery_targets: spec.recovery_targets,
            drill_schedule: spec.drill_schedule,
            license: d
                .license
                .map(|l| crate::license::LicenseView::new(l, chrono::Utc::now())),
            resource_version: version,
            created: d.created,
            updated: d.updated,
        }
    }
}

#[cfg(test)]
mod version_change_tests {
    use super::check_version_change;

    #[test]
    fn versions_move_only_along_elastics_upgrade_paths() {
        for (from, to) in [
            ("8.15.3", "8.15.3"),
            ("8.15.3", "8.15.4"),
            ("8.15.3", "8.17.0"),
            ("7.17.25", "8.15.3"),
            ("8.18.2", "9.0.0"),
            ("8.19.1", "9.1.0"),
        ] {
            assert_eq!(check_version_change(from, to), Ok(()), "{from} -> {to}");
        }
        let down = check_version_change("8.15.3", "8.14.0").expect_err("downgrade");
        assert!(down.contains("downgraded"), "{down}");
        let jump = check_version_change("7.16.3", "8.15.3").expect_err("from 7.16");
        assert!(jump.contains("upgrade to 7.17 first"), "{jump}");
        let two = check_version_change("7.17.25", "9.0.0").expect_err("two majors");
        assert!(two.contains("upgrade to 8.18 first"), "{two}");
    }
}

#[cfg(test)]
mod user_settings_tests {
    use super::DeploymentSpec;
    use crate::codes::Code;
    use serde_json::{Value, json};

    /// The codes validation gives, by field, for a spec with these settings.
    fn refusals(settings: Value) -> Vec<(String, Code, String)> {
        let mut spec: DeploymentSpec = serde_json::from_value(json!({
            "name": "logs", "version": "8.15.3",
            "node_groups": [{"id": "hot", "roles": ["master", "data_hot"],
                             "instance_type": "m6g.xlarge", "count": 1,
                             "storage": {"size_gb": 100}}],
            "user_settings": settings,
        }))
        .expect("spec");
        let normalized = spec.normalize();
        assert!(normalized.is_ok(), "{normalized:?}");
        match spec.validate_spec() {
            Ok(()) => Vec::new(),
            Err(e) => {
                e.0.into_iter()
                    .map(|f| (f.field, f.code, f.message))
                    .collect()
            }
        }
    }

    /// Issue 33: a key off the allowlist is a 400 on `user_settings.<key>`
    /// that says so, where before the denylist let it through.
    #[test]
    fn keys_off_the_allowlist_are_refused_by_name() {
        let got = refusals(json!({
            "xpack.security.authc.anonymous.roles": "superuser",
            "reindex": {"remote": {"whitelist": "169.254.169.254:80"}},
        }));
        let fields: Vec<&str> = got.iter().map(|(f, _, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "user_settings.reindex.remote.whitelist",
                "user_settings.xpack.security.authc.anonymous.roles",
            ]
        );
        for (field, code, message) in &got {
            assert_eq!(*code, Code::VALIDATION_SETTING_KEY, "{field}");
            assert!(
                message.contains("not among the settings a deployment may set")
                    && message.contains("docs/user-settings.md"),
                "{message}"
            );
        }
    }

    #[test]
    fn platform_owned_keys_keep_their_own_code() {
        let got = refusals(json!({"cluster.name": "mine", "node.attr.floe_node_group": "x"}));
        assert_eq!(got.len(), 2, "{got:?}");
        for (field, code, message) in &got {
            assert_eq!(*code, Code::VALIDATION_PLATFORM_OWNED_SETTING, "{field}");
            assert!(message.contains("is set by the platform"), "{message}");
        }
    }

    #[test]
    fn allowed_keys_pass_and_their_values_are_still_checked() {
        assert_eq!(
            refusals(json!({
                "thread_pool": {"snapshot": {"max": 8}},
                "indices.recovery.max_bytes_per_sec": "200mb",
                "node.attr.rack": ["r1", "r2"],
                "logger.org.elasticsearch.discovery": "DEBUG",
            })),
            []
        );
        let got = refusals(json!({
            "thread_pool.write.size": 0,
            "logger.level": "a\nb",
            "node.attr.rack": {"deep": null},
        }));
        let codes: Vec<(&str, Code)> = got.iter().map(|(f, c, _)| (f.as_str(), *c)).collect();
        assert_eq!(
            codes,
            [
                ("user_settings.logger.level", Code::VALIDATION_SETTING_VALUE),
                (
                    "user_settings.node.attr.rack.deep",
                    Code::VALIDATION_SETTING_VALUE
                ),
                (
                    "user_settings.thread_pool.write.size",
                    Code::VALIDATION_SETTING_VALUE
                ),
            ]
        );
    }
}
