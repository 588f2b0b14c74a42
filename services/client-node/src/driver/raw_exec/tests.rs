//! The raw_exec driver against real processes under the real supervisor.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Instant;

use caravan_proto::{Allocation, Job, Node, Task, TaskGroup};

use super::*;
use crate::alloc_dir::AllocDir;
use crate::driver::config::{list_value, string_value};
use crate::driver::{ExecRequest, TaskConfig, proc_stat};
use crate::task_env::TaskEnv;

fn spec(dir: &std::path::Path, script: &str) -> TaskSpec {
    let alloc = Allocation {
        id: "a1".into(),
        name: "j.g[2]".into(),
        ..Default::default()
    };
    let job = Job {
        id: "j".into(),
        ..Default::default()
    };
    let group = TaskGroup {
        name: "g".into(),
        ..Default::default()
    };
    let mut task = Task {
        name: "t".into(),
        ..Default::default()
    };
    task.env = BTreeMap::from([("WHO".to_string(), "world".to_string())]);
    let ad = AllocDir::new(dir, "a1").unwrap();
    ad.build(["t"]).unwrap();
    let dirs = ad.task("t").unwrap();
    let env = TaskEnv::build(
        Arc::new(Node::default()),
        &alloc,
        &job,
        &group,
        &task,
        Some(&dirs),
        false,
    );
    TaskSpec {
        alloc_id: "a1".into(),
        task: "t".into(),
        config: TaskConfig::from_pairs([
            ("command", string_value("/bin/sh")),
            ("args", list_value(&["-c", script])),
        ]),
        env: Some(env),
        dirs: Some(dirs),
        logs: Default::default(),
        user: String::new(),
        resources: None,
        volume_mounts: Vec::new(),
        netns: None,
        group_net: Default::default(),
    }
}

/// What a handle of this driver persisted.
fn decoded(h: &dyn TaskHandle) -> RawExecState {
    RawExecState::decode(&h.state()).unwrap_or_else(|| panic!("{:?}", h.state()))
}

#[tokio::test]
async fn output_goes_to_the_log_files_with_the_task_env() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        dir.path(),
        "echo hello $WHO from ${NOMAD_ALLOC_INDEX} in $(pwd); echo oops >&2; exit 3",
    );
    let dirs = s.dirs.clone().unwrap();
    let h = driver().start(s).await.unwrap();
    let r = h.wait().await;
    assert_eq!(r.exit_code, 3);
    let out = std::fs::read_to_string(&dirs.stdout).unwrap();
    assert_eq!(
        out.trim(),
        format!("hello world from 2 in {}", dirs.task_dir.display())
    );
    assert_eq!(
        std::fs::read_to_string(&dirs.stderr).unwrap().trim(),
        "oops"
    );
    // wait() can be asked again.
    assert_eq!(h.wait().await.exit_code, 3);
}

#[tokio::test]
async fn stop_sends_the_signal_then_kills_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    // Traps TERM and keeps going: only SIGKILL ends it.
    let s = spec(
        dir.path(),
        "trap 'echo got-term' TERM; echo ready; while true; do sleep 0.05; done",
    );
    let dirs = s.dirs.clone().unwrap();
    let h = driver().start(s).await.unwrap();
    wait_for_file(&dirs.stdout, "ready").await;
    let began = Instant::now();
    let r = h.stop(Signal::SIGTERM, Duration::from_millis(500)).await;
    let took = began.elapsed();
    assert_eq!(r.signal, Signal::SIGKILL as i32, "{r:?}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    wait_for_file(&dirs.stdout, "got-term").await;
}

#[tokio::test]
async fn stop_of_a_cooperative_task_needs_no_kill() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), "exec sleep 30");
    let h = driver().start(s).await.unwrap();
    let r = stop_once_sleeping(h.as_ref(), Signal::SIGINT).await;
    assert_eq!(r.signal, Signal::SIGINT as i32);
}

