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

/// What one reset of `OutstandingResets` answers: the code and message
/// `OutstandingReset` would have.
#[cfg(feature = "grpc")]
impl From<Result<(), tonic::Status>> for OutstandingResetResult {
    fn from(result: Result<(), tonic::Status>) -> Self {
        match result {
            Ok(()) => OutstandingResetResult::default(),
            Err(status) => OutstandingResetResult {
                code: status.code() as i32,
                message: status.message().to_string(),
            },
        }
    }
}

/// The encoded `FileDescriptorSet` of every file in `proto/` (with the
/// well-known types they import), for gRPC server reflection.
#[cfg(feature = "grpc")]
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/grpc/caravan_descriptor_set.bin"));

#[cfg(test)]
mod tests {
    /// Every cache holds an `Arc<Allocation>` (two counters and the message)
    /// per placement. Its placement metrics and reschedule tracker are boxed
    /// so that it fits the allocator's 640-byte size class (mimalloc's
    /// classes run 512, 640, 768, 896 bytes): one field more moves every
    /// cached allocation up a class.
    #[test]
    fn a_cached_allocation_fits_a_640_byte_block() {
        let arc = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<super::Allocation>();
        assert!(arc <= 640, "an Arc<Allocation> takes {arc} bytes");
    }
}
