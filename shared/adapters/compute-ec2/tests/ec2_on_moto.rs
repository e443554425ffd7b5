//! The EC2 adapter against moto's EC2 (127.0.0.1, started by scripts/test.sh),
//! through the real `aws-sdk-ec2` client. Every request the adapter sends is
//! recorded by the SDK configuration's HTTP client, so the tests can say which
//! calls were (and were not) made. Each test builds its own VPC, subnets and security group,
//! and names everything uniquely, so the tests share one moto safely.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::Client;
use aws_sdk_ec2::config::http::HttpRequest;
use aws_sdk_ec2::error::BoxError;
use aws_sdk_ec2::types::{ArchitectureValues, Filter, LaunchTemplateHttpTokensState};
use aws_smithy_runtime_api::client::http::{
    HttpClient as _, HttpConnector, HttpConnectorFuture, SharedHttpConnector, http_client_fn,
};
use base64::Engine as _;
use floe_compute::{
    CheckStatus, Compute, ComputeError, InstanceState, LaunchRequest, LaunchTemplateSpec,
    TAG_DEPLOYMENT, TAG_NODE_GROUP, Volume,
};
use floe_compute_ec2::{
    DATA_VOLUME_DEVICE, EC2_OPERATIONS, Ec2Compute, Ec2Config, TAG_CLIENT_TOKEN,
};
use floe_domain::catalog::Arch;
use floe_domain::deployment::VolumeType;

type TestResult = Result<(), Box<dyn Error>>;

/// Collects the `Action` of every request a client sends (EC2's query
/// protocol puts it in the form body).
#[derive(Debug, Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

impl Recorder {
    fn actions(&self) -> Vec<String> {
        self.0.lock().map(|a| a.clone()).unwrap_or_default()
    }

    fn clear(&self) {
        if let Ok(mut actions) = self.0.lock() {
            actions.clear();
        }
    }
}

impl Recorder {
    fn record(&self, request: &HttpRequest) -> Result<(), BoxError> {
        let body = std::str::from_utf8(request.body().bytes().unwrap_or_default())?;
        let action = body
            .split('&')
            .find_map(|pair| pair.strip_prefix("Action="))
            .unwrap_or("<none>")
            .to_owned();
        self.0
            .lock()
            .map_err(|_| "recorder lock poisoned")?
            .push(action);
        Ok(())
    }
}

fn endpoint() -> Result<String, Box<dyn Error>> {
    Ok(std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?)
}

/// Sends each request on to moto once the recorder has seen it.
#[derive(Debug)]
struct Recording {
    inner: SharedHttpConnector,
    recorder: Recorder,
}

impl HttpConnector for Recording {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        match self.recorder.record(&request) {
            Ok(()) => self.inner.call(request),
            Err(e) => HttpConnectorFuture::ready(Err(
                aws_smithy_runtime_api::client::result::ConnectorError::other(e, None),
            )),
        }
    }
}

/// The SDK configuration the adapter is built from: moto's endpoint, and
/// with a recorder, an HTTP client that records every request.
fn sdk_at(endpoint: &str, recorder: Option<&Recorder>) -> aws_config::SdkConfig {
    let mut sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_ec2::config::SharedCredentialsProvider::new(
            aws_sdk_ec2::config::Credentials::new("test", "test", None, None, "floe-tests"),
        ));
    if let Some(recorder) = recorder {
        let recorder = recorder.clone();
        let inner = aws_smithy_http_client::Builder::new().build_http();
        sdk = sdk.http_client(http_client_fn(move |settings, components| {
            SharedHttpConnector::new(Recording {
                inner: inner.http_connector(settings, components),
                recorder: recorder.clone(),
            })
        }));
    }
    sdk.build()
}

fn client_at(endpoint: &str) -> Client {
    Client::new(&sdk_at(endpoint, None))
}

/// What one test runs against: a fresh network on moto, one image per
/// architecture from moto's catalogue, and a setup client that records
/// nothing.
struct Fixture {
    setup: Client,
    endpoint: String,
    config: Ec2Config,
    zones: Vec<String>,
    /// Unique per test, so that tag lookups see only this test's instances.
    run: String,
}

