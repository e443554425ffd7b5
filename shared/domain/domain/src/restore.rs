//! Restores and clones: what a client asks for, checked here, and the one
//! resolved form (`RestoreTarget`) the plan steps run from.
//!
//! A clone (`restore_snapshot` on a new deployment) reads another
//! deployment's snapshot; a restore (`POST …/_restore`) reads one into a
//! running deployment. Either names a snapshot, or `__latest_success__`,
//! which the API resolves from the snapshot records before any plan is
//! written, so the plan records which snapshot it restores.

use crate::codes::Code;
use crate::names::{is_resource_id, validate_name};
use crate::snapshot_name::validate_snapshot_name;
use crate::validation::{Invalid, Problems};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The snapshot name that means "the newest successful snapshot".
pub const LATEST_SUCCESS: &str = "__latest_success__";

const MAX_INDICES: usize = 1000;
const MAX_PATTERN_BYTES: usize = 1024;

fn latest_success() -> String {
    LATEST_SUCCESS.to_string()
}

/// How a clone gets its data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestoreMode {
    /// Copy the snapshot's data onto the clone's disks (`_restore`).
    #[default]
    Restore,
    /// Mount the snapshot's indices as searchable snapshots (`_mount`):
    /// usable as soon as the nodes are, read-only.
    Mount,
}

/// The license a mount clone's cluster runs on, asked for by its create.
/// Elasticsearch serves searchable snapshots on the enterprise license
/// only, or during its 30-day trial; a new cluster runs the basic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CloneLicense {
    /// Start Elasticsearch's 30-day trial on the clone's cluster (once per
    /// cluster). When it ends, the cluster falls back to basic, and its
    /// mounted indices can no longer be searched.
    Trial,
}

/// Makes a new deployment a copy of another one's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreSnapshot {
    /// The deployment whose snapshot is read (same organization).
    pub source_deployment_id: String,
    /// A snapshot name as the snapshot list gives it (no date math), or
    /// `__latest_success__` (the default).
    #[serde(default = "latest_success")]
    #[schema(example = "__latest_success__", min_length = 1)]
    pub snapshot_name: String,
    /// The repository to read from; by default the one the snapshot was
    /// taken into. It is registered read-only on the clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Indices or patterns (`logs-*`); empty means every index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indices: Vec<String>,
    /// A regular expression over the restored indices' names (restore mode).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::validation::text_not_null"
    )]
    pub rename_pattern: Option<String>,
    /// Its replacement, `$1` for a group.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::validation::text_not_null"
    )]
    pub rename_replacement: Option<String>,
    #[serde(default)]
    pub mode: RestoreMode,
    /// Mode mount only: the license the clone runs on, when the platform's
    /// does not allow searchable snapshots. Without one, a mount clone is
    /// refused before anything runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<CloneLicense>,
    /// Set by the platform: the snapshot `snapshot_name` resolved to when
    /// the clone was requested (whatever a client sends here is replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(read_only)]
    pub resolved_snapshot: Option<String>,
}

/// Restores a snapshot into a running deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// A snapshot name as the snapshot list gives it (no date math), or
    /// `__latest_success__`.
    #[schema(example = "__latest_success__", min_length = 1)]
    pub snapshot_name: String,
    /// The repository to read from; by default the deployment's own. Any
    /// other is registered read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Indices or patterns; empty means every index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indices: Vec<String>,
    /// A regular expression over the restored indices' names.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::validation::text_not_null"
    )]
    pub rename_pattern: Option<String>,
    /// Its replacement, `$1` for a group.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::validation::text_not_null"
    )]
    pub rename_replacement: Option<String>,
    /// Restore the cluster state too (templates, persistent settings).
    /// Feature states come back only when named in `feature_states`.
    #[serde(default)]
    pub include_global_state: bool,
    #[serde(default = "yes")]
    pub include_aliases: bool,
    /// Restore indices whose snapshot is incomplete, missing shards empty.
    #[serde(default)]
    pub partial: bool,
    /// The feature states to restore, as `GET _features` names them
    /// (`kibana`, `tasks`, …); none by default, whatever
    /// `include_global_state` says. `security` is refused: it would bring
    /// back the snapshot's users and `elastic` password, and lock the
    /// platform out of the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(example = json!(["kibana"]))]
    pub feature_states: Vec<String>,
}

