//! The `caravan-eval-broker` binary.

fn main() {}
