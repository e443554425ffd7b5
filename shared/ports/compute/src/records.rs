//! The endpoint records port: each deployment's stable endpoint is a DNS
//! name (`{deployment}.{domain}` in a private hosted zone) whose address
//! records the plans keep equal to the nodes that serve clients, so a user's
//! saved endpoint outlives every node. `floe-records-route53` implements it
//! on Route 53 (the only crate that links `aws-sdk-route53`);
//! [`MemoryRecords`] keeps records in memory, for tests and for a platform
//! run without a zone.
//!
//! Both operations are idempotent: a plan step may run them again after a
//! crash.

use crate::ComputeError;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Mutex;

#[async_trait]
pub trait EndpointRecords: Send + Sync + 'static {
    /// Makes `host`'s address records exactly `addresses` (IPv4 in `A`,
    /// IPv6 in `AAAA`); an empty list removes them. Succeeds when they are
    /// already so.
    async fn set(&self, host: &str, addresses: &[String]) -> Result<(), ComputeError>;
    /// The addresses `host`'s records hold now, sorted; empty when it has
    /// none.
    async fn get(&self, host: &str) -> Result<Vec<String>, ComputeError>;
}

/// Records in memory: what a zone would hold.
#[derive(Debug, Default)]
pub struct MemoryRecords {
    records: Mutex<BTreeMap<String, Vec<String>>>,
}

impl MemoryRecords {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<String>>> {
        // Each change is one insert or remove: never half done.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl EndpointRecords for MemoryRecords {
    async fn set(&self, host: &str, addresses: &[String]) -> Result<(), ComputeError> {
        let host = normalize(host);
        if addresses.is_empty() {
            self.lock().remove(&host);
        } else {
            let mut sorted = addresses.to_vec();
            sorted.sort();
            sorted.dedup();
            self.lock().insert(host, sorted);
        }
        Ok(())
    }

    async fn get(&self, host: &str) -> Result<Vec<String>, ComputeError> {
        Ok(self
            .lock()
            .get(&normalize(host))
            .cloned()
            .unwrap_or_default())
    }
}

/// A DNS name as zones compare it: lower case, without the root's dot.
pub fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The conformance suite every adapter of the port passes: run with a
/// fresh `host` name in the adapter's zone.
#[cfg(any(test, feature = "conformance"))]
pub async fn conformance(records: &dyn EndpointRecords, host: &str) -> Result<(), String> {
    let err = |e: ComputeError| e.to_string();
    if !records.get(host).await.map_err(err)?.is_empty() {
        return Err(format!("{host} has records before the test"));
    }
    // Removing what is not there succeeds.
    records.set(host, &[]).await.map_err(err)?;
    let three = ["10.0.2.9".to_string(), "10.0.1.7".into(), "10.0.3.4".into()];
    records.set(host, &three).await.map_err(err)?;
    let got = records.get(host).await.map_err(err)?;
    if got != ["10.0.1.7", "10.0.2.9", "10.0.3.4"] {
        return Err(format!("after setting three: {got:?}"));
    }
    // Setting again is no change; another set replaces, not adds.
    records.set(host, &three).await.map_err(err)?;
    let one = ["10.0.4.1".to_string()];
    records.set(host, &one).await.map_err(err)?;
    let got = records.get(host).await.map_err(err)?;
    if got != ["10.0.4.1"] {
        return Err(format!("after replacing with one: {got:?}"));
    }
    // The name is the same name whatever its case or final dot.
    let upper = format!("{}.", host.to_ascii_uppercase());
    if records.get(&upper).await.map_err(err)? != ["10.0.4.1"] {
        return Err(format!("{upper} is not {host}"));
    }
    records.set(host, &[]).await.map_err(err)?;
    let got = records.get(host).await.map_err(err)?;
    if !got.is_empty() {
        return Err(format!("after removing: {got:?}"));
    }
    records.set(host, &[]).await.map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{MemoryRecords, conformance};

    #[tokio::test]
    async fn memory_records_pass_the_conformance_suite() -> Result<(), String> {
        conformance(&MemoryRecords::default(), "d1.es.floe.internal").await
    }
}
