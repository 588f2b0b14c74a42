//! The end-to-end benchmark (being written).

fn main() {}
