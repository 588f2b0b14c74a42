use std::sync::Arc;
use std::time::Duration;

use caravan_proto::Evaluation;
use tokio::time::Instant;

use super::*;

/// A fake clock: one origin, times given as offsets from it.
struct Clock {
    origin: Instant,
    unix0: i64,
}

impl Clock {
    fn new() -> Self {
        Clock {
            origin: Instant::now(),
            unix0: 1_700_000_000_000_000_000,
        }
    }

    fn at(&self, secs: f64) -> Now {
        let d = Duration::from_secs_f64(secs);
        Now {
            instant: self.origin + d,
            unix_ns: self.unix0 + d.as_nanos() as i64,
        }
    }
}

fn eval(id: &str, job: &str, kind: &str, priority: i32, create_revision: i64) -> Arc<Evaluation> {
    Arc::new(Evaluation {
        id: id.into(),
        namespace: "default".into(),
        job_id: job.into(),
        r#type: kind.into(),
        priority,
        create_revision,
        modify_revision: create_revision,
        status: caravan_proto::EvalStatus::Pending as i32,
        ..Default::default()
    })
}

fn all() -> Vec<String> {
    ["service", "batch", "system", "sysbatch"]
        .into_iter()
        .map(String::from)
        .collect()
}

fn take(q: &mut EvalQueues, now: Now) -> Option<Delivery> {
    q.dequeue(&all(), now.instant, 7, |_| true)
}

fn take_id(q: &mut EvalQueues, now: Now) -> Option<String> {
    take(q, now).map(|d| d.eval.id.clone())
}

fn fast() -> QueueConfig {
    QueueConfig {
        nack_timeout: Duration::from_secs(60),
        delivery_limit: 3,
        initial_nack_delay: Duration::from_secs(1),
        subsequent_nack_delay: Duration::from_secs(20),
    }
}

#[test]
fn priority_first_then_oldest() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("low-old", "a", "service", 20, 1), clock.at(0.0));
    q.upsert(eval("high-new", "b", "service", 80, 9), clock.at(0.0));
    q.upsert(eval("high-old", "c", "service", 80, 3), clock.at(0.0));
    q.upsert(eval("mid", "d", "service", 50, 2), clock.at(0.0));
    let order: Vec<_> = std::iter::from_fn(|| take_id(&mut q, clock.at(0.0))).collect();
    assert_eq!(order, ["high-old", "high-new", "mid", "low-old"]);
}

#[test]
fn dequeue_only_from_the_asked_schedulers() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("b1", "a", "batch", 90, 1), clock.at(0.0));
    q.upsert(eval("s1", "b", "service", 10, 2), clock.at(0.0));
    let d = q
        .dequeue(&["service".to_string()], clock.at(0.0).instant, 1, |_| true)
        .expect("a service eval");
    assert_eq!(d.eval.id, "s1");
    assert!(
        q.dequeue(&["system".to_string()], clock.at(0.0).instant, 1, |_| true)
            .is_none()
    );
    assert_eq!(q.stats().ready_by_scheduler.get("batch"), Some(&1));
}

#[test]
fn equal_priorities_take_turns_across_schedulers() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    for i in 0..4 {
        q.upsert(
            eval(&format!("s{i}"), &format!("sj{i}"), "service", 50, i),
            clock.at(0.0),
        );
        q.upsert(
            eval(&format!("b{i}"), &format!("bj{i}"), "batch", 50, 10 + i),
            clock.at(0.0),
        );
    }
    let kinds: Vec<String> = std::iter::from_fn(|| take(&mut q, clock.at(0.0)))
        .map(|d| d.eval.r#type.clone())
        .collect();
    assert_eq!(kinds.len(), 8);
    for pair in kinds.chunks(2) {
        assert_ne!(pair[0], pair[1], "types alternate: {kinds:?}");
    }
}

