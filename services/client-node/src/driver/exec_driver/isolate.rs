//! The processes between an `exec` task's supervisor and the task, which
//! put it in its cgroup, its namespaces and its chroot.
//!
//! The supervisor runs `caravan-client-node task-isolate SPEC` as the task's
//! command (so logs, exit records and re-attaching after a client restart
//! are the supervisor's, as for `raw_exec`). That process ("isolate") joins
//! the task's cgroup, leaves the client's mount, PID and IPC namespaces and
//! forks the namespace's first process ("init", pid 1 when the PID namespace
//! is private). Init mounts the task's root (the task dir, with the host's
//! `chroot_env` paths bound read-only, the alloc dir, a small `/dev`, a
//! `/proc` of the namespace), pivots into it and starts the task's process
//! (the binary again), which cuts its capabilities, takes its user's
//! credentials and executes the command. Each step is a new process of the
//! binary rather than a fork, so no step needs unsafe code.
//!
//! Signals sent to isolate (the supervisor's process group) are passed to
//! init, which passes them to the task's process group: a pid 1 ignores the
//! signals it has no handler for, so the task must not be pid 1 itself.
//! Init reports how the task ended to isolate (on a pipe that is init's
//! stdin), which ends the same way (the
//! same exit code, or killed by the same signal) for the supervisor. Init
//! dies with isolate (parent-death signal), and the namespace with init.

use std::ffi::{CString, OsString};
use std::io::{BufRead, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, killpg, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};
use serde::{Deserialize, Serialize};

use super::caps::{self, CapSet};

/// The argument that runs the binary as isolate.
pub const ISOLATE_ARG: &str = "task-isolate";
/// Isolate's argument that only checks that namespaces can be made here.
pub const PROBE_ARG: &str = "--probe";
/// The argument that runs the binary as init (after [`ISOLATE_ARG`]).
const INIT_ARG: &str = "--init";
/// The argument that runs the binary as the task's process.
const TASK_ARG: &str = "--task";
/// The argument that runs a command in a running task's namespaces
/// (`alloc exec`): `--enter INIT_PID ENTRY`.
pub const ENTER_ARG: &str = "--enter";
/// The step of [`ENTER_ARG`] inside the task's PID namespace.
const ENTER_TASK_ARG: &str = "--enter-task";
/// This very binary (still reachable from inside the task's root).
const SELF_EXE: &str = "/proc/self/exe";

/// What init says once it passes signals on to the task.
const READY: &str = "ready\n";

/// Exit code of a task that could not be executed (as a shell says).
const CANNOT_EXEC: i32 = 127;

/// Signals passed on to the task.
const PASSED: [Signal; 8] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
    Signal::SIGCONT,
];

/// Signals the task gets with their default action, whatever it inherits.
const DEFAULTED: [i32; 9] = [
    signal_hook::consts::SIGPIPE,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGQUIT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGUSR1,
    signal_hook::consts::SIGUSR2,
    signal_hook::consts::SIGXFSZ,
    signal_hook::consts::SIGTTOU,
];

/// How to isolate one task, written by the driver for isolate to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationSpec {
    /// The task dir, which becomes the task's `/`.
    pub root: PathBuf,
    /// The alloc's shared dir, at `/alloc`.
    pub alloc_dir: PathBuf,
    /// Host paths bound read-only at paths of the task's root.
    pub chroot_env: Vec<(PathBuf, PathBuf)>,
    /// The `cgroup.procs` files of the task's cgroup.
    pub cgroup_procs: Vec<PathBuf>,
    /// A PID namespace of its own (`pid_mode = "private"`).
    pub pid_private: bool,
    /// An IPC namespace of its own (`ipc_mode = "private"`).
    pub ipc_private: bool,
    /// Pivot into the root (else a plain chroot).
    pub pivot_root: bool,
    /// What the task's process does.
    pub task: TaskStart,
    /// Host volumes bound into the root: (host dir, path in the root, writable).
    #[serde(default)]
    pub volumes: Vec<(PathBuf, PathBuf, bool)>,
    /// A UTS namespace of its own under this hostname (the group network's).
    #[serde(default)]
    pub hostname: Option<String>,
}