#[tokio::test]
async fn a_task_gets_default_signal_actions_whatever_the_client_ignores() {
    let dir = tempfile::tempdir().unwrap();
    // The supervisor started with SIGHUP, SIGINT, SIGQUIT and SIGTERM
    // ignored, as by `nohup` from a shell's background job: ignored
    // signals survive exec, and the task could not be stopped with them.
    let wrapper = dir.path().join("ignoring-supervisor");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ntrap '' HUP INT QUIT TERM\nexec {} \"$@\"\n",
            driver().supervisor.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (h, out) = output_until_checked(
        &RawExecDriver::new(wrapper),
        dir.path(),
        "grep -E '^SigIgn' /proc/self/status; echo checked; exec sleep 30",
    )
    .await;
    let ignored = out
        .strip_prefix("SigIgn:\t")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("no SigIgn line in {out:?}"));
    for signal in [
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGTERM,
    ] {
        assert_eq!(
            ignored & (1 << (signal as u64 - 1)),
            0,
            "the task ignores {signal}: {out:?}"
        );
    }
    let r = stop_once_sleeping(h.as_ref(), Signal::SIGINT).await;
    assert_eq!(r.signal, Signal::SIGINT as i32, "{r:?}");
}

#[tokio::test]
async fn a_task_gets_the_hosts_huge_pages_whatever_the_client_turned_off() {
    let thp = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:\t"))
            .map(str::to_owned)
    };
    let host = thp(&std::fs::read_to_string("/proc/self/status").unwrap());
    if host.as_deref() != Some("1") {
        // A kernel without transparent huge pages: nothing to give back.
        return;
    }
    // As a client-node process runs: huge pages off, inherited by
    // whatever it starts.
    caravan_runtime::huge_pages::disable();
    let dir = tempfile::tempdir().unwrap();
    let (h, out) = output_until_checked(
        &driver(),
        dir.path(),
        "grep -E '^THP_enabled' /proc/self/status; echo checked; exec sleep 30",
    )
    .await;
    caravan_runtime::huge_pages::restore_for_children();
    assert_eq!(thp(&out).as_deref(), Some("1"), "{out:?}");
    let r = stop_once_sleeping(h.as_ref(), Signal::SIGTERM).await;
    assert_eq!(r.signal, Signal::SIGTERM as i32, "{r:?}");
}

#[tokio::test]
async fn recover_finds_the_live_process_and_not_a_dead_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), "exec sleep 30");
    let s2 = s.clone();
    let h = driver().start(s).await.unwrap();
    let state = h.state();
    let RawExecState {
        pid,
        start_ticks,
        supervisor: Some(sup),
        ..
    } = decoded(h.as_ref())
    else {
        panic!("{state:?}")
    };
    assert_eq!(proc_stat(pid).unwrap().start_ticks, start_ticks);
    let again = driver().recover(&s2, &state).await.expect("live process");
    let wrong = RawExecState {
        pid,
        start_ticks: start_ticks + 1,
        started_at_unix_ns: 0,
        supervisor: Some(SupervisorState {
            start_ticks: sup.start_ticks + 1,
            ..sup.clone()
        }),
    }
    .encode();
    assert!(
        driver().recover(&s2, &wrong).await.is_none(),
        "pid reuse is not our task"
    );
    let r = again.stop(Signal::SIGTERM, Duration::from_secs(5)).await;
    assert_eq!(r.signal, Signal::SIGTERM as i32, "{r:?}");
    assert_eq!(h.wait().await.signal, Signal::SIGTERM as i32);
    // Gone, but its exit is on record.
    let late = driver().recover(&s2, &state).await.expect("recorded exit");
    assert_eq!(late.wait().await.signal, Signal::SIGTERM as i32);
    std::fs::remove_file(&sup.exit_record).unwrap();
    assert!(
        driver().recover(&s2, &state).await.is_none(),
        "no record: lost"
    );
}

#[tokio::test]
async fn the_exit_code_survives_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), "echo ready; sleep 0.3; exit 3");
    let dirs = s.dirs.clone().unwrap();
    let h = driver().start(s.clone()).await.unwrap();
    let state = h.state();
    let RawExecState {
        supervisor: Some(sup),
        ..
    } = decoded(h.as_ref())
    else {
        panic!("{state:?}")
    };
    // A client that re-attaches while the task runs learns its exit code.
    let again = driver().recover(&s, &state).await.expect("live supervisor");
    assert_eq!(again.wait().await.exit_code, 3);
    assert_eq!(h.wait().await.exit_code, 3);
    wait_for_file(&dirs.stdout, "ready").await;
    let rec = read_exit(&sup.exit_record).unwrap();
    assert_eq!(rec.exit.exit_code, 3);
    assert!(rec.finished_at_unix_ns > 0);
}

