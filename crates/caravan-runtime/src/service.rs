//! The common `main` of every service binary: flags, layered configuration,
//! tracing, signals (with the shutdown deadline), the store connection, then
//! the service's `run`.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use caravan_store::Store;
use clap::Parser;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::config::ConfigLoader;
use crate::shutdown::ShutdownConfig;
use crate::store::{STORE_LIST_KEYS, StoreConfig};
use crate::telemetry::{self, TelemetryConfig};

/// Flags every service binary accepts.
#[derive(Debug, Clone, Parser)]
pub struct ServiceArgs {
    /// TOML configuration file.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Override a configuration key, e.g. `--set store.prefix=/test` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// What the common `main` needs from a service's configuration.
pub trait ServiceConfig: Serialize + DeserializeOwned + Default + Send + 'static {
    /// Configuration keys holding comma-separated lists in env variables.
    const LIST_KEYS: &'static [&'static str] = &[];
    /// The `[telemetry]` section.
    fn telemetry(&self) -> &TelemetryConfig;
    /// The `[store]` section.
    fn store(&self) -> &StoreConfig;
}

/// Runs a service binary: parses flags, loads `C` from its layers, installs
/// tracing and signal handling, connects the store and awaits `run`.
pub fn main<C, F, Fut>(service: &str, run: F) -> ExitCode
where
    C: ServiceConfig,
    F: FnOnce(C, Arc<dyn Store>, CancellationToken) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let args = ServiceArgs::parse();
    let mut list_keys: Vec<&str> = STORE_LIST_KEYS.to_vec();
    list_keys.extend_from_slice(C::LIST_KEYS);
    let loader = match ConfigLoader::new(service)
        .file(args.config.as_deref())
        .list_keys(&list_keys)
        .set_all(args.set.iter().map(String::as_str))
    {
        Ok(l) => l,
        Err(err) => {
            eprintln!("{service}: {err}");
            return ExitCode::from(2);
        }
    };
    let (config, shutdown_config) = match ShutdownConfig::load_beside(&loader, &C::default()) {
        Ok(both) => both,
        Err(err) => {
            eprintln!("{service}: {err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(err) => {
            eprintln!("{service}: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let _telemetry = match telemetry::init(service, config.telemetry()) {
            Ok(g) => g,
            Err(err) => {
                eprintln!("{service}: {err}");
                return ExitCode::from(2);
            }
        };
        let shutdown = match crate::shutdown::on_signals_with(&shutdown_config) {
            Ok(t) => t,
            Err(err) => {
                tracing::error!(error = %err, "cannot install signal handlers");
                return ExitCode::FAILURE;
            }
        };
        let connected = tokio::select! {
            connected = config.store().connect() => connected,
            () = shutdown.cancelled() => return ExitCode::SUCCESS,
        };
        let store = match connected {
            Ok(s) => s,
            Err(err) => {
                tracing::error!(error = %err, endpoints = ?config.store().endpoints, "cannot reach the store");
                return ExitCode::FAILURE;
            }
        };
        let running = crate::shutdown::running(format!("{service}'s run"));
        let ran = run(config, store, shutdown).await;
        drop(running);
        match ran {
            Ok(()) => {
                tracing::info!(service, "stopped");
                ExitCode::SUCCESS
            }
            Err(err) => {
                tracing::error!(service, error = format!("{err:#}"), "failed");
                ExitCode::FAILURE
            }
        }
    })
}
