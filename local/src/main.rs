//! `floe-local`: Floe on one machine. `serve` runs the API, the worker, the
//! scheduler and the snapshotter in this process on the embedded default
//! (SQLite under `.floe/`, simulated compute and clusters); `token` prints a
//! token signed with the local secret; `openapi` prints the contract.
//!
//! The Lambda functions are separate binaries (`functions/*`) that link
//! none of the simulators.

mod platform;
mod s3;

// A warm read allocates and frees a few dozen small buffers across two
// worker threads; glibc's malloc (its arena locks and fastbin
// consolidation) was some 15% of that read's CPU, mimalloc's thread-local
// pages a fraction of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use floe_auth::Role;
use floe_domain::repository::EndpointPolicy;
use floe_wiring::{Env, LocalConfig, WiringError, build};
use platform::LocalPlatform;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "usage:
  floe-local [serve]                               run Floe locally (FLOE_LISTEN, default 127.0.0.1:8080)
  floe-local token --org ORG --role ROLE [--role ROLE] [--sub NAME] [--ttl SECONDS]
                                                   print a token signed with the local HS256 secret
  floe-local openapi                               print the OpenAPI document";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("serve") => serve().await,
        Some("token") => token(&args[1..]),
        Some("openapi") => {
            print!("{}", floe_api::openapi_json());
            ExitCode::SUCCESS
        }
        Some("-h") | Some("--help") | Some("help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("unknown command {other:?}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn config() -> Result<LocalConfig, WiringError> {
    Ok(LocalConfig::read(&Env::process())?)
}

async fn serve() -> ExitCode {
    // A server answering many requests a second writes its lines in
    // batches; the guard writes the last ones when serving ends.
    let _flush = floe_telemetry::init_batched();
    match serve_with(config()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve");
            eprintln!("floe-local: {e}");
            ExitCode::from(2)
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error("{0}")]
    Wiring(#[from] WiringError),
    #[error("cannot listen on {0}: {1}")]
    Listen(String, std::io::Error),
    #[error("{0}")]
    Serve(std::io::Error),
    #[error("{0}")]
    S3(#[from] s3::LocalS3Error),
    #[error("cannot make the data folder {0} private: {1}")]
    DataDir(String, std::io::Error),
}

/// Makes the data folder (`FLOE_DATA_DIR`) this user's alone, before
/// anything is written into it: it holds the records, the key that seals
/// repository credentials, the JWT secret and the snapshots of local
/// repositories, so no other user of the machine may list or read it,
/// whatever the files inside were created with.
fn private_data_dir(dir: &std::path::Path) -> Result<(), ServeError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let failed = |e| ServeError::DataDir(dir.display().to_string(), e);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(failed)?;
    // A folder made before (by an older Floe, or by hand) is tightened too.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(failed)
}

async fn serve_with(config: Result<LocalConfig, WiringError>) -> Result<(), ServeError> {
    let config = config?;
    private_data_dir(&config.data_dir)?;
    // The AWS SDK configuration loads only if the store or the cipher is on AWS.
    let store = build::store(&config.store, floe_wiring::Aws::Shared).await?;
    let cipher = build::cipher(&config.secrets, floe_wiring::Aws::Shared).await?;
    let verifier = build::verifier(&config.auth).await?;
    // Kept for the process's life: dropping it stops the store.
    let local_s3 = match config.s3 {
        Some(addr) => Some(s3::start(&config.data_dir, addr).await?),
        None => None,
    };
    // Repository endpoints are held to one policy, by one resolver, when
    // written (the API) and again before a plan hands them to nodes.
    let endpoint_check = floe_plans::EndpointCheck {
        policy: EndpointPolicy {
            allow_private: config.allow_private_endpoints,
            // Repositories may point at the local store even when other
            // private endpoints are refused.
            trusted: local_s3.as_ref().map(|s| s.addr()),
        },
        resolver: if config.offline {
            Arc::new(floe_ports::OfflineResolver)
        } else {
            Arc::new(floe_ports::SystemResolver)
        },
    };
    let platform = LocalPlatform::start(&config, store.clone(), cipher.clone(), &endpoint_check)
        .map_err(WiringError::from)?;
    let app = floe_app::App {
        store,
        cipher,
        endpoint_policy: endpoint_check.policy,
        // Each deployment's simulated cluster serves a loopback address of
        // its own for its whole life, named by its certificate.
        endpoints: floe_domain::access::EndpointNaming::Loopback,
        queue: platform.queue.clone(),
        schedules: platform.schedules.clone(),
        clusters: platform.clusters.clone(),
        resolver: endpoint_check.resolver.clone(),
        views: Default::default(),
        hashing_keys: Default::default(),
    };
    platform.fire(app.clone());
    let app = floe_api::app(floe_api::ApiState::new(app, Arc::new(verifier)));
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|e| ServeError::Listen(config.listen.clone(), e))?;
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| config.listen.clone());
    // The first stdout line is the address (tests and scripts read it).
    println!("floe-local listening on http://{addr}");
    if let Some(s) = &local_s3 {
        println!(
            "floe-local S3 store on http://{} (bucket {}; endpoint and keys in {})",
            s.addr(),
            s3::BUCKET,
            config.data_dir.join("s3.env").display()
        );
        // One key pair reaches the whole store: every deployment that uses
        // it, of every organization, can read every other's snapshots.
        println!(
            "  it is a single-user store with one key pair: organizations using it are not kept apart (docs/tenant-isolation.md)"
        );
    }
    if !config.auth.uses_jwks() {
        println!(
            "get a token: cargo run -q --bin floe-local -- token --org acme --role platform_admin"
        );
    }
    tracing::info!(addr = %addr, "listening");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServeError::Serve)
}

