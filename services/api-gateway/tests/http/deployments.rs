//! Deployments over HTTP: the gateway reads them from the store and steers
//! them through the deployment-watcher leader.

use std::time::Duration;

use caravan_proto::deployment_watcher_service_server::{
    DeploymentWatcherService, DeploymentWatcherServiceServer,
};
use caravan_proto::{
    Deployment, DeploymentStatus, WatcherAllocHealthRequest, WatcherFailRequest,
    WatcherPauseRequest, WatcherPromoteRequest, WatcherResponse,
};
use caravan_state::encode;
use caravan_testkit::wait::holds_within;
use serde_json::json;

use crate::common::{Backend, TestGateway};
use crate::fixtures::body;

/// A deployment-watcher leader that records what it was asked.
#[derive(Clone, Default)]
struct FakeWatcher {
    promoted: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl DeploymentWatcherService for FakeWatcher {
    async fn promote(
        &self,
        request: tonic::Request<WatcherPromoteRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        self.promoted
            .lock()
            .push(request.into_inner().deployment_id);
        Ok(tonic::Response::new(WatcherResponse {
            eval_id: "e-promote".into(),
            revision: 42,
        }))
    }
    async fn fail(
        &self,
        _request: tonic::Request<WatcherFailRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        Err(tonic::Status::failed_precondition(
            "deployment is not active",
        ))
    }
    async fn pause(
        &self,
        _request: tonic::Request<WatcherPauseRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        Ok(tonic::Response::new(WatcherResponse::default()))
    }
    async fn set_alloc_health(
        &self,
        _request: tonic::Request<WatcherAllocHealthRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        Ok(tonic::Response::new(WatcherResponse::default()))
    }
}

/// A gateway whose deployment-watcher leader is a [`FakeWatcher`], with the
/// running deployment `d1` of job `web` listed.
struct Steered {
    gw: TestGateway,
    watcher: FakeWatcher,
    lease: caravan_store::LeaseId,
}

impl Steered {
    async fn start(backend: Backend, name: &str) -> Steered {
        let gw = TestGateway::start(backend, name).await;
        let watcher = FakeWatcher::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(DeploymentWatcherServiceServer::new(watcher.clone()))
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    gw.shutdown.clone().cancelled_owned(),
                ),
        );
        let lease = gw.store.lease_grant(30).await.unwrap();
        gw.store
            .campaign(
                &gw.keys.leader("deployment-watcher"),
                addr.to_string().as_bytes(),
                lease.id,
            )
            .await
            .unwrap();
        let mut d = Deployment {
            id: "d1".into(),
            namespace: "default".into(),
            job_id: "web".into(),
            ..Default::default()
        };
        d.set_status(DeploymentStatus::Running);
        gw.store
            .put(&gw.keys.deployment("d1"), &encode(&d), 0)
            .await
            .unwrap();
        let listed = holds_within(Duration::from_secs(5), || async {
            gw.http("GET", "/v1/deployments", b"").await.json() != json!([])
        })
        .await;
        assert!(listed);
        Steered {
            gw,
            watcher,
            lease: lease.id,
        }
    }

    /// Gives up the leadership and stops the gateway.
    async fn stop(self) {
        self.gw.store.lease_revoke(self.lease).await.unwrap();
        self.gw.stop().await;
    }
}

pub async fn a_stored_deployment_reads_back_in_nomad_json(backend: Backend) {
    let s = Steered::start(backend, "http-deployment-read").await;
    let got = s.gw.http("GET", "/v1/deployment/d1", b"").await.json();
    assert_eq!(got["Status"], "running");
    assert_eq!(got["JobID"], "web");
    s.stop().await;
}

