//! Registering the benchmark's jobs over the gateways' HTTP APIs, spread
//! round-robin: as a burst with a fixed number in flight (closed loop), or
//! at a steady rate whatever the cluster's pace (open loop).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use caravan_integration_tests::{HttpApi, jobs};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

/// The jobs to register: `jobs` service jobs of `count` copies of `task`.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Jobs to register.
    pub jobs: usize,
    /// Allocations per job.
    pub count: usize,
    /// The task of every job (Nomad JSON).
    pub task: Value,
    /// Whether each group has a service block.
    pub service: bool,
}

impl Workload {
    fn job(&self, i: usize) -> Value {
        let id = format!("bench-{i:05}");
        let mut job = jobs::service_job(
            &id,
            i64::try_from(self.count).unwrap_or(i64::MAX),
            self.task.clone(),
        );
        if self.service {
            job["Job"]["TaskGroups"][0]["Services"] =
                serde_json::json!([{ "Name": id, "Provider": "nomad" }]);
        }
        job
    }
}

/// How the registrations went.
#[derive(Clone, Debug, Default)]
pub struct Registered {
    /// The HTTP round trip of each registration.
    pub took: Vec<Duration>,
    /// From the first request sent to the last one sent.
    pub sent_in: Duration,
    /// From the first request sent to the last answer.
    pub answered_in: Duration,
    /// Open loop: ticks that found every in-flight slot taken and had to
    /// wait for one (the schedule then caught up in a burst).
    pub waited_for_slot: usize,
}

/// Registers every job with `concurrency` requests in flight, each sender
/// sending its next job as soon as its last is answered.
pub async fn burst(
    https: &[HttpApi],
    work: &Workload,
    concurrency: usize,
) -> anyhow::Result<Registered> {
    anyhow::ensure!(!https.is_empty(), "no gateway to register with");
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut senders = JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (https, work, next) = (https.to_vec(), work.clone(), next.clone());
        senders.spawn(async move {
            let mut took = Vec::new();
            let mut last_sent = Duration::ZERO;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= work.jobs {
                    return anyhow::Ok((took, last_sent));
                }
                last_sent = start.elapsed();
                took.push(register(&https[i % https.len()], &work, i).await?);
            }
        });
    }
    let mut done = Registered::default();
    while let Some(sender) = senders.join_next().await {
        let (took, last_sent) = sender??;
        done.took.extend(took);
        done.sent_in = done.sent_in.max(last_sent);
    }
    done.answered_in = start.elapsed();
    Ok(done)
}

/// Registers every job at `rate` per second on a fixed schedule, never
/// waiting for earlier answers, with at most `max_in_flight` unanswered.
pub async fn open_loop(
    https: &[HttpApi],
    work: &Workload,
    rate: f64,
    max_in_flight: usize,
) -> anyhow::Result<Registered> {
    anyhow::ensure!(!https.is_empty(), "no gateway to register with");
    anyhow::ensure!(
        rate.is_finite() && rate > 0.0,
        "--rate must be a positive number of jobs per second"
    );
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    // A tick delayed by a full house is made up at once: the offered load
    // stays `rate` on average, as an open-loop client's would.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let slots = Arc::new(Semaphore::new(max_in_flight.max(1)));
    let mut in_flight = JoinSet::new();
    let mut done = Registered::default();
    let start = Instant::now();
    for i in 0..work.jobs {
        ticker.tick().await;
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                done.waited_for_slot += 1;
                slots.clone().acquire_owned().await?
            }
        };
        let (http, work) = (https[i % https.len()].clone(), work.clone());
        in_flight.spawn(async move {
            let took = register(&http, &work, i).await;
            drop(slot);
            took
        });
        // Reap what has finished so a failure stops the run early.
        while let Some(answered) = in_flight.try_join_next() {
            done.took.push(answered??);
        }
    }
    done.sent_in = start.elapsed();
    while let Some(answered) = in_flight.join_next().await {
        done.took.push(answered??);
    }
    done.answered_in = start.elapsed();
    Ok(done)
}

/// Registers job `i`; returns the HTTP round trip.
async fn register(http: &HttpApi, work: &Workload, i: usize) -> anyhow::Result<Duration> {
    let job = work.job(i);
    let start = Instant::now();
    http.put_json("/v1/jobs", &job).await?.ok_json()?;
    Ok(start.elapsed())
}
