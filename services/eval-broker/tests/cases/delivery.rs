//! Delivery: restore, long polls, tokens, acks, nacks, the delivery limit
//! and the nack timeout, end to end through gRPC and the store.

use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{
    AckRequest, CreateEvalRequest, EvalStatus, Evaluation, NackRequest, OutstandingResetRequest,
    UpdateEvalRequest,
};
use caravan_state::Keyspace;
use caravan_store::Store;
use tonic::Code;

use super::*;

fn keyspace() -> (String, Keyspace) {
    let prefix = caravan_testkit::unique_prefix("eval-broker");
    let ks = Keyspace::new(&prefix);
    (prefix, ks)
}

pub async fn restores_evals_written_before_it_starts(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let low = pending_eval("web", "service", 30);
    let high = pending_eval("api", "service", 90);
    let behind = pending_eval("web", "service", 30);
    let mut blocked = pending_eval("db", "service", 50);
    blocked.status = EvalStatus::Blocked as i32;
    let mut done = pending_eval("old", "batch", 50);
    done.status = EvalStatus::Complete as i32;
    for e in [&low, &high, &behind, &blocked, &done] {
        put_eval(&store, &ks, e).await;
    }
    let last = put_eval(&store, &ks, &low).await;

    let mut broker = start_leader(store.clone(), &prefix).await;
    let stats = broker.stats().await;
    assert_eq!(stats.total_ready, 2, "{stats:?}");
    assert_eq!(stats.total_pending_by_job, 1, "{stats:?}");
    assert_eq!(stats.total_blocked, 1, "{stats:?}");

    let (first, token, wait_revision) = broker.take().await;
    assert_eq!(first.id, high.id, "priority first");
    assert!(!token.is_empty());
    assert!(
        wait_revision >= last,
        "wait revision {wait_revision} covers every write before the dequeue ({last})"
    );
    let (second, _, _) = broker.take().await;
    assert_eq!(second.id, low.id);
    assert!(
        broker
            .dequeue(Duration::from_millis(200))
            .await
            .eval
            .is_none(),
        "web's second eval waits for the first"
    );
    broker.stop().await;
}

pub async fn dequeue_long_poll_times_out_empty_and_wakes_on_new_evals(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut broker = start_leader(store.clone(), &prefix).await;
    let started = tokio::time::Instant::now();
    let got = broker.dequeue(Duration::from_millis(400)).await;
    assert!(got.eval.is_none() && got.token.is_empty());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(350) && waited < Duration::from_secs(5),
        "long poll waited {waited:?}"
    );

    let mut poller = broker.client.clone();
    let poll = tokio::spawn(async move {
        poller
            .dequeue(caravan_proto::DequeueRequest {
                schedulers: vec!["batch".into()],
                timeout_ns: PATIENCE.as_nanos() as i64,
                ack: None,
            })
            .await
            .expect("dequeue")
            .into_inner()
    });
    // The write comes once the poll waits: it must wake it, not meet it.
    broker
        .stats_become("the long poll to wait", |s| s.dequeues_waiting == 1)
        .await;
    assert!(!poll.is_finished(), "the poll waits for an eval");
    let eval = pending_eval("report", "batch", 50);
    let written_at = tokio::time::Instant::now();
    put_eval(&store, &ks, &eval).await;
    let got = poll.await.expect("poller");
    assert_eq!(got.eval.map(|e| e.id), Some(eval.id));
    assert_eq!(broker.stats().await.dequeues_waiting, 0, "an answered poll");
    assert!(written_at.elapsed() < Duration::from_secs(5));

    let bad = broker
        .client
        .dequeue(caravan_proto::DequeueRequest {
            schedulers: vec![],
            timeout_ns: 0,
            ack: None,
        })
        .await
        .expect_err("no schedulers");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("schedulers"), "{}", bad.message());
    broker.stop().await;
}

