//! The job specification's tests, in one binary (one link instead of six).

mod diff;
mod disconnect;
mod group_network;
mod hcl;
mod hcl2;
mod json;
mod parity;
mod refused;
mod robustness;
mod scaling;
mod services;
mod task_files;
mod validate;
mod volumes;
