//! What the node is: CPU, memory, disk, kernel and OS attributes, drivers,
//! and the computed class the scheduler caches feasibility by.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;

use caravan_proto::{
    Node, NodeNetwork, NodeReservedResources, NodeResources, NodeStatus, SchedulingEligibility,
};

use crate::config::ClientConfig;
use crate::driver::Fingerprint;

/// The version reported as `caravan.version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The host facts fingerprinting found; pure data so it can be faked in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// Logical cores.
    pub cores: u32,
    /// MHz of one core, if the kernel said.
    pub core_mhz: Option<u64>,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Total memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Free disk of the data dir's file system in bytes.
    pub disk_free_bytes: Option<u64>,
    /// `uname -s`, lower case.
    pub kernel_name: String,
    /// `uname -r`.
    pub kernel_version: String,
    /// `ID` from os-release.
    pub os_name: String,
    /// `VERSION_ID` from os-release.
    pub os_version: String,
    /// Host name.
    pub hostname: String,
    /// The node's IP address.
    pub ip: IpAddr,
    /// Every address of the node's interfaces, which named host networks resolve against.
    pub interfaces: Vec<crate::host_network::InterfaceAddr>,
    /// Bridge networking works here (root, the CNI plugins installed).
    pub bridge_network: bool,
    /// The CNI plugins installed, with their versions.
    pub cni_plugins: BTreeMap<String, String>,
}

impl HostFacts {
    /// Reads the facts of this machine; `data_dir` selects the file system whose
    /// free space counts and `probe` is an address whose route picks the node's IP.
    pub fn probe(data_dir: &Path, probe: Option<&str>) -> HostFacts {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = parse_cpuinfo(&cpuinfo);
        let cores = if cpu.cores > 0 {
            cpu.cores
        } else {
            std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(1))
                .unwrap_or(1)
        };
        let core_mhz = cpu.mhz.or_else(cpufreq_max_mhz);
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| parse_meminfo_total(&m));
        // The width of fsblkcnt_t differs between platforms.
        #[allow(clippy::useless_conversion)]
        let disk_free_bytes = nix::sys::statvfs::statvfs(data_dir)
            .ok()
            .map(|s| u64::from(s.blocks_available()).saturating_mul(u64::from(s.fragment_size())));
        let (kernel_name, kernel_version) = match nix::sys::utsname::uname() {
            Ok(u) => (
                u.sysname().to_string_lossy().to_lowercase(),
                u.release().to_string_lossy().into_owned(),
            ),
            Err(_) => (std::env::consts::OS.to_string(), String::new()),
        };
        let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        let (os_name, os_version) = parse_os_release(&os_release);
        let hostname = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".to_string());
        HostFacts {
            cores,
            core_mhz,
            cpu_model: cpu.model,
            memory_bytes,
            disk_free_bytes,
            kernel_name,
            kernel_version,
            os_name: if os_name.is_empty() {
                std::env::consts::OS.to_string()
            } else {
                os_name
            },
            os_version,
            hostname,
            ip: route_ip(probe),
            interfaces: crate::host_network::probe_interfaces(),
            bridge_network: crate::network::bridge_available(Path::new(
                crate::network::DEFAULT_PLUGIN_DIR,
            )),
            cni_plugins: crate::network::plugin_versions(Path::new(
                crate::network::DEFAULT_PLUGIN_DIR,
            )),
        }
    }
}

/// What `/proc/cpuinfo` says.
#[derive(Debug, Default, PartialEq)]
pub struct CpuInfo {
    /// `processor` entries.
    pub cores: u32,
    /// The first `cpu MHz`, rounded.
    pub mhz: Option<u64>,
    /// The first `model name`.
    pub model: Option<String>,
}

/// Parses `/proc/cpuinfo`.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => info.cores += 1,
            "cpu MHz" if info.mhz.is_none() => {
                info.mhz = value
                    .parse::<f64>()
                    .ok()
                    .filter(|m| m.is_finite() && *m > 0.0)
                    // Bounded by the filter and the float-to-int cast saturates.
                    .map(|m| m.round() as u64);
            }
            "model name" if info.model.is_none() => info.model = Some(value.to_string()),
            _ => {}
        }
    }
    info
}

