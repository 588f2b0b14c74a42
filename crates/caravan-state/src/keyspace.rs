//! Caravan's key layout in etcd (docs/state-layout.md): building every key
//! and parsing a key back into what it names.

use std::borrow::Cow;

use caravan_store::Range;

use crate::error::{Result, StateError};

/// Digits of a job version in a key: enough for `u64::MAX`, so keys sort in
/// version order.
const VERSION_DIGITS: usize = 20;

/// The kinds of object stored under the prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `jobs/<ns>/<job>`: the current version of each job.
    Jobs,
    /// `job_versions/<ns>/<job>/<version>`: every kept version of each job.
    JobVersions,
    /// `evals/<eval>`.
    Evals,
    /// `allocs/<alloc>`.
    Allocs,
    /// `alloc_status/<alloc>`: the client's part of an allocation, folded
    /// into it by every reader (listed after the allocations, so a list
    /// meets each record before its status).
    AllocStatus,
    /// `job_status/<ns>/<job>/<batch>`: client statuses of one job's
    /// allocations written together, each folded like an `alloc_status/`
    /// value (listed after those).
    JobStatus,
    /// `nodes/<node>`.
    Nodes,
    /// `heartbeats/<node>`: live while the node's lease lives.
    Heartbeats,
    /// `deployments/<deployment>`.
    Deployments,
    /// `scheduler_config`: a single key.
    SchedulerConfig,
    /// `leader/<service>/<lease-hex>`: election candidates.
    Leader,
    /// `job_plans/<ns>/<job>`: rewritten by every plan commit for the job,
    /// so a commit guarded by it cannot land next to a plan it did not see
    /// (the plan applier's; not cached).
    JobPlans,
    /// `vars/<ns>/<path>`: Nomad Variables, items sealed (the gateway's;
    /// not cached).
    Vars,
    /// `acl/<entry>`: ACL policies, tokens and the bootstrap mark (the
    /// gateway's; not in the watch cache, which the gateway's ACL cache
    /// replaces).
    Acl,
    /// `namespaces/<name>`: namespaces other than the built-in `default`
    /// (the gateway's; not cached).
    Namespaces,
    /// `node_pools/<name>`: node pools other than the built-in `default`
    /// and `all` (the gateway's; not cached).
    NodePools,
    /// `job_submissions/<ns>/<job>/<version>`: the source a job version
    /// was submitted with (the gateway's; not cached).
    JobSubmissions,
    /// `services/<ns>/<service>/<registration>`: one instance of a service
    /// each, registered for an allocation (the gateway's; not cached).
    Services,
}

impl Kind {
    /// Every kind, in layout order.
    pub const ALL: [Kind; 18] = [
        Kind::Jobs,
        Kind::JobVersions,
        Kind::Evals,
        Kind::Allocs,
        Kind::AllocStatus,
        Kind::JobStatus,
        Kind::Nodes,
        Kind::Heartbeats,
        Kind::Deployments,
        Kind::SchedulerConfig,
        Kind::Leader,
        Kind::JobPlans,
        Kind::Vars,
        Kind::Acl,
        Kind::Namespaces,
        Kind::NodePools,
        Kind::JobSubmissions,
        Kind::Services,
    ];

    /// The key segment right after the prefix.
    pub fn segment(self) -> &'static str {
        match self {
            Kind::Jobs => "jobs",
            Kind::JobVersions => "job_versions",
            Kind::Evals => "evals",
            Kind::Allocs => "allocs",
            Kind::AllocStatus => "alloc_status",
            Kind::JobStatus => "job_status",
            Kind::Nodes => "nodes",
            Kind::Heartbeats => "heartbeats",
            Kind::Deployments => "deployments",
            Kind::SchedulerConfig => "scheduler_config",
            Kind::Leader => "leader",
            Kind::JobPlans => "job_plans",
            Kind::Vars => "vars",
            Kind::Acl => "acl",
            Kind::Namespaces => "namespaces",
            Kind::NodePools => "node_pools",
            Kind::JobSubmissions => "job_submissions",
            Kind::Services => "services",
        }
    }

    /// Whether the watch cache holds objects of this kind (and so lists
    /// them); the others are read by their one user when needed.
    pub fn cached(self) -> bool {
        match self {
            Kind::Jobs
            | Kind::JobVersions
            | Kind::Evals
            | Kind::Allocs
            | Kind::AllocStatus
            | Kind::JobStatus
            | Kind::Nodes
            | Kind::Heartbeats
            | Kind::Deployments
            | Kind::SchedulerConfig
            | Kind::NodePools => true,
            Kind::Leader
            | Kind::JobPlans
            | Kind::Vars
            | Kind::Acl
            | Kind::Namespaces
            | Kind::JobSubmissions
            | Kind::Services => false,
        }
    }

    fn from_segment(segment: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.segment() == segment)
    }
}

