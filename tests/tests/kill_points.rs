//! A worker killed mid-step (issue 12, "the suites that find the next
//! ones"). The real `floe-worker` binary runs under the Lambda runtime
//! emulator on moto with EC2 compute (`FLOE_COMPUTE=ec2`), its AWS calls
//! going through the fault proxy (floe_tests::fault_proxy). A create plan is
//! first run once without a kill, which lists every AWS call it makes, in
//! order; then, for each kill point chosen from that list, a fresh
//! deployment's create plan runs until that call: the proxy forwards it to
//! moto (its effect happens) and keeps moto's answer, and the test sends
//! the worker SIGKILL while it waits for it, the worst moment. For the
//! calls that record a step's end, the call is instead held before moto
//! sees it: the step's effect happened, its record did not.
//!
//! A fresh worker process then takes over as Lambda would: the plan's lease
//! lapses, the one-minute sweep re-queues it, SQS delivers the killed job
//! again, and the plan runs to its end. Then it must have succeeded, with
//! exactly one instance per node and one launch template in EC2 (counted by
//! the deployment's tag, in every state: nothing started twice and
//! terminated), the bootstrap parameter naming exactly those instances, the
//! node certificates, CA and password consistent between SSM, the record
//! and what the create answered, and every node joined.
//!
//! How the nodes are reached: the worker reaches a cluster as in
//! production, at each running instance's private address on the nodes'
//! port (`floe_clusters::NodeAddresses`, HTTPS pinned to the deployment's CA
//! from SSM). The VPC the test builds on moto is `127.N.0.0/16`, so moto
//! gives the instances loopback addresses, and a simulated cluster per
//! deployment (floe_clusters_sim::SimulatedClusters over moto's EC2 and
//! SSM) listens on each running instance's address with the certificate
//! the plan stored, as a booted node would. Nothing in production changes,
//! and nothing leaves loopback.
//!
//! Time: a killed worker's lease lasts 180 s and a waiting step's wake-up
//! comes 10 s later through SQS. The test does not sleep through them: when
//! no message is due it moves the plan's lease expiry and wake-up time into
//! the past in the record (what the passing of that time does), and runs
//! the sweep, which re-queues the plan as it would then.
//!
//! The run prints the kill points run, by step, and what each found.

use floe_auth::Role;
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::plan::{Plan, PlanStatus, StepStatus};
use floe_store::Store;
use floe_tests::fault_proxy::{Fault, FaultProxy, Rule, Withheld};
use floe_tests::lambda_emulator::{
    Function, Moto, Outcome, Running, SqsRecord, http_api_event, sqs_event,
};
use floe_tests::moto_server::MotoServer;
use floe_tests::{AUDIENCE, DEPLOYMENTS, ISSUER, REPOSITORIES};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

const ORG: &str = "acme";
const JWT_SECRET: &str = "kill-point-test-secret-0123456789abcdef";
const PARAMETER_PREFIX: &str = "/floe";
const REPOSITORY: &str = "kill-repo";
/// The boundary every node role is created with (moto does not look it up).
const NODE_BOUNDARY: &str = "arn:aws:iam::123456789012:policy/floe-node-boundary";
/// The node group of every deployment here: three masters over three zones,
/// so a create launches three times (one client token per zone).
const NODES: usize = 3;
/// Steps that make no AWS call in the worker as deployed, so no call can be
/// withheld in their middle (none: `node-identity` makes the deployment's
/// IAM role and instance profile).
const CALLLESS_STEPS: &[&str] = &[];
/// Invocations one plan may take, killed or not, before it counts as one
/// that never finishes.
const MAX_ROUNDS: usize = 80;

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

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

/// What every kill point shares: moto, a VPC of loopback addresses, the
/// images, the bucket.
struct Account {
    /// A moto of the suite's own (floe_tests::moto_server says why).
    _moto: MotoServer,
    endpoint: String,
    sdk: aws_config::SdkConfig,
    ec2: aws_sdk_ec2::Client,
    sqs: aws_sdk_sqs::Client,
    ssm: aws_sdk_ssm::Client,
    ec2_config: floe_compute_ec2::Ec2Config,
    bucket: String,
}

