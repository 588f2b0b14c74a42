//! Scenarios 1 and 2: a raw_exec service job of three real processes on two
//! client nodes, run and stopped through the `caravan` CLI.

use std::collections::{BTreeMap, BTreeSet};

use caravan_integration_tests::process::{command_line, process_alive};
use caravan_integration_tests::{Cluster, Progress, jobs, wait_for};
use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation, EvalStatus};

use crate::{STEP, job_evals, wait_running};

/// A job of three tasks that each record their pid, print a greeting and
/// sleep, running on two raw_exec client nodes.
struct Sleepers {
    allocs: Vec<Allocation>,
    /// Alloc id → pid of its task.
    pids: BTreeMap<String, i32>,
    nodes: Vec<String>,
}

const JOB: &str = "sleepers";

async fn run_sleepers(c: &mut Cluster) -> Sleepers {
    c.start_control_plane().await.unwrap();
    let nodes = vec![
        c.start_client("node-a", &[("drivers", "raw_exec")])
            .await
            .unwrap(),
        c.start_client("node-b", &[("drivers", "raw_exec")])
            .await
            .unwrap(),
    ];
    let pid_dir = c.dir().join("pids");
    std::fs::create_dir_all(&pid_dir).unwrap();
    let script = format!(
        "echo $$ > {}/$NOMAD_ALLOC_ID.pid; echo \"hello from $NOMAD_ALLOC_NAME\"; exec sleep 300",
        pid_dir.display()
    );
    let job = jobs::service_job(JOB, 3, jobs::raw_exec_task(&script));
    let file = c.dir().join("sleepers.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&job).unwrap()).unwrap();

    let out = c
        .cli(&["job", "run", file.to_str().unwrap()])
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "caravan job run failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let allocs = wait_running(c, JOB, 3).await;
    let pids = caravan_integration_tests::wait_for_pids(&pid_dir, &allocs, STEP)
        .await
        .unwrap();
    Sleepers {
        allocs,
        pids,
        nodes,
    }
}

/// Kills whatever of the job's processes survived, so a failing test leaves
/// nothing behind.
fn reap(pids: &BTreeMap<String, i32>) {
    for pid in pids.values() {
        if process_alive(*pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

struct Reaper(BTreeMap<String, i32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        reap(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_exec_job_runs_three_processes_on_two_nodes() {
    let mut c = Cluster::new("raw-exec-run").await.unwrap();
    let job = run_sleepers(&mut c).await;
    let _reaper = Reaper(job.pids.clone());

    let used: BTreeSet<&str> = job.allocs.iter().map(|a| a.node_id.as_str()).collect();
    let names: BTreeSet<&str> = job.allocs.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from(["sleepers.g[0]", "sleepers.g[1]", "sleepers.g[2]"])
    );
    assert_eq!(
        used,
        job.nodes
            .iter()
            .map(String::as_str)
            .collect::<BTreeSet<_>>(),
        "three allocs of one job spread over both nodes (job anti-affinity)"
    );

    for alloc in &job.allocs {
        let pid = job.pids[&alloc.id];
        assert!(
            process_alive(pid),
            "task of {} (pid {pid}) is not running",
            alloc.name
        );
        let cmd = command_line(pid).unwrap_or_default();
        assert_eq!(cmd, "sleep 300", "pid {pid} of {} runs {cmd:?}", alloc.name);
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let wanted = format!("NOMAD_ALLOC_ID={}", alloc.id);
        assert!(
            environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()),
            "pid {pid} lacks {wanted} in its environment"
        );

        let out = c.cli(&["alloc", "logs", &alloc.id]).await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "caravan alloc logs {} failed: {}",
            alloc.id,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.trim(), format!("hello from {}", alloc.name));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_job_ends_its_processes_allocs_and_evals() {
    let mut c = Cluster::new("raw-exec-stop").await.unwrap();
    let job = run_sleepers(&mut c).await;
    let _reaper = Reaper(job.pids.clone());
    for pid in job.pids.values() {
        assert!(process_alive(*pid));
    }

    let out = c.cli(&["job", "stop", JOB]).await.unwrap();
    assert!(
        out.status.success(),
        "caravan job stop failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let pids = job.pids.clone();
    wait_for("every task process to exit", STEP, async || {
        let alive: Vec<i32> = pids
            .values()
            .copied()
            .filter(|p| process_alive(*p))
            .collect();
        Ok(if alive.is_empty() {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("still running: {alive:?}"))
        })
    })
    .await
    .unwrap();

    let state = c.state.clone();
    let allocs = wait_for("every alloc to be stopped and complete", STEP, async || {
        let allocs: Vec<Allocation> = state
            .allocs()
            .await?
            .into_iter()
            .filter(|a| a.job_id == JOB)
            .collect();
        let done = allocs.iter().all(|a| {
            a.desired_status() == AllocDesiredStatus::Stop
                && a.client_status() == AllocClientStatus::Complete
        });
        Ok(if done {
            Progress::Done(allocs)
        } else {
            Progress::Waiting(format!(
                "{:?}",
                caravan_integration_tests::state::alloc_histogram(&allocs)
            ))
        })
    })
    .await
    .unwrap();
    assert_eq!(allocs.len(), 3, "stopping creates no allocations");

    let evals = job_evals(&c, JOB).await;
    assert!(
        evals.len() >= 2,
        "a register and a deregister eval: {evals:?}"
    );
    for e in &evals {
        assert_eq!(
            e.status(),
            EvalStatus::Complete,
            "eval {} ({}) is {:?}: {}",
            e.id,
            e.triggered_by,
            e.status(),
            e.status_description
        );
    }
    assert!(evals.iter().any(|e| e.triggered_by == "job-deregister"));
    assert!(c.exited().is_empty(), "{:?}", c.exited());
}
