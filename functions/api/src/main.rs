//! `floe-api`: the api function. Serves Floe's router through lambda_http
//! behind API Gateway. It records deployments and plans, wakes the worker
//! through SQS (which also carries schedule reconciliations to the worker),
//! and seals credentials with KMS; it calls neither EC2 nor SSM nor
//! EventBridge Scheduler. Local mode is `floe-local`.

mod adapters;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    floe_telemetry::init();
    let state = match adapters::state().await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "configuration error");
            eprintln!("floe-api: {e}");
            return ExitCode::from(2);
        }
    };
    match lambda_http::run(floe_api::app(state)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "lambda runtime stopped");
            ExitCode::FAILURE
        }
    }
}
