//! Network partitions among the processes a test starts, cut and healed with
//! [`FaultProxy`] links on loopback: a leader cut off from etcd while its
//! clients still reach it, a gateway cut off from etcd, a client node cut
//! off from every gateway for less and for more than its heartbeat TTL, and
//! an etcd member cut off from the other two, both ways and one way. After
//! each: no lost evaluation, no over-committed node, no duplicate live name,
//! and the fault's own promise; the times to recover are printed
//! (`cargo test ... -- --nocapture`) for `docs/benchmarks.md`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use caravan_integration_tests::batch_once;
use caravan_integration_tests::state::{
    alloc_histogram, duplicated_allocs, eval_histogram, evals_settled, live_per_job,
    overcommitted_nodes,
};
use caravan_integration_tests::{
    Cluster, EtcdCluster, FaultProxy, HttpApi, Progress, Service, jobs, process, wait_for,
};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation, Evaluation, Node, NodeStatus};
use caravan_store::{EventKind, Store, election_name};
use futures::StreamExt;

/// How long the cluster may take to settle after a fault or a heal.
const SETTLE: Duration = Duration::from_secs(45);
/// The test harness's leader lease TTL (`leader_ttl_ms` in `Cluster`).
const LEADER_TTL: Duration = Duration::from_secs(2);
/// The test harness's heartbeat TTL plus grace (`min_heartbeat_ttl_ms` and
/// `heartbeat_grace_ms`): a node unheard for longer is down.
const HEARTBEAT_DEADLINE: Duration = Duration::from_secs(4);
/// The bound this bench states for a healed partition to converge: the
/// cut-off process (or member) is back in service within it.
const CONVERGE: Duration = Duration::from_secs(15);
/// Allocations per job.
const COUNT: usize = 2;

/// Simulated node resources: roomy, so every job fits.
const ROOMY: &[(&str, &str)] = &[
    ("simulate_resources.cpu_mhz", "4000"),
    ("simulate_resources.memory_mb", "8192"),
];

/// The test etcd's first endpoint as a socket address.
fn test_etcd_addr() -> SocketAddr {
    let endpoint = caravan_testkit::etcd_endpoints()
        .into_iter()
        .next()
        .expect("CARAVAN_TEST_ETCD names an endpoint");
    let hostport = endpoint
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    hostport
        .replace("localhost", "127.0.0.1")
        .parse()
        .expect("the test etcd is an ip:port")
}

fn job_id(tag: &str, i: usize) -> String {
    format!("{tag}-{i:03}")
}

/// Registers jobs `range` of `tag`, each of [`COUNT`] small mock tasks;
/// returns them with the live count each must end with.
async fn register(
    http: &HttpApi,
    tag: &str,
    range: std::ops::Range<usize>,
) -> BTreeMap<String, usize> {
    let mut want = BTreeMap::new();
    for i in range {
        let id = job_id(tag, i);
        let body = jobs::service_job(&id, COUNT as i64, jobs::mock_task(20, 16));
        http.put_json("/v1/jobs", &body)
            .await
            .unwrap()
            .ok_json()
            .unwrap_or_else(|e| panic!("registering {id}: {e:#}"));
        want.insert(id, COUNT);
    }
    want
}

/// What the cluster ended with.
struct Settled {
    evals: Vec<Evaluation>,
    allocs: Vec<Allocation>,
    nodes: Vec<Node>,
}

/// Waits until every eval is settled and every job of `want` has its count
/// of live, running allocations, then checks the invariants every fault
/// keeps: no lost eval, no over-committed node, no duplicate live name, no
/// job with more or fewer live allocations than asked.
async fn settled(c: &Cluster, want: &BTreeMap<String, usize>) -> Settled {
    let state = c.state.clone();
    let total: usize = want.values().sum();
    let end = wait_for(
        "every eval settled and every alloc running",
        SETTLE,
        async || {
            let evals = state.evals().await?;
            let allocs = state.allocs().await?;
            let running = allocs
                .iter()
                .filter(|a| a.is_live() && a.client_status() == AllocClientStatus::Running)
                .count();
            Ok(if evals_settled(&evals) && running == total {
                Progress::Done(Settled {
                    evals,
                    allocs,
                    nodes: state.nodes().await?,
                })
            } else {
                Progress::Waiting(format!(
                    "evals {:?}; allocs {:?}; {running} of {total} running",
                    eval_histogram(&evals),
                    alloc_histogram(&allocs)
                ))
            })
        },
    )
    .await
    .unwrap();
    let over = overcommitted_nodes(&end.nodes, &end.allocs);
    assert!(over.is_empty(), "over-committed: {over:#?}");
    let dups = duplicated_allocs(&end.allocs);
    assert!(dups.is_empty(), "duplicate live names: {dups:#?}");
    let live = live_per_job(&end.allocs);
    for (job, n) in want {
        assert_eq!(
            live.get(job).copied().unwrap_or(0),
            *n,
            "live allocs of {job}"
        );
    }
    assert_eq!(
        end.evals.iter().filter(|e| e.job_id.is_empty()).count(),
        0,
        "every eval names its job"
    );
    end
}

