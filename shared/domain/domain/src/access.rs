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

/// How a deployment's stable endpoint is named, chosen once at its create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EndpointNaming {
    /// No stable endpoint: the view shows a running node's address (what
    /// Floe did before it named endpoints).
    #[default]
    NodeAddress,
    /// Local mode: a loopback address of the deployment's own
    /// (`127.128.0.0` to `127.254.255.255`, apart from the simulated
    /// instances' `127.1` to `127.127`), derived from its id, which its
    /// simulated cluster serves for its whole life. Names do not resolve
    /// on a developer's machine; an address needs nothing but itself.
    Loopback,
    /// On AWS: `{deployment id}.{domain}`, a record of the private hosted
    /// zone that the plans keep equal to the nodes that serve clients.
    Dns { domain: String },
}

impl EndpointNaming {
    /// The endpoint host of deployment `deployment_id`; `None` without
    /// stable endpoints.
    pub fn host_for(&self, deployment_id: &str) -> Option<String> {
        match self {
            EndpointNaming::NodeAddress => None,
            EndpointNaming::Loopback => Some(loopback_endpoint(deployment_id).to_string()),
            EndpointNaming::Dns { domain } => {
                Some(format!("{deployment_id}.{}", domain.trim_end_matches('.')))
            }
        }
    }
}

/// The loopback address of a deployment's endpoint in local mode: FNV-1a
/// of its id (a hash whose value never changes between builds, unlike the
/// standard library's) spread over `127.128.0.1` to `127.254.254.254`.
pub fn loopback_endpoint(deployment_id: &str) -> std::net::Ipv4Addr {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in deployment_id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let pick = |shift: u32, span: u64| u8::try_from((hash >> shift) % span).unwrap_or(0);
    std::net::Ipv4Addr::new(
        127,
        128 + pick(0, 127),
        1 + pick(16, 254),
        1 + pick(32, 254),
    )
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
    /// `https://{host}:{port}`: the deployment's stable endpoint, which
    /// stays its own while nodes are replaced, and which its node
    /// certificate names: connect with the CA and the credentials alone
    /// (`curl --cacert ca.pem -u elastic:PASSWORD ENDPOINT/`). On AWS a
    /// name in the platform's private hosted zone; in local mode a loopback
    /// address of the deployment's own. A deployment created before Floe
    /// gave each one its endpoint (`stable_endpoint: false`) shows a running
    /// node's address here, whose certificate names `server_name` only.
    #[schema(example = "https://0193a0c4d2b77c3e9a4b5c6d7e8f9a0b.es.floe.internal:9200")]
    pub endpoint: String,
    /// Whether `endpoint` is the deployment's stable, verifiable endpoint;
    /// `false` for a deployment created before Floe gave each one (its
    /// endpoint is then a node's address, reached with `--connect-to
    /// SERVER_NAME:PORT:ADDRESS:PORT`).
    pub stable_endpoint: bool,
    /// The stable endpoint (`https://{host}:{port}`) the running update
    /// moves a deployment without one to: `endpoint` becomes this when
    /// that plan succeeds, its nodes all replaced with ones whose
    /// certificates name it (and chain to `ca_certificate` then). Until
    /// then, `endpoint` and `ca_certificate` are what works.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "https://0193a0c4d2b77c3e9a4b5c6d7e8f9a0b.es.floe.internal:9200")]
    pub moving_to_endpoint: Option<String>,
    /// The name the functions check a node's certificate against, which
    /// every node certificate carries beside the endpoint's host.
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
    /// What the view shows of `access` for deployment `id`, whose stable
    /// endpoint's host is `endpoint` (`None` for a deployment from before).
    pub fn of(id: &str, access: &ClusterAccess, endpoint: Option<&str>) -> ElasticsearchAccess {
        let name = server_name(id);
        let url = |host: &str| https_url(host, access.http_port);
        ElasticsearchAccess {
            ref_id: ELASTICSEARCH_REF_ID.to_string(),
            endpoint: match (endpoint, access.nodes.first()) {
                (Some(host), _) => url(host),
                (None, Some(node)) => url(&node.address),
                (None, None) => url(&name),
            },
            stable_endpoint: endpoint.is_some(),
            moving_to_endpoint: None,
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

impl ElasticsearchAccess {
    /// With the endpoint a running move goes to (`host`), when there is
    /// one and the deployment has none yet.
    pub fn moving_to(mut self, host: Option<&str>) -> ElasticsearchAccess {
        if !self.stable_endpoint {
            self.moving_to_endpoint = host.map(|host| https_url(host, self.port));
        }
        self
    }
}

/// `https://{host}:{port}`, an IPv6 address in brackets.
fn https_url(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
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

#[cfg(test)]
mod tests {
    use super::{EndpointNaming, loopback_endpoint};

    #[test]
    fn an_endpoint_is_named_once_and_the_same_every_time() {
        let id = "0193a0c4d2b77c3e9a4b5c6d7e8f9a0b";
        assert_eq!(EndpointNaming::NodeAddress.host_for(id), None);
        assert_eq!(
            EndpointNaming::Dns {
                domain: "es.floe.internal.".into()
            }
            .host_for(id)
            .as_deref(),
            Some("0193a0c4d2b77c3e9a4b5c6d7e8f9a0b.es.floe.internal")
        );
        let a = EndpointNaming::Loopback.host_for(id);
        assert_eq!(a, EndpointNaming::Loopback.host_for(id));
        assert_ne!(a, EndpointNaming::Loopback.host_for("another"));
    }

    #[test]
    fn loopback_endpoints_stay_apart_from_the_simulated_instances() {
        for i in 0..2000 {
            let ip = loopback_endpoint(&format!("deployment-{i}"));
            let [a, b, c, d] = ip.octets();
            assert_eq!(a, 127);
            assert!((128..=254).contains(&b), "{ip}");
            assert!((1..=254).contains(&c) && (1..=254).contains(&d), "{ip}");
        }
    }
}
