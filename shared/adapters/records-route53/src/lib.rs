//! The Route 53 adapter of Floe's endpoint records port: each deployment's
//! endpoint name (`{deployment}.{domain}`) has address records in the
//! platform's private hosted zone, which the plans keep equal to the nodes
//! that serve clients. A name lives in one zone and is written in one
//! change batch, so a reader sees the old addresses or the new ones, never
//! a mix.
//!
//! This is the only crate that links `aws-sdk-route53`; the worker links
//! it, the api does not.

use async_trait::async_trait;
use aws_sdk_route53::Client;
use aws_sdk_route53::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType,
};
use floe_aws_errors::{AwsFailure, Judged, Verdict};
use floe_compute::records::normalize;
use floe_compute::{ComputeError, EndpointRecords};
use std::net::IpAddr;

/// Every Route 53 operation this crate calls, and no other. The deploy
/// template's policy for the worker is checked against it.
pub const OPERATIONS: &[&str] = &["ChangeResourceRecordSets", "ListResourceRecordSets"];

/// The IAM actions the worker's role needs for this crate, on the
/// endpoint zone only.
pub const IAM_ACTIONS: &[&str] = &[
    "route53:ChangeResourceRecordSets",
    "route53:ListResourceRecordSets",
];

/// How long resolvers may keep an answer: short, so that a replaced node
/// stops being handed out within half a minute of the plan's change.
pub const TTL_SECONDS: i64 = 30;

#[derive(Debug, Clone)]
pub struct Route53Records {
    client: Client,
    zone_id: String,
}

impl Route53Records {
    /// Records in hosted zone `zone_id` (`Z0123…`, or `/hostedzone/Z0123…`),
    /// through the process's shared SDK configuration.
    pub fn new(sdk: &aws_config::SdkConfig, zone_id: impl Into<String>) -> Route53Records {
        let zone_id: String = zone_id.into();
        let zone_id = zone_id
            .strip_prefix("/hostedzone/")
            .unwrap_or(&zone_id)
            .to_string();
        Route53Records {
            client: Client::new(sdk),
            zone_id,
        }
    }

    /// The address record sets `host` has now (`A` and `AAAA`).
    async fn current(&self, host: &str) -> Result<Vec<ResourceRecordSet>, ComputeError> {
        let out = self
            .client
            .list_resource_record_sets()
            .hosted_zone_id(&self.zone_id)
            .start_record_name(host)
            .max_items(10)
            .send()
            .await
            .map_err(|e| failure("ListResourceRecordSets", host, &e))?;
        Ok(out
            .resource_record_sets()
            .iter()
            .filter(|set| normalize(set.name()) == host)
            .filter(|set| matches!(set.r#type(), RrType::A | RrType::Aaaa))
            .cloned()
            .collect())
    }
}

#[async_trait]
impl EndpointRecords for Route53Records {
    async fn set(&self, host: &str, addresses: &[String]) -> Result<(), ComputeError> {
        let host = normalize(host);
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for a in addresses {
            match a.parse::<IpAddr>() {
                Ok(IpAddr::V4(ip)) => v4.push(ip.to_string()),
                Ok(IpAddr::V6(ip)) => v6.push(ip.to_string()),
                Err(_) => {
                    return Err(permanent(
                        "invalid_request",
                        format!("{a} is not an IP address for {host}"),
                    ));
                }
            }
        }
        v4.sort();
        v4.dedup();
        v6.sort();
        v6.dedup();
        let current = self.current(&host).await?;
        let mut changes = Vec::new();
        for (kind, wanted) in [(RrType::A, v4), (RrType::Aaaa, v6)] {
            let existing = current.iter().find(|set| *set.r#type() == kind);
            let mut held: Vec<String> = existing
                .map(|set| {
                    set.resource_records()
                        .iter()
                        .map(|r| r.value().to_string())
                        .collect()
                })
                .unwrap_or_default();
            held.sort();
            match (existing, wanted.is_empty()) {
                // A delete names the record set exactly as it is.
                (Some(set), true) => changes.push(change(ChangeAction::Delete, set.clone())?),
                (None, true) => {}
                (Some(set), false) if held == wanted && set.ttl() == Some(TTL_SECONDS) => {}
                (_, false) => {
                    let records = wanted
                        .iter()
                        .map(|ip| ResourceRecord::builder().value(ip).build())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| permanent("invalid_request", e.to_string()))?;
                    let set = ResourceRecordSet::builder()
                        .name(&host)
                        .r#type(kind)
                        .ttl(TTL_SECONDS)
                        .set_resource_records(Some(records))
                        .build()
                        .map_err(|e| permanent("invalid_request", e.to_string()))?;
                    changes.push(change(ChangeAction::Upsert, set)?);
                }
            }
        }
        if changes.is_empty() {
            return Ok(());
        }
        let batch = ChangeBatch::builder()
            .comment(format!("floe: the nodes of {host}"))
            .set_changes(Some(changes))
            .build()
            .map_err(|e| permanent("invalid_request", e.to_string()))?;
        self.client
            .change_resource_record_sets()
            .hosted_zone_id(&self.zone_id)
            .change_batch(batch)
            .send()
            .await
            .map_err(|e| failure("ChangeResourceRecordSets", &host, &e))?;
        tracing::info!(%host, addresses = ?addresses, zone = %self.zone_id, "endpoint records set");
        Ok(())
    }

    async fn get(&self, host: &str) -> Result<Vec<String>, ComputeError> {
        let host = normalize(host);
        let mut out: Vec<String> = self
            .current(&host)
            .await?
            .iter()
            .flat_map(|set| set.resource_records().iter().map(|r| r.value().to_string()))
            .collect();
        out.sort();
        Ok(out)
    }
}

fn change(action: ChangeAction, set: ResourceRecordSet) -> Result<Change, ComputeError> {
    Change::builder()
        .action(action)
        .resource_record_set(set)
        .build()
        .map_err(|e| permanent("invalid_request", e.to_string()))
}

fn permanent(failure_type: &str, message: String) -> ComputeError {
    ComputeError::Permanent {
        failure_type: failure_type.to_owned(),
        message,
    }
}

/// A Route 53 error as the port's: the plan engine retries a transient one
/// and shows a permanent one's type.
fn failure<E>(operation: &str, host: &str, err: &SdkError<E>) -> ComputeError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let failure = AwsFailure::from_sdk(format_args!("Route 53 {operation} {host}"), err);
    match failure.judge("route53", classify) {
        Judged::Transient { code, message } => ComputeError::Transient { code, message },
        Judged::Permanent {
            failure_type,
            message,
        } => permanent(&failure_type, message),
    }
}

/// What Route 53's own codes mean; the codes every AWS service shares are
/// `floe_aws_errors`'s.
fn classify(code: &str) -> Option<Verdict> {
    match code {
        // Another change to the zone is still being applied, or two runs
        // of a step raced: the same change succeeds a moment later.
        "PriorRequestNotComplete" | "InvalidChangeBatch" => Some(Verdict::Transient),
        "NoSuchHostedZone" => Some(Verdict::Permanent("invalid_configuration")),
        "InvalidInput" => Some(Verdict::Permanent("invalid_request")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Verdict, classify};

    #[test]
    fn a_busy_zone_passes_and_a_missing_one_is_configuration() {
        assert!(matches!(
            classify("PriorRequestNotComplete"),
            Some(Verdict::Transient)
        ));
        assert!(matches!(
            classify("NoSuchHostedZone"),
            Some(Verdict::Permanent("invalid_configuration"))
        ));
        assert!(classify("SomethingElse").is_none());
    }
}
