//! The real deployment plans on the EC2 adapter against moto's EC2
//! (127.0.0.1, started by scripts/test.sh), checked through the EC2 API
//! rather than through the adapter: what a plan leaves in the account is
//! what matters, and the adapter reading its own writes back could hide a
//! mismatch. Each test builds its own VPC, subnets and security group, and
//! every deployment id is fresh, so the tests share one moto safely.

use std::collections::BTreeSet;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{ArchitectureValues, Filter, Instance, InstanceStateName};
use base64::Engine as _;
use chrono::Utc;
use floe_clusters_sim::SimulatedClusters;
use floe_compute::NodeParameters as _;
use floe_compute::{TAG_DEPLOYMENT, TAG_NODE_GROUP, TAG_ORG, TAG_PLAN};
use floe_compute_ec2::{Ec2Compute, Ec2Config};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanParams, PlanStatus, StepStatus};
use floe_domain::repository::{Protocol, Repository, RepositorySettings, S3Settings};
use floe_domain::secret::{Sealed, SecretString};
use floe_elastic_sim::S3Access;
use floe_parameters_ssm::{SsmParameters, SsmParametersConfig};
use floe_plans::engine::Steps;
use floe_plans::{DeploymentSteps, PlanJob, StepPorts, StepSettings};
use floe_secrets::{Cipher as _, LocalCipher, Owner};
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use serde_json::json;

mod support;

use support::{FailAfter, Twice};

type TestResult = Result<(), Box<dyn Error>>;

const ORG: &str = "acme";
const NAME: &str = "logs-ec2";
/// The S3-compatible repository every deployment here snapshots into: a
/// bucket on moto, reached by endpoint like a MinIO or Ceph store would be.
const REPOSITORY: &str = "moto-s3";
/// Its keys. Moto accepts any; what matters is that none of them ever shows
/// in the user data, and each reaches SSM as a SecureString.
const ACCESS_KEY: &str = "AKIAFLOEPLANTEST0001";
const SECRET_KEY: &str = "floe-plan-test-secret-8f3a1c";
const SESSION_TOKEN: &str = "floe-plan-test-token-52be90";

fn endpoint() -> Result<String, Box<dyn Error>> {
    Ok(std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?)
}

/// The SDK configuration every adapter and client of these tests is built
/// from: moto's endpoint, its region and test credentials.
fn sdk_at(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_ec2::config::SharedCredentialsProvider::new(
            aws_sdk_ec2::config::Credentials::new("test", "test", None, None, "moto"),
        ))
        .build()
}

fn ssm_at(endpoint: &str) -> SsmParameters {
    SsmParameters::new(&sdk_at(endpoint), SsmParametersConfig { kms_key_id: None })
}

fn client_at(endpoint: &str) -> Result<aws_config::SdkConfig, Box<dyn Error>> {
    // Only a loopback moto: these tests create and terminate instances, which
    // must never reach a real account through a stray endpoint.
    let host = endpoint
        .strip_prefix("http://")
        .ok_or("FLOE_TEST_AWS_ENDPOINT must be an http:// loopback address")?;
    if !(host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")) {
        return Err(format!("FLOE_TEST_AWS_ENDPOINT {endpoint} is not a loopback address").into());
    }
    Ok(sdk_at(endpoint))
}

async fn image_of(client: &Client, arch: &str) -> Result<String, Box<dyn Error>> {
    let out = client
        .describe_images()
        .filters(Filter::builder().name("architecture").values(arch).build())
        .send()
        .await?;
    let image = out
        .images()
        .iter()
        .find(|i| i.architecture().map(ArchitectureValues::as_str) == Some(arch))
        .and_then(|i| i.image_id())
        .ok_or_else(|| format!("moto has no {arch} image"))?;
    Ok(image.to_owned())
}

/// A fresh network on moto and one image per architecture from moto's
/// catalogue; `client` is the test's own view of the account.
struct Fixture {
    client: Client,
    /// What the adapters under test are built from (moto).
    sdk: aws_config::SdkConfig,
    config: Ec2Config,
    /// The nodes' bootstrap parameters, in moto's SSM.
    parameters: Arc<SsmParameters>,
    /// The records, with the repository whose keys were sealed by `cipher`.
    store: Store,
    cipher: Arc<LocalCipher>,
    /// `host:port` of moto, the repository's endpoint.
    s3_endpoint: String,
    /// The repository's bucket.
    bucket: String,
}

