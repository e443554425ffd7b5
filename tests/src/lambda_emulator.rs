//! A stand-in for the Lambda service, for starting a function's real binary
//! the way Lambda starts `bootstrap` and handing it events.
//!
//! The emulator serves the Lambda Runtime API (2018-06-01) on a loopback
//! port: `GET /runtime/invocation/next` long-polls for the next event and
//! answers it with the headers the runtime client reads (request id,
//! deadline, function ARN, trace id); the function posts its result to
//! `/runtime/invocation/{id}/response` or `/error`, or reports a failed start
//! to `/runtime/init/error`. The binary runs with an environment made from
//! scratch, as on Lambda: only the variables Lambda sets, plus the function's
//! own configuration. Nothing inherited from the test's environment (an AWS
//! profile, a proxy, real credentials) reaches it.
//!
//! ```ignore
//! let function = Function::built("floe-worker")
//!     .env("FLOE_STORE", "dynamodb://floe")
//!     .start()
//!     .await?;
//! let answer = function.invoke(&json!({"sweep": true})).await?;
//! assert_eq!(answer.response_json()["requeued"], 0);
//! ```

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;

const API: &str = "/2018-06-01/runtime";

/// The account and region the emulated functions pretend to live in.
pub const ACCOUNT: &str = "123456789012";
pub const REGION: &str = "us-east-1";

