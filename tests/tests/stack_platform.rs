//! The platform runs on what the stack made (issue 38, second part).
//!
//! `infra/template.yaml` is deployed into moto's CloudFormation on loopback
//! (tests/stack/deploy_stack.py, as in stack_deploy.rs), and the real
//! `floe-api`, `floe-worker` and `floe-snapshotter` binaries run under the
//! Lambda emulator with the configuration the stack gave them: each
//! function's environment as CloudFormation set it, read back from Lambda.
//! The test then does what an operator does on a fresh stack: registers a
//! repository, creates a deployment with a snapshot policy (nodes on moto's
//! EC2), takes the policy's snapshot through the schedule the worker made
//! (its target, role and input, as EventBridge Scheduler would invoke it),
//! clones the deployment from its latest successful snapshot, runs a
//! restore drill from the deployment's drill schedule (the schedule's
//! input put on its target, the stack's work queue; the clone on EC2,
//! checked and deleted; a recovery time target it misses told on the
//! default event bus, read through an operator's rule), loses a node
//! (EC2 terminates it, and the stack's EventBridge rule's notification
//! alone, the sweep turned off, starts the heal), shuts both down and
//! deletes them, and checks what each left in AWS.
//!
//! What the test adds to what the stack made, and why:
//! - `AWS_ENDPOINT_URL` (moto) on every function, the one way to reach it;
//! - the identity provider: the stack's `JwksUrl` parameter names an HTTPS
//!   server the test runs on loopback with the test-only RSA key, and the
//!   api function trusts its CA (`SSL_CERT_FILE`) as Lambda's trust store
//!   holds a real issuer's;
//! - the VPC's resolver: the functions reach a deployment by its endpoint
//!   name in the stack's private hosted zone, so each function runs with
//!   its own `/etc/hosts` (`Function::with_hosts`), which the test writes
//!   from the zone's A records before every invocation;
//! - the nodes: a simulated cluster listens on each running instance's
//!   address (the VPC is `127.N.0.0/16`, so moto hands out loopback
//!   addresses) with the certificate the plan stored, as a booted node
//!   would (floe_clusters_sim, as in kill_points.rs);
//! - Lambda's triggers: the test is the queue's event source mapping
//!   (batches from the stack's queue to the worker, failed records back
//!   to the queue) and the sweep schedule (its input, from the template);
//! - moto's gap: its CloudFormation makes no `AWS::Scheduler::ScheduleGroup`,
//!   so the test creates the group under the name CloudFormation would give
//!   it and hands the worker that name (`FLOE_SCHEDULE_GROUP`), which the
//!   template sets from the group.
//!
//! The binaries are this build's (x86_64, debug); the stack's code is the
//! arm64 release zips, which this machine cannot run.

use floe_store::Store;
use floe_store_dynamo::DynamoBackend;
use floe_tests::lambda_emulator::{
    Function, HttpAnswer, Running, SqsRecord, http_api_event, sqs_event,
};
use floe_tests::moto_server::MotoServer;
use floe_tests::stack::{Deploy, environment, string_at};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The deploy script's issuer and audience; the tokens name them.
const ISSUER: &str = "https://issuer.example.com/";
const AUDIENCE: &str = "floe-api";
const ORG: &str = "acme";
/// The HTTP port of the nodes (and of the simulated ones).
const ES_PORT: u16 = 9200;
/// How long one plan may take here before the test gives up: a debug
/// worker on a loaded two-core machine, with the worker's own waits.
const PLAN_WITHIN: Duration = Duration::from_secs(420);
/// How often the sweep schedule fires while nothing is due (a minute on
/// AWS; sooner here, which changes nothing but the wait).
const SWEEP_EVERY: Duration = Duration::from_secs(10);

fn sdk(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::SharedCredentialsProvider::new(
            aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "floe-tests"),
        ))
        .build()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/domain/auth/tests/fixtures")
        .join(name)
}

/// The identity provider's signing keys, served over HTTPS on loopback
/// with a CA of the test's own (written to `ca_file`).
struct Issuer {
    url: String,
    ca_file: PathBuf,
    served: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.served.abort();
    }
}