impl Fixture {
    async fn new() -> Result<Fixture, Box<dyn Error>> {
        let endpoint = endpoint()?;
        let setup = client_at(&endpoint);
        let run = uuid::Uuid::new_v4().simple().to_string();
        let image_arm64 = image_of(&setup, "arm64").await?;
        let image_x86_64 = image_of(&setup, "x86_64").await?;
        let vpc = setup.create_vpc().cidr_block("10.40.0.0/16").send().await?;
        let vpc_id = vpc
            .vpc()
            .and_then(|v| v.vpc_id())
            .ok_or("no vpc id")?
            .to_owned();
        let zones = vec!["us-east-1a".to_owned(), "us-east-1b".to_owned()];
        let mut subnets = Vec::new();
        for (i, zone) in zones.iter().enumerate() {
            let subnet = setup
                .create_subnet()
                .vpc_id(&vpc_id)
                .cidr_block(format!("10.40.{}.0/24", i + 1))
                .availability_zone(zone)
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
        let group = setup
            .create_security_group()
            .group_name(format!("floe-nodes-{run}"))
            .description("Elasticsearch nodes")
            .vpc_id(&vpc_id)
            .send()
            .await?;
        let group_id = group.group_id().ok_or("no group id")?.to_owned();
        Ok(Fixture {
            setup,
            config: Ec2Config {
                image_arm64,
                image_x86_64,
                subnets,
                security_groups: vec![group_id],
                instance_profile: Some(
                    "arn:aws:iam::123456789012:instance-profile/floe-es-node".to_owned(),
                ),
                key_name: None,
            },
            endpoint,
            zones,
            run,
        })
    }

    fn compute(&self, recorder: &Recorder) -> Ec2Compute {
        self.compute_with(recorder, self.config.clone())
    }

    fn compute_with(&self, recorder: &Recorder, config: Ec2Config) -> Ec2Compute {
        Ec2Compute::new(&sdk_at(&self.endpoint, Some(recorder)), config)
    }

    fn deployment(&self) -> String {
        format!("dep-{}", self.run)
    }

    fn tags(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (TAG_DEPLOYMENT.to_owned(), self.deployment()),
            (TAG_NODE_GROUP.to_owned(), "hot".to_owned()),
        ])
    }

    fn spec(&self, name: &str, instance_type: &str, arch: Arch) -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            name: format!("floe-{}-{name}", self.run),
            instance_type: instance_type.to_owned(),
            arch,
            user_data:
                "#!/bin/bash\necho 'node.name: es-1' >> /etc/elasticsearch/elasticsearch.yml\n"
                    .to_owned(),
            volume: Volume {
                size_gb: 100,
                volume_type: VolumeType::Gp3,
                iops: Some(4000),
                throughput: Some(250),
            },
            tags: self.tags(),
            instance_profile: None,
        }
    }

    fn launch(&self, template: &str, count: u32, zone: usize, token: &str) -> LaunchRequest {
        LaunchRequest {
            template_name: template.to_owned(),
            count,
            zone,
            client_token: format!("{token}-{}", self.run),
            tags: self.tags(),
        }
    }

    async fn describe(
        &self,
        ids: &[String],
    ) -> Result<Vec<aws_sdk_ec2::types::Instance>, Box<dyn Error>> {
        let out = self
            .setup
            .describe_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await?;
        Ok(out
            .reservations()
            .iter()
            .flat_map(|r| r.instances().iter().cloned())
            .collect())
    }
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