/// The feature state a restore never brings back: the cluster's users,
/// roles, keys and the `elastic` password Floe holds.
pub const SECURITY_FEATURE: &str = "security";

/// The problems of a restore's `feature_states` (fields `{prefix}feature_states[i]`).
fn check_feature_states(p: &mut Problems, prefix: &str, names: &[String]) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        let field = format!("{prefix}feature_states[{i}]");
        let well_formed = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !well_formed {
            p.push(
                field,
                Code::VALIDATION_NAME,
                "must be a feature name such as kibana (lowercase letters, digits, _ and -)",
            );
        } else if name == SECURITY_FEATURE {
            p.push(
                field,
                Code::VALIDATION_NOT_ALLOWED,
                "the security feature state is never restored: it would replace the cluster's users and the elastic password the platform holds",
            );
        } else if name == "none" {
            p.push(
                field,
                Code::VALIDATION_NOT_ALLOWED,
                "leave feature_states empty to restore none",
            );
        } else if !seen.insert(name) {
            p.push(field, Code::VALIDATION_DUPLICATE, "is named twice");
        }
    }
}

fn yes() -> bool {
    true
}

/// A restore as a plan runs it: every name resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RestoreTarget {
    /// The deployment whose snapshot this is.
    pub source_deployment_id: String,
    pub repository: String,
    /// Read-only: the snapshot is not at the deployment's own path (another
    /// repository, or another deployment's path in the same one).
    pub foreign_repository: bool,
    /// The name the source is registered under on the cluster, when not
    /// `repository`: a clone that writes to its source's repository (at its
    /// own path) reads the source's path under a second name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_as: Option<String>,
    pub snapshot: String,
    /// What the client asked for (`__latest_success__` or the same name).
    pub requested: String,
    pub indices: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_replacement: Option<String>,
    pub include_global_state: bool,
    pub include_aliases: bool,
    pub partial: bool,
    pub mode: RestoreMode,
    /// The feature states to restore; none when empty (plans recorded
    /// before Floe sent them explicitly read as empty too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_states: Vec<String>,
    /// The license a mount clone asked for (see [`RestoreSnapshot::license`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<CloneLicense>,
    /// The replicas each restored or mounted index gets, when not the
    /// snapshot's own: a restore drill's one-node clone asks for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_replicas: Option<u32>,
}

impl RestoreTarget {
    /// What a restore request sends as `feature_states`: the ones named, or
    /// Elasticsearch's `none`, never `security`. Sent always, since without
    /// it Elasticsearch restores every feature state of a snapshot when
    /// the global state is restored.
    pub fn feature_states_to_send(&self) -> Vec<String> {
        let named: Vec<String> = self
            .feature_states
            .iter()
            .filter(|f| *f != SECURITY_FEATURE && *f != "none")
            .cloned()
            .collect();
        if named.is_empty() {
            vec!["none".to_string()]
        } else {
            named
        }
    }

    /// The repository's name on the cluster: where restores and mounts read.
    pub fn cluster_repository(&self) -> &str {
        self.registered_as.as_deref().unwrap_or(&self.repository)
    }
}