async fn issuer(dir: &Path) -> TestResult<Issuer> {
    let jwks = std::fs::read_to_string(fixture("test-only-jwks.json"))?;
    let security = floe_node_security::generate_with(
        &floe_domain::names::new_resource_id(),
        floe_domain::secret::SecretString::new("unused"),
        Some("127.0.0.1"),
    )?;
    let ca_file = dir.join("issuer-ca.pem");
    std::fs::write(&ca_file, &security.ca_cert_pem)?;
    use rustls::pki_types::pem::PemObject as _;
    let chain =
        rustls::pki_types::CertificateDer::pem_slice_iter(security.node_cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(
        security.node_key_pem.expose().as_bytes(),
    )?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("https://{}/.well-known/jwks.json", listener.local_addr()?);
    let served = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let jwks = jwks.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                // One request per connection: read its head, answer the keys.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{jwks}",
                    jwks.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Ok(Issuer {
        url,
        ca_file,
        served,
    })
}

/// A token the issuer signed (RS256, the fixture's key `test-rsa`).
fn token(org: &str, role: &str) -> TestResult<String> {
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "sub": "stack-operator", "org": org, "roles": [role],
        "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600,
    });
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("test-rsa".into());
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(&std::fs::read(fixture(
        "test-only-rsa-private.pem",
    ))?)?;
    Ok(jsonwebtoken::encode(&header, &claims, &key)?)
}

/// A function of the stack (`logical` id), on this build's binary, with the
/// environment, memory and timeout the stack gave it.
fn function(
    stack: &Value,
    logical: &str,
    binary: &str,
    endpoint: &str,
    hosts: &Path,
) -> TestResult<Function> {
    let name = string_at(stack, &format!("/resources/{logical}/id"))?;
    let conf = &stack["functions"][logical];
    let mut f = Function::at(floe_tests::built_binary(binary), name)
        .memory_mb(conf["memory"].as_u64().ok_or("no memory")? as u32)
        .timeout(Duration::from_secs(
            conf["timeout"].as_u64().ok_or("no timeout")?,
        ))
        .with_hosts(hosts);
    for (k, v) in environment(stack, logical) {
        f = f.env(&k, v);
    }
    Ok(f.env("AWS_ENDPOINT_URL", endpoint))
}

fn var(stack: &Value, logical: &str, name: &str) -> TestResult<String> {
    environment(stack, logical)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .ok_or_else(|| format!("{logical} has no {name}").into())
}

/// What the test stands in for around the functions, and the functions.
struct Platform {
    api: Running,
    worker: Running,
    snapshotter: Running,
    token: String,
    store: Store,
    nodes: floe_clusters_sim::SimulatedClusters,
    compute: Arc<dyn floe_compute::Compute>,
    sqs: aws_sdk_sqs::Client,
    route53: aws_sdk_route53::Client,
    scheduler: aws_sdk_scheduler::Client,
    queue_url: String,
    zone_id: String,
    schedule_group: String,
    hosts: PathBuf,
    sweep: Value,
    last_sweep: Instant,
    /// Whether the sweep schedule fires (off: only the queue runs plans).
    sweeping: bool,
    /// Invocations of the worker, by trigger.
    batches: u32,
    sweeps: u32,
}

