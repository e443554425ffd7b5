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
//! The cron grammar is `floe_domain::cron`'s, the one the policy API
//! validates, parsed there into a typed `Cron`; this module evaluates it.
//! `nW` never leaves the month (`1W` on a Saturday is Monday the 3rd), and
//! a month without day n (`31W`, `30` in February) has no firing, as in
//! Quartz.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;
use floe_domain::cron::{DayOfMonth, DayOfWeek};

/// A parsed cron expression: the grammar is the domain's, the one the
/// policy API validates.
pub use floe_domain::cron::Cron;

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
            return Cron::parse_eventbridge(body)
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

/// Evaluation of a parsed [`Cron`] on a time zone's wall clock.
trait Evaluate {
    fn matches_day(&self, date: NaiveDate) -> bool;
    fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>>;
}

impl Evaluate for Cron {
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
    fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
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
