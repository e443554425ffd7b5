//! Restore drills: start one on a deployment (its latest successful
//! snapshot restored into a short-lived clone, checked, measured, torn
//! down), and list a deployment's drills, newest first. The drill runs as
//! the clone's `drill` plan; see `floe_domain::drill` for what it checks
//! and measures, and `floe_plans::drills` for how its record follows the
//! plan.

use crate::deployments::decide;
use crate::{App, AppError, Manager, Reader};
use floe_domain::Code;
use floe_domain::deployment::{DeploymentSpec, Metadata, Tag};
use floe_domain::drill::{
    Drill, DrillParams, DrillPlan, DrillRequest, DrillStatus, DrillView, clone_groups, clone_name,
};
use floe_domain::names::new_resource_id;
use floe_domain::plan::{Plan, PlanKind, PlanParams, lifecycle};
use floe_domain::restore::{LATEST_SUCCESS, RestoreSnapshot};
use floe_store::{PageRequest, StoreError, drill_key};
use serde::Serialize;
use utoipa::ToSchema;

/// The tag a drill's clone carries: the deployment it drills.
pub const DRILL_OF_TAG: &str = "floe-drill-of";

/// One page of a deployment's drills, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DrillList {
    pub drills: Vec<DrillView>,
    /// Present when more drills follow: pass it as `cursor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

fn drill_running(drill_key: &str) -> AppError {
    let id = drill_key.rsplit('#').next().unwrap_or(drill_key);
    AppError::conflict(
        Code::DRILLS_DRILL_RUNNING,
        format!(
            "drill {id} of this deployment is still running; one drill runs at a time (GET …/drills shows it)"
        ),
    )
}

/// A clone's refusal said of the drill that asked for it: the drill's
/// request has no `restore_snapshot`, so its fields are the drill's own
/// (`license`), or none (the snapshot it looked for is the newest).
fn as_drill_error(e: AppError) -> AppError {
    const PREFIX: &str = "restore_snapshot.";
    match e {
        AppError::Invalid(mut invalid) => {
            for p in &mut invalid.0 {
                if let Some(own) = p.field.strip_prefix(PREFIX) {
                    p.field = own.to_string();
                }
            }
            AppError::Invalid(invalid)
        }
        AppError::Conflict {
            code,
            message,
            field: Some(f),
        } if f.starts_with(PREFIX) => AppError::Conflict {
            code,
            message: message
                .strip_prefix(&format!("{f}: "))
                .unwrap_or(&message)
                .to_string(),
            field: None,
        },
        other => other,
    }
}