/// Time for a debug build on a loaded two-core machine to start and answer,
/// on top of the function's own timeout.
const GRACE: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("cannot serve the runtime API: {0}")]
    Listen(#[source] std::io::Error),
    #[error("cannot start {path}: {source}")]
    Spawn {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no answer within {0:?}; function output:\n{1}")]
    Timeout(Duration, String),
    #[error("the emulator stopped while an invocation was in flight")]
    Stopped,
}

/// What a function needs to run: its binary, name, memory, timeout and
/// environment. The environment is the function's configuration (what a
/// template's `Environment.Variables` holds); Lambda's own variables are
/// added by [`Function::start`].
#[derive(Debug, Clone)]
pub struct Function {
    binary: PathBuf,
    name: String,
    memory_mb: u32,
    timeout: Duration,
    env: Vec<(String, String)>,
    /// Names the function resolves from this file instead of /etc/hosts.
    hosts: Option<PathBuf>,
}

impl Function {
    /// A workspace binary built alongside the running test (see
    /// [`crate::built_binary`]), named after it.
    pub fn built(binary: &str) -> Function {
        Function::at(crate::built_binary(binary), binary)
    }

    /// Any binary, as function `name`.
    pub fn at(binary: impl Into<PathBuf>, name: &str) -> Function {
        Function {
            binary: binary.into(),
            name: name.to_string(),
            memory_mb: 512,
            timeout: Duration::from_secs(30),
            env: Vec::new(),
            hosts: None,
        }
    }

    pub fn env(mut self, name: &str, value: impl Into<String>) -> Function {
        self.env.push((name.to_string(), value.into()));
        self
    }

    pub fn memory_mb(mut self, mb: u32) -> Function {
        self.memory_mb = mb;
        self
    }

    /// The function's timeout: each invocation's deadline is this far away.
    pub fn timeout(mut self, timeout: Duration) -> Function {
        self.timeout = timeout;
        self
    }

    /// Runs the function with `hosts` as its `/etc/hosts`, in a mount
    /// namespace of its own (`unshare --mount`, which needs root): what a
    /// function in a VPC gets from the VPC's resolver for a private hosted
    /// zone's names, the test serves by rewriting the file in place (the
    /// bind mount follows the file's contents, not its name).
    pub fn with_hosts(mut self, hosts: impl Into<PathBuf>) -> Function {
        self.hosts = Some(hosts.into());
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn arn(&self) -> String {
        format!("arn:aws:lambda:{REGION}:{ACCOUNT}:function:{}", self.name)
    }

    /// Serves the runtime API on a free loopback port and starts the binary
    /// against it. The process is killed when the returned value is dropped.
    pub async fn start(self) -> Result<Running, EmulatorError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(EmulatorError::Listen)?;
        let addr = listener.local_addr().map_err(EmulatorError::Listen)?;
        let (event_tx, event_rx) = unbounded_channel();
        let (report_tx, reports) = unbounded_channel();
        let shared = Arc::new(Shared {
            events: tokio::sync::Mutex::new(event_rx),
            outstanding: Mutex::new(HashSet::new()),
            reports: report_tx.clone(),
        });
        let app = Router::new()
            .route(&format!("{API}/invocation/next"), get(next))
            .route(&format!("{API}/invocation/{{id}}/response"), post(response))
            .route(
                &format!("{API}/invocation/{{id}}/error"),
                post(invocation_error),
            )
            .route(&format!("{API}/init/error"), post(init_error))
            .fallback(unknown_route)
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });

        let task_root = self
            .binary
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut cmd = match &self.hosts {
            None => tokio::process::Command::new(&self.binary),
            Some(hosts) => {
                // unshare execs the shell, which execs the binary: the
                // process the test sees (and kills) is the function's.
                let mut cmd = tokio::process::Command::new("/usr/bin/unshare");
                cmd.args(["--mount", "--propagation", "private", "--"])
                    .args([
                        "/bin/sh",
                        "-c",
                        r#"mount --bind "$0" /etc/hosts && exec "$1""#,
                    ])
                    .arg(hosts)
                    .arg(&self.binary);
                cmd
            }
        };
        cmd.env_clear();
        for (k, v) in lambda_environment(&self, &addr.to_string(), &task_root) {
            cmd.env(k, v);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.current_dir(&task_root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let spawned_at = Instant::now();
        let mut child = cmd.spawn().map_err(|source| EmulatorError::Spawn {
            path: self.binary.display().to_string(),
            source,
        })?;
        let pid = child.id();

        // Lambda sends both streams to the function's log.
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(collect_lines(out, output.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(collect_lines(err, output.clone()));
        }
        let (kill, killed) = oneshot::channel::<()>();
        tokio::spawn(async move {
            tokio::select! {
                status = child.wait() => {
                    if let Ok(status) = status {
                        let _ = report_tx.send(Report::Exited(status));
                    }
                }
                _ = killed => {
                    let _ = child.kill().await;
                }
            }
        });

        Ok(Running {
            function: self,
            shared,
            events: event_tx,
            reports,
            output,
            readers,
            server,
            _kill: kill,
            spawned_at,
            first_poll_at: None,
            exited: None,
            pid,
        })
    }
}

/// The variables Lambda sets for a custom runtime (`provided.al2023`). The
/// credentials are dummies: tests only ever reach loopback endpoints.
fn lambda_environment(f: &Function, runtime_api: &str, task_root: &Path) -> Vec<(String, String)> {
    let stream = format!(
        "{}/[$LATEST]{:032x}",
        chrono_free_date(),
        unique() as u128 * 0x9e37_79b9_7f4a_7c15
    );
    [
        ("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", f.name.clone()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", f.memory_mb.to_string()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_string()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{}", f.name),
        ),
        ("AWS_LAMBDA_LOG_STREAM_NAME", stream),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_string()),
        ("AWS_REGION", REGION.to_string()),
        ("AWS_DEFAULT_REGION", REGION.to_string()),
        ("AWS_ACCESS_KEY_ID", "ASIAEMULATOREXAMPLE0".to_string()),
        (
            "AWS_SECRET_ACCESS_KEY",
            "emulator-secret-access-key".to_string(),
        ),
        ("AWS_SESSION_TOKEN", "emulator-session-token".to_string()),
        ("_HANDLER", "bootstrap".to_string()),
        ("LAMBDA_TASK_ROOT", task_root.display().to_string()),
        ("LAMBDA_RUNTIME_DIR", task_root.display().to_string()),
        ("TZ", ":UTC".to_string()),
        ("LANG", "en_US.UTF-8".to_string()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `YYYY/MM/DD` of today (UTC), as in Lambda's log stream names.
fn chrono_free_date() -> String {
    let days = now_ms() / 86_400_000;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}/{month:02}/{day:02}")
}

fn collect_lines(
    stream: impl AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<Vec<String>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            crate::lock(&into).push(line);
        }
    })
}

