//! Fault injection on the api function's AWS calls (issue 12, "the suites
//! that find the next ones"): the real `floe-api` binary runs under the
//! Lambda runtime emulator with its real SDK clients (DynamoDB, SQS, KMS)
//! pointed at a fault-injecting proxy in front of moto
//! (floe_tests::fault_proxy).
//!
//! Each operation first runs without faults, which tells which services it
//! calls; then, for each of those services and each fault kind, it runs
//! again with that service failing on every call (a fault that outlasts the
//! SDK's retries). Every answer must be a 503 with an ECE error body that
//! shows no internal detail, after which the records read back without
//! faults are exactly those from before (same lists, same versions; a
//! create's idempotency key still unspent) — or a success, when the call
//! that failed was one the operation may do without (waking the worker:
//! the plan is recorded and the sweep starts it). Never a 500, never a
//! hang.
//!
//! Each test prints a summary line: cells run, faults injected, findings.

use floe_auth::Role;
use floe_tests::fault_proxy::{Fault, FaultProxy, Rule};
use floe_tests::lambda_emulator::{Function, HttpAnswer, Moto, Running, http_api_event};
use floe_tests::{AUDIENCE, DEPLOYMENTS, ISSUER, POLICIES, REPOSITORIES, Reply, ece_error};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ORG: &str = "acme";
const JWT_SECRET: &str = "fault-injection-test-secret-0123456789";
/// What a client may never read in an error body: the SDK's and the
/// proxy's words, and the secrets the requests carry.
const NEVER_SHOWN: &[&str] = &[
    "injected",
    "ThrottlingException",
    "InternalFailure",
    "dispatch failure",
    "moto",
    "127.0.0.1",
    "SECRETKEY",
];

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn aws_endpoint() -> String {
    let Ok(endpoint) = std::env::var("FLOE_TEST_AWS_ENDPOINT") else {
        panic!(
            "FLOE_TEST_AWS_ENDPOINT is not set, so the fault injection cannot run on moto. \
             Run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:") || endpoint.starts_with("http://localhost:"),
        "FLOE_TEST_AWS_ENDPOINT={endpoint}: the tests only talk to a local endpoint"
    );
    endpoint
}

/// The api function, on moto through the proxy.
struct Rig {
    proxy: FaultProxy,
    api: Running,
    moto: Moto,
    queue_url: String,
    token: String,
}

impl Rig {
    async fn start() -> Rig {
        let endpoint = aws_endpoint();
        let moto = Moto::new(&endpoint);
        let queue_url = moto
            .create_queue(&unique("floe-faults"))
            .await
            .unwrap_or_else(|e| panic!("cannot create the queue: {e}"));
        let key_arn = moto
            .create_kms_key()
            .await
            .unwrap_or_else(|e| panic!("cannot create the key: {e}"));
        let proxy = FaultProxy::start(&endpoint)
            .await
            .unwrap_or_else(|e| panic!("cannot start the fault proxy: {e}"));
        let api = Function::built("floe-api")
            .memory_mb(512)
            .timeout(Duration::from_secs(20))
            .env(
                "FLOE_STORE",
                format!("dynamodb://{}", unique("floe-faults")),
            )
            .env("FLOE_CREATE_TABLE", "true")
            .env("FLOE_QUEUE_URL", &queue_url)
            .env("FLOE_KMS_KEY_ID", key_arn)
            .env("FLOE_JWT_SECRET", JWT_SECRET)
            .env("FLOE_ALLOW_PRIVATE_ENDPOINTS", "false")
            .env("AWS_ENDPOINT_URL", proxy.url())
            .start()
            .await
            .unwrap_or_else(|e| panic!("cannot start floe-api: {e}"));
        let token = floe_auth::issue_hs256(
            JWT_SECRET.as_bytes(),
            ISSUER,
            AUDIENCE,
            "fault-test",
            ORG,
            &[Role::PlatformAdmin],
            Duration::from_secs(3600),
        )
        .unwrap_or_else(|e| panic!("cannot issue a token: {e}"));
        Rig {
            proxy,
            api,
            moto,
            queue_url,
            token,
        }
    }

    async fn call(&mut self, req: &Req) -> HttpAnswer {
        let auth = format!("Bearer {}", self.token);
        let mut headers: Vec<(&str, &str)> = vec![("authorization", &auth)];
        if req.body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        for (k, v) in &req.headers {
            headers.push((k, v));
        }
        let body = req.body.as_ref().map(Value::to_string);
        let event = http_api_event(&req.method, &req.path, &headers, body.as_deref());
        self.api
            .invoke(&event)
            .await
            .unwrap_or_else(|e| panic!("{} {}: {e}", req.method, req.path))
            .http()
    }

