//! The faults of a run, on a fixed cadence with seeded choices: every
//! `kill_every` a SIGKILL of one process among the leaders, the gateways,
//! the workers and the client nodes, restarted at once (a leader once
//! another replica has taken over, so the failover is timed); every
//! `freeze_every` a SIGSTOP of a leader for `freeze_for` (a leader is taken
//! away only while another replica of its service is up and not frozen);
//! every `etcd_every`
//! an etcd member down for `etcd_down_for` (the first time the etcd leader;
//! SIGKILL and SIGSTOP in turn). Processes that exit on their own are noted
//! and restarted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_integration_tests::{Cluster, EtcdCluster, Service};
use nix::sys::signal::Signal;
use parking_lot::Mutex;
use rand::seq::IndexedRandom;
use rand_pcg::Pcg64;
use serde::Serialize;

use crate::Args;
use crate::leaders::{ELECTED, Leaders};

/// How often the schedule is looked at.
const TICK: Duration = Duration::from_millis(100);
/// How long a killed leader's service may take to elect another before the
/// failover counts as missing (and the leader is restarted anyway).
const FAILOVER_LIMIT: Duration = Duration::from_secs(60);
/// How long a failed restart waits before it is tried again.
const RESTART_RETRY: Duration = Duration::from_secs(5);

/// What was done to what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL of a leader, restarted once another replica leads.
    KillLeader,
    /// SIGKILL of any other process, restarted at once.
    Kill,
    /// SIGSTOP of a leader, SIGCONT later.
    FreezeLeader,
    /// SIGTERM of a leader (a graceful resign), restarted once another leads.
    ResignLeader,
    /// SIGKILL of an etcd member, restarted later with its data.
    KillEtcd,
    /// SIGSTOP of an etcd member, SIGCONT later.
    FreezeEtcd,
}

/// One fault and, for a leader's, how long the failover took.
#[derive(Clone, Debug, Serialize)]
pub struct Fault {
    /// Seconds since the faults began.
    pub at_s: f64,
    /// What was done.
    pub kind: FaultKind,
    /// The process, or `etcd-<i>` (with `(leader)` for the etcd leader).
    pub target: String,
    /// For a leader: seconds from the fault to another replica's election.
    pub failover_s: Option<f64>,
    #[serde(skip)]
    at: Instant,
    #[serde(skip)]
    leader: Option<(Service, String)>,
}

/// Something to do later.
#[derive(Debug)]
enum Later {
    /// Start a process again.
    Restart(String),
    /// Start a killed leader again once its service has another leader.
    RestartAfterFailover(String, usize),
    /// SIGCONT a frozen process.
    Thaw(String),
    /// Bring an etcd member back.
    EtcdBack(usize),
}

/// The faults done so far and what went wrong doing them.
#[derive(Debug, Default)]
pub struct Record {
    /// Every fault, in order.
    pub faults: Vec<Fault>,
    /// Processes that exited by themselves, restarts that failed,
    /// failovers that never happened.
    pub problems: Vec<String>,
}

/// The schedule and what is pending.
pub struct Chaos<'a> {
    args: &'a Args,
    rng: Pcg64,
    leaders: Arc<Mutex<Leaders>>,
    start: Instant,
    pending: Vec<(Instant, Later)>,
    /// Processes down or frozen now, not to be picked again.
    busy: Vec<String>,
    next_kill: Instant,
    next_freeze: Instant,
    next_etcd: Instant,
    etcd_faults: usize,
    /// What happened.
    pub record: Record,
}