pub async fn a_dequeue_acks_the_delivery_it_carries(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let first = pending_eval("web", "service", 50);
    let second = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &first).await;
    put_eval(&store, &ks, &second).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let (got, token, _) = broker.take().await;
    assert_eq!(got.id, first.id);
    let ack = AckRequest {
        eval_id: got.id.clone(),
        token: token.clone(),
        ..Default::default()
    };
    let poll = |ack: Option<AckRequest>| caravan_proto::DequeueRequest {
        schedulers: vec!["service".into()],
        timeout_ns: Duration::from_millis(300).as_nanos() as i64,
        ack,
    };

    // The ack frees the job's next eval for the very poll that carries it.
    let next = broker
        .client
        .dequeue(poll(Some(ack.clone())))
        .await
        .expect("dequeue with an ack")
        .into_inner();
    assert_eq!(next.ack_error, "", "the ack was taken");
    assert_eq!(next.eval.map(|e| e.id), Some(second.id.clone()));

    // Carried again (a retried call), the ack is refused and said so; the
    // poll itself still answers.
    let again = broker
        .client
        .dequeue(poll(Some(ack)))
        .await
        .expect("a refused ack does not fail the poll")
        .into_inner();
    assert!(again.eval.is_none());
    assert!(!again.ack_error.is_empty(), "{again:?}");

    // An ack without its eval id is bad input, refused before anything
    // is acked or dequeued.
    let bad = broker
        .client
        .dequeue(poll(Some(AckRequest {
            eval_id: String::new(),
            token,
            ..Default::default()
        })))
        .await
        .expect_err("an ack without an eval id");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("ack.eval_id"), "{}", bad.message());
    broker.stop().await;
}

pub async fn outstanding_resets_answer_each_eval_on_its_own(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let eval = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &eval).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let (got, token, _) = broker.take().await;
    let reset = |eval_id: &str, token: &str| OutstandingResetRequest {
        eval_id: eval_id.into(),
        token: token.into(),
    };
    let answered = broker
        .client
        .outstanding_resets(caravan_proto::OutstandingResetsRequest {
            resets: vec![
                reset(&got.id, &token),
                reset(&got.id, "stale"),
                reset("", &token),
            ],
        })
        .await
        .expect("the call is answered whatever each reset's fate")
        .into_inner();
    let codes: Vec<Code> = answered
        .results
        .iter()
        .map(|r| Code::from_i32(r.code))
        .collect();
    assert_eq!(
        codes,
        vec![Code::Ok, Code::PermissionDenied, Code::InvalidArgument],
        "{answered:?}"
    );
    assert!(
        answered.results[2].message.contains("eval_id"),
        "{answered:?}"
    );
    broker.stop().await;
}