#[test]
fn one_eval_per_job_and_the_newest_waiting_wins_on_ack() {
    let clock = Clock::new();
    let now = clock.at(0.0);
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("first", "web", "service", 50, 1), now);
    q.upsert(eval("second", "web", "service", 50, 2), now);
    q.upsert(eval("third", "web", "service", 50, 3), now);
    q.upsert(eval("other", "db", "service", 50, 4), now);
    assert_eq!(q.stats().pending_by_job, 2);

    let d = take(&mut q, now).expect("first");
    assert_eq!(d.eval.id, "first");
    assert_eq!(take_id(&mut q, now).as_deref(), Some("other"));
    assert!(
        take(&mut q, now).is_none(),
        "web is held by its unacked eval"
    );

    let released = q.ack("first", &d.token, 0).expect("ack");
    assert_eq!(released.promoted.as_deref(), Some("third"));
    let canceled: Vec<_> = released.canceled.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(canceled, ["second"]);
    assert!(!q.contains("second"));
    assert_eq!(take_id(&mut q, now).as_deref(), Some("third"));
}

#[test]
fn a_higher_priority_waiting_eval_beats_a_newer_one() {
    let clock = Clock::new();
    let now = clock.at(0.0);
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("first", "web", "service", 50, 1), now);
    q.upsert(eval("urgent", "web", "service", 90, 2), now);
    q.upsert(eval("newest", "web", "service", 50, 3), now);
    let d = take(&mut q, now).expect("first");
    let released = q.ack("first", &d.token, 0).expect("ack");
    assert_eq!(released.promoted.as_deref(), Some("urgent"));
    assert_eq!(released.canceled.len(), 1);
    assert_eq!(released.canceled[0].id, "newest");
}

#[test]
fn nack_backs_off_then_fails_at_the_delivery_limit() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("e", "web", "service", 50, 1), clock.at(0.0));
    q.upsert(eval("later", "web", "service", 50, 2), clock.at(0.0));

    let d1 = take(&mut q, clock.at(0.0)).expect("first delivery");
    assert_eq!(d1.deliveries, 1);
    match q
        .nack("e", &d1.token, clock.at(0.0).instant, 0)
        .expect("nack")
    {
        Nacked::Requeued { delay } => assert_eq!(delay, Duration::from_secs(1)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(take(&mut q, clock.at(0.5)).is_none(), "backing off");
    q.expire(clock.at(0.99).instant);
    assert!(take(&mut q, clock.at(0.99)).is_none());
    q.expire(clock.at(1.0).instant);
    let d2 = take(&mut q, clock.at(1.0)).expect("second delivery");
    assert_eq!((d2.eval.id.as_str(), d2.deliveries), ("e", 2));
    assert_ne!(d1.token, d2.token, "every delivery has a fresh token");

    match q
        .nack("e", &d2.token, clock.at(1.0).instant, 0)
        .expect("nack")
    {
        Nacked::Requeued { delay } => assert_eq!(delay, Duration::from_secs(20)),
        other => panic!("unexpected {other:?}"),
    }
    q.expire(clock.at(20.9).instant);
    assert!(take(&mut q, clock.at(20.9)).is_none());
    q.expire(clock.at(21.0).instant);
    let d3 = take(&mut q, clock.at(21.0)).expect("third delivery");
    assert_eq!(d3.deliveries, 3);

    let failed = match q
        .nack("e", &d3.token, clock.at(21.0).instant, 0)
        .expect("nack")
    {
        Nacked::DeliveryLimit(eval) => eval,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(failed.id, "e");
    assert_eq!(q.stats().failing, 1);
    assert!(
        take(&mut q, clock.at(100.0)).is_none(),
        "job held while failing"
    );
    let released = q.finish_failed("e");
    assert_eq!(released.promoted.as_deref(), Some("later"));
    assert!(!q.contains("e"));
    assert_eq!(take_id(&mut q, clock.at(100.0)).as_deref(), Some("later"));
}

#[test]
fn nack_delays_follow_the_formula() {
    let c = fast();
    assert_eq!(c.nack_delay(1), Duration::from_secs(1));
    assert_eq!(c.nack_delay(2), Duration::from_secs(20));
    assert_eq!(c.nack_delay(3), Duration::from_secs(40));
    assert_eq!(c.nack_delay(0), Duration::ZERO);
}

#[test]
fn nack_timeout_counts_as_a_nack_and_reset_restarts_it() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("e", "web", "service", 50, 1), clock.at(0.0));
    let d = take(&mut q, clock.at(0.0)).expect("delivery");
    assert_eq!(q.next_deadline(), Some(clock.at(60.0).instant));

    q.outstanding_reset("e", &d.token, clock.at(50.0).instant)
        .expect("reset");
    let expired = q.expire(clock.at(60.0).instant);
    assert!(expired.timed_out.is_empty(), "reset moved the deadline");
    assert_eq!(q.stats().unacked, 1);

    let expired = q.expire(clock.at(110.0).instant);
    assert_eq!(expired.timed_out, ["e"]);
    assert_eq!(q.stats().unacked, 0);
    assert!(
        q.ack("e", &d.token, 0).is_err(),
        "the timed-out token is dead"
    );
    q.expire(clock.at(111.0).instant);
    let again = take(&mut q, clock.at(111.0)).expect("redelivered");
    assert_eq!(again.deliveries, 2);
}