impl<'a> Chaos<'a> {
    /// A schedule starting now; the first etcd fault at 15 s, the first
    /// freeze at 20 s, kills from `kill_every` on.
    pub fn new(args: &'a Args, rng: Pcg64, leaders: Arc<Mutex<Leaders>>) -> Chaos<'a> {
        let start = Instant::now();
        let secs = Duration::from_secs;
        Chaos {
            args,
            rng,
            leaders,
            start,
            pending: Vec::new(),
            busy: Vec::new(),
            next_kill: start + secs(args.kill_every),
            next_freeze: start + secs(args.freeze_every.min(20)),
            next_etcd: start + secs(args.etcd_every.min(15)),
            etcd_faults: 0,
            record: Record::default(),
        }
    }

    /// Runs the faults for `duration`, then brings everything back up.
    pub async fn run(&mut self, cluster: &mut Cluster, etcd: &mut EtcdCluster, duration: Duration) {
        let end = self.start + duration;
        while Instant::now() < end {
            tokio::time::sleep(TICK).await;
            self.step(cluster, etcd, true).await;
        }
        // Faults stop; what is down comes back, in its own time.
        while !self.pending.is_empty() {
            tokio::time::sleep(TICK).await;
            self.step(cluster, etcd, false).await;
        }
    }

    /// SIGTERMs each elected service's leader in turn, timing the failover
    /// of a graceful resign, and restarts it.
    pub async fn resign_each_leader(&mut self, cluster: &mut Cluster, etcd: &mut EtcdCluster) {
        for service in ELECTED {
            let Some((name, addr)) = self.leader_process(cluster, service) else {
                self.record
                    .problems
                    .push(format!("{}: no leader to resign", service.name()));
                continue;
            };
            let at = Instant::now();
            if let Err(err) = cluster.terminate(&name, Duration::from_secs(10)) {
                self.record
                    .problems
                    .push(format!("SIGTERM {name}: {err:#}"));
            }
            self.note(
                FaultKind::ResignLeader,
                name.clone(),
                at,
                Some((service, addr)),
            );
            self.busy.push(name.clone());
            let fault = self.record.faults.len() - 1;
            self.pending
                .push((at, Later::RestartAfterFailover(name, fault)));
            while !self.pending.is_empty() {
                tokio::time::sleep(TICK).await;
                self.step(cluster, etcd, false).await;
            }
        }
    }

    async fn step(&mut self, cluster: &mut Cluster, etcd: &mut EtcdCluster, faults: bool) {
        let now = Instant::now();
        self.restart_exited(cluster);
        self.do_pending(cluster, etcd, now).await;
        if !faults {
            return;
        }
        if now >= self.next_kill {
            self.next_kill += Duration::from_secs(self.args.kill_every);
            self.kill_one(cluster).await;
        }
        if now >= self.next_freeze {
            self.next_freeze += Duration::from_secs(self.args.freeze_every);
            self.freeze_leader(cluster);
        }
        if now >= self.next_etcd {
            self.next_etcd += Duration::from_secs(self.args.etcd_every);
            self.etcd_fault(etcd).await;
        }
    }

    /// A process that exited without being killed is a bug to report; it
    /// is started again so the run goes on.
    fn restart_exited(&mut self, cluster: &mut Cluster) {
        for line in cluster.exited() {
            let name = line.split(' ').next().unwrap_or_default().to_string();
            // One already waiting for its restart was reported then.
            if self.busy.contains(&name) {
                continue;
            }
            let at = self.secs(Instant::now());
            eprintln!("{at:>6.1} s: {line}");
            self.record
                .problems
                .push(format!("at {at:.1} s: {line} (on its own)"));
            self.busy.push(name.clone());
            self.pending
                .push((Instant::now() + RESTART_RETRY, Later::Restart(name)));
        }
    }

    async fn do_pending(&mut self, cluster: &mut Cluster, etcd: &mut EtcdCluster, now: Instant) {
        let due: Vec<Later> = {
            let (due, keep): (Vec<_>, Vec<_>) =
                self.pending.drain(..).partition(|(at, _)| *at <= now);
            self.pending = keep;
            due.into_iter().map(|(_, l)| l).collect()
        };
        for later in due {
            match later {
                Later::Restart(name) => self.restart(cluster, name).await,
                Later::RestartAfterFailover(name, fault) => {
                    let f = &self.record.faults[fault];
                    let (since, kind) = (f.at, f.kind);
                    let Some((service, old)) = f.leader.clone() else {
                        self.restart(cluster, name).await;
                        continue;
                    };
                    let replaced = self.leaders.lock().replaced_after(service, &old, since);
                    match replaced {
                        Some(at) => {
                            let took = at.duration_since(since).as_secs_f64();
                            self.record.faults[fault].failover_s = Some(took);
                            self.restart(cluster, name).await;
                        }
                        None if now.duration_since(since) > FAILOVER_LIMIT => {
                            self.record.problems.push(format!(
                                "{}: no other leader within {FAILOVER_LIMIT:?} after {kind:?} of {name}",
                                service.name(),
                            ));
                            self.restart(cluster, name).await;
                        }
                        None => self
                            .pending
                            .push((now + TICK, Later::RestartAfterFailover(name, fault))),
                    }
                }
                Later::Thaw(name) => {
                    if let Err(err) = cluster.signal(&name, Signal::SIGCONT) {
                        self.record
                            .problems
                            .push(format!("SIGCONT {name}: {err:#}"));
                    }
                    self.busy.retain(|b| *b != name);
                }
                Later::EtcdBack(i) => {
                    if let Err(err) = etcd.restart(i).await {
                        self.record
                            .problems
                            .push(format!("etcd member {i} did not come back: {err:#}"));
                        self.pending.push((now + RESTART_RETRY, Later::EtcdBack(i)));
                    }
                }
            }
        }
        self.fill_failovers();
    }

    /// Failovers of frozen leaders, timed as they are seen.
    fn fill_failovers(&mut self) {
        let leaders = self.leaders.lock();
        for f in &mut self.record.faults {
            if f.kind != FaultKind::FreezeLeader || f.failover_s.is_some() {
                continue;
            }
            if let Some((service, old)) = &f.leader
                && let Some(at) = leaders.replaced_after(*service, old, f.at)
            {
                f.failover_s = Some(at.duration_since(f.at).as_secs_f64());
            }
        }
    }

    async fn restart(&mut self, cluster: &mut Cluster, name: String) {
        match cluster.restart(&name).await {
            Ok(()) => self.busy.retain(|b| *b != name),
            Err(err) => {
                let at = self.secs(Instant::now());
                eprintln!("{at:>6.1} s: restarting {name} failed: {err:#}");
                self.record
                    .problems
                    .push(format!("at {at:.1} s: restarting {name} failed: {err:#}"));
                self.pending
                    .push((Instant::now() + RESTART_RETRY, Later::Restart(name)));
            }
        }
    }

    /// The process name and address of `service`'s leader now.
    fn leader_process(&self, cluster: &Cluster, service: Service) -> Option<(String, String)> {
        let addr = self.leaders.lock().of(service)?;
        let name = cluster.process_at(service, &addr)?.to_string();
        Some((name, addr))
    }

    /// Whether another replica of `service` than `leader` is up and not
    /// frozen, so that it can take over. A leader without one is not taken
    /// away: nothing could replace it before a replica came back, and the
    /// failover would time that return (a restart or the end of a freeze).
    fn has_standby(&self, cluster: &Cluster, service: Service, leader: &str) -> bool {
        cluster
            .process_names()
            .iter()
            .any(|name| cluster.runs(name, service) && name != leader && !self.busy.contains(name))
    }

    async fn kill_one(&mut self, cluster: &mut Cluster) {
        let mut candidates: Vec<(String, Option<(Service, String)>)> = Vec::new();
        for service in ELECTED {
            if let Some((name, addr)) = self.leader_process(cluster, service)
                && self.has_standby(cluster, service, &name)
            {
                candidates.push((name, Some((service, addr))));
            }
        }
        for name in cluster.process_names() {
            let other = [
                Service::Gateway,
                Service::SchedulerWorker,
                Service::ClientNode,
            ]
            .iter()
            .any(|s| name.starts_with(s.name()))
                || cluster.is_server(&name);
            if other {
                candidates.push((name, None));
            }
        }
        candidates.retain(|(name, _)| !self.busy.contains(name));
        let Some((name, leader)) = candidates.choose(&mut self.rng).cloned() else {
            return;
        };
        let at = Instant::now();
        if let Err(err) = cluster.crash_named(&name) {
            self.record
                .problems
                .push(format!("SIGKILL {name}: {err:#}"));
            return;
        }
        eprintln!("{:>6.1} s: SIGKILL {name}", self.secs(at));
        self.busy.push(name.clone());
        match leader {
            Some(leader) => {
                self.note(FaultKind::KillLeader, name.clone(), at, Some(leader));
                let fault = self.record.faults.len() - 1;
                self.pending
                    .push((at, Later::RestartAfterFailover(name, fault)));
            }
            None => {
                self.note(FaultKind::Kill, name.clone(), at, None);
                self.restart(cluster, name).await;
            }
        }
    }

    fn freeze_leader(&mut self, cluster: &mut Cluster) {
        let leaders: Vec<(Service, String, String)> = ELECTED
            .into_iter()
            .filter_map(|s| self.leader_process(cluster, s).map(|(n, a)| (s, n, a)))
            .filter(|(_, name, _)| !self.busy.contains(name))
            .filter(|(service, name, _)| self.has_standby(cluster, *service, name))
            .collect();
        let Some((service, name, addr)) = leaders.choose(&mut self.rng).cloned() else {
            return;
        };
        let at = Instant::now();
        match cluster.signal(&name, Signal::SIGSTOP) {
            Ok(true) => {}
            Ok(false) => return,
            Err(err) => {
                self.record
                    .problems
                    .push(format!("SIGSTOP {name}: {err:#}"));
                return;
            }
        }
        eprintln!(
            "{:>6.1} s: SIGSTOP {name} for {} s",
            self.secs(at),
            self.args.freeze_for
        );
        self.busy.push(name.clone());
        self.note(
            FaultKind::FreezeLeader,
            name.clone(),
            at,
            Some((service, addr)),
        );
        self.pending.push((
            at + Duration::from_secs(self.args.freeze_for),
            Later::Thaw(name),
        ));
    }

    async fn etcd_fault(&mut self, etcd: &mut EtcdCluster) {
        let leader = etcd.leader().await;
        let up: Vec<usize> = (0..etcd.len()).filter(|&i| etcd.is_up(i)).collect();
        // Never more than one member down: the rest keep a quorum.
        if up.len() < etcd.len() {
            return;
        }
        let target = match leader {
            Some(l) if self.etcd_faults == 0 => l,
            _ => match up.choose(&mut self.rng) {
                Some(&i) => i,
                None => return,
            },
        };
        let kill = self.etcd_faults.is_multiple_of(2);
        self.etcd_faults += 1;
        let at = Instant::now();
        let done = if kill {
            etcd.kill(target)
        } else {
            etcd.pause(target)
        };
        if let Err(err) = done {
            self.record
                .problems
                .push(format!("etcd member {target}: {err:#}"));
            return;
        }
        let role = if leader == Some(target) {
            " (leader)"
        } else {
            ""
        };
        let kind = if kill {
            FaultKind::KillEtcd
        } else {
            FaultKind::FreezeEtcd
        };
        eprintln!(
            "{:>6.1} s: {kind:?} etcd-{target}{role} for {} s",
            self.secs(at),
            self.args.etcd_down_for
        );
        self.note(kind, format!("etcd-{target}{role}"), at, None);
        self.pending.push((
            at + Duration::from_secs(self.args.etcd_down_for),
            Later::EtcdBack(target),
        ));
    }

    fn note(
        &mut self,
        kind: FaultKind,
        target: String,
        at: Instant,
        leader: Option<(Service, String)>,
    ) {
        self.record.faults.push(Fault {
            at_s: self.secs(at),
            kind,
            target,
            failover_s: None,
            at,
            leader,
        });
    }

    fn secs(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }
}
