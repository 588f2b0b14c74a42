//! Caravan's data model and gRPC services, generated from `proto/caravan/v1`.
//! The services (tonic clients and servers) need the `grpc` feature.

/// Version 1 of the schema.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    #[cfg(feature = "grpc")]
    include!(concat!(env!("OUT_DIR"), "/grpc/caravan.v1.rs"));
    #[cfg(not(feature = "grpc"))]
    include!(concat!(env!("OUT_DIR"), "/messages/caravan.v1.rs"));
}

pub use v1::*;
