//! The IAM adapter of Floe's node identity port: each deployment's nodes run
//! with a role and an instance profile of their own, under one IAM path,
//! whose inline policy reads that deployment's parameters and nothing else
//! of SSM. A node taken over (an Elasticsearch plugin, a script) thus holds
//! credentials that open no other deployment's keys, certificates or
//! password.
//!
//! Every role is created with the stack's permissions boundary
//! (`NodePermissionsBoundary` in infra/template.yaml): the worker's grants
//! require it, so even a worker that wrote a wider policy could not give a
//! node more than the boundary allows. No managed policy is ever attached:
//! `iam:AttachRolePolicy` is not granted.
//!
//! This is the only crate that links `aws-sdk-iam`; the worker links it,
//! the api does not. Every operation is safe to run again: `ensure` creates
//! what is missing and overwrites the inline policy, `forget` takes apart
//! what is left, in the order IAM requires, and a missing piece is success.

mod error;

use async_trait::async_trait;
use aws_sdk_iam::Client;
use aws_sdk_iam::types::Tag;
use floe_compute::{
    ComputeError, NodeIdentity, PathAccess, SnapshotPath, TAG_DEPLOYMENT, node_identity_name,
};
use serde_json::{Value, json};

use crate::error::{IamFailure, permanent};

/// Every IAM operation this crate calls, and no other. The deploy
/// template's policy for the worker is checked against it.
pub const OPERATIONS: &[&str] = &[
    "AddRoleToInstanceProfile",
    "CreateInstanceProfile",
    "CreateRole",
    "DeleteInstanceProfile",
    "DeleteRole",
    "DeleteRolePolicy",
    "DetachRolePolicy",
    "GetInstanceProfile",
    "GetRole",
    "ListAttachedRolePolicies",
    "PutRolePolicy",
    "RemoveRoleFromInstanceProfile",
];

/// The IAM actions the worker's role needs for this crate: the operations
/// above, and `iam:TagRole`/`iam:TagInstanceProfile`, which IAM authorises
/// for the tags given while creating them.
pub const IAM_ACTIONS: &[&str] = &[
    "iam:AddRoleToInstanceProfile",
    "iam:CreateInstanceProfile",
    "iam:CreateRole",
    "iam:DeleteInstanceProfile",
    "iam:DeleteRole",
    "iam:DeleteRolePolicy",
    "iam:DetachRolePolicy",
    "iam:GetInstanceProfile",
    "iam:GetRole",
    "iam:ListAttachedRolePolicies",
    "iam:PutRolePolicy",
    "iam:RemoveRoleFromInstanceProfile",
    "iam:TagRole",
    "iam:TagInstanceProfile",
];

/// The name of the inline policy on every node role.
pub const POLICY_NAME: &str = "floe-node";

/// The path every node role and instance profile lives under when none is
/// configured; the worker's IAM grants are limited to it.
pub const DEFAULT_PATH: &str = "/floe-nodes/";

/// Who may assume a node role: EC2, for the instance profile.
const TRUST_POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

/// What every node role is made of; read from the worker's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamIdentityConfig {
    /// The IAM path of the roles and instance profiles, `/` at both ends
    /// (`/floe-nodes/`).
    pub path: String,
    /// The ARN of the managed policy every node role is bounded by.
    pub permissions_boundary: String,
    /// The ARN of the parameter prefix the deployments' paths are under,
    /// such as `arn:aws:ssm:eu-west-1:123456789012:parameter/floe`: a
    /// deployment's nodes may read `{this}/{deployment}/*`.
    pub parameters_arn: String,
    /// The KMS key the SecureStrings are encrypted with, when it is not
    /// SSM's default key (whose key policy already lets the account's
    /// principals decrypt through SSM).
    pub kms_key_arn: Option<String>,
    /// The S3 buckets the nodes may keep snapshots in with their own
    /// credentials (a repository on AWS S3 without keys of its own), by
    /// name: a role is granted paths in these buckets only, each path in
    /// its inline policy rather than attached as managed policies, so that
    /// the worker needs no `iam:AttachRolePolicy`, which could hand a node
    /// role any policy of the account.
    pub snapshot_buckets: Vec<String>,
}

