//! Text layout shared by every command: column tables, `key = value` blocks,
//! short ids, times and byte sizes, laid out as Nomad's CLI prints them.

mod bytes;
pub mod output;
mod table;
mod time;

pub use bytes::{ibytes, mb};
pub use output::FormatArgs;
pub use table::{kv, table};
pub use time::{pretty_time_diff, rfc3339};

/// How many characters of an id the tables show.
pub const SHORT_ID: usize = 8;

/// The first [`SHORT_ID`] characters of `id` (all of it when shorter).
pub fn short_id(id: &str) -> &str {
    limit(id, SHORT_ID)
}

/// The first `n` characters of `s`.
pub fn limit(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// `s`, or `<none>` when it is empty.
#[cfg(test)]
pub fn or_none(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_keep_eight_characters() {
        assert_eq!(short_id("0af996ed-4a0c-1c9e-6a5f-8b0f3c3f1f2e"), "0af996ed");
        assert_eq!(short_id("abc"), "abc");
        assert_eq!(limit("héllo", 2), "hé");
        assert_eq!(or_none(""), "<none>");
        assert_eq!(or_none("x"), "x");
    }
}
