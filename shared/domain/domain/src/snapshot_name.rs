//! Snapshot names: plain, or Elasticsearch date math such as
//! `<nightly-{now/d}>`, resolved here the way Elasticsearch resolves them so
//! that Floe knows which snapshot a request will create.

use chrono::{
    DateTime, Datelike, Days, FixedOffset, LocalResult, Months, NaiveDate, NaiveDateTime,
    NaiveTime, Offset, TimeDelta, TimeZone, Timelike, Utc,
};

const MAX_NAME_BYTES: usize = 255;
/// Characters Elasticsearch refuses in snapshot names (they are unsafe in
/// file names and URLs), plus `:`, which it reserves for remote clusters.
const FORBIDDEN: [char; 11] = ['\\', '/', '*', '?', '"', '<', '>', '|', ',', '#', ':'];
const DEFAULT_PATTERN: &str = "uuuu.MM.dd";
const OUT_OF_RANGE: &str = "the date math goes outside the years 1 to 9999";

/// Checks a plain name, or a date-math name by resolving it at the current
/// time (what it resolves to is checked too).
pub fn validate_snapshot_name(s: &str) -> Result<(), String> {
    resolve_snapshot_name(s, Utc::now()).map(|_| ())
}

/// Resolve date math exactly as Elasticsearch does for index/snapshot names;
/// plain names are returned unchanged. Either way the name is checked.
///
/// Supported: `{now[+-Nunit]*[/unit][{format[|time_zone]}]}` with the units
/// y, M, w, d, h, H, m and s; format letters yyyy, yy, uuuu, MM, dd, HH, mm
/// and ss with `.`, `-` and `_` between them; an IANA time zone or a UTC
/// offset such as `+01:00`. Anything else Elasticsearch would accept (other
/// format letters, named formats, dates other than `now`) is refused rather
/// than guessed at.
pub fn resolve_snapshot_name(s: &str, now: DateTime<Utc>) -> Result<String, String> {
    let Some(inner) = s.strip_prefix('<') else {
        check_plain(s)?;
        return Ok(s.to_string());
    };
    let Some(inner) = inner.strip_suffix('>') else {
        return Err("starts with < but does not end with >; \
                    date math names look like <nightly-{now/d}>"
            .to_string());
    };
    let resolved = expand(inner, now)?;
    check_plain(&resolved).map_err(|e| format!("resolves to \"{resolved}\", which {e}"))?;
    Ok(resolved)
}

fn check_plain(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".to_string());
    }
    if s.len() > MAX_NAME_BYTES {
        return Err(format!("must be at most {MAX_NAME_BYTES} bytes long"));
    }
    if s == "." || s == ".." {
        return Err("must not be '.' or '..'".to_string());
    }
    if let Some(first @ ('_' | '-')) = s.chars().next() {
        return Err(format!("must not start with '{first}'"));
    }
    if s.chars().any(char::is_whitespace) {
        return Err("must not contain whitespace".to_string());
    }
    if let Some(c) = s.chars().find(|c| FORBIDDEN.contains(c)) {
        return Err(format!("must not contain '{c}'"));
    }
    if s.to_lowercase() != s {
        return Err("must be lower case".to_string());
    }
    Ok(())
}

