//! The one error of the app layer. Store, snapshot and secret failures are
//! converted into it here; the HTTP layer turns it into a status and a
//! code in one place. Internal detail is logged, never carried.

use floe_domain::Code;
use floe_domain::validation::Invalid;
use floe_snapshots::SnapshotError;
use floe_store::{Kind, StoreError};

/// What was not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Deployment,
    Repository,
    Policy,
    Snapshot,
    /// A deployment's pending plan (`id` is the deployment's).
    PendingPlan,
    /// A deployment's Elasticsearch resource (`id` is `{deployment}/{ref_id}`).
    Elasticsearch,
    /// An organization's platform license (`id` is the organization).
    PlatformLicense,
    /// An API key (`id` is the key's).
    ApiKey,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AppError {
    /// The caller's roles do not allow this.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// The request's credential is refused (an API key that is not live).
    #[error("{code}: {message}")]
    Unauthorized { code: Code, message: String },
    /// No such resource in the caller's organization.
    #[error("{what:?} {id} was not found")]
    NotFound { what: Resource, id: String },
    /// The input is invalid; every offending field is listed.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The request conflicts with the resource's state. `field` names the
    /// part of the request at fault, when one is.
    #[error("{code}: {message}")]
    Conflict {
        code: Code,
        message: String,
        field: Option<String>,
    },
    /// The caller expected another version than `current`.
    #[error("the resource is at version {current}")]
    PreconditionFailed { current: u64 },
    /// Concurrent writers raced and this request lost; nothing was changed.
    #[error("concurrent change")]
    ConcurrentChange,
    /// A backing service is unavailable right now; retrying may work.
    #[error("{code}: {message}")]
    Unavailable { code: Code, message: String },
    /// A deployment's cluster refused the request (details are logged).
    #[error("{code}: {message}")]
    Upstream { code: Code, message: String },
    /// A bug or an unexpected failure (logged where it happened).
    #[error("internal error")]
    Internal,
}

impl AppError {
    pub fn not_found(what: Resource, id: impl Into<String>) -> AppError {
        AppError::NotFound {
            what,
            id: id.into(),
        }
    }