/// Where a volume mount's destination lands in a task's root: an absolute path
/// without `..`, so that it cannot reach outside the root.
pub fn chroot_target(destination: &str) -> Result<PathBuf, String> {
    let path = Path::new(destination);
    if !path.is_absolute() {
        return Err("the destination must be an absolute path".into());
    }
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err("the destination must not contain `..`".into());
    }
    Ok(path.to_path_buf())
}

/// What the task's process does before it becomes the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStart {
    /// Its capabilities.
    pub caps: u64,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
    /// Its working dir, inside its root.
    pub work_dir: PathBuf,
    /// What to run.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables it gets unless its environment sets them (`HOME`, `USER`
    /// of its user).
    #[serde(default)]
    pub defaults: Vec<(String, String)>,
}

/// A command run in a running task's namespaces, cgroup and credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The task's cgroup, which the command joins.
    pub cgroup_procs: Vec<PathBuf>,
    /// The command, with the task's credentials and working dir.
    pub task: TaskStart,
}

/// The first step of [`ENTER_ARG`]: into the task's cgroup and PID
/// namespace (which only the processes it starts then are in); the next
/// step enters the rest and becomes the command. Ends as the command did.
fn enter(init: &str, entry: &Entry, entry_json: &str) -> Result<i32, String> {
    let me = std::process::id().to_string();
    for procs in &entry.cgroup_procs {
        std::fs::write(procs, &me).map_err(|e| format!("join cgroup {}: {e}", procs.display()))?;
    }
    let pid_ns = format!("/proc/{init}/ns/pid");
    let ns = std::fs::File::open(&pid_ns).map_err(|e| format!("open {pid_ns}: {e}"))?;
    nix::sched::setns(&ns, CloneFlags::CLONE_NEWPID).map_err(|e| format!("setns pid: {e}"))?;
    let status = Command::new(SELF_EXE)
        .args([ISOLATE_ARG, ENTER_TASK_ARG, init, entry_json])
        .status()
        .map_err(|e| format!("start the command: {e}"))?;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => end_by(sig),
        (None, None) => CANNOT_EXEC,
    })
}

/// The second step of [`ENTER_ARG`]: into the task's UTS, network (its
/// alloc's, in bridge mode), IPC and mount namespaces (and so its root), then the
/// command as the task.
fn enter_task(init: &str, entry: &Entry) -> String {
    let open = |kind: &str| {
        let path = format!("/proc/{init}/ns/{kind}");
        std::fs::File::open(&path).map_err(|e| format!("open {path}: {e}"))
    };
    let (net, ipc, mnt, uts) = match (open("net"), open("ipc"), open("mnt"), open("uts")) {
        (Ok(n), Ok(i), Ok(m), Ok(u)) => (n, i, m, u),
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return e,
    };
    // The task's hostname (its own UTS namespace, or the node's).
    if let Err(e) = nix::sched::setns(&uts, CloneFlags::CLONE_NEWUTS) {
        return format!("setns uts: {e}");
    }
    if let Err(e) = nix::sched::setns(&net, CloneFlags::CLONE_NEWNET) {
        return format!("setns net: {e}");
    }
    if let Err(e) = nix::sched::setns(&ipc, CloneFlags::CLONE_NEWIPC) {
        return format!("setns ipc: {e}");
    }
    if let Err(e) = nix::sched::setns(&mnt, CloneFlags::CLONE_NEWNS) {
        return format!("setns mnt: {e}");
    }
    become_task(&entry.task)
}

/// Runs a step of the isolation; returns its exit code (or ends as the
/// task did).
pub fn main(argv: &[OsString]) -> i32 {
    let args: Vec<&str> = argv.iter().map(|a| a.to_str().unwrap_or("")).collect();
    let run = match args[..] {
        [PROBE_ARG] => {
            return match unshare(
                CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC,
            ) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("unshare: {e}");
                    1
                }
            };
        }
        [TASK_ARG, json] => {
            let e = match serde_json::from_str::<TaskStart>(json) {
                Ok(t) => become_task(&t),
                Err(e) => format!("task: {e}"),
            };
            eprintln!("failed to start the task: {e}");
            return CANNOT_EXEC;
        }
        [INIT_ARG, path] => read_spec(path).and_then(|s| init(&s)),
        [ENTER_ARG, init, entry] => serde_json::from_str::<Entry>(entry)
            .map_err(|e| format!("entry: {e}"))
            .and_then(|en| enter(init, &en, entry)),
        [ENTER_TASK_ARG, init, entry] => {
            let e = match serde_json::from_str::<Entry>(entry) {
                Ok(en) => enter_task(init, &en),
                Err(e) => format!("entry: {e}"),
            };
            eprintln!("failed to run the command: {e}");
            return CANNOT_EXEC;
        }
        [path] => read_spec(path).and_then(|s| isolate(&s, path)),
        _ => Err(format!("usage: {ISOLATE_ARG} SPEC")),
    };
    match run {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cannot isolate the task: {e}");
            CANNOT_EXEC
        }
    }
}

