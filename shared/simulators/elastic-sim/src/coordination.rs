//! Cluster coordination: who may vote, who is the elected master, and the
//! voting configuration exclusions. Modelled on Elasticsearch 7+ because a
//! plan that removes master-eligible nodes carelessly must fail here the
//! way it fails there: once a majority of the last committed voting
//! configuration is gone, no master can be elected again, and every API
//! that needs the master answers `503 master_not_discovered_exception`.
//!
//! The voting configuration follows the nodes as Elasticsearch's
//! reconfigurator does with `cluster.auto_shrink_voting_configuration`
//! (its default): an odd number of live master-eligible nodes, never
//! shrunk below three by nodes leaving, preferring the master and the
//! current voters; excluded nodes leave it first.
//!
//! `_cluster/voting_config_exclusions` (POST, DELETE) and
//! `_cluster/state` are served from here.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{Node, Sim};
use crate::util::{parse_bool, parse_time};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `cluster.max_voting_config_exclusions`, unless set.
const DEFAULT_MAX_EXCLUSIONS: usize = 10;
/// What an exclusion by name records for a node not in the cluster.
const ABSENT: &str = "_absent_";
/// The `timeout` of both exclusion calls, unless given.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(25);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    pub node_id: String,
    pub node_name: String,
}

/// The coordination metadata of the cluster state.
#[derive(Debug, Clone, Default)]
pub struct Coordination {
    pub term: u64,
    /// Node ids of `last_committed_config` (the simulator commits every
    /// configuration it accepts at once, so it is also the accepted one).
    pub voters: BTreeSet<String>,
    pub exclusions: Vec<Exclusion>,
    /// The elected master's node id; `None` when no master can be elected.
    pub master: Option<String>,
}

impl Coordination {
    /// A new cluster bootstrapped from its master-eligible nodes (what
    /// `cluster.initial_master_nodes` names), with the first as master.
    pub fn bootstrap(nodes: &[Node]) -> Coordination {
        let voters: BTreeSet<String> = nodes
            .iter()
            .filter(|n| n.master_eligible)
            .map(|n| n.id.clone())
            .collect();
        let master = nodes
            .iter()
            .find(|n| n.master_eligible)
            .map(|n| n.id.clone());
        let mut c = Coordination {
            term: u64::from(master.is_some()),
            voters,
            exclusions: Vec::new(),
            master,
        };
        c.reconfigure(nodes);
        c
    }

    /// Whether the live `nodes` hold a majority of the voting configuration.
    fn has_quorum(voters: &BTreeSet<String>, nodes: &[Node]) -> bool {
        let live = voters
            .iter()
            .filter(|v| nodes.iter().any(|n| &n.id == *v))
            .count();
        !voters.is_empty() && 2 * live > voters.len()
    }

    /// The node ids the exclusions stand for among `nodes` (an exclusion by
    /// name of a node that was absent matches it once it joins).
    fn excluded_ids(&self, nodes: &[Node]) -> BTreeSet<String> {
        let mut ids = BTreeSet::new();
        for e in &self.exclusions {
            if e.node_id != ABSENT {
                ids.insert(e.node_id.clone());
            }
            for n in nodes.iter().filter(|n| n.name == e.node_name) {
                ids.insert(n.id.clone());
            }
        }
        ids
    }

    /// The cluster's nodes are now `nodes`: the master stays, or another
    /// is elected, only while a majority of the voters is among them.
    pub fn membership_changed(&mut self, nodes: &[Node]) {
        if !Coordination::has_quorum(&self.voters, nodes) {
            if self.master.take().is_some() {
                tracing::warn!(
                    voters = self.voters.len(),
                    "simulated cluster lost the majority of its voting configuration: no master"
                );
            }
            return;
        }
        self.reconfigure(nodes);
    }

