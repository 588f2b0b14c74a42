//! Lanes: an OS thread of its own running a one-thread runtime, and a store
//! connection made there, so the tasks of that connection run on that
//! thread too. What a lane carries waits neither for the gateway's runtime
//! (busy with alloc streams, cache updates and status writes on a loaded
//! machine) nor behind the watch's events and the status writes'
//! transactions on the shared connection. Heartbeat renewals have one
//! (Nomad's rule: heartbeats never queue behind bulk traffic), and so do
//! job registrations: an operator's `job run` is not bulk traffic either.
//! The watch cache has one too: what every request and node feed reads
//! keeps up with the store however busy the runtime serving them is.

use std::sync::Arc;

use caravan_state::{Informer, InformerConfig, Keyspace, StateError};
use caravan_store::Store;
use tokio::runtime::{Handle, Runtime};

/// A runtime on threads of its own named `name` (one, unless asked for
/// more); stops (without waiting for its tasks) when dropped.
#[derive(Debug)]
pub struct ThreadRuntime {
    runtime: Option<Runtime>,
}

impl ThreadRuntime {
    /// Starts the thread.
    pub fn start(name: &'static str) -> std::io::Result<Self> {
        Self::with_workers(name, 1)
    }

    /// A runtime of `workers` threads (at least one), each named `name`.
    pub fn with_workers(name: &'static str, workers: usize) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name(name)
            .enable_all()
            .build()?;
        Ok(ThreadRuntime {
            runtime: Some(runtime),
        })
    }

    /// Where tasks of the thread are spawned.
    pub fn handle(&self) -> &Handle {
        match &self.runtime {
            Some(runtime) => runtime.handle(),
            None => unreachable!("the runtime is taken only by drop"),
        }
    }
}

impl Drop for ThreadRuntime {
    fn drop(&mut self) {
        // Dropped from async code, a runtime that waited for its tasks would
        // block the caller; its tasks are requests whose callers are gone.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A thread of its own and the store connection it drives. Cheap to clone.
#[derive(Clone)]
pub struct Lane {
    thread: Arc<ThreadRuntime>,
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").finish_non_exhaustive()
    }
}

impl Lane {
    /// Starts the thread `name` and connects to the store there (with
    /// `connect`). `None` when `connect` gives up (the process is shutting
    /// down before the store answered).
    pub async fn start<F, Fut>(name: &'static str, connect: F) -> std::io::Result<Option<Self>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<Arc<dyn Store>>> + Send + 'static,
    {
        let thread = ThreadRuntime::start(name)?;
        // Connected on the thread, so the connection's tasks run there.
        let Ok(Some(store)) = thread.handle().spawn(connect()).await else {
            return Ok(None);
        };
        Ok(Some(Lane {
            thread: Arc::new(thread),
            store,
        }))
    }

    /// A lane over `store` on an existing thread.
    pub fn on(thread: Arc<ThreadRuntime>, store: Arc<dyn Store>) -> Self {
        Lane { thread, store }
    }

    /// The thread's runtime.
    pub fn handle(&self) -> &Handle {
        self.thread.handle()
    }

    /// The store connection the thread drives.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// A watch cache of `keyspace` that follows the store on this lane: its
    /// list, watch, decoding and applying run on the lane's thread and
    /// connection. The lane must outlive it.
    pub async fn informer(
        &self,
        keyspace: Keyspace,
        config: InformerConfig,
    ) -> caravan_state::Result<Informer> {
        let store = Arc::clone(&self.store);
        self.handle()
            .spawn(Informer::start(store, keyspace, config))
            .await
            .map_err(|_| StateError::Closed)?
    }
}
