//! `timeadd` and `formatdate` over RFC 3339 timestamps.

use chrono::{DateTime, Datelike, FixedOffset, Timelike};

use super::{FResult, FuncError, arity, string};
use crate::hcl::eval::value::Value;

pub(super) fn call(name: &str, args: &[Value]) -> Option<FResult> {
    Some(match name {
        "timeadd" => (|| {
            arity(args, 2)?;
            let ts = parse(&string(args, 0)?, 0)?;
            let d = crate::duration::parse_duration(&string(args, 1)?)
                .map_err(|e| FuncError::Arg(1, e))?;
            let out = ts
                .checked_add_signed(chrono::Duration::nanoseconds(d))
                .ok_or_else(|| FuncError::Failed("the result is out of range".into()))?;
            Ok(Value::String(rfc3339(&out)))
        })(),
        "formatdate" => (|| {
            arity(args, 2)?;
            let spec = string(args, 0)?;
            let ts = parse(&string(args, 1)?, 1)?;
            format_date(&spec, &ts).map(Value::String)
        })(),
        _ => return None,
    })
}

fn parse(s: &str, i: usize) -> Result<DateTime<FixedOffset>, FuncError> {
    DateTime::parse_from_rfc3339(s).map_err(|_| {
        FuncError::Arg(
            i,
            format!("not a valid RFC3339 timestamp: cannot use {s:?} as year"),
        )
    })
}

/// Go's `time.RFC3339`: whole seconds, `Z` for UTC.
fn rfc3339(t: &DateTime<FixedOffset>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    if t.offset().local_minus_utc() == 0 {
        format!("{base}Z")
    } else {
        format!("{base}{}", t.format("%:z"))
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// cty's `formatdate` specification: `YYYY-MM-DD'T'hh:mm:ssZ` and friends, quoted literals.
fn format_date(spec: &str, t: &DateTime<FixedOffset>) -> Result<String, FuncError> {
    let chars: Vec<char> = spec.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            let mut j = i + 1;
            let mut lit = String::new();
            loop {
                match chars.get(j) {
                    None => {
                        return Err(FuncError::Failed("unterminated literal '".into()));
                    }
                    Some('\'') if chars.get(j + 1) == Some(&'\'') => {
                        lit.push('\'');
                        j += 2;
                    }
                    Some('\'') => break,
                    Some(ch) => {
                        lit.push(*ch);
                        j += 1;
                    }
                }
            }
            out.push_str(if j == i + 1 { "'" } else { &lit });
            i = j + 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            out.push(c);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        let token: String = std::iter::repeat_n(c, run).collect();
        let offset = t.offset().local_minus_utc();
        let part = match token.as_str() {
            "YYYY" => format!("{:04}", t.year()),
            "YY" => format!("{:02}", t.year() % 100),
            "MMMM" => MONTHS[t.month0() as usize].to_string(),
            "MMM" => MONTHS[t.month0() as usize][..3].to_string(),
            "MM" => format!("{:02}", t.month()),
            "M" => t.month().to_string(),
            "DD" => format!("{:02}", t.day()),
            "D" => t.day().to_string(),
            "EEEE" => DAYS[t.weekday().num_days_from_monday() as usize].to_string(),
            "EEE" => DAYS[t.weekday().num_days_from_monday() as usize][..3].to_string(),
            "hh" => format!("{:02}", t.hour()),
            "h" => t.hour().to_string(),
            "HH" => format!("{:02}", (t.hour() + 11) % 12 + 1),
            "H" => ((t.hour() + 11) % 12 + 1).to_string(),
            "AA" => if t.hour() < 12 { "AM" } else { "PM" }.to_string(),
            "aa" => if t.hour() < 12 { "am" } else { "pm" }.to_string(),
            "mm" => format!("{:02}", t.minute()),
            "m" => t.minute().to_string(),
            "ss" => format!("{:02}", t.second()),
            "s" => t.second().to_string(),
            "ZZZZZ" => t.format("%:z").to_string(),
            "ZZZZ" => t.format("%z").to_string(),
            "ZZZ" if offset == 0 => "UTC".to_string(),
            "ZZZ" => t.format("%z").to_string(),
            "Z" if offset == 0 => "Z".to_string(),
            "Z" => t.format("%:z").to_string(),
            other => {
                return Err(FuncError::Failed(format!(
                    "invalid date format verb {other:?}: unsupported"
                )));
            }
        };
        out.push_str(&part);
        i += run;
    }
    Ok(out)
}
