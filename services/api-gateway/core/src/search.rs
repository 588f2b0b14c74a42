//! Nomad's search over one snapshot of the cache: prefix search of ids
//! (`/v1/search`) and fuzzy search of names (`/v1/search/fuzzy`), with
//! Nomad's contexts, ordering and limits.
//!
//! Scaling policies are the jobs' groups' `scaling` blocks (see
//! [`crate::scaling`]). Namespaces are stored outside the cache (see
//! [`crate::namespaces`]): the caller reads their names and passes them in,
//! so the `namespaces` context finds every namespace that exists, with jobs
//! or without, and this module stays free of I/O.
//!
//! With ACLs on a search shows only what the token may read, as Nomad's
//! does: it looks through the contexts the token may read somewhere in the
//! request's namespace ([`permitted`]; none is a refusal), and in each only
//! at objects of namespaces where the token reads that context, before any
//! limit is applied, so `truncations` speak of what the token sees. With
//! `namespace=*` that is every namespace the token reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use caravan_proto::Job;
use caravan_state::Snapshot;

use crate::acl::Acl;
use crate::error::GatewayError;
use crate::query::{DEFAULT_NAMESPACE, Query};

/// Most prefix matches per context (Nomad's `truncateLimit`).
pub const PREFIX_LIMIT: usize = 20;
/// Objects a fuzzy search looks at per context (Nomad's default
/// `search.limit_query`).
pub const FUZZY_QUERY_LIMIT: usize = 20;
/// Most fuzzy matches per context (Nomad's default `search.limit_results`).
pub const FUZZY_RESULT_LIMIT: usize = 100;
/// Shortest fuzzy search text (Nomad's default `search.min_term_length`).
pub const FUZZY_MIN_TERM: usize = 2;

/// A kind of object a search looks through (Nomad's `structs.Context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Context {
    /// Allocations, by id (prefix) or name (fuzzy).
    Allocs,
    /// Deployments, by id.
    Deployment,
    /// Evaluations, by id.
    Evals,
    /// Jobs, by id (prefix) or by the names in them (fuzzy).
    Jobs,
    /// Namespaces in use, by name.
    Namespaces,
    /// Client nodes, by id (prefix) or name (fuzzy).
    Nodes,
    /// Task groups' scaling policies, by id.
    ScalingPolicy,
}

impl Context {
    /// Every context, which `all` stands for.
    pub const ALL: [Context; 7] = [
        Context::Allocs,
        Context::Deployment,
        Context::Evals,
        Context::Jobs,
        Context::Namespaces,
        Context::Nodes,
        Context::ScalingPolicy,
    ];

    /// Nomad's name of the context.
    pub fn name(self) -> &'static str {
        match self {
            Context::Allocs => "allocs",
            Context::Deployment => "deployment",
            Context::Evals => "evals",
            Context::Jobs => "jobs",
            Context::Namespaces => "namespaces",
            Context::Nodes => "nodes",
            Context::ScalingPolicy => "scaling_policy",
        }
    }

    /// The contexts `name` asks for (`all` is every one); `None` when it
    /// names none Caravan has.
    pub fn expand(name: &str) -> Option<Vec<Context>> {
        if name == "all" {
            return Some(Context::ALL.to_vec());
        }
        Context::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .map(|c| vec![c])
    }

    /// The names `Context` may take, for messages.
    pub fn names() -> String {
        let mut names: Vec<&str> = Context::ALL.iter().map(|c| c.name()).collect();
        names.push("all");
        names.join(", ")
    }

    /// Whether `acl` may read this context's objects in `namespace` (in
    /// some namespace for `*`): Nomad's `filteredSearchContexts`.
    fn readable(self, acl: &Acl, namespace: &str) -> bool {
        match self {
            Context::Allocs | Context::Deployment | Context::Evals | Context::Jobs => {
                acl.allow_ns_op(namespace, "read-job")
            }
            Context::ScalingPolicy => {
                acl.allow_ns_op(namespace, "read-job")
                    || acl.allow_ns_op(namespace, "list-scaling-policies")
            }
            Context::Namespaces => acl.allow_namespace(namespace),
            Context::Nodes => acl.allow_node_read(),
        }
    }

    /// Whether a fuzzy search matches ids by prefix here (objects whose id
    /// is a UUID and that have no name), as Nomad does.
    fn prefix_only(self) -> bool {
        matches!(
            self,
            Context::Evals | Context::Deployment | Context::ScalingPolicy
        )
    }
}

