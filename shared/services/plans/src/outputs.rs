//! What steps record as their output, one type per kind of output. Plan
//! records keep these as JSON for later steps and undos (read back with
//! [`crate::StepContext::output_of`]), and records written by earlier
//! releases must still read: field names and shapes never change. The
//! tests below pin each one to the JSON the steps have always written.

use serde::{Deserialize, Serialize};

/// `node-security`: whether the deployment's certificates already existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSecurityOutput {
    pub kept: bool,
}

/// `repository-credentials`: the repository whose keys the nodes get, and
/// the parameters written for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepositoryCredentialsOutput {
    pub repository: String,
    pub parameters: Vec<String>,
}

/// `template:{group}`: the group's launch template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateOutput {
    pub name: String,
    pub id: String,
}

/// `launch:{group}`: the instances started for the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchOutput {
    pub instance_ids: Vec<String>,
}

/// `leftovers`: what a plan ended by force left of the deployment's
/// instances, and what this plan did with them: adopted into the cluster
/// they formed (the new nodes join it; the launches start only what the
/// spec still lacks), or terminated (they never formed one: the new nodes
/// bootstrap a fresh cluster once they are gone).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftoversOutput {
    /// The leftovers formed a cluster, which the new nodes join.
    #[serde(default)]
    pub cluster: bool,
    #[serde(default)]
    pub adopted: Vec<String>,
    #[serde(default)]
    pub terminated: Vec<String>,
}

/// `bootstrap-masters`: where the initial masters were written, and which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapOutput {
    pub parameter: String,
    pub masters: Vec<String>,
}

/// `wait-running`: how many of the plan's instances run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningOutput {
    pub running: u32,
}

/// `wait-joined`: how many nodes the cluster has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinedOutput {
    pub nodes: usize,
}

/// `register-repository`: the repository registered on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredOutput {
    pub repository: String,
}

/// `terminate` and `retire`: the instances terminated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminatedOutput {
    pub terminated: Vec<String>,
}

/// `final-snapshot`: the snapshot taken before the nodes went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalSnapshotOutput {
    pub snapshot: String,
    pub state: String,
}

/// An old node an update retires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OldNode {
    pub id: String,
    pub group: String,
    /// The plan that launched it (empty when its tag is missing).
    pub plan: String,
}

/// `drain`: the old nodes the update retires; `wait-drained`, `retire`,
/// `wait-retired` and `forget-templates` read them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainOutput {
    pub nodes: Vec<OldNode>,
}

/// `exclude-masters` and `wait-masters-excluded`: the old master-eligible
/// nodes excluded from voting, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VotingExclusionsOutput {
    pub nodes: Vec<String>,
}

/// `wait-drained`: the shard copies the cluster holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainedOutput {
    pub shards: usize,
}

/// `node-identity`: the deployment's own instance profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityOutput {
    pub instance_profile: String,
}

/// `forget-templates`: the old nodes' launch templates deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgottenTemplatesOutput {
    pub deleted: Vec<String>,
}

/// `register-source`: the snapshot's repository, registered read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceOutput {
    pub repository: String,
    pub readonly: bool,
}

/// `restore`: the snapshot whose restore was started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreOutput {
    pub snapshot: String,
    pub repository: String,
}

/// `mount`: the indices mounted, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountOutput {
    pub indices: Vec<String>,
    pub storage: String,
}

/// `wait-restored`: what was recovered from the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoredOutput {
    pub indices: Vec<String>,
    pub shards_total: usize,
    pub shards_recovered: usize,
    pub bytes_total: u64,
    pub bytes_recovered: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    /// `value` is what the steps have always written: it reads as `T`, and
    /// `T` writes it back unchanged.
    fn same<T: Serialize + DeserializeOwned>(value: Value) -> Result<(), serde_json::Error> {
        let typed: T = serde_json::from_value(value.clone())?;
        assert_eq!(serde_json::to_value(&typed)?, value);
        Ok(())
    }

    #[test]
    fn outputs_keep_the_json_of_earlier_records() -> Result<(), serde_json::Error> {
        same::<NodeSecurityOutput>(json!({"kept": false}))?;
        same::<RepositoryCredentialsOutput>(
            json!({"repository": "main", "parameters": ["/floe/d/repository_access_key"]}),
        )?;
        same::<TemplateOutput>(
            json!({"id": "lt-sim000000000001", "name": "floe-d-hot-43805588acf0"}),
        )?;
        same::<LaunchOutput>(json!({"instance_ids": ["i-sim000000000001", "i-sim000000000002"]}))?;
        same::<BootstrapOutput>(
            json!({"parameter": "/floe/d/initial_master_nodes", "masters": ["i-1", "i-2"]}),
        )?;
        same::<RunningOutput>(json!({"running": 7}))?;
        same::<JoinedOutput>(json!({"nodes": 7}))?;
        same::<RegisteredOutput>(json!({"repository": "main"}))?;
        same::<TerminatedOutput>(json!({"terminated": ["i-1"]}))?;
        same::<FinalSnapshotOutput>(
            json!({"snapshot": "shutdown-0123456789ab", "state": "SUCCESS"}),
        )?;
        same::<DrainOutput>(
            json!({"nodes": [{"id": "i-1", "group": "hot", "plan": "01a2"}, {"id": "i-2", "group": "hot", "plan": ""}]}),
        )?;
        same::<DrainedOutput>(json!({"shards": 12}))?;
        same::<VotingExclusionsOutput>(json!({"nodes": ["i-1", "i-2"]}))?;
        same::<ForgottenTemplatesOutput>(json!({"deleted": ["floe-d-hot-43805588acf0"]}))?;
        same::<SourceOutput>(json!({"repository": "archive", "readonly": true}))?;
        same::<RestoreOutput>(json!({"snapshot": "nightly-1", "repository": "main"}))?;
        same::<MountOutput>(json!({"indices": ["logs-1"], "storage": "full_copy"}))?;
        same::<RestoredOutput>(json!({
            "indices": ["logs-1"],
            "shards_total": 2,
            "shards_recovered": 2,
            "bytes_total": 1024,
            "bytes_recovered": 1024,
        }))
    }
}
