//! What every Caravan service shares: layered configuration, tracing,
//! graceful shutdown, gRPC serving, leadership loops and terms, the common `main`, the
//! service names, and the mapping of errors to gRPC statuses.

pub mod config;
pub mod grpc;
pub mod leader;
pub mod names;
pub mod service;
pub mod shutdown;
pub mod status;
pub mod store;
pub mod telemetry;
pub mod term;

pub use tonic_health;
