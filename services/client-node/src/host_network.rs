//! Named host networks: the client's `host_network` entries resolved to one of
//! the node's own addresses, which is where ports asking for that name bind.
//!
//! An entry matches an address when the address is in one of its CIDR blocks
//! (any address when it names none) and sits on its interface (any interface
//! when it names none). An entry no address matches is logged and left off
//! the node, so jobs asking for it are placed elsewhere.

use std::collections::BTreeMap;
use std::net::IpAddr;

use caravan_proto::NodeHostNetwork;
use ipnet::IpNet;

use crate::config::HostNetworkConfig;
use crate::error::ClientError;

/// One address the node holds, on the interface holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddr {
    /// Interface name (`lo`, `eth0`).
    pub interface: String,
    /// The address.
    pub ip: IpAddr,
}

/// Whether `name` is a usable host network name: letters, digits, `_`, `-`, `.`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Checks one configured host network, naming the bad key.
pub fn validate(name: &str, n: &HostNetworkConfig) -> Result<(), ClientError> {
    if !valid_name(name) {
        return Err(ClientError::invalid(
            format!("host_network.{name}"),
            "a host network name is letters, digits, '_', '-' and '.'",
        ));
    }
    if name == "default" {
        return Err(ClientError::invalid(
            "host_network.default",
            "\"default\" is the node's own network and cannot be redefined",
        ));
    }
    for block in cidr_blocks(&n.cidr) {
        if let Err(e) = block.parse::<IpNet>() {
            return Err(ClientError::invalid(
                format!("host_network.{name}.cidr"),
                format!("{block:?} is not a CIDR block: {e}"),
            ));
        }
    }
    if caravan_scheduler::ports::PortSet::parse(&n.reserved_ports).is_err() {
        return Err(ClientError::invalid(
            format!("host_network.{name}.reserved_ports"),
            "expected ports and ranges like 22,80,8000-8100",
        ));
    }
    Ok(())
}

fn cidr_blocks(cidr: &str) -> impl Iterator<Item = &str> {
    cidr.split(',').map(str::trim).filter(|b| !b.is_empty())
}

/// The addresses of this machine's interfaces (`getifaddrs`); empty when the
/// call fails (logged).
pub fn probe_interfaces() -> Vec<InterfaceAddr> {
    match nix::ifaddrs::getifaddrs() {
        Ok(addrs) => addrs
            .filter_map(|a| {
                let sa = a.address?;
                let ip = if let Some(v4) = sa.as_sockaddr_in() {
                    IpAddr::V4(v4.ip())
                } else {
                    IpAddr::V6(sa.as_sockaddr_in6()?.ip())
                };
                Some(InterfaceAddr {
                    interface: a.interface_name,
                    ip,
                })
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "listing the node's interface addresses failed");
            Vec::new()
        }
    }
}

/// Resolves each configured network to the first matching address (IPv4
/// before IPv6, link-local only when nothing else matches); networks nothing
/// matches are logged and left out.
pub fn resolve(
    config: &BTreeMap<String, HostNetworkConfig>,
    addrs: &[InterfaceAddr],
) -> Vec<NodeHostNetwork> {
    let mut out = Vec::with_capacity(config.len());
    for (name, n) in config {
        let blocks: Vec<IpNet> = cidr_blocks(&n.cidr)
            .filter_map(|b| b.parse().ok())
            .collect();
        let matches = |a: &&InterfaceAddr| {
            (n.cidr.trim().is_empty() || blocks.iter().any(|b| b.contains(&a.ip)))
                && (n.interface.is_empty() || n.interface == a.interface)
        };
        let best = addrs
            .iter()
            .filter(matches)
            .min_by_key(|a| (link_local(&a.ip), a.ip.is_ipv6()));
        match best {
            Some(a) => out.push(NodeHostNetwork {
                name: name.clone(),
                address: a.ip.to_string(),
                interface: a.interface.clone(),
                reserved_ports: n.reserved_ports.clone(),
                cidr: n.cidr.clone(),
            }),
            None => tracing::warn!(
                host_network = %name,
                cidr = %n.cidr,
                interface = %n.interface,
                "no address of this node matches the host network; it is left off the node"
            ),
        }
    }
    out
}

fn link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(interface: &str, ip: &str) -> InterfaceAddr {
        InterfaceAddr {
            interface: interface.into(),
            ip: ip.parse().unwrap(),
        }
    }

    fn net(cidr: &str, interface: &str) -> HostNetworkConfig {
        HostNetworkConfig {
            cidr: cidr.into(),
            interface: interface.into(),
            reserved_ports: String::new(),
        }
    }

    #[test]
    fn networks_resolve_by_cidr_and_interface_and_unmatched_ones_are_left_out() {
        let addrs = [
            addr("lo", "127.0.0.1"),
            addr("lo", "::1"),
            addr("eth0", "fe80::1"),
            addr("eth0", "10.1.2.3"),
            addr("eth1", "192.168.5.9"),
        ];
        let mut config = BTreeMap::new();
        config.insert("lo".to_string(), net("127.0.0.0/8", ""));
        config.insert(
            "private".to_string(),
            net("10.0.0.0/8, 192.168.0.0/16", "eth1"),
        );
        config.insert("eth0".to_string(), net("", "eth0"));
        config.insert("public".to_string(), net("203.0.113.0/24", ""));
        let got: Vec<(String, String, String)> = resolve(&config, &addrs)
            .into_iter()
            .map(|n| (n.name, n.address, n.interface))
            .collect();
        assert_eq!(
            got,
            vec![
                ("eth0".into(), "10.1.2.3".into(), "eth0".into()),
                ("lo".into(), "127.0.0.1".into(), "lo".into()),
                ("private".into(), "192.168.5.9".into(), "eth1".into()),
            ]
        );
    }

    #[test]
    fn bad_names_cidrs_and_reserved_ports_name_their_key() {
        let err = |name: &str, n: HostNetworkConfig| validate(name, &n).unwrap_err().to_string();
        assert!(err("a b", net("", "")).contains("host_network.a b"));
        assert!(err("default", net("", "")).contains("host_network.default"));
        assert!(err("x", net("10.0.0.0/33", "")).contains("host_network.x.cidr"));
        let mut bad_ports = net("", "");
        bad_ports.reserved_ports = "80-".into();
        assert!(err("x", bad_ports).contains("host_network.x.reserved_ports"));
        assert!(validate("pub-1.a_b", &net("10.0.0.0/8,::1/128", "")).is_ok());
    }

    #[test]
    fn this_machine_has_a_loopback_address() {
        let addrs = probe_interfaces();
        assert!(
            addrs.iter().any(|a| a.ip.is_loopback()),
            "no loopback in {addrs:?}"
        );
    }
}
