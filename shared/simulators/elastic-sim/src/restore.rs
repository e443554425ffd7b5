//! Restore, searchable-snapshot mounts and `_recovery`. Restored and
//! mounted indices are built from the snapshot blob in the repository;
//! their shards "recover" for `SimFaults::restore_delay`, which
//! `_recovery` and `_cluster/health` report as they go.

use crate::error::ApiError;
use crate::indices::pick;
use crate::repo_data::{SnapState, SnapshotBlob, SnapshotRecord};
use crate::repositories::repository;
use crate::server::{ApiResult, Reply, Req};
use crate::snapshots::unreadable;
use crate::state::{Index, Mounted, Recovery, RecoverySource, Sim, Storage, flatten_settings};
use crate::util::{
    body_bool, body_names, body_string, check_index_name, file_count, new_uuid, now_millis,
    parse_bool, percent, resolve_expression,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The finished snapshot a restore or mount reads, checked restorable.
async fn restorable(
    sim: &Sim,
    repo: &str,
    snapshot: &str,
) -> Result<(SnapshotRecord, Arc<SnapshotBlob>), ApiError> {
    let repository = repository(sim, repo)?;
    let data = repository
        .cache
        .data(&repository.store)
        .await
        .map_err(|e| unreadable(repo, &e))?;
    let record = data.find(snapshot).cloned().ok_or_else(|| {
        ApiError::snapshot_restore(&format!("{repo}:{snapshot}"), "snapshot does not exist")
    })?;
    if !matches!(record.state, SnapState::Success | SnapState::Partial) {
        return Err(ApiError::snapshot_restore(
            &format!("{repo}:{snapshot}/{}", record.uuid),
            &format!("unsupported snapshot state [{}]", record.state.as_str()),
        ));
    }
    let blob = repository
        .cache
        .snapshot(&repository.store, &record.uuid)
        .await
        .map_err(|e| {
            ApiError::snapshot_restore(
                &format!("{repo}:{snapshot}/{}", record.uuid),
                &format!("the snapshot's data cannot be read: {e}"),
            )
        })?;
    Ok((record, blob))
}

/// Java's `String.replaceAll` replacement syntax (`$1`, `\$`) in the
/// `regex` crate's (`${1}`, `$$`).
fn java_replacement(java: &str) -> String {
    let mut out = String::with_capacity(java.len());
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut group = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    group.push(*d);
                    chars.next();
                }
                out.push_str(&format!("${{{group}}}"));
            }
            '$' => out.push_str("$$"),
            other => out.push(other),
        }
    }
    out
}

/// Applies `index_settings` and `ignore_index_settings` of a restore or
/// mount to an index built from the snapshot.
fn adjust_settings(
    index: &mut Index,
    label: &str,
    overrides: Option<&Value>,
    ignored: &[String],
) -> Result<(), ApiError> {
    for key in ignored {
        let key = key.strip_prefix("index.").unwrap_or(key);
        index.settings.remove(key);
    }
    let Some(overrides) = overrides else {
        return Ok(());
    };
    for (key, value) in flatten_settings(overrides) {
        match key.as_str() {
            "number_of_shards" => {
                return Err(ApiError::snapshot_restore(
                    label,
                    "cannot modify setting [index.number_of_shards] on restore",
                ));
            }
            "number_of_replicas" => {
                index.number_of_replicas = value.parse().map_err(|_| {
                    ApiError::illegal_argument(format!(
                        "Failed to parse value [{value}] for setting [index.number_of_replicas]"
                    ))
                })?;
            }
            _ => {
                index.settings.insert(key, value);
            }
        }
    }
    Ok(())
}

