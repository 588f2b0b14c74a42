//! Times as the CLI shows them: RFC 3339 dates and relative differences such
//! as `5s ago` or `1m2s ago` (the two largest units, months of 30 days).

use std::time::{Duration, UNIX_EPOCH};

/// A Unix time in nanoseconds as an RFC 3339 date in UTC, to the second;
/// empty for 0.
pub fn rfc3339(unix_ns: i64) -> String {
    if unix_ns <= 0 {
        return String::new();
    }
    let t = UNIX_EPOCH + Duration::from_nanos(unix_ns.unsigned_abs());
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The difference between `first` and `second` (Unix nanoseconds), rounded
/// to the second, in its two largest units: `1m2s ago`, `3h ago`,
/// `10mo12d ago`, or `… from now` when `first` is later. Empty when `first`
/// is unset.
pub fn pretty_time_diff(first: i64, second: i64) -> String {
    if first <= 0 {
        return String::new();
    }
    let round = |ns: i64| (ns + 500_000_000).div_euclid(1_000_000_000);
    let (a, b) = (round(first), round(second));
    let (secs, suffix) = if b >= a {
        (b - a, " ago")
    } else {
        (a - b, " from now")
    };
    let mut u = secs.unsigned_abs();
    // Largest unit first once reversed.
    let mut parts: Vec<String> = Vec::new();
    let s = u % 60;
    if s > 0 {
        parts.push(format!("{s}s"));
    }
    u /= 60;
    for (modulus, unit) in [(60, "m"), (24, "h"), (30, "d"), (12, "mo")] {
        if u == 0 {
            break;
        }
        let v = u % modulus;
        if v > 0 {
            parts.push(format!("{v}{unit}"));
        }
        u /= modulus;
    }
    if u > 0 {
        parts.push(format!("{u}y"));
    }
    if parts.is_empty() {
        return format!("0s{suffix}");
    }
    let text: String = parts.iter().rev().take(2).map(String::as_str).collect();
    format!("{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    const T0: i64 = 1_700_000_000 * S;

    #[test]
    fn differences_show_the_two_largest_units() {
        assert_eq!(pretty_time_diff(T0, T0 + 5 * S), "5s ago");
        assert_eq!(pretty_time_diff(T0, T0 + 62 * S), "1m2s ago");
        assert_eq!(pretty_time_diff(T0, T0 + 3600 * S), "1h ago");
        assert_eq!(pretty_time_diff(T0, T0 + 3661 * S), "1h1m ago");
        assert_eq!(
            pretty_time_diff(T0, T0 + (2 * 86_400 + 7200) * S),
            "2d2h ago"
        );
        let ten_months_twelve_days = (10 * 30 + 12) * 86_400 + 3 * 3600 + 2;
        assert_eq!(
            pretty_time_diff(T0, T0 + ten_months_twelve_days * S),
            "10mo12d ago"
        );
        assert_eq!(pretty_time_diff(T0, T0 + (400 * 86_400) * S), "1y1mo ago");
    }

    #[test]
    fn sub_second_future_and_unset_times() {
        assert_eq!(pretty_time_diff(T0, T0 + 200_000_000), "0s ago");
        assert_eq!(pretty_time_diff(T0 + 90 * S, T0), "1m30s from now");
        assert_eq!(pretty_time_diff(0, T0), "");
    }

    #[test]
    fn dates_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(T0), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(0), "");
    }
}
