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

/// `runtime.worker_threads`, env `CARAVAN_<SERVICE>__RUNTIME__WORKER_THREADS`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeConfig {
    /// Threads of the async runtime; 0 means one per core the process may
    /// use (or `TOKIO_WORKER_THREADS` when that is set).
    pub worker_threads: usize,
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
        Ok(())
    }

    /// The multi-threaded runtime this configuration asks for.
    pub fn build(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if self.worker_threads > 0 {
            builder.worker_threads(self.worker_threads);
        }
        builder.enable_all().build()
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
        let two = RuntimeConfig { worker_threads: 2 }.build().unwrap();
        assert_eq!(two.metrics().num_workers(), 2);
    }

    #[test]
    fn a_bad_thread_count_names_the_field() {
        let err = loaded(&[("CARAVAN_X__RUNTIME__WORKER_THREADS", "100000")]).unwrap_err();
        assert!(
            err.to_string().contains("runtime.worker_threads"),
            "{err:#}"
        );
        let err = loaded(&[("CARAVAN_X__RUNTIME__WORKER_THREADS", "many")]).unwrap_err();
        assert!(format!("{err:#}").contains("worker_threads"), "{err:#}");
    }
}
