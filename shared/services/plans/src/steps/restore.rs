//! The steps that fill a cluster from a snapshot: a clone's create plan
//! ends with them, and a restore plan is nothing else.
//!
//! register-source  registers the snapshot's repository read-only when it is
//!                  not the deployment's own (a second writer would corrupt it)
//! restore | mount  starts the restore, or mounts each selected index
//! wait-restored    waits until every shard read from the snapshot is
//!                  recovered, logging shards and bytes as it goes
//!
//! Each step finds out from the cluster whether it already did its work (a
//! restore under way shows in `_recovery` with the snapshot as its source;
//! a mounted index exists), so running one twice starts nothing twice.

use super::target;
use crate::deployment_steps::DeploymentSteps;
use crate::engine::{Outcome, StepContext, done, fail};
use crate::failure::{StepFailure, StepResult};
use crate::outputs::{MountOutput, RestoreOutput, RestoredOutput, SourceOutput};
use floe_domain::deployment::{Deployment, NodeRole};
use floe_domain::plan::{Plan, PlanKind};
use floe_domain::restore::{RestoreTarget, selects};
use floe_elastic::{ElasticError, MountRequest, MountStorage, RestoreRequest};
use serde_json::Value;

/// The earliest start (epoch ms) of a recovery that a step started at
/// `started` can have caused, with room for the cluster's clock running a
/// little behind the worker's.
fn recoveries_since(started: chrono::DateTime<chrono::Utc>) -> i64 {
    (started - chrono::Duration::seconds(2)).timestamp_millis()
}

/// The settings a restore or mount gives every index it makes: the
/// replicas the target asks for, when not the snapshot's own.
fn replicas_setting(t: &RestoreTarget) -> Option<serde_json::Map<String, Value>> {
    t.number_of_replicas.map(|n| {
        serde_json::Map::from_iter([("index.number_of_replicas".to_string(), Value::from(n))])
    })
}

fn the_target(ctx: &StepContext<'_>) -> Result<RestoreTarget, Outcome> {
    ctx.plan
        .params
        .restore()
        .ok_or_else(|| fail("invalid_plan", "this plan restores nothing"))
}

/// What register-source registers: the plan's restore from a path that is
/// not the deployment's own, else the source a clone still reads (a start
/// gives new nodes the registration its mounted indices name).
fn source_target(ctx: &StepContext<'_>) -> Result<RestoreTarget, Outcome> {
    match ctx.plan.params.restore() {
        Some(t) if t.foreign_repository => Ok(t),
        _ => ctx
            .deployment
            .clone_source
            .as_ref()
            .map(|s| s.target())
            .ok_or_else(|| fail("invalid_plan", "this plan reads no other path")),
    }
}

/// What a plan that ended well does to a clone's pin: a restore clone's
/// create has copied the data, so the source's snapshot is free again (and
/// a clone whose create failed, started since, will never read it); a
/// mount clone keeps reading it.
pub(crate) fn settle_source(plan: &Plan, next: &mut Deployment) {
    if !matches!(plan.kind(), PlanKind::Create | PlanKind::Start) {
        return;
    }
    if let Some(src) = next.clone_source.as_mut()
        && !src.reads_source()
    {
        src.pinned = false;
    }
}

impl DeploymentSteps {
    /// Registers the snapshot's repository read-only on this cluster.
    pub(crate) async fn register_source(&self, ctx: &StepContext<'_>) -> StepResult {
        let t = source_target(ctx)?;
        let repo = match self
            .snapshots
            .store()
            .get_repository(&ctx.plan.org, &t.repository)
            .await?
        {
            Some(r) => r.value,
            None => {
                return Err(StepFailure::permanent(
                    "repository_missing",
                    format!("snapshot repository {} no longer exists", t.repository),
                ));
            }
        };
        self.check_endpoint(&repo).await?;
        // The nodes may read the source's path before the cluster looks.
        self.grant_snapshot_paths(ctx).await?;
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        // The snapshots are under the deployment that took them.
        let registration =
            floe_snapshots::repository_registration(&repo, &t.source_deployment_id, true);
        let name = t.cluster_repository();
        match client.put_repository(name, &registration).await {
            Ok(()) => {
                if name == repo.name {
                    ctx.log(format!("repository {name} registered read-only"));
                } else {
                    ctx.log(format!(
                        "repository {} registered read-only as {name}, at the path of deployment {}",
                        repo.name, t.source_deployment_id
                    ));
                }
                Ok(done(&SourceOutput {
                    repository: name.to_string(),
                    readonly: true,
                }))
            }
            Err(e) => Err(StepFailure::elastic_retried(
                e,
                &format!("registering {name} read-only"),
                "repository_registration_failed",
            )),
        }
    }

