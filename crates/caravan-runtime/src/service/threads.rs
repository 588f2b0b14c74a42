//! The `[runtime]` section every service reads beside its own: how many
//! threads run its async work.
//!
//! A service's CPU-heavy steps (scheduling, plan verification, decoding
//! large bodies) run on blocking threads whatever this says; the async
//! threads carry gRPC, the store's watch and the cache. On a machine the
//! whole stack shares, one async thread per service costs less CPU per
//! placement than one per core: fewer cross-thread wakeups, and work that
//! arrives together is handled together (docs/benchmarks.md).

use serde::{Deserialize, Serialize};

use crate::config::ConfigLoader;

/// Most async threads a service may ask for.
const MAX_WORKER_THREADS: usize = 256;

/// Highest `runtime.nice`: Linux's lowest priority.
const MAX_NICE: i32 = 19;

/// `runtime.nice` when neither the configuration nor the service's own
/// default (see [`crate::service::ServiceConfig::default_runtime_nice`])
/// says otherwise.
pub const DEFAULT_NICE: i32 = 10;

/// `runtime.worker_threads`, env `CARAVAN_<SERVICE>__RUNTIME__WORKER_THREADS`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeConfig {
    /// Threads of the async runtime; 0 means one per core the process may
    /// use (or `TOKIO_WORKER_THREADS` when that is set).
    pub worker_threads: usize,
    /// How much lower than the process's own the CPU priority of the
    /// runtime's threads (its async and blocking threads) is, in nice
    /// steps; 0 leaves them at the process's. Threads a service starts of
    /// its own (the client's and the api-gateway's heartbeat threads, the
    /// gateway's registration and watch-cache lanes) keep the process's
    /// priority: on a machine short of CPU, a heartbeat's few microseconds
    /// are not shared out equally with the bulk work of every other
    /// thread, which made heartbeats late enough to take nodes down.
    /// Unset: the service's default (10, or 0 for a client node running
    /// real tasks, whose processes would inherit it).
    pub nice: Option<i32>,
}

/// The section as the loader sees it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Section {
    runtime: RuntimeConfig,
}

impl RuntimeConfig {
    /// The section's name in a service's configuration.
    pub const SECTION: &'static str = "runtime";

    /// Reads the `[runtime]` section from the same layers as the service's
    /// own configuration, and checks it.
    pub fn load(loader: &ConfigLoader) -> anyhow::Result<RuntimeConfig> {
        let config = loader.load(&Section::default())?.runtime;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.worker_threads <= MAX_WORKER_THREADS,
            "runtime.worker_threads: {} is more than {MAX_WORKER_THREADS}; 0 means one per core",
            self.worker_threads
        );
        if let Some(nice) = self.nice {
            anyhow::ensure!(
                (0..=MAX_NICE).contains(&nice),
                "runtime.nice: {nice} is not between 0 (the process's priority) and {MAX_NICE}"
            );
        }
        Ok(())
    }

    /// This configuration with `nice` as `runtime.nice` where it sets none.
    pub fn with_default_nice(mut self, nice: i32) -> Self {
        self.nice.get_or_insert(nice);
        self
    }

    /// The multi-threaded runtime this configuration asks for.
    pub fn build(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if self.worker_threads > 0 {
            builder.worker_threads(self.worker_threads);
        }
        let nice = self.nice.unwrap_or(DEFAULT_NICE);
        if nice > 0 {
            builder.on_thread_start(move || lower_priority(nice));
        }
        builder.enable_all().build()
    }
}

/// Lowers the calling thread's CPU priority by `by` nice steps (Linux
/// gives each thread its own). Raising a priority needs a privilege;
/// lowering one never does, so this fails only where the call is missing,
/// and then the thread runs as before.
fn lower_priority(by: i32) {
    let thread = Some(rustix::thread::gettid());
    let current = rustix::process::getpriority_process(thread).unwrap_or(0);
    let lowered = current.saturating_add(by).min(MAX_NICE);
    if let Err(err) = rustix::process::setpriority_process(thread, lowered) {
        tracing::warn!(%err, "runtime.nice: cannot lower the priority of a runtime thread");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(env: &[(&str, &str)]) -> anyhow::Result<RuntimeConfig> {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RuntimeConfig::load(&ConfigLoader::new("x").with_env(env))
    }

    #[test]
    fn the_thread_count_is_read_from_the_service_layers() {
        assert_eq!(loaded(&[]).unwrap(), RuntimeConfig::default());
        let one = loaded(&[("CARAVAN_X__RUNTIME__WORKER_THREADS", "1")]).unwrap();
        assert_eq!(one.worker_threads, 1);
        let runtime = one.build().unwrap();
        assert_eq!(runtime.metrics().num_workers(), 1);
        let two = RuntimeConfig {
            worker_threads: 2,
            ..Default::default()
        }
        .build()
        .unwrap();
        assert_eq!(two.metrics().num_workers(), 2);
    }

    #[test]
    fn the_runtime_threads_run_below_the_process_priority() {
        let own = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let runtime = RuntimeConfig {
            worker_threads: 1,
            nice: Some(3),
        }
        .build()
        .unwrap();
        let on_worker = runtime.block_on(async {
            tokio::spawn(async {
                rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
            })
            .await
            .unwrap()
        });
        assert_eq!(on_worker, (own + 3).min(MAX_NICE));
        let on_blocking = runtime.block_on(async {
            tokio::task::spawn_blocking(|| {
                rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
            })
            .await
            .unwrap()
        });
        assert_eq!(on_blocking, (own + 3).min(MAX_NICE));
        // The caller's own thread is left as it was.
        assert_eq!(
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap(),
            own
        );
    }

    #[test]
    fn a_bad_thread_count_names_the_field() {
        let err = loaded(&[("CARAVAN_X__RUNTIME__WORKER_THREADS", "100000")]).unwrap_err();
        assert!(
            err.to_string().contains("runtime.worker_threads"),
            "{err:#}"
        );
        let err = loaded(&[("CARAVAN_X__RUNTIME__NICE", "20")]).unwrap_err();
        assert!(err.to_string().contains("runtime.nice"), "{err:#}");
        let err = loaded(&[("CARAVAN_X__RUNTIME__WORKER_THREADS", "many")]).unwrap_err();
        assert!(format!("{err:#}").contains("worker_threads"), "{err:#}");
    }
}