fn failure_type(err: &ComputeError) -> &str {
    match err {
        ComputeError::Permanent { failure_type, .. } => failure_type,
        ComputeError::Transient { .. } => "<transient>",
        ComputeError::InsufficientCapacity { .. } => "<capacity>",
    }
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// Each test checks the adapter called nothing outside the published list.
fn assert_declared(recorder: &Recorder) {
    let declared: BTreeSet<&str> = EC2_OPERATIONS.iter().copied().collect();
    for action in recorder.actions() {
        assert!(
            declared.contains(action.as_str()),
            "{action} is called but not in EC2_OPERATIONS"
        );
    }
}

#[tokio::test]
async fn template_carries_the_requested_settings_and_is_ensured_once() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("settings", "m6i.large", Arch::X86_64);

    let id = compute.ensure_launch_template(&spec).await?;
    assert!(id.starts_with("lt-"), "{id}");
    assert_eq!(
        recorder.actions(),
        ["DescribeImages", "CreateLaunchTemplate"]
    );

    let versions = fx
        .setup
        .describe_launch_template_versions()
        .launch_template_name(&spec.name)
        .versions("$Latest")
        .send()
        .await?;
    let version = versions
        .launch_template_versions()
        .first()
        .ok_or("no version")?;
    assert_eq!(version.launch_template_id(), Some(id.as_str()));
    let data = version.launch_template_data().ok_or("no template data")?;
    assert_eq!(data.instance_type().map(|t| t.as_str()), Some("m6i.large"));
    assert_eq!(data.image_id(), Some(fx.config.image_x86_64.as_str()));
    assert_eq!(
        data.metadata_options().and_then(|m| m.http_tokens()),
        Some(&LaunchTemplateHttpTokensState::Required)
    );
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(data.user_data().ok_or("no user data")?)?;
    assert_eq!(String::from_utf8(user_data)?, spec.user_data);
    assert_eq!(
        data.security_group_ids(),
        fx.config.security_groups.as_slice()
    );
    assert_eq!(
        data.iam_instance_profile().and_then(|p| p.arn()),
        fx.config.instance_profile.as_deref()
    );

    let mapping = data
        .block_device_mappings()
        .first()
        .ok_or("no block device mapping")?;
    assert_eq!(mapping.device_name(), Some(DATA_VOLUME_DEVICE));
    let ebs = mapping.ebs().ok_or("no ebs")?;
    assert_eq!(ebs.volume_size(), Some(100));
    assert_eq!(ebs.volume_type().map(|t| t.as_str()), Some("gp3"));
    assert_eq!(ebs.iops(), Some(4000));
    assert_eq!(ebs.throughput(), Some(250));
    assert_eq!(ebs.encrypted(), Some(true));
    assert_eq!(ebs.delete_on_termination(), Some(true));

    // moto also copies the template's own tags into its data (as resource
    // type `launch-template`), which EC2 does not; look only for ours.
    let tagged: BTreeSet<&str> = data
        .tag_specifications()
        .iter()
        .filter(|t| {
            t.tags()
                .iter()
                .any(|t| t.key() == Some(TAG_DEPLOYMENT) && t.value() == Some(&fx.deployment()))
        })
        .filter_map(|t| t.resource_type().map(|r| r.as_str()))
        .collect();
    assert!(
        tagged.contains("instance") && tagged.contains("volume"),
        "{tagged:?}"
    );

    let templates = fx
        .setup
        .describe_launch_templates()
        .launch_template_names(&spec.name)
        .send()
        .await?;
    let template = templates
        .launch_templates()
        .first()
        .ok_or("template not listed")?;
    let template_tags: BTreeMap<&str, &str> = template
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?, t.value()?)))
        .collect();
    assert_eq!(template_tags.get(TAG_NODE_GROUP), Some(&"hot"));

    // Again, as after a crash: the same template, and the image is not
    // looked up a second time.
    recorder.clear();
    assert_eq!(compute.ensure_launch_template(&spec).await?, id);
    assert_eq!(
        recorder.actions(),
        ["CreateLaunchTemplate", "DescribeLaunchTemplates"]
    );
    assert_declared(&recorder);
    Ok(())
}

#[tokio::test]
async fn an_instance_type_of_the_other_architecture_is_refused_without_a_call() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);

    let graviton_as_x86 = fx.spec("mismatch", "m6g.large", Arch::X86_64);
    let err = compute
        .ensure_launch_template(&graviton_as_x86)
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(failure_type(&err), "architecture_mismatch", "{err}");

    let x86_as_graviton = fx.spec("mismatch2", "m5.large", Arch::Arm64);
    let err = compute
        .ensure_launch_template(&x86_as_graviton)
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(failure_type(&err), "architecture_mismatch", "{err}");

    let unknown = fx.spec("unknown", "m99.colossal", Arch::X86_64);
    let err = compute
        .ensure_launch_template(&unknown)
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(failure_type(&err), "architecture_mismatch", "{err}");

    assert_eq!(
        recorder.actions(),
        Vec::<String>::new(),
        "a refused template must not reach EC2"
    );
    Ok(())
}

