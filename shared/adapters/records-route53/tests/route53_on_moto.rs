//! The Route 53 adapter against moto's Route 53 (127.0.0.1, started by
//! scripts/test.sh): the port's conformance suite in a private hosted zone,
//! then what the zone itself holds, read through the Route 53 API.

use std::error::Error;

use aws_sdk_route53::Client;
use aws_sdk_route53::types::{HostedZoneConfig, RrType, Vpc, VpcRegion};
use floe_compute::EndpointRecords;
use floe_records_route53::{Route53Records, TTL_SECONDS};

type TestResult = Result<(), Box<dyn Error>>;

fn sdk() -> Result<aws_config::SdkConfig, Box<dyn Error>> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    let host = endpoint
        .strip_prefix("http://")
        .ok_or("FLOE_TEST_AWS_ENDPOINT must be an http:// loopback address")?;
    if !(host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")) {
        return Err(format!("FLOE_TEST_AWS_ENDPOINT {endpoint} is not a loopback address").into());
    }
    Ok(aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_route53::config::SharedCredentialsProvider::new(
            aws_sdk_route53::config::Credentials::new("test", "test", None, None, "moto"),
        ))
        .build())
}

/// A new private hosted zone for `domain`; its id.
async fn private_zone(client: &Client, domain: &str) -> Result<String, Box<dyn Error>> {
    let zone = client
        .create_hosted_zone()
        .name(domain)
        .caller_reference(uuid::Uuid::now_v7().to_string())
        .vpc(
            Vpc::builder()
                .vpc_id("vpc-12345678")
                .vpc_region(VpcRegion::UsEast1)
                .build(),
        )
        .hosted_zone_config(HostedZoneConfig::builder().private_zone(true).build())
        .send()
        .await?;
    Ok(zone.hosted_zone().ok_or("no zone")?.id().to_string())
}

fn unique_domain() -> String {
    format!("t{}.floe.internal", uuid::Uuid::now_v7().simple())
}

#[tokio::test]
async fn route53_records_pass_the_conformance_suite() -> TestResult {
    let sdk = sdk()?;
    let domain = unique_domain();
    let zone = private_zone(&Client::new(&sdk), &domain).await?;
    let records = Route53Records::new(&sdk, zone);
    floe_compute::records::conformance(&records, &format!("d1.{domain}")).await?;
    Ok(())
}

#[tokio::test]
async fn the_zone_holds_one_a_record_set_with_a_short_ttl() -> TestResult {
    let sdk = sdk()?;
    let client = Client::new(&sdk);
    let domain = unique_domain();
    let zone = private_zone(&client, &domain).await?;
    let records = Route53Records::new(&sdk, zone.clone());
    let host = format!("d2.{domain}");
    records
        .set(&host, &["10.0.1.7".into(), "10.0.2.9".into()])
        .await?;
    // Another deployment's name in the same zone is its own.
    let other = format!("d3.{domain}");
    records.set(&other, &["10.0.9.9".into()]).await?;
    let sets = client
        .list_resource_record_sets()
        .hosted_zone_id(&zone)
        .send()
        .await?;
    let ours: Vec<_> = sets
        .resource_record_sets()
        .iter()
        .filter(|s| s.name().trim_end_matches('.') == host)
        .collect();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!(*ours[0].r#type(), RrType::A);
    assert_eq!(ours[0].ttl(), Some(TTL_SECONDS));
    let mut values: Vec<&str> = ours[0]
        .resource_records()
        .iter()
        .map(|r| r.value())
        .collect();
    values.sort();
    assert_eq!(values, ["10.0.1.7", "10.0.2.9"]);
    assert_eq!(records.get(&other).await?, ["10.0.9.9"]);
    // Not an address: refused before Route 53 is asked.
    assert!(records.set(&host, &["not-an-ip".into()]).await.is_err());
    assert_eq!(records.get(&host).await?, ["10.0.1.7", "10.0.2.9"]);
    records.set(&host, &[]).await?;
    records.set(&other, &[]).await?;
    Ok(())
}