impl Fixture {
    async fn new() -> Result<Fixture, Box<dyn Error>> {
        let sdk = client_at(&endpoint()?)?;
        let client = Client::new(&sdk);
        let image_arm64 = image_of(&client, "arm64").await?;
        let image_x86_64 = image_of(&client, "x86_64").await?;
        let vpc = client
            .create_vpc()
            .cidr_block("10.41.0.0/16")
            .send()
            .await?;
        let vpc_id = vpc
            .vpc()
            .and_then(|v| v.vpc_id())
            .ok_or("no vpc id")?
            .to_owned();
        let mut subnets = Vec::new();
        for (i, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
            let subnet = client
                .create_subnet()
                .vpc_id(&vpc_id)
                .cidr_block(format!("10.41.{}.0/24", i + 1))
                .availability_zone(*zone)
                .send()
                .await?;
            subnets.push(
                subnet
                    .subnet()
                    .and_then(|s| s.subnet_id())
                    .ok_or("no subnet id")?
                    .to_owned(),
            );
        }
        let group = client
            .create_security_group()
            .group_name(format!(
                "floe-nodes-{}",
                floe_domain::names::new_resource_id()
            ))
            .description("Elasticsearch nodes")
            .vpc_id(&vpc_id)
            .send()
            .await?;
        let group_id = group.group_id().ok_or("no group id")?.to_owned();
        let config = Ec2Config {
            image_arm64,
            image_x86_64,
            subnets,
            security_groups: vec![group_id],
            instance_profile: Some(
                "arn:aws:iam::123456789012:instance-profile/floe-es-node".to_owned(),
            ),
            key_name: None,
        };
        let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
        let cipher = Arc::new(LocalCipher::from_key(&[7u8; 32]));
        let s3_endpoint = endpoint()?
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let bucket = format!(
            "floe-plans-{}",
            &floe_domain::names::new_resource_id()[16..]
        );
        // Moto's S3 takes an unsigned bucket creation.
        let created = reqwest::Client::new()
            .put(format!("http://{s3_endpoint}/{bucket}"))
            .send()
            .await?;
        if !created.status().is_success() {
            return Err(format!("creating bucket {bucket}: {}", created.status()).into());
        }
        let seal = |value: &'static str, field: &'static str| {
            let cipher = cipher.clone();
            async move {
                let owner = Owner {
                    org: ORG,
                    repository: REPOSITORY,
                    field,
                };
                cipher.seal(value, &owner).await.map(Sealed::new)
            }
        };
        let now = Utc::now();
        store
            .create_repository(&Repository {
                org: ORG.into(),
                name: REPOSITORY.into(),
                settings: RepositorySettings::S3(S3Settings {
                    bucket: bucket.clone(),
                    base_path: Some("plans".into()),
                    region: Some("us-east-1".into()),
                    endpoint: Some(s3_endpoint.clone()),
                    protocol: Some(Protocol::Http),
                    path_style_access: Some(true),
                    access_key: Some(ACCESS_KEY.into()),
                    secret_key: Some(seal(SECRET_KEY, "secret_key").await?),
                    session_token: Some(seal(SESSION_TOKEN, "session_token").await?),
                    ..S3Settings::default()
                }),
                created: now,
                updated: now,
            })
            .await?;
        Ok(Fixture {
            client,
            sdk,
            config,
            parameters: Arc::new(ssm_at(&endpoint()?)),
            store,
            cipher,
            s3_endpoint,
            bucket,
        })
    }

    fn compute(&self) -> Arc<dyn floe_compute::Compute> {
        Arc::new(Ec2Compute::new(&self.sdk, self.config.clone()))
    }

    /// No Elasticsearch answers on moto's instance addresses: a simulated
    /// cluster per deployment follows its EC2 instances instead. Its S3
    /// client stands for the keystore the nodes would fill from SSM.
    fn clusters(&self) -> Arc<SimulatedClusters> {
        Arc::new(SimulatedClusters::new(
            self.compute(),
            floe_clusters_sim::SimulatedClustersConfig {
                s3: Some(S3Access {
                    endpoint_url: Some(format!("http://{}", self.s3_endpoint)),
                    region: "us-east-1".into(),
                    access_key: "test".into(),
                    secret_key: SecretString::new("test"),
                    force_path_style: true,
                }),
                ..Default::default()
            },
        ))
    }

    fn steps(&self) -> DeploymentSteps {
        self.steps_on(self.clusters())
    }

    fn steps_on(&self, clusters: Arc<SimulatedClusters>) -> DeploymentSteps {
        DeploymentSteps::new(
            StepPorts {
                compute: self.compute(),
                clusters: clusters.clone(),
                parameters: self.parameters.clone(),
                cipher: self.cipher.clone(),
                snapshots: floe_snapshots::Snapshotter::new(self.store.clone(), clusters),
            },
            settings(),
        )
    }

    /// Every object in the repository's bucket, with its ETag: what a
    /// writer would change.
    async fn objects(&self) -> Result<BTreeSet<(String, String)>, Box<dyn Error>> {
        let listing = reqwest::get(format!(
            "http://{}/{}?list-type=2&max-keys=1000",
            self.s3_endpoint, self.bucket
        ))
        .await?
        .text()
        .await?;
        assert!(
            !listing.contains("<IsTruncated>true</IsTruncated>"),
            "more than one page of objects"
        );
        let field = |part: &str, tag: &str| -> Option<String> {
            let start = part.find(&format!("<{tag}>"))? + tag.len() + 2;
            let end = part.find(&format!("</{tag}>"))?;
            Some(part.get(start..end)?.to_string())
        };
        Ok(listing
            .split("<Contents>")
            .skip(1)
            .filter_map(|part| Some((field(part, "Key")?, field(part, "ETag")?)))
            .collect())
    }

    /// Every instance EC2 lists with the deployment's tag, whatever its state.
    async fn tagged(&self, deployment_id: &str) -> Result<Vec<Instance>, Box<dyn Error>> {
        let mut pages = self
            .client
            .describe_instances()
            .filters(
                Filter::builder()
                    .name(format!("tag:{TAG_DEPLOYMENT}"))
                    .values(deployment_id)
                    .build(),
            )
            .into_paginator()
            .send();
        let mut found = Vec::new();
        while let Some(page) = pages.next().await {
            for reservation in page?.reservations() {
                found.extend(reservation.instances().iter().cloned());
            }
        }
        Ok(found)
    }

    /// The names of the launch templates a deployment's plans would create.
    /// Selected by the deployment's tag on the server: moto cuts an
    /// unfiltered listing at 15 templates without a NextToken, and other
    /// tests share the endpoint.
    async fn templates(&self, deployment_id: &str) -> Result<Vec<String>, Box<dyn Error>> {
        let prefix = format!("floe-{deployment_id}");
        let by_deployment = aws_sdk_ec2::types::Filter::builder()
            .name("tag:floe:deployment")
            .values(deployment_id)
            .build();
        let mut pages = self
            .client
            .describe_launch_templates()
            .filters(by_deployment)
            .into_paginator()
            .send();
        let mut names = Vec::new();
        while let Some(page) = pages.next().await {
            for template in page?.launch_templates() {
                if let Some(name) = template.launch_template_name()
                    && name.starts_with(&prefix)
                {
                    names.push(name.to_owned());
                }
            }
        }
        Ok(names)
    }

