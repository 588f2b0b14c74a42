use caravan_runtime::names::EVAL_BROKER;
use caravan_store::{MemStore, Store};

use super::*;

/// Token checks against a fake broker leading under a fresh prefix.
async fn against_fake_broker() -> (
    Arc<BrokerTokens>,
    caravan_testkit::fake_broker::BrokerHandle,
) {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let prefix = caravan_testkit::unique_prefix("tokens");
    let broker = caravan_testkit::fake_broker::start(&store, &prefix).await;
    let channel = LeaderChannel::new(store, &prefix, EVAL_BROKER);
    let tokens = Arc::new(BrokerTokens::new(channel, Duration::from_secs(5)));
    (tokens, broker)
}

#[tokio::test]
async fn checks_arriving_together_are_answered_each_on_its_own() {
    let (tokens, broker) = against_fake_broker().await;
    for i in 0..20 {
        broker.broker.grant(&format!("e{i}"), &format!("t{i}"));
    }
    // Even evals with their own token, odd ones with a stale one.
    let checks: Vec<_> = (0..20)
        .map(|i| {
            let tokens = tokens.clone();
            let token = if i % 2 == 0 {
                format!("t{i}")
            } else {
                "stale".to_string()
            };
            tokio::spawn(async move { tokens.check(&format!("e{i}"), &token).await })
        })
        .collect();
    for (i, check) in checks.into_iter().enumerate() {
        match check.await.unwrap() {
            Ok(()) => assert!(i % 2 == 0, "e{i} passed with a stale token"),
            Err(ApplierError::TokenRefused { eval_id, reason }) => {
                assert!(i % 2 == 1, "e{i} refused: {reason}");
                assert_eq!(eval_id, format!("e{i}"));
                assert!(reason.contains("FailedPrecondition"), "{reason}");
            }
            Err(err) => panic!("e{i}: {err}"),
        }
    }
    let log = broker.broker.log.lock();
    assert_eq!(log.resets.len(), 20, "every check reached the broker once");
    assert!(log.reset_calls < 20, "in {} calls", log.reset_calls);
}

#[tokio::test]
async fn a_check_without_a_broker_leader_is_unavailable() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let channel = LeaderChannel::new(store, "/nobody", EVAL_BROKER);
    let tokens = BrokerTokens::new(channel, Duration::from_millis(200));
    let err = tokens.check("e1", "t1").await.expect_err("no broker");
    assert!(matches!(err, ApplierError::BrokerUnavailable(_)), "{err}");
}
