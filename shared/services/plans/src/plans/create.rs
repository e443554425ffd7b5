//! Create: a new deployment's certificates and keys, its nodes, and (for a
//! clone) the snapshot it starts from. A failure undoes everything: no
//! instance, launch template or parameter of the deployment is left.

use crate::step::{Saga, action};
use crate::steps::client_repository_name;
use floe_domain::deployment::{DeploymentSpec, NodeRole};
use floe_domain::restore::{CloneSource, RestoreMode, RestoreTarget};

/// The steps that create `spec`, then restore `restore` into it (a clone).
pub fn saga(spec: &DeploymentSpec, restore: Option<&RestoreTarget>) -> Saga {
    nodes_saga(spec, restore, None, Secrets::New)
}

/// Whether the deployment's certificates, password and repository keys
/// are new with this plan (a create: a failure removes them) or kept from
/// before (a start: they stay for the next one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Secrets {
    New,
    Kept,
}

/// A cluster from nothing: keys, nodes, repository, and the snapshot it
/// starts from; a clone's `source`, which it still reads, is registered
/// again (read-only).
pub(crate) fn nodes_saga(
    spec: &DeploymentSpec,
    restore: Option<&RestoreTarget>,
    source: Option<&CloneSource>,
    secrets: Secrets,
) -> Saga {
    let mut saga = Saga::default();
    // A start (the spec applied again after a plan ended by force, or a
    // stopped deployment started) first deals with the instances an
    // earlier plan left: adopted into the cluster they formed, or
    // terminated before anything new bootstraps.
    if secrets == Secrets::Kept {
        saga.step(
            crate::steps::nodes::LEFTOVERS_STEP,
            action!(leftovers),
            action!(nothing),
        );
    }
    match secrets {
        Secrets::New => saga.step(
            "node-security",
            action!(node_security),
            action!(forget_node_security),
        ),
        Secrets::Kept => saga.step("node-security", action!(node_security), action!(nothing)),
    }
    // The step itself finds out, when it runs, whether the repository holds keys.
    if client_repository_name(spec, source).is_some() {
        match secrets {
            Secrets::New => saga.step(
                "repository-credentials",
                action!(repository_credentials),
                action!(forget_repository_credentials),
            ),
            Secrets::Kept => saga.step(
                "repository-credentials",
                action!(repository_credentials),
                action!(nothing),
            ),
        }
    }
    // The nodes' own identity, which the templates name.
    match secrets {
        Secrets::New => saga.step(
            "node-identity",
            action!(ensure_identity),
            action!(forget_identity),
        ),
        Secrets::Kept => saga.step("node-identity", action!(ensure_identity), action!(nothing)),
    }
    for g in &spec.node_groups {
        saga.group_step(
            "template",
            &g.id,
            action!(ensure_template(group)),
            action!(delete_template(group)),
        );
        saga.group_step(
            "launch",
            &g.id,
            action!(launch(group)),
            action!(terminate_launched(group)),
        );
    }
    if spec
        .node_groups
        .iter()
        .any(|g| g.roles.contains(&NodeRole::Master))
    {
        saga.step(
            "bootstrap-masters",
            action!(bootstrap_masters),
            action!(forget_parameters),
        );
    }
    saga.step("wait-running", action!(wait_running), action!(nothing));
    saga.step("wait-joined", action!(wait_joined), action!(nothing));
    if spec.repository().is_some() {
        saga.step(
            "register-repository",
            action!(register_repository),
            action!(nothing),
        );
    }
    // A clone's restore steps undo nothing: its cluster goes as a whole.
    let foreign = restore.is_some_and(|t| t.foreign_repository);
    if foreign || source.is_some_and(|s| s.reads_source()) {
        saga.step(
            "register-source",
            action!(register_source),
            action!(nothing),
        );
    }
    // The platform license, before anything restores: Elasticsearch
    // mounts only on the enterprise license or a trial.
    saga.step(
        crate::steps::license::STEP,
        action!(ensure_license),
        action!(nothing),
    );
    if let Some(t) = restore {
        match t.mode {
            RestoreMode::Restore => saga.step("restore", action!(restore), action!(nothing)),
            RestoreMode::Mount => saga.step("mount", action!(mount), action!(nothing)),
        }
        saga.step("wait-restored", action!(wait_restored), action!(nothing));
    }
    // Last: the nodes the deployment runs on, for the api to reach.
    saga.step("record-access", action!(record_access), action!(nothing));
    saga
}
