//! Nomad JSON jobs: decoding never panics, whatever the bytes.
#![no_main]

use caravan_jobspec::{ParseOptions, parse_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_json(data, &ParseOptions::default());
});
