//! Jobs, nodes and placed allocations the gRPC cases share.

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Job, JobType, Node, RegisterJobRequest,
    Resources, Task, TaskGroup,
};

/// A service job of `count` instances of one `mock` task.
pub fn job(id: &str, count: i32) -> Job {
    let mut job = Job {
        id: id.into(),
        task_groups: vec![TaskGroup {
            name: "web".into(),
            count,
            tasks: vec![Task {
                name: "app".into(),
                driver: "mock".into(),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 64,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    job.set_type(JobType::Service);
    job
}

/// A bare node in dc1.
pub fn node(id: &str) -> Node {
    Node {
        id: id.into(),
        name: format!("node-{id}"),
        datacenter: "dc1".into(),
        ..Default::default()
    }
}

/// A plain registration of `job`.
pub fn register(job: Job) -> RegisterJobRequest {
    RegisterJobRequest {
        job: Some(job),
        ..Default::default()
    }
}

/// A pending allocation of `job_id`'s group `web` on `node_id`.
pub fn placed(id: &str, node_id: &str, job_id: &str) -> Allocation {
    let mut a = Allocation {
        id: id.into(),
        name: format!("{job_id}.web[0]"),
        namespace: "default".into(),
        job_id: job_id.into(),
        task_group: "web".into(),
        node_id: node_id.into(),
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Pending);
    a
}