impl Account {
    async fn new(suite: &str) -> TestResult<Account> {
        let moto = MotoServer::start(suite)?;
        let endpoint = moto.endpoint().to_owned();
        let sdk = sdk_at(&endpoint);
        let ec2 = aws_sdk_ec2::Client::new(&sdk);
        let image = |arch: &'static str| {
            let ec2 = ec2.clone();
            async move {
                let out = ec2
                    .describe_images()
                    .filters(
                        aws_sdk_ec2::types::Filter::builder()
                            .name("architecture")
                            .values(arch)
                            .build(),
                    )
                    .send()
                    .await?;
                out.images()
                    .iter()
                    .find(|i| i.architecture().map(|a| a.as_str()) == Some(arch))
                    .and_then(|i| i.image_id())
                    .map(str::to_owned)
                    .ok_or_else(|| format!("moto has no {arch} image").into())
            }
        };
        let image_arm64: TestResult<String> = image("arm64").await;
        let image_x86_64: TestResult<String> = image("x86_64").await;
        // Loopback addresses for the instances: moto takes any CIDR, and
        // every 127.0.0.0/8 address is this machine's.
        let octet = 100 + (std::process::id() % 150);
        let vpc = ec2
            .create_vpc()
            .cidr_block(format!("127.{octet}.0.0/16"))
            .send()
            .await?;
        let vpc_id = vpc
            .vpc()
            .and_then(|v| v.vpc_id())
            .ok_or("no vpc id")?
            .to_owned();
        let mut subnets = Vec::new();
        for (i, zone) in ["us-east-1a", "us-east-1b", "us-east-1c"]
            .iter()
            .enumerate()
        {
            let subnet = ec2
                .create_subnet()
                .vpc_id(&vpc_id)
                .cidr_block(format!("127.{octet}.{}.0/24", i + 1))
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
        let group = ec2
            .create_security_group()
            .group_name(unique("floe-kill-nodes"))
            .description("Elasticsearch nodes")
            .vpc_id(&vpc_id)
            .send()
            .await?;
        let group_id = group.group_id().ok_or("no group id")?.to_owned();
        let bucket = format!("floe-kill-{}", std::process::id());
        // Moto's S3 takes an unsigned bucket creation.
        let created = reqwest::Client::builder()
            .no_proxy()
            .build()?
            .put(format!("{endpoint}/{bucket}"))
            .send()
            .await?;
        if !created.status().is_success() {
            return Err(format!("creating bucket {bucket}: {}", created.status()).into());
        }
        Ok(Account {
            _moto: moto,
            ec2_config: floe_compute_ec2::Ec2Config {
                image_arm64: image_arm64?,
                image_x86_64: image_x86_64?,
                subnets,
                security_groups: vec![group_id],
                instance_profile: None,
                key_name: None,
            },
            sqs: aws_sdk_sqs::Client::new(&sdk),
            ssm: aws_sdk_ssm::Client::new(&sdk),
            ec2,
            sdk,
            endpoint,
            bucket,
        })
    }

    fn moto_host(&self) -> &str {
        self.endpoint.trim_start_matches("http://")
    }
}

/// The simulated nodes of one deployment: they boot (listen on their
/// instances' addresses, with the certificates in SSM) when the test looks,
/// between the worker's invocations.
struct Nodes {
    clusters: floe_clusters_sim::SimulatedClusters,
}

impl Nodes {
    fn new(account: &Account, port: u16) -> Nodes {
        let compute: Arc<dyn floe_compute::Compute> = Arc::new(floe_compute_ec2::Ec2Compute::new(
            &account.sdk,
            account.ec2_config.clone(),
        ));
        let parameters = Arc::new(floe_parameters_ssm::SsmParameters::new(
            &account.sdk,
            floe_parameters_ssm::SsmParametersConfig { kms_key_id: None },
        ));
        let clusters = floe_clusters_sim::SimulatedClusters::new(
            compute,
            floe_clusters_sim::SimulatedClustersConfig {
                s3: Some(floe_elastic_sim::S3Access {
                    endpoint_url: Some(account.endpoint.clone()),
                    region: "us-east-1".into(),
                    access_key: "test".into(),
                    secret_key: floe_domain::secret::SecretString::new("test"),
                    force_path_style: true,
                }),
                ..Default::default()
            },
        )
        .with_http_port(port)
        .with_parameters(parameters, PARAMETER_PREFIX);
        Nodes { clusters }
    }

    /// The running instances' nodes are up and in the cluster. Before they
    /// run (or before their certificates exist) there is nothing to boot.
    async fn boot(&self, deployment: &Deployment) {
        use floe_clusters::Clusters as _;
        let _ = self.clusters.client(deployment, &[]).await;
    }
}

/// One deployment's world: its own table, queue, api and simulated nodes,
/// so that no other kill point's plans or health checks touch it.
struct Rig<'a> {
    account: &'a Account,
    table: String,
    queue_url: String,
    key_arn: String,
    port: u16,
    store: Store,
    nodes: Nodes,
    job: Value,
    deployment_id: String,
    /// The `elastic` password the create answered with, when it did.
    password: Option<String>,
}