fn read_spec(path: &str) -> Result<IsolationSpec, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("read {path}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{path}: {e}"))
}

fn passed_and_children() -> SigSet {
    let mut set = SigSet::empty();
    for s in PASSED {
        set.add(s);
    }
    set.add(Signal::SIGCHLD);
    set
}

/// Isolate: into the cgroup and new namespaces, then starts init and
/// waits for it.
fn isolate(spec: &IsolationSpec, spec_path: &str) -> Result<i32, String> {
    let me = std::process::id().to_string();
    for procs in &spec.cgroup_procs {
        std::fs::write(procs, &me).map_err(|e| format!("join cgroup {}: {e}", procs.display()))?;
    }
    let signals = passed_and_children();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&signals), None)
        .map_err(|e| format!("block signals: {e}"))?;
    let mut flags = CloneFlags::CLONE_NEWNS;
    if spec.pid_private {
        flags |= CloneFlags::CLONE_NEWPID;
    }
    if spec.ipc_private {
        flags |= CloneFlags::CLONE_NEWIPC;
    }
    if spec.hostname.is_some() {
        flags |= CloneFlags::CLONE_NEWUTS;
    }
    unshare(flags).map_err(|e| format!("unshare {flags:?}: {e}"))?;
    if let Some(name) = &spec.hostname {
        nix::unistd::sethostname(name).map_err(|e| format!("sethostname {name:?}: {e}"))?;
    }
    let (report_read, report_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    // The first process started after unsharing the PID namespace is its
    // pid 1. Its own process group: a stop sent to isolate's group reaches
    // it once, through isolate.
    let mut init = Command::new(SELF_EXE)
        .args([ISOLATE_ARG, INIT_ARG, spec_path])
        .stdin(Stdio::from(report_write))
        .process_group(0)
        .spawn()
        .map_err(|e| format!("start init: {e}"))?;
    let init_pid = Pid::from_raw(i32::try_from(init.id()).unwrap_or(0));
    // Until init has blocked the signals it passes on, a signal sent to it
    // (a pid 1 without handlers) would be lost: they wait, pending, here.
    let mut report = std::io::BufReader::new(std::fs::File::from(report_read));
    let mut ready = String::new();
    let _ = report.read_line(&mut ready);
    let status = loop {
        let Ok(sig) = signals.wait() else { continue };
        if sig != Signal::SIGCHLD {
            let _ = kill(init_pid, sig);
            continue;
        }
        if let Ok(Some(status)) = init.try_wait() {
            break status;
        }
    };
    let mut said = String::new();
    let _ = report.read_to_string(&mut said);
    let mut parts = said.split_whitespace().map(|p| p.parse::<i32>().ok());
    Ok(match (parts.next().flatten(), parts.next().flatten()) {
        (Some(_), Some(sig)) if sig > 0 => end_by(sig),
        (Some(code), _) => code,
        // Init died before the task ended (killed, or by the OOM killer).
        _ => match (status.code(), status.signal()) {
            (Some(code), _) => code,
            (None, Some(sig)) => end_by(sig),
            (None, None) => CANNOT_EXEC,
        },
    })
}

/// Ends this process by `sig`, so the supervisor sees what the task saw
/// (isolate never handles a signal: blocked, each keeps its default
/// action); 128 + `sig` when the signal does not end it.
fn end_by(sig: i32) -> i32 {
    if let Ok(s) = Signal::try_from(sig) {
        let mut set = SigSet::empty();
        set.add(s);
        let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
        let _ = nix::sys::signal::raise(s);
    }
    128 + sig
}

