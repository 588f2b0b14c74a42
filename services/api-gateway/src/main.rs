//! The `caravan-api-gateway` binary.

fn main() {}
