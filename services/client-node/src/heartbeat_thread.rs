//! The process's heartbeat thread: a runtime of its own on one OS thread,
//! where every node's registration and heartbeat loop runs and where the
//! connections those calls use are driven. The process's main runtime may
//! be saturated by alloc streams, status batches and thousands of alloc
//! runners; a heartbeat waits for none of them, so a node is marked down
//! only when its heartbeats really stop (Nomad's rule: heartbeats never
//! queue behind bulk traffic).

use std::future::Future;

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

use crate::error::ClientError;

/// The OS thread's name, as `top -H` and profilers show it.
const THREAD_NAME: &str = "caravan-heartbeats";

/// A one-thread runtime for heartbeats; stops (without waiting for its
/// tasks) when dropped.
#[derive(Debug)]
pub struct HeartbeatThread {
    runtime: Option<Runtime>,
}

impl HeartbeatThread {
    /// Starts the thread.
    pub fn start() -> Result<HeartbeatThread, ClientError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(THREAD_NAME)
            .enable_all()
            .build()
            .map_err(|e| ClientError::io("start", "the heartbeat thread", e))?;
        Ok(HeartbeatThread {
            runtime: Some(runtime),
        })
    }

    /// The thread's runtime.
    pub fn handle(&self) -> &Handle {
        match &self.runtime {
            Some(runtime) => runtime.handle(),
            // Only `drop` takes the runtime out.
            None => unreachable!("the heartbeat runtime is gone only once dropped"),
        }
    }

    /// Runs `future` on the heartbeat thread.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle().spawn(future)
    }
}

impl Drop for HeartbeatThread {
    fn drop(&mut self) {
        // Dropped from async code, a runtime that waited for its tasks
        // would block the caller; the tasks are heartbeats, which end with
        // the process anyway.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
