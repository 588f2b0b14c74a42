//! The informer against real backends: the embedded store and etcd
//! (`CARAVAN_TEST_ETCD`). Every test runs on both, under its own prefix.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{AllocClientStatus, Evaluation, SchedulerConfiguration};
use caravan_state::{Informer, InformerConfig, Keyspace, Kind, StateError, encode};
use caravan_store::{EtcdStore, MemStore, Op, Range, Store, Txn};

use support::{
    alloc, delete_key, early_progress_store, faulty_store, job, node, put_alloc, stale_member_store,
};

const WAIT: Duration = Duration::from_secs(10);

fn config() -> InformerConfig {
    InformerConfig {
        page_size: 3,
        retry_min: Duration::from_millis(10),
        retry_max: Duration::from_millis(100),
        progress_interval: Duration::from_millis(50),
        ..InformerConfig::default()
    }
}

async fn start(store: Arc<dyn Store>, ks: &Keyspace) -> Informer {
    Informer::start(store, ks.clone(), config()).await.unwrap()
}

fn ids<'a>(it: impl Iterator<Item = &'a Arc<caravan_proto::Allocation>>) -> Vec<String> {
    it.map(|a| a.id.clone()).collect()
}

async fn initial_list_then_watch(store: Arc<dyn Store>, ks: Keyspace) {
    // More objects than a page, of every kind, before the informer starts.
    for i in 0..7 {
        put_alloc(
            &*store,
            &ks,
            &alloc(&format!("a{i}"), "n1", "web", 100, 10, 20000 + i),
        )
        .await;
    }
    store
        .put(&ks.node("n1"), &encode(&node("n1")), 0)
        .await
        .unwrap();
    let j = job("default", "web/periodic-1", 3);
    let rev = store
        .txn(
            Txn::new()
                .and_then(Op::put(ks.job("default", &j.id), encode(&j)))
                .and_then(Op::put(ks.job_version("default", &j.id, 3), encode(&j)))
                .and_then(Op::put(
                    ks.eval("e1"),
                    encode(&Evaluation {
                        id: "e1".into(),
                        namespace: "default".into(),
                        job_id: j.id.clone(),
                        ..Default::default()
                    }),
                )),
        )
        .await
        .unwrap()
        .revision;
    store.put(&ks.heartbeat("n1"), b"", 0).await.unwrap();
    // A leader key shares the prefix; the cache must pass over it.
    let mut candidate = ks.leader("eval-broker");
    candidate.extend_from_slice(b"/694d7a0b2c");
    store.put(&candidate, b"127.0.0.1:1", 0).await.unwrap();
    // So does a variable (the gateway reads those from the store).
    let var = encode(&caravan_proto::Variable::default());
    store
        .put(&ks.var("default", "app/db"), &var, 0)
        .await
        .unwrap();

    let informer = start(Arc::clone(&store), &ks).await;
    let snap = informer.snapshot();
    assert!(snap.revision() >= rev);
    assert_eq!(snap.alloc_count(), 7);
    assert_eq!(snap.allocs_by_node("n1").count(), 7);
    assert_eq!(snap.node_usage("n1").cpu_mhz, 700);
    let cached = snap.job("default", "web/periodic-1").unwrap();
    assert_eq!(cached.job_modify_revision, rev, "resolved from the key");
    assert_eq!(
        snap.job_version("default", "web/periodic-1", 3)
            .unwrap()
            .version,
        3
    );
    let eval = snap.eval("e1").unwrap();
    assert_eq!((eval.create_revision, eval.job_modify_revision), (rev, rev));
    assert_eq!(snap.evals_by_job("default", "web/periodic-1").count(), 1);
    assert!(snap.heartbeat_live("n1"));
    assert_eq!(informer.stats().decode_errors, 0);

    // Then the watch: puts, an update moving usage, deletes.
    let r1 = put_alloc(&*store, &ks, &alloc("b1", "n2", "api", 300, 30, 8080)).await;
    let mut a0 = alloc("a0", "n1", "web", 100, 10, 20000);
    a0.client_status = AllocClientStatus::Complete as i32;
    put_alloc(&*store, &ks, &a0).await;
    delete_key(&*store, ks.alloc("a1")).await;
    store
        .put(
            &ks.scheduler_config(),
            &encode(&SchedulerConfiguration::default()),
            0,
        )
        .await
        .unwrap();
    store.put(&ks.var("team", "a/b"), &var, 0).await.unwrap();
    delete_key(&*store, ks.var("default", "app/db")).await;
    let last = delete_key(&*store, ks.heartbeat("n1")).await;
    let snap = informer.wait_for_revision(last, WAIT).await.unwrap();
    assert!(snap.revision() >= last);
    assert_eq!(snap.alloc_count(), 7);
    assert_eq!(ids(snap.allocs_by_node("n2")), vec!["b1"]);
    assert_eq!(snap.alloc("b1").unwrap().alloc_modify_revision, r1);
    assert_eq!(
        snap.node_usage("n1").cpu_mhz,
        500,
        "a0 terminal, a1 deleted"
    );
    assert_eq!(snap.node_usage("n1").allocs, 5);
    assert!(snap.scheduler_config().is_some());
    assert!(!snap.heartbeat_live("n1"));
    assert_eq!(
        informer.stats().decode_errors,
        0,
        "variables are passed over"
    );
    informer.shutdown().await;
}

