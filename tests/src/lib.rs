//! Black-box harness: starts the real `floe-local` binary on a free loopback
//! port with its own data folder, talks HTTP to it, and keeps every response
//! and every log line it produced so that tests can search them afterwards.
//!
//! Nothing here links the API's code: what is tested is what ships.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod fault_proxy;
pub mod lambda_emulator;
pub mod moto_server;
pub mod stack;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Issuer and audience the binary uses when nothing configures them.
pub const ISSUER: &str = "floe-local";
pub const AUDIENCE: &str = "floe-api";

/// Long enough for a debug build on a loaded two-core machine, short enough
/// that a hung server fails the test instead of the CI job.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a black-box test waits for the platform to reach a state
/// before it fails: long enough for plans on a loaded two-core machine.
pub const WAIT: Duration = Duration::from_secs(60);

/// How often [`poll_until`] looks again.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// What one look of [`poll_until`] saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Look<T> {
    /// The condition holds: what the wait returns.
    Done(T),
    /// Not yet: what was seen instead, said if the wait runs out.
    NotYet(String),
}

/// Looks with `look` every 20 ms until it sees `Done`; gives up after
/// `within` with `not {what} after … s: {what the last look saw}`. The one
/// polling loop of the black-box tests: each waits through it (or through
/// [`Server::until`], which polls a resource with it).
pub async fn poll_until<T>(
    what: &str,
    within: Duration,
    mut look: impl AsyncFnMut() -> Look<T>,
) -> Result<T, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + within;
    loop {
        let seen = match look().await {
            Look::Done(done) => return Ok(done),
            Look::NotYet(seen) => seen,
        };
        if Instant::now() > deadline {
            return Err(format!("not {what} after {} s: {seen}", within.as_secs()).into());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// A response as the client saw it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// Names are lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics with the request and body when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} {} answered {} with a body that is not JSON ({e}): {:?}",
                self.method, self.path, self.status, self.body
            )
        })
    }

    /// Panics unless the status is `status`, showing the whole response.
    pub fn expect_status(&self, status: u16) -> &Reply {
        assert_eq!(
            self.status, status,
            "{} {}: expected {status}, got {} with headers {:?} and body {}",
            self.method, self.path, self.status, self.headers, self.body
        );
        self
    }

    /// The `code`s of an ECE error body (empty when the body is not one).
    pub fn error_codes(&self) -> Vec<String> {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|v| v.get("errors").and_then(Value::as_array).cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e.get("code").and_then(Value::as_str).map(str::to_string))
            .collect()
    }

    pub fn describe(&self) -> String {
        format!(
            "{} {} -> {} headers={:?} body={}",
            self.method, self.path, self.status, self.headers, self.body
        )
    }
}

/// One request. The path is sent exactly as written (it may carry a query
/// and percent-escapes).
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// Send over a plain TCP socket instead of reqwest, so that the path
    /// reaches the server byte for byte: an HTTP client library resolves
    /// `..` segments (also written `%2e%2e`) before sending.
    pub raw: bool,
}

impl Call {
    pub fn new(method: &str, path: impl Into<String>) -> Call {
        Call {
            method: method.to_string(),
            path: path.into(),
            headers: Vec::new(),
            body: None,
            raw: false,
        }
    }

    pub fn get(path: impl Into<String>) -> Call {
        Call::new("GET", path)
    }

    pub fn post(path: impl Into<String>) -> Call {
        Call::new("POST", path)
    }

    pub fn put(path: impl Into<String>) -> Call {
        Call::new("PUT", path)
    }

    pub fn delete(path: impl Into<String>) -> Call {
        Call::new("DELETE", path)
    }

    pub fn bearer(self, token: &str) -> Call {
        self.header("authorization", &format!("Bearer {token}"))
    }

