//! The jobs of a run and their submission: service jobs of mock tasks on the
//! simulated nodes, batch jobs whose `raw_exec` task appends its alloc's
//! name to a file on the real nodes (the side effect counted afterwards),
//! some service jobs updated and some jobs stopped again. Submissions are
//! spread evenly over the run, through every gateway in turn, and retried on
//! another gateway while gateways die.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use caravan_integration_tests::{HttpApi, jobs};
use parking_lot::Mutex;
use rand::Rng;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::task::JoinSet;

/// The name of every real client node starts with this.
pub const REAL_NODE_PREFIX: &str = "real-";
/// The share of batch jobs, in percent.
const BATCH_PERCENT: u32 = 20;
/// The share of service jobs updated once, in percent.
const UPDATE_PERCENT: u32 = 10;
/// The share of jobs stopped again, in percent.
const STOP_PERCENT: u32 = 10;
/// How long one submission is retried before it counts as failed.
const SUBMIT_DEADLINE: Duration = Duration::from_secs(120);
/// The pause between two attempts of one submission.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// What a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Kind {
    /// Mock tasks that run until stopped.
    Service,
    /// One `raw_exec` task per alloc that appends a line and exits.
    Batch,
}

/// One job as the run asked for it.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The job id.
    pub id: String,
    /// Service or batch.
    pub kind: Kind,
    /// Allocations of its one group.
    pub count: u32,
    /// Whether it is updated once after its registration.
    pub updated: bool,
    /// Whether it is stopped after its registration (and update).
    pub stopped: bool,
}

impl JobSpec {
    /// The names its allocations take: `<job>.g[<i>]`.
    pub fn alloc_names(&self) -> Vec<String> {
        (0..self.count)
            .map(|i| format!("{}.g[{i}]", self.id))
            .collect()
    }
}

/// One submission.
#[derive(Clone, Copy, Debug)]
enum Op {
    Register(usize),
    Update(usize),
    Stop(usize),
}

impl Op {
    fn job(self) -> usize {
        match self {
            Op::Register(i) | Op::Update(i) | Op::Stop(i) => i,
        }
    }
}

/// The jobs of a run and where the batch tasks leave their side effect.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Every job, by index.
    pub jobs: Vec<JobSpec>,
    /// The file every batch task appends `<job>/<alloc name>` to.
    pub side_effects: PathBuf,
    ops: Vec<Op>,
}

impl Workload {
    /// `n` jobs drawn from `rng`; batch tasks append to `side_effects`.
    pub fn new(n: usize, rng: &mut Pcg64, side_effects: &Path) -> Workload {
        let mut jobs = Vec::with_capacity(n);
        for i in 0..n {
            let kind = if rng.random_range(0..100) < BATCH_PERCENT {
                Kind::Batch
            } else {
                Kind::Service
            };
            let prefix = match kind {
                Kind::Service => "svc",
                Kind::Batch => "batch",
            };
            jobs.push(JobSpec {
                id: format!("{prefix}-{i:05}"),
                kind,
                count: rng.random_range(1..=3),
                updated: kind == Kind::Service && rng.random_range(0..100) < UPDATE_PERCENT,
                stopped: rng.random_range(0..100) < STOP_PERCENT,
            });
        }
        // Every job's register first; its update and then its stop come
        // somewhere after it (the lanes below keep one job's submissions in
        // the order of the stream).
        let mut ops: Vec<Op> = (0..n).map(Op::Register).collect();
        let mut updates: Vec<Op> = (0..n)
            .filter(|&i| jobs[i].updated)
            .map(Op::Update)
            .collect();
        let mut stops: Vec<Op> = (0..n).filter(|&i| jobs[i].stopped).map(Op::Stop).collect();
        updates.shuffle(rng);
        stops.shuffle(rng);
        for op in updates.into_iter().chain(stops) {
            let after = ops.iter().rposition(|o| o.job() == op.job()).unwrap_or(0);
            let at = rng.random_range(after + 1..=ops.len());
            ops.insert(at, op);
        }
        Workload {
            jobs,
            side_effects: side_effects.to_path_buf(),
            ops,
        }
    }