/// The contexts of `requested` a search in `namespace` looks through:
/// with ACLs on (`acl`), those the token may read there. None left is
/// Nomad's refusal: a context named alone that the token may not read, or
/// a token with no read the search could use.
pub fn permitted(
    acl: Option<&Acl>,
    namespace: &str,
    requested: Vec<Context>,
) -> Result<Vec<Context>, GatewayError> {
    let Some(acl) = acl else {
        return Ok(requested);
    };
    let contexts: Vec<Context> = requested
        .into_iter()
        .filter(|c| c.readable(acl, namespace))
        .collect();
    if contexts.is_empty() {
        return Err(GatewayError::PermissionDenied("Permission denied".into()));
    }
    Ok(contexts)
}

/// Whether a search shows an object of `context` in namespace `ns`: one of
/// the query's namespaces and, with ACLs on, one where the token reads the
/// context.
fn shown(query: &Query, acl: Option<&Acl>, context: Context, ns: &str) -> bool {
    query.matches_namespace(ns) && acl.is_none_or(|acl| context.readable(acl, ns))
}

/// The result of a prefix search: ids per context (`None` where nothing
/// matched, as Nomad answers `null`) and whether each was cut at the limit.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PrefixMatches {
    /// Matching ids per context name, in id order.
    pub matches: BTreeMap<&'static str, Option<Vec<String>>>,
    /// Whether more than [`PREFIX_LIMIT`] matched, per context name.
    pub truncations: BTreeMap<&'static str, bool>,
}

/// One fuzzy match: the matched name or id, and the ids of what holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzyMatch {
    /// The name (or id) that matched.
    pub id: String,
    /// The ids of its parents, outermost first (namespace, job, group, …).
    pub scope: Vec<String>,
    /// Where in the name the text was found: lower is better.
    score: usize,
}

/// The result of a fuzzy search, keyed by Nomad's context names (a job's
/// groups, tasks, images, commands and classes have contexts of their own).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FuzzyMatches {
    /// Matches per context name, best first.
    pub matches: BTreeMap<&'static str, Vec<FuzzyMatch>>,
    /// Whether a context's matches were cut by a limit.
    pub truncations: BTreeMap<&'static str, bool>,
}

/// What a search looks through: one snapshot of the cache and the names
/// of the namespaces that exist (stored beside it).
#[derive(Debug, Clone, Copy)]
pub struct Searched<'a> {
    /// The cache's objects.
    pub snap: &'a Snapshot,
    /// Every namespace that exists, by name (`default` is added if absent).
    pub namespaces: &'a [String],
}

/// The namespaces that exist (`default` always) that `acl` may see.
fn namespaces(stored: &[String], acl: Option<&Acl>) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = stored.iter().cloned().collect();
    names.insert(DEFAULT_NAMESPACE.to_string());
    names.retain(|n| acl.is_none_or(|acl| acl.allow_namespace(n)));
    names
}

/// Every id of `context` the search shows (see [`shown`]), in Nomad's
/// iteration order (by namespace then id for jobs, by id otherwise).
fn ids(searched: Searched<'_>, query: &Query, acl: Option<&Acl>, context: Context) -> Vec<String> {
    let snap = searched.snap;
    let shows = |ns: &str| shown(query, acl, context, ns);
    let mut ids: Vec<String> = match context {
        Context::Jobs => {
            let mut jobs: Vec<&Arc<Job>> = snap.jobs().filter(|j| shows(&j.namespace)).collect();
            jobs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
            return jobs.into_iter().map(|j| j.id.clone()).collect();
        }
        Context::Evals => snap
            .evals()
            .filter(|e| shows(&e.namespace))
            .map(|e| e.id.clone())
            .collect(),
        Context::Allocs => snap
            .allocs()
            .filter(|a| shows(&a.namespace))
            .map(|a| a.id.clone())
            .collect(),
        Context::Deployment => snap
            .deployments()
            .filter(|d| shows(&d.namespace))
            .map(|d| d.id.clone())
            .collect(),
        Context::Nodes if acl.is_none_or(Acl::allow_node_read) => {
            snap.nodes().map(|n| n.id.clone()).collect()
        }
        Context::Nodes => Vec::new(),
        Context::Namespaces => return namespaces(searched.namespaces, acl).into_iter().collect(),
        Context::ScalingPolicy => crate::scaling::list(snap, query, None, None)
            .into_iter()
            .filter(|found| shows(&found.job.namespace))
            .map(|found| found.id)
            .collect(),
    };
    ids.sort();
    ids
}