/// The last segment of [`Keyspace::progress_mark`].
const PROGRESS_MARK: &str = "progress_mark";

/// What a key names, with its ids decoded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StateKey {
    /// The current version of a job.
    Job {
        /// Namespace.
        namespace: String,
        /// Job id.
        id: String,
    },
    /// One version of a job.
    JobVersion {
        /// Namespace.
        namespace: String,
        /// Job id.
        id: String,
        /// Job version.
        version: u64,
    },
    /// An evaluation.
    Eval(String),
    /// An allocation.
    Alloc(String),
    /// The client's part of an allocation.
    AllocStatus(String),
    /// A batch of client statuses of one job's allocations.
    JobStatus {
        /// Namespace.
        namespace: String,
        /// Job id.
        id: String,
        /// The batch's name, unique among the job's.
        batch: String,
    },
    /// A client node.
    Node(String),
    /// A node's heartbeat key.
    Heartbeat(String),
    /// A deployment.
    Deployment(String),
    /// The scheduler configuration.
    SchedulerConfig,
    /// A candidate's key in a leader election.
    Leader {
        /// The service electing a leader.
        service: String,
        /// The candidate's lease, in hex, as the key carries it.
        candidate: String,
    },
    /// The plan mark of a job.
    JobPlan {
        /// Namespace.
        namespace: String,
        /// Job id.
        id: String,
    },
    /// A variable.
    Var {
        /// Namespace.
        namespace: String,
        /// The variable's path (`/` allowed).
        path: String,
    },
    /// An ACL entry: what follows `acl/` (`policy/<name>`,
    /// `token/<accessor>`, `bootstrap`).
    Acl(String),
    /// A namespace.
    Namespace(String),
    /// A node pool.
    NodePool(String),
    /// The submission of one version of a job.
    JobSubmission {
        /// Namespace.
        namespace: String,
        /// Job id.
        id: String,
        /// Job version.
        version: u64,
    },
    /// One registered instance of a service.
    Service {
        /// Namespace.
        namespace: String,
        /// Service name.
        name: String,
        /// Registration id.
        id: String,
    },
}

impl StateKey {
    /// The kind of object the key names.
    pub fn kind(&self) -> Kind {
        match self {
            StateKey::Job { .. } => Kind::Jobs,
            StateKey::JobVersion { .. } => Kind::JobVersions,
            StateKey::Eval(_) => Kind::Evals,
            StateKey::Alloc(_) => Kind::Allocs,
            StateKey::AllocStatus(_) => Kind::AllocStatus,
            StateKey::JobStatus { .. } => Kind::JobStatus,
            StateKey::Node(_) => Kind::Nodes,
            StateKey::Heartbeat(_) => Kind::Heartbeats,
            StateKey::Deployment(_) => Kind::Deployments,
            StateKey::SchedulerConfig => Kind::SchedulerConfig,
            StateKey::Leader { .. } => Kind::Leader,
            StateKey::JobPlan { .. } => Kind::JobPlans,
            StateKey::Var { .. } => Kind::Vars,
            StateKey::Acl(_) => Kind::Acl,
            StateKey::Namespace(_) => Kind::Namespaces,
            StateKey::NodePool(_) => Kind::NodePools,
            StateKey::JobSubmission { .. } => Kind::JobSubmissions,
            StateKey::Service { .. } => Kind::Services,
        }
    }
}

/// The keys of one Caravan cluster, all under one prefix (`/caravan` by
/// default; each test uses its own).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Keyspace {
    /// The prefix with exactly one trailing `/`.
    root: String,
}

impl Default for Keyspace {
    fn default() -> Self {
        Keyspace::new("/caravan")
    }
}