fn free_port() -> TestResult<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl<'a> Rig<'a> {
    /// A repository with keys, and a deployment created through the api
    /// function; its create job waits in the queue.
    async fn new(account: &'a Account) -> TestResult<Rig<'a>> {
        let moto = Moto::new(&account.endpoint);
        let queue_url = moto.create_queue(&unique("floe-kill")).await?;
        let key_arn = moto.create_kms_key().await?;
        let table = unique("floe-kill");
        let mut api = Function::built("floe-api")
            .timeout(Duration::from_secs(20))
            .env("FLOE_STORE", format!("dynamodb://{table}"))
            .env("FLOE_CREATE_TABLE", "true")
            .env("FLOE_QUEUE_URL", &queue_url)
            .env("FLOE_KMS_KEY_ID", &key_arn)
            .env("FLOE_JWT_SECRET", JWT_SECRET)
            // The repository's endpoint is moto's S3, on loopback.
            .env("FLOE_ALLOW_PRIVATE_ENDPOINTS", "true")
            .env("AWS_ENDPOINT_URL", &account.endpoint)
            .start()
            .await?;
        let token = floe_auth::issue_hs256(
            JWT_SECRET.as_bytes(),
            ISSUER,
            AUDIENCE,
            "kill-point-test",
            ORG,
            &[Role::PlatformAdmin],
            Duration::from_secs(3600),
        )?;
        let repository = json!({"type": "s3", "settings": {
            "bucket": account.bucket, "base_path": unique("kill"),
            "endpoint": account.moto_host(), "protocol": "http", "path_style_access": true,
            "access_key": "AKIAKILLPOINTTEST", "secret_key": "kill-point-secret-key-0123"}});
        let put = call_until_served(
            &mut api,
            &token,
            "PUT",
            &format!("{REPOSITORIES}/{REPOSITORY}"),
            &repository,
        )
        .await?;
        if !(200..300).contains(&put.0) {
            return Err(format!("PUT repository: {} {}", put.0, put.1).into());
        }
        let spec = floe_tests::deployment(&unique("kill"), Some(REPOSITORY), &[]);
        let created = call_until_served(&mut api, &token, "POST", DEPLOYMENTS, &spec).await?;
        if created.0 != 201 {
            return Err(format!("POST deployment: {} {}", created.0, created.1).into());
        }
        let deployment_id = created.1["id"]
            .as_str()
            .ok_or_else(|| format!("no id in {}", created.1))?
            .to_owned();
        let password = find_password(&created.1);
        let messages = receive(&account.sqs, &queue_url).await?;
        let [message] = messages.as_slice() else {
            return Err(format!("one create job expected, got {messages:?}").into());
        };
        let job: Value = serde_json::from_str(&message.body)?;
        let store = Store::new(Arc::new(floe_store_dynamo::DynamoBackend::new(
            &account.sdk,
            &table,
        )));
        let port = free_port()?;
        Ok(Rig {
            account,
            table,
            queue_url,
            key_arn,
            port,
            store,
            nodes: Nodes::new(account, port),
            job,
            deployment_id,
            password,
        })
    }

    fn plan_id(&self) -> &str {
        self.job["plan_id"].as_str().unwrap_or_default()
    }

    /// The worker as the template configures it, on EC2, its AWS calls
    /// through `proxy`.
    async fn worker(&self, proxy: &FaultProxy) -> TestResult<Running> {
        let c = &self.account.ec2_config;
        Ok(Function::built("floe-worker")
            .memory_mb(512)
            .timeout(Duration::from_secs(120))
            .env("FLOE_STORE", format!("dynamodb://{}", self.table))
            .env("FLOE_KMS_KEY_ID", &self.key_arn)
            .env("FLOE_QUEUE_URL", &self.queue_url)
            .env("FLOE_COMPUTE", "ec2")
            .env("FLOE_EC2_IMAGE_ARM64", &c.image_arm64)
            .env("FLOE_EC2_IMAGE_X86_64", &c.image_x86_64)
            .env("FLOE_EC2_SUBNETS", c.subnets.join(","))
            .env("FLOE_EC2_SECURITY_GROUPS", c.security_groups.join(","))
            .env("FLOE_NODE_PERMISSIONS_BOUNDARY", NODE_BOUNDARY)
            .env("FLOE_ES_PORT", self.port.to_string())
            .env("FLOE_PARAMETER_PREFIX", PARAMETER_PREFIX)
            .env("AWS_ENDPOINT_URL", proxy.url())
            .start()
            .await?)
    }

    async fn plan(&self) -> TestResult<(Plan, u64)> {
        let pv = self
            .store
            .get_plan(ORG, &self.deployment_id, self.plan_id())
            .await?
            .ok_or("the plan is gone")?;
        Ok((pv.value, pv.version))
    }

    async fn deployment(&self) -> TestResult<Deployment> {
        Ok(self
            .store
            .get_deployment(ORG, &self.deployment_id)
            .await?
            .ok_or("the deployment is gone")?
            .value)
    }

    /// What waiting out the killed worker's lease and the plan's next
    /// wake-up does to the record: both lie in the past.
    async fn time_passes(&self) -> TestResult {
        let (mut plan, version) = self.plan().await?;
        if plan.status.is_finished() {
            return Ok(());
        }
        let past = chrono::Utc::now() - chrono::Duration::seconds(1);
        let mut changed = false;
        if let Some(lease) = &mut plan.lease
            && lease.expires > past
        {
            lease.expires = past;
            changed = true;
        }
        if plan.wake_at.is_some_and(|w| w > past) {
            plan.wake_at = Some(past);
            changed = true;
        }
        if changed {
            self.store.update_plan(&plan, version).await?;
        }
        Ok(())
    }
}

/// One api request's `(status, body)`, asked again while the api answers
/// 503: moto, serving the suite's kill points one request at a time on a
/// loaded machine, can be slower than the api's bound on one AWS call.
/// Both set-up requests are idempotent (a PUT, and a POST with a key).
async fn call_until_served(
    api: &mut Running,
    token: &str,
    method: &str,
    path: &str,
    body: &Value,
) -> TestResult<(u16, Value)> {
    let key = unique("kill-setup");
    let auth = format!("Bearer {token}");
    let text = body.to_string();
    let mut answered = (0, Value::Null);
    for _ in 0..5 {
        let event = http_api_event(
            method,
            path,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
                ("idempotency-key", &key),
            ],
            Some(&text),
        );
        let answer = api.invoke(&event).await?.http();
        answered = (
            answer.status,
            serde_json::from_str(&answer.body).unwrap_or(Value::Null),
        );
        if answer.status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(answered)
}

/// The `password` field anywhere in a create's answer.
fn find_password(v: &Value) -> Option<String> {
    match v {
        Value::Object(map) => map.iter().find_map(|(k, v)| match (k.as_str(), v) {
            ("password", Value::String(p)) => Some(p.clone()),
            _ => find_password(v),
        }),
        Value::Array(items) => items.iter().find_map(find_password),
        _ => None,
    }
}

/// The messages due now, taken off the queue as the event source mapping
/// takes a batch (it deletes them once the worker answered; a job that
/// failed is found again by the sweep).
async fn receive(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> TestResult<Vec<SqsRecord>> {
    let out = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(0)
        .send()
        .await?;
    let mut records = Vec::new();
    for m in out.messages() {
        if let Some(handle) = m.receipt_handle() {
            sqs.delete_message()
                .queue_url(queue_url)
                .receipt_handle(handle)
                .send()
                .await?;
        }
        records.push(SqsRecord {
            message_id: m.message_id().unwrap_or_default().to_owned(),
            receipt_handle: m.receipt_handle().unwrap_or_default().to_owned(),
            body: m.body().unwrap_or_default().to_owned(),
        });
    }
    Ok(records)
}

fn sigkill(pid: u32) -> TestResult {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()?;
    if !status.success() {
        return Err(format!("kill -KILL {pid}: {status}").into());
    }
    Ok(())
}

/// Where a kill point struck.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct KillPoint {
    service: String,
    operation: String,
    /// Which call of that operation, counted from the plan's first
    /// invocation.
    nth: u32,
    /// Forwarded first (its effect happened) or held before moto saw it.
    forwarded: bool,
}

impl KillPoint {
    fn name(&self) -> String {
        format!(
            "{}/{} #{} ({})",
            self.service,
            self.operation,
            self.nth,
            if self.forwarded {
                "after its effect"
            } else {
                "before it"
            }
        )
    }
}

/// What one drive of a plan came to.
enum Drive {
    Finished,
    /// The worker was killed at this call, in this step (`None`: between
    /// steps, or in the sweep).
    Killed {
        withheld: Withheld,
        step: Option<String>,
        batch: Vec<SqsRecord>,
    },
}

/// One invocation, killed when the proxy reports a withheld call.
async fn invoke_or_kill(
    worker: &mut Running,
    proxy: &FaultProxy,
    event: &Value,
    errors: Errors,
) -> TestResult<Option<Withheld>> {
    let pid = worker.pid().ok_or("the worker has no process")?;
    let invocation = worker.invoke(event);
    tokio::pin!(invocation);
    let withheld = tokio::select! {
        outcome = &mut invocation => {
            let outcome = outcome?;
            if let Outcome::Response { .. } = outcome.outcome {
                return Ok(None);
            }
            // Under injected faults an invocation may fail as a whole (a
            // sweep that cannot read the table): Lambda runs the next one.
            if errors == Errors::Tolerated && !matches!(outcome.outcome, Outcome::Exited(_)) {
                return Ok(None);
            }
            return Err(format!("the worker did not answer: {}", outcome.describe()).into());
        }
        held = proxy.next_withheld(Duration::from_secs(600)) => held.ok_or("nothing withheld")?,
    };
    sigkill(pid)?;
    let ended = invocation.await?;
    match ended.outcome {
        Outcome::Exited(status) => {
            use std::os::unix::process::ExitStatusExt as _;
            if status.signal() != Some(9) {
                return Err(format!("the worker ended otherwise: {status}").into());
            }
        }
        _ => return Err(format!("the worker outlived SIGKILL: {}", ended.describe()).into()),
    }
    Ok(Some(withheld))
}

/// Whether an invocation that fails as a whole ends the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Errors {
    Refused,
    Tolerated,
}

