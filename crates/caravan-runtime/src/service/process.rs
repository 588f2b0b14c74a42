//! The `main` of every service binary: flags, layered configuration,
//! tracing, signals (with the shutdown deadline), the store connection
//! (retried until it answers), then the service on its gRPC address.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::health::{self, HealthArgs};
use super::threads::RuntimeConfig;
use super::{Service, ServiceConfig, StoreAccess};
use crate::config::ConfigLoader;
use crate::shutdown::ShutdownConfig;
use crate::store::STORE_LIST_KEYS;
use crate::telemetry;

/// Flags every service binary accepts.
#[derive(Debug, Clone, Default, Parser)]
pub struct ServiceArgs {
    /// TOML configuration file.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Override a configuration key, e.g. `--set store.prefix=/test` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Load the configuration from its layers, check it (a key no field
    /// reads is an error too), print it as loaded and exit: 0 when it is
    /// good, 2 naming what is wrong.
    #[arg(long)]
    pub check_config: bool,
    /// What to do instead of serving.
    #[command(subcommand)]
    pub command: Option<ServiceCommand>,
}

/// What a service binary can do besides serving.
#[derive(Debug, Clone, Subcommand)]
pub enum ServiceCommand {
    /// Ask a running replica's gRPC health service whether it serves: exit
    /// 0 only when `grpc.health.v1.Health/Check` answers SERVING, 1 otherwise.
    Health(HealthArgs),
}

/// Runs `service` as the process: parses the flags and goes on as
/// [`main_with`].
pub fn main<S: Service>(service: S) -> ExitCode {
    main_with(service, ServiceArgs::parse())
}

/// Runs `service` as the process with flags parsed by the caller (a binary
/// with flags of its own): turns transparent huge pages off (see
/// [`crate::huge_pages`]), loads its configuration from its layers, installs
/// tracing and signal handling, connects the store when it needs one, and
/// serves until a signal. Exits with 2 on a bad configuration.
pub fn main_with<S: Service>(service: S, args: ServiceArgs) -> ExitCode {
    crate::huge_pages::disable();
    let name = S::NAME;
    let (config, shutdown_config, runtime_config) = match load::<S>(&args) {
        Ok(all) => all,
        Err(err) => {
            // The outermost message only: configuration errors already
            // quote what they wrap.
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    if let Err(err) = crate::tls::install(config.tls()) {
        eprintln!("{name}: {err:#}");
        return ExitCode::from(2);
    }
    if let Some(ServiceCommand::Health(probe)) = &args.command {
        return match health::probe_addr(probe, config.grpc_addr()) {
            Ok(addr) => health::probe(name, &addr, probe),
            Err(err) => {
                eprintln!("{name} health: {err}");
                ExitCode::from(2)
            }
        };
    }
    if args.check_config {
        return check_config::<S>(&args, &config, &shutdown_config, &runtime_config);
    }
    let runtime = match runtime_config.build() {
        Ok(r) => r,
        Err(err) => {
            eprintln!("{name}: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve_process(service, config, shutdown_config))
}

/// `--check-config`: a configuration that loaded and validated may still
/// name keys no field reads (a misspelling, a key of another service);
/// those fail it too. Prints the configuration as loaded.
fn check_config<S: Service>(
    args: &ServiceArgs,
    config: &S::Config,
    shutdown: &ShutdownConfig,
    runtime: &RuntimeConfig,
) -> ExitCode {
    let name = S::NAME;
    let unknown = loader::<S>(args).and_then(|loader| {
        Ok(loader.unknown_keys(
            &S::Config::default(),
            &[SHUTDOWN_SECTION, RuntimeConfig::SECTION],
        )?)
    });
    match unknown {
        Ok(keys) if keys.is_empty() => {}
        Ok(keys) => {
            eprintln!(
                "{name}: configuration keys {name} does not read: {}",
                keys.join(", ")
            );
            return ExitCode::from(2);
        }
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    }
    let mut loaded = match serde_json::to_value(config) {
        Ok(v) => v,
        Err(err) => {
            eprintln!("{name}: cannot print the configuration: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let serde_json::Value::Object(map) = &mut loaded {
        map.insert(
            SHUTDOWN_SECTION.to_string(),
            serde_json::json!({ "deadline_ms": shutdown.deadline_ms }),
        );
        map.insert(
            RuntimeConfig::SECTION.to_string(),
            serde_json::to_value(runtime).unwrap_or_default(),
        );
    }
    match serde_json::to_string_pretty(&loaded) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("{name}: cannot print the configuration: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration section [`ShutdownConfig`] reads beside the service's own.
const SHUTDOWN_SECTION: &str = "shutdown";

/// The loader of `S`'s configuration layers.
fn loader<S: Service>(args: &ServiceArgs) -> anyhow::Result<ConfigLoader> {
    let mut list_keys: Vec<&str> = S::Config::LIST_KEYS.to_vec();
    if <S::Store as StoreAccess<S::Config>>::NEEDED {
        list_keys.extend_from_slice(STORE_LIST_KEYS);
    }
    Ok(ConfigLoader::new(S::NAME)
        .file(args.config.as_deref())
        .list_keys(&list_keys)
        .set_all(args.set.iter().map(String::as_str))?)
}

/// The service's configuration and the `[shutdown]` and `[runtime]`
/// sections, checked, with the deadline raised to what the configuration
/// needs.
fn load<S: Service>(
    args: &ServiceArgs,
) -> anyhow::Result<(S::Config, ShutdownConfig, RuntimeConfig)> {
    let loader = loader::<S>(args)?;
    let (config, shutdown) = ShutdownConfig::load_beside(&loader, &S::Config::default())?;
    config.validate()?;
    <S::Store as StoreAccess<S::Config>>::check(&config)?;
    let shutdown = shutdown.at_least(config.min_shutdown_deadline());
    let runtime = RuntimeConfig::load(&loader)?.with_default_nice(config.default_runtime_nice());
    Ok((config, shutdown, runtime))
}

async fn serve_process<S: Service>(
    service: S,
    config: S::Config,
    shutdown_config: ShutdownConfig,
) -> ExitCode {
    let name = S::NAME;
    let _telemetry = match telemetry::init(name, config.telemetry()) {
        Ok(g) => g,
        Err(err) => {
            eprintln!("{name}: {err}");
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
    let Some(store) = S::Store::reach(&config, &shutdown).await else {
        return ExitCode::SUCCESS;
    };
    let running = crate::shutdown::running(format!("{name}'s run"));
    let ran = super::run(service, config, store, shutdown).await;
    drop(running);
    match ran {
        Ok(()) => {
            tracing::info!(service = name, "stopped");
            ExitCode::SUCCESS
        }
        Err(err) => {
            tracing::error!(service = name, error = format!("{err:#}"), "failed");
            ExitCode::FAILURE
        }
    }
}