/// A started function.
pub struct Running {
    function: Function,
    shared: Arc<Shared>,
    events: UnboundedSender<Pending>,
    reports: UnboundedReceiver<Report>,
    output: Arc<Mutex<Vec<String>>>,
    /// The tasks copying the process's output, done at its end of file.
    readers: Vec<tokio::task::JoinHandle<()>>,
    server: tokio::task::JoinHandle<()>,
    /// Dropping it kills the process.
    _kill: oneshot::Sender<()>,
    spawned_at: Instant,
    first_poll_at: Option<Instant>,
    exited: Option<ExitStatus>,
    /// The process id, while it runs (benchmarks read its memory in /proc).
    pid: Option<u32>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Running {
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// The function's process id (absent if it had already exited at spawn).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// When the process was spawned: cold-start figures count from here.
    pub fn spawned_at(&self) -> Instant {
        self.spawned_at
    }

    /// When the function first asked for an event (its init phase ended),
    /// once an invocation has seen it.
    pub fn first_poll_at(&self) -> Option<Instant> {
        self.first_poll_at
    }

    /// Everything the process wrote to stdout and stderr so far.
    pub fn output(&self) -> Vec<String> {
        crate::lock(&self.output).clone()
    }

    fn output_tail(&self) -> String {
        let lines = self.output();
        let start = lines.len().saturating_sub(40);
        lines[start..].join("\n")
    }

    /// Hands `event` to the function as the next invocation and waits for
    /// its outcome: a response, an error, a failed init, or the process
    /// exiting. Errors only when the emulator itself cannot go on (no answer
    /// in time).
    pub async fn invoke(&mut self, event: &Value) -> Result<Invocation, EmulatorError> {
        let request_id = request_id();
        let deadline_ms = now_ms() + self.function.timeout.as_millis() as u64;
        crate::lock(&self.shared.outstanding).insert(request_id.clone());
        let sent_at = Instant::now();
        if let Some(status) = self.exited {
            return Ok(self.invocation(request_id, sent_at, Outcome::Exited(status)));
        }
        self.events
            .send(Pending {
                request_id: request_id.clone(),
                deadline_ms,
                arn: self.function.arn(),
                body: event.to_string(),
            })
            .map_err(|_| EmulatorError::Stopped)?;
        let wait = self.function.timeout + GRACE;
        let outcome = loop {
            let report = match tokio::time::timeout(wait, self.reports.recv()).await {
                Ok(Some(report)) => report,
                Ok(None) => return Err(EmulatorError::Stopped),
                Err(_) => return Err(EmulatorError::Timeout(wait, self.output_tail())),
            };
            match report {
                Report::Polled(at) => {
                    self.first_poll_at.get_or_insert(at);
                }
                Report::Response { id, body, at } if id == request_id => {
                    break Outcome::Response { body, at };
                }
                Report::Error { id, error, at } if id == request_id => {
                    break Outcome::Error { error, at };
                }
                Report::InitError(error) => break Outcome::InitError(error),
                Report::Exited(status) => {
                    self.exited = Some(status);
                    // Its last words (why it stopped) may still be in the pipes.
                    for reader in self.readers.drain(..) {
                        let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
                    }
                    break Outcome::Exited(status);
                }
                Report::Protocol(problem) => break Outcome::ProtocolViolation(problem),
                // An answer to an earlier invocation that timed out here.
                Report::Response { .. } | Report::Error { .. } => {}
            }
        };
        crate::lock(&self.shared.outstanding).remove(&request_id);
        Ok(self.invocation(request_id, sent_at, outcome))
    }

    fn invocation(&self, request_id: String, sent_at: Instant, outcome: Outcome) -> Invocation {
        Invocation {
            function: self.function.name.clone(),
            request_id,
            sent_at,
            outcome,
            output: self.output_tail(),
        }
    }
}

/// One invocation's result.
#[derive(Debug)]
pub struct Invocation {
    pub function: String,
    pub request_id: String,
    pub sent_at: Instant,
    pub outcome: Outcome,
    /// The end of the function's output at the time, for failure messages.
    pub output: String,
}

#[derive(Debug)]
pub enum Outcome {
    /// Posted to `/invocation/{id}/response`.
    Response { body: Bytes, at: Instant },
    /// Posted to `/invocation/{id}/error`: `{"errorType", "errorMessage"}`.
    Error { error: Value, at: Instant },
    /// Posted to `/init/error`: the function could not start.
    InitError(Value),
    /// The process ended (Lambda would start a new one for the next event).
    Exited(ExitStatus),
    /// The function broke the runtime API's rules (e.g. an unknown id).
    ProtocolViolation(String),
}

impl Invocation {
    pub fn describe(&self) -> String {
        let outcome = match &self.outcome {
            Outcome::Response { body, .. } => {
                format!("response {}", String::from_utf8_lossy(body))
            }
            Outcome::Error { error, .. } => format!("error {error}"),
            Outcome::InitError(e) => format!("init error {e}"),
            Outcome::Exited(s) => format!("process exited ({s})"),
            Outcome::ProtocolViolation(p) => format!("runtime API misuse: {p}"),
        };
        format!(
            "{} invocation {}: {outcome}\nfunction output:\n{}",
            self.function, self.request_id, self.output
        )
    }