/// The first [`PREFIX_LIMIT`] ids starting with `prefix`, and whether more
/// matched.
fn first_with_prefix(ids: Vec<String>, prefix: &str) -> (Vec<String>, bool) {
    let mut matching = ids.into_iter().filter(|id| id.starts_with(prefix));
    let first: Vec<String> = matching.by_ref().take(PREFIX_LIMIT).collect();
    (first, matching.next().is_some())
}

/// Nomad's prefix search: the ids of each context that start with
/// `prefix`, of what `acl` may read (everything without ACLs).
pub fn prefix(
    searched: Searched<'_>,
    query: &Query,
    acl: Option<&Acl>,
    prefix: &str,
    contexts: &[Context],
) -> PrefixMatches {
    let mut out = PrefixMatches::default();
    for &context in contexts {
        let (found, truncated) = first_with_prefix(ids(searched, query, acl, context), prefix);
        out.matches
            .insert(context.name(), (!found.is_empty()).then_some(found));
        out.truncations.insert(context.name(), truncated);
    }
    out
}

/// Where `text` (lower case) is in `name`, ignoring case.
fn fuzzy_index(name: &str, text: &str) -> Option<usize> {
    name.to_lowercase().find(text)
}

fn scored(id: &str, score: usize, scope: Vec<String>) -> FuzzyMatch {
    FuzzyMatch {
        id: id.to_string(),
        scope,
        score,
    }
}