pub async fn worker_writes_need_the_live_token(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let eval = pending_eval("web", "service", 60);
    let other = pending_eval("api", "service", 10);
    put_eval(&store, &ks, &eval).await;
    put_eval(&store, &ks, &other).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let (got, token, wait_revision) = broker.take().await;
    assert_eq!(got.id, eval.id);

    let mut update = got.clone();
    update.status = EvalStatus::Complete as i32;
    update.job_id = "hijacked".into();
    update.snapshot_revision = wait_revision;
    update.queued_allocations.insert("web".into(), 0);
    let wrong = broker
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(update.clone()),
            token: "not-a-token".into(),
        })
        .await
        .expect_err("a wrong token");
    assert_eq!(wrong.code(), Code::PermissionDenied, "{wrong:?}");
    assert!(wrong.message().contains(&eval.id), "{wrong:?}");
    let mut undelivered = other.clone();
    undelivered.status = EvalStatus::Complete as i32;
    let not_out = broker
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(undelivered),
            token: "not-a-token".into(),
        })
        .await
        .expect_err("an eval nobody holds");
    assert_eq!(not_out.code(), Code::FailedPrecondition, "{not_out:?}");

    let mut foreign = other.clone();
    foreign.status = EvalStatus::Complete as i32;
    let denied = broker
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(foreign),
            token: token.clone(),
        })
        .await
        .expect_err("the token is of another eval");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert_eq!(
        read_eval(&store, &ks, &other.id).await.map(|e| e.status()),
        Some(EvalStatus::Pending),
        "a refused write writes nothing"
    );

    let mut follow = pending_eval("web", "service", 60);
    follow.status = EvalStatus::Blocked as i32;
    follow.triggered_by = "queued-allocs".into();
    follow.previous_eval = eval.id.clone();
    let mut bad = follow.clone();
    bad.priority = 500;
    let invalid = broker
        .client
        .create_eval(CreateEvalRequest {
            eval: Some(bad),
            token: token.clone(),
        })
        .await
        .expect_err("bad priority");
    assert_eq!(invalid.code(), Code::InvalidArgument);
    assert!(invalid.message().contains("eval.priority"));
    let created = broker
        .client
        .create_eval(CreateEvalRequest {
            eval: Some(follow.clone()),
            token: token.clone(),
        })
        .await
        .expect("create")
        .into_inner();
    assert!(created.revision > 0);
    let stored = read_eval(&store, &ks, &follow.id).await.expect("created");
    assert_eq!(stored.status(), EvalStatus::Blocked);
    assert_eq!(
        stored.snapshot_revision, wait_revision,
        "a blocked eval without a snapshot revision gets the delivery's"
    );

    let written = broker
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(update),
            token: token.clone(),
        })
        .await
        .expect("update with the live token")
        .into_inner();
    let stored = read_eval(&store, &ks, &eval.id).await.expect("eval");
    assert_eq!(stored.modify_revision, written.revision);
    assert_eq!(stored.status(), EvalStatus::Complete);
    assert_eq!(stored.job_id, "web", "the worker does not own the job id");
    assert_eq!(stored.queued_allocations.get("web"), Some(&0));

    broker.ack(&eval.id, &token).await;
    let again = broker
        .client
        .ack(caravan_proto::AckRequest {
            eval_id: eval.id.clone(),
            token: token.clone(),
            ..Default::default()
        })
        .await
        .expect_err("a token acks once");
    assert_eq!(again.code(), Code::FailedPrecondition);
    let late = broker
        .client
        .create_eval(CreateEvalRequest {
            eval: Some(pending_eval("web", "service", 60)),
            token,
        })
        .await
        .expect_err("an acked token writes nothing");
    assert_eq!(late.code(), Code::FailedPrecondition);
    broker
        .stats_become("the blocked eval to be held", |s| s.total_blocked == 1)
        .await;
    broker.stop().await;
}

/// `status` is an INVALID_ARGUMENT naming `field`.
fn refuses_naming(status: &tonic::Status, field: &str) {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains(field), "{}", status.message());
}

/// A job's next eval is handed out with a wait revision no lower than what
/// the acked delivery wrote, whatever the broker's own view had reached; a
/// negative revision is refused by field name on both ack paths.
pub async fn the_next_eval_of_a_job_waits_for_the_acked_writes(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let first = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &first).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let (got, token, _) = broker.take().await;
    assert_eq!(got.id, first.id);
    let next = pending_eval("web", "service", 50);
    let at = put_eval(&store, &ks, &next).await;
    broker
        .stats_become("the next to wait behind the first", |s| {
            s.total_pending_by_job == 1
        })
        .await;

    let refused = broker
        .client
        .ack(AckRequest {
            eval_id: first.id.clone(),
            token: token.clone(),
            written_revision: -1,
        })
        .await
        .expect_err("a negative revision");
    refuses_naming(&refused, "written_revision");
    let refused = broker
        .client
        .dequeue(caravan_proto::DequeueRequest {
            schedulers: vec!["service".into()],
            timeout_ns: 1,
            ack: Some(AckRequest {
                eval_id: first.id.clone(),
                token: token.clone(),
                written_revision: -5,
            }),
        })
        .await
        .expect_err("a negative revision with a dequeue");
    refuses_naming(&refused, "ack.written_revision");

    // Ahead of anything the broker has seen, as a plan the broker's watch
    // has not yet delivered would be.
    let written = at + 1_000;
    broker
        .client
        .ack(AckRequest {
            eval_id: first.id.clone(),
            token,
            written_revision: written,
        })
        .await
        .expect("ack");
    let (got, _, wait_revision) = broker.take().await;
    assert_eq!(got.id, next.id);
    assert_eq!(wait_revision, written);
    broker.stop().await;
}