/// Runs the plan: the jobs due are delivered; when none is, time passes
/// and the sweep runs. Stops at the end of the plan or at a kill.
async fn drive(rig: &Rig<'_>, worker: &mut Running, proxy: &FaultProxy) -> TestResult<Drive> {
    drive_with(rig, worker, proxy, Errors::Refused).await
}

async fn drive_with(
    rig: &Rig<'_>,
    worker: &mut Running,
    proxy: &FaultProxy,
    errors: Errors,
) -> TestResult<Drive> {
    for _ in 0..MAX_ROUNDS {
        rig.nodes.boot(&rig.deployment().await?).await;
        let batch = receive(&rig.account.sqs, &rig.queue_url).await?;
        let event = if batch.is_empty() {
            if rig.plan().await?.0.status.is_finished() {
                return Ok(Drive::Finished);
            }
            rig.time_passes().await?;
            json!({"sweep": true})
        } else {
            sqs_event("floe-kill", &batch)
        };
        let r = invoke_or_kill(worker, proxy, &event, errors).await?;
        if let Some(withheld) = r {
            let (plan, _) = rig.plan().await?;
            // The step the dead worker was in: marked running, not ended.
            let step = plan
                .steps
                .get(plan.cursor)
                .filter(|s| s.status == StepStatus::Running)
                .map(|s| s.step_id.clone());
            return Ok(Drive::Killed {
                withheld,
                step,
                batch,
            });
        }
    }
    let (plan, _) = rig.plan().await?;
    Err(format!(
        "the plan did not finish in {MAX_ROUNDS} invocations: {}",
        serde_json::to_string(&plan)?
    )
    .into())
}