#[derive(Debug)]
pub struct IamIdentity {
    client: Client,
    config: IamIdentityConfig,
}

impl IamIdentity {
    /// Builds the client from the process's shared SDK configuration.
    pub fn new(sdk: &aws_config::SdkConfig, config: IamIdentityConfig) -> IamIdentity {
        IamIdentity {
            client: Client::new(sdk),
            config,
        }
    }

    pub fn config(&self) -> &IamIdentityConfig {
        &self.config
    }

    /// The role's ARN, or `None` if there is no such role.
    async fn role(&self, name: &str) -> Result<Option<(String, String)>, ComputeError> {
        match self.client.get_role().role_name(name).send().await {
            Ok(out) => Ok(out
                .role()
                .map(|r| (r.arn().to_owned(), r.path().to_owned()))),
            Err(err) => {
                let failure = IamFailure::from_sdk("GetRole", name, &err);
                if failure.is_missing() {
                    Ok(None)
                } else {
                    Err(failure.into_compute_error())
                }
            }
        }
    }

    /// The instance profile's ARN and the names of its roles, or `None`.
    async fn profile(&self, name: &str) -> Result<Option<(String, Vec<String>)>, ComputeError> {
        match self
            .client
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(out) => Ok(out.instance_profile().map(|p| {
                (
                    p.arn().to_owned(),
                    p.roles().iter().map(|r| r.role_name().to_owned()).collect(),
                )
            })),
            Err(err) => {
                let failure = IamFailure::from_sdk("GetInstanceProfile", name, &err);
                if failure.is_missing() {
                    Ok(None)
                } else {
                    Err(failure.into_compute_error())
                }
            }
        }
    }

    async fn ensure_role(
        &self,
        deployment_id: &str,
        name: &str,
        policy: String,
    ) -> Result<(), ComputeError> {
        match self.role(name).await? {
            Some((_, path)) if path != self.config.path => {
                // Not one of ours: never take over a role outside the path.
                return Err(permanent(
                    "node_identity_conflict",
                    format!(
                        "IAM role {name} exists under {path}, not under {}",
                        self.config.path
                    ),
                ));
            }
            Some(_) => {}
            None => {
                let created = self
                    .client
                    .create_role()
                    .path(&self.config.path)
                    .role_name(name)
                    .assume_role_policy_document(TRUST_POLICY)
                    .permissions_boundary(&self.config.permissions_boundary)
                    .description(format!(
                        "Elasticsearch nodes of Floe deployment {deployment_id}"
                    ))
                    .tags(tag(deployment_id)?)
                    .send()
                    .await;
                if let Err(err) = created {
                    let failure = IamFailure::from_sdk("CreateRole", name, &err);
                    // Created meanwhile by an earlier run of the step.
                    if !failure.already_exists() {
                        return Err(failure.into_compute_error());
                    }
                }
                tracing::info!(role = %name, "created node role");
            }
        }
        // Always written: a policy changed since (a new key, a new
        // prefix) reaches the existing roles at their next plan.
        self.client
            .put_role_policy()
            .role_name(name)
            .policy_name(POLICY_NAME)
            .policy_document(policy)
            .send()
            .await
            .map_err(|err| {
                IamFailure::from_sdk("PutRolePolicy", name, &err).into_compute_error()
            })?;
        Ok(())
    }

    async fn ensure_profile(
        &self,
        deployment_id: &str,
        name: &str,
    ) -> Result<String, ComputeError> {
        let (arn, roles) = match self.profile(name).await? {
            Some(found) => found,
            None => {
                let created = self
                    .client
                    .create_instance_profile()
                    .path(&self.config.path)
                    .instance_profile_name(name)
                    .tags(tag(deployment_id)?)
                    .send()
                    .await;
                match created {
                    Ok(out) => (
                        out.instance_profile()
                            .map(|p| p.arn().to_owned())
                            .unwrap_or_default(),
                        Vec::new(),
                    ),
                    Err(err) => {
                        let failure = IamFailure::from_sdk("CreateInstanceProfile", name, &err);
                        if !failure.already_exists() {
                            return Err(failure.into_compute_error());
                        }
                        self.profile(name)
                            .await?
                            .ok_or_else(|| ComputeError::Transient {
                                code: "instance_profile_not_visible".into(),
                                message: format!(
                                    "instance profile {name} exists but is not readable yet"
                                ),
                            })?
                    }
                }
            }
        };
        if !roles.iter().any(|r| r == name) {
            let added = self
                .client
                .add_role_to_instance_profile()
                .instance_profile_name(name)
                .role_name(name)
                .send()
                .await;
            if let Err(err) = added {
                let failure = IamFailure::from_sdk("AddRoleToInstanceProfile", name, &err);
                // A profile holds one role: "limit exceeded" means a run
                // before this one added it.
                if !failure.profile_full() {
                    return Err(failure.into_compute_error());
                }
            }
        }
        if arn.is_empty() {
            return Err(ComputeError::Transient {
                code: "instance_profile_not_visible".into(),
                message: format!("IAM did not say the ARN of instance profile {name}"),
            });
        }
        Ok(arn)
    }

    async fn forget_profile(&self, name: &str) -> Result<(), ComputeError> {
        let Some((_, roles)) = self.profile(name).await? else {
            return Ok(());
        };
        for role in roles {
            let removed = self
                .client
                .remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(&role)
                .send()
                .await;
            if let Err(err) = removed {
                let failure = IamFailure::from_sdk("RemoveRoleFromInstanceProfile", name, &err);
                if !failure.is_missing() {
                    return Err(failure.into_compute_error());
                }
            }
        }
        let deleted = self
            .client
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await;
        match deleted {
            Ok(_) => {
                tracing::info!(profile = %name, "deleted node instance profile");
                Ok(())
            }
            Err(err) => {
                let failure = IamFailure::from_sdk("DeleteInstanceProfile", name, &err);
                if failure.is_missing() {
                    Ok(())
                } else {
                    Err(failure.into_compute_error())
                }
            }
        }
    }

    async fn forget_role(&self, name: &str) -> Result<(), ComputeError> {
        match self.role(name).await? {
            None => return Ok(()),
            Some((_, path)) if path != self.config.path => {
                return Err(permanent(
                    "node_identity_conflict",
                    format!(
                        "IAM role {name} is under {path}, not under {}: not removed",
                        self.config.path
                    ),
                ));
            }
            Some(_) => {}
        }
        // Floe attaches no managed policy, but an operator may have (or an
        // older Floe did), and IAM refuses to delete a role that still has
        // one: a delete would otherwise retry forever.
        let mut attached = Vec::new();
        let mut pages = self
            .client
            .list_attached_role_policies()
            .role_name(name)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            match page {
                Ok(page) => attached.extend(
                    page.attached_policies()
                        .iter()
                        .filter_map(|p| p.policy_arn().map(str::to_owned)),
                ),
                Err(err) => {
                    let failure = IamFailure::from_sdk("ListAttachedRolePolicies", name, &err);
                    if failure.is_missing() {
                        return Ok(());
                    }
                    return Err(failure.into_compute_error());
                }
            }
        }
        for arn in attached {
            let detached = self
                .client
                .detach_role_policy()
                .role_name(name)
                .policy_arn(&arn)
                .send()
                .await;
            if let Err(err) = detached {
                let failure = IamFailure::from_sdk("DetachRolePolicy", name, &err);
                if !failure.is_missing() {
                    return Err(failure.into_compute_error());
                }
            }
        }
        let policy = self
            .client
            .delete_role_policy()
            .role_name(name)
            .policy_name(POLICY_NAME)
            .send()
            .await;
        if let Err(err) = policy {
            let failure = IamFailure::from_sdk("DeleteRolePolicy", name, &err);
            if !failure.is_missing() {
                return Err(failure.into_compute_error());
            }
        }
        match self.client.delete_role().role_name(name).send().await {
            Ok(_) => {
                tracing::info!(role = %name, "deleted node role");
                Ok(())
            }
            Err(err) => {
                let failure = IamFailure::from_sdk("DeleteRole", name, &err);
                if failure.is_missing() {
                    Ok(())
                } else {
                    Err(failure.into_compute_error())
                }
            }
        }
    }
}

