//! Periodic jobs: cron specs as Nomad's cron library reads them, and IANA time zones.

use super::Errors;
use croner::parser::{CronParser, Seconds, Year};

/// Checks one cron spec. Nomad accepts 5 fields (minute … day of week), 6 (plus a trailing
/// year), 7 (seconds first, year last) and the `@daily`-style nicknames.
pub(super) fn cron_spec(spec: &str) -> Result<(), String> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let normalized = match fields.len() {
        // Nomad's sixth field is a year; the parser's is seconds, so put seconds in front.
        6 => format!("0 {}", fields.join(" ")),
        _ => fields.join(" "),
    };
    if normalized.is_empty() {
        return Err("empty cron spec".to_string());
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Optional)
        .build();
    parser
        .parse(&normalized)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Checks a time zone name: `UTC`, `Local`, or an IANA name such as `America/New_York`.
pub(super) fn time_zone(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "Local" || name.parse::<chrono_tz::Tz>().is_ok() {
        Ok(())
    } else {
        Err(format!("unknown time zone {name:?}"))
    }
}

/// Validates a periodic block at `path`.
pub(super) fn periodic(p: &caravan_proto::PeriodicConfig, path: &str, e: &mut Errors) {
    if !p.enabled {
        return;
    }
    if p.spec_type != "cron" {
        e.at(
            path,
            "spec_type",
            format!("unknown periodic spec type {:?}", p.spec_type),
        );
    }
    if p.specs.is_empty() {
        e.at(path, "cron", "must specify a cron spec");
    }
    for (i, spec) in p.specs.iter().enumerate() {
        if let Err(err) = cron_spec(spec) {
            let field = if p.specs.len() == 1 {
                "cron".to_string()
            } else {
                format!("crons[{i}]")
            };
            e.at(path, &field, format!("invalid cron spec {spec:?}: {err}"));
        }
    }
    if let Err(err) = time_zone(&p.time_zone) {
        e.at(path, "time_zone", err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_nomad_cron_forms() {
        for spec in [
            "*/15 * * * *",
            "0 9 * * MON-FRI",
            "@daily",
            "@hourly",
            "0 0 1 1 * 2030",
            "30 0 0 1 1 * 2030",
            "0 0 L * *",
            "0 0 ? * 1#2",
        ] {
            assert_eq!(cron_spec(spec), Ok(()), "{spec}");
        }
    }

    #[test]
    fn rejects_bad_cron_specs() {
        for spec in [
            "",
            "* * *",
            "61 * * * *",
            "* 25 * * *",
            "every day",
            "* * * * * * * *",
        ] {
            assert!(cron_spec(spec).is_err(), "{spec:?} should be rejected");
        }
    }

    #[test]
    fn time_zones() {
        assert!(time_zone("UTC").is_ok());
        assert!(time_zone("America/New_York").is_ok());
        assert!(time_zone("Europe/Paris").is_ok());
        assert!(time_zone("Mars/Olympus_Mons").is_err());
    }
}
