//! The pipeline over an embedded store: settling finished commits,
//! verifying again after a commit fell short, and writing back what the
//! lean cache lacks.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use caravan_state::{InformerConfig, Keyspace, encode};
use caravan_store::Store;

use super::*;
use crate::applier::in_flight::CommitReport;
use crate::applier::{PlanApplier, Settings};
use crate::commit::plan_commits;
use crate::config::PlanApplierConfig;
use crate::fixtures::{AnyToken, alloc, leader, place, plan, store_with_n1};
use crate::queue::PlanQueue;

/// A pipeline of an applier leading on `store` under `/t`, its cache
/// configured by `cache`, numbering plans from `next_seq`.
async fn leading_pipeline(
    store: &Arc<dyn Store>,
    ks: &Keyspace,
    cache: InformerConfig,
    next_seq: u64,
) -> Pipeline {
    let applier = Arc::new(PlanApplier::new(
        store.clone(),
        "/t",
        Arc::new(AnyToken),
        Settings::from(&PlanApplierConfig::default()),
    ));
    let leadership = Arc::new(leader(store).await);
    let informer = Arc::new(
        Informer::start(store.clone(), ks.clone(), cache)
            .await
            .unwrap(),
    );
    let txns = plan_commits(leadership, applier.settings.txn_limits()).0;
    Pipeline {
        applier,
        txns,
        informer,
        overlay: Overlay::default(),
        in_flight: Vec::new(),
        next_seq,
        resync: false,
    }
}