#[tokio::test]
async fn an_image_of_the_wrong_architecture_is_refused() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let config = Ec2Config {
        image_arm64: fx.config.image_x86_64.clone(),
        ..fx.config.clone()
    };
    let compute = fx.compute_with(&recorder, config);
    let spec = fx.spec("wrong-image", "m6g.large", Arch::Arm64);

    let err = compute
        .ensure_launch_template(&spec)
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(failure_type(&err), "image_architecture_mismatch", "{err}");
    let err = compute
        .ensure_launch_template(&spec)
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(failure_type(&err), "image_architecture_mismatch", "{err}");
    // One look at the image, cached; no template was created.
    assert_eq!(recorder.actions(), ["DescribeImages"]);

    // An image that does not exist at all.
    let config = Ec2Config {
        image_x86_64: "ami-00000000000000000".to_owned(),
        ..fx.config.clone()
    };
    let compute = fx.compute_with(&recorder, config);
    let err = compute
        .ensure_launch_template(&fx.spec("no-image", "m5.large", Arch::X86_64))
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(failure_type(&err), "invalid_image", "{err}");
    Ok(())
}

#[tokio::test]
async fn launch_lands_in_the_zone_subnet_and_a_retry_starts_nothing_new() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("launch", "m5.large", Arch::X86_64);
    compute.ensure_launch_template(&spec).await?;

    let request = fx.launch(&spec.name, 3, 1, "hot-1");
    let ids = compute.launch(&request).await?;
    assert_eq!(ids.len(), 3, "{ids:?}");

    let described = fx.describe(&ids).await?;
    assert_eq!(described.len(), 3);
    for instance in &described {
        assert_eq!(instance.subnet_id(), Some(fx.config.subnets[1].as_str()));
        assert_eq!(
            instance.instance_type().map(|t| t.as_str()),
            Some("m5.large")
        );
        assert_eq!(instance.image_id(), Some(fx.config.image_x86_64.as_str()));
        let tags: BTreeMap<&str, &str> = instance
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?, t.value()?)))
            .collect();
        assert_eq!(tags.get(TAG_DEPLOYMENT), Some(&fx.deployment().as_str()));
        assert_eq!(tags.get(TAG_NODE_GROUP), Some(&"hot"));
        assert_eq!(
            tags.get(TAG_CLIENT_TOKEN),
            Some(&request.client_token.as_str())
        );
    }

    // The data volume of each instance, from the template, tagged by the launch.
    let volumes = fx
        .setup
        .describe_volumes()
        .filters(
            Filter::builder()
                .name("attachment.instance-id")
                .set_values(Some(ids.clone()))
                .build(),
        )
        .send()
        .await?;
    let data_volumes: Vec<_> = volumes
        .volumes()
        .iter()
        .filter(|v| {
            v.attachments()
                .iter()
                .any(|a| a.device() == Some(DATA_VOLUME_DEVICE))
        })
        .collect();
    assert_eq!(data_volumes.len(), 3);
    for volume in data_volumes {
        assert_eq!(volume.size(), Some(100));
        assert_eq!(volume.encrypted(), Some(true));
        assert!(
            volume
                .tags()
                .iter()
                .any(|t| t.key() == Some(TAG_DEPLOYMENT) && t.value() == Some(&fx.deployment())),
            "volume not tagged: {volume:?}"
        );
    }

    // The same step again, as after a crash between the call and recording
    // its result: the same instances, nothing more.
    let again = compute.launch(&request).await?;
    assert_eq!(sorted(again), sorted(ids.clone()));
    let listed = compute.instances(&fx.deployment()).await?;
    assert_eq!(listed.len(), 3, "{listed:?}");
    for instance in &listed {
        assert!(ids.contains(&instance.id));
        assert!(
            matches!(
                instance.state,
                InstanceState::Running | InstanceState::Pending
            ),
            "{instance:?}"
        );
        assert_eq!(instance.zone, fx.zones[1]);
        assert_eq!(instance.instance_type, "m5.large");
        assert!(
            instance
                .private_ip
                .as_deref()
                .is_some_and(|ip| ip.starts_with("10.40.2.")),
            "{instance:?}"
        );
        assert_eq!(
            instance.tags.get(TAG_NODE_GROUP).map(String::as_str),
            Some("hot")
        );
    }

    // Zone indexes wrap around the configured subnets. As a filter
    // wildcard this token would match the first launch's; it is a new one.
    let wrapped = compute.launch(&fx.launch(&spec.name, 1, 2, "hot*")).await?;
    assert_eq!(wrapped.len(), 1, "{wrapped:?}");
    assert!(!ids.contains(&wrapped[0]));
    let described = fx.describe(&wrapped).await?;
    assert_eq!(
        described.first().and_then(|i| i.subnet_id()),
        Some(fx.config.subnets[0].as_str())
    );
    assert_eq!(compute.instances(&fx.deployment()).await?.len(), 4);

    // Nothing to start is not a call.
    recorder.clear();
    assert_eq!(
        compute.launch(&fx.launch(&spec.name, 0, 0, "none")).await?,
        Vec::<String>::new()
    );
    assert_eq!(recorder.actions(), Vec::<String>::new());
    assert_declared(&recorder);
    Ok(())
}

