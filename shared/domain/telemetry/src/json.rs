//! The JSON lines, written straight into the line's buffer.
//!
//! A span's fields are kept (by [`Fields`]) as the members of a JSON object
//! without its braces, `"method":"GET","path":"/x"`, so that a field
//! recorded later is appended, and every line in the span copies them as
//! they are. Nothing is parsed back.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber, span};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::request;

/// Formats fields as JSON object members (see the module's comment).
#[derive(Debug, Clone, Copy, Default)]
pub struct Fields;

impl<'w> FormatFields<'w> for Fields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: Writer<'w>,
        fields: R,
    ) -> fmt::Result {
        let mut members = Members::new(&mut writer, true);
        fields.record(&mut members);
        members.result
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &span::Record<'_>,
    ) -> fmt::Result {
        let first = current.fields.is_empty();
        let mut writer = current.as_writer();
        let mut members = Members::new(&mut writer, first);
        fields.record(&mut members);
        members.result
    }
}

/// Formats each event as one JSON line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lines;

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        writer.write_str("{\"timestamp\":\"")?;
        timestamp(&mut writer, chrono::Utc::now())?;
        write!(writer, "\",\"level\":\"{}\",\"fields\":{{", meta.level())?;
        let mut members = Members::new(&mut writer, true);
        event.record(&mut members);
        members.result?;
        writer.write_str("},\"target\":")?;
        string(&mut writer, meta.target())?;
        if let Some(span) = ctx.lookup_current() {
            writer.write_str(",\"span\":{")?;
            let extensions = span.extensions();
            // Written by `Fields` when it formats the span's fields: already
            // JSON members.
            if let Some(fields) = extensions.get::<FormattedFields<N>>()
                && !fields.fields.is_empty()
            {
                writer.write_str(&fields.fields)?;
                writer.write_char(',')?;
            }
            writer.write_str("\"name\":")?;
            string(&mut writer, span.name())?;
            writer.write_char('}')?;
        } else if let Some(written) = request::write_current(|r| request_members(&mut writer, r)) {
            written?;
        }
        writer.write_str("}\n")
    }
}

