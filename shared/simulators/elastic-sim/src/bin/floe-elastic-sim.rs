//! Serves one simulated Elasticsearch cluster until interrupted.
//!
//! ```text
//! floe-elastic-sim [--addr 127.0.0.1:9200] [--cluster-name NAME] [--nodes N]
//!                  [--fs-root DIR] [--data-path DIR] [--s3-endpoint URL] [--s3-region REGION]
//!                  [--s3-path-style] [--snapshot-delay-ms MS]
//!                  [--restore-delay-ms MS] [--fail-snapshots partial|failed]
//! ```
//!
//! S3 credentials come from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`,
//! never from the command line, where every process listing would show
//! them.

use floe_domain::secret::SecretString;
use floe_elastic_sim::{S3Access, S3Client, SimConfig, SimFaults, SimulatedCluster, SnapshotFault};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Sim(#[from] floe_elastic_sim::SimError),
    #[error("waiting for a stop signal failed: {0}")]
    Signal(std::io::Error),
}

fn value(args: &mut impl Iterator<Item = String>, flag: &str) -> Result<String, CliError> {
    args.next()
        .ok_or_else(|| CliError::Usage(format!("{flag} needs a value")))
}

fn millis(text: &str, flag: &str) -> Result<Duration, CliError> {
    text.parse()
        .map(Duration::from_millis)
        .map_err(|_| CliError::Usage(format!("{flag} takes milliseconds, not {text:?}")))
}

fn config() -> Result<SimConfig, CliError> {
    let mut config = SimConfig::new("floe-sim");
    config.addr = Some(SocketAddr::from(([127, 0, 0, 1], 9200)));
    let mut faults = SimFaults::default();
    let (mut s3_endpoint, mut s3_region, mut s3_path_style) = (None, None, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--addr" => {
                let text = value(&mut args, &flag)?;
                config.addr = Some(text.parse().map_err(|_| {
                    CliError::Usage(format!(
                        "--addr takes an address such as 127.0.0.1:9200, not {text:?}"
                    ))
                })?);
            }
            "--cluster-name" => config.cluster_name = value(&mut args, &flag)?,
            "--nodes" => {
                let text = value(&mut args, &flag)?;
                config.nodes = text.parse().map_err(|_| {
                    CliError::Usage(format!("--nodes takes a number, not {text:?}"))
                })?;
            }
            "--fs-root" => config.fs_root = Some(value(&mut args, &flag)?.into()),
            "--data-path" => config.data_path = Some(value(&mut args, &flag)?.into()),
            "--s3-endpoint" => s3_endpoint = Some(value(&mut args, &flag)?),
            "--s3-region" => s3_region = Some(value(&mut args, &flag)?),
            "--s3-path-style" => s3_path_style = true,
            "--snapshot-delay-ms" => {
                faults.snapshot_delay = millis(&value(&mut args, &flag)?, &flag)?
            }
            "--restore-delay-ms" => {
                faults.restore_delay = millis(&value(&mut args, &flag)?, &flag)?
            }
            "--fail-snapshots" => {
                faults.fail_snapshots = Some(match value(&mut args, &flag)?.as_str() {
                    "partial" => SnapshotFault::Partial,
                    "failed" => SnapshotFault::Failed,
                    other => {
                        return Err(CliError::Usage(format!(
                            "--fail-snapshots takes partial or failed, not {other:?}"
                        )));
                    }
                });
            }
            "-h" | "--help" => {
                return Err(CliError::Usage(
                    "usage: floe-elastic-sim [--addr 127.0.0.1:9200] [--cluster-name NAME] [--nodes N] \
                     [--fs-root DIR] [--data-path DIR] [--s3-endpoint URL] [--s3-region REGION] [--s3-path-style] \
                     [--snapshot-delay-ms MS] [--restore-delay-ms MS] [--fail-snapshots partial|failed]"
                        .to_string(),
                ));
            }
            other => {
                return Err(CliError::Usage(format!(
                    "unknown argument {other:?}; try --help"
                )));
            }
        }
    }
    if let (Ok(access_key), Ok(secret_key)) = (
        std::env::var("AWS_ACCESS_KEY_ID"),
        std::env::var("AWS_SECRET_ACCESS_KEY"),
    ) {
        config.s3 = Some(S3Client::from(S3Access {
            endpoint_url: s3_endpoint,
            region: s3_region.unwrap_or_else(|| "us-east-1".to_string()),
            access_key,
            secret_key: SecretString::new(secret_key),
            force_path_style: s3_path_style,
        }));
    }
    config.faults = faults;
    Ok(config)
}

async fn run() -> Result<(), CliError> {
    let cluster = SimulatedCluster::start(config()?).await?;
    println!("{}", cluster.url());
    stopped().await.map_err(CliError::Signal)?;
    cluster.shutdown().await?;
    Ok(())
}

/// Ctrl-C, or the SIGTERM a process manager sends.
async fn stopped() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            signal = tokio::signal::ctrl_c() => signal,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("floe-elastic-sim: {error}");
            ExitCode::FAILURE
        }
    }
}
