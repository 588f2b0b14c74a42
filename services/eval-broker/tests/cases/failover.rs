//! Two replicas: the standby names the leader, takes over when the leader
//! goes, delivers the eval the old leader had handed out again, and refuses
//! the old leader's token.

use std::sync::Arc;

use caravan_proto::{BrokerStatsRequest, EvalStatus, UpdateEvalRequest};
use caravan_runtime::status::leader_hint;
use caravan_state::Keyspace;
use caravan_store::Store;
use tonic::Code;

use super::*;

pub async fn a_standby_names_the_leader_and_takes_over(store: Arc<dyn Store>) {
    let prefix = caravan_testkit::unique_prefix("eval-broker-failover");
    let ks = Keyspace::new(&prefix);
    let mut leader = start_leader(store.clone(), &prefix).await;
    let mut standby = start(store.clone(), fast_config(&prefix)).await;

    let refused = standby
        .client
        .stats(BrokerStatsRequest {})
        .await
        .expect_err("a standby does not serve");
    assert_eq!(refused.code(), Code::Unavailable);
    assert_eq!(
        leader_hint(&refused).as_deref(),
        Some(leader.addr.to_string().as_str()),
        "the refusal names the leader"
    );

    let eval = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &eval).await;
    let (got, old_token, _) = leader.take().await;
    assert_eq!(got.id, eval.id);

    // The leader goes mid-flight, its delivery neither acked nor nacked.
    leader.stop().await;
    standby.wait_leading().await;
    let (again, new_token, _) = standby.take().await;
    assert_eq!(again.id, eval.id, "the new leader delivers the eval again");
    assert_ne!(again.id, "");
    assert_ne!(new_token, old_token);

    let mut done = again.clone();
    done.status = EvalStatus::Complete as i32;
    let stale = standby
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(done.clone()),
            token: old_token,
        })
        .await
        .expect_err("the old leader's token died with it");
    assert_eq!(stale.code(), Code::PermissionDenied, "{stale:?}");
    assert_eq!(
        read_eval(&store, &ks, &eval.id).await.map(|e| e.status()),
        Some(EvalStatus::Pending)
    );
    standby
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(done),
            token: new_token.clone(),
        })
        .await
        .expect("the live token writes");
    standby.ack(&eval.id, &new_token).await;
    standby.stop().await;
}

pub async fn a_crashed_leader_loses_nothing(store: Arc<dyn Store>) {
    let prefix = caravan_testkit::unique_prefix("eval-broker-crash");
    let ks = Keyspace::new(&prefix);
    let mut leader = start_leader(store.clone(), &prefix).await;
    let mut standby = start(store.clone(), fast_config(&prefix)).await;
    let handed_out = pending_eval("web", "service", 50);
    let queued = pending_eval("api", "batch", 50);
    put_eval(&store, &ks, &handed_out).await;
    let (got, old_token, _) = leader.take().await;
    assert_eq!(got.id, handed_out.id);
    put_eval(&store, &ks, &queued).await;
    leader
        .stats_become("the second eval to be queued", |s| s.total_ready == 1)
        .await;

    leader.crash().await;
    standby.wait_leading().await;
    let mut delivered = vec![standby.take().await, standby.take().await];
    delivered.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    let mut want = vec![handed_out.id.clone(), queued.id.clone()];
    want.sort();
    assert_eq!(
        delivered.iter().map(|d| d.0.id.clone()).collect::<Vec<_>>(),
        want,
        "both evals, the handed-out one included, are delivered again"
    );
    let refused = standby
        .client
        .ack(caravan_proto::AckRequest {
            eval_id: handed_out.id.clone(),
            token: old_token,
            ..Default::default()
        })
        .await
        .expect_err("the crashed leader's token is dead");
    assert_eq!(refused.code(), Code::PermissionDenied);
    for (eval, token, _) in &delivered {
        standby.ack(&eval.id, token).await;
    }
    standby.stop().await;
}
