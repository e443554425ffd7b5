//! What the benchmarks of the router share: a verifier of HS256 tokens, as
//! local mode has it, tokens it accepts, and the AWS settings for moto.

// Each benchmark is its own crate and uses only some of these.
#![allow(dead_code)]

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use floe_auth::{KeySource, Role, Verifier, VerifierConfig, issue_hs256};
use floe_store::backend::{Backend, Record, Write};
use floe_store_sqlite::SqliteBackend;
use std::sync::Arc;
use std::time::Duration;

const SECRET: &[u8] = b"router-benchmark-hs256-secret-0123456789abc";
const ISSUER: &str = "floe-local";
const AUDIENCE: &str = "floe-api";

/// The verifier for [`token`]'s tokens.
pub fn verifier() -> Result<Arc<Verifier>, floe_auth::ConfigError> {
    Ok(Arc::new(Verifier::new(VerifierConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        keys: KeySource::Hs256Secret(SECRET.to_vec()),
        leeway_secs: 0,
    })?))
}

/// An hour's token of `org` with one role.
pub fn token(org: &str, role: Role) -> Result<String, floe_auth::IssueError> {
    issue_hs256(
        SECRET,
        ISSUER,
        AUDIENCE,
        "bench",
        org,
        &[role],
        Duration::from_secs(3600),
    )
}

/// AWS settings for the moto that `scripts/bench.sh` starts: its endpoint
/// from `FLOE_TEST_AWS_ENDPOINT`, refused unless it is on loopback, with
/// fake credentials.
pub async fn moto_config() -> Result<aws_config::SdkConfig, String> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT")
        .map_err(|_| "FLOE_TEST_AWS_ENDPOINT is not set: start moto on 127.0.0.1 first")?;
    if !(endpoint.starts_with("http://127.0.0.1:") || endpoint.starts_with("http://localhost:")) {
        return Err(format!(
            "FLOE_TEST_AWS_ENDPOINT={endpoint} is not on loopback"
        ));
    }
    Ok(aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "floe-bench",
        ))
        .load()
        .await)
}

/// How a backend is filled: SQLite through the port (100 a transaction);
/// DynamoDB with BatchWriteItem in the adapter's item layout (pk, sk, body,
/// version, refs, name, status, tags), since moto copies the whole table
/// for every transaction, which makes a large load quadratic there. The
/// adapter itself never calls BatchWriteItem (its IAM role lacks it).
pub enum Loader {
    Port(Arc<SqliteBackend>),
    Dynamo(aws_sdk_dynamodb::Client, String),
}

pub fn dynamo_item(r: &Record) -> std::collections::HashMap<String, AttributeValue> {
    let s = |v: &str| AttributeValue::S(v.to_string());
    let mut item = std::collections::HashMap::from([
        ("pk".to_string(), s(&format!("ORG#{}", r.key.org))),
        (
            "sk".to_string(),
            s(&format!("{}#{}", r.key.kind.prefix(), r.key.key)),
        ),
        ("body".to_string(), s(&r.body)),
        (
            "version".to_string(),
            AttributeValue::N(r.version.to_string()),
        ),
        ("refs".to_string(), AttributeValue::N(r.refs.to_string())),
    ]);
    if let Some(name) = &r.attrs.name {
        item.insert("name".to_string(), s(name));
    }
    if let Some(status) = &r.attrs.status {
        item.insert("status".to_string(), s(status));
    }
    if !r.attrs.tags.is_empty() {
        item.insert("tags".to_string(), AttributeValue::Ss(r.attrs.tags.clone()));
    }
    item
}

impl Loader {
    pub async fn load(&self, records: Vec<Record>) -> Result<(), Box<dyn std::error::Error>> {
        match self {
            Loader::Port(b) => {
                for chunk in records.chunks(100) {
                    b.write(chunk.iter().cloned().map(Write::Create).collect())
                        .await?;
                }
            }
            Loader::Dynamo(client, table) => {
                for chunk in records.chunks(25) {
                    let mut requests = Vec::with_capacity(chunk.len());
                    for r in chunk {
                        let put = PutRequest::builder()
                            .set_item(Some(dynamo_item(r)))
                            .build()?;
                        requests.push(WriteRequest::builder().put_request(put).build());
                    }
                    // Moto processes every item; anything left over is sent again.
                    while !requests.is_empty() {
                        let out = client
                            .batch_write_item()
                            .request_items(table.as_str(), requests)
                            .send()
                            .await?;
                        requests = out
                            .unprocessed_items()
                            .and_then(|u| u.get(table.as_str()))
                            .cloned()
                            .unwrap_or_default();
                    }
                }
            }
        }
        Ok(())
    }
}
