//! `floe-worker`: the worker function. Reads its configuration and builds
//! its adapters once per cold start, then serves SQS batches of plan jobs
//! and the one-minute sweep through the Lambda runtime.

use floe_wiring::{Env, WorkerConfig};
use floe_worker::adapters::Adapters;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;
use std::process::ExitCode;
use std::time::SystemTime;

#[tokio::main]
async fn main() -> ExitCode {
    floe_telemetry::init();
    let config = match WorkerConfig::read(&Env::process()) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "configuration error");
            return ExitCode::from(2);
        }
    };
    let adapters = match Adapters::from_config(&config).await {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "configuration error");
            return ExitCode::from(2);
        }
    };
    let adapters = &adapters;
    let handler = service_fn(move |event: LambdaEvent<Value>| async move {
        let remaining = event
            .context
            .deadline()
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let engine = adapters.engine(&event.context.request_id, remaining);
        let handlers = floe_worker::Handlers {
            schedules: adapters
                .schedules
                .as_deref()
                .map(|s| s as &dyn floe_ports::ScheduleSync),
            instances: Some(&adapters.instances),
            drills: Some(&adapters.app),
            health: Some(&adapters.health),
        };
        floe_worker::handle_all(&engine, handlers, event.payload)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, kind = e.kind(), "invocation failed");
                Diagnostic {
                    error_type: e.kind().to_string(),
                    error_message: e.to_string(),
                }
            })
    });
    match lambda_runtime::run(handler).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "lambda runtime stopped");
            ExitCode::FAILURE
        }
    }
}
