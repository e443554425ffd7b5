//! Dates as Elasticsearch's `date` fields read and print them: the named
//! formats the simulated cluster knows, epoch values, and date math
//! (`now-1d/d`, `2024-01-01||+1M`) in range queries.

use crate::error::SearchError;
use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Timelike, Utc};

/// A date field's format when its mapping names none.
pub const DEFAULT_FORMAT: &str = "strict_date_optional_time||epoch_millis";

/// The formats a mapping may name (joined with `||`); any other is
/// refused when the mapping is put, never misread later.
pub const FORMATS: &[&str] = &[
    "strict_date_optional_time",
    "date_optional_time",
    "strict_date_optional_time_nanos",
    "strict_date_time",
    "date_time",
    "strict_date",
    "date",
    "yyyy-MM-dd",
    "epoch_millis",
    "epoch_second",
];

/// Checks a mapping's `format`.
pub fn check_format(format: &str, field: &str) -> Result<(), SearchError> {
    for part in format.split("||") {
        if !FORMATS.contains(&part) {
            return Err(SearchError::mapper_parsing(format!(
                "Failed to parse mapping: Invalid format: [{part}] for field [{field}]: Floe's simulated Elasticsearch knows only the formats {}",
                FORMATS.join(", ")
            )));
        }
    }
    Ok(())
}

/// Reads a JSON value of a date field in `format`: milliseconds since the
/// epoch, UTC.
pub fn parse_value(value: &serde_json::Value, format: &str) -> Option<i64> {
    match value {
        serde_json::Value::String(s) => parse_str(s, format),
        serde_json::Value::Number(n) => {
            let epoch = format
                .split("||")
                .find(|f| f.starts_with("epoch_"))
                .unwrap_or("epoch_millis");
            let n = n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))?;
            match epoch {
                "epoch_second" => n.checked_mul(1000),
                _ => Some(n),
            }
        }
        _ => None,
    }
}

/// Reads a string in any of `format`'s alternatives.
pub fn parse_str(text: &str, format: &str) -> Option<i64> {
    format.split("||").find_map(|f| match f {
        "epoch_millis" => text.parse::<i64>().ok(),
        "epoch_second" => text.parse::<i64>().ok().and_then(|s| s.checked_mul(1000)),
        "strict_date" | "date" | "yyyy-MM-dd" => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| d.and_utc().timestamp_millis()),
        "strict_date_time" | "date_time" => full_date_time(text),
        _ => optional_time(text),
    })
}

/// `strict_date_time`: date, time with milliseconds, and a zone.
fn full_date_time(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|d| d.with_timezone(&Utc).timestamp_millis())
}

