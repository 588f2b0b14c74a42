//! The job specification's tests, in one binary (one link instead of five).

mod diff;
mod hcl;
mod json;
mod robustness;
mod validate;