/// Init: builds the task's root, starts the task, passes signals to it
/// and reports how it ended.
fn init(spec: &IsolationSpec) -> Result<i32, String> {
    let signals = passed_and_children();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&signals), None)
        .map_err(|e| format!("block signals: {e}"))?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| format!("pdeathsig: {e}"))?;
    build_root(spec)?;
    enter_root(spec)?;
    let start = serde_json::to_string(&spec.task).map_err(|e| format!("task: {e}"))?;
    let child = Command::new(SELF_EXE)
        .args([ISOLATE_ARG, TASK_ARG, &start])
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("start the task: {e}"))?;
    let task = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    let _ = nix::unistd::write(std::io::stdin(), READY.as_bytes());
    let (code, sig) = loop {
        let Ok(s) = signals.wait() else { continue };
        if s != Signal::SIGCHLD {
            let _ = killpg(task, s);
            continue;
        }
        // As pid 1, init reaps every orphan of the namespace.
        let mut ended = None;
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(p, c)) if p == task => ended = Some((c, 0)),
                Ok(WaitStatus::Signaled(p, s, _)) if p == task => ended = Some((0, s as i32)),
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        if let Some(e) = ended {
            break e;
        }
    };
    let _ = nix::unistd::write(std::io::stdin(), format!("{code} {sig}\n").as_bytes());
    // Init's end ends what is left in the namespace.
    Ok(0)
}

fn mount_err(what: &str, at: &Path, e: nix::Error) -> String {
    format!("{what} {}: {e}", at.display())
}

/// A mount point for `src` at `target`: a dir for a dir, a file for a file.
fn mount_point(src: &Path, target: &Path) -> Result<(), String> {
    if src.is_dir() {
        std::fs::create_dir_all(target).map_err(|e| format!("create {}: {e}", target.display()))
    } else {
        if let Some(p) = target.parent() {
            std::fs::create_dir_all(p).map_err(|e| format!("create {}: {e}", p.display()))?;
        }
        if !target.exists() {
            std::fs::File::create(target)
                .map_err(|e| format!("create {}: {e}", target.display()))?;
        }
        Ok(())
    }
}

/// Binds `src` at `target`, read-only unless `writable`.
fn bind(src: &Path, target: &Path, writable: bool) -> Result<(), String> {
    mount_point(src, target)?;
    mount(
        Some(src),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| mount_err("bind", target, e))?;
    if !writable {
        mount(
            None::<&str>,
            target,
            None::<&str>,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID,
            None::<&str>,
        )
        .map_err(|e| mount_err("remount read-only", target, e))?;
    }
    Ok(())
}

