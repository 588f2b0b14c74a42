//! HCL job files: parsing never panics, whatever the text.
#![no_main]

use caravan_jobspec::{ParseOptions, hcl_to_nomad_json, parse_hcl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let options = ParseOptions::default();
    let _ = parse_hcl(text, &options);
    let _ = hcl_to_nomad_json(text, false, &options);
});
