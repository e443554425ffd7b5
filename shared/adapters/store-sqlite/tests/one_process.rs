//! A database file belongs to one process at a time: a second Floe started
//! on the same data directory is refused at once, with a message that says
//! why, and opens the file once the first has gone.

use floe_store::Backend;
use floe_store::backend::{Attrs, Kind, Record, RecordKey, Write};
use floe_store_sqlite::SqliteBackend;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Set in the child this test starts: the file it opens and holds.
const HOLD: &str = "FLOE_TEST_HOLD_DB";
const NAME: &str = "a_second_process_is_refused_while_the_first_holds_the_file";
/// What the child prints once it holds the file (libtest may print the
/// test's name before it on the same line).
const HELD: &str = "floe-test: the file is held";

/// The child's part: open the file, write a record and read it back, say
/// so, and hold the file until the parent closes stdin.
fn hold(path: &Path) -> TestResult {
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let backend = SqliteBackend::open(path)?;
    runtime.block_on(backend.write(vec![Write::Create(Record {
        key: RecordKey::new("o", Kind::Policy, "held"),
        body: "{}".to_string(),
        version: 1,
        refs: 0,
        attrs: Attrs::default(),
        expires_at: None,
    })]))?;
    // Reads take and drop locks of their own on the same file (through
    // the read connections): the process's hold must outlast them.
    let read = runtime.block_on(backend.get(&RecordKey::new("o", Kind::Policy, "held")))?;
    assert!(read.is_some(), "the write is not read back");
    println!("{HELD}");
    let mut rest = Vec::new();
    std::io::stdin().read_to_end(&mut rest)?;
    Ok(())
}

#[test]
fn a_second_process_is_refused_while_the_first_holds_the_file() -> TestResult {
    if let Some(path) = std::env::var_os(HOLD) {
        return hold(Path::new(&path));
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("floe.db");
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(HOLD, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("child stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let held = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line.contains(HELD));
    assert!(held, "the child never held the file");

    let refused = SqliteBackend::open(&path)
        .err()
        .ok_or("opened a file another process holds")?;
    let message = refused.to_string();
    assert!(
        message.contains("in use by another process") && message.contains("floe.db"),
        "{message}"
    );

    drop(child.stdin.take());
    // The child's last lines (its test's result) must find a reader.
    lines.for_each(drop);
    assert!(child.wait()?.success(), "the child failed");
    // The lock went with the process; the record it wrote stays.
    let backend = SqliteBackend::open(&path)?;
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let record = runtime.block_on(backend.get(&RecordKey::new("o", Kind::Policy, "held")))?;
    assert!(record.is_some(), "the first process's write is lost");
    Ok(())
}
