//! `terraform-provider-floe`: Floe's Terraform provider. Terraform starts it
//! as a plugin and speaks the plugin protocol (version 6) to it over gRPC;
//! every resource and data source is a client of Floe's HTTP API, as the
//! CLI is, so it works against local mode and AWS alike.

mod client;
mod common;
mod data_sources;
mod deployment;
mod front;
mod log;
mod plans;
mod policy;
mod provider;
mod repository;
mod schema;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The API client takes rustls's process default; two back-ends are
    // built in (tonic brings ring), so one is chosen before any TLS.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let inner = std::env::var_os(front::INNER).is_some();
    match std::env::var("PLUGIN_CLIENT_CERT") {
        Ok(pem) if !pem.is_empty() && !inner => {
            let code = front::run(&pem).await?;
            std::process::exit(code);
        }
        _ => {
            if inner {
                front::end_with_front();
            }
            let served = tf_provider::serve("floe", provider::FloeProvider::default()).await;
            if inner {
                // Returning would wait for the runtime's blocking stdin read
                // (the front's pipe), which ends only with the front.
                std::process::exit(i32::from(served.is_err()));
            }
            served
        }
    }
}
