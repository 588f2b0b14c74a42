//! Linux capabilities of an `exec` task: the set it gets is the default set
//! (Docker's minus `NET_RAW`) within what the client allows, less its
//! `cap_drop`, plus its `cap_add` (`cap_drop = ["all"]` then `cap_add` keeps
//! only those); a `cap_add` the client does not allow fails the task.
//! Applied in the task's process before it becomes the task: the bounding
//! set is cut to the set, and a task that runs as another user than root
//! gets the set as ambient capabilities, which survive its `execve`.

/// Every capability by number.
const NAMES: [&str; 41] = caravan_jobspec::LINUX_CAPABILITIES;

/// The set a task starts from (and the default of what the client allows).
pub const DEFAULTS: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// A set of capabilities, bit n for capability n.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapSet(pub u64);

impl CapSet {
    /// Every capability.
    pub fn all() -> CapSet {
        CapSet((1u64 << NAMES.len()) - 1)
    }

    /// The set named by `names` (`CAP_CHOWN`, `chown`, or `all`); `Err`
    /// names the first one that is no capability.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<CapSet, String> {
        let mut set = CapSet::default();
        for n in names {
            let n = n.as_ref().trim();
            let upper = n.to_ascii_uppercase();
            let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
            if bare == "ALL" {
                set = CapSet::all();
                continue;
            }
            match NAMES.iter().position(|c| *c == bare) {
                Some(i) => set.0 |= 1 << i,
                None => return Err(format!("unknown capability {n:?}")),
            }
        }
        Ok(set)
    }

    /// Whether capability `n` is in the set.
    pub fn has(self, n: usize) -> bool {
        n < 64 && self.0 & (1 << n) != 0
    }

    /// The names in the set, as `CAP_…`.
    pub fn names(self) -> Vec<String> {
        NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.has(*i))
            .map(|(_, n)| format!("CAP_{n}"))
            .collect()
    }
}

/// The set of a task: the defaults the client allows, less `drop`, plus
/// `add`, each of which the client must allow.
pub fn task_set(allow: CapSet, add: CapSet, drop: CapSet) -> Result<CapSet, String> {
    let refused = CapSet(add.0 & !allow.0);
    if refused != CapSet::default() {
        return Err(format!(
            "driver does not allow the following capabilities: {}",
            refused.names().join(", ")
        ));
    }
    let defaults = CapSet::parse(&DEFAULTS).unwrap_or_default();
    Ok(CapSet((defaults.0 & allow.0 & !drop.0) | add.0))
}

/// The capabilities of `set` that the `caps` crate and this kernel know.
fn known(set: CapSet) -> impl Iterator<Item = (caps::Capability, bool)> {
    caps::all()
        .into_iter()
        .map(move |c| (c, set.has(usize::from(c.index()))))
}

/// Cuts this process's bounding set to `set` (needs `CAP_SETPCAP`: done
/// before the credentials change).
pub fn limit_bounding(set: CapSet) -> Result<(), String> {
    for (cap, keep) in known(set) {
        if keep {
            continue;
        }
        match caps::drop(None, caps::CapSet::Bounding, cap) {
            Ok(()) => {}
            // A capability newer than this kernel is not there to drop.
            Err(_)
                if !caps::runtime::procfs_all_supported(None)
                    .map(|s| s.contains(&cap))
                    .unwrap_or(true) => {}
            Err(e) => return Err(format!("drop {cap} from the bounding set: {e}")),
        }
    }
    Ok(())
}

/// Keeps the permitted set across the coming change of uid.
pub fn keep_across_setuid() -> Result<(), String> {
    caps::securebits::set_keepcaps(true).map_err(|e| format!("keep capabilities: {e}"))
}

/// After the uid changed: `set` becomes this process's permitted,
/// inheritable and ambient capabilities, so the task it executes next has
/// them (effective) although it is not root.
pub fn raise_ambient(set: CapSet) -> Result<(), String> {
    let wanted: caps::CapsHashSet = known(set).filter(|(_, k)| *k).map(|(c, _)| c).collect();
    caps::set(None, caps::CapSet::Permitted, &wanted)
        .map_err(|e| format!("set the permitted capabilities: {e}"))?;
    caps::set(None, caps::CapSet::Inheritable, &wanted)
        .map_err(|e| format!("set the inheritable capabilities: {e}"))?;
    for cap in wanted {
        caps::raise(None, caps::CapSet::Ambient, cap)
            .map_err(|e| format!("raise ambient {cap}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_set_follows_drop_then_add_within_allow() {
        let allow = CapSet::parse(&DEFAULTS).unwrap();
        let none = CapSet::default();
        assert_eq!(task_set(allow, none, none).unwrap(), allow);
        let drop_all = CapSet::parse(&["all"]).unwrap();
        let add = CapSet::parse(&["cap_chown", "KILL"]).unwrap();
        let s = task_set(allow, add, drop_all).unwrap();
        assert_eq!(s.names(), ["CAP_CHOWN", "CAP_KILL"]);
        let raw = CapSet::parse(&["net_raw"]).unwrap();
        let e = task_set(allow, raw, none).unwrap_err();
        assert!(e.contains("CAP_NET_RAW"), "{e}");
        assert!(task_set(CapSet::all(), raw, none).unwrap().has(13));
        assert!(
            CapSet::parse(&["CAP_NOPE"])
                .unwrap_err()
                .contains("CAP_NOPE")
        );
    }
}
