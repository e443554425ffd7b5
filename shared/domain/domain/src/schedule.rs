//! Snapshot schedules: users write them as Elasticsearch SLM does (an interval
//! or a Quartz cron expression), and Floe runs them with EventBridge
//! Scheduler, whose expressions differ. Everything accepted here must mean the
//! same thing to both.

use std::time::Duration;

use crate::cron::Cron;
use crate::timevalue::parse_time_value;

const MINUTE_SECS: u64 = 60;
const HOUR_MINUTES: u64 = 60;
const DAY_MINUTES: u64 = 24 * 60;

/// The longest interval a policy may have.
pub const MAX_INTERVAL_DAYS: u64 = 366;

/// Turns an interval such as `30m` into an EventBridge rate expression, in the
/// largest unit that divides it exactly: `120m` becomes `rate(2 hours)`.
/// Also returns the interval itself.
pub fn interval_to_rate(interval: &str) -> Result<(String, Duration), String> {
    let duration = parse_time_value(interval)?;
    // A schedule that never runs in a deployment's lifetime is a mistake,
    // and a bound keeps every sum with it finite.
    if duration > Duration::from_secs(MAX_INTERVAL_DAYS * DAY_MINUTES * MINUTE_SECS) {
        return Err(format!("must be at most {MAX_INTERVAL_DAYS}d"));
    }
    if duration < Duration::from_secs(MINUTE_SECS) {
        return Err(
            "must be at least 1m: EventBridge Scheduler runs a schedule at most once a minute"
                .to_string(),
        );
    }
    if duration.subsec_nanos() != 0 || !duration.as_secs().is_multiple_of(MINUTE_SECS) {
        return Err(
            "must be a whole number of minutes, such as 90m: EventBridge Scheduler counts rates in minutes"
                .to_string(),
        );
    }
    let minutes = duration.as_secs() / MINUTE_SECS;
    let (value, unit) = if minutes.is_multiple_of(DAY_MINUTES) {
        (minutes / DAY_MINUTES, "day")
    } else if minutes.is_multiple_of(HOUR_MINUTES) {
        (minutes / HOUR_MINUTES, "hour")
    } else {
        (minutes, "minute")
    };
    let plural = if value == 1 { "" } else { "s" };
    Ok((format!("rate({value} {unit}{plural})"), duration))
}

/// Checks an IANA time zone name such as `Europe/Berlin`, the only kind
/// EventBridge Scheduler takes; POSIX-style strings such as `CET+1` and bare
/// offsets are refused.
pub fn validate_timezone(tz: &str) -> Result<chrono_tz::Tz, String> {
    tz.parse::<chrono_tz::Tz>()
        .map_err(|_| "must be an IANA time zone name such as Europe/Berlin or UTC".to_string())
}

