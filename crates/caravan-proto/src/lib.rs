//! Caravan's data model and gRPC services, generated from `proto/caravan/v1`.

/// Version 1 of the schema.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("caravan.v1");
}

pub use v1::*;
