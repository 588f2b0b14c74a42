//! Reading a Prometheus text exposition: the samples of each line, and a
//! label's value.

/// Each sample of `text` as (metric name, label text `k="v",…}`, value);
/// comments and lines that do not parse are skipped.
pub fn samples(text: &str) -> impl Iterator<Item = (&str, &str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let value = value.parse::<f64>().ok()?;
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            Some((name, labels, value))
        })
}

/// The value of label `key` in `k="v",…}`.
pub fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels
        .trim_end_matches('}')
        .split(',')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix("=\"")?.strip_suffix('"'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_labels() {
        let text = "# HELP a\nup 1\nx_total{kind=\"allocs\",prefix=\"/c\"} 12\nbroken\n";
        let all: Vec<_> = samples(text).collect();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], ("up", "", 1.0));
        assert_eq!(all[1].0, "x_total");
        assert_eq!(label(all[1].1, "kind"), Some("allocs"));
        assert_eq!(label(all[1].1, "prefix"), Some("/c"));
        assert_eq!(label(all[1].1, "none"), None);
    }
}
