//! The gateway describing itself: leader, agent, members and metrics.

use serde_json::json;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, client_node, nomad_job, register_node};

pub async fn the_leader_is_the_gateways_grpc_address(backend: Backend) {
    let gw = TestGateway::start(backend, "http-leader").await;
    let leader = gw.http("GET", "/v1/status/leader", b"").await.json();
    assert_eq!(leader, json!(gw.bound.grpc.to_string()));
    gw.stop().await;
}

pub async fn the_agent_reports_itself_alive(backend: Backend) {
    let gw = TestGateway::start(backend, "http-agent-self").await;
    let me = gw.http("GET", "/v1/agent/self", b"").await.json();
    assert_eq!(me["member"]["Status"], "alive");
    gw.stop().await;
}

pub async fn the_agent_has_one_member(backend: Backend) {
    let gw = TestGateway::start(backend, "http-agent-members").await;
    let members = gw.http("GET", "/v1/agent/members", b"").await.json();
    assert_eq!(members["Members"].as_array().unwrap().len(), 1);
    gw.stop().await;
}

pub async fn json_metrics_count_registered_nodes(backend: Backend) {
    let gw = TestGateway::start(backend, "http-metrics").await;
    register_node(&gw, client_node("n1", "")).await;
    let m = gw.http("GET", "/v1/metrics", b"").await.json();
    let nodes: f64 = m["Gauges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["Name"] == "caravan.nodes")
        .map(|g| g["Value"].as_f64().unwrap())
        .sum();
    assert_eq!(nodes, 1.0, "{m}");
    for list in ["Counters", "Samples", "Points"] {
        assert!(m[list].is_array(), "{list} in {m}");
    }
    gw.stop().await;
}

pub async fn prometheus_metrics_count_registered_nodes(backend: Backend) {
    let gw = TestGateway::start(backend, "http-metrics-prom").await;
    register_node(&gw, client_node("n1", "")).await;
    let prom = gw.http("GET", "/v1/metrics?format=prometheus", b"").await;
    let text = prom.text();
    assert!(text.contains("# TYPE caravan_nodes gauge"), "{text}");
    let nodes: f64 = samples(&text, "caravan_nodes{").iter().sum();
    assert_eq!(nodes, 1.0, "{text}");
    gw.stop().await;
}

/// The values of every sample whose series starts with `series` (a name,
/// or a name and the start of its labels) in a text exposition.
fn samples(text: &str, series: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .collect()
}

pub async fn metrics_are_served_as_text_and_count_job_registrations(backend: Backend) {
    let gw = TestGateway::start(backend, "http-metrics-text").await;
    let registered = "caravan_gateway_evals_created_total{triggered_by=\"job-register\"}";
    let before = gw.http("GET", "/metrics", b"").await;
    let before: f64 = samples(&before.text(), registered).iter().sum();
    let reg = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    assert_eq!(reg.status, 200, "{}", reg.text());
    let after = gw.http("GET", "/metrics", b"").await;
    assert_eq!(after.status, 200);
    assert!(
        after
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")),
        "{:?}",
        after.header("content-type")
    );
    let text = after.text();
    assert!(
        text.contains("# TYPE caravan_gateway_evals_created_total counter"),
        "{text}"
    );
    let now: f64 = samples(&text, registered).iter().sum();
    assert!(now >= before + 1.0, "{before} then {now}");
    // The job is counted from this gateway's cache, and nothing else is.
    let jobs: f64 = samples(&text, "caravan_jobs{").iter().sum();
    assert_eq!(jobs, 1.0, "{text}");
    assert!(
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .all(|l| l.starts_with("caravan_")),
        "every series is Caravan's: {text}"
    );
    gw.stop().await;
}

pub async fn the_only_region_is_the_configured_one(backend: Backend) {
    let gw = TestGateway::start(backend, "http-regions").await;
    let r = gw.http("GET", "/v1/regions", b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!(["global"]));
    gw.stop().await;
    let store = backend.store().await;
    let gw = TestGateway::start_with(store, "http-regions-eu", |c| c.region = "eu".into()).await;
    assert_eq!(
        gw.http("GET", "/v1/regions", b"").await.json(),
        json!(["eu"])
    );
    let me = gw.http("GET", "/v1/agent/self", b"").await.json();
    assert_eq!(me["config"]["Region"], "eu");
    gw.stop().await;
}

pub async fn the_servers_are_this_gateways_address(backend: Backend) {
    let gw = TestGateway::start(backend, "http-agent-servers").await;
    let grpc = gw.bound.grpc.to_string();
    let servers = gw.http("GET", "/v1/agent/servers", b"").await.json();
    assert_eq!(servers, json!([grpc]));
    // Naming the servers it already has changes nothing and succeeds.
    let r = gw
        .http("PUT", &format!("/v1/agent/servers?address={grpc}"), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Another address is refused, not silently dropped; none at all is 400.
    let r = gw
        .http(
            "POST",
            &format!("/v1/agent/servers?address={grpc}&address=10.9.9.9:4647"),
            b"",
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("10.9.9.9:4647"), "{}", r.text());
    assert_eq!(gw.http("PUT", "/v1/agent/servers", b"").await.status, 400);
    gw.stop().await;
}

pub async fn joining_reports_what_joined_like_nomad(backend: Backend) {
    let gw = TestGateway::start(backend, "http-agent-join").await;
    let r = gw.http("PUT", "/v1/agent/join?address=nope", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json();
    assert_eq!(answer["num_joined"], 0);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("Failed to join nope"),
        "{answer}"
    );
    let own = gw.bound.grpc.to_string();
    let answer = gw
        .http("POST", &format!("/v1/agent/join?address={own}"), b"")
        .await
        .json();
    assert_eq!(answer, json!({"num_joined": 1, "error": "", "warning": ""}));
    let r = gw.http("PUT", "/v1/agent/join", b"").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("address"), "{}", r.text());
    assert_eq!(
        gw.http("GET", "/v1/agent/join?address=x", b"").await.status,
        405
    );
    gw.stop().await;
}

pub async fn force_leave_checks_its_arguments(backend: Backend) {
    let gw = TestGateway::start(backend, "http-agent-force-leave").await;
    let r = gw.http("PUT", "/v1/agent/force-leave?node=nope", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.body.is_empty());
    let r = gw
        .http("POST", "/v1/agent/force-leave?node=nope&prune=True", b"")
        .await;
    assert_eq!(r.status, 200);
    let r = gw
        .http("PUT", "/v1/agent/force-leave?node=nope&prune=maybe", b"")
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text().starts_with("prune:"), "{}", r.text());
    assert_eq!(
        gw.http("PUT", "/v1/agent/force-leave", b"").await.status,
        400
    );
    gw.stop().await;
}

pub async fn the_raft_configuration_lists_the_store_members(backend: Backend) {
    let gw = TestGateway::start(backend, "http-raft-config").await;
    let r = gw
        .http("GET", "/v1/operator/raft/configuration?stale=False", b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let config = r.json();
    let servers = config["Servers"].as_array().unwrap();
    let members = gw.store.members().await.unwrap();
    assert_eq!(servers.len(), members.len());
    assert_eq!(servers.iter().filter(|s| s["Leader"] == true).count(), 1);
    for (s, m) in servers.iter().zip(&members) {
        assert_eq!(s["ID"], format!("{:x}", m.id));
        assert_eq!(s["Node"], m.name);
        assert_eq!(s["Voter"], !m.learner);
        assert!(s["RaftProtocol"].is_string());
        if let Some(url) = m.peer_urls.first() {
            assert!(url.ends_with(s["Address"].as_str().unwrap()), "{s}");
        }
    }
    assert!(config["Index"].is_u64());
    let r = gw
        .http("GET", "/v1/operator/raft/configuration?stale=nah", b"")
        .await;
    assert_eq!(r.status, 400);
    gw.stop().await;
}