    pub fn header(mut self, name: &str, value: &str) -> Call {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// A JSON body with `Content-Type: application/json`.
    pub fn json(self, body: &Value) -> Call {
        self.header("content-type", "application/json")
            .bytes(body.to_string().into_bytes())
    }

    /// A body without any content type (add one with `header`).
    pub fn bytes(mut self, body: Vec<u8>) -> Call {
        self.body = Some(body);
        self
    }

    pub fn raw(mut self) -> Call {
        self.raw = true;
        self
    }
}

/// A running deployment as its user reaches it: its endpoint, the CA that
/// verifies it, and the `elastic` password from the create's answer.
pub struct Reachable {
    pub id: String,
    pub endpoint: String,
    pub ca_certificate: String,
    pub password: String,
}

/// The running binary. Dropping it kills the process.
pub struct Server {
    child: Child,
    bin: PathBuf,
    base: String,
    addr: String,
    data_dir: tempfile::TempDir,
    extra_env: Vec<(String, String)>,
    logs: Arc<Mutex<Vec<String>>>,
    seen: Arc<Mutex<Vec<Reply>>>,
    client: reqwest::Client,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not hide what the server said.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `target/<profile>/floe-local` (local mode: the whole platform in one
/// process), next to the test executable's `deps` folder.
pub fn binary() -> PathBuf {
    built_binary("floe-local")
}

/// `target/<profile>/<name>`: a workspace binary built with the same profile
/// and target directory as the running test (or benchmark) executable.
/// Panics when it is missing or older than its sources.
pub fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| panic!("cannot find the test executable's own path: {e}"));
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("unexpected test executable location {}", exe.display()));
    let bin = profile_dir.join(name);
    if !bin.is_file() {
        panic!(
            "the {name} binary is missing at {}: the black-box tests run the real binary, \
             which `cargo test` does not build. Run `cargo build --workspace` first \
             (with the same CARGO_TARGET_DIR), or run scripts/test.sh",
            bin.display()
        );
    }
    check_fresh(&bin);
    bin
}

/// Refuses to test a binary older than the sources it is built from: a stale
/// binary makes every result here meaningless. Cargo lists those sources in
/// the dep-info file next to the binary; files outside the workspace (the
/// registry) never change in place, so only the workspace's are compared.
fn check_fresh(bin: &Path) {
    let Ok(built) = bin.metadata().and_then(|m| m.modified()) else {
        return;
    };
    let Ok(dep_info) = std::fs::read_to_string(bin.with_extension("d")) else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let sources = dep_info.split_once(": ").map(|(_, s)| s).unwrap_or("");
    // Make-style escapes: a space inside a path is written `\ `.
    let sources = sources.replace("\\ ", "\u{0}");
    for source in sources.split_whitespace() {
        let path = PathBuf::from(source.replace('\u{0}', " "));
        if !path.starts_with(&root) {
            continue;
        }
        let Ok(changed) = path.metadata().and_then(|m| m.modified()) else {
            continue;
        };
        if changed > built {
            panic!(
                "{} is older than {}: rebuild it with `cargo build --workspace` \
                 (with the same CARGO_TARGET_DIR) or run scripts/test.sh",
                bin.display(),
                path.display()
            );
        }
    }
}

impl Server {
    /// Local mode with SQLite in a fresh temporary folder.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Local mode whose simulated nodes boot and stop within tens of
    /// milliseconds and whose plans look again every 20 ms: for tests that
    /// drive deployments through whole plans.
    pub fn start_quick() -> Server {
        Server::start_quick_with(&[])
    }

    /// As [`Server::start_quick`], with `extra` environment over it: say
    /// `FLOE_SWEEP_INTERVAL_MS` for a health check every few hundred
    /// milliseconds, for tests that wait for what it writes.
    pub fn start_quick_with(extra: &[(&str, &str)]) -> Server {
        let mut env = vec![
            ("FLOE_SIM_BOOT_DELAY_MS", "50"),
            ("FLOE_SIM_TERMINATE_DELAY_MS", "20"),
            ("FLOE_PLAN_POLL_MS", "20"),
        ];
        // Later values of a name win (`Command::env`).
        env.extend_from_slice(extra);
        Server::start_with(&env)
    }

