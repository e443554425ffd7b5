//! Search in local mode, next to the search library used directly, in the
//! same run: bulk indexing, a term query and a terms aggregation on a
//! generated index (1,000,000 documents unless `FLOE_BENCH_SEARCH_DOCS`
//! says otherwise), and peak memory. Local mode's side goes through a
//! deployment's endpoint (HTTPS, basic auth, `_bulk` in batches of 10,000)
//! as a client would; the library's side is tantivy itself, one indexing
//! thread as the simulated cluster uses, the same documents and fields.
//!
//! Not a test. `scripts/bench.sh` runs it; by hand:
//! `cargo build --profile release --workspace --bins && cargo bench
//! --profile release -p floe-tests --bench search` (the bench and the
//! floe-local it starts share the profile, so both sides are measured
//! alike). Each figure is printed as a `BENCH` row: the figure, local
//! mode's value, the library's, their ratio.

use floe_tests::Server;
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tantivy::collector::Count;
use tantivy::query::{AllQuery, TermQuery};
use tantivy::schema::{FAST, INDEXED, IndexRecordOption, STRING, Schema, TEXT};
use tantivy::{Index, IndexWriter, TantivyDocument, Term};

type Error = Box<dyn std::error::Error>;

const ORG: &str = "bench";
const BATCH: usize = 10_000;
const RUNS: usize = 30;

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
            eprintln!("search: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Document `i`: a number, one of three categories, a sentence.
fn document(i: usize) -> (i64, &'static str, String) {
    let parity = if i.is_multiple_of(2) { "even" } else { "odd" };
    (
        i64::try_from(i).unwrap_or(i64::MAX),
        ["alpha", "beta", "gamma"][i % 3],
        format!("event {i} is {parity}"),
    )
}

/// The median of `runs` timings of `op`, in milliseconds, after warming up.
async fn median_ms<F, Fut>(runs: usize, mut op: F) -> Result<f64, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    for _ in 0..5 {
        op().await?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        op().await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// A process's peak resident memory (`VmHWM`), in MB.
fn peak_mb(pid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

struct Figures {
    docs_per_s: f64,
    term_ms: f64,
    agg_ms: f64,
    peak_mb: f64,
}

/// The same operations on tantivy directly.
async fn library(docs: usize) -> Result<Figures, Error> {
    let mut builder = Schema::builder();
    let n = builder.add_i64_field("n", INDEXED | FAST);
    let cat = builder.add_text_field("cat", STRING | FAST);
    let msg = builder.add_text_field("msg", TEXT);
    let index = Index::create_in_ram(builder.build());
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 32 * 1024 * 1024)?;
    let started = Instant::now();
    for i in 0..docs {
        let (number, category, sentence) = document(i);
        let mut doc = TantivyDocument::default();
        doc.add_i64(n, number);
        doc.add_text(cat, category);
        doc.add_text(msg, sentence);
        writer.add_document(doc)?;
    }
    writer.commit()?;
    let docs_per_s = docs as f64 / started.elapsed().as_secs_f64();
    let searcher = index.reader()?.searcher();
    let term = TermQuery::new(Term::from_field_text(cat, "beta"), IndexRecordOption::Basic);
    let term_ms = median_ms(RUNS, || {
        let found = searcher.search(&term, &Count);
        async move {
            found?;
            Ok(())
        }
    })
    .await?;
    let request: tantivy::aggregation::agg_req::Aggregations =
        serde_json::from_value(json!({"cats": {"terms": {"field": "cat"}}}))?;
    let agg_ms = median_ms(RUNS, || {
        let collector = tantivy::aggregation::AggregationCollector::from_aggs(
            request.clone(),
            Default::default(),
        );
        let found = searcher.search(&AllQuery, &collector);
        async move {
            found?;
            Ok(())
        }
    })
    .await?;
    Ok(Figures {
        docs_per_s,
        term_ms,
        agg_ms,
        peak_mb: peak_mb("self"),
    })
}

/// The operations in local mode, through a deployment's endpoint.
async fn local(docs: usize) -> Result<Figures, Error> {
    let s = Server::start_quick();
    let token = s.token(ORG, &["deployment_manager"]);
    let admin = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&admin, "bench-backups", "bench-backups")
        .await;
    let d = s
        .reachable_deployment(&token, "search-bench", "bench-backups")
        .await?;
    let (endpoint, password, ca) = (d.endpoint, d.password, d.ca_certificate);
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes())?)
        .timeout(Duration::from_secs(600))
        .build()?;
    let call = |method: reqwest::Method, path: &str| {
        client
            .request(method, format!("{endpoint}{path}"))
            .basic_auth("elastic", Some(&password))
    };
    let created = call(reqwest::Method::PUT, "/bench")
        .json(&json!({
            "settings": {"number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {"properties": {"n": {"type": "long"}, "cat": {"type": "keyword"}, "msg": {"type": "text"}}}
        }))
        .send()
        .await?;
    if !created.status().is_success() {
        return Err(format!("create index: {}", created.text().await?).into());
    }
    let started = Instant::now();
    let mut i = 0;
    while i < docs {
        let mut body = String::with_capacity(BATCH * 80);
        for j in i..(i + BATCH).min(docs) {
            let (number, category, sentence) = document(j);
            body.push_str("{\"index\":{}}\n");
            body.push_str(&json!({"n": number, "cat": category, "msg": sentence}).to_string());
            body.push('\n');
        }
        let answer: Value = call(reqwest::Method::POST, "/bench/_bulk")
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await?
            .json()
            .await?;
        if answer["errors"] != json!(false) {
            return Err(format!("bulk failed: {}", answer["items"][0]).into());
        }
        i += BATCH;
    }
    call(reqwest::Method::POST, "/bench/_refresh")
        .send()
        .await?;
    let docs_per_s = docs as f64 / started.elapsed().as_secs_f64();
    let search = |body: Value| {
        let request = call(reqwest::Method::POST, "/bench/_search").json(&body);
        async move {
            let answer = request.send().await?;
            if !answer.status().is_success() {
                return Err(format!("search: {}", answer.text().await?).into());
            }
            answer.bytes().await?;
            Ok(())
        }
    };
    let term_ms = median_ms(RUNS, || {
        search(json!({"size": 0, "track_total_hits": true, "query": {"term": {"cat": "beta"}}}))
    })
    .await?;
    let agg_ms = median_ms(RUNS, || {
        search(json!({"size": 0, "aggs": {"cats": {"terms": {"field": "cat"}}}}))
    })
    .await?;
    Ok(Figures {
        docs_per_s,
        term_ms,
        agg_ms,
        peak_mb: peak_mb(&s.pid().to_string()),
    })
}

fn row(figure: &str, value: f64, baseline: f64) {
    let ratio = if baseline > 0.0 {
        format!("{:.2}x", value / baseline)
    } else {
        "-".to_string()
    };
    println!("{figure}: local mode {value:.3}, the library directly {baseline:.3} ({ratio})");
    println!("BENCH\t{figure}\t{value:.3}\t{baseline:.3}\t{ratio}\t-");
}

async fn run() -> Result<(), Error> {
    let docs: usize = std::env::var("FLOE_BENCH_SEARCH_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let lib = library(docs).await?;
    let floe = local(docs).await?;
    let label = format!("{docs} documents");
    row(
        &format!("search: bulk indexing, docs/s ({label})"),
        floe.docs_per_s,
        lib.docs_per_s,
    );
    row(
        &format!("search: term query, p50 ms ({label})"),
        floe.term_ms,
        lib.term_ms,
    );
    row(
        &format!("search: terms aggregation, p50 ms ({label})"),
        floe.agg_ms,
        lib.agg_ms,
    );
    row(
        &format!("search: peak memory, MB (floe-local; the library bench process) ({label})"),
        floe.peak_mb,
        lib.peak_mb,
    );
    Ok(())
}
