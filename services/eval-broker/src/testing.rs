//! Builders of cache tables for the unit tests of the leader's pure
//! decisions (periodic launches, garbage collection, drain deadlines).

use std::sync::Arc;

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Deployment, DeploymentStatus, EvalStatus,
    Evaluation, Job, JobType, Node, NodeStatus, PeriodicConfig,
};
use caravan_state::{Change, Id, Tables};

/// One second in nanoseconds.
pub const SEC: i64 = 1_000_000_000;
/// One hour in nanoseconds.
pub const HOUR: i64 = 3_600 * SEC;

/// Tables built object by object.
#[derive(Default)]
pub struct World {
    /// The tables.
    pub tables: Tables,
}

/// A job of `kind` in the default namespace.
pub fn job(id: &str, kind: JobType) -> Job {
    Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: kind as i32,
        priority: 50,
        ..Default::default()
    }
}

/// A batch job launched every `spec`.
pub fn periodic_job(id: &str, spec: &str, prohibit_overlap: bool) -> Job {
    let mut j = job(id, JobType::Batch);
    j.periodic = Some(PeriodicConfig {
        enabled: true,
        specs: vec![spec.into()],
        spec_type: "cron".into(),
        prohibit_overlap,
        time_zone: String::new(),
    });
    j
}

/// An eval of `job` with `status`, last modified at `modified` (ns).
pub fn eval(id: &str, job: &str, kind: &str, status: EvalStatus, modified: i64) -> Evaluation {
    Evaluation {
        id: id.into(),
        namespace: "default".into(),
        job_id: job.into(),
        r#type: kind.into(),
        priority: 50,
        triggered_by: "job-register".into(),
        status: status as i32,
        create_time_unix_ns: modified,
        modify_time_unix_ns: modified,
        ..Default::default()
    }
}

/// An alloc of `job` placed by `eval` on `node`.
pub fn alloc(
    id: &str,
    job: &str,
    eval: &str,
    node: &str,
    desired: AllocDesiredStatus,
    client: AllocClientStatus,
    modified: i64,
) -> Allocation {
    Allocation {
        id: id.into(),
        name: format!("{job}.g[0]"),
        namespace: "default".into(),
        job_id: job.into(),
        task_group: "g".into(),
        node_id: node.into(),
        eval_id: eval.into(),
        desired_status: desired as i32,
        client_status: client as i32,
        create_time_unix_ns: modified,
        modify_time_unix_ns: modified,
        ..Default::default()
    }
}

/// A node with `status` since `since` (ns).
pub fn node(id: &str, status: NodeStatus, since: i64) -> Node {
    Node {
        id: id.into(),
        name: id.into(),
        status: status as i32,
        status_updated_at_unix_ns: since,
        ..Default::default()
    }
}

/// A deployment of `job` with `status`, last modified at `modified`.
pub fn deployment(id: &str, job: &str, status: DeploymentStatus, modified: i64) -> Deployment {
    Deployment {
        id: id.into(),
        namespace: "default".into(),
        job_id: job.into(),
        status: status as i32,
        create_time_unix_ns: modified,
        modify_time_unix_ns: modified,
        ..Default::default()
    }
}

impl World {
    /// An empty world.
    pub fn new() -> Self {
        World::default()
    }

    fn bump(&mut self) -> i64 {
        let next = self.tables.revision() + 1;
        self.tables.advance_to(next);
        next
    }

    /// Adds a job and its current version.
    pub fn job(&mut self, mut job: Job) -> &mut Self {
        let rev = self.bump();
        job.create_revision = rev;
        job.modify_revision = rev;
        let job = Arc::new(job);
        self.tables.apply(Change::JobVersion {
            namespace: Id::from(job.namespace.as_str()),
            id: Id::from(job.id.as_str()),
            version: job.version,
            job: Some(Arc::clone(&job)),
        });
        self.tables.apply(Change::Job {
            namespace: Id::from(job.namespace.as_str()),
            id: Id::from(job.id.as_str()),
            job: Some(job),
        });
        self
    }

    /// Adds an eval.
    pub fn eval(&mut self, mut eval: Evaluation) -> &mut Self {
        let rev = self.bump();
        eval.create_revision = rev;
        eval.modify_revision = rev;
        self.tables.apply(Change::Eval {
            id: Id::from(eval.id.as_str()),
            eval: Some(Arc::new(eval)),
        });
        self
    }

    /// Adds an alloc.
    pub fn alloc(&mut self, mut alloc: Allocation) -> &mut Self {
        let rev = self.bump();
        alloc.create_revision = rev;
        alloc.modify_revision = rev;
        self.tables.apply(Change::Alloc {
            id: Id::from(alloc.id.as_str()),
            alloc: Some(Arc::new(alloc)),
        });
        self
    }

    /// Adds a node.
    pub fn node(&mut self, mut node: Node) -> &mut Self {
        let rev = self.bump();
        node.create_revision = rev;
        node.modify_revision = rev;
        self.tables.apply(Change::Node {
            id: Id::from(node.id.as_str()),
            node: Some(Arc::new(node)),
        });
        self
    }

    /// Marks a node's heartbeat live.
    pub fn heartbeat(&mut self, node_id: &str) -> &mut Self {
        self.bump();
        self.tables.apply(Change::Heartbeat {
            node_id: Id::from(node_id),
            live: true,
        });
        self
    }

    /// Adds a deployment.
    pub fn deployment(&mut self, mut deployment: Deployment) -> &mut Self {
        let rev = self.bump();
        deployment.create_revision = rev;
        deployment.modify_revision = rev;
        self.tables.apply(Change::Deployment {
            id: Id::from(deployment.id.as_str()),
            deployment: Some(Arc::new(deployment)),
        });
        self
    }
}
