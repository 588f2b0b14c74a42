//! The client's bridge network: the CNI config list every bridge-mode alloc
//! is attached with, and the port mappings of its group's ports.

use caravan_proto::AllocatedPort;
use serde_json::{Value, json};

/// The bridge allocs are attached to.
pub const BRIDGE_NAME: &str = "nomad";
/// The subnet alloc addresses are taken from.
pub const ALLOC_SUBNET: &str = "172.26.64.0/20";
/// The iptables chain the firewall plugin keeps for administrators' rules.
pub const ADMIN_CHAIN: &str = "NOMAD-ADMIN";
/// The plugins the bridge config list runs (all must be installed).
pub const PLUGINS: [&str; 5] = ["loopback", "bridge", "host-local", "firewall", "portmap"];

/// The config list of the bridge network: loopback up, a veth on the
/// `nomad` bridge with an address from host-local IPAM and a default route
/// (masqueraded), the firewall plugin's forwarding rules, and the port
/// mappings (hairpin SNAT so the host reaches them over 127.0.0.1 too).
pub fn conflist() -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "nomad",
        "plugins": [
            {"type": "loopback"},
            {
                "type": "bridge",
                "bridge": BRIDGE_NAME,
                "ipMasq": true,
                "isGateway": true,
                "forceAddress": true,
                "hairpinMode": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": ALLOC_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": "/var/run/cni"
                }
            },
            {"type": "firewall", "backend": "iptables", "iptablesAdminChainName": ADMIN_CHAIN},
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
        ]
    })
}

/// Makes sure the administrators' chain accepts traffic forwarded to the
/// alloc subnet on the bridge: where the FORWARD policy drops (as Docker
/// sets it), connections from other hosts to a mapped port would be
/// dropped after their DNAT. One rule for all allocs, kept across them.
pub fn ensure_forwarding_rule() -> std::io::Result<()> {
    let iptables = |args: &[&str]| {
        std::process::Command::new("iptables")
            .env(
                "PATH",
                "/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin",
            )
            .args(["-w", "-t", "filter"])
            .args(args)
            .output()
    };
    // Exit status 1: the chain is there already.
    let made = iptables(&["-N", ADMIN_CHAIN])?;
    if !made.status.success() && made.status.code() != Some(1) {
        return Err(std::io::Error::other(format!(
            "iptables -N {ADMIN_CHAIN}: {}",
            String::from_utf8_lossy(&made.stderr).trim()
        )));
    }
    let rule = ["-o", BRIDGE_NAME, "-d", ALLOC_SUBNET, "-j", "ACCEPT"];
    if iptables(&[&["-C", ADMIN_CHAIN][..], &rule[..]].concat())?
        .status
        .success()
    {
        return Ok(());
    }
    let added = iptables(&[&["-A", ADMIN_CHAIN][..], &rule[..]].concat())?;
    if added.status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "iptables -A {ADMIN_CHAIN}: {}",
            String::from_utf8_lossy(&added.stderr).trim()
        )))
    }
}

/// The config list of `mode = "none"`: a namespace with loopback alone.
pub fn loopback_only() -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "loopback",
        "plugins": [{"type": "loopback"}]
    })
}

/// The runtime config of the portmap plugin: each port's host port to its
/// `to` port (the host port when `to` is unset), over TCP and UDP.
pub fn port_mappings(ports: &[AllocatedPort]) -> Value {
    let mappings: Vec<Value> = ports
        .iter()
        .filter(|p| p.value > 0)
        .flat_map(|p| {
            let inner = if p.to > 0 { p.to } else { p.value };
            ["tcp", "udp"].map(
                |proto| json!({"hostPort": p.value, "containerPort": inner, "protocol": proto}),
            )
        })
        .collect();
    json!({ "portMappings": mappings })
}

/// The alloc's IPv4 address in an ADD result (`ips[].address` without its
/// prefix length).
pub fn alloc_ip(result: &Value) -> Option<String> {
    result
        .get("ips")?
        .as_array()?
        .iter()
        .filter_map(|ip| ip.get("address")?.as_str())
        .filter_map(|a| a.split('/').next())
        .find(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_port_maps_host_to_its_to_port_over_tcp_and_udp() {
        let ports = [
            AllocatedPort {
                label: "http".into(),
                value: 25000,
                to: 8080,
                ..Default::default()
            },
            AllocatedPort {
                label: "same".into(),
                value: 9000,
                ..Default::default()
            },
        ];
        let m = port_mappings(&ports);
        let m = m["portMappings"].as_array().expect("list");
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[0],
            json!({"hostPort": 25000, "containerPort": 8080, "protocol": "tcp"})
        );
        assert_eq!(m[1]["protocol"], "udp");
        assert_eq!(m[2]["containerPort"], 9000);
    }

    #[test]
    fn the_alloc_ip_is_the_ipv4_address_of_the_result() {
        let r = json!({"ips": [{"address": "fd00::2/64"}, {"address": "172.26.64.7/20", "gateway": "172.26.64.1"}]});
        assert_eq!(alloc_ip(&r).as_deref(), Some("172.26.64.7"));
        assert_eq!(alloc_ip(&json!({})), None);
    }
}