#[tokio::test]
async fn a_run_the_client_never_recorded_is_adopted_once() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let s = spec(
        dir.path(),
        &format!("echo run >> {}; sleep 0.3; exit 4", ran.display()),
    );
    // The client dies right after the start: the handle is never persisted.
    let first = driver().start(s.clone()).await.unwrap();
    let pid = decoded(first.as_ref()).pid;
    drop(first);
    let adopted = driver().adopt(&s).await.expect("the run is on record");
    let same = decoded(adopted.as_ref()).pid;
    assert_eq!(same, pid);
    assert_eq!(adopted.wait().await.exit_code, 4);
    // Its end is on record until the client has taken it into account.
    let late = driver().adopt(&s).await.expect("still on record");
    assert_eq!(late.wait().await.exit_code, 4);
    driver().release(&s).await;
    assert!(
        driver().adopt(&s).await.is_none(),
        "released runs are not adopted"
    );
    assert_eq!(std::fs::read_to_string(&ran).unwrap().lines().count(), 1);
}

/// A client killed right after it started a supervisor, before the run
/// was recorded, starts again and finds no run on record: the start it
/// makes then must not run the task a second time beside the first
/// supervisor, still on its way.
#[tokio::test]
async fn a_start_racing_an_earlier_clients_supervisor_runs_the_task_once() {
    // A start is cut at its first wait unless the supervisor answered before
    // the start first looked (a busy machine runs the child first): such a
    // round is the client dying just after the start instead, and must run
    // the task once too, but five rounds must be the race itself.
    let mut raced = 0;
    for round in 0..50 {
        if raced == 5 {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let s = spec(
            dir.path(),
            &format!("echo run >> {}; sleep 0.3", ran.display()),
        );
        // The client dies once its supervisor is spawned, before the
        // handshake: the start is dropped at its first wait.
        let died = tokio::time::timeout(Duration::ZERO, driver().start(s.clone())).await;
        raced += usize::from(died.is_err());
        drop(died);
        // The next client, as its task runner does: adopt, else start.
        let h = match driver().adopt(&s).await {
            Some(h) => h,
            None => driver().start(s.clone()).await.unwrap(),
        };
        assert_eq!(h.wait().await.exit_code, 0);
        let runs = std::fs::read_to_string(&ran).unwrap_or_default();
        assert_eq!(runs.lines().count(), 1, "round {round}: {runs:?}");
    }
    panic!("only {raced} of 50 starts were cut before the supervisor answered");
}

#[tokio::test]
async fn a_run_whose_supervisor_died_unrecorded_ends_unknown_and_is_not_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), "exec sleep 30");
    let h = driver().start(s.clone()).await.unwrap();
    let RawExecState {
        pid,
        start_ticks,
        supervisor: Some(sup),
        ..
    } = decoded(h.as_ref())
    else {
        panic!("{:?}", h.state())
    };
    nix::sys::signal::kill(Pid::from_raw(sup.pid), Signal::SIGKILL).unwrap();
    let r = h.wait().await;
    assert!(r.err.is_some(), "{r:?}");
    let adopted = driver().adopt(&s).await.expect("the run is on record");
    let r = adopted.wait().await;
    assert!(
        r.err
            .as_deref()
            .is_some_and(|e| e.contains("without recording")),
        "{r:?}"
    );
    // Nobody waits for the task any more: it is ended.
    for _ in 0..200 {
        if !alive(pid, start_ticks) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the task of a run that ended unknown still runs");
}

#[tokio::test]
async fn missing_command_is_fatal_and_missing_binary_recoverable() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), "true");
    s.config = TaskConfig::default();
    let e = driver().start(s).await.unwrap_err();
    assert!(!e.recoverable);
    assert!(e.message.contains("config.command"));
    let mut s = spec(dir.path(), "true");
    s.config = TaskConfig::from_pairs([("command", string_value("/nonexistent/bin"))]);
    let e = driver().start(s).await.unwrap_err();
    assert!(e.recoverable, "{e}");
}

/// The client-node binary, built next to the test binary's `deps/`.
fn driver() -> RawExecDriver {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("caravan-client-node");
    assert!(
        bin.exists(),
        "{} is missing: build the binaries first (cargo build --bins)",
        bin.display()
    );
    RawExecDriver::new(bin)
}