    /// Polls the resource at `path` until `done` says so of its body;
    /// gives up after [`WAIT`], naming `what` it waited for.
    pub async fn until(
        &self,
        token: &str,
        path: &str,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Result<Value, Box<dyn std::error::Error>> {
        poll_until(what, WAIT, async || {
            let d = self.call(Call::get(path).bearer(token)).await;
            let d = d.expect_status(200).json();
            if done(&d) {
                Look::Done(d)
            } else {
                Look::NotYet(d.to_string())
            }
        })
        .await
    }

    /// Reads the resource at `path`, lets `change` edit the body read and
    /// PUTs the whole body back, as a client that sends a GET body back
    /// does; expects 200 and returns its body. A write between the read
    /// and the PUT (a plan ending, a health check starting a heal) is a
    /// 412, as for any client: it reads again, five times at the most.
    pub async fn put_changed(
        &self,
        token: &str,
        path: &str,
        mut change: impl FnMut(&mut Value) -> TestResult,
    ) -> Result<Value, Box<dyn std::error::Error>> {
        for _ in 0..5 {
            let read = self.call(Call::get(path).bearer(token)).await;
            let mut body = read.expect_status(200).json();
            change(&mut body)?;
            let put = self.call(Call::put(path).bearer(token).json(&body)).await;
            if put.status == 412 {
                continue;
            }
            assert_eq!(put.status, 200, "{}", put.describe());
            return Ok(put.json());
        }
        Err(format!("{path} changed under every read").into())
    }

    /// Creates a one-node 8.15.3 deployment named `name`, snapshotting to
    /// `repository`, and waits until it runs: how its user reaches it.
    pub async fn reachable_deployment(
        &self,
        token: &str,
        name: &str,
        repository: &str,
    ) -> Result<Reachable, Box<dyn std::error::Error>> {
        let created = self
            .call(Call::post(DEPLOYMENTS).bearer(token).json(&json!({
                "name": name,
                "version": "8.15.3",
                "node_groups": [{
                    "id": "hot",
                    "roles": ["master", "data_hot", "data_content", "ingest"],
                    "instance_type": "m6g.large",
                    "count": 1,
                    "zone_count": 1,
                    "storage": {"size_gb": 50}
                }],
                "snapshot": {"repository": repository}
            })))
            .await
            .expect_status(201)
            .json();
        let id = created["id"].as_str().ok_or("no id")?.to_string();
        let password = created["credentials"]["password"]
            .as_str()
            .ok_or("no password in the create's answer")?
            .to_string();
        let d = self
            .until(token, &format!("{DEPLOYMENTS}/{id}"), "running", |d| {
                d["plans"]["pending"].is_null() && d["status"] == json!("running")
            })
            .await?;
        let es = &d["elasticsearch"];
        Ok(Reachable {
            id,
            password,
            endpoint: es["endpoint"].as_str().ok_or("no endpoint")?.to_string(),
            ca_certificate: es["ca_certificate"].as_str().ok_or("no CA")?.to_string(),
        })
    }

    /// Creates a deployment from `body` with `token`, expecting 201; its id.
    pub async fn create_deployment(
        &self,
        token: &str,
        body: &Value,
    ) -> Result<String, Box<dyn std::error::Error>> {
        let created = self
            .call(Call::post(DEPLOYMENTS).bearer(token).json(body))
            .await;
        Ok(created.expect_status(201).json()["id"]
            .as_str()
            .ok_or("no id in the created deployment")?
            .to_string())
    }

    /// Writes the `fs` repository `name` at `location` (under the data
    /// folder's repositories/{organization}/) with a platform admin's `token`.
    pub async fn put_fs_repository(&self, token: &str, name: &str, location: &str) {
        let put = self
            .call(
                Call::put(format!("{REPOSITORIES}/{name}"))
                    .bearer(token)
                    .json(&json!({"type": "fs", "settings": {"location": location}})),
            )
            .await;
        assert!([200, 201].contains(&put.status), "{}", put.describe());
    }

    /// As `start`, with extra environment (e.g. a DynamoDB store).
    pub fn start_with(extra_env: &[(&str, &str)]) -> Server {
        let bin = binary();
        let data_dir = tempfile::Builder::new()
            .prefix("floe-bb-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary data folder: {e}"));
        let extra_env: Vec<(String, String)> = extra_env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (child, addr) = spawn(&bin, data_dir.path(), &extra_env, &logs);
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_else(|e| panic!("cannot build the HTTP client: {e}"));
        Server {
            child,
            bin,
            base: format!("http://{addr}"),
            addr,
            data_dir,
            extra_env,
            logs,
            seen: Arc::new(Mutex::new(Vec::new())),
            client,
        }
    }

