//! What this process has registered: every metric's name, type, labels and
//! help, whether or not it has a sample yet, for the docs check and for
//! rendering Nomad's JSON form.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use parking_lot::Mutex;
use prometheus::Registry;
use prometheus::core::Collector;

/// A metric's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations in buckets, with their count and sum.
    Histogram,
}

impl Kind {
    /// The type's name in the exposition format and in docs/metrics.md.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One registered metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name, e.g. `caravan_plan_commit_seconds`.
    pub name: String,
    /// Its type.
    pub kind: Kind,
    /// Its label names.
    pub labels: Vec<String>,
    /// What it measures.
    pub help: String,
}

#[derive(Default)]
struct Book {
    entries: BTreeMap<String, Entry>,
    conflicts: Vec<String>,
}

static BOOK: LazyLock<Mutex<Book>> = LazyLock::new(Mutex::default);

/// Registers `metric` in `registry` and notes it in the catalog; a
/// registration the registry refuses (the name is taken) is noted as a
/// conflict and the metric still counts, unexported.
pub(crate) fn register<M: Collector + Clone + 'static>(
    registry: &Registry,
    kind: Kind,
    name: &str,
    help: &str,
    labels: &[&str],
    metric: M,
) -> M {
    let mut book = BOOK.lock();
    if let Err(err) = registry.register(Box::new(metric.clone())) {
        book.conflicts.push(format!("{name}: {err}"));
    }
    let entry = Entry {
        name: name.to_string(),
        kind,
        labels: labels.iter().map(|l| l.to_string()).collect(),
        help: help.to_string(),
    };
    match book.entries.get(name) {
        Some(known) if *known != entry => book
            .conflicts
            .push(format!("{name}: defined twice, differently")),
        _ => {
            book.entries.insert(name.to_string(), entry);
        }
    }
    metric
}

/// Every metric registered so far in this process, by name.
pub fn catalog() -> Vec<Entry> {
    BOOK.lock().entries.values().cloned().collect()
}

/// Registrations refused so far: a name registered twice in the process
/// registry, or one name defined with two shapes. Empty unless a bug.
pub fn conflicts() -> Vec<String> {
    BOOK.lock().conflicts.clone()
}

/// The metrics a `docs/metrics.md` table lists: name → (type, labels), from
/// rows of the form `` | `name` | type | `label`, `label` | meaning | ``.
pub fn documented_names(markdown: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for line in markdown.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let [name, kind, labels, ..] = cells.as_slice() else {
            continue;
        };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else {
            continue;
        };
        if !name.starts_with("caravan_") {
            continue;
        }
        let labels = labels
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_string())
            .filter(|l| !l.is_empty() && l != "—")
            .collect();
        out.insert(name.to_string(), (kind.to_string(), labels));
    }
    out
}

/// What `docs/metrics.md` (given as `markdown`) gets wrong about the metrics
/// registered so far: each one it leaves out or lists with another type or
/// other labels, and each registration conflict. Empty when it is right.
pub fn undocumented(markdown: &str) -> Vec<String> {
    let documented = documented_names(markdown);
    let mut wrong = conflicts();
    for entry in catalog() {
        match documented.get(&entry.name) {
            None => wrong.push(format!("{} is not listed", entry.name)),
            Some((kind, labels)) if kind != entry.kind.as_str() || *labels != entry.labels => wrong
                .push(format!(
                    "{} is a {} with labels {:?}, listed as a {kind} with {labels:?}",
                    entry.name,
                    entry.kind.as_str(),
                    entry.labels
                )),
            Some(_) => {}
        }
    }
    wrong
}
