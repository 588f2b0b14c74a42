//! One allocation's services: the registrations it holds (a task's while
//! the task runs; the group's from its first main task's start until the
//! allocation stops or its main tasks are all dead), the changes the
//! servers have not been sent yet (they ride on the allocation's next
//! status update), and the checks running for them, whose status changes
//! update the registration, decide deployment health under
//! `health_check = "checks"` and may restart a task (`check_restart`).

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_proto::{Service, ServiceCheck, ServiceRegistration, TaskGroup};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::address;
use super::registration::{self, Placement, Workload};
use super::runner::{self, Report, Scheduled};
use super::status::{RestartWatch, Status};
use crate::driver::TaskHandle;

/// Check results waiting for the alloc runner, per allocation.
const REPORTS_BUFFER: usize = 64;

/// A task of the allocation as the registrations see it.
#[derive(Clone, Debug)]
pub struct TaskNow<'a> {
    /// The task.
    pub name: &'a str,
    /// Running and not being stopped: its services are wanted.
    pub running: bool,
    /// Its run, for `script` checks.
    pub handle: Option<&'a Arc<dyn TaskHandle>>,
}

/// What the registrations are brought in line with.
pub struct Now<'a> {
    /// The allocation's group.
    pub group: &'a TaskGroup,
    /// Where the allocation runs.
    pub placement: Placement<'a>,
    /// Its tasks.
    pub tasks: &'a [TaskNow<'a>],
    /// A main task runs.
    pub main_running: bool,
    /// Every main task is dead.
    pub main_dead: bool,
    /// The allocation is being stopped: nothing stays registered.
    pub stopping: bool,
    /// A service name with its `${...}` replaced, in the environment of the
    /// task (`None`: the group's).
    pub interpolate: &'a dyn Fn(Option<&str>, &str) -> String,
}

/// What one check result changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effect {
    /// The check's status changed: the registration is to be sent again.
    pub changed: bool,
    /// Its `check_restart` limit was reached: what to restart, and why.
    pub restart: Option<(Restart, String)>,
}

/// What a check's `check_restart` restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    /// The task of the check (a task's service, or the `task` a group
    /// service's check names).
    Task(String),
    /// Every running task: a group service's check that names no task
    /// restarts the allocation, as Nomad's group services do.
    Alloc,
}

/// A change the servers have not been sent yet.
#[derive(Clone, Debug)]
enum Change {
    Register(ServiceRegistration),
    Deregister(ServiceRegistration),
}

/// One allocation's registrations and checks.
#[derive(Debug)]
pub struct AllocServices {
    /// Run the checks (a simulated node registers without checking).
    run_checks: bool,
    held: BTreeMap<Workload, Held>,
    unsent: BTreeMap<String, Change>,
    /// Created with the first check: an allocation without checks pays
    /// for no channel.
    feed: Option<Feed>,
    /// Tells results of an earlier registration's checks from the current.
    generation: u64,
}

#[derive(Debug)]
struct Feed {
    tx: mpsc::Sender<Report>,
    rx: mpsc::Receiver<Report>,
    /// Parent of every registration's checks: they stop with the runner.
    cancel: CancellationToken,
}

#[derive(Debug)]
struct Held {
    since: Instant,
    services: Vec<HeldService>,
    /// Stops this workload's checks.
    cancel: Option<CancellationToken>,
}

#[derive(Debug)]
struct HeldService {
    reg: ServiceRegistration,
    checks: Vec<HeldCheck>,
    /// The block's tags and canary tags, to retag on a promotion.
    tags: Vec<String>,
    canary_tags: Vec<String>,
}

#[derive(Debug)]
struct HeldCheck {
    key: String,
    name: String,
    status: Status,
    /// Counts for the allocation's health (`on_update` not `ignore`).
    counts: bool,
    ignore_warnings: bool,
    restart: Option<RestartWatch>,
    /// What `check_restart` restarts.
    target: Restart,
}

impl Drop for AllocServices {
    fn drop(&mut self) {
        if let Some(feed) = &self.feed {
            feed.cancel.cancel();
        }
    }
}

impl AllocServices {
    /// No registrations yet; `run_checks` false registers without checks.
    pub fn new(run_checks: bool) -> Self {
        AllocServices {
            run_checks,
            held: BTreeMap::new(),
            unsent: BTreeMap::new(),
            feed: None,
            generation: 0,
        }
    }