    /// Stops the process as an operator does (SIGINT, Ctrl-C), or kills it
    /// outright when `kill` says so (SIGKILL: a crash or a power cut), and
    /// starts the binary again on the same data folder and environment. It
    /// listens on a new port; its log lines follow the old ones.
    pub fn restart(&mut self, kill: bool) {
        if kill {
            let _ = self.child.kill();
        } else {
            let stopped = Command::new("kill")
                .args(["-INT", &self.child.id().to_string()])
                .status();
            assert!(
                stopped.is_ok_and(|s| s.success()),
                "cannot send SIGINT to floe-local"
            );
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => panic!(
                    "floe-local did not stop within {START_TIMEOUT:?}; stderr:\n{}",
                    lock(&self.logs).join("\n")
                ),
            }
        }
        let (child, addr) = spawn(&self.bin, self.data_dir.path(), &self.extra_env, &self.logs);
        self.child = child;
        self.base = format!("http://{addr}");
        self.addr = addr;
    }

    /// The binary on a fresh DynamoDB table at `FLOE_TEST_AWS_ENDPOINT`
    /// (moto, as scripts/test.sh starts it). Panics when that is not set:
    /// a skipped backend would look like a passing one.
    pub fn start_dynamodb() -> Server {
        let Ok(endpoint) = std::env::var("FLOE_TEST_AWS_ENDPOINT") else {
            panic!(
                "FLOE_TEST_AWS_ENDPOINT is not set, so the DynamoDB run cannot happen. \
                 Run scripts/test.sh, which starts moto on 127.0.0.1 and sets it \
                 (or start moto yourself and export FLOE_TEST_AWS_ENDPOINT=http://127.0.0.1:PORT)"
            );
        };
        assert!(
            endpoint.starts_with("http://127.0.0.1:") || endpoint.starts_with("http://localhost:"),
            "FLOE_TEST_AWS_ENDPOINT={endpoint}: the tests only talk to a local endpoint"
        );
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let store = format!("dynamodb://floe-bb-{}-{nanos}", std::process::id());
        Server::start_with(&[
            ("FLOE_STORE", &store),
            ("FLOE_CREATE_TABLE", "1"),
            ("AWS_ENDPOINT_URL", &endpoint),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ])
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// The process id of the running `floe-local` (to read its memory).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The `floe-local` binary this server runs.
    pub fn binary(&self) -> &Path {
        &self.bin
    }

    /// Every stderr line so far (JSON log lines).
    pub fn logs(&self) -> Vec<String> {
        lock(&self.logs).clone()
    }

    /// Every response so far.
    pub fn seen(&self) -> Vec<Reply> {
        lock(&self.seen).clone()
    }

    /// A token from `floe-local token`, signed with the same local secret as
    /// the server's (same data folder).
    pub fn token(&self, org: &str, roles: &[&str]) -> String {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("token").arg("--org").arg(org);
        for r in roles {
            cmd.arg("--role").arg(r);
        }
        configure_env(&mut cmd, self.data_dir.path(), &self.extra_env);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run floe-local token: {e}"));
        assert!(
            out.status.success(),
            "floe-local token --org {org} {roles:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(token.split('.').count(), 3, "not a JWT: {token:?}");
        token
    }

    /// The server's local HS256 secret.
    pub fn jwt_secret(&self) -> Vec<u8> {
        let path = self.data_dir.path().join("jwt.secret");
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    /// Claims of a valid token, to be altered by the caller.
    pub fn claims(org: &str, roles: &[&str]) -> Value {
        let now = now_secs();
        json!({
            "sub": "black-box",
            "org": org,
            "roles": roles,
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + 3600,
        })
    }

    /// Signs `claims` with HS256 and `secret`.
    pub fn sign_with(secret: &[u8], claims: &Value) -> String {
        let key = jsonwebtoken::EncodingKey::from_secret(secret)
            .unwrap_or_else(|e| panic!("cannot make an HS256 key: {e}"));
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            claims,
            &key,
        )
        .unwrap_or_else(|e| panic!("cannot sign a token: {e}"))
    }

    /// Signs `claims` with the server's own secret.
    pub fn sign(&self, claims: &Value) -> String {
        Server::sign_with(&self.jwt_secret(), claims)
    }

    /// Valid in every way but `exp`, an hour ago (far beyond any leeway).
    pub fn expired_token(&self, org: &str, roles: &[&str]) -> String {
        let mut c = Server::claims(org, roles);
        c["iat"] = json!(now_secs() - 7200);
        c["exp"] = json!(now_secs() - 3600);
        self.sign(&c)
    }

    /// Signed by the project's own issuing code, for another service.
    pub fn wrong_audience_token(&self, org: &str, roles: &[&str]) -> String {
        let roles: Vec<floe_auth::Role> = roles
            .iter()
            .map(|r| floe_auth::Role::parse(r).unwrap_or_else(|| panic!("unknown role {r}")))
            .collect();
        floe_auth::issue_hs256(
            &self.jwt_secret(),
            ISSUER,
            "some-other-service",
            "black-box",
            org,
            &roles,
            Duration::from_secs(3600),
        )
        .unwrap_or_else(|e| panic!("cannot issue a token: {e}"))
    }

    /// Unsigned, `alg: none`: the classic forgery.
    pub fn alg_none_token(org: &str, roles: &[&str]) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let claims = URL_SAFE_NO_PAD.encode(Server::claims(org, roles).to_string());
        format!("{header}.{claims}.")
    }

    /// Well-formed and unexpired, but signed with a secret the server never saw.
    pub fn foreign_secret_token(org: &str, roles: &[&str]) -> String {
        Server::sign_with(
            b"not-the-server-secret-0123456789abcdef",
            &Server::claims(org, roles),
        )
    }

    /// Sends `call`; records and returns the response. Panics on transport
    /// errors: every request here must get an HTTP answer.
    pub async fn call(&self, call: Call) -> Reply {
        let reply = if call.raw {
            self.send_raw(&call).await
        } else {
            self.send(&call).await
        };
        lock(&self.seen).push(reply.clone());
        reply
    }

    async fn send(&self, call: &Call) -> Reply {
        let method = reqwest::Method::from_bytes(call.method.as_bytes())
            .unwrap_or_else(|e| panic!("bad method {}: {e}", call.method));
        let mut req = self
            .client
            .request(method, format!("{}{}", self.base, call.path));
        for (k, v) in &call.headers {
            req = req.header(k, v);
        }
        if let Some(b) = &call.body {
            req = req.body(b.clone());
        }
        let res = req.send().await.unwrap_or_else(|e| {
            panic!(
                "{} {} got no HTTP answer: {e:?}\nserver log tail:\n{}",
                call.method,
                call.path,
                self.log_tail(20)
            )
        });
        let status = res.status().as_u16();
        let headers = res
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = res.bytes().await.unwrap_or_else(|e| {
            panic!(
                "{} {}: cannot read the response body: {e}",
                call.method, call.path
            )
        });
        Reply {
            method: call.method.clone(),
            path: call.path.clone(),
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    async fn send_raw(&self, call: &Call) -> Reply {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut head = format!(
            "{} {} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n",
            call.method, call.path, self.addr
        );
        for (k, v) in &call.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = call.body.clone().unwrap_or_default();
        if call.body.is_some() {
            head.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(&self.addr).await?;
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        let response = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| panic!("{} {} timed out", call.method, call.path))
            .unwrap_or_else(|e| panic!("{} {} failed: {e}", call.method, call.path));
        parse_raw_response(call, &response)
    }

    fn log_tail(&self, n: usize) -> String {
        let logs = lock(&self.logs);
        let start = logs.len().saturating_sub(n);
        logs[start..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `floe-local serve` on a free loopback port with `data_dir` and
/// `extra` environment, its stderr lines appended to `logs`; the child and
/// the address it announced.
fn spawn(
    bin: &Path,
    data_dir: &Path,
    extra: &[(String, String)],
    logs: &Arc<Mutex<Vec<String>>>,
) -> (Child, String) {
    let mut cmd = Command::new(bin);
    cmd.arg("serve");
    configure_env(&mut cmd, data_dir, extra);
    cmd.env("FLOE_LISTEN", "127.0.0.1:0")
        // The most verbose level: the leak test wants every line there is.
        .env("FLOE_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    if let Some(stderr) = child.stderr.take() {
        let logs = logs.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                lock(&logs).push(text);
                line.clear();
            }
        });
    }
    let (tx, rx) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let _ = tx.send(first);
            // Keep draining so that the server never blocks on a full pipe.
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        });
    }
    let first: String = rx.recv_timeout(START_TIMEOUT).unwrap_or_default();
    let addr = first
        .trim()
        .strip_prefix("floe-local listening on http://")
        .map(str::to_string);
    let Some(addr) = addr else {
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(200));
        panic!(
            "floe-local did not announce its address (first stdout line {first:?}); stderr:\n{}",
            lock(logs).join("\n")
        );
    };
    if !addr.starts_with("127.0.0.1:") {
        let _ = child.kill();
        let _ = child.wait();
        panic!("floe-local listens on {addr}, not on loopback");
    }
    (child, addr)
}