/// Puts restored indices in place, refusing open indices in the way.
fn install(sim: &Sim, label: &str, targets: Vec<(String, Index, bool)>) -> Result<(), ApiError> {
    let mut state = sim.state();
    for (name, index, partial) in &targets {
        let Some(existing) = state.indices.get(name) else {
            continue;
        };
        if !existing.closed {
            return Err(ApiError::snapshot_restore(
                label,
                &format!(
                    "cannot restore index [{name}] because an open index with same name already exists in the cluster. Either close or delete the existing index or restore the index under a different name by providing a rename pattern and replacement name"
                ),
            ));
        }
        if *partial {
            return Err(ApiError::snapshot_restore(
                label,
                &format!("cannot restore partial index [{name}] because such index already exists"),
            ));
        }
        if existing.number_of_shards != index.number_of_shards {
            return Err(ApiError::snapshot_restore(
                label,
                &format!(
                    "cannot restore index [{name}] with [{}] shards from a snapshot of index [{name}] with [{}] shards",
                    existing.number_of_shards, index.number_of_shards
                ),
            ));
        }
    }
    for (name, mut index, _) in targets {
        if let Some(existing) = state.indices.get(&name) {
            // Restoring over a closed index keeps its identity.
            index.uuid.clone_from(&existing.uuid);
        }
        state.indices.insert(name, index);
    }
    Ok(())
}

fn recovery_from(
    repo: &str,
    snapshot: &str,
    source_index: &str,
    restore_uuid: &str,
    bytes: u64,
    duration: Duration,
) -> Recovery {
    Recovery {
        source: RecoverySource::Snapshot {
            repository: repo.to_string(),
            snapshot: snapshot.to_string(),
            index: source_index.to_string(),
            restore_uuid: restore_uuid.to_string(),
        },
        started: Instant::now(),
        start_millis: now_millis(),
        duration,
        bytes_total: bytes,
        files_total: file_count(bytes),
    }
}

