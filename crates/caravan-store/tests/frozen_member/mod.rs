//! Leadership through an etcd member that goes silent: a loopback proxy in
//! front of the test etcd forwards until it is frozen, then holds every
//! connection open and passes nothing on, the way a SIGSTOPped member does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use caravan_store::{EtcdConfig, EtcdStore, Leadership, Op, Store, Txn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(3);

/// A TCP proxy to the test etcd that can be frozen.
struct FreezableMember {
    endpoint: String,
    frozen: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl FreezableMember {
    async fn start() -> FreezableMember {
        let target = caravan_testkit::etcd_endpoints()[0]
            .trim_start_matches("http://")
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let frozen = Arc::new(AtomicBool::new(false));
        let flag = frozen.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&target).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(forward(client_read, server_write, flag.clone()));
                tokio::spawn(forward(server_read, client_write, flag.clone()));
            }
        });
        FreezableMember {
            endpoint,
            frozen,
            task,
        }
    }

    fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
    }
}

impl Drop for FreezableMember {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`; once frozen, holds what it read and sends nothing.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while frozen.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buf[..read]).await.is_err() {
            return;
        }
    }
}

/// A store that talks to `first`, then the test etcd itself, with the
/// default request timeout.
async fn store_through(first: &FreezableMember) -> Arc<dyn Store> {
    let mut endpoints = vec![first.endpoint.clone()];
    endpoints.extend(caravan_testkit::etcd_endpoints());
    Arc::new(
        EtcdStore::connect_with(EtcdConfig::new(&endpoints))
            .await
            .expect("connected through the proxy"),
    )
}

fn election(test: &str) -> String {
    caravan_testkit::unique_prefix(test)
        .trim_end_matches('/')
        .to_string()
}

/// A waiting candidate whose member goes silent moves to the next member and
/// wins as soon as the leader resigns, as a replica's campaign loop would;
/// and when the silent member answers again (ending the campaign abandoned
/// there, which deletes that campaign's candidate key) the winner still
/// leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_whose_member_goes_silent_wins_through_another() {
    let member = FreezableMember::start().await;
    let direct: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(&caravan_testkit::etcd_endpoints())
            .await
            .unwrap(),
    );
    let election = election("silent-member-candidate");
    let leader = Leadership::campaign(direct, &election, "leader", TTL)
        .await
        .unwrap();
    let candidate_store = store_through(&member).await;
    let candidate = {
        let election = election.clone();
        tokio::spawn(async move {
            // What `serve_as_leader` does: campaign again after a failure.
            loop {
                match Leadership::campaign(candidate_store.clone(), &election, "candidate", TTL)
                    .await
                {
                    Ok(won) => return won,
                    Err(err) => {
                        eprintln!("campaign failed: {err}");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        })
    };
    // The candidate is waiting on the proxy when it goes silent.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!candidate.is_finished());
    member.freeze();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resigned = Instant::now();
    leader.resign().await.unwrap();
    let won = tokio::time::timeout(Duration::from_secs(5), candidate)
        .await
        .expect("the candidate did not win within 5 s of the resign")
        .unwrap();
    assert!(!won.is_lost());
    eprintln!("won {:?} after the resign", resigned.elapsed());
    member.thaw();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!won.is_lost(), "leadership lost: {:?}", won.lost_reason());
    let key = format!("{election}-data").into_bytes();
    let written = won
        .fenced_txn(Txn::new().and_then(Op::put(key, b"v".to_vec())))
        .await
        .expect("the winner's fenced write");
    assert!(written.succeeded);
}

/// A leader whose member goes silent keeps its leadership: its renewals move
/// to the next member within half the TTL, and its writes follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_member_goes_silent_keeps_leading() {
    let member = FreezableMember::start().await;
    let store = store_through(&member).await;
    let election = election("silent-member-leader");
    let leader = Leadership::campaign(store, &election, "leader", TTL)
        .await
        .unwrap();
    member.freeze();
    tokio::time::sleep(TTL * 2).await;
    assert!(
        !leader.is_lost(),
        "leadership lost: {:?}",
        leader.lost_reason()
    );
    let key = format!("{election}-data").into_bytes();
    let write = leader.fenced_txn(Txn::new().and_then(Op::put(key, b"v".to_vec())));
    let written = tokio::time::timeout(Duration::from_secs(3), write)
        .await
        .expect("the fenced write did not go through the live member within 3 s")
        .unwrap();
    assert!(written.succeeded);
}

/// With a single member there is no other to move on to: a short member
/// timeout does not cut a slow answer short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_slow_member_is_waited_for_whatever_the_member_timeout() {
    let member = FreezableMember::start().await;
    let store = EtcdStore::connect(std::slice::from_ref(&member.endpoint))
        .await
        .expect("connected through the proxy");
    member.freeze();
    let thaw = async {
        tokio::time::sleep(Duration::from_millis(600)).await;
        member.thaw();
    };
    let read =
        caravan_store::with_member_timeout(Duration::from_millis(100), store.current_revision());
    let (answer, ()) = tokio::join!(read, thaw);
    answer.expect("the lone member's slow answer");
}

/// A client with connections of its own shares its parent's choice of
/// member: when its watch finds the member silent and leaves it, the
/// parent's next request goes to the next member at once, and it does not
/// wait out the request timeout on the silent one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_a_sibling_leaves_is_left_by_both() {
    let member = FreezableMember::start().await;
    let store = store_through(&member).await;
    let sibling = store
        .with_own_connections()
        .expect("an etcd store has connections");
    let prefix = caravan_testkit::unique_prefix("sibling-leaves");
    let watch = sibling.watch(prefix.as_bytes(), 0).await.unwrap();
    assert_eq!(store.failovers(), 0, "both start on the proxy");
    member.freeze();
    watch.progress.abandon("silent in this test");
    assert_eq!(
        store.failovers(),
        1,
        "the parent counts the sibling's failover"
    );
    let read = tokio::time::timeout(Duration::from_secs(2), store.current_revision()).await;
    read.expect("the parent stayed on the member its sibling left")
        .unwrap();
    // And the sibling's own next request goes there too.
    let read = tokio::time::timeout(Duration::from_secs(2), sibling.current_revision()).await;
    read.expect("the sibling stayed on the member it left")
        .unwrap();
}
