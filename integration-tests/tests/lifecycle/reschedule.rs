//! Scenario 4: a task that keeps crashing is restarted per its restart
//! policy, then its alloc fails and is rescheduled on the other node after
//! the reschedule delay.

use caravan_integration_tests::jobs;
use caravan_proto::AllocClientStatus;
use serde_json::json;

use crate::{SECOND_NS, raw_exec_cluster, register, set, wait_allocs};

const JOB: &str = "crashing";
/// The reschedule policy's delay, Nomad's least.
const DELAY_NS: i64 = 5 * SECOND_NS;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_task_restarts_then_is_rescheduled_elsewhere_after_the_delay() {
    let (c, nodes) = raw_exec_cluster("reschedule", &["resched-a", "resched-b"]).await;
    let http = c.http().unwrap();
    let mut job = jobs::service_job(JOB, 1, jobs::raw_exec_task("sleep 0.3; exit 7"));
    set(
        &mut job,
        "/Job/TaskGroups/0/RestartPolicy",
        json!({"Attempts": 1, "Interval": 60 * SECOND_NS, "Delay": SECOND_NS, "Mode": "fail"}),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/ReschedulePolicy",
        json!({
            "Attempts": 1,
            "Interval": 3600 * SECOND_NS,
            "Delay": DELAY_NS,
            "DelayFunction": "constant",
            "Unlimited": false,
        }),
    );
    // No deployment to mark the allocs unhealthy and steer them.
    set(
        &mut job,
        "/Job/TaskGroups/0/Update",
        json!({"MaxParallel": 0}),
    );
    register(&http, &job).await;

    let allocs = wait_allocs(
        &c,
        "the first alloc to fail and its replacement to be placed",
        JOB,
        |allocs| allocs.len() == 2 && allocs[0].client_status() == AllocClientStatus::Failed,
    )
    .await;
    let (first, second) = (&allocs[0], &allocs[1]);

    // Restarted once, after the restart delay, then failed for good.
    let task = &first.task_states["t"];
    assert_eq!(task.restarts, 1, "{task:?}");
    assert!(task.failed, "{task:?}");
    let restarting: Vec<_> = task
        .events
        .iter()
        .filter(|e| e.r#type == "Restarting")
        .collect();
    assert_eq!(restarting.len(), 1, "{:?}", task.events);
    // The restart delay with up to a quarter of jitter, as Nomad adds.
    let delay = restarting[0].restart_delay_ns;
    assert!(
        (SECOND_NS..=SECOND_NS * 5 / 4).contains(&delay),
        "restart delay {delay} ns"
    );
    let terminated: Vec<i64> = task
        .events
        .iter()
        .filter(|e| e.r#type == "Terminated")
        .map(|e| e.time_unix_ns)
        .collect();
    assert_eq!(terminated.len(), 2, "{:?}", task.events);
    assert!(terminated[1] - terminated[0] >= delay, "{:?}", task.events);

    // The replacement: linked to the failed alloc, on the other node, placed
    // no earlier than the delay after the failure.
    assert_eq!(second.previous_allocation, first.id);
    assert_eq!(second.name, first.name);
    assert_ne!(
        second.node_id, first.node_id,
        "rescheduled on the other node"
    );
    assert!(nodes.contains(&second.node_id));
    let tracker = second.reschedule_tracker.clone().unwrap_or_default();
    assert_eq!(tracker.events.len(), 1, "{tracker:?}");
    let event = &tracker.events[0];
    assert_eq!(event.prev_alloc_id, first.id);
    assert_eq!(event.prev_node_id, first.node_id);
    assert_eq!(event.delay_ns, DELAY_NS);
    let failed_at = task.finished_at_unix_ns;
    assert!(failed_at > 0, "{task:?}");
    assert!(
        second.create_time_unix_ns - failed_at >= DELAY_NS,
        "replacement placed {} ms after the failure, before the {} ms delay",
        (second.create_time_unix_ns - failed_at) / 1_000_000,
        DELAY_NS / 1_000_000
    );

    // The replacement crashes the same way; its one reschedule used, it
    // stays failed and nothing more is placed.
    let allocs = wait_allocs(&c, "the replacement to fail too", JOB, |allocs| {
        allocs.len() == 2 && allocs[1].client_status() == AllocClientStatus::Failed
    })
    .await;
    assert_eq!(allocs[0].next_allocation, allocs[1].id);
}