#[async_trait]
impl NodeIdentity for IamIdentity {
    async fn ensure(
        &self,
        deployment_id: &str,
        paths: &[SnapshotPath],
    ) -> Result<String, ComputeError> {
        check_deployment_id(deployment_id)?;
        let name = node_identity_name(deployment_id);
        // Judged before anything is created: a refused grant leaves IAM as
        // it was.
        let policy = node_policy(&self.config, deployment_id, paths)?.to_string();
        self.ensure_role(deployment_id, &name, policy).await?;
        self.ensure_profile(deployment_id, &name).await
    }

    async fn forget(&self, deployment_id: &str) -> Result<(), ComputeError> {
        check_deployment_id(deployment_id)?;
        let name = node_identity_name(deployment_id);
        // The profile first: IAM refuses to delete a role still in one.
        self.forget_profile(&name).await?;
        self.forget_role(&name).await
    }
}

/// What a node does to a snapshot bucket itself (repository-s3).
pub const SNAPSHOT_BUCKET_ACTIONS: &[&str] = &[
    "s3:ListBucket",
    "s3:GetBucketLocation",
    "s3:ListBucketMultipartUploads",
    "s3:ListBucketVersions",
];

/// What a node does to the snapshot files in a bucket (repository-s3).
pub const SNAPSHOT_OBJECT_ACTIONS: &[&str] = &[
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
];

