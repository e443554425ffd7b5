//! Byte sizes written the way Elasticsearch settings take them (`150mb`,
//! `1gb`), so a value a user copies from Elasticsearch documentation means the
//! same thing here.

/// Elasticsearch keeps byte sizes in a Java `long`; anything larger would be
/// accepted here and refused later by the cluster.
const MAX_BYTES: u64 = i64::MAX as u64;

const MAX_INPUT_LEN: usize = 64;

const SYNTAX: &str = "must be a byte size such as 150mb, 1gb or 0";

/// Units with their power of 1024. Elasticsearch takes each with or without
/// the trailing `b`, and in any case.
const UNITS: [(&str, u32); 11] = [
    ("kb", 1),
    ("mb", 2),
    ("gb", 3),
    ("tb", 4),
    ("pb", 5),
    ("b", 0),
    ("k", 1),
    ("m", 2),
    ("g", 3),
    ("t", 4),
    ("p", 5),
];

/// Parses an Elasticsearch byte size into bytes.
///
/// `0` and `-1` (also `-1b`) are the only values allowed without a real
/// size; Elasticsearch uses both to switch a throttle off, so both come back
/// as 0. Fractions (`1.5gb`) are truncated to whole bytes, as Elasticsearch
/// does. Unlike Elasticsearch, whitespace is refused rather than trimmed: one
/// value, one spelling.
pub fn parse_byte_size(s: &str) -> Result<u64, String> {
    // No sensible size is this long, and the bound keeps the exact fraction
    // arithmetic below cheap whatever a client sends.
    if s.is_empty() || s.len() > MAX_INPUT_LEN {
        return Err(SYNTAX.to_string());
    }
    if s.chars().any(char::is_whitespace) {
        return Err(format!("{SYNTAX}, without spaces"));
    }
    let lower = s.to_ascii_lowercase();
    if lower == "0" || lower == "-1" || lower == "-1b" {
        return Ok(0);
    }
    if lower.starts_with('-') {
        return Err("must not be negative (-1 alone means unlimited)".to_string());
    }

    let number_len = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(number_len);
    let (whole, fraction) = split_number(number).ok_or_else(|| SYNTAX.to_string())?;
    if unit.is_empty() {
        return Err(format!(
            "needs a unit, as in {number}mb or {number}gb (units: b, kb, mb, gb, tb, pb)"
        ));
    }
    let power = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, power)| *power)
        .ok_or_else(|| format!("has an unknown unit \"{unit}\" (units: b, kb, mb, gb, tb, pb)"))?;

    let too_large = || "must be less than 8192pb".to_string();
    let whole: u64 = whole.parse().map_err(|_| too_large())?;
    let bytes = whole
        .checked_mul(1024u64.pow(power))
        .and_then(|b| b.checked_add(fraction_bytes(fraction, power * 10)))
        .filter(|b| *b <= MAX_BYTES)
        .ok_or_else(too_large)?;
    Ok(bytes)
}

/// Formats bytes in the largest unit that divides them exactly, so that
/// parsing the result gives back the same number.
pub fn format_byte_size(bytes: u64) -> String {
    const NAMES: [&str; 6] = ["b", "kb", "mb", "gb", "tb", "pb"];
    if bytes == 0 {
        return "0b".to_string();
    }
    let mut value = bytes;
    let mut unit = 0;
    while unit + 1 < NAMES.len() && value.is_multiple_of(1024) {
        value /= 1024;
        unit += 1;
    }
    format!("{value}{}", NAMES[unit])
}

/// Splits `12.5` into `("12", "5")`; both sides must have digits when there
/// is a point.
fn split_number(number: &str) -> Option<(&str, &str)> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let fraction_ok = !number.contains('.') || !fraction.is_empty();
    (!whole.is_empty() && digits(whole) && digits(fraction) && fraction_ok)
        .then_some((whole, fraction))
}