/// The child sees only the configuration a test gives it: variables that
/// would select another store, key, identity provider or AWS account (real
/// credentials, profiles, endpoints) are removed.
fn configure_env(cmd: &mut Command, data_dir: &Path, extra: &[(String, String)]) {
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if name.starts_with("FLOE_") || name.starts_with("AWS_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env("FLOE_DATA_DIR", data_dir);
    // Local mode runs plans on simulated instances. Booting them for an hour
    // keeps every create plan in flight for the whole test, which is the
    // state the API's rules are about (record-only changes allowed, cluster
    // changes refused, no delete); a test that needs plans to finish sets
    // its own value.
    cmd.env("FLOE_SIM_BOOT_DELAY_MS", "3600000");
    // Each server its own S3 store, on a free port (its address and keys
    // are in the data folder's s3.env).
    cmd.env("FLOE_LOCAL_S3", "127.0.0.1:0");
    for (k, v) in extra {
        cmd.env(k, v);
    }
}

fn parse_raw_response(call: &Call, bytes: &[u8]) -> Reply {
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "{} {}: no HTTP response head in {:?}",
                call.method,
                call.path,
                String::from_utf8_lossy(bytes)
            )
        });
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let mut body = bytes[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("{} {}: bad status line in {head:?}", call.method, call.path));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"))
    {
        body = dechunk(&body);
    }
    Reply {
        method: call.method.clone(),
        path: call.path.clone(),
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size_text, 16) else {
            break;
        };
        rest = &rest[eol + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        out.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or(&[]);
    }
    out
}

pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Checks the ECE error shape: a JSON body `{"errors":[{"code","message",
/// "fields"?}]}` and `x-cloud-error-codes` naming every code. Returns the
/// error items, or what is wrong with the response.
pub fn ece_error(r: &Reply) -> Result<Vec<Value>, String> {
    let ct = r.header("content-type").unwrap_or("");
    if !ct.starts_with("application/json") {
        return Err(format!("error response is not JSON (content-type {ct:?})"));
    }
    let body: Value =
        serde_json::from_str(&r.body).map_err(|e| format!("error body is not JSON ({e})"))?;
    let Some(obj) = body.as_object() else {
        return Err("error body is not an object".into());
    };
    if !obj.keys().all(|k| k == "errors") {
        return Err("error body has keys besides `errors`".into());
    }
    let errors = obj
        .get("errors")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if errors.is_empty() {
        return Err("error body has no `errors` entries".into());
    }
    for e in &errors {
        let code = e.get("code").and_then(Value::as_str).unwrap_or("");
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        if code.is_empty() || !code.contains('.') {
            return Err(format!("error item without a namespaced `code`: {e}"));
        }
        if message.is_empty() {
            return Err(format!("error item without a `message`: {e}"));
        }
        if let Some(fields) = e.get("fields")
            && !fields
                .as_array()
                .is_some_and(|f| f.iter().all(Value::is_string))
        {
            return Err(format!("`fields` is not a list of strings: {e}"));
        }
    }
    let Some(header) = r.header("x-cloud-error-codes") else {
        return Err("error response without x-cloud-error-codes".into());
    };
    let listed: Vec<&str> = header.split(',').map(str::trim).collect();
    for code in r.error_codes() {
        if !listed.contains(&code.as_str()) {
            return Err(format!(
                "x-cloud-error-codes {header:?} does not list {code}"
            ));
        }
    }
    Ok(errors)
}

