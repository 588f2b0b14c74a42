//! What the services warned of, in short, for a run whose checks failed:
//! each log's warnings and errors grouped by message (their fields left
//! out), the most frequent first, with when each was first and last seen.
//! A failed run then says why in the report's output (CI keeps nothing
//! else of it), e.g. registrations timing out or leaderships lost.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// Messages shown per log.
const SHOWN: usize = 8;

/// One message's count and the timestamps of its first and last lines.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    count: usize,
    first: String,
    last: String,
}

/// The digest of every `*.log` file in `dir`, by file name.
pub fn digest(dir: &Path) -> String {
    let mut names: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect(),
        Err(err) => return format!("cannot read the logs in {}: {err}\n", dir.display()),
    };
    names.sort();
    let mut out = String::new();
    for path in names {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let groups = group(&text);
        let total: usize = groups.iter().map(|(_, s)| s.count).sum();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let _ = writeln!(out, "----- {name}: {total} warnings and errors -----");
        for (message, seen) in groups.iter().take(SHOWN) {
            let _ = writeln!(
                out,
                "{:>7} × {message} (first {}, last {})",
                seen.count, seen.first, seen.last
            );
        }
    }
    out
}

/// The warnings and errors of `log`, grouped by level, target and
/// message, the most frequent first.
fn group(log: &str) -> Vec<(String, Seen)> {
    let mut groups: HashMap<String, Seen> = HashMap::new();
    for line in log.lines() {
        let Some((at, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if !(rest.starts_with("WARN ") || rest.starts_with("ERROR ")) {
            continue;
        }
        let seen = groups.entry(message_of(rest).to_string()).or_default();
        seen.count += 1;
        if seen.first.is_empty() {
            seen.first = at.to_string();
        }
        seen.last = at.to_string();
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
    groups
}

/// `LEVEL target: message`, without the fields that follow the message
/// (` key=value`), which make every line differ.
fn message_of(line: &str) -> &str {
    let mut end = line.len();
    let mut at = 0;
    while let Some(space) = line[at..].find(' ') {
        let word_start = at + space + 1;
        let word = &line[word_start..];
        let key_len = word
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(word.len());
        if key_len > 0 && word[key_len..].starts_with('=') && line[..word_start].contains(": ") {
            end = word_start - 1;
            break;
        }
        at = word_start;
    }
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_group_by_message_without_their_fields() {
        let log = "\
2026-11-29T04:58:13.9Z  WARN caravan_client_node::node_agent: registration failed; retrying node=a status=code: 'x'
2026-11-29T04:58:14.1Z  INFO caravan_client_node::node_agent: registered node=a
2026-11-29T04:58:24.9Z  WARN caravan_client_node::node_agent: registration failed; retrying node=b status=code: 'y'
2026-11-29T04:58:29.9Z ERROR caravan_eval_broker::follow: node marked down: heartbeat missed node_id=\"c\" evals=4
";
        let groups = group(log);
        assert_eq!(
            groups,
            vec![
                (
                    "WARN caravan_client_node::node_agent: registration failed; retrying"
                        .to_string(),
                    Seen {
                        count: 2,
                        first: "2026-11-29T04:58:13.9Z".into(),
                        last: "2026-11-29T04:58:24.9Z".into(),
                    }
                ),
                (
                    "ERROR caravan_eval_broker::follow: node marked down: heartbeat missed"
                        .to_string(),
                    Seen {
                        count: 1,
                        first: "2026-11-29T04:58:29.9Z".into(),
                        last: "2026-11-29T04:58:29.9Z".into(),
                    }
                ),
            ]
        );
    }
}
