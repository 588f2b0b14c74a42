//! The wall clock, as every stored time is kept: Unix nanoseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch, now: 0 if the clock reads before the
/// epoch, `i64::MAX` past the year 2262.
pub fn now_unix_ns() -> i64 {
    since_epoch(SystemTime::now())
}

fn since_epoch(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn nanoseconds_since_the_epoch() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        assert_eq!(since_epoch(t), 1_700_000_000_123_456_789);
        assert_eq!(since_epoch(UNIX_EPOCH), 0);
    }

    #[test]
    fn out_of_range_clocks_clamp() {
        assert_eq!(since_epoch(UNIX_EPOCH - Duration::from_secs(1)), 0);
        let far = UNIX_EPOCH + Duration::from_secs(300 * 365 * 24 * 3600);
        assert_eq!(since_epoch(far), i64::MAX);
    }

    #[test]
    fn now_is_after_2023() {
        assert!(now_unix_ns() > 1_700_000_000_000_000_000);
    }
}