async fn snapshots_are_isolated(store: Arc<dyn Store>, ks: Keyspace) {
    put_alloc(&*store, &ks, &alloc("a1", "n1", "web", 100, 10, 8080)).await;
    let informer = start(Arc::clone(&store), &ks).await;
    let held = informer.snapshot();
    let held_rev = held.revision();
    delete_key(&*store, ks.alloc("a1")).await;
    let rev = put_alloc(&*store, &ks, &alloc("a2", "n1", "web", 200, 10, 8081)).await;
    let fresh = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert_eq!(ids(fresh.allocs()), vec!["a2"]);
    assert_eq!(held.revision(), held_rev);
    assert_eq!(ids(held.allocs()), vec!["a1"]);
    assert_eq!(ids(held.allocs_by_node("n1")), vec!["a1"]);
    assert_eq!(held.node_usage("n1").cpu_mhz, 100);
    assert_eq!(fresh.node_usage("n1").cpu_mhz, 200);
}

async fn waits_for_revisions_made_elsewhere(store: Arc<dyn Store>, ks: Keyspace) {
    let informer = start(Arc::clone(&store), &ks).await;
    // A write outside the prefix moves the store's revision with no event
    // for this cache; only a progress notification can vouch for it.
    let other = Keyspace::new(&format!("{}-elsewhere", ks.prefix()));
    let rev = store.put(&other.node("x"), b"", 0).await.unwrap();
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert!(snap.revision() >= rev);
    assert_eq!(snap.node_count(), 0);
    let mut updates = informer.subscribe();
    updates.borrow_and_update();
    let rev = store
        .put(&ks.node("n1"), &encode(&node("n1")), 0)
        .await
        .unwrap();
    tokio::time::timeout(WAIT, updates.changed())
        .await
        .unwrap()
        .unwrap();
    assert!(
        informer
            .wait_for_revision(rev, WAIT)
            .await
            .unwrap()
            .node("n1")
            .is_some()
    );
    let far = informer.revision() + 1_000_000;
    match informer
        .wait_for_revision(far, Duration::from_millis(200))
        .await
    {
        Err(StateError::Timeout { wanted, reached }) => {
            assert_eq!(wanted, far);
            assert!(reached >= rev);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

async fn progress_ahead_of_events_is_not_trusted(store: Arc<dyn Store>, ks: Keyspace) {
    let early = early_progress_store(Arc::clone(&store));
    let informer = start(early, &ks).await;
    // Enough rounds that some run well after the watch opened, when a
    // progress notification is no longer taken for a catch-up artefact.
    for i in 0..12 {
        let id = format!("a{i}");
        let rev = put_alloc(&*store, &ks, &alloc(&id, "n1", "web", 100, 10, 9000 + i)).await;
        let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
        assert!(snap.revision() >= rev);
        assert!(
            ids(snap.allocs()).contains(&id),
            "the snapshot at {} lacks the write at {rev}",
            snap.revision()
        );
    }
    // A revision no event of this prefix announces is still reached.
    let other = Keyspace::new(&format!("{}-elsewhere", ks.prefix()));
    let rev = store.put(&other.node("x"), b"", 0).await.unwrap();
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert!(snap.revision() >= rev);
    assert_eq!(snap.alloc_count(), 12);
}

async fn starts_once_the_store_answers(store: Arc<dyn Store>, ks: Keyspace) {
    put_alloc(&*store, &ks, &alloc("a1", "n1", "web", 100, 10, 8080)).await;
    let faulty = faulty_store(Arc::clone(&store));
    faulty.fail_next_ranges(3);
    let informer = start(faulty.clone(), &ks).await;
    assert_eq!(faulty.ranges_to_fail(), 0);
    assert_eq!(ids(informer.snapshot().allocs()), vec!["a1"]);
}

async fn reconnects_after_a_cut_without_relisting(store: Arc<dyn Store>, ks: Keyspace) {
    let faulty = faulty_store(Arc::clone(&store));
    let informer = start(faulty.clone(), &ks).await;
    let rev = put_alloc(&*store, &ks, &alloc("a1", "n1", "web", 100, 10, 8080)).await;
    // Seen through the watch, so the watch is up when it is cut.
    informer.wait_for_revision(rev, WAIT).await.unwrap();
    faulty.cut_watches();
    put_alloc(&*store, &ks, &alloc("a2", "n1", "web", 100, 10, 8081)).await;
    let rev = delete_key(&*store, ks.alloc("a1")).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    faulty.restore_watches();
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert_eq!(ids(snap.allocs()), vec!["a2"]);
    assert_eq!(snap.node_usage("n1").cpu_mhz, 100);
    let stats = informer.stats();
    assert!(stats.reconnects >= 1, "{stats:?}");
    assert_eq!(stats.relists, 0, "{stats:?}");
}

async fn a_watch_on_a_member_that_stands_still_moves_on(store: Arc<dyn Store>, ks: Keyspace) {
    let stale = stale_member_store(Arc::clone(&store));
    let config = InformerConfig {
        quiet_probe: Duration::from_millis(100),
        ..config()
    };
    let informer = Informer::start(stale.clone(), ks.clone(), config)
        .await
        .unwrap();
    let rev = put_alloc(&*store, &ks, &alloc("a1", "n1", "web", 100, 10, 8080)).await;
    // The first watch never delivers: only a new one brings the write.
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert_eq!(ids(snap.allocs()), vec!["a1"]);
    assert!(stale.watches_opened() >= 2);
    assert!(informer.stats().reconnects >= 1, "{:?}", informer.stats());
}

/// A quiet watch on a healthy store is kept while the store's revision
/// moves (writes outside the prefix); one that goes silent while the store
/// moves on (an etcd member whose disk froze) is opened again, and the
/// cache catches up without a re-list.
async fn a_watch_that_lags_the_store_is_opened_again(store: Arc<dyn Store>, ks: Keyspace) {
    let faulty = faulty_store(Arc::clone(&store));
    let quick = InformerConfig {
        quiet_probe: Duration::from_millis(200),
        // Long enough that a progress answer slowed by a loaded machine
        // does not pass for a stuck watch.
        stale_watch: Duration::from_millis(1500),
        ..config()
    };
    let informer = Informer::start(faulty.clone(), ks.clone(), quick)
        .await
        .unwrap();
    let rev = put_alloc(&*store, &ks, &alloc("a1", "n1", "web", 100, 10, 8080)).await;
    informer.wait_for_revision(rev, WAIT).await.unwrap();
    let other = Keyspace::new(&format!("{}-elsewhere", ks.prefix()));
    // Quiet for several stale periods by design: time is the property.
    for i in 0..15 {
        store
            .put(&other.node(&format!("n{i}")), b"", 0)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = informer.stats();
    assert_eq!(
        stats.stale_watches, 0,
        "a healthy quiet watch was dropped: {stats:?}"
    );
    assert_eq!(stats.reconnects, 0, "{stats:?}");
    faulty.silence_watches();
    let rev = put_alloc(&*store, &ks, &alloc("a2", "n1", "web", 100, 10, 8081)).await;
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert_eq!(ids(snap.allocs()), vec!["a1", "a2"]);
    let stats = informer.stats();
    assert!(stats.stale_watches >= 1, "{stats:?}");
    assert_eq!(stats.relists, 0, "{stats:?}");
}

async fn compaction_relists_and_drops_what_vanished(store: Arc<dyn Store>, ks: Keyspace) {
    let faulty = faulty_store(Arc::clone(&store));
    for (id, n) in [("a1", "n1"), ("a2", "n1"), ("a3", "n2")] {
        put_alloc(&*store, &ks, &alloc(id, n, "web", 100, 10, 8080)).await;
    }
    let informer = start(faulty.clone(), &ks).await;
    assert_eq!(informer.snapshot().node_usage("n1").cpu_mhz, 200);
    faulty.cut_watches();
    // While the cache is away: a delete it will never see as an event, an
    // update, a new alloc, then history compacted past all of them.
    delete_key(&*store, ks.alloc("a1")).await;
    delete_key(&*store, ks.alloc("a3")).await;
    let mut moved = alloc("a2", "n2", "web", 400, 10, 8080);
    moved.client_status = AllocClientStatus::Running as i32;
    put_alloc(&*store, &ks, &moved).await;
    let last = put_alloc(&*store, &ks, &alloc("a4", "n3", "api", 50, 10, 9000)).await;
    // Compaction is global on etcd: compact only up to this test's own write.
    store.compact(last).await.unwrap();
    faulty.restore_watches();
    let snap = informer.wait_for_revision(last, WAIT).await.unwrap();
    assert_eq!(ids(snap.allocs()), vec!["a2", "a4"]);
    assert_eq!(snap.allocs_by_node("n1").count(), 0);
    assert!(snap.node_usage("n1").is_empty());
    assert_eq!(ids(snap.allocs_by_node("n2")), vec!["a2"]);
    assert_eq!(snap.node_usage("n2").cpu_mhz, 400);
    assert_eq!(snap.node_usage("n3").cpu_mhz, 50);
    assert_eq!(ids(snap.allocs_by_job("default", "web")), vec!["a2"]);
    assert!(informer.stats().relists >= 1, "{:?}", informer.stats());
    // And the watch resumes after the re-list.
    let rev = delete_key(&*store, ks.alloc("a4")).await;
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert!(snap.node_usage("n3").is_empty());
}

async fn list_pages_share_one_revision(store: Arc<dyn Store>, ks: Keyspace) {
    for i in 0..5 {
        put_alloc(
            &*store,
            &ks,
            &alloc(&format!("a{i}"), "n1", "web", 10, 10, 8000 + i),
        )
        .await;
    }
    let faulty = faulty_store(Arc::clone(&store));
    // Keep the watch from running so the snapshot shows the list alone.
    faulty.cut_watches();
    let late = alloc("a9", "n1", "web", 10, 10, 8009);
    faulty.write_after_next_range(ks.alloc("a9"), encode(&late));
    let informer = start(faulty.clone(), &ks).await;
    let snap = informer.snapshot();
    assert_eq!(
        snap.alloc_count(),
        5,
        "a write between pages is not in the list"
    );
    faulty.restore_watches();
    let rev = store.current_revision().await.unwrap();
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert_eq!(snap.alloc_count(), 6, "the watch brings it");
}

async fn list_pages_shrink_to_fit_the_reply_limit(store: Arc<dyn Store>, ks: Keyspace) {
    // Six jobs of about 300 KB: three (the configured page) outgrow a 700 KB reply.
    for i in 0..6 {
        let mut j = job("default", &format!("big-{i}"), 1);
        j.meta = (0..10_000)
            .map(|k| (format!("key-{k:05}"), "x".repeat(20)))
            .collect();
        store
            .put(&ks.job("default", &j.id), &encode(&j), 0)
            .await
            .unwrap();
    }
    let faulty = faulty_store(Arc::clone(&store));
    faulty.cap_replies(700 * 1024);
    let informer = tokio::time::timeout(WAIT, start(faulty.clone(), &ks))
        .await
        .expect("the list fits the reply limit in smaller pages");
    assert_eq!(informer.snapshot().jobs().count(), 6);
}

async fn a_list_reads_only_what_the_cache_holds(store: Arc<dyn Store>, ks: Keyspace) {
    // A sealed variable of 1 MB: past a 700 KB reply limit, a list that read
    // it could never finish, however small its pages.
    store
        .put(&ks.var("default", "big"), &vec![b'x'; 1024 * 1024], 0)
        .await
        .unwrap();
    store
        .put(
            &ks.job("default", "web"),
            &encode(&job("default", "web", 1)),
            0,
        )
        .await
        .unwrap();
    let faulty = faulty_store(Arc::clone(&store));
    faulty.cap_replies(700 * 1024);
    let informer = tokio::time::timeout(WAIT, start(faulty.clone(), &ks))
        .await
        .expect("the list never reads the variable");
    assert_eq!(informer.snapshot().jobs().count(), 1);
    assert_eq!(informer.stats().decode_errors, 0);
}

async fn bad_values_are_skipped_not_served(store: Arc<dyn Store>, ks: Keyspace) {
    put_alloc(&*store, &ks, &alloc("a1", "n1", "web", 100, 10, 8080)).await;
    store
        .put(&ks.alloc("junk"), &[0xff, 0xff, 0xff], 0)
        .await
        .unwrap();
    let informer = start(Arc::clone(&store), &ks).await;
    assert_eq!(informer.snapshot().alloc_count(), 1);
    assert_eq!(informer.stats().decode_errors, 1);
    store.put(&ks.alloc("a1"), &[0xff, 0xff], 0).await.unwrap();
    let rev = store
        .put(&ks.node("n1"), &encode(&node("n1")), 0)
        .await
        .unwrap();
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert_eq!(
        snap.alloc_count(),
        0,
        "an undecodable value replaces the old one"
    );
    assert!(snap.node_usage("n1").is_empty());
    // Each bad value counts once per read; a re-list would read `junk` again.
    let stats = informer.stats();
    assert_eq!(stats.decode_errors, 2 + stats.relists, "{stats:?}");
}

async fn heartbeats_follow_their_lease(store: Arc<dyn Store>, ks: Keyspace) {
    let informer = start(Arc::clone(&store), &ks).await;
    let lease = store.lease_grant(30).await.unwrap();
    let rev = store.put(&ks.heartbeat("n1"), b"", lease.id).await.unwrap();
    assert!(
        informer
            .wait_for_revision(rev, WAIT)
            .await
            .unwrap()
            .heartbeat_live("n1")
    );
    store.lease_revoke(lease.id).await.unwrap();
    let rev = store.current_revision().await.unwrap();
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert!(!snap.heartbeat_live("n1"));
    assert_eq!(snap.live_heartbeats().count(), 0);
    // Ranging the prefix confirms the store agrees.
    let left = store.range(ks.range_of(Kind::Heartbeats)).await.unwrap();
    assert!(left.kvs.is_empty());
}

/// etcd compaction is global: the one test that compacts runs alone among
/// this binary's etcd tests, so no other test's informer is pushed into a
/// re-list it does not expect.
static COMPACTION: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

async fn etcd() -> Arc<dyn Store> {
    let endpoints = caravan_testkit::etcd_endpoints();
    match EtcdStore::connect(&endpoints).await {
        Ok(store) => Arc::new(store),
        Err(err) => panic!("cannot reach the test etcd at {endpoints:?}: {err}"),
    }
}

async fn snapshots_never_split_a_transaction(store: Arc<dyn Store>, ks: Keyspace) {
    let informer = Arc::new(start(Arc::clone(&store), &ks).await);
    let watcher = Arc::clone(&informer);
    let checker = tokio::spawn(async move {
        for _ in 0..200_000 {
            let snap = watcher.snapshot();
            let placed = snap.allocs_by_job("default", "big").count();
            assert!(
                placed == 0 || placed == 500,
                "a snapshot saw {placed} of 500"
            );
            let singles = snap.allocs_by_job("default", "single").count();
            if placed == 500 && singles == 200 {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the cache never caught up");
    });
    let mut txn = Txn::new();
    for i in 0..500 {
        let a = alloc(
            &format!("big-{i:03}"),
            &format!("n{}", i % 7),
            "big",
            10,
            10,
            20000 + i,
        );
        txn = txn.and_then(Op::put(ks.alloc(&a.id), encode(&a)));
    }
    store.txn(txn).await.unwrap();
    for i in 0..200 {
        let a = alloc(&format!("single-{i:03}"), "n1", "single", 10, 10, 30000 + i);
        put_alloc(&*store, &ks, &a).await;
    }
    tokio::time::timeout(WAIT, checker).await.unwrap().unwrap();
    let snap = informer.snapshot();
    assert_eq!(snap.alloc_count(), 700);
    let on_n1: u64 = snap.node_usage("n1").cpu_mhz;
    assert_eq!(on_n1, 10 * (200 + 72));
}

/// The value of a gauge with one label, as the process registry exports it.
fn gauge(name: &str, label: &str) -> Option<i64> {
    let family = caravan_metrics::gather()
        .into_iter()
        .find(|f| f.name() == name)?;
    family
        .get_metric()
        .iter()
        .find(|m| m.get_label().iter().any(|l| l.value() == label))
        .map(|m| m.get_gauge().get_value() as i64)
}

/// The value of a counter whose labels include every one of `labels`.
fn counter(name: &str, labels: &[&str]) -> Option<u64> {
    let family = caravan_metrics::gather()
        .into_iter()
        .find(|f| f.name() == name)?;
    family
        .get_metric()
        .iter()
        .find(|m| {
            labels
                .iter()
                .all(|want| m.get_label().iter().any(|l| l.value() == *want))
        })
        .map(|m| m.get_counter().get_value() as u64)
}

async fn metrics_follow_the_applied_revision(store: Arc<dyn Store>, ks: Keyspace) {
    store
        .put(&ks.alloc("junk"), &[0xff, 0xff, 0xff], 0)
        .await
        .unwrap();
    let informer = start(Arc::clone(&store), &ks).await;
    assert_eq!(
        counter(
            "caravan_watch_cache_events_total",
            &[ks.prefix(), "decode_error"]
        ),
        Some(1)
    );
    let listed = informer.revision();
    assert_eq!(
        gauge("caravan_watch_cache_revision", ks.prefix()),
        Some(listed)
    );
    let rev = store
        .put(&ks.node("n1"), &encode(&node("n1")), 0)
        .await
        .unwrap();
    informer.wait_for_revision(rev, WAIT).await.unwrap();
    assert_eq!(
        gauge("caravan_watch_cache_revision", ks.prefix()),
        Some(informer.revision())
    );
    assert!(informer.revision() >= rev);
    let lag = gauge("caravan_watch_cache_lag_revisions", ks.prefix()).unwrap();
    // The lag is the store's revision as the watch reported it minus what
    // the cache applied (at least `rev` now), so at most `now - rev`.
    // Nothing else writes to the embedded store: there `now` is `rev` and
    // the lag must be 0, unless the wait wrote a progress mark; on the
    // shared etcd other tests' writes may count.
    let now = store
        .range(Range::prefix(ks.prefix()))
        .await
        .unwrap()
        .revision;
    assert!(
        (0..=now - rev).contains(&lag),
        "lag {lag} with the cache at {} and the store at {now}",
        informer.revision()
    );
    informer.shutdown().await;
}

fn status(client: AllocClientStatus, at: i64) -> caravan_proto::AllocStatus {
    let mut s = caravan_proto::AllocStatus {
        modify_time_unix_ns: at,
        ..Default::default()
    };
    s.set_client_status(client);
    s
}

/// Statuses in a job's status batches, beside an allocation's status key:
/// the cache, a re-list and a point read all fold each allocation to the
/// same status, a late report never takes a finished one back, and
/// freeing a batch whose chosen entries moved changes nothing.
async fn compaction_status_batches_fold_alike_everywhere(store: Arc<dyn Store>, ks: Keyspace) {
    use AllocClientStatus::{Complete, Running};
    use caravan_state::status_batch::encode_batch;
    use caravan_state::{read_alloc_values_of_jobs, read_allocs};
    let faulty = faulty_store(Arc::clone(&store));
    for id in ["a1", "a2", "a3"] {
        put_alloc(&*store, &ks, &alloc(id, "n1", "web", 100, 10, 8080)).await;
    }
    let informer = start(faulty.clone(), &ks).await;
    let running = status(Running, 10);
    let put_status = Op::put(
        ks.alloc_status("a1"),
        caravan_state::encode_status(running.clone()),
    );
    store.txn(Txn::new().and_then(put_status)).await.unwrap();
    let done = status(Complete, 20);
    let b1 = store
        .put(
            &ks.job_status("default", "web", "b1"),
            &encode_batch([("a1", &done, 0), ("a2", &running, 0)]),
            0,
        )
        .await
        .unwrap();
    // A report that a gateway held while a1 finished through another.
    let late = status(Running, 30);
    let rev = store
        .put(
            &ks.job_status("default", "web", "b2"),
            &encode_batch([("a1", &late, 0)]),
            0,
        )
        .await
        .unwrap();
    let record_status = alloc("a3", "n1", "web", 100, 10, 8080).client_status();
    let expect = |allocs: Vec<caravan_proto::Allocation>| {
        let got: Vec<(String, AllocClientStatus, i64)> = allocs
            .into_iter()
            .map(|a| (a.id.clone(), a.client_status(), a.client_modify_revision))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a1".to_string(), Complete, b1),
                ("a2".to_string(), Running, b1),
                // The record's own, with no status of it stored.
                ("a3".to_string(), record_status, 0),
            ]
        );
    };
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    expect(snap.allocs().map(|a| (**a).clone()).collect());
    let read = read_allocs(&*store, &ks, &["a1", "a2", "a3", "gone"], 4)
        .await
        .unwrap();
    assert!(read[3].is_none());
    expect(read.into_iter().flatten().collect());
    let with_jobs = [
        ("a1", "default", "web"),
        ("a2", "default", "web"),
        ("a3", "default", "web"),
    ];
    let read = read_alloc_values_of_jobs(&*store, &ks, &with_jobs, 3)
        .await
        .unwrap();
    expect(
        read.into_iter()
            .map(|s| s.unwrap().fold(caravan_state::AllocDetail::Full).unwrap())
            .collect(),
    );
    // b1 freed: what it holds that is chosen moves to b3 first, with its
    // revisions, in the same transaction.
    let moved = encode_batch([("a1", &done, b1), ("a2", &running, b1)]);
    let rev = store
        .txn(
            Txn::new()
                .and_then(Op::put(ks.job_status("default", "web", "b3"), moved))
                .and_then(Op::delete(ks.job_status("default", "web", "b1"))),
        )
        .await
        .unwrap()
        .revision;
    let snap = informer.wait_for_revision(rev, WAIT).await.unwrap();
    expect(snap.allocs().map(|a| (**a).clone()).collect());
    let read = read_allocs(&*store, &ks, &["a1", "a2", "a3"], 9)
        .await
        .unwrap();
    expect(read.into_iter().flatten().collect());
    // A re-list of the same store folds the same.
    faulty.cut_watches();
    store
        .put(&ks.node("n8"), &encode(&node("n8")), 0)
        .await
        .unwrap();
    let last = store
        .put(&ks.node("n9"), &encode(&node("n9")), 0)
        .await
        .unwrap();
    // Compaction is global on etcd: compact only up to this test's own write.
    store.compact(last).await.unwrap();
    faulty.restore_watches();
    let snap = informer.wait_for_revision(last, WAIT).await.unwrap();
    expect(snap.allocs().map(|a| (**a).clone()).collect());
    assert!(informer.stats().relists >= 1, "{:?}", informer.stats());
}

macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod mem {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    let store: Arc<dyn Store> = Arc::new(MemStore::new());
                    let ks = Keyspace::new(&caravan_testkit::unique_prefix(stringify!($name)));
                    super::$name(store, ks).await;
                }
            )*
        }
        mod etcd {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let _turn = if stringify!($name).starts_with("compaction") {
                        Err(COMPACTION.write().await)
                    } else {
                        Ok(COMPACTION.read().await)
                    };
                    let store = super::etcd().await;
                    let ks = Keyspace::new(&caravan_testkit::unique_prefix(stringify!($name)));
                    super::$name(store, ks).await;
                }
            )*
        }
    };
}

on_every_backend!(
    metrics_follow_the_applied_revision,
    initial_list_then_watch,
    snapshots_are_isolated,
    waits_for_revisions_made_elsewhere,
    progress_ahead_of_events_is_not_trusted,
    starts_once_the_store_answers,
    reconnects_after_a_cut_without_relisting,
    a_watch_on_a_member_that_stands_still_moves_on,
    a_watch_that_lags_the_store_is_opened_again,
    compaction_relists_and_drops_what_vanished,
    compaction_status_batches_fold_alike_everywhere,
    list_pages_share_one_revision,
    list_pages_shrink_to_fit_the_reply_limit,
    a_list_reads_only_what_the_cache_holds,
    bad_values_are_skipped_not_served,
    heartbeats_follow_their_lease,
    snapshots_never_split_a_transaction,
);