#[test]
fn wait_until_delays_the_eval() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    let mut e = (*eval("later", "web", "batch", 50, 1)).clone();
    e.wait_until_unix_ns = clock.at(30.0).unix_ns;
    q.upsert(Arc::new(e), clock.at(0.0));
    q.upsert(eval("now", "web", "batch", 50, 2), clock.at(0.0));
    assert_eq!(q.stats().delayed, 1);
    assert_eq!(
        take_id(&mut q, clock.at(0.0)).as_deref(),
        Some("now"),
        "a delayed eval does not hold its job"
    );
    q.expire(clock.at(29.0).instant);
    assert_eq!(q.stats().delayed, 1);
    q.expire(clock.at(30.0).instant);
    assert_eq!(q.stats().delayed, 0);
    assert_eq!(q.stats().pending_by_job, 1, "waits behind the job's eval");

    let mut past = (*eval("past", "db", "batch", 50, 3)).clone();
    past.wait_until_unix_ns = clock.unix0 - 5_000_000_000;
    q.upsert(Arc::new(past), clock.at(0.0));
    assert_eq!(take_id(&mut q, clock.at(0.0)).as_deref(), Some("past"));
}

#[test]
fn tokens_are_checked() {
    let clock = Clock::new();
    let now = clock.at(0.0);
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("e", "web", "service", 50, 1), now);
    q.upsert(eval("f", "db", "service", 50, 2), now);
    assert!(matches!(
        q.ack("e", "nope", 0),
        Err(QueueError::NotOutstanding { .. })
    ));
    let d = take(&mut q, now).expect("delivery");
    assert!(matches!(
        q.ack("e", "wrong", 0),
        Err(QueueError::TokenMismatch { .. })
    ));
    assert!(matches!(
        q.nack("e", "wrong", now.instant, 0),
        Err(QueueError::TokenMismatch { .. })
    ));
    assert!(matches!(
        q.outstanding_reset("e", "wrong", now.instant),
        Err(QueueError::TokenMismatch { .. })
    ));
    assert!(matches!(
        q.ack("f", &d.token, 0),
        Err(QueueError::NotOutstanding { .. })
    ));
    assert_eq!(q.outstanding("wrong").err(), Some(QueueError::UnknownToken));
    let (held, wait) = q.outstanding(&d.token).expect("outstanding");
    assert_eq!((held.id.as_str(), wait), ("e", 7));
    q.ack("e", &d.token, 0).expect("ack");
    assert_eq!(
        q.outstanding(&d.token).err(),
        Some(QueueError::UnknownToken)
    );
    assert!(q.ack("e", &d.token, 0).is_err(), "a token acks once");
}

