//! Reading the facts of one deployment's health, through the steps' ports.

use super::judge::{
    ClusterFacts, Facts, MountSourceFacts, Observation, OwnedFacts, SourceRecord, judge,
};
use crate::deployment_steps::DeploymentSteps;
use async_trait::async_trait;
use floe_compute::{Compute, ComputeError, Instance, InstanceState, ScheduledEvent, StatusChecks};
use floe_domain::deployment::Deployment;
use floe_elastic::{ElasticClient, ElasticError, RepositoryRegistration};
use std::collections::{BTreeMap, BTreeSet};

/// Whether Elasticsearch refused the credentials (the `elastic` password
/// Floe holds no longer works).
fn refused(e: &ElasticError) -> bool {
    e.status() == Some(401)
}

/// Elasticsearch refused with a license that is no longer active: a
/// secured cluster refuses its health and stats APIs then (403,
/// `current license is non-compliant for [security]`).
fn unlicensed(e: &ElasticError) -> bool {
    e.status() == Some(403)
        && e.failure()
            .is_some_and(|f| f.reason.contains("current license is non-compliant"))
}

/// Looks at deployments: what EC2 says of a page of them, read together,
/// then each one's instances and cluster.
#[async_trait]
pub trait Probe: Send + Sync + 'static {
    /// The instances of `deployments` and their status checks, in one
    /// listing and a status call per hundred running instances (see
    /// [`Survey::read`]). Fails when the instances cannot be listed.
    async fn survey(&self, deployments: &[&Deployment]) -> Result<Survey, ComputeError>;
    /// What one deployment of `survey` is found to be; `None` when the
    /// survey does not hold it (it judges nothing then).
    async fn probe(&self, deployment: &Deployment, survey: &Survey) -> Option<Observation>;
}

#[async_trait]
impl Probe for DeploymentSteps {
    async fn survey(&self, deployments: &[&Deployment]) -> Result<Survey, ComputeError> {
        Survey::read(self.compute.as_ref(), deployments).await
    }

    async fn probe(&self, d: &Deployment, survey: &Survey) -> Option<Observation> {
        let facts = self.health_facts(d, survey).await?;
        Some(judge(&d.spec, &facts))
    }
}

/// Running instances failing a status check, with the names of the checks.
pub type Impaired = BTreeMap<String, Vec<&'static str>>;
/// Maintenance EC2 has scheduled, by instance.
pub type Scheduled = BTreeMap<String, Vec<ScheduledEvent>>;

/// What EC2 says of a page of deployments, read together: the cost of a
/// check is then a listing per page (a thousand instances a page) and a
/// status call per hundred running instances, not calls per deployment.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    instances: BTreeMap<String, Vec<Instance>>,
    /// The running instances' status checks by instance; `None` when they
    /// could not be read, which judges nothing this time (the instances'
    /// states still do): a missing permission or an EC2 hiccup must not
    /// make every deployment look broken.
    checks: Option<BTreeMap<String, StatusChecks>>,
}

impl Survey {
    /// Lists the instances of `deployments` together, then the status
    /// checks of those that run.
    pub async fn read(
        compute: &dyn Compute,
        deployments: &[&Deployment],
    ) -> Result<Survey, ComputeError> {
        let ids: Vec<String> = deployments.iter().map(|d| d.id.clone()).collect();
        let instances = compute.instances_of(&ids).await?;
        let running: Vec<String> = instances
            .values()
            .flatten()
            .filter(|i| i.state == InstanceState::Running)
            .map(|i| i.id.clone())
            .collect();
        let checks = if running.is_empty() {
            Some(BTreeMap::new())
        } else {
            match compute.status_checks(&running).await {
                Ok(checks) => Some(checks.into_iter().map(|c| (c.id.clone(), c)).collect()),
                Err(e) => {
                    tracing::warn!(error = %e, "health check: cannot read the instances' status checks");
                    None
                }
            }
        };
        Ok(Survey { instances, checks })
    }

    /// A survey of what is given: `instances` by deployment, and the
    /// status checks of the running ones (`None`: not readable).
    pub fn of(
        instances: BTreeMap<String, Vec<Instance>>,
        checks: Option<Vec<StatusChecks>>,
    ) -> Survey {
        Survey {
            instances,
            checks: checks.map(|c| c.into_iter().map(|c| (c.id.clone(), c)).collect()),
        }
    }

    /// The deployment's instances; `None` when the survey did not list it.
    pub fn instances(&self, deployment_id: &str) -> Option<&[Instance]> {
        self.instances.get(deployment_id).map(Vec::as_slice)
    }

    /// Of `instances`, the running ones that fail a status check, with
    /// the names of the checks, and the maintenance EC2 has scheduled for
    /// any of them (what is still to come).
    pub fn status_of(&self, instances: &[Instance]) -> (Impaired, Scheduled) {
        let mut impaired = BTreeMap::new();
        let mut scheduled = BTreeMap::new();
        let Some(checks) = &self.checks else {
            return (impaired, scheduled);
        };
        for c in instances
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .filter_map(|i| checks.get(&i.id))
        {
            if c.impaired() {
                impaired.insert(c.id.clone(), c.failing());
            }
            let pending: Vec<ScheduledEvent> = c
                .scheduled_events
                .iter()
                .filter(|e| e.pending())
                .cloned()
                .collect();
            if !pending.is_empty() {
                scheduled.insert(c.id.clone(), pending);
            }
        }
        (impaired, scheduled)
    }
}