pub async fn a_promotion_is_forwarded_to_the_watcher_leader(backend: Backend) {
    let s = Steered::start(backend, "http-deployment-promote").await;
    let r =
        s.gw.http(
            "POST",
            "/v1/deployment/promote/d1",
            &body(&json!({"All": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["EvalID"], "e-promote");
    assert_eq!(s.watcher.promoted.lock().as_slice(), ["d1".to_string()]);
    s.stop().await;
}

pub async fn the_watchers_refusal_is_passed_on_as_400(backend: Backend) {
    let s = Steered::start(backend, "http-deployment-fail").await;
    let r = s.gw.http("POST", "/v1/deployment/fail/d1", b"").await;
    assert_eq!(
        r.status,
        400,
        "the watcher's refusal is passed on: {}",
        r.text()
    );
    assert!(r.text().contains("not active"));
    s.stop().await;
}

pub async fn promoting_an_unknown_deployment_is_404(backend: Backend) {
    let s = Steered::start(backend, "http-deployment-404").await;
    let r = s.gw.http("POST", "/v1/deployment/promote/nope", b"").await;
    assert_eq!(r.status, 404);
    s.stop().await;
}

/// Stores deployment `id` of job `web` with `status`, and waits until the
/// gateway reads it.
async fn store_deployment(gw: &TestGateway, id: &str, status: DeploymentStatus) {
    let mut d = Deployment {
        id: id.into(),
        namespace: "default".into(),
        job_id: "web".into(),
        ..Default::default()
    };
    d.set_status(status);
    gw.store
        .put(&gw.keys.deployment(id), &encode(&d), 0)
        .await
        .unwrap();
    let seen = holds_within(Duration::from_secs(5), || async {
        gw.http("GET", &format!("/v1/deployment/{id}"), b"")
            .await
            .status
            == 200
    })
    .await;
    assert!(seen, "deployment {id} never showed");
}

pub async fn steering_a_terminal_deployment_is_refused_in_nomads_words(backend: Backend) {
    let s = Steered::start(backend, "http-deployment-terminal").await;
    store_deployment(&s.gw, "d2", DeploymentStatus::Successful).await;
    for (path, request, want) in [
        (
            "/v1/deployment/promote/d2",
            json!({"All": true, "DeploymentID": "d2"}),
            "can't promote terminal deployment",
        ),
        (
            "/v1/deployment/promote/d2",
            json!({"Groups": null, "DeploymentID": "d2"}),
            "can't promote terminal deployment",
        ),
        (
            "/v1/deployment/fail/d2",
            json!({"DeploymentID": "d2"}),
            "can't fail terminal deployment",
        ),
        (
            "/v1/deployment/pause/d2",
            json!({"Pause": true, "DeploymentID": "d2"}),
            "can't pause terminal deployment",
        ),
        (
            "/v1/deployment/pause/d2",
            json!({"Pause": false, "DeploymentID": "d2"}),
            "can't resume terminal deployment",
        ),
        (
            "/v1/deployment/allocation-health/d2",
            json!({"UnhealthyAllocationIDs": ["a1"], "DeploymentID": "d2"}),
            "can't set health of allocations for a terminal deployment",
        ),
    ] {
        let r = s.gw.http("POST", path, &body(&request)).await;
        assert_eq!(r.status, 400, "{path} {request}");
        assert_eq!(r.text(), want, "{path} {request}");
    }
    assert!(
        s.watcher.promoted.lock().is_empty(),
        "nothing was forwarded"
    );
    s.stop().await;
}

pub async fn allocation_health_checks_its_arguments_before_the_deployment(backend: Backend) {
    let s = Steered::start(backend, "http-deployment-health-args").await;
    store_deployment(&s.gw, "d2", DeploymentStatus::Failed).await;
    // No allocation named: refused before the deployment (unknown or
    // terminal) is looked at.
    for path in [
        "/v1/deployment/allocation-health/d2",
        "/v1/deployment/allocation-health/nope",
    ] {
        for request in [
            json!({"DeploymentID": path.rsplit('/').next().unwrap()}),
            json!({"HealthyAllocationIDs": [], "UnhealthyAllocationIDs": null}),
        ] {
            let r = s.gw.http("POST", path, &body(&request)).await;
            assert_eq!(r.status, 400, "{path} {request}");
            assert!(
                r.text()
                    .contains("must specify at least one healthy/unhealthy allocation ID"),
                "{}",
                r.text()
            );
        }
    }
    let r =
        s.gw.http(
            "POST",
            "/v1/deployment/allocation-health/d2",
            &body(&json!({"HealthyAllocationIDs": "a1"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.text().starts_with("HealthyAllocationIDs:"),
        "{}",
        r.text()
    );
    let r =
        s.gw.http(
            "POST",
            "/v1/deployment/allocation-health/d1",
            &body(&json!({"HealthyAllocationIDs": ["a1"], "DeploymentID": "d2"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("Deployment ID does not match"),
        "{}",
        r.text()
    );
    // A running deployment with an allocation named goes to the watcher.
    let r =
        s.gw.http(
            "POST",
            "/v1/deployment/allocation-health/d1",
            &body(&json!({"HealthyAllocationIDs": ["a1"], "DeploymentID": "d1"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    s.stop().await;
}
