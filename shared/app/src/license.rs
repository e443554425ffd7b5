//! The platform license: an organization's Elasticsearch license, uploaded
//! once (`/api/v1/platform/license`, ECE's shape) and installed by the
//! plans on every cluster of the organization: at create and start, with
//! an update, and on every running deployment when it changes.

use crate::{Admin, App, AppError, Reader, Resource};
use floe_domain::Code;
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::license::{LicenseInfo, LicenseObject, PlatformLicense};
use floe_domain::plan::{Plan, PlanParams, lifecycle};
use floe_store::{Filter, PageRequest, StoreError, Versioned};
use serde::Serialize;
use utoipa::ToSchema;

/// What an upload did: the license as stored, and which running
/// deployments a `license` plan now installs it on.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LicenseChange {
    pub license: LicenseInfo,
    /// A `license` plan was started on each of these.
    pub plans: Vec<LicensePlan>,
    /// Running deployments that get it with their next plan (a plan runs
    /// on them now), and why.
    pub deferred: Vec<DeferredDeployment>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LicensePlan {
    pub deployment_id: String,
    pub plan_id: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeferredDeployment {
    pub deployment_id: String,
    pub reason: String,
}

/// How many deployments one page of the rollout reads.
const ROLLOUT_PAGE: u32 = 100;

impl App {
    pub async fn get_platform_license(&self, who: &Reader) -> Result<LicenseInfo, AppError> {
        let stored = self
            .store
            .get_platform_license(&who.org)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::PlatformLicense, &who.org))?;
        Ok(LicenseInfo::new(&stored.value, chrono::Utc::now()))
    }

    /// Stores `upload` as the organization's license, checked as
    /// Elasticsearch would check it, then starts a `license` plan on every
    /// running deployment that does not run it yet.
    pub async fn put_platform_license(
        &self,
        who: &Admin,
        upload: LicenseObject,
    ) -> Result<LicenseChange, AppError> {
        let now = chrono::Utc::now();
        upload
            .license
            .check(now)
            .map_err(|f| AppError::invalid(Code::LICENSE_INVALID_LICENSE, f.field, f.message))?;
        let previous = self.store.get_platform_license(&who.org).await?;
        let stored = PlatformLicense {
            org: who.org.clone(),
            license: upload.license,
            uploaded: now,
            uploaded_by: who.subject.clone(),
        };
        self.store
            .put_platform_license(&stored, previous.as_ref())
            .await
            .map_err(|e| match e {
                StoreError::AlreadyExists | StoreError::VersionMismatch { .. } => {
                    AppError::ConcurrentChange
                }
                other => other.into(),
            })?;
        tracing::info!(
            org = %who.org,
            uid = %stored.license.uid,
            license_type = %stored.license.license_type,
            "platform license uploaded"
        );
        let (plans, deferred) = self.roll_out_license(who, &stored).await?;
        Ok(LicenseChange {
            license: LicenseInfo::new(&stored, now),
            plans,
            deferred,
        })
    }

    /// Removes the organization's license. Clusters keep the license they
    /// run (Elasticsearch's own, until it expires); new ones start on basic.
    pub async fn delete_platform_license(&self, who: &Admin) -> Result<(), AppError> {
        let current = self
            .store
            .get_platform_license(&who.org)
            .await?
            .ok_or_else(|| AppError::not_found(Resource::PlatformLicense, &who.org))?;
        self.store
            .delete_platform_license(&current)
            .await
            .map_err(|e| match e {
                StoreError::NotFound | StoreError::VersionMismatch { .. } => {
                    AppError::ConcurrentChange
                }
                other => other.into(),
            })?;
        tracing::info!(org = %who.org, uid = %current.value.license.uid, "platform license deleted");
        Ok(())
    }

    /// A `license` plan on each running deployment of the organization
    /// that does not run `license` yet; a deployment with a plan pending is
    /// left to that plan or the next (create, start and update plans
    /// install the license as it stands when their step runs).
    async fn roll_out_license(
        &self,
        who: &Admin,
        license: &PlatformLicense,
    ) -> Result<(Vec<LicensePlan>, Vec<DeferredDeployment>), AppError> {
        let mut plans = Vec::new();
        let mut deferred = Vec::new();
        let filter = Filter {
            status: Some(DeploymentStatus::Running.as_str().to_string()),
            ..Filter::default()
        };
        let mut page = PageRequest {
            size: Some(ROLLOUT_PAGE),
            cursor: None,
        };
        loop {
            let found = self
                .store
                .list_deployments(&who.org, filter.clone(), &page)
                .await?;
            for d in &found.items {
                match self.start_license_plan(who, d, license).await? {
                    Rollout::Planned(plan) => plans.push(plan),
                    Rollout::Deferred(reason) => deferred.push(DeferredDeployment {
                        deployment_id: d.value.id.clone(),
                        reason,
                    }),
                    Rollout::Current => {}
                }
            }
            match found.next_cursor {
                Some(next) => page.cursor = Some(next),
                None => break,
            }
        }
        Ok((plans, deferred))
    }

    async fn start_license_plan(
        &self,
        who: &Admin,
        current: &Versioned<Deployment>,
        license: &PlatformLicense,
    ) -> Result<Rollout, AppError> {
        let d = &current.value;
        if d.license.as_ref().and_then(|l| l.uid.as_deref()) == Some(license.license.uid.as_str()) {
            return Ok(Rollout::Current);
        }
        if let Some(pending) = &d.pending_plan {
            return Ok(Rollout::Deferred(format!(
                "its {} plan {} is running; that plan, if it has not passed its license step, or the next one installs the license",
                pending.kind.as_str(),
                pending.plan_id
            )));
        }
        if d.status != DeploymentStatus::Running || d.access.is_none() {
            return Ok(Rollout::Deferred(
                "it has no running cluster to install it on; its next start installs it".into(),
            ));
        }
        let plan = Plan::new(
            &who.org,
            &d.id,
            PlanParams::License,
            "platform.license",
            &who.subject,
            chrono::Utc::now(),
        );
        let mut next = d.clone();
        next.status = lifecycle::while_running(plan.kind());
        next.pending_plan = Some(plan.reference());
        next.updated = plan.created;
        match self
            .store
            .replace_deployment(&next, current, Some(&plan))
            .await
        {
            Ok(_) => {}
            // Another plan started since the listing read it.
            Err(StoreError::VersionMismatch { .. }) => {
                return Ok(Rollout::Deferred(
                    "another plan started on it meanwhile; that plan or the next installs the license"
                        .into(),
                ));
            }
            Err(e) => return Err(e.into()),
        }
        self.wake(&who.org, &d.id, &plan.id).await;
        Ok(Rollout::Planned(LicensePlan {
            deployment_id: d.id.clone(),
            plan_id: plan.id,
        }))
    }
}

enum Rollout {
    Planned(LicensePlan),
    Deferred(String),
    /// It runs the license already.
    Current,
}