    /// Whether this step already started its restore: a recovery from the
    /// snapshot that began after the step first did (the cluster also lists
    /// finished recoveries of earlier restores of the same snapshot).
    async fn restore_started(
        &self,
        ctx: &StepContext<'_>,
        client: &floe_elastic::ElasticClient,
        t: &RestoreTarget,
    ) -> Result<bool, ElasticError> {
        // A first attempt has started nothing yet.
        let (Some(since), true) = (ctx.step.started, ctx.step.attempts > 1) else {
            return Ok(false);
        };
        let since = recoveries_since(since);
        let progress = client.recovery(&[]).await?;
        Ok(progress.shards.iter().any(|s| {
            s.reads(t.cluster_repository(), &t.snapshot)
                && s.start_millis.is_some_and(|m| m >= since)
        }))
    }

    /// Starts the restore; Elasticsearch refuses it when an open index has
    /// the name a restored one would get, and the step fails with its reason.
    pub(crate) async fn restore(&self, ctx: &StepContext<'_>) -> StepResult {
        let t = the_target(ctx)?;
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let started = self
            .restore_started(ctx, &client, &t)
            .await
            .map_err(|e| StepFailure::elastic_retried(e, "reading recoveries", "restore_failed"))?;
        if started {
            ctx.log(format!(
                "the restore of {} is already under way",
                t.snapshot
            ));
            return Ok(done(&RestoreOutput {
                snapshot: t.snapshot,
                repository: t.repository,
            }));
        }
        let request = RestoreRequest {
            indices: t.indices.clone(),
            include_global_state: Some(t.include_global_state),
            include_aliases: Some(t.include_aliases),
            partial: Some(t.partial),
            rename_pattern: t.rename_pattern.clone(),
            rename_replacement: t.rename_replacement.clone(),
            // Explicit: left out, Elasticsearch restores every feature state
            // with the global state, security (users, the elastic password
            // Floe holds) included.
            feature_states: Some(t.feature_states_to_send()),
            index_settings: replicas_setting(&t),
            ..RestoreRequest::default()
        };
        match client
            .restore(t.cluster_repository(), &t.snapshot, &request, false)
            .await
        {
            Ok(_) => {
                let resolved = if t.requested == t.snapshot {
                    String::new()
                } else {
                    format!(" (resolved from {})", t.requested)
                };
                ctx.log(format!(
                    "restore of {}:{}{resolved} started",
                    t.repository, t.snapshot
                ));
                Ok(done(&RestoreOutput {
                    snapshot: t.snapshot,
                    repository: t.repository,
                }))
            }
            Err(e) => Err(StepFailure::elastic_retried(
                e,
                &format!("restoring {}:{}", t.repository, t.snapshot),
                "restore_refused",
            )),
        }
    }

    /// Mounts every selected index of the snapshot: `shared_cache` when the
    /// deployment has a frozen tier, `full_copy` otherwise.
    pub(crate) async fn mount(&self, ctx: &StepContext<'_>) -> StepResult {
        let t = the_target(ctx)?;
        let frozen = target(ctx.plan).is_ok_and(|spec| {
            spec.node_groups
                .iter()
                .any(|g| g.roles.contains(&NodeRole::DataFrozen))
        });
        let storage = if frozen {
            MountStorage::SharedCache
        } else {
            MountStorage::FullCopy
        };
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let info = client
            .get_snapshot(t.cluster_repository(), &t.snapshot)
            .await
            .map_err(|e| {
                StepFailure::elastic_retried(e, "reading the snapshot", "snapshot_missing")
            })?;
        let existing: std::collections::BTreeSet<String> = client
            .shards()
            .await
            .map_err(|e| StepFailure::elastic_retried(e, "listing indices", "mount_failed"))?
            .into_iter()
            .map(|r| r.index)
            .collect();
        let mut mounted = Vec::new();
        for index in info.indices.iter().filter(|i| selects(&t.indices, i)) {
            if existing.contains(index) {
                // Mounted by an earlier run of this step.
                mounted.push(index.clone());
                continue;
            }
            let request = MountRequest {
                index: index.clone(),
                renamed_index: None,
                index_settings: replicas_setting(&t),
                ignore_index_settings: Vec::new(),
                storage,
            };
            if let Err(e) = client
                .mount(t.cluster_repository(), &t.snapshot, &request, false)
                .await
            {
                return Err(StepFailure::elastic_retried(
                    e,
                    &format!("mounting {index}"),
                    "mount_refused",
                ));
            }
            mounted.push(index.clone());
        }
        ctx.log(format!(
            "{} indices of {}:{} mounted ({})",
            mounted.len(),
            t.repository,
            t.snapshot,
            storage.as_str()
        ));
        Ok(done(&MountOutput {
            indices: mounted,
            storage: storage.as_str().to_string(),
        }))
    }

