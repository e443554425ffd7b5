//! Examples for the OpenAPI document. Credentials here are placeholders that
//! cannot be mistaken for real ones.

use serde_json::{Value, json};

pub const DEPLOYMENT_ID: &str = "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b";
pub const POLICY_ID: &str = "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c";
pub const PLAN_ID: &str = "0193a0c4d2b87c3e9a4b5c6d7e8f9a0c";
const TIME: &str = "2026-11-29T10:00:00Z";

pub fn repository_request() -> Value {
    json!({"type": "s3", "settings": {
        "bucket": "elastic-snapshots", "endpoint": "s3.example.com", "protocol": "https",
        "path_style_access": true, "access_key": "<access-key-id>", "secret_key": "<secret-access-key>",
        "max_snapshot_bytes_per_sec": "150mb", "max_restore_bytes_per_sec": "1gb"}})
}

/// An enterprise license as Elastic issues it (the signature shortened).
pub fn license_object() -> Value {
    json!({"license": {
        "uid": "893361dc-9749-4997-93cb-802e3d7fa4a8", "type": "enterprise",
        "issue_date_in_millis": 1767225600000_i64, "start_date_in_millis": 1767225600000_i64,
        "expiry_date_in_millis": 1830297599999_i64, "max_resource_units": 10,
        "issued_to": "Example Corp", "issuer": "API", "signature": "AAAABAAAAA3FXON9kGmNqmH+ASDWAAAAIAo5..."}})
}

pub fn license_info() -> Value {
    json!({"uid": "893361dc-9749-4997-93cb-802e3d7fa4a8", "type": "enterprise",
        "issuer": "API", "issued_to": "Example Corp",
        "issue_date_in_millis": 1767225600000_i64, "start_date_in_millis": 1767225600000_i64,
        "expiry_date_in_millis": 1830297599999_i64, "expiry": "2027-12-31T23:59:59.999Z",
        "max_resource_units": 10, "status": "active", "allows_searchable_snapshots": true,
        "uploaded": TIME, "uploaded_by": "admin@example.com"})
}

pub fn repository_view() -> Value {
    json!({"name": "main-backups", "type": "s3", "settings": {
        "bucket": "elastic-snapshots", "endpoint": "s3.example.com", "protocol": "https",
        "path_style_access": true, "access_key": "****-id>", "secret_key_set": true, "session_token_set": false,
        "max_snapshot_bytes_per_sec": "150mb", "max_restore_bytes_per_sec": "1gb"},
        "used_by": 1, "resource_version": 1, "created": TIME, "updated": TIME})
}

pub fn deployment_request() -> Value {
    json!({"name": "logs-prod", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content", "ingest"],
            "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3,
            "storage": {"size_gb": 200, "volume_type": "gp3"}}],
        "user_settings": {"thread_pool.snapshot.max": 8},
        "snapshot": {"repository": "main-backups", "policies": [POLICY_ID]},
        "metadata": {"tags": [{"key": "team", "value": "search"}]}})
}

pub fn deployment_view() -> Value {
    json!({"id": DEPLOYMENT_ID, "name": "logs-prod", "version": "8.15.3", "status": "initializing",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content", "ingest"],
            "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3,
            "storage": {"size_gb": 200, "volume_type": "gp3"},
            "arch": "arm64", "vcpus": 4, "memory_mib": 16384, "jvm_heap_mib": 8192}],
        "user_settings": {"thread_pool.snapshot.max": 8},
        "snapshot": {"repository": "main-backups", "policies": [POLICY_ID]},
        "metadata": {"tags": [{"key": "team", "value": "search"}]},
        "plans": {"pending": {"plan_id": PLAN_ID, "kind": "create"}},
        "resource_version": 1, "created": TIME, "updated": TIME})
}

pub fn policy_request() -> Value {
    json!({"name": "every-30-minutes", "schedule": {"interval": "30m"}, "snapshot_name": "<floe-{now/d}>",
        "repository": "main-backups", "indices": ["logs-*"], "include_global_state": false,
        "retention": {"expire_after": "7d", "min_count": 5, "max_count": 100}, "enabled": true})
}

pub fn policy_view() -> Value {
    json!({"id": POLICY_ID, "name": "every-30-minutes", "schedule": {"interval": "30m"},
        "snapshot_name": "<floe-{now/d}>", "repository": "main-backups", "indices": ["logs-*"],
        "include_global_state": false, "retention": {"expire_after": "7d", "min_count": 5, "max_count": 100},
        "enabled": true, "schedule_expression": {"expression": "rate(30 minutes)", "timezone": "UTC"},
        "attached_deployments": 1, "resource_version": 1, "created": TIME, "updated": TIME})
}

pub fn plans() -> Value {
    json!({
        "pending": {"plan_attempt_id": PLAN_ID, "kind": "create", "status": "running",
            "source": {"action": "deployments.create", "user": "alice", "date": "2026-11-29T10:00:00Z"},
            "created": "2026-11-29T10:00:00Z", "cancel_requested": false,
            "steps": [
                {"step_id": "template:hot", "status": "succeeded", "started": "2026-11-29T10:00:01Z", "duration_in_millis": 412, "attempts": 1, "info_log": ["launch template floe-…-hot (lt-0abc) for m6g.xlarge (arm64)"]},
                {"step_id": "launch:hot", "status": "succeeded", "started": "2026-11-29T10:00:02Z", "duration_in_millis": 1830, "attempts": 1, "info_log": ["1 nodes of hot in zone 0", "1 nodes of hot in zone 1", "1 nodes of hot in zone 2"]},
                {"step_id": "wait-running", "status": "waiting", "started": "2026-11-29T10:00:04Z", "attempts": 3, "info_log": ["0 of 3 nodes running", "2 of 3 nodes running"]}
            ]},
        "history": []
    })
}

