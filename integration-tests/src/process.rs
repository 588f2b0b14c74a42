//! One service binary running as a child process: its log file, its pid,
//! and how it is stopped (gracefully, or with SIGKILL to simulate a crash).
//!
//! Children are tied to the harness: each gets SIGTERM when the harness
//! process dies, however it dies (a panic, Ctrl-C of `cargo test`, SIGKILL),
//! so no service outlives the test or benchmark that started it.
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits,
//! not the process, so every child is forked by one spawner thread that
//! lives as long as the process ([`spawn_tied`]): a child started from a
//! `#[tokio::test]` thread, a runtime worker or a blocking-pool thread that
//! ends early is not killed with it. Children also get a process group of
//! their own, so a Ctrl-C in the terminal reaches only the harness, which
//! stops them gracefully, rather than every service at once.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running (or exited) service process whose output goes to a log file.
#[derive(Debug)]
pub struct ServiceProcess {
    /// A name unique within its cluster, e.g. `eval-broker-1`.
    pub name: String,
    /// The gRPC address it was told to listen on.
    pub grpc: SocketAddr,
    /// Where it serves `/metrics`, when the harness knows.
    pub metrics: Option<SocketAddr>,
    /// Its stdout and stderr.
    pub log: PathBuf,
    child: Option<Child>,
    /// How long a graceful stop may take before SIGKILL.
    stop_grace: Duration,
    /// The binary and its arguments, to start it again.
    binary: PathBuf,
    args: Vec<String>,
    /// Environment variables added to the harness's own, on every start.
    env: Vec<(String, String)>,
}

impl ServiceProcess {
    /// Starts `binary` with `args`, appending its output to `log`.
    pub fn spawn(
        name: &str,
        binary: &Path,
        args: &[String],
        grpc: SocketAddr,
        log: PathBuf,
        stop_grace: Duration,
    ) -> anyhow::Result<ServiceProcess> {
        ServiceProcess::spawn_with_env(name, binary, args, &[], grpc, log, stop_grace)
    }

    /// [`ServiceProcess::spawn`] with `env` added to its environment, on
    /// this start and every restart (a preloaded library that steps its
    /// clock, for one).
    pub fn spawn_with_env(
        name: &str,
        binary: &Path,
        args: &[String],
        env: &[(String, String)],
        grpc: SocketAddr,
        log: PathBuf,
        stop_grace: Duration,
    ) -> anyhow::Result<ServiceProcess> {
        let mut process = ServiceProcess {
            name: name.to_string(),
            grpc,
            metrics: None,
            log,
            child: None,
            stop_grace,
            binary: binary.to_path_buf(),
            args: args.to_vec(),
            env: env.to_vec(),
        };
        process.respawn()?;
        Ok(process)
    }

