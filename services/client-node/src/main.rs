//! The `caravan-client-node` binary.

fn main() {}
