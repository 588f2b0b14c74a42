//! The cluster stays stable under a burst of placements: 20 jobs × 1,000
//! allocations on 2,000 simulated nodes, run by `e2e-bench` (the real
//! service binaries on the test etcd). The run must place exactly what was
//! asked, get every allocation running, and leave no node marked down, no
//! allocation replaced, no node over-committed and no duplicate name. It
//! asserts outcomes, not times: the bench's own deadline only bounds a hung
//! run. Heartbeats are held to the default TTLs: no node may go down.
//!
//! Needs the binaries (`cargo build --workspace --bins`) and
//! `CARAVAN_TEST_ETCD`; `scripts/test` provides both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use caravan_integration_tests::binaries::{bin_dir, binary};
use serde_json::Value;

const JOBS: usize = 20;
const COUNT: usize = 1_000;
const NODES: u32 = 2_000;

#[test]
fn a_burst_of_20_000_placements_on_2_000_nodes_loses_no_node_and_replaces_nothing() {
    let Ok(etcd) = std::env::var("CARAVAN_TEST_ETCD") else {
        panic!("CARAVAN_TEST_ETCD is not set: run this through scripts/test");
    };
    let dir = bin_dir().unwrap();
    let bench = binary(&dir, "e2e-bench").unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let status = Command::new(&bench)
        .args(["--etcd", &etcd])
        .args(["--jobs", &JOBS.to_string()])
        .args(["--count", &COUNT.to_string()])
        .args(["--nodes", &NODES.to_string()])
        .args(["--timeout-secs", "900"])
        // At the default heartbeat TTLs (the first nodes registered get the
        // shortest, 10 s): heartbeats run on threads of their own in the
        // client process and the gateway, above the services' runtimes in
        // CPU priority (runtime.nice), and registrations take turns at the
        // gateway, so a saturated machine does not make them late enough
        // to take a node down (docs/benchmarks.md, "Registrations take
        // turns").
        .args(["--log-filter", "warn"])
        .arg("--json")
        .arg(&json)
        .status()
        .expect("starting e2e-bench");
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("e2e-bench ({status}) wrote no report: {e}"));
    let report: Value = serde_json::from_str(&text).unwrap();
    let checks = &report["checks"];
    let wanted = JOBS * COUNT;
    let failures = failures(&report, checks, wanted);
    assert!(
        failures.is_empty() && status.success(),
        "e2e-bench exited {status}; {}\nreport: {text}",
        failures.join("; ")
    );
}

/// What went wrong in the run, one line each.
fn failures(report: &Value, checks: &Value, wanted: usize) -> Vec<String> {
    let mut failed = Vec::new();
    let count = |v: &Value| v.as_u64().map(|n| n as usize);
    let list_len = |v: &Value| v.as_array().map(Vec::len);
    if report["interrupted"] != Value::Bool(false) {
        failed.push("the run was interrupted".to_string());
    }
    if count(&report["allocs_running"]) != Some(wanted) {
        failed.push(format!(
            "{} of {wanted} allocations seen running",
            report["allocs_running"]
        ));
    }
    if count(&checks["allocs_in_etcd"]) != Some(wanted) {
        failed.push(format!(
            "{} allocations in etcd for {wanted} wanted",
            checks["allocs_in_etcd"]
        ));
    }
    for (field, what) in [
        ("nodes_down", "nodes marked down"),
        ("overcommitted", "nodes over-committed"),
        ("duplicated", "duplicate allocation names"),
    ] {
        if list_len(&checks[field]) != Some(0) {
            failed.push(format!("{what}: {}", checks[field]));
        }
    }
    if count(&checks["replacements"]) != Some(0) {
        failed.push(format!("{} allocations replaced", checks["replacements"]));
    }
    failed
}