/// The AWS calls of one create plan without a kill, in order.
async fn dry_run(account: &Account) -> TestResult<(Vec<String>, Vec<String>)> {
    let rig = Rig::new(account).await?;
    let proxy = FaultProxy::start(&account.endpoint).await?;
    let mut worker = rig.worker(&proxy).await?;
    match drive(&rig, &mut worker, &proxy).await? {
        Drive::Finished => {}
        Drive::Killed { .. } => return Err("killed without a kill point".into()),
    }
    let problems = check(&rig).await?;
    if !problems.is_empty() {
        return Err(format!("the plan without a kill: {}", problems.join("; ")).into());
    }
    let steps = rig
        .plan()
        .await?
        .0
        .steps
        .iter()
        .map(|s| s.step_id.clone())
        .collect();
    Ok((proxy.log(), steps))
}

/// Reads: calls that change nothing, so a kill after one is the same as a
/// kill before the next call.
fn is_read(operation: &str) -> bool {
    [
        "Describe", "Get", "List", "Receive", "Query", "Scan", "BatchGet", "Decrypt",
    ]
    .iter()
    .any(|p| operation.starts_with(p))
}

/// The kill points of a create plan's calls (`service/operation`, in
/// order). A kill after a call and a kill before the next one differ only
/// in what the dead worker knew, so one of each pair is enough:
/// - after each call with an effect (a parameter written, a template or an
///   instance made, a password sealed, a job queued), but of a run of the
///   same operation, only the first and the last (a step's first write and
///   its last one, its effect complete but not recorded);
/// - in the middle of a step that only reads and waits: after its first
///   EC2 read (the first one after a record write, when no call with an
///   effect follows it before the next record write);
/// - before a record write that follows a read: a step whose effect was on
///   the cluster (registering the repository) or that found what it waited
///   for, ended but not recorded;
/// - after the plan's first record write (its steps laid out, its lease
///   taken) and after its last (the plan's end written, the answer lost).
///
/// The record writes that mark a step running or record a step's end right
/// after another record write are left out: killing there is killing
/// between two steps, which the points around them already do.
fn kill_points(log: &[String]) -> Vec<KillPoint> {
    let calls: Vec<(&str, &str)> = log.iter().filter_map(|c| c.split_once('/')).collect();
    let mut seen: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let mut points = Vec::new();
    let last_write = calls.iter().rposition(|(s, _)| *s == "dynamodb");
    let first_write = calls.iter().position(|(s, _)| *s == "dynamodb");
    for (i, &(service, operation)) in calls.iter().enumerate() {
        let n = seen.entry((service, operation)).or_insert(0);
        *n += 1;
        let point = |forwarded| KillPoint {
            service: service.to_owned(),
            operation: operation.to_owned(),
            nth: *n,
            forwarded,
        };
        let previous = i.checked_sub(1).map(|p| calls[p]);
        let next = calls.get(i + 1).copied();
        if service == "dynamodb" {
            if is_read(operation) {
                continue;
            }
            if previous.is_some_and(|(s, o)| s != "dynamodb" && is_read(o)) {
                points.push(point(false));
            }
            if Some(i) == first_write || Some(i) == last_write {
                points.push(point(true));
            }
        } else if is_read(operation) {
            // Only for a step with no effect of its own to be killed after.
            let effect_follows = calls[i + 1..]
                .iter()
                .take_while(|(s, _)| *s != "dynamodb")
                .any(|(_, o)| !is_read(o));
            if service == "ec2" && previous.is_some_and(|(s, _)| s == "dynamodb") && !effect_follows
            {
                points.push(point(true));
            }
        } else {
            let starts_run = previous != Some((service, operation));
            let ends_run = next != Some((service, operation));
            if starts_run || ends_run {
                points.push(point(true));
            }
        }
    }
    points
}