    /// Starts the process again with the same arguments and log (appended
    /// to), SIGKILLing it first if it still runs: a restart after a crash.
    pub fn respawn(&mut self) -> anyhow::Result<()> {
        self.kill_hard();
        let out = File::options().create(true).append(true).open(&self.log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(&self.binary);
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let child = spawn_tied(command)
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Its exit status, if it has exited (reaping it).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => Some(status),
            Some(Ok(None)) => None,
            Some(Err(_)) | None => None,
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.is_some() && self.exited().is_none()
    }

    /// Sends `signal` to the process while it runs; whether it was sent.
    pub fn signal(&self, signal: Signal) -> bool {
        self.pid()
            .and_then(|pid| i32::try_from(pid).ok())
            .is_some_and(|pid| kill(Pid::from_raw(pid), signal).is_ok())
    }

    /// SIGKILL, as a crash: no resignation, no cleanup.
    pub fn kill_hard(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Already exited is fine: the point is that it is gone.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then SIGKILL once the grace period is over.
    pub fn stop(&mut self) {
        let grace = self.stop_grace;
        // Whether it made it in time matters to the shutdown tests only.
        let _ = self.terminate(grace);
    }

    /// SIGTERM, then waits up to `limit` for the process to exit; SIGKILLs
    /// it after that. Returns how long it took to exit on its own and its
    /// status, or `None` when it had to be killed (or was not running).
    pub fn terminate(&mut self, limit: Duration) -> Option<(Duration, ExitStatus)> {
        let mut child = self.child.take()?;
        let start = Instant::now();
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        while start.elapsed() < limit {
            if let Ok(Some(status)) = child.try_wait() {
                return Some((start.elapsed(), status));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// The last `lines` lines of its log.
    pub fn tail(&self, lines: usize) -> String {
        tail_file(&self.log, lines)
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the spawner thread is asked: a command to spawn, and where to send
/// the child.
type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `command` as a child that gets SIGTERM when this process dies, in
/// a process group of its own. The fork happens on a thread that lives as
/// long as the process (see the module docs for why).
pub fn spawn_tied(mut command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        // If the thread cannot start, `rx` is dropped with the closure and
        // every request below fails with a clear error instead.
        let _ = std::thread::Builder::new()
            .name("child-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            });
        tx
    });
    let parent = std::process::id();
    command.process_group(0);
    tie_to_parent(&mut command, parent);
    let (reply, answer) = mpsc::channel();
    let gone = || io::Error::other("the child-spawner thread is not running");
    spawner.send((command, reply)).map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

/// Makes the child ask for SIGTERM when its parent (thread) dies.
#[allow(unsafe_code)]
fn tie_to_parent(command: &mut Command, parent: u32) {
    // SAFETY: the closure runs between fork and exec, where only
    // async-signal-safe calls are allowed: prctl and getppid are plain
    // syscalls, and the error is built from an errno without allocating.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
            // A parent that died between fork and prctl sent no signal:
            // the child was reparented, so give up rather than run orphaned.
            if u32::try_from(nix::unistd::getppid().as_raw()).ok() != Some(parent) {
                return Err(Errno::ESRCH.into());
            }
            Ok(())
        });
    }
}

/// The last `lines` lines of a file, or why it could not be read.
pub fn tail_file(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("({}: {e})", path.display()),
    }
}

/// The ports [`free_addr`] hands out: below Linux's default ephemeral range
/// (32768-60999), from which the kernel picks the local port of every
/// outgoing connection and of every `bind(0)`, and below the default
/// dynamic port range a client node gives tasks (20000-32000). A port from
/// the ephemeral range, free when asked, could be taken by a connection the
/// next moment (an etcd member dialing its peers) before the service binds
/// it.
const HANDED_OUT: std::ops::Range<u16> = 10_000..20_000;

/// A loopback address with a port nothing listens on right now, never
/// handed out twice by this process, and outside the kernel's ephemeral
/// range ([`HANDED_OUT`]). Another test process may still take it before
/// the service binds it; callers retry on "address in use"
/// ([`lost_port_race`]).
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    use rand::Rng;
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let mut rng = rand::rng();
    for _ in 0..256 {
        let port = rng.random_range(HANDED_OUT);
        let mut given = GIVEN
            .lock()
            .map_err(|_| anyhow::anyhow!("port set poisoned"))?;
        let given = given.get_or_insert_with(HashSet::new);
        if given.contains(&port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            given.insert(port);
            return Ok(listener.local_addr()?);
        }
    }
    anyhow::bail!("no free loopback port found in {HANDED_OUT:?}")
}

/// Whether a log says the process could not bind its address: Rust's
/// "Address already in use", Go's "bind: address already in use".
pub fn lost_port_race(log: &Path) -> bool {
    std::fs::read_to_string(log)
        .is_ok_and(|t| t.to_ascii_lowercase().contains("address already in use"))
}

/// Whether something accepts TCP connections on `addr`.
pub fn accepts(addr: SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Whether a process with this id exists (and is not a zombie).
pub fn process_alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => false,
    }
}

/// The command line of a process, arguments joined by spaces.
pub fn command_line(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    Some(parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_race_is_seen_in_rust_and_go_logs() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        for (text, lost) in [
            ("Error: Address already in use (os error 98)", true),
            (
                r#"{"msg":"discovery failed","error":"listen tcp 127.0.0.1:40681: bind: address already in use"}"#,
                true,
            ),
            ("ready to serve client requests", false),
        ] {
            std::fs::write(&log, text).unwrap();
            assert_eq!(lost_port_race(&log), lost, "{text}");
        }
    }

    #[test]
    fn free_ports_stay_out_of_the_ephemeral_range_and_are_not_repeated() {
        let ports: Vec<u16> = (0..200).map(|_| free_addr().unwrap().port()).collect();
        assert!(ports.iter().all(|p| HANDED_OUT.contains(p)), "{ports:?}");
        let unique: HashSet<_> = ports.iter().collect();
        assert_eq!(unique.len(), ports.len());
    }
}