/// A commit that finished is settled before the next plan is verified:
/// its layer then leaves the overlay once the cache has what it wrote,
/// instead of staying in every view until the in-flight limit forces it.
#[tokio::test]
async fn a_finished_commit_is_settled_before_the_next_plan() {
    let (store, ks) = store_with_n1().await;
    let mut pipeline = leading_pipeline(&store, &ks, InformerConfig::default(), 0).await;
    let queue = PlanQueue::new();
    let mut first = plan(pipeline.informer.revision());
    place(&mut first, alloc("a", "n1", 100, 64));
    let answer = queue.push(first).unwrap();
    pipeline.handle(queue.pop().await.unwrap()).await;
    let committed = answer.await.unwrap().unwrap();
    assert_eq!(committed.node_allocation.len(), 1, "{committed:?}");
    tokio::time::timeout(Duration::from_secs(5), async {
        while !pipeline.in_flight.iter().all(|f| f.task.is_finished()) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the commit task ends");
    pipeline
        .informer
        .wait_for_revision(committed.alloc_revision, Duration::from_secs(5))
        .await
        .unwrap();
    // Another job's plan shares nothing with the first, so nothing makes
    // it wait for that commit.
    let mut second = plan(pipeline.informer.revision());
    second.eval_id = "e2".into();
    let mut other = alloc("b", "n1", 100, 64);
    other.job_id = "api".into();
    place(&mut second, other);
    let answer = queue.push(second).unwrap();
    pipeline.handle(queue.pop().await.unwrap()).await;
    let seqs: Vec<u64> = pipeline.in_flight.iter().map(|f| f.seq).collect();
    assert_eq!(seqs, vec![2], "only the second plan's commit is in flight");
    pipeline.finish().await;
    assert_eq!(answer.await.unwrap().unwrap().node_allocation.len(), 1);
}

/// A plan verified against room an earlier commit was freeing waits for
/// that commit; when the commit falls short, the plan is verified again
/// and refused instead of over-committing the node.
#[tokio::test]
async fn a_plan_relying_on_a_failed_stop_is_verified_again() {
    let (store, ks) = store_with_n1().await;
    let mut running = alloc("x", "n1", 3000, 64);
    running.job_id = "other".into();
    let rev = store
        .put(&ks.alloc("x"), &encode(&running), 0)
        .await
        .unwrap();
    let mut pipeline = leading_pipeline(&store, &ks, InformerConfig::default(), 1).await;
    // An earlier plan stopping x is committing; it will fall short.
    let mut stopped = running.clone();
    stopped.set_desired_status(caravan_proto::AllocDesiredStatus::Stop);
    let mut optimistic = OverlayLayer::new(1);
    optimistic.put_alloc(Arc::new(stopped));
    let frees = optimistic.freed_nodes();
    pipeline.overlay.push_in_flight(optimistic);
    pipeline.in_flight.push(InFlight {
        seq: 1,
        task: tokio::spawn(async {
            CommitReport {
                layer: OverlayLayer::new(1),
                fell_short: true,
                unknown: false,
            }
        }),
        targets: [Target::Alloc("x".into())].into(),
        jobs: [("default".to_string(), "other".to_string())].into(),
        frees,
        places: HashSet::new(),
    });
    let queue = PlanQueue::new();
    let mut p = plan(rev);
    place(&mut p, alloc("y", "n1", 3000, 64));
    let answer = queue.push(p).unwrap();
    let pending = queue.pop().await.unwrap();
    pipeline.handle(pending).await;
    pipeline.finish().await;
    let result = answer.await.unwrap().unwrap();
    assert!(result.node_allocation.is_empty(), "{result:?}");
    assert_eq!(result.rejected_nodes, vec!["n1"]);
    assert!(result.rejection_reasons["n1"].contains("cpu"));
    assert!(store.get(&ks.alloc("y")).await.unwrap().is_none());
}

/// The cache keeps allocations lean (no metrics, no task states while
/// they run), yet a plan stopping one writes back everything stored.
#[tokio::test]
async fn the_lean_cache_never_thins_what_a_commit_writes() {
    let (store, ks) = store_with_n1().await;
    let mut running = alloc("x", "n1", 100, 64);
    running.metrics = Some(Box::new(caravan_proto::AllocMetric {
        nodes_evaluated: 3,
        ..Default::default()
    }));
    running.task_states.insert(
        "web".into(),
        caravan_proto::TaskState {
            state: "running".into(),
            ..Default::default()
        },
    );
    let rev = store
        .put(&ks.alloc("x"), &encode(&running), 0)
        .await
        .unwrap();
    // The lean cache the applier's term starts with.
    let lean = caravan_runtime::cache::lean_config();
    let mut pipeline = leading_pipeline(&store, &ks, lean, 0).await;
    let cached = pipeline.informer.snapshot().alloc("x").cloned().unwrap();
    assert!(cached.metrics.is_none() && cached.task_states.is_empty());
    let queue = PlanQueue::new();
    let mut p = plan(rev);
    crate::fixtures::stop(&mut p, "n1", "x");
    let answer = queue.push(p).unwrap();
    pipeline.handle(queue.pop().await.unwrap()).await;
    pipeline.finish().await;
    let result = answer.await.unwrap().unwrap();
    assert_eq!(result.node_update.len(), 1, "{result:?}");
    let kv = store.get(&ks.alloc("x")).await.unwrap().unwrap();
    let now: caravan_proto::Allocation = caravan_state::decode(&kv).unwrap();
    assert_eq!(
        now.desired_status(),
        caravan_proto::AllocDesiredStatus::Stop
    );
    assert_eq!(now.metrics, running.metrics);
    assert_eq!(now.task_states, running.task_states);
}

/// Holds back the batches of every watch while held, as a watch of a busy
/// store or a starved process delivers them late.
#[derive(Default)]
struct HeldWatch {
    held: Arc<tokio::sync::watch::Sender<bool>>,
}

#[async_trait::async_trait]
impl caravan_testkit::layered::StoreLayer for HeldWatch {
    async fn watch(
        &self,
        inner: &Arc<dyn Store>,
        prefix: &[u8],
        start_revision: caravan_store::Revision,
    ) -> caravan_store::Result<caravan_store::Watch> {
        use futures::StreamExt;
        let watch = inner.watch(prefix, start_revision).await?;
        let held = self.held.subscribe();
        let stream = watch.stream.then(move |batch| {
            let mut held = held.clone();
            async move {
                let _ = held.wait_for(|h| !*h).await;
                batch
            }
        });
        Ok(caravan_store::Watch {
            stream: Box::pin(stream),
            progress: watch.progress,
        })
    }
}

/// A term starts on a cache that may not yet show what the term before it
/// committed, and its overlay is new: its first plan waits for the cache to
/// reach the store, so a plan computed before those commits is refused as
/// stale instead of placing the same allocations a second time.
#[tokio::test]
async fn a_new_term_refuses_a_plan_older_than_the_last_term_s_commits() {
    let (inner, ks) = store_with_n1().await;
    let layered = caravan_testkit::layered::Layered::wrap(inner, HeldWatch::default());
    let store: Arc<dyn Store> = layered.clone();
    let Pipeline {
        applier,
        txns,
        informer,
        ..
    } = leading_pipeline(&store, &ks, InformerConfig::default(), 0).await;
    let mut pipeline = Pipeline::new(applier, txns, informer);
    let computed_at = pipeline.informer.revision();
    // What the last term placed for job web, committed after the worker
    // took its snapshot; the cache does not show it yet.
    layered.held.send_replace(true);
    let placed = store
        .put(&ks.alloc("x"), &encode(&alloc("x", "n1", 100, 64)), 0)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(pipeline.informer.revision() < placed, "the cache lags");
    let release = tokio::spawn({
        let layered = layered.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            layered.held.send_replace(false);
        }
    });
    let queue = PlanQueue::new();
    let mut again = plan(computed_at);
    place(&mut again, alloc("y", "n1", 100, 64));
    let answer = queue.push(again).unwrap();
    pipeline.handle(queue.pop().await.unwrap()).await;
    pipeline.finish().await;
    let result = answer.await.unwrap().unwrap();
    assert!(result.node_allocation.is_empty(), "{result:?}");
    assert!(
        result.rejection_reasons["n1"].contains("stale"),
        "{result:?}"
    );
    assert!(result.refresh_revision >= placed, "{result:?}");
    assert!(store.get(&ks.alloc("y")).await.unwrap().is_none());
    release.await.unwrap();
}