    /// A call that must succeed (set-up and read-back, never under faults).
    async fn ok(&mut self, req: Req) -> Value {
        self.proxy.clear();
        let a = self.call(&req).await;
        assert!(
            (200..300).contains(&a.status),
            "{} {} without faults: {}",
            req.method,
            req.path,
            a.describe()
        );
        serde_json::from_str(&a.body).unwrap_or(Value::Null)
    }

    /// Everything a refused call could have touched, read without faults:
    /// the three lists (with versions) and the plan jobs queued.
    async fn state(&mut self) -> Value {
        let deployments = self.ok(Req::get(DEPLOYMENTS)).await;
        let repositories = self.ok(Req::get(REPOSITORIES)).await;
        let policies = self.ok(Req::get(POLICIES)).await;
        let queued = self
            .moto
            .queue_depth(&self.queue_url)
            .await
            .unwrap_or_else(|e| panic!("cannot read the queue: {e}"));
        json!({"deployments": deployments, "repositories": repositories,
               "policies": policies, "queued": queued})
    }
}

#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Value>,
}

impl Req {
    fn new(method: &str, path: impl Into<String>, body: Option<Value>) -> Req {
        Req {
            method: method.into(),
            path: path.into(),
            headers: Vec::new(),
            body,
        }
    }
    fn get(path: impl Into<String>) -> Req {
        Req::new("GET", path, None)
    }
    fn header(mut self, k: &str, v: &str) -> Req {
        self.headers.push((k.into(), v.into()));
        self
    }
}

/// The operations under test. Each names the list it changes and by how
/// many items a success changes it.
#[derive(Debug, Clone, Copy)]
enum Op {
    CreateDeployment,
    PutRepositoryWithCredentials,
    CreatePolicy,
    UpdatePolicy,
    DeletePolicy,
    UpdateDeploymentTags,
}

const OPS: &[Op] = &[
    Op::CreateDeployment,
    Op::PutRepositoryWithCredentials,
    Op::CreatePolicy,
    Op::UpdatePolicy,
    Op::DeletePolicy,
    Op::UpdateDeploymentTags,
];

/// What the fixed records of a rig are: a repository, a policy on it, a
/// deployment using both.
struct Fixture {
    policy: String,
    deployment: String,
}

fn repository_with_keys() -> Value {
    json!({"type": "s3", "settings": {
        "bucket": "fault-snapshots", "endpoint": "198.51.100.7", "protocol": "https",
        "access_key": "AKIAFAULTTEST", "secret_key": "SECRETKEY-fault-test-0123"}})
}

