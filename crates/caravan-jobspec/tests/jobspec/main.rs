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

use caravan_jobspec::{JobspecError, ParseOptions, parse_hcl, validate};

/// Every error parsing and validating the HCL job `text` reports (none for
/// a valid job).
pub fn hcl_errors(text: &str) -> Vec<String> {
    match parse_hcl(text, &ParseOptions::default()) {
        Ok(p) => match validate(&p.job) {
            Ok(()) => Vec::new(),
            Err(e) => e.messages(),
        },
        Err(JobspecError::Invalid(e)) => e.messages(),
        Err(other) => vec![other.to_string()],
    }
}