impl Keyspace {
    /// The keyspace under `prefix`; a trailing `/` is optional.
    pub fn new(prefix: &str) -> Self {
        let mut root = prefix.trim_end_matches('/').to_owned();
        root.push('/');
        Keyspace { root }
    }

    /// The prefix, without its trailing `/`.
    pub fn prefix(&self) -> &str {
        &self.root[..self.root.len() - 1]
    }

    /// `<prefix>/`: every key of the cluster starts with it.
    pub fn root(&self) -> &[u8] {
        self.root.as_bytes()
    }

    /// The range of every key of the cluster.
    pub fn range(&self) -> Range {
        Range::prefix(self.root.as_bytes())
    }

    /// The key prefix of one kind (for the scheduler configuration, its key).
    pub fn prefix_of(&self, kind: Kind) -> Vec<u8> {
        match kind {
            Kind::SchedulerConfig => self.build(&[kind.segment()]),
            _ => {
                let mut key = self.build(&[kind.segment()]);
                key.push(b'/');
                key
            }
        }
    }

    /// The range of every key of one kind.
    pub fn range_of(&self, kind: Kind) -> Range {
        match kind {
            Kind::SchedulerConfig => Range::key(self.prefix_of(kind)),
            _ => Range::prefix(self.prefix_of(kind)),
        }
    }

    /// `jobs/<ns>/<job>`.
    pub fn job(&self, namespace: &str, job_id: &str) -> Vec<u8> {
        self.build(&["jobs", &encode_segment(namespace), &encode_segment(job_id)])
    }

    /// `job_plans/<ns>/<job>`: the job's plan mark.
    pub fn job_plan(&self, namespace: &str, job_id: &str) -> Vec<u8> {
        self.build(&[
            "job_plans",
            &encode_segment(namespace),
            &encode_segment(job_id),
        ])
    }

    /// Prefix of the current jobs of one namespace.
    pub fn jobs_in(&self, namespace: &str) -> Vec<u8> {
        let mut key = self.build(&["jobs", &encode_segment(namespace)]);
        key.push(b'/');
        key
    }

    /// `job_versions/<ns>/<job>/<version>`, the version zero-padded.
    pub fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Vec<u8> {
        let version = format!("{version:0VERSION_DIGITS$}");
        self.build(&[
            "job_versions",
            &encode_segment(namespace),
            &encode_segment(job_id),
            &version,
        ])
    }

    /// Prefix of every version of one job, in version order when ranged.
    pub fn job_versions_of(&self, namespace: &str, job_id: &str) -> Vec<u8> {
        let mut key = self.build(&[
            "job_versions",
            &encode_segment(namespace),
            &encode_segment(job_id),
        ]);
        key.push(b'/');
        key
    }

    /// `vars/<ns>/<path>`: the path is one segment (its `/` encoded), so a
    /// key prefix of it is exactly a path prefix.
    pub fn var(&self, namespace: &str, path: &str) -> Vec<u8> {
        self.build(&["vars", &encode_segment(namespace), &encode_segment(path)])
    }

    /// Prefix of the variables of one namespace whose path starts with
    /// `path_prefix` (`""`: all of them).
    pub fn vars_in(&self, namespace: &str, path_prefix: &str) -> Vec<u8> {
        let mut key = self.build(&["vars", &encode_segment(namespace)]);
        key.push(b'/');
        key.extend_from_slice(encode_segment(path_prefix).as_bytes());
        key
    }

    /// `acl/<entry>`: an ACL policy (`policy/<name>`), token
    /// (`token/<accessor>`) or the bootstrap mark (`bootstrap`).
    pub fn acl(&self, entry: &str) -> Vec<u8> {
        self.build(&["acl", entry])
    }

    /// `job_submissions/<ns>/<job>/<version>`, the version zero-padded.
    pub fn job_submission(&self, namespace: &str, job_id: &str, version: u64) -> Vec<u8> {
        let version = format!("{version:0VERSION_DIGITS$}");
        self.build(&[
            "job_submissions",
            &encode_segment(namespace),
            &encode_segment(job_id),
            &version,
        ])
    }

    /// Prefix of the submissions of every version of one job.
    pub fn job_submissions_of(&self, namespace: &str, job_id: &str) -> Vec<u8> {
        let mut key = self.build(&[
            "job_submissions",
            &encode_segment(namespace),
            &encode_segment(job_id),
        ]);
        key.push(b'/');
        key
    }