async fn fixture(rig: &mut Rig) -> Fixture {
    rig.ok(Req::new(
        "PUT",
        format!("{REPOSITORIES}/base"),
        Some(floe_tests::s3_repository("fault-base")),
    ))
    .await;
    let policy = rig
        .ok(Req::new(
            "POST",
            POLICIES,
            Some(floe_tests::policy("base", "base")),
        ))
        .await["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let deployment = rig
        .ok(Req::new(
            "POST",
            DEPLOYMENTS,
            Some(floe_tests::deployment("base", Some("base"), &[])),
        ))
        .await["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!policy.is_empty() && !deployment.is_empty());
    Fixture { policy, deployment }
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::CreateDeployment => "create deployment (idempotency key)",
            Op::PutRepositoryWithCredentials => "put repository with credentials",
            Op::CreatePolicy => "create policy",
            Op::UpdatePolicy => "update policy",
            Op::DeletePolicy => "delete policy",
            Op::UpdateDeploymentTags => "update deployment tags",
        }
    }

    /// (list, items a success adds)
    fn changes(self) -> (&'static str, i64) {
        match self {
            Op::CreateDeployment => ("deployments", 1),
            Op::PutRepositoryWithCredentials => ("repositories", 1),
            Op::CreatePolicy => ("policies", 1),
            Op::UpdatePolicy => ("policies", 0),
            Op::DeletePolicy => ("policies", -1),
            Op::UpdateDeploymentTags => ("deployments", 0),
        }
    }

    /// The request of one cell; set-up it needs runs here, without faults.
    async fn request(self, rig: &mut Rig, fx: &Fixture, n: usize) -> Req {
        match self {
            Op::CreateDeployment => Req::new(
                "POST",
                DEPLOYMENTS,
                Some(floe_tests::deployment(&format!("cell-{n}"), None, &[])),
            )
            .header("idempotency-key", &format!("fault-cell-{n}")),
            Op::PutRepositoryWithCredentials => Req::new(
                "PUT",
                format!("{REPOSITORIES}/cell-{n}"),
                Some(repository_with_keys()),
            ),
            Op::CreatePolicy => Req::new(
                "POST",
                POLICIES,
                Some(floe_tests::policy(&format!("cell-{n}"), "base")),
            ),
            Op::UpdatePolicy => {
                let mut body = floe_tests::policy("base", "base");
                body["schedule"]["interval"] = json!(format!("{}m", 31 + n));
                Req::new("PUT", format!("{POLICIES}/{}", fx.policy), Some(body))
            }
            Op::DeletePolicy => {
                let id = rig
                    .ok(Req::new(
                        "POST",
                        POLICIES,
                        Some(floe_tests::policy(&format!("doomed-{n}"), "base")),
                    ))
                    .await["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                Req::new("DELETE", format!("{POLICIES}/{id}"), None)
            }
            Op::UpdateDeploymentTags => {
                let path = format!("{DEPLOYMENTS}/{}", fx.deployment);
                let mut body = rig.ok(Req::get(&path)).await;
                body["metadata"]["tags"] = json!([{"key": "cell", "value": n.to_string()}]);
                Req::new("PUT", path, Some(body))
            }
        }
    }
}

fn count(state: &Value, list: &str) -> i64 {
    state[list][list].as_array().map_or(-1, |a| a.len() as i64)
}

fn as_reply(req: &Req, a: &HttpAnswer) -> Reply {
    Reply {
        method: req.method.clone(),
        path: req.path.clone(),
        status: a.status,
        headers: a.headers.clone(),
        body: a.body.clone(),
    }
}

/// The services (credential scope names) called while `proxy` counted.
fn services(proxy: &FaultProxy) -> BTreeSet<String> {
    proxy
        .all_calls()
        .keys()
        .filter_map(|k| k.split('/').next().map(str::to_string))
        .collect()
}

/// One cell's verdict: `Ok(finding)` ("503", "success") or what is wrong.
async fn cell(
    rig: &mut Rig,
    fx: &Fixture,
    op: Op,
    n: usize,
    rule: Rule,
) -> Result<&'static str, String> {
    let req = op.request(rig, fx, n).await;
    let before = rig.state().await;
    rig.proxy.add(rule);
    let answer = rig.call(&req).await;
    rig.proxy.clear();
    let after = rig.state().await;
    let (list, delta) = op.changes();
    match answer.status {
        503 => {
            let reply = as_reply(&req, &answer);
            ece_error(&reply)
                .map_err(|p| format!("503 without an ECE body ({p}): {}", answer.describe()))?;
            if let Some(word) = NEVER_SHOWN.iter().find(|w| answer.body.contains(*w)) {
                return Err(format!("the error body shows {word:?}: {}", answer.body));
            }
            if before != after {
                return Err(format!(
                    "a refused call changed the records:\nbefore {before}\nafter  {after}"
                ));
            }
            if let Op::CreateDeployment = op {
                // The key is not spent: the same request now creates it, once.
                let created = rig.ok(req.clone()).await;
                let replayed = rig.ok(req.clone()).await;
                if created["id"] != replayed["id"] {
                    return Err(format!("the key created twice: {created} / {replayed}"));
                }
                let now = rig.state().await;
                if count(&now, list) != count(&before, list) + 1 {
                    return Err(format!("after the retry: {now}"));
                }
            }
            Ok("503")
        }
        s if (200..300).contains(&s) => {
            if count(&after, list) != count(&before, list) + delta {
                return Err(format!(
                    "{s}, but {list} went from {} to {} items",
                    count(&before, list),
                    count(&after, list)
                ));
            }
            if before == after {
                return Err(format!("{s}, but nothing changed: {}", answer.describe()));
            }
            Ok("success")
        }
        _ => Err(format!("neither 503 nor a success: {}", answer.describe())),
    }
}

/// Faults that outlast the SDK's retries. 500 and 503 are classified
/// alike by the SDK; the one-off suite covers 503.
fn persistent_faults() -> Vec<Fault> {
    vec![Fault::Throttle, Fault::Status(500), Fault::Drop]
}

fn one_off_faults() -> Vec<Fault> {
    vec![Fault::Throttle, Fault::Status(503), Fault::Drop]
}

