//! How the control plane reaches a deployment's cluster without asking EC2
//! or SSM: the plans that change a deployment's nodes record, as their last
//! step, which nodes run and the cluster's CA and `elastic` password (the
//! password sealed by the platform's cipher). The api function reads only
//! this record to reach a cluster (manual snapshots, and later the proxy).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The one Elasticsearch resource of a Floe deployment, named as ECE names
/// a deployment's first one (its `ref_id` in proxy paths).
pub const ELASTICSEARCH_REF_ID: &str = "main-elasticsearch";

/// The built-in superuser the platform hands to the deployment's owner.
pub const ELASTIC_USER: &str = "elastic";

/// The HTTP port Elasticsearch serves on unless told otherwise.
pub const DEFAULT_HTTP_PORT: u16 = 9200;

/// The name on the nodes' certificate, and the host name clients connect
/// to (resolved to a node's address): the nodes' addresses are unknown
/// when the certificate is made.
pub fn server_name(deployment_id: &str) -> String {
    format!("{deployment_id}.nodes.floe.internal")
}

/// What the last plan that changed the nodes recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterAccess {
    /// The deployment's CA (PEM), the only root its nodes' HTTP
    /// certificates are trusted by. Public.
    pub ca_cert_pem: String,
    /// The `elastic` user's password, sealed for [`PASSWORD_FIELD`] of
    /// [`sealing_resource`]. Never returned by the API.
    pub sealed_password: String,
    /// The running nodes when it was recorded, in a stable order.
    pub nodes: Vec<NodeEndpoint>,
    /// The port the nodes serve HTTPS on (records from before it was
    /// recorded used Elasticsearch's default).
    #[serde(default = "default_port")]
    pub http_port: u16,
}

fn default_port() -> u16 {
    DEFAULT_HTTP_PORT
}

/// How a user reaches the deployment's Elasticsearch, as its view shows it.
/// Public: the password is handed out once, by the create (and a reset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ElasticsearchAccess {
    /// `main-elasticsearch`: the `ref_id` of the proxy's path.
    #[schema(example = "main-elasticsearch")]
    pub ref_id: String,
    /// `https://{address}:{port}` of the first running node (every node
    /// answers for the cluster; in local mode, the simulated node's own
    /// loopback address). Its certificate names `server_name`, not the
    /// address: connect with `curl --cacert ca.pem --connect-to
    /// SERVER_NAME:PORT:ADDRESS:PORT https://SERVER_NAME:PORT/`.
    #[schema(example = "https://10.0.1.7:9200")]
    pub endpoint: String,
    /// The one name on the nodes' certificate (their addresses are not
    /// known when it is made): what a client checks the certificate against.
    #[schema(example = "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b.nodes.floe.internal")]
    pub server_name: String,
    pub port: u16,
    /// Every running node answers for the cluster.
    pub nodes: Vec<NodeEndpoint>,
    /// The deployment's CA (PEM): the only root its certificates chain to.
    pub ca_certificate: String,
    /// The user the create's `credentials` are for.
    #[schema(example = "elastic")]
    pub username: String,
    /// The cluster through the control plane, with the caller's token.
    #[schema(
        example = "/api/v1/deployments/0193a0c4d2b77c3e9a4b5c6d7e8f9a0b/elasticsearch/main-elasticsearch/proxy/"
    )]
    pub proxy_path: String,
}

impl ElasticsearchAccess {
    /// What the view shows of `access` for deployment `id`.
    pub fn of(id: &str, access: &ClusterAccess) -> ElasticsearchAccess {
        let name = server_name(id);
        ElasticsearchAccess {
            ref_id: ELASTICSEARCH_REF_ID.to_string(),
            endpoint: match access.nodes.first() {
                Some(node) if node.address.contains(':') => {
                    format!("https://[{}]:{}", node.address, access.http_port)
                }
                Some(node) => format!("https://{}:{}", node.address, access.http_port),
                None => format!("https://{name}:{}", access.http_port),
            },
            server_name: name,
            port: access.http_port,
            nodes: access.nodes.clone(),
            ca_certificate: access.ca_cert_pem.clone(),
            username: ELASTIC_USER.to_string(),
            proxy_path: format!(
                "/api/v1/deployments/{id}/elasticsearch/{ELASTICSEARCH_REF_ID}/proxy/"
            ),
        }
    }
}

/// The `elastic` user's credentials, in the one answer that carries them
/// (a create, a password reset).
#[derive(Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ElasticCredentials {
    #[schema(example = "elastic")]
    pub username: String,
    #[schema(example = "kV3r8wq0Zx1mN4bT6yH2cL9pS5dF7gJa")]
    pub password: String,
}

impl std::fmt::Debug for ElasticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElasticCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// One node: its name (the instance id) and private address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeEndpoint {
    pub name: String,
    pub address: String,
}

/// The field name a deployment's sealed password is bound to.
pub const PASSWORD_FIELD: &str = "elastic_password";

/// The resource a deployment's sealed values are bound to: not a repository
/// name (those never contain `/`), so a value sealed for one can never open
/// as the other's.
pub fn sealing_resource(deployment_id: &str) -> String {
    format!("deployment/{deployment_id}")
}