impl DeploymentSteps {
    /// The instances and their status checks (from the survey), and what
    /// the cluster says of itself. Only the instances must be known; the
    /// rest is a finding.
    async fn health_facts(&self, d: &Deployment, survey: &Survey) -> Option<Facts> {
        let instances = survey.instances(&d.id)?.to_vec();
        let (impaired, scheduled) = survey.status_of(&instances);
        // The cluster, from a node that runs.
        let mut owned = OwnedFacts::default();
        let cluster = match self.clusters.client(d, &[]).await {
            Ok(client) => {
                let members = client.nodes().await;
                let health = client.health(None, None).await;
                let reason = |e: &ElasticError| {
                    e.failure()
                        .map_or_else(|| e.to_string(), |f| f.reason.clone())
                };
                match (&members, &health) {
                    (Err(e), _) | (_, Err(e)) if refused(e) => ClusterFacts::Refused(reason(e)),
                    (Err(e), _) | (_, Err(e)) if unlicensed(e) => {
                        ClusterFacts::Unlicensed(reason(e))
                    }
                    _ => {
                        owned = self.owned_facts(d, &client).await;
                        ClusterFacts::Reached {
                            members: members.ok(),
                            health: health.map(|h| h.status).map_err(|e| e.to_string()),
                        }
                    }
                }
            }
            Err(e) => ClusterFacts::Unreachable(e.to_string()),
        };
        let recorded: BTreeSet<String> = d
            .access
            .as_ref()
            .map(|a| a.nodes.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default();
        Some(Facts {
            instances,
            impaired,
            scheduled,
            cluster,
            recorded,
            owned,
            mount_source: self.mount_source_facts(d).await,
        })
    }

    /// A mount clone's source snapshot, as its record says now (the
    /// listing and the resolution of `__latest_success__` mark it missing
    /// when its repository no longer holds it). `None` for any other
    /// deployment, and when the record cannot be read: that judges
    /// nothing this time.
    async fn mount_source_facts(&self, d: &Deployment) -> Option<MountSourceFacts> {
        let src = d.clone_source.as_ref().filter(|s| s.reads_source())?;
        let record = match self
            .snapshots
            .store()
            .get_snapshot(&d.org, &src.source_deployment_id, &src.snapshot)
            .await
        {
            Ok(Some(r)) => match r.value.missing {
                Some(since) => SourceRecord::Missing(since),
                None => SourceRecord::Present,
            },
            Ok(None) => SourceRecord::Unrecorded,
            Err(e) => {
                tracing::warn!(deployment = %d.id, error = %e, "health check: cannot read the mount clone's source snapshot");
                return None;
            }
        };
        Some(MountSourceFacts {
            source: src.clone(),
            record,
        })
    }

    /// What Floe registered on the cluster (as its plans register it, from
    /// the repository records now) and what the cluster reports of it and
    /// of its license. What cannot be read judges nothing this time.
    async fn owned_facts(&self, d: &Deployment, client: &ElasticClient) -> OwnedFacts {
        let reported = client
            .license()
            .await
            .ok()
            .and_then(|l| floe_domain::license::ClusterLicense::from_reported(&l));
        OwnedFacts {
            repositories: self.floe_registrations(d).await,
            registered: client.repositories().await.ok(),
            license: reported.as_ref().map(|l| l.license_type.clone()),
            expected_license: d.license.as_ref().map(|l| l.license_type.clone()),
            license_expiry: reported.and_then(|l| l.expiry),
            checked: chrono::Utc::now(),
        }
    }

    /// The registrations Floe's plans make on `d`'s cluster: its own
    /// repository (writable, at its own path), and the source a mount
    /// clone reads (read-only, at the source's path).
    pub(crate) async fn floe_registrations(
        &self,
        d: &Deployment,
    ) -> Vec<(String, RepositoryRegistration)> {
        let store = self.snapshots.store();
        let mut out = Vec::new();
        if let Some(name) = d.spec.repository()
            && let Ok(Some(repo)) = store.get_repository(&d.org, name).await
        {
            out.push((
                repo.value.name.clone(),
                floe_snapshots::repository_registration(&repo.value, &d.id, false),
            ));
        }
        if let Some(src) = d.clone_source.as_ref().filter(|s| s.reads_source()) {
            let t = src.target();
            if let Ok(Some(repo)) = store.get_repository(&d.org, &t.repository).await {
                out.push((
                    t.cluster_repository().to_string(),
                    floe_snapshots::repository_registration(
                        &repo.value,
                        &t.source_deployment_id,
                        true,
                    ),
                ));
            }
        }
        out
    }
}