pub fn snapshot() -> Value {
    json!({
        "snapshot": "floe-2026.11.29-3f9c2a7d1b0e", "repository": "main-backups",
        "uuid": "dpGR0bHlS5eSn5xE1ZKYKg", "state": "SUCCESS",
        "start_time": "2026-11-29T10:00:00Z", "end_time": "2026-11-29T10:00:42Z",
        "duration_in_millis": 42113, "indices": ["logs-2026.11.29"],
        "shards": {"total": 3, "successful": 3, "failed": 0}, "size_in_bytes": 73400320,
        "policy_id": POLICY_ID
    })
}

pub fn running_snapshot() -> Value {
    json!({
        "snapshot": "before-upgrade-2026.11.29", "repository": "main-backups", "uuid": "",
        "state": "IN_PROGRESS", "start_time": "2026-11-29T10:00:00Z", "indices": [],
        "shards": {"total": 0, "successful": 0, "failed": 0}
    })
}

/// A deleted deployment whose snapshots are kept.
pub fn former_deployment() -> Value {
    json!({"id": "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c", "name": "logs-2025", "version": "8.15.3",
        "repository": "main-backups", "deleted": "2026-11-30T08:12:00Z"})
}

pub fn snapshot_list() -> Value {
    json!({
        "snapshots": [snapshot()],
        "next_cursor": "ODFhMjJhMjIwZTViNzYzMDk1NTViMWE1MDZiNTViYTYjODIwMzk5NjA2NzQ5OSNmbG9l",
        "count": 12, "latest_status": "SUCCESS",
        "latest_successful_end_time": "2026-11-29T10:00:42Z", "healthy": true
    })
}

/// A `validate_only` create's answer: the deployment it would make (no id,
/// no version, no credentials) and its create plan's steps.
pub fn deployment_validation() -> Value {
    let mut deployment = deployment_view();
    deployment["id"] = json!("");
    deployment["resource_version"] = json!(0);
    deployment["plans"] = json!({});
    json!({"outcome": "create", "deployment": deployment,
        "plan": {"kind": "create", "steps": ["node-security", "repository-credentials",
            "template:hot", "launch:hot", "bootstrap-masters", "wait-running", "wait-joined",
            "register-repository", "record-access"]}})
}

pub fn api_key() -> Value {
    json!({"id": "0193a0c4d2b87c3e9a4b5c6d7e8f9a0e", "description": "nightly export job",
        "user_id": "ops@example.com", "roles": ["deployment_manager"],
        "creation_date": TIME, "expiration_date": "2027-03-01T12:00:00Z",
        "last_used_date": TIME, "expired": false})
}

pub fn created_api_key() -> Value {
    let mut key = api_key();
    key["key"] = json!("YWNtZTowMTkzYTBjNGQyYjg3YzNlOWE0YjVjNmQ3ZThmOWEwZTpleGFtcGxlLW9ubHk");
    if let Some(k) = key.as_object_mut() {
        k.remove("last_used_date");
    }
    key
}

/// A drill that passed.
pub fn drill() -> Value {
    json!({
        "id": "0193a0d5a1b27c3e9a4b5c6d7e8f9a10", "deployment_id": DEPLOYMENT_ID,
        "status": "passed", "mode": "restore",
        "snapshot": "floe-2026.11.29-3f9c2a7d1b0e", "repository": "main-backups",
        "clone_deployment_id": "0193a0d5a1b37c3e9a4b5c6d7e8f9a11",
        "plan_id": "0193a0d5a1b47c3e9a4b5c6d7e8f9a12",
        "started": "2026-11-29T12:00:00Z", "finished": "2026-11-29T12:04:10Z",
        "recovery_point_seconds": 7158,
        "recovery_time": {"total_millis": 212000, "provisioning_millis": 180000, "recovery_millis": 32000},
        "bytes_recovered": 73400320, "bytes_per_second": 2293760,
        "checks": [
            {"check": "green", "index": "logs-2026.11.29", "outcome": "passed", "detail": "health green"},
            {"check": "document_count", "index": "logs-2026.11.29", "outcome": "passed",
             "detail": "120000 documents, recorded 120000 before and 120000 after the snapshot"}
        ]
    })
}

/// A drill as it starts.
pub fn running_drill() -> Value {
    json!({
        "id": "0193a0d5a1b27c3e9a4b5c6d7e8f9a10", "deployment_id": DEPLOYMENT_ID,
        "status": "running", "mode": "restore",
        "snapshot": "floe-2026.11.29-3f9c2a7d1b0e", "repository": "main-backups",
        "clone_deployment_id": "0193a0d5a1b37c3e9a4b5c6d7e8f9a11",
        "plan_id": "0193a0d5a1b47c3e9a4b5c6d7e8f9a12",
        "started": "2026-11-29T12:00:00Z", "recovery_point_seconds": 7158, "checks": []
    })
}