    /// `services/<ns>/<service>/<registration>`.
    pub fn service(&self, namespace: &str, name: &str, id: &str) -> Vec<u8> {
        self.build(&[
            "services",
            &encode_segment(namespace),
            &encode_segment(name),
            &encode_segment(id),
        ])
    }

    /// Prefix of the instances of one service (`name`), or of every
    /// service of the namespace (`None`).
    pub fn services_in(&self, namespace: &str, name: Option<&str>) -> Vec<u8> {
        let mut key = match name {
            Some(name) => self.build(&[
                "services",
                &encode_segment(namespace),
                &encode_segment(name),
            ]),
            None => self.build(&["services", &encode_segment(namespace)]),
        };
        key.push(b'/');
        key
    }

    /// `namespaces/<name>`.
    pub fn namespace(&self, name: &str) -> Vec<u8> {
        self.build(&["namespaces", &encode_segment(name)])
    }

    /// `node_pools/<name>`.
    pub fn node_pool(&self, name: &str) -> Vec<u8> {
        self.build(&["node_pools", &encode_segment(name)])
    }

    /// `evals/<eval>`.
    pub fn eval(&self, eval_id: &str) -> Vec<u8> {
        self.build(&["evals", eval_id])
    }

    /// `allocs/<alloc>`.
    pub fn alloc(&self, alloc_id: &str) -> Vec<u8> {
        self.build(&["allocs", alloc_id])
    }

    /// `alloc_status/<alloc>`.
    pub fn alloc_status(&self, alloc_id: &str) -> Vec<u8> {
        self.build(&["alloc_status", alloc_id])
    }

    /// `job_status/<ns>/<job>/<batch>`: a batch of client statuses of the
    /// job's allocations.
    pub fn job_status(&self, namespace: &str, job_id: &str, batch: &str) -> Vec<u8> {
        self.build(&[
            "job_status",
            &encode_segment(namespace),
            &encode_segment(job_id),
            &encode_segment(batch),
        ])
    }

    /// Prefix of every status batch of one job.
    pub fn job_status_of(&self, namespace: &str, job_id: &str) -> Vec<u8> {
        let mut key = self.build(&[
            "job_status",
            &encode_segment(namespace),
            &encode_segment(job_id),
        ]);
        key.push(b'/');
        key
    }

    /// `nodes/<node>`.
    pub fn node(&self, node_id: &str) -> Vec<u8> {
        self.build(&["nodes", node_id])
    }

    /// `heartbeats/<node>`.
    pub fn heartbeat(&self, node_id: &str) -> Vec<u8> {
        self.build(&["heartbeats", node_id])
    }

    /// `deployments/<deployment>`.
    pub fn deployment(&self, deployment_id: &str) -> Vec<u8> {
        self.build(&["deployments", deployment_id])
    }

    /// `scheduler_config`.
    pub fn scheduler_config(&self) -> Vec<u8> {
        self.build(&["scheduler_config"])
    }

    /// `progress_mark`: a key of no content that caches waiting for a
    /// revision no event announces write, then wait to see, because a
    /// watch delivers events in order while etcd's progress notifications
    /// may not be (see `Informer::wait_for_revision`). It names no object.
    pub fn progress_mark(&self) -> Vec<u8> {
        self.build(&[PROGRESS_MARK])
    }

    /// Whether `key` is this keyspace's progress mark.
    pub fn is_progress_mark(&self, key: &[u8]) -> bool {
        key.strip_prefix(self.root.as_bytes()) == Some(PROGRESS_MARK.as_bytes())
    }

    /// `leader/<service>`: the election name a service's candidates campaign on.
    pub fn leader(&self, service: &str) -> Vec<u8> {
        self.build(&["leader", service])
    }