/// Everything a finished create must have left, and nothing twice.
async fn check(rig: &Rig<'_>) -> TestResult<Vec<String>> {
    let mut problems = Vec::new();
    let (plan, _) = rig.plan().await?;
    let deployment = rig.deployment().await?;
    if plan.status != PlanStatus::Succeeded {
        problems.push(format!(
            "the plan ended {} ({:?})",
            plan.status.as_str(),
            plan.error
        ));
    }
    if deployment.status != DeploymentStatus::Running {
        problems.push(format!("the deployment is {}", deployment.status.as_str()));
    }
    let id = &rig.deployment_id;
    let tag = |key: &str| {
        aws_sdk_ec2::types::Filter::builder()
            .name(format!("tag:{key}"))
            .values(id)
            .build()
    };
    // Every instance ever started for the deployment, terminated or not.
    let mut instances: Vec<(String, String, String)> = Vec::new();
    let mut pages = rig
        .account
        .ec2
        .describe_instances()
        .filters(tag(floe_compute::TAG_DEPLOYMENT))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for r in page?.reservations() {
            for i in r.instances() {
                let state = i
                    .state()
                    .and_then(|s| s.name())
                    .map(|n| n.as_str().to_owned())
                    .unwrap_or_default();
                let launch = i
                    .tags()
                    .iter()
                    .find(|t| t.key() == Some(floe_compute::TAG_LAUNCH))
                    .and_then(|t| t.value())
                    .unwrap_or_default()
                    .to_owned();
                instances.push((
                    i.instance_id().unwrap_or_default().to_owned(),
                    state,
                    launch,
                ));
            }
        }
    }
    if instances.len() != NODES || instances.iter().any(|(_, s, _)| s != "running") {
        problems.push(format!(
            "{} instances were started, {NODES} expected, all running: {instances:?}",
            instances.len()
        ));
    }
    let launches: BTreeSet<&str> = instances.iter().map(|(_, _, l)| l.as_str()).collect();
    if launches.len() != instances.len() {
        problems.push(format!("a launch started twice: {instances:?}"));
    }
    let ids: BTreeSet<String> = instances.iter().map(|(i, _, _)| i.clone()).collect();
    let templates = rig
        .account
        .ec2
        .describe_launch_templates()
        .filters(tag(floe_compute::TAG_DEPLOYMENT))
        .send()
        .await?;
    let names: Vec<&str> = templates
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name())
        .collect();
    if names.len() != 1 {
        problems.push(format!("{} launch templates: {names:?}", names.len()));
    }
    // The parameters: the set a create with repository keys writes, each
    // consistent with the others and the record.
    let path = floe_compute::parameters::deployment_path(PARAMETER_PREFIX, id);
    let mut parameters: BTreeMap<String, (String, i64)> = BTreeMap::new();
    let mut pages = rig
        .account
        .ssm
        .get_parameters_by_path()
        .path(&path)
        .recursive(true)
        .with_decryption(true)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for p in page?.parameters() {
            let name = p.name().unwrap_or_default();
            let name = name.strip_prefix(&format!("{path}/")).unwrap_or(name);
            parameters.insert(
                name.to_owned(),
                (p.value().unwrap_or_default().to_owned(), p.version()),
            );
        }
    }
    use floe_compute::parameters as names_of;
    let expected: BTreeSet<&str> = [
        names_of::TLS_CA_CERT,
        names_of::TLS_CA_KEY,
        names_of::TLS_NODE_CERT,
        names_of::TLS_NODE_KEY,
        names_of::ELASTIC_PASSWORD,
        names_of::INITIAL_MASTER_NODES,
        names_of::REPOSITORY_ACCESS_KEY,
        names_of::REPOSITORY_SECRET_KEY,
    ]
    .into_iter()
    .collect();
    let found: BTreeSet<&str> = parameters.keys().map(String::as_str).collect();
    if found != expected {
        problems.push(format!("parameters {found:?}, expected {expected:?}"));
    }
    let value = |name: &str| parameters.get(name).map(|(v, _)| v.as_str());
    let masters: BTreeSet<String> = value(names_of::INITIAL_MASTER_NODES)
        .unwrap_or_default()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("i-"))
        .map(str::to_owned)
        .collect();
    if masters != ids {
        problems.push(format!(
            "the initial masters {masters:?} are not the instances {ids:?}"
        ));
    }
    if let (Some(answered), Some(stored)) = (&rig.password, value(names_of::ELASTIC_PASSWORD))
        && answered != stored
    {
        problems.push("the stored elastic password is not the one the create answered".into());
    }
    match &deployment.access {
        Some(access) => {
            if Some(access.ca_cert_pem.as_str()) != value(names_of::TLS_CA_CERT) {
                problems.push("the record's CA is not the one in SSM".into());
            }
            let recorded: BTreeSet<String> = access.nodes.iter().map(|n| n.name.clone()).collect();
            if recorded != ids {
                problems.push(format!(
                    "the record names nodes {recorded:?}, the instances are {ids:?}"
                ));
            }
        }
        None => problems.push("the record has no access".into()),
    }
    let joined: BTreeSet<String> = rig
        .nodes
        .clusters
        .node_names(id)
        .await
        .into_iter()
        .collect();
    if joined != ids {
        problems.push(format!(
            "the cluster's nodes {joined:?} are not the instances {ids:?}"
        ));
    }
    Ok(problems)
}

/// What one kill point came to.
struct Verdict {
    point: KillPoint,
    /// The step the worker died in (`None`: between steps or in a sweep;
    /// `Some("(not reached)")`: the plan ended before that call).
    step: Option<String>,
    invocations_after: usize,
    problems: Vec<String>,
}

