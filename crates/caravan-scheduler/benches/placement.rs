//! Placement throughput benchmarks (filled in below).
fn main() {}
