//! Jobs: registration and its evaluations, reads, and dry-run plans.

pub mod plan;
pub mod reads;
pub mod register;
mod versions;

pub use versions::KEPT_VERSIONS;