impl Platform {
    /// One API request through API Gateway's event, asked again while the
    /// api answers 503 (moto, shared by the whole run, can be slower than
    /// the api's bound on one AWS call). Every request here is safe to
    /// repeat: PUTs, GETs, and POSTs with an idempotency key.
    async fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> TestResult<HttpAnswer> {
        self.resolve().await?;
        let auth = format!("Bearer {}", self.token);
        let key = format!("stack-{}", floe_domain::names::new_resource_id());
        let text = body.map(Value::to_string);
        let mut answer = None;
        for _ in 0..5 {
            let event = http_api_event(
                method,
                path,
                &[
                    ("authorization", &auth),
                    ("content-type", "application/json"),
                    ("idempotency-key", &key),
                ],
                text.as_deref(),
            );
            let got = self.api.invoke(&event).await?.http();
            let again = got.status == 503;
            answer = Some(got);
            if !again {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        answer.ok_or_else(|| "no answer".into())
    }

    /// The private hosted zone's A records, as the VPC's resolver serves
    /// them, written where the functions look names up.
    async fn resolve(&self) -> TestResult {
        let mut lines = vec!["127.0.0.1 localhost".to_string()];
        for (name, ips) in self.records().await? {
            lines.extend(ips.iter().map(|ip| format!("{ip} {name}")));
        }
        // Written in place: the functions' bind mounts follow the file.
        std::fs::write(&self.hosts, lines.join("\n") + "\n")?;
        Ok(())
    }

    /// Name → addresses of the zone's A records.
    async fn records(&self) -> TestResult<BTreeMap<String, Vec<String>>> {
        let out = self
            .route53
            .list_resource_record_sets()
            .hosted_zone_id(&self.zone_id)
            .send()
            .await?;
        let mut records = BTreeMap::new();
        for set in out.resource_record_sets() {
            if set.r#type() != &aws_sdk_route53::types::RrType::A {
                continue;
            }
            let ips: Vec<String> = set
                .resource_records()
                .iter()
                .map(|r| r.value().to_string())
                .collect();
            records.insert(set.name().trim_end_matches('.').to_string(), ips);
        }
        Ok(records)
    }

    /// Each deployment's running instances answer as booted nodes.
    async fn boot(&self, ids: &[&str]) -> TestResult {
        use floe_clusters::Clusters as _;
        for id in ids {
            if let Some(d) = self.store.get_deployment(ORG, id).await? {
                let _ = self.nodes.client(&d.value, &[]).await;
            }
        }
        Ok(())
    }

    /// Runs the platform as Lambda would until no plan of `ids` is pending:
    /// the queue's batches go to the worker, and the sweep runs while
    /// nothing is due. Answers the deployments' views (`None`: deleted).
    async fn settle(&mut self, ids: &[&str]) -> TestResult<Vec<Option<Value>>> {
        let deadline = Instant::now() + PLAN_WITHIN;
        loop {
            self.resolve().await?;
            self.boot(ids).await?;
            let batch = self.receive().await?;
            if !batch.is_empty() {
                self.deliver(batch).await?;
                continue;
            }
            let mut views = Vec::new();
            for id in ids {
                let d = self
                    .call("GET", &format!("/api/v1/deployments/{id}"), None)
                    .await?;
                views.push(match d.status {
                    404 => None,
                    200 => Some(d.json()),
                    _ => return Err(format!("GET {id}: {}", d.describe()).into()),
                });
            }
            if views
                .iter()
                .all(|v| v.as_ref().is_none_or(|v| v["plans"]["pending"].is_null()))
            {
                return Ok(views);
            }
            if Instant::now() > deadline {
                return Err(format!("plans still pending after {PLAN_WITHIN:?}: {views:?}").into());
            }
            if self.sweeping && self.last_sweep.elapsed() > SWEEP_EVERY {
                let swept = self.worker.invoke(&self.sweep).await?;
                assert!(
                    swept.response_json()["requeued"].is_u64(),
                    "the sweep: {}",
                    swept.describe()
                );
                self.last_sweep = Instant::now();
                self.sweeps += 1;
            }
        }
    }

    /// Up to ten jobs, as the event source mapping takes them (long poll).
    async fn receive(&self) -> TestResult<Vec<SqsRecord>> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await?;
        Ok(out
            .messages()
            .iter()
            .map(|m| SqsRecord {
                message_id: m.message_id().unwrap_or_default().to_owned(),
                receipt_handle: m.receipt_handle().unwrap_or_default().to_owned(),
                body: m.body().unwrap_or_default().to_owned(),
            })
            .collect())
    }

    /// One batch to the worker; what it ran goes, what it reports failed
    /// comes back (at once here, after the visibility timeout on AWS).
    async fn deliver(&mut self, batch: Vec<SqsRecord>) -> TestResult {
        let queue_name = self
            .queue_url
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let ran = self.worker.invoke(&sqs_event(&queue_name, &batch)).await?;
        let answer = ran.response_json();
        let failed: Vec<&str> = answer["batchItemFailures"]
            .as_array()
            .ok_or_else(|| format!("the worker did not answer a batch: {}", ran.describe()))?
            .iter()
            .filter_map(|f| f["itemIdentifier"].as_str())
            .collect();
        for record in &batch {
            if failed.contains(&record.message_id.as_str()) {
                self.sqs
                    .change_message_visibility()
                    .queue_url(&self.queue_url)
                    .receipt_handle(&record.receipt_handle)
                    .visibility_timeout(1)
                    .send()
                    .await?;
            } else {
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(&record.receipt_handle)
                    .send()
                    .await?;
            }
        }
        self.batches += 1;
        Ok(())
    }

    /// The snapshot schedules in the stack's group: name → (target ARN,
    /// role, dead-letter queue, input).
    async fn schedules(&self) -> TestResult<BTreeMap<String, [String; 4]>> {
        let listed = self
            .scheduler
            .list_schedules()
            .group_name(&self.schedule_group)
            .send()
            .await?;
        let mut schedules = BTreeMap::new();
        for summary in listed.schedules() {
            let name = summary.name().unwrap_or_default();
            let got = self
                .scheduler
                .get_schedule()
                .group_name(&self.schedule_group)
                .name(name)
                .send()
                .await?;
            let target = got.target().ok_or("a schedule without a target")?;
            schedules.insert(
                name.to_string(),
                [
                    target.arn().to_string(),
                    target.role_arn().to_string(),
                    target
                        .dead_letter_config()
                        .and_then(|d| d.arn())
                        .unwrap_or_default()
                        .to_string(),
                    target.input().unwrap_or_default().to_string(),
                ],
            );
        }
        Ok(schedules)
    }

