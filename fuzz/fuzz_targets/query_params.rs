//! HTTP query strings: decoding and reading every parameter the API takes
//! (blocking-query options, flags, integers) never panics; a bad value is an
//! error naming its parameter.
#![no_main]

// The gateway's own parameter parsing, compiled here without the server.
#[path = "../../services/api-gateway/http/src/params.rs"]
#[allow(dead_code)]
mod params;

use libfuzzer_sys::fuzz_target;

const FLAGS: [&str; 8] = [
    "purge", "follow", "plain", "resources", "os", "stale", "global", "prune",
];

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let p: params::Params = params::pairs(raw).into_iter().collect();
    for name in FLAGS {
        if let Err(e) = params::flag(&p, name) {
            assert_eq!(e.field, name);
        }
    }
    if let Err(e) = params::stale(&p) {
        assert_eq!(e.field, "stale");
    }
    for name in ["offset", "cas"] {
        if let Err(e) = params::integer(&p, name, "integer") {
            assert_eq!(e.field, name);
        }
    }
    match params::blocking(&p) {
        Ok(options) => assert!(options.min_revision >= 0),
        Err(e) => assert!(e.field == "index" || e.field == "wait", "{e:?}"),
    }
});
