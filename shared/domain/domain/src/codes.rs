//! Every error code the API answers, in one list: its name (stable: clients
//! branch on it, so a name is never changed or reused), the HTTP status it
//! is answered with, and what it means. The API takes a refusal's status
//! from here, and the OpenAPI document's error descriptions are written
//! from here, so the three cannot disagree.

use serde::{Serialize, Serializer};
use std::fmt;

/// One error code of the API.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Code {
    name: &'static str,
    status: u16,
    meaning: &'static str,
}

impl Code {
    /// The code as clients see it, e.g. `validation.range`.
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// The HTTP status a response with this code has.
    pub const fn status(self) -> u16 {
        self.status
    }

    /// One sentence on what it means and what to do about it.
    pub const fn meaning(self) -> &'static str {
        self.meaning
    }

    /// The code with this name, if the API has one.
    pub fn find(name: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.name == name)
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.name
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.name == *other
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name)
    }
}

/// Declares each code as an associated constant and lists them all in
/// `Code::ALL`, in the order written (grouped by family).
macro_rules! codes {
    ($($id:ident = $name:literal, $status:literal, $meaning:literal;)*) => {
        impl Code {
            $(
                #[doc = $meaning]
                pub const $id: Code = Code { name: $name, status: $status, meaning: $meaning };
            )*
            /// Every code, grouped by family.
            pub const ALL: &'static [Code] = &[$(Code::$id),*];
        }
    };
}