    /// The deployment's instances EC2 still has running or starting.
    async fn live_instances(&self, id: &str) -> TestResult<usize> {
        use floe_compute::InstanceState;
        Ok(self
            .compute
            .instances(id)
            .await?
            .iter()
            .filter(|i| matches!(i.state, InstanceState::Running | InstanceState::Pending))
            .count())
    }
}

/// An operator's rule on the default bus: Floe's events about one
/// deployment, routed to a queue of the test's.
struct AlertQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

async fn alert_queue(sdk: &aws_config::SdkConfig, deployment_id: &str) -> TestResult<AlertQueue> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let name = format!("floe-alerts-{deployment_id}");
    let url = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await?
        .queue_url()
        .ok_or("no queue url")?
        .to_string();
    let arn = queue_arn(&sqs, &url).await?;
    let bus = aws_sdk_eventbridge::Client::new(sdk);
    bus.put_rule()
        .name(&name)
        .event_pattern(
            json!({"source": ["floe"], "detail": {"deployment_id": [deployment_id]}}).to_string(),
        )
        .send()
        .await?;
    bus.put_targets()
        .rule(&name)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("alerts")
                .arn(arn)
                .build()?,
        )
        .send()
        .await?;
    Ok(AlertQueue { sqs, url })
}

/// The queue's ARN, as SQS reports it.
async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> TestResult<String> {
    Ok(sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
        .cloned()
        .ok_or("no queue arn")?)
}

impl AlertQueue {
    /// The events' envelopes, once `n` arrived (or what did, after a while).
    async fn wait_for(&self, n: usize) -> TestResult<Vec<Value>> {
        let mut all = Vec::new();
        for _ in 0..20 {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages(10)
                .send()
                .await?;
            for m in out.messages() {
                all.push(serde_json::from_str(m.body().unwrap_or_default())?);
            }
            if all.len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            all.len() >= n,
            "{} of {n} events arrived: {all:?}",
            all.len()
        );
        Ok(all)
    }
}

/// One of the deployment's running instances.
async fn running_instance(p: &Platform, id: &str) -> TestResult<String> {
    use floe_compute::InstanceState;
    p.compute
        .instances(id)
        .await?
        .into_iter()
        .find(|i| i.state == InstanceState::Running)
        .map(|i| i.id)
        .ok_or_else(|| format!("{id} has no running instance").into())
}

/// A user's HTTPS client of a deployment: its endpoint name resolved from
/// the zone's records, its CA trusted, the elastic user's password.
struct User {
    http: reqwest::Client,
    url: String,
    password: String,
}

impl User {
    async fn of(platform: &Platform, view: &Value, password: &str) -> TestResult<User> {
        let es = &view["elasticsearch"];
        let endpoint = es["endpoint"]
            .as_str()
            .ok_or_else(|| format!("no endpoint: {view}"))?;
        let url = url_of(endpoint);
        let host = host_of(&url);
        let records = platform.records().await?;
        let ip: std::net::IpAddr = records
            .get(&host)
            .and_then(|ips| ips.first())
            .ok_or_else(|| format!("{host} has no A record: {records:?}"))?
            .parse()?;
        let ca = es["ca_certificate"].as_str().ok_or("no CA")?;
        let http = reqwest::Client::builder()
            .no_proxy()
            .resolve(&host, std::net::SocketAddr::new(ip, ES_PORT))
            .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes())?])
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(User {
            http,
            url,
            password: password.to_string(),
        })
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> TestResult<(u16, Value)> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .basic_auth("elastic", Some(&self.password));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }
}

/// `https://host:port` from the view's endpoint, which may be a bare host.
fn url_of(endpoint: &str) -> String {
    let url = if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("https://{endpoint}")
    };
    let url = url.trim_end_matches('/').to_string();
    if host_of(&url).len() + "https://".len() == url.len() {
        format!("{url}:{ES_PORT}")
    } else {
        url
    }
}

fn host_of(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    rest.split([':', '/'])
        .next()
        .unwrap_or_default()
        .to_string()
}

fn id_of(answer: &HttpAnswer) -> TestResult<String> {
    Ok(answer.json()["id"]
        .as_str()
        .ok_or_else(|| format!("no id: {}", answer.describe()))?
        .to_string())
}

fn password_of(answer: &HttpAnswer) -> TestResult<String> {
    Ok(answer.json()["credentials"]["password"]
        .as_str()
        .ok_or_else(|| format!("no password: {}", answer.describe()))?
        .to_string())
}

