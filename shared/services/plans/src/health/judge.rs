//! The judgement of one deployment's health: from the facts a probe read
//! to what the record says and which nodes a heal replaces. Pure, so that
//! every case is a row of a table test.

use crate::steps::heal::launch_zone;
use crate::steps::{is_gone, spread};
use chrono::{DateTime, Utc};
use floe_compute::{Instance, InstanceState, ScheduledEvent, TAG_NODE_GROUP};
use floe_domain::deployment::DeploymentSpec;
use floe_domain::health::NodeStatus;
use floe_domain::plan::Replacement;
use floe_domain::restore::CloneSource;
use floe_elastic::{HealthStatus, NodeRow, RepositoryRegistration};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The license Floe's nodes run: none is installed, so each cluster runs
/// the self-generated `basic` one it starts with.
pub const FLOE_LICENSE: &str = "basic";

/// The settings of Floe's repository registrations the check compares
/// with the cluster's (the throttles and the client are the tenant's to
/// tune; where a repository's snapshots are is Floe's).
pub const OWNED_SETTINGS: &[&str] = &["bucket", "location", "base_path"];

/// What one probe of a deployment found, and the nodes to replace.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub healthy: bool,
    pub problems: Vec<String>,
    pub nodes: Vec<NodeStatus>,
    pub replacements: Vec<Replacement>,
    /// Nodes beyond the spec (also named as lost in `replacements`): a
    /// heal moves their shards off before it terminates them.
    pub surplus: Vec<String>,
    /// What a tenant changed of what Floe owns on the cluster: shown
    /// beside `healthy`, never a reason to heal.
    pub warnings: Vec<String>,
}

/// What a probe read of one deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// Its instances, in every state.
    pub instances: Vec<Instance>,
    /// The running instances that fail a status check, with the names of
    /// the failing checks.
    pub impaired: BTreeMap<String, Vec<&'static str>>,
    /// The maintenance EC2 has scheduled for running instances (still to
    /// come), by instance: warnings, never a heal (the node works until
    /// AWS acts; a retired node is then lost and healed as any other).
    pub scheduled: BTreeMap<String, Vec<ScheduledEvent>>,
    pub cluster: ClusterFacts,
    /// The instances the deployment's record names as its nodes (what its
    /// last plan recorded): of a group with more nodes than its spec,
    /// these are kept, and the others are surplus.
    pub recorded: BTreeSet<String>,
    /// What Floe owns on the cluster, and what the cluster reports of it.
    pub owned: OwnedFacts,
    /// A mount clone's source snapshot, as its record says now; `None`
    /// for any other deployment, or when the record could not be read.
    pub mount_source: Option<MountSourceFacts>,
}

/// The snapshot a mount clone's indices are mounted from (its record's
/// `clone_source`), and what the source's snapshot record says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct MountSourceFacts {
    pub source: CloneSource,
    pub record: SourceRecord,
}

/// What the store holds of a mount clone's source snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRecord {
    /// Recorded, and not found gone from its repository.
    Present,
    /// Found missing from its repository (deleted outside Floe) at that
    /// time.
    Missing(DateTime<Utc>),
    /// No longer recorded.
    Unrecorded,
}

/// Floe's repository registrations and license, beside what the cluster
/// reports (`GET _snapshot`, `GET _license`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedFacts {
    /// Each repository Floe registered, by its name on the cluster.
    pub repositories: Vec<(String, RepositoryRegistration)>,
    /// What `GET _snapshot` reported; `None` when it could not be read.
    pub registered: Option<BTreeMap<String, Value>>,
    /// The license type `GET _license` reported; `None` when unread.
    pub license: Option<String>,
    /// The license type Floe's plans put in force (a mount clone's trial);
    /// `None`: the basic license a new cluster runs.
    pub expected_license: Option<String>,
    /// When the license `GET _license` reported ends (`None`: never, or unread).
    pub license_expiry: Option<DateTime<Utc>>,
    /// When the cluster was asked.
    pub checked: DateTime<Utc>,
}

/// What the cluster said, from a node that runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterFacts {
    /// No node answered; why.
    Unreachable(String),
    /// A node answered 401 to the `elastic` password Floe holds (a tenant
    /// changed it): what it said. Floe cannot read the cluster, so the
    /// nodes are judged by their instances alone.
    Refused(String),
    /// A node answered 403 for a license no longer active (a trial that
    /// ended): Elasticsearch refuses its health and stats APIs, so the
    /// nodes are judged by their instances alone. What it said.
    Unlicensed(String),
    Reached {
        /// Its members (`_cat/nodes`); `None` when they could not be read.
        members: Option<Vec<NodeRow>>,
        /// Its health status, or why it could not be read.
        health: Result<HealthStatus, String>,
    },
}

