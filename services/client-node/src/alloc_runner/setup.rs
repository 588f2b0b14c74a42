//! An alloc runner's start: directories and payload on first start, or the
//! tasks found again after a client restart.

use std::sync::Arc;

use caravan_model::{AllocExt, now_unix_ns};
use caravan_proto::{Task, TaskGroup, TaskState};

use super::AllocRunner;
use crate::driver::{HandleState, TaskHandle};
use crate::lifecycle;
use crate::network::GroupNetwork;
use crate::state_dir::AllocRecord;
use crate::task_runner::{KillRequest, event, events, push_event, states};

impl AllocRunner {
    /// First start: dirs, payload, task states, then the tasks.
    pub(super) async fn setup(&mut self, group: &TaskGroup) {
        for task in &group.tasks {
            let mut state = TaskState {
                state: states::PENDING.into(),
                ..Default::default()
            };
            push_event(
                &mut state,
                event(events::RECEIVED, "Task received by client"),
            );
            self.slots
                .insert(task.name.clone(), self.slot(state, task.leader));
        }
        if let Err(msg) = self.build_dirs(group) {
            self.fail_setup(msg);
            return;
        }
        for slot in self.slots.values_mut() {
            push_event(
                &mut slot.state,
                event(events::TASK_SETUP, "Building Task Directory"),
            );
        }
        self.persist();
        self.report();
        if self.alloc.is_server_terminal() {
            for slot in self.slots.values_mut() {
                push_event(
                    &mut slot.state,
                    event(events::KILLED, "Task killed before it ran"),
                );
                slot.state.state = states::DEAD.into();
            }
            self.persist();
            self.report();
            return;
        }
        if let Err(msg) = self.setup_network(group).await {
            self.fail_setup(msg);
            return;
        }
        self.start_ready();
        self.settle_early_deaths();
    }

    /// Every task fails with a Setup Failure of `msg`; none runs.
    fn fail_setup(&mut self, msg: String) {
        for slot in self.slots.values_mut() {
            push_event(&mut slot.state, event(events::SETUP_FAILURE, msg.clone()));
            slot.state.state = states::DEAD.into();
            slot.state.failed = true;
        }
        self.persist();
        self.report();
    }

    /// Gives a `bridge` or `none` group its network namespace before any of
    /// its tasks starts.
    async fn setup_network(&self, group: &TaskGroup) -> Result<(), String> {
        let Some(mode) = GroupNetwork::of(group) else {
            return Ok(());
        };
        let Some(networks) = self.networks() else {
            return Ok(());
        };
        let holder = self.infra_driver(group);
        let pid = self
            .start_holder(group, holder.as_deref())
            .await
            .map_err(|e| format!("failed to configure networking for alloc: {e}"))?;
        let ports = self.group_ports();
        let alloc_id = self.alloc.id.clone();
        let made =
            tokio::task::spawn_blocking(move || networks.setup(&alloc_id, mode, &ports, pid)).await;
        if !matches!(made, Ok(Ok(_)))
            && let Some(driver) = &holder
        {
            driver.remove_infra(&self.alloc.id).await;
        }
        match made {
            Ok(Ok(net)) => {
                tracing::info!(alloc = %self.alloc.id, ip = %net.ip, "alloc network ready");
                Ok(())
            }
            Ok(Err(e)) => Err(format!("failed to configure networking for alloc: {e}")),
            Err(e) => Err(format!("failed to configure networking for alloc: {e}")),
        }
    }

    /// Starts every task whose lifecycle phase allows it now.
    pub(super) fn start_ready(&mut self) {
        let Some(group) = self.group.clone() else {
            return;
        };
        if self.ctx.shutdown.is_cancelled() && !self.ctx.stop_on_shutdown {
            return;
        }
        let ready = lifecycle::startable(&group, &self.task_states(), &self.started, self.stopping);
        for name in ready {
            if let Some(task) = group.tasks.iter().find(|t| t.name == name) {
                self.start_task(&group, task, None, None);
            }
        }
    }

