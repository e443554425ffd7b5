//! The storage conformance suite of `floe-store` on DynamoDB: moto on
//! 127.0.0.1 (`FLOE_TEST_AWS_ENDPOINT`, started by scripts/test.sh), through
//! the real `aws-sdk-dynamodb` client, a fresh table per test; and the
//! endpoint's own transactions held to DynamoDB's rules (`transactions`).

use floe_domain::names::new_resource_id;
use floe_store::{Backend, Store};
use floe_store_dynamo::DynamoBackend;
use std::sync::Arc;

/// The real SDK's configuration for moto on loopback.
fn moto_sdk() -> Result<aws_config::SdkConfig, Box<dyn std::error::Error>> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    Ok(aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
            aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "floe-tests"),
        ))
        .build())
}

async fn dynamo_store() -> Result<(Store, ()), Box<dyn std::error::Error>> {
    let table = format!("floe-conformance-{}", new_resource_id());
    let backend = DynamoBackend::new(&moto_sdk()?, table);
    backend.ensure_table().await?;
    let backend: Arc<dyn Backend> = Arc::new(backend);
    Ok((Store::new(backend), ()))
}

floe_store::conformance_suite!(dynamo_store);

#[path = "conformance_on_moto/transactions.rs"]
mod transactions;