/// Judges `facts` against `spec`: which nodes are missing, stopped or
/// impaired (each a problem, and a replacement in the zone that lacks it),
/// what the cluster says of itself, and each node's status.
pub fn judge(spec: &DeploymentSpec, facts: &Facts) -> Observation {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let members = match &facts.cluster {
        ClusterFacts::Unreachable(e) => {
            problems.push(format!("the cluster cannot be reached: {e}"));
            None
        }
        ClusterFacts::Refused(e) => {
            warnings.push(format!(
                "the cluster refuses the elastic password Floe holds (401: {e}); reset the password to give Floe back its access"
            ));
            None
        }
        ClusterFacts::Unlicensed(e) => {
            warnings.push(format!(
                "the cluster's license is no longer active (403: {e}): Elasticsearch refuses its health and stats, and searchable snapshots; install a license"
            ));
            None
        }
        ClusterFacts::Reached { members, health } => {
            match health {
                Ok(HealthStatus::Red) => problems.push("the cluster's health is red".to_string()),
                Ok(_) => {}
                Err(e) => problems.push(format!("the cluster's health cannot be read: {e}")),
            }
            members.as_ref()
        }
    };
    let mut nodes = Vec::new();
    let mut replacements = Vec::new();
    let mut surplus = Vec::new();
    let mut expected_total = 0u32;
    for g in &spec.node_groups {
        expected_total += g.count;
        let judged = judge_group(spec, g, facts, members);
        problems.extend(judged.problems);
        nodes.extend(judged.nodes);
        replacements.extend(judged.replacements);
        surplus.extend(judged.surplus);
    }
    // Instances of the deployment in no node group of the spec (a group
    // removed, a tag changed by hand): surplus too. A heal takes them out
    // through the spec's first group (it needs a group's template).
    let orphans: Vec<&Instance> = facts
        .instances
        .iter()
        .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
        .filter(|i| {
            !spec
                .node_groups
                .iter()
                .any(|g| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
        })
        .collect();
    if let (Some(first), false) = (spec.node_groups.first(), orphans.is_empty()) {
        let ids: Vec<String> = orphans.iter().map(|i| i.id.clone()).collect();
        problems.push(format!(
            "{} not in any node group of the spec: surplus",
            ids.join(", ")
        ));
        surplus.extend(ids.iter().cloned());
        replacements.push(Replacement {
            group: first.id.clone(),
            zone: 0,
            count: 0,
            lost: ids,
        });
    }
    if let Some(members) = members {
        let absent: Vec<&str> = nodes
            .iter()
            .filter(|n| n.state == "running" && !n.joined)
            .map(|n| n.instance_id.as_str())
            .collect();
        if !absent.is_empty() {
            problems.push(format!("{} not in the cluster", absent.join(", ")));
        }
        if (members.len() as u32) < expected_total {
            problems.push(format!(
                "the cluster has {} of {expected_total} nodes",
                members.len()
            ));
        }
    }
    if let ClusterFacts::Reached { .. } = &facts.cluster {
        warnings.extend(owned_warnings(&facts.owned));
    }
    // Read from the store, not the cluster: judged however the cluster
    // answered.
    warnings.extend(facts.mount_source.as_ref().and_then(mount_source_warning));
    warnings.extend(scheduled_warnings(facts));
    Observation {
        healthy: problems.is_empty(),
        problems,
        nodes,
        replacements,
        surplus,
        warnings,
    }
}

/// One warning per maintenance EC2 has scheduled for a node: what, when,
/// and what EC2 says of it.
fn scheduled_warnings(facts: &Facts) -> Vec<String> {
    let mut warnings = Vec::new();
    for (id, events) in &facts.scheduled {
        let group = facts
            .instances
            .iter()
            .find(|i| &i.id == id)
            .and_then(|i| i.tags.get(TAG_NODE_GROUP))
            .map(|g| format!(" of node group {g}"))
            .unwrap_or_default();
        for e in events {
            let when = match (e.not_before, e.not_after) {
                (Some(from), Some(to)) => format!(
                    " between {} and {}",
                    from.format("%Y-%m-%dT%H:%M:%SZ"),
                    to.format("%Y-%m-%dT%H:%M:%SZ")
                ),
                (Some(from), None) => format!(" from {}", from.format("%Y-%m-%dT%H:%M:%SZ")),
                _ => String::new(),
            };
            let said = if e.description.trim().is_empty() {
                String::new()
            } else {
                format!(" ({})", e.description.trim())
            };
            warnings.push(format!(
                "scheduled maintenance: EC2 plans {} for instance {id}{group}{when}{said}",
                e.code
            ));
        }
    }
    warnings
}

/// A setting as Elasticsearch reports it: every value a string.
fn setting_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What differs between what Floe set on the cluster and what the cluster
/// reports, one warning each, naming the change.
pub fn owned_warnings(owned: &OwnedFacts) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(registered) = &owned.registered {
        for (name, wanted) in &owned.repositories {
            let Some(found) = registered.get(name) else {
                warnings.push(format!(
                    "repository {name} is no longer registered on the cluster (Floe registered it)"
                ));
                continue;
            };
            let found_type = found.get("type").and_then(Value::as_str).unwrap_or("");
            if found_type != wanted.repository_type {
                warnings.push(format!(
                    "repository {name}: type is {found_type} on the cluster, Floe registered {}",
                    wanted.repository_type
                ));
            }
            let found_setting = |key: &str| {
                found
                    .get("settings")
                    .and_then(|s| s.get(key))
                    .map(setting_text)
            };
            for key in OWNED_SETTINGS {
                let want = wanted.settings.get(*key).map(setting_text);
                let have = found_setting(key);
                if want.is_some() && want != have {
                    warnings.push(format!(
                        "repository {name}: {key} is {} on the cluster, Floe registered {}",
                        have.as_deref().unwrap_or("unset"),
                        want.as_deref().unwrap_or("unset")
                    ));
                }
            }
            if wanted.readonly && found_setting("readonly").as_deref() != Some("true") {
                warnings.push(format!(
                    "repository {name}: registered writable on the cluster, Floe registered it read-only"
                ));
            }
        }
    }
    // A license that ends soon, or a trial, is said before it lapses.
    if let Some(license) = &owned.license {
        let reported = floe_domain::license::ClusterLicense {
            license_type: license.clone(),
            expiry: owned.license_expiry,
            uid: None,
        };
        warnings.extend(reported.lapse_warning(owned.checked));
    }
    let expected = owned.expected_license.as_deref().unwrap_or(FLOE_LICENSE);
    if let Some(license) = &owned.license
        && license != expected
    {
        warnings.push(match owned.expected_license {
            None => format!(
                "the license is {license} on the cluster; Floe's nodes run the self-generated {FLOE_LICENSE} license"
            ),
            Some(_) => format!(
                "the license is {license} on the cluster; Floe's plans put the {expected} license in force"
            ),
        });
    }
    warnings
}

