//! Transparent huge pages, off for the service processes.
//!
//! The allocator asks the kernel for huge pages on its arenas, and a
//! service's working set churns through them: every watch batch decodes
//! into vectors of a few hundred KiB that are freed once applied. Each time
//! such memory is touched afresh the kernel zeroes a whole 2 MiB page, and
//! that zeroing was 5–13 % of every service's CPU under load. With 4 KiB
//! pages it all but disappears (docs/benchmarks.md, "What limits C1M
//! now").
//!
//! The flag is per process and inherited across `fork` and `exec`, so a
//! client node's task supervisor gives it back before it starts a task
//! ([`restore_for_children`]): tasks get the host's own huge page policy.

/// Turns transparent huge pages off for this process and, until
/// [`restore_for_children`], for the processes it starts. A kernel that
/// refuses (built without them) changes nothing, so this only logs.
pub fn disable() {
    #[cfg(target_os = "linux")]
    if let Err(err) = nix::sys::prctl::set_thp_disable(true) {
        eprintln!("cannot turn transparent huge pages off: {err}");
    }
}

/// Gives this process (and what it starts) the host's huge page policy
/// back, whatever the process that started it chose.
pub fn restore_for_children() {
    #[cfg(target_os = "linux")]
    if let Err(err) = nix::sys::prctl::set_thp_disable(false) {
        eprintln!("cannot restore transparent huge pages: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether transparent huge pages are off for this process.
    fn disabled() -> bool {
        nix::sys::prctl::get_thp_disable().unwrap_or(false)
    }

    /// A child started after [`disable`] sees it, and one started after
    /// [`restore_for_children`] does not: what a task supervisor relies on.
    #[test]
    fn the_flag_is_set_inherited_and_given_back() {
        let child_status = || {
            let out = std::process::Command::new("grep")
                .args(["^THP_enabled", "/proc/self/status"])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        let before = child_status();
        if !before.contains('1') {
            // A kernel without huge pages (or without the status line):
            // there is nothing to turn off.
            return;
        }
        disable();
        assert!(disabled());
        assert_eq!(child_status().trim(), "THP_enabled:\t0");
        restore_for_children();
        assert!(!disabled());
        assert_eq!(child_status(), before);
    }
}
