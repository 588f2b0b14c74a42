//! The alloc runner's side of its services: registrations brought in line
//! with its tasks before each report (so a registration rides on the status
//! update that says its task runs), and check results taken in (a status
//! change goes out in a report and may decide the deployment's health; a
//! `check_restart` restarts the task).

use std::sync::Arc;

use caravan_model::now_unix_ns;
use caravan_proto::{Allocation, Job};
use tokio::time::Instant;

use super::AllocRunner;
use crate::checks::alloc_services::{Now, Restart, TaskNow};
use crate::checks::registration::{self, Placement};
use crate::checks::runner::Report;
use crate::lifecycle::Phase;
use crate::task_env::TaskEnv;
use crate::task_runner::{TaskControl, states};

impl AllocRunner {
    /// An in-place update to another version of the job, with its alloc:
    /// the group's services are registered again from the new version's
    /// blocks (an instance whose ID stays is rewritten, one that went is
    /// removed).
    pub(super) fn on_job_update(&mut self, alloc: Arc<Allocation>, job: Arc<Job>) {
        let group_name = alloc.task_group.clone();
        let changed = self.take_job(job, &group_name);
        self.on_alloc_update(alloc);
        if changed {
            self.sync_services();
            if self.services.has_unsent() && !self.detaching {
                self.report();
            }
        }
    }

    /// Takes the new version's job and group; whether their services
    /// changed (then every registration is dropped, to be made again).
    fn take_job(&mut self, job: Arc<Job>, group_name: &str) -> bool {
        let Some(group) = self.ctx.jobs.group(&job, group_name) else {
            return false;
        };
        let services_changed = self.group.as_ref().is_none_or(|old| {
            old.services != group.services
                || old
                    .tasks
                    .iter()
                    .map(|t| &t.services)
                    .ne(group.tasks.iter().map(|t| &t.services))
        });
        self.job = job;
        self.group = Some(group);
        if services_changed {
            self.services.forget_all();
        }
        services_changed
    }

    /// Registers the services of what runs now and deregisters the rest.
    pub(super) fn sync_services(&mut self) {
        let Some(group) = self.group.clone() else {
            return;
        };
        if group.services.is_empty() && group.tasks.iter().all(|t| t.services.is_empty()) {
            return;
        }
        let running = |name: &str| {
            self.slots
                .get(name)
                .is_some_and(|s| s.state.state == states::RUNNING && s.kill.borrow().is_none())
        };
        let tasks: Vec<TaskNow<'_>> = group
            .tasks
            .iter()
            .filter_map(|t| {
                let slot = self.slots.get(&t.name)?;
                Some(TaskNow {
                    name: &t.name,
                    running: running(&t.name),
                    handle: slot.handle.as_ref(),
                })
            })
            .collect();
        let mains = || group.tasks.iter().filter(|t| Phase::of(t) == Phase::Main);
        let main_running = mains().any(|t| running(&t.name));
        let main_dead = mains().count() > 0
            && mains().all(|t| {
                self.slots
                    .get(&t.name)
                    .is_some_and(|s| s.state.state == states::DEAD)
            });
        let ports = registration::alloc_ports(&self.alloc);
        let (ctx, alloc, job) = (&self.ctx, &self.alloc, &self.job);
        // A group service's name is interpolated in its first task's
        // environment; a simulated node builds no environment at all.
        let interpolate = |task: Option<&str>, input: &str| -> String {
            if ctx.simulated || !input.contains("${") {
                return input.to_owned();
            }
            let task = task
                .and_then(|n| group.tasks.iter().find(|t| t.name == n))
                .or_else(|| group.tasks.first());
            match task {
                Some(t) => TaskEnv::build(ctx.node.clone(), alloc, job, &group, t, None, false)
                    .interpolate(input),
                None => input.to_owned(),
            }
        };
        let errors = self.services.sync(&Now {
            group: &group,
            placement: Placement {
                alloc,
                node: &ctx.node,
                ports: &ports,
            },
            tasks: &tasks,
            main_running,
            main_dead,
            stopping: self.stopping || self.destroying,
            interpolate: &interpolate,
        });
        for e in errors {
            tracing::warn!(alloc = %self.alloc.id, error = %e, "cannot register a service");
        }
    }

    /// One result of one of the alloc's checks.
    pub(super) fn on_check_report(&mut self, r: Report) {
        let unix_s = now_unix_ns() / 1_000_000_000;
        let effect = self.services.on_report(&r, Instant::now(), unix_s);
        if let Some((target, reason)) = effect.restart {
            tracing::info!(alloc = %self.alloc.id, ?target, %reason, "restarting for a failing check");
            for (name, slot) in &self.slots {
                let asked = match &target {
                    Restart::Task(task) => task == name,
                    Restart::Alloc => slot.state.state == states::RUNNING,
                };
                if asked {
                    let reason = reason.clone().into_boxed_str();
                    let _ = slot.control.send(TaskControl::CheckRestart(reason));
                }
            }
        }
        if effect.changed {
            self.check_health();
            if !self.detaching {
                self.report();
            }
        }
    }
}
