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

mod small_map;
pub use small_map::{MapEntry, SmallMap};

/// The encoded `FileDescriptorSet` of every file in `proto/` (with the
/// well-known types they import), for gRPC server reflection.
#[cfg(feature = "grpc")]
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/grpc/caravan_descriptor_set.bin"));
