//! The `caravan-deployment-watcher` binary (being built).

fn main() {}
