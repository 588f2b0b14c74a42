//! The query string of an HTTP request, read into typed values: blocking-query
//! options (`index`, `wait`, `namespace`, `prefix`), flags, integers and
//! enumerations. Every refusal names its parameter.
//!
//! Pure and free of the server's types (std, `caravan_jobspec` and
//! `caravan_proto` only), so the query-parameter fuzz target compiles this very
//! file without the rest of the gateway.

use std::collections::HashMap;

use caravan_proto::QueryOptions;

/// The query string as given: each parameter's last value.
pub type Params = HashMap<String, String>;

/// A parameter that does not read as its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// The parameter's name.
    pub field: String,
    /// What is wrong with its value.
    pub message: String,
}

impl ParamError {
    fn new(field: &str, message: String) -> Self {
        ParamError {
            field: field.to_string(),
            message,
        }
    }
}

/// Go's `strconv.ParseBool`, which Nomad reads every boolean parameter with:
/// these twelve spellings and nothing else.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A boolean parameter as Nomad's `parseBool` reads it: `None` when absent or
/// empty (`?purge=`), else one of Go's spellings.
pub fn boolean(params: &Params, name: &str) -> Result<Option<bool>, ParamError> {
    match params.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(text) => parse_bool(text).map(Some).ok_or_else(|| {
            ParamError::new(
                name,
                format!(
                    "invalid boolean {text:?} (expected 1, t, T, TRUE, true, True, \
                     0, f, F, FALSE, false or False)"
                ),
            )
        }),
    }
}

/// Whether a boolean parameter is set (`?purge=true`); absent or empty is
/// false, as in Nomad.
pub fn flag(params: &Params, name: &str) -> Result<bool, ParamError> {
    Ok(boolean(params, name)?.unwrap_or(false))
}

/// `?stale`: a bare `?stale` (no value) asks for a stale read, as in Nomad;
/// otherwise a boolean.
pub fn stale(params: &Params) -> Result<bool, ParamError> {
    match params.get("stale").map(String::as_str) {
        None => Ok(false),
        Some("") => Ok(true),
        Some(_) => flag(params, "stale"),
    }
}

/// A signed integer parameter (`?offset=`, `?cas=`), `None` when absent.
pub fn integer(params: &Params, name: &str, what: &str) -> Result<Option<i64>, ParamError> {
    params
        .get(name)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| ParamError::new(name, format!("invalid {what} {v:?}")))
        })
        .transpose()
}

/// The blocking-query options: `index` (a revision, capped at `i64::MAX`),
/// `wait` (a Go duration), `namespace` and `prefix`.
pub fn blocking(params: &Params) -> Result<QueryOptions, ParamError> {
    // Go's `query.Get` reads an empty value as absent.
    let given = |name: &str| params.get(name).filter(|v| !v.is_empty());
    let min_revision = match given("index") {
        None => 0,
        Some(v) => {
            unsigned(v).ok_or_else(|| ParamError::new("index", format!("invalid index {v:?}")))?
        }
    };
    let wait_ns = match given("wait") {
        None => 0,
        Some(v) => caravan_jobspec::parse_duration(v)
            .map_err(|e| ParamError::new("wait", format!("invalid wait {v:?}: {e}")))?,
    };
    Ok(QueryOptions {
        namespace: params.get("namespace").cloned().unwrap_or_default(),
        min_revision: i64::try_from(min_revision).unwrap_or(i64::MAX),
        wait_ns,
        prefix: params.get("prefix").cloned().unwrap_or_default(),
    })
}

