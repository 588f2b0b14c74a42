#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use super::*;

const DOCS: &str = include_str!("../../../docs/metrics.md");
const DASHBOARD: &str = include_str!("../../../docs/grafana/caravan.json");

#[test]
fn a_metric_shows_in_the_exposition_and_the_catalog() {
    let hits = counter_vec("caravan_test_hits_total", "Hits of a test.", &["path"]);
    hits.with_label_values(&["/a"]).inc_by(3);
    let text = exposition();
    assert!(
        text.contains("# TYPE caravan_test_hits_total counter"),
        "{text}"
    );
    assert!(
        text.contains("caravan_test_hits_total{path=\"/a\"} 3"),
        "{text}"
    );
    let entry = catalog()
        .into_iter()
        .find(|e| e.name == "caravan_test_hits_total")
        .unwrap();
    assert_eq!(entry.kind, Kind::Counter);
    assert_eq!(entry.labels, vec!["path"]);
}

#[test]
fn registering_a_name_twice_is_a_conflict_not_a_panic() {
    let first = gauge("caravan_test_twice", "Registered twice.");
    let second = gauge("caravan_test_twice", "Registered twice.");
    first.set(1);
    second.set(2);
    assert!(
        conflicts()
            .iter()
            .any(|c| c.starts_with("caravan_test_twice")),
        "{:?}",
        conflicts()
    );
    // The first registration stays the exported one.
    assert!(exposition().contains("caravan_test_twice 1"));
}

#[test]
fn a_scrape_registry_is_separate_from_the_process_one() {
    let scrape = Registry::new();
    let g = gauge_vec_in(&scrape, "caravan_test_scraped", "Per scrape.", &["status"]);
    g.with_label_values(&["ready"]).set(4);
    let text = encode_text(&scrape.gather());
    assert!(
        text.contains("caravan_test_scraped{status=\"ready\"} 4"),
        "{text}"
    );
    assert!(!exposition().contains("caravan_test_scraped"));
    // A second scrape registers the same name in a new registry: no conflict.
    let again = Registry::new();
    gauge_vec_in(&again, "caravan_test_scraped", "Per scrape.", &["status"]);
    assert!(
        !conflicts()
            .iter()
            .any(|c| c.contains("caravan_test_scraped"))
    );
}

#[test]
fn documented_rows_are_read_with_their_type_and_labels() {
    let docs = documented_names(
        "| name | type | labels | meaning |\n|---|---|---|---|\n\
         | `caravan_a_total` | counter | `op`, `kind` | A. |\n\
         | `caravan_b` | gauge | — | B. |\n| `other` | gauge | — | not ours |\n",
    );
    assert_eq!(docs.len(), 2);
    assert_eq!(
        docs["caravan_a_total"],
        ("counter".into(), vec!["op".into(), "kind".into()])
    );
    assert_eq!(docs["caravan_b"], ("gauge".into(), vec![]));
}

/// Every `caravan_…` name in `text`, with a histogram's series suffixes
/// taken off.
fn referenced(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("caravan_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        out.insert(base.to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn the_dashboard_shows_only_documented_metrics() {
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(!panels.is_empty());
    let documented = documented_names(DOCS);
    assert!(
        documented.len() > 20,
        "docs/metrics.md lists {}",
        documented.len()
    );
    let mut exprs = String::new();
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push_str(target["expr"].as_str().unwrap_or_default());
            exprs.push('\n');
        }
    }
    let shown = referenced(&exprs);
    assert!(shown.len() > 15, "the dashboard shows {shown:?}");
    let undocumented: Vec<_> = shown
        .iter()
        .filter(|n| !documented.contains_key(n.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/metrics.md: {undocumented:?}"
    );
}
