//! Runs one check on its schedule: the first probe half an interval after
//! it starts (as Nomad's client does, to give the task a moment), then one
//! each interval, every result folded into its status and handed on.

use std::sync::Arc;
use std::time::Duration;

use caravan_proto::ServiceCheck;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::probe::{Observation, Probe};
use super::status::{Status, Tracker};
use crate::driver::TaskHandle;

/// The shortest interval and timeout a check runs with, whatever it asks.
const FLOOR: Duration = Duration::from_millis(10);

/// One check of one allocation, ready to run.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The check's ID among the allocation's checks.
    pub id: String,
    /// The `host:port` it probes.
    pub addr: String,
    /// Time between two probes.
    pub interval: Duration,
    /// How long one probe may take.
    pub timeout: Duration,
    probe: Probe,
    tracker: Tracker,
}

impl Scheduled {
    /// `check` to be run against `addr` (a `script` check: in the run
    /// `task`), or why this client cannot run it.
    pub fn new(
        id: String,
        check: &ServiceCheck,
        addr: String,
        task: Option<&Arc<dyn TaskHandle>>,
    ) -> Result<Self, String> {
        let duration = |ns: i64| Duration::from_nanos(u64::try_from(ns).unwrap_or(0)).max(FLOOR);
        Ok(Scheduled {
            id,
            addr,
            interval: duration(check.interval_ns),
            timeout: duration(check.timeout_ns),
            probe: Probe::of(check, task)?,
            tracker: Tracker::new(check),
        })
    }
}

/// One result of a check.
#[derive(Clone, Debug)]
pub struct Report {
    /// The check's ID.
    pub id: String,
    /// Its status after this result.
    pub status: Status,
    /// Whether this result changed the status (only those need writing).
    pub changed: bool,
    /// What the probe saw.
    pub seen: Observation,
}

/// Runs `check` until `cancel` or until nobody takes its reports.
pub async fn run(mut check: Scheduled, reports: mpsc::Sender<Report>, cancel: CancellationToken) {
    let mut wait = check.interval / 2;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let seen = tokio::select! {
            () = cancel.cancelled() => return,
            seen = check.probe.run(&check.addr, check.timeout) => seen,
        };
        let changed = check.tracker.record(seen.outcome);
        let report = Report {
            id: check.id.clone(),
            status: check.tracker.status(),
            changed,
            seen,
        };
        if reports.send(report).await.is_err() {
            return;
        }
        wait = check.interval;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Outcome;
    use tokio::net::TcpListener;

    fn tcp(interval_ms: i64) -> ServiceCheck {
        ServiceCheck {
            name: "port".into(),
            r#type: "tcp".into(),
            interval_ns: interval_ms * 1_000_000,
            timeout_ns: 1_000_000_000,
            failures_before_critical: 2,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn reports_each_result_and_marks_the_changes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let check = Scheduled::new("c1".into(), &tcp(40), addr, None).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(check, tx, cancel.clone()));

        let first = rx.recv().await.unwrap();
        assert_eq!((first.status, first.changed), (Status::Passing, true));
        let second = rx.recv().await.unwrap();
        assert_eq!((second.status, second.changed), (Status::Passing, false));

        // The port closes: critical after two failures in a row.
        drop(listener);
        let mut failing = Vec::new();
        while failing.len() < 2 {
            let r = rx.recv().await.unwrap();
            if r.seen.outcome == Outcome::Failure {
                failing.push(r);
            }
        }
        assert_eq!(
            (failing[0].status, failing[0].changed),
            (Status::Passing, false)
        );
        assert_eq!(
            (failing[1].status, failing[1].changed),
            (Status::Critical, true)
        );
        assert_eq!(failing[1].id, "c1");

        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn the_first_probe_waits_half_an_interval() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let check = Scheduled::new("c".into(), &tcp(400), addr, None).unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let started = tokio::time::Instant::now();
        let cancel = CancellationToken::new();
        tokio::spawn(run(check, tx, cancel.clone()));
        rx.recv().await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(200));
        cancel.cancel();
    }

    #[test]
    fn a_check_the_client_cannot_run_is_refused_when_scheduled() {
        let script = ServiceCheck {
            name: "s".into(),
            r#type: "script".into(),
            ..Default::default()
        };
        assert!(Scheduled::new("c".into(), &script, "127.0.0.1:1".into(), None).is_err());
    }
}