/// Starts `script` in `dir` with `driver` and returns its handle and its
/// output once it has printed `checked`.
async fn output_until_checked(
    driver: &RawExecDriver,
    dir: &std::path::Path,
    script: &str,
) -> (Arc<dyn TaskHandle>, String) {
    let s = spec(dir, script);
    let dirs = s.dirs.clone().unwrap();
    let h = driver.start(s).await.unwrap();
    wait_for_file(&dirs.stdout, "checked").await;
    (h, std::fs::read_to_string(&dirs.stdout).unwrap())
}

/// Stops a task running `exec sleep …` with `signal` once it is `sleep`
/// itself, so the signal reaches the program the test means rather than
/// the shell before its exec.
async fn stop_once_sleeping(h: &dyn TaskHandle, signal: Signal) -> ExitResult {
    let pid = decoded(h).pid;
    wait_for_file(
        &std::path::PathBuf::from(format!("/proc/{pid}/comm")),
        "sleep",
    )
    .await;
    h.stop(signal, Duration::from_secs(5)).await
}

async fn wait_for_file(path: &std::path::Path, needle: &str) {
    for _ in 0..200 {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never contained {needle:?}", path.display());
}

/// What an exec'd command wrote and its exit code.
async fn exec_in(
    h: &dyn TaskHandle,
    command: &[&str],
    stdin: Option<&'static [u8]>,
) -> (i32, String, String) {
    let (out_w, mut out_r) = tokio::io::duplex(1 << 16);
    let (err_w, mut err_r) = tokio::io::duplex(1 << 16);
    let mut req = ExecRequest::new(
        command.iter().map(|s| s.to_string()).collect(),
        out_w,
        err_w,
    );
    if let Some(input) = stdin {
        req = req.with_stdin(input);
    }
    let code = h.exec(req).await.unwrap();
    let mut out = String::new();
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut out_r, &mut out)
        .await
        .unwrap();
    tokio::io::AsyncReadExt::read_to_string(&mut err_r, &mut err)
        .await
        .unwrap();
    (code, out, err)
}

#[tokio::test]
async fn exec_runs_in_the_tasks_env_and_dir_with_stdin_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), "exec sleep 30");
    let dirs = s.dirs.clone().unwrap();
    let h = driver().start(s.clone()).await.unwrap();
    let (code, out, _) = exec_in(
        h.as_ref(),
        &["/bin/sh", "-c", "echo $WHO $NOMAD_ALLOC_ID $(pwd); exit 7"],
        None,
    )
    .await;
    assert_eq!(code, 7);
    assert_eq!(out.trim(), format!("world a1 {}", dirs.task_dir.display()));
    let (code, out, err) = exec_in(
        h.as_ref(),
        &["/bin/sh", "-c", "tr a-z A-Z; echo done >&2"],
        Some(b"from stdin\n"),
    )
    .await;
    assert_eq!((code, out.trim(), err.trim()), (0, "FROM STDIN", "done"));
    // A re-attached handle runs commands in the same context.
    let again = driver().recover(&s, &h.state()).await.unwrap();
    let (code, out, _) = exec_in(again.as_ref(), &["/bin/sh", "-c", "echo $WHO"], None).await;
    assert_eq!((code, out.trim()), (0, "world"));
    let missing = h
        .exec(ExecRequest::new(
            vec!["/nonexistent/cmd".into()],
            tokio::io::sink(),
            tokio::io::sink(),
        ))
        .await
        .unwrap_err();
    assert!(missing.message.contains("/nonexistent/cmd"), "{missing}");
    h.stop(Signal::SIGKILL, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn signals_and_usage_reach_the_tasks_process() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        dir.path(),
        "trap 'echo got-usr1' USR1; echo ready; while true; do sleep 0.05; done",
    );
    let dirs = s.dirs.clone().unwrap();
    let h = driver().start(s).await.unwrap();
    wait_for_file(&dirs.stdout, "ready").await;
    h.signal(Signal::SIGUSR1).await.unwrap();
    wait_for_file(&dirs.stdout, "got-usr1").await;
    let usage = h.stats(2000).await.unwrap();
    let rss = usage
        .resource_usage
        .as_ref()
        .and_then(|u| u.memory_stats.as_ref())
        .map_or(0, |m| m.rss);
    assert!(rss > 0, "{usage:?}");
    assert!(
        usage
            .pids
            .contains_key(&decoded(h.as_ref()).pid.to_string())
    );
    let r = h.stop(Signal::SIGKILL, Duration::from_secs(5)).await;
    assert_eq!(r.signal, Signal::SIGKILL as i32);
    let gone = h.signal(Signal::SIGUSR1).await.unwrap_err();
    assert!(gone.message.contains("gone"), "{gone}");
}