    pub fn conflict(code: Code, message: impl Into<String>) -> AppError {
        AppError::Conflict {
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn conflict_on(
        code: Code,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> AppError {
        AppError::Conflict {
            code,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    pub fn invalid(code: Code, field: impl Into<String>, message: impl Into<String>) -> AppError {
        AppError::Invalid(Invalid::one(field, code, message))
    }

    /// A store failure of a write that names `id` and was conditional on
    /// the version the caller `expected` (when it gave one): a lost race
    /// answers 412 to a caller who named a version, and a vanished record
    /// is `what` not found.
    pub(crate) fn from_write(
        e: StoreError,
        expected: Option<u64>,
        what: Resource,
        id: &str,
    ) -> AppError {
        match e {
            StoreError::VersionMismatch { current } if expected.is_some() => {
                AppError::PreconditionFailed { current }
            }
            StoreError::NotFound => AppError::not_found(what, id),
            other => other.into(),
        }
    }
}

/// The request that holds a reference the store found dangling.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Holder<'a> {
    /// A deployment spec, with its attached policies (to name the index).
    Deployment { policies: &'a [String] },
    /// A snapshot policy's `repository`.
    Policy,
}

/// Turns a dangling reference into a 400 on the field that holds it.
pub(crate) fn reference_error(holder: Holder<'_>, e: StoreError) -> AppError {
    let StoreError::MissingReference { kind, key } = e else {
        return e.into();
    };
    match (holder, kind) {
        (_, Kind::Repository) => AppError::invalid(
            Code::VALIDATION_REPOSITORY_NOT_FOUND,
            match holder {
                Holder::Deployment { .. } => "snapshot.repository",
                Holder::Policy => "repository",
            },
            format!("snapshot repository '{key}' does not exist"),
        ),
        (Holder::Deployment { policies }, Kind::Policy) => {
            let i = policies.iter().position(|p| *p == key).unwrap_or(0);
            AppError::invalid(
                Code::VALIDATION_POLICY_NOT_FOUND,
                format!("snapshot.policies[{i}]"),
                format!("snapshot policy {key} does not exist"),
            )
        }
        (_, kind) => StoreError::MissingReference { kind, key }.into(),
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> AppError {
        match e {
            StoreError::Unavailable(detail) => {
                tracing::error!(error = %detail, "store unavailable");
                AppError::Unavailable {
                    code: Code::INTERNAL_STORE_UNAVAILABLE,
                    message: "storage is unavailable right now; nothing was changed, retry later"
                        .into(),
                }
            }
            StoreError::VersionMismatch { .. } => AppError::ConcurrentChange,
            StoreError::BadCursor => AppError::invalid(
                Code::VALIDATION_CURSOR,
                "cursor",
                "is not a cursor this API returned",
            ),
            StoreError::MissingReference { kind, key } => {
                let (field, what) = match kind {
                    Kind::Repository => ("repository", "snapshot repository"),
                    Kind::Policy => ("policies", "snapshot policy"),
                    _ => ("reference", "resource"),
                };
                AppError::invalid(
                    Code::VALIDATION_REFERENCE_NOT_FOUND,
                    field,
                    format!("{what} '{key}' does not exist"),
                )
            }
            other => {
                tracing::error!(error = %other, "unexpected store error");
                AppError::Internal
            }
        }
    }
}

/// The one place a snapshot failure becomes an app error.
impl From<SnapshotError> for AppError {
    fn from(e: SnapshotError) -> AppError {
        match e {
            SnapshotError::DeploymentNotFound(id) => AppError::not_found(Resource::Deployment, id),
            SnapshotError::NotRunning { id, status } => AppError::conflict(
                Code::DEPLOYMENTS_NOT_RUNNING,
                format!(
                    "deployment {id} is {}; snapshots need a running deployment",
                    status.as_str()
                ),
            ),
            SnapshotError::NoRepository(id) => AppError::conflict(
                Code::SNAPSHOTS_NO_REPOSITORY,
                format!(
                    "deployment {id} has no snapshot repository; attach one (snapshot.repository) first"
                ),
            ),
            SnapshotError::RepositoryNotFound(name) => AppError::conflict(
                Code::SNAPSHOTS_REPOSITORY_NOT_FOUND,
                format!("the deployment's snapshot repository {name} does not exist"),
            ),
            SnapshotError::SnapshotNotFound(name) => AppError::not_found(Resource::Snapshot, name),
            SnapshotError::SnapshotExists(name) => AppError::conflict(
                Code::SNAPSHOTS_SNAPSHOT_EXISTS,
                format!("the deployment already has a snapshot named {name}"),
            ),
            SnapshotError::Pinned { snapshot, by } => AppError::conflict_on(
                Code::SNAPSHOTS_SNAPSHOT_PINNED,
                "name",
                format!(
                    "snapshot {snapshot} is pinned by {}, which restores or mounts it; delete that clone first (a restore clone releases it once its restore has completed)",
                    by.join(", ")
                ),
            ),
            SnapshotError::Moved {
                snapshot,
                taken_at,
                now_at,
            } => AppError::conflict_on(
                Code::SNAPSHOTS_SNAPSHOT_MOVED,
                "name",
                format!(
                    "snapshot {snapshot} was taken at {taken_at}, but its repository now keeps this deployment's snapshots at {now_at}: it cannot be deleted there (point the repository back to delete it)"
                ),
            ),
            SnapshotError::AlreadyRunning { repository } => AppError::conflict(
                Code::SNAPSHOTS_CONCURRENT_SNAPSHOT,
                format!(
                    "a snapshot is already running in repository {repository}; wait for it to finish"
                ),
            ),
            SnapshotError::Invalid { field, message } => {
                let code = if field.starts_with("indices") {
                    Code::VALIDATION_INDEX_PATTERN
                } else {
                    Code::VALIDATION_SNAPSHOT_NAME
                };
                AppError::invalid(code, field, message)
            }
            SnapshotError::Store(e) => e.into(),
            // Running on the record, but no node runs (a plan was ended by
            // force before its nodes came, or they were all lost): a state
            // to fix, not an outage to wait out.
            SnapshotError::Cluster(floe_clusters::ClusterError::NoRunningNode {
                deployment_id,
            }) => AppError::conflict(
                Code::DEPLOYMENTS_NOT_REACHABLE,
                format!(
                    "deployment {deployment_id} has no running node to take the snapshot on; start it again or send its spec to heal it"
                ),
            ),
            e @ (SnapshotError::Cluster(_) | SnapshotError::Elastic(_)) => {
                tracing::warn!(error = %e, "cluster call failed");
                if e.is_transient() {
                    AppError::Unavailable {
                        code: Code::SNAPSHOTS_CLUSTER_UNAVAILABLE,
                        message:
                            "the deployment's cluster cannot be reached right now; retry later"
                                .into(),
                    }
                } else {
                    AppError::Upstream {
                        code: Code::SNAPSHOTS_CLUSTER_ERROR,
                        message:
                            "the deployment's cluster refused the request; the details are logged"
                                .into(),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::AppError;
    use floe_domain::Code;
    use floe_snapshots::SnapshotError;

    #[test]
    fn a_running_record_without_a_running_node_is_a_conflict_not_an_outage() {
        let e = AppError::from(SnapshotError::Cluster(
            floe_clusters::ClusterError::NoRunningNode {
                deployment_id: "d1".into(),
            },
        ));
        assert!(
            matches!(&e, AppError::Conflict { code, .. } if *code == Code::DEPLOYMENTS_NOT_REACHABLE),
            "{e:?}"
        );
    }
}