async fn run_kill_point(account: &Account, point: &KillPoint) -> TestResult<Verdict> {
    let rig = Rig::new(account).await?;
    let proxy = FaultProxy::start(&account.endpoint).await?;
    let fault = if point.forwarded {
        Fault::AnswerWithheld
    } else {
        Fault::RequestWithheld
    };
    proxy.add(
        Rule::new(&point.service, fault)
            .operation(&point.operation)
            .nth(point.nth),
    );
    let mut worker = rig.worker(&proxy).await?;
    let (step, batch) = match drive(&rig, &mut worker, &proxy).await? {
        Drive::Finished => {
            return Ok(Verdict {
                point: point.clone(),
                step: Some("(not reached)".into()),
                invocations_after: 0,
                problems: Vec::new(),
            });
        }
        Drive::Killed {
            withheld,
            step,
            batch,
        } => {
            if withheld.operation != point.operation || withheld.nth != point.nth {
                return Err(format!("killed at {withheld:?}, not at {}", point.name()).into());
            }
            (step, batch)
        }
    };
    drop(worker);
    proxy.clear();
    // A fresh process, as Lambda starts one: the lease lapses, the sweep
    // finds the plan, and SQS delivers the killed job again too.
    let mut worker = rig.worker(&proxy).await?;
    let mut invocations = 0;
    rig.time_passes().await?;
    let swept = worker.invoke(&json!({"sweep": true})).await?;
    invocations += 1;
    let requeued = swept.response_json()["requeued"].as_u64().unwrap_or(0);
    if !batch.is_empty() {
        worker.invoke(&sqs_event("floe-kill", &batch)).await?;
        invocations += 1;
    }
    let mut problems = Vec::new();
    let plan_was_live = !rig.plan().await?.0.status.is_finished();
    if step.is_some() && requeued == 0 && plan_was_live && batch.is_empty() {
        problems.push("the sweep did not re-queue the plan the killed worker held".into());
    }
    match drive(&rig, &mut worker, &proxy).await? {
        Drive::Finished => {}
        Drive::Killed { .. } => return Err("killed with no rule left".into()),
    }
    problems.extend(check(&rig).await?);
    Ok(Verdict {
        point: point.clone(),
        step,
        invocations_after: invocations,
        problems,
    })
}

async fn timed(account: &Account, point: &KillPoint) -> TestResult<(Verdict, Duration)> {
    let started = Instant::now();
    let verdict = run_kill_point(account, point)
        .await
        .map_err(|e| format!("{}: {e}", point.name()))?;
    Ok((verdict, started.elapsed()))
}

/// Every kill point of a create plan: the plan finishes, and everything it
/// made exists once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_plan_killed_at_each_call_finishes_and_makes_everything_once() -> TestResult {
    let started = Instant::now();
    let account = Account::new("kill_points").await?;
    let (log, steps) = dry_run(&account).await?;
    let points = kill_points(&log);
    println!(
        "kill_points: the create plan made {} AWS calls over steps {steps:?}; {} kill points",
        log.len(),
        points.len()
    );
    let mut verdicts = Vec::new();
    // Two at a time: each kill point has its own table, queue, proxy and
    // processes, and much of its time is spent waiting on moto.
    for pair in points.chunks(2) {
        let (a, b) = match pair {
            [a, b] => {
                let (a, b) = tokio::join!(timed(&account, a), timed(&account, b));
                (a?, Some(b?))
            }
            [a] => (timed(&account, a).await?, None),
            _ => continue,
        };
        for (verdict, took) in std::iter::once(a).chain(b) {
            println!(
                "kill_points: {} -> step {} ({took:?}): {}",
                verdict.point.name(),
                verdict.step.as_deref().unwrap_or("(between steps)"),
                if verdict.problems.is_empty() {
                    "finished, everything once".to_owned()
                } else {
                    verdict.problems.join("; ")
                }
            );
            verdicts.push(verdict);
        }
    }
    let mut by_step: BTreeMap<String, usize> = BTreeMap::new();
    for v in &verdicts {
        *by_step
            .entry(v.step.clone().unwrap_or_else(|| "(between steps)".into()))
            .or_default() += 1;
    }
    let killed_in: BTreeSet<&str> = verdicts.iter().filter_map(|v| v.step.as_deref()).collect();
    let unkilled: Vec<&String> = steps
        .iter()
        .filter(|s| !killed_in.contains(s.as_str()) && !CALLLESS_STEPS.contains(&s.as_str()))
        .collect();
    let failed: Vec<String> = verdicts
        .iter()
        .filter(|v| !v.problems.is_empty())
        .map(|v| format!("{}: {}", v.point.name(), v.problems.join("; ")))
        .collect();
    println!(
        "kill_points: {} kill points run in {:?}, {} with problems; by step {by_step:?}; \
         steps never killed in: {unkilled:?}; {} invocations after the kills",
        verdicts.len(),
        started.elapsed(),
        failed.len(),
        verdicts.iter().map(|v| v.invocations_after).sum::<usize>()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(
        unkilled.is_empty(),
        "no kill point struck in the middle of steps {unkilled:?}"
    );
    Ok(())
}

/// One fault injected into one of the worker's AWS calls, `times` in a
/// row from the operation's first call.
#[derive(Debug, Clone)]
struct FaultPoint {
    service: String,
    operation: String,
    fault: Fault,
    times: u32,
}

impl FaultPoint {
    fn name(&self) -> String {
        format!("{}/{} {}", self.service, self.operation, self.fault.name())
    }
}

/// Faults injected together into one create plan.
#[derive(Debug, Clone)]
struct FaultRound {
    name: String,
    points: Vec<FaultPoint>,
}

