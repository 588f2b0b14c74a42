//! The `caravan` binary.

fn main() {}