    /// Every parameter SSM holds under the deployment's path, at any depth,
    /// listed through SSM itself rather than by the names Floe writes.
    async fn parameters_left(&self, deployment_id: &str) -> Result<Vec<String>, Box<dyn Error>> {
        let ssm = aws_sdk_ssm::Client::new(&self.sdk);
        let mut pages = ssm
            .get_parameters_by_path()
            .path(format!("/floe/{deployment_id}"))
            .recursive(true)
            .into_paginator()
            .send();
        let mut names = Vec::new();
        while let Some(page) = pages.next().await {
            names.extend(
                page?
                    .parameters()
                    .iter()
                    .filter_map(|p| p.name().map(str::to_owned)),
            );
        }
        Ok(names)
    }

    /// The decoded user data of the template's latest version.
    async fn user_data(&self, template: &str) -> Result<String, Box<dyn Error>> {
        let versions = self
            .client
            .describe_launch_template_versions()
            .launch_template_name(template)
            .versions("$Latest")
            .send()
            .await?;
        let version = versions
            .launch_template_versions()
            .first()
            .ok_or("no template version")?;
        let data = version.launch_template_data().ok_or("no template data")?;
        let encoded = data.user_data().ok_or("no user data")?;
        Ok(String::from_utf8(
            base64::engine::general_purpose::STANDARD.decode(encoded)?,
        )?)
    }
}

fn settings() -> StepSettings {
    StepSettings {
        poll: Duration::from_millis(20),
        boot_timeout: Duration::from_secs(60),
        ..StepSettings::default()
    }
}

fn spec(instance_type: &str) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({
        "name": NAME,
        "version": "8.15.3",
        "node_groups": [{
            "id": "hot",
            "roles": ["master", "data_hot", "data_content"],
            "instance_type": instance_type,
            "count": 3,
            "zone_count": 2,
            "storage": {"size_gb": 100}
        }],
        "user_settings": {"thread_pool.snapshot.max": 8},
        "snapshot": {"repository": REPOSITORY}
    }))
}

struct Run {
    store: Store,
    job: PlanJob,
}

/// Creates a deployment with a pending create plan and drives it to the end.
async fn drive_create(
    store: &Store,
    steps: Arc<dyn Steps>,
    spec: DeploymentSpec,
) -> Result<(Run, PlanStatus), Box<dyn Error>> {
    let run = new_create(store, spec).await?;
    let status = support::run_to_end(&run.store, steps, &run.job).await?;
    Ok((run, status))
}

/// A deployment with a pending create plan, as the API writes it.
async fn new_create(store: &Store, spec: DeploymentSpec) -> Result<Run, Box<dyn Error>> {
    let now = Utc::now();
    let store = store.clone();
    let plan = Plan::new(
        ORG,
        &floe_domain::names::new_resource_id(),
        PlanParams::Create(spec.clone()),
        "test",
        "tester",
        now,
    );
    let deployment = Deployment::first_planned_by(&plan, spec);
    store.create_deployment(&deployment, &plan, None).await?;
    let job = PlanJob {
        org: ORG.into(),
        deployment_id: deployment.id.clone(),
        plan_id: plan.id.clone(),
    };
    Ok(Run { store, job })
}

async fn deployment_of(run: &Run) -> Result<Deployment, Box<dyn Error>> {
    Ok(run
        .store
        .get_deployment(ORG, &run.job.deployment_id)
        .await?
        .ok_or("deployment")?
        .value)
}

fn tag<'a>(instance: &'a Instance, key: &str) -> Option<&'a str> {
    instance
        .tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

fn is_gone(instance: &Instance) -> bool {
    matches!(
        instance.state().and_then(|s| s.name()),
        Some(InstanceStateName::Terminated | InstanceStateName::ShuttingDown)
    )
}

/// Runs a create plan with every step twice and checks, through the EC2
/// API, the instances and the launch template it leaves.
async fn create_and_check(instance_type: &str, image: fn(&Ec2Config) -> &str) -> TestResult {
    let fx = Fixture::new().await?;
    let steps = Arc::new(Twice(fx.steps()));
    let (run, status) = drive_create(&fx.store, steps, spec(instance_type)?).await?;
    let id = &run.job.deployment_id;
    assert_eq!(status, PlanStatus::Succeeded, "{instance_type}");
    assert_eq!(deployment_of(&run).await?.status, DeploymentStatus::Running);
    // The three master-eligible nodes bootstrap the cluster; their boot
    // script reads this parameter.
    let masters = fx
        .parameters
        .get(&format!("/floe/{id}/initial_master_nodes"))
        .await?
        .ok_or("no initial_master_nodes parameter in SSM")?;
    let mut masters: Vec<String> = masters.expose().split(',').map(String::from).collect();
    masters.sort();

    let instances = fx.tagged(id).await?;
    let running: Vec<&Instance> = instances
        .iter()
        .filter(|i| i.state().and_then(|s| s.name()) == Some(&InstanceStateName::Running))
        .collect();
    assert_eq!(
        (instances.len(), running.len()),
        (3, 3),
        "every step ran twice, yet each node must start once: {:?}",
        instances
            .iter()
            .map(|i| (i.instance_id(), i.state().and_then(|s| s.name())))
            .collect::<Vec<_>>()
    );
    let mut ids: Vec<String> = running
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_owned))
        .collect();
    ids.sort();
    assert_eq!(
        masters, ids,
        "the masters parameter names the running nodes"
    );
    for instance in &running {
        let what = instance.instance_id().unwrap_or("?");
        assert_eq!(
            instance.instance_type().map(|t| t.as_str()),
            Some(instance_type),
            "{what}"
        );
        assert_eq!(
            instance.image_id(),
            Some(image(&fx.config)),
            "{what} runs another architecture's image"
        );
        assert_eq!(tag(instance, TAG_NODE_GROUP), Some("hot"), "{what}");
        assert_eq!(tag(instance, TAG_PLAN), Some(run.job.plan_id.as_str()));
        assert_eq!(tag(instance, TAG_ORG), Some(ORG), "{what}");
    }
    let subnets: BTreeSet<&str> = running.iter().filter_map(|i| i.subnet_id()).collect();
    let configured: BTreeSet<&str> = fx.config.subnets.iter().map(String::as_str).collect();
    assert_eq!(
        subnets, configured,
        "zone_count 2 spreads over both subnets"
    );

    let templates = fx.templates(id).await?;
    assert_eq!(
        templates.len(),
        1,
        "one template per node group: {templates:?}"
    );
    let script = fx
        .user_data(templates.first().ok_or("no template")?)
        .await?;
    let lines: Vec<&str> = script.lines().collect();
    // m6g.xlarge and m5.xlarge both have 16 GiB: half of it is the heap.
    for expected in [
        "-Xms8192m",
        "-Xmx8192m",
        "node.roles: [master, data_hot, data_content]",
        "bootstrap.memory_lock: true",
        "thread_pool.snapshot.max: 8",
        &format!("cluster.name: \"{NAME}\""),
        "LimitMEMLOCK=infinity",
        &format!("s3.client.floe.endpoint: \"{}\"", fx.s3_endpoint),
        "s3.client.floe.protocol: \"http\"",
        "s3.client.floe.path_style_access: true",
        "s3.client.floe.region: \"us-east-1\"",
    ] {
        assert!(
            lines.contains(&expected),
            "{instance_type}: missing line {expected:?} in\n{script}"
        );
    }
    check_fetches_only_declared_parameters(&script, id)?;
    check_credentials_in_ssm(&fx, id).await?;

    // The repository was registered with the client whose settings the
    // nodes were given.
    assert!(
        deployment_of(&run).await?.spec.repository() == Some(REPOSITORY)
            && run
                .store
                .get_plan(ORG, id, &run.job.plan_id)
                .await?
                .ok_or("plan")?
                .value
                .steps
                .iter()
                .any(|s| s.step_id == "register-repository" && s.status == StepStatus::Succeeded)
    );
    Ok(())
}