/// What a node reads of the snapshot files under a path it may only read.
pub const SNAPSHOT_READ_ACTIONS: &[&str] = &["s3:GetObject"];

/// The bucket actions that take the `s3:prefix` condition: listing, which
/// would otherwise name every other deployment's snapshot files.
const PREFIXED_BUCKET_ACTIONS: &[&str] = &[
    "s3:ListBucket",
    "s3:ListBucketMultipartUploads",
    "s3:ListBucketVersions",
];

/// The inline policy of a deployment's node role: its own parameters, the
/// instance lookup the boot script makes to find its data volume, with a
/// key of its own decrypting through SSM, and exactly the snapshot `paths`
/// it is granted: listing under each path only, its own path read and
/// written, a source's path read.
///
/// Each granted bucket must be one of `config.snapshot_buckets`, the
/// buckets the stack lets node roles reach at all (its permissions
/// boundary names the same): a grant outside them is refused here rather
/// than left to fail as an access denial on the node.
pub fn node_policy(
    config: &IamIdentityConfig,
    deployment_id: &str,
    paths: &[SnapshotPath],
) -> Result<Value, ComputeError> {
    let own = format!(
        "{}/{deployment_id}/*",
        config.parameters_arn.trim_end_matches('/')
    );
    let mut statements = vec![
        json!({
            "Sid": "ReadsItsOwnDeploymentsParameters",
            "Effect": "Allow",
            "Action": ["ssm:GetParameter", "ssm:GetParameters"],
            "Resource": own,
        }),
        json!({
            // DescribeInstances has no resource-level permissions.
            "Sid": "FindsItsDataVolume",
            "Effect": "Allow",
            "Action": "ec2:DescribeInstances",
            "Resource": "*",
        }),
    ];
    let partition = config
        .parameters_arn
        .split(':')
        .nth(1)
        .filter(|p| !p.is_empty())
        .unwrap_or("aws");
    // One set of statements per path, in a stable order, so that the same
    // grants always write the same document.
    let mut paths = paths.to_vec();
    paths.sort();
    paths.dedup();
    let mut buckets_located = std::collections::BTreeSet::new();
    for (i, path) in paths.iter().enumerate() {
        check_path(config, path)?;
        let bucket = format!("arn:{partition}:s3:::{}", path.bucket);
        if buckets_located.insert(bucket.clone()) {
            statements.push(json!({
                "Sid": format!("LocatesSnapshotBucket{i}"),
                "Effect": "Allow",
                "Action": "s3:GetBucketLocation",
                "Resource": bucket,
            }));
        }
        // Elasticsearch lists `{path}/` and below; the bare path is what a
        // listing of the path itself sends.
        statements.push(json!({
            "Sid": format!("ListsUnderSnapshotPath{i}"),
            "Effect": "Allow",
            "Action": PREFIXED_BUCKET_ACTIONS,
            "Resource": bucket,
            "Condition": {"StringLike": {"s3:prefix": [path.prefix.clone(), format!("{}/*", path.prefix)]}},
        }));
        let (sid, actions) = match path.access {
            PathAccess::ReadWrite => ("KeepsSnapshotFilesUnderPath", SNAPSHOT_OBJECT_ACTIONS),
            PathAccess::ReadOnly => ("ReadsSnapshotFilesUnderPath", SNAPSHOT_READ_ACTIONS),
        };
        statements.push(json!({
            "Sid": format!("{sid}{i}"),
            "Effect": "Allow",
            "Action": actions,
            "Resource": format!("{bucket}/{}/*", path.prefix),
        }));
    }
    if let Some(key) = &config.kms_key_arn {
        statements.push(json!({
            "Sid": "DecryptsItsSecureStringsThroughSsm",
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": key,
            "Condition": {"StringLike": {"kms:ViaService": "ssm.*.amazonaws.com"}},
        }));
    }
    Ok(json!({"Version": "2012-10-17", "Statement": statements}))
}