/// `ece_error`, panicking with the whole response when the shape is wrong.
pub fn assert_ece_error(r: &Reply) -> Vec<Value> {
    ece_error(r).unwrap_or_else(|problem| panic!("{problem}: {}", r.describe()))
}

/// Every JSON value in the error items' `fields`.
pub fn error_fields(errors: &[Value]) -> Vec<String> {
    errors
        .iter()
        .flat_map(|e| {
            e.get("fields")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

// ---- request bodies a user would send ----

pub const REPOSITORIES: &str = "/api/v1/platform/configuration/snapshots/repositories";
pub const DEPLOYMENTS: &str = "/api/v1/deployments";
pub const POLICIES: &str = "/api/v1/snapshot-policies";
pub const INSTANCE_TYPES: &str = "/api/v1/platform/configuration/instance-types";

/// The FlashBlade guide's repository body, as the walk-through in
/// docs/getting-started.md sends it, with fixed keys and endpoint.
pub const FLASHBLADE_REPOSITORY: &str = r#"{"type":"s3","settings":{"max_restore_bytes_per_sec":"1gb","max_snapshot_bytes_per_sec":"150mb","access_key":"XXXXX","secret_key":"YYYYY","bucket":"elastic-snapshots","endpoint":"1.2.3.4","protocol":"http"}}"#;

pub fn s3_repository(bucket: &str) -> Value {
    json!({"type": "s3", "settings": {
        "bucket": bucket, "endpoint": "198.51.100.7", "protocol": "https",
        "path_style_access": true, "max_snapshot_bytes_per_sec": "150mb",
        "max_restore_bytes_per_sec": "1gb"}})
}

/// A valid Graviton deployment; `repository` and `policies` attach snapshots.
pub fn deployment(name: &str, repository: Option<&str>, policies: &[&str]) -> Value {
    let mut d = json!({
        "name": name,
        "version": "8.15.3",
        "node_groups": [{
            "id": "hot",
            "roles": ["master", "data_hot", "data_content", "ingest"],
            "instance_type": "m6g.xlarge",
            "count": 3,
            "zone_count": 3,
            "storage": {"size_gb": 200, "volume_type": "gp3"}
        }],
        "user_settings": {"thread_pool.snapshot.max": 8},
        "metadata": {"tags": [{"key": "team", "value": "search"}]}
    });
    if let Some(r) = repository {
        d["snapshot"] = json!({"repository": r, "policies": policies});
    } else if !policies.is_empty() {
        d["snapshot"] = json!({"policies": policies});
    }
    d
}

pub fn policy(name: &str, repository: &str) -> Value {
    json!({
        "name": name,
        "schedule": {"interval": "30m"},
        "snapshot_name": "<floe-{now/d}>",
        "repository": repository,
        "indices": ["logs-*"],
        "include_global_state": false,
        "retention": {"expire_after": "7d", "min_count": 5, "max_count": 100},
        "enabled": true
    })
}