    /// The key of whatever `key` names.
    pub fn key_of(&self, key: &StateKey) -> Vec<u8> {
        match key {
            StateKey::Job { namespace, id } => self.job(namespace, id),
            StateKey::JobVersion {
                namespace,
                id,
                version,
            } => self.job_version(namespace, id, *version),
            StateKey::Eval(id) => self.eval(id),
            StateKey::Alloc(id) => self.alloc(id),
            StateKey::AllocStatus(id) => self.alloc_status(id),
            StateKey::JobStatus {
                namespace,
                id,
                batch,
            } => self.job_status(namespace, id, batch),
            StateKey::Node(id) => self.node(id),
            StateKey::Heartbeat(id) => self.heartbeat(id),
            StateKey::Deployment(id) => self.deployment(id),
            StateKey::SchedulerConfig => self.scheduler_config(),
            StateKey::Leader { service, candidate } => self.build(&["leader", service, candidate]),
            StateKey::JobPlan { namespace, id } => self.job_plan(namespace, id),
            StateKey::Var { namespace, path } => self.var(namespace, path),
            StateKey::Acl(entry) => self.acl(entry),
            StateKey::Namespace(name) => self.namespace(name),
            StateKey::NodePool(name) => self.node_pool(name),
            StateKey::JobSubmission {
                namespace,
                id,
                version,
            } => self.job_submission(namespace, id, *version),
            StateKey::Service {
                namespace,
                name,
                id,
            } => self.service(namespace, name, id),
        }
    }

