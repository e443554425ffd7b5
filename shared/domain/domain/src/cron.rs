//! Floe's one cron grammar, parsed into a typed [`Cron`].
//!
//! EventBridge Scheduler's six fields: `minute hour day-of-month month
//! day-of-week year`, with `*`, values, `a-b` ranges, `,` lists, `/` steps
//! (on `*`, a value or a range), month and day names, `L`, `L-n`, `LW` and
//! `nW` in the day of month, and `L`, `nL` and `n#k` in the day of week
//! (1 = SUN … 7 = SAT). Exactly one of the two day fields must be `?`.
//! Years run 1970-2199, EventBridge Scheduler's limits.
//!
//! [`crate::schedule`] validates Elasticsearch SLM's Quartz cron with it
//! (the same fields after a seconds field, with an optional year) before it
//! writes the EventBridge expression; `floe-schedules` parses the
//! EventBridge expression with it and evaluates the parsed [`Cron`] to
//! find a schedule's next firing in local mode. Whatever one accepts, the
//! other runs.

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    pub minutes: Values,
    pub hours: Values,
    pub day_of_month: DayOfMonth,
    pub months: Values,
    pub day_of_week: DayOfWeek,
    pub years: Values,
}

/// The values one field allows, as a bitmap over the field's range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Values {
    min: u32,
    allowed: Vec<bool>,
}

/// The day-of-month field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DayOfMonth {
    /// `?`: the day of week decides.
    Any,
    Days(Values),
    /// `L` (0) or `L-n`: n days before the month's last day.
    Last(u32),
    /// `LW`: the month's last weekday.
    LastWeekday,
    /// `nW`: the weekday nearest to day n, within the month.
    NearestWeekday(u32),
}

/// The day-of-week field, 1 = SUN … 7 = SAT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DayOfWeek {
    /// `?`: the day of month decides.
    Any,
    Days(Values),
    /// `nL`: the month's last such weekday.
    Last(u32),
    /// `n#k`: the month's k-th such weekday.
    Nth(u32, u32),
}

impl Cron {
    /// The body of an EventBridge `cron(...)` expression, in any case.
    pub fn parse_eventbridge(body: &str) -> Result<Cron, String> {
        let upper = body.to_ascii_uppercase();
        let fields: Vec<&str> = upper.split_ascii_whitespace().collect();
        let [minute, hour, dom, month, dow, year] = fields.as_slice() else {
            return Err(format!(
                "a cron expression has 6 fields (minutes hours day-of-month month day-of-week year), found {}",
                fields.len()
            ));
        };
        Cron::from_fields([minute, hour, dom, month, dow, year])
    }

    /// The six fields, upper-cased: `minute hour day-of-month month
    /// day-of-week year`. The first field in error is named in the message.
    pub fn from_fields(fields: [&str; 6]) -> Result<Cron, String> {
        let [minute, hour, dom, month, dow, year] = fields;
        let cron = Cron {
            minutes: MINUTE.list(minute)?,
            hours: HOUR.list(hour)?,
            day_of_month: parse_day_of_month(dom)?,
            months: MONTH.list(month)?,
            day_of_week: parse_day_of_week(dow)?,
            years: YEAR.list(year)?,
        };
        let dom_unset = cron.day_of_month == DayOfMonth::Any;
        let dow_unset = cron.day_of_week == DayOfWeek::Any;
        if dom_unset == dow_unset {
            return Err(
                "exactly one of the day-of-month and day-of-week fields must be ? \
                        (Elasticsearch and EventBridge Scheduler both require it)"
                    .to_string(),
            );
        }
        Ok(cron)
    }
}

impl Values {
    pub fn contains(&self, v: u32) -> bool {
        v.checked_sub(self.min)
            .and_then(|i| self.allowed.get(i as usize))
            .copied()
            .unwrap_or(false)
    }

    /// Allowed values in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.allowed
            .iter()
            .enumerate()
            .filter(|(_, a)| **a)
            .map(|(i, _)| self.min + i as u32)
    }

    pub fn max_allowed(&self) -> Option<u32> {
        self.iter().last()
    }
}

/// One field of a cron expression and the values it takes.
struct Field {
    label: &'static str,
    min: u32,
    max: u32,
    /// Names standing for `min`, `min + 1`, …
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    label: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    label: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: Field = Field {
    label: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    label: "month",
    min: 1,
    max: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
};
const DAY_OF_WEEK: Field = Field {
    label: "day-of-week",
    min: 1,
    max: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
};
// EventBridge Scheduler's limits; Quartz accepts a wider range.
const YEAR: Field = Field {
    label: "year",
    min: 1970,
    max: 2199,
    names: &[],
};

impl Field {
    fn error(&self, message: impl std::fmt::Display) -> String {
        format!("{} field: {message}", self.label)
    }

    fn expected(&self) -> String {
        match (self.names.first(), self.names.last()) {
            (Some(first), Some(last)) => format!(
                "a number {}-{} or a name {first}-{last}",
                self.min, self.max
            ),
            _ => format!("a number {}-{}", self.min, self.max),
        }
    }

