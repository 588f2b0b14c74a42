//! One service binary running as a child process: its log file, its pid,
//! and how it is stopped (gracefully, or with SIGKILL to simulate a crash).

use std::collections::HashSet;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running (or exited) service process whose output goes to a log file.
#[derive(Debug)]
pub struct ServiceProcess {
    /// A name unique within its cluster, e.g. `eval-broker-1`.
    pub name: String,
    /// The gRPC address it was told to listen on.
    pub grpc: SocketAddr,
    /// Its stdout and stderr.
    pub log: PathBuf,
    child: Option<Child>,
    /// How long a graceful stop may take before SIGKILL.
    stop_grace: Duration,
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
        let out = File::options().create(true).append(true).open(&log)?;
        let err = out.try_clone()?;
        let child = Command::new(binary)
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", binary.display()))?;
        Ok(ServiceProcess {
            name: name.to_string(),
            grpc,
            log,
            child: Some(child),
            stop_grace,
        })
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
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + self.stop_grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
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

/// A loopback address with a port nothing listens on right now, never
/// handed out twice by this process. Another process may still take it
/// before the service binds it; callers retry on "address in use".
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    for _ in 0..64 {
        let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let mut given = GIVEN
            .lock()
            .map_err(|_| anyhow::anyhow!("port set poisoned"))?;
        if given.get_or_insert_with(HashSet::new).insert(addr.port()) {
            return Ok(addr);
        }
    }
    anyhow::bail!("no free loopback port found")
}

/// Whether a log says the process could not bind its address.
pub fn lost_port_race(log: &Path) -> bool {
    std::fs::read_to_string(log).is_ok_and(|t| t.contains("Address already in use"))
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