#[tokio::test]
async fn a_graviton_type_launches_with_the_arm64_image() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("graviton", "m6g.xlarge", Arch::Arm64);
    compute.ensure_launch_template(&spec).await?;
    let ids = compute
        .launch(&fx.launch(&spec.name, 1, 0, "graviton"))
        .await?;
    let described = fx.describe(&ids).await?;
    let instance = described.first().ok_or("not launched")?;
    assert_eq!(
        instance.instance_type().map(|t| t.as_str()),
        Some("m6g.xlarge")
    );
    assert_eq!(instance.image_id(), Some(fx.config.image_arm64.as_str()));
    assert_eq!(instance.architecture(), Some(&ArchitectureValues::Arm64));
    assert_eq!(instance.subnet_id(), Some(fx.config.subnets[0].as_str()));
    assert_declared(&recorder);
    Ok(())
}

#[tokio::test]
async fn terminate_is_idempotent_and_ignores_unknown_instances() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("terminate", "c6i.large", Arch::X86_64);
    compute.ensure_launch_template(&spec).await?;
    let first = compute.launch(&fx.launch(&spec.name, 2, 0, "a")).await?;
    let second = compute.launch(&fx.launch(&spec.name, 1, 1, "b")).await?;

    compute.terminate(&first).await?;
    let states: BTreeMap<String, InstanceState> = compute
        .instances(&fx.deployment())
        .await?
        .into_iter()
        .map(|i| (i.id, i.state))
        .collect();
    assert_eq!(
        states.len(),
        3,
        "terminated instances are still listed: {states:?}"
    );
    for id in &first {
        assert!(
            matches!(
                states.get(id),
                Some(InstanceState::Terminated | InstanceState::ShuttingDown)
            ),
            "{id}: {states:?}"
        );
    }
    assert_eq!(states.get(&second[0]), Some(&InstanceState::Running));

    // Again; then with an id EC2 never had and a malformed one next to a
    // live instance, which must still be terminated.
    compute.terminate(&first).await?;
    let mut mixed = vec![
        "i-0123456789abcdef0".to_owned(),
        "not-an-instance".to_owned(),
    ];
    mixed.extend(second.iter().cloned());
    compute.terminate(&mixed).await?;
    let described = fx.describe(&second).await?;
    let state = described
        .first()
        .and_then(|i| i.state())
        .and_then(|s| s.name())
        .map(|n| n.as_str());
    assert!(
        matches!(state, Some("terminated" | "shutting-down")),
        "{state:?}"
    );
    compute
        .terminate(&["i-0fedcba9876543210".to_owned()])
        .await?;

    // Nothing to terminate is not a call.
    recorder.clear();
    compute.terminate(&[]).await?;
    assert_eq!(recorder.actions(), Vec::<String>::new());
    Ok(())
}