    /// Registers what `now` wants and deregisters what it no longer does;
    /// returns why services could not be registered.
    pub fn sync(&mut self, now: &Now<'_>) -> Vec<String> {
        let mut errors = Vec::new();
        for t in now.tasks {
            let Some(task) = now.group.tasks.iter().find(|x| x.name == t.name) else {
                continue;
            };
            if task.services.is_empty() {
                continue;
            }
            let w = Workload::Task(t.name.to_owned());
            let want = t.running && !now.stopping;
            match (want, self.held.contains_key(&w)) {
                (true, false) => errors.extend(self.register(now, w, &task.services)),
                (false, true) => self.deregister(&w),
                _ => {}
            }
        }
        if !now.group.services.is_empty() {
            let w = Workload::Group(now.group.name.clone());
            let held = self.held.contains_key(&w);
            let want = !now.stopping && (now.main_running || (held && !now.main_dead));
            match (want, held) {
                (true, false) => errors.extend(self.register(now, w, &now.group.services)),
                (false, true) => self.deregister(&w),
                _ => {}
            }
        }
        errors
    }

    fn register(&mut self, now: &Now<'_>, w: Workload, services: &[Service]) -> Vec<String> {
        self.generation += 1;
        let mut errors = Vec::new();
        let mut held = Held {
            since: Instant::now(),
            services: Vec::new(),
            cancel: None,
        };
        // The task's own network (a group's services have none here).
        let driver_ip = w
            .task()
            .and_then(|t| now.tasks.iter().find(|x| x.name == t))
            .and_then(|x| x.handle)
            .and_then(|h| h.driver_ip());
        let reach = now.placement.reach(driver_ip.as_deref());
        for service in services {
            let name = (now.interpolate)(w.task(), &service.name);
            let group = &now.group.name;
            let mut reg = match registration::build(
                service,
                &name,
                &w,
                group,
                now.placement,
                driver_ip.as_deref(),
            ) {
                Ok(reg) => reg,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let mut checks = Vec::new();
            if self.run_checks {
                for (i, check) in service.checks.iter().enumerate() {
                    let key = format!("{}/{}/{i}", self.generation, reg.id);
                    let on_update = registration::on_update(check, service);
                    let check_task = w
                        .task()
                        .map(str::to_owned)
                        .or_else(|| Some(check.task_name.clone()).filter(|t| !t.is_empty()));
                    let handle = check_task
                        .as_deref()
                        .and_then(|t| now.tasks.iter().find(|x| x.name == t))
                        .and_then(|x| x.handle);
                    let cancel = held
                        .cancel
                        .get_or_insert_with(|| self.feed_cancel().child_token())
                        .clone();
                    match schedule(key.clone(), check, service, reach, handle) {
                        Ok(s) => {
                            let tx = self.feed_tx();
                            tokio::spawn(runner::run(s, tx, cancel));
                        }
                        Err(e) => {
                            // Shown with the check's result: why it never runs.
                            if let Some(result) = reg.checks.get_mut(i) {
                                result.output.clone_from(&e);
                            }
                            errors.push(format!("service {name:?}: {e}"));
                        }
                    }
                    checks.push(HeldCheck {
                        key,
                        name: check.name.clone(),
                        status: super::Tracker::new(check).status(),
                        counts: on_update != "ignore",
                        ignore_warnings: on_update == "ignore_warnings",
                        restart: RestartWatch::new(check.check_restart.as_ref()),
                        target: check_task.map_or(Restart::Alloc, Restart::Task),
                    });
                }
            }
            self.unsent
                .insert(reg.id.clone(), Change::Register(reg.clone()));
            held.services.push(HeldService {
                reg,
                checks,
                tags: service.tags.clone(),
                canary_tags: service.canary_tags.clone(),
            });
        }
        self.held.insert(w, held);
        errors
    }

    /// Deregisters every workload's services (their checks stop): the next
    /// [`AllocServices::sync`] registers what the group says now. An
    /// instance registered again under the same ID goes out as one rewrite.
    pub fn forget_all(&mut self) {
        let held: Vec<Workload> = self.held.keys().cloned().collect();
        for w in &held {
            self.deregister(w);
        }
    }

    fn deregister(&mut self, w: &Workload) {
        let Some(held) = self.held.remove(w) else {
            return;
        };
        if let Some(cancel) = held.cancel {
            cancel.cancel();
        }
        for s in held.services {
            let gone = ServiceRegistration {
                id: s.reg.id.clone(),
                service_name: s.reg.service_name,
                namespace: s.reg.namespace,
                alloc_id: s.reg.alloc_id,
                ..Default::default()
            };
            self.unsent.insert(s.reg.id, Change::Deregister(gone));
        }
    }

    fn feed(&mut self) -> &mut Feed {
        self.feed.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel(REPORTS_BUFFER);
            Feed {
                tx,
                rx,
                cancel: CancellationToken::new(),
            }
        })
    }

    fn feed_tx(&mut self) -> mpsc::Sender<Report> {
        self.feed().tx.clone()
    }

    fn feed_cancel(&mut self) -> CancellationToken {
        self.feed().cancel.clone()
    }

    /// Sets the tags of every registration for the allocation being a
    /// canary or not (a promotion drops the canary tags); the registrations
    /// whose tags change are to be sent again.
    pub fn set_canary(&mut self, canary: bool) {
        for s in self.held.values_mut().flat_map(|h| &mut h.services) {
            let tags = if canary && !s.canary_tags.is_empty() {
                &s.canary_tags
            } else {
                &s.tags
            };
            if s.reg.tags != *tags {
                s.reg.tags = tags.clone();
                self.unsent
                    .insert(s.reg.id.clone(), Change::Register(s.reg.clone()));
            }
        }
    }

    /// Whether any check runs (only then is [`Self::next_report`] worth awaiting).
    pub fn checking(&self) -> bool {
        self.feed.is_some() && self.held.values().any(|h| h.cancel.is_some())
    }

    /// The next check result; waits forever when no check runs.
    pub async fn next_report(&mut self) -> Report {
        match self.feed.as_mut() {
            Some(feed) => match feed.rx.recv().await {
                Some(r) => r,
                // (The feed keeps a sender: never closed.)
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// Takes one check result at `now` (`unix_s`: the same in Unix seconds).
    pub fn on_report(&mut self, r: &Report, now: Instant, unix_s: i64) -> Effect {
        for held in self.held.values_mut() {
            let since = held.since;
            for s in &mut held.services {
                let Some(i) = s.checks.iter().position(|c| c.key == r.id) else {
                    continue;
                };
                let check = &mut s.checks[i];
                check.status = r.status;
                if let Some(result) = s.reg.checks.get_mut(i) {
                    result.status = r.status.as_str().to_owned();
                    result.output = r.seen.output.clone();
                    result.status_code = i32::from(r.seen.status_code);
                    result.timestamp = unix_s;
                }
                let due = check
                    .restart
                    .as_mut()
                    .is_some_and(|w| w.observe(now.saturating_duration_since(since), r.status));
                let restart = due.then(|| {
                    let why = format!("healthcheck: check {:?} unhealthy", check.name);
                    (check.target.clone(), why)
                });
                if r.changed {
                    self.unsent
                        .insert(s.reg.id.clone(), Change::Register(s.reg.clone()));
                }
                return Effect {
                    changed: r.changed,
                    restart,
                };
            }
        }
        // A result of a registration since removed.
        Effect::default()
    }

    /// Whether every check that counts for health passes (a warning passes
    /// a check whose `on_update` is `ignore_warnings`).
    pub fn checks_healthy(&self) -> bool {
        self.held
            .values()
            .flat_map(|h| &h.services)
            .flat_map(|s| &s.checks)
            .filter(|c| c.counts)
            .all(|c| {
                c.status == Status::Passing || (c.ignore_warnings && c.status == Status::Warning)
            })
    }

    /// Whether changes wait to be sent.
    pub fn has_unsent(&self) -> bool {
        !self.unsent.is_empty()
    }

    /// The changes to send: registrations and deregistrations.
    pub fn take_unsent(&mut self) -> (Vec<ServiceRegistration>, Vec<ServiceRegistration>) {
        let mut registered = Vec::new();
        let mut deregistered = Vec::new();
        for change in std::mem::take(&mut self.unsent).into_values() {
            match change {
                Change::Register(r) => registered.push(r),
                Change::Deregister(r) => deregistered.push(r),
            }
        }
        (registered, deregistered)
    }

    /// Forgets the unsent changes: the servers have them already (an
    /// allocation woken from a park, which parked only once all was sent).
    pub fn mark_sent(&mut self) {
        self.unsent.clear();
    }
}

/// The check `check` of `service`, ready to run: its address by Nomad's
/// rules for checks (the service's port unless it names one; the host's
/// address unless it sets a mode or the service a custom address).
fn schedule(
    key: String,
    check: &ServiceCheck,
    service: &Service,
    reach: address::Reach<'_>,
    task: Option<&Arc<dyn TaskHandle>>,
) -> Result<Scheduled, String> {
    let addr = if check.r#type == "script" {
        String::new()
    } else {
        let mode = match check.address_mode.as_str() {
            "" if !service.address.is_empty() => "auto",
            "" => "host",
            m => m,
        };
        let label = if check.port_label.is_empty() {
            &service.port_label
        } else {
            &check.port_label
        };
        let (ip, port) = address::resolve(&service.address, mode, label, reach)
            .map_err(|e| format!("check {:?}: {e}", check.name))?;
        if port == 0 {
            return Err(format!("check {:?}: no port to check", check.name));
        }
        address::dial_address(&ip, port)
    };
    Scheduled::new(key, check, addr, task)
}

/// How long a task has run, for tests of `check_restart`.
#[cfg(test)]
fn backdate(s: &mut AllocServices, by: std::time::Duration) {
    for h in s.held.values_mut() {
        h.since -= by;
    }
}

#[cfg(test)]
#[path = "alloc_services_tests.rs"]
mod tests;
