//! The snapshotter's configuration, read once per cold start. Every value is
//! checked here, so a mistake in the deployment stops the function at its
//! first start with the variable's name.

use floe_clusters::{Clusters, NodeAddresses};
use floe_compute::Compute;
use floe_compute_ec2::{Ec2Compute, Ec2Config};
use floe_snapshots::{Snapshotter, SnapshotterSettings};
use floe_store::Store;
use floe_store_dynamo::DynamoBackend;
use std::sync::Arc;
use std::time::Duration;

/// Lambda stops a function after 15 minutes; waiting longer than this for
/// one snapshot leaves no time to record it and apply retention.
pub const MAX_WAIT: Duration = Duration::from_secs(13 * 60);
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10 * 60);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {message}")]
pub struct ConfigError {
    pub name: &'static str,
    pub message: String,
}

fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        name,
        message: message.into(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotterConfig {
    /// The DynamoDB table of every record (`FLOE_STORE=dynamodb://TABLE`).
    pub table: String,
    /// How the function reaches a node's HTTP port (`FLOE_ES_SCHEME`, `FLOE_ES_PORT`).
    pub es_https: bool,
    pub es_port: u16,
    /// How long one run waits for its snapshot (`FLOE_SNAPSHOT_WAIT_SECS`).
    pub wait: Duration,
    /// Where each cluster's CA and elastic password are (`FLOE_PARAMETER_PREFIX`).
    pub parameter_prefix: String,
}

impl SnapshotterConfig {
    pub fn from_env() -> Result<SnapshotterConfig, ConfigError> {
        SnapshotterConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `var` (the environment, or a map in tests).
    pub fn from_lookup(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<SnapshotterConfig, ConfigError> {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let store = var("FLOE_STORE")
            .ok_or_else(|| invalid("FLOE_STORE", "is required: dynamodb://TABLE"))?;
        // SQLite has no place here: a file in one Lambda environment's /tmp
        // is shared with neither the api function nor the other environments.
        let table = store
            .strip_prefix("dynamodb://")
            .filter(|t| floe_store_dynamo::is_table_name(t))
            .ok_or_else(|| {
                invalid(
                    "FLOE_STORE",
                    "must be dynamodb://TABLE (the snapshotter shares the api's table)",
                )
            })?
            .to_string();
        let floe_clusters::NodeHttp {
            https: es_https,
            port: es_port,
        } = floe_clusters::NodeHttp::from_lookup(var).map_err(|(n, m)| invalid(n, m))?;
        let wait = match var("FLOE_SNAPSHOT_WAIT_SECS") {
            None => DEFAULT_WAIT,
            Some(s) => match s.parse::<u64>().map(Duration::from_secs) {
                Ok(d) if d <= MAX_WAIT => d,
                _ => {
                    return Err(invalid(
                        "FLOE_SNAPSHOT_WAIT_SECS",
                        format!(
                            "must be whole seconds from 0 to {} (Lambda runs 15 minutes at most)",
                            MAX_WAIT.as_secs()
                        ),
                    ));
                }
            },
        };
        let parameter_prefix =
            floe_compute::parameters::prefix_from_lookup(var).map_err(|(n, m)| invalid(n, m))?;
        Ok(SnapshotterConfig {
            table,
            es_https,
            es_port,
            wait,
            parameter_prefix,
        })
    }

    pub fn settings(&self) -> SnapshotterSettings {
        SnapshotterSettings {
            wait: self.wait,
            ..SnapshotterSettings::default()
        }
    }
}

/// The snapshotter with its production adapters: DynamoDB records, and the
/// clusters reached through their nodes' private addresses.
pub async fn snapshotter(config: &SnapshotterConfig) -> Snapshotter {
    let store = Store::new(Arc::new(
        DynamoBackend::from_env(config.table.clone()).await,
    ));
    // Only `instances` (DescribeInstances) is ever called: the launch
    // settings stay empty because this function never starts a node.
    let compute: Arc<dyn Compute> = Arc::new(
        Ec2Compute::from_env(Ec2Config {
            image_arm64: String::new(),
            image_x86_64: String::new(),
            subnets: Vec::new(),
            security_groups: Vec::new(),
            instance_profile: None,
            key_name: None,
        })
        .await,
    );
    let parameters =
        floe_parameters_ssm::SsmParameters::from_env(floe_parameters_ssm::SsmParametersConfig {
            kms_key_id: None,
        })
        .await;
    let clusters: Arc<dyn Clusters> = Arc::new(
        NodeAddresses::new(
            compute,
            config.es_https,
            config.es_port,
            None,
            Duration::from_secs(30),
        )
        .with_security(Arc::new(parameters), config.parameter_prefix.clone()),
    );
    Snapshotter::new(store, clusters).with_settings(config.settings())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_need_only_the_table() {
        let c = SnapshotterConfig::from_lookup(lookup(&[("FLOE_STORE", "dynamodb://floe-prod")]));
        assert_eq!(
            c,
            Ok(SnapshotterConfig {
                table: "floe-prod".into(),
                es_https: true,
                es_port: 9200,
                wait: DEFAULT_WAIT,
                parameter_prefix: "/floe".into(),
            })
        );
    }

    #[test]
    fn every_value_is_read() {
        let c = SnapshotterConfig::from_lookup(lookup(&[
            ("FLOE_STORE", " dynamodb://floe-test "),
            ("FLOE_ES_SCHEME", "http"),
            ("FLOE_ES_PORT", "9243"),
            ("FLOE_SNAPSHOT_WAIT_SECS", "120"),
            ("FLOE_PARAMETER_PREFIX", "/prod/floe"),
        ]));
        assert_eq!(
            c,
            Ok(SnapshotterConfig {
                table: "floe-test".into(),
                es_https: false,
                es_port: 9243,
                wait: Duration::from_secs(120),
                parameter_prefix: "/prod/floe".into(),
            })
        );
        assert_eq!(c.map(|c| c.settings().wait), Ok(Duration::from_secs(120)));
    }

    #[test]
    fn mistakes_name_their_variable() {
        let table = ("FLOE_STORE", "dynamodb://floe");
        for (pairs, name) in [
            (vec![], "FLOE_STORE"),
            (vec![("FLOE_STORE", "sqlite:///tmp/floe.db")], "FLOE_STORE"),
            (vec![("FLOE_STORE", "dynamodb://no spaces")], "FLOE_STORE"),
            (vec![table, ("FLOE_ES_SCHEME", "ftp")], "FLOE_ES_SCHEME"),
            (vec![table, ("FLOE_ES_PORT", "0")], "FLOE_ES_PORT"),
            (vec![table, ("FLOE_ES_PORT", "99999")], "FLOE_ES_PORT"),
            (
                vec![table, ("FLOE_SNAPSHOT_WAIT_SECS", "900")],
                "FLOE_SNAPSHOT_WAIT_SECS",
            ),
            (
                vec![table, ("FLOE_PARAMETER_PREFIX", "floe")],
                "FLOE_PARAMETER_PREFIX",
            ),
            (
                vec![table, ("FLOE_SNAPSHOT_WAIT_SECS", "-1")],
                "FLOE_SNAPSHOT_WAIT_SECS",
            ),
        ] {
            let err = SnapshotterConfig::from_lookup(lookup(&pairs));
            assert_eq!(err.map_err(|e| e.name), Err(name), "{pairs:?}");
        }
    }
}
