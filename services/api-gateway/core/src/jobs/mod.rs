//! Jobs: registration and its evaluations, revert, stability, scaling and
//! dispatch, reads, and dry-run plans.

pub mod lifecycle;
pub mod plan;
pub mod reads;
pub mod register;
mod versions;