    /// When the answer (response or error) arrived.
    pub fn answered_at(&self) -> Option<Instant> {
        match &self.outcome {
            Outcome::Response { at, .. } | Outcome::Error { at, .. } => Some(*at),
            _ => None,
        }
    }

    /// The response as JSON; panics with the whole story otherwise.
    pub fn response_json(&self) -> Value {
        let Outcome::Response { body, .. } = &self.outcome else {
            panic!("expected a response: {}", self.describe());
        };
        serde_json::from_slice(body).unwrap_or_else(|e| {
            panic!("the response is not JSON ({e}): {}", self.describe());
        })
    }

    /// The `(errorType, errorMessage)` of an error; panics on anything else.
    pub fn error(&self) -> (String, String) {
        let Outcome::Error { error, .. } = &self.outcome else {
            panic!("expected an error: {}", self.describe());
        };
        let field = |name: &str| error[name].as_str().unwrap_or_default().to_string();
        (field("errorType"), field("errorMessage"))
    }

    /// An API Gateway (HTTP API, payload 2.0) answer, as the gateway would
    /// turn it into an HTTP response.
    pub fn http(&self) -> HttpAnswer {
        let v = self.response_json();
        let status = v["statusCode"].as_u64().unwrap_or_else(|| {
            panic!("no statusCode in the response: {}", self.describe());
        }) as u16;
        let headers = v["headers"]
            .as_object()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| {
                        (
                            k.to_ascii_lowercase(),
                            v.as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let raw = v["body"].as_str().unwrap_or_default();
        let body = if v["isBase64Encoded"].as_bool().unwrap_or(false) {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(raw)
                .unwrap_or_else(|e| panic!("body is not base64 ({e}): {}", self.describe()));
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            raw.to_string()
        };
        HttpAnswer {
            status,
            headers,
            body,
            context: self.describe(),
        }
    }
}

/// An HTTP response as API Gateway would send it.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    context: String,
}

impl HttpAnswer {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("the body is not JSON ({e}): {}", self.context))
    }

    pub fn expect_status(&self, status: u16) -> &HttpAnswer {
        assert_eq!(self.status, status, "{}", self.context);
        self
    }

    pub fn describe(&self) -> &str {
        &self.context
    }
}

// ---- the runtime API ----

struct Pending {
    request_id: String,
    deadline_ms: u64,
    arn: String,
    body: String,
}

enum Report {
    Polled(Instant),
    Response {
        id: String,
        body: Bytes,
        at: Instant,
    },
    Error {
        id: String,
        error: Value,
        at: Instant,
    },
    InitError(Value),
    Exited(ExitStatus),
    Protocol(String),
}

struct Shared {
    /// Events waiting for the function's next poll. The lock is held by the
    /// one poll in flight (Lambda runs one event at a time per process).
    events: tokio::sync::Mutex<UnboundedReceiver<Pending>>,
    /// Invocations handed out and not yet answered.
    outstanding: Mutex<HashSet<String>>,
    reports: UnboundedSender<Report>,
}

async fn next(State(shared): State<Arc<Shared>>) -> Response {
    let _ = shared.reports.send(Report::Polled(Instant::now()));
    let pending = shared.events.lock().await.recv().await;
    let Some(p) = pending else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "emulator stopping").into_response();
    };
    let mut headers = HeaderMap::new();
    let pairs = [
        ("lambda-runtime-aws-request-id", p.request_id.clone()),
        ("lambda-runtime-deadline-ms", p.deadline_ms.to_string()),
        ("lambda-runtime-invoked-function-arn", p.arn),
        ("lambda-runtime-trace-id", trace_id()),
        ("content-type", "application/json".to_string()),
    ];
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
    (StatusCode::OK, headers, p.body).into_response()
}

fn accepted() -> Response {
    (StatusCode::ACCEPTED, axum::Json(json!({"status": "OK"}))).into_response()
}

/// Lambda answers 400 `InvalidRequestID` for an id it did not hand out.
fn check_id(shared: &Shared, id: &str) -> Option<Response> {
    if crate::lock(&shared.outstanding).contains(id) {
        return None;
    }
    let _ = shared.reports.send(Report::Protocol(format!(
        "an answer for request id {id:?}, which is not in flight"
    )));
    Some(
        (
            StatusCode::BAD_REQUEST,
            axum::Json(
                json!({"errorType": "InvalidRequestID", "errorMessage": "Invalid request ID"}),
            ),
        )
            .into_response(),
    )
}