/// `ops` × each service it calls × each persistent fault kind, the fault on
/// every call to that service.
async fn persistent(suite: &str, ops: &[Op]) {
    let mut rig = Rig::start().await;
    let fx = fixture(&mut rig).await;
    let mut cells = 0;
    let mut n = 0;
    let mut findings = std::collections::BTreeMap::<String, u32>::new();
    let mut problems = Vec::new();
    for &op in ops {
        // A run without faults names the services the operation calls.
        n += 1;
        let req = op.request(&mut rig, &fx, n).await;
        rig.proxy.reset_counts();
        rig.ok(req).await;
        let called = services(&rig.proxy);
        for service in &called {
            for fault in persistent_faults() {
                n += 1;
                cells += 1;
                let rule = Rule::new(service, fault.clone()).always();
                let key = format!("{}/{service}/{}", op.name(), fault.name());
                match cell(&mut rig, &fx, op, n, rule).await {
                    Ok(verdict) => {
                        *findings
                            .entry(format!("{}/{service}: {verdict}", op.name()))
                            .or_default() += 1
                    }
                    Err(problem) => problems.push(format!("{key}: {problem}")),
                }
            }
        }
    }
    println!(
        "aws_faults persistent ({suite}): {cells} cells, {} faults injected, {} problems; \
         verdicts {findings:?}",
        rig.proxy.injected(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[tokio::test]
async fn deployments_and_repositories_answer_503_and_change_nothing_when_a_service_keeps_failing() {
    persistent(
        "deployments, repositories",
        &[
            Op::CreateDeployment,
            Op::UpdateDeploymentTags,
            Op::PutRepositoryWithCredentials,
        ],
    )
    .await;
}

#[tokio::test]
async fn policies_answer_503_and_change_nothing_when_a_service_keeps_failing() {
    persistent(
        "policies",
        &[Op::CreatePolicy, Op::UpdatePolicy, Op::DeletePolicy],
    )
    .await;
}

/// A one-off fault (the first call of each service an operation makes) is
/// absorbed by the SDK's own retry: the operation succeeds.
#[tokio::test]
async fn a_one_off_fault_is_absorbed_by_the_sdk_retry() {
    let mut rig = Rig::start().await;
    let fx = fixture(&mut rig).await;
    let mut cells = 0;
    let mut n = 1000;
    let mut problems = Vec::new();
    for &op in OPS {
        n += 1;
        let req = op.request(&mut rig, &fx, n).await;
        rig.proxy.reset_counts();
        rig.ok(req).await;
        let called = services(&rig.proxy);
        for service in &called {
            for fault in one_off_faults() {
                n += 1;
                cells += 1;
                let rule = Rule::new(service, fault.clone()).times(1);
                match cell(&mut rig, &fx, op, n, rule).await {
                    Ok("success") => {}
                    Ok(other) => problems.push(format!(
                        "{}/{service}/{}: {other} after a single fault",
                        op.name(),
                        fault.name()
                    )),
                    Err(problem) => problems.push(format!(
                        "{}/{service}/{}: {problem}",
                        op.name(),
                        fault.name()
                    )),
                }
            }
        }
    }
    println!(
        "aws_faults one-off: {cells} cells, {} faults injected, {} absorbed, {} problems",
        rig.proxy.injected(),
        cells - problems.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A service that takes a call and never answers: the api's own bound on
/// each AWS call (5 s an attempt, 10 s in all, inside the function's 20 s)
/// ends it with a 503 and no change. Before that bound, the call waited as
/// long as the service did (a 25 s delay on DynamoDB: a 201 after 25 s, past
/// the function's timeout, so the gateway's 5xx on Lambda).
#[tokio::test]
async fn a_call_that_never_answers_ends_in_a_503_within_the_function() {
    let mut rig = Rig::start().await;
    let fx = fixture(&mut rig).await;
    let mut problems = Vec::new();
    let cells = [
        (Op::CreateDeployment, "dynamodb"),
        (Op::PutRepositoryWithCredentials, "kms"),
    ];
    for (n, (op, service)) in cells.iter().enumerate() {
        let rule = Rule::new(service, Fault::Delay(Duration::from_secs(60))).always();
        match cell(&mut rig, &fx, *op, 2000 + n, rule).await {
            Ok("503") => {}
            Ok(other) => problems.push(format!("{}/{service}: {other}", op.name())),
            Err(problem) => problems.push(format!("{}/{service}: {problem}", op.name())),
        }
    }
    println!(
        "aws_faults delay: {} cells, {} faults injected, {} problems",
        cells.len(),
        rig.proxy.injected(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
