//! Durations as Nomad writes them: Go's `time.ParseDuration` syntax in, `Duration.String` out.

const NS: u128 = 1;
const US: u128 = 1_000;
const MS: u128 = 1_000_000;
const SEC: u128 = 1_000_000_000;
const MIN: u128 = 60 * SEC;
const HOUR: u128 = 60 * MIN;

/// Parses a Go duration such as `"30s"`, `"1h30m"`, `"1.5h"` or `"-250ms"` into nanoseconds.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let invalid = || format!("invalid duration {text:?}");
    let mut rest = text;
    let negative = match rest.as_bytes().first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    // Accumulate in u128 so that every unit multiplication is exact before the range check.
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after_int) = rest.split_at(int_len);
        let (frac_part, after_num) = match after_int.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
                after_dot.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = after_num
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after_num.len(), |(i, _)| i);
        let (unit, after_unit) = after_num.split_at(unit_len);
        let scale = match unit {
            "ns" => NS,
            "us" | "µs" | "μs" => US,
            "ms" => MS,
            "s" => SEC,
            "m" => MIN,
            "h" => HOUR,
            "" => return Err(format!("missing unit in duration {text:?}")),
            other => return Err(format!("unknown unit {other:?} in duration {text:?}")),
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid())?
        };
        let mut value = whole.checked_mul(scale).ok_or_else(invalid)?;
        // Fractions beyond nanosecond precision are dropped, as Go does.
        let mut place = scale;
        for digit in frac_part.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            value += u128::from(digit - b'0') * place;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > i64::MAX as u128 + 1 {
            return Err(invalid());
        }
        rest = after_unit;
    }
    if negative {
        if total == i64::MAX as u128 + 1 {
            return Ok(i64::MIN);
        }
        i64::try_from(total).map(|v| -v).map_err(|_| invalid())
    } else {
        i64::try_from(total).map_err(|_| invalid())
    }
}

/// Formats nanoseconds the way Go's `Duration.String` does: `"30s"`, `"5m0s"`, `"1h30m0s"`.
pub fn format_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = u128::from(ns.unsigned_abs());
    if u < SEC {
        let (digits, unit) = if u < US {
            (0, "ns")
        } else if u < MS {
            (3, "µs")
        } else {
            (6, "ms")
        };
        return format!("{sign}{}{unit}", fixed_point(u, digits));
    }
    let hours = u / HOUR;
    let minutes = (u % HOUR) / MIN;
    let seconds = fixed_point(u % MIN, 9);
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}s")
    } else {
        format!("{sign}{seconds}s")
    }
}

/// `value / 10^digits` with the fraction's trailing zeros trimmed.
fn fixed_point(value: u128, digits: u32) -> String {
    let scale = 10u128.pow(digits);
    let whole = value / scale;
    let frac = value % scale;
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nomad_style_durations() {
        assert_eq!(parse_duration("30s"), Ok(30_000_000_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("10m"), Ok(600_000_000_000));
        assert_eq!(parse_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration("3µs"), Ok(3_000));
        assert_eq!(parse_duration("3us"), Ok(3_000));
        assert_eq!(parse_duration("-5s"), Ok(-5_000_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration(".5s"), Ok(500_000_000));
        assert_eq!(parse_duration("1h0m0s"), Ok(3_600_000_000_000));
    }

    #[test]
    fn rejects_malformed_durations() {
        for bad in [
            "",
            "30",
            "s",
            "1x",
            "1.s5",
            "--1s",
            "1h 30m",
            ".s",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn rejects_overflow_instead_of_wrapping() {
        assert!(parse_duration("2562048h").is_err());
        assert!(parse_duration("2562047h").is_ok());
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_duration(0), "0s");
        assert_eq!(format_duration(30_000_000_000), "30s");
        assert_eq!(format_duration(300_000_000_000), "5m0s");
        assert_eq!(format_duration(5_400_000_000_000), "1h30m0s");
        assert_eq!(format_duration(1_500_000_000), "1.5s");
        assert_eq!(format_duration(250_000_000), "250ms");
        assert_eq!(format_duration(1_500), "1.5µs");
        assert_eq!(format_duration(42), "42ns");
        assert_eq!(format_duration(-5_000_000_000), "-5s");
        assert_eq!(format_duration(i64::MIN), "-2562047h47m16.854775808s");
    }

    #[test]
    fn format_then_parse_is_identity() {
        for ns in [
            1,
            999,
            1_000_001,
            59_999_999_999,
            86_400_000_000_000,
            i64::MAX,
            -7,
        ] {
            assert_eq!(parse_duration(&format_duration(ns)), Ok(ns));
        }
    }
}
