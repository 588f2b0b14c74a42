//! Issue 44's identity renewal with a real client: a short-lived identity
//! is signed again while its task runs, and its `change_mode` reaches the
//! run: `signal` sends its signal (no restart), `restart` restarts it in place.

use caravan_integration_tests::{Cluster, Progress, jobs, wait_for};
use caravan_proto::Allocation;
use serde_json::json;

use crate::{
    Reaper, STEP, pid_dir, register, set, task_events, wait_running_version, wait_task_event,
};

fn events(alloc: &Allocation) -> Vec<(String, String)> {
    task_events(alloc, "t")
}

async fn wait_event(c: &Cluster, job_id: &str, kind: &str, message: &str) -> Allocation {
    wait_task_event(c, job_id, "t", kind, message).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_identity_signals_or_restarts_its_task_as_its_change_mode_says() {
    let mut c = Cluster::new("identity-renewal").await.unwrap();
    c.start_control_plane().await.unwrap();
    c.start_client("renewal-node", &[("drivers", "raw_exec")])
        .await
        .unwrap();
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    for (id, mode) in [("renew-sig", "signal"), ("renew-restart", "restart")] {
        let log = dir.join(format!("{id}.log"));
        // Logs each start, and each SIGHUP, with the token file's content.
        let script = format!(
            "echo $$ > {pids}/$NOMAD_ALLOC_ID.pid; echo start >> {log}; \
             trap 'echo hup >> {log}' HUP; while true; do sleep 0.1; done",
            pids = dir.display(),
            log = log.display()
        );
        let mut job = jobs::service_job(id, 1, jobs::raw_exec_task(&script));
        set(
            &mut job,
            "/Job/TaskGroups/0/Tasks/0/Identities",
            json!([{
                "Name": "short",
                "Audience": ["example.com"],
                "File": true,
                "TTL": 2_000_000_000i64,
                "ChangeMode": mode,
                "ChangeSignal": if mode == "signal" { "SIGHUP" } else { "" },
            }]),
        );
        register(&http, &job).await;
        wait_running_version(&c, id, 1, 0).await;
        let alloc = match mode {
            "signal" => wait_event(&c, id, "Signaling", "Identity renewed").await,
            _ => {
                wait_event(
                    &c,
                    id,
                    "Restart Signaled",
                    "Identity with change_mode restart renewed",
                )
                .await
            }
        };
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if mode == "signal" {
            assert_eq!(alloc.task_states["t"].restarts, 0, "{:?}", events(&alloc));
            wait_for("the task to log the signal", STEP, async || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                Ok(if text.lines().any(|l| l == "hup") {
                    Progress::Done(())
                } else {
                    Progress::Waiting(text)
                })
            })
            .await
            .unwrap();
        } else {
            assert!(
                alloc.task_states["t"].restarts >= 1,
                "{:?} {text}",
                events(&alloc)
            );
        }
    }
}