/// `floor(0.<fraction> * 2^bits)`, computed exactly: doubling the decimal
/// digits `bits` times shifts one binary digit out of the fraction each time.
/// (Elasticsearch goes through a `double`; the two agree except where the
/// double rounds.)
fn fraction_bytes(fraction: &str, bits: u32) -> u64 {
    let mut digits: Vec<u8> = fraction.bytes().map(|b| b - b'0').collect();
    let mut result = 0u64;
    for _ in 0..bits {
        let mut carry = 0;
        for digit in digits.iter_mut().rev() {
            let doubled = *digit * 2 + carry;
            *digit = doubled % 10;
            carry = doubled / 10;
        }
        result = result * 2 + u64::from(carry);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB: u64 = 1024;
    const MB: u64 = 1024 * KB;
    const GB: u64 = 1024 * MB;
    const TB: u64 = 1024 * GB;
    const PB: u64 = 1024 * TB;

    fn err(input: &str) -> String {
        match parse_byte_size(input) {
            Ok(bytes) => panic!("{input:?} parsed as {bytes}"),
            Err(message) => message,
        }
    }

    #[test]
    fn parses_every_unit() {
        let cases = [
            ("150mb", 150 * MB),
            ("1gb", GB),
            ("1GB", GB),
            ("1Gb", GB),
            ("1g", GB),
            ("7b", 7),
            ("7B", 7),
            ("2kb", 2 * KB),
            ("2k", 2 * KB),
            ("40m", 40 * MB),
            ("3tb", 3 * TB),
            ("3t", 3 * TB),
            ("2pb", 2 * PB),
            ("2p", 2 * PB),
            ("0b", 0),
            ("0mb", 0),
            ("007mb", 7 * MB),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_byte_size(input), Ok(expected), "{input}");
        }
    }

    #[test]
    fn zero_and_minus_one_mean_unlimited() {
        assert_eq!(parse_byte_size("0"), Ok(0));
        assert_eq!(parse_byte_size("-1"), Ok(0));
        assert_eq!(parse_byte_size("-1b"), Ok(0));
    }

    #[test]
    fn fractions_are_truncated_to_whole_bytes() {
        assert_eq!(parse_byte_size("1.5gb"), Ok(1_610_612_736));
        assert_eq!(parse_byte_size("0.5kb"), Ok(512));
        assert_eq!(parse_byte_size("0.1gb"), Ok(107_374_182));
        assert_eq!(parse_byte_size("1.9b"), Ok(1));
        assert_eq!(parse_byte_size("0.001kb"), Ok(1));
        assert_eq!(parse_byte_size("0.0009kb"), Ok(0));
        assert_eq!(parse_byte_size("2.25mb"), Ok(2 * MB + MB / 4));
        assert_eq!(
            parse_byte_size("0.99999999999999999999999999pb"),
            Ok(PB - 1)
        );
    }

    #[test]
    fn refuses_malformed_values() {
        assert_eq!(err(""), SYNTAX);
        assert_eq!(err("abc"), SYNTAX);
        assert_eq!(err(&format!("1.{}gb", "5".repeat(62))), SYNTAX);
        assert_eq!(
            parse_byte_size(&format!("1.{}gb", "5".repeat(59))),
            Ok(1_610_612_736 + 59_652_323)
        );
        assert_eq!(err("gb"), SYNTAX);
        assert_eq!(err(".5gb"), SYNTAX);
        assert_eq!(err("1.gb"), SYNTAX);
        assert_eq!(err("1.2.3gb"), SYNTAX);
        assert_eq!(err("+1gb"), SYNTAX);
        assert_eq!(
            err("1e3mb"),
            "has an unknown unit \"e3mb\" (units: b, kb, mb, gb, tb, pb)"
        );
        assert_eq!(
            err("1xb"),
            "has an unknown unit \"xb\" (units: b, kb, mb, gb, tb, pb)"
        );
        assert_eq!(
            err("1gib"),
            "has an unknown unit \"gib\" (units: b, kb, mb, gb, tb, pb)"
        );
        assert_eq!(
            err("10"),
            "needs a unit, as in 10mb or 10gb (units: b, kb, mb, gb, tb, pb)"
        );
        assert!(err("00").starts_with("needs a unit"));
        assert!(err("1.5").starts_with("needs a unit"));
    }

    #[test]
    fn refuses_whitespace_anywhere() {
        for input in [" 1gb", "1gb ", "1 gb", "\t1gb", "1gb\n"] {
            assert_eq!(err(input), format!("{SYNTAX}, without spaces"), "{input:?}");
        }
    }

    #[test]
    fn refuses_negative_values_other_than_minus_one() {
        for input in ["-5mb", "-2", "-1mb", "-0", "-1.5gb"] {
            assert_eq!(
                err(input),
                "must not be negative (-1 alone means unlimited)"
            );
        }
    }

    #[test]
    fn refuses_values_elasticsearch_cannot_hold() {
        let too_large = "must be less than 8192pb";
        assert_eq!(err("99999999999pb"), too_large);
        assert_eq!(err("8192pb"), too_large);
        assert_eq!(err("99999999999999999999999b"), too_large);
        assert_eq!(err("9223372036854775808b"), too_large);
        assert_eq!(parse_byte_size("9223372036854775807b"), Ok(MAX_BYTES));
        assert_eq!(parse_byte_size("8191pb"), Ok(8191 * PB));
        assert_eq!(
            parse_byte_size("8191.99pb"),
            Ok(8191 * PB + 1_114_640_907_774_197)
        );
    }

    #[test]
    fn formats_in_the_largest_exact_unit() {
        assert_eq!(format_byte_size(0), "0b");
        assert_eq!(format_byte_size(1), "1b");
        assert_eq!(format_byte_size(1023), "1023b");
        assert_eq!(format_byte_size(1024), "1kb");
        assert_eq!(format_byte_size(1536), "1536b");
        assert_eq!(format_byte_size(157_286_400), "150mb");
        assert_eq!(format_byte_size(GB), "1gb");
        assert_eq!(format_byte_size(1536 * MB), "1536mb");
        assert_eq!(format_byte_size(5 * TB), "5tb");
        assert_eq!(format_byte_size(3 * PB), "3pb");
        assert_eq!(format_byte_size(2048 * PB), "2048pb");
        assert_eq!(format_byte_size(u64::MAX), "18446744073709551615b");
    }

    #[test]
    fn formatting_round_trips() {
        for bytes in [
            0,
            1,
            1000,
            1024,
            1536,
            150 * MB,
            GB + 1,
            7 * TB,
            9 * PB,
            MAX_BYTES,
        ] {
            assert_eq!(
                parse_byte_size(&format_byte_size(bytes)),
                Ok(bytes),
                "{bytes}"
            );
        }
    }
}