#[test]
fn settled_evals_leave_every_queue() {
    let clock = Clock::new();
    let now = clock.at(0.0);
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("ready", "web", "service", 50, 1), now);
    q.upsert(eval("waiting", "web", "service", 50, 2), now);
    let mut d = (*eval("delayed", "db", "service", 50, 3)).clone();
    d.wait_until_unix_ns = clock.at(10.0).unix_ns;
    q.upsert(Arc::new(d), now);

    q.settle("ready");
    q.settle("delayed");
    assert!(!q.contains("ready") && !q.contains("delayed"));
    assert_eq!(
        take_id(&mut q, now).as_deref(),
        Some("waiting"),
        "the job passed to its waiting eval"
    );
    assert_eq!(
        q.stats(),
        QueueStats {
            unacked: 1,
            unacked_by_scheduler: [("service".to_string(), 1)].into(),
            ..Default::default()
        }
    );
}

#[test]
fn a_handed_out_eval_that_settles_is_never_redelivered() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("e", "web", "service", 50, 1), clock.at(0.0));
    q.upsert(eval("older", "web", "service", 50, 2), clock.at(0.0));
    q.upsert(eval("newer", "web", "service", 50, 3), clock.at(0.0));
    let d = take(&mut q, clock.at(0.0)).expect("delivery");
    // The worker wrote it complete, then crashed before acking.
    q.settle("e");
    assert_eq!(
        q.stats().unacked,
        1,
        "still outstanding until acked or timed out"
    );
    let expired = q.expire(clock.at(60.0).instant);
    assert_eq!(expired.timed_out, ["e"]);
    assert_eq!(expired.canceled.len(), 1, "treated as processed");
    assert_eq!(expired.canceled[0].id, "older");
    assert!(!q.contains("e"));
    assert_eq!(take_id(&mut q, clock.at(61.0)).as_deref(), Some("newer"));
    assert!(q.ack("e", &d.token, 0).is_err());
}

#[test]
fn a_settled_eval_nacked_is_released_like_an_ack() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("e", "web", "service", 50, 1), clock.at(0.0));
    let d = take(&mut q, clock.at(0.0)).expect("delivery");
    q.settle("e");
    assert!(matches!(
        q.nack("e", &d.token, clock.at(1.0).instant, 0),
        Ok(Nacked::Released(_))
    ));
    assert!(!q.contains("e"));
    // Pending again in the store (rewritten): tracked afresh.
    q.upsert(eval("e", "web", "service", 50, 1), clock.at(2.0));
    assert_eq!(take_id(&mut q, clock.at(2.0)).as_deref(), Some("e"));
}

#[test]
fn dequeue_skips_evals_the_store_no_longer_has_pending() {
    let clock = Clock::new();
    let now = clock.at(0.0);
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("gone", "web", "service", 90, 1), now);
    q.upsert(eval("behind", "web", "service", 50, 2), now);
    q.upsert(eval("other", "db", "service", 10, 3), now);
    let d = q
        .dequeue(&all(), now.instant, 1, |e| e.id != "gone")
        .expect("a live eval");
    assert_eq!(d.eval.id, "behind", "the job passed on to its waiting eval");
    assert!(!q.contains("gone"));
    assert_eq!(take_id(&mut q, now).as_deref(), Some("other"));
}

#[test]
fn upsert_refreshes_a_tracked_eval() {
    let clock = Clock::new();
    let now = clock.at(0.0);
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("a", "j1", "service", 10, 1), now);
    q.upsert(eval("b", "j2", "service", 50, 2), now);
    q.upsert(eval("a", "j1", "service", 90, 1), now);
    assert_eq!(q.ready_len(), 2);
    let d = take(&mut q, now).expect("a");
    assert_eq!((d.eval.id.as_str(), d.eval.priority), ("a", 90));
}

