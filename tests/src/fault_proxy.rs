//! A fault-injecting HTTP proxy on loopback, in front of moto (which has no
//! fault injection of its own). A function under test gets the proxy's URL
//! as `AWS_ENDPOINT_URL`, so its real SDK clients send every call through
//! here; each call is forwarded to moto unless a [`Rule`] matches it, in
//! which case the client gets the rule's [`Fault`] instead.
//!
//! A call is named by its service, read from the SigV4 credential scope of
//! the `Authorization` header (`Credential=AKID/20261202/us-east-1/dynamodb/aws4_request`),
//! and its operation: the `X-Amz-Target` header's part after the dot for the
//! JSON protocols (`DynamoDB_20120810.TransactWriteItems`), or the `Action`
//! form field or query parameter for the query protocol (EC2).
//!
//! Each connection carries one exchange and is then closed (the answer says
//! `connection: close`), so that a dropped connection is always the one the
//! fault meant to drop and never a pooled one the client reuses.
//!
//! Two faults stand for a client that dies in the middle of a call
//! ([`Fault::AnswerWithheld`], [`Fault::RequestWithheld`]): the proxy keeps
//! the connection open without answering and reports the call
//! ([`FaultProxy::next_withheld`]), so that a test can kill the client at
//! that moment, before it learns whether the call took effect.
//!
//! ```ignore
//! let proxy = FaultProxy::start(&moto_endpoint).await?;
//! proxy.add(Rule::new("dynamodb", Fault::Throttle).operation("TransactWriteItems").always());
//! // ... the function runs with AWS_ENDPOINT_URL = proxy.url() ...
//! assert!(proxy.injected() > 0);
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the client gets instead of moto's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 400 with the protocol's throttling error (`ThrottlingException` for
    /// the JSON protocols, `RequestLimitExceeded` for EC2's query protocol,
    /// `Throttling` for IAM's),
    /// which the SDK classifies as a throttle and retries.
    Throttle,
    /// This status (500, 503) with the protocol's internal error body.
    Status(u16),
    /// Nothing for this long, then the connection closed without an
    /// answer; moto never sees the call. For a client whose timeout is
    /// shorter, a timeout, and nothing written behind its back afterwards.
    Delay(Duration),
    /// The connection closed without any answer.
    Drop,
    /// Forwarded to moto, whose answer is then kept from the client: the
    /// call took effect, and the client waits for an answer that never
    /// comes. Reported by [`FaultProxy::next_withheld`].
    AnswerWithheld,
    /// Never forwarded, and never answered: the call took no effect, and
    /// the client waits. Reported by [`FaultProxy::next_withheld`].
    RequestWithheld,
}

impl Fault {
    pub fn name(&self) -> String {
        match self {
            Fault::Throttle => "throttle".into(),
            Fault::Status(s) => format!("http-{s}"),
            Fault::Delay(d) => format!("delay-{}ms", d.as_millis()),
            Fault::Drop => "drop".into(),
            Fault::AnswerWithheld => "answer-withheld".into(),
            Fault::RequestWithheld => "request-withheld".into(),
        }
    }
}

/// Which calls get a fault, and how often.
#[derive(Debug, Clone)]
pub struct Rule {
    service: String,
    operation: Option<String>,
    fault: Fault,
    /// Matching calls let through before the first fault.
    skip: u32,
    /// Faults to inject; `None` for every matching call.
    times: Option<u32>,
}

impl Rule {
    /// Every call to `service` (the credential scope's name: `dynamodb`,
    /// `sqs`, `kms`, `ec2`, `ssm`, `scheduler`), once, unless narrowed.
    pub fn new(service: &str, fault: Fault) -> Rule {
        Rule {
            service: service.to_string(),
            operation: None,
            fault,
            skip: 0,
            times: Some(1),
        }
    }

    /// Only calls of this operation (`TransactWriteItems`, `RunInstances`).
    pub fn operation(mut self, operation: &str) -> Rule {
        self.operation = Some(operation.to_string());
        self
    }

    /// Starting with the `n`th matching call (1 is the first).
    pub fn nth(mut self, n: u32) -> Rule {
        self.skip = n.saturating_sub(1);
        self
    }

    /// For `m` matching calls in a row.
    pub fn times(mut self, m: u32) -> Rule {
        self.times = Some(m);
        self
    }