    /// Parses a key of this keyspace into what it names.
    pub fn parse(&self, key: &[u8]) -> Result<StateKey> {
        let rest = key
            .strip_prefix(self.root.as_bytes())
            .ok_or_else(|| StateError::key(key, format!("not under {:?}", self.root)))?;
        let rest =
            std::str::from_utf8(rest).map_err(|_| StateError::key(key, "not valid UTF-8"))?;
        let (segment, tail) = match rest.split_once('/') {
            Some((segment, tail)) => (segment, Some(tail)),
            None => (rest, None),
        };
        let kind = Kind::from_segment(segment)
            .ok_or_else(|| StateError::key(key, format!("unknown kind {segment:?}")))?;
        let parts: Vec<&str> = match (kind, tail) {
            (Kind::SchedulerConfig, None) => return Ok(StateKey::SchedulerConfig),
            (Kind::Acl, Some(tail)) if !tail.is_empty() => {
                return Ok(StateKey::Acl(tail.to_owned()));
            }
            (Kind::SchedulerConfig, Some(_)) | (_, None) => {
                return Err(StateError::key(key, "wrong number of segments"));
            }
            (_, Some(tail)) => tail.split('/').collect(),
        };
        let single = || match parts.as_slice() {
            [id] => Ok((*id).to_owned()),
            _ => Err(StateError::key(key, "wrong number of segments")),
        };
        Ok(match kind {
            Kind::Jobs => match parts.as_slice() {
                [ns, id] => StateKey::Job {
                    namespace: decode_segment(key, ns)?,
                    id: decode_segment(key, id)?,
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::JobPlans => match parts.as_slice() {
                [ns, id] => StateKey::JobPlan {
                    namespace: decode_segment(key, ns)?,
                    id: decode_segment(key, id)?,
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::Vars => match parts.as_slice() {
                [ns, path] => StateKey::Var {
                    namespace: decode_segment(key, ns)?,
                    path: decode_segment(key, path)?,
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::JobVersions => match parts.as_slice() {
                [ns, id, version] => StateKey::JobVersion {
                    namespace: decode_segment(key, ns)?,
                    id: decode_segment(key, id)?,
                    version: parse_version(key, version)?,
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::JobSubmissions => match parts.as_slice() {
                [ns, id, version] => StateKey::JobSubmission {
                    namespace: decode_segment(key, ns)?,
                    id: decode_segment(key, id)?,
                    version: parse_version(key, version)?,
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::JobStatus => match parts.as_slice() {
                [ns, id, batch] => StateKey::JobStatus {
                    namespace: decode_segment(key, ns)?,
                    id: decode_segment(key, id)?,
                    batch: decode_segment(key, batch)?,
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::Services => match parts.as_slice() {
                [ns, name, id] => StateKey::Service {
                    namespace: decode_segment(key, ns)?,
                    name: decode_segment(key, name)?,
                    id: decode_segment(key, id)?,
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::Evals => StateKey::Eval(single()?),
            Kind::Allocs => StateKey::Alloc(single()?),
            Kind::AllocStatus => StateKey::AllocStatus(single()?),
            Kind::Nodes => StateKey::Node(single()?),
            Kind::Heartbeats => StateKey::Heartbeat(single()?),
            Kind::Deployments => StateKey::Deployment(single()?),
            Kind::Leader => match parts.split_last() {
                Some((candidate, service)) if !service.is_empty() => StateKey::Leader {
                    service: service.join("/"),
                    candidate: (*candidate).to_owned(),
                },
                _ => return Err(StateError::key(key, "wrong number of segments")),
            },
            Kind::SchedulerConfig => StateKey::SchedulerConfig,
            Kind::Namespaces => StateKey::Namespace(decode_segment(key, &single()?)?),
            Kind::NodePools => StateKey::NodePool(decode_segment(key, &single()?)?),
            Kind::Acl => return Err(StateError::key(key, "wrong number of segments")),
        })
    }

    fn build(&self, segments: &[&str]) -> Vec<u8> {
        let len = self.root.len() + segments.iter().map(|s| s.len() + 1).sum::<usize>();
        let mut key = Vec::with_capacity(len);
        key.extend_from_slice(self.root.as_bytes());
        for (i, s) in segments.iter().enumerate() {
            if i > 0 {
                key.push(b'/');
            }
            key.extend_from_slice(s.as_bytes());
        }
        key
    }
}

/// Percent-encodes `/` and `%` so a namespace or job id is one key segment.
pub fn encode_segment(s: &str) -> Cow<'_, str> {
    if !s.contains(['/', '%']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '/' => out.push_str("%2F"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Reverses [`encode_segment`]; any other escape is an error naming `key`.
fn decode_segment(key: &[u8], s: &str) -> Result<String> {
    if !s.contains('%') {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3).unwrap_or(&rest[at..]);
        match escape {
            "%2F" | "%2f" => out.push('/'),
            "%25" => out.push('%'),
            other => {
                return Err(StateError::key(key, format!("bad escape {other:?}")));
            }
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_version(key: &[u8], s: &str) -> Result<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(StateError::key(key, format!("bad version {s:?}")));
    }
    s.parse()
        .map_err(|_| StateError::key(key, format!("version {s:?} out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks() -> Keyspace {
        Keyspace::new("/t/x/")
    }

    #[test]
    fn keys_follow_the_layout() {
        let ks = ks();
        assert_eq!(ks.prefix(), "/t/x");
        assert_eq!(ks.root(), b"/t/x/");
        assert_eq!(ks.job("default", "web"), b"/t/x/jobs/default/web");
        assert_eq!(
            ks.job("default", "web/periodic-1700000000"),
            b"/t/x/jobs/default/web%2Fperiodic-1700000000"
        );
        assert_eq!(
            ks.job_version("default", "web", 7),
            b"/t/x/job_versions/default/web/00000000000000000007"
        );
        assert_eq!(ks.alloc("a1"), b"/t/x/allocs/a1");
        assert_eq!(
            ks.job_status("default", "web/x", "b1"),
            b"/t/x/job_status/default/web%2Fx/b1"
        );
        assert!(
            ks.job_status("default", "web", "b1")
                .starts_with(&ks.job_status_of("default", "web"))
        );
        assert_eq!(ks.heartbeat("n1"), b"/t/x/heartbeats/n1");
        assert_eq!(ks.scheduler_config(), b"/t/x/scheduler_config");
        assert_eq!(ks.prefix_of(Kind::Allocs), b"/t/x/allocs/");
        assert_eq!(
            ks.prefix_of(Kind::SchedulerConfig),
            b"/t/x/scheduler_config"
        );
        assert_eq!(ks.leader("plan-applier"), b"/t/x/leader/plan-applier");
        assert_eq!(Keyspace::new("/caravan"), Keyspace::default());
    }

    #[test]
    fn round_trips_every_kind() {
        let ks = ks();
        let keys = [
            StateKey::Job {
                namespace: "default".into(),
                id: "web/periodic-1700000000".into(),
            },
            StateKey::Job {
                namespace: "team/a%b".into(),
                id: "100%/x//".into(),
            },
            StateKey::JobVersion {
                namespace: "default".into(),
                id: "batch/dispatch-1/x".into(),
                version: u64::MAX,
            },
            StateKey::Eval("e".into()),
            StateKey::AllocStatus("a".into()),
            StateKey::JobStatus {
                namespace: "default".into(),
                id: "web/dispatch-1".into(),
                batch: "0f3a".into(),
            },
            StateKey::Alloc("a".into()),
            StateKey::Node("n".into()),
            StateKey::Heartbeat("n".into()),
            StateKey::Deployment("d".into()),
            StateKey::SchedulerConfig,
            StateKey::Leader {
                service: "eval-broker".into(),
                candidate: "694d7a0b2c".into(),
            },
            StateKey::Var {
                namespace: "default".into(),
                path: "nomad/jobs/web".into(),
            },
            StateKey::Acl("policy/readonly".into()),
            StateKey::Acl("bootstrap".into()),
            StateKey::Namespace("prod".into()),
            StateKey::NodePool("gpu".into()),
            StateKey::JobSubmission {
                namespace: "default".into(),
                id: "web/dispatch-1".into(),
                version: 3,
            },
            StateKey::Service {
                namespace: "default".into(),
                name: "web/api".into(),
                id: "_nomad-task-a1-web-web/api-http".into(),
            },
        ];
        for key in keys {
            let bytes = ks.key_of(&key);
            assert_eq!(
                ks.parse(&bytes).unwrap(),
                key,
                "{}",
                String::from_utf8_lossy(&bytes)
            );
            assert!(bytes.starts_with(&ks.prefix_of(key.kind())));
        }
    }

    #[test]
    fn a_job_prefix_never_catches_another_job() {
        let ks = ks();
        let parent = ks.job_versions_of("default", "web");
        let child = ks.job_version("default", "web/periodic-1", 0);
        let sibling = ks.job_version("default", "web2", 0);
        assert!(!child.starts_with(&parent));
        assert!(!sibling.starts_with(&parent));
        assert!(ks.job_version("default", "web", 3).starts_with(&parent));
        assert!(ks.job("default", "web").starts_with(&ks.jobs_in("default")));
    }

    #[test]
    fn a_service_prefix_never_catches_another_service() {
        let ks = ks();
        let web = ks.services_in("default", Some("web"));
        assert!(ks.service("default", "web", "r1").starts_with(&web));
        assert!(!ks.service("default", "web2", "r1").starts_with(&web));
        assert!(!ks.service("default", "web/x", "r1").starts_with(&web));
        let all = ks.services_in("default", None);
        assert!(ks.service("default", "web2", "r1").starts_with(&all));
        assert!(!ks.service("default2", "web", "r1").starts_with(&all));
    }

    #[test]
    fn a_var_prefix_is_a_path_prefix() {
        let ks = ks();
        assert_eq!(ks.var("default", "a/b"), b"/t/x/vars/default/a%2Fb");
        let under_a = ks.vars_in("default", "a/");
        assert!(ks.var("default", "a/b").starts_with(&under_a));
        assert!(!ks.var("default", "ab").starts_with(&under_a));
        assert!(
            !ks.var("other", "a/b")
                .starts_with(&ks.vars_in("default", ""))
        );
        assert!(
            ks.var("default", "x")
                .starts_with(&ks.prefix_of(Kind::Vars))
        );
    }

    #[test]
    fn versions_sort_in_key_order() {
        let ks = ks();
        let mut keys: Vec<_> = [10u64, 9, 100, 0, 11]
            .iter()
            .map(|v| ks.job_version("ns", "j", *v))
            .collect();
        keys.sort();
        let versions: Vec<u64> = keys
            .iter()
            .map(|k| match ks.parse(k).unwrap() {
                StateKey::JobVersion { version, .. } => version,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(versions, vec![0, 9, 10, 11, 100]);
    }

    #[test]
    fn bad_keys_are_named_in_errors() {
        let ks = ks();
        for bad in [
            &b"/other/jobs/a/b"[..],
            b"/t/x/jobs/a",
            b"/t/x/jobs/a/b/c",
            b"/t/x/jobs/a/b%2",
            b"/t/x/jobs/a/b%41",
            b"/t/x/job_versions/a/b/x1",
            b"/t/x/job_versions/a/b/99999999999999999999",
            b"/t/x/allocs/a/b",
            b"/t/x/allocs",
            b"/t/x/scheduler_config/x",
            b"/t/x/widgets/a",
            b"/t/x/nodes/\xff",
            b"/t/x/vars/default",
            b"/t/x/vars/default/a/b",
        ] {
            let err = ks.parse(bad).unwrap_err();
            let shown = String::from_utf8_lossy(bad).into_owned();
            assert!(
                err.to_string().contains(&shown),
                "{err} should name {shown}"
            );
        }
    }
}
