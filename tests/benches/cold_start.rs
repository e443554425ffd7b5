//! Cold start of each function under the Lambda runtime emulator, next to
//! two baselines built the same way: a minimal lambda_http function
//! (`hello-lambda`), and one that makes one DynamoDB Query per request with
//! the api's store adapter (`dynamo-baseline`). For each
//! binary, RUNS fresh processes, each timed from spawn to its first poll of
//! the runtime API (init) and to its first answer; plus the stripped size.
//!
//! Not a test, and not part of scripts/test.sh. Run it with
//! `scripts/cold-start.sh` (release build, moto started for you), or by hand:
//!
//! ```sh
//! cargo build --release -p floe-api-function -p floe-worker-function \
//!   -p floe-snapshotter-function -p floe-hello-lambda -p floe-dynamo-baseline
//! FLOE_COLD_START_DIR=$CARGO_TARGET_DIR/release FLOE_TEST_AWS_ENDPOINT=http://127.0.0.1:PORT \
//!   cargo bench --profile dev -p floe-tests --bench cold_start
//! ```
//!
//! The api and worker run as on AWS, against DynamoDB and SQS on moto: the
//! api answers `GET /api/v1/deployments` (one DynamoDB Query), the worker the
//! sweep event (one Query), the snapshotter a schedule's payload for a
//! deployment that does not exist (one GetItem; it records nothing). Moto is a Python server on loopback, so its share
//! of the first answer is larger than DynamoDB's would be; the init figures
//! do not include it. FLOE_COLD_START_RUNS (default 20) sets the runs.

use floe_tests::lambda_emulator::{Function, Moto, http_api_event};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const JWT_SECRET: &str = "cold-start-benchmark-secret-0123456789";

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cold_start: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Setup {
    endpoint: String,
    table: String,
    queue_url: String,
    key_arn: String,
}

async fn run() -> Result<(), Error> {
    // `cargo bench` passes `--bench`; anything else is a filter on the names.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let dir = std::env::var("FLOE_COLD_START_DIR")
        .map(PathBuf::from)
        .map_err(|_| {
            "FLOE_COLD_START_DIR is not set: point it at the folder of the binaries to \
             measure (e.g. target/release after `cargo build --release -p floe-api-function \
             -p floe-worker-function -p floe-snapshotter-function -p floe-hello-lambda -p floe-dynamo-baseline`), \
             or run scripts/cold-start.sh"
        })?;
    let runs: usize = std::env::var("FLOE_COLD_START_RUNS")
        .ok()
        .map(|v| v.parse())
        .transpose()
        .map_err(|_| "FLOE_COLD_START_RUNS must be a number")?
        .unwrap_or(20)
        .max(1);
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT")
        .map_err(|_| "FLOE_TEST_AWS_ENDPOINT is not set: start moto on 127.0.0.1 first")?;
    if !(endpoint.starts_with("http://127.0.0.1:") || endpoint.starts_with("http://localhost:")) {
        return Err(format!("FLOE_TEST_AWS_ENDPOINT={endpoint} is not on loopback").into());
    }
    let setup = prepare(&dir, &endpoint).await?;

    println!(
        "cold start under the runtime emulator, {runs} runs each, binaries in {}",
        dir.display()
    );
    println!(
        "{:<14} {:>10}   {:>26}   {:>26}",
        "function", "stripped", "init ms (min/p50/p95)", "first answer ms (min/p50/p95)"
    );
    // Each binary's (init, first answer) medians, for the summary rows.
    let mut medians: Vec<(&str, Option<f64>, Option<f64>)> = Vec::new();
    for (name, make) in candidates() {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let binary = dir.join(name);
        if !binary.is_file() {
            return Err(format!("{} is missing: build it first", binary.display()).into());
        }
        let mut init = Vec::with_capacity(runs);
        let mut answer = Vec::with_capacity(runs);
        for _ in 0..runs {
            let (function, event) = make(&binary, &setup);
            let mut running = function.start().await?;
            let invocation = running.invoke(&event).await?;
            let Some(answered) = invocation.answered_at() else {
                return Err(format!("{name} gave no answer: {}", invocation.describe()).into());
            };
            if let floe_tests::lambda_emulator::Outcome::Error { .. } = invocation.outcome {
                return Err(format!("{name} answered an error: {}", invocation.describe()).into());
            }
            let spawned = running.spawned_at();
            answer.push(answered.duration_since(spawned));
            if let Some(polled) = running.first_poll_at() {
                init.push(polled.duration_since(spawned));
            }
        }
        println!(
            "{:<14} {:>10}   {:>26}   {:>26}",
            name,
            stripped_size(&binary),
            summary(&mut init),
            summary(&mut answer)
        );
        medians.push((name, median_ms(&init), median_ms(&answer)));
    }
    summary_rows(&medians);
    if filters.is_empty() || filters.iter().any(|f| f == "memory") {
        memory_rows(&dir, &setup).await?;
    }
    Ok(())
}