/// Replaces each `{…}` placeholder in the text between `<` and `>`.
///
/// Follows Elasticsearch's scanner, quirks included: a backslash escapes
/// the next character, a `{` inside a placeholder opens its format even when
/// escaped, and an escaped brace only stays literal inside a format.
fn expand(inner: &str, now: DateTime<Utc>) -> Result<String, String> {
    let mut out = String::new();
    let mut placeholder = String::new();
    let mut in_placeholder = false;
    let mut in_format = false;
    let mut escape = false;
    for c in inner.chars() {
        let escaped = std::mem::replace(&mut escape, false);
        if c == '\\' && !escaped {
            escape = true;
            continue;
        }
        if !in_placeholder {
            match c {
                '{' if !escaped => in_placeholder = true,
                '}' if !escaped => {
                    return Err(
                        "has a } without a matching {; write \\} for a literal brace".to_string(),
                    );
                }
                _ => out.push(c),
            }
            continue;
        }
        match c {
            '{' if in_format && !escaped => {
                return Err("has a { inside a date format".to_string());
            }
            '{' if !in_format => {
                in_format = true;
                placeholder.push(c);
            }
            '}' if in_format && !escaped => {
                in_format = false;
                placeholder.push(c);
            }
            '}' if !in_format => {
                out.push_str(&evaluate(&placeholder, now)?);
                placeholder.clear();
                in_placeholder = false;
            }
            _ => placeholder.push(c),
        }
    }
    if in_placeholder {
        return Err("has a { that is never closed; date math looks like {now/d}".to_string());
    }
    if out.is_empty() {
        return Err("must not be empty".to_string());
    }
    Ok(out)
}

enum Zone {
    Named(chrono_tz::Tz),
    Fixed(FixedOffset),
}

/// Evaluates one placeholder, without its outer braces: `now-1d/d{yyyy.MM|UTC}`.
fn evaluate(placeholder: &str, now: DateTime<Utc>) -> Result<String, String> {
    let (math, format) = match placeholder.split_once('{') {
        None => (placeholder, None),
        Some((math, rest)) => {
            let format = rest.strip_suffix('}').ok_or_else(|| {
                "the date format must end the placeholder, as in {now/d{yyyy.MM.dd}}".to_string()
            })?;
            (math, Some(format))
        }
    };
    let (pattern, zone) = match format {
        None => (DEFAULT_PATTERN, Zone::Named(chrono_tz::UTC)),
        Some(format) => match format.split_once('|') {
            Some((pattern, zone)) => (pattern, parse_zone(zone)?),
            None => (format, Zone::Named(chrono_tz::UTC)),
        },
    };
    let pieces = parse_pattern(pattern)?;
    let Some(operations) = math.strip_prefix("now") else {
        return Err(format!(
            "has {{{math}}}, but date math must start with now, as in {{now/d}}"
        ));
    };
    let local = match zone {
        Zone::Named(tz) => apply_math(&tz, now, operations)?,
        Zone::Fixed(offset) => apply_math(&offset, now, operations)?,
    };
    if !(1..=9999).contains(&local.year()) {
        return Err(OUT_OF_RANGE.to_string());
    }
    Ok(format_local(&local, &pieces))
}

fn parse_zone(text: &str) -> Result<Zone, String> {
    if let Some(offset) = parse_offset(text) {
        return Ok(Zone::Fixed(offset));
    }
    text.parse::<chrono_tz::Tz>().map(Zone::Named).map_err(|_| {
        format!(
            "has an unknown time zone \"{text}\"; use an IANA name such as Europe/Berlin \
             or an offset such as +01:00"
        )
    })
}