/// Elasticsearch SLM / Quartz cron: `sec min hour day-of-month month
/// day-of-week [year]`.
/// Returns the EventBridge Scheduler expression `cron(min hour dom month dow
/// year)`, with month and day names upper-cased and the year `*` when absent.
///
/// The expression is validated in full (by [`Cron`], the grammar local
/// mode evaluates too), because EventBridge only rejects a bad expression
/// when the worker creates the schedule, long after the request that
/// carried it succeeded.
pub fn slm_cron_to_eventbridge(expr: &str) -> Result<String, String> {
    // Quartz, and so Elasticsearch, upper-cases the expression before parsing.
    let upper = expr.to_ascii_uppercase();
    let fields: Vec<&str> = upper.split_ascii_whitespace().collect();
    if fields.len() != 6 && fields.len() != 7 {
        return Err(format!(
            "must be a cron expression with 6 or 7 fields (seconds minutes hours \
             day-of-month month day-of-week [year]) such as \"0 30 1 * * ?\", found {}",
            fields.len()
        ));
    }
    let year = fields.get(6).copied().unwrap_or("*");
    if fields[0] != "0" {
        return Err(
            "the seconds field must be 0: EventBridge Scheduler fires on whole minutes".to_string(),
        );
    }
    Cron::from_fields([fields[1], fields[2], fields[3], fields[4], fields[5], year])?;
    Ok(format!(
        "cron({} {} {} {} {} {year})",
        fields[1], fields[2], fields[3], fields[4], fields[5]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron_err(expr: &str) -> String {
        match slm_cron_to_eventbridge(expr) {
            Ok(converted) => panic!("{expr:?} was accepted as {converted}"),
            Err(message) => message,
        }
    }

    fn rate(interval: &str) -> Result<String, String> {
        interval_to_rate(interval).map(|(expression, _)| expression)
    }

    #[test]
    fn intervals_become_rates_in_the_largest_whole_unit() {
        assert_eq!(
            interval_to_rate("30m"),
            Ok(("rate(30 minutes)".to_string(), Duration::from_secs(1_800)))
        );
        assert_eq!(rate("1m").as_deref(), Ok("rate(1 minute)"));
        assert_eq!(rate("60s").as_deref(), Ok("rate(1 minute)"));
        assert_eq!(rate("1h").as_deref(), Ok("rate(1 hour)"));
        assert_eq!(rate("2d").as_deref(), Ok("rate(2 days)"));
        assert_eq!(rate("1d").as_deref(), Ok("rate(1 day)"));
        assert_eq!(rate("90m").as_deref(), Ok("rate(90 minutes)"));
        assert_eq!(rate("120m").as_deref(), Ok("rate(2 hours)"));
        assert_eq!(rate("1440m").as_deref(), Ok("rate(1 day)"));
        assert_eq!(rate("36h").as_deref(), Ok("rate(36 hours)"));
        assert_eq!(rate("48h").as_deref(), Ok("rate(2 days)"));
        assert_eq!(rate("300s").as_deref(), Ok("rate(5 minutes)"));
        assert_eq!(rate("3600000ms").as_deref(), Ok("rate(1 hour)"));
    }

    #[test]
    fn huge_intervals_are_refused_not_overflowed() {
        assert_eq!(rate("366d").as_deref(), Ok("rate(366 days)"));
        for huge in ["367d", "150000000000000d", "18446744073709551615s"] {
            assert!(rate(huge).is_err(), "{huge}");
        }
    }

    #[test]
    fn intervals_below_a_minute_or_between_minutes_are_refused() {
        let floor =
            "must be at least 1m: EventBridge Scheduler runs a schedule at most once a minute";
        assert_eq!(rate("30s"), Err(floor.to_string()));
        assert_eq!(rate("0m"), Err(floor.to_string()));
        assert_eq!(rate("59999ms"), Err(floor.to_string()));
        let whole = "must be a whole number of minutes, such as 90m: EventBridge Scheduler counts rates in minutes";
        assert_eq!(rate("90s"), Err(whole.to_string()));
        assert_eq!(rate("60001ms"), Err(whole.to_string()));
    }

    #[test]
    fn interval_syntax_errors_come_from_the_time_value_parser() {
        assert_eq!(parse_time_value("1 h").err(), rate("1 h").err());
        assert!(rate("").is_err());
        assert!(rate("5").is_err());
        assert!(rate("1.5h").is_err());
        assert!(rate("1M").is_err());
        assert!(rate("-1h").is_err());
    }

    #[test]
    fn converts_the_documented_examples() {
        let cases = [
            ("0 30 1 * * ?", "cron(30 1 * * ? *)"),
            ("0 0 12 ? * MON-FRI", "cron(0 12 ? * MON-FRI *)"),
            ("0 0/15 * * * ? 2030", "cron(0/15 * * * ? 2030)"),
            ("0 0 0 L * ?", "cron(0 0 L * ? *)"),
            ("0 0 0 ? * 6#3", "cron(0 0 ? * 6#3 *)"),
        ];
        for (quartz, eventbridge) in cases {
            assert_eq!(
                slm_cron_to_eventbridge(quartz).as_deref(),
                Ok(eventbridge),
                "{quartz}"
            );
        }
    }

    #[test]
    fn converts_the_rest_of_the_quartz_syntax() {
        let cases = [
            ("0 5,35 */2 * * ?", "cron(5,35 */2 * * ? *)"),
            ("0 0 8-18/2 ? * 2-6", "cron(0 8-18/2 ? * 2-6 *)"),
            ("0 0 0 1 jan,jul ?", "cron(0 0 1 JAN,JUL ? *)"),
            ("0 0 0 ? Feb-Nov sun", "cron(0 0 ? FEB-NOV SUN *)"),
            ("0 0 0 15W * ?", "cron(0 0 15W * ? *)"),
            ("0 0 0 lw * ?", "cron(0 0 LW * ? *)"),
            ("0 0 0 L-3 * ?", "cron(0 0 L-3 * ? *)"),
            ("0 0 0 ? * 6L", "cron(0 0 ? * 6L *)"),
            ("0 0 0 ? * FRIL", "cron(0 0 ? * FRIL *)"),
            ("0 0 0 ? * L", "cron(0 0 ? * L *)"),
            ("0 0 0 ? * MON#1", "cron(0 0 ? * MON#1 *)"),
            ("0 0 0 1/5 * ?", "cron(0 0 1/5 * ? *)"),
            ("0 59 23 31 12 ? 2199", "cron(59 23 31 12 ? 2199)"),
            (
                "0 0 0 * * ? 1970-2000/5,2100",
                "cron(0 0 * * ? 1970-2000/5,2100)",
            ),
            ("0 0 0 ? * 1-7", "cron(0 0 ? * 1-7 *)"),
            ("  0   30\t1 * *  ?  ", "cron(30 1 * * ? *)"),
            ("0 07 05 * * ?", "cron(07 05 * * ? *)"),
        ];
        for (quartz, eventbridge) in cases {
            assert_eq!(
                slm_cron_to_eventbridge(quartz).as_deref(),
                Ok(eventbridge),
                "{quartz}"
            );
        }
    }

    #[test]
    fn refuses_anything_but_whole_minutes() {
        let message = "the seconds field must be 0: EventBridge Scheduler fires on whole minutes";
        for expr in [
            "* * * * * ?",
            "30 0 0 * * ?",
            "0/30 * * * * ?",
            "00 0 0 * * ?",
        ] {
            assert_eq!(cron_err(expr), message, "{expr}");
        }
    }

    #[test]
    fn refuses_wrong_field_counts() {
        let message = |n: usize| {
            format!(
                "must be a cron expression with 6 or 7 fields (seconds minutes hours \
                 day-of-month month day-of-week [year]) such as \"0 30 1 * * ?\", found {n}"
            )
        };
        assert_eq!(cron_err("0 0"), message(2));
        assert_eq!(cron_err("junk"), message(1));
        assert_eq!(cron_err(""), message(0));
        assert_eq!(cron_err("   "), message(0));
        assert_eq!(cron_err("0 0 0 * * ? 2030 1"), message(8));
        assert_eq!(cron_err("0 0 * * *"), message(5));
    }

    #[test]
    fn refuses_out_of_range_values_naming_the_field() {
        let cases = [
            ("0 61 * * * ?", "minute field: 61 is out of range 0-59"),
            ("0 0 25 * * ?", "hour field: 25 is out of range 0-23"),
            (
                "0 0 0 32 * ?",
                "day-of-month field: 32 is out of range 1-31",
            ),
            ("0 0 0 0 * ?", "day-of-month field: 0 is out of range 1-31"),
            ("0 0 0 * 13 ?", "month field: 13 is out of range 1-12"),
            ("0 0 0 ? * 8", "day-of-week field: 8 is out of range 1-7"),
            ("0 0 0 ? * 0", "day-of-week field: 0 is out of range 1-7"),
            (
                "0 0 0 * * ? 2200",
                "year field: 2200 is out of range 1970-2199",
            ),
            (
                "0 0 0 * * ? 1969",
                "year field: 1969 is out of range 1970-2199",
            ),
            (
                "0 0 99999999999 * * ?",
                "hour field: 99999999999 is out of range 0-23",
            ),
            ("0 5,60 * * * ?", "minute field: 60 is out of range 0-59"),
            (
                "0 0 0 40W * ?",
                "day-of-month field: 40 is out of range 1-31",
            ),
            ("0 0 0 ? * 9L", "day-of-week field: 9 is out of range 1-7"),
            ("0 0 0 ? * 8#2", "day-of-week field: 8 is out of range 1-7"),
        ];
        for (expr, message) in cases {
            assert_eq!(cron_err(expr), message, "{expr}");
        }
    }

    #[test]
    fn refuses_malformed_values_naming_the_field() {
        let cases = [
            (
                "0 x * * * ?",
                "minute field: \"X\" is not valid; expected a number 0-59",
            ),
            (
                "0 0 0 * FOO ?",
                "month field: \"FOO\" is not valid; expected a number 1-12 or a name JAN-DEC",
            ),
            (
                "0 0 0 ? * MONDAY",
                "day-of-week field: \"MONDAY\" is not valid; expected a number 1-7 or a name SUN-SAT",
            ),
            (
                "0 0 0 ? * JAN",
                "day-of-week field: \"JAN\" is not valid; expected a number 1-7 or a name SUN-SAT",
            ),
            (
                "0 0 L * * ?",
                "hour field: \"L\" is not valid; expected a number 0-23",
            ),
            (
                "0 ? 0 * * ?",
                "minute field: ? is only allowed alone, in the day-of-month or day-of-week field",
            ),
            (
                "0 1,,2 * * * ?",
                "minute field: a value is missing; expected a number 0-59",
            ),
            (
                "0 5- * * * ?",
                "minute field: a value is missing; expected a number 0-59",
            ),
            (
                "0 /5 * * * ?",
                "minute field: a value is missing; expected a number 0-59",
            ),
            (
                "0 30-10 * * * ?",
                "minute field: the range 30-10 must go from low to high",
            ),
            (
                "0 0 0 ? * FRI-MON",
                "day-of-week field: the range FRI-MON must go from low to high",
            ),
            (
                "0 */0 * * * ?",
                "minute field: the step in \"*/0\" must be a number 1-59",
            ),
            (
                "0 0/60 * * * ?",
                "minute field: the step in \"0/60\" must be a number 1-59",
            ),
            (
                "0 0/ * * * ?",
                "minute field: the step in \"0/\" must be a number 1-59",
            ),
            (
                "0 0/+5 * * * ?",
                "minute field: the step in \"0/+5\" must be a number 1-59",
            ),
            (
                "0 0 */24 * * ?",
                "hour field: the step in \"*/24\" must be a number 1-23",
            ),
            (
                "0 1-2-3 * * * ?",
                "minute field: \"2-3\" is not valid; expected a number 0-59",
            ),
            (
                "0 0 0 ? * MON#6",
                "day-of-week field: in MON#6, the number after # must be 1-5",
            ),
            (
                "0 0 0 ? * 2#0",
                "day-of-week field: in 2#0, the number after # must be 1-5",
            ),
            (
                "0 0 0 ? * 2#",
                "day-of-week field: in 2#, the number after # must be 1-5",
            ),
            (
                "0 0 0 L-31 * ?",
                "day-of-month field: in L-31, the days before the last day must be 1-30",
            ),
            (
                "0 0 0 L-0 * ?",
                "day-of-month field: in L-0, the days before the last day must be 1-30",
            ),
            (
                "0 0 0 1-5W * ?",
                "day-of-month field: \"1-5W\" is not valid; W follows a single day, as in 15W",
            ),
        ];
        for (expr, message) in cases {
            assert_eq!(cron_err(expr), message, "{expr}");
        }
    }

    #[test]
    fn requires_exactly_one_question_mark_day_field() {
        let message = "exactly one of the day-of-month and day-of-week fields must be ? \
                       (Elasticsearch and EventBridge Scheduler both require it)";
        for expr in ["0 0 0 * * *", "0 0 0 ? * ?", "0 0 0 1 * MON", "0 0 0 L * L"] {
            assert_eq!(cron_err(expr), message, "{expr}");
        }
    }

    #[test]
    fn time_zones_must_be_iana_names() {
        assert_eq!(
            validate_timezone("Europe/Berlin"),
            Ok(chrono_tz::Europe::Berlin)
        );
        assert_eq!(validate_timezone("UTC"), Ok(chrono_tz::UTC));
        assert_eq!(
            validate_timezone("America/Argentina/Buenos_Aires"),
            Ok(chrono_tz::America::Argentina::Buenos_Aires)
        );
        let message = "must be an IANA time zone name such as Europe/Berlin or UTC";
        for tz in ["CET+1", "", "Mars/Base", "europe/berlin", " UTC", "+01:00"] {
            assert_eq!(
                validate_timezone(tz).as_ref().err().map(String::as_str),
                Some(message),
                "{tz:?}"
            );
        }
    }
}
