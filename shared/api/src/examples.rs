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
