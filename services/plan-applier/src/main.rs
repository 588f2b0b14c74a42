//! The `caravan-plan-applier` binary.

fn main() {}
