//! What every Caravan service shares: layered configuration, tracing,
//! graceful shutdown, gRPC serving and the mapping of errors to gRPC statuses.

pub mod config;
pub mod grpc;
pub mod shutdown;
pub mod status;
pub mod telemetry;

pub use tonic_health;
