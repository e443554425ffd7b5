//! Snapshot APIs: create, get, delete and status. A snapshot runs in this
//! cluster (for `SimFaults::snapshot_delay`), then lands in the repository,
//! which is the only place finished snapshots are kept.

use crate::blobs::StoreError;
use crate::config::SnapshotFault;
use crate::error::ApiError;
use crate::repo_data::{
    GlobalState, IndexBlob, IndexSize, RepositoryData, SECURITY_FEATURE, ShardFailure, SnapState,
    SnapshotBlob, SnapshotRecord, snapshot_blob,
};
use crate::repositories::repository;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{Repository, RunningSnapshot, Sim};
use crate::util::{
    body_bool, body_names, check_snapshot_name, glob_match, new_uuid, now_millis, parse_bool,
    resolve_expression, split_names,
};
use axum::http::StatusCode;
use floe_domain::snapshot_name::resolve_snapshot_name;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

const ABORTED: &str = "Snapshot was aborted by deletion";

/// Any failure to read `index.json` is what Elasticsearch reports for a
/// repository it cannot read.
pub fn unreadable(repo: &str, error: &StoreError) -> ApiError {
    ApiError::repository(
        repo,
        &format!("could not read repository data from index blob: {error}"),
    )
}

/// The name a create request asks for, date math resolved now.
fn snapshot_name(repo: &str, requested: &str) -> Result<String, ApiError> {
    let name = if requested.starts_with('<') {
        resolve_snapshot_name(requested, chrono::Utc::now()).map_err(|why| {
            if why.starts_with("resolves to") {
                ApiError::invalid_snapshot_name(repo, requested, &why)
            } else {
                ApiError::parse(format!("invalid date math expression [{requested}]: {why}"))
            }
        })?
    } else {
        requested.to_string()
    };
    check_snapshot_name(&name).map_err(|why| ApiError::invalid_snapshot_name(repo, &name, why))?;
    Ok(name)
}

pub async fn create(sim: &Arc<Sim>, req: &Req, repo: &str, requested: &str) -> ApiResult {
    let repository = repository(sim, repo)?;
    let name = snapshot_name(repo, requested)?;
    if repository.readonly {
        return Err(ApiError::repository(
            repo,
            "cannot create snapshot in a readonly repository",
        ));
    }
    let body = req.json()?;
    let wanted = body_names(&body, "indices")?;
    let ignore_unavailable = body_bool(&body, "ignore_unavailable", false)?;
    let include_global_state = body_bool(&body, "include_global_state", true)?;
    let features = snapshot_features(sim, &body, include_global_state)?;
    let metadata = match body.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(other) => {
            return Err(ApiError::x_content_parse(format!(
                "[metadata] must be an object, not {other}"
            )));
        }
    };
    let wait = parse_bool(
        "wait_for_completion",
        req.param("wait_for_completion"),
        false,
    )?;
    check_not_running(sim, repo, &name)?;
    let data = repository
        .cache
        .data(&repository.store)
        .await
        .map_err(|e| unreadable(repo, &e))?;
    if data.find(&name).is_some() {
        return Err(ApiError::invalid_snapshot_name(
            repo,
            &name,
            "snapshot with the same name already exists",
        ));
    }

    let faults = sim.faults();
    let (done_tx, done_rx) = watch::channel(None);
    let (abort_tx, abort_rx) = oneshot::channel();
    let (record, blobs, global) = {
        let mut state = sim.state();
        check_not_running_in(&state.running, repo, &name)?;
        let resolved = resolve_expression(&wanted, &state.index_names());
        if let (false, Some(missing)) = (ignore_unavailable, resolved.missing.first()) {
            return Err(ApiError::index_not_found(missing));
        }
        // The point in time the snapshot captures: later writes are not in it.
        let mut blobs = BTreeMap::new();
        let mut sizes = BTreeMap::new();
        for index_name in &resolved.names {
            if let Some(index) = state.indices.get(index_name) {
                blobs.insert(index_name.clone(), index.to_blob());
                sizes.insert(index_name.clone(), index.size());
            }
        }
        let record = SnapshotRecord {
            name: name.clone(),
            uuid: new_uuid(),
            state: SnapState::InProgress,
            indices: blobs.keys().cloned().collect(),
            include_global_state,
            metadata,
            version: sim.version.clone(),
            start_millis: now_millis(),
            end_millis: 0,
            shards_total: sizes.values().map(|s: &IndexSize| s.shards).sum(),
            shards_failed: 0,
            failures: Vec::new(),
            reason: None,
            sizes,
            feature_states: features.clone(),
        };
        state.running.insert(
            repo.to_string(),
            RunningSnapshot {
                record: record.clone(),
                started: Instant::now(),
                delay: faults.snapshot_delay,
                done: done_rx.clone(),
                abort: Some(abort_tx),
            },
        );
        // The cluster's state at the same point in time.
        let global = (include_global_state || !features.is_empty()).then(|| GlobalState {
            persistent_settings: if include_global_state {
                sim.settings().persistent.clone()
            } else {
                Map::new()
            },
            elastic_password_sha256: features
                .iter()
                .any(|f| f == SECURITY_FEATURE)
                .then(|| sim.password_hash_hex())
                .flatten(),
        });
        (record, blobs, global)
    };
    tracing::info!(
        repository = repo,
        snapshot = %name,
        indices = record.indices.len(),
        "simulated cluster started a snapshot"
    );
    let run = Run {
        sim: sim.clone(),
        repo: repo.to_string(),
        repository,
        record,
        blobs,
        global,
        fault: faults.fail_snapshots,
        delay: faults.snapshot_delay,
        primary_node: sim.master().id.clone(),
    };
    tokio::spawn(run.execute(abort_rx, done_tx));

    if !wait {
        return Ok(Reply::ok(json!({ "accepted": true })));
    }
    let finished = wait_done(done_rx)
        .await
        .ok_or_else(|| ApiError::internal("the simulated snapshot task ended without a result"))?;
    // Elasticsearch's status for a finished snapshot: 500 when it failed
    // or lost shards, 200 otherwise; the body is the snapshot either way.
    let status = match finished.state {
        SnapState::Success | SnapState::InProgress => StatusCode::OK,
        SnapState::Failed | SnapState::Partial => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Ok(Reply::with_status(
        status,
        json!({ "snapshot": finished.info(repo, true) }),
    ))
}

