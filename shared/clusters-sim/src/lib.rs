//! Local mode: one simulated Elasticsearch cluster per deployment, started
//! when something first needs it. Its nodes follow the deployment's running
//! (simulated) instances, so a node group that grows joins nodes, and
//! instances terminated before their shards were moved off take those
//! shards with them, as on EC2. It implements the port of `floe-clusters`.

use async_trait::async_trait;
use floe_clusters::{ClusterError, Clusters, running_nodes};
use floe_compute::Compute;
use floe_domain::deployment::Deployment;
use floe_elastic::ElasticClient;
use floe_elastic_sim::{RunningCluster, S3Access, SimConfig, SimFaults, SimulatedCluster};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How each deployment's simulated cluster is set up.
#[derive(Debug, Clone, Default)]
pub struct SimulatedClustersConfig {
    /// `path.repo` of every simulated cluster: `fs` repositories live here,
    /// shared by all deployments (so a clone sees its source's snapshots).
    pub fs_root: Option<PathBuf>,
    pub s3: Option<S3Access>,
    pub faults: SimFaults,
}

pub struct SimulatedClusters {
    compute: Arc<dyn Compute>,
    config: SimulatedClustersConfig,
    /// Each deployment's simulated cluster and the one client kept for it.
    clusters: Mutex<HashMap<String, (RunningCluster, ElasticClient)>>,
    timeout: Duration,
}

impl SimulatedClusters {
    pub fn new(compute: Arc<dyn Compute>, config: SimulatedClustersConfig) -> SimulatedClusters {
        SimulatedClusters {
            compute,
            config,
            clusters: Mutex::new(HashMap::new()),
            timeout: Duration::from_secs(30),
        }
    }

    /// The address of a deployment's simulated cluster, if it runs (for
    /// users of local mode, who index documents into it directly).
    pub async fn url(&self, deployment_id: &str) -> Option<String> {
        self.clusters
            .lock()
            .await
            .get(deployment_id)
            .map(|(c, _)| c.url().to_string())
    }

    /// The simulated cluster's node names (tests check joins and leaves).
    pub async fn node_names(&self, deployment_id: &str) -> Vec<String> {
        self.clusters
            .lock()
            .await
            .get(deployment_id)
            .map(|(c, _)| c.node_names())
            .unwrap_or_default()
    }

    /// Changes the faults of a deployment's running simulated cluster.
    pub async fn set_faults(&self, deployment_id: &str, faults: SimFaults) -> bool {
        match self.clusters.lock().await.get(deployment_id) {
            Some((c, _)) => {
                c.set_faults(faults);
                true
            }
            None => false,
        }
    }
}

#[async_trait]
impl Clusters for SimulatedClusters {
    async fn client(
        &self,
        deployment: &Deployment,
        _avoid: &[String],
    ) -> Result<ElasticClient, ClusterError> {
        let nodes = running_nodes(self.compute.as_ref(), &deployment.id).await?;
        if nodes.is_empty() {
            return Err(ClusterError::NoRunningNode {
                deployment_id: deployment.id.clone(),
            });
        }
        let names: Vec<String> = nodes.into_iter().map(|n| n.node_name).collect();
        let mut clusters = self.clusters.lock().await;
        if !clusters.contains_key(&deployment.id) {
            let mut config = SimConfig::new(deployment.spec.name.clone())
                .with_nodes(u32::try_from(names.len()).unwrap_or(1))
                .with_faults(self.config.faults.clone());
            if let Some(root) = &self.config.fs_root {
                config = config.with_fs_root(root.clone());
            }
            if let Some(s3) = &self.config.s3 {
                config = config.with_s3(s3.clone());
            }
            let cluster = SimulatedCluster::start(config)
                .await
                .map_err(|e| ClusterError::Simulator(e.to_string()))?;
            tracing::info!(deployment = %deployment.id, url = cluster.url(), "simulated cluster for the deployment");
            let client = ElasticClient::new(cluster.url(), None, self.timeout)?;
            clusters.insert(deployment.id.clone(), (cluster, client));
        }
        let Some((cluster, client)) = clusters.get(&deployment.id) else {
            return Err(ClusterError::Simulator("the cluster went away".into()));
        };
        cluster.set_nodes(&names);
        Ok(client.clone())
    }

    async fn forget(&self, deployment_id: &str) {
        let cluster = self.clusters.lock().await.remove(deployment_id);
        if let Some((cluster, _)) = cluster
            && let Err(e) = cluster.shutdown().await
        {
            tracing::warn!(deployment = deployment_id, error = %e, "simulated cluster did not stop cleanly");
        }
    }
}