async fn response(
    State(shared): State<Arc<Shared>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    if let Some(refused) = check_id(&shared, &id) {
        return refused;
    }
    let _ = shared.reports.send(Report::Response { id, body, at });
    accepted()
}

/// The error body the runtime client sends (`errorType`, `errorMessage`),
/// kept as is; a body that is not JSON is kept as its text.
fn error_body(headers: &HeaderMap, body: &Bytes) -> Value {
    let mut v = serde_json::from_slice::<Value>(body)
        .unwrap_or_else(|_| json!({"errorMessage": String::from_utf8_lossy(body)}));
    if v.get("errorType").is_none()
        && let Some(t) = headers
            .get("lambda-runtime-function-error-type")
            .and_then(|t| t.to_str().ok())
    {
        v["errorType"] = json!(t);
    }
    v
}

async fn invocation_error(
    State(shared): State<Arc<Shared>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    if let Some(refused) = check_id(&shared, &id) {
        return refused;
    }
    let error = error_body(&headers, &body);
    let _ = shared.reports.send(Report::Error { id, error, at });
    accepted()
}

async fn init_error(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let _ = shared
        .reports
        .send(Report::InitError(error_body(&headers, &body)));
    accepted()
}

async fn unknown_route(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    let _ = shared
        .reports
        .send(Report::Protocol(format!("a call to an unknown path {uri}")));
    StatusCode::NOT_FOUND.into_response()
}

// ---- ids and clocks ----

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn unique() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    (u64::from(std::process::id()) << 40) ^ (nanos << 8) ^ n
}

/// A UUID-shaped id, as Lambda's request ids are.
fn request_id() -> String {
    let a = unique();
    let b = unique().wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

/// An X-Ray trace header, as Lambda passes it.
fn trace_id() -> String {
    format!(
        "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=0",
        now_ms() / 1000,
        u128::from(unique()) << 32 | u128::from(unique() as u32),
        unique()
    )
}

// ---- events as AWS services send them ----

/// An API Gateway HTTP API (payload format 2.0) request, as the gateway
/// hands it to the function of route `ANY /api/v1/{proxy+}`. `path` may carry
/// a query string. Header names are lower case, as the gateway sends them.
pub fn http_api_event(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Value {
    let (raw_path, query) = path.split_once('?').unwrap_or((path, ""));
    let mut header_map = serde_json::Map::new();
    header_map.insert(
        "host".into(),
        json!(format!("abcdef1234.execute-api.{REGION}.amazonaws.com")),
    );
    header_map.insert("user-agent".into(), json!("curl/8.5.0"));
    header_map.insert("x-forwarded-proto".into(), json!("https"));
    for (k, v) in headers {
        header_map.insert(k.to_ascii_lowercase(), json!(v));
    }
    let mut query_map = serde_json::Map::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query_map.insert(k.to_string(), json!(v));
    }
    let now = now_ms();
    let mut event = json!({
        "version": "2.0",
        "routeKey": "ANY /api/v1/{proxy+}",
        "rawPath": raw_path,
        "rawQueryString": query,
        "headers": header_map,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "abcdef1234",
            "domainName": format!("abcdef1234.execute-api.{REGION}.amazonaws.com"),
            "domainPrefix": "abcdef1234",
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.10",
                "userAgent": "curl/8.5.0"
            },
            "requestId": request_id(),
            "routeKey": "ANY /api/v1/{proxy+}",
            "stage": "$default",
            "time": "30/Nov/2026:01:00:00 +0000",
            "timeEpoch": now
        },
        "pathParameters": {"proxy": raw_path.trim_start_matches("/api/v1/")},
        "isBase64Encoded": false
    });
    if !query_map.is_empty() {
        event["queryStringParameters"] = Value::Object(query_map);
    }
    if let Some(b) = body {
        event["body"] = json!(b);
    }
    event
}

/// One message as the SQS event source mapping delivers it.
#[derive(Debug, Clone)]
pub struct SqsRecord {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
}

impl SqsRecord {
    /// A message that was never in a queue (for bodies a queue could hold).
    pub fn new(body: impl Into<String>) -> SqsRecord {
        SqsRecord {
            message_id: request_id(),
            receipt_handle: format!("AQEB{}", unique()),
            body: body.into(),
        }
    }
}

