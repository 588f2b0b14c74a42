//! Named network namespaces: a namespace kept alive by a bind mount of its
//! nsfs file onto a plain file, so it outlives the thread that made it and a
//! restarted client finds it again by path.

use std::fs::File;
use std::io;
use std::path::Path;

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;

/// Creates a new, empty network namespace pinned at `path`.
///
/// The namespace is made by a short-lived thread of its own: `unshare` moves
/// only the calling thread, and that thread ends right after the bind mount,
/// so no thread of the client is left in it.
pub fn create(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    File::create(path)?;
    let target = path.to_path_buf();
    let made = std::thread::Builder::new()
        .name("netns-create".into())
        .spawn(move || -> io::Result<()> {
            nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
            let own = format!("/proc/self/task/{}/ns/net", nix::unistd::gettid());
            nix::mount::mount(
                Some(own.as_str()),
                &target,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(io::Error::from)
        })?
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))?;
    if let Err(e) = made {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(())
}

/// Pins the network namespace of process `pid` (an alloc's infra
/// container) at `path`: the pin keeps the namespace alive as long as a
/// fresh one, whether or not the process still runs.
pub fn pin(pid: u32, path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    File::create(path)?;
    let own = format!("/proc/{pid}/ns/net");
    let pinned = nix::mount::mount(
        Some(own.as_str()),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(io::Error::from);
    if let Err(e) = pinned {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(())
}

/// Whether `path` is a pinned namespace (a mount of nsfs), not a plain file.
pub fn is_pinned(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .map(|s| s.filesystem_type() == nix::sys::statfs::NSFS_MAGIC)
        .unwrap_or(false)
}

/// Unpins and removes the namespace at `path`; a path already gone is fine.
/// The namespace itself ends with its last process.
pub fn remove(path: &Path) -> io::Result<()> {
    if is_pinned(path) {
        nix::mount::umount2(path, MntFlags::MNT_DETACH).map_err(io::Error::from)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Moves the calling thread into the namespace at `path` (a process that
/// then forks gives its children the namespace).
pub fn enter(path: &Path) -> io::Result<()> {
    let file = File::open(path)?;
    nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_pinned_entered_and_removed() {
        assert!(
            nix::unistd::Uid::effective().is_root(),
            "pinning a network namespace needs root (CI runs as root)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("netns").join("a1");
        create(&path).expect("create");
        assert!(is_pinned(&path));
        let host = std::fs::read_link("/proc/thread-self/ns/net").expect("own ns");
        let inside = std::thread::spawn({
            let path = path.clone();
            move || {
                enter(&path).expect("enter");
                std::fs::read_link("/proc/thread-self/ns/net").expect("ns")
            }
        })
        .join()
        .expect("join");
        assert_ne!(host, inside, "the thread moved to another namespace");
        remove(&path).expect("remove");
        assert!(!path.exists());
        remove(&path).expect("removing twice is fine");
    }
}
