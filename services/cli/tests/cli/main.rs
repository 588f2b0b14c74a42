//! The CLI against real stacks (`caravan dev` and the service binaries), in
//! one binary: one link of the CLI's dependencies instead of one per file.

mod acl;
mod alloc_fs;
mod common;
mod deployments;
mod dev;
mod dev_docker;
mod namespaces;
mod nomad_verbs;
mod service_checks;
mod vars;