/// A granted path names an allowed bucket, and a prefix with nothing that
/// would widen it: no wildcard IAM would expand, no empty or `..` segment.
fn check_path(config: &IamIdentityConfig, path: &SnapshotPath) -> Result<(), ComputeError> {
    if !config.snapshot_buckets.contains(&path.bucket) {
        return Err(permanent(
            "snapshot_bucket_not_allowed",
            format!(
                "bucket {:?} is not one of the stack's snapshot buckets ({}): node roles may not reach it; add it to the SnapshotBuckets parameter, or give the repository keys of its own",
                path.bucket,
                config.snapshot_buckets.join(", ")
            ),
        ));
    }
    let valid = !path.prefix.is_empty()
        && path.prefix.len() <= 1024
        && path
            .prefix
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && !path
            .prefix
            .chars()
            .any(|c| matches!(c, '*' | '?' | '$' | '"' | '\\') || c.is_control());
    if valid {
        Ok(())
    } else {
        Err(permanent(
            "invalid_request",
            format!("{:?} cannot be granted as a snapshot path", path.prefix),
        ))
    }
}

/// A deployment id goes into a role name and a policy's resource: only
/// what IAM accepts in a name, and nothing a wildcard or a path could hide in.
fn check_deployment_id(id: &str) -> Result<(), ComputeError> {
    let valid = !id.is_empty()
        && node_identity_name(id).len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if valid {
        Ok(())
    } else {
        Err(permanent(
            "invalid_request",
            format!("{id:?} cannot name a node identity"),
        ))
    }
}