    /// For every matching call from then on.
    pub fn always(mut self) -> Rule {
        self.times = None;
        self
    }

    fn matches(&self, service: &str, operation: &str) -> bool {
        self.service == service && self.operation.as_deref().is_none_or(|o| o == operation)
    }
}

struct Armed {
    rule: Rule,
    seen: u32,
    fired: u32,
}

/// A call a [`Fault::AnswerWithheld`] or [`Fault::RequestWithheld`] rule
/// caught: the client is waiting for its answer now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub service: String,
    pub operation: String,
    /// Which call of this `service/operation` it was since the counts were
    /// last reset (1 is the first).
    pub nth: u32,
    /// Moto's status for a forwarded call; `None` when it was not forwarded.
    pub upstream_status: Option<u16>,
}

/// How long a withheld call's connection is kept open at most (the client
/// is normally killed long before).
const WITHHOLD_FOR: Duration = Duration::from_secs(300);

#[derive(Default)]
struct State {
    rules: Vec<Armed>,
    /// Calls seen, per `service/operation`, faulted or not.
    calls: BTreeMap<String, u32>,
    /// Every call seen, as `service/operation`, in the order they came.
    log: Vec<String>,
    injected: u32,
    withheld: Option<tokio::sync::mpsc::UnboundedSender<Withheld>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running proxy; dropping it stops accepting connections.
pub struct FaultProxy {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
    withheld: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Withheld>>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream`
    /// (`http://127.0.0.1:PORT`, loopback only).
    pub async fn start(upstream: &str) -> std::io::Result<FaultProxy> {
        assert!(
            upstream.starts_with("http://127.0.0.1:") || upstream.starts_with("http://localhost:"),
            "the fault proxy forwards to loopback only, not to {upstream}"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (withheld_tx, withheld) = tokio::sync::mpsc::unbounded_channel();
        let state = Arc::new(Mutex::new(State {
            withheld: Some(withheld_tx),
            ..State::default()
        }));
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(std::io::Error::other)?;
        let upstream = upstream.trim_end_matches('/').to_string();
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                let client = client.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let _ = exchange(stream, &state, &client, &upstream).await;
                });
            }
        });
        Ok(FaultProxy {
            addr,
            state,
            task,
            withheld: tokio::sync::Mutex::new(withheld),
        })
    }

    /// The URL to give clients as their endpoint.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn add(&self, rule: Rule) {
        lock(&self.state).rules.push(Armed {
            rule,
            seen: 0,
            fired: 0,
        });
    }

    /// Removes every rule (counts stay).
    pub fn clear(&self) {
        lock(&self.state).rules.clear();
    }

    /// Calls seen for `service` and `operation`, faulted or not.
    pub fn calls(&self, service: &str, operation: &str) -> u32 {
        lock(&self.state)
            .calls
            .get(&format!("{service}/{operation}"))
            .copied()
            .unwrap_or(0)
    }

    /// Every `service/operation` seen, with its count.
    pub fn all_calls(&self) -> BTreeMap<String, u32> {
        lock(&self.state).calls.clone()
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u32 {
        lock(&self.state).injected
    }

    /// Forgets the per-operation counts and the log (rules and the count
    /// of faults injected stay).
    pub fn reset_counts(&self) {
        let mut s = lock(&self.state);
        s.calls.clear();
        s.log.clear();
    }

    /// Every call seen since the counts were last reset, as
    /// `service/operation`, in order.
    pub fn log(&self) -> Vec<String> {
        lock(&self.state).log.clone()
    }

    /// The next call a withholding rule caught, once its client waits for
    /// the answer (after moto answered, for [`Fault::AnswerWithheld`]);
    /// `None` if none comes within `wait`.
    pub async fn next_withheld(&self, wait: Duration) -> Option<Withheld> {
        let mut rx = self.withheld.lock().await;
        tokio::time::timeout(wait, rx.recv()).await.ok().flatten()
    }
}