#[tokio::test]
async fn work_dir_is_where_the_task_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), "pwd");
    s.config
        .0
        .fields
        .insert("work_dir".into(), string_value("local"));
    let dirs = s.dirs.clone().unwrap();
    let h = driver().start(s).await.unwrap();
    assert!(h.wait().await.successful());
    wait_for_file(&dirs.stdout, "local").await;
    assert_eq!(
        std::fs::read_to_string(&dirs.stdout).unwrap().trim(),
        dirs.local_dir.display().to_string()
    );
}

#[tokio::test]
async fn exec_with_a_terminal_is_sized_and_gets_job_control() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), "exec sleep 30");
    let h = driver().start(s).await.unwrap();
    let (out_w, mut out_r) = tokio::io::duplex(1 << 16);
    let (sizes, resize) = tokio::sync::mpsc::channel(4);
    sizes
        .send(crate::driver::TtySize {
            height: 40,
            width: 120,
        })
        .await
        .unwrap();
    // The size is set before the command reads it: it waits for its input.
    let (mut typed, input) = tokio::io::duplex(64);
    let req = ExecRequest::new(
        vec![
            "/bin/sh".into(),
            "-c".into(),
            "read go; tty; stty size; ps -o stat= -p $$".into(),
        ],
        out_w,
        tokio::io::sink(),
    )
    .with_stdin(input)
    .with_tty(resize);
    let running = tokio::spawn({
        let h = h.clone();
        async move { h.exec(req).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::io::AsyncWriteExt::write_all(&mut typed, b"go\n")
        .await
        .unwrap();
    let code = running.await.unwrap().unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut out_r, &mut out)
        .await
        .unwrap();
    assert_eq!(code, 0, "{out:?}");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    // The terminal echoes the input, then the command's output.
    assert_eq!(lines[0], "go", "{out:?}");
    assert!(lines[1].starts_with("/dev/pts/"), "{out:?}");
    assert_eq!(lines[2], "40 120", "{out:?}");
    // `s`: the shell leads its own session, on its controlling terminal.
    assert!(lines[3].contains('s'), "{out:?}");
    drop(sizes);
    h.stop(Signal::SIGKILL, Duration::from_secs(5)).await;
}

/// The interfaces a `/proc/net/dev` listing names.
fn interfaces(net_dev: &str) -> Vec<String> {
    net_dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(|n| n.trim().to_string())
        .collect()
}

#[tokio::test]
async fn a_task_and_its_exec_commands_run_in_the_alloc_network_namespace() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "a network namespace needs root (CI runs as root)"
    );
    let dir = tempfile::tempdir().unwrap();
    let netns = dir.path().join("netns").join("a1");
    crate::network::netns::create(&netns).unwrap();
    let mut s = spec(
        dir.path(),
        "env > $NOMAD_ALLOC_DIR/env; cat /proc/net/dev > $NOMAD_ALLOC_DIR/netdev.tmp; \
         mv $NOMAD_ALLOC_DIR/netdev.tmp $NOMAD_ALLOC_DIR/netdev; sleep 30",
    );
    s.netns = Some(netns.clone());
    let h = driver().start(s).await.unwrap();
    let alloc_dir = dir.path().join("allocs").join("a1").join("alloc");
    let netdev = alloc_dir.join("netdev");
    caravan_testkit::wait::until(
        "the task listed its interfaces",
        Duration::from_secs(10),
        || std::fs::read_to_string(&netdev).is_ok_and(|s| s.contains("lo:")),
    )
    .await;
    // A new namespace has loopback alone; the host has more.
    assert_eq!(
        interfaces(&std::fs::read_to_string(&netdev).unwrap()),
        ["lo"]
    );
    let env = std::fs::read_to_string(alloc_dir.join("env")).unwrap();
    assert!(!env.contains(super::super::supervisor::NETNS_ENV), "{env}");
    let (code, out, err) = exec_in(h.as_ref(), &["cat", "/proc/net/dev"], None).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(interfaces(&out), ["lo"]);
    h.stop(Signal::SIGKILL, Duration::from_secs(5)).await;
    crate::network::netns::remove(&netns).unwrap();
}