    fn build_dirs(&self, group: &TaskGroup) -> Result<(), String> {
        let Some(dir) = self.alloc_dir() else {
            return Ok(());
        };
        dir.build(group.tasks.iter().map(|t| t.name.as_str()))
            .map_err(|e| e.to_string())?;
        if !self.job.payload.is_empty() {
            for task in group
                .tasks
                .iter()
                .filter(|t| !t.dispatch_payload_file.is_empty())
            {
                dir.write_payload(&task.name, &task.dispatch_payload_file, &self.job.payload)
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// After a client restart: re-attach to live tasks, mark lost ones failed,
    /// restart nothing that might still run.
    pub(super) async fn restore(&mut self, group: &TaskGroup, rec: AllocRecord) {
        let all_dead =
            !rec.tasks.is_empty() && rec.tasks.values().all(|t| t.state.state == states::DEAD);
        if !all_dead {
            self.restore_network(group).await;
        }
        for task in &group.tasks {
            let Some(tr) = rec.tasks.get(&task.name) else {
                let mut state = TaskState {
                    state: states::PENDING.into(),
                    ..Default::default()
                };
                push_event(
                    &mut state,
                    event(events::RECEIVED, "Task received by client"),
                );
                self.slots
                    .insert(task.name.clone(), self.slot(state, task.leader));
                continue;
            };
            let mut state = TaskState::from(&tr.state);
            let recovered = match tr.handle.as_ref() {
                Some(h) => Some(self.recover(group, task, h).await),
                None => None,
            };
            self.slots
                .insert(task.name.clone(), self.slot(state.clone(), task.leader));
            match recovered {
                Some(Some(handle)) => {
                    tracing::info!(alloc = %self.alloc.id, task = %task.name, "re-attached to task");
                    // Known before the runner's first word: its services
                    // (and script checks) are registered again at once.
                    if let Some(slot) = self.slots.get_mut(&task.name) {
                        slot.handle = Some(Arc::clone(&handle));
                    }
                    self.start_task(group, task, Some(handle), None);
                }
                Some(None) => {
                    push_event(
                        &mut state,
                        event(events::TASK_LOST, "client restarted; task lost"),
                    );
                    state.state = states::DEAD.into();
                    state.failed = true;
                    state.finished_at_unix_ns = now_unix_ns();
                    self.started.insert(task.name.clone());
                    if let Some(slot) = self.slots.get_mut(&task.name) {
                        slot.state = state;
                    }
                }
                None if state.state == states::DEAD => {
                    self.started.insert(task.name.clone());
                }
                // Nothing runs (never started, or waiting to restart): it may
                // start when its phase allows.
                None => {}
            }
        }
        if self.alloc.is_server_terminal() {
            self.stopping = true;
            self.kill_all(KillRequest::default());
        }
        self.start_ready();
        self.settle_early_deaths();
    }

    /// After a client restart: an alloc whose namespace is gone (the node
    /// rebooted) gets a new one for the tasks still to start; what was
    /// recorded of the old one is released first. A failure leaves the
    /// tasks to fail when they start.
    async fn restore_network(&self, group: &TaskGroup) {
        let (Some(mode), Some(networks)) = (GroupNetwork::of(group), self.networks()) else {
            return;
        };
        if self.alloc.is_server_terminal() || networks.load(&self.alloc.id).is_some() {
            return;
        }
        let holder = self.infra_driver(group);
        if let Some(driver) = &holder {
            driver.remove_infra(&self.alloc.id).await;
        }
        let pid = match self.start_holder(group, holder.as_deref()).await {
            Ok(pid) => pid,
            Err(e) => {
                tracing::warn!(alloc = %self.alloc.id, error = %e, "cannot start the alloc's infra container");
                return;
            }
        };
        let ports = self.group_ports();
        let alloc_id = self.alloc.id.clone();
        let made = tokio::task::spawn_blocking(move || {
            networks.teardown(&alloc_id)?;
            networks.setup(&alloc_id, mode, &ports, pid)
        })
        .await;
        match made {
            Ok(Ok(net)) => {
                tracing::info!(alloc = %self.alloc.id, ip = %net.ip, "alloc network made again")
            }
            Ok(Err(e)) => {
                tracing::warn!(alloc = %self.alloc.id, error = %e, "cannot make the alloc network again")
            }
            Err(e) => tracing::warn!(alloc = %self.alloc.id, error = %e, "alloc network"),
        }
    }

    /// Starts the infra container holding the group's namespace, when the
    /// group has a `holder` driver (docker tasks), under the group
    /// network's hostname; its pid, whose namespace CNI attaches.
    async fn start_holder(
        &self,
        group: &TaskGroup,
        holder: Option<&dyn crate::driver::Driver>,
    ) -> Result<Option<u32>, String> {
        let Some(driver) = holder else {
            return Ok(None);
        };
        let hostname = self.group_hostname(group)?;
        driver
            .start_infra(&self.alloc.id, hostname.as_deref())
            .await
            .map(Some)
            .map_err(|e| e.message)
    }

    /// The ports of the group's network, as the servers allocated them.
    fn group_ports(&self) -> Vec<caravan_proto::AllocatedPort> {
        self.alloc
            .allocated_resources
            .as_ref()
            .and_then(|r| r.shared.as_ref())
            .map(|s| s.ports.clone())
            .unwrap_or_default()
    }

    /// The run `state` names, found again by the driver that wrote it.
    async fn recover(
        &self,
        group: &TaskGroup,
        task: &Task,
        state: &HandleState,
    ) -> Option<Arc<dyn TaskHandle>> {
        let Some(driver) = self.ctx.drivers.for_state(state) else {
            tracing::warn!(alloc = %self.alloc.id, task = %task.name, driver = state.driver(),
                "the driver of the task's recorded run is not enabled on this node");
            return None;
        };
        let spec = self.task_spec(group, task, driver.as_ref()).ok()?;
        driver.recover(&spec, state).await
    }
}
