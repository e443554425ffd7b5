//! license: before a mount clone mounts, its cluster runs a license that
//! allows searchable snapshots. Elasticsearch 8 serves them on the
//! enterprise license or during its trial; a new cluster runs basic, and
//! `_mount` then answers 403. The clone's create asked for the trial
//! (`restore_snapshot.license`), or the request was refused before this
//! plan was stored; this step starts it, once: a cluster that runs a
//! license that allows them already (a step run again, or one installed
//! since) is left as it is.

use crate::deployment_steps::DeploymentSteps;
use crate::engine::{StepContext, done};
use crate::failure::{StepFailure, StepResult};
use floe_domain::license::ClusterLicense;
use floe_domain::restore::CloneLicense;

pub(crate) const STEP: &str = "license";

impl DeploymentSteps {
    pub(crate) async fn ensure_license(&self, ctx: &StepContext<'_>) -> StepResult {
        let asked = ctx.plan.params.restore().and_then(|t| t.license);
        let client = self.clusters.client(ctx.deployment, &[]).await?;
        let reported = |e| StepFailure::elastic(e, "reading the cluster's license");
        let current = ClusterLicense::from_reported(&client.license().await.map_err(reported)?)
            .ok_or_else(|| {
                StepFailure::permanent("license_unreadable", "the cluster reported no license type")
            })?;
        if current.allows_searchable_snapshots(chrono::Utc::now()) {
            ctx.log(format!(
                "the cluster runs the {} license, which allows searchable snapshots",
                current.license_type
            ));
            return Ok(done(&current));
        }
        if asked != Some(CloneLicense::Trial) {
            return Err(StepFailure::permanent(
                "license_required",
                format!(
                    "the cluster runs the {} license, which does not allow searchable snapshots \
                     (Elasticsearch needs enterprise, or a trial), and this clone asked for no trial",
                    current.license_type
                ),
            ));
        }
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
        let started = ClusterLicense::from_reported(&client.license().await.map_err(reported)?)
            .ok_or_else(|| {
                StepFailure::permanent("license_unreadable", "the cluster reported no license type")
            })?;
        Ok(done(&started))
    }
}