pub async fn ack_cancels_older_waiting_evals(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let first = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &first).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let (got, token, _) = broker.take().await;
    assert_eq!(got.id, first.id);
    let older = pending_eval("web", "service", 50);
    let newer = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &older).await;
    put_eval(&store, &ks, &newer).await;
    broker
        .stats_become("both to wait behind the first", |s| {
            s.total_pending_by_job == 2
        })
        .await;

    broker.ack(&first.id, &token).await;
    let (next, _, _) = broker.take().await;
    assert_eq!(next.id, newer.id, "the newest waiting eval wins");
    let canceled = eval_becomes(&store, &ks, &older.id, "the older to be canceled", |e| {
        e.status() == EvalStatus::Canceled
    })
    .await;
    assert!(!canceled.status_description.is_empty());
    broker.stop().await;
}

pub async fn delivery_limit_fails_the_eval_with_a_follow_up(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let eval = pending_eval("web", "batch", 40);
    put_eval(&store, &ks, &eval).await;
    let mut config = fast_config(&prefix);
    config.delivery_limit = 2;
    let mut broker = start(store.clone(), config).await;
    broker.wait_leading().await;
    for delivery in 1..=2 {
        let (got, token, _) = broker.take().await;
        assert_eq!(got.id, eval.id);
        assert_eq!(got.delivery_count, delivery - 1);
        broker
            .client
            .nack(NackRequest {
                eval_id: got.id.clone(),
                token,
                ..Default::default()
            })
            .await
            .expect("nack");
    }
    let failed = eval_becomes(&store, &ks, &eval.id, "the eval to fail", |e| {
        e.status() == EvalStatus::Failed
    })
    .await;
    assert!(
        failed.status_description.contains("delivery limit (2)"),
        "{}",
        failed.status_description
    );
    let follow = read_eval(&store, &ks, &failed.next_eval)
        .await
        .expect("follow-up");
    assert_eq!(follow.status(), EvalStatus::Pending);
    assert_eq!(follow.triggered_by, "failed-follow-up");
    assert_eq!(follow.previous_eval, eval.id);
    assert_eq!(follow.create_revision, failed.modify_revision, "one txn");
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let wait = follow.wait_until_unix_ns - now_ns;
    assert!(
        wait > 50_000_000_000 && wait <= 61_000_000_000,
        "follow-up waits about a minute, not {wait} ns"
    );
    broker
        .stats_become("the follow-up to be delayed", |s| {
            s.total_waiting == 1 && s.total_unacked == 0
        })
        .await;
    broker.stop().await;
}

