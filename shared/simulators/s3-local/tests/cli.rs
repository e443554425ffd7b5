//! The AWS CLI (awscli from PyPI, which `scripts/test.sh` installs into
//! `.venv`) against the store: `aws s3 cp` up and down (a 9 MB file, so the
//! CLI uses multipart), `aws s3 ls`, `aws s3 rm`. Skipped, with a message,
//! when no CLI is found.

use floe_s3_local::{Credentials, LocalS3, LocalS3Config};
use std::path::{Path, PathBuf};
use std::process::Output;

const ACCESS_KEY: &str = "FLOELOCALCLIKEY00001";
const SECRET_KEY: &str = "floe-local-cli-secret-0123456789abcdefgh";

/// `FLOE_AWS_CLI`, else the workspace's `.venv/bin/aws`, else `aws` on PATH.
fn find_cli() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FLOE_AWS_CLI") {
        return Some(PathBuf::from(path));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../.venv/bin/aws");
    if venv.is_file() {
        return Some(venv);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("aws"))
        .find(|candidate| candidate.is_file())
}

struct Cli {
    program: PathBuf,
    home: PathBuf,
    endpoint: String,
}

impl Cli {
    async fn run(&self, args: &[&str]) -> Output {
        self.command(SECRET_KEY)
            .args(args)
            .output()
            .await
            .expect("the aws CLI runs")
    }

    fn command(&self, secret: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        // Nothing from the developer's own AWS setup may leak in (a
        // profile, an endpoint, real credentials).
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("AWS_") {
                command.env_remove(&name);
            }
        }
        command
            .env("HOME", &self.home)
            .env("AWS_CONFIG_FILE", self.home.join("config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", self.home.join("credentials"))
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .arg("--endpoint-url")
            .arg(&self.endpoint);
        command
    }

    async fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args).await;
        assert!(
            output.status.success(),
            "aws {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

#[tokio::test]
async fn aws_cli_copies_and_lists() {
    let Some(program) = find_cli() else {
        eprintln!(
            "SKIPPED aws_cli_copies_and_lists: no aws CLI (set FLOE_AWS_CLI, or run scripts/test.sh, which installs it into .venv)"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    tokio::fs::create_dir_all(&home).await.expect("home");
    tokio::fs::write(
        home.join("config"),
        "[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n",
    )
    .await
    .expect("config");
    let s3 = LocalS3::start(
        LocalS3Config::new(
            dir.path().join("s3"),
            Credentials::new(ACCESS_KEY, SECRET_KEY),
        )
        .with_bucket("floe-snapshots"),
    )
    .await
    .expect("start");
    let cli = Cli {
        program,
        home,
        endpoint: s3.endpoint_url(),
    };

    let small = dir.path().join("small.txt");
    tokio::fs::write(&small, b"hello from the aws cli\n")
        .await
        .expect("write");
    let big = dir.path().join("big.bin");
    let big_content: Vec<u8> = (0..9_000_000u32).map(|i| (i % 251) as u8).collect();
    tokio::fs::write(&big, &big_content).await.expect("write");

    let small_arg = small.to_string_lossy().into_owned();
    let big_arg = big.to_string_lossy().into_owned();
    cli.ok(&["s3", "cp", &small_arg, "s3://floe-snapshots/docs/small.txt"])
        .await;
    cli.ok(&["s3", "cp", &big_arg, "s3://floe-snapshots/docs/big.bin"])
        .await;

    let listing = cli.ok(&["s3", "ls", "s3://floe-snapshots/docs/"]).await;
    assert!(listing.contains("small.txt"), "{listing}");
    assert!(listing.contains(" 9000000 big.bin"), "{listing}");
    let top = cli.ok(&["s3", "ls", "s3://floe-snapshots/"]).await;
    assert!(top.contains("PRE docs/"), "{top}");
    let buckets = cli.ok(&["s3", "ls"]).await;
    assert!(buckets.contains("floe-snapshots"), "{buckets}");

    let back = dir.path().join("back.bin");
    let back_arg = back.to_string_lossy().into_owned();
    cli.ok(&["s3", "cp", "s3://floe-snapshots/docs/big.bin", &back_arg])
        .await;
    assert!(tokio::fs::read(&back).await.expect("read") == big_content);
    let back_small = dir.path().join("back.txt");
    let back_small_arg = back_small.to_string_lossy().into_owned();
    cli.ok(&[
        "s3",
        "cp",
        "s3://floe-snapshots/docs/small.txt",
        &back_small_arg,
    ])
    .await;
    assert_eq!(
        tokio::fs::read(&back_small).await.expect("read"),
        b"hello from the aws cli\n"
    );

    cli.ok(&["s3", "rm", "--recursive", "s3://floe-snapshots/docs/"])
        .await;
    let empty = cli.ok(&["s3", "ls", "s3://floe-snapshots/"]).await;
    assert!(empty.trim().is_empty(), "{empty}");

    // A wrong secret is refused.
    let wrong = cli
        .command("wrong")
        .args(["s3", "ls", "s3://floe-snapshots/"])
        .output()
        .await
        .expect("runs");
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("SignatureDoesNotMatch"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    s3.shutdown().await.expect("shutdown");
}
