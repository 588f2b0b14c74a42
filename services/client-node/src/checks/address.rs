//! Where a service or its check is reached: an address and port from the
//! service's `address`, `address_mode` and `port`, and the allocation's
//! ports, by Nomad's rules.

use caravan_proto::AllocatedPort;

/// What an address is resolved against.
#[derive(Clone, Copy, Debug)]
pub struct Reach<'a> {
    /// The allocation's ports (group and task ports together).
    pub ports: &'a [AllocatedPort],
    /// The node's address, for a numeric port with no mapping.
    pub node_ip: &'a str,
    /// The address of the task's own network namespace, when its driver
    /// gives it one (`address_mode = "driver"`).
    pub driver_ip: Option<&'a str>,
}

/// The address and port (0: none) of `label` under `mode` with the custom
/// `address`, or why it has none.
pub fn resolve(
    address: &str,
    mode: &str,
    label: &str,
    reach: Reach<'_>,
) -> Result<(String, u16), String> {
    let mapped = |label: &str| reach.ports.iter().find(|p| p.label == label);
    let numeric = |label: &str, why: &str| -> Result<u16, String> {
        match label.parse::<i64>() {
            Ok(port) if port > 0 => {
                u16::try_from(port).map_err(|_| format!("invalid port: {label:?}: out of range"))
            }
            Ok(_) => Err(format!("invalid port: {label:?}: port must be >0")),
            Err(_) => Err(why.to_owned()),
        }
    };
    let custom =
        |mode: &str| format!("cannot use custom advertise address with {mode:?} address mode");
    match mode {
        "" | "auto" => {
            if !address.is_empty() {
                if label.is_empty() {
                    return Ok((address.to_owned(), 0));
                }
                if let Some(p) = mapped(label) {
                    return Ok((address.to_owned(), port16(p.value)?));
                }
                let why =
                    format!("invalid port: {label:?}: not a valid port mapping or numeric port");
                return Ok((address.to_owned(), numeric(label, &why)?));
            }
            // No driver of Caravan's asks for its network to be advertised
            // (as Nomad's docker driver does only on request): the host's.
            resolve("", "host", label, reach)
        }
        "host" => {
            if !address.is_empty() {
                return Err(custom("host"));
            }
            if label.is_empty() {
                return Ok((reach.node_ip.to_owned(), 0));
            }
            if let Some(p) = mapped(label) {
                let ip = if p.host_ip.is_empty() {
                    reach.node_ip
                } else {
                    &p.host_ip
                };
                return Ok((ip.to_owned(), port16(p.value)?));
            }
            let why = format!("invalid port {label:?}: port label not found");
            Ok((reach.node_ip.to_owned(), numeric(label, &why)?))
        }
        "driver" => {
            if !address.is_empty() {
                return Err(custom("driver"));
            }
            let ip = reach
                .driver_ip
                .ok_or("cannot use address_mode=\"driver\": no driver network exists")?;
            if label.is_empty() {
                return Ok((ip.to_owned(), 0));
            }
            if let Some(p) = mapped(label) {
                return Ok((
                    ip.to_owned(),
                    port16(if p.to > 0 { p.to } else { p.value })?,
                ));
            }
            let why = format!(
                "invalid port label {label:?}: port labels in driver address_mode must be numeric or in the driver's port map"
            );
            Ok((ip.to_owned(), numeric(label, &why)?))
        }
        "alloc" => Err(
            "cannot use address_mode=\"alloc\": no allocation network status reported (Caravan's \
             clients run host networking only)"
                .to_owned(),
        ),
        other => Err(format!("invalid address mode {other:?}")),
    }
}

fn port16(value: u32) -> Result<u16, String> {
    u16::try_from(value).map_err(|_| format!("invalid port {value}: out of range"))
}

/// `host:port` for a dial, with brackets around an IPv6 address.
pub fn dial_address(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> Vec<AllocatedPort> {
        vec![
            AllocatedPort {
                label: "http".into(),
                value: 23456,
                to: 8080,
                host_ip: "10.0.0.5".into(),
            },
            AllocatedPort {
                label: "admin".into(),
                value: 23457,
                to: 0,
                host_ip: String::new(),
            },
        ]
    }

    fn reach<'a>(ports: &'a [AllocatedPort], driver_ip: Option<&'a str>) -> Reach<'a> {
        Reach {
            ports,
            node_ip: "10.0.0.1",
            driver_ip,
        }
    }

    #[test]
    fn host_mode_takes_the_mapped_port_on_its_address() {
        let p = ports();
        let r = reach(&p, None);
        assert_eq!(
            resolve("", "host", "http", r),
            Ok(("10.0.0.5".into(), 23456))
        );
        assert_eq!(
            resolve("", "auto", "admin", r),
            Ok(("10.0.0.1".into(), 23457))
        );
        assert_eq!(resolve("", "", "9000", r), Ok(("10.0.0.1".into(), 9000)));
        assert_eq!(resolve("", "host", "", r), Ok(("10.0.0.1".into(), 0)));
        assert_eq!(
            resolve("", "host", "nope", r),
            Err("invalid port \"nope\": port label not found".into())
        );
        assert_eq!(
            resolve("", "host", "0", r),
            Err("invalid port: \"0\": port must be >0".into())
        );
    }

    #[test]
    fn a_custom_address_keeps_the_port_and_only_goes_with_auto() {
        let p = ports();
        let r = reach(&p, None);
        assert_eq!(
            resolve("db.internal", "auto", "http", r),
            Ok(("db.internal".into(), 23456))
        );
        assert_eq!(
            resolve("db.internal", "", "", r),
            Ok(("db.internal".into(), 0))
        );
        assert_eq!(
            resolve("db.internal", "host", "http", r),
            Err("cannot use custom advertise address with \"host\" address mode".into())
        );
    }

    #[test]
    fn driver_mode_needs_a_driver_network_and_takes_the_inner_port() {
        let p = ports();
        assert_eq!(
            resolve("", "driver", "http", reach(&p, None)),
            Err("cannot use address_mode=\"driver\": no driver network exists".into())
        );
        let r = reach(&p, Some("172.17.0.2"));
        assert_eq!(
            resolve("", "driver", "http", r),
            Ok(("172.17.0.2".into(), 8080))
        );
        assert_eq!(
            resolve("", "auto", "admin", r),
            Ok(("10.0.0.1".into(), 23457))
        );
        assert!(
            resolve("", "alloc", "http", r)
                .unwrap_err()
                .contains("alloc")
        );
        assert_eq!(
            resolve("", "bogus", "http", r),
            Err("invalid address mode \"bogus\"".into())
        );
    }

    #[test]
    fn ipv6_addresses_are_bracketed_for_a_dial() {
        assert_eq!(dial_address("::1", 80), "[::1]:80");
        assert_eq!(dial_address("127.0.0.1", 80), "127.0.0.1:80");
    }
}