/// moto reports `ok` for the checks of a running instance and nothing for
/// one that is stopped or terminated, as EC2 does without
/// `IncludeAllInstances`; what a failing check reads as is the mapping's
/// unit test (`only_a_failing_check_is_impaired`), since moto fails none.
#[tokio::test]
async fn status_checks_are_read_for_running_instances_only() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("status", "c6i.large", Arch::X86_64);
    compute.ensure_launch_template(&spec).await?;
    let ids = sorted(compute.launch(&fx.launch(&spec.name, 3, 0, "s")).await?);
    let [running, stopped, terminated] = ids.as_slice() else {
        return Err(format!("three instances, not {ids:?}").into());
    };

    let checks = compute.status_checks(&ids).await?;
    let mut seen: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
    seen.sort();
    assert_eq!(seen, ids.iter().map(String::as_str).collect::<Vec<_>>());
    for c in &checks {
        assert_eq!(
            (c.system, c.instance),
            (CheckStatus::Ok, CheckStatus::Ok),
            "{c:?}"
        );
        assert!(!c.impaired(), "{c:?}");
    }

    // Someone stops one in the console; another is terminated.
    fx.setup
        .stop_instances()
        .instance_ids(stopped)
        .send()
        .await?;
    compute.terminate(std::slice::from_ref(terminated)).await?;
    let states: BTreeMap<String, InstanceState> = compute
        .instances(&fx.deployment())
        .await?
        .into_iter()
        .map(|i| (i.id, i.state))
        .collect();
    assert!(
        matches!(
            states.get(stopped),
            Some(InstanceState::Stopped | InstanceState::Stopping)
        ),
        "{states:?}"
    );
    let checks = compute.status_checks(&ids).await?;
    assert_eq!(
        checks.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        [running.as_str()],
        "{checks:?}"
    );
    // A duplicate id is asked once.
    let twice = vec![running.clone(), running.clone()];
    assert_eq!(compute.status_checks(&twice).await?.len(), 1);

    // An id EC2 does not know is a reason to look again later.
    let unknown = compute
        .status_checks(&["i-0123456789abcdef0".to_owned()])
        .await;
    assert!(
        matches!(unknown, Err(ComputeError::Transient { .. })),
        "{unknown:?}"
    );

    // Nothing to ask is not a call.
    recorder.clear();
    assert_eq!(compute.status_checks(&[]).await?, Vec::new());
    assert_eq!(recorder.actions(), Vec::<String>::new());
    assert_declared(&recorder);
    compute.terminate(&ids).await?;
    Ok(())
}

#[tokio::test]
async fn deleting_a_template_twice_succeeds() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("delete", "r6g.large", Arch::Arm64);
    let id = compute.ensure_launch_template(&spec).await?;
    // Another deployment's template is not listed with this one's.
    let mut other = fx.spec("other", "r6g.large", Arch::Arm64);
    other.tags.insert(
        TAG_DEPLOYMENT.to_owned(),
        format!("{}-other", fx.deployment()),
    );
    compute.ensure_launch_template(&other).await?;
    assert_eq!(
        compute.launch_templates(&fx.deployment()).await?,
        std::slice::from_ref(&spec.name),
        "found by the deployment's tag"
    );

    compute.delete_launch_template(&spec.name).await?;
    compute.delete_launch_template(&spec.name).await?;
    compute
        .delete_launch_template(&format!("floe-{}-never-created", fx.run))
        .await?;
    let all = fx.setup.describe_launch_templates().send().await?;
    assert!(
        all.launch_templates()
            .iter()
            .all(|t| t.launch_template_id() != Some(id.as_str())),
        "template {id} still exists"
    );

    assert!(compute.launch_templates(&fx.deployment()).await?.is_empty());
    compute.delete_launch_template(&other.name).await?;

    // A new template of the same name is a new template.
    let recreated = compute.ensure_launch_template(&spec).await?;
    assert_ne!(recreated, id);
    assert_declared(&recorder);
    Ok(())
}

#[tokio::test]
async fn launch_failures_are_classified() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);

    // The template step has not run (or EC2 does not show it yet): retry.
    let err = compute
        .launch(&fx.launch(&format!("floe-{}-missing", fx.run), 1, 0, "missing"))
        .await
        .err()
        .ok_or("launched without a template")?;
    assert!(matches!(err, ComputeError::Transient { .. }), "{err}");

    // A subnet that does not exist is the operator's configuration.
    let config = Ec2Config {
        subnets: vec!["subnet-0000000000000dead".to_owned()],
        ..fx.config.clone()
    };
    let broken = fx.compute_with(&recorder, config);
    let spec = fx.spec("bad-subnet", "m5.large", Arch::X86_64);
    broken.ensure_launch_template(&spec).await?;
    let err = broken
        .launch(&fx.launch(&spec.name, 1, 0, "bad-subnet"))
        .await
        .err()
        .ok_or("launched into a missing subnet")?;
    assert_eq!(failure_type(&err), "invalid_configuration", "{err}");

    // Refused before any call: no subnets, no usable token.
    recorder.clear();
    let no_subnets = fx.compute_with(
        &recorder,
        Ec2Config {
            subnets: Vec::new(),
            ..fx.config.clone()
        },
    );
    let err = no_subnets
        .launch(&fx.launch(&spec.name, 1, 0, "x"))
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(failure_type(&err), "invalid_configuration", "{err}");
    let mut no_token = fx.launch(&spec.name, 1, 0, "x");
    no_token.client_token.clear();
    let err = compute.launch(&no_token).await.err().ok_or("accepted")?;
    assert_eq!(failure_type(&err), "invalid_request", "{err}");
    assert_eq!(recorder.actions(), Vec::<String>::new());
    assert_declared(&recorder);
    Ok(())
}