/// The feature states a new snapshot takes: those named in
/// `feature_states` (`["none"]` for none), else every one the cluster has
/// when it includes the global state, as Elasticsearch decides.
fn snapshot_features(
    sim: &Sim,
    body: &Value,
    include_global_state: bool,
) -> Result<Vec<String>, ApiError> {
    let available: Vec<String> = if sim.is_secured() {
        vec![SECURITY_FEATURE.to_string()]
    } else {
        Vec::new()
    };
    match requested_features(body)? {
        None if include_global_state => Ok(available),
        None => Ok(Vec::new()),
        Some(named) => {
            if let Some(unknown) = named.iter().find(|f| !available.contains(f)) {
                return Err(ApiError::illegal_argument(format!(
                    "No system indices or feature states found for feature [{unknown}]"
                )));
            }
            Ok(named)
        }
    }
}

/// A request's `feature_states`: `None` when absent, the names otherwise
/// (empty for `["none"]`, which must then stand alone).
pub fn requested_features(body: &Value) -> Result<Option<Vec<String>>, ApiError> {
    let Some(value) = body.get("feature_states") else {
        return Ok(None);
    };
    let names: Vec<String> = match value {
        Value::Array(items) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::x_content_parse("[feature_states] must be an array of strings")
                })
            })
            .collect::<Result<_, _>>()?,
        Value::String(s) => s.split(',').map(str::to_string).collect(),
        _ => {
            return Err(ApiError::x_content_parse(
                "[feature_states] must be an array of strings",
            ));
        }
    };
    if names.iter().any(|n| n == "none") {
        if names.len() > 1 {
            return Err(ApiError::illegal_argument(format!(
                "the feature_states value [none] indicates that no feature states should be restored, but other feature states were requested: {names:?}"
            )));
        }
        return Ok(Some(Vec::new()));
    }
    Ok(Some(names))
}

fn check_not_running(sim: &Sim, repo: &str, name: &str) -> Result<(), ApiError> {
    check_not_running_in(&sim.state().running, repo, name)
}

fn check_not_running_in(
    running: &BTreeMap<String, RunningSnapshot>,
    repo: &str,
    name: &str,
) -> Result<(), ApiError> {
    match running.get(repo) {
        Some(r) if r.record.name == name => Err(ApiError::invalid_snapshot_name(
            repo,
            name,
            "snapshot with the same name is already in-progress",
        )),
        Some(_) => Err(ApiError::concurrent_snapshot(
            repo,
            name,
            "a snapshot is already running",
        )),
        None => Ok(()),
    }
}

async fn wait_done(mut done: watch::Receiver<Option<SnapshotRecord>>) -> Option<SnapshotRecord> {
    match done.wait_for(Option::is_some).await {
        Ok(record) => record.clone(),
        Err(_) => None,
    }
}