#[test]
fn the_next_eval_of_a_job_waits_for_what_the_acked_one_wrote() {
    // The race the chaos run found: a register eval's plan commits at 782
    // while the broker's view is at 781; the stop queued behind it must
    // not be scheduled on a state without the allocations just placed.
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("register", "web", "service", 50, 500), clock.at(0.0));
    let d = q
        .dequeue(&all(), clock.at(0.0).instant, 509, |_| true)
        .expect("register");
    q.upsert(eval("stop", "web", "service", 50, 525), clock.at(0.0));
    q.ack("register", &d.token, 783).expect("ack");
    let next = q
        .dequeue(&all(), clock.at(0.0).instant, 781, |_| true)
        .expect("stop");
    assert_eq!(next.eval.id, "stop");
    assert_eq!(next.wait_revision, 783, "held to the acked writes");
    assert_eq!(
        q.outstanding(&next.token).map(|(_, r)| r).ok(),
        Some(783),
        "the eval writes of the delivery carry the same revision"
    );
}

#[test]
fn a_floor_holds_for_an_eval_the_broker_sees_after_the_ack() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    q.upsert(eval("register", "web", "service", 50, 500), clock.at(0.0));
    let d = take(&mut q, clock.at(0.0)).expect("register");
    q.ack("register", &d.token, 900).expect("ack");
    q.upsert(eval("stop", "web", "service", 50, 850), clock.at(0.0));
    q.upsert(eval("other", "db", "service", 50, 860), clock.at(0.0));
    let mut waits = std::collections::BTreeMap::new();
    while let Some(d) = q.dequeue(&all(), clock.at(0.0).instant, 870, |_| true) {
        waits.insert(d.eval.id.clone(), d.wait_revision);
    }
    assert_eq!(waits["stop"], 900);
    assert_eq!(waits["other"], 870, "other jobs wait for no one's writes");
}

#[test]
fn floors_are_forgotten_once_the_view_passes_them_and_never_lowered() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(fast());
    let job = ("default".to_string(), "web".to_string());
    q.upsert(eval("a", "web", "service", 50, 1), clock.at(0.0));
    let d = take(&mut q, clock.at(0.0)).expect("a");
    q.ack("a", &d.token, 40).expect("ack");
    q.upsert(eval("b", "web", "service", 50, 2), clock.at(0.0));
    let d = q
        .dequeue(&all(), clock.at(0.0).instant, 10, |_| true)
        .expect("b");
    assert_eq!(d.wait_revision, 40);
    // An ack that wrote nothing, or wrote earlier, keeps the floor.
    q.ack("b", &d.token, 0).expect("ack");
    assert_eq!(q.floor(&job), Some(40));
    q.upsert(eval("c", "web", "service", 50, 3), clock.at(0.0));
    let d = q
        .dequeue(&all(), clock.at(0.0).instant, 41, |_| true)
        .expect("c");
    assert_eq!(d.wait_revision, 41);
    assert_eq!(q.floor(&job), None, "passed, so forgotten");
    q.ack("c", &d.token, 0).expect("ack");
    assert!(q.floors_by_revision.is_empty());
}

#[test]
fn a_redelivery_after_a_nack_waits_for_what_the_nacked_delivery_wrote() {
    let clock = Clock::new();
    let mut q = EvalQueues::new(QueueConfig {
        initial_nack_delay: Duration::ZERO,
        ..fast()
    });
    q.upsert(eval("e", "web", "service", 50, 1), clock.at(0.0));
    let d = take(&mut q, clock.at(0.0)).expect("first");
    q.nack("e", &d.token, clock.at(0.0).instant, 55)
        .expect("nack");
    let again = take(&mut q, clock.at(0.0)).expect("again");
    assert_eq!(again.eval.id, "e");
    assert_eq!(again.wait_revision, 55);
}