    /// Elasticsearch's reconfiguration: the new voting configuration, then
    /// a master in it.
    pub fn reconfigure(&mut self, nodes: &[Node]) {
        if !Coordination::has_quorum(&self.voters, nodes) {
            self.master = None;
            return;
        }
        let retired = self.excluded_ids(nodes);
        let live: Vec<&Node> = nodes
            .iter()
            .filter(|n| n.master_eligible && !retired.contains(&n.id))
            .collect();
        let kept_voters = self.voters.iter().filter(|v| !retired.contains(*v)).count();
        // Leaving nodes never shrink the configuration below three voters.
        let minimum = if kept_voters < 3 { 1 } else { 3 };
        let odd = if live.len().is_multiple_of(2) {
            live.len().saturating_sub(1)
        } else {
            live.len()
        };
        let size = odd.max(minimum);
        // Live nodes first (the master, then current voters, then by id),
        // then voters that are gone.
        let mut ranked: Vec<(u8, String)> = live
            .iter()
            .map(|n| {
                let rank = if self.master.as_deref() == Some(n.id.as_str()) {
                    0
                } else if self.voters.contains(&n.id) {
                    1
                } else {
                    2
                };
                (rank, n.id.clone())
            })
            .collect();
        ranked.extend(
            self.voters
                .iter()
                .filter(|v| !retired.contains(*v) && !nodes.iter().any(|n| &n.id == *v))
                .map(|v| (3, v.clone())),
        );
        ranked.sort();
        let next: BTreeSet<String> = ranked.into_iter().take(size).map(|(_, id)| id).collect();
        // A configuration without a live majority is never committed.
        if !next.is_empty() && next != self.voters && Coordination::has_quorum(&next, nodes) {
            self.voters = next;
        }
        let master_votes = self
            .master
            .as_ref()
            .is_some_and(|m| self.voters.contains(m) && nodes.iter().any(|n| &n.id == m));
        if !master_votes {
            // The master left, or was excluded and abdicated: a live voter
            // wins the next election.
            self.master = self
                .voters
                .iter()
                .find(|v| nodes.iter().any(|n| &n.id == *v))
                .cloned();
            self.term += 1;
        }
    }
}

fn max_exclusions(sim: &Sim) -> usize {
    const KEY: &str = "cluster.max_voting_config_exclusions";
    let settings = sim.settings();
    settings
        .transient
        .get(KEY)
        .or_else(|| settings.persistent.get(KEY))
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MAX_EXCLUSIONS)
}

