//! esrally, the benchmark tool Elastic's and its partners' guides race
//! their deployments with, races a local deployment: Floe's own offline
//! track (`tests/rally/track`) on a corpus generated here, against the
//! deployment's endpoint with TLS verification (its CA) and basic auth,
//! as the FlashBlade guide's command does (`--target-hosts`,
//! `--client-options`, `--pipeline=benchmark-only`). Every search of the
//! track checks its answer (`checked-search` in `track.py`) and
//! `--on-error=abort` ends the race at the first error, so a race that
//! finishes is one with no errors and no wrong answers.
//!
//! esrally is pinned in `tests/rally/requirements.txt` and installed by
//! `scripts/test.sh` into a venv of its own (it pins old versions of the
//! Elasticsearch client, urllib3, requests and jsonschema); it needs no
//! Java with `--pipeline=benchmark-only`. Without it this test fails
//! rather than skips.

use floe_tests::{Server, TestResult};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};

const ORG: &str = "acme";

/// Documents in the corpus: enough for the track's date histogram (a day
/// of minutes) and for several bulk requests per client.
const DOCS: usize = 20_000;

fn esrally() -> PathBuf {
    std::env::var_os("FLOE_TEST_ESRALLY")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-rally/bin/esrally"))
}

/// Document `i` of the corpus; the track's expected answers follow from
/// this rule: `cat` cycles alpha, beta, gamma; `msg` says even or odd; a
/// document per minute from 2024-01-01.
fn document(i: usize) -> Value {
    let minutes = i64::try_from(i).unwrap_or(i64::MAX);
    let ts = chrono::DateTime::from_timestamp(1_704_067_200 + minutes * 60, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    let cat = ["alpha", "beta", "gamma"][i % 3];
    json!({
        "n": i,
        "cat": cat,
        "msg": format!("event {i} is {}", if i.is_multiple_of(2) { "even" } else { "odd" }),
        "price": (i % 100) as f64 * 0.5,
        "ts": ts,
    })
}

/// Copies the track next to a generated corpus; returns the corpus's size.
fn prepare_track(dir: &Path) -> Result<u64, Box<dyn std::error::Error>> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("rally/track");
    std::fs::create_dir_all(dir)?;
    for file in ["track.json", "index.json", "track.py"] {
        std::fs::copy(source.join(file), dir.join(file))?;
    }
    let mut corpus = std::io::BufWriter::new(std::fs::File::create(dir.join("documents.json"))?);
    for i in 0..DOCS {
        serde_json::to_writer(&mut corpus, &document(i))?;
        corpus.write_all(b"\n")?;
    }
    corpus.flush()?;
    Ok(std::fs::metadata(dir.join("documents.json"))?.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esrally_races_a_local_deployment_with_no_errors() -> TestResult {
    let esrally = esrally();
    assert!(
        esrally.is_file(),
        "esrally is not installed at {} (scripts/test.sh installs it)",
        esrally.display()
    );
    let s = Server::start_quick();
    let token = s.token(ORG, &["deployment_manager"]);
    let admin = s.token(ORG, &["platform_admin"]);
    s.put_fs_repository(&admin, "local-backups", "rally-backups")
        .await;
    let d = s
        .reachable_deployment(&token, "rally", "local-backups")
        .await?;
    let (endpoint, password) = (&d.endpoint, &d.password);
    let host = endpoint
        .strip_prefix("https://")
        .ok_or("the endpoint is not https")?;
    let home = s.data_dir().join("rally-home");
    std::fs::create_dir_all(&home)?;
    let ca = home.join("ca.pem");
    std::fs::write(&ca, &d.ca_certificate)?;
    let track = home.join("track");
    let bytes = prepare_track(&track)?;
    let report = home.join("report.md");
    let client_options = format!(
        "use_ssl:true,verify_certs:true,ca_certs:'{}',basic_auth_user:'elastic',basic_auth_password:'{password}',timeout:120",
        ca.display()
    );
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&esrally)
            .arg("race")
            .arg(format!("--track-path={}", track.display()))
            .arg(format!(
                "--track-params=doc_count:{DOCS},corpus_bytes:{bytes}"
            ))
            .arg(format!("--target-hosts={host}"))
            .arg(format!("--client-options={client_options}"))
            .arg("--pipeline=benchmark-only")
            .arg("--offline")
            .arg("--on-error=abort")
            .arg("--kill-running-processes")
            .arg(format!("--report-file={}", report.display()))
            .env("HOME", &home)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    let log = std::fs::read_to_string(home.join(".rally/logs/rally.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "esrally failed ({}):\n{stdout}\n{stderr}\n--- rally.log (last lines)\n{}",
        out.status,
        log.lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(stdout.contains("SUCCESS"), "{stdout}");
    let summary = std::fs::read_to_string(&report)?;
    // Every task's error rate is 0 (the race aborts at the first error,
    // and this says so again from the report).
    let error_rates: Vec<Vec<&str>> = summary
        .lines()
        .filter(|l| l.contains("error rate"))
        .map(|l| {
            l.split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert!(
        !error_rates.is_empty(),
        "no error rates in the report:\n{summary}"
    );
    for cells in &error_rates {
        // | error rate | {task} | {value} | % |
        let value: f64 = cells
            .iter()
            .position(|c| *c == "error rate")
            .and_then(|at| cells.get(at + 2))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("unreadable error rate {cells:?} in\n{summary}"))?;
        assert!(value == 0.0, "{cells:?}");
    }
    println!("{summary}");
    for task in [
        "index-append",
        "term",
        "range",
        "match",
        "terms-agg",
        "date-histogram",
    ] {
        assert!(
            summary.contains(task),
            "no {task} in the report:\n{summary}"
        );
    }
    Ok(())
}
