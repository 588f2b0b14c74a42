//! Graceful shutdown, bounded: the first SIGTERM or SIGINT cancels a token
//! every task watches; a second one exits at once; and whatever still runs
//! when the `[shutdown]` deadline passes (a call stuck on an unreachable
//! etcd, a blocking thread) is named in the log and the process exits
//! anyway, so an orchestrator never has to SIGKILL a service.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, ConfigLoader};

/// Exit code when a second signal cuts the graceful shutdown short.
pub const FORCED_EXIT_CODE: i32 = 130;

/// Exit code when the shutdown deadline passes before the process stopped
/// (as `timeout(1)` reports a command it had to end).
pub const DEADLINE_EXIT_CODE: i32 = 124;

/// The `[shutdown]` section every service reads, whatever its own
/// configuration: `shutdown.deadline_ms`, env
/// `CARAVAN_<SERVICE>__SHUTDOWN__DEADLINE_MS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShutdownConfig {
    /// How long the process may take to stop once shutdown began, in
    /// milliseconds; then it logs what is still running and exits with
    /// [`DEADLINE_EXIT_CODE`]. Keep it under the orchestrator's kill timeout
    /// (Kubernetes' default grace is 30 s, `docker stop`'s 10 s); 0 means
    /// no deadline.
    pub deadline_ms: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { deadline_ms: 8_000 }
    }
}

/// The part of a service's configuration the runtime reads by itself.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct RuntimeSections {
    shutdown: ShutdownConfig,
}

impl ShutdownConfig {
    /// Reads the `[shutdown]` section from the same layers as the service's
    /// own configuration (services ignore keys they do not know).
    pub fn load(loader: &ConfigLoader) -> Result<ShutdownConfig, ConfigError> {
        Ok(loader.load(&RuntimeSections::default())?.shutdown)
    }

    /// A service's own configuration and the `[shutdown]` section, both
    /// from `loader`'s layers.
    pub fn load_beside<T: Serialize + serde::de::DeserializeOwned>(
        loader: &ConfigLoader,
        defaults: &T,
    ) -> Result<(T, ShutdownConfig), ConfigError> {
        Ok((loader.load(defaults)?, ShutdownConfig::load(loader)?))
    }

    /// The deadline, if there is one.
    pub fn deadline(&self) -> Option<Duration> {
        (self.deadline_ms > 0).then(|| Duration::from_millis(self.deadline_ms))
    }

    /// This configuration with a deadline of at least `least` (work that
    /// legitimately takes that long, such as stopping tasks within their
    /// kill timeout, must not be cut short); no deadline stays none.
    pub fn at_least(&self, least: Duration) -> ShutdownConfig {
        let least_ms = u64::try_from(least.as_millis()).unwrap_or(u64::MAX);
        ShutdownConfig {
            deadline_ms: match self.deadline_ms {
                0 => 0,
                ms => ms.max(least_ms),
            },
        }
    }
}

/// Returns a token cancelled on the first SIGTERM or SIGINT, without a
/// deadline (for embedders such as `caravan dev`, whose stop may wait for
/// tasks' kill timeouts). See [`on_signals_with`].
pub fn on_signals() -> std::io::Result<CancellationToken> {
    on_signals_with(&ShutdownConfig { deadline_ms: 0 })
}

/// Returns a token cancelled on the first SIGTERM or SIGINT. A second signal
/// exits the process immediately; so does `config`'s deadline passing after
/// the first. Must be called inside a tokio runtime.
pub fn on_signals_with(config: &ShutdownConfig) -> std::io::Result<CancellationToken> {
    // Registered before returning so no signal slips through a startup window.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let token = CancellationToken::new();
    let trigger = token.clone();
    let deadline = config.deadline();
    let runtime = tokio::runtime::Handle::current();
    tokio::spawn(async move {
        next(&mut term, &mut int).await;
        tracing::info!(?deadline, "shutting down; a second signal exits at once");
        trigger.cancel();
        if let Some(deadline) = deadline {
            exit_after(deadline, runtime);
        }
        next(&mut term, &mut int).await;
        tracing::warn!("second signal, exiting now");
        std::process::exit(FORCED_EXIT_CODE);
    });
    Ok(token)
}

