//! Host networks: a port that names a host network (other than `default`, the
//! node's own network) may only be placed on a node whose client resolved a
//! host network of that name, and it binds to that network's address.

use std::borrow::Cow;

use caravan_proto::{Node, NodeHostNetwork, TaskGroup};

use super::target;

/// One port of a group that asks for a named host network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNetworkAsk {
    /// The port's label.
    pub label: String,
    /// The network's name, or a `${meta.*}`-style target resolved per node.
    pub network: String,
    /// The filter reason when `network` is a literal the node lacks.
    reason: String,
}

/// Whether `name` means the node's own network (no named host network).
pub fn is_default(name: &str) -> bool {
    name.is_empty() || name == "default"
}

/// The group's ports (group and task networks) that name a host network.
pub fn asks(tg: &TaskGroup) -> Vec<HostNetworkAsk> {
    let networks = tg.networks.iter().chain(
        tg.tasks
            .iter()
            .filter_map(|t| t.resources.as_ref())
            .flat_map(|r| r.networks.iter()),
    );
    networks
        .flat_map(|n| n.reserved_ports.iter().chain(n.dynamic_ports.iter()))
        .filter(|p| !is_default(&p.host_network))
        .map(|p| HostNetworkAsk {
            label: p.label.clone(),
            network: p.host_network.clone(),
            reason: missing(&p.host_network, &p.label),
        })
        .collect()
}

/// The filter reason for a node without the network `network` for port `label`.
pub fn missing(network: &str, label: &str) -> String {
    format!("missing host network {network:?} for port {label:?}")
}

/// The node's host network named `name`, if it has one.
pub fn find<'n>(node: &'n Node, name: &str) -> Option<&'n NodeHostNetwork> {
    node.host_networks.iter().find(|n| n.name == name)
}

impl HostNetworkAsk {
    /// Whether the network name reads a node value (so results differ per node).
    pub fn interpolated(&self) -> bool {
        self.network.contains("${")
    }

    /// The network name on `node`; `None` when an interpolation finds nothing.
    pub fn resolve<'a>(&'a self, node: &'a Node) -> Option<Cow<'a, str>> {
        target::resolve(&self.network, node)
    }

    /// Checks the node has the network; the error is the filter reason.
    pub fn check(&self, node: &Node) -> Result<(), Cow<'_, str>> {
        match self.resolve(node) {
            None => Err(Cow::Owned(format!(
                "invalid host network {:?} template for port {:?}",
                self.network, self.label
            ))),
            Some(name) if is_default(&name) || find(node, &name).is_some() => Ok(()),
            Some(name) if self.interpolated() => Err(Cow::Owned(missing(&name, &self.label))),
            Some(_) => Err(Cow::Borrowed(&self.reason)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{NetworkResource, Port};

    fn group(ports: &[(&str, &str)]) -> TaskGroup {
        TaskGroup {
            networks: vec![NetworkResource {
                dynamic_ports: ports
                    .iter()
                    .map(|(label, net)| Port {
                        label: (*label).into(),
                        host_network: (*net).into(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn node(nets: &[&str]) -> Node {
        let mut n = Node::default();
        n.meta.insert("net".into(), "public".into());
        n.host_networks = nets
            .iter()
            .map(|name| NodeHostNetwork {
                name: (*name).into(),
                address: "10.0.0.7".into(),
                ..Default::default()
            })
            .collect();
        n
    }

    #[test]
    fn only_named_networks_are_asked_and_missing_ones_give_nomads_reason() {
        let tg = group(&[("a", ""), ("b", "default"), ("http", "public")]);
        let asks = asks(&tg);
        assert_eq!(asks.len(), 1);
        assert_eq!(asks[0].check(&node(&["public"])), Ok(()));
        assert_eq!(
            asks[0].check(&node(&["private"])).unwrap_err(),
            "missing host network \"public\" for port \"http\""
        );
    }

    #[test]
    fn interpolated_names_resolve_per_node() {
        let tg = group(&[("http", "${meta.net}")]);
        let ask = &asks(&tg)[0];
        assert!(ask.interpolated());
        assert_eq!(ask.check(&node(&["public"])), Ok(()));
        assert_eq!(
            ask.check(&node(&[])).unwrap_err(),
            "missing host network \"public\" for port \"http\""
        );
        let tg = group(&[("http", "${meta.absent}")]);
        assert_eq!(
            asks(&tg)[0].check(&node(&["public"])).unwrap_err(),
            "invalid host network \"${meta.absent}\" template for port \"http\""
        );
    }
}
