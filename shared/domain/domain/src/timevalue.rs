//! Durations written the way Elasticsearch settings take them (`30d`, `1h`,
//! `500ms`).

use std::time::Duration;

const SYNTAX: &str = "must be a time value such as 30s, 5m or 1h";
const UNIT_LIST: &str = "units, in lower case: nanos, micros, ms, s, m, h, d";

/// Nanoseconds per unit. Units are case-sensitive: Elasticsearch reads `M`
/// as months in date math, so accepting `1M` as a minute would invite
/// confusion.
const UNITS: [(&str, u128); 7] = [
    ("nanos", 1),
    ("micros", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Parses an Elasticsearch time value.
///
/// Stricter than Elasticsearch in a few places, so that anything accepted
/// here is also accepted by the cluster and means one thing: the amount must
/// be a whole non-negative number, the unit is required (even for `0`) and
/// must be lower case, and whitespace is refused rather than trimmed.
pub fn parse_time_value(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Err(SYNTAX.to_string());
    }
    if s.chars().any(char::is_whitespace) {
        return Err(format!("{SYNTAX}, without spaces"));
    }
    if s.starts_with('-') {
        return Err("must not be negative".to_string());
    }
    let digits_len = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (amount, unit) = s.split_at(digits_len);
    if amount.is_empty() {
        return Err(SYNTAX.to_string());
    }
    if unit.starts_with('.') {
        return Err("must be a whole number, such as 90m rather than 1.5h".to_string());
    }
    if unit.is_empty() {
        return Err(format!(
            "needs a unit, as in {amount}s or {amount}m ({UNIT_LIST})"
        ));
    }
    let nanos_per_unit = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, nanos)| *nanos)
        .ok_or_else(|| format!("has an unknown unit \"{unit}\" ({UNIT_LIST})"))?;

    let too_large = || "is too large".to_string();
    // Elasticsearch reads the amount into a Java `long`.
    let amount: i64 = amount.parse().map_err(|_| too_large())?;
    let total_nanos = u128::from(amount.unsigned_abs()) * nanos_per_unit;
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| too_large())?;
    let subsec_nanos = (total_nanos % 1_000_000_000) as u32;
    Ok(Duration::new(secs, subsec_nanos))
}

/// Formats a duration in the largest unit that divides it exactly, so that
/// parsing the result gives back the same duration.
pub fn format_time_value(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    let (name, per_unit) = UNITS
        .iter()
        .rev()
        .find(|(_, per_unit)| nanos.is_multiple_of(*per_unit))
        .copied()
        .unwrap_or(UNITS[0]);
    format!("{}{name}", nanos / per_unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(input: &str) -> String {
        match parse_time_value(input) {
            Ok(d) => panic!("{input:?} parsed as {d:?}"),
            Err(message) => message,
        }
    }

    #[test]
    fn parses_every_unit() {
        let cases = [
            ("30d", Duration::from_secs(30 * 86_400)),
            ("1h", Duration::from_secs(3_600)),
            ("90m", Duration::from_secs(5_400)),
            ("45s", Duration::from_secs(45)),
            ("500ms", Duration::from_millis(500)),
            ("1500ms", Duration::from_millis(1_500)),
            ("250micros", Duration::from_micros(250)),
            ("7nanos", Duration::from_nanos(7)),
            ("0s", Duration::ZERO),
            ("0d", Duration::ZERO),
            ("007m", Duration::from_secs(420)),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_time_value(input), Ok(expected), "{input}");
        }
    }

    #[test]
    fn units_are_case_sensitive() {
        let message = |unit: &str| format!("has an unknown unit \"{unit}\" ({UNIT_LIST})");
        assert_eq!(err("1M"), message("M"));
        assert_eq!(err("1H"), message("H"));
        assert_eq!(err("1D"), message("D"));
        assert_eq!(err("5MS"), message("MS"));
    }

    #[test]
    fn refuses_unknown_units() {
        let message = |unit: &str| format!("has an unknown unit \"{unit}\" ({UNIT_LIST})");
        assert_eq!(err("1w"), message("w"));
        assert_eq!(err("1y"), message("y"));
        assert_eq!(err("1min"), message("min"));
        assert_eq!(err("1hours"), message("hours"));
        assert_eq!(err("1us"), message("us"));
        assert_eq!(err("1h30m"), message("h30m"));
    }

    #[test]
    fn refuses_missing_units() {
        assert_eq!(
            err("10"),
            format!("needs a unit, as in 10s or 10m ({UNIT_LIST})")
        );
        assert_eq!(
            err("0"),
            format!("needs a unit, as in 0s or 0m ({UNIT_LIST})")
        );
    }

    #[test]
    fn refuses_fractions_signs_and_junk() {
        let whole = "must be a whole number, such as 90m rather than 1.5h";
        assert_eq!(err("1.5h"), whole);
        assert_eq!(err("0.5s"), whole);
        assert_eq!(err("-1"), "must not be negative");
        assert_eq!(err("-5m"), "must not be negative");
        assert_eq!(err(""), SYNTAX);
        assert_eq!(err("h"), SYNTAX);
        assert_eq!(err("+5m"), SYNTAX);
        assert_eq!(err("abc"), SYNTAX);
        assert_eq!(err(".5h"), SYNTAX);
    }

    #[test]
    fn refuses_whitespace() {
        for input in [" 1h", "1h ", "1 h", "\t1h"] {
            assert_eq!(err(input), format!("{SYNTAX}, without spaces"), "{input:?}");
        }
    }

    #[test]
    fn refuses_values_that_overflow() {
        assert_eq!(err("9223372036854775808nanos"), "is too large");
        assert_eq!(err("99999999999999999999999s"), "is too large");
        assert_eq!(err("9223372036854775807d"), "is too large");
        assert_eq!(
            parse_time_value("9223372036854775807nanos"),
            Ok(Duration::from_nanos(i64::MAX as u64))
        );
        assert_eq!(
            parse_time_value("9223372036854775807s"),
            Ok(Duration::from_secs(i64::MAX as u64))
        );
    }

    #[test]
    fn formats_in_the_largest_exact_unit() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(30 * 86_400), "30d"),
            (Duration::from_secs(3_600), "1h"),
            (Duration::from_secs(5_400), "90m"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_millis(1_500), "1500ms"),
            (Duration::from_micros(1_001), "1001micros"),
            (Duration::from_nanos(1), "1nanos"),
            (Duration::new(1, 1), "1000000001nanos"),
            (Duration::from_secs(25 * 3_600), "25h"),
        ];
        for (duration, expected) in cases {
            assert_eq!(format_time_value(duration), expected, "{duration:?}");
        }
    }

    #[test]
    fn formatting_round_trips() {
        for input in ["30d", "1h", "90m", "61s", "500ms", "3micros", "999nanos"] {
            let parsed = parse_time_value(input);
            assert_eq!(parsed.map(format_time_value).as_deref(), Ok(input));
        }
    }
}
