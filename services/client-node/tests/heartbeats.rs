//! Heartbeats never wait behind the rest of the process: with every worker
//! of the client's runtime busy (alloc runners, alloc sets, status batches
//! of thousands of simulated nodes on a saturated machine), each node still
//! heartbeats on time, since its heartbeats run on the process's heartbeat
//! thread over connections that thread drives.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use tokio_util::sync::CancellationToken;

const NODES: u32 = 20;
const WORKERS: usize = 2;

/// Serves `fake` from a runtime on a thread of its own, which the test's
/// busy runtime cannot hold up.
fn serve_apart(fake: &FakeGateway, stop: CancellationToken) -> std::net::SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    let fake = fake.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            tx.send(fake.serve(stop.clone()).await).unwrap();
            stop.cancelled().await;
        });
    });
    rx.recv().unwrap()
}

/// Heartbeats per node, with every node present.
fn counts(fake: &FakeGateway, nodes: &[String]) -> HashMap<String, u32> {
    let seen = fake.seen.lock();
    nodes
        .iter()
        .map(|n| (n.clone(), seen.heartbeats.get(n).copied().unwrap_or(0)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_heartbeat_while_every_runtime_worker_is_busy() {
    // A 600 ms TTL: a heartbeat every ~300 ms.
    let fake = FakeGateway::new(Duration::from_millis(600));
    let stop_fake = CancellationToken::new();
    let addr = serve_apart(&fake, stop_fake.clone());
    let dir = tempfile::tempdir().unwrap();
    let mut conf = config(addr, dir.path());
    conf.simulate = NODES;
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    let nodes = client.ready.node_ids.clone();
    until(
        "a heartbeat from every node",
        Duration::from_secs(15),
        || counts(&fake, &nodes).values().all(|n| *n > 0),
    )
    .await;

    // Occupy every worker of the runtime the client runs on, as a burst of
    // CPU-bound work on a saturated machine does: nothing else on it runs
    // until they let go.
    let busy = Arc::new(AtomicBool::new(true));
    for _ in 0..WORKERS {
        let busy = Arc::clone(&busy);
        tokio::spawn(async move {
            while busy.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
    }
    let before = counts(&fake, &nodes);
    // Waited for on this thread, without the runtime (whose timers the busy
    // workers hold up too): three more heartbeats from every node.
    let deadline = Instant::now() + Duration::from_secs(10);
    let behind = loop {
        let now = counts(&fake, &nodes);
        let behind: Vec<(&String, u32)> = nodes
            .iter()
            .filter_map(|n| {
                let more = now[n] - before[n];
                (more < 3).then_some((n, more))
            })
            .collect();
        if behind.is_empty() || Instant::now() > deadline {
            break behind.len();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    busy.store(false, Ordering::Relaxed);
    assert_eq!(
        behind, 0,
        "{behind} of {NODES} nodes sent fewer than 3 heartbeats in 10 s while the runtime was busy"
    );

    stop(client, shutdown).await;
    stop_fake.cancel();
}