/// How long a hung call stays silent: longer than one attempt of the
/// worker's AWS calls may take (`floe_wiring::AWS_ATTEMPT_TIMEOUT`, 10 s),
/// so the worker's own bound ends it, not the proxy.
const HANG: Duration = Duration::from_secs(14);

/// The operations a hung call is tried on: the launch (its client token
/// must make the retry start nothing twice) and the store's transaction
/// (the SDK's request token must keep a retried write from applying twice).
/// Each costs a full attempt timeout, so not every operation gets one.
const HUNG_OPERATIONS: [(&str, &str); 2] =
    [("ec2", "RunInstances"), ("dynamodb", "TransactWriteItems")];

/// Each operation the create plan calls, with each fault a network or a
/// busy service gives: throttled, a 503 and a connection closed without
/// an answer, three times in a row from its first call (more than the
/// SDK's own attempts, so the step itself must fail and be run again); and
/// a call that hangs until the worker's own timeout ends it.
///
/// By default one round per fault, on every operation at once (a plan
/// that meets every operation's fault and still finishes survives each;
/// together they are also more hostile than one at a time). With
/// `FLOE_TEST_FAULTS=each`, one round per operation and fault, to tell
/// which one a failure comes from.
fn fault_rounds(log: &[String]) -> Vec<FaultRound> {
    let operations: BTreeSet<(&str, &str)> = log.iter().filter_map(|c| c.split_once('/')).collect();
    let point = |(service, operation): (&str, &str), fault: Fault, times: u32| FaultPoint {
        service: service.to_owned(),
        operation: operation.to_owned(),
        fault,
        times,
    };
    let mut cells: Vec<(String, Vec<FaultPoint>)> = Vec::new();
    for fault in [Fault::Throttle, Fault::Status(503), Fault::Drop] {
        cells.push((
            fault.name(),
            operations
                .iter()
                .map(|op| point(*op, fault.clone(), 3))
                .collect(),
        ));
    }
    cells.push((
        Fault::Delay(HANG).name(),
        HUNG_OPERATIONS
            .iter()
            .filter(|op| operations.contains(op))
            .map(|op| point(*op, Fault::Delay(HANG), 1))
            .collect(),
    ));
    let each = std::env::var("FLOE_TEST_FAULTS").is_ok_and(|v| v == "each");
    cells
        .into_iter()
        .flat_map(|(name, points)| {
            if each {
                points
                    .into_iter()
                    .map(|p| FaultRound {
                        name: p.name(),
                        points: vec![p],
                    })
                    .collect()
            } else {
                vec![FaultRound {
                    name: format!("{name} on {} operations", points.len()),
                    points,
                }]
            }
        })
        .collect()
}

async fn run_fault_round(account: &Account, round: &FaultRound) -> TestResult<(u32, Vec<String>)> {
    let rig = Rig::new(account).await?;
    let proxy = FaultProxy::start(&account.endpoint).await?;
    for p in &round.points {
        proxy.add(
            Rule::new(&p.service, p.fault.clone())
                .operation(&p.operation)
                .nth(1)
                .times(p.times),
        );
    }
    let mut worker = rig.worker(&proxy).await?;
    match drive_with(&rig, &mut worker, &proxy, Errors::Tolerated).await? {
        Drive::Finished => {}
        Drive::Killed { .. } => return Err("a call was withheld with no such rule".into()),
    }
    let injected = proxy.injected();
    Ok((injected, check(&rig).await?))
}

/// Faults on every AWS call the worker makes in a create plan (issue 12,
/// the fault-injection suite, on the worker's side): each plan still
/// finishes, and everything it made exists once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_plan_survives_faults_on_each_aws_call_and_makes_everything_once() -> TestResult {
    let started = Instant::now();
    let account = Account::new("worker_faults").await?;
    let (log, _) = dry_run(&account).await?;
    let rounds = fault_rounds(&log);
    let mut failed = Vec::new();
    let mut injected = 0;
    // Two at a time, as the kill points run.
    for pair in rounds.chunks(2) {
        let results = match pair {
            [a, b] => {
                let (ra, rb) =
                    tokio::join!(run_fault_round(&account, a), run_fault_round(&account, b));
                vec![(a, ra), (b, rb)]
            }
            [a] => vec![(a, run_fault_round(&account, a).await)],
            _ => continue,
        };
        for (round, result) in results {
            match result {
                Ok((n, problems)) => {
                    injected += n;
                    println!(
                        "worker_faults: {} ({n} injected): {}",
                        round.name,
                        if problems.is_empty() {
                            "finished, everything once".to_owned()
                        } else {
                            problems.join("; ")
                        }
                    );
                    if !problems.is_empty() {
                        failed.push(format!("{}: {}", round.name, problems.join("; ")));
                    }
                }
                Err(e) => failed.push(format!("{}: {e}", round.name)),
            }
        }
    }
    let operations: BTreeSet<&str> = log.iter().map(String::as_str).collect();
    println!(
        "worker_faults: {} rounds over {} operations, {injected} faults injected, {} with problems, in {:?}",
        rounds.len(),
        operations.len(),
        failed.len(),
        started.elapsed()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}