pub async fn restore(sim: &Arc<Sim>, req: &Req, repo: &str, snapshot: &str) -> ApiResult {
    let body = req.json()?;
    let wanted = body_names(&body, "indices")?;
    let ignore_unavailable = body_bool(&body, "ignore_unavailable", false)?;
    let include_aliases = body_bool(&body, "include_aliases", true)?;
    let partial = body_bool(&body, "partial", false)?;
    let include_global_state = body_bool(&body, "include_global_state", false)?;
    let requested_features = crate::snapshots::requested_features(&body)?;
    let rename_pattern = body_string(&body, "rename_pattern")?;
    let rename_replacement = body_string(&body, "rename_replacement")?;
    let ignored = body_names(&body, "ignore_index_settings")?;
    let wait = parse_bool(
        "wait_for_completion",
        req.param("wait_for_completion"),
        false,
    )?;
    let (record, blob) = restorable(sim, repo, snapshot).await?;
    let label = format!("{repo}:{snapshot}/{}", record.uuid);

    let resolved = resolve_expression(&wanted, &record.indices);
    if !resolved.missing.is_empty() && !ignore_unavailable {
        return Err(ApiError::snapshot_restore(
            &format!("{repo}:{snapshot}"),
            &format!("indices [{}] missing", resolved.missing.join(", ")),
        ));
    }
    let rename = match (&rename_pattern, &rename_replacement) {
        (Some(pattern), Some(replacement)) => {
            let regex = regex_lite::Regex::new(pattern).map_err(|e| {
                ApiError::illegal_argument(format!("invalid rename_pattern [{pattern}]: {e}"))
            })?;
            Some((regex, java_replacement(replacement)))
        }
        _ => None,
    };
    // The feature states to bring back: those named, else every one the
    // snapshot holds when the global state is restored (Elasticsearch's
    // default, which is why a careful caller names them, or `none`).
    let features: Vec<String> = match requested_features {
        Some(named) => {
            let absent: Vec<&String> = named
                .iter()
                .filter(|f| !record.feature_states.contains(f))
                .collect();
            if !absent.is_empty() {
                return Err(ApiError::snapshot_restore(
                    &label,
                    &format!(
                        "requested feature states [{}] are not present in snapshot",
                        absent
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            named
        }
        None if include_global_state => record.feature_states.clone(),
        None => Vec::new(),
    };
    let failed: Vec<&str> = record.failures.iter().map(|f| f.index.as_str()).collect();
    let duration = sim.faults().restore_delay;
    let restore_uuid = new_uuid();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    let mut targets = Vec::new();
    let (mut shards_total, mut shards_failed) = (0, 0);
    for source in &resolved.names {
        let target = match &rename {
            Some((regex, replacement)) => {
                regex.replace_all(source, replacement.as_str()).into_owned()
            }
            None => source.clone(),
        };
        if let Some(previous) = renamed.insert(target.clone(), source.clone()) {
            return Err(ApiError::snapshot_restore(
                &format!("{repo}:{snapshot}"),
                &format!(
                    "indices [{source}] and [{previous}] are renamed into the same index [{target}]"
                ),
            ));
        }
        check_index_name(&target)?;
        let is_failed = failed.contains(&source.as_str());
        if is_failed && !partial {
            return Err(ApiError::snapshot_restore(
                &label,
                &format!("index [{source}] wasn't fully snapshotted - cannot restore"),
            ));
        }
        let mut unreadable = None;
        let mut index = match blob.indices.get(source) {
            // Its data is gone from the repository: the index is made, and
            // its primaries fail to recover from the snapshot (red).
            Some(index_blob) if index_blob.unreadable.is_some() => {
                unreadable.clone_from(&index_blob.unreadable);
                let mut index = Index::from_blob(index_blob, false);
                index.lost_shards = (0..index.number_of_shards).collect();
                index
            }
            Some(index_blob) => Index::from_blob(index_blob, true),
            None => {
                // Failed shards come back empty on a partial restore.
                let shards = record.sizes.get(source).map_or(1, |s| s.shards.max(1));
                Index::new(shards, 1)
            }
        };
        if !include_aliases {
            index.aliases = Map::new();
        }
        adjust_settings(&mut index, &label, body.get("index_settings"), &ignored)?;
        let bytes = index.store_bytes();
        shards_total += index.number_of_shards;
        match &unreadable {
            // No recovery to follow: the shards failed at once.
            Some(reason) => {
                tracing::warn!(repository = repo, snapshot, index = %source, reason = %reason, "simulated cluster failed to restore an index's shards");
            }
            None => {
                index.recovery =
                    recovery_from(repo, snapshot, source, &restore_uuid, bytes, duration);
            }
        }
        if is_failed || unreadable.is_some() {
            shards_failed += index.number_of_shards;
        }
        targets.push((target, index, is_failed));
    }
    let names: Vec<String> = targets.iter().map(|(n, _, _)| n.clone()).collect();
    install(sim, &label, targets)?;
    restore_global_state(sim, &blob, include_global_state, &features);
    tracing::info!(
        repository = repo,
        snapshot,
        indices = ?names,
        "simulated cluster is restoring a snapshot"
    );
    if !wait {
        return Ok(Reply::ok(json!({ "accepted": true })));
    }
    tokio::time::sleep(duration).await;
    Ok(Reply::ok(json!({
        "snapshot": {
            "snapshot": snapshot,
            "indices": names,
            "shards": {
                "total": shards_total,
                "failed": shards_failed,
                "successful": shards_total - shards_failed,
            },
        }
    })))
}

/// What a restore brings back of the cluster itself: the persistent
/// settings with the global state, and each feature state asked for; the
/// security one replaces the `elastic` user's password with the one the
/// snapshot holds, as restoring the security index does.
fn restore_global_state(
    sim: &Sim,
    blob: &crate::repo_data::SnapshotBlob,
    include_global_state: bool,
    features: &[String],
) {
    let Some(global) = &blob.global else {
        return;
    };
    if include_global_state {
        sim.settings().persistent = global.persistent_settings.clone();
    }
    if features
        .iter()
        .any(|f| f == crate::repo_data::SECURITY_FEATURE)
        && let Some(hash) = &global.elastic_password_sha256
        && sim.restore_password_hash(hash)
    {
        tracing::warn!(
            cluster = %sim.cluster_name,
            "simulated cluster restored the security feature state: the elastic password is the snapshot's"
        );
    }
}

pub async fn mount(sim: &Arc<Sim>, req: &Req, repo: &str, snapshot: &str) -> ApiResult {
    let body = req.json()?;
    let source = body_string(&body, "index")?
        .ok_or_else(|| ApiError::x_content_parse("[mount_searchable_snapshot] Required [index]"))?;
    let target = body_string(&body, "renamed_index")?.unwrap_or_else(|| source.clone());
    let ignored = body_names(&body, "ignore_index_settings")?;
    let storage = match req.param("storage").map(String::as_str) {
        None | Some("full_copy") => Storage::FullCopy,
        Some("shared_cache") => Storage::SharedCache,
        Some(other) => {
            return Err(ApiError::illegal_argument(format!(
                "unknown searchable snapshot storage type [{other}], expected one of [full_copy, shared_cache]"
            )));
        }
    };
    let wait = parse_bool(
        "wait_for_completion",
        req.param("wait_for_completion"),
        false,
    )?;
    // Elasticsearch checks the license once the request is read, before
    // it looks at the index name, the repository or the snapshot.
    crate::license::require_searchable_snapshots(sim)?;
    check_index_name(&target)?;
    let (record, blob) = restorable(sim, repo, snapshot).await?;
    let label = format!("{repo}:{snapshot}/{}", record.uuid);
    let index_blob = blob
        .indices
        .get(&source)
        .ok_or_else(|| ApiError::index_not_found(&source))?;
    let mut index = Index::from_blob(index_blob, index_blob.unreadable.is_none());
    // Its data is gone from the repository: its shards fail to start.
    if index_blob.unreadable.is_some() {
        index.lost_shards = (0..index.number_of_shards).collect();
    }
    // A mounted index has no replicas unless asked for, and carries the
    // settings Elasticsearch gives searchable snapshots.
    index.number_of_replicas = 0;
    let tier = match storage {
        Storage::FullCopy => "data_cold,data_warm,data_hot",
        Storage::SharedCache => "data_frozen",
    };
    for (key, value) in [
        ("store.type", "snapshot".to_string()),
        ("store.snapshot.repository_name", repo.to_string()),
        ("store.snapshot.snapshot_name", snapshot.to_string()),
        ("store.snapshot.snapshot_uuid", record.uuid.clone()),
        ("store.snapshot.index_name", source.clone()),
        (
            "store.snapshot.partial",
            (storage == Storage::SharedCache).to_string(),
        ),
        ("blocks.write", "true".to_string()),
        (
            "routing.allocation.include._tier_preference",
            tier.to_string(),
        ),
    ] {
        index.settings.insert(key.to_string(), value);
    }
    adjust_settings(&mut index, &label, body.get("index_settings"), &ignored)?;
    index.mounted = Some(Mounted {
        repository: repo.to_string(),
        snapshot: snapshot.to_string(),
        snapshot_uuid: record.uuid.clone(),
        index: source.clone(),
        storage,
    });
    // A shared cache copies nothing up front; a full copy copies it all.
    let duration = match storage {
        Storage::FullCopy => sim.faults().restore_delay,
        Storage::SharedCache => Duration::ZERO,
    };
    let bytes = index.store_bytes();
    index.recovery = recovery_from(repo, snapshot, &source, &new_uuid(), bytes, duration);
    let shards = index.number_of_shards;
    install(sim, &label, vec![(target.clone(), index, false)])?;
    tracing::info!(
        repository = repo,
        snapshot,
        index = %target,
        storage = storage.as_str(),
        "simulated cluster mounted a searchable snapshot"
    );
    if !wait {
        return Ok(Reply::ok(json!({ "accepted": true })));
    }
    tokio::time::sleep(duration).await;
    Ok(Reply::ok(json!({
        "snapshot": {
            "snapshot": snapshot,
            "indices": [target],
            "shards": { "total": shards, "failed": 0, "successful": shards },
        }
    })))
}

/// Splits `total` over `parts` shards, the remainder on the first.
fn share(total: u64, parts: u32, shard: u32) -> u64 {
    let parts = u64::from(parts.max(1));
    let base = total / parts;
    if shard == 0 {
        base + total % parts
    } else {
        base
    }
}

pub fn recovery(sim: &Sim, req: &Req, expression: Option<&str>) -> ApiResult {
    let active_only = parse_bool("active_only", req.param("active_only"), false)?;
    let nodes = sim.node_count();
    let all_nodes = sim.nodes();
    let state = sim.state();
    let names = match expression {
        Some(e) => pick(&state, e)?,
        None => state.index_names(),
    };
    let mut out = Map::new();
    for name in names {
        let Some(index) = state.indices.get(&name) else {
            continue;
        };
        let recovery = &index.recovery;
        let done = recovery.is_done();
        if active_only && done {
            continue;
        }
        let fraction = recovery.fraction();
        let elapsed = u64::try_from(recovery.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let took = if done {
            u64::try_from(recovery.duration.as_millis()).unwrap_or(u64::MAX)
        } else {
            elapsed
        };
        let (kind, source) = match &recovery.source {
            RecoverySource::EmptyStore => ("EMPTY_STORE", json!({})),
            RecoverySource::ExistingStore => (
                "EXISTING_STORE",
                json!({"bootstrap_new_history_uuid": false}),
            ),
            RecoverySource::Snapshot {
                repository,
                snapshot,
                index: source_index,
                restore_uuid,
            } => (
                "SNAPSHOT",
                json!({
                    "repository": repository,
                    "snapshot": snapshot,
                    "version": sim.version,
                    "index": source_index,
                    "restoreUUID": restore_uuid,
                }),
            ),
        };
        let mut shards = Vec::new();
        for shard in 0..index.number_of_shards {
            let bytes = share(recovery.bytes_total, index.number_of_shards, shard);
            let files = share(recovery.files_total, index.number_of_shards, shard);
            // Precision loss is irrelevant for a progress figure.
            let copied = |n: u64| {
                if done {
                    n
                } else {
                    (n as f64 * fraction) as u64
                }
            };
            let node = &all_nodes[(shard as usize) % all_nodes.len()];
            shards.push(shard_json(
                shard,
                kind,
                true,
                if done { "DONE" } else { "INDEX" },
                &source,
                node,
                recovery.start_millis,
                took,
                (bytes, copied(bytes)),
                (files, copied(files)),
            ));
            if done {
                // Replicas copy from their primary once it has started.
                for replica in 0..index.assigned_replicas(nodes) {
                    let node =
                        &all_nodes[(shard as usize + 1 + replica as usize) % all_nodes.len()];
                    let peer = json!({ "id": all_nodes[(shard as usize) % all_nodes.len()].id });
                    shards.push(shard_json(
                        shard,
                        "PEER",
                        false,
                        "DONE",
                        &peer,
                        node,
                        recovery.start_millis,
                        took,
                        (bytes, bytes),
                        (files, files),
                    ));
                }
            }
        }
        out.insert(name, json!({ "shards": shards }));
    }
    Ok(Reply::ok(Value::Object(out)))
}

#[allow(clippy::too_many_arguments)]
fn shard_json(
    shard: u32,
    kind: &str,
    primary: bool,
    stage: &str,
    source: &Value,
    node: &crate::state::Node,
    start_millis: i64,
    took: u64,
    (bytes, bytes_done): (u64, u64),
    (files, files_done): (u64, u64),
) -> Value {
    let took_i64 = i64::try_from(took).unwrap_or(i64::MAX);
    let mut shard_body = json!({
        "id": shard,
        "type": kind,
        "stage": stage,
        "primary": primary,
        "start_time_in_millis": start_millis,
        "total_time_in_millis": took,
        "source": source,
        "target": {
            "id": node.id,
            "host": "127.0.0.1",
            "transport_address": "127.0.0.1:9300",
            "ip": "127.0.0.1",
            "name": node.name,
        },
        "index": {
            "size": {
                "total_in_bytes": bytes,
                "reused_in_bytes": 0,
                "recovered_in_bytes": bytes_done,
                "recovered_from_snapshot_in_bytes": if kind == "SNAPSHOT" { bytes_done } else { 0 },
                "percent": if bytes == 0 { "0.0%".to_string() } else { percent(bytes_done, bytes) },
            },
            "files": {
                "total": files,
                "reused": 0,
                "recovered": files_done,
                "percent": if files == 0 { "0.0%".to_string() } else { percent(files_done, files) },
            },
            "total_time_in_millis": took,
            "source_throttle_time_in_millis": 0,
            "target_throttle_time_in_millis": 0,
        },
        "translog": {
            "recovered": 0,
            "total": 0,
            "percent": "100.0%",
            "total_on_start": 0,
            "total_time_in_millis": 0,
        },
        "verify_index": {
            "check_index_time_in_millis": 0,
            "total_time_in_millis": 0,
        },
    });
    if stage == "DONE" {
        shard_body["stop_time_in_millis"] = json!(start_millis + took_i64);
    }
    shard_body
}

#[cfg(test)]
mod tests {
    use super::java_replacement;

    #[test]
    fn java_replacements_become_regex_replacements() {
        assert_eq!(java_replacement("restored_$1"), "restored_${1}");
        assert_eq!(java_replacement("$1a"), "${1}a");
        assert_eq!(java_replacement("cost\\$"), "cost$$");
        assert_eq!(java_replacement("plain"), "plain");
    }
}
