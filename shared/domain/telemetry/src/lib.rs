//! One logging setup for every function, so that the api, the worker and
//! local mode write the same JSON lines (CloudWatch Logs Insights reads the
//! fields) and honour the same variables.
//!
//! A line is `{"timestamp","level","fields":{..},"target","span":{..}}`:
//! the event's fields (its message among them) and, when it happens inside
//! a span, the innermost span's fields and name; inside an API request and
//! no span, the request's method, path, id and organization as the span
//! named `request` (see [`request`]).
//!
//! The lines are written by this crate's own formatter ([`json`]) rather
//! than tracing-subscriber's JSON one, which parses the span's fields back
//! from text for every line and re-parses them for every field recorded
//! later: with an access line per request, that was a fifth of a warm
//! read's work (issue 16).

mod batched;
pub mod json;
pub mod request;

pub use batched::{Batched, Flush};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Installs the global subscriber: `FLOE_LOG` filters (default `info`),
/// `FLOE_LOG_FORMAT=text` switches from JSON to human-readable lines. Each
/// line is written to stderr as it happens: what a Lambda function needs,
/// since its process may be frozen as soon as it answers.
pub fn init() {
    install(std::io::stderr);
}

/// [`init`] for a long-running server (local mode): lines are gathered in
/// memory and written to stderr in batches, at least every
/// [`batched::FLUSH_EVERY`], so a busy server makes a write per batch
/// rather than per line. Keep the guard for the process's life: dropping it
/// writes what is left.
pub fn init_batched() -> Flush {
    let (writer, flush) = Batched::stderr();
    install(writer);
    flush
}

fn install<W>(writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_env("FLOE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let text = std::env::var("FLOE_LOG_FORMAT").is_ok_and(|f| f == "text");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    if text {
        builder.init();
    } else {
        builder
            .fmt_fields(json::Fields)
            .event_format(json::Lines)
            .init();
    }
}
