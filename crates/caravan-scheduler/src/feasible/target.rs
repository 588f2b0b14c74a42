//! Interpolation of constraint targets against a node.

use std::borrow::Cow;

use caravan_proto::Node;

/// Resolves a target: `${node.*}`, `${attr.*}`, `${meta.*}` or a literal.
/// `None` means the node does not have the referenced value.
pub fn resolve<'n>(target: &'n str, node: &'n Node) -> Option<Cow<'n, str>> {
    let Some(inner) = target.strip_prefix("${").and_then(|t| t.strip_suffix('}')) else {
        return Some(Cow::Borrowed(target));
    };
    let found: Option<&str> = match inner {
        "node.unique.id" => Some(&node.id),
        "node.unique.name" => Some(&node.name),
        "node.datacenter" => Some(&node.datacenter),
        "node.class" => Some(&node.node_class),
        "node.pool" => Some(if node.node_pool.is_empty() {
            "default"
        } else {
            &node.node_pool
        }),
        _ => {
            if let Some(k) = inner.strip_prefix("attr.") {
                node.attributes.get(k).map(String::as_str)
            } else if let Some(k) = inner.strip_prefix("meta.") {
                node.meta.get(k).map(String::as_str)
            } else {
                None
            }
        }
    };
    found.map(Cow::Borrowed)
}

/// Whether a target refers to something unique to one node, which defeats
/// per-class caching of feasibility.
pub fn is_unique(target: &str) -> bool {
    target.contains("${node.unique.")
        || target.contains("${attr.unique.")
        || target.contains("${meta.unique.")
}

/// Whether a target is an interpolation known to the scheduler.
pub fn is_known_interpolation(target: &str) -> bool {
    let Some(inner) = target.strip_prefix("${").and_then(|t| t.strip_suffix('}')) else {
        return !target.contains("${");
    };
    matches!(
        inner,
        "node.unique.id" | "node.unique.name" | "node.datacenter" | "node.class" | "node.pool"
    ) || inner.strip_prefix("attr.").is_some_and(|k| !k.is_empty())
        || inner.strip_prefix("meta.").is_some_and(|k| !k.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_node_fields_attrs_and_meta() {
        let mut n = Node {
            id: "n1".into(),
            name: "one".into(),
            datacenter: "dc1".into(),
            node_class: "large".into(),
            ..Default::default()
        };
        n.attributes.insert("kernel.name".into(), "linux".into());
        n.meta.insert("rack".into(), "r1".into());
        assert_eq!(resolve("${node.unique.id}", &n).as_deref(), Some("n1"));
        assert_eq!(resolve("${node.unique.name}", &n).as_deref(), Some("one"));
        assert_eq!(resolve("${node.datacenter}", &n).as_deref(), Some("dc1"));
        assert_eq!(resolve("${node.class}", &n).as_deref(), Some("large"));
        assert_eq!(resolve("${node.pool}", &n).as_deref(), Some("default"));
        assert_eq!(resolve("${attr.kernel.name}", &n).as_deref(), Some("linux"));
        assert_eq!(resolve("${meta.rack}", &n).as_deref(), Some("r1"));
        assert_eq!(resolve("${meta.missing}", &n), None);
        assert_eq!(resolve("literal", &n).as_deref(), Some("literal"));
        assert!(is_unique("${attr.unique.hostname}"));
        assert!(!is_unique("${attr.kernel.name}"));
        assert!(is_known_interpolation("${attr.x}"));
        assert!(!is_known_interpolation("${foo.x}"));
    }
}
