//! EventBridge Scheduler's recurring expressions, evaluated the way the
//! service evaluates them, so that local mode fires when AWS would.
//!
//! - `rate(N minute|minutes|hour|hours|day|days)` is a fixed duration on the
//!   UTC time line, counted from an anchor (the schedule's creation): the
//!   firings are `anchor + k·N` for k = 0, 1, 2… As on AWS, a schedule with no
//!   start date fires right away, and a day is 24 hours whatever the time
//!   zone's daylight saving time does. The singular and plural units are both
//!   accepted whatever N is; the domain crate always writes the right one.
//! - `cron(minute hour day-of-month month day-of-week year)` is evaluated on
//!   the wall clock of the schedule's IANA time zone. Daylight saving time is
//!   handled as EventBridge Scheduler documents it: a wall-clock time that
//!   does not exist (the hour skipped in spring) is skipped, not moved; a
//!   wall-clock time that occurs twice (the hour repeated in autumn) fires
//!   once, at its first occurrence.
//!
//! The cron grammar is the one `floe_domain::schedule` validates: `*`, `?`,
//! values, `a-b` ranges, `,` lists, `/` steps (on `*`, a value or a range),
//! month and day names, `L`, `L-n`, `LW` and `nW` in the day of month, and
//! `L`, `nL` and `n#k` in the day of week (1 = SUN … 7 = SAT). Exactly one of
//! the two day fields must be `?`. `nW` never leaves the month (`1W` on a
//! Saturday is Monday the 3rd), and a month without day n (`31W`, `30` in
//! February) has no firing, as in Quartz.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

/// Why an expression or a time zone cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid schedule expression {expression:?}: {reason}")]
pub struct ExpressionError {
    pub expression: String,
    pub reason: String,
}

/// A parsed recurring expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expression {
    Rate(Duration),
    Cron(Box<Cron>),
}

/// A schedule's expression and the time zone it is evaluated in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recurrence {
    pub expression: Expression,
    pub timezone: Tz,
}

impl Recurrence {
    pub fn parse(expression: &str, timezone: &str) -> Result<Recurrence, ExpressionError> {
        let timezone = timezone.parse::<Tz>().map_err(|_| ExpressionError {
            expression: expression.to_string(),
            reason: format!("{timezone:?} is not an IANA time zone name"),
        })?;
        Ok(Recurrence {
            expression: Expression::parse(expression)?,
            timezone,
        })
    }

    /// The first firing strictly after `after`; `anchor` is where a rate
    /// schedule's count starts (ignored by cron). `None` once a cron's years
    /// are over.
    pub fn next_after(&self, after: DateTime<Utc>, anchor: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.expression {
            Expression::Rate(period) => rate_next_after(*period, anchor, after),
            Expression::Cron(cron) => cron.next_after(after, self.timezone),
        }
    }

    /// The first firing at or after `at`.
    pub fn first_at_or_after(
        &self,
        at: DateTime<Utc>,
        anchor: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        self.next_after(at - Duration::nanoseconds(1), anchor)
    }
}

fn rate_next_after(
    period: Duration,
    anchor: DateTime<Utc>,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if after < anchor {
        return Some(anchor);
    }
    let period_ms = period.num_milliseconds();
    if period_ms <= 0 {
        return None;
    }
    let elapsed_ms = (after - anchor).num_milliseconds();
    let periods = elapsed_ms / period_ms + 1;
    anchor.checked_add_signed(Duration::try_milliseconds(periods.checked_mul(period_ms)?)?)
}

impl Expression {
    pub fn parse(text: &str) -> Result<Expression, ExpressionError> {
        let error = |reason: String| ExpressionError {
            expression: text.to_string(),
            reason,
        };
        let trimmed = text.trim();
        if let Some(body) = inner(trimmed, "rate(") {
            return parse_rate(body).map(Expression::Rate).map_err(error);
        }
        if let Some(body) = inner(trimmed, "cron(") {
            return Cron::parse(body)
                .map(|c| Expression::Cron(Box::new(c)))
                .map_err(error);
        }
        Err(error(
            "expected rate(value unit) or cron(minutes hours day-of-month month day-of-week year)"
                .into(),
        ))
    }
}

fn inner<'a>(text: &'a str, opening: &str) -> Option<&'a str> {
    text.strip_prefix(opening)?.strip_suffix(')')
}

fn parse_rate(body: &str) -> Result<Duration, String> {
    let parts: Vec<&str> = body.split_ascii_whitespace().collect();
    let [value, unit] = parts.as_slice() else {
        return Err("a rate is a value and a unit, as in rate(30 minutes)".into());
    };
    let value: i64 = value
        .parse()
        .ok()
        .filter(|v| *v > 0 && value.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("the rate value {value:?} must be a positive whole number"))?;
    let unit_minutes = match *unit {
        "minute" | "minutes" => 1,
        "hour" | "hours" => 60,
        "day" | "days" => 24 * 60,
        other => {
            return Err(format!(
                "the rate unit {other:?} must be minute(s), hour(s) or day(s)"
            ));
        }
    };
    value
        .checked_mul(unit_minutes)
        .filter(|m| *m <= 1_000_000_000)
        .map(Duration::minutes)
        .ok_or_else(|| "the rate is too long".into())
}