/// One snapshot on its way into the repository.
struct Run {
    sim: Arc<Sim>,
    repo: String,
    repository: Repository,
    record: SnapshotRecord,
    blobs: BTreeMap<String, IndexBlob>,
    global: Option<GlobalState>,
    fault: Option<SnapshotFault>,
    delay: Duration,
    primary_node: String,
}

impl Run {
    async fn execute(
        mut self,
        abort: oneshot::Receiver<()>,
        done: watch::Sender<Option<SnapshotRecord>>,
    ) {
        let aborted = tokio::select! {
            () = tokio::time::sleep(self.delay) => false,
            signal = abort => signal.is_ok(),
        };
        if aborted {
            self.fail_all(ABORTED);
            self.blobs.clear();
        } else {
            self.apply_fault();
            self.record.state = if self.record.state == SnapState::InProgress {
                SnapState::Success
            } else {
                self.record.state
            };
            self.record.end_millis = now_millis().max(self.record.start_millis);
            if let Err(error) = self.write().await {
                tracing::warn!(
                    repository = %self.repo,
                    snapshot = %self.record.name,
                    %error,
                    "simulated cluster could not write a snapshot to its repository"
                );
                self.fail_all(&format!(
                    "failed to write the snapshot to the repository: {error}"
                ));
            }
        }
        if self.record.end_millis == 0 {
            self.record.end_millis = now_millis().max(self.record.start_millis);
        }
        tracing::info!(
            repository = %self.repo,
            snapshot = %self.record.name,
            state = self.record.state.as_str(),
            "simulated cluster finished a snapshot"
        );
        // Out of the running set before anyone hears it finished, so a
        // caller that waited can start the next one at once.
        self.sim.state().running.remove(&self.repo);
        let _ = done.send(Some(self.record));
    }

    fn fail_all(&mut self, reason: &str) {
        self.record.state = SnapState::Failed;
        self.record.reason = Some(reason.to_string());
        self.record.shards_failed = self.record.shards_total;
        self.record.failures = self
            .blobs
            .iter()
            .flat_map(|(name, blob)| failures(name, blob, reason, &self.primary_node))
            .collect();
    }

    fn apply_fault(&mut self) {
        match self.fault {
            None => {}
            Some(SnapshotFault::Failed) => {
                self.fail_all(
                    "simulated failure: the simulator was told to fail snapshots (SimFaults::fail_snapshots)",
                );
                self.blobs.clear();
            }
            Some(SnapshotFault::Partial) => {
                let Some(last) = self.blobs.keys().next_back().cloned() else {
                    return;
                };
                let Some(blob) = self.blobs.remove(&last) else {
                    return;
                };
                let reason = "simulated shard failure: the simulator was told to fail snapshot shards (SimFaults::fail_snapshots)";
                self.record.failures = failures(&last, &blob, reason, &self.primary_node);
                self.record.shards_failed = blob.number_of_shards;
                self.record.state = SnapState::Partial;
            }
        }
    }

    /// The data first, then `index.json`: a reader never finds a listed
    /// snapshot without its data.
    async fn write(&self) -> Result<(), StoreError> {
        let store = &self.repository.store;
        let _guard = self.repository.write_lock.lock().await;
        if self.record.state != SnapState::Failed {
            SnapshotBlob {
                uuid: self.record.uuid.clone(),
                indices: self.blobs.clone(),
                global: self.global.clone(),
            }
            .save(store)
            .await?;
        }
        let mut data = RepositoryData::clone(&*self.repository.cache.data(store).await?);
        data.snapshots.retain(|s| s.name != self.record.name);
        data.snapshots.push(self.record.clone());
        self.repository.cache.save(store, data).await
    }
}

fn failures(index: &str, blob: &IndexBlob, reason: &str, node: &str) -> Vec<ShardFailure> {
    (0..blob.number_of_shards)
        .map(|shard_id| ShardFailure {
            index: index.to_string(),
            index_uuid: index.to_string(),
            shard_id,
            reason: reason.to_string(),
            node_id: node.to_string(),
        })
        .collect()
}

/// Finished snapshots from the repository, then the running one. The
/// running one is looked at first: a snapshot is written to the repository
/// before it leaves the running set, so one that finishes between the two
/// reads is found in the repository instead of in neither (Elasticsearch,
/// too, never shows a snapshot missing while it finalizes).
async fn all_records(
    sim: &Sim,
    repo: &str,
    repository: &Repository,
) -> Result<(Vec<SnapshotRecord>, Option<SnapshotRecord>), ApiError> {
    let running = sim.state().running.get(repo).map(|r| r.record.clone());
    let data = repository
        .cache
        .data(&repository.store)
        .await
        .map_err(|e| unreadable(repo, &e))?;
    // Finished meanwhile: the repository's record is the newer one.
    let running = running.filter(|r| !data.snapshots.iter().any(|s| s.uuid == r.uuid));
    Ok((data.snapshots.clone(), running))
}

