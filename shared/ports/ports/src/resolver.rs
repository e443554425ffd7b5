//! Name resolution for the endpoints that clients register. A repository's
//! endpoint is checked against the platform's address policy, and a name
//! is only as safe as the addresses it resolves to (`169.254.169.254.nip.io`
//! is the metadata service), so the use case resolves it through this port.

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::net::IpAddr;

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The name has no address, or the resolver could not answer.
    #[error("{name} does not resolve: {reason}")]
    Unresolved { name: String, reason: String },
}

#[async_trait]
pub trait Resolver: Send + Sync {
    /// Every address `host` resolves to (at least one, or an error).
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, ResolveError>;
}

/// The process's own resolver (the system's, through tokio), as nodes will
/// use it.
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        let unresolved = |reason: String| ResolveError::Unresolved {
            name: host.to_string(),
            reason,
        };
        let found = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| unresolved(e.to_string()))?;
        let addresses: Vec<IpAddr> = found.map(|a| a.ip()).collect();
        if addresses.is_empty() {
            return Err(unresolved("no address".into()));
        }
        Ok(addresses)
    }
}

/// Resolves no names: an IP literal is itself, `localhost` is loopback,
/// and any other name does not resolve. For a server under test that must
/// reach nothing but loopback, not even a DNS server.
pub struct OfflineResolver;

#[async_trait]
impl Resolver for OfflineResolver {
    async fn resolve(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        if host.eq_ignore_ascii_case("localhost") {
            return Ok(vec![IpAddr::from([127, 0, 0, 1])]);
        }
        Err(ResolveError::Unresolved {
            name: host.to_string(),
            reason: "this server resolves no names (FLOE_LOCAL_OFFLINE)".into(),
        })
    }
}

/// A fixed table of names, for tests: they must never ask a real resolver.
/// A name not in the table does not resolve.
#[derive(Default, Clone)]
pub struct FixedResolver(pub BTreeMap<String, Vec<IpAddr>>);

impl FixedResolver {
    pub fn with(mut self, name: &str, addresses: &[IpAddr]) -> FixedResolver {
        self.0.insert(name.to_ascii_lowercase(), addresses.to_vec());
        self
    }
}

#[async_trait]
impl Resolver for FixedResolver {
    async fn resolve(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        self.0
            .get(&host.to_ascii_lowercase())
            .filter(|a| !a.is_empty())
            .cloned()
            .ok_or_else(|| ResolveError::Unresolved {
                name: host.to_string(),
                reason: "not in the test's table".into(),
            })
    }
}
