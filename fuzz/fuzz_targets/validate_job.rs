//! Every job that parses (HCL or JSON) goes through what the gateway does with
//! it: validation, placement-rule checks, warnings, rendering back to Nomad's
//! JSON and a diff against itself. None of it may panic.
#![no_main]

use caravan_jobspec::{ParseOptions, diff, parse_job, render_json, validate, warnings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(parsed) = parse_job(data, &ParseOptions::default()) else {
        return;
    };
    let job = parsed.job;
    let _ = validate(&job);
    let _ = warnings(&job);
    let _ = caravan_scheduler::validate_job(&job);
    let _ = render_json(&job);
    let _ = diff(None, &job, false);
    let _ = diff(Some(&job), &job, true);
});