pub async fn get(sim: &Arc<Sim>, req: &Req, repo: &str, expression: &str) -> ApiResult {
    let repository = repository(sim, repo)?;
    let verbose = parse_bool("verbose", req.param("verbose"), true)?;
    let ignore_unavailable =
        parse_bool("ignore_unavailable", req.param("ignore_unavailable"), false)?;
    let (finished, running) = all_records(sim, repo, &repository).await?;
    let mut all: Vec<SnapshotRecord> = finished.into_iter().chain(running.clone()).collect();
    all.sort_by(|a, b| (a.start_millis, &a.name).cmp(&(b.start_millis, &b.name)));
    let mut picked: Vec<SnapshotRecord> = Vec::new();
    for expression in split_names(expression) {
        let matches: Vec<&SnapshotRecord> = match expression.as_str() {
            "_all" | "*" => all.iter().collect(),
            "_current" => all
                .iter()
                .filter(|s| s.state == SnapState::InProgress)
                .collect(),
            pattern if pattern.contains('*') => all
                .iter()
                .filter(|s| glob_match(pattern, &s.name))
                .collect(),
            name => {
                let found: Vec<&SnapshotRecord> = all.iter().filter(|s| s.name == name).collect();
                if found.is_empty() && !ignore_unavailable {
                    return Err(ApiError::snapshot_missing(repo, name));
                }
                found
            }
        };
        for record in matches {
            if !picked.iter().any(|p| p.uuid == record.uuid) {
                picked.push(record.clone());
            }
        }
    }
    picked.sort_by(|a, b| (a.start_millis, &a.name).cmp(&(b.start_millis, &b.name)));
    let infos: Vec<Value> = picked.iter().map(|s| s.info(repo, verbose)).collect();
    Ok(Reply::ok(json!({
        "snapshots": infos,
        "total": picked.len(),
        "remaining": 0,
    })))
}

pub async fn delete(sim: &Arc<Sim>, repo: &str, expression: &str) -> ApiResult {
    let repository = repository(sim, repo)?;
    if repository.readonly {
        return Err(ApiError::repository(
            repo,
            "cannot delete snapshot from a readonly repository",
        ));
    }
    let names = split_names(expression);
    // A running snapshot is aborted first, as Elasticsearch does, then
    // deleted like any other once it has stopped.
    let running = {
        let mut state = sim.state();
        match state.running.get_mut(repo) {
            Some(r)
                if names
                    .iter()
                    .any(|n| n == "_all" || n == "*" || glob_match(n, &r.record.name)) =>
            {
                if let Some(abort) = r.abort.take() {
                    let _ = abort.send(());
                }
                Some((r.record.name.clone(), r.done.clone()))
            }
            _ => None,
        }
    };
    let aborted = match running {
        Some((name, done)) => {
            wait_done(done).await;
            Some(name)
        }
        None => None,
    };

    let store = &repository.store;
    let _guard = repository.write_lock.lock().await;
    let mut data = RepositoryData::clone(
        &*repository
            .cache
            .data(store)
            .await
            .map_err(|e| unreadable(repo, &e))?,
    );
    let mut doomed: Vec<SnapshotRecord> = Vec::new();
    for name in &names {
        let matches: Vec<&SnapshotRecord> = data
            .snapshots
            .iter()
            .filter(|s| name == "_all" || glob_match(name, &s.name))
            .collect();
        let explicit = !name.contains('*') && name != "_all";
        if matches.is_empty() && explicit && aborted.as_deref() != Some(name.as_str()) {
            return Err(ApiError::snapshot_missing(repo, name));
        }
        for record in matches {
            if !doomed.iter().any(|d| d.uuid == record.uuid) {
                doomed.push(record.clone());
            }
        }
    }
    if !doomed.is_empty() {
        data.snapshots
            .retain(|s| !doomed.iter().any(|d| d.uuid == s.uuid));
        repository.cache.save(store, data).await.map_err(|e| {
            ApiError::repository(repo, &format!("failed to update the repository: {e}"))
        })?;
        for record in &doomed {
            // Listed no more, so a leftover blob is only wasted space.
            for data in SnapshotBlob::data_blobs(store, &record.uuid).await {
                if let Err(error) = store.delete(&data).await {
                    tracing::warn!(repository = repo, snapshot = %record.name, %error, "simulated cluster left an index's snapshot blob behind");
                }
            }
            if let Err(error) = store.delete(&snapshot_blob(&record.uuid)).await {
                tracing::warn!(repository = repo, snapshot = %record.name, %error, "simulated cluster left a snapshot blob behind");
            }
        }
    }
    tracing::info!(
        repository = repo,
        deleted = doomed.len(),
        "simulated cluster deleted snapshots"
    );
    Ok(Reply::acknowledged())
}

