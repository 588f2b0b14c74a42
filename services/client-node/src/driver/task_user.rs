//! Who a `raw_exec` task runs as, and what it inherits: a task never sees
//! the client's environment, only its own `env`, the `NOMAD_*` variables and
//! a minimal `PATH`; a task that names a `user` runs with that user's uid,
//! gid and supplementary groups, which only a client running as root can
//! grant.
//!
//! The switch itself happens in a short-lived process between the
//! supervisor and the task ([`TASK_EXEC_ARG`]): it sets the groups, gid and
//! uid and then replaces itself with the task, so the task keeps its pid and
//! process group and the supervisor keeps the root it needs for the logs.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use nix::fcntl::OFlag;
use nix::unistd::{Gid, Uid, User};

use super::DriverError;

/// `PATH` of a task whose `env` does not set one (Nomad's default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The argument that runs the binary as the credential switch before a task:
/// `caravan-client-node task-exec [--stdio] UID:GID:GROUPS COMMAND [ARG…]`.
pub const TASK_EXEC_ARG: &str = "task-exec";

/// The switch's flag for a command run in a task (`exec`): it keeps its
/// standard streams for the command and reports a failure to start on
/// stderr, with no report pipe.
pub const TASK_EXEC_STDIO: &str = "--stdio";

/// The switch's flag for a command run in a task with a terminal: it starts
/// a new session and makes its standard input (a terminal) the session's
/// controlling terminal before it runs the command, so job control and
/// `^C` reach the command as they do in a shell.
pub const TASK_EXEC_TTY: &str = "--tty";

/// The credentials argument of the switch that keeps the client's own.
pub const KEEP_CREDENTIALS: &str = "-";

/// A user a task runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskUser {
    /// The name the job gave.
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Every group it belongs to (the primary one included).
    pub groups: Vec<u32>,
    /// Its home directory (`HOME`).
    pub home: PathBuf,
    /// Whether the task's credentials differ from the client's, so a switch
    /// is needed; false when the client already runs as this user.
    pub switch: bool,
}

/// What a lookup of a user name found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The uid.
    pub uid: u32,
    /// The primary gid.
    pub gid: u32,
    /// The home directory.
    pub home: PathBuf,
}

/// The user `requested` resolves to for a client running as `euid`:
/// `None` when the task names none. A user that does not exist, or one
/// other than the client's own while the client is not root, fails the task
/// (a start that cannot succeed on this node, so no restart is tried).
pub fn decide(
    requested: &str,
    found: Option<Account>,
    euid: u32,
) -> Result<Option<TaskUser>, DriverError> {
    if requested.is_empty() {
        return Ok(None);
    }
    let Some(account) = found else {
        return Err(DriverError::fatal(format!(
            "user {requested:?} not found on this node"
        )));
    };
    let switch = account.uid != euid;
    if switch && euid != 0 {
        return Err(DriverError::fatal(format!(
            "user {requested:?} requested but the client is not running as root"
        )));
    }
    Ok(Some(TaskUser {
        name: requested.to_string(),
        uid: account.uid,
        gid: account.gid,
        groups: vec![account.gid],
        home: account.home,
        switch,
    }))
}

/// Looks `requested` up in the node's user database and decides as
/// [`decide`] does, filling in the user's supplementary groups.
pub fn resolve(requested: &str) -> Result<Option<TaskUser>, DriverError> {
    if requested.is_empty() {
        return Ok(None);
    }
    if requested.contains('\0') {
        return Err(DriverError::fatal(format!(
            "user {requested:?}: not a valid user name"
        )));
    }
    let found = User::from_name(requested)
        .map_err(|e| DriverError::fatal(format!("user {requested:?}: cannot look it up: {e}")))?;
    let account = found.as_ref().map(|u| Account {
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
        home: u.dir.clone(),
    });
    let Some(mut user) = decide(requested, account, Uid::effective().as_raw())? else {
        return Ok(None);
    };
    if let Some(u) = found
        && user.switch
    {
        user.groups = groups_of(&u)?;
    }
    Ok(Some(user))
}

fn groups_of(user: &User) -> Result<Vec<u32>, DriverError> {
    let name = std::ffi::CString::new(user.name.as_bytes())
        .map_err(|_| DriverError::fatal(format!("user {:?}: not a valid user name", user.name)))?;
    let groups = nix::unistd::getgrouplist(&name, user.gid).map_err(|e| {
        DriverError::fatal(format!("user {:?}: cannot list its groups: {e}", user.name))
    })?;
    let mut ids: Vec<u32> = groups.into_iter().map(Gid::as_raw).collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// Opens the alloc's shared `dirs` (`alloc/data`, `alloc/tmp`) to tasks of
/// any user, as `/tmp` is: writable by all, each file removable only by its
/// owner. The logs beside them stay the supervisor's.
pub fn open_shared(dirs: &[&std::path::Path]) -> Result<(), DriverError> {
    use std::os::unix::fs::PermissionsExt;
    for dir in dirs.iter().filter(|d| d.exists()) {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777)).map_err(|e| {
            DriverError::recoverable(format!("cannot open {} to every task: {e}", dir.display()))
        })?;
    }
    Ok(())
}