/// One request as read from the client.
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The service of the SigV4 credential scope.
    fn service(&self) -> String {
        self.header("authorization")
            .and_then(|a| a.split("Credential=").nth(1))
            .and_then(|c| c.split([',', ' ']).next())
            .and_then(|scope| scope.split('/').nth(3))
            .unwrap_or("unknown")
            .to_string()
    }

    fn operation(&self) -> String {
        if let Some(target) = self.header("x-amz-target") {
            return target.rsplit('.').next().unwrap_or(target).to_string();
        }
        let query = self.target.split_once('?').map(|(_, q)| q).unwrap_or("");
        let body = String::from_utf8_lossy(&self.body);
        query
            .split('&')
            .chain(body.split('&'))
            .find_map(|pair| pair.strip_prefix("Action="))
            .unwrap_or("unknown")
            .to_string()
    }

    fn is_json(&self) -> bool {
        self.header("x-amz-target").is_some()
    }
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        if buf.len() > 1 << 20 {
            return Err(std::io::Error::other("request head too large"));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("GET").to_string();
    let target = first.next().unwrap_or("/").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Some(Request {
        method,
        target,
        headers,
        body,
    }))
}

/// Counts the call and picks the fault of the first rule that fires.
fn decide(state: &Mutex<State>, service: &str, operation: &str) -> (Option<Fault>, u32) {
    let mut s = lock(state);
    let key = format!("{service}/{operation}");
    let counted = s.calls.entry(key.clone()).or_insert(0);
    *counted += 1;
    let nth = *counted;
    s.log.push(key);
    let mut chosen = None;
    for armed in s.rules.iter_mut() {
        if !armed.rule.matches(service, operation) {
            continue;
        }
        armed.seen += 1;
        let due = armed.seen > armed.rule.skip;
        let left = armed.rule.times.is_none_or(|m| armed.fired < m);
        if chosen.is_none() && due && left {
            armed.fired += 1;
            chosen = Some(armed.rule.fault.clone());
        }
    }
    if chosen.is_some() {
        s.injected += 1;
    }
    (chosen, nth)
}

