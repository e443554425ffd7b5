//! `floe-api`: the api function. On Lambda (AWS_LAMBDA_RUNTIME_API set) it
//! serves the router through lambda_http; elsewhere on a TCP port. Also:
//! `floe-api token` prints a local token, `floe-api openapi` the contract.

mod config;

use floe_auth::Role;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "usage:
  floe-api [serve]                                 serve the API (FLOE_LISTEN, default 127.0.0.1:8080)
  floe-api token --org ORG --role ROLE [--role ROLE] [--sub NAME] [--ttl SECONDS]
                                                   print a token signed with the local HS256 secret
  floe-api openapi                                 print the OpenAPI document";

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

async fn serve() -> ExitCode {
    floe_telemetry::init();
    let store = match config::backend().await {
        Ok(b) => floe_store::Store::new(b),
        Err(e) => {
            eprintln!("floe-api: {e}");
            return ExitCode::from(2);
        }
    };
    let cipher = match config::cipher().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("floe-api: {e}");
            return ExitCode::from(2);
        }
    };
    let on_lambda = std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some();
    let adapters = if on_lambda {
        lambda_adapters().await
    } else {
        config::local_worker(store.clone(), cipher.clone()).map(|local| {
            let scheduler: Arc<dyn floe_schedules::Scheduler> = local.scheduler;
            (local.queue, local.clusters, scheduler)
        })
    };
    let (queue, clusters, scheduler) = match adapters {
        Ok(a) => a,
        Err(e) => {
            eprintln!("floe-api: {e}");
            return ExitCode::from(2);
        }
    };
    let state = match config::state(queue, clusters, scheduler, store, cipher).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "configuration error");
            eprintln!("floe-api: {e}");
            return ExitCode::from(2);
        }
    };
    let app = floe_api::app(state);

    if on_lambda {
        return match lambda_http::run(app).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "lambda runtime stopped");
                ExitCode::FAILURE
            }
        };
    }

    let listen = config::listen();
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("floe-api: cannot listen on {listen}: {e}");
            return ExitCode::from(2);
        }
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or(listen);
    // The first stdout line is the address (tests and scripts read it).
    println!("floe-api listening on http://{addr}");
    if !config::uses_jwks() {
        println!(
            "get a token: cargo run -q --bin floe-api -- token --org acme --role platform_admin"
        );
    }
    tracing::info!(addr = %addr, "listening");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe-api: {e}");
            ExitCode::FAILURE
        }
    }
}

type Adapters = (
    Arc<dyn floe_plans::WorkQueue>,
    Arc<dyn floe_clusters::Clusters>,
    Arc<dyn floe_schedules::Scheduler>,
);

async fn lambda_adapters() -> Result<Adapters, config::ConfigError> {
    let clusters = config::lambda_clusters().await?;
    let scheduler = config::lambda_scheduler().await?;
    Ok((config::lambda_queue().await, clusters, scheduler))
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
    let secret = match config::jwt_secret() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("floe-api: {e}");
            return ExitCode::from(2);
        }
    };
    match floe_auth::issue_hs256(
        &secret,
        &config::issuer(),
        &config::audience(),
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
            eprintln!("floe-api: {e}");
            ExitCode::FAILURE
        }
    }
}