/// Invocations one process answers, one after another, before its peak
/// resident memory is read: the load of 1 a Lambda instance sees.
const WARM_INVOCATIONS: usize = 200;

/// Peak RSS (the kernel's VmHWM) of floe-api after WARM_INVOCATIONS
/// answers, next to hello-lambda's after as many.
async fn memory_rows(dir: &Path, setup: &Setup) -> Result<(), Error> {
    let mut peaks = Vec::new();
    for (name, make) in [("hello-lambda", hello as Make), ("floe-api", api as Make)] {
        let (function, event) = make(&dir.join(name), setup);
        let mut running = function.start().await?;
        for _ in 0..WARM_INVOCATIONS {
            let invocation = running.invoke(&event).await?;
            if let floe_tests::lambda_emulator::Outcome::Error { .. } = invocation.outcome {
                return Err(format!("{name} answered an error: {}", invocation.describe()).into());
            }
        }
        let peak = running.pid().and_then(peak_rss_mb);
        println!(
            "{name:<14} peak RSS after {WARM_INVOCATIONS} invocations one at a time: {}",
            peak.map_or("-".to_string(), |mb| format!("{mb:.1} MB"))
        );
        peaks.push(peak);
    }
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let ratio = match (peaks[1], peaks[0]) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}x", v / b),
        _ => "-".to_string(),
    };
    println!(
        "BENCH\tpeak RSS floe-api, Lambda emulator, load 1, MB (baseline hello-lambda)\t{}\t{}\t{ratio}\t<= 32 MB",
        show(peaks[1]),
        show(peaks[0])
    );
    Ok(())
}

/// The process's peak resident set so far, from /proc (Linux only).
fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// The rows scripts/bench.sh gathers: each function's median init next to
/// hello-lambda's, and its median first answer next to dynamo-baseline's
/// (each function's first answer makes one DynamoDB call, as that one does).
fn summary_rows(medians: &[(&str, Option<f64>, Option<f64>)]) {
    let of = |n: &str| medians.iter().find(|(name, _, _)| *name == n);
    let hello_init = of("hello-lambda").and_then(|m| m.1);
    let dynamo_answer = of("dynamo-baseline").and_then(|m| m.2);
    for (name, init, answer) in medians {
        if !name.starts_with("floe-") {
            continue;
        }
        bench_row(
            &format!("cold start {name}: init p50 ms"),
            *init,
            hello_init,
        );
        bench_row(
            &format!("cold start {name}: first answer p50 ms"),
            *answer,
            dynamo_answer,
        );
    }
}

fn bench_row(figure: &str, value: Option<f64>, baseline: Option<f64>) {
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let ratio = match (value, baseline) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}x", v / b),
        _ => "-".to_string(),
    };
    println!(
        "BENCH\t{figure}\t{}\t{}\t{ratio}\t-",
        show(value),
        show(baseline)
    );
}

/// The median of already sorted durations, in milliseconds.
fn median_ms(sorted: &[Duration]) -> Option<f64> {
    let rank = sorted.len().div_ceil(2).max(1);
    sorted.get(rank - 1).map(|d| d.as_secs_f64() * 1000.0)
}

type Make = fn(&Path, &Setup) -> (Function, serde_json::Value);