/// What a clone depends on, kept on its record for as long as it exists:
/// the source deployment, the repository and path it reads, the name that
/// path is registered under on the clone's cluster (read-only), and the
/// snapshot. Later plans keep the source's client and registration on the
/// nodes from it, and while `pinned` the source's snapshot cannot be
/// deleted (by a client or by retention).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CloneSource {
    pub source_deployment_id: String,
    /// The source's repository (a Floe repository's name).
    pub repository: String,
    /// The name the source's path is registered under, read-only, on the
    /// clone's cluster: `repository`, or `{repository}-source-…` when the
    /// clone writes to the same repository at its own path.
    pub registered_as: String,
    pub snapshot: String,
    /// Where the snapshot's record sorts (part of its key), so that the
    /// pin can be counted on it without a read.
    #[schema(read_only)]
    pub snapshot_sort_millis: i64,
    pub mode: RestoreMode,
    /// The license the clone asked for at its create (a trial), kept with
    /// what it was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<CloneLicense>,
    /// Whether the snapshot is pinned: a mount clone's until it is deleted,
    /// a restore clone's until its create plan has recovered the data.
    pub pinned: bool,
    /// The version of the snapshot's record when the clone resolved it; the
    /// pin is counted only while the record is still at it, so a snapshot
    /// whose delete began since is not pinned. Used by the write that
    /// creates the pin, never stored.
    #[serde(skip)]
    pub snapshot_version: Option<u64>,
}

impl CloneSource {
    /// The source as the clone's create plan restores it.
    pub fn of(target: &RestoreTarget, snapshot_sort_millis: i64) -> CloneSource {
        CloneSource {
            source_deployment_id: target.source_deployment_id.clone(),
            repository: target.repository.clone(),
            registered_as: target.cluster_repository().to_string(),
            snapshot: target.snapshot.clone(),
            snapshot_sort_millis,
            mode: target.mode,
            license: target.license,
            pinned: true,
            snapshot_version: None,
        }
    }

    /// The read-only registration of the source, as a restore plan reads
    /// it (for the plans that register it again on new nodes).
    pub fn target(&self) -> RestoreTarget {
        RestoreTarget {
            source_deployment_id: self.source_deployment_id.clone(),
            repository: self.repository.clone(),
            foreign_repository: true,
            registered_as: (self.registered_as != self.repository)
                .then(|| self.registered_as.clone()),
            snapshot: self.snapshot.clone(),
            requested: self.snapshot.clone(),
            indices: Vec::new(),
            rename_pattern: None,
            rename_replacement: None,
            include_global_state: false,
            include_aliases: true,
            partial: false,
            mode: self.mode,
            feature_states: Vec::new(),
            license: self.license,
            number_of_replicas: None,
        }
    }

    /// Whether the clone's cluster still reads the source's path: a mount
    /// clone's indices live there; a restore clone's copied data does not.
    pub fn reads_source(&self) -> bool {
        self.mode == RestoreMode::Mount
    }
}

/// The cluster-side name of a source read from another deployment's path
/// of `repository`, which the cluster also has (writable, at its own path)
/// under `repository` itself. Mounted indices keep naming it, so it is
/// stable for the source.
pub fn source_registration_name(repository: &str, source_deployment_id: &str) -> String {
    let short = source_deployment_id
        .get(source_deployment_id.len().saturating_sub(12)..)
        .unwrap_or(source_deployment_id);
    format!("{repository}-source-{short}")
}