codes! {
    // Authentication and roles.
    AUTH_MISSING_TOKEN = "auth.missing_token", 401, "No `Authorization: Bearer <token>` header was sent.";
    AUTH_INVALID_TOKEN = "auth.invalid_token", 401, "The token is not a well-formed JWT.";
    AUTH_UNSUPPORTED_ALGORITHM = "auth.unsupported_algorithm", 401, "The token is signed with an algorithm this platform does not accept.";
    AUTH_UNKNOWN_KEY = "auth.unknown_key", 401, "The token names a signing key the platform's key set does not hold.";
    AUTH_KEYS_UNAVAILABLE = "auth.keys_unavailable", 401, "The platform could not fetch its signing keys to check the token; retry later.";
    AUTH_BAD_SIGNATURE = "auth.bad_signature", 401, "The token's signature does not verify.";
    AUTH_TOKEN_EXPIRED = "auth.token_expired", 401, "The token has expired; get a new one.";
    AUTH_TOKEN_NOT_YET_VALID = "auth.token_not_yet_valid", 401, "The token's `nbf` lies in the future.";
    AUTH_WRONG_ISSUER = "auth.wrong_issuer", 401, "The token was issued by another issuer than the platform trusts.";
    AUTH_WRONG_AUDIENCE = "auth.wrong_audience", 401, "The token is meant for another audience.";
    AUTH_INVALID_CLAIMS = "auth.invalid_claims", 401, "The token's claims (organization, roles) are missing or malformed.";
    AUTH_NO_ROLE = "auth.no_role", 401, "The token grants none of the platform's roles.";
    AUTH_FORBIDDEN = "auth.forbidden", 403, "The caller's roles do not allow this operation, or this organization.";
    AUTH_INVALID_API_KEY = "auth.invalid_api_key", 401, "The API key is not one this platform issued, or it was deleted.";
    AUTH_API_KEY_EXPIRED = "auth.api_key_expired", 401, "The API key has expired; make a new one.";

    // The request itself, before any use case runs.
    REQUEST_BODY_REQUIRED = "request.body_required", 400, "The operation needs a JSON body and none was sent.";
    REQUEST_MALFORMED_JSON = "request.malformed_json", 400, "The body is not valid JSON.";
    REQUEST_MALFORMED_QUERY = "request.malformed_query", 400, "The query string could not be read.";
    REQUEST_UNREADABLE_BODY = "request.unreadable_body", 400, "The body could not be read to its end.";
    REQUEST_BODY_TOO_LARGE = "request.body_too_large", 413, "The body is larger than the operation accepts.";
    REQUEST_UNSUPPORTED_MEDIA_TYPE = "request.unsupported_media_type", 415, "The body is not sent as `application/json`.";
    REQUEST_VERSION_MISMATCH = "request.version_mismatch", 412, "`If-Match` or `?version=` names another version than the current one; read the resource again.";
    REQUEST_CONCURRENT_CHANGE = "request.concurrent_change", 409, "Another request changed the resource at the same moment; nothing was changed, read it again and retry.";
    REQUEST_IDEMPOTENCY_KEY_REUSED = "request.idempotency_key_reused", 409, "The `Idempotency-Key` was sent before with another body.";
    REQUEST_IDEMPOTENCY_KEY_SPENT = "request.idempotency_key_spent", 409, "The `Idempotency-Key` created a deployment that has since been deleted; send a new key.";

    // The router.
    ROOT_NOT_FOUND = "root.not_found", 404, "No API path matches the request.";
    ROOT_METHOD_NOT_ALLOWED = "root.method_not_allowed", 405, "The path exists but does not take that method.";

    // Input that breaks a rule: every offending field is named in `fields`.
    VALIDATION_REQUIRED = "validation.required", 400, "A required field or parameter is missing.";
    VALIDATION_TYPE = "validation.type", 400, "A field has the wrong JSON type, or a number where a whole number is required.";
    VALIDATION_UNKNOWN_FIELD = "validation.unknown_field", 400, "The body has a field the operation does not take.";
    VALIDATION_UNKNOWN_PARAMETER = "validation.unknown_parameter", 400, "The query has a parameter the operation does not take.";
    VALIDATION_UNKNOWN_VALUE = "validation.unknown_value", 400, "A field holds a value outside its allowed set.";
    VALIDATION_BOOLEAN = "validation.boolean", 400, "A parameter must be `true` or `false`.";
    VALIDATION_RANGE = "validation.range", 400, "A number is outside its allowed range.";
    VALIDATION_LENGTH = "validation.length", 400, "A text or list is shorter or longer than allowed.";
    VALIDATION_TOO_LARGE = "validation.too_large", 400, "A value is larger than the platform allows.";
    VALIDATION_DUPLICATE = "validation.duplicate", 400, "The same item is given twice where each must be unique.";
    VALIDATION_NOT_ALLOWED = "validation.not_allowed", 400, "The value is not allowed in this combination.";
    VALIDATION_CREATE_ONLY = "validation.create_only", 400, "The field can be set only when the resource is created.";
    VALIDATION_READ_ONLY = "validation.read_only", 400, "The field is set by the platform and cannot be sent.";
    VALIDATION_ID = "validation.id", 400, "A reference is not of the form of the platform's ids.";
    VALIDATION_NAME = "validation.name", 400, "A name breaks the naming rules.";
    VALIDATION_TAG = "validation.tag", 400, "A tag is invalid: a key with `:` or of a bad length, or a filter not of the form `key:value`.";
    VALIDATION_ORGANIZATION = "validation.organization", 400, "The organization header names no valid organization.";
    VALIDATION_CURSOR = "validation.cursor", 400, "The cursor is not one this API returned.";
    VALIDATION_IF_MATCH = "validation.if_match", 400, "`If-Match` is not an ETag this API gives, such as `\"3\"`.";
    VALIDATION_VERSION = "validation.version", 400, "`?version=` is not a whole number or disagrees with `If-Match`, or a deployment's Elasticsearch version is not one the platform runs.";
    VALIDATION_IDEMPOTENCY_KEY = "validation.idempotency_key", 400, "The `Idempotency-Key` header is empty, too long or not printable.";
    VALIDATION_INSTANCE_TYPE = "validation.instance_type", 400, "The instance type is not in the instance catalog.";
    VALIDATION_TOPOLOGY = "validation.topology", 400, "The node groups do not form a cluster Elasticsearch can run.";
    VALIDATION_SHARED_CACHE = "validation.shared_cache", 400, "The searchable-snapshot shared cache does not fit the node group.";
    VALIDATION_SETTING_KEY = "validation.setting_key", 400, "A user setting is not one a deployment may set.";
    VALIDATION_SETTING_VALUE = "validation.setting_value", 400, "A user setting's value is invalid.";
    VALIDATION_PLATFORM_OWNED_SETTING = "validation.platform_owned_setting", 400, "The setting is managed by the platform and cannot be overridden.";
    VALIDATION_BUCKET = "validation.bucket", 400, "The bucket name breaks S3's bucket naming rules.";
    VALIDATION_BASE_PATH = "validation.base_path", 400, "The repository's base path is invalid.";
    VALIDATION_REGION = "validation.region", 400, "The region is not a valid region name.";
    VALIDATION_ENDPOINT = "validation.endpoint", 400, "The S3 endpoint is invalid or points where the platform may not connect.";
    VALIDATION_LOCATION = "validation.location", 400, "The repository's location is invalid.";
    VALIDATION_ACCESS_KEY = "validation.access_key", 400, "The access key is invalid or given without its secret key.";
    VALIDATION_SECRET_KEY = "validation.secret_key", 400, "The secret key is invalid or given without its access key.";
    VALIDATION_SESSION_TOKEN = "validation.session_token", 400, "The session token is invalid or given without keys.";
    VALIDATION_BYTE_SIZE = "validation.byte_size", 400, "A size is not an Elasticsearch byte size such as `40mb`.";
    VALIDATION_TIME_VALUE = "validation.time_value", 400, "A duration is not an Elasticsearch time value such as `30d`.";
    VALIDATION_SCHEDULE = "validation.schedule", 400, "A schedule needs exactly one of `interval` and `cron`.";
    VALIDATION_INTERVAL = "validation.interval", 400, "The schedule's interval is invalid or outside the allowed range.";
    VALIDATION_CRON = "validation.cron", 400, "The schedule's cron expression is invalid.";
    VALIDATION_TIMEZONE = "validation.timezone", 400, "The time zone is not an IANA time zone name.";
    VALIDATION_SNAPSHOT_NAME = "validation.snapshot_name", 400, "A snapshot name or name pattern is invalid.";
    VALIDATION_INDEX_NAME = "validation.index_name", 400, "An index name is invalid.";
    VALIDATION_INDEX_PATTERN = "validation.index_pattern", 400, "An index pattern is invalid.";
    VALIDATION_MOUNT_RENAME = "validation.mount_rename", 400, "A mount's rename pattern and replacement do not go together.";
    VALIDATION_LICENSE_FOR_MOUNT = "validation.license_for_mount", 400, "Only a mount clone runs on a license it asks for; a restore clone needs none.";
    VALIDATION_REPOSITORY_NOT_FOUND = "validation.repository_not_found", 400, "The request names a snapshot repository that does not exist.";
    VALIDATION_POLICY_NOT_FOUND = "validation.policy_not_found", 400, "The request names a snapshot policy that does not exist.";
    VALIDATION_INVALID = "validation.invalid", 400, "A field breaks a rule that has no code of its own; the message says which.";
    VALIDATION_REFERENCE_NOT_FOUND = "validation.reference_not_found", 400, "The request names a resource that does not exist.";

    // Deployments.
    DEPLOYMENTS_DEPLOYMENT_NOT_FOUND = "deployments.deployment_not_found", 404, "No such deployment in the caller's organization.";
    DEPLOYMENTS_DEPLOYMENT_RESOURCE_NOT_FOUND = "deployments.deployment_resource_not_found", 404, "No such Elasticsearch resource; a deployment has one, `main-elasticsearch`.";
    DEPLOYMENTS_NO_PENDING_PLAN = "deployments.no_pending_plan", 404, "The deployment has no plan running.";
    DEPLOYMENTS_PLAN_IN_PROGRESS = "deployments.plan_in_progress", 409, "A plan is already running on the deployment; wait for it or cancel it.";
    DEPLOYMENTS_NOT_RUNNING = "deployments.not_running", 409, "The operation needs a running deployment.";
    DEPLOYMENTS_NOT_STOPPED = "deployments.not_stopped", 409, "The operation needs a stopped deployment.";
    DEPLOYMENTS_DEPLOYMENT_NOT_STOPPED = "deployments.deployment_not_stopped", 409, "A deployment is deleted only after it is shut down.";
    DEPLOYMENTS_ALREADY_STOPPED = "deployments.already_stopped", 409, "The deployment is already stopped.";
    DEPLOYMENTS_NOT_REACHABLE = "deployments.not_reachable", 409, "The deployment has no node to reach (it is stopped, or not running yet).";
    DEPLOYMENTS_VERSION_CHANGE = "deployments.version_change", 400, "The version change is not one Elasticsearch supports (a downgrade, or a skipped major).";

    // Snapshot repositories and policies.
    REPOSITORIES_REPOSITORY_NOT_FOUND = "repositories.repository_not_found", 404, "No such snapshot repository.";
    REPOSITORIES_REPOSITORY_IN_USE = "repositories.repository_in_use", 409, "Deployments or policies still use the repository.";
    REPOSITORIES_LOCATION_IN_USE = "repositories.location_in_use", 409, "Another repository already points at that bucket and path.";
    REPOSITORIES_BUCKET_CLAIMED = "repositories.bucket_claimed", 409, "Another organization has a repository on the same endpoint and bucket; two organizations share one only when a platform admin marks both repositories shared_across_organizations.";
    POLICIES_POLICY_NOT_FOUND = "policies.policy_not_found", 404, "No such snapshot policy in the caller's organization.";
    POLICIES_POLICY_IN_USE = "policies.policy_in_use", 409, "Deployments still attach the policy.";

    // Snapshots.
    SNAPSHOTS_SNAPSHOT_NOT_FOUND = "snapshots.snapshot_not_found", 404, "No such snapshot of the deployment.";
    SNAPSHOTS_NO_REPOSITORY = "snapshots.no_repository", 409, "The deployment has no snapshot repository.";
    SNAPSHOTS_REPOSITORY_NOT_FOUND = "snapshots.repository_not_found", 409, "The deployment's snapshot repository is gone.";
    SNAPSHOTS_SNAPSHOT_EXISTS = "snapshots.snapshot_exists", 409, "A snapshot of that name already exists.";
    SNAPSHOTS_SNAPSHOT_PINNED = "snapshots.snapshot_pinned", 409, "A clone still mounts the snapshot; it cannot be deleted.";
    SNAPSHOTS_SNAPSHOT_MOVED = "snapshots.snapshot_moved", 409, "The deployment's snapshots are now kept at another path, so this snapshot cannot be deleted there.";
    SNAPSHOTS_CONCURRENT_SNAPSHOT = "snapshots.concurrent_snapshot", 409, "The cluster is already taking or deleting a snapshot; retry when it is done.";
    SNAPSHOTS_CLUSTER_UNAVAILABLE = "snapshots.cluster_unavailable", 503, "The deployment's cluster did not answer; retry later.";
    SNAPSHOTS_CLUSTER_ERROR = "snapshots.cluster_error", 502, "The deployment's cluster refused the snapshot request; the message gives its reason.";

    // The platform license.
    LICENSE_INVALID_LICENSE = "license.invalid_license", 400, "The license could not be taken: a field is missing or wrong, or the license has expired (the message names the field).";
    LICENSE_LICENSE_NOT_FOUND = "license.license_not_found", 404, "The organization has no platform license.";

    // API keys.
    API_KEYS_API_KEY_NOT_FOUND = "api_keys.api_key_not_found", 404, "No such API key of the caller (or, for a platform admin, of that user in the organization).";
    API_KEYS_TOO_MANY = "api_keys.too_many", 409, "The caller holds as many API keys as one person may (100); delete one first.";

    // Restores and clones.
    RESTORE_REPOSITORY_REQUIRED = "restore.repository_required", 400, "The restore needs a repository, and the source has none.";
    RESTORE_REPOSITORY_NOT_FOUND = "restore.repository_not_found", 400, "The restore names a repository that does not exist.";
    RESTORE_REPOSITORY_UNREACHABLE = "restore.repository_unreachable", 400, "The nodes cannot reach that repository: they have one S3 client, set up for the deployment's own repository.";
    RESTORE_SOURCE_NOT_FOUND = "restore.source_not_found", 400, "The source deployment does not exist in the caller's organization.";
    RESTORE_SNAPSHOT_NOT_FOUND = "restore.snapshot_not_found", 400, "The named snapshot is not in the repository.";
    RESTORE_NO_SUCCESSFUL_SNAPSHOT = "restore.no_successful_snapshot", 409, "The source has no successful snapshot to restore from yet.";
    RESTORE_SNAPSHOT_NOT_RESTORABLE = "restore.snapshot_not_restorable", 409, "The snapshot cannot be restored (it failed, is being deleted, or is of a newer version).";
    RESTORE_LICENSE_REQUIRED = "restore.license_required", 400, "Mounting searchable snapshots needs an Elasticsearch enterprise license or a trial, and the organization's platform license does not allow it (or there is none); upload one, or ask for the trial (`license: trial`).";
    RESTORE_SOURCE_PATH_READ_ONLY = "restore.source_path_read_only", 409, "A clone mounts snapshots through that repository read-only at the source's path; it cannot be registered writable here.";

    // The cluster proxy.
    DRILLS_DRILL_RUNNING = "drills.drill_running", 409, "A restore drill of the deployment is already running; wait for it to end.";

    PROXY_METHOD = "proxy.method", 400, "The proxy does not pass that HTTP method.";
    PROXY_PATH = "proxy.path", 400, "The proxied path is not allowed (traversal, or an API the platform owns).";
    PROXY_CLUSTER_UNREACHABLE = "proxy.cluster_unreachable", 503, "The deployment's cluster did not answer through the proxy; retry later.";

    // The platform itself.
    INTERNAL_STORE_UNAVAILABLE = "internal.store_unavailable", 503, "The record store is unavailable; nothing was changed, retry later.";
    INTERNAL_SECRETS_UNAVAILABLE = "internal.secrets_unavailable", 503, "Credentials could not be sealed or opened right now; retry later.";
    INTERNAL_ERROR = "internal.error", 500, "An unexpected failure; it has been logged with the request id.";
}