fn split(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// `POST _cluster/voting_config_exclusions?node_names=…` (or `node_ids`):
/// records the exclusions, then waits (`timeout`, 30 s) until the nodes
/// have left the voting configuration.
pub async fn add_exclusions(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let names = req.param("node_names");
    let ids = req.param("node_ids");
    let wanted: Vec<Exclusion> = {
        let nodes = sim.nodes();
        match (names, ids) {
            (Some(names), None) => split(names)
                .into_iter()
                .map(|name| Exclusion {
                    node_id: nodes
                        .iter()
                        .find(|n| n.name == name)
                        .map_or_else(|| ABSENT.to_string(), |n| n.id.clone()),
                    node_name: name,
                })
                .collect(),
            (None, Some(ids)) => split(ids)
                .into_iter()
                .map(|id| Exclusion {
                    node_name: nodes
                        .iter()
                        .find(|n| n.id == id)
                        .map_or_else(|| ABSENT.to_string(), |n| n.name.clone()),
                    node_id: id,
                })
                .collect(),
            _ => {
                return Err(ApiError::illegal_argument(
                    "Please set node identifiers correctly. One and only one of [node_ids] and [node_names] has to be set",
                ));
            }
        }
    };
    if wanted.is_empty() {
        return Err(ApiError::illegal_argument(
            "Please set node identifiers correctly. One and only one of [node_ids] and [node_names] has to be set",
        ));
    }
    let timeout = match req.param("timeout") {
        Some(t) => parse_time("timeout", t)?,
        None => DEFAULT_WAIT,
    };
    let limit = max_exclusions(sim);
    {
        let nodes = sim.nodes();
        let mut c = sim.coordination();
        if c.master.is_none() {
            return Err(ApiError::master_not_discovered());
        }
        let new: Vec<Exclusion> = wanted
            .iter()
            .filter(|w| {
                !c.exclusions.iter().any(|e| {
                    e.node_name == w.node_name || (e.node_id == w.node_id && e.node_id != ABSENT)
                })
            })
            .cloned()
            .collect();
        if c.exclusions.len() + new.len() > limit {
            let listed: Vec<&str> = wanted.iter().map(|w| w.node_name.as_str()).collect();
            return Err(ApiError::illegal_argument(format!(
                "add voting config exclusions request for nodes named [{}] would add [{}] exclusions to the existing [{}] which would exceed the maximum of [{limit}] set by [cluster.max_voting_config_exclusions]",
                listed.join(", "),
                new.len(),
                c.exclusions.len(),
            )));
        }
        c.exclusions.extend(new);
        c.reconfigure(&nodes);
    }
    let deadline = Instant::now() + timeout;
    loop {
        let still: Vec<String> = {
            let nodes = sim.nodes();
            let c = sim.coordination();
            wanted
                .iter()
                .filter(|w| {
                    let id = if w.node_id == ABSENT {
                        nodes
                            .iter()
                            .find(|n| n.name == w.node_name)
                            .map(|n| n.id.clone())
                    } else {
                        Some(w.node_id.clone())
                    };
                    id.is_some_and(|id| c.voters.contains(&id))
                })
                .map(|w| w.node_name.clone())
                .collect()
        };
        if still.is_empty() {
            return Ok(Reply::ok(json!({})));
        }
        if Instant::now() >= deadline {
            return Err(ApiError::timeout(format!(
                "timed out waiting for voting config exclusions [{}] to take effect",
                still.join(", ")
            )));
        }
        tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// `DELETE _cluster/voting_config_exclusions`: with `wait_for_removal`
/// (the default), only once every excluded node has left the cluster.
pub async fn clear_exclusions(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let wait = parse_bool("wait_for_removal", req.param("wait_for_removal"), true)?;
    let timeout = match req.param("timeout") {
        Some(t) => parse_time("timeout", t)?,
        None => DEFAULT_WAIT,
    };
    if sim.coordination().master.is_none() {
        return Err(ApiError::master_not_discovered());
    }
    let deadline = Instant::now() + timeout;
    loop {
        let present: Vec<String> = if wait {
            let nodes = sim.nodes();
            let c = sim.coordination();
            let ids = c.excluded_ids(&nodes);
            nodes
                .iter()
                .filter(|n| ids.contains(&n.id))
                .map(|n| n.name.clone())
                .collect()
        } else {
            Vec::new()
        };
        if present.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(ApiError::timeout(format!(
                "timed out waiting for removal of nodes; if nodes should not be removed, set [wait_for_removal] to false. [{}]",
                present.join(", ")
            )));
        }
        tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
    let nodes = sim.nodes();
    let mut c = sim.coordination();
    c.exclusions.clear();
    c.reconfigure(&nodes);
    Ok(Reply::ok(json!({})))
}

/// The metrics `_cluster/state/{metrics}` serves.
const METRICS: &[&str] = &["version", "master_node", "blocks", "nodes", "metadata"];

/// `GET _cluster/state[/{metrics}[/{indices}]]`: the parts of the cluster
/// state the simulator models.
pub fn cluster_state(sim: &Sim, req: &Req, metrics: Option<&str>) -> ApiResult {
    let asked: Vec<String> = match metrics {
        None => METRICS.iter().map(|m| m.to_string()).collect(),
        Some(m) => {
            let list = split(m);
            if list.iter().any(|x| x == "_all") {
                METRICS.iter().map(|m| m.to_string()).collect()
            } else {
                if let Some(bad) = list.iter().find(|x| !METRICS.contains(&x.as_str())) {
                    return Err(ApiError::illegal_argument(format!(
                        "request [{}] contains unrecognized metric: [{bad}]",
                        req.uri
                    )));
                }
                list
            }
        }
    };
    let nodes = sim.nodes();
    let c = sim.coordination().clone();
    if c.master.is_none() {
        return Err(ApiError::master_not_discovered());
    }
    let mut body = Map::new();
    body.insert("cluster_name".into(), json!(sim.cluster_name));
    body.insert("cluster_uuid".into(), json!(sim.cluster_uuid));
    if asked.iter().any(|m| m == "version") {
        body.insert("version".into(), json!(c.term));
        body.insert("state_uuid".into(), json!(sim.cluster_uuid));
    }
    if asked.iter().any(|m| m == "master_node") {
        body.insert("master_node".into(), json!(c.master));
    }
    if asked.iter().any(|m| m == "blocks") {
        body.insert("blocks".into(), json!({}));
    }
    if asked.iter().any(|m| m == "nodes") {
        let listed: Map<String, Value> = nodes
            .iter()
            .map(|n| {
                (
                    n.id.clone(),
                    json!({
                        "name": n.name,
                        "ephemeral_id": n.id,
                        "transport_address": "127.0.0.1:9300",
                        "roles": n.roles(),
                        "version": n.version,
                    }),
                )
            })
            .collect();
        body.insert("nodes".into(), Value::Object(listed));
    }
    if asked.iter().any(|m| m == "metadata") {
        let voters: Vec<&String> = c.voters.iter().collect();
        let exclusions: Vec<Value> = c
            .exclusions
            .iter()
            .map(|e| json!({"node_id": e.node_id, "node_name": e.node_name}))
            .collect();
        let state = sim.state();
        let indices: Map<String, Value> = state
            .indices
            .iter()
            .map(|(name, index)| {
                (
                    name.clone(),
                    json!({
                        "version": 1,
                        "state": if index.closed { "close" } else { "open" },
                        "settings": index.settings_json(name),
                    }),
                )
            })
            .collect();
        body.insert(
            "metadata".into(),
            json!({
                "cluster_uuid": sim.cluster_uuid,
                "cluster_uuid_committed": true,
                "cluster_coordination": {
                    "term": c.term,
                    "last_committed_config": voters,
                    "last_accepted_config": voters,
                    "voting_config_exclusions": exclusions,
                },
                "templates": {},
                "indices": indices,
            }),
        );
    }
    Ok(Reply::ok(Value::Object(body)))
}

#[cfg(test)]
mod tests {
    use super::Coordination;
    use crate::state::Node;

    fn node(id: &str, master: bool) -> Node {
        Node {
            id: id.into(),
            name: id.into(),
            master_eligible: master,
            version: "8.15.0".into(),
            data: true,
            addr: None,
        }
    }

    #[test]
    fn the_voting_configuration_stays_odd_and_loses_its_master_with_its_majority() {
        let old = [node("a", true), node("b", true), node("c", true)];
        let mut c = Coordination::bootstrap(&old);
        assert_eq!(c.voters.len(), 3);
        let mut all = old.to_vec();
        all.extend([
            node("d", true),
            node("e", true),
            node("f", true),
            node("x", false),
        ]);
        c.membership_changed(&all);
        // Six master-eligible nodes: five vote, the old three among them.
        assert_eq!(c.voters.len(), 5);
        assert!(c.master.is_some());
        let new = [
            node("d", true),
            node("e", true),
            node("f", true),
            node("x", false),
        ];
        c.membership_changed(&new);
        assert_eq!(c.master, None, "two of five voters cannot elect");
    }

    #[test]
    fn fewer_than_half_leaving_keeps_a_master() {
        let one = [node("a", true)];
        let mut c = Coordination::bootstrap(&one);
        let mut all = one.to_vec();
        all.extend([node("b", true), node("c", true), node("d", true)]);
        c.membership_changed(&all);
        assert_eq!(c.voters.len(), 3);
        c.membership_changed(&all[1..]);
        assert!(c.master.is_some());
    }
}