impl App {
    /// Starts a drill of deployment `id`: its clone and the clone's drill
    /// plan are stored with the drill's record and the deployment's drill
    /// lock in one write, then a worker is woken. 409 while another drill
    /// of it runs.
    pub async fn start_drill(
        &self,
        who: &Manager,
        id: &str,
        request: DrillRequest,
    ) -> Result<DrillView, AppError> {
        request.validate()?;
        if let Some(t) = &request.instance_type
            && floe_domain::catalog::lookup(t).is_none()
        {
            let hint = floe_domain::catalog::suggest(t)
                .map(|s| format!("; did you mean {s}?"))
                .unwrap_or_default();
            return Err(AppError::invalid(
                Code::VALIDATION_INSTANCE_TYPE,
                "instance_type",
                format!(
                    "{t} is not in the instance catalog (GET /api/v1/platform/instance-types){hint}"
                ),
            ));
        }
        let source = self.load_deployment(&who.org, id).await?.value;
        if source
            .pending_plan
            .as_ref()
            .is_some_and(|p| p.kind == PlanKind::Drill)
        {
            return Err(AppError::conflict(
                Code::DEPLOYMENTS_PLAN_IN_PROGRESS,
                format!(
                    "deployment {id} is a drill's clone, which is deleted when its drill ends; drill its source instead"
                ),
            ));
        }
        self.check_drill_lock(&who.org, id).await?;

        // The clone: no repository of its own (it writes no snapshot, and
        // reads its source's path read-only), tagged with its source.
        let mut spec = DeploymentSpec {
            recovery_targets: None,
            drill_schedule: None,
            name: clone_name(&source.spec.name),
            version: source.spec.version.clone(),
            // Sized below, once the snapshot is known.
            node_groups: Vec::new(),
            user_settings: source.spec.user_settings.clone(),
            snapshot: None,
            metadata: Metadata {
                tags: vec![Tag {
                    key: DRILL_OF_TAG.to_string(),
                    value: id.to_string(),
                }],
            },
            restore_snapshot: Some(RestoreSnapshot {
                source_deployment_id: id.to_string(),
                snapshot_name: LATEST_SUCCESS.to_string(),
                repository: None,
                indices: Vec::new(),
                rename_pattern: None,
                rename_replacement: None,
                mode: request.mode,
                license: request.license,
                resolved_snapshot: None,
            }),
        };
        let clone = self
            .resolve_clone(&who.org, &mut spec)
            .await
            .map_err(as_drill_error)?;
        let resolved = spec
            .restore_snapshot
            .as_ref()
            .and_then(|r| Some((r.resolved_snapshot.clone()?, r.repository.clone()?)));
        let Some((snapshot_name, repository)) = resolved else {
            return Err(AppError::Internal);
        };
        let snapshot = self
            .store
            .get_snapshot(&who.org, id, &snapshot_name)
            .await?
            .ok_or_else(|| {
                AppError::conflict(
                    Code::RESTORE_NO_SUCCESSFUL_SNAPSHOT,
                    "the snapshot found was deleted meanwhile; try again",
                )
            })?
            .value;
        spec.node_groups = clone_groups(
            &source.spec,
            request.instance_type.as_deref(),
            snapshot.size_in_bytes.unwrap_or(0),
        );
        let checked = decide::check_create(who, spec, None)?.spec;

        let now = chrono::Utc::now();
        let clone_id = new_resource_id();
        let drill_id = new_resource_id();
        let key = drill_key(id, now.timestamp_millis(), &drill_id);
        let new = decide::decide_create(who, &clone_id, checked, clone, None, now);
        let PlanParams::Create(create_spec) = new.plan.params else {
            return Err(AppError::Internal);
        };
        let drill_plan = DrillPlan {
            drill_id: drill_id.clone(),
            drill_key: key.clone(),
            source_deployment_id: id.to_string(),
            // Indices whose names start with a dot are system or hidden
            // ones: a restore without the global state leaves them out.
            indices: snapshot
                .indices
                .iter()
                .filter(|i| !i.starts_with('.'))
                .cloned()
                .collect(),
            document_counts: snapshot.document_counts.clone(),
            queries: request.queries.clone(),
        };
        let plan = Plan::new(
            &who.org,
            &clone_id,
            PlanParams::Drill(Box::new(DrillParams {
                spec: create_spec,
                drill: drill_plan,
            })),
            "deployments.drill",
            &who.subject,
            now,
        );
        let mut deployment = new.deployment;
        deployment.pending_plan = Some(plan.reference());
        deployment.status = lifecycle::while_running(PlanKind::Drill);
        let password = floe_node_security::new_password();
        deployment.password_to_apply = Some(
            self.seal_password(&who.org, &clone_id, password.expose())
                .await?,
        );
        let age = snapshot.end.unwrap_or(snapshot.start);
        let view = DrillView {
            id: drill_id,
            deployment_id: id.to_string(),
            status: DrillStatus::Running,
            mode: request.mode,
            snapshot: snapshot_name,
            repository,
            clone_deployment_id: clone_id.clone(),
            plan_id: plan.id.clone(),
            started: now,
            finished: None,
            recovery_point_seconds: u64::try_from((now - age).num_seconds()).unwrap_or(0),
            recovery_time: None,
            bytes_recovered: None,
            bytes_per_second: None,
            checks: Vec::new(),
            failure: None,
        };
        let drill = Drill {
            org: who.org.clone(),
            key,
            view,
        };
        match self.store.create_drill(&drill, &deployment, &plan).await {
            Ok(()) => {}
            // Another drill took the lock since it was read.
            Err(StoreError::AlreadyExists) => {
                let lock = self.store.get_drill_lock(&who.org, id).await?;
                return Err(drill_running(
                    lock.as_ref().map_or("", |l| l.value.drill_key.as_str()),
                ));
            }
            Err(StoreError::MissingReference {
                kind: floe_store::Kind::Snapshot,
                ..
            }) => {
                return Err(AppError::conflict(
                    Code::RESTORE_NO_SUCCESSFUL_SNAPSHOT,
                    "the snapshot found was deleted while the drill was being started; try again",
                ));
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(deployment = %id, drill = %drill.view.id, clone = %clone_id, plan = %plan.id, snapshot = %drill.view.snapshot, "drill started");
        self.wake(&who.org, &clone_id, &plan.id).await;
        Ok(drill.view)
    }

    /// 409 while a drill of the deployment runs. A lock whose drill's plan
    /// has ended (its release lost to a crash) is released here.
    async fn check_drill_lock(&self, org: &str, id: &str) -> Result<(), AppError> {
        let Some(lock) = self.store.get_drill_lock(org, id).await? else {
            return Ok(());
        };
        let plan = self
            .store
            .get_plan(org, &lock.value.clone_deployment_id, &lock.value.plan_id)
            .await?;
        if plan.as_ref().is_some_and(|p| !p.value.status.is_finished()) {
            return Err(drill_running(&lock.value.drill_key));
        }
        match self.store.get_drill(org, &lock.value.drill_key).await? {
            // Settling the drill releases its lock.
            Some(record) => {
                floe_plans::drills::settled(&self.store, record, plan.as_ref().map(|p| &p.value))
                    .await?;
            }
            None => match self.store.release_drill_lock(org, id, &lock).await {
                Ok(()) | Err(StoreError::NotFound | StoreError::VersionMismatch { .. }) => {}
                Err(e) => return Err(e.into()),
            },
        }
        // Released, or taken by another drill meanwhile: the write that
        // starts this one finds out.
        Ok(())
    }

    /// One page of the deployment's drills, newest first; a drill whose
    /// plan has ended since its record was written is settled as read.
    pub async fn list_drills(
        &self,
        who: &Reader,
        id: &str,
        page: PageRequest,
    ) -> Result<DrillList, AppError> {
        self.load_deployment(&who.org, id).await?;
        let listed = self.store.list_drills(&who.org, id, &page).await?;
        let mut drills = Vec::with_capacity(listed.items.len());
        for record in listed.items {
            drills.push(
                floe_plans::drills::settled(&self.store, record, None)
                    .await?
                    .view,
            );
        }
        Ok(DrillList {
            drills,
            next_cursor: listed.next_cursor,
        })
    }
}
