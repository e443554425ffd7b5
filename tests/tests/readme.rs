//! The walk-through of the manual's getting-started page, run as the page
//! has it: its shell block is cut out of docs/getting-started.md and run by
//! bash (`set -euo pipefail`) against a fresh local server, so every
//! `curl -f` and `jq -e` in it is an assertion, and the page cannot drift
//! from what works. The README's short tour shows lines of that block only,
//! so the front door cannot show a command the tested walk-through does
//! not run, and its blocks run on their own too, in order, as a user
//! pastes them.
//!
//! Only what ties the block to this test's server changes: its address
//! replaces `http://127.0.0.1:8080`, `.floe` is this server's data folder,
//! and `cargo run -q --bin floe-local --` runs the binary the server runs.

use floe_tests::{Server, TestResult};
use std::process::Stdio;
use std::time::Duration;

/// The page that holds the walk-through, from the repository's root.
const PAGE: &str = "docs/getting-started.md";

fn read(relative: &str) -> Result<String, Box<dyn std::error::Error>> {
    let path = format!("{}/../{relative}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}").into())
}

/// The first ```sh block after the walk-through's heading.
fn walkthrough(page: &str) -> Option<String> {
    let section = page.split("## A walk-through with curl").nth(1)?;
    let block = section.split("```sh\n").nth(1)?;
    Some(block.split("\n```").next()?.to_string())
}

/// The ```sh blocks of `markdown`, in order.
fn sh_blocks(markdown: &str) -> Vec<&str> {
    markdown
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("\n```").next())
        .collect()
}

/// The README's tour shows commands the walk-through runs, line for line:
/// every line of its ```sh blocks but the first (the two commands), other
/// than blank lines and comments, is a line of the walk-through's block.
#[test]
fn the_readme_tour_shows_only_lines_of_the_walkthrough() -> TestResult {
    let readme = read("README.md")?;
    let script =
        walkthrough(&read(PAGE)?).ok_or_else(|| format!("{PAGE} has no walk-through block"))?;
    let walked: Vec<&str> = script.lines().collect();
    let blocks = sh_blocks(&readme);
    assert!(
        blocks
            .first()
            .is_some_and(|b| b.contains("./scripts/run.sh")),
        "the README's first shell block is the two commands"
    );
    let tour: Vec<&str> = blocks[1..]
        .iter()
        .flat_map(|b| b.lines())
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert!(
        !tour.is_empty(),
        "the README has a tour after the two commands"
    );
    let missing: Vec<&str> = tour
        .into_iter()
        .filter(|line| !walked.contains(line))
        .collect();
    assert!(
        missing.is_empty(),
        "the README shows lines the walk-through in {PAGE} does not run:\n{}",
        missing.join("\n")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_walkthrough_runs_as_written() -> TestResult {
    let page = read(PAGE)?;
    let script = walkthrough(&page).ok_or_else(|| format!("{PAGE} has no walk-through block"))?;
    run_as_a_user(&script, PAGE).await
}

/// The README's tour on its own: its blocks after the two commands, in
/// order, as a user pastes them one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_tour_runs_as_written() -> TestResult {
    let readme = read("README.md")?;
    let blocks = sh_blocks(&readme);
    let tour = blocks.get(1..).ok_or("the README has no tour")?.join("\n");
    run_as_a_user(&tour, "README.md").await
}

/// Runs `script` (from `source`) with bash against a fresh local server,
/// from a folder whose `.floe` is the server's data, as a user would.
async fn run_as_a_user(script: &str, source: &str) -> TestResult {
    assert!(
        script.contains("http://127.0.0.1:8080"),
        "{source} talks to the address ./scripts/run.sh serves"
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
             # `cargo run -q --bin floe-local -- ARGS` as the walk-through types it.\n\
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
        .map_err(|_| "it did not finish in 5 minutes")??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the shell of {source} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- server\n{}",
        out.status,
        server.logs().join("\n")
    );
    Ok(())
}