fn check_selection(
    p: &mut Problems,
    prefix: &str,
    snapshot_name: &str,
    repository: Option<&str>,
    indices: &[String],
    rename: (Option<&str>, Option<&str>),
) {
    let f = |name: &str| format!("{prefix}{name}");
    if snapshot_name != LATEST_SUCCESS {
        // Date math is for naming new snapshots, not for finding old ones.
        let plain = if snapshot_name.starts_with('<') {
            Err("must be a snapshot's name or __latest_success__, not date math".to_string())
        } else {
            validate_snapshot_name(snapshot_name)
        };
        p.check(f("snapshot_name"), Code::VALIDATION_SNAPSHOT_NAME, plain);
    }
    if let Some(r) = repository {
        p.check(f("repository"), Code::VALIDATION_NAME, validate_name(r));
    }
    if indices.len() > MAX_INDICES {
        p.push(
            f("indices"),
            Code::VALIDATION_LENGTH,
            format!("at most {MAX_INDICES} indices or patterns"),
        );
    }
    for (i, index) in indices.iter().enumerate() {
        let bad = index.is_empty()
            || index.len() > 255
            || index
                .chars()
                .any(|c| c.is_whitespace() || matches!(c, ',' | '"' | '\\' | '/' | '|' | '#'));
        if bad {
            p.push(
                format!("{prefix}indices[{i}]"),
                Code::VALIDATION_INDEX_NAME,
                "must be an index name or pattern, one per entry (no commas, spaces or / \\ \" | #)",
            );
        }
    }
    match rename {
        (Some(pattern), Some(replacement)) => {
            if pattern.is_empty() || pattern.len() > MAX_PATTERN_BYTES {
                p.push(
                    f("rename_pattern"),
                    Code::VALIDATION_LENGTH,
                    format!("must be 1 to {MAX_PATTERN_BYTES} bytes"),
                );
            }
            if replacement.is_empty() || replacement.len() > MAX_PATTERN_BYTES {
                p.push(
                    f("rename_replacement"),
                    Code::VALIDATION_LENGTH,
                    format!("must be 1 to {MAX_PATTERN_BYTES} bytes"),
                );
            }
        }
        (Some(_), None) => p.push(
            f("rename_replacement"),
            Code::VALIDATION_REQUIRED,
            "is required with rename_pattern",
        ),
        (None, Some(_)) => p.push(
            f("rename_pattern"),
            Code::VALIDATION_REQUIRED,
            "is required with rename_replacement",
        ),
        (None, None) => {}
    }
}

impl RestoreSnapshot {
    /// Adds this clone source's problems, with fields under `restore_snapshot.`.
    pub fn check(&self, p: &mut Problems) {
        const PREFIX: &str = "restore_snapshot.";
        if !is_resource_id(&self.source_deployment_id) {
            p.push(
                "restore_snapshot.source_deployment_id",
                Code::VALIDATION_ID,
                "must be a deployment id",
            );
        }
        check_selection(
            p,
            PREFIX,
            &self.snapshot_name,
            self.repository.as_deref(),
            &self.indices,
            (
                self.rename_pattern.as_deref(),
                self.rename_replacement.as_deref(),
            ),
        );
        if self.mode == RestoreMode::Mount && self.rename_pattern.is_some() {
            p.push(
                "restore_snapshot.rename_pattern",
                Code::VALIDATION_MOUNT_RENAME,
                "mounted indices keep their names; rename is for mode restore",
            );
        }
        if self.mode == RestoreMode::Restore && self.license.is_some() {
            p.push(
                "restore_snapshot.license",
                Code::VALIDATION_LICENSE_FOR_MOUNT,
                "a restore clone copies its data and runs on any license; a license is for mode mount",
            );
        }
    }

    /// The plan's form, once the API has resolved the snapshot and its
    /// repository.
    pub fn target(&self, repository: &str) -> RestoreTarget {
        let snapshot = self
            .resolved_snapshot
            .as_deref()
            .unwrap_or(&self.snapshot_name);
        RestoreTarget {
            source_deployment_id: self.source_deployment_id.clone(),
            repository: repository.to_string(),
            foreign_repository: true,
            registered_as: None,
            snapshot: snapshot.to_string(),
            requested: self.snapshot_name.clone(),
            indices: self.indices.clone(),
            rename_pattern: self.rename_pattern.clone(),
            rename_replacement: self.rename_replacement.clone(),
            include_global_state: false,
            include_aliases: true,
            partial: false,
            mode: self.mode,
            feature_states: Vec::new(),
            license: self.license,
            number_of_replicas: None,
        }
    }
}