/// The codes answered with `status`, in the list's order.
pub fn with_status(status: u16) -> impl Iterator<Item = Code> {
    Code::ALL
        .iter()
        .copied()
        .filter(move |c| c.status == status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_and_of_the_form_family_dot_reason() {
        let mut seen = BTreeSet::new();
        for code in Code::ALL {
            assert!(seen.insert(code.name()), "{} is listed twice", code.name());
            let (family, reason) = code.name().split_once('.').expect("family.reason");
            for part in [family, reason] {
                assert!(
                    !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                    "{}: lowercase words joined by `_`",
                    code.name()
                );
            }
            assert!(code.meaning().ends_with('.'), "{}: a sentence", code.name());
        }
    }

    #[test]
    fn each_family_answers_the_status_its_kind_of_refusal_has() {
        for code in Code::ALL {
            let family = code.name().split('.').next().unwrap_or_default();
            let allowed: &[u16] = match family {
                "validation" => &[400],
                "auth" => &[401, 403],
                "internal" => &[500, 503],
                _ => &[400, 404, 405, 409, 412, 413, 415, 502, 503],
            };
            assert!(
                allowed.contains(&code.status()),
                "{} answers {}",
                code.name(),
                code.status()
            );
            assert!(code.status() >= 400, "{} is an error", code.name());
        }
    }

    #[test]
    fn a_code_is_found_by_its_name_and_serialises_as_it() -> Result<(), serde_json::Error> {
        assert_eq!(Code::find("validation.range"), Some(Code::VALIDATION_RANGE));
        assert_eq!(Code::find("validation.nope"), None);
        assert_eq!(
            serde_json::to_string(&Code::SNAPSHOTS_SNAPSHOT_PINNED)?,
            "\"snapshots.snapshot_pinned\""
        );
        assert_eq!(
            with_status(412).collect::<Vec<_>>(),
            [Code::REQUEST_VERSION_MISMATCH]
        );
        Ok(())
    }
}