pub async fn nack_timeout_redelivers_and_reset_extends_it(store: Arc<dyn Store>) {
    // Bounds from this process's clock, which the in-process broker shares:
    // a deadline the broker sets while serving a call lies between the
    // call's start and its answer, plus the timeout; a late timer only
    // makes a redelivery later. So a redelivery before "reset sent +
    // timeout" is the reset ignored, whatever the load.
    const TIMEOUT: Duration = Duration::from_millis(1_200);
    const ATTEMPTS: usize = 5;
    let (prefix, ks) = keyspace();
    let eval = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &eval).await;
    let mut config = fast_config(&prefix);
    config.nack_timeout_ms = TIMEOUT.as_millis() as u64;
    let mut broker = start(store.clone(), config).await;
    broker.wait_leading().await;
    let mut attempt = 0;
    let (token, reset_sent, deliveries) = loop {
        attempt += 1;
        let take_sent = tokio::time::Instant::now();
        let (got, token, _) = broker.take().await;
        let taken = tokio::time::Instant::now();
        // Reset halfway: without it, the delivery would time out about
        // TIMEOUT / 2 before the reset's own deadline.
        tokio::time::sleep_until(taken + TIMEOUT / 2).await;
        let reset_sent = tokio::time::Instant::now();
        let reset = broker
            .client
            .outstanding_reset(OutstandingResetRequest {
                eval_id: eval.id.clone(),
                token: token.clone(),
            })
            .await;
        let reset_answered = tokio::time::Instant::now();
        match reset {
            Ok(_) => break (token, reset_sent, got.delivery_count),
            // This process stalled so long that the reset may have come
            // after the first deadline (it was set no earlier than the take
            // was sent): the delivery timed out as it should; try again.
            Err(status)
                if status.code() == Code::PermissionDenied
                    && reset_answered.duration_since(take_sent) >= TIMEOUT
                    && attempt < ATTEMPTS =>
            {
                eprintln!(
                    "the reset was answered {:?} after the take was sent; again",
                    reset_answered - take_sent
                );
            }
            Err(status) => panic!("reset refused on attempt {attempt}: {status:?}"),
        }
    };
    let (again, new_token, _) = broker.take().await;
    let redelivered = tokio::time::Instant::now();
    assert_eq!(again.id, eval.id);
    assert_eq!(
        again.delivery_count,
        deliveries + 1,
        "a timeout counts as a nack"
    );
    assert_ne!(new_token, token);
    assert!(
        redelivered >= reset_sent + TIMEOUT,
        "redelivered {:?} after the reset, before its timeout of {TIMEOUT:?}: the reset did not move the deadline",
        redelivered - reset_sent
    );
    let stale = broker
        .client
        .outstanding_reset(OutstandingResetRequest {
            eval_id: eval.id.clone(),
            token,
        })
        .await
        .expect_err("the timed-out token is dead");
    assert_eq!(stale.code(), Code::PermissionDenied);
    broker.stop().await;
}

pub async fn a_completed_but_unacked_eval_is_not_redelivered(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let eval = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &eval).await;
    let mut config = fast_config(&prefix);
    config.nack_timeout_ms = 300;
    let mut broker = start(store.clone(), config).await;
    broker.wait_leading().await;
    let (got, token, _) = broker.take().await;
    let mut done: Evaluation = got.clone();
    done.status = EvalStatus::Complete as i32;
    broker
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(done),
            token,
        })
        .await
        .expect("update");
    // The worker crashes here, before acking.
    broker
        .stats_become("the delivery to time out", |s| s.total_unacked == 0)
        .await;
    assert!(
        broker
            .dequeue(Duration::from_millis(500))
            .await
            .eval
            .is_none(),
        "a complete eval is not delivered again"
    );
    let stored = read_eval(&store, &ks, &eval.id).await.expect("eval");
    assert_eq!(stored.status(), EvalStatus::Complete);
    broker.stop().await;
}

/// The sum of the samples of `series` (a name and the start of its labels).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

pub async fn metrics_show_the_queues_and_time_each_delivery(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut broker = start_leader(store.clone(), &prefix).await;
    let waited = "caravan_eval_wait_seconds_count{scheduler=\"sysbatch\"}";
    let held = "caravan_eval_schedule_seconds_count{scheduler=\"sysbatch\"}";
    let before = broker.scrape().await;
    // The gauge is process-wide and other brokers of this test binary stop
    // concurrently (setting it to 0), so only its presence is checked here;
    // caravan-runtime's own tests check its value.
    assert!(
        before.contains("caravan_leader{service=\"eval-broker\"} "),
        "{before}"
    );
    assert!(
        before.contains("# TYPE caravan_broker_ready gauge"),
        "{before}"
    );
    put_eval(&store, &ks, &pending_eval("nightly", "sysbatch", 50)).await;
    let (eval, token, _) = broker.take().await;
    broker.ack(&eval.id, &token).await;
    let after = broker.scrape().await;
    assert!(
        sample(&after, waited) >= sample(&before, waited) + 1.0,
        "{after}"
    );
    assert!(
        sample(&after, held) >= sample(&before, held) + 1.0,
        "{after}"
    );
    assert!(
        after.contains("caravan_etcd_request") || after.contains("caravan_watch_cache_revision")
    );
    broker.stop().await;
}