/// A string setting of a task's driver config.
fn config_string(task: &caravan_proto::Task, key: &str) -> String {
    use prost_types::value::Kind;
    task.config
        .as_ref()
        .and_then(|c| c.fields.get(key))
        .and_then(|v| match &v.kind {
            Some(Kind::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The names in a job that match `text`, by context: the job's name, its
/// groups, tasks, and the image, command or class its tasks run.
fn job_matches(job: &Job, text: &str) -> Vec<(&'static str, FuzzyMatch)> {
    let ns = job.namespace.clone();
    let mut out = Vec::new();
    if let Some(i) = fuzzy_index(&job.name, text) {
        out.push((
            "jobs",
            scored(&job.name, i, vec![ns.clone(), job.id.clone()]),
        ));
    }
    for group in &job.task_groups {
        let in_job = vec![ns.clone(), job.id.clone()];
        if let Some(i) = fuzzy_index(&group.name, text) {
            out.push(("groups", scored(&group.name, i, in_job.clone())));
        }
        let mut in_group = in_job;
        in_group.push(group.name.clone());
        for task in &group.tasks {
            if let Some(i) = fuzzy_index(&task.name, text) {
                out.push(("tasks", scored(&task.name, i, in_group.clone())));
            }
            let (context, key) = match task.driver.as_str() {
                "docker" => ("images", "image"),
                "exec" | "raw_exec" => ("commands", "command"),
                "java" => ("classes", "class"),
                _ => continue,
            };
            let value = config_string(task, key);
            if let Some(i) = fuzzy_index(&value, text) {
                let mut in_task = in_group.clone();
                in_task.push(task.name.clone());
                out.push((context, scored(&value, i, in_task)));
            }
        }
    }
    out
}

/// The objects of a fuzzy-searched context in Nomad's order, as the number
/// of them and the matches of each of the first `limit`.
fn fuzzy_objects(
    searched: Searched<'_>,
    query: &Query,
    acl: Option<&Acl>,
    context: Context,
    text: &str,
    limit: usize,
) -> (usize, Vec<Vec<(&'static str, FuzzyMatch)>>) {
    let snap = searched.snap;
    let shows = |ns: &str| shown(query, acl, context, ns);
    let single = |name: &str, scope: Vec<String>| {
        fuzzy_index(name, text)
            .map(|i| vec![(context.name(), scored(name, i, scope))])
            .unwrap_or_default()
    };
    match context {
        Context::Jobs => {
            let mut jobs: Vec<&Arc<Job>> = snap.jobs().filter(|j| shows(&j.namespace)).collect();
            jobs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
            let found = jobs.iter().take(limit).map(|j| job_matches(j, text));
            (jobs.len(), found.collect())
        }
        Context::Allocs => {
            let mut allocs: Vec<_> = snap.allocs().filter(|a| shows(&a.namespace)).collect();
            allocs.sort_by(|a, b| a.id.cmp(&b.id));
            let found = allocs
                .iter()
                .take(limit)
                .map(|a| single(&a.name, vec![a.namespace.clone(), a.id.clone()]));
            (allocs.len(), found.collect())
        }
        Context::Nodes if acl.is_none_or(Acl::allow_node_read) => {
            let mut nodes: Vec<_> = snap.nodes().collect();
            nodes.sort_by(|a, b| a.id.cmp(&b.id));
            let found = nodes
                .iter()
                .take(limit)
                .map(|n| single(&n.name, vec![n.id.clone()]));
            (nodes.len(), found.collect())
        }
        Context::Namespaces => {
            let names = namespaces(searched.namespaces, acl);
            let found = names.iter().take(limit).map(|n| single(n, Vec::new()));
            (names.len(), found.collect())
        }
        Context::Nodes | Context::Evals | Context::Deployment | Context::ScalingPolicy => {
            (0, Vec::new())
        }
    }
}

/// Nomad's fuzzy search: names containing `text` (any case) in the
/// fuzzy contexts, ids starting with it where objects have no name. Like
/// Nomad it looks at the first [`FUZZY_QUERY_LIMIT`] objects of each
/// context and keeps at most [`FUZZY_RESULT_LIMIT`] matches; either cut
/// is reported in `truncations`. Best matches come first: found earlier in
/// the name, then shorter, then alphabetical. Only what `acl` may read is
/// looked at (everything without ACLs).
pub fn fuzzy(
    searched: Searched<'_>,
    query: &Query,
    acl: Option<&Acl>,
    text: &str,
    contexts: &[Context],
) -> FuzzyMatches {
    let text = text.to_lowercase();
    let mut out = FuzzyMatches::default();
    for &context in contexts {
        if context.prefix_only() {
            let (found, truncated) = first_with_prefix(ids(searched, query, acl, context), &text);
            let found = found.iter().map(|id| scored(id, 0, Vec::new())).collect();
            out.matches.insert(context.name(), found);
            out.truncations.insert(context.name(), truncated);
            continue;
        }
        out.truncations.insert(context.name(), false);
        let (total, objects) =
            fuzzy_objects(searched, query, acl, context, &text, FUZZY_QUERY_LIMIT);
        let more_than_looked_at = total > FUZZY_QUERY_LIMIT;
        for (i, found) in objects.into_iter().enumerate() {
            let limited = more_than_looked_at && i == FUZZY_QUERY_LIMIT - 1;
            for (name, m) in found {
                let list = out.matches.entry(name).or_default();
                if list.len() >= FUZZY_RESULT_LIMIT {
                    out.truncations.insert(name, true);
                    break;
                }
                list.push(m);
                if limited {
                    out.truncations.insert(name, true);
                    break;
                }
            }
        }
    }
    for list in out.matches.values_mut() {
        list.sort_by(|a, b| (a.score, a.id.len(), &a.id).cmp(&(b.score, b.id.len(), &b.id)));
    }
    out
}

#[cfg(test)]
mod tests {
    use caravan_proto::{Evaluation, Node, Task, TaskGroup};
    use caravan_state::{Change, Id, Tables};

    use super::*;

    fn job(ns: &str, id: &str) -> Job {
        Job {
            id: id.into(),
            name: id.into(),
            namespace: ns.into(),
            task_groups: vec![TaskGroup {
                name: "cache".into(),
                tasks: vec![Task {
                    name: "redis".into(),
                    driver: "docker".into(),
                    config: Some(prost_types::Struct {
                        fields: [(
                            "image".to_string(),
                            prost_types::Value {
                                kind: Some(prost_types::value::Kind::StringValue("redis:7".into())),
                            },
                        )]
                        .into_iter()
                        .collect(),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The namespaces `snap`'s jobs are in.
    fn names_of(snap: &Snapshot) -> Vec<String> {
        let names: BTreeSet<String> = snap.jobs().map(|j| j.namespace.clone()).collect();
        names.into_iter().collect()
    }

    fn on<'a>(snap: &'a Snapshot, namespaces: &'a [String]) -> Searched<'a> {
        Searched { snap, namespaces }
    }

    fn snapshot(jobs: Vec<Job>, evals: Vec<Evaluation>) -> Snapshot {
        let mut tables = Tables::new();
        for j in jobs {
            tables.apply(Change::Job {
                namespace: Id::from(j.namespace.as_str()),
                id: Id::from(j.id.as_str()),
                job: Some(Arc::new(j)),
            });
        }
        for e in evals {
            tables.apply(Change::Eval {
                id: Id::from(e.id.as_str()),
                eval: Some(Arc::new(e)),
            });
        }
        let node = Node {
            id: "f00d0000-0000-0000-0000-000000000000".into(),
            name: "worker-redis-1".into(),
            ..Default::default()
        };
        tables.apply(Change::Node {
            id: Id::from(node.id.as_str()),
            node: Some(Arc::new(node)),
        });
        Snapshot::new(tables)
    }

    fn query(ns: &str) -> Query {
        Query::new(
            Some(&caravan_proto::QueryOptions {
                namespace: ns.into(),
                ..Default::default()
            }),
            std::time::Duration::from_secs(1),
        )
    }

    #[test]
    fn prefix_search_keeps_to_the_namespace_and_cuts_at_twenty() {
        let jobs = (0..25)
            .map(|i| job("default", &format!("web-{i:02}")))
            .chain([job("prod", "web-prod"), job("default", "api")])
            .collect();
        let snap = snapshot(jobs, Vec::new());
        let names = names_of(&snap);
        let found = prefix(
            on(&snap, &names),
            &query("default"),
            None,
            "web",
            &[Context::Jobs],
        );
        let ids = found.matches["jobs"].as_ref().unwrap();
        assert_eq!(ids.len(), PREFIX_LIMIT);
        assert_eq!(ids[0], "web-00");
        assert!(found.truncations["jobs"]);
        let found = prefix(
            on(&snap, &names),
            &query("*"),
            None,
            "web-p",
            &[Context::Jobs],
        );
        assert_eq!(found.matches["jobs"], Some(vec!["web-prod".to_string()]));
        assert!(!found.truncations["jobs"]);
        let found = prefix(
            on(&snap, &names),
            &query("default"),
            None,
            "zzz",
            &Context::ALL,
        );
        assert_eq!(found.matches.len(), Context::ALL.len());
        assert!(found.matches.values().all(Option::is_none));
        let found = prefix(
            on(&snap, &names),
            &query("default"),
            None,
            "pro",
            &[Context::Namespaces],
        );
        assert_eq!(found.matches["namespaces"], Some(vec!["prod".to_string()]));
    }

    #[test]
    fn namespaces_are_found_with_jobs_or_without() {
        let snap = snapshot(vec![job("prod", "web")], Vec::new());
        let names = ["prod".to_string(), "staging".to_string()];
        let everything = [Context::Namespaces];
        let found = prefix(on(&snap, &names), &query("*"), None, "", &everything);
        let all = ["default", "prod", "staging"].map(String::from).to_vec();
        assert_eq!(found.matches["namespaces"], Some(all));
        let found = prefix(on(&snap, &names), &query("*"), None, "st", &everything);
        assert_eq!(found.matches["namespaces"], Some(vec!["staging".into()]));
        let found = fuzzy(on(&snap, &names), &query("*"), None, "AGI", &everything);
        let ids: Vec<&str> = found.matches["namespaces"]
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(ids, ["staging"]);
        let reader = acl(r#"namespace "staging" { policy = "read" }"#);
        let found = prefix(
            on(&snap, &names),
            &query("*"),
            Some(&reader),
            "",
            &everything,
        );
        assert_eq!(found.matches["namespaces"], Some(vec!["staging".into()]));
    }

    #[test]
    fn fuzzy_search_finds_names_inside_jobs_best_first() {
        let snap = snapshot(
            vec![job("default", "my-redis"), job("default", "redis")],
            vec![Evaluation {
                id: "abcd0000-0000-0000-0000-000000000000".into(),
                namespace: "default".into(),
                ..Default::default()
            }],
        );
        let names = names_of(&snap);
        let found = fuzzy(
            on(&snap, &names),
            &query("default"),
            None,
            "REDIS",
            &Context::ALL,
        );
        let jobs: Vec<&str> = found.matches["jobs"]
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(jobs, ["redis", "my-redis"]);
        assert_eq!(found.matches["jobs"][0].scope, ["default", "redis"]);
        assert_eq!(found.matches["tasks"].len(), 2);
        assert_eq!(
            found.matches["tasks"][0].scope,
            ["default", "my-redis", "cache"]
        );
        assert_eq!(found.matches["images"][0].id, "redis:7");
        assert_eq!(found.matches["nodes"][0].scope.len(), 1);
        assert!(!found.matches.contains_key("groups"));
        assert!(found.matches["evals"].is_empty());
        assert!(!found.truncations["jobs"]);
        let found = fuzzy(
            on(&snap, &names),
            &query("default"),
            None,
            "abcd",
            &[Context::Evals],
        );
        assert_eq!(found.matches["evals"].len(), 1);
    }

    #[test]
    fn fuzzy_search_looks_at_twenty_objects_and_says_so() {
        let jobs = (0..30)
            .map(|i| job("default", &format!("app-{i:02}")))
            .collect();
        let snap = snapshot(jobs, Vec::new());
        let names = names_of(&snap);
        let found = fuzzy(
            on(&snap, &names),
            &query("default"),
            None,
            "app",
            &[Context::Jobs],
        );
        assert_eq!(found.matches["jobs"].len(), FUZZY_QUERY_LIMIT);
        assert!(found.truncations["jobs"]);
        let found = fuzzy(
            on(&snap, &names),
            &query("default"),
            None,
            "nothing",
            &[Context::Jobs],
        );
        assert!(found.matches.is_empty());
        assert!(!found.truncations["jobs"]);
    }

    fn acl(rules: &str) -> Acl {
        Acl::compile([&crate::acl::policy::parse(rules).unwrap()])
    }

    #[test]
    fn a_search_shows_only_what_the_token_reads() {
        let jobs = (0..25)
            .map(|i| job("b", &format!("web-b{i:02}")))
            .chain([job("a", "web-a1"), job("a", "web-a2")])
            .collect();
        let snap = snapshot(jobs, Vec::new());
        let names = names_of(&snap);
        let reader = acl(r#"namespace "a" { policy = "read" }"#);
        let contexts = permitted(Some(&reader), "*", Context::ALL.to_vec()).unwrap();
        assert!(!contexts.contains(&Context::Nodes), "{contexts:?}");
        for ns in ["*", "a"] {
            let found = prefix(
                on(&snap, &names),
                &query(ns),
                Some(&reader),
                "web",
                &contexts,
            );
            let ids = found.matches["jobs"].clone().unwrap();
            assert_eq!(ids, ["web-a1", "web-a2"], "namespace {ns}");
            assert!(!found.truncations["jobs"], "namespace {ns}");
            assert!(!found.matches.contains_key("nodes"));
            let found = fuzzy(
                on(&snap, &names),
                &query(ns),
                Some(&reader),
                "web",
                &contexts,
            );
            let ids: Vec<&str> = found.matches["jobs"]
                .iter()
                .map(|m| m.id.as_str())
                .collect();
            assert_eq!(ids, ["web-a1", "web-a2"], "namespace {ns}");
            assert!(!found.truncations["jobs"]);
        }
        let found = prefix(
            on(&snap, &names),
            &query("b"),
            Some(&reader),
            "web",
            &contexts,
        );
        assert_eq!(found.matches["jobs"], None);
        let found = prefix(
            on(&snap, &names),
            &query("*"),
            Some(&reader),
            "",
            &[Context::Namespaces],
        );
        assert_eq!(found.matches["namespaces"], Some(vec!["a".to_string()]));
        // Nodes are searched with node read, even alone.
        let nodes = acl(r#"node { policy = "read" }"#);
        let only = permitted(Some(&nodes), "default", Context::ALL.to_vec()).unwrap();
        assert_eq!(only, [Context::Nodes]);
        let found = prefix(
            on(&snap, &names),
            &query("default"),
            Some(&nodes),
            "f00d",
            &only,
        );
        assert_eq!(found.matches.len(), 1);
        assert!(found.matches["nodes"].is_some());
    }

    #[test]
    fn a_search_the_token_cannot_read_is_refused() {
        let reader = acl(r#"namespace "a" { policy = "read" }"#);
        let refused = |ns: &str, contexts: &[Context]| {
            permitted(Some(&reader), ns, contexts.to_vec()).is_err()
        };
        assert!(refused("a", &[Context::Nodes]));
        assert!(refused("b", &Context::ALL));
        assert!(!refused("a", &[Context::Jobs]));
        assert!(permitted(Some(&Acl::default()), "*", Context::ALL.to_vec()).is_err());
        assert_eq!(
            permitted(None, "b", Context::ALL.to_vec()).unwrap().len(),
            Context::ALL.len()
        );
    }

    #[test]
    fn contexts_expand_like_nomads() {
        assert_eq!(Context::expand("all").unwrap().len(), Context::ALL.len());
        assert_eq!(
            Context::expand("deployment"),
            Some(vec![Context::Deployment])
        );
        assert_eq!(Context::expand("job"), None);
        assert!(Context::names().ends_with("all"));
    }
}
