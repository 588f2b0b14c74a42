//! One trace per evaluation, across processes: every service exports its
//! spans over OTLP to a collector this test runs (the collector's trace
//! service from `opentelemetry-proto`), a job is registered with a known
//! `traceparent`, and the spans of that one trace id are looked for in each
//! process: the gateway's request, the broker's dequeue, the worker's
//! scheduling and plan submission, the applier's verification and commit,
//! and the client's start of the task.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use caravan_integration_tests::{Cluster, Progress, jobs, wait_for};
use hyper::Method;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use parking_lot::Mutex;

use crate::{STEP, wait_running};

/// One exported span: the process it came from, its name, trace and
/// attributes.
#[derive(Debug, Clone)]
struct Seen {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: BTreeMap<String, String>,
    start_unix_ns: u64,
    duration: Duration,
}

/// An OTLP/gRPC collector keeping every span it is sent.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<Seen>>>);

fn text(attrs: &[KeyValue]) -> BTreeMap<String, String> {
    attrs
        .iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(s) => s.clone(),
                AnyValue::IntValue(i) => i.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                AnyValue::DoubleValue(d) => d.to_string(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut seen = self.0.lock();
        for resource in request.into_inner().resource_spans {
            let service = resource
                .resource
                .as_ref()
                .map(|r| text(&r.attributes))
                .and_then(|a| a.get("service.name").cloned())
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    seen.push(Seen {
                        service: service.clone(),
                        name: span.name.clone(),
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        attributes: text(&span.attributes),
                        start_unix_ns: span.start_time_unix_nano,
                        duration: Duration::from_nanos(
                            span.end_time_unix_nano
                                .saturating_sub(span.start_time_unix_nano),
                        ),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Collector {
    fn of_trace(&self, trace_id: &str) -> Vec<Seen> {
        self.0
            .lock()
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    }
}

/// Starts the collector on a free loopback port; returns its URL.
async fn collector() -> (Collector, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let collector = Collector::default();
    let service = TraceServiceServer::new(collector.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (collector, format!("http://{addr}"))
}

/// The span `name` of `service` in `spans`, if exported.
fn find<'a>(spans: &'a [Seen], service: &str, name: &str) -> Option<&'a Seen> {
    spans
        .iter()
        .find(|s| s.service == service && s.name == name)
}

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

#[tokio::test]
async fn one_trace_connects_the_register_to_the_commit_and_the_task_start() {
    let (collector, endpoint) = collector().await;
    let telemetry = [
        ("telemetry.otlp_endpoint", endpoint.as_str()),
        ("telemetry.export_delay_ms", "100"),
    ];
    let mut c = Cluster::new("traces").await.unwrap();
    let gw = c.start_gateway(&telemetry).await.unwrap();
    c.start_broker(&telemetry).await.unwrap();
    c.start_applier(&telemetry).await.unwrap();
    c.start_worker(&telemetry).await.unwrap();
    c.start_deployment_watcher(&telemetry).await.unwrap();
    for service in [
        caravan_integration_tests::Service::EvalBroker,
        caravan_integration_tests::Service::PlanApplier,
    ] {
        c.wait_leader(service).await.unwrap();
    }
    let mut client = vec![("drivers", "raw_exec")];
    client.extend(telemetry);
    c.start_client("traced", &client).await.unwrap();

    let job = jobs::service_job("traced", 1, jobs::raw_exec_task("exec sleep 300"));
    let body = serde_json::to_vec(&job).unwrap();
    let parent = format!("00-{TRACE_ID}-00f067aa0ba902b7-01");
    let reply = caravan_integration_tests::HttpApi::new(gw.http)
        .request_with(
            Method::PUT,
            "/v1/jobs",
            Some(body),
            &[("traceparent", parent.as_str())],
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text());
    let eval_id = jobs::eval_id(&reply.json().unwrap()).unwrap();
    wait_running(&c, "traced", 1).await;

    // Each hop, by the process that exports it.
    let wanted = [
        ("api-gateway", "http"),
        ("eval-broker", "broker.enqueue"),
        ("eval-broker", "broker.dequeue"),
        ("scheduler-worker", "eval"),
        ("scheduler-worker", "snapshot.wait"),
        ("scheduler-worker", "schedule"),
        ("scheduler-worker", "plan.submit"),
        ("plan-applier", "grpc"),
        ("plan-applier", "plan.verify"),
        ("plan-applier", "plan.commit"),
        ("eval-broker", "grpc"),
        ("client-node", "task.start"),
    ];
    let spans = wait_for("every hop's span in the trace", STEP, async || {
        let spans = collector.of_trace(TRACE_ID);
        let missing: Vec<String> = wanted
            .iter()
            .filter(|(service, name)| find(&spans, service, name).is_none())
            .map(|(service, name)| format!("{service}/{name}"))
            .collect();
        Ok(if missing.is_empty() {
            Progress::Done(spans)
        } else {
            let have: BTreeSet<String> = collector
                .0
                .lock()
                .iter()
                .map(|s| format!("{}/{}", s.service, s.name))
                .collect();
            Progress::Waiting(format!(
                "missing {missing:?}; spans seen (any trace): {have:?}"
            ))
        })
    })
    .await
    .unwrap();

    let eval = find(&spans, "scheduler-worker", "eval").unwrap();
    assert_eq!(eval.attributes["id"], eval_id, "{eval:?}");
    assert_eq!(eval.attributes["placements"], "1", "{eval:?}");
    assert_eq!(eval.attributes["blocked"], "0", "{eval:?}");
    let task = find(&spans, "client-node", "task.start").unwrap();
    assert_eq!(task.attributes["task"], "t", "{task:?}");
    // The commit is a child of the applier's request span, which is the
    // worker's plan submission's child.
    let submit = find(&spans, "scheduler-worker", "plan.submit").unwrap();
    let request = spans
        .iter()
        .find(|s| s.service == "plan-applier" && s.parent_span_id == submit.span_id)
        .unwrap_or_else(|| panic!("no applier span under the plan submission: {spans:#?}"));
    let commit = find(&spans, "plan-applier", "plan.commit").unwrap();
    assert_eq!(commit.parent_span_id, request.span_id, "{spans:#?}");
    // The plan's token check is the broker's request under the applier's.
    let check = spans
        .iter()
        .find(|s| s.service == "eval-broker" && s.parent_span_id == request.span_id)
        .unwrap_or_else(|| panic!("no token check under the applier's request: {spans:#?}"));
    assert!(
        check
            .attributes
            .get("method")
            .is_some_and(|m| m.contains("OutstandingReset")),
        "{check:?}"
    );
    // The trace as a reader would see it, for the log: each span's start
    // after the first and its length.
    let mut timeline: Vec<&Seen> = spans.iter().collect();
    timeline.sort_by_key(|s| s.start_unix_ns);
    let first = timeline[0].start_unix_ns;
    for s in timeline {
        let what = s
            .attributes
            .get("route")
            .or_else(|| s.attributes.get("method"))
            .map_or("", String::as_str);
        println!(
            "+{:>8.3} ms {:>8.3} ms  {:<18} {:<15} {what}",
            (s.start_unix_ns - first) as f64 / 1e6,
            s.duration.as_secs_f64() * 1e3,
            s.service,
            s.name,
        );
    }
    c.shutdown();
}