/// The values one field allows, as a bitmap over `min..=max`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Values {
    min: u32,
    allowed: Vec<bool>,
}

impl Values {
    fn contains(&self, v: u32) -> bool {
        v.checked_sub(self.min)
            .and_then(|i| self.allowed.get(i as usize))
            .copied()
            .unwrap_or(false)
    }

    /// Allowed values in ascending order.
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.allowed
            .iter()
            .enumerate()
            .filter(|(_, a)| **a)
            .map(|(i, _)| self.min + i as u32)
    }

    fn max_allowed(&self) -> Option<u32> {
        self.iter().last()
    }
}

struct FieldRule {
    label: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldRule = FieldRule {
    label: "minutes",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldRule = FieldRule {
    label: "hours",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: FieldRule = FieldRule {
    label: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldRule = FieldRule {
    label: "month",
    min: 1,
    max: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
};
const DAY_OF_WEEK: FieldRule = FieldRule {
    label: "day-of-week",
    min: 1,
    max: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
};
const YEAR: FieldRule = FieldRule {
    label: "year",
    min: 1970,
    max: 2199,
    names: &[],
};

impl FieldRule {
    fn value(&self, token: &str) -> Result<u32, String> {
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            let v: u32 = token
                .parse()
                .map_err(|_| format!("{}: {token} is out of range", self.label))?;
            if (self.min..=self.max).contains(&v) {
                return Ok(v);
            }
            return Err(format!(
                "{}: {v} is out of range {}-{}",
                self.label, self.min, self.max
            ));
        }
        self.names
            .iter()
            .position(|n| *n == token)
            .map(|i| self.min + i as u32)
            .ok_or_else(|| format!("{}: {token:?} is not a valid value", self.label))
    }

    /// `*`, values, ranges and steps, comma-separated.
    fn list(&self, text: &str) -> Result<Values, String> {
        let mut allowed = vec![false; (self.max - self.min + 1) as usize];
        for item in text.split(',') {
            let (base, step) = match item.split_once('/') {
                Some((base, step)) => {
                    let step = step
                        .parse::<u32>()
                        .ok()
                        .filter(|s| *s >= 1 && step.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| format!("{}: bad step in {item:?}", self.label))?;
                    (base, Some(step))
                }
                None => (item, None),
            };
            let (low, high) = if base == "*" {
                (self.min, self.max)
            } else if let Some((low, high)) = base.split_once('-') {
                (self.value(low)?, self.value(high)?)
            } else {
                let v = self.value(base)?;
                // Quartz and EventBridge read `5/15` as "from 5, every 15".
                (v, if step.is_some() { self.max } else { v })
            };
            if low > high {
                return Err(format!(
                    "{}: the range {base} must go from low to high",
                    self.label
                ));
            }
            let step = step.unwrap_or(1) as usize;
            for v in (low..=high).step_by(step) {
                allowed[(v - self.min) as usize] = true;
            }
        }
        Ok(Values {
            min: self.min,
            allowed,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfMonth {
    Any,
    Days(Values),
    /// `L` (0) or `L-n`: n days before the month's last day.
    Last(u32),
    /// `LW`: the month's last weekday.
    LastWeekday,
    /// `nW`: the weekday nearest to day n, within the month.
    NearestWeekday(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfWeek {
    Any,
    Days(Values),
    /// `nL`: the month's last such weekday.
    Last(u32),
    /// `n#k`: the month's k-th such weekday.
    Nth(u32, u32),
}

/// A parsed EventBridge cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: Values,
    hours: Values,
    day_of_month: DayOfMonth,
    months: Values,
    day_of_week: DayOfWeek,
    years: Values,
}

impl Cron {
    fn parse(body: &str) -> Result<Cron, String> {
        let upper = body.to_ascii_uppercase();
        let fields: Vec<&str> = upper.split_ascii_whitespace().collect();
        let [minute, hour, dom, month, dow, year] = fields.as_slice() else {
            return Err(format!(
                "a cron expression has 6 fields (minutes hours day-of-month month day-of-week year), found {}",
                fields.len()
            ));
        };
        if (*dom == "?") == (*dow == "?") {
            return Err("exactly one of day-of-month and day-of-week must be ?".into());
        }
        let day_of_month = parse_day_of_month(dom)?;
        let day_of_week = parse_day_of_week(dow)?;
        Ok(Cron {
            minutes: MINUTE.list(minute)?,
            hours: HOUR.list(hour)?,
            day_of_month,
            months: MONTH.list(month)?,
            day_of_week,
            years: YEAR.list(year)?,
        })
    }

    fn matches_day(&self, date: NaiveDate) -> bool {
        let dom_ok = match &self.day_of_month {
            DayOfMonth::Any => true,
            DayOfMonth::Days(v) => v.contains(date.day()),
            DayOfMonth::Last(offset) => last_day(date)
                .checked_sub(*offset)
                .is_some_and(|d| d == date.day()),
            DayOfMonth::LastWeekday => nearest_weekday(date, last_day(date)) == Some(date.day()),
            DayOfMonth::NearestWeekday(n) => nearest_weekday(date, *n) == Some(date.day()),
        };
        let weekday = date.weekday().number_from_sunday();
        let dow_ok = match &self.day_of_week {
            DayOfWeek::Any => true,
            DayOfWeek::Days(v) => v.contains(weekday),
            DayOfWeek::Last(d) => *d == weekday && date.day() + 7 > last_day(date),
            DayOfWeek::Nth(d, k) => *d == weekday && (date.day() - 1) / 7 + 1 == *k,
        };
        dom_ok && dow_ok
    }

    /// The first firing strictly after `after`, on the wall clock of `tz`.
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let wall = after.with_timezone(&tz).naive_local();
        let last_year = self.years.max_allowed()?;
        let mut date = wall.date();
        // Each candidate's instant rises with its wall time (the repeated
        // hour counts once, at its first occurrence), so the first candidate
        // at or after `wall` that lies after `after` is the answer.
        let mut first_day = true;
        loop {
            let year = u32::try_from(date.year()).ok()?;
            if year > last_year {
                return None;
            }
            if !self.years.contains(year) {
                date = NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)?;
                first_day = false;
                continue;
            }
            if !self.months.contains(date.month()) {
                date = first_of_next_month(date)?;
                first_day = false;
                continue;
            }
            if self.matches_day(date) {
                for hour in self.hours.iter() {
                    for minute in self.minutes.iter() {
                        let candidate = date.and_hms_opt(hour, minute, 0)?;
                        if first_day && candidate < wall - Duration::minutes(1) {
                            continue;
                        }
                        if let Some(instant) = earliest_instant(tz, candidate)
                            && instant > after
                        {
                            return Some(instant);
                        }
                    }
                }
            }
            date = date.succ_opt()?;
            first_day = false;
        }
    }
}

/// The instant a wall-clock time stands for: none in a gap, the first in
/// an overlap.
fn earliest_instant(tz: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    tz.from_local_datetime(&wall)
        .earliest()
        .map(|t| t.with_timezone(&Utc))
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    if date.month() == 12 {
        NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)
    }
}

fn last_day(date: NaiveDate) -> u32 {
    first_of_next_month(date)
        .and_then(|d| d.pred_opt())
        .map(|d| d.day())
        .unwrap_or(28)
}

/// The weekday nearest to day `n` of `date`'s month, never leaving the
/// month; `None` when the month has no day `n`.
fn nearest_weekday(date: NaiveDate, n: u32) -> Option<u32> {
    let last = last_day(date);
    let target = NaiveDate::from_ymd_opt(date.year(), date.month(), n)?;
    Some(match target.weekday() {
        Weekday::Sat if n == 1 => 3,
        Weekday::Sat => n - 1,
        Weekday::Sun if n == last => n - 2,
        Weekday::Sun => n + 1,
        _ => n,
    })
}

fn parse_day_of_month(text: &str) -> Result<DayOfMonth, String> {
    match text {
        "?" | "*" => return Ok(DayOfMonth::Any),
        "L" => return Ok(DayOfMonth::Last(0)),
        "LW" => return Ok(DayOfMonth::LastWeekday),
        _ => {}
    }
    if let Some(offset) = text.strip_prefix("L-") {
        return offset
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=30).contains(n) && offset.bytes().all(|b| b.is_ascii_digit()))
            .map(DayOfMonth::Last)
            .ok_or_else(|| format!("day-of-month: {text:?} needs L-1 to L-30"));
    }
    if let Some(day) = text.strip_suffix('W') {
        if !day.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "day-of-month: W follows a single day, not {text:?}"
            ));
        }
        return DAY_OF_MONTH.value(day).map(DayOfMonth::NearestWeekday);
    }
    DAY_OF_MONTH.list(text).map(DayOfMonth::Days)
}

fn parse_day_of_week(text: &str) -> Result<DayOfWeek, String> {
    match text {
        "?" | "*" => return Ok(DayOfWeek::Any),
        // `L` alone is the last day of the week.
        "L" => return DAY_OF_WEEK.list("7").map(DayOfWeek::Days),
        _ => {}
    }
    if let Some((day, nth)) = text.split_once('#') {
        let day = DAY_OF_WEEK.value(day)?;
        let nth = nth
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=5).contains(n) && nth.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| format!("day-of-week: {text:?} needs #1 to #5"))?;
        return Ok(DayOfWeek::Nth(day, nth));
    }
    if let Some(day) = text.strip_suffix('L') {
        return DAY_OF_WEEK.value(day).map(DayOfWeek::Last);
    }
    DAY_OF_WEEK.list(text).map(DayOfWeek::Days)
}
