//! The README's walk-through, run as the README has it: its shell block is
//! cut out of README.md and run by bash (`set -euo pipefail`) against a
//! fresh local server, so every `curl -f` and `jq -e` in it is an
//! assertion, and the README cannot drift from what works.
//!
//! Only what ties the block to this test's server changes: its address
//! replaces `http://127.0.0.1:8080`, `.floe` is this server's data folder,
//! and `cargo run -q --bin floe-local --` runs the binary the server runs.

use floe_tests::{Server, TestResult};
use std::process::Stdio;
use std::time::Duration;

/// The first ```sh block after the walk-through's heading.
fn walkthrough(readme: &str) -> Option<String> {
    let section = readme.split("## A walk-through with curl").nth(1)?;
    let block = section.split("```sh\n").nth(1)?;
    Some(block.split("\n```").next()?.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walkthrough_runs_as_written() -> TestResult {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))?;
    let script = walkthrough(&readme).ok_or("README.md has no walk-through block")?;
    assert!(
        script.contains("http://127.0.0.1:8080"),
        "the walk-through talks to the address ./scripts/run.sh serves"
    );
    let server =
        Server::start_with(&[("FLOE_SIM_BOOT_DELAY_MS", "0"), ("FLOE_PLAN_POLL_MS", "50")]);
    let script = script.replace("http://127.0.0.1:8080", server.base_url());

    // Where the user stands: a folder whose .floe is the server's data.
    let work = tempfile::tempdir()?;
    std::os::unix::fs::symlink(server.data_dir(), work.path().join(".floe"))?;
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin)?;
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n\
             # `cargo run -q --bin floe-local -- ARGS` as the README types it.\n\
             if [ \"$1 $2 $3 $4 $5\" = \"run -q --bin floe-local --\" ]; then shift 5; exec '{}' \"$@\"; fi\n\
             echo \"the walk-through ran an unexpected cargo command: $*\" >&2; exit 97\n",
            server.binary().display()
        ),
    )?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755))?;
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = tokio::process::Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())
        .env("PATH", path)
        .env("FLOE_DATA_DIR", server.data_dir())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .map_err(|_| "the walk-through did not finish in 5 minutes")??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the README's walk-through failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- server\n{}",
        out.status,
        server.logs().join("\n")
    );
    Ok(())
}