impl RestoreRequest {
    pub fn validate_request(&self) -> Result<(), Invalid> {
        let mut p = Problems::new();
        check_selection(
            &mut p,
            "",
            &self.snapshot_name,
            self.repository.as_deref(),
            &self.indices,
            (
                self.rename_pattern.as_deref(),
                self.rename_replacement.as_deref(),
            ),
        );
        check_feature_states(&mut p, "", &self.feature_states);
        p.finish()
    }

    /// The plan's form for `deployment_id`, whose own repository is
    /// `own_repository`.
    pub fn target(
        &self,
        deployment_id: &str,
        repository: &str,
        own_repository: Option<&str>,
        snapshot: &str,
    ) -> RestoreTarget {
        RestoreTarget {
            source_deployment_id: deployment_id.to_string(),
            repository: repository.to_string(),
            foreign_repository: own_repository != Some(repository),
            registered_as: None,
            snapshot: snapshot.to_string(),
            requested: self.snapshot_name.clone(),
            indices: self.indices.clone(),
            rename_pattern: self.rename_pattern.clone(),
            rename_replacement: self.rename_replacement.clone(),
            include_global_state: self.include_global_state,
            include_aliases: self.include_aliases,
            partial: self.partial,
            mode: RestoreMode::Restore,
            feature_states: self.feature_states.clone(),
            license: None,
            number_of_replicas: None,
        }
    }
}

/// Whether `name` matches one of Elasticsearch's simple patterns (`*` for
/// any run of characters); an empty list selects every index that is not
/// hidden (names starting with `.`), as a restore without `indices` does.
pub fn selects(patterns: &[String], name: &str) -> bool {
    if patterns.is_empty() {
        return !name.starts_with('.');
    }
    let mut selected = false;
    for pattern in patterns {
        // `-pattern` excludes what earlier entries selected.
        if let Some(excluded) = pattern.strip_prefix('-') {
            if glob(excluded, name) {
                selected = false;
            }
        } else if glob(pattern, name) {
            selected = true;
        }
    }
    selected
}

fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, rest) = (parts[0], &parts[1..]);
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let last = rest.len() - 1;
    for (i, part) in rest.iter().enumerate() {
        if i == last {
            return remaining.ends_with(part);
        }
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn patterns_select_as_elasticsearch_does() {
        let cases: &[(&[&str], &str, bool)] = &[
            (&[], "logs-1", true),
            (&[], ".security-7", false),
            (&["logs-*"], "logs-2026.11", true),
            (&["logs-*"], "metrics-1", false),
            (&["*-2026*"], "logs-2026.11", true),
            (&["a*b*c"], "axxbyyc", true),
            (&["a*b*c"], "axxcyyb", false),
            (&["orders"], "orders", true),
            (&["orders"], "orders-old", false),
            (&["*", "-logs-*"], "logs-1", false),
            (&["*", "-logs-*"], "orders", true),
            (&["*"], ".hidden", true),
        ];
        for (patterns, name, expected) in cases {
            assert_eq!(
                selects(&strings(patterns), name),
                *expected,
                "{patterns:?} {name}"
            );
        }
    }

    /// Records written before Floe kept a clone's source still load, and
    /// one written with it reads back the same.
    #[test]
    fn records_without_a_clone_source_load() {
        let body = serde_json::json!({
            "id": "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c", "org": "acme",
            "spec": {"name": "logs", "version": "8.15.3", "node_groups": [
                {"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                 "count": 1, "storage": {"size_gb": 20}}]},
            "status": "running", "pending_plan": null,
            "created": "2026-11-01T00:00:00Z", "updated": "2026-11-01T00:00:00Z"
        });
        let old: crate::deployment::Deployment =
            serde_json::from_value(body.clone()).expect("an old record loads");
        assert_eq!(old.clone_source, None);
        let mut new = old.clone();
        new.clone_source = Some(CloneSource {
            source_deployment_id: "0193a0c4e1f07d2a8b9c0d1e2f3a4b5d".into(),
            repository: "main".into(),
            registered_as: "main-source-2f3a4b5d".into(),
            snapshot: "nightly-1".into(),
            snapshot_sort_millis: 1_700_000_000_000,
            mode: RestoreMode::Mount,
            pinned: true,
            snapshot_version: None,
            license: None,
        });
        let written = serde_json::to_value(&new).expect("serializes");
        let back: crate::deployment::Deployment =
            serde_json::from_value(written).expect("reads back");
        assert_eq!(back, new);
        let run: crate::snapshot::PolicyRun = serde_json::from_value(serde_json::json!({
            "org": "acme", "deployment_id": "d", "policy_id": "p",
            "last_run": "2026-11-01T00:00:00Z", "last_outcome": "snapshot"
        }))
        .expect("an old run state loads");
        assert!(run.last_retention_skipped.is_empty());
    }

    #[test]
    fn feature_states_are_sent_explicitly_and_never_security() {
        let mut r = RestoreRequest {
            snapshot_name: "snap-1".into(),
            repository: None,
            indices: Vec::new(),
            rename_pattern: None,
            rename_replacement: None,
            include_global_state: true,
            include_aliases: true,
            partial: false,
            feature_states: Vec::new(),
        };
        assert!(r.validate_request().is_ok());
        // Without a name, none: Elasticsearch would restore them all with
        // the global state.
        assert_eq!(
            r.target("d", "repo", None, "snap-1")
                .feature_states_to_send(),
            ["none"]
        );
        r.feature_states = strings(&["kibana", "tasks"]);
        assert!(r.validate_request().is_ok());
        assert_eq!(
            r.target("d", "repo", None, "snap-1")
                .feature_states_to_send(),
            ["kibana", "tasks"]
        );
        r.feature_states = strings(&["kibana", "security", "none", "Bad!", "kibana"]);
        let Err(Invalid(errors)) = r.validate_request() else {
            panic!("accepted security");
        };
        let fields: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.field.as_str(), e.code.name()))
            .collect();
        assert_eq!(
            fields,
            [
                ("feature_states[1]", "validation.not_allowed"),
                ("feature_states[2]", "validation.not_allowed"),
                ("feature_states[3]", "validation.name"),
                ("feature_states[4]", "validation.duplicate"),
            ]
        );
        // A record that somehow holds it still never sends it.
        let mut t = r.target("d", "repo", None, "snap-1");
        t.feature_states = strings(&["security"]);
        assert_eq!(t.feature_states_to_send(), ["none"]);
    }

    #[test]
    fn bad_requests_name_their_fields() {
        let r = RestoreRequest {
            snapshot_name: "<nightly-{now/d}>".into(),
            repository: Some("Bad Name".into()),
            indices: strings(&["ok", "a,b", ""]),
            rename_pattern: Some("(.+)".into()),
            rename_replacement: None,
            include_global_state: false,
            include_aliases: true,
            partial: false,
            feature_states: Vec::new(),
        };
        let Err(Invalid(errors)) = r.validate_request() else {
            panic!("accepted");
        };
        let mut fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "indices[1]",
                "indices[2]",
                "rename_replacement",
                "repository",
                "snapshot_name",
            ]
        );

        let mut p = Problems::new();
        RestoreSnapshot {
            source_deployment_id: "nope".into(),
            snapshot_name: LATEST_SUCCESS.into(),
            repository: None,
            indices: vec![],
            rename_pattern: Some("x".into()),
            rename_replacement: Some("y".into()),
            mode: RestoreMode::Mount,
            resolved_snapshot: None,
            license: None,
        }
        .check(&mut p);
        let Err(Invalid(errors)) = p.finish() else {
            panic!("accepted");
        };
        let mut fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "restore_snapshot.rename_pattern",
                "restore_snapshot.source_deployment_id",
            ]
        );
    }
}
