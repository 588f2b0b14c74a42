//! What one etcd watch of the cluster's keys sees: register evals completing
//! (with their latency) and allocations placed and running, and the moment
//! each stage is reached.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use caravan_model::{AllocExt, NomadName, now_unix_ns, trigger};
use caravan_proto::{AllocClientStatus, AllocStatus, Allocation, EvalStatus, Evaluation};
use caravan_state::status_batch::decode_batch;
use caravan_state::{AllocDetail, Keyspace, StateKey, decode, decode_alloc, decode_status};
use caravan_store::{EventKind, Store};
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// What the watch has seen so far.
#[derive(Default)]
pub struct Seen {
    /// Register eval id → (observed, writer-side) latency.
    pub evals_done: HashMap<String, (Duration, Duration)>,
    /// Live allocations.
    pub placed: HashSet<String>,
    /// Live allocations running on their node.
    pub running: HashSet<String>,
    /// When every register eval was complete.
    pub all_evals_at: Option<Instant>,
    /// When every allocation was placed.
    pub all_placed_at: Option<Instant>,
    /// When every allocation was running.
    pub all_running_at: Option<Instant>,
    /// Writes of allocations by what they carried: (`placed`, "") for the
    /// first write of an allocation's record, (`server`, "") for a later
    /// one, and (client status, "" or `+healthy`/`+unhealthy` once the
    /// deployment health is set) for each write of its client's status.
    pub alloc_writes: BTreeMap<(&'static str, &'static str), usize>,
}

impl Seen {
    /// Counts a status written for allocation `id`, and whether it runs.
    fn status_written(&mut self, id: String, s: &AllocStatus) {
        let health = match s.deployment_healthy {
            Some(true) => "+healthy",
            Some(false) => "+unhealthy",
            None => "",
        };
        *self
            .alloc_writes
            .entry((s.client_status().api_name(), health))
            .or_default() += 1;
        // The bench stops no allocation: one placed and running on its node
        // is live.
        if s.client_status() == AllocClientStatus::Running && self.placed.contains(&id) {
            self.running.insert(id);
        }
    }

    /// Whether the run is over: every eval complete, every alloc running.
    pub fn finished(&self) -> bool {
        self.all_evals_at.is_some() && self.all_running_at.is_some()
    }
}

/// What the watch waits for.
#[derive(Clone, Copy, Debug)]
pub struct Want {
    /// Register evals to see complete.
    pub evals: usize,
    /// Allocations to see placed and running.
    pub allocs: usize,
}

fn since_ns(from: i64, to: i64) -> Duration {
    Duration::from_nanos(u64::try_from(to.saturating_sub(from)).unwrap_or(0))
}

/// Follows evals and allocs through one etcd watch from revision `start`
/// on, until `want` is reached (then `done` is notified).
pub async fn watch(
    store: Arc<dyn Store>,
    keys: Keyspace,
    start: i64,
    want: Want,
    seen: Arc<Mutex<Seen>>,
    done: Arc<Notify>,
) -> anyhow::Result<()> {
    let mut w = store.watch(keys.root(), start).await?;
    while let Some(batch) = w.stream.next().await {
        let batch = batch.context("watch")?;
        let at = Instant::now();
        let at_ns = now_unix_ns();
        let mut seen = seen.lock();
        for ev in batch.events.iter().filter(|e| e.kind == EventKind::Put) {
            match keys.parse(&ev.kv.key) {
                Ok(StateKey::Eval(_)) => {
                    let e: Evaluation = decode(&ev.kv)?;
                    if e.triggered_by == trigger::JOB_REGISTER && e.status() == EvalStatus::Complete
                    {
                        let observed = since_ns(e.create_time_unix_ns, at_ns);
                        let written = since_ns(e.create_time_unix_ns, e.modify_time_unix_ns);
                        seen.evals_done.entry(e.id).or_insert((observed, written));
                    }
                }
                Ok(StateKey::Alloc(_)) => {
                    // Statuses are all the bench reads: the lean decode keeps
                    // its own cost out of the measurement as far as it can.
                    let a: Allocation = decode_alloc(&ev.kv, AllocDetail::Scheduling)?;
                    let what = if ev.kv.create_revision == ev.kv.mod_revision {
                        ("placed", "")
                    } else {
                        ("server", "")
                    };
                    *seen.alloc_writes.entry(what).or_default() += 1;
                    if a.is_live() {
                        seen.placed.insert(a.id);
                    }
                }
                Ok(StateKey::AllocStatus(id)) => {
                    let s = decode_status(&ev.kv)?;
                    seen.status_written(id, &s);
                }
                Ok(StateKey::JobStatus { .. }) => {
                    // Entries moved from a freed batch were counted when
                    // first written.
                    for e in decode_batch(&ev.kv)?
                        .into_iter()
                        .filter(|e| e.revision == ev.kv.mod_revision)
                    {
                        seen.status_written(e.alloc_id, &e.status);
                    }
                }
                _ => {}
            }
        }
        if seen.all_evals_at.is_none() && seen.evals_done.len() >= want.evals {
            seen.all_evals_at = Some(at);
        }
        if seen.all_placed_at.is_none() && seen.placed.len() >= want.allocs {
            seen.all_placed_at = Some(at);
        }
        if seen.all_running_at.is_none() && seen.running.len() >= want.allocs {
            seen.all_running_at = Some(at);
        }
        if seen.finished() {
            done.notify_one();
            return Ok(());
        }
    }
    anyhow::bail!("the watch ended")
}