async fn next(term: &mut Signal, int: &mut Signal) {
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Exits the process once `deadline` has passed, naming what is still
/// running. A thread of its own rather than a task: the runtime's workers
/// may be the ones stuck, and dropping a runtime waits for its blocking
/// threads, which no task outlives.
fn exit_after(deadline: Duration, runtime: tokio::runtime::Handle) {
    let spawned = std::thread::Builder::new()
        .name("shutdown-deadline".into())
        .spawn(move || {
            std::thread::sleep(deadline);
            let still = still_running();
            let tasks = runtime.metrics().num_alive_tasks();
            tracing::error!(
                ?deadline,
                still_running = ?still,
                tasks,
                "shutdown deadline passed; exiting"
            );
            std::process::exit(DEADLINE_EXIT_CODE);
        });
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start the shutdown deadline; stopping unbounded");
    }
}

/// What is running right now, by id, for the deadline's message.
static RUNNING: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());

/// A piece of work named in the deadline's message for as long as this
/// guard lives.
#[derive(Debug)]
#[must_use = "the work is only tracked while the guard lives"]
pub struct Running {
    id: u64,
}

/// Tracks `what` until the returned guard drops: if the shutdown deadline
/// passes first, its message names it.
pub fn running(what: impl Into<String>) -> Running {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    RUNNING.lock().insert(id, what.into());
    Running { id }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.lock().remove(&self.id);
    }
}

/// The names of the tracked work still running.
pub fn still_running() -> Vec<String> {
    RUNNING.lock().values().cloned().collect()
}

/// Awaits `work` (a server, a leader's term) until it ends by itself; once
/// `shutdown` fires, gives it `grace` more to finish what is in flight and
/// then drops it. Returns its output, or `None` when it was cut short.
pub async fn within_grace<F: Future>(
    what: &str,
    work: F,
    shutdown: &CancellationToken,
    grace: Duration,
) -> Option<F::Output> {
    let _tracked = running(what);
    tokio::pin!(work);
    tokio::select! {
        out = &mut work => return Some(out),
        () = shutdown.cancelled() => {}
    }
    match tokio::time::timeout(grace, work).await {
        Ok(out) => Some(out),
        Err(_) => {
            tracing::warn!(
                what,
                ?grace,
                "still running after the shutdown grace; dropped"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_is_cut_short_after_the_grace() {
        let stop = CancellationToken::new();
        stop.cancel();
        let started = tokio::time::Instant::now();
        let out = within_grace(
            "stuck",
            std::future::pending::<()>(),
            &stop,
            Duration::from_secs(3),
        )
        .await;
        assert_eq!(out, None);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        assert!(still_running().iter().all(|w| w != "stuck"));
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_ends_in_time_keeps_its_output() {
        let stop = CancellationToken::new();
        let work = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            7
        };
        let canceller = stop.clone();
        tokio::spawn(async move { canceller.cancel() });
        assert_eq!(
            within_grace("quick", work, &stop, Duration::from_secs(3)).await,
            Some(7)
        );
        // Without shutdown, work runs as long as it takes.
        let never = CancellationToken::new();
        let slow = async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            8
        };
        assert_eq!(
            within_grace("slow", slow, &never, Duration::from_secs(3)).await,
            Some(8)
        );
    }

    #[test]
    fn running_work_is_named_until_dropped() {
        let guard = running("leadership of test");
        assert!(still_running().contains(&"leadership of test".to_string()));
        drop(guard);
        assert!(!still_running().contains(&"leadership of test".to_string()));
    }

    #[test]
    fn the_deadline_is_read_from_the_service_layers() {
        let loader = ConfigLoader::new("x").with_env(vec![(
            "CARAVAN_X__SHUTDOWN__DEADLINE_MS".into(),
            "3000".into(),
        )]);
        let config = ShutdownConfig::load(&loader).unwrap();
        assert_eq!(config.deadline(), Some(Duration::from_secs(3)));
        assert_eq!(
            config.at_least(Duration::from_secs(35)).deadline(),
            Some(Duration::from_secs(35))
        );
        assert_eq!(
            config.at_least(Duration::from_secs(1)).deadline(),
            Some(Duration::from_secs(3))
        );
        let none = ShutdownConfig { deadline_ms: 0 };
        assert_eq!(none.at_least(Duration::from_secs(35)).deadline(), None);
        let defaults = ConfigLoader::new("x").with_env(vec![]);
        assert_eq!(
            ShutdownConfig::load(&defaults).unwrap(),
            ShutdownConfig::default()
        );
    }
}