/// The repository's keys wait in SSM as SecureStrings, readable by the
/// deployment's own nodes under its prefix, and so do the deployment's
/// certificate, key and password (the CA certificate is public).
async fn check_credentials_in_ssm(fx: &Fixture, deployment_id: &str) -> TestResult {
    for (name, secret, begins) in [
        ("tls/ca.crt", false, "-----BEGIN CERTIFICATE-----"),
        ("tls/node.crt", true, "-----BEGIN CERTIFICATE-----"),
        ("tls/node.key", true, "-----BEGIN PRIVATE KEY-----"),
        ("tls/ca.key", true, "-----BEGIN PRIVATE KEY-----"),
        ("security/elastic_password", true, ""),
    ] {
        let full = format!("/floe/{deployment_id}/{name}");
        let value = fx
            .parameters
            .get(&full)
            .await?
            .ok_or_else(|| format!("no {full} in SSM"))?;
        assert_eq!(value.is_secret(), secret, "{full}");
        assert!(value.expose().starts_with(begins), "{full}");
    }
    for (name, expected) in [
        ("access_key", ACCESS_KEY),
        ("secret_key", SECRET_KEY),
        ("session_token", SESSION_TOKEN),
    ] {
        let full = format!("/floe/{deployment_id}/repository/{name}");
        let value = fx
            .parameters
            .get(&full)
            .await?
            .ok_or_else(|| format!("no {full} in SSM"))?;
        assert!(value.is_secret(), "{full} is not a SecureString");
        assert_eq!(value.expose(), expected, "{full}");
    }
    Ok(())
}