/// RFC 3339 in UTC with microseconds, `2026-12-04T13:14:15.123456Z`,
/// written straight into the line (no string is made for it).
fn timestamp(w: &mut impl fmt::Write, now: chrono::DateTime<chrono::Utc>) -> fmt::Result {
    use chrono::{Datelike, Timelike};
    // A leap second's nanoseconds run past a second; RFC 3339 has no room
    // for that in the fraction, so it stays at the second's last microsecond.
    let micros = (now.nanosecond() / 1_000).min(999_999);
    write!(
        w,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// The API request a line belongs to, as the `request` span it once was,
/// so that queries over the lines need not know the difference.
fn request_members(w: &mut impl fmt::Write, r: &request::Members<'_>) -> fmt::Result {
    w.write_str(",\"span\":{\"method\":")?;
    string(w, r.method)?;
    w.write_str(",\"path\":")?;
    string(w, r.path)?;
    w.write_str(",\"request_id\":")?;
    string(w, r.request_id)?;
    if let Some(org) = r.org {
        w.write_str(",\"org\":")?;
        string(w, org)?;
    }
    w.write_str(",\"name\":\"request\"}")
}

/// Writes visited fields as `"name":value` members, comma-separated.
struct Members<'a, 'w> {
    writer: &'a mut Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl<'a, 'w> Members<'a, 'w> {
    fn new(writer: &'a mut Writer<'w>, first: bool) -> Self {
        Members {
            writer,
            first,
            result: Ok(()),
        }
    }

    fn member(&mut self, field: &Field, value: impl FnOnce(&mut Writer<'w>) -> fmt::Result) {
        if self.result.is_err() {
            return;
        }
        self.result = (|| {
            if !self.first {
                self.writer.write_char(',')?;
            }
            self.first = false;
            string(self.writer, field.name())?;
            self.writer.write_char(':')?;
            value(self.writer)
        })();
    }
}

impl Visit for Members<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.member(field, |w| string(w, value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.member(field, |w| write!(w, "{value}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.member(field, |w| write!(w, "{value}"));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.member(field, |w| write!(w, "{value}"));
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.member(field, |w| write!(w, "{value}"));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.member(field, |w| write!(w, "{value}"));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinities: those are written as text.
        if value.is_finite() {
            self.member(field, |w| write!(w, "{value}"));
        } else {
            self.member(field, |w| string(w, &value.to_string()));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.member(field, |w| quoted(w, format_args!("{value}")));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.member(field, |w| quoted(w, format_args!("{value:?}")));
    }
}

/// A JSON string.
fn string(w: &mut impl fmt::Write, s: &str) -> fmt::Result {
    w.write_char('"')?;
    Escaped(w).write_str(s)?;
    w.write_char('"')
}

/// Formatted text as a JSON string, escaped as it is formatted.
fn quoted(w: &mut impl fmt::Write, args: fmt::Arguments<'_>) -> fmt::Result {
    w.write_char('"')?;
    Escaped(&mut *w).write_fmt(args)?;
    w.write_char('"')
}

/// Escapes what it is given as the inside of a JSON string.
struct Escaped<'a, W: fmt::Write>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Escaped<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut clean = 0;
        for (i, b) in s.bytes().enumerate() {
            // Only ASCII bytes are escaped, so `i` is always a char boundary.
            let escape = match b {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0..=0x1f | 0x7f => "",
                _ => continue,
            };
            self.0.write_str(&s[clean..i])?;
            if escape.is_empty() {
                write!(self.0, "\\u{b:04x}")?;
            } else {
                self.0.write_str(escape)?;
            }
            clean = i + 1;
        }
        self.0.write_str(&s[clean..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    fn lines(run: impl FnOnce()) -> Vec<serde_json::Value> {
        let out = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(out.clone())
            .fmt_fields(Fields)
            .event_format(Lines)
            .finish();
        tracing::subscriber::with_default(subscriber, run);
        let text = String::from_utf8(out.0.lock().expect("not poisoned").clone()).expect("utf-8");
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
            .collect()
    }

    #[test]
    fn a_line_holds_the_event_and_its_spans_fields() {
        let got = lines(|| {
            let span = tracing::info_span!(
                "request",
                method = "GET",
                path = %"/api/v1/deployments",
                org = tracing::field::Empty,
            );
            let _in = span.enter();
            span.record("org", "acme");
            tracing::info!(
                status = 200u16,
                latency_ms = 3u64,
                ok = true,
                "request done"
            );
        });
        assert_eq!(got.len(), 1);
        let line = &got[0];
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["target"], module_path!());
        assert_eq!(line["fields"]["message"], "request done");
        assert_eq!(line["fields"]["status"], 200);
        assert_eq!(line["fields"]["latency_ms"], 3);
        assert_eq!(line["fields"]["ok"], true);
        assert_eq!(line["span"]["name"], "request");
        assert_eq!(line["span"]["method"], "GET");
        assert_eq!(line["span"]["path"], "/api/v1/deployments");
        assert_eq!(line["span"]["org"], "acme", "recorded after the span began");
        let stamp = line["timestamp"].as_str().expect("a timestamp");
        assert!(
            chrono::DateTime::parse_from_rfc3339(stamp).is_ok(),
            "{stamp}"
        );
    }

    #[test]
    fn timestamps_are_rfc3339_as_chrono_writes_them() {
        use chrono::TimeZone;
        for (secs, nanos) in [
            (0, 0),
            (1_764_850_455, 123_456_789),
            (253_402_300_799, 999_999_999),
        ] {
            let at = chrono::Utc
                .timestamp_opt(secs, nanos)
                .single()
                .expect("a time");
            let mut mine = String::new();
            timestamp(&mut mine, at).expect("written");
            assert_eq!(
                mine,
                at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            );
        }
    }

    #[test]
    fn text_from_anywhere_cannot_break_a_line() {
        let nasty = "quote \" backslash \\ newline \n tab \t bell \u{7} del \u{7f} é 😀";
        let got = lines(|| {
            let span = tracing::info_span!("request", path = nasty);
            let _in = span.enter();
            let error = io::Error::other(nasty);
            tracing::warn!(debug = ?nasty, error = &error as &dyn std::error::Error, nan = f64::NAN, "{nasty}");
        });
        assert_eq!(got.len(), 1, "one line, whatever the text holds");
        let line = &got[0];
        assert_eq!(line["fields"]["message"], nasty);
        assert_eq!(line["fields"]["error"], nasty);
        assert_eq!(line["fields"]["debug"], format!("{nasty:?}"));
        assert_eq!(line["fields"]["nan"], "NaN");
        assert_eq!(line["span"]["path"], nasty);
    }

    fn in_request(id: &str, work: impl std::future::Future<Output = ()>) {
        let request = request::Request::new(
            http::Method::DELETE,
            http::Uri::from_static("/api/v1/deployments/d-1?force=true"),
            http::HeaderValue::from_str(id).expect("a header value"),
        );
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(request::scope(request, work));
    }

    #[test]
    fn a_line_inside_a_request_holds_the_request_and_the_org_recorded_later() {
        let got = lines(|| {
            in_request("req-\"7\"", async {
                tracing::info!("before the caller is known");
                tokio::task::yield_now().await;
                request::record_org("acme");
                tracing::warn!(status = 409u16, "request done");
            });
            tracing::info!("after the request");
        });
        assert_eq!(got.len(), 3);
        for line in &got[..2] {
            assert_eq!(line["span"]["name"], "request");
            assert_eq!(line["span"]["method"], "DELETE");
            assert_eq!(line["span"]["path"], "/api/v1/deployments/d-1", "no query");
            assert_eq!(line["span"]["request_id"], "req-\"7\"");
        }
        assert!(got[0]["span"].get("org").is_none(), "{}", got[0]);
        assert_eq!(got[1]["span"]["org"], "acme");
        assert_eq!(got[1]["fields"]["status"], 409);
        assert!(got[2].get("span").is_none(), "{}", got[2]);
        // Outside a request, recording an organization is harmless.
        request::record_org("nobody");
    }

    #[test]
    fn a_span_inside_a_request_is_the_lines_span() {
        let got = lines(|| {
            in_request("r", async {
                let span = tracing::info_span!("step", step = "boot");
                let _in = span.enter();
                tracing::info!("inside");
            })
        });
        assert_eq!(got[0]["span"]["name"], "step");
        assert_eq!(got[0]["span"]["step"], "boot");
    }

    #[test]
    fn an_event_outside_any_span_has_no_span() {
        let got = lines(|| tracing::error!(code = -4i64, "alone"));
        assert_eq!(got[0]["fields"]["code"], -4);
        assert_eq!(got[0]["level"], "ERROR");
        assert!(got[0].get("span").is_none());
    }
}
