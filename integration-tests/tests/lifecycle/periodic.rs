//! Scenario 7: a periodic job launching every 2 s with prohibit_overlap runs
//! one child at a time, and a parameterized job's dispatched child reads its
//! payload and meta.

use std::time::{Duration, Instant};

use caravan_integration_tests::{Progress, jobs, wait_for};
use caravan_proto::{AllocClientStatus, Job};
use serde_json::{Value, json};

use crate::{Reaper, STEP, job_allocs, pid_dir, raw_exec_cluster, running, set, sleeper_script};

const PERIODIC: &str = "ticker";
const PARAMETERIZED: &str = "greeter";

/// The child jobs of `parent`, oldest first.
async fn children(c: &caravan_integration_tests::Cluster, parent: &str) -> Vec<Job> {
    let mut jobs: Vec<Job> = c
        .state
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.parent_id == parent)
        .collect();
    jobs.sort_by_key(|j| j.create_revision);
    jobs
}

/// Waits until `parent` has `n` children and the last one runs an alloc.
async fn wait_child_running(c: &caravan_integration_tests::Cluster, parent: &str, n: usize) -> Job {
    let state = c.state.clone();
    wait_for(&format!("child {n} of {parent} to run"), STEP, async || {
        let mut kids: Vec<Job> = state
            .jobs()
            .await?
            .into_iter()
            .filter(|j| j.parent_id == parent)
            .collect();
        kids.sort_by_key(|j| j.create_revision);
        let Some(last) = kids.last().filter(|_| kids.len() == n) else {
            return Ok(Progress::Waiting(format!("{} children", kids.len())));
        };
        let allocs = job_allocs(&state, &last.id).await?;
        Ok(if running(&allocs).len() == 1 {
            Progress::Done(last.clone())
        } else {
            Progress::Waiting(crate::describe(&allocs))
        })
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_job_with_prohibit_overlap_runs_one_child_at_a_time() {
    let (c, _nodes) = raw_exec_cluster("periodic", &["periodic-a"]).await;
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    let mut job = jobs::service_job(
        PERIODIC,
        1,
        jobs::raw_exec_task(&sleeper_script(&pids_dir, "tick")),
    );
    set(&mut job, "/Job/Type", json!("batch"));
    set(
        &mut job,
        "/Job/Periodic",
        json!({
            "Enabled": true,
            // Seconds first, year last: every 2 s.
            "Spec": "*/2 * * * * * *",
            "SpecType": "cron",
            "ProhibitOverlap": true,
        }),
    );
    let reply = http.put_json("/v1/jobs", &job).await.unwrap();
    reply.ok_json().unwrap();

    let first = wait_child_running(&c, PERIODIC, 1).await;
    let suffix = first
        .id
        .strip_prefix(&format!("{PERIODIC}/periodic-"))
        .unwrap_or_else(|| panic!("child named {}", first.id));
    assert!(suffix.parse::<i64>().is_ok(), "child named {}", first.id);
    assert!(
        job_allocs(&c.state, PERIODIC).await.unwrap().is_empty(),
        "the periodic parent itself runs nothing"
    );

    // Three launch times pass while the first child runs: none overlaps it.
    let hold = Instant::now();
    while hold.elapsed() < Duration::from_secs(5) {
        let kids = children(&c, PERIODIC).await;
        assert_eq!(
            kids.len(),
            1,
            "a second child while the first runs: {:?}",
            kids.iter().map(|j| &j.id).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Once it is stopped, the next launch goes ahead.
    let path = format!("/v1/job/{}", first.id.replace('/', "%2F"));
    http.delete(&path).await.unwrap().ok_json().unwrap();
    let second = wait_child_running(&c, PERIODIC, 2).await;
    assert_ne!(second.id, first.id);
    let allocs = job_allocs(&c.state, &first.id).await.unwrap();
    assert!(
        running(&allocs).is_empty(),
        "the first child is stopped: {}",
        crate::describe(&allocs)
    );
    // Stop the schedule so no third child starts while the cluster stops.
    http.delete(&format!("/v1/job/{PERIODIC}")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_job_reads_its_payload_and_meta() {
    let (c, _nodes) = raw_exec_cluster("dispatch", &["dispatch-a"]).await;
    let http = c.http().unwrap();
    let mut task = jobs::raw_exec_task(
        "printf '%s from %s\\n' \"$(cat \"$NOMAD_TASK_DIR/input.txt\")\" \"$NOMAD_META_who\"",
    );
    set(&mut task, "/DispatchPayload", json!({"File": "input.txt"}));
    let mut job = jobs::service_job(PARAMETERIZED, 1, task);
    set(&mut job, "/Job/Type", json!("batch"));
    set(
        &mut job,
        "/Job/ParameterizedJob",
        json!({"Payload": "required", "MetaRequired": ["who"]}),
    );
    // A parameterized job is a template: registering it evaluates nothing.
    let reply = http.put_json("/v1/jobs", &job).await.unwrap();
    assert_eq!(reply.ok_json().unwrap()["EvalID"], json!(""));

    // Required meta missing: refused, naming it.
    let reply = http
        .put_json(
            &format!("/v1/job/{PARAMETERIZED}/dispatch"),
            &json!({"Payload": "aGVsbG8gcGF5bG9hZA=="}),
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert!(reply.text().contains("who"), "{}", reply.text());

    // "hello payload", base64.
    let reply = http
        .put_json(
            &format!("/v1/job/{PARAMETERIZED}/dispatch"),
            &json!({"Payload": "aGVsbG8gcGF5bG9hZA==", "Meta": {"who": "tester"}}),
        )
        .await
        .unwrap();
    let body = reply.ok_json().unwrap();
    let child = body["DispatchedJobID"].as_str().unwrap().to_string();
    assert!(
        child.starts_with(&format!("{PARAMETERIZED}/dispatch-")),
        "{body}"
    );
    let state = c.state.clone();
    let alloc = wait_for("the dispatched child to complete", STEP, async || {
        let allocs = job_allocs(&state, &child).await?;
        Ok(match allocs.first() {
            Some(a) if a.client_status() == AllocClientStatus::Complete => {
                Progress::Done(a.clone())
            }
            _ => Progress::Waiting(crate::describe(&allocs)),
        })
    })
    .await
    .unwrap();
    let logs = http
        .get(&format!(
            "/v1/client/fs/logs/{}?task=t&type=stdout&plain=true&origin=start",
            alloc.id
        ))
        .await
        .unwrap();
    assert_eq!(logs.status, 200, "{}", logs.text());
    assert_eq!(logs.text().trim(), "hello payload from tester");
    let parent: Value = http
        .get_json(&format!("/v1/job/{PARAMETERIZED}"))
        .await
        .unwrap();
    assert!(parent["ParameterizedJob"].is_object(), "{parent}");
    assert!(
        job_allocs(&c.state, PARAMETERIZED)
            .await
            .unwrap()
            .is_empty(),
        "the parameterized parent itself runs nothing"
    );
}
