//! The allocs this process runs, by id, for the node's own API: a running
//! alloc's tasks are looked up here to read their usage, signal them,
//! restart them, and to garbage-collect a finished alloc's directory.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tonic::Status;

use crate::alloc_runner::{
    AllocCommand, CommandSender, RestartRequest, TaskSignaled, WeakCommandSender,
};
use crate::driver::{Capabilities, TaskHandle};
use crate::task_runner::states;

/// How long a restart may take: the longest kill timeout, and then some.
const RESTART_WAIT: Duration = Duration::from_secs(120);

/// One task of a live alloc as its runner sees it.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// `pending`, `running` or `dead`.
    pub state: String,
    /// The running task's handle.
    pub handle: Option<Arc<dyn TaskHandle>>,
    /// What its driver can do; `None` when the node lacks the driver.
    pub capabilities: Option<Capabilities>,
}

impl TaskView {
    /// Whether the task has a process (or simulated run) right now.
    pub fn running(&self) -> bool {
        self.state == states::RUNNING && self.handle.is_some()
    }
}

/// A runner's answer to a restart: the tasks it asked to restart, each
/// with where its outcome will come.
pub type RestartTickets = Vec<(String, oneshot::Receiver<Result<(), String>>)>;

/// The registry of live alloc runners.
#[derive(Debug, Default)]
pub struct LiveAllocs {
    // Weak: a runner still ends when the node lets go of it.
    runners: Mutex<HashMap<String, WeakCommandSender>>,
}

fn gone(alloc_id: &str) -> Status {
    Status::not_found(format!("Unknown allocation \"{alloc_id}\""))
}

impl LiveAllocs {
    /// Registers the runner of `alloc_id`.
    pub fn insert(&self, alloc_id: &str, commands: &CommandSender) {
        self.runners
            .lock()
            .insert(alloc_id.to_string(), commands.downgrade());
    }

    /// Forgets the runner of `alloc_id` (it has ended).
    pub fn remove(&self, alloc_id: &str) {
        self.runners.lock().remove(alloc_id);
    }

    /// Whether `alloc_id` has a runner.
    pub fn contains(&self, alloc_id: &str) -> bool {
        self.runners.lock().contains_key(alloc_id)
    }

    /// The ids of every live alloc.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.runners.lock().keys().cloned().collect();
        ids.sort();
        ids
    }

    fn send(&self, alloc_id: &str, cmd: AllocCommand) -> Result<(), Status> {
        let tx = self
            .runners
            .lock()
            .get(alloc_id)
            .and_then(|weak| weak.upgrade())
            .ok_or_else(|| gone(alloc_id))?;
        tx.send(cmd).map_err(|_| gone(alloc_id))
    }

    /// The alloc's tasks.
    pub async fn tasks(&self, alloc_id: &str) -> Result<BTreeMap<String, TaskView>, Status> {
        let (tx, rx) = oneshot::channel();
        self.send(alloc_id, AllocCommand::Tasks(tx))?;
        rx.await.map_err(|_| gone(alloc_id))
    }

    /// Sends `signal` to the task (or every running task) through its
    /// driver.
    pub async fn signal(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        signal: Signal,
    ) -> Result<(), Status> {
        let tasks = self.tasks(alloc_id).await?;
        let targets: Vec<(&String, &TaskView)> = match task {
            Some(name) => {
                let (key, view) = tasks.get_key_value(name).ok_or_else(|| {
                    Status::invalid_argument(format!("Task not found in allocation: {name}"))
                })?;
                if !view.running() {
                    return Err(Status::failed_precondition(format!(
                        "Task not running: {name}"
                    )));
                }
                vec![(key, view)]
            }
            None => tasks.iter().filter(|(_, v)| v.running()).collect(),
        };
        for (name, view) in targets {
            if let Some(handle) = &view.handle {
                handle
                    .signal(signal)
                    .await
                    .map_err(|e| Status::internal(format!("signal task {name}: {e}")))?;
                // Gone meanwhile: the signal went, only its event is lost.
                let _ = self.send(
                    alloc_id,
                    AllocCommand::Signaled(Box::new(TaskSignaled {
                        task: name.clone(),
                        signal: signal.as_str().to_string(),
                    })),
                );
            }
        }
        Ok(())
    }

    /// Restarts the task (or every running task; with `all`, every task)
    /// in place and waits until each is started again.
    pub async fn restart(
        &self,
        alloc_id: &str,
        task: Option<String>,
        all: bool,
    ) -> Result<(), Status> {
        let (tx, rx) = oneshot::channel();
        self.send(
            alloc_id,
            AllocCommand::Restart(Box::new(RestartRequest {
                task,
                all,
                reply: tx,
            })),
        )?;
        let tickets = rx
            .await
            .map_err(|_| gone(alloc_id))?
            .map_err(Status::failed_precondition)?;
        for (task, ticket) in tickets {
            match tokio::time::timeout(RESTART_WAIT, ticket).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    return Err(Status::failed_precondition(format!("task {task}: {e}")));
                }
                Ok(Err(_)) => {
                    return Err(Status::unavailable(format!(
                        "task {task} ended before it restarted"
                    )));
                }
                Err(_) => {
                    return Err(Status::deadline_exceeded(format!(
                        "task {task} did not restart within {RESTART_WAIT:?}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Removes a finished alloc's directory and record; a running one is
    /// refused with Nomad's words.
    pub async fn gc(&self, alloc_id: &str) -> Result<(), Status> {
        let refused = || {
            Status::failed_precondition(
                "No such allocation on client, or allocation not eligible for GC",
            )
        };
        let (tx, rx) = oneshot::channel();
        self.send(alloc_id, AllocCommand::Gc(tx))
            .map_err(|_| refused())?;
        match rx.await {
            Ok(true) => Ok(()),
            Ok(false) | Err(_) => Err(refused()),
        }
    }
}
