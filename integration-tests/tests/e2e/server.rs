//! `caravan server`: the eval-broker, plan-applier, deployment-watcher and
//! a scheduler-worker in one process, with one watch cache between them.
//! Two such processes are replicas of each other: jobs run through them,
//! and when the process that leads is killed, the other takes every
//! leadership over and jobs still run.

use caravan_integration_tests::service_traffic;
use caravan_integration_tests::{Cluster, Service, jobs};

use crate::wait_running;

const ALL: [Service; 4] = [
    Service::EvalBroker,
    Service::PlanApplier,
    Service::DeploymentWatcher,
    Service::SchedulerWorker,
];

async fn run_job(c: &Cluster, id: &str, count: usize) {
    let job = jobs::service_job(id, count as i64, jobs::mock_task(50, 32));
    c.http()
        .unwrap()
        .put_json("/v1/jobs", &job)
        .await
        .unwrap()
        .ok_json()
        .unwrap();
    wait_running(c, id, count).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_processes_share_one_watch_and_fail_over_as_a_whole() {
    let mut c = Cluster::new("server-mode").await.unwrap();
    c.start_gateway(&[]).await.unwrap();
    let first = c.start_server(&ALL, &[], &[]).await.unwrap();
    for service in [
        Service::EvalBroker,
        Service::PlanApplier,
        Service::DeploymentWatcher,
    ] {
        let leader = c.wait_leader(service).await.unwrap();
        let i = ALL.iter().position(|s| *s == service).unwrap();
        assert_eq!(
            leader,
            first[i].to_string(),
            "{} leads in server-1",
            service.name()
        );
    }
    c.start_server(&ALL, &[], &[]).await.unwrap();
    c.start_simulated_clients(2, &[]).await.unwrap();
    run_job(&c, "one", 4).await;

    // Every alloc write reached the gateway's watch once; the server
    // process, with four services, received each once too, not four times.
    let metrics = c.metrics_addrs();
    let readings = service_traffic::read_all(&metrics).await;
    let allocs = |name: &str| {
        readings
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.watch_events("allocs"))
            .unwrap_or_else(|| panic!("no metrics of {name}: {metrics:?}"))
    };
    let (gateway, server) = (allocs("api-gateway-1"), allocs("server-1"));
    assert!(
        gateway >= 4.0,
        "the gateway saw the job's allocs: {gateway}"
    );
    assert!(
        server <= gateway,
        "one watch in the server process: {server} alloc events vs the gateway's {gateway}"
    );

    // The worker beside the leaders called them directly; the other
    // server's worker, whose leaders are in server-1, over the network.
    const DEQUEUE: &str = "/caravan.v1.EvalBrokerService/Dequeue";
    let calls = |name: &str| {
        readings
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.grpc_calls(DEQUEUE))
            .unwrap_or_else(|| panic!("no metrics of {name}: {metrics:?}"))
    };
    let ((served, direct), (_, other_direct)) = (calls("server-1"), calls("server-2"));
    assert!(
        direct >= 1.0,
        "server-1's worker dequeued in process: {direct}"
    );
    assert!(
        served >= 1.0,
        "server-2's worker dequeued from server-1 over the network: {served}"
    );
    assert_eq!(
        other_direct, 0.0,
        "server-2 leads nothing, so calls nothing directly"
    );

    // `caravan server -health` (the containers' healthcheck) finds every
    // service of a live server SERVING, and fails once the process is gone.
    let (healthy, said) = c.server_health("server-1").await.unwrap();
    assert!(healthy, "{said}");
    for service in ALL {
        assert!(said.contains(&format!("{} at", service.name())), "{said}");
    }

    let broker = c.wait_leader(Service::EvalBroker).await.unwrap();
    c.crash_named("server-1").unwrap();
    let (healthy, said) = c.server_health("server-1").await.unwrap();
    assert!(!healthy && said.contains("eval-broker"), "{said}");
    for service in [
        Service::EvalBroker,
        Service::PlanApplier,
        Service::DeploymentWatcher,
    ] {
        let old = first[ALL.iter().position(|s| *s == service).unwrap()].to_string();
        c.wait_leader_other_than(service, Some(&old)).await.unwrap();
    }
    assert_ne!(c.wait_leader(Service::EvalBroker).await.unwrap(), broker);
    run_job(&c, "two", 3).await;
    // Now server-2 leads, and its worker calls its own broker directly.
    let readings = service_traffic::read_all(&c.metrics_addrs()).await;
    let server_2 = readings
        .iter()
        .find(|(n, _)| n == "server-2")
        .map(|(_, r)| r)
        .expect("server-2's metrics");
    let (_, direct) = server_2.grpc_calls(DEQUEUE);
    assert!(
        direct >= 1.0,
        "server-2's worker dequeued in process: {direct}"
    );
    // Its plans went to its own applier in process, none over its port.
    let (served, handed) = server_2.grpc_calls("/caravan.v1.PlanApplierService/SubmitPlan");
    assert!(
        handed >= 1.0 && served == 0.0,
        "server-2's worker planned in process: {handed} direct, {served} served"
    );
}