/// `path` inside `root` (a leading `/` is dropped).
fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Mounts the task's root in init's mount namespace: nothing of it is seen
/// outside, and it all goes with the namespace.
fn build_root(spec: &IsolationSpec) -> Result<(), String> {
    let root = &spec.root;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| mount_err("make private", Path::new("/"), e))?;
    // The root must be a mount point to pivot into.
    mount(
        Some(root),
        root,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| mount_err("bind", root, e))?;
    for (src, dst) in &spec.chroot_env {
        if !src.exists() {
            continue;
        }
        bind(src, &inside(root, dst), false)?;
    }
    bind(&spec.alloc_dir, &root.join("alloc"), true)?;
    // A destination under a host dir bound read-only above (`/etc`, `/usr`…)
    // can only be a dir that already exists there.
    for (src, dst, writable) in &spec.volumes {
        bind(src, &inside(root, dst), *writable).map_err(|e| {
            format!(
                "volume_mount at {}: {e} (under the host dirs the task sees read-only, \
                 only an existing dir can be mounted over)",
                dst.display()
            )
        })?;
    }
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| format!("create {}: {e}", dev.display()))?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_STRICTATIME,
        Some("mode=755,size=65536k"),
    )
    .map_err(|e| mount_err("mount tmpfs on", &dev, e))?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let src = Path::new("/dev").join(node);
        if src.exists() {
            bind(&src, &dev.join(node), true)?;
        }
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let _ = std::os::unix::fs::symlink(to, dev.join(link));
    }
    let shm = dev.join("shm");
    std::fs::create_dir_all(&shm).map_err(|e| format!("create {}: {e}", shm.display()))?;
    mount(
        Some("shm"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=1777,size=65536k"),
    )
    .map_err(|e| mount_err("mount tmpfs on", &shm, e))?;
    let proc = root.join("proc");
    std::fs::create_dir_all(&proc).map_err(|e| format!("create {}: {e}", proc.display()))?;
    mount(
        Some("proc"),
        &proc,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| mount_err("mount proc on", &proc, e))?;
    let sys = root.join("sys");
    std::fs::create_dir_all(&sys).map_err(|e| format!("create {}: {e}", sys.display()))?;
    mount(
        Some("sysfs"),
        &sys,
        Some("sysfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .map_err(|e| mount_err("mount sysfs on", &sys, e))?;
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("create {}: {e}", tmp.display()))?;
    Ok(())
}

/// Makes the task's root init's `/`: a pivot (the host's root is then
/// unmounted from the namespace, so no chroot escape reaches it), or a
/// chroot where the plugin configuration asks for one.
fn enter_root(spec: &IsolationSpec) -> Result<(), String> {
    let root = &spec.root;
    nix::unistd::chdir(root).map_err(|e| mount_err("chdir", root, e))?;
    if spec.pivot_root {
        nix::unistd::pivot_root(".", ".").map_err(|e| mount_err("pivot_root", root, e))?;
        umount2(".", MntFlags::MNT_DETACH)
            .map_err(|e| mount_err("unmount the old root under", root, e))?;
    } else {
        nix::unistd::chroot(".").map_err(|e| mount_err("chroot", root, e))?;
    }
    nix::unistd::chdir("/").map_err(|e| mount_err("chdir", Path::new("/"), e))
}

/// In the task's process: its capabilities, credentials and working dir,
/// then its command. Returns only on failure.
fn become_task(t: &TaskStart) -> String {
    // Spawned by init, the process inherited the signals init blocks.
    if let Err(e) = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None) {
        return format!("cannot unblock its signals: {e}");
    }
    // An ignored signal stays ignored across exec (this binary ignores
    // SIGPIPE, whoever started the client may have ignored others); a
    // handled one is reset to its default: handle them all.
    let noted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in DEFAULTED {
        if let Err(e) = signal_hook::flag::register(sig, std::sync::Arc::clone(&noted)) {
            return format!("cannot reset signal {sig}: {e}");
        }
    }
    let set = CapSet(t.caps);
    if let Err(e) = caps::limit_bounding(set) {
        return format!("cannot limit its capabilities: {e}");
    }
    if t.uid != 0 {
        if let Err(e) = caps::keep_across_setuid() {
            return e;
        }
        let groups: Vec<Gid> = t.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        if let Err(e) = nix::unistd::setgroups(&groups) {
            return format!("setgroups: {e}");
        }
        let (gid, uid) = (Gid::from_raw(t.gid), Uid::from_raw(t.uid));
        if let Err(e) = nix::unistd::setresgid(gid, gid, gid) {
            return format!("setgid {}: {e}", t.gid);
        }
        if let Err(e) = nix::unistd::setresuid(uid, uid, uid) {
            return format!("setuid {}: {e}", t.uid);
        }
        if let Err(e) = caps::raise_ambient(set) {
            return format!("cannot raise its capabilities: {e}");
        }
    }
    if let Err(e) = nix::unistd::chdir(&t.work_dir) {
        return format!("chdir {}: {e}", t.work_dir.display());
    }
    let argv: Result<Vec<CString>, _> = std::iter::once(&t.command)
        .chain(&t.args)
        .map(|a| CString::new(a.as_bytes()))
        .collect();
    let Ok(argv) = argv else {
        return "an argument holds a NUL byte".into();
    };
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    for (k, v) in &t.defaults {
        if !env.iter().any(|(name, _)| name == k.as_str()) {
            env.push((k.into(), v.into()));
        }
    }
    let env: Result<Vec<CString>, _> = env
        .iter()
        .map(|(k, v)| {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            CString::new(pair)
        })
        .collect();
    let Ok(env) = env else {
        return "a variable holds a NUL byte".into();
    };
    match nix::unistd::execvpe(&argv[0], &argv, &env) {
        Ok(never) => match never {},
        Err(e) => format!("{:?}: {e}", t.command),
    }
}
