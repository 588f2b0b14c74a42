//! The client against in-process `caravan dev` clusters (every service and a
//! client node on the embedded store), in one binary: one link of the
//! cluster's dependencies instead of one per file.

mod acl;
mod common;
mod deployments;
mod fakes;
mod jobs;
mod nodes;
mod retries;