    /// The Nomad JSON of job `i`, `updated` for its second version.
    fn body(&self, i: usize, updated: bool) -> Value {
        let spec = &self.jobs[i];
        let count = i64::from(spec.count);
        match spec.kind {
            Kind::Service => {
                let mut task = jobs::mock_task(20, 16);
                if updated {
                    task["Env"] = json!({ "VERSION": "2" });
                    task["Resources"]["CPU"] = json!(25);
                }
                let mut job = jobs::service_job(&spec.id, count, task);
                // Registered by the client with its running state; the
                // checks below find none left behind by a stop or a fault.
                job["Job"]["TaskGroups"][0]["Services"] =
                    json!([{ "Name": spec.id, "Provider": "nomad" }]);
                job
            }
            Kind::Batch => {
                let script = format!(
                    "echo \"$NOMAD_JOB_ID/$NOMAD_ALLOC_NAME\" >> '{}'",
                    self.side_effects.display()
                );
                let mut job = jobs::service_job(&spec.id, count, jobs::raw_exec_task(&script));
                job["Job"]["Type"] = json!("batch");
                // Simulated nodes run every driver as mock: the side effect
                // needs a real node.
                job["Job"]["Constraints"] = json!([{
                    "LTarget": "${node.unique.name}",
                    "RTarget": format!("^{REAL_NODE_PREFIX}"),
                    "Operand": "regexp",
                }]);
                job
            }
        }
    }
}

/// How the submissions went.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Submitted {
    /// Registrations answered 2xx.
    pub registered: usize,
    /// Updates answered 2xx.
    pub updated: usize,
    /// Stops answered 2xx.
    pub stopped: usize,
    /// Attempts that failed and were retried (a gateway down, a timeout).
    pub retries: usize,
    /// Submissions that never succeeded, with the last error.
    pub failed: Vec<String>,
    /// Seconds from the first submission to the last answer.
    pub took_s: f64,
}

/// Submits every op of `work`, spread evenly over `over`, `lanes` at a time,
/// through `gateways` in turn. One job's ops always go to one lane, in order.
pub async fn submit(
    work: Arc<Workload>,
    gateways: Vec<HttpApi>,
    over: Duration,
    lanes: usize,
) -> Submitted {
    let lanes = lanes.max(1);
    let total = work.ops.len().max(1);
    let gap = over.div_f64(total as f64);
    let start = Instant::now();
    let out = Arc::new(Mutex::new(Submitted::default()));
    let gateways = Arc::new(gateways);
    let turn = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for lane in 0..lanes {
        let (work, gateways, out, turn) =
            (work.clone(), gateways.clone(), out.clone(), turn.clone());
        tasks.spawn(async move {
            for (k, op) in work.ops.iter().enumerate() {
                if op.job() % lanes != lane {
                    continue;
                }
                tokio::time::sleep_until((start + gap * k as u32).into()).await;
                let result = send(&work, *op, &gateways, &turn, &out).await;
                let mut o = out.lock();
                match (result, op) {
                    (Ok(()), Op::Register(_)) => o.registered += 1,
                    (Ok(()), Op::Update(_)) => o.updated += 1,
                    (Ok(()), Op::Stop(_)) => o.stopped += 1,
                    (Err(err), _) => o.failed.push(format!("{op:?}: {err:#}")),
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let mut o = out.lock().clone();
    o.took_s = start.elapsed().as_secs_f64();
    o
}

/// Sends one op, retrying on the next gateway until it is answered 2xx; a
/// 4xx is the bench's own mistake and not retried.
async fn send(
    work: &Workload,
    op: Op,
    gateways: &[HttpApi],
    turn: &AtomicUsize,
    out: &Mutex<Submitted>,
) -> anyhow::Result<()> {
    anyhow::ensure!(!gateways.is_empty(), "no gateway to submit to");
    let deadline = Instant::now() + SUBMIT_DEADLINE;
    loop {
        let gw = &gateways[turn.fetch_add(1, Ordering::Relaxed) % gateways.len()];
        let id = &work.jobs[op.job()].id;
        let reply = match op {
            Op::Register(i) => gw.put_json("/v1/jobs", &work.body(i, false)).await,
            Op::Update(i) => gw.put_json("/v1/jobs", &work.body(i, true)).await,
            Op::Stop(_) => gw.delete(&format!("/v1/job/{id}")).await,
        };
        let err = match reply {
            Ok(r) if (200..300).contains(&r.status) => return Ok(()),
            Ok(r) if (400..500).contains(&r.status) => {
                anyhow::bail!("HTTP {}: {}", r.status, r.text())
            }
            Ok(r) => anyhow::anyhow!("HTTP {}: {}", r.status, r.text()),
            Err(err) => err,
        };
        if Instant::now() >= deadline {
            return Err(err.context(format!("gave up after {SUBMIT_DEADLINE:?}")));
        }
        out.lock().retries += 1;
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
