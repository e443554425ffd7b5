//! The clusters as the api function reaches them: from the deployment's
//! record alone. The plans that change a deployment's nodes record which
//! nodes run, the cluster's CA and the sealed `elastic` password
//! ([`floe_domain::access`]); this adapter opens the password with the
//! platform's cipher and connects, pinned to that CA, to the deployment's
//! stable endpoint ([`crate::endpoint_reach`]) or else a recorded node.
//! It calls no AWS API but what the cipher does (KMS Decrypt).

use crate::{ClusterError, Clusters};
use async_trait::async_trait;
use floe_domain::access::{PASSWORD_FIELD, sealing_resource};
use floe_domain::deployment::Deployment;
use floe_domain::secret::SecretString;
use floe_elastic::{Auth, ElasticClient};
use floe_secrets::{Cipher, Owner};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub struct StoredClusters {
    cipher: Arc<dyn Cipher>,
    port: u16,
    timeout: Duration,
    /// One client per deployment, node and recorded password: a warm
    /// function reuses its connection pool and opens the password once.
    clients: Mutex<HashMap<String, ElasticClient>>,
}

impl StoredClusters {
    /// Nodes serve HTTPS on `port` (`FLOE_ES_PORT`).
    pub fn new(cipher: Arc<dyn Cipher>, port: u16, timeout: Duration) -> StoredClusters {
        StoredClusters {
            cipher,
            port,
            timeout,
            clients: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl Clusters for StoredClusters {
    async fn client(
        &self,
        deployment: &Deployment,
        avoid: &[String],
    ) -> Result<ElasticClient, ClusterError> {
        let not_secured = |message: &str| ClusterError::NotSecured {
            deployment_id: deployment.id.clone(),
            message: message.to_string(),
        };
        let Some(access) = &deployment.access else {
            return Err(not_secured(
                "no plan has recorded how to reach it yet (its next plan does)",
            ));
        };
        let node = access
            .nodes
            .iter()
            .find(|n| !avoid.contains(&n.name))
            .or_else(|| access.nodes.first())
            .ok_or_else(|| ClusterError::NoRunningNode {
                deployment_id: deployment.id.clone(),
            })?;
        let endpoint = crate::endpoint_reach(deployment, avoid);
        let key = format!(
            "{} {} {}",
            deployment.id,
            endpoint.unwrap_or(&node.address),
            access.sealed_password
        );
        if let Some(client) = self
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(client.clone());
        }
        let resource = sealing_resource(&deployment.id);
        let password = self
            .cipher
            .open(
                &access.sealed_password,
                &Owner {
                    org: &deployment.org,
                    repository: &resource,
                    field: PASSWORD_FIELD,
                },
            )
            .await
            .map_err(|e| not_secured(&format!("the recorded password cannot be opened: {e}")))?;
        let auth = Some(Auth::Basic {
            username: floe_node_security::ELASTIC_USER.to_string(),
            password: SecretString::new(password),
        });
        let client = match endpoint {
            Some(host) => ElasticClient::at_endpoint(
                host,
                self.port,
                &access.ca_cert_pem,
                auth,
                self.timeout,
            )?,
            None => {
                let ip: std::net::IpAddr = node
                    .address
                    .parse()
                    .map_err(|_| not_secured("a recorded node address is not an IP address"))?;
                ElasticClient::pinned(
                    &floe_node_security::server_name(&deployment.id),
                    std::net::SocketAddr::new(ip, self.port),
                    &access.ca_cert_pem,
                    auth,
                    self.timeout,
                )?
            }
        };
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, client.clone());
        Ok(client)
    }

    async fn forget(&self, deployment_id: &str) {
        let prefix = format!("{deployment_id} ");
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|k, _| !k.starts_with(&prefix));
    }
}