/// The warning a mount clone deserves when its source snapshot is gone:
/// its mounted indices cannot be read again once their cache is gone. A
/// warning, not a finding: no heal can bring the snapshot back.
pub fn mount_source_warning(facts: &MountSourceFacts) -> Option<String> {
    let src = &facts.source;
    match facts.record {
        SourceRecord::Present => None,
        SourceRecord::Missing(since) => Some(format!(
            "source snapshot {} of deployment {} is missing from repository {} (deleted outside Floe; found so at {}): the mounted indices cannot be read again once their cache is gone; restore another snapshot or delete this clone",
            src.snapshot,
            src.source_deployment_id,
            src.repository,
            since.to_rfc3339()
        )),
        SourceRecord::Unrecorded => Some(format!(
            "source snapshot {} of deployment {} is no longer recorded: the mounted indices may not be readable",
            src.snapshot, src.source_deployment_id
        )),
    }
}

/// One node group's share of an [`Observation`].
struct GroupJudgement {
    problems: Vec<String>,
    nodes: Vec<NodeStatus>,
    replacements: Vec<Replacement>,
    surplus: Vec<String>,
}

fn judge_group(
    spec: &DeploymentSpec,
    g: &floe_domain::deployment::NodeGroup,
    facts: &Facts,
    members: Option<&Vec<NodeRow>>,
) -> GroupJudgement {
    let mut problems = Vec::new();
    let ours: Vec<&Instance> = facts
        .instances
        .iter()
        .filter(|i| i.tags.get(TAG_NODE_GROUP) == Some(&g.id))
        .collect();
    // Stopped or impaired: there, but no use to the cluster.
    let broken = |i: &Instance| {
        matches!(i.state, InstanceState::Stopping | InstanceState::Stopped)
            || facts.impaired.contains_key(&i.id)
    };
    let live: Vec<&Instance> = ours
        .iter()
        .copied()
        .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
        .filter(|i| !broken(i))
        .collect();
    for i in ours.iter().filter(|i| broken(i)) {
        problems.push(match facts.impaired.get(&i.id) {
            Some(failing) => format!(
                "instance {} of node group {} is impaired ({} failing)",
                i.id,
                g.id,
                failing.join(" and ")
            ),
            None => format!(
                "instance {} of node group {} is {}",
                i.id,
                g.id,
                state_name(i.state)
            ),
        });
    }
    let nodes = ours
        .iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .map(|i| {
            let member = members.and_then(|m| m.iter().find(|n| n.name == i.id));
            NodeStatus {
                instance_id: i.id.clone(),
                group: g.id.clone(),
                zone: i.zone.clone(),
                private_address: i.private_ip.clone(),
                state: state_name(i.state).to_string(),
                version: member
                    .map(|m| m.version.clone())
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| spec.version.clone()),
                roles: g
                    .roles
                    .iter()
                    .filter_map(|r| serde_json::to_value(r).ok())
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                joined: member.is_some(),
            }
        })
        .collect();
    let live_count = live.len() as u32;
    if live_count < g.count {
        problems.push(format!(
            "node group {} has {live_count} of {} nodes running",
            g.id, g.count
        ));
    }
    let mut replacements = Vec::new();
    // More nodes than the spec (a plan ended by force left its launches,
    // a node started by hand): those the record names and the cluster
    // has stay first; the others are surplus, which a heal drains,
    // excludes from voting and terminates.
    let mut surplus = Vec::new();
    if live_count > g.count {
        let joined = |i: &Instance| members.is_some_and(|m| m.iter().any(|n| n.name == i.id));
        let mut ranked = live.clone();
        ranked.sort_by_key(|i| (!facts.recorded.contains(&i.id), !joined(i), i.id.clone()));
        let extra: Vec<&Instance> = ranked.split_off(g.count as usize);
        surplus = extra.iter().map(|i| i.id.clone()).collect();
        problems.push(format!(
            "node group {} has {live_count} nodes, {} more than the spec's {}: {} surplus",
            g.id,
            live_count - g.count,
            g.count,
            surplus.join(", ")
        ));
        let mut by_zone: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for i in extra {
            by_zone
                .entry(launch_zone(i).unwrap_or(0))
                .or_default()
                .push(i.id.clone());
        }
        for (zone, lost) in by_zone {
            replacements.push(Replacement {
                group: g.id.clone(),
                zone,
                count: 0,
                lost,
            });
        }
    }
    // Each missing node goes back to the zone that lacks it; the stopped or
    // impaired ones it replaces first (the heal terminates those), then
    // ones already gone.
    let mut missing = g.count.saturating_sub(live_count);
    for (zone, want) in spread(g.count, g.zone_count).into_iter().enumerate() {
        let zone = zone as u32;
        let have = live.iter().filter(|i| launch_zone(i) == Some(zone)).count() as u32;
        let count = want.saturating_sub(have).min(missing);
        if count == 0 {
            continue;
        }
        missing -= count;
        let in_zone = || ours.iter().filter(move |i| launch_zone(i) == Some(zone));
        let lost = in_zone()
            .filter(|i| broken(i))
            .chain(in_zone().filter(|i| is_gone(i.state)))
            .map(|i| i.id.clone())
            .take(count as usize)
            .collect();
        replacements.push(Replacement {
            group: g.id.clone(),
            zone,
            count,
            lost,
        });
    }
    if missing > 0 {
        replacements.push(Replacement {
            group: g.id.clone(),
            zone: 0,
            count: missing,
            lost: Vec::new(),
        });
    }
    // A stopped or impaired instance the group does not lack (its zone
    // runs enough others) still goes: a heal that launches nothing for it
    // terminates it, so that no stale node keeps a volume and an address.
    let named: Vec<&String> = replacements.iter().flat_map(|r| &r.lost).collect();
    let mut extra: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for i in ours.iter().filter(|i| broken(i) && !named.contains(&&i.id)) {
        extra
            .entry(launch_zone(i).unwrap_or(0))
            .or_default()
            .push(i.id.clone());
    }
    for (zone, lost) in extra {
        replacements.push(Replacement {
            group: g.id.clone(),
            zone,
            count: 0,
            lost,
        });
    }
    GroupJudgement {
        problems,
        nodes,
        replacements,
        surplus,
    }
}

