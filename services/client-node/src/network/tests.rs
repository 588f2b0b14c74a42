//! Attaching and detaching real namespaces with the installed CNI plugins
//! (root only: elsewhere they fail, naming what is missing).

use super::*;

fn ready() -> bool {
    let ok = bridge_available(Path::new(DEFAULT_PLUGIN_DIR));
    assert!(
        ok,
        "needs root and the CNI plugins in {DEFAULT_PLUGIN_DIR} (scripts/lib.sh installs them; CI runs as root)"
    );
    ok
}

fn iptables_mentions(id: &str) -> usize {
    let out = std::process::Command::new("iptables-save")
        .output()
        .expect("iptables-save");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(id))
        .count()
}

#[test]
fn a_bridge_alloc_gets_an_address_port_rules_and_leaves_nothing() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let networks = Networks::new(dir.path(), DEFAULT_PLUGIN_DIR);
    let id = uuid::Uuid::new_v4().to_string();
    let ports = [AllocatedPort {
        label: "http".into(),
        value: 28431,
        to: 8080,
        ..Default::default()
    }];
    let net = networks
        .setup(&id, GroupNetwork::Bridge, &ports, None)
        .expect("setup");
    assert!(net.ip.starts_with("172.26."), "{net:?}");
    assert_eq!(networks.load(&id), Some(net.clone()));
    assert_eq!(networks.allocs(), vec![id.clone()]);
    assert!(
        iptables_mentions(&id) > 0,
        "portmap and firewall rules name the alloc"
    );
    let admin = std::process::Command::new("iptables")
        .args(["-S", bridge::ADMIN_CHAIN])
        .output()
        .expect("iptables");
    let admin = String::from_utf8_lossy(&admin.stdout);
    assert_eq!(
        admin
            .lines()
            .filter(|l| l.contains("-d 172.26.64.0/20 -o nomad -j ACCEPT"))
            .count(),
        1,
        "forwarding to the bridge is accepted, once: {admin}"
    );
    networks.teardown(&id).expect("teardown");
    assert_eq!(iptables_mentions(&id), 0);
    assert_eq!(forward_rules_of(&net.ip), 0, "the firewall plugin's rules");
    assert!(networks.allocs().is_empty());
    assert_eq!(networks.load(&id), None);
    networks
        .teardown(&id)
        .expect("a second teardown is a no-op");
}

#[test]
fn a_none_alloc_has_loopback_alone() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let networks = Networks::new(dir.path(), DEFAULT_PLUGIN_DIR);
    let id = uuid::Uuid::new_v4().to_string();
    let net = networks
        .setup(&id, GroupNetwork::Isolated, &[], None)
        .expect("setup");
    assert_eq!(net.ip, "");
    let (links, loopback_up) = in_netns(&net.netns, || {
        let dev = std::fs::read_to_string("/proc/thread-self/net/dev").expect("net/dev");
        let links: Vec<String> = dev
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(|n| n.trim().to_string())
            .collect();
        // Sockets belong to their creator's namespace: this connects only
        // when the namespace's loopback is up.
        let up = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| std::net::TcpStream::connect(l.local_addr()?).map(|_| l))
            .is_ok();
        (links, up)
    });
    assert_eq!(links, ["lo"]);
    assert!(loopback_up);
    networks.teardown(&id).expect("teardown");
    assert!(!net.netns.exists());
}

#[test]
fn a_namespace_without_its_record_is_still_torn_down() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let networks = Networks::new(dir.path(), DEFAULT_PLUGIN_DIR);
    let id = uuid::Uuid::new_v4().to_string();
    let net = networks
        .setup(&id, GroupNetwork::Bridge, &[], None)
        .expect("setup");
    assert!(forward_rules_of(&net.ip) > 0, "the firewall plugin's rules");
    std::fs::remove_file(networks.record_path(&id)).expect("lose the record");
    assert_eq!(networks.allocs(), vec![id.clone()]);
    networks.teardown(&id).expect("teardown");
    assert!(networks.allocs().is_empty());
    assert_eq!(iptables_mentions(&id), 0);
    assert_eq!(forward_rules_of(&net.ip), 0, "the firewall plugin's rules");
}

/// The firewall plugin's rules for `ip` (they name the address, not the alloc).
fn forward_rules_of(ip: &str) -> usize {
    let out = std::process::Command::new("iptables")
        .args(["-S", "CNI-FORWARD"])
        .output()
        .expect("iptables");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!(" {ip}/32 ")))
        .count()
}

/// Runs `f` on a thread inside the namespace at `path`.
fn in_netns<T: Send + 'static>(path: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        netns::enter(&path).expect("enter");
        f()
    })
    .join()
    .expect("join")
}

#[test]
fn plugin_versions_read_as_the_plugins_print_them() {
    assert_eq!(
        version_in("CNI bridge plugin v1.1.1\nCNI protocol versions supported: 0.1.0, 1.0.0"),
        Some("v1.1.1")
    );
    // A build without a version (Debian's): the first token that parses is
    // the last protocol version, the others carry a comma.
    assert_eq!(
        version_in(
            "CNI bridge plugin version unknown\nCNI protocol versions supported: 0.1.0, 1.0.0"
        ),
        Some("1.0.0")
    );
    assert_eq!(version_in("no version here"), None);
    let found = plugin_versions(Path::new(DEFAULT_PLUGIN_DIR));
    if !found.is_empty() {
        assert!(found.contains_key("bridge"), "{found:?}");
    }
}

#[test]
fn a_teardown_cut_after_eth0_went_leaves_no_rule_on_the_next_try() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let networks = Networks::new(dir.path(), DEFAULT_PLUGIN_DIR);
    let id = uuid::Uuid::new_v4().to_string();
    let ports = [AllocatedPort {
        label: "http".into(),
        value: 28432,
        to: 8080,
        ..Default::default()
    }];
    let net = networks
        .setup(&id, GroupNetwork::Bridge, &ports, None)
        .expect("setup");
    assert!(iptables_mentions(&id) > 0);
    // A first teardown killed after the bridge plugin removed the alloc's
    // interface: eth0 is gone, the rules and the record are still there.
    let gone = std::process::Command::new("nsenter")
        .arg(format!(
            "--net={}",
            dir.path().join("netns").join(&id).display()
        ))
        .args(["ip", "link", "del", "eth0"])
        .output()
        .expect("nsenter");
    assert!(gone.status.success(), "{gone:?}");
    let _ = networks.teardown(&id);
    assert_eq!(
        iptables_mentions(&id),
        0,
        "rules naming the alloc after teardown"
    );
    assert_eq!(forward_rules_of(&net.ip), 0, "the firewall plugin's rules");
    assert!(networks.allocs().is_empty());
}