fn token(args: &[String]) -> ExitCode {
    let mut org = None;
    let mut roles = Vec::new();
    let mut sub = String::from("local-user");
    let mut ttl = 3600u64;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else {
            eprintln!("{flag} needs a value\n{USAGE}");
            return ExitCode::from(2);
        };
        match flag.as_str() {
            "--org" => org = Some(value.clone()),
            "--sub" => sub = value.clone(),
            "--ttl" => match value.parse() {
                Ok(t) => ttl = t,
                Err(_) => {
                    eprintln!("--ttl takes seconds");
                    return ExitCode::from(2);
                }
            },
            "--role" => match Role::parse(value) {
                Some(r) => roles.push(r),
                None => {
                    let known: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
                    eprintln!("unknown role {value:?}; one of {}", known.join(", "));
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!("unknown flag {flag:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let (Some(org), false) = (org, roles.is_empty()) else {
        eprintln!("--org and at least one --role are required\n{USAGE}");
        return ExitCode::from(2);
    };
    if let Err(m) = floe_domain::names::validate_org(&org) {
        eprintln!("--org {m}");
        return ExitCode::from(2);
    }
    let config = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("floe-local: {e}");
            return ExitCode::from(2);
        }
    };
    let secret = match build::jwt_secret(&config.auth) {
        Ok(Some(s)) => s,
        Ok(None) => {
            eprintln!("floe-local: tokens come from the identity provider when FLOE_JWKS_* is set");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("floe-local: {e}");
            return ExitCode::from(2);
        }
    };
    match floe_auth::issue_hs256(
        &secret,
        &config.auth.issuer,
        &config.auth.audience,
        &sub,
        &org,
        &roles,
        Duration::from_secs(ttl),
    ) {
        Ok(t) => {
            println!("{t}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("floe-local: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod data_dir_tests {
    use super::private_data_dir;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    }

    /// A new data folder is made 0700, and one made open before is
    /// tightened: no other user of the machine lists the records, keys or
    /// snapshots inside.
    #[test]
    fn the_data_folder_is_its_owners_alone() -> Result<(), Box<dyn std::error::Error>> {
        let root = tempfile::tempdir()?;
        let new = root.path().join("a").join(".floe");
        private_data_dir(&new).map_err(|e| e.to_string())?;
        assert_eq!(mode(&new), 0o700);

        let old = root.path().join("old");
        std::fs::create_dir(&old)?;
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755))?;
        private_data_dir(&old).map_err(|e| e.to_string())?;
        assert_eq!(mode(&old), 0o700);
        Ok(())
    }
}
