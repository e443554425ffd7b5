//! The EventBridge expression evaluator against a table of hand-computed
//! next firings: UTC and other zones, both daylight saving transitions in
//! both hemispheres, and every special character.

use chrono::{DateTime, Utc};
use floe_schedules::expression::{Expression, Recurrence};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn utc(s: &str) -> Result<DateTime<Utc>, chrono::ParseError> {
    Ok(DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc))
}

/// (expression, time zone, rate anchor, after, expected next firing)
const TABLE: &[(&str, &str, &str, &str, Option<&str>)] = &[
    // Rates count from the anchor, on the UTC time line.
    (
        "rate(30 minutes)",
        "UTC",
        "2026-03-01T00:00:00Z",
        "2026-03-01T00:45:00Z",
        Some("2026-03-01T01:00:00Z"),
    ),
    (
        "rate(30 minutes)",
        "UTC",
        "2026-03-01T00:00:00Z",
        "2026-03-01T01:00:00Z",
        Some("2026-03-01T01:30:00Z"),
    ),
    (
        "rate(1 minute)",
        "UTC",
        "2026-03-01T00:00:30Z",
        "2026-03-01T00:10:00Z",
        Some("2026-03-01T00:10:30Z"),
    ),
    (
        "rate(5 minutes)",
        "UTC",
        "2026-03-01T12:00:00Z",
        "2026-03-01T11:00:00Z",
        Some("2026-03-01T12:00:00Z"),
    ),
    (
        "rate(2 hours)",
        "UTC",
        "2026-03-01T00:00:00Z",
        "2026-03-01T03:59:59Z",
        Some("2026-03-01T04:00:00Z"),
    ),
    // A day is 24 hours, even across Berlin's spring-forward night.
    (
        "rate(1 day)",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        "2026-03-28T12:00:00Z",
        Some("2026-03-29T12:00:00Z"),
    ),
    // Cron: strictly after.
    (
        "cron(30 1 * * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T01:30:00Z",
        Some("2026-03-02T01:30:00Z"),
    ),
    // Berlin in winter (UTC+1) and in summer (UTC+2).
    (
        "cron(30 1 * * ? *)",
        "Europe/Berlin",
        "2026-01-01T00:00:00Z",
        "2026-01-15T00:00:00Z",
        Some("2026-01-15T00:30:00Z"),
    ),
    (
        "cron(30 1 * * ? *)",
        "Europe/Berlin",
        "2026-01-01T00:00:00Z",
        "2026-07-15T00:00:00Z",
        Some("2026-07-15T23:30:00Z"),
    ),
    // Spring forward in Berlin (29 March 2026): 02:30 does not exist, skipped.
    (
        "cron(30 2 * * ? *)",
        "Europe/Berlin",
        "2026-01-01T00:00:00Z",
        "2026-03-28T02:00:00Z",
        Some("2026-03-30T00:30:00Z"),
    ),
    // Fall back in Berlin (25 October 2026): 02:30 happens twice, fires at the first only.
    (
        "cron(30 2 * * ? *)",
        "Europe/Berlin",
        "2026-01-01T00:00:00Z",
        "2026-10-24T12:00:00Z",
        Some("2026-10-25T00:30:00Z"),
    ),
    (
        "cron(30 2 * * ? *)",
        "Europe/Berlin",
        "2026-01-01T00:00:00Z",
        "2026-10-25T00:30:00Z",
        Some("2026-10-26T01:30:00Z"),
    ),
    // New York's repeated hour (1 November 2026) is not run twice.
    (
        "cron(0/15 * * * ? *)",
        "America/New_York",
        "2026-01-01T00:00:00Z",
        "2026-11-01T05:45:00Z",
        Some("2026-11-01T07:00:00Z"),
    ),
    // New York's skipped hour (8 March 2026): 02:00 and 02:30 do not exist.
    (
        "cron(0/30 * * * ? *)",
        "America/New_York",
        "2026-01-01T00:00:00Z",
        "2026-03-08T06:30:00Z",
        Some("2026-03-08T07:00:00Z"),
    ),
    // Sydney falls back on 5 April 2026: 02:30 AEDT first.
    (
        "cron(30 2 * * ? *)",
        "Australia/Sydney",
        "2026-01-01T00:00:00Z",
        "2026-04-04T12:00:00Z",
        Some("2026-04-04T15:30:00Z"),
    ),
    // A half-hour offset zone.
    (
        "cron(0 9 * * ? *)",
        "Asia/Kolkata",
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        Some("2026-03-01T03:30:00Z"),
    ),
    // Day-of-week names and ranges: Friday noon → Monday noon.
    (
        "cron(0 12 ? * MON-FRI *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-06T12:00:00Z",
        Some("2026-03-09T12:00:00Z"),
    ),
    // L: last day of the month; L-2: two days before it.
    (
        "cron(0 0 L * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-02-10T00:00:00Z",
        Some("2026-02-28T00:00:00Z"),
    ),
    (
        "cron(0 0 L-2 * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-04-01T00:00:00Z",
        Some("2026-04-28T00:00:00Z"),
    ),
    // LW: 31 May 2026 is a Sunday, so the last weekday is Friday the 29th.
    (
        "cron(0 9 LW * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-05-01T00:00:00Z",
        Some("2026-05-29T09:00:00Z"),
    ),
    // 15W: 15 August 2026 is a Saturday → Friday the 14th.
    (
        "cron(0 9 15W * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-08-01T00:00:00Z",
        Some("2026-08-14T09:00:00Z"),
    ),
    // 1W: 1 August 2026 is a Saturday → Monday the 3rd, never July.
    (
        "cron(0 9 1W * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-07-31T12:00:00Z",
        Some("2026-08-03T09:00:00Z"),
    ),
    // 6#3: the third Friday; FRIL and 2L: the last Friday, the last Monday.
    (
        "cron(0 10 ? * 6#3 *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        Some("2026-03-20T10:00:00Z"),
    ),
    (
        "cron(0 10 ? * FRIL *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        Some("2026-03-27T10:00:00Z"),
    ),
    (
        "cron(0 10 ? * 2L *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-05-01T00:00:00Z",
        Some("2026-05-25T10:00:00Z"),
    ),
    // L alone in day-of-week is Saturday.
    (
        "cron(0 0 ? * L *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        Some("2026-03-07T00:00:00Z"),
    ),
    // Month names in a list.
    (
        "cron(0 0 1 JAN,JUL ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z",
        Some("2026-07-01T00:00:00Z"),
    ),
    // Lists and steps on a star.
    (
        "cron(5,35 */2 * * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:35:00Z",
        Some("2026-03-01T02:05:00Z"),
    ),
    // A stepped range: 8, 12, 16.
    (
        "cron(0 8-18/4 ? * * *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T16:00:00Z",
        Some("2026-03-02T08:00:00Z"),
    ),
    // A value with a step: from 10, every 20 minutes (10, 30, 50).
    (
        "cron(10/20 * * * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:31:00Z",
        Some("2026-03-01T00:50:00Z"),
    ),
    // 29 February: the next leap year.
    (
        "cron(0 0 29 2 ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        Some("2028-02-29T00:00:00Z"),
    ),
    // Day 31 skips the 30-day months.
    (
        "cron(0 0 31 * ? *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-04-01T00:00:00Z",
        Some("2026-05-31T00:00:00Z"),
    ),
    // Years: the one year, then nothing more.
    (
        "cron(0 0 1 1 ? 2030)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z",
        Some("2030-01-01T00:00:00Z"),
    ),
    (
        "cron(0 0 1 1 ? 2030)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2030-01-01T00:00:00Z",
        None,
    ),
    (
        "cron(0 0 1 1 ? 2026-2199/50)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-06-01T00:00:00Z",
        Some("2076-01-01T00:00:00Z"),
    ),
    // Lower case, as a person might type it, and leading zeros.
    (
        "cron(07 05 ? * sun *)",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-03-01T06:00:00Z",
        Some("2026-03-08T05:07:00Z"),
    ),
];