/// Fails with the logs when a service process exited on its own.
fn none_exited(c: &mut Cluster) {
    let exited = c.exited();
    assert!(exited.is_empty(), "processes died on their own: {exited:?}");
}

/// `caravan_leader{service="..."}` as the process serving `/metrics` on
/// `addr` reports it.
async fn leading_gauge(addr: SocketAddr, service: &str) -> anyhow::Result<Option<i64>> {
    let text = HttpApi::new(addr).get("/metrics").await?.text();
    let series = format!("caravan_leader{{service=\"{service}\"}}");
    Ok(text.lines().find_map(|line| {
        line.strip_prefix(&series)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as i64)
    }))
}

/// A leader-elected service's leader (the plan-applier: the one writer of
/// allocations) loses etcd while its workers still reach it. It stops
/// leading within its lease, the standby takes over and places what was
/// registered during the cut, and etcd's history from the cut on holds no
/// write under the old leader's lease or token; healed, the old leader
/// rejoins as a standby.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_cut_off_from_etcd_stops_leading_commits_nothing_and_is_replaced() {
    for round in 0..crate::rounds() {
        let link = FaultProxy::start(test_etcd_addr()).await.unwrap();
        let mut c = Cluster::new(&format!("part-leader-{round}")).await.unwrap();
        c.start_gateway(&[]).await.unwrap();
        c.start_broker(&[]).await.unwrap();
        c.start_worker(&[]).await.unwrap();
        let metrics = process::free_addr().unwrap();
        let (url, metrics_setting) = (link.url(), metrics.to_string());
        let old = c
            .start_applier(&[
                ("store.endpoints", url.as_str()),
                ("metrics_addr", metrics_setting.as_str()),
            ])
            .await
            .unwrap()
            .to_string();
        assert_eq!(c.wait_leader(Service::PlanApplier).await.unwrap(), old);
        c.start_applier(&[]).await.unwrap();
        c.start_simulated_clients(4, ROOMY).await.unwrap();
        let http = c.http().unwrap();
        let mut want = register(&http, "before", 0..8).await;
        settled(&c, &want).await;

        let store = c.state.store().clone();
        let election = election_name(c.prefix(), Service::PlanApplier.name());
        let old_key = store.leader(election.as_bytes()).await.unwrap().unwrap();
        let batch = batch_once::register(&http, "leader", 3).await.unwrap();
        let from = store.current_revision().await.unwrap() + 1;
        link.cut();
        let cut = Instant::now();
        // Watched side by side: the old leader's own gauge, the election,
        // and work registered meanwhile.
        let (during, (new, took_over), stepped_down) = tokio::join!(
            register(&http, "during", 0..8),
            async {
                let new = c
                    .wait_leader_other_than(Service::PlanApplier, Some(&old))
                    .await
                    .unwrap();
                (new, cut.elapsed())
            },
            async {
                wait_for("the old leader to stop leading", SETTLE, async || {
                    Ok(
                        match leading_gauge(metrics, Service::PlanApplier.name()).await? {
                            Some(0) => Progress::Done(cut.elapsed()),
                            other => Progress::Waiting(format!("caravan_leader {other:?}")),
                        },
                    )
                })
                .await
                .unwrap()
            }
        );
        want.extend(during);
        let new_key = store.leader(election.as_bytes()).await.unwrap().unwrap();
        assert_ne!(new_key.key, old_key.key);
        settled(&c, &want).await;

        link.heal();
        let healed = Instant::now();
        want.extend(register(&http, "after", 0..4).await);
        let end = settled(&c, &want).await;
        let converged = healed.elapsed();
        assert_eq!(
            c.wait_leader(Service::PlanApplier).await.unwrap(),
            new,
            "the healed old leader does not take leadership back"
        );
        // Healed, the old leader is a live standby again: its gauge answers.
        assert_eq!(
            leading_gauge(metrics, Service::PlanApplier.name())
                .await
                .unwrap(),
            Some(0)
        );

        // etcd's history from the cut on. The old leader key's deletion (its
        // lease expired) is where the new leader took over: its own key was
        // created when it began to campaign and won as the older one went.
        // After that revision nothing is written under the old lease, and
        // the old key is never written again, so no fenced write could find
        // the old token current.
        let to = store.current_revision().await.unwrap();
        let events = history(store.as_ref(), c.prefix(), from, to).await;
        let old_deleted = events
            .iter()
            .find(|(kind, kv)| *kind == EventKind::Delete && kv.key == old_key.key)
            .map(|(_, kv)| kv.mod_revision)
            .expect("the old leader key was deleted (its lease expired)");
        assert!(
            new_key.create_revision < old_deleted,
            "the new leader's key ({}) was waiting when the old one went ({old_deleted})",
            new_key.create_revision
        );
        let stale: Vec<String> = events
            .iter()
            .filter(|(kind, kv)| {
                kv.mod_revision > old_deleted
                    && (kv.lease == old_key.lease
                        || (kv.key == old_key.key && *kind == EventKind::Put))
            })
            .map(|(kind, kv)| {
                format!(
                    "{kind:?} {} at {}",
                    String::from_utf8_lossy(&kv.key),
                    kv.mod_revision
                )
            })
            .collect();
        assert!(
            stale.is_empty(),
            "writes under the old leadership: {stale:#?}"
        );
        batch_once::assert_ran_once(&c.state, &batch, SETTLE).await;
        none_exited(&mut c);
        // It knows it lost half a TTL after its last renewal; the poll and a
        // loaded machine add to that, never a whole TTL.
        assert!(
            stepped_down < LEADER_TTL + LEADER_TTL / 2,
            "the old leader still led {stepped_down:?} after the cut (lease {LEADER_TTL:?})"
        );
        eprintln!(
            "partition leader round {round}: new leader after {took_over:?}, old one stopped \
             leading after {stepped_down:?}; healed: {} evals settled {converged:?} after the heal; \
             {} events in revisions {from}..={to}, none under the old token",
            end.evals.len(),
            events.len()
        );
    }
}