/// The last finished plan of a deployment.
async fn last_plan(p: &mut Platform, id: &str) -> TestResult<Value> {
    let plans = p
        .call("GET", &format!("/api/v1/deployments/{id}/plans"), None)
        .await?;
    plans.expect_status(200);
    Ok(plans.json()["history"]
        .as_array()
        .and_then(|h| h.last().cloned())
        .ok_or_else(|| format!("no finished plan: {}", plans.describe()))?)
}

async fn expect_succeeded(p: &mut Platform, id: &str, kind: &str) -> TestResult {
    let plan = last_plan(p, id).await?;
    assert_eq!(plan["kind"], kind, "{plan}");
    assert_eq!(
        plan["status"], "succeeded",
        "the {kind} plan of {id}: {plan}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_runs_on_what_the_stack_made() -> TestResult {
    let started = Instant::now();
    // A moto of its own: the stack and three deployments' plans make
    // thousands of calls, which no other suite waits behind.
    let moto = MotoServer::start("stack_platform")?;
    let endpoint = moto.endpoint().to_owned();
    let sdk = sdk(&endpoint);
    let dir = tempfile::tempdir()?;
    let issuer = issuer(dir.path()).await?;

    // The stack, on a VPC of loopback addresses (a /16 of its own: the
    // kill-point suite's are 127.100 and up, local mode's 127.128 and up).
    let name = format!("floe-{}", floe_domain::names::new_resource_id());
    let octet = 64 + std::process::id() % 36;
    let bucket = format!("floe-stack-snapshots-{}", std::process::id());
    let cidr = format!("127.{octet}.0.0/16");
    let stack = Deploy {
        action: "create",
        name: &name,
        set: vec![
            format!("JwksUrl={}", issuer.url),
            format!("JwtIssuer={ISSUER}"),
            format!("JwtAudience={AUDIENCE}"),
            format!("SnapshotBuckets={bucket}"),
        ],
        cidr: Some(&cidr),
    }
    .run(&endpoint)?
    .map_err(|e| format!("create: {e}"))?;
    assert_eq!(stack["status"], "CREATE_COMPLETE", "{stack}");
    let deployed = started.elapsed();

    // moto's gap: the schedule group the template declares, made as
    // CloudFormation would have named it.
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let schedule_group = format!("{name}-SnapshotScheduleGroup");
    scheduler
        .create_schedule_group()
        .name(&schedule_group)
        .send()
        .await?;

    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n")?;
    let api = function(&stack, "ApiFunction", "floe-api", &endpoint, &hosts)?
        .env("SSL_CERT_FILE", issuer.ca_file.display().to_string())
        .start()
        .await?;
    let worker = function(&stack, "WorkerFunction", "floe-worker", &endpoint, &hosts)?
        .env("FLOE_SCHEDULE_GROUP", &schedule_group)
        .start()
        .await?;
    let snapshotter = function(
        &stack,
        "SnapshotterFunction",
        "floe-snapshotter",
        &endpoint,
        &hosts,
    )?
    .start()
    .await?;

    // The nodes: simulated clusters on the instances the worker launches.
    let ec2_config = floe_compute_ec2::Ec2Config {
        image_arm64: var(&stack, "WorkerFunction", "FLOE_EC2_IMAGE_ARM64")?,
        image_x86_64: var(&stack, "WorkerFunction", "FLOE_EC2_IMAGE_X86_64")?,
        subnets: var(&stack, "WorkerFunction", "FLOE_EC2_SUBNETS")?
            .split(',')
            .map(str::to_string)
            .collect(),
        security_groups: var(&stack, "WorkerFunction", "FLOE_EC2_SECURITY_GROUPS")?
            .split(',')
            .map(str::to_string)
            .collect(),
        instance_profile: None,
        key_name: None,
    };
    let compute: Arc<dyn floe_compute::Compute> =
        Arc::new(floe_compute_ec2::Ec2Compute::new(&sdk, ec2_config));
    let parameters = Arc::new(floe_parameters_ssm::SsmParameters::new(
        &sdk,
        floe_parameters_ssm::SsmParametersConfig { kms_key_id: None },
    ));
    let nodes = floe_clusters_sim::SimulatedClusters::new(
        compute.clone(),
        floe_clusters_sim::SimulatedClustersConfig {
            // The nodes' instance role reaches the snapshot bucket: here,
            // moto's S3.
            s3: Some(floe_elastic_sim::S3Access {
                endpoint_url: Some(endpoint.clone()),
                region: "us-east-1".into(),
                access_key: "test".into(),
                secret_key: floe_domain::secret::SecretString::new("test"),
                force_path_style: true,
            }),
            ..Default::default()
        },
    )
    .with_http_port(ES_PORT)
    .with_parameters(
        parameters,
        var(&stack, "WorkerFunction", "FLOE_PARAMETER_PREFIX")?,
    );
    let table = string_at(&stack, "/outputs/TableName")?;
    let sweep: Value = serde_json::from_str(string_at(
        &stack,
        "/template/Resources/SweepSchedule/Properties/Target/Input",
    )?)?;
    let mut p = Platform {
        api,
        worker,
        snapshotter,
        token: token(ORG, "platform_admin")?,
        store: Store::new(Arc::new(DynamoBackend::new(&sdk, table))),
        nodes,
        compute,
        sqs: aws_sdk_sqs::Client::new(&sdk),
        route53: aws_sdk_route53::Client::new(&sdk),
        scheduler,
        queue_url: string_at(&stack, "/outputs/QueueUrl")?.to_string(),
        zone_id: var(&stack, "WorkerFunction", "FLOE_ENDPOINT_ZONE_ID")?,
        schedule_group,
        hosts,
        sweep,
        last_sweep: Instant::now(),
        sweeping: true,
        batches: 0,
        sweeps: 0,
    };

    // 1. A repository on the stack's snapshot bucket, reached with the
    //    nodes' own role (no keys).
    let repo = json!({"type": "s3", "settings": {"bucket": bucket, "base_path": "stack"}});
    let put = p
        .call(
            "PUT",
            "/api/v1/platform/configuration/snapshots/repositories/stack-s3",
            Some(&repo),
        )
        .await?;
    assert!(put.status == 200 || put.status == 201, "{}", put.describe());
    let policy = floe_tests::policy("stack-hourly", "stack-s3");
    let created = p
        .call("POST", "/api/v1/snapshot-policies", Some(&policy))
        .await?;
    created.expect_status(201);
    let policy_id = id_of(&created)?;

    // 2. A deployment on EC2, with the policy.
    let spec = floe_tests::deployment("stack-logs", Some("stack-s3"), &[&policy_id]);
    let created = p.call("POST", "/api/v1/deployments", Some(&spec)).await?;
    created.expect_status(201);
    let source = id_of(&created)?;
    let password = password_of(&created)?;
    let views = p.settle(&[&source]).await?;
    let view = views[0].clone().ok_or("the deployment is gone")?;
    assert_eq!(view["status"], "running", "{view}");
    expect_succeeded(&mut p, &source, "create").await?;
    assert_eq!(p.live_instances(&source).await?, 3);
    let records = p.records().await?;
    let host = host_of(&url_of(
        view["elasticsearch"]["endpoint"]
            .as_str()
            .unwrap_or_default(),
    ));
    assert_eq!(
        records.get(&host).map(Vec::len),
        Some(3),
        "the endpoint names the three nodes: {records:?}"
    );

    // A user writes through the endpoint, verifying it.
    let user = User::of(&p, &view, &password).await?;
    for n in 0..3 {
        let (status, body) = user
            .send(
                reqwest::Method::POST,
                "/logs-1/_doc?refresh=true",
                Some(json!({"n": n})),
            )
            .await?;
        assert_eq!(status, 201, "{body}");
    }

    // 3. The policy's schedule, as the worker made it, invoked as
    //    EventBridge Scheduler would: its input to its target.
    let snapshotter_arn = var(&stack, "WorkerFunction", "FLOE_SNAPSHOTTER_ARN")?;
    let schedules = p.schedules().await?;
    assert_eq!(
        schedules.len(),
        1,
        "one schedule per attachment: {schedules:?}"
    );
    let [target, role, dead_letter, input] =
        schedules.values().next().cloned().ok_or("no schedule")?;
    assert_eq!(target, snapshotter_arn);
    assert_eq!(
        target,
        p.snapshotter.function().arn(),
        "the stack's snapshotter"
    );
    assert_eq!(
        role,
        var(&stack, "WorkerFunction", "FLOE_SCHEDULER_ROLE_ARN")?
    );
    assert_eq!(
        dead_letter,
        var(&stack, "WorkerFunction", "FLOE_SCHEDULE_DLQ_ARN")?
    );
    let input: Value = serde_json::from_str(&input)?;
    p.resolve().await?;
    let ran = p.snapshotter.invoke(&input).await?;
    let summary = ran.response_json();
    assert!(
        summary["outcome"].is_string()
            && !["rejected", "failed", "unknown"]
                .contains(&summary["outcome"].as_str().unwrap_or_default()),
        "{}",
        ran.describe()
    );
    let listed = p
        .call(
            "GET",
            &format!("/api/v1/deployments/{source}/snapshots"),
            None,
        )
        .await?;
    listed.expect_status(200);
    let snapshots = listed.json()["snapshots"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(snapshots.len(), 1, "{}", listed.describe());
    assert_eq!(snapshots[0]["state"], "SUCCESS", "{}", listed.describe());

    // 4. A clone from the latest successful snapshot.
    let cloned = p
        .call(
            "POST",
            &format!("/api/v1/deployments/{source}/_clone"),
            Some(&json!({"name": "stack-logs-copy"})),
        )
        .await?;
    cloned.expect_status(201);
    let clone = id_of(&cloned)?;
    let clone_password = password_of(&cloned)?;
    let views = p.settle(&[&clone]).await?;
    let clone_view = views[0].clone().ok_or("the clone is gone")?;
    assert_eq!(clone_view["status"], "running", "{clone_view}");
    expect_succeeded(&mut p, &clone, "create").await?;
    let user = User::of(&p, &clone_view, &clone_password).await?;
    let (status, body) = user
        .send(reqwest::Method::GET, "/logs-1/_count", None)
        .await?;
    assert_eq!((status, &body["count"]), (200, &json!(3)), "{body}");

    // The api function reaches the clusters too (its proxy, by the
    // endpoint name, as the worker does).
    let proxied = p
        .call(
            "GET",
            &format!(
                "/api/v1/deployments/{clone}/elasticsearch/main-elasticsearch/proxy/logs-1/_count"
            ),
            None,
        )
        .await?;
    proxied.expect_status(200);
    assert_eq!(proxied.json()["count"], 3, "{}", proxied.describe());

    // 4b. A restore drill on a schedule: the deployment's drill schedule
    //     becomes a schedule whose target is the stack's work queue; its
    //     input, put on that queue as EventBridge Scheduler would, starts
    //     the drill in the worker; the drill's clone restores the latest
    //     snapshot on EC2, is checked and deleted; and a recovery time
    //     target it cannot meet is told on the default event bus.
    let alerts = alert_queue(&sdk, &source).await?;
    let shown = p
        .call("GET", &format!("/api/v1/deployments/{source}"), None)
        .await?;
    let mut body = shown.json();
    body["drill_schedule"] = json!({"schedule": {"interval": "1d"},
        "drill": {"queries": [{"index": "logs-1", "min_hits": 3}]}});
    body["recovery_targets"] = json!({"recovery_time": "1ms"});
    let put = p
        .call("PUT", &format!("/api/v1/deployments/{source}"), Some(&body))
        .await?;
    put.expect_status(200);
    let mut drill_schedule = None;
    for _ in 0..10 {
        let batch = p.receive().await?;
        if !batch.is_empty() {
            p.deliver(batch).await?;
        }
        drill_schedule = p
            .schedules()
            .await?
            .into_values()
            .find(|[_, _, _, input]| input.contains("\"drill\""));
        if drill_schedule.is_some() {
            break;
        }
    }
    let [target, role, _, input] = drill_schedule.ok_or("no drill schedule was made")?;
    let work_queue = var(&stack, "WorkerFunction", "FLOE_WORK_QUEUE_ARN")?;
    assert_eq!(target, work_queue);
    assert_eq!(
        target,
        queue_arn(&p.sqs, &p.queue_url).await?,
        "the stack's work queue"
    );
    assert_eq!(
        role,
        var(&stack, "WorkerFunction", "FLOE_SCHEDULER_ROLE_ARN")?
    );
    p.sqs
        .send_message()
        .queue_url(&p.queue_url)
        .message_body(&input)
        .send()
        .await?;
    let mut drill = Value::Null;
    for _ in 0..10 {
        let batch = p.receive().await?;
        if !batch.is_empty() {
            p.deliver(batch).await?;
        }
        let listed = p
            .call("GET", &format!("/api/v1/deployments/{source}/drills"), None)
            .await?;
        listed.expect_status(200);
        drill = listed.json()["drills"][0].clone();
        if !drill.is_null() {
            break;
        }
    }
    let drill_clone = drill["clone_deployment_id"]
        .as_str()
        .ok_or_else(|| format!("the firing started no drill: {drill}"))?
        .to_string();
    let views = p.settle(&[&drill_clone]).await?;
    assert!(
        views[0].is_none(),
        "the drill's clone outlived it: {views:?}"
    );
    let listed = p
        .call("GET", &format!("/api/v1/deployments/{source}/drills"), None)
        .await?;
    let drill = listed.json()["drills"][0].clone();
    assert_eq!(drill["status"], "passed", "{drill}");
    assert_eq!(drill["snapshot"], snapshots[0]["snapshot"], "{drill}");
    assert!(
        drill["checks"]
            .as_array()
            .is_some_and(|c| c.iter().all(|c| c["outcome"] == "passed")),
        "{drill}"
    );
    assert_eq!(p.live_instances(&drill_clone).await?, 0);
    let told = alerts.wait_for(1).await?;
    assert_eq!(told[0]["source"], "floe", "{told:?}");
    assert_eq!(told[0]["detail-type"], "Floe Recovery Target Breached");
    assert_eq!(told[0]["detail"]["target"], "recovery_time");
    assert_eq!(told[0]["detail"]["drill_id"], drill["id"]);

    // 5. A node lost: EC2 terminates one of the source's instances, the
    //    stack's rule puts EC2's notification on the queue, and the worker
    //    starts the heal from it alone, the sweep turned off.
    p.sweeping = false;
    let sweeps_before = p.sweeps;
    let victim = running_instance(&p, &source).await?;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    ec2.terminate_instances()
        .instance_ids(&victim)
        .send()
        .await?;
    let rule = &stack["template"]["Resources"]["InstanceStateRule"]["Properties"];
    assert_eq!(
        rule["Targets"][0]["Arn"],
        json!({"Fn::GetAtt": ["WorkQueue", "Arn"]})
    );
    let notification = json!({
        "version": "0", "id": floe_domain::names::new_resource_id(),
        "detail-type": rule["EventPattern"]["detail-type"][0], "source": rule["EventPattern"]["source"][0],
        "account": floe_tests::lambda_emulator::ACCOUNT, "time": chrono::Utc::now().to_rfc3339(),
        "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:{}:instance/{victim}", floe_tests::lambda_emulator::ACCOUNT)],
        "detail": {"instance-id": victim, "state": "terminated"},
    });
    assert!(
        rule["EventPattern"]["detail"]["state"]
            .as_array()
            .is_some_and(|states| states.contains(&json!("terminated"))),
        "{rule}"
    );
    p.sqs
        .send_message()
        .queue_url(&p.queue_url)
        .message_body(notification.to_string())
        .send()
        .await?;
    let mut delivered = false;
    for _ in 0..10 {
        let batch = p.receive().await?;
        if !batch.is_empty() {
            p.deliver(batch).await?;
            delivered = true;
            break;
        }
    }
    assert!(delivered, "the notification never reached the worker");
    let healing = p
        .call("GET", &format!("/api/v1/deployments/{source}"), None)
        .await?;
    assert_eq!(
        healing.json()["plans"]["pending"]["kind"],
        "heal",
        "the notification started no heal: {}",
        healing.describe()
    );
    let views = p.settle(&[&source]).await?;
    assert_eq!(views[0].as_ref().ok_or("gone")?["status"], "running");
    expect_succeeded(&mut p, &source, "heal").await?;
    assert_eq!(p.live_instances(&source).await?, 3);
    assert_eq!(p.sweeps, sweeps_before, "a sweep ran");
    p.sweeping = true;

    // 6. Both shut down, then deleted.
    for id in [&source, &clone] {
        let down = p
            .call("POST", &format!("/api/v1/deployments/{id}/_shutdown"), None)
            .await?;
        assert!(
            down.status == 200 || down.status == 202,
            "{}",
            down.describe()
        );
    }
    let views = p.settle(&[&source, &clone]).await?;
    for (id, view) in [&source, &clone].iter().zip(&views) {
        let view = view.as_ref().ok_or("gone after a shutdown")?;
        assert_eq!(view["status"], "stopped", "{view}");
        expect_succeeded(&mut p, id, "shutdown").await?;
        assert_eq!(p.live_instances(id).await?, 0, "{id} keeps instances");
    }
    assert!(
        p.schedules().await?.is_empty(),
        "a stopped deployment keeps no schedule"
    );
    for id in [&source, &clone] {
        let gone = p
            .call("DELETE", &format!("/api/v1/deployments/{id}"), None)
            .await?;
        assert!(
            gone.status == 200 || gone.status == 202,
            "{}",
            gone.describe()
        );
    }
    let views = p.settle(&[&source, &clone]).await?;
    assert!(views.iter().all(Option::is_none), "still there: {views:?}");
    let records = p.records().await?;
    assert!(
        !records
            .keys()
            .any(|name| name.contains(&source) || name.contains(&clone)),
        "the endpoint names outlive their deployments: {records:?}"
    );
    println!(
        "the stack deployed in {:.1} s; the platform ran on it in {:.1} s more: {} worker batches, {} sweeps",
        deployed.as_secs_f64(),
        (started.elapsed() - deployed).as_secs_f64(),
        p.batches,
        p.sweeps
    );
    Ok(())
}