#[tokio::test]
async fn an_unreachable_endpoint_is_transient() -> TestResult {
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let compute = Ec2Compute::new(
        &sdk_at(&format!("http://127.0.0.1:{port}"), None),
        Ec2Config {
            image_x86_64: "ami-12345678".to_owned(),
            subnets: vec!["subnet-1".to_owned()],
            ..Ec2Config::default()
        },
    );
    let err = compute.instances("dep").await.err().ok_or("answered")?;
    assert!(matches!(err, ComputeError::Transient { .. }), "{err}");
    let err = compute
        .terminate(&["i-1".to_owned()])
        .await
        .err()
        .ok_or("answered")?;
    assert!(matches!(err, ComputeError::Transient { .. }), "{err}");
    Ok(())
}

/// One node group's whole life, checking that the adapter calls exactly the
/// operations it declares for the IAM policy.
/// The instances of many deployments are one `DescribeInstances` by tag
/// (the health check's survey of a page), each deployment given its own;
/// more deployments than one filter takes are listed in parts.
#[tokio::test]
async fn instances_of_many_deployments_are_listed_together() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("many", "m5.large", Arch::X86_64);
    compute.ensure_launch_template(&spec).await?;
    let deployments: Vec<String> = (0..3).map(|n| format!("{}-{n}", fx.deployment())).collect();
    for (n, d) in deployments.iter().enumerate() {
        let mut request = fx.launch(&spec.name, 2, 0, &format!("many-{n}"));
        request.tags.insert(TAG_DEPLOYMENT.to_owned(), d.clone());
        compute.launch(&request).await?;
    }
    recorder.clear();
    let mut asked = deployments.clone();
    asked.push(format!("{}-none", fx.deployment()));
    // A wildcard in a name matches nothing but itself.
    asked.push(format!("{}-*", fx.deployment()));
    let found = compute.instances_of(&asked).await?;
    assert_eq!(recorder.actions(), ["DescribeInstances"]);
    for d in &deployments {
        let mine = found.get(d).ok_or("listed")?;
        assert_eq!(mine.len(), 2, "{d}: {mine:?}");
        assert!(mine.iter().all(|i| i.tags.get(TAG_DEPLOYMENT) == Some(d)));
    }
    assert_eq!(found.get(&asked[3]).map(Vec::len), Some(0));
    assert_eq!(found.get(&asked[4]).map(Vec::len), Some(0));

    recorder.clear();
    let many: Vec<String> = (0..250)
        .map(|n| format!("{}-x{n}", fx.deployment()))
        .collect();
    let none = compute.instances_of(&many).await?;
    assert_eq!(none.len(), 250);
    assert_eq!(
        recorder.actions(),
        ["DescribeInstances", "DescribeInstances"]
    );
    assert_eq!(floe_compute::describe_calls(250, 0, 0), (2, 0));
    Ok(())
}

#[tokio::test]
async fn a_lifecycle_calls_exactly_the_declared_operations() -> TestResult {
    let fx = Fixture::new().await?;
    let recorder = Recorder::default();
    let compute = fx.compute(&recorder);
    let spec = fx.spec("lifecycle", "r6g.large", Arch::Arm64);
    compute.ensure_launch_template(&spec).await?;
    compute.ensure_launch_template(&spec).await?;
    let ids = compute.launch(&fx.launch(&spec.name, 2, 0, "life")).await?;
    assert_eq!(compute.instances(&fx.deployment()).await?.len(), 2);
    assert_eq!(compute.status_checks(&ids).await?.len(), 2);
    let mut gone = ids.clone();
    gone.push("i-0123456789abcdef0".to_owned());
    compute.terminate(&gone).await?;
    assert_eq!(
        compute.launch_templates(&fx.deployment()).await?,
        std::slice::from_ref(&spec.name)
    );
    compute.delete_launch_template(&spec.name).await?;

    let called: BTreeSet<String> = recorder.actions().into_iter().collect();
    let declared: BTreeSet<String> = EC2_OPERATIONS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(called, declared);
    Ok(())
}
