//! The provider's log. The plugin protocol has no progress channel: what
//! a provider writes to stderr, Terraform's plugin host reads as log lines
//! (hclog's JSON shape gives each its level), shown with `TF_LOG=INFO` and
//! kept with `TF_LOG_PATH`. A deployment's plan reports each step here.

use serde_json::json;
use std::io::Write;

pub fn info(message: impl AsRef<str>) {
    write("info", message.as_ref());
}

pub fn warn(message: impl AsRef<str>) {
    write("warn", message.as_ref());
}

fn write(level: &str, message: &str) {
    // hclog's own layout (Go's `2006-01-02T15:04:05.000000Z07:00`): Terraform
    // drops a line whose time it cannot parse.
    let layout = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    );
    let now = time::OffsetDateTime::now_utc()
        .format(&layout)
        .unwrap_or_default();
    let line = json!({
        "@timestamp": now,
        "@level": level,
        "@message": message,
        "@module": "floe",
    });
    // A log line that cannot be written is not worth failing an apply for.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
