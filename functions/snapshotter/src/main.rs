//! `floe-snapshotter`: reads its configuration and builds its adapters once
//! per cold start, then serves EventBridge Scheduler invocations.

use floe_snapshotter::adapters;
use floe_wiring::{Env, SnapshotterConfig};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// Left for recording the run and retention after the wait for a snapshot.
const RESERVE: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> ExitCode {
    floe_telemetry::init();
    let config = match SnapshotterConfig::read(&Env::process()) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "configuration error");
            return ExitCode::from(2);
        }
    };
    let snapshotter = match adapters::snapshotter(&config).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "configuration error");
            return ExitCode::from(2);
        }
    };
    let (snapshotter, config) = (&snapshotter, &config);
    let handler = service_fn(move |event: LambdaEvent<Value>| async move {
        let remaining = event
            .context
            .deadline()
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        // A function configured with a short timeout waits less.
        let mut settings = adapters::settings(config);
        settings.wait = settings.wait.min(remaining.saturating_sub(RESERVE));
        let snapshotter = snapshotter.clone().with_settings(settings);
        floe_snapshotter::handle(&snapshotter, event.payload)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, kind = e.kind(), "invocation will be retried");
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