#[test]
fn next_firings_match_the_table() -> TestResult {
    let mut failures = Vec::new();
    for (expression, tz, anchor, after, expected) in TABLE {
        let recurrence = Recurrence::parse(expression, tz)?;
        let got = recurrence.next_after(utc(after)?, utc(anchor)?);
        let want = match expected {
            Some(e) => Some(utc(e)?),
            None => None,
        };
        if got != want {
            failures.push(format!(
                "{expression} in {tz} after {after}: got {got:?}, want {want:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} wrong:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
    Ok(())
}

#[test]
fn a_sequence_of_firings_across_the_fall_back_night() -> TestResult {
    // Hourly at :30 in Berlin through 25 October 2026: local 01:30, 02:30
    // (summer time), then 03:30 — the repeated 02:30 (winter time) is not run.
    let r = Recurrence::parse("cron(30 * * * ? *)", "Europe/Berlin")?;
    let anchor = utc("2026-01-01T00:00:00Z")?;
    let mut at = utc("2026-10-24T23:00:00Z")?;
    let mut seen = Vec::new();
    for _ in 0..4 {
        at = r.next_after(at, anchor).ok_or("no next firing")?;
        seen.push(at.to_rfc3339());
    }
    assert_eq!(
        seen,
        [
            "2026-10-24T23:30:00+00:00",
            "2026-10-25T00:30:00+00:00",
            "2026-10-25T02:30:00+00:00",
            "2026-10-25T03:30:00+00:00",
        ]
    );
    Ok(())
}

#[test]
fn first_at_or_after_includes_the_instant_itself() -> TestResult {
    let r = Recurrence::parse("rate(10 minutes)", "UTC")?;
    let t = utc("2026-03-01T00:00:00Z")?;
    assert_eq!(r.first_at_or_after(t, t), Some(t));
    let c = Recurrence::parse("cron(0 * * * ? *)", "UTC")?;
    assert_eq!(c.first_at_or_after(t, t), Some(t));
    assert_eq!(c.next_after(t, t), Some(utc("2026-03-01T01:00:00Z")?));
    Ok(())
}

#[test]
fn refuses_what_eventbridge_refuses() {
    for bad in [
        "cron(0 0 * * * *)",
        "cron(0 0 ? * ? *)",
        "cron(0 0 1 * MON *)",
        "cron(0 0 * * ?)",
        "cron(0 0 * * ? * *)",
        "cron(60 * * * ? *)",
        "cron(0 24 * * ? *)",
        "cron(0 0 32 * ? *)",
        "cron(0 0 * 13 ? *)",
        "cron(0 0 ? * 8 *)",
        "cron(0 0 ? * MON#6 *)",
        "cron(0 0 L-31 * ? *)",
        "cron(0 0 * * ? 2200)",
        "cron(30-10 * * * ? *)",
        "cron(*/0 * * * ? *)",
        "cron(0 0 1-5W * ? *)",
        "rate(0 minutes)",
        "rate(-5 minutes)",
        "rate(5 weeks)",
        "rate(5)",
        "rate(five minutes)",
        "at(2026-01-01T00:00:00)",
        "cron 0 0 * * ? *",
        "",
    ] {
        assert!(Expression::parse(bad).is_err(), "{bad} was accepted");
    }
    assert!(Recurrence::parse("rate(5 minutes)", "Mars/Base").is_err());
    assert!(Recurrence::parse("rate(5 minutes)", "CET+1").is_err());
}

#[test]
fn accepts_everything_the_domain_produces() -> TestResult {
    // The policy API validates SLM cron and converts it; whatever it lets
    // through, local mode must be able to run.
    for quartz in [
        "0 30 1 * * ?",
        "0 0 12 ? * MON-FRI",
        "0 0/15 * * * ? 2030",
        "0 0 0 L * ?",
        "0 0 0 ? * 6#3",
        "0 5,35 */2 * * ?",
        "0 0 8-18/2 ? * 2-6",
        "0 0 0 1 jan,jul ?",
        "0 0 0 ? Feb-Nov sun",
        "0 0 0 15W * ?",
        "0 0 0 lw * ?",
        "0 0 0 L-3 * ?",
        "0 0 0 ? * 6L",
        "0 0 0 ? * FRIL",
        "0 0 0 ? * L",
        "0 0 0 ? * MON#1",
        "0 0 0 1/5 * ?",
        "0 59 23 31 12 ? 2199",
        "0 0 0 * * ? 1970-2000/5,2100",
        "0 07 05 * * ?",
    ] {
        let expression = floe_domain::schedule::slm_cron_to_eventbridge(quartz)?;
        let r = Recurrence::parse(&expression, "Europe/Berlin")
            .map_err(|e| format!("{quartz} → {expression}: {e}"))?;
        // Every one of them has a firing before the end of EventBridge's years.
        assert!(
            r.next_after(utc("2026-01-01T00:00:00Z")?, utc("2026-01-01T00:00:00Z")?)
                .is_some(),
            "{expression}"
        );
    }
    for interval in ["1m", "30m", "90m", "2h", "1d", "36h"] {
        let (expression, period) = floe_domain::schedule::interval_to_rate(interval)?;
        let r = Recurrence::parse(&expression, "UTC")?;
        let t = utc("2026-01-01T00:00:00Z")?;
        assert_eq!(
            r.next_after(t, t),
            Some(t + chrono::Duration::from_std(period)?),
            "{interval}"
        );
    }
    Ok(())
}