fn tag(deployment_id: &str) -> Result<Tag, ComputeError> {
    Tag::builder()
        .key(TAG_DEPLOYMENT)
        .value(deployment_id)
        .build()
        .map_err(|e| permanent("invalid_request", format!("IAM tag: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> IamIdentityConfig {
        IamIdentityConfig {
            path: DEFAULT_PATH.into(),
            permissions_boundary: "arn:aws:iam::123456789012:policy/floe-node-boundary".into(),
            parameters_arn: "arn:aws:ssm:eu-west-1:123456789012:parameter/floe/".into(),
            kms_key_arn: None,
            snapshot_buckets: Vec::new(),
        }
    }

    fn path(bucket: &str, prefix: &str, access: PathAccess) -> SnapshotPath {
        SnapshotPath {
            bucket: bucket.into(),
            prefix: prefix.into(),
            access,
        }
    }

    fn with_buckets() -> IamIdentityConfig {
        let mut config = config();
        config.snapshot_buckets = vec!["snaps-a".into(), "snaps-b".into()];
        config
    }

    #[test]
    fn a_role_reaches_only_the_paths_it_is_granted() -> Result<(), ComputeError> {
        let grants = [
            path("snaps-a", "prod/dep1", PathAccess::ReadWrite),
            path("snaps-b", "dep0", PathAccess::ReadOnly),
        ];
        let policy = node_policy(&with_buckets(), "dep1", &grants)?;
        let text = policy.to_string();
        // Objects only under each path, never the whole bucket.
        assert!(
            text.contains(r#""arn:aws:s3:::snaps-a/prod/dep1/*""#),
            "{text}"
        );
        assert!(text.contains(r#""arn:aws:s3:::snaps-b/dep0/*""#), "{text}");
        assert!(!text.contains(r#""arn:aws:s3:::snaps-a/*""#), "{text}");
        assert!(!text.contains("s3:*"), "{text}");
        // Listing only under each path.
        assert!(
            text.contains(r#""s3:prefix":["prod/dep1","prod/dep1/*"]"#),
            "{text}"
        );
        let statements = policy["Statement"].as_array().cloned().unwrap_or_default();
        let source: Vec<&Value> = statements
            .iter()
            .filter(|s| s["Resource"] == "arn:aws:s3:::snaps-b/dep0/*")
            .collect();
        // The source path is read, never written or deleted.
        assert_eq!(source.len(), 1);
        assert_eq!(source[0]["Action"], json!(["s3:GetObject"]));
        for s in &statements {
            let lists = s["Action"]
                .as_array()
                .is_some_and(|a| a.iter().any(|a| a == "s3:ListBucket"));
            if lists {
                assert!(s["Condition"]["StringLike"]["s3:prefix"].is_array(), "{s}");
            }
        }
        // The same grants in another order write the same document.
        let reversed = [grants[1].clone(), grants[0].clone()];
        assert_eq!(node_policy(&with_buckets(), "dep1", &reversed)?, policy);
        Ok(())
    }

    #[test]
    fn no_grant_no_s3() -> Result<(), ComputeError> {
        let text = node_policy(&with_buckets(), "dep1", &[])?.to_string();
        assert!(!text.contains("s3:"), "{text}");
        Ok(())
    }

    #[test]
    fn grants_outside_the_stacks_buckets_or_widening_a_path_are_refused() {
        let refused = node_policy(
            &with_buckets(),
            "dep1",
            &[path("other", "dep1", PathAccess::ReadWrite)],
        );
        assert!(refused.is_err());
        for bad in ["", "a//b", "a/*", "a/../b", "dep?", "./a", "a\nb"] {
            let grant = path("snaps-a", bad, PathAccess::ReadOnly);
            assert!(
                node_policy(&with_buckets(), "dep1", &[grant]).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_policy_reads_only_the_deployments_own_parameters() -> Result<(), ComputeError> {
        let policy = node_policy(&config(), "dep1", &[])?;
        let text = policy.to_string();
        assert!(
            text.contains(
                r#""Resource":"arn:aws:ssm:eu-west-1:123456789012:parameter/floe/dep1/*""#
            ),
            "{text}"
        );
        assert_eq!(text.matches("parameter/").count(), 1, "{text}");
        assert!(!text.contains("kms:"), "{text}");
        let mut with_key = config();
        with_key.kms_key_arn = Some("arn:aws:kms:eu-west-1:123456789012:key/k".into());
        assert!(
            node_policy(&with_key, "dep1", &[])?
                .to_string()
                .contains("kms:Decrypt")
        );
        Ok(())
    }

    #[test]
    fn ids_that_could_widen_the_policy_are_refused() {
        for bad in ["", "a/b", "*", "dep?", "a b", &"x".repeat(60)] {
            assert!(check_deployment_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_deployment_id("0190d1e2a3b4c5d6e7f8091a2b3c4d5e").is_ok());
    }

    #[test]
    fn iam_actions_are_the_operations_and_the_tagging() {
        let mut from_ops: Vec<String> = OPERATIONS.iter().map(|o| format!("iam:{o}")).collect();
        from_ops.push("iam:TagRole".into());
        from_ops.push("iam:TagInstanceProfile".into());
        from_ops.sort();
        let mut actions: Vec<String> = IAM_ACTIONS.iter().map(|a| (*a).to_owned()).collect();
        actions.sort();
        assert_eq!(actions, from_ops);
    }
}
