//! The snapshotter's adapters, built once per cold start from its
//! configuration ([`floe_wiring::SnapshotterConfig`]).

use floe_clusters::{Clusters, NodeAddresses};
use floe_compute::Compute;
use floe_compute_ec2::{Ec2Compute, Ec2Config};
use floe_snapshots::{Snapshotter, SnapshotterSettings};
use floe_wiring::{SnapshotterConfig, WiringError, build};
use std::sync::Arc;
use std::time::Duration;

pub fn settings(config: &SnapshotterConfig) -> SnapshotterSettings {
    SnapshotterSettings {
        wait: config.wait,
        ..SnapshotterSettings::default()
    }
}

/// The snapshotter with its production adapters: DynamoDB records, and the
/// clusters reached through their nodes' private addresses.
pub async fn snapshotter(config: &SnapshotterConfig) -> Result<Snapshotter, WiringError> {
    let sdk = floe_wiring::aws().await;
    let store = build::store(&config.store, sdk.into()).await?;
    // Only `instances` (DescribeInstances) is ever called: the launch
    // settings stay empty because this function never starts a node.
    let compute: Arc<dyn Compute> = Arc::new(Ec2Compute::new(
        sdk,
        Ec2Config {
            image_arm64: String::new(),
            image_x86_64: String::new(),
            subnets: Vec::new(),
            security_groups: Vec::new(),
            instance_profile: None,
            key_name: None,
        },
    ));
    let parameters = floe_parameters_ssm::SsmParameters::new(
        sdk,
        floe_parameters_ssm::SsmParametersConfig { kms_key_id: None },
    );
    let clusters: Arc<dyn Clusters> = Arc::new(
        NodeAddresses::new(
            compute,
            config.node_http.https,
            config.node_http.port,
            None,
            Duration::from_secs(30),
        )
        .with_security(Arc::new(parameters), config.parameter_prefix.clone()),
    );
    Ok(Snapshotter::new(store, clusters).with_settings(settings(config)))
}