/// Every event under `prefix` in revisions `from..=to`, from etcd's
/// history (a watch from `from`).
async fn history(
    store: &dyn Store,
    prefix: &str,
    from: i64,
    to: i64,
) -> Vec<(EventKind, caravan_store::KeyValue)> {
    let mut watch = store.watch(prefix.as_bytes(), from).await.unwrap();
    let mut out = Vec::new();
    let read = async {
        while let Some(batch) = watch.stream.next().await {
            let batch = batch.unwrap();
            let mut last = batch.revision;
            for e in batch.events {
                last = e.kv.mod_revision;
                if e.kv.mod_revision <= to {
                    out.push((e.kind, e.kv));
                }
            }
            if last >= to {
                return;
            }
        }
        panic!("the history watch ended before revision {to}");
    };
    tokio::time::timeout(SETTLE, read)
        .await
        .expect("etcd's history read in time");
    out
}

/// A gateway cut off from etcd answers writes with a clear error naming the
/// store within one store request timeout, never a hang or a 500, claims no known leader once its view is
/// stale, and serves again when healed; the cluster behind the other
/// gateway carries on meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_cut_off_from_etcd_answers_no_store_and_recovers() {
    for round in 0..crate::rounds() {
        let link = FaultProxy::start(test_etcd_addr()).await.unwrap();
        let mut c = Cluster::new(&format!("part-gateway-{round}"))
            .await
            .unwrap();
        c.start_gateway(&[]).await.unwrap();
        let url = link.url();
        let cut_gw = c
            .start_gateway(&[("store.endpoints", url.as_str())])
            .await
            .unwrap();
        c.start_broker(&[]).await.unwrap();
        c.start_applier(&[]).await.unwrap();
        c.start_worker(&[]).await.unwrap();
        c.wait_leader(Service::EvalBroker).await.unwrap();
        c.wait_leader(Service::PlanApplier).await.unwrap();
        c.start_simulated_clients(4, ROOMY).await.unwrap();
        let good = c.http().unwrap();
        let cut_api = HttpApi::new(cut_gw.http);
        let mut want = register(&cut_api, "before", 0..4).await;
        settled(&c, &want).await;

        let batch = batch_once::register(&cut_api, "gateway", 3).await.unwrap();
        link.cut();
        let cut = Instant::now();
        // Side by side: a write answers within the store's request timeout,
        // with 503 and the store named (the caller learns the store is gone,
        // not that it erred); reads may come from the gateway's cache, but
        // once its view is stale it no longer claims a known leader, and
        // none of them is a 500 or a hang.
        let body = jobs::service_job("refused", 1, jobs::mock_task(20, 16));
        let mut failed = Vec::new();
        let ((refused, refused_after), stale) = tokio::join!(
            async {
                let reply = cut_api.put_json("/v1/jobs", &body).await.unwrap();
                (reply, cut.elapsed())
            },
            async {
                wait_for(
                    "the cut gateway to admit no known leader",
                    SETTLE,
                    async || {
                        let reply = cut_api.get("/v1/jobs").await?;
                        if reply.status >= 500 && reply.status != 503 {
                            failed.push(format!("HTTP {}: {}", reply.status, reply.text()));
                        }
                        Ok(match reply.header("X-Nomad-KnownLeader") {
                            Some("false") => Progress::Done(cut.elapsed()),
                            other => Progress::Waiting(format!(
                                "HTTP {} known leader {other:?}",
                                reply.status
                            )),
                        })
                    },
                )
                .await
                .unwrap()
            }
        );
        assert_eq!(refused.status, 503, "{}", refused.text());
        // One store request timeout (10 s), not a second one spent on a read
        // that could not fare better; the rest is slack for a loaded machine.
        assert!(
            refused_after < Duration::from_secs(15),
            "refused only after {refused_after:?}"
        );
        assert!(
            refused.text().contains("store"),
            "the error names the store: {}",
            refused.text()
        );
        assert!(
            failed.is_empty(),
            "reads of the cut gateway failed: {failed:?}"
        );
        // The other gateway serves the cluster all along.
        want.extend(register(&good, "during", 0..4).await);
        settled(&c, &want).await;
        assert!(
            !want.contains_key("refused"),
            "the refused job is not expected"
        );
        let jobs_now = c.state.jobs().await.unwrap();
        assert!(
            jobs_now.iter().all(|j| j.id != "refused"),
            "the refused write left nothing behind"
        );

        link.heal();
        let healed = Instant::now();
        let recovered = wait_for("the healed gateway to take writes", CONVERGE, async || {
            let body = jobs::service_job("after-000", COUNT as i64, jobs::mock_task(20, 16));
            let reply = cut_api.put_json("/v1/jobs", &body).await?;
            Ok(if reply.status == 200 {
                Progress::Done(healed.elapsed())
            } else {
                Progress::Waiting(format!("HTTP {}: {}", reply.status, reply.text()))
            })
        })
        .await
        .unwrap();
        want.insert("after-000".into(), COUNT);
        let known = wait_for(
            "the healed gateway to know a leader",
            CONVERGE,
            async || {
                let reply = cut_api.get("/v1/jobs").await?;
                Ok(match reply.header("X-Nomad-KnownLeader") {
                    Some("true") => Progress::Done(healed.elapsed()),
                    other => Progress::Waiting(format!("known leader {other:?}")),
                })
            },
        )
        .await
        .unwrap();
        settled(&c, &want).await;
        batch_once::assert_ran_once(&c.state, &batch, SETTLE).await;
        none_exited(&mut c);
        eprintln!(
            "partition gateway round {round}: write refused with 503 after {refused_after:?}, \
             no known leader after {stale:?}; healed: writes after {recovered:?}, \
             known leader after {known:?}"
        );
    }
}