pub(crate) fn state_name(state: InstanceState) -> &'static str {
    match state {
        InstanceState::Pending => "pending",
        InstanceState::Running => "running",
        InstanceState::Stopping => "stopping",
        InstanceState::Stopped => "stopped",
        InstanceState::ShuttingDown => "shutting_down",
        InstanceState::Terminated => "terminated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_compute::TAG_LAUNCH;
    use floe_domain::restore::RestoreMode;

    /// Three hot nodes over three zones.
    fn spec() -> DeploymentSpec {
        serde_json::from_value(serde_json::json!({"name": "logs", "version": "8.15.3", "node_groups": [
            {"id": "hot", "roles": ["data_hot"], "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3, "storage": {"size_gb": 50}}
        ]}))
        .unwrap_or_else(|e| panic!("spec: {e}"))
    }

    /// Instance `i-{zone}` of the hot group, launched for `zone`.
    fn node(zone: u32, state: InstanceState) -> Instance {
        Instance {
            id: format!("i-{zone}"),
            state,
            instance_type: "m6g.xlarge".into(),
            zone: format!("us-east-1{}", ["a", "b", "c", "d"][zone as usize]),
            private_ip: Some(format!("10.0.0.{zone}")),
            tags: BTreeMap::from([
                (TAG_NODE_GROUP.to_string(), "hot".to_string()),
                (TAG_LAUNCH.to_string(), format!("plan-0-{zone}")),
            ]),
        }
    }

    fn member(id: &str) -> NodeRow {
        NodeRow {
            id: format!("node-{id}"),
            name: id.to_string(),
            version: "8.15.3".into(),
        }
    }

    /// A cluster that answers green, with `members` joined.
    fn green(members: &[&str]) -> ClusterFacts {
        ClusterFacts::Reached {
            members: Some(members.iter().map(|m| member(m)).collect()),
            health: Ok(HealthStatus::Green),
        }
    }

    fn replacement(zone: u32, count: u32, lost: &[&str]) -> Replacement {
        Replacement {
            group: "hot".into(),
            zone,
            count,
            lost: lost.iter().map(|l| l.to_string()).collect(),
        }
    }

    use InstanceState::{Running, Stopped, Terminated};

    struct Row {
        case: &'static str,
        facts: Facts,
        healthy: bool,
        problems: &'static [&'static str],
        replacements: Vec<Replacement>,
        warnings: &'static [&'static str],
    }

    fn facts(instances: Vec<Instance>, impaired: &[&str], cluster: ClusterFacts) -> Facts {
        Facts {
            instances,
            impaired: impaired
                .iter()
                .map(|i| (i.to_string(), vec!["instance status check"]))
                .collect(),
            scheduled: BTreeMap::new(),
            cluster,
            recorded: BTreeSet::new(),
            owned: OwnedFacts::default(),
            mount_source: None,
        }
    }

    /// A mount clone of snapshot `snap-1` of deployment `d0`, whose record
    /// says `record`.
    fn mounted(record: SourceRecord) -> Option<MountSourceFacts> {
        Some(MountSourceFacts {
            source: CloneSource {
                source_deployment_id: "d0".into(),
                repository: "main".into(),
                registered_as: "main".into(),
                snapshot: "snap-1".into(),
                snapshot_sort_millis: 0,
                mode: RestoreMode::Mount,
                pinned: true,
                snapshot_version: None,
                license: None,
            },
            record,
        })
    }

    /// When the source snapshot was found missing in [`mounted`] rows.
    fn found_missing() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default()
    }

    /// Instance `i-{n}` of the hot group, launched for `zone` by another plan.
    fn extra(n: u32, zone: u32, state: InstanceState) -> Instance {
        let mut i = node(zone, state);
        i.id = format!("i-{n}");
        i
    }

    /// What Floe registered: `main` (s3, its own path), `source-ro` (a
    /// clone's source, read-only), `gone`, `local` (fs); and the license.
    fn floe_registrations() -> Vec<(String, RepositoryRegistration)> {
        let s3 = |base_path: &str| {
            RepositoryRegistration::new(
                "s3",
                serde_json::json!({"client": "floe", "bucket": "snaps", "base_path": base_path})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            )
        };
        vec![
            ("main".into(), s3("deployments/d1")),
            ("source-ro".into(), s3("deployments/d0").read_only()),
            ("gone".into(), s3("deployments/d1")),
            (
                "local".into(),
                RepositoryRegistration::new(
                    "fs",
                    serde_json::json!({"location": "backups/d1"})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                ),
            ),
        ]
    }

    /// The cluster's answer to `GET _snapshot` for Floe's registrations
    /// untouched (every setting a string, as Elasticsearch reports them).
    fn registered_as_set() -> BTreeMap<String, Value> {
        serde_json::from_value(serde_json::json!({
            "main": {"type": "s3", "settings": {"client": "floe", "bucket": "snaps", "base_path": "deployments/d1", "max_snapshot_bytes_per_sec": "1gb"}},
            "source-ro": {"type": "s3", "settings": {"client": "floe", "bucket": "snaps", "base_path": "deployments/d0", "readonly": "true"}},
            "gone": {"type": "s3", "settings": {"client": "floe", "bucket": "snaps", "base_path": "deployments/d1"}},
            "local": {"type": "fs", "settings": {"location": "backups/d1"}},
            "tenant-own": {"type": "fs", "settings": {"location": "mine"}}
        }))
        .unwrap_or_default()
    }

    fn owned_as_set() -> OwnedFacts {
        OwnedFacts {
            repositories: floe_registrations(),
            registered: Some(registered_as_set()),
            license: Some("basic".into()),
            expected_license: None,
            license_expiry: None,
            checked: chrono::Utc::now(),
        }
    }

    /// A tenant re-registered `main` at another path, `source-ro`
    /// writable, `local` as s3, deleted `gone`, and started a trial.
    fn owned_changed() -> OwnedFacts {
        let mut registered = registered_as_set();
        registered.insert(
            "main".into(),
            serde_json::json!({"type": "s3", "settings": {"client": "floe", "bucket": "snaps", "base_path": "tenant/elsewhere"}}),
        );
        registered.insert(
            "source-ro".into(),
            serde_json::json!({"type": "s3", "settings": {"client": "floe", "bucket": "snaps", "base_path": "deployments/d0"}}),
        );
        registered.insert(
            "local".into(),
            serde_json::json!({"type": "s3", "settings": {"bucket": "x"}}),
        );
        registered.remove("gone");
        OwnedFacts {
            repositories: floe_registrations(),
            registered: Some(registered),
            license: Some("trial".into()),
            expected_license: None,
            license_expiry: None,
            checked: chrono::Utc::now(),
        }
    }

    #[test]
    fn the_judgement_of_each_kind_of_finding() {
        let all = || vec![node(0, Running), node(1, Running), node(2, Running)];
        let rows = [
            Row {
                case: "EC2 scheduled a node's retirement: a warning, healthy, no heal",
                facts: Facts {
                    scheduled: [(
                        "i-1".to_string(),
                        vec![ScheduledEvent {
                            code: "instance-retirement".into(),
                            description: "The instance is running on degraded hardware".into(),
                            not_before: chrono::DateTime::from_timestamp(1_800_000_000, 0),
                            not_after: None,
                        }],
                    )]
                    .into(),
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "scheduled maintenance: EC2 plans instance-retirement for instance i-1 of node group hot from 2027-01-15T08:00:00Z (The instance is running on degraded hardware)",
                ],
            },
            Row {
                case: "every node running and joined",
                facts: facts(all(), &[], green(&["i-0", "i-1", "i-2"])),
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[],
            },
            Row {
                case: "a node terminated: replaced in its zone",
                facts: facts(
                    vec![node(0, Running), node(1, Terminated), node(2, Running)],
                    &[],
                    green(&["i-0", "i-2"]),
                ),
                healthy: false,
                problems: &[
                    "node group hot has 2 of 3 nodes running",
                    "the cluster has 2 of 3 nodes",
                ],
                replacements: vec![replacement(1, 1, &["i-1"])],
                warnings: &[],
            },
            Row {
                case: "a node gone without a trace: replaced, naming none",
                facts: facts(
                    vec![node(0, Running), node(2, Running)],
                    &[],
                    green(&["i-0", "i-2"]),
                ),
                healthy: false,
                problems: &[
                    "node group hot has 2 of 3 nodes running",
                    "the cluster has 2 of 3 nodes",
                ],
                replacements: vec![replacement(1, 1, &[])],
                warnings: &[],
            },
            Row {
                case: "a node stopped",
                facts: facts(
                    vec![node(0, Running), node(1, Running), node(2, Stopped)],
                    &[],
                    green(&["i-0", "i-1"]),
                ),
                healthy: false,
                problems: &[
                    "instance i-2 of node group hot is stopped",
                    "node group hot has 2 of 3 nodes running",
                    "the cluster has 2 of 3 nodes",
                ],
                replacements: vec![replacement(2, 1, &["i-2"])],
                warnings: &[],
            },
            Row {
                case: "a node impaired, still in the cluster",
                facts: facts(all(), &["i-0"], green(&["i-0", "i-1", "i-2"])),
                healthy: false,
                problems: &[
                    "instance i-0 of node group hot is impaired (instance status check failing)",
                    "node group hot has 2 of 3 nodes running",
                ],
                replacements: vec![replacement(0, 1, &["i-0"])],
                warnings: &[],
            },
            Row {
                case: "a stopped node the group does not lack: terminated, nothing launched",
                facts: facts(
                    {
                        let mut extra = node(1, Stopped);
                        extra.id = "i-9".into();
                        let mut v = all();
                        v.push(extra);
                        v
                    },
                    &[],
                    green(&["i-0", "i-1", "i-2"]),
                ),
                healthy: false,
                problems: &["instance i-9 of node group hot is stopped"],
                replacements: vec![replacement(1, 0, &["i-9"])],
                warnings: &[],
            },
            Row {
                case: "a running node not in the cluster",
                facts: facts(all(), &[], green(&["i-0", "i-1"])),
                healthy: false,
                problems: &["i-2 not in the cluster", "the cluster has 2 of 3 nodes"],
                replacements: vec![],
                warnings: &[],
            },
            Row {
                case: "the cluster cannot be reached: a finding, no heal",
                facts: facts(all(), &[], ClusterFacts::Unreachable("refused".into())),
                healthy: false,
                problems: &["the cluster cannot be reached: refused"],
                replacements: vec![],
                warnings: &[],
            },
            Row {
                case: "the cluster is red: a finding, no heal",
                facts: facts(
                    all(),
                    &[],
                    ClusterFacts::Reached {
                        members: Some(vec![member("i-0"), member("i-1"), member("i-2")]),
                        health: Ok(HealthStatus::Red),
                    },
                ),
                healthy: false,
                problems: &["the cluster's health is red"],
                replacements: vec![],
                warnings: &[],
            },
            Row {
                case: "nothing readable from the cluster but that it answered",
                facts: facts(
                    all(),
                    &[],
                    ClusterFacts::Reached {
                        members: None,
                        health: Err("timed out".into()),
                    },
                ),
                healthy: false,
                problems: &["the cluster's health cannot be read: timed out"],
                replacements: vec![],
                warnings: &[],
            },
            Row {
                case: "a node beyond the spec, not recorded, not joined: surplus, terminated by a heal",
                facts: Facts {
                    recorded: ["i-0", "i-1", "i-2"].map(String::from).into(),
                    ..facts(
                        [all(), vec![extra(9, 1, Running)]].concat(),
                        &[],
                        green(&["i-0", "i-1", "i-2"]),
                    )
                },
                healthy: false,
                problems: &[
                    "node group hot has 4 nodes, 1 more than the spec's 3: i-9 surplus",
                    "i-9 not in the cluster",
                ],
                replacements: vec![replacement(1, 0, &["i-9"])],
                warnings: &[],
            },
            Row {
                case: "two plans' nodes in one cluster: the recorded ones stay, the others are surplus",
                facts: Facts {
                    recorded: ["i-0", "i-8", "i-9"].map(String::from).into(),
                    ..facts(
                        [all(), vec![extra(8, 1, Running), extra(9, 2, Running)]].concat(),
                        &[],
                        green(&["i-0", "i-1", "i-2", "i-8", "i-9"]),
                    )
                },
                healthy: false,
                problems: &[
                    "node group hot has 5 nodes, 2 more than the spec's 3: i-1, i-2 surplus",
                ],
                replacements: vec![replacement(1, 0, &["i-1"]), replacement(2, 0, &["i-2"])],
                warnings: &[],
            },
            Row {
                case: "a node of a group the spec no longer has: surplus",
                facts: facts(
                    [
                        all(),
                        vec![{
                            let mut warm = extra(7, 0, Running);
                            warm.tags.insert(TAG_NODE_GROUP.into(), "warm".into());
                            warm
                        }],
                    ]
                    .concat(),
                    &[],
                    green(&["i-0", "i-1", "i-2", "i-7"]),
                ),
                healthy: false,
                problems: &["i-7 not in any node group of the spec: surplus"],
                replacements: vec![replacement(0, 0, &["i-7"])],
                warnings: &[],
            },
            Row {
                case: "fewer nodes than the spec and as many stopped: no surplus counted",
                facts: facts(
                    [all(), vec![extra(9, 0, Stopped)]].concat(),
                    &[],
                    green(&["i-0", "i-1", "i-2"]),
                ),
                healthy: false,
                problems: &["instance i-9 of node group hot is stopped"],
                replacements: vec![replacement(0, 0, &["i-9"])],
                warnings: &[],
            },
            Row {
                case: "Floe's password refused (a tenant changed it): a warning, the nodes judged by their instances",
                facts: facts(
                    all(),
                    &[],
                    ClusterFacts::Refused("unable to authenticate user [elastic]".into()),
                ),
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "the cluster refuses the elastic password Floe holds (401: unable to authenticate user [elastic]); reset the password to give Floe back its access",
                ],
            },
            Row {
                case: "a trial that ended: health and stats refused, a warning, the nodes judged by their instances",
                facts: facts(
                    all(),
                    &[],
                    ClusterFacts::Unlicensed(
                        "current license is non-compliant for [security]".into(),
                    ),
                ),
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "the cluster's license is no longer active (403: current license is non-compliant for [security]): Elasticsearch refuses its health and stats, and searchable snapshots; install a license",
                ],
            },
            Row {
                case: "a mount clone on the trial its create started: no warning",
                facts: Facts {
                    owned: OwnedFacts {
                        license: Some("trial".into()),
                        expected_license: Some("trial".into()),
                        ..owned_as_set()
                    },
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[],
            },
            Row {
                case: "a license that ends within 14 days: a warning, healthy, no heal",
                facts: Facts {
                    owned: OwnedFacts {
                        license: Some("enterprise".into()),
                        expected_license: Some("enterprise".into()),
                        license_expiry: "2027-01-10T00:00:00Z".parse().ok(),
                        checked: "2027-01-01T00:00:00Z".parse().unwrap_or_default(),
                        ..owned_as_set()
                    },
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "the cluster's license (the enterprise license) ends 2027-01-10 00:00 UTC, in 9 days: upload a new platform license (PUT /api/v1/platform/license) before then",
                ],
            },
            Row {
                case: "a trial that has ended: a warning, healthy, no heal",
                facts: Facts {
                    owned: OwnedFacts {
                        license: Some("trial".into()),
                        expected_license: Some("trial".into()),
                        license_expiry: "2027-01-10T00:00:00Z".parse().ok(),
                        checked: "2027-01-11T00:00:00Z".parse().unwrap_or_default(),
                        ..owned_as_set()
                    },
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "the cluster's license (Elasticsearch's trial) expired 2027-01-10 00:00 UTC: Elasticsearch refuses its licensed features (searchable snapshots, and on a secured cluster its health and stats) until another is installed",
                ],
            },
            Row {
                case: "a mount clone's trial replaced by a tenant: a warning",
                facts: Facts {
                    owned: OwnedFacts {
                        license: Some("basic".into()),
                        expected_license: Some("trial".into()),
                        ..owned_as_set()
                    },
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "the license is basic on the cluster; Floe's plans put the trial license in force",
                ],
            },
            Row {
                case: "Floe's repositories and license changed by a tenant: warnings, healthy, no heal",
                facts: Facts {
                    owned: owned_changed(),
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "repository main: base_path is tenant/elsewhere on the cluster, Floe registered deployments/d1",
                    "repository source-ro: registered writable on the cluster, Floe registered it read-only",
                    "repository gone is no longer registered on the cluster (Floe registered it)",
                    "repository local: type is s3 on the cluster, Floe registered fs",
                    "repository local: location is unset on the cluster, Floe registered backups/d1",
                    "the license is trial on the cluster; Floe's nodes run the self-generated basic license",
                ],
            },
            Row {
                case: "a mount clone's source snapshot found missing: a warning, healthy, no heal",
                facts: Facts {
                    mount_source: mounted(SourceRecord::Missing(found_missing())),
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[
                    "source snapshot snap-1 of deployment d0 is missing from repository main (deleted outside Floe; found so at 2023-11-14T22:13:20+00:00): the mounted indices cannot be read again once their cache is gone; restore another snapshot or delete this clone",
                ],
            },
            Row {
                case: "a mount clone's source snapshot no longer recorded, its cluster unreachable: warned all the same",
                facts: Facts {
                    mount_source: mounted(SourceRecord::Unrecorded),
                    ..facts(all(), &[], ClusterFacts::Unreachable("refused".into()))
                },
                healthy: false,
                problems: &["the cluster cannot be reached: refused"],
                replacements: vec![],
                warnings: &[
                    "source snapshot snap-1 of deployment d0 is no longer recorded: the mounted indices may not be readable",
                ],
            },
            Row {
                case: "a mount clone's source snapshot recorded and present: no warning",
                facts: Facts {
                    mount_source: mounted(SourceRecord::Present),
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[],
            },
            Row {
                case: "Floe's repositories and license as Floe set them: no warning",
                facts: Facts {
                    owned: owned_as_set(),
                    ..facts(all(), &[], green(&["i-0", "i-1", "i-2"]))
                },
                healthy: true,
                problems: &[],
                replacements: vec![],
                warnings: &[],
            },
        ];
        for row in rows {
            let o = judge(&spec(), &row.facts);
            assert_eq!(o.healthy, row.healthy, "{}: {o:?}", row.case);
            assert_eq!(o.problems, row.problems, "{}", row.case);
            assert_eq!(o.replacements, row.replacements, "{}", row.case);
            assert_eq!(o.warnings, row.warnings, "{}", row.case);
        }
    }

    #[test]
    fn each_node_but_the_terminated_is_listed_with_what_the_cluster_says() {
        let facts = facts(
            vec![node(0, Running), node(1, Stopped), node(2, Terminated)],
            &[],
            green(&["i-0"]),
        );
        let o = judge(&spec(), &facts);
        let listed: Vec<(&str, &str, bool)> = o
            .nodes
            .iter()
            .map(|n| (n.instance_id.as_str(), n.state.as_str(), n.joined))
            .collect();
        assert_eq!(
            listed,
            [("i-0", "running", true), ("i-1", "stopped", false)]
        );
        assert!(o.nodes.iter().all(|n| n.version == "8.15.3"));
        assert_eq!(o.nodes[0].roles, ["data_hot"]);
    }
}
