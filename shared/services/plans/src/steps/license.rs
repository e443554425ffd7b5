//! license: the cluster runs the license it should (see
//! [`floe_domain::license::decide_license`]): the organization's platform
//! license, installed once; or, for a mount clone that asked for it and
//! has no platform license that allows searchable snapshots, Elasticsearch's
//! 30-day trial, started once. A new cluster runs basic, on which `_mount`
//! answers 403, so a mount clone's plan runs this before it mounts.
//!
//! The platform license is read when the step runs, so a plan that runs
//! after an upload installs the newest. A license Elasticsearch will not
//! install fails a `license` plan, or a mount clone's, with the status it
//! answered; any other plan logs it and goes on, on the license the
//! cluster runs.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{StepContext, done};
use crate::failure::{StepFailure, StepResult};
use floe_domain::license::{ClusterLicense, LicenseAction, decide_license};
use floe_domain::plan::PlanKind;
use floe_domain::restore::{CloneLicense, RestoreMode};
use floe_elastic::ElasticClient;

pub(crate) const STEP: &str = "license";

async fn read_license(client: &ElasticClient) -> Result<ClusterLicense, StepFailure> {
    let reported = client
        .license()
        .await
        .map_err(|e| StepFailure::elastic(e, "reading the cluster's license"))?;
    ClusterLicense::from_reported(&reported).ok_or_else(|| {
        StepFailure::permanent("license_unreadable", "the cluster reported no license type")
    })
}

/// What the record keeps when the step installs nothing. A new cluster's
/// license is what it runs. A running one keeps the license Floe's plans
/// put in force as the one the health check expects: one a tenant
/// installed since stays a warning until they undo it, or a platform
/// license replaces it.
fn kept(ctx: &StepContext<'_>, current: ClusterLicense) -> ClusterLicense {
    match ctx.plan.kind() {
        PlanKind::Create | PlanKind::Start | PlanKind::Drill => current,
        _ => ctx.deployment.license.clone().unwrap_or(current),
    }
}

impl DeploymentSteps {
    pub(crate) async fn ensure_license(&self, ctx: &StepContext<'_>) -> StepResult {
        // Whether this plan mounts searchable snapshots, or restores a
        // mount clone's (a start restores its own snapshot, whose indices
        // are mounted ones): then the cluster cannot do without a license
        // that allows them. A mount clone's other plans keep such a
        // license on it, and never start a trial.
        let target = ctx.plan.params.restore();
        let mount_clone = ctx
            .deployment
            .clone_source
            .as_ref()
            .is_some_and(|s| s.mode == RestoreMode::Mount);
        let mounting_now = target
            .as_ref()
            .is_some_and(|t| t.mode == RestoreMode::Mount)
            || (mount_clone && ctx.plan.kind() == PlanKind::Start);
        let mounts = mounting_now || mount_clone;
        let trial_asked = mounting_now
            && target
                .and_then(|t| t.license)
                .or_else(|| ctx.deployment.clone_source.as_ref().and_then(|s| s.license))
                == Some(CloneLicense::Trial);
        let platform = self
            .snapshots
            .store()
            .get_platform_license(&ctx.deployment.org)
            .await
            .map_err(|e| StepFailure::transient(format!("reading the platform license: {e}")))?;
        let platform = platform.as_ref().map(|p| &p.value.license);
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let current = read_license(&client).await?;
        let now = chrono::Utc::now();
        match decide_license(platform, &current, mounts, trial_asked, now) {
            LicenseAction::InForce(why) => {
                ctx.log(why);
                Ok(done(&current))
            }
            LicenseAction::Keep(why) => {
                ctx.log(why);
                Ok(done(&kept(ctx, current)))
            }
            LicenseAction::Refuse(why) if mounting_now => {
                Err(StepFailure::permanent("license_required", why))
            }
            // Nothing this plan does needs it; the health check warns of
            // the mounted indices a lapsed license stopped.
            LicenseAction::Refuse(why) => {
                ctx.log(format!("{why}; the cluster keeps it"));
                Ok(done(&kept(ctx, current)))
            }
            LicenseAction::Install => {
                let Some(license) = platform else {
                    return Err(StepFailure::permanent(
                        "license_required",
                        "no platform license to install",
                    ));
                };
                let answer = client
                    .put_license(&license.install_body())
                    .await
                    .map_err(|e| StepFailure::elastic(e, "installing the platform license"))?;
                let status = answer
                    .get("license_status")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("missing");
                let acknowledged = answer
                    .get("acknowledged")
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false);
                if status != "valid" || !acknowledged {
                    let why = format!(
                        "Elasticsearch did not install the platform license {} ({}): it answered license_status {status}, acknowledged {acknowledged}: {answer}",
                        license.uid, license.license_type
                    );
                    // A license plan exists to install it: it fails, with
                    // the answer. Another plan's work (new nodes, a version)
                    // does not hang on a license the cluster can do
                    // without: it goes on, on the license the cluster runs.
                    if ctx.plan.kind() == PlanKind::License || mounting_now {
                        return Err(StepFailure::permanent("license_refused", why));
                    }
                    ctx.log(format!(
                        "{why}; the cluster keeps the {} license",
                        current.license_type
                    ));
                    return Ok(done(&kept(ctx, current)));
                }
                let installed = read_license(&client).await?;
                ctx.log(format!(
                    "installed the platform license {} ({}), in place of {}",
                    license.uid, license.license_type, current.license_type
                ));
                Ok(done(&installed))
            }
            LicenseAction::StartTrial => {
                match client.start_trial().await {
                    Ok(true) => ctx.log("Elasticsearch's 30-day trial started"),
                    Ok(false) => {
                        return Err(StepFailure::permanent(
                            "trial_not_started",
                            "the cluster did not start its trial",
                        ));
                    }
                    Err(e) if e.status() == Some(403) => {
                        return Err(StepFailure::permanent(
                            "trial_used",
                            format!("the cluster has used its trial already: {e}"),
                        ));
                    }
                    Err(e) => return Err(StepFailure::elastic(e, "starting the trial")),
                }
                Ok(done(&read_license(&client).await?))
            }
        }
    }
}