/// Node `id`'s status now.
async fn node_status(c: &Cluster, id: &str) -> Option<NodeStatus> {
    let nodes = c.state.nodes().await.ok()?;
    nodes.iter().find(|n| n.id == id).map(|n| n.status())
}

/// A real client node whose every link to the gateways (alloc stream,
/// status updates and heartbeats) goes through cuttable links: cut for
/// less than its heartbeat TTL nothing changes; cut for longer it goes
/// down, its allocations are lost and replaced on the other node, and
/// healed it comes back ready with no copy left running twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_cut_off_from_every_gateway_within_and_past_its_ttl() {
    for round in 0..crate::rounds() {
        let mut c = Cluster::new(&format!("part-client-{round}")).await.unwrap();
        c.start_control_plane().await.unwrap();
        let gw = c.gateways()[0];
        let grpc = FaultProxy::start(gw.grpc).await.unwrap();
        let beats = FaultProxy::start(gw.heartbeat).await.unwrap();
        let (servers, heartbeats) = (grpc.addr().to_string(), beats.addr().to_string());
        let cut_name = format!("cut-{round}");
        let cut_node = c
            .start_client(
                &cut_name,
                &[
                    ("servers", servers.as_str()),
                    ("heartbeat_servers", heartbeats.as_str()),
                ],
            )
            .await
            .unwrap();
        let other = c.start_client(&format!("kept-{round}"), &[]).await.unwrap();
        let http = c.http().unwrap();
        // One alloc per node: spread keeps the two copies apart.
        let want = register(&http, "spread", 0..1).await;
        let before = settled(&c, &want).await;
        let on_cut: Vec<String> = before
            .allocs
            .iter()
            .filter(|a| a.is_live() && a.node_id == cut_node)
            .map(|a| a.id.clone())
            .collect();
        assert!(!on_cut.is_empty(), "{:?}", alloc_histogram(&before.allocs));

        // Shorter than the TTL: the node stays ready throughout and keeps its
        // allocations. The sleep is the fault's length, not a wait.
        let short = HEARTBEAT_DEADLINE / 4;
        grpc.cut();
        beats.cut();
        let cut = Instant::now();
        while cut.elapsed() < short {
            assert_eq!(
                node_status(&c, &cut_node).await,
                Some(NodeStatus::Ready),
                "down within its TTL"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        grpc.heal();
        beats.heal();
        // Watched for another TTL and grace after the heal: still ready.
        let healed = Instant::now();
        while healed.elapsed() < HEARTBEAT_DEADLINE + Duration::from_secs(1) {
            assert_eq!(
                node_status(&c, &cut_node).await,
                Some(NodeStatus::Ready),
                "down after a cut shorter than its TTL"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let after_short = settled(&c, &want).await;
        for id in &on_cut {
            let a = after_short.allocs.iter().find(|a| &a.id == id).unwrap();
            assert!(a.is_live(), "{id} kept through a short cut: {a:?}");
        }

        // Longer than the TTL: down, its allocations lost and replaced.
        grpc.cut();
        beats.cut();
        let cut = Instant::now();
        let state = c.state.clone();
        let down = wait_for("the cut node to go down", SETTLE, async || {
            Ok(match node_status(&c, &cut_node).await {
                Some(NodeStatus::Down) => Progress::Done(cut.elapsed()),
                other => Progress::Waiting(format!("{other:?}")),
            })
        })
        .await
        .unwrap();
        assert!(
            down >= HEARTBEAT_DEADLINE - Duration::from_millis(500),
            "down {down:?} after the cut, before its TTL and grace"
        );
        let replaced = wait_for("its allocs lost and replaced", SETTLE, async || {
            let allocs = state.allocs().await?;
            let lost = on_cut.iter().all(|id| {
                allocs
                    .iter()
                    .any(|a| &a.id == id && a.client_status() == AllocClientStatus::Lost)
            });
            let running = allocs
                .iter()
                .filter(|a| {
                    a.is_live()
                        && a.node_id == other
                        && a.client_status() == AllocClientStatus::Running
                })
                .count();
            Ok(if lost && running == COUNT {
                Progress::Done(cut.elapsed())
            } else {
                Progress::Waiting(format!("{:?}", alloc_histogram(&allocs)))
            })
        })
        .await
        .unwrap();
        grpc.heal();
        beats.heal();
        let healed = Instant::now();
        let back = wait_for("the healed node ready again", CONVERGE, async || {
            Ok(match node_status(&c, &cut_node).await {
                Some(NodeStatus::Ready) => Progress::Done(healed.elapsed()),
                other => Progress::Waiting(format!("{other:?}")),
            })
        })
        .await
        .unwrap();
        let end = settled(&c, &want).await;
        assert!(
            end.allocs
                .iter()
                .filter(|a| a.is_live())
                .all(|a| a.node_id == other),
            "the lost copies stay stopped: {:?}",
            alloc_histogram(&end.allocs)
        );
        none_exited(&mut c);
        eprintln!(
            "partition client round {round}: a {short:?} cut changed nothing; a long cut: down \
             after {down:?}, replaced after {replaced:?}; healed: ready after {back:?}"
        );
    }
}

/// How an etcd member is cut off from the other two.
#[derive(Clone, Copy, Debug)]
enum MemberCut {
    /// Both ways.
    Isolated,
    /// One way: the others do not hear it, it hears them.
    Silenced,
}

/// An etcd member cut off from the other two while every service keeps it
/// among its endpoints: the others have or
/// elect a leader, the cluster keeps placing work, and healed, the member
/// catches up within [`CONVERGE`].
async fn etcd_member_cut(how: MemberCut) {
    for round in 0..crate::rounds() {
        let mut etcd = EtcdCluster::start_partitionable(3).await.unwrap();
        let name = format!("part-member-{how:?}-{round}").to_lowercase();
        let mut c = Cluster::on_etcd(&name, etcd.endpoints(), true)
            .await
            .unwrap();
        c.start_control_plane().await.unwrap();
        c.start_simulated_clients(4, ROOMY).await.unwrap();
        let http = c.http().unwrap();
        let mut want = register(&http, "before", 0..6).await;
        settled(&c, &want).await;

        let raft_leader = wait_for("an etcd leader", SETTLE, async || {
            Ok(match etcd.leader().await {
                Some(i) => Progress::Done(i),
                None => Progress::Waiting("no leader".into()),
            })
        })
        .await
        .unwrap();
        // Isolated: the raft leader, so the other two must elect one.
        // Silenced: member 0, the one every service's store pins first. It
        // still hears the leader, so it believes itself healthy while its
        // state stands still: the services must notice their watches lag
        // and move to another member.
        let victim = match how {
            MemberCut::Isolated => raft_leader,
            MemberCut::Silenced => 0,
        };
        let batch = batch_once::register(&http, "member", 3).await.unwrap();
        match how {
            MemberCut::Isolated => etcd.isolate(victim).unwrap(),
            MemberCut::Silenced => etcd.silence(victim).unwrap(),
        }
        let cut = Instant::now();
        let new_leader = wait_for("a leader among the other two", SETTLE, async || {
            Ok(match etcd.leader().await {
                Some(i) if i != victim => Progress::Done((i, cut.elapsed())),
                other => Progress::Waiting(format!("leader {other:?}")),
            })
        })
        .await
        .unwrap();
        if let MemberCut::Silenced = how {
            // One way indeed: the unheard member still hears the leader.
            let leader_id = etcd.member_id(new_leader.0).await.unwrap();
            wait_for(
                "the silenced member to follow the leader",
                SETTLE,
                async || {
                    Ok(match etcd.leader_seen_by(victim).await {
                        Some(id) if id == leader_id => Progress::Done(()),
                        other => Progress::Waiting(format!("it sees leader {other:?}")),
                    })
                },
            )
            .await
            .unwrap();
        }
        want.extend(register(&http, "during", 0..6).await);
        settled(&c, &want).await;
        let served = cut.elapsed();

        etcd.heal();
        let healed = Instant::now();
        let caught_up = wait_for("the healed member to catch up", CONVERGE, async || {
            let indexes = etcd.raft_indexes().await;
            let leader_at = indexes[new_leader.0];
            Ok(match (indexes[victim], leader_at) {
                (Some(mine), Some(theirs)) if mine + 10 >= theirs => {
                    Progress::Done(healed.elapsed())
                }
                _ => Progress::Waiting(format!("raft indexes {indexes:?}")),
            })
        })
        .await
        .unwrap();
        // A linearizable read through the healed member alone: it serves.
        let alone = caravan_store::EtcdStore::connect_with(caravan_store::EtcdConfig::new(&[etcd
            .endpoints()[victim]
            .as_str()]))
        .await
        .unwrap();
        wait_for("the healed member to serve reads", CONVERGE, async || {
            Ok(match alone.current_revision().await {
                Ok(r) => Progress::Done(r),
                Err(e) => Progress::Waiting(e.to_string()),
            })
        })
        .await
        .unwrap();
        want.extend(register(&http, "after", 0..3).await);
        settled(&c, &want).await;
        batch_once::assert_ran_once(&c.state, &batch, SETTLE).await;
        none_exited(&mut c);
        assert!(
            (0..3).all(|i| etcd.is_up(i)),
            "no etcd member died: {}",
            etcd.logs(20)
        );
        eprintln!(
            "partition etcd {how:?} round {round}: member {victim} cut (raft leader {raft_leader}); \
             member {} led after {:?}; work placed through the cut within {served:?}; \
             healed: caught up after {caught_up:?}",
            new_leader.0, new_leader.1
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_etcd_member_isolated_from_the_other_two_is_survived_and_catches_up() {
    etcd_member_cut(MemberCut::Isolated).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_etcd_member_the_others_cannot_hear_is_survived_and_catches_up() {
    etcd_member_cut(MemberCut::Silenced).await;
}