/// The user data must hold no credential. A node reads the initial master
/// list (master-eligible nodes), the deployment's certificates and elastic
/// password, and the repository's three keys, each under the deployment's
/// own prefix; secrets go straight into the keystore or a 0640 file.
fn check_fetches_only_declared_parameters(script: &str, deployment_id: &str) -> TestResult {
    let prefix = format!("'/floe/{deployment_id}/");
    let mut fetched: Vec<&str> = script
        .match_indices(&prefix)
        .filter_map(|(at, _)| {
            let rest = &script[at + 1..];
            rest.find('\'').map(|end| &rest[..end])
        })
        .collect();
    fetched.sort_unstable();
    fetched.dedup();
    let declared: Vec<String> = [
        "initial_master_nodes",
        "repository/access_key",
        "repository/secret_key",
        "repository/session_token",
        "security/elastic_password",
        "tls/ca.crt",
        "tls/ca.key",
        "tls/http-ca.crt",
        "tls/node.crt",
        "tls/node.key",
    ]
    .iter()
    .map(|n| format!("/floe/{deployment_id}/{n}"))
    .collect();
    assert_eq!(fetched, declared, "parameters read:\n{script}");
    assert_eq!(
        script
            .matches("elasticsearch-keystore\" add --stdin --force s3.client.floe.")
            .count(),
        3,
        "the three keys go into the keystore:\n{script}"
    );
    for absent in [
        SECRET_KEY,
        SESSION_TOKEN,
        ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY",
        "BEGIN",
    ] {
        assert!(
            !script.contains(absent),
            "{absent:?} in plain text in the user data:\n{script}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn graviton_create_runs_every_step_twice_on_ec2() -> TestResult {
    create_and_check("m6g.xlarge", |c| &c.image_arm64).await
}

#[tokio::test]
async fn x86_create_runs_every_step_twice_on_ec2() -> TestResult {
    create_and_check("m5.xlarge", |c| &c.image_x86_64).await
}

/// A delete leaves nothing of the deployment in the account (issue 12,
/// defect 7): no instance, no parameter under its path (repository keys,
/// `elastic` password, node certificates and key, bootstrap), and no launch
/// template, whichever plan made it. Every step runs twice.
#[tokio::test]
async fn a_delete_leaves_no_parameter_and_no_template_on_aws() -> TestResult {
    let fx = Fixture::new().await?;
    let steps = Arc::new(Twice(fx.steps()));
    let (run, status) = drive_create(&fx.store, steps.clone(), spec("m6g.xlarge")?).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let id = run.job.deployment_id.clone();
    let before = fx.parameters_left(&id).await?;
    assert!(
        before.len() >= 8,
        "the create wrote its keys and bootstrap: {before:?}"
    );
    assert_eq!(fx.templates(&id).await?.len(), 1);
    // A template of an earlier plan that the record no longer names (a
    // start after a shutdown launches from a new one): found by its tag.
    let mut older = floe_compute::LaunchTemplateSpec {
        name: format!("floe-{id}-hot-0123456789ab"),
        instance_type: "m6g.xlarge".into(),
        arch: floe_domain::catalog::Arch::Arm64,
        user_data: "#!/bin/bash\n".into(),
        volume: floe_compute::Volume {
            size_gb: 100,
            volume_type: floe_domain::deployment::VolumeType::Gp3,
            iops: None,
            throughput: None,
        },
        tags: Default::default(),
        instance_profile: None,
    };
    older.tags.insert(TAG_DEPLOYMENT.into(), id.clone());
    fx.compute().ensure_launch_template(&older).await?;
    assert_eq!(fx.templates(&id).await?.len(), 2);

    // What DELETE does to a stopped deployment: a pending delete plan.
    let current = run
        .store
        .get_deployment(ORG, &id)
        .await?
        .ok_or("deployment")?;
    let plan = Plan::new(ORG, &id, PlanParams::Delete, "test", "tester", Utc::now());
    let mut next = current.value.clone();
    next.status = DeploymentStatus::Stopping;
    next.pending_plan = Some(plan.reference());
    run.store
        .replace_deployment(&next, &current, Some(&plan))
        .await?;
    let job = PlanJob {
        org: ORG.into(),
        deployment_id: id.clone(),
        plan_id: plan.id.clone(),
    };
    let status = support::run_to_end(&run.store, steps, &job).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    assert!(run.store.get_deployment(ORG, &id).await?.is_none());
    let instances = fx.tagged(&id).await?;
    assert!(
        instances.iter().all(is_gone),
        "a delete left instances running"
    );
    let left = fx.parameters_left(&id).await?;
    assert!(left.is_empty(), "a delete left parameters {left:?}");
    let templates = fx.templates(&id).await?;
    assert!(
        templates.is_empty(),
        "a delete left templates {templates:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_failure_after_any_create_step_leaves_nothing_on_ec2() -> TestResult {
    let fx = Fixture::new().await?;
    let layout = {
        let now = Utc::now();
        let plan = Plan::new(
            ORG,
            "x",
            PlanParams::Create(spec("m6g.xlarge")?),
            "t",
            "t",
            now,
        );
        let dummy = Deployment {
            last_drill: None,
            id: "x".into(),
            org: ORG.into(),
            spec: spec("m6g.xlarge")?,
            status: DeploymentStatus::Initializing,
            pending_plan: None,
            access: None,
            password_to_apply: None,
            endpoint: None,
            endpoint_moving_to: None,
            clone_source: None,
            health: None,
            created: now,
            updated: now,
            license: None,
        };
        fx.steps().layout(&plan, &dummy).map_err(|e| e.message)?
    };
    assert_eq!(
        layout,
        [
            "node-security",
            "repository-credentials",
            "node-identity",
            "template:hot",
            "launch:hot",
            "bootstrap-masters",
            "wait-running",
            "wait-joined",
            "register-repository",
            "license",
            "record-access"
        ]
    );

    for at in &layout {
        // Twice inside: every undo also runs twice, so deleting a deleted
        // template and terminating terminated instances must succeed on EC2.
        let steps = Arc::new(FailAfter {
            inner: Twice(fx.steps()),
            at: at.clone(),
        });
        let (run, status) = drive_create(&fx.store, steps, spec("m6g.xlarge")?).await?;
        let id = &run.job.deployment_id;
        assert_eq!(status, PlanStatus::Failed, "failure after {at}");
        let live: Vec<String> = fx
            .tagged(id)
            .await?
            .iter()
            .filter(|i| !is_gone(i))
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect();
        assert!(
            live.is_empty(),
            "failure after {at} left instances {live:?}"
        );
        let templates = fx.templates(id).await?;
        assert!(
            templates.is_empty(),
            "failure after {at} left templates {templates:?}"
        );
        let masters = fx
            .parameters
            .get(&format!("/floe/{id}/initial_master_nodes"))
            .await?;
        assert!(
            masters.is_none(),
            "failure after {at} left the masters parameter"
        );
        let left = fx.parameters_left(id).await?;
        assert!(
            left.is_empty(),
            "failure after {at} left parameters {left:?}"
        );
        for key in ["access_key", "secret_key", "session_token"] {
            let left = fx
                .parameters
                .get(&format!("/floe/{id}/repository/{key}"))
                .await?;
            assert!(
                left.is_none(),
                "failure after {at} left the {key} parameter"
            );
        }
        let plan = run
            .store
            .get_plan(ORG, id, &run.job.plan_id)
            .await?
            .ok_or("plan")?
            .value;
        assert!(
            plan.steps
                .iter()
                .all(|s| matches!(s.status, StepStatus::Undone | StepStatus::Pending)),
            "after {at}: {:?}",
            plan.steps
                .iter()
                .map(|s| (&s.step_id, s.status))
                .collect::<Vec<_>>()
        );
        let d = deployment_of(&run).await?;
        assert_eq!(
            (d.status, d.pending_plan),
            (DeploymentStatus::Stopped, None),
            "after {at}"
        );
    }
    Ok(())
}

fn sqs_at(endpoint: &str) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk_at(endpoint))
}

/// Messages SQS still holds: ready, in flight, or delayed.
async fn queued(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<u64, Box<dyn Error>> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(A::ApproximateNumberOfMessagesDelayed)
        .send()
        .await?;
    let mut total = 0;
    for name in [
        A::ApproximateNumberOfMessages,
        A::ApproximateNumberOfMessagesNotVisible,
        A::ApproximateNumberOfMessagesDelayed,
    ] {
        let value = out
            .attributes()
            .and_then(|a| a.get(&name))
            .ok_or_else(|| format!("moto did not report {name:?}"))?;
        total += value.parse::<u64>()?;
    }
    Ok(total)
}

/// The production wake-up path: the API's message and every re-queued
/// wait go through SQS on moto, and a worker loop receives, runs and
/// deletes them, as the Lambda event source mapping does. A create that
/// fails after its nodes are up unwinds, and once the worker has taken
/// what was in flight, nothing is left in the queue to wake it again.
#[tokio::test]
async fn a_failed_create_woken_through_sqs_leaves_no_message() -> TestResult {
    use floe_plans::WorkQueue as _;
    use floe_plans::engine::{EngineConfig, RunResult};
    let fx = Fixture::new().await?;
    let sqs = sqs_at(&endpoint()?);
    let url = sqs
        .create_queue()
        .queue_name(format!(
            "floe-work-{}",
            &floe_domain::names::new_resource_id()[16..]
        ))
        .send()
        .await?
        .queue_url()
        .ok_or("no queue url")?
        .to_owned();
    let queue = Arc::new(floe_queue_sqs::SqsQueue::new(
        &sdk_at(&endpoint()?),
        url.clone(),
    ));
    let steps = Arc::new(FailAfter {
        inner: fx.steps(),
        at: "wait-running".into(),
    });
    let run = new_create(&fx.store, spec("m6g.xlarge")?).await?;
    queue.enqueue(run.job.clone(), Duration::ZERO).await?;
    let engine = floe_plans::Engine::new(
        fx.store.clone(),
        queue.clone(),
        steps,
        "sqs-worker",
        // Each invocation yields after one step, so every step of the plan
        // and of its unwinding is woken by a message of its own.
        EngineConfig {
            backoff: Duration::from_millis(1),
            budget: Duration::from_millis(1),
            ..EngineConfig::default()
        },
    );

    let mut finished = None;
    let mut handled = 0;
    for _ in 0..120 {
        let received = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await?;
        for message in received.messages() {
            let job: PlanJob = serde_json::from_str(message.body().ok_or("empty message")?)?;
            assert_eq!(job, run.job, "only this plan's wake-ups");
            if let RunResult::Finished(status) = engine.run(&job).await? {
                finished = Some(status);
            }
            handled += 1;
            sqs.delete_message()
                .queue_url(&url)
                .receipt_handle(message.receipt_handle().ok_or("no receipt handle")?)
                .send()
                .await?;
        }
        if finished.is_some() && queued(&sqs, &url).await? == 0 {
            break;
        }
    }
    assert_eq!(finished, Some(PlanStatus::Failed));
    assert!(
        handled >= 10,
        "each of the 5 steps and their undos woke through SQS: {handled} messages"
    );
    assert_eq!(queued(&sqs, &url).await?, 0, "messages left in the queue");
    let live: Vec<Instance> = fx
        .tagged(&run.job.deployment_id)
        .await?
        .into_iter()
        .filter(|i| !is_gone(i))
        .collect();
    assert!(live.is_empty(), "instances left: {}", live.len());
    assert!(fx.templates(&run.job.deployment_id).await?.is_empty());
    Ok(())
}

/// A running source on EC2 (moto) with an S3 repository on moto and a
/// snapshot policy: `orders` gets 30 documents, a scheduled snapshot runs,
/// then 5 more documents arrive.
struct Source {
    run: Run,
    clusters: Arc<SimulatedClusters>,
    policy: String,
    snapshot: String,
}

async fn count(url: &str, index: &str) -> Result<Option<u64>, Box<dyn Error>> {
    let r = reqwest::get(format!("{url}/{index}/_count")).await?;
    if r.status() == 404 {
        return Ok(None);
    }
    let body: serde_json::Value = r.json().await?;
    Ok(body["count"].as_u64())
}

async fn write(url: &str, index: &str, docs: u32) -> TestResult {
    let http = reqwest::Client::new();
    for n in 0..docs {
        let r = http
            .post(format!("{url}/{index}/_doc"))
            .json(&json!({"n": n}))
            .send()
            .await?;
        assert_eq!(r.status(), 201);
    }
    Ok(())
}

async fn scheduled_source(fx: &Fixture) -> Result<Source, Box<dyn Error>> {
    let policy = support::policy(ORG, REPOSITORY);
    fx.store.create_policy(&policy).await?;
    let mut source = spec("m5.xlarge")?;
    source.snapshot = Some(floe_domain::deployment::SnapshotAttachment {
        repository: Some(REPOSITORY.into()),
        policies: vec![policy.id.clone()],
    });
    let clusters = fx.clusters();
    let (run, status) =
        drive_create(&fx.store, Arc::new(fx.steps_on(clusters.clone())), source).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let id = run.job.deployment_id.clone();
    let url = clusters.url(&id).await.ok_or("no source cluster")?;
    write(&url, "orders", 30).await?;
    let snapshotter = floe_snapshots::Snapshotter::new(fx.store.clone(), clusters.clone());
    let fired = snapshotter.run_scheduled(ORG, &id, &policy.id).await?;
    assert_eq!(
        fired.state,
        Some(floe_domain::snapshot::SnapshotState::Success),
        "{fired:?}"
    );
    let snapshot = fired.snapshot.ok_or("no snapshot name")?;
    write(&url, "orders", 5).await?;
    Ok(Source {
        run,
        clusters,
        policy: policy.id,
        snapshot,
    })
}

/// The clone's spec as the API leaves it after resolving
/// `__latest_success__`: on Graviton, from the x86 source.
fn clone_spec(source: &Source) -> Result<DeploymentSpec, Box<dyn Error>> {
    let mut clone = spec("m6g.xlarge")?;
    clone.name = "orders-copy".into();
    clone.snapshot = None;
    clone.restore_snapshot = Some(serde_json::from_value(json!({
        "source_deployment_id": source.run.job.deployment_id,
        "snapshot_name": "__latest_success__",
        "repository": REPOSITORY,
        "resolved_snapshot": source.snapshot,
    }))?);
    Ok(clone)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_on_ec2_reads_the_s3_repository_without_writing_to_it() -> TestResult {
    let fx = Fixture::new().await?;
    let source = scheduled_source(&fx).await?;
    let before = fx.objects().await?;
    assert!(
        !before.is_empty(),
        "the scheduled snapshot is in the bucket"
    );

    let (clone, status) = drive_create(
        &fx.store,
        Arc::new(fx.steps_on(source.clusters.clone())),
        clone_spec(&source)?,
    )
    .await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let clone_id = &clone.job.deployment_id;
    let clone_url = source
        .clusters
        .url(clone_id)
        .await
        .ok_or("no clone cluster")?;
    assert_eq!(
        count(&clone_url, "orders").await?,
        Some(30),
        "as at the snapshot"
    );
    let source_url = source
        .clusters
        .url(&source.run.job.deployment_id)
        .await
        .ok_or("no source cluster")?;
    assert_eq!(count(&source_url, "orders").await?, Some(35));
    for instance in fx.tagged(clone_id).await? {
        assert_eq!(
            instance.instance_type().map(|t| t.as_str()),
            Some("m6g.xlarge"),
            "the clone runs on Graviton"
        );
    }
    assert_eq!(
        fx.objects().await?,
        before,
        "the clone wrote nothing to the repository"
    );
    // The source keeps snapshotting into it while the clone exists.
    let snapshotter = floe_snapshots::Snapshotter::new(fx.store.clone(), source.clusters.clone());
    let again = snapshotter
        .run_scheduled(ORG, &source.run.job.deployment_id, &source.policy)
        .await?;
    assert_eq!(
        again.state,
        Some(floe_domain::snapshot::SnapshotState::Success),
        "{again:?}"
    );
    assert!(fx.objects().await?.len() > before.len());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_at_any_clone_step_leaves_nothing_of_the_clone_on_ec2() -> TestResult {
    let fx = Fixture::new().await?;
    let source = scheduled_source(&fx).await?;
    let source_id = source.run.job.deployment_id.clone();
    let live = |instances: Vec<Instance>| -> Vec<String> {
        instances
            .iter()
            .filter(|i| !is_gone(i))
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect()
    };
    let source_nodes = live(fx.tagged(&source_id).await?);
    let before = fx.objects().await?;
    let layout = [
        "node-security",
        "repository-credentials",
        "node-identity",
        "template:hot",
        "launch:hot",
        "bootstrap-masters",
        "wait-running",
        "wait-joined",
        "register-source",
        "license",
        "restore",
        "wait-restored",
        "record-access",
    ];
    for at in layout {
        let steps = Arc::new(FailAfter {
            inner: fx.steps_on(source.clusters.clone()),
            at: at.to_string(),
        });
        let (clone, status) = drive_create(&fx.store, steps, clone_spec(&source)?).await?;
        assert_eq!(status, PlanStatus::Failed, "failure after {at}");
        let id = &clone.job.deployment_id;
        let plan = clone
            .store
            .get_plan(ORG, id, &clone.job.plan_id)
            .await?
            .ok_or("plan")?
            .value;
        let steps: Vec<&str> = plan.steps.iter().map(|s| s.step_id.as_str()).collect();
        assert_eq!(steps, layout);
        assert!(
            live(fx.tagged(id).await?).is_empty(),
            "failure after {at} left instances"
        );
        assert!(
            fx.templates(id).await?.is_empty(),
            "failure after {at} left templates"
        );
        for key in [
            "initial_master_nodes",
            "repository/secret_key",
            "tls/node.key",
            "tls/ca.key",
            "security/elastic_password",
        ] {
            assert!(
                fx.parameters
                    .get(&format!("/floe/{id}/{key}"))
                    .await?
                    .is_none(),
                "failure after {at} left {key}"
            );
        }
    }
    assert_eq!(
        live(fx.tagged(&source_id).await?),
        source_nodes,
        "source untouched"
    );
    assert_eq!(fx.objects().await?, before, "repository untouched");
    Ok(())
}

/// Runs a plan of `params` on the deployment as the use cases would start
/// it (its status and pending plan set), to the end.
async fn drive_plan(
    store: &Store,
    steps: Arc<dyn Steps>,
    deployment_id: &str,
    params: PlanParams,
) -> Result<PlanStatus, Box<dyn Error>> {
    let current = store
        .get_deployment(ORG, deployment_id)
        .await?
        .ok_or("deployment")?;
    let plan = Plan::new(ORG, deployment_id, params, "test", "tester", Utc::now());
    let mut next = current.value.clone();
    next.status = floe_domain::plan::lifecycle::while_running(plan.kind());
    next.pending_plan = Some(plan.reference());
    store
        .replace_deployment(&next, &current, Some(&plan))
        .await?;
    let job = PlanJob {
        org: ORG.into(),
        deployment_id: deployment_id.into(),
        plan_id: plan.id.clone(),
    };
    support::run_to_end(store, steps, &job).await
}

/// The addresses of the deployment's running instances, sorted.
async fn running_addresses(
    fx: &Fixture,
    deployment_id: &str,
) -> Result<Vec<String>, Box<dyn Error>> {
    let mut ips: Vec<String> = fx
        .tagged(deployment_id)
        .await?
        .iter()
        .filter(|i| {
            i.state()
                .and_then(|s| s.name())
                .is_some_and(|n| *n == aws_sdk_ec2::types::InstanceStateName::Running)
        })
        .filter_map(|i| i.private_ip_address().map(str::to_owned))
        .collect();
    ips.sort();
    Ok(ips)
}

/// What the endpoint's name resolves to in the zone, read through Route 53
/// itself: moto resolves no DNS, so the records are what is checked.
async fn records_of(
    route53: &aws_sdk_route53::Client,
    zone: &str,
    host: &str,
) -> Result<Vec<String>, Box<dyn Error>> {
    let sets = route53
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await?;
    let mut ips: Vec<String> = sets
        .resource_record_sets()
        .iter()
        .filter(|s| s.name().trim_end_matches('.') == host)
        .flat_map(|s| s.resource_records().iter().map(|r| r.value().to_owned()))
        .collect();
    ips.sort();
    Ok(ips)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_name_follows_the_nodes_through_every_plan() -> TestResult {
    let fx = Fixture::new().await?;
    let route53 = aws_sdk_route53::Client::new(&fx.sdk);
    let domain = format!(
        "e{}.floe.internal",
        &floe_domain::names::new_resource_id()[20..]
    );
    let zone = route53
        .create_hosted_zone()
        .name(&domain)
        .caller_reference(floe_domain::names::new_resource_id())
        .hosted_zone_config(
            aws_sdk_route53::types::HostedZoneConfig::builder()
                .private_zone(true)
                .build(),
        )
        .vpc(
            aws_sdk_route53::types::Vpc::builder()
                .vpc_id("vpc-12345678")
                .vpc_region(aws_sdk_route53::types::VpcRegion::UsEast1)
                .build(),
        )
        .send()
        .await?
        .hosted_zone()
        .ok_or("no zone")?
        .id()
        .to_owned();
    let records = Arc::new(floe_records_route53::Route53Records::new(
        &fx.sdk,
        zone.clone(),
    ));
    let steps: Arc<dyn Steps> = Arc::new(fx.steps().with_records(records));

    // Create: the API names the endpoint when it records the deployment.
    let spec = spec("m6g.large")?;
    let plan = Plan::new(
        ORG,
        &floe_domain::names::new_resource_id(),
        PlanParams::Create(spec.clone()),
        "test",
        "tester",
        Utc::now(),
    );
    let host = format!("{}.{domain}", plan.deployment_id);
    let deployment = Deployment {
        endpoint: Some(host.clone()),
        ..Deployment::first_planned_by(&plan, spec.clone())
    };
    fx.store.create_deployment(&deployment, &plan, None).await?;
    let id = deployment.id.clone();
    let job = PlanJob {
        org: ORG.into(),
        deployment_id: id.clone(),
        plan_id: plan.id.clone(),
    };
    assert_eq!(
        support::run_to_end(&fx.store, steps.clone(), &job).await?,
        PlanStatus::Succeeded
    );
    let after_create = running_addresses(&fx, &id).await?;
    assert_eq!(after_create.len(), 3);
    assert_eq!(records_of(&route53, &zone, &host).await?, after_create);

    // A heal that replaces one stopped node: the name leaves it.
    let lost = fx
        .tagged(&id)
        .await?
        .into_iter()
        .find_map(|i| i.instance_id().map(str::to_owned))
        .ok_or("no instance")?;
    let zone_of_lost = fx
        .tagged(&id)
        .await?
        .iter()
        .find(|i| i.instance_id() == Some(lost.as_str()))
        .and_then(|i| {
            i.placement()
                .and_then(|p| p.availability_zone())
                .map(str::to_owned)
        })
        .ok_or("no zone")?;
    fx.client
        .stop_instances()
        .instance_ids(&lost)
        .send()
        .await?;
    let heal = PlanParams::Heal(floe_domain::plan::HealParams {
        spec: spec.clone(),
        replacements: vec![floe_domain::plan::Replacement {
            group: "hot".into(),
            zone: u32::from(zone_of_lost != "us-east-1a"),
            count: 1,
            lost: vec![lost.clone()],
        }],
        surplus: Vec::new(),
    });
    assert_eq!(
        drive_plan(&fx.store, steps.clone(), &id, heal).await?,
        PlanStatus::Succeeded
    );
    let after_heal = running_addresses(&fx, &id).await?;
    assert_eq!(after_heal.len(), 3, "{after_heal:?}");
    assert_eq!(records_of(&route53, &zone, &host).await?, after_heal);

    // An update that replaces every node (another instance type).
    let bigger = spec_with_type(&spec, "m6g.xlarge");
    assert_eq!(
        drive_plan(
            &fx.store,
            steps.clone(),
            &id,
            PlanParams::Update(bigger.clone())
        )
        .await?,
        PlanStatus::Succeeded
    );
    let after_update = running_addresses(&fx, &id).await?;
    assert_eq!(after_update.len(), 3, "{after_update:?}");
    assert!(after_update.iter().all(|ip| !after_heal.contains(ip)));
    assert_eq!(records_of(&route53, &zone, &host).await?, after_update);

    // Shutdown: no node, no record. Then the delete leaves none either.
    assert_eq!(
        drive_plan(
            &fx.store,
            steps.clone(),
            &id,
            PlanParams::Shutdown(Default::default())
        )
        .await?,
        PlanStatus::Succeeded
    );
    assert!(records_of(&route53, &zone, &host).await?.is_empty());
    assert_eq!(
        drive_plan(&fx.store, steps, &id, PlanParams::Delete).await?,
        PlanStatus::Succeeded
    );
    assert!(records_of(&route53, &zone, &host).await?.is_empty());
    assert!(fx.store.get_deployment(ORG, &id).await?.is_none());
    Ok(())
}

fn spec_with_type(spec: &DeploymentSpec, instance_type: &str) -> DeploymentSpec {
    let mut s = spec.clone();
    for g in &mut s.node_groups {
        g.instance_type = instance_type.into();
    }
    s
}
