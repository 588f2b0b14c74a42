//! How a plan's parts are split into transactions: within the op and byte
//! budget, never splitting one node's part.

use super::changes::{Changes, Part};

/// Groups parts into transactions within `max_ops` and `max_bytes`; the
/// plan-wide part goes first. A part over the budget on its own gets a
/// transaction of its own.
pub(crate) fn batches(changes: Changes, max_ops: usize, max_bytes: usize) -> Vec<Vec<Part>> {
    let mut out: Vec<Vec<Part>> = Vec::new();
    let mut current: Vec<Part> = Vec::new();
    let (mut ops, mut bytes) = (0usize, 0usize);
    let global = changes.global;
    let parts = std::iter::once(global)
        .filter(|g| !g.changes.is_empty())
        .chain(changes.nodes);
    for part in parts {
        if !current.is_empty() && (ops + part.ops > max_ops || bytes + part.bytes > max_bytes) {
            out.push(std::mem::take(&mut current));
            ops = 0;
            bytes = 0;
        }
        ops += part.ops;
        bytes += part.bytes;
        current.push(part);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
