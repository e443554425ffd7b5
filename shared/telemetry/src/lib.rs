//! One logging setup for every function, so that the api, the worker and
//! local mode write the same JSON lines (CloudWatch Logs Insights reads the
//! fields) and honour the same variables.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber: `FLOE_LOG` filters (default `info`),
/// `FLOE_LOG_FORMAT=text` switches from JSON to human-readable lines.
pub fn init() {
    let filter = EnvFilter::try_from_env("FLOE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let text = std::env::var("FLOE_LOG_FORMAT").is_ok_and(|f| f == "text");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if text {
        builder.init();
    } else {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init();
    }
}