fn cpufreq_max_mhz() -> Option<u64> {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|khz| khz / 1000)
        .filter(|m| *m > 0)
}

/// `MemTotal` of `/proc/meminfo` in bytes.
pub fn parse_meminfo_total(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        let kb = rest
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()?;
        Some(kb.saturating_mul(1024))
    })
}

/// `ID` and `VERSION_ID` of an os-release file.
pub fn parse_os_release(text: &str) -> (String, String) {
    let mut id = String::new();
    let mut version = String::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim().trim_matches('"').to_string();
            match k.trim() {
                "ID" => id = v,
                "VERSION_ID" => version = v,
                _ => {}
            }
        }
    }
    (id, version)
}

/// The architecture under the names Nomad reports (Go's `GOARCH`).
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// The local IP the kernel would route to `probe` from (no packet is sent);
/// loopback when there is no route.
fn route_ip(probe: Option<&str>) -> IpAddr {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let target: SocketAddr = match probe.and_then(|p| {
        let p = p.rsplit("://").next().unwrap_or(p);
        std::net::ToSocketAddrs::to_socket_addrs(p).ok()?.next()
    }) {
        Some(a) => a,
        None => return loopback,
    };
    let bind = if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    UdpSocket::bind(bind)
        .and_then(|s| {
            s.connect(target)?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(loopback)
}

/// Builds the node this client registers as.
pub fn build_node(
    config: &ClientConfig,
    facts: &HostFacts,
    node_id: &str,
    http_addr: &str,
    drivers: &BTreeMap<String, Fingerprint>,
) -> Node {
    let core_mhz = facts.core_mhz.unwrap_or(config.cpu_mhz_fallback).max(1);
    let total_mhz = if config.cpu_total_mhz > 0 {
        config.cpu_total_mhz
    } else {
        core_mhz.saturating_mul(u64::from(facts.cores))
    };
    let memory_mb = if config.memory_mb > 0 {
        config.memory_mb
    } else {
        facts.memory_bytes.unwrap_or(0) / (1024 * 1024)
    };
    let disk_mb = if config.disk_mb > 0 {
        config.disk_mb
    } else {
        facts.disk_free_bytes.unwrap_or(0) / (1024 * 1024)
    };
    let name = if config.name.is_empty() {
        facts.hostname.clone()
    } else {
        config.name.clone()
    };
    let mut attributes = BTreeMap::new();
    let mut attr = |k: &str, v: String| {
        attributes.insert(k.to_string(), v);
    };
    attr("kernel.name", facts.kernel_name.clone());
    attr("kernel.version", facts.kernel_version.clone());
    attr("os.name", facts.os_name.clone());
    if !facts.os_version.is_empty() {
        attr("os.version", facts.os_version.clone());
    }
    attr("cpu.arch", go_arch(std::env::consts::ARCH).to_string());
    attr("cpu.numcores", facts.cores.to_string());
    attr("cpu.frequency", core_mhz.to_string());
    attr("cpu.totalcompute", total_mhz.to_string());
    if let Some(model) = &facts.cpu_model {
        attr("cpu.modelname", model.clone());
    }
    attr(
        "memory.totalbytes",
        memory_mb.saturating_mul(1024 * 1024).to_string(),
    );
    attr("unique.hostname", facts.hostname.clone());
    attr("unique.network.ip-address", facts.ip.to_string());
    attr(
        "unique.storage.volume",
        config.data_dir.display().to_string(),
    );
    attr(
        "unique.storage.bytesfree",
        disk_mb.saturating_mul(1024 * 1024).to_string(),
    );
    attr("caravan.version", VERSION.to_string());
    for (plugin, version) in &facts.cni_plugins {
        attr(&format!("plugins.cni.version.{plugin}"), version.clone());
    }
    let mut node = Node {
        id: node_id.to_string(),
        name,
        datacenter: config.datacenter.clone(),
        node_pool: if config.node_pool.is_empty() {
            "default".to_string()
        } else {
            config.node_pool.clone()
        },
        node_class: config.node_class.clone(),
        attributes,
        meta: config.meta.clone(),
        resources: Some(NodeResources {
            cpu_mhz: total_mhz,
            core_ids: (0..facts.cores).collect(),
            memory_mb,
            disk_mb,
            networks: vec![NodeNetwork {
                mode: "host".into(),
                device: String::new(),
                ip: facts.ip.to_string(),
                cidr: match facts.ip {
                    IpAddr::V4(ip) => format!("{ip}/32"),
                    IpAddr::V6(ip) => format!("{ip}/128"),
                },
                mbits: config.network_speed_mbits,
            }]
            .into_iter()
            // Groups in bridge mode are placed only where it is.
            .chain(facts.bridge_network.then(|| NodeNetwork {
                mode: "bridge".into(),
                ..Default::default()
            }))
            .collect(),
            ..Default::default()
        }),
        reserved: Some(NodeReservedResources {
            cpu_mhz: config.reserved.cpu_mhz,
            core_ids: config.reserved.cores.clone(),
            memory_mb: config.reserved.memory_mb,
            disk_mb: config.reserved.disk_mb,
            reserved_host_ports: config.reserved.reserved_host_ports.clone(),
        }),
        http_addr: http_addr.to_string(),
        host_volumes: config
            .host_volume
            .iter()
            .map(|(name, v)| {
                (
                    name.clone(),
                    caravan_proto::ClientHostVolume {
                        name: name.clone(),
                        path: v.path.display().to_string(),
                        read_only: v.read_only,
                    },
                )
            })
            .collect(),
        host_networks: crate::host_network::resolve(&config.host_network, &facts.interfaces),
        ..Default::default()
    };
    node.set_status(NodeStatus::Ready);
    node.set_scheduling_eligibility(SchedulingEligibility::Eligible);
    apply_drivers(&mut node, drivers);
    node.computed_class = caravan_scheduler::compute_node_class(&node);
    node
}

/// Puts the drivers' fingerprints on the node, as Nomad's client does: each
/// driver's info, its attributes among the node's (a driver that stops
/// answering leaves the last ones it gave), and `driver.<name>` = `1` while
/// it is detected; the computed class follows. True when any of it changed.
pub fn apply_drivers(node: &mut Node, drivers: &BTreeMap<String, Fingerprint>) -> bool {
    let mut changed = false;
    for (name, fp) in drivers {
        let info = fp.info();
        if node.drivers.get(name.as_str()) == Some(&info) {
            continue;
        }
        changed = true;
        for (k, v) in &info.attributes {
            node.attributes.insert(k.clone(), v.clone());
        }
        let flag = format!("driver.{name}");
        if info.detected {
            node.attributes.insert(flag, "1".to_string());
        } else {
            node.attributes.remove(flag.as_str());
        }
        node.drivers.insert(name.clone(), info);
    }
    if changed {
        node.computed_class = caravan_scheduler::compute_node_class(node);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nmodel name\t: Test CPU @ 2.40GHz\ncpu MHz\t\t: 2399.996\n\nprocessor\t: 1\nmodel name\t: Test CPU @ 2.40GHz\ncpu MHz\t\t: 1200.000\n";

    fn facts() -> HostFacts {
        HostFacts {
            cores: 2,
            core_mhz: Some(2400),
            cpu_model: Some("Test CPU".into()),
            memory_bytes: Some(4 * 1024 * 1024 * 1024),
            disk_free_bytes: Some(10 * 1024 * 1024 * 1024),
            kernel_name: "linux".into(),
            kernel_version: "6.1.0".into(),
            os_name: "debian".into(),
            os_version: "12".into(),
            hostname: "box-a".into(),
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)),
            interfaces: vec![crate::host_network::InterfaceAddr {
                interface: "lo".into(),
                ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            }],
            bridge_network: false,
            cni_plugins: BTreeMap::from([("bridge".to_string(), "1.0.0".to_string())]),
        }
    }

    #[test]
    fn cpuinfo_meminfo_and_os_release_parse() {
        let c = parse_cpuinfo(CPUINFO);
        assert_eq!(c.cores, 2);
        assert_eq!(c.mhz, Some(2400));
        assert_eq!(c.model.as_deref(), Some("Test CPU @ 2.40GHz"));
        assert_eq!(
            parse_meminfo_total("MemTotal:       16314784 kB\nMemFree: 1 kB\n"),
            Some(16_314_784 * 1024)
        );
        assert_eq!(parse_meminfo_total("garbage"), None);
        assert_eq!(
            parse_os_release("NAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID=\"12\"\n"),
            ("debian".to_string(), "12".to_string())
        );
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("aarch64"), "arm64");
    }

    #[test]
    fn node_carries_resources_attributes_and_config() {
        let mut config = ClientConfig {
            name: String::new(),
            datacenter: "dc2".into(),
            node_class: "large".into(),
            ..Default::default()
        };
        config.meta.insert("rack".into(), "r1".into());
        config.reserved.cpu_mhz = 100;
        let mut drivers = BTreeMap::new();
        drivers.insert("mock".to_string(), Fingerprint::healthy(BTreeMap::new()));
        let node = build_node(&config, &facts(), "id-1", "10.0.0.5:4660", &drivers);
        let res = node.resources.as_ref().unwrap();
        assert_eq!(res.cpu_mhz, 4800);
        assert_eq!(res.core_ids, vec![0, 1]);
        assert_eq!(res.memory_mb, 4096);
        assert_eq!(res.disk_mb, 10240);
        assert_eq!(res.networks[0].ip, "10.0.0.5");
        assert_eq!(
            res.networks.len(),
            1,
            "no bridge network without the plugins"
        );
        let bridged = build_node(
            &config,
            &HostFacts {
                bridge_network: true,
                ..facts()
            },
            "id-1",
            "10.0.0.5:4660",
            &drivers,
        );
        let modes: Vec<&str> = bridged
            .resources
            .as_ref()
            .unwrap()
            .networks
            .iter()
            .map(|n| n.mode.as_str())
            .collect();
        assert_eq!(modes, ["host", "bridge"]);
        assert_eq!(node.name, "box-a");
        assert_eq!(node.datacenter, "dc2");
        assert_eq!(node.node_pool, "default");
        assert_eq!(node.reserved.as_ref().unwrap().cpu_mhz, 100);
        let a = &node.attributes;
        assert_eq!(a["kernel.name"], "linux");
        assert_eq!(a["plugins.cni.version.bridge"], "1.0.0");
        assert_eq!(a["cpu.numcores"], "2");
        assert_eq!(a["cpu.frequency"], "2400");
        assert_eq!(a["cpu.totalcompute"], "4800");
        assert_eq!(a["memory.totalbytes"], (4096u64 * 1024 * 1024).to_string());
        assert_eq!(a["unique.hostname"], "box-a");
        assert_eq!(a["unique.network.ip-address"], "10.0.0.5");
        assert_eq!(a["driver.mock"], "1");
        assert!(!a.contains_key("driver.raw_exec"));
        assert_eq!(a["caravan.version"], VERSION);
        assert_eq!(node.status(), NodeStatus::Ready);
        assert_eq!(
            node.computed_class,
            caravan_scheduler::compute_node_class(&node)
        );
    }

    #[test]
    fn driver_health_changes_show_on_the_node_and_its_class() {
        use crate::driver::Health;
        let config = ClientConfig::default();
        let mut attrs = BTreeMap::new();
        attrs.insert("driver.docker.version".to_string(), "20.10".to_string());
        let up = BTreeMap::from([("docker".to_string(), Fingerprint::healthy(attrs))]);
        let mut node = build_node(&config, &facts(), "n", "", &up);
        assert_eq!(node.attributes["driver.docker"], "1");
        assert_eq!(node.attributes["driver.docker.version"], "20.10");
        assert!(node.drivers["docker"].healthy);
        let healthy_class = node.computed_class.clone();
        assert!(!apply_drivers(&mut node, &up), "nothing changed");
        let down = BTreeMap::from([(
            "docker".to_string(),
            Fingerprint::failed(Health::Unhealthy, "Failed to connect to docker daemon"),
        )]);
        assert!(apply_drivers(&mut node, &down));
        assert!(!node.drivers["docker"].healthy);
        assert_eq!(node.attributes["driver.docker"], "1", "still detected");
        assert_eq!(node.attributes["driver.docker.version"], "20.10");
        assert_ne!(node.computed_class, healthy_class);
        assert!(apply_drivers(&mut node, &up));
        assert_eq!(node.computed_class, healthy_class);
        let gone = BTreeMap::from([(
            "docker".to_string(),
            Fingerprint::failed(Health::Undetected, "absent"),
        )]);
        apply_drivers(&mut node, &gone);
        assert!(!node.attributes.contains_key("driver.docker"));
    }

    #[test]
    fn cpu_override_and_fallback() {
        let mut f = facts();
        f.core_mhz = None;
        let config = ClientConfig {
            cpu_mhz_fallback: 1000,
            ..Default::default()
        };
        let node = build_node(&config, &f, "x", "", &BTreeMap::new());
        assert_eq!(node.resources.unwrap().cpu_mhz, 2000);
        let config = ClientConfig {
            cpu_total_mhz: 9999,
            ..Default::default()
        };
        let node = build_node(&config, &f, "x", "", &BTreeMap::new());
        assert_eq!(node.resources.unwrap().cpu_mhz, 9999);
    }

    #[test]
    fn class_ignores_unique_attributes_but_not_meta() {
        let config = ClientConfig::default();
        let a = build_node(&config, &facts(), "a", "", &BTreeMap::new());
        let mut other = facts();
        other.hostname = "box-b".into();
        other.ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 6));
        let b = build_node(&config, &other, "b", "", &BTreeMap::new());
        assert_eq!(a.computed_class, b.computed_class);
        let mut config = ClientConfig::default();
        config.meta.insert("rack".into(), "r2".into());
        let c = build_node(&config, &facts(), "c", "", &BTreeMap::new());
        assert_ne!(a.computed_class, c.computed_class);
    }

    #[test]
    fn probing_this_host_finds_something() {
        let dir = tempfile::tempdir().unwrap();
        let f = HostFacts::probe(dir.path(), Some("127.0.0.1:4647"));
        assert!(f.cores >= 1);
        assert!(!f.kernel_name.is_empty());
        assert!(f.disk_free_bytes.is_some());
        assert_eq!(f.ip, IpAddr::V4(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn host_networks_resolve_onto_the_node_and_change_its_class() {
        let mut config = ClientConfig::default();
        let drivers = BTreeMap::new();
        let plain = build_node(&config, &facts(), "n", "", &drivers);
        config.host_network.insert(
            "lo".into(),
            crate::config::HostNetworkConfig {
                cidr: "127.0.0.0/8".into(),
                reserved_ports: "22".into(),
                ..Default::default()
            },
        );
        config.host_network.insert(
            "public".into(),
            crate::config::HostNetworkConfig {
                cidr: "203.0.113.0/24".into(),
                ..Default::default()
            },
        );
        let node = build_node(&config, &facts(), "n", "", &drivers);
        assert_eq!(
            node.host_networks,
            vec![caravan_proto::NodeHostNetwork {
                name: "lo".into(),
                address: "127.0.0.1".into(),
                interface: "lo".into(),
                reserved_ports: "22".into(),
                cidr: "127.0.0.0/8".into(),
            }]
        );
        assert_ne!(node.computed_class, plain.computed_class);
    }
}