/// Gives `user` the directories `dirs` (those of its task that exist).
pub fn hand_over(user: &TaskUser, dirs: &[&std::path::Path]) -> Result<(), DriverError> {
    for dir in dirs.iter().filter(|d| d.exists()) {
        nix::unistd::chown(
            *dir,
            Some(Uid::from_raw(user.uid)),
            Some(Gid::from_raw(user.gid)),
        )
        .map_err(|e| {
            DriverError::recoverable(format!(
                "cannot give {} to user {:?}: {e}",
                dir.display(),
                user.name
            ))
        })?;
    }
    Ok(())
}

impl TaskUser {
    /// The credentials as [`TASK_EXEC_ARG`] takes them: `uid:gid:g1,g2,…`.
    pub fn credentials(&self) -> String {
        let groups: Vec<String> = self.groups.iter().map(u32::to_string).collect();
        format!("{}:{}:{}", self.uid, self.gid, groups.join(","))
    }
}

/// Parsed `uid:gid:groups`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

impl Credentials {
    /// Parses what [`TaskUser::credentials`] wrote.
    pub fn parse(text: &str) -> Result<Credentials, String> {
        let number = |what: &str, s: &str| {
            s.parse::<u32>()
                .map_err(|_| format!("credentials: {what} {s:?} is not a number"))
        };
        let mut parts = text.splitn(3, ':');
        let (Some(uid), Some(gid), Some(groups)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "credentials: expected uid:gid:groups, got {text:?}"
            ));
        };
        Ok(Credentials {
            uid: number("uid", uid)?,
            gid: number("gid", gid)?,
            groups: groups
                .split(',')
                .filter(|g| !g.is_empty())
                .map(|g| number("group", g))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// The pipe through which the credential switch tells the supervisor that
/// the task could not be started. The switch gets its writing end as its
/// standard input, keeps a copy that closes on exec, and gives the task
/// `/dev/null` instead: the supervisor reads either nothing (the task runs)
/// or the reason (nothing ran).
pub struct ExecReport;

impl ExecReport {
    /// The pipe: the supervisor keeps the reading end and hands the writing
    /// end to the switch as its standard input.
    pub fn open() -> std::io::Result<(OwnedFd, OwnedFd)> {
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(std::io::Error::from)
    }

    /// Waits until the switch has become the task (`None`) or said why it
    /// could not.
    pub fn wait(read: OwnedFd) -> Option<String> {
        let mut reason = String::new();
        match std::fs::File::from(read).read_to_string(&mut reason) {
            Ok(_) if reason.is_empty() => None,
            Ok(_) => Some(reason),
            Err(e) => Some(format!("reading the start report: {e}")),
        }
    }

    /// In the switch: a copy of the writing end that closes when the task
    /// is executed.
    fn take() -> std::io::Result<std::fs::File> {
        Ok(std::fs::File::from(
            std::io::stdin().as_fd().try_clone_to_owned()?,
        ))
    }
}

/// Runs as [`TASK_EXEC_ARG`]: takes on the credentials, then becomes the
/// task. Returns only on failure, with the exit code (127, as a shell does
/// for a command it cannot run); the reason goes to the supervisor through
/// the report pipe, and to stderr, the task's log.
pub fn exec_main(argv: &[OsString]) -> i32 {
    let (mut stdio, mut tty, mut argv) = (false, false, argv);
    while let Some((flag, rest)) = argv.split_first() {
        if flag == TASK_EXEC_STDIO {
            stdio = true;
        } else if flag == TASK_EXEC_TTY {
            tty = true;
        } else {
            break;
        }
        argv = rest;
    }
    let [credentials, command, args @ ..] = argv else {
        eprintln!(
            "usage: {TASK_EXEC_ARG} [{TASK_EXEC_STDIO}] [{TASK_EXEC_TTY}] UID:GID:GROUPS|- COMMAND [ARG...]"
        );
        return 2;
    };
    if tty && let Err(e) = take_terminal() {
        eprintln!("{e}");
        return 127;
    }
    // A command run in a bridge-mode task's alloc network (see
    // `supervisor::NETNS_ENV`): entered here, where nothing else runs yet.
    if let Some(netns) = std::env::var_os(super::supervisor::NETNS_ENV)
        && let Err(e) = crate::network::netns::enter(std::path::Path::new(&netns))
    {
        eprintln!("cannot enter the alloc's network namespace: {e}");
        return 127;
    }
    if credentials == KEEP_CREDENTIALS {
        let err = Command::new(command)
            .args(args)
            .env_remove(super::supervisor::NETNS_ENV)
            .exec();
        eprintln!("{}: {err}", command.to_string_lossy());
        return 127;
    }
    let mut report = if stdio {
        None
    } else {
        match ExecReport::take() {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("the start report: {e}");
                return 2;
            }
        }
    };
    let mut fail = |why: String| {
        if let Some(report) = report.as_mut() {
            let _ = report.write_all(why.as_bytes());
        }
        eprintln!("{why}");
        127
    };
    let creds = match credentials.to_str().map(Credentials::parse) {
        Some(Ok(c)) => c,
        Some(Err(e)) => return fail(e),
        None => return fail(format!("credentials: not UTF-8: {credentials:?}")),
    };
    // Groups and gid first: once the uid is dropped they can't be changed.
    let groups: Vec<Gid> = creds.groups.iter().map(|g| Gid::from_raw(*g)).collect();
    let switched = nix::unistd::setgroups(&groups)
        .map_err(|e| format!("setgroups {:?}: {e}", creds.groups))
        .and_then(|()| {
            nix::unistd::setgid(Gid::from_raw(creds.gid))
                .map_err(|e| format!("setgid {}: {e}", creds.gid))
        })
        .and_then(|()| {
            nix::unistd::setuid(Uid::from_raw(creds.uid))
                .map_err(|e| format!("setuid {}: {e}", creds.uid))
        });
    if let Err(e) = switched {
        return fail(format!("cannot run the task as uid {}: {e}", creds.uid));
    }
    let mut task = Command::new(command);
    task.args(args).env_remove(super::supervisor::NETNS_ENV);
    if !stdio {
        task.stdin(std::process::Stdio::null());
    }
    let err = task.exec();
    fail(err.to_string())
}

/// Starts a new session and makes the terminal on standard input its
/// controlling terminal: a session leader that opens a terminal without
/// `O_NOCTTY` acquires it, which needs no ioctl.
fn take_terminal() -> Result<(), String> {
    nix::unistd::setsid().map_err(|e| format!("setsid: {e}"))?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/fd/0")
        .map(drop)
        .map_err(|e| format!("cannot take the terminal: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(uid: u32) -> Option<Account> {
        Some(Account {
            uid,
            gid: uid,
            home: "/home/u".into(),
        })
    }

    #[test]
    fn a_task_without_a_user_runs_as_the_client() {
        assert_eq!(decide("", None, 1000).unwrap(), None);
        assert_eq!(resolve("").unwrap(), None);
    }

    #[test]
    fn an_unknown_user_fails_the_task_naming_it() {
        let e = decide("ghost", None, 0).unwrap_err();
        assert!(!e.recoverable);
        assert!(e.message.contains("\"ghost\" not found"), "{e}");
        let e = resolve("caravan-no-such-user").unwrap_err();
        assert!(e.message.contains("caravan-no-such-user"), "{e}");
    }

    #[test]
    fn only_root_runs_tasks_as_another_user() {
        let e = decide("www", account(33), 1000).unwrap_err();
        assert!(!e.recoverable);
        assert_eq!(
            e.message,
            "user \"www\" requested but the client is not running as root"
        );
        // Naming the client's own user needs no switch.
        let own = decide("me", account(1000), 1000).unwrap().unwrap();
        assert!(!own.switch);
        let as_root = decide("www", account(33), 0).unwrap().unwrap();
        assert!(as_root.switch);
        assert_eq!((as_root.uid, as_root.gid), (33, 33));
    }

    #[test]
    fn credentials_round_trip_and_bad_ones_are_named() {
        let user = TaskUser {
            name: "nobody".into(),
            uid: 65534,
            gid: 65534,
            groups: vec![65534, 100],
            home: "/nonexistent".into(),
            switch: true,
        };
        assert_eq!(user.credentials(), "65534:65534:65534,100");
        assert_eq!(
            Credentials::parse(&user.credentials()).unwrap(),
            Credentials {
                uid: 65534,
                gid: 65534,
                groups: vec![65534, 100]
            }
        );
        assert_eq!(
            Credentials::parse("1:2:").unwrap().groups,
            Vec::<u32>::new()
        );
        assert!(Credentials::parse("1:x:").unwrap_err().contains("gid"));
        assert!(
            Credentials::parse("1")
                .unwrap_err()
                .contains("uid:gid:groups")
        );
    }
}
