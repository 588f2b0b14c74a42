//! The `caravan-scheduler-worker` binary.

fn main() {}