/// `Z`, `+h`, `+hh`, `+hh:mm` or `+hhmm` (and the same with `-`), as Java's
/// `ZoneOffset` reads them.
fn parse_offset(text: &str) -> Option<FixedOffset> {
    if text == "Z" {
        return FixedOffset::east_opt(0);
    }
    let sign = match text.chars().next()? {
        '+' => 1,
        '-' => -1,
        _ => return None,
    };
    let rest = &text[1..];
    if !rest.bytes().all(|b| b.is_ascii_digit() || b == b':') {
        return None;
    }
    let (hours, minutes) = match (rest.len(), rest.split_once(':')) {
        (1 | 2, None) => (rest, "0"),
        (4, None) => rest.split_at(2),
        (5, Some((h, m))) if h.len() == 2 => (h, m),
        _ => return None,
    };
    let hours: i32 = hours.parse().ok()?;
    let minutes: i32 = minutes.parse().ok()?;
    if minutes > 59 || hours * 60 + minutes > 18 * 60 {
        return None;
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Year4,
    Year2,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Literal(char),
}

fn parse_pattern(pattern: &str) -> Result<Vec<Piece>, String> {
    if pattern.is_empty() {
        return Err("has an empty date format; leave out the braces to get uuuu.MM.dd".to_string());
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        let piece = match (c, run) {
            ('.' | '-' | '_', _) => {
                pieces.extend(std::iter::repeat_n(Piece::Literal(c), run));
                i += run;
                continue;
            }
            ('y' | 'u', 4) => Piece::Year4,
            ('y', 2) => Piece::Year2,
            ('M', 2) => Piece::Month,
            ('d', 2) => Piece::Day,
            ('H', 2) => Piece::Hour,
            ('m', 2) => Piece::Minute,
            ('s', 2) => Piece::Second,
            _ => {
                let unsupported: String = chars[i..i + run].iter().collect();
                return Err(format!(
                    "has \"{unsupported}\" in the date format \"{pattern}\"; \
                     use yyyy, yy, uuuu, MM, dd, HH, mm and ss, separated by . - or _"
                ));
            }
        };
        pieces.push(piece);
        i += run;
    }
    Ok(pieces)
}

fn format_local(local: &NaiveDateTime, pieces: &[Piece]) -> String {
    let mut out = String::new();
    for piece in pieces {
        let text = match piece {
            Piece::Year4 => format!("{:04}", local.year()),
            Piece::Year2 => format!("{:02}", local.year() % 100),
            Piece::Month => format!("{:02}", local.month()),
            Piece::Day => format!("{:02}", local.day()),
            Piece::Hour => format!("{:02}", local.hour()),
            Piece::Minute => format!("{:02}", local.minute()),
            Piece::Second => format!("{:02}", local.second()),
            Piece::Literal(c) => c.to_string(),
        };
        out.push_str(&text);
    }
    out
}

/// Applies `+1d`, `/h` and so on, left to right, in `zone`, and returns the
/// local time there.
fn apply_math<Z: TimeZone>(
    zone: &Z,
    now: DateTime<Utc>,
    operations: &str,
) -> Result<NaiveDateTime, String> {
    let whole = || format!("now{operations}");
    let chars: Vec<char> = operations.chars().collect();
    let mut current = now.with_timezone(zone);
    let mut i = 0;
    while i < chars.len() {
        let (round, sign) = match chars[i] {
            '/' => (true, 1),
            '+' => (false, 1),
            '-' => (false, -1),
            other => {
                return Err(format!("has '{other}' in {}; expected +, - or /", whole()));
            }
        };
        i += 1;
        let digits: String = chars[i..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        i += digits.len();
        let Some(&unit) = chars.get(i) else {
            return Err(format!("has {} that ends without a unit", whole()));
        };
        i += 1;
        // Elasticsearch reads the amount into a Java `int`.
        let amount: i32 = if digits.is_empty() {
            1
        } else {
            digits
                .parse()
                .map_err(|_| format!("has a number too large in {}", whole()))?
        };
        current = if round {
            if amount != 1 {
                return Err(format!(
                    "has a rounding with a number in {}; round to a single unit, as in now/d",
                    whole()
                ));
            }
            round_down(zone, &current, unit)?
        } else {
            add(zone, &current, unit, i64::from(sign) * i64::from(amount))?
        };
    }
    Ok(current.naive_local())
}

fn unknown_unit(unit: char) -> String {
    format!("has an unknown date math unit '{unit}'; use y, M, w, d, h, H, m or s")
}

fn round_down<Z: TimeZone>(
    zone: &Z,
    current: &DateTime<Z>,
    unit: char,
) -> Result<DateTime<Z>, String> {
    let local = current.naive_local();
    let date = local.date();
    let floored = match unit {
        'y' => NaiveDate::from_ymd_opt(date.year(), 1, 1).map(|d| d.and_time(NaiveTime::MIN)),
        'M' => date.with_day(1).map(|d| d.and_time(NaiveTime::MIN)),
        'w' => date
            .checked_sub_days(Days::new(u64::from(date.weekday().num_days_from_monday())))
            .map(|d| d.and_time(NaiveTime::MIN)),
        'd' => Some(date.and_time(NaiveTime::MIN)),
        'h' | 'H' => NaiveTime::from_hms_opt(local.hour(), 0, 0).map(|t| date.and_time(t)),
        'm' => NaiveTime::from_hms_opt(local.hour(), local.minute(), 0).map(|t| date.and_time(t)),
        's' => local.with_nanosecond(0),
        _ => return Err(unknown_unit(unit)),
    };
    let floored = floored.ok_or_else(|| OUT_OF_RANGE.to_string())?;
    resolve_local(zone, floored, current.offset().fix())
}

fn add<Z: TimeZone>(
    zone: &Z,
    current: &DateTime<Z>,
    unit: char,
    amount: i64,
) -> Result<DateTime<Z>, String> {
    let local = current.naive_local();
    let out_of_range = || OUT_OF_RANGE.to_string();
    let add_months = |months: i64| {
        let count = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
        if months < 0 {
            local.checked_sub_months(count)
        } else {
            local.checked_add_months(count)
        }
    };
    // Calendar units move the local date and keep the wall-clock time (a
    // month added to 31 January gives the last day of February); clock units
    // move the instant. That is how Java's ZonedDateTime, and so Elasticsearch,
    // does it.
    let moved_local = match unit {
        'y' => add_months(amount * 12),
        'M' => add_months(amount),
        'w' => TimeDelta::try_weeks(amount).and_then(|d| local.checked_add_signed(d)),
        'd' => TimeDelta::try_days(amount).and_then(|d| local.checked_add_signed(d)),
        'h' | 'H' | 'm' | 's' => {
            let delta = match unit {
                'm' => TimeDelta::try_minutes(amount),
                's' => TimeDelta::try_seconds(amount),
                _ => TimeDelta::try_hours(amount),
            };
            return delta
                .and_then(|d| current.clone().checked_add_signed(d))
                .ok_or_else(out_of_range);
        }
        _ => return Err(unknown_unit(unit)),
    };
    let moved_local = moved_local.ok_or_else(out_of_range)?;
    resolve_local(zone, moved_local, current.offset().fix())
}

/// Pins a local time to an instant the way Java's `ZonedDateTime` does: in an
/// overlap keep the previous offset if it is one of the two, else take the
/// earlier instant; in a gap move forward by the length of the gap.
fn resolve_local<Z: TimeZone>(
    zone: &Z,
    local: NaiveDateTime,
    preferred: FixedOffset,
) -> Result<DateTime<Z>, String> {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(resolved) => Ok(resolved),
        LocalResult::Ambiguous(earlier, later) => {
            if later.offset().fix() == preferred {
                Ok(later)
            } else {
                Ok(earlier)
            }
        }
        LocalResult::None => {
            // Moving forward by the gap is the same as reading the local time
            // with the offset in force before the gap; a day earlier is safely
            // before it.
            let before_gap = local
                .checked_sub_signed(TimeDelta::days(1))
                .map(|earlier| zone.offset_from_utc_datetime(&earlier).fix())
                .ok_or_else(|| OUT_OF_RANGE.to_string())?;
            let utc = local
                .checked_sub_signed(TimeDelta::seconds(i64::from(before_gap.local_minus_utc())))
                .ok_or_else(|| OUT_OF_RANGE.to_string())?;
            Ok(zone.from_utc_datetime(&utc))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> DateTime<Utc> {
        match DateTime::parse_from_rfc3339(rfc3339) {
            Ok(t) => t.with_timezone(&Utc),
            Err(e) => panic!("bad test time {rfc3339}: {e}"),
        }
    }

    fn now() -> DateTime<Utc> {
        at("2024-03-22T15:04:05Z")
    }

    fn resolve_at(name: &str, time: &str) -> Result<String, String> {
        resolve_snapshot_name(name, at(time))
    }

    fn resolve(name: &str) -> Result<String, String> {
        resolve_snapshot_name(name, now())
    }

    fn err(name: &str) -> String {
        match resolve(name) {
            Ok(resolved) => panic!("{name:?} resolved to {resolved:?}"),
            Err(message) => message,
        }
    }

    #[test]
    fn plain_names_are_returned_unchanged() {
        let long = "a".repeat(255);
        for name in [
            "nightly",
            "nightly-2024.03.22",
            "snap_1",
            "a",
            ".hidden",
            "...",
            "snap-ü",
            "x{y}",
            "a=b+c",
            long.as_str(),
        ] {
            assert_eq!(resolve(name).as_deref(), Ok(name));
            assert_eq!(validate_snapshot_name(name), Ok(()));
        }
    }

    #[test]
    fn plain_names_follow_elasticsearch_rules() {
        let cases = [
            ("", "must not be empty"),
            ("Nightly", "must be lower case"),
            ("snap-É", "must be lower case"),
            ("a/b", "must not contain '/'"),
            ("a\\b", "must not contain '\\'"),
            ("a*", "must not contain '*'"),
            ("a?", "must not contain '?'"),
            ("a\"b", "must not contain '\"'"),
            ("a<b", "must not contain '<'"),
            ("a>b", "must not contain '>'"),
            ("a|b", "must not contain '|'"),
            ("a,b", "must not contain ','"),
            ("a#b", "must not contain '#'"),
            ("cluster:snap", "must not contain ':'"),
            ("a b", "must not contain whitespace"),
            ("a\tb", "must not contain whitespace"),
            ("a\u{3000}b", "must not contain whitespace"),
            ("_x", "must not start with '_'"),
            ("-x", "must not start with '-'"),
            (".", "must not be '.' or '..'"),
            ("..", "must not be '.' or '..'"),
        ];
        for (name, message) in cases {
            assert_eq!(err(name), message, "{name:?}");
            assert_eq!(validate_snapshot_name(name), Err(message.to_string()));
        }
        assert_eq!(err(&"a".repeat(256)), "must be at most 255 bytes long");
        // 128 two-byte characters: short in characters, too long in bytes.
        assert_eq!(err(&"é".repeat(128)), "must be at most 255 bytes long");
    }

    #[test]
    fn resolves_the_documented_examples() {
        let cases = [
            ("<nightly-{now/d}>", "nightly-2024.03.22"),
            ("<snap-{now/M{yyyy.MM}}>", "snap-2024.03"),
            (
                "<hourly-{now/h{yyyy.MM.dd-HH|Europe/Berlin}}>",
                "hourly-2024.03.22-16",
            ),
            ("<daily-{now-1d/d}>", "daily-2024.03.21"),
        ];
        for (name, expected) in cases {
            assert_eq!(resolve(name).as_deref(), Ok(expected), "{name}");
        }
    }

    #[test]
    fn resolves_arithmetic_and_rounding() {
        let cases = [
            ("<{now/d}>", "2024.03.22"),
            ("<x-{now}>", "x-2024.03.22"),
            ("<x-{now/y}>", "x-2024.01.01"),
            ("<x-{now/w}>", "x-2024.03.18"),
            ("<x-{now/M}>", "x-2024.03.01"),
            ("<x-{now+d}>", "x-2024.03.23"),
            ("<x-{now/1d}>", "x-2024.03.22"),
            ("<x-{now+12h}>", "x-2024.03.23"),
            ("<x-{now+9H{HH}}>", "x-00"),
            ("<x-{now-2w}>", "x-2024.03.08"),
            ("<x-{now+1y-1M}>", "x-2025.02.22"),
            ("<x-{now-10M}>", "x-2023.05.22"),
            (
                "<x-{now/d-1s{yyyy.MM.dd-HH.mm.ss}}>",
                "x-2024.03.21-23.59.59",
            ),
            ("<x-{now+30m/h{HH.mm}}>", "x-15.00"),
            ("<x-{now+56m/m{HH.mm.ss}}>", "x-16.00.00"),
            ("<x-{now/s{ss}}>", "x-05"),
            ("<x-{now{yyyy.MM.dd_HH.mm.ss}}>", "x-2024.03.22_15.04.05"),
            ("<x-{now{yy}}>", "x-24"),
            ("<x-{now{uuuu--dd}}>", "x-2024--22"),
            ("<{now{yyyy}}-{now/M{MM}}-{now{dd}}>", "2024-03-22"),
            ("<a-\\{b\\}-{now/d}>", "a-{b}-2024.03.22"),
            ("<\\a-{now/d}>", "a-2024.03.22"),
        ];
        for (name, expected) in cases {
            assert_eq!(resolve(name).as_deref(), Ok(expected), "{name}");
        }
    }

    #[test]
    fn month_and_year_arithmetic_clamps_to_the_end_of_the_month() {
        assert_eq!(
            resolve_at("<x-{now+1M}>", "2024-01-31T12:00:00Z").as_deref(),
            Ok("x-2024.02.29")
        );
        assert_eq!(
            resolve_at("<x-{now+1y}>", "2024-02-29T12:00:00Z").as_deref(),
            Ok("x-2025.02.28")
        );
        assert_eq!(
            resolve_at("<x-{now-1M}>", "2024-03-31T12:00:00Z").as_deref(),
            Ok("x-2024.02.29")
        );
    }

    #[test]
    fn time_zones_apply_to_rounding_and_formatting() {
        let cases = [
            ("<x-{now{yyyy.MM.dd-HH.mm|+05:30}}>", "x-2024.03.22-20.34"),
            ("<x-{now{HH.mm|+0530}}>", "x-20.34"),
            ("<x-{now{HH|-3}}>", "x-12"),
            ("<x-{now{HH|Z}}>", "x-15"),
            ("<x-{now{HH|UTC}}>", "x-15"),
            (
                "<x-{now/d{yyyy.MM.dd-HH|America/New_York}}>",
                "x-2024.03.22-00",
            ),
            ("<x-{now/d{yyyy.MM.dd-HH|Asia/Tokyo}}>", "x-2024.03.23-00"),
            ("<x-{now{yyyy.MM.dd|Pacific/Pago_Pago}}>", "x-2024.03.22"),
            ("<x-{now{yyyy.MM.dd|Pacific/Kiritimati}}>", "x-2024.03.23"),
        ];
        for (name, expected) in cases {
            assert_eq!(resolve(name).as_deref(), Ok(expected), "{name}");
        }
    }

    #[test]
    fn a_day_that_starts_in_a_dst_gap_starts_after_the_gap() {
        // Sao Paulo skipped from 00:00 to 01:00 on 2018-11-04.
        assert_eq!(
            resolve_at(
                "<x-{now/d{yyyy.MM.dd-HH.mm|America/Sao_Paulo}}>",
                "2018-11-04T12:00:00Z"
            )
            .as_deref(),
            Ok("x-2018.11.04-01.00")
        );
        // Adding a day onto a time that falls in the gap.
        assert_eq!(
            resolve_at(
                "<x-{now+1d{yyyy.MM.dd-HH.mm|America/Sao_Paulo}}>",
                "2018-11-03T03:30:00Z"
            )
            .as_deref(),
            Ok("x-2018.11.04-01.30")
        );
    }

    #[test]
    fn an_hour_in_a_dst_overlap_keeps_its_offset() {
        // Berlin went from 03:00 CEST back to 02:00 CET on 2024-10-27, so
        // 02:00 to 03:00 happened twice; one hour later tells them apart.
        let name = "<x-{now/h+1h{HH.mm|Europe/Berlin}}>";
        assert_eq!(
            resolve_at(name, "2024-10-27T00:30:00Z").as_deref(),
            Ok("x-02.00")
        );
        assert_eq!(
            resolve_at(name, "2024-10-27T01:30:00Z").as_deref(),
            Ok("x-03.00")
        );
    }

    #[test]
    fn refuses_broken_date_math() {
        let cases = [
            (
                "<nightly-{now/d}",
                "starts with < but does not end with >; date math names look like <nightly-{now/d}>",
            ),
            (
                "<",
                "starts with < but does not end with >; date math names look like <nightly-{now/d}>",
            ),
            ("<>", "must not be empty"),
            (
                "<{later}>",
                "has {later}, but date math must start with now, as in {now/d}",
            ),
            (
                "<x-{}>",
                "has {}, but date math must start with now, as in {now/d}",
            ),
            (
                "<x-{2024.03.01||+1d}>",
                "has {2024.03.01||+1d}, but date math must start with now, as in {now/d}",
            ),
            (
                "<x-{now/q}>",
                "has an unknown date math unit 'q'; use y, M, w, d, h, H, m or s",
            ),
            (
                "<x-{now+1Y}>",
                "has an unknown date math unit 'Y'; use y, M, w, d, h, H, m or s",
            ),
            ("<x-{now*2d}>", "has '*' in now*2d; expected +, - or /"),
            ("<x-{nowd}>", "has 'd' in nowd; expected +, - or /"),
            ("<x-{now+}>", "has now+ that ends without a unit"),
            ("<x-{now-15}>", "has now-15 that ends without a unit"),
            ("<x-{now/}>", "has now/ that ends without a unit"),
            (
                "<x-{now/2d}>",
                "has a rounding with a number in now/2d; round to a single unit, as in now/d",
            ),
            (
                "<x-{now+3000000000d}>",
                "has a number too large in now+3000000000d",
            ),
            ("<x-{now+8000y}>", OUT_OF_RANGE),
            ("<x-{now-2024y}>", OUT_OF_RANGE),
            ("<x-{now+2147483647y}>", OUT_OF_RANGE),
            ("<x-{now+2147483647d}>", OUT_OF_RANGE),
            ("<x-{now+2147483647h}>", OUT_OF_RANGE),
            (
                "<x-{now/d>",
                "has a { that is never closed; date math looks like {now/d}",
            ),
            (
                "<x-{now{yyyy}>",
                "has a { that is never closed; date math looks like {now/d}",
            ),
            (
                "<x-}>",
                "has a } without a matching {; write \\} for a literal brace",
            ),
            ("<x-{now{yy{yy}}}>", "has a { inside a date format"),
            (
                "<x-{now{}}>",
                "has an empty date format; leave out the braces to get uuuu.MM.dd",
            ),
            (
                "<x-{now{|UTC}}>",
                "has an empty date format; leave out the braces to get uuuu.MM.dd",
            ),
            (
                "<x-{now{yyyy}x}>",
                "the date format must end the placeholder, as in {now/d{yyyy.MM.dd}}",
            ),
            (
                "<x-{now{YYYY}}>",
                "has \"YYYY\" in the date format \"YYYY\"; use yyyy, yy, uuuu, MM, dd, HH, mm and ss, separated by . - or _",
            ),
            (
                "<x-{now{yyyy.M.d}}>",
                "has \"M\" in the date format \"yyyy.M.d\"; use yyyy, yy, uuuu, MM, dd, HH, mm and ss, separated by . - or _",
            ),
            (
                "<x-{now{yyyy MM}}>",
                "has \" \" in the date format \"yyyy MM\"; use yyyy, yy, uuuu, MM, dd, HH, mm and ss, separated by . - or _",
            ),
            (
                "<x-{now{'at'HH}}>",
                "has \"'\" in the date format \"'at'HH\"; use yyyy, yy, uuuu, MM, dd, HH, mm and ss, separated by . - or _",
            ),
            (
                "<x-{now{yyyyy}}>",
                "has \"yyyyy\" in the date format \"yyyyy\"; use yyyy, yy, uuuu, MM, dd, HH, mm and ss, separated by . - or _",
            ),
            (
                "<x-{now{yyyy|Mars/Base}}>",
                "has an unknown time zone \"Mars/Base\"; use an IANA name such as Europe/Berlin or an offset such as +01:00",
            ),
            (
                "<x-{now{yyyy|+19:00}}>",
                "has an unknown time zone \"+19:00\"; use an IANA name such as Europe/Berlin or an offset such as +01:00",
            ),
            (
                "<x-{now{yyyy|+01:60}}>",
                "has an unknown time zone \"+01:60\"; use an IANA name such as Europe/Berlin or an offset such as +01:00",
            ),
            (
                "<x-{now{yyyy|}}>",
                "has an unknown time zone \"\"; use an IANA name such as Europe/Berlin or an offset such as +01:00",
            ),
        ];
        for (name, message) in cases {
            assert_eq!(err(name), message, "{name:?}");
        }
    }

    #[test]
    fn the_resolved_name_must_be_a_valid_plain_name() {
        let cases = [
            (
                "<Nightly-{now/d}>",
                "resolves to \"Nightly-2024.03.22\", which must be lower case",
            ),
            (
                "<a/b-{now/d}>",
                "resolves to \"a/b-2024.03.22\", which must not contain '/'",
            ),
            (
                "<a b-{now/d}>",
                "resolves to \"a b-2024.03.22\", which must not contain whitespace",
            ),
            (
                "<_x-{now/d}>",
                "resolves to \"_x-2024.03.22\", which must not start with '_'",
            ),
            (
                "<{now/d}-\\\\>",
                "resolves to \"2024.03.22-\\\", which must not contain '\\'",
            ),
            ("<..>", "resolves to \"..\", which must not be '.' or '..'"),
        ];
        for (name, message) in cases {
            assert_eq!(err(name), message, "{name:?}");
        }
        let long = format!("<{}-{{now/d}}>", "a".repeat(245));
        assert_eq!(
            resolve(&long)
                .err()
                .as_deref()
                .map(|m| m.ends_with("which must be at most 255 bytes long")),
            Some(true)
        );
        let fits = format!("<{}-{{now/d}}>", "a".repeat(244));
        assert_eq!(resolve(&fits).map(|n| n.len()), Ok(255));
    }

    #[test]
    fn validation_accepts_date_math_that_resolves() {
        assert_eq!(validate_snapshot_name("<nightly-{now/d}>"), Ok(()));
        assert_eq!(
            validate_snapshot_name("<hourly-{now/h{yyyy.MM.dd-HH|Europe/Berlin}}>"),
            Ok(())
        );
        assert!(validate_snapshot_name("<x-{now/q}>").is_err());
        assert!(validate_snapshot_name("<Nightly-{now/d}>").is_err());
    }

    #[test]
    fn offsets_parse_like_java_zone_offsets() {
        let secs = |text: &str| parse_offset(text).map(|o| o.local_minus_utc());
        assert_eq!(secs("Z"), Some(0));
        assert_eq!(secs("+01:00"), Some(3600));
        assert_eq!(secs("-05:30"), Some(-19800));
        assert_eq!(secs("+0530"), Some(19800));
        assert_eq!(secs("+1"), Some(3600));
        assert_eq!(secs("-11"), Some(-39600));
        assert_eq!(secs("+18:00"), Some(64800));
        assert_eq!(secs("+18:01"), None);
        assert_eq!(secs("+1:00"), None);
        assert_eq!(secs("+"), None);
        assert_eq!(secs("01:00"), None);
        assert_eq!(secs("+01:0a"), None);
        assert_eq!(secs("+123"), None);
    }
}