    fn value(&self, token: &str) -> Result<u32, String> {
        if token.is_empty() {
            return Err(self.error(format!("a value is missing; expected {}", self.expected())));
        }
        if token.bytes().all(|b| b.is_ascii_digit()) {
            return token
                .parse::<u32>()
                .ok()
                .filter(|n| (self.min..=self.max).contains(n))
                .ok_or_else(|| {
                    self.error(format!("{token} is out of range {}-{}", self.min, self.max))
                });
        }
        if let Some(index) = self.names.iter().position(|name| *name == token) {
            // At most twelve names, so the index always fits.
            return Ok(self.min + index as u32);
        }
        if token == "?" {
            return Err(
                self.error("? is only allowed alone, in the day-of-month or day-of-week field")
            );
        }
        Err(self.error(format!(
            "\"{token}\" is not valid; expected {}",
            self.expected()
        )))
    }

    fn none(&self) -> Values {
        Values {
            min: self.min,
            allowed: vec![false; (self.max - self.min + 1) as usize],
        }
    }

    /// `*`, values, ranges and steps, in a comma-separated list.
    fn list(&self, text: &str) -> Result<Values, String> {
        let mut values = self.none();
        for item in text.split(',') {
            let (base, step) = match item.split_once('/') {
                Some((base, step)) => (base, Some(step)),
                None => (item, None),
            };
            let step = match step {
                None => None,
                Some(step) => Some(
                    step.parse::<u32>()
                        .ok()
                        .filter(|n| {
                            (1..=self.max).contains(n) && step.bytes().all(|b| b.is_ascii_digit())
                        })
                        .ok_or_else(|| {
                            self.error(format!(
                                "the step in \"{item}\" must be a number 1-{}",
                                self.max
                            ))
                        })?,
                ),
            };
            let (low, high) = if base == "*" {
                (self.min, self.max)
            } else if let Some((low, high)) = base.split_once('-') {
                let (low, high) = (self.value(low)?, self.value(high)?);
                if low > high {
                    return Err(self.error(format!("the range {base} must go from low to high")));
                }
                (low, high)
            } else {
                let v = self.value(base)?;
                // Quartz and EventBridge read `5/15` as "from 5, every 15".
                (v, if step.is_some() { self.max } else { v })
            };
            for v in (low..=high).step_by(step.unwrap_or(1) as usize) {
                values.allowed[(v - self.min) as usize] = true;
            }
        }
        Ok(values)
    }
}

fn parse_day_of_month(text: &str) -> Result<DayOfMonth, String> {
    let field = &DAY_OF_MONTH;
    match text {
        "?" => return Ok(DayOfMonth::Any),
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
            .ok_or_else(|| {
                field.error(format!(
                    "in {text}, the days before the last day must be 1-30"
                ))
            });
    }
    if let Some(day) = text.strip_suffix('W') {
        if !day.bytes().all(|b| b.is_ascii_digit()) {
            return Err(field.error(format!(
                "\"{text}\" is not valid; W follows a single day, as in 15W"
            )));
        }
        return field.value(day).map(DayOfMonth::NearestWeekday);
    }
    field.list(text).map(DayOfMonth::Days)
}

fn parse_day_of_week(text: &str) -> Result<DayOfWeek, String> {
    let field = &DAY_OF_WEEK;
    match text {
        "?" => return Ok(DayOfWeek::Any),
        // `L` alone is the last day of the week.
        "L" => return field.list("7").map(DayOfWeek::Days),
        _ => {}
    }
    if let Some((day, nth)) = text.split_once('#') {
        let day = field.value(day)?;
        return nth
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=5).contains(n) && nth.bytes().all(|b| b.is_ascii_digit()))
            .map(|nth| DayOfWeek::Nth(day, nth))
            .ok_or_else(|| field.error(format!("in {text}, the number after # must be 1-5")));
    }
    if let Some(day) = text.strip_suffix('L') {
        return field.value(day).map(DayOfWeek::Last);
    }
    field.list(text).map(DayOfWeek::Days)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_parse_into_the_values_they_allow() -> Result<(), String> {
        let cron = Cron::parse_eventbridge("5/15 8-18/2 ? jan,Jul 6#3 2030")?;
        assert_eq!(cron.minutes.iter().collect::<Vec<_>>(), [5, 20, 35, 50]);
        assert_eq!(
            cron.hours.iter().collect::<Vec<_>>(),
            [8, 10, 12, 14, 16, 18]
        );
        assert_eq!(cron.day_of_month, DayOfMonth::Any);
        assert_eq!(cron.months.iter().collect::<Vec<_>>(), [1, 7]);
        assert_eq!(cron.day_of_week, DayOfWeek::Nth(6, 3));
        assert_eq!(cron.years.max_allowed(), Some(2030));
        let cron = Cron::parse_eventbridge("0 0 L-3 * ? *")?;
        assert_eq!(cron.day_of_month, DayOfMonth::Last(3));
        assert_eq!(cron.day_of_week, DayOfWeek::Any);
        let cron = Cron::parse_eventbridge("0 0 ? * L *")?;
        assert_eq!(cron.day_of_week, DayOfWeek::Days(DAY_OF_WEEK.list("SAT")?));
        Ok(())
    }

    #[test]
    fn an_eventbridge_expression_has_six_fields() {
        assert_eq!(
            Cron::parse_eventbridge("0 0 * * ?"),
            Err(
                "a cron expression has 6 fields (minutes hours day-of-month month \
                 day-of-week year), found 5"
                    .to_string()
            )
        );
    }
}
