//! When a periodic job launches next: its cron specs read as the job file
//! validator reads them, evaluated in the job's time zone (daylight saving
//! gaps and folds as croner resolves them).

use chrono::{DateTime, Local, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use caravan_proto::PeriodicConfig;

/// The zone a schedule's wall-clock times are read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zone {
    /// UTC (an empty `time_zone`, or `UTC`).
    Utc,
    /// The broker's own local zone (`Local`, as Nomad reads it).
    Local,
    /// An IANA zone such as `America/New_York`.
    Named(Tz),
}

impl Zone {
    /// Reads a `time_zone` value.
    pub fn parse(name: &str) -> Result<Zone, String> {
        match name {
            "" | "UTC" => Ok(Zone::Utc),
            "Local" => Ok(Zone::Local),
            other => other
                .parse::<Tz>()
                .map(Zone::Named)
                .map_err(|_| format!("unknown time zone {other:?}")),
        }
    }
}

/// A parsed periodic schedule: one or more cron specs in one zone.
#[derive(Clone, Debug)]
pub struct CronSchedule {
    specs: Vec<Cron>,
    zone: Zone,
}

/// Reads one cron spec the way Nomad does: 5 fields (minute … day of week),
/// 6 (with a trailing year), 7 (seconds first, year last) or a nickname
/// such as `@daily`.
pub fn parse_spec(spec: &str) -> Result<Cron, String> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let normalized = match fields.len() {
        // Nomad's sixth field is a year; the parser's is seconds.
        6 => format!("0 {}", fields.join(" ")),
        _ => fields.join(" "),
    };
    if normalized.is_empty() {
        return Err("empty cron spec".into());
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Optional)
        .build()
        .parse(&normalized)
        .map_err(|e| format!("invalid cron spec {spec:?}: {e}"))
}

impl CronSchedule {
    /// The schedule of a periodic block; an error names what is wrong.
    pub fn parse(periodic: &PeriodicConfig) -> Result<CronSchedule, String> {
        if periodic.specs.is_empty() {
            return Err("no cron spec".into());
        }
        let specs = periodic
            .specs
            .iter()
            .map(|s| parse_spec(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CronSchedule {
            specs,
            zone: Zone::parse(&periodic.time_zone)?,
        })
    }

    /// The first launch strictly after `after` (Unix seconds), the earliest
    /// over every spec; `None` when no spec matches again (a past year).
    pub fn next_after(&self, after: i64) -> Option<i64> {
        self.specs
            .iter()
            .filter_map(|cron| match self.zone {
                Zone::Utc => next_in(cron, Utc, after),
                Zone::Local => next_in(cron, Local, after),
                Zone::Named(tz) => next_in(cron, tz, after),
            })
            .min()
    }
}

fn next_in<Z: TimeZone>(cron: &Cron, zone: Z, after: i64) -> Option<i64> {
    let start: DateTime<Z> = zone.timestamp_opt(after, 0).single()?;
    cron.find_next_occurrence(&start, false)
        .ok()
        .map(|t| t.timestamp())
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    fn schedule(specs: &[&str], tz: &str) -> CronSchedule {
        CronSchedule::parse(&PeriodicConfig {
            enabled: true,
            specs: specs.iter().map(|s| s.to_string()).collect(),
            spec_type: "cron".into(),
            prohibit_overlap: false,
            time_zone: tz.into(),
        })
        .expect("a valid schedule")
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_opt(h, mi, s))
            .expect("a valid date")
            .and_utc()
            .timestamp()
    }

    #[test]
    fn next_launch_in_utc() {
        let every_15 = schedule(&["*/15 * * * *"], "");
        let t = utc(2024, 5, 1, 10, 7, 30);
        assert_eq!(every_15.next_after(t), Some(utc(2024, 5, 1, 10, 15, 0)));
        // Strictly after: a launch time is not its own successor.
        let at = utc(2024, 5, 1, 10, 15, 0);
        assert_eq!(every_15.next_after(at), Some(utc(2024, 5, 1, 10, 30, 0)));
        let daily = schedule(&["@daily"], "UTC");
        assert_eq!(daily.next_after(t), Some(utc(2024, 5, 2, 0, 0, 0)));
    }