/// An SQS event of `records` from queue `queue_name`.
pub fn sqs_event(queue_name: &str, records: &[SqsRecord]) -> Value {
    let sent = now_ms().to_string();
    let records: Vec<Value> = records
        .iter()
        .map(|r| {
            json!({
                "messageId": r.message_id,
                "receiptHandle": r.receipt_handle,
                "body": r.body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": sent,
                    "SenderId": "AROAEMULATOR:floe-api",
                    "ApproximateFirstReceiveTimestamp": sent
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{queue_name}"),
                "awsRegion": REGION
            })
        })
        .collect();
    json!({ "Records": records })
}

/// SQS and KMS on moto (tests and benchmarks set up a function's queue and
/// key with it), through the JSON protocols the SDK speaks.
pub struct Moto {
    endpoint: String,
    http: reqwest::Client,
}

impl Moto {
    pub fn new(endpoint: &str) -> Moto {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_else(|e| panic!("cannot build the HTTP client: {e}"));
        Moto {
            endpoint: endpoint.to_string(),
            http,
        }
    }

    async fn call(&self, action: &str, body: Value) -> Result<Value, Box<dyn std::error::Error>> {
        let (service, version) = match action.split_once('.') {
            Some(("TrentService", _)) => ("kms", "1.1"),
            _ => ("sqs", "1.0"),
        };
        let res = self
            .http
            .post(&self.endpoint)
            .header("x-amz-target", action)
            .header("content-type", format!("application/x-amz-json-{version}"))
            // moto reads the service and region from the signature's scope.
            .header(
                "authorization",
                format!(
                    "AWS4-HMAC-SHA256 Credential=test/20260101/{REGION}/{service}/aws4_request, \
                     SignedHeaders=host, Signature=0"
                ),
            )
            .body(body.to_string())
            .send()
            .await?;
        let status = res.status();
        let text = res.text().await?;
        if !status.is_success() {
            return Err(format!("SQS {action} answered {status}: {text}").into());
        }
        Ok(serde_json::from_str(&text)?)
    }

    pub async fn create_queue(&self, name: &str) -> Result<String, Box<dyn std::error::Error>> {
        let v = self
            .call("AmazonSQS.CreateQueue", json!({"QueueName": name}))
            .await?;
        v["QueueUrl"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("CreateQueue gave no QueueUrl: {v}").into())
    }

    /// Deletes a received message, as the event source mapping does once
    /// the function handled it.
    pub async fn delete(
        &self,
        queue_url: &str,
        receipt_handle: &str,
    ) -> Result<(), Box<dyn std::error::Error>> {
        self.call(
            "AmazonSQS.DeleteMessage",
            json!({"QueueUrl": queue_url, "ReceiptHandle": receipt_handle}),
        )
        .await?;
        Ok(())
    }

    /// A symmetric KMS key, as the stack's CredentialsKey; returns its ARN.
    pub async fn create_kms_key(&self) -> Result<String, Box<dyn std::error::Error>> {
        let v = self
            .call(
                "TrentService.CreateKey",
                json!({"Description": "floe credentials (emulator)"}),
            )
            .await?;
        v["KeyMetadata"]["Arn"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("CreateKey gave no ARN: {v}").into())
    }

    /// Messages in the queue, visible or in flight, without waiting.
    pub async fn queue_depth(&self, queue_url: &str) -> Result<u64, Box<dyn std::error::Error>> {
        let v = self
            .call(
                "AmazonSQS.GetQueueAttributes",
                json!({"QueueUrl": queue_url, "AttributeNames": [
                    "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]}),
            )
            .await?;
        let field = |name: &str| {
            v["Attributes"][name]
                .as_str()
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| format!("GetQueueAttributes gave no {name}: {v}"))
        };
        Ok(field("ApproximateNumberOfMessages")? + field("ApproximateNumberOfMessagesNotVisible")?)
    }

    /// The messages visible now, waiting up to a few seconds for the first.
    pub async fn receive(
        &self,
        queue_url: &str,
    ) -> Result<Vec<SqsRecord>, Box<dyn std::error::Error>> {
        let v = self
            .call(
                "AmazonSQS.ReceiveMessage",
                json!({"QueueUrl": queue_url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 5}),
            )
            .await?;
        Ok(v["Messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|m| SqsRecord {
                message_id: m["MessageId"].as_str().unwrap_or_default().to_string(),
                receipt_handle: m["ReceiptHandle"].as_str().unwrap_or_default().to_string(),
                body: m["Body"].as_str().unwrap_or_default().to_string(),
            })
            .collect())
    }
}
