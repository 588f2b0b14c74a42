//! A directory whose disk can be frozen: a FUSE passthrough mount (Debian's
//! `bindfs`) over a backing directory, served by a child process. SIGSTOP
//! to that process freezes the "disk": every read, write and fsync that
//! reaches it blocks until SIGCONT, as a device that stops answering does.
//! Periodic STOP/CONT bursts make it slow rather than frozen. Unmounted
//! (thawed first) when dropped, panics included; should the harness die
//! outright, a tied guard process thaws the daemon so that its own SIGTERM
//! lets it unmount.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::process;

/// The FUSE passthrough daemon.
const BINDFS: &str = "bindfs";
/// How long the mount may take to appear.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the daemon may take to exit once unmounted.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// A FUSE passthrough mount of `backing` at `mount`, freezable.
#[derive(Debug)]
pub struct FuseDisk {
    mount: PathBuf,
    daemon: Option<Child>,
    /// Thaws the daemon should the harness die without dropping this.
    guard: Option<Child>,
    frozen: bool,
    stutter: Option<Stutter>,
}

/// A thread freezing and thawing the daemon in turn.
#[derive(Debug)]
struct Stutter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FuseDisk {
    /// Mounts `backing` (created if missing) at `mount` (created if
    /// missing) and waits until the mount is in place; the daemon's output
    /// goes to `log`. Fails, saying what to install, without `bindfs`.
    pub fn mount(backing: &Path, mount: &Path, log: &Path) -> anyhow::Result<FuseDisk> {
        anyhow::ensure!(
            Path::new("/dev/fuse").exists(),
            "a FUSE disk needs /dev/fuse, which this machine lacks"
        );
        std::fs::create_dir_all(backing)?;
        std::fs::create_dir_all(mount)?;
        let mount = mount.canonicalize()?;
        let out = File::options().create(true).append(true).open(log)?;
        let mut command = Command::new(BINDFS);
        command
            // In the foreground: the child is the daemon, to stop and thaw.
            .arg("-f")
            .args(["-o", "fsname=caravan-fuse-disk"])
            .arg(backing)
            .arg(&mount)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out));
        let daemon = process::spawn_tied(command).map_err(|e| {
            anyhow::anyhow!(
                "starting {BINDFS}: {e} (install Debian's bindfs; scripts/lib.sh ensure_packages does)"
            )
        })?;
        let guard = thaw_guard(daemon.id())?;
        let mut disk = FuseDisk {
            mount,
            daemon: Some(daemon),
            guard: Some(guard),
            frozen: false,
            stutter: None,
        };
        let started = Instant::now();
        while !disk.is_mounted() {
            if let Some(status) = disk
                .daemon
                .as_mut()
                .and_then(|d| d.try_wait().ok().flatten())
            {
                anyhow::bail!(
                    "{BINDFS} exited ({status}) before mounting {}: {}",
                    disk.mount.display(),
                    process::tail_file(log, 10)
                );
            }
            anyhow::ensure!(
                started.elapsed() < MOUNT_TIMEOUT,
                "{} was not mounted within {MOUNT_TIMEOUT:?}",
                disk.mount.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(disk)
    }

    /// Where the disk is mounted: what a process should use.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// The daemon's process id while it runs.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(Child::id)
    }

    /// Whether the disk is frozen (or stuttering) now.
    pub fn is_frozen(&self) -> bool {
        self.frozen || self.stutter.is_some()
    }

    /// Freezes the disk: every access through the mount blocks from now
    /// until [`FuseDisk::thaw`].
    pub fn freeze(&mut self) -> anyhow::Result<()> {
        self.stop_stutter();
        self.signal(Signal::SIGSTOP)?;
        self.frozen = true;
        Ok(())
    }

    /// Thaws the disk after [`FuseDisk::freeze`] or
    /// [`FuseDisk::stutter`]: the blocked accesses complete.
    pub fn thaw(&mut self) -> anyhow::Result<()> {
        self.stop_stutter();
        self.signal(Signal::SIGCONT)?;
        self.frozen = false;
        Ok(())
    }

    /// Makes the disk slow rather than frozen: frozen for `frozen`, then
    /// answering for `running`, in turn, until [`FuseDisk::thaw`] or
    /// [`FuseDisk::freeze`]. An fsync that lands in a frozen spell waits
    /// out the rest of it.
    pub fn stutter(&mut self, frozen: Duration, running: Duration) -> anyhow::Result<()> {
        anyhow::ensure!(
            !frozen.is_zero() && !running.is_zero(),
            "a stutter needs frozen and running spells longer than zero"
        );
        self.stop_stutter();
        let pid = self.pid()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("fuse-disk-stutter".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    let _ = kill(pid, Signal::SIGSTOP);
                    std::thread::sleep(frozen);
                    let _ = kill(pid, Signal::SIGCONT);
                    std::thread::sleep(running);
                }
            })?;
        self.frozen = false;
        self.stutter = Some(Stutter {
            stop,
            thread: Some(thread),
        });
        Ok(())
    }

    /// Whether the mount is in this process's mount table.
    fn is_mounted(&self) -> bool {
        let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return false;
        };
        let wanted = self.mount.to_string_lossy();
        // The fifth field is the mount point (spaces escaped as \040).
        table
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .any(|point| point.replace("\\040", " ") == wanted)
    }

    fn pid(&self) -> anyhow::Result<Pid> {
        let pid = self
            .daemon_pid()
            .ok_or_else(|| anyhow::anyhow!("the FUSE daemon has stopped"))?;
        Ok(Pid::from_raw(i32::try_from(pid)?))
    }

    fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        kill(self.pid()?, signal).map_err(|e| anyhow::anyhow!("{signal} to the FUSE daemon: {e}"))
    }

    fn stop_stutter(&mut self) {
        if let Some(mut stutter) = self.stutter.take() {
            stutter.stop.store(true, Ordering::Relaxed);
            if let Some(thread) = stutter.thread.take() {
                let _ = thread.join();
            }
            // The thread's last spell may have ended frozen-free already;
            // a second SIGCONT is harmless.
            let _ = self.signal(Signal::SIGCONT);
        }
    }

    /// Thaws the daemon, unmounts (lazily when something still holds the
    /// mount) and waits for the daemon to exit, killing it after a grace.
    fn unmount(&mut self) {
        self.stop_stutter();
        let _ = self.signal(Signal::SIGCONT);
        self.frozen = false;
        if self.is_mounted() && !fusermount(&["-u"], &self.mount) {
            let _ = fusermount(&["-u", "-z"], &self.mount);
        }
        if let Some(mut daemon) = self.daemon.take() {
            let started = Instant::now();
            while started.elapsed() < EXIT_GRACE {
                if let Ok(Some(_)) = daemon.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
        if let Some(mut guard) = self.guard.take() {
            let _ = guard.kill();
            let _ = guard.wait();
        }
    }
}

impl Drop for FuseDisk {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Runs `fusermount3` (or the older `fusermount`) with `args` on `mount`;
/// whether it succeeded.
fn fusermount(args: &[&str], mount: &Path) -> bool {
    ["fusermount3", "fusermount"].iter().any(|tool| {
        Command::new(tool)
            .args(args)
            .arg(mount)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A shell tied to the harness that SIGCONTs `daemon` when the harness
/// dies: a daemon left stopped would keep its mount, and every process
/// touching it, blocked forever, its own SIGTERM pending.
fn thaw_guard(daemon: u32) -> anyhow::Result<Child> {
    let mut command = Command::new("/bin/sh");
    command
        .args([
            "-c",
            r#"trap 'kill -CONT "$1" 2>/dev/null; exit 0' TERM; while :; do sleep 1; done"#,
            "fuse-disk-thaw-guard",
            &daemon.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    process::spawn_tied(command).map_err(|e| anyhow::anyhow!("starting the thaw guard: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::sync::mpsc;

    use super::*;

    /// Writes and fsyncs a file through the mount on a thread; the time it
    /// took, sent once done.
    fn fsync_in_background(path: PathBuf) -> mpsc::Receiver<Duration> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut file = File::create(path).unwrap();
            file.write_all(b"x").unwrap();
            file.sync_all().unwrap();
            let _ = tx.send(started.elapsed());
        });
        rx
    }

    /// A frozen disk holds an fsync until thawed, then lets it finish; a
    /// dropped disk leaves no mount behind, even when dropped frozen.
    #[test]
    fn a_frozen_disk_holds_writes_until_thawed_and_unmounts_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let mut disk = FuseDisk::mount(
            &dir.path().join("backing"),
            &dir.path().join("mnt"),
            &dir.path().join("bindfs.log"),
        )
        .unwrap();
        std::fs::write(disk.path().join("before"), b"1").unwrap();
        assert!(dir.path().join("backing/before").exists());
        disk.freeze().unwrap();
        assert!(disk.is_frozen());
        let done = fsync_in_background(disk.path().join("during"));
        // Holding for a while is the property: nothing to wait for but time.
        assert!(
            done.recv_timeout(Duration::from_millis(500)).is_err(),
            "an fsync finished on a frozen disk"
        );
        disk.thaw().unwrap();
        done.recv_timeout(Duration::from_secs(10))
            .expect("the fsync finishes once thawed");
        assert!(dir.path().join("backing/during").exists());
        disk.freeze().unwrap();
        let mount = disk.path().to_path_buf();
        drop(disk);
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !table.contains(&*mount.to_string_lossy()),
            "{} is still mounted",
            mount.display()
        );
    }

    /// A stuttering disk answers, slowly: an fsync waits out at most one
    /// frozen spell.
    #[test]
    fn a_stuttering_disk_is_slow_not_frozen() {
        let dir = tempfile::tempdir().unwrap();
        let mut disk = FuseDisk::mount(
            &dir.path().join("backing"),
            &dir.path().join("mnt"),
            &dir.path().join("bindfs.log"),
        )
        .unwrap();
        disk.stutter(Duration::from_millis(300), Duration::from_millis(50))
            .unwrap();
        assert!(disk.is_frozen());
        let mut slowest = Duration::ZERO;
        for i in 0..5 {
            let took = fsync_in_background(disk.path().join(format!("f{i}")))
                .recv_timeout(Duration::from_secs(10))
                .expect("an fsync on a stuttering disk finishes");
            slowest = slowest.max(took);
        }
        disk.thaw().unwrap();
        assert!(!disk.is_frozen());
        assert!(slowest < Duration::from_secs(5), "{slowest:?}");
        assert!(
            disk.stutter(Duration::ZERO, Duration::from_millis(1))
                .is_err()
        );
    }
}