    #[test]
    fn second_and_year_fields_read_as_nomad_reads_them() {
        let every_2s = schedule(&["*/2 * * * * * *"], "");
        let t = utc(2024, 5, 1, 10, 0, 1);
        assert_eq!(every_2s.next_after(t), Some(utc(2024, 5, 1, 10, 0, 2)));
        let only_2030 = schedule(&["0 0 1 1 * 2030"], "");
        assert_eq!(only_2030.next_after(t), Some(utc(2030, 1, 1, 0, 0, 0)));
        assert_eq!(only_2030.next_after(utc(2030, 1, 1, 0, 0, 0)), None);
    }

    #[test]
    fn the_earliest_spec_wins() {
        let s = schedule(&["0 12 * * *", "30 9 * * *"], "");
        let t = utc(2024, 5, 1, 8, 0, 0);
        assert_eq!(s.next_after(t), Some(utc(2024, 5, 1, 9, 30, 0)));
        assert_eq!(
            s.next_after(utc(2024, 5, 1, 9, 30, 0)),
            Some(utc(2024, 5, 1, 12, 0, 0))
        );
    }

    #[test]
    fn wall_clock_times_follow_the_time_zone() {
        // 09:00 in New York is 13:00 UTC in summer, 14:00 UTC in winter.
        let s = schedule(&["0 9 * * *"], "America/New_York");
        assert_eq!(
            s.next_after(utc(2024, 7, 1, 0, 0, 0)),
            Some(utc(2024, 7, 1, 13, 0, 0))
        );
        assert_eq!(
            s.next_after(utc(2024, 1, 15, 0, 0, 0)),
            Some(utc(2024, 1, 15, 14, 0, 0))
        );
        let tokyo = schedule(&["0 9 * * *"], "Asia/Tokyo");
        assert_eq!(
            tokyo.next_after(utc(2024, 7, 1, 0, 0, 0)),
            Some(utc(2024, 7, 2, 0, 0, 0)),
            "09:00 JST on July 1 was 00:00 UTC, which is not after itself"
        );
    }

    #[test]
    fn a_launch_in_the_spring_forward_gap_runs_right_after_it() {
        // 2024-03-10 in New York: 02:00 EST jumps to 03:00 EDT (07:00 UTC);
        // 02:30 does not exist that day.
        let s = schedule(&["30 2 * * *"], "America/New_York");
        let before = utc(2024, 3, 10, 5, 0, 0);
        assert_eq!(s.next_after(before), Some(utc(2024, 3, 10, 7, 0, 0)));
        // The day after, 02:30 EDT again.
        assert_eq!(
            s.next_after(utc(2024, 3, 10, 7, 0, 0)),
            Some(utc(2024, 3, 11, 6, 30, 0))
        );
    }

    #[test]
    fn a_fixed_time_in_the_fall_back_fold_runs_once() {
        // 2024-11-03 in New York: 01:30 happens at 05:30 UTC (EDT) and again
        // at 06:30 UTC (EST); a fixed-time job runs at the first only.
        let s = schedule(&["30 1 * * *"], "America/New_York");
        let first = s.next_after(utc(2024, 11, 3, 0, 0, 0));
        assert_eq!(first, Some(utc(2024, 11, 3, 5, 30, 0)));
        assert_eq!(
            s.next_after(utc(2024, 11, 3, 5, 30, 0)),
            Some(utc(2024, 11, 4, 6, 30, 0)),
            "the repeated 01:30 is skipped"
        );
        // An interval job runs through both passes of the repeated hour.
        let hourly = schedule(&["0 * * * *"], "America/New_York");
        assert_eq!(
            hourly.next_after(utc(2024, 11, 3, 5, 0, 0)),
            Some(utc(2024, 11, 3, 6, 0, 0))
        );
    }

    #[test]
    fn bad_schedules_say_why() {
        let bad = |specs: Vec<String>, tz: &str| {
            CronSchedule::parse(&PeriodicConfig {
                enabled: true,
                specs,
                time_zone: tz.into(),
                ..Default::default()
            })
            .expect_err("refused")
        };
        assert!(bad(vec![], "").contains("no cron spec"));
        assert!(bad(vec!["61 * * * *".into()], "").contains("61 * * * *"));
        assert!(bad(vec!["* * * * *".into()], "Mars/Base").contains("Mars/Base"));
        assert_eq!(Zone::parse("Local"), Ok(Zone::Local));
    }
}
