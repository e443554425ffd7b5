//! moto servers of a suite's own.
//!
//! scripts/test.sh starts one moto for the whole run
//! (`FLOE_TEST_AWS_ENDPOINT`), and it answers one request at a time
//! (scripts/moto_serial.py says why). The heavy suites (the kill points, the
//! deployed stack, the fleet of 350) make thousands of calls each: on the
//! shared server they waited behind every other test, and every other test
//! behind them, and moto grew slower as its tables filled (issue 54). Each
//! of them starts a server of its own here instead: still serial, so
//! DynamoDB's per-item atomicity holds, but serial only within its suite,
//! and empty when the suite begins. The server stops when the value drops.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long moto may take to import and bind: on a loaded two-core
/// machine its import alone has taken several seconds.
const START_TIMEOUT: Duration = Duration::from_secs(60);

pub type MotoError = Box<dyn std::error::Error>;

/// A running moto on a free loopback port, answering one request at a
/// time, killed when dropped. Its request log is `log_path()`.
pub struct MotoServer {
    child: Child,
    endpoint: String,
    log: PathBuf,
}

impl MotoServer {
    /// Starts `scripts/moto_serial.py` with the test venv's Python
    /// (`FLOE_TEST_PYTHON`, which scripts/test.sh sets), asking for any
    /// free port and reading back the one it bound: no port is chosen here
    /// and then raced for. `name` names the log file
    /// (`target/moto/<name>-<pid>.log`).
    pub fn start(name: &str) -> Result<MotoServer, MotoError> {
        let python = std::env::var("FLOE_TEST_PYTHON").map_err(|_| {
            "FLOE_TEST_PYTHON is not set: run scripts/test.sh, which installs moto into .venv and sets it"
        })?;
        let root = workspace_root()?;
        let logs = target_dir(&root).join("moto");
        std::fs::create_dir_all(&logs)?;
        let log = logs.join(format!("{name}-{}.log", std::process::id()));
        let mut child = Command::new(python)
            .arg(root.join("scripts/moto_serial.py"))
            .arg("127.0.0.1")
            .arg("0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err("moto's stdout was not piped".into());
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout);
            let mut first = String::new();
            let read = lines.read_line(&mut first).map(|_| first);
            let _ = tx.send(read);
            // Whatever moto prints later is drained, so it never blocks
            // on a full pipe.
            let _ = std::io::copy(&mut lines, &mut std::io::sink());
        });
        let port = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) => parse_port(&line),
            Ok(Err(e)) => Err(format!("reading moto's port: {e}")),
            Err(_) => Err(format!("moto did not start within {START_TIMEOUT:?}")),
        };
        match port {
            Ok(port) => Ok(MotoServer {
                child,
                endpoint: format!("http://127.0.0.1:{port}"),
                log,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{e}; its log {}:\n{}", log.display(), tail(&log)).into())
            }
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Where moto writes each request it answered, and its errors.
    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port in moto_serial.py's first line, `listening on HOST:PORT`.
fn parse_port(line: &str) -> Result<u16, String> {
    line.trim()
        .strip_prefix("listening on ")
        .and_then(|addr| addr.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .ok_or_else(|| format!("moto's first line is not `listening on HOST:PORT`: {line:?}"))
}

fn workspace_root() -> Result<PathBuf, MotoError> {
    Ok(Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace root")?
        .to_path_buf())
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// The last lines of a log, for an error that says what moto said.
fn tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::parse_port;

    #[test]
    fn the_port_is_read_from_the_first_line() {
        for (line, want) in [
            ("listening on 127.0.0.1:41234\n", Ok(41234)),
            ("listening on 127.0.0.1:0", Ok(0)),
            (" * Running on http://127.0.0.1:5000", Err(())),
            ("listening on 127.0.0.1:port", Err(())),
            ("", Err(())),
        ] {
            assert_eq!(parse_port(line).map_err(|_| ()), want, "{line:?}");
        }
    }
}
