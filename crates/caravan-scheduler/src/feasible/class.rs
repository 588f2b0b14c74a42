//! Computed node classes: nodes that look alike for feasibility share cached results.

use caravan_proto::Node;

/// Hashes what feasibility depends on, leaving out `unique.*` attributes and meta.
///
/// Node registration should store this in `Node.computed_class`; the scheduler
/// computes it itself for nodes that arrive without one.
pub fn compute_node_class(node: &Node) -> String {
    let mut h = Fnv::new();
    h.field(node.datacenter.as_bytes());
    h.field(node.node_class.as_bytes());
    h.field(node.node_pool.as_bytes());
    for (k, v) in &node.attributes {
        if !k.starts_with("unique.") {
            h.field(k.as_bytes());
            h.field(v.as_bytes());
        }
    }
    h.field(b"meta");
    for (k, v) in &node.meta {
        if !k.starts_with("unique.") {
            h.field(k.as_bytes());
            h.field(v.as_bytes());
        }
    }
    h.field(b"drivers");
    for (k, d) in &node.drivers {
        h.field(k.as_bytes());
        h.field(&[u8::from(d.detected), u8::from(d.healthy)]);
    }
    // Host volumes decide feasibility too; without any the class is what it was.
    if !node.host_volumes.is_empty() {
        h.field(b"host_volumes");
        for (name, v) in &node.host_volumes {
            h.field(name.as_bytes());
            h.field(&[u8::from(v.read_only)]);
        }
    }
    // So do host networks, by name; nodes without any keep their class.
    if !node.host_networks.is_empty() {
        h.field(b"host_networks");
        let mut names: Vec<&str> = node.host_networks.iter().map(|n| n.name.as_str()).collect();
        names.sort_unstable();
        for name in names {
            h.field(name.as_bytes());
        }
    }
    // So do network modes beyond the host's (bridge); without any the class
    // is what it was.
    let modes = node
        .resources
        .iter()
        .flat_map(|r| r.networks.iter())
        .filter(|n| !n.mode.is_empty() && n.mode != "host");
    for (i, n) in modes.enumerate() {
        if i == 0 {
            h.field(b"network_modes");
        }
        h.field(n.mode.as_bytes());
    }
    format!("v1:{:016x}", h.0)
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    fn field(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator keeps ("ab","c") and ("a","bc") apart.
        self.0 ^= 0x1f;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_attributes_do_not_change_the_class() {
        let mut a = Node::default();
        a.attributes.insert("kernel.name".into(), "linux".into());
        a.attributes.insert("unique.hostname".into(), "a".into());
        let mut b = a.clone();
        b.attributes.insert("unique.hostname".into(), "b".into());
        b.id = "other".into();
        assert_eq!(compute_node_class(&a), compute_node_class(&b));
        b.attributes.insert("kernel.name".into(), "darwin".into());
        assert_ne!(compute_node_class(&a), compute_node_class(&b));
    }
}