/// Go's `strconv.ParseUint(v, 10, 64)`: decimal digits only (no sign).
pub fn unsigned(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// A raw query string's `key=value` pairs in order, percent-decoded (`+` is a
/// space); repeated keys stay repeated. A malformed escape is kept as written.
pub fn pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// Decodes `%XX` escapes and `+`; invalid UTF-8 becomes U+FFFD.
pub fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = match bytes[i] {
            b'%' if i + 2 < bytes.len() => hex(bytes[i + 1]).zip(hex(bytes[i + 2])),
            _ => None,
        };
        match (decoded, bytes[i]) {
            (Some((hi, lo)), _) => {
                out.push(hi * 16 + lo);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(raw: &str) -> Params {
        pairs(raw).into_iter().collect()
    }

    #[test]
    fn blocking_options_read_like_nomad() {
        let o = blocking(&params("index=12&wait=1m30s&namespace=*&prefix=ab%20c")).unwrap();
        assert_eq!(o.min_revision, 12);
        assert_eq!(o.wait_ns, 90_000_000_000);
        assert_eq!((o.namespace.as_str(), o.prefix.as_str()), ("*", "ab c"));
        // An index past i64 is capped rather than wrapped negative.
        let o = blocking(&params("index=18446744073709551615")).unwrap();
        assert_eq!(o.min_revision, i64::MAX);
        assert_eq!(blocking(&params("")).unwrap(), QueryOptions::default());
    }

    #[test]
    fn bad_values_name_their_parameter() {
        for (raw, field) in [
            ("index=-1", "index"),
            ("index=x", "index"),
            ("wait=5", "wait"),
            ("wait=9999999999h", "wait"),
        ] {
            assert_eq!(blocking(&params(raw)).unwrap_err().field, field, "{raw}");
        }
        let e = integer(&params("offset=1e3"), "offset", "offset").unwrap_err();
        assert_eq!(e.field, "offset");
        assert_eq!(integer(&params("cas=-4"), "cas", "index"), Ok(Some(-4)));
        assert_eq!(integer(&params(""), "cas", "index"), Ok(None));
        assert_eq!(flag(&params("purge"), "purge"), Ok(false));
        assert_eq!(flag(&params("purge=0"), "purge"), Ok(false));
        assert_eq!(
            flag(&params("purge=yes"), "purge").unwrap_err().field,
            "purge"
        );
    }

    #[test]
    fn booleans_read_as_gos_parse_bool() {
        for yes in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(
                flag(&params(&format!("purge={yes}")), "purge"),
                Ok(true),
                "{yes}"
            );
            assert_eq!(stale(&params(&format!("stale={yes}"))), Ok(true), "{yes}");
        }
        for no in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(flag(&params(&format!("os={no}")), "os"), Ok(false), "{no}");
            assert_eq!(boolean(&params(&format!("os={no}")), "os"), Ok(Some(false)));
        }
        for bad in ["yes", "tRUE", "2", "on", "true%20", "fAlse"] {
            let e = flag(&params(&format!("global={bad}")), "global").unwrap_err();
            assert_eq!(e.field, "global", "{bad}");
            assert!(e.message.contains("invalid boolean"), "{}", e.message);
            assert_eq!(
                stale(&params(&format!("stale={bad}"))).unwrap_err().field,
                "stale"
            );
        }
        // Absent or empty: the default (Nomad's parseBool), except that a bare
        // `?stale` asks for a stale read.
        assert_eq!(boolean(&params("resources="), "resources"), Ok(None));
        assert_eq!(boolean(&params(""), "resources"), Ok(None));
        assert_eq!(stale(&params("stale")), Ok(true));
        assert_eq!(stale(&params("")), Ok(false));
    }

    #[test]
    fn waits_read_as_gos_parse_duration() {
        for (raw, ns) in [
            ("wait=5s", 5_000_000_000),
            ("wait=1m30s", 90_000_000_000),
            ("wait=300ms", 300_000_000),
            ("wait=1.5h", 5_400_000_000_000),
            ("wait=0", 0),
            ("wait=2us", 2_000),
        ] {
            assert_eq!(blocking(&params(raw)).unwrap().wait_ns, ns, "{raw}");
        }
        for raw in [
            "wait=5",
            "wait=5 s",
            "wait=s",
            "wait=1d",
            "wait=",
            "index=1.5",
            "index=+1",
            "index=-0",
        ] {
            if raw == "wait=" {
                // Empty is absent, as Go's `query.Get` reads it.
                assert_eq!(blocking(&params(raw)).unwrap().wait_ns, 0);
                continue;
            }
            assert!(blocking(&params(raw)).is_err(), "{raw}");
        }
    }

    #[test]
    fn pairs_decode_escapes_and_keep_malformed_ones() {
        assert_eq!(
            pairs("topic=Job%3Aweb&&a+b=%zz%4&k&%FF=1"),
            vec![
                ("topic".to_string(), "Job:web".to_string()),
                ("a b".to_string(), "%zz%4".to_string()),
                ("k".to_string(), String::new()),
                ("\u{FFFD}".to_string(), "1".to_string()),
            ]
        );
    }
}
