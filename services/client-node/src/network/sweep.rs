//! The iptables rules CNI made for an alloc, removed by what tags them when
//! the plugins cannot: a teardown cut after the bridge plugin removed the
//! alloc's interface leaves DEL unable to find the address its masquerade
//! rules were made for. The bridge plugin tags them with the alloc's id
//! (`id: "<alloc>"` in the rule's comment); the firewall plugin's rules in
//! `CNI-FORWARD` name the alloc's address.

use std::io;
use std::process::Command;

/// The firewall plugin's chain of per-address rules.
const FORWARD_CHAIN: &str = "CNI-FORWARD";

fn iptables(args: &[String]) -> io::Result<std::process::Output> {
    Command::new("iptables").args(args).output()
}

/// The rules of `table` (`iptables -t table -S`).
fn rules(table: &str) -> io::Result<String> {
    let out = iptables(&["-t".into(), table.into(), "-S".into()])?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes the rules of `alloc_id` left behind: in `nat`, every rule whose
/// comment names the alloc and the per-alloc chains they jump to; in
/// `filter`, the firewall plugin's rules for `ip` (if known). Returns how
/// many rules and chains went.
pub fn sweep(alloc_id: &str, ip: &str) -> io::Result<usize> {
    let tag = format!("id: \\\"{alloc_id}\\\"");
    let mut removed = 0;
    let mut chains = Vec::new();
    for line in rules("nat")?.lines().filter(|l| l.contains(&tag)) {
        let Some(words) = words(line) else { continue };
        if words.first().map(String::as_str) != Some("-A") {
            continue;
        }
        if let Some(target) = words.iter().skip_while(|w| *w != "-j").nth(1)
            && target.starts_with("CNI-")
            && !target.starts_with("CNI-HOSTPORT")
            && !chains.contains(target)
        {
            chains.push(target.clone());
        }
        removed += delete("nat", &words)?;
    }
    for chain in &chains {
        let flushed = iptables(&["-t".into(), "nat".into(), "-F".into(), chain.clone()])?;
        let gone = iptables(&["-t".into(), "nat".into(), "-X".into(), chain.clone()])?;
        if flushed.status.success() && gone.status.success() {
            removed += 1;
        }
    }
    if !ip.is_empty() {
        let (dst, src) = (format!("-d {ip}/32 "), format!("-s {ip}/32 "));
        let forward = format!("-A {FORWARD_CHAIN} ");
        for line in rules("filter")?.lines() {
            if line.starts_with(&forward)
                && (line.contains(&dst) || line.contains(&src))
                && let Some(words) = words(line)
            {
                removed += delete("filter", &words)?;
            }
        }
    }
    Ok(removed)
}

/// The IPv4 address of `ifname` in the pinned namespace at `netns`, for a
/// teardown whose record is lost (read before DEL removes the interface).
pub fn address_in(netns: &std::path::Path, ifname: &str) -> Option<String> {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .args(["ip", "-4", "-o", "addr", "show", "dev", ifname])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    words.find(|w| *w == "inet")?;
    Some(words.next()?.split('/').next()?.to_string())
}

/// Deletes the rule `-A …` of `table` given as `words`; 1 if it went.
fn delete(table: &str, words: &[String]) -> io::Result<usize> {
    let mut args = vec!["-t".to_string(), table.to_string(), "-D".to_string()];
    args.extend(words.iter().skip(1).cloned());
    Ok(usize::from(iptables(&args)?.status.success()))
}

/// The words of a rule as `iptables -S` prints it: blanks separate them, a
/// double-quoted part (with `\"` inside) is one word without its quotes.
fn words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else {
            return Some(out);
        };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '\\' => word.push(chars.next()?),
                    '"' => break,
                    c => word.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.push(c);
            }
        }
        out.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn quoted_comments_are_one_word() {
        let line = r#"-A POSTROUTING -s 172.26.64.24/32 -m comment --comment "name: \"nomad\" id: \"a1\"" -j CNI-72"#;
        assert_eq!(
            words(line).unwrap(),
            [
                "-A",
                "POSTROUTING",
                "-s",
                "172.26.64.24/32",
                "-m",
                "comment",
                "--comment",
                r#"name: "nomad" id: "a1""#,
                "-j",
                "CNI-72"
            ]
        );
        assert_eq!(words(r#"-A X "unclosed"#), None);
    }
}