/// `strict_date_optional_time`: `yyyy`, `yyyy-MM`, `yyyy-MM-dd`, then
/// optionally `THH`, `:mm`, `:ss`, `.fraction` and a zone (`Z`, `+01:00`,
/// `+0100`); without a zone the time is UTC.
fn optional_time(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let year: i32 = digits(parts.next()?, 4)?;
    let month: u32 = parts.next().map_or(Some(1), |m| digits(m, 2))?;
    let day: u32 = parts.next().map_or(Some(1), |d| digits(d, 2))?;
    if parts.next().is_some() {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    let Some(time) = time else {
        return Some(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis());
    };
    // The zone: `Z`, or a sign followed by hours and minutes.
    let (clock, offset_minutes) = if let Some(clock) = time.strip_suffix('Z') {
        (clock, 0i64)
    } else if let Some(at) = time.rfind(['+', '-']) {
        let (clock, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let zone = zone[1..].replace(':', "");
        let hours: i64 = digits(zone.get(..2)?, 2)?;
        let minutes: i64 = if zone.len() > 2 {
            digits(zone.get(2..)?, 2)?
        } else {
            0
        };
        (clock, sign * (hours * 60 + minutes))
    } else {
        (time, 0)
    };
    let (clock, fraction) = match clock.split_once(['.', ',']) {
        Some((c, f)) => (c, Some(f)),
        None => (clock, None),
    };
    let mut fields = clock.split(':');
    let hour: u32 = digits(fields.next()?, 2)?;
    let minute: u32 = fields.next().map_or(Some(0), |m| digits(m, 2))?;
    let second: u32 = fields.next().map_or(Some(0), |s| digits(s, 2))?;
    if fields.next().is_some() {
        return None;
    }
    let millis: u32 = match fraction {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            let padded = format!("{f:0<3}");
            padded.get(..3)?.parse().ok()?
        }
        Some(_) => return None,
    };
    let local = date.and_hms_milli_opt(hour, minute, second, millis)?;
    Some(local.and_utc().timestamp_millis() - offset_minutes * 60_000)
}

/// Exactly `len` ASCII digits.
fn digits<T: std::str::FromStr>(text: &str, len: usize) -> Option<T> {
    if text.len() == len && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// Prints milliseconds as `strict_date_optional_time` prints them
/// (`2024-01-31T00:00:00.000Z`), or in the first format when that is an
/// epoch one.
pub fn format_millis(millis: i64, format: &str) -> String {
    match format.split("||").next() {
        Some("epoch_millis") => millis.to_string(),
        Some("epoch_second") => (millis.div_euclid(1000)).to_string(),
        Some("strict_date" | "date" | "yyyy-MM-dd") => Utc
            .timestamp_millis_opt(millis)
            .single()
            .map_or_else(|| millis.to_string(), |d| d.format("%Y-%m-%d").to_string()),
        _ => Utc.timestamp_millis_opt(millis).single().map_or_else(
            || millis.to_string(),
            |d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        ),
    }
}

/// A range bound of a date field: a date in the field's (or the query's)
/// format, or date math. `round_up` is how `gt` and `lte` round (`/d`
/// to the day's last millisecond), as Elasticsearch does.
pub fn parse_bound(
    value: &serde_json::Value,
    format: &str,
    round_up: bool,
    now: i64,
) -> Result<i64, SearchError> {
    let failed = || {
        SearchError::query_shard(format!(
            "failed to parse date field [{value}] with format [{format}]"
        ))
    };
    let text = match value {
        serde_json::Value::String(s) => s.as_str(),
        other => return parse_value(other, format).ok_or_else(failed),
    };
    let (anchor, math) = if let Some(math) = text.strip_prefix("now") {
        (now, math)
    } else if let Some((date, math)) = text.split_once("||") {
        (parse_str(date, format).ok_or_else(failed)?, math)
    } else {
        return parse_str(text, format).ok_or_else(failed);
    };
    apply_math(anchor, math, round_up).ok_or_else(|| {
        SearchError::query_shard(format!(
            "failed to parse date field [{text}] with format [{format}]: operation [{math}] is not valid date math"
        ))
    })
}

/// Applies `+1d`, `-2h`, `/d` in turn.
fn apply_math(anchor: i64, math: &str, round_up: bool) -> Option<i64> {
    let mut at = Utc.timestamp_millis_opt(anchor).single()?;
    let bytes = math.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let op = bytes[i];
        i += 1;
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let amount: i64 = if start == i {
            1
        } else {
            math.get(start..i)?.parse().ok()?
        };
        let unit = *bytes.get(i)?;
        i += 1;
        at = match op {
            b'+' => shift(at, amount, unit)?,
            b'-' => shift(at, -amount, unit)?,
            b'/' if start == i - 1 => round(at, unit, round_up)?,
            _ => return None,
        };
    }
    Some(at.timestamp_millis())
}

fn shift(at: DateTime<Utc>, amount: i64, unit: u8) -> Option<DateTime<Utc>> {
    let months = |n: i64| -> Option<DateTime<Utc>> {
        let n = i32::try_from(n).ok()?;
        let total = at.year() * 12 + at.month0() as i32 + n;
        let (year, month0) = (total.div_euclid(12), total.rem_euclid(12) as u32);
        let day = at.day().min(days_in_month(year, month0 + 1)?);
        at.with_day(1)?
            .with_year(year)?
            .with_month0(month0)?
            .with_day(day)
    };
    match unit {
        b'y' => months(amount.checked_mul(12)?),
        b'M' => months(amount),
        b'w' => at.checked_add_signed(Duration::try_weeks(amount)?),
        b'd' => at.checked_add_signed(Duration::try_days(amount)?),
        b'h' | b'H' => at.checked_add_signed(Duration::try_hours(amount)?),
        b'm' => at.checked_add_signed(Duration::try_minutes(amount)?),
        b's' => at.checked_add_signed(Duration::try_seconds(amount)?),
        _ => None,
    }
}

fn days_in_month(year: i32, month: u32) -> Option<u32> {
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    Some(next.pred_opt()?.day())
}

/// Rounds down to the start of the unit, or (`round_up`) to its last
/// millisecond.
fn round(at: DateTime<Utc>, unit: u8, round_up: bool) -> Option<DateTime<Utc>> {
    let start = match unit {
        b'y' => Utc.with_ymd_and_hms(at.year(), 1, 1, 0, 0, 0).single()?,
        b'M' => Utc
            .with_ymd_and_hms(at.year(), at.month(), 1, 0, 0, 0)
            .single()?,
        b'w' => {
            let day = Utc
                .with_ymd_and_hms(at.year(), at.month(), at.day(), 0, 0, 0)
                .single()?;
            day - Duration::days(i64::from(at.weekday().num_days_from_monday()))
        }
        b'd' => Utc
            .with_ymd_and_hms(at.year(), at.month(), at.day(), 0, 0, 0)
            .single()?,
        b'h' | b'H' => Utc
            .with_ymd_and_hms(at.year(), at.month(), at.day(), at.hour(), 0, 0)
            .single()?,
        b'm' => Utc
            .with_ymd_and_hms(at.year(), at.month(), at.day(), at.hour(), at.minute(), 0)
            .single()?,
        b's' => at.with_nanosecond(0)?,
        _ => return None,
    };
    if !round_up {
        return Some(start);
    }
    let next = shift(start, 1, unit)?;
    Some(next - Duration::milliseconds(1))
}

#[cfg(test)]
mod tests {
    type TestResult = Result<(), Box<dyn std::error::Error>>;
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_shapes_of_strict_date_optional_time() -> TestResult {
        let f = DEFAULT_FORMAT;
        assert_eq!(parse_str("1970-01-02", f), Some(86_400_000));
        assert_eq!(parse_str("1970-01-01T00:00:01Z", f), Some(1000));
        assert_eq!(parse_str("1970-01-01T01:00:00+01:00", f), Some(0));
        assert_eq!(parse_str("1970-01-01T00:00:00.5", f), Some(500));
        assert_eq!(parse_str("1970", f), Some(0));
        assert_eq!(parse_str("12345", f), Some(12345), "epoch_millis");
        assert_eq!(parse_str("yesterday", f), None);
        assert_eq!(parse_str("1970-13-01", f), None);
        assert_eq!(parse_value(&json!(42), f), Some(42));
        Ok(())
    }

    #[test]
    fn prints_as_elasticsearch_does() -> TestResult {
        assert_eq!(
            format_millis(86_400_000, DEFAULT_FORMAT),
            "1970-01-02T00:00:00.000Z"
        );
        assert_eq!(format_millis(5, "epoch_millis"), "5");
        Ok(())
    }

    #[test]
    fn date_math_shifts_and_rounds() -> TestResult {
        let now = parse_str("2024-03-15T10:30:00Z", DEFAULT_FORMAT).ok_or("unreadable")?;
        let at = |s: &str, up: bool| parse_bound(&json!(s), DEFAULT_FORMAT, up, now);
        assert_eq!(
            at("now-1d/d", false)?,
            parse_str("2024-03-14", DEFAULT_FORMAT).ok_or("unreadable")?
        );
        assert_eq!(
            at("now/d", true)?,
            parse_str("2024-03-15T23:59:59.999Z", DEFAULT_FORMAT).ok_or("unreadable")?
        );
        assert_eq!(
            at("2024-01-31||+1M", false)?,
            parse_str("2024-02-29", DEFAULT_FORMAT).ok_or("unreadable")?
        );
        assert_eq!(
            at("now/w", false)?,
            parse_str("2024-03-11", DEFAULT_FORMAT).ok_or("unreadable")?
        );
        assert!(parse_bound(&json!("now+1x"), DEFAULT_FORMAT, false, now).is_err());
        Ok(())
    }
}