fn file_stats(files: u64, bytes: u64) -> Value {
    json!({ "file_count": files, "size_in_bytes": bytes })
}

fn shards_stats(done: u32, started: u32, failed: u32, total: u32) -> Value {
    json!({
        "initializing": 0,
        "started": started,
        "finalizing": 0,
        "done": done,
        "failed": failed,
        "total": total,
    })
}

/// `_status` of one snapshot; `progress` is how far a running one got.
fn status_json(repo: &str, record: &SnapshotRecord, progress: Option<f64>) -> Value {
    let (state, elapsed) = match progress {
        Some(_) => ("STARTED", now_millis() - record.start_millis),
        None => (
            record.state.as_str(),
            record.end_millis - record.start_millis,
        ),
    };
    let scale = |n: u64| match progress {
        // Precision loss is irrelevant for a progress figure.
        Some(f) => (n as f64 * f) as u64,
        None => n,
    };
    let failed_indices: Vec<&str> = record.failures.iter().map(|f| f.index.as_str()).collect();
    let stats = |size: &IndexSize| {
        let mut s = json!({
            "incremental": file_stats(size.files, size.bytes),
            "total": file_stats(size.files, size.bytes),
            "start_time_in_millis": record.start_millis,
            "time_in_millis": elapsed,
        });
        if progress.is_some() {
            s["processed"] = file_stats(scale(size.files), scale(size.bytes));
        }
        s
    };
    let mut indices = Map::new();
    for (name, size) in &record.sizes {
        let failed = if failed_indices.contains(&name.as_str()) {
            size.shards
        } else {
            0
        };
        let (done, started) = match progress {
            Some(_) => (0, size.shards),
            None => (size.shards - failed, 0),
        };
        indices.insert(
            name.clone(),
            json!({
                "shards_stats": shards_stats(done, started, failed, size.shards),
                "stats": stats(size),
            }),
        );
    }
    let total = record.total_size();
    let (done, started) = match progress {
        Some(_) => (0, total.shards),
        None => (total.shards - record.shards_failed, 0),
    };
    json!({
        "snapshot": record.name,
        "repository": repo,
        "uuid": record.uuid,
        "state": state,
        "include_global_state": record.include_global_state,
        "shards_stats": shards_stats(done, started, record.shards_failed, total.shards),
        "stats": stats(&total),
        "indices": indices,
    })
}

pub async fn status(sim: &Arc<Sim>, repo: Option<&str>, snapshot: Option<&str>) -> ApiResult {
    let running: Vec<(String, SnapshotRecord, f64)> = {
        let state = sim.state();
        state
            .running
            .iter()
            .filter(|(r, _)| repo.is_none_or(|wanted| wanted == r.as_str()))
            .map(|(r, run)| {
                let fraction = if run.delay.is_zero() {
                    1.0
                } else {
                    (run.started.elapsed().as_secs_f64() / run.delay.as_secs_f64()).min(1.0)
                };
                (r.clone(), run.record.clone(), fraction)
            })
            .collect()
    };
    let (Some(repo), Some(expression)) = (repo, snapshot) else {
        if let Some(repo) = repo {
            repository(sim, repo)?;
        }
        let snapshots: Vec<Value> = running
            .iter()
            .map(|(r, record, f)| status_json(r, record, Some(*f)))
            .collect();
        return Ok(Reply::ok(json!({ "snapshots": snapshots })));
    };
    let repository = repository(sim, repo)?;
    let data = repository
        .cache
        .data(&repository.store)
        .await
        .map_err(|e| unreadable(repo, &e))?;
    let mut out = Vec::new();
    for name in split_names(expression) {
        if let Some((_, record, f)) = running.iter().find(|(_, r, _)| r.name == name) {
            out.push(status_json(repo, record, Some(*f)));
        } else if let Some(record) = data.find(&name) {
            out.push(status_json(repo, record, None));
        } else {
            return Err(ApiError::snapshot_missing(repo, &name));
        }
    }
    Ok(Reply::ok(json!({ "snapshots": out })))
}