/// Reports a withheld call, then keeps its connection open, unanswered,
/// until the client goes away (killed) or [`WITHHOLD_FOR`] passes.
async fn withhold(
    mut stream: TcpStream,
    state: &Mutex<State>,
    withheld: Withheld,
) -> std::io::Result<()> {
    let tx = lock(state).withheld.clone();
    if let Some(tx) = tx {
        let _ = tx.send(withheld);
    }
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(WITHHOLD_FOR, async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    Ok(())
}

async fn exchange(
    mut stream: TcpStream,
    state: &Mutex<State>,
    client: &reqwest::Client,
    upstream: &str,
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let service = request.service();
    let operation = request.operation();
    let (fault, nth) = decide(state, &service, &operation);
    let (status, content_type, body, extra) = match fault {
        Some(Fault::AnswerWithheld) => {
            let (status, ..) = forward(&request, client, upstream).await;
            let held = Withheld {
                service,
                operation,
                nth,
                upstream_status: Some(status),
            };
            return withhold(stream, state, held).await;
        }
        Some(Fault::RequestWithheld) => {
            let held = Withheld {
                service,
                operation,
                nth,
                upstream_status: None,
            };
            return withhold(stream, state, held).await;
        }
        Some(Fault::Drop) => {
            // No answer at all: the client sees its connection closed.
            return Ok(());
        }
        Some(Fault::Throttle) => {
            let (ct, body) = error_body(&request, &service, "throttle");
            (400, ct, body, vec![])
        }
        Some(Fault::Status(status)) => {
            let (ct, body) = error_body(&request, &service, "internal");
            (status, ct, body, vec![])
        }
        Some(Fault::Delay(d)) => {
            tokio::time::sleep(d).await;
            return Ok(());
        }
        None => forward(&request, client, upstream).await,
    };
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.shutdown().await
}

type Answer = (u16, String, Vec<u8>, Vec<(String, String)>);

/// Moto's answer to the same request (a 502 when moto cannot be reached).
async fn forward(request: &Request, client: &reqwest::Client, upstream: &str) -> Answer {
    let method =
        reqwest::Method::from_bytes(request.method.as_bytes()).unwrap_or(reqwest::Method::POST);
    let mut req = client.request(method, format!("{upstream}{}", request.target));
    for (k, v) in &request.headers {
        let skip = ["host", "content-length", "connection", "transfer-encoding"];
        if !skip.iter().any(|s| k.eq_ignore_ascii_case(s)) {
            req = req.header(k.as_str(), v.as_str());
        }
    }
    let sent = req.body(request.body.clone()).send().await;
    let Ok(res) = sent else {
        return (
            502,
            "text/plain".into(),
            b"moto unreachable".to_vec(),
            vec![],
        );
    };
    let status = res.status().as_u16();
    let mut content_type = "application/octet-stream".to_string();
    let mut extra = Vec::new();
    for (k, v) in res.headers() {
        let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
        match k.as_str() {
            "content-type" => content_type = v,
            "content-length" | "connection" | "transfer-encoding" | "keep-alive" | "date"
            | "server" => {}
            other => extra.push((other.to_string(), v)),
        }
    }
    let body = res.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    (status, content_type, body, extra)
}

/// The error body the service's protocol uses, so that the SDK classifies
/// it as it would AWS's own.
fn error_body(request: &Request, service: &str, kind: &str) -> (String, Vec<u8>) {
    if request.is_json() {
        let code = match kind {
            "throttle" => "ThrottlingException",
            _ => "InternalFailure",
        };
        let body = serde_json::json!({
            "__type": format!("com.amazonaws.{service}#{code}"),
            "message": format!("{code} injected by the fault proxy"),
        });
        (
            "application/x-amz-json-1.0".into(),
            body.to_string().into_bytes(),
        )
    } else if service == "iam" {
        // The awsQuery protocol (IAM): its own envelope and codes.
        let (kind_of, code) = match kind {
            "throttle" => ("Sender", "Throttling"),
            _ => ("Receiver", "ServiceFailure"),
        };
        let body = format!(
            "<ErrorResponse><Error><Type>{kind_of}</Type><Code>{code}</Code>\
             <Message>{code} injected by the fault proxy</Message></Error>\
             <RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>"
        );
        ("text/xml".into(), body.into_bytes())
    } else {
        let code = match kind {
            "throttle" => "RequestLimitExceeded",
            _ => "InternalError",
        };
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
             <Message>{code} injected by the fault proxy</Message></Error></Errors>\
             <RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
        );
        ("text/xml;charset=UTF-8".into(), body.into_bytes())
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for moto: answers every request 200 with its own path.
    async fn upstream() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(Some(req)) = read_request(&mut stream).await {
                        let body = format!("{{\"seen\":\"{}\"}}", req.target);
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(head.as_bytes()).await;
                        let _ = stream.write_all(body.as_bytes()).await;
                    }
                });
            }
        });
        format!("http://{addr}")
    }

    fn auth(service: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential=test/20261202/us-east-1/{service}/aws4_request, \
             SignedHeaders=host, Signature=00"
        )
    }

    async fn json_call(
        client: &reqwest::Client,
        proxy: &FaultProxy,
        service: &str,
        target: &str,
    ) -> Result<(u16, String), reqwest::Error> {
        let res = client
            .post(format!("{}/", proxy.url()))
            .header("authorization", auth(service))
            .header("x-amz-target", target)
            .body("{}")
            .send()
            .await?;
        let status = res.status().as_u16();
        Ok((status, res.text().await?))
    }

    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client")
    }

    /// The nth matching call, m times: the calls before and after are
    /// forwarded, other operations and services are never touched, and
    /// every call is counted under its service and operation.
    #[tokio::test]
    async fn faults_the_nth_matching_call_m_times_and_counts_every_call() {
        let proxy = FaultProxy::start(&upstream().await).await.expect("proxy");
        proxy.add(
            Rule::new("dynamodb", Fault::Throttle)
                .operation("TransactWriteItems")
                .nth(2)
                .times(2),
        );
        let c = client();
        let mut statuses = Vec::new();
        for _ in 0..4 {
            let (s, body) = json_call(
                &c,
                &proxy,
                "dynamodb",
                "DynamoDB_20120810.TransactWriteItems",
            )
            .await
            .expect("an answer");
            if s == 400 {
                assert!(body.contains("ThrottlingException"), "{body}");
            }
            statuses.push(s);
        }
        assert_eq!(statuses, vec![200, 400, 400, 200]);
        let (s, _) = json_call(&c, &proxy, "dynamodb", "DynamoDB_20120810.GetItem")
            .await
            .expect("an answer");
        assert_eq!(s, 200);
        let (s, _) = json_call(&c, &proxy, "sqs", "AmazonSQS.TransactWriteItems")
            .await
            .expect("an answer");
        assert_eq!(s, 200);
        assert_eq!(proxy.calls("dynamodb", "TransactWriteItems"), 4);
        assert_eq!(proxy.calls("dynamodb", "GetItem"), 1);
        assert_eq!(proxy.calls("sqs", "TransactWriteItems"), 1);
        assert_eq!(proxy.injected(), 2);
    }

    /// A withheld call is reported with its place among its operation's
    /// calls, after moto's answer when it was forwarded, and its client
    /// gets no answer; the calls around it pass.
    #[tokio::test]
    async fn withheld_calls_are_reported_and_never_answered() {
        let proxy = FaultProxy::start(&upstream().await).await.expect("proxy");
        proxy.add(
            Rule::new("ec2", Fault::AnswerWithheld)
                .operation("RunInstances")
                .nth(2),
        );
        proxy.add(Rule::new("ssm", Fault::RequestWithheld).operation("PutParameter"));
        let c = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_millis(700))
            .build()
            .expect("client");
        let run = |c: reqwest::Client, url: String| async move {
            c.post(format!("{url}/"))
                .header("authorization", auth("ec2"))
                .body("Action=RunInstances&Version=2016-11-15")
                .send()
                .await
        };
        assert!(run(c.clone(), proxy.url()).await.is_ok());
        assert!(run(c.clone(), proxy.url()).await.is_err(), "withheld");
        let held = proxy
            .next_withheld(Duration::from_secs(5))
            .await
            .expect("reported");
        assert_eq!(
            held,
            Withheld {
                service: "ec2".into(),
                operation: "RunInstances".into(),
                nth: 2,
                upstream_status: Some(200),
            }
        );
        assert!(run(c.clone(), proxy.url()).await.is_ok());
        assert!(
            json_call(&c, &proxy, "ssm", "AmazonSSM.PutParameter")
                .await
                .is_err()
        );
        let held = proxy
            .next_withheld(Duration::from_secs(5))
            .await
            .expect("reported");
        assert_eq!(held.upstream_status, None);
        assert_eq!(
            proxy.log(),
            vec![
                "ec2/RunInstances",
                "ec2/RunInstances",
                "ec2/RunInstances",
                "ssm/PutParameter"
            ]
        );
        assert!(
            proxy
                .next_withheld(Duration::from_millis(50))
                .await
                .is_none()
        );
    }

    /// Status faults carry the protocol's error body; a query-protocol call
    /// is named by its `Action`; a drop answers nothing.
    #[tokio::test]
    async fn status_query_protocol_and_drop() {
        let proxy = FaultProxy::start(&upstream().await).await.expect("proxy");
        proxy.add(Rule::new("kms", Fault::Status(503)).always());
        proxy.add(
            Rule::new("ec2", Fault::Throttle)
                .operation("RunInstances")
                .always(),
        );
        proxy.add(Rule::new("ssm", Fault::Drop).always());
        let c = client();
        for _ in 0..2 {
            let (s, body) = json_call(&c, &proxy, "kms", "TrentService.Encrypt")
                .await
                .expect("an answer");
            assert_eq!(s, 503);
            assert!(body.contains("InternalFailure"), "{body}");
        }
        let res = c
            .post(format!("{}/", proxy.url()))
            .header("authorization", auth("ec2"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("Action=RunInstances&Version=2016-11-15")
            .send()
            .await
            .expect("an answer");
        assert_eq!(res.status().as_u16(), 400);
        assert!(
            res.text()
                .await
                .expect("body")
                .contains("<Code>RequestLimitExceeded</Code>")
        );
        let res = c
            .post(format!("{}/?Action=DescribeInstances", proxy.url()))
            .header("authorization", auth("ec2"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(res.status().as_u16(), 200);
        assert!(
            json_call(&c, &proxy, "ssm", "AmazonSSM.PutParameter")
                .await
                .is_err(),
            "a dropped connection gives no answer"
        );
        assert_eq!(proxy.calls("ec2", "RunInstances"), 1);
        assert_eq!(proxy.calls("ec2", "DescribeInstances"), 1);
        assert_eq!(proxy.calls("ssm", "PutParameter"), 1);
        assert_eq!(proxy.injected(), 4);
        proxy.clear();
        let (s, _) = json_call(&c, &proxy, "ssm", "AmazonSSM.PutParameter")
            .await
            .expect("forwarded once the rules are cleared");
        assert_eq!(s, 200);
    }
}
