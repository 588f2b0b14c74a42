//! Helpers every crate's tests share: where the test etcd listens, key
//! prefixes that keep tests sharing one etcd from seeing each other's keys,
//! the backend matrix that runs each service case on both stores
//! ([`backend_cases!`]), waiting for a condition ([`wait`]), and a fake eval
//! broker ([`fake_broker`]).

pub mod backend;
pub mod fake_broker;
pub mod faults;
pub mod layered;
pub mod wait;

pub use backend::Backend;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable naming the etcd endpoint tests run against.
pub const ETCD_ENV: &str = "CARAVAN_TEST_ETCD";

/// The endpoint of the etcd the tests run against, from `CARAVAN_TEST_ETCD`
/// (for example `http://127.0.0.1:23790`).
///
/// # Panics
///
/// Panics when the variable is unset or empty: a test that needs etcd must
/// fail loudly rather than pass without having run.
pub fn etcd_endpoint() -> String {
    match std::env::var(ETCD_ENV) {
        Ok(endpoint) if !endpoint.trim().is_empty() => endpoint.trim().to_string(),
        _ => panic!(
            "this test needs a running etcd: set {ETCD_ENV} (e.g. http://127.0.0.1:23790) \
             or run scripts/test, which starts one"
        ),
    }
}

/// The etcd endpoints from `CARAVAN_TEST_ETCD`, split on commas.
///
/// # Panics
///
/// Panics when the variable is unset, like [`etcd_endpoint`].
pub fn etcd_endpoints() -> Vec<String> {
    etcd_endpoint()
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect()
}

/// A key prefix no other test (in this process or another one) uses, ending
/// in `/`: `/caravan-test/<name>/<pid>-<nanos>-<n>/`.
pub fn unique_prefix(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name: String = name
        .chars()
        .map(|c| if c == '/' { '_' } else { c })
        .collect();
    format!("/caravan-test/{name}/{}-{nanos}-{n}/", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_unique_and_slash_terminated() {
        let a = unique_prefix("kv/get");
        let b = unique_prefix("kv/get");
        assert_ne!(a, b);
        assert!(a.starts_with("/caravan-test/kv_get/"));
        assert!(a.ends_with('/'));
    }
}