fn candidates() -> [(&'static str, Make); 5] {
    [
        ("hello-lambda", hello as Make),
        ("dynamo-baseline", dynamo_baseline as Make),
        ("floe-api", api as Make),
        ("floe-worker", worker as Make),
        ("floe-snapshotter", snapshotter as Make),
    ]
}

fn hello(binary: &Path, _: &Setup) -> (Function, serde_json::Value) {
    (
        Function::at(binary, "hello-lambda"),
        http_api_event("GET", "/hello", &[], None),
    )
}

/// One DynamoDB Query per request, with the api's store adapter and SDK
/// settings, on the same table: the api's own floor.
fn dynamo_baseline(binary: &Path, s: &Setup) -> (Function, serde_json::Value) {
    (
        Function::at(binary, "dynamo-baseline")
            .memory_mb(512)
            .env("FLOE_STORE", format!("dynamodb://{}", s.table))
            .env("AWS_ENDPOINT_URL", &s.endpoint),
        http_api_event("GET", "/deployments", &[], None),
    )
}

fn api(binary: &Path, s: &Setup) -> (Function, serde_json::Value) {
    let token = floe_auth::issue_hs256(
        JWT_SECRET.as_bytes(),
        floe_tests::ISSUER,
        floe_tests::AUDIENCE,
        "bench",
        "acme",
        &[floe_auth::Role::DeploymentViewer],
        Duration::from_secs(3600),
    )
    .unwrap_or_default();
    let auth = format!("Bearer {token}");
    (
        api_function(binary, s),
        http_api_event(
            "GET",
            floe_tests::DEPLOYMENTS,
            &[("authorization", &auth)],
            None,
        ),
    )
}

/// As infra/template.yaml configures it (table, queue, KMS key), with an
/// HS256 secret instead of a JWKS URL (which would be a call off this
/// machine).
fn api_function(binary: &Path, s: &Setup) -> Function {
    Function::at(binary, "floe-api")
        .memory_mb(512)
        .env("FLOE_STORE", format!("dynamodb://{}", s.table))
        .env("FLOE_QUEUE_URL", &s.queue_url)
        .env("FLOE_KMS_KEY_ID", &s.key_arn)
        .env("FLOE_JWT_SECRET", JWT_SECRET)
        .env("AWS_ENDPOINT_URL", &s.endpoint)
}

fn worker(binary: &Path, s: &Setup) -> (Function, serde_json::Value) {
    (
        Function::at(binary, "floe-worker")
            .memory_mb(512)
            .timeout(Duration::from_secs(120))
            .env("FLOE_STORE", format!("dynamodb://{}", s.table))
            .env("FLOE_QUEUE_URL", &s.queue_url)
            // As deployed: EC2 compute. The sweep calls no EC2 API, and
            // building the client calls none either.
            .env("AWS_REGION", "us-east-1")
            .env("FLOE_EC2_IMAGE_ARM64", "ami-0000000000000000a")
            .env("FLOE_EC2_IMAGE_X86_64", "ami-0000000000000000b")
            .env("FLOE_EC2_SUBNETS", "subnet-0a,subnet-0b,subnet-0c")
            .env("FLOE_EC2_SECURITY_GROUPS", "sg-0a")
            .env(
                "FLOE_NODE_PERMISSIONS_BOUNDARY",
                "arn:aws:iam::123456789012:policy/floe-node-boundary",
            )
            .env("FLOE_KMS_KEY_ID", &s.key_arn)
            .env("AWS_ENDPOINT_URL", &s.endpoint),
        json!({"sweep": true}),
    )
}

/// As the template configures it (256 MB, the table, the parameter path).
fn snapshotter(binary: &Path, s: &Setup) -> (Function, serde_json::Value) {
    (
        Function::at(binary, "floe-snapshotter")
            .memory_mb(256)
            .timeout(Duration::from_secs(900))
            .env("FLOE_STORE", format!("dynamodb://{}", s.table))
            .env("AWS_ENDPOINT_URL", &s.endpoint),
        json!({
            "org": "acme",
            "deployment_id": "0123456789abcdef0123456789abcdef",
            "policy_id": "fedcba9876543210fedcba9876543210"
        }),
    )
}

/// A table and a queue on moto, created before the runs so that no run
/// pays for setup that production does in the stack.
async fn prepare(dir: &Path, endpoint: &str) -> Result<Setup, Error> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = format!("floe-cold-{}-{nanos}", std::process::id());
    let moto = Moto::new(endpoint);
    let queue_url = moto.create_queue(&name).await?;
    let key_arn = moto.create_kms_key().await?;
    let setup = Setup {
        endpoint: endpoint.to_string(),
        table: name,
        queue_url,
        key_arn,
    };
    let (function, event) = api(&dir.join("floe-api"), &setup);
    let mut creator = function.env("FLOE_CREATE_TABLE", "true").start().await?;
    let first = creator.invoke(&event).await?;
    if first.answered_at().is_none() {
        return Err(format!("cannot create the table: {}", first.describe()).into());
    }
    Ok(setup)
}

fn summary(values: &mut [Duration]) -> String {
    if values.is_empty() {
        return "-".into();
    }
    values.sort();
    let at = |p: usize| {
        // Nearest rank.
        let rank = (p * values.len()).div_ceil(100).max(1);
        values[rank - 1].as_secs_f64() * 1000.0
    };
    format!("{:.1} / {:.1} / {:.1}", at(0), at(50), at(95))
}

/// The size of `binary` once stripped of symbols (what a release build
/// ships, and what the zip holds), measured on a stripped copy.
fn stripped_size(binary: &Path) -> String {
    let copy = std::env::temp_dir().join(format!("floe-cold-strip-{}", std::process::id()));
    let size = std::fs::copy(binary, &copy)
        .ok()
        .and_then(|_| {
            std::process::Command::new("strip")
                .arg(&copy)
                .status()
                .ok()
                .filter(|s| s.success())
        })
        .and_then(|_| std::fs::metadata(&copy).ok())
        .map(|m| format!("{:.1} MB", m.len() as f64 / 1_000_000.0));
    let _ = std::fs::remove_file(&copy);
    size.unwrap_or_else(|| "strip?".into())
}