    /// Done when every shard read from the snapshot has recovered; until
    /// then each look logs how far the restore has got.
    pub(crate) async fn wait_restored(&self, ctx: &StepContext<'_>) -> StepResult {
        let t = the_target(ctx)?;
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let progress = client
            .recovery(&[])
            .await
            .map_err(|e| StepFailure::elastic_retried(e, "reading recoveries", "restore_failed"))?;
        // Only this plan's recoveries: the cluster also lists finished
        // ones of earlier restores of the same snapshot.
        let since = ctx
            .plan
            .steps
            .iter()
            .find(|s| s.step_id == "restore" || s.step_id == "mount")
            .and_then(|s| s.started)
            .map_or(i64::MIN, recoveries_since);
        let shards: Vec<_> = progress
            .shards
            .iter()
            .filter(|s| {
                s.reads(t.cluster_repository(), &t.snapshot)
                    && s.start_millis.is_none_or(|m| m >= since)
            })
            .collect();
        let total = shards.len();
        let recovered = shards.iter().filter(|s| s.is_done()).count();
        let bytes_total: u64 = shards
            .iter()
            .map(|s| s.bytes_total.saturating_sub(s.bytes_reused))
            .sum();
        let bytes_done: u64 = shards.iter().map(|s| s.bytes_recovered).sum();
        let mut indices: Vec<&str> = shards.iter().map(|s| s.index.as_str()).collect();
        indices.dedup();
        let figures = RestoredOutput {
            indices: indices.iter().map(|i| i.to_string()).collect(),
            shards_total: total,
            shards_recovered: recovered,
            bytes_total,
            bytes_recovered: bytes_done.min(bytes_total),
        };
        if recovered == total {
            self.no_red_index(ctx, &client).await?;
            ctx.log(format!(
                "{} indices, {total} shards, {bytes_total} bytes recovered from {}",
                indices.len(),
                t.snapshot
            ));
            return Ok(done(&figures));
        }
        if ctx.elapsed() > self.settings.drain_timeout {
            return Err(StepFailure::permanent(
                "restore_timeout",
                format!("{recovered} of {total} shards recovered after the time allowed"),
            ));
        }
        Ok(Outcome::Wait {
            after: self.settings.poll,
            note: format!(
                "recovering: {recovered}/{total} shards, {}/{bytes_total} bytes",
                bytes_done.min(bytes_total)
            ),
        })
    }

    /// On a cluster that was empty before the restore (a clone's, a drill's,
    /// a start's), a red index once every recovery has ended is one whose
    /// shards failed to recover from the snapshot: Elasticsearch accepted
    /// the restore and lists no recovery for them (their data unreadable,
    /// say). The restore failed, and the step says which index. A restore
    /// into a running deployment leaves this to the cluster's own health:
    /// an index red before it would be taken for one it broke.
    async fn no_red_index(
        &self,
        ctx: &StepContext<'_>,
        client: &floe_elastic::ElasticClient,
    ) -> Result<(), StepFailure> {
        if !matches!(
            ctx.plan.kind(),
            PlanKind::Create | PlanKind::Drill | PlanKind::Start
        ) {
            return Ok(());
        }
        let indices = client.indices().await.map_err(|e| {
            StepFailure::elastic_retried(e, "reading the restored indices", "restore_failed")
        })?;
        let red: Vec<&str> = indices
            .iter()
            .filter(|i| i.health.as_deref() == Some("red"))
            .map(|i| i.index.as_str())
            .collect();
        if red.is_empty() {
            return Ok(());
        }
        Err(StepFailure::permanent(
            "restore_failed",
            format!(
                "index {} is red: its shards did not recover from the snapshot (its data in the repository is missing or unreadable)",
                red.join(", index ")
            ),
        ))
    }

    /// Undoes a restore into a running deployment: it leaves what it
    /// restored (there was nothing under those names, and removing data is
    /// not an undo's call). A clone's cluster goes as a whole instead.
    pub(crate) async fn leave_restored(&self, ctx: &StepContext<'_>) -> StepResult {
        ctx.log(format!(
            "{}: restored indices are left in place",
            ctx.step.step_id
        ));
        Ok(Outcome::Done(Value::Null))
    }
}
