//! ACL decisions on both transports, from one table test: every HTTP route
//! and every gRPC method is called with no token, a read-only token and a
//! management token; each is allowed or refused as its operation's need
//! says, and a gRPC method answers as the HTTP routes of the same
//! operation do (the pairing below is checked against the operations the
//! two tables name).
//! "Refused" is HTTP 403 or gRPC `PERMISSION_DENIED`, both saying
//! "Permission denied"; any other answer (a 404, a validation error, a
//! success) counts as allowed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use caravan_api_gateway::{ACL_METHODS, ACL_ROUTES, AclNeed, AclOp, acl_ops};
use caravan_store::MemStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;

use crate::acl::{bootstrap, client_token, concrete, put_policy, start};
use crate::common::{TestGateway, http_with};

/// Read in namespace `default`, and node, agent and operator read.
const READ_ONLY: &str = r#"
namespace "default" { policy = "read" }
node { policy = "read" }
agent { policy = "read" }
operator { policy = "read" }
"#;

/// Each gRPC method (after `/caravan.v1.`) and the HTTP routes of the same
/// operation.
const TWINS: &[(&str, &[(&str, &str)])] = &[
    (
        "JobService/RegisterJob",
        &[
            ("PUT", "/v1/jobs"),
            ("POST", "/v1/jobs"),
            ("PUT", "/v1/job/{id}"),
            ("POST", "/v1/job/{id}"),
        ],
    ),
    ("JobService/DeregisterJob", &[("DELETE", "/v1/job/{id}")]),
    ("JobService/GetJob", &[("GET", "/v1/job/{id}")]),
    ("JobService/ListJobs", &[("GET", "/v1/jobs")]),
    (
        "JobService/ValidateJob",
        &[("PUT", "/v1/validate/job"), ("POST", "/v1/validate/job")],
    ),
    (
        "JobService/PlanJob",
        &[("PUT", "/v1/job/{id}/plan"), ("POST", "/v1/job/{id}/plan")],
    ),
    (
        "JobService/EvaluateJob",
        &[
            ("PUT", "/v1/job/{id}/evaluate"),
            ("POST", "/v1/job/{id}/evaluate"),
        ],
    ),
    (
        "JobService/ListJobVersions",
        &[("GET", "/v1/job/{id}/versions")],
    ),
    (
        "JobService/JobAllocations",
        &[("GET", "/v1/job/{id}/allocations")],
    ),
    (
        "JobService/JobEvaluations",
        &[("GET", "/v1/job/{id}/evaluations")],
    ),
    ("JobService/JobSummary", &[("GET", "/v1/job/{id}/summary")]),
    (
        "JobService/RevertJob",
        &[
            ("PUT", "/v1/job/{id}/revert"),
            ("POST", "/v1/job/{id}/revert"),
        ],
    ),
    (
        "JobService/SetJobStability",
        &[
            ("PUT", "/v1/job/{id}/stable"),
            ("POST", "/v1/job/{id}/stable"),
        ],
    ),
    (
        "JobService/ScaleJob",
        &[
            ("PUT", "/v1/job/{id}/scale"),
            ("POST", "/v1/job/{id}/scale"),
        ],
    ),
    (
        "JobService/DispatchJob",
        &[
            ("PUT", "/v1/job/{id}/dispatch"),
            ("POST", "/v1/job/{id}/dispatch"),
        ],
    ),
    (
        "JobService/ForcePeriodicJob",
        &[
            ("PUT", "/v1/job/{id}/periodic/force"),
            ("POST", "/v1/job/{id}/periodic/force"),
        ],
    ),
    (
        "EvalService/GetEvaluation",
        &[("GET", "/v1/evaluation/{id}")],
    ),
    ("EvalService/ListEvaluations", &[("GET", "/v1/evaluations")]),
    (
        "EvalService/EvaluationAllocations",
        &[("GET", "/v1/evaluation/{id}/allocations")],
    ),
    (
        "AllocService/GetAllocation",
        &[("GET", "/v1/allocation/{id}")],
    ),
    (
        "AllocService/ListAllocations",
        &[("GET", "/v1/allocations")],
    ),
    (
        "AllocService/StopAllocation",
        &[
            ("PUT", "/v1/allocation/{id}/stop"),
            ("POST", "/v1/allocation/{id}/stop"),
        ],
    ),
    (
        "AllocService/ReadLogs",
        &[("GET", "/v1/client/fs/logs/{alloc_id}")],
    ),
    (
        "AllocService/ListAllocFiles",
        &[("GET", "/v1/client/fs/ls/{alloc_id}")],
    ),
    (
        "AllocService/StatAllocFile",
        &[("GET", "/v1/client/fs/stat/{alloc_id}")],
    ),
    (
        "AllocService/ReadAllocFile",
        &[
            ("GET", "/v1/client/fs/cat/{alloc_id}"),
            ("GET", "/v1/client/fs/readat/{alloc_id}"),
            ("GET", "/v1/client/fs/stream/{alloc_id}"),
        ],
    ),
    ("AllocService/GetHostStats", &[("GET", "/v1/client/stats")]),
    (
        "AllocService/AllocStats",
        &[("GET", "/v1/client/allocation/{alloc_id}/stats")],
    ),
    (
        "AllocService/SignalAlloc",
        &[
            ("PUT", "/v1/client/allocation/{alloc_id}/signal"),
            ("POST", "/v1/client/allocation/{alloc_id}/signal"),
        ],
    ),
    (
        "AllocService/RestartAlloc",
        &[
            ("PUT", "/v1/client/allocation/{alloc_id}/restart"),
            ("POST", "/v1/client/allocation/{alloc_id}/restart"),
        ],
    ),
    (
        "AllocService/GcAlloc",
        &[
            ("GET", "/v1/client/allocation/{alloc_id}/gc"),
            ("PUT", "/v1/client/allocation/{alloc_id}/gc"),
            ("POST", "/v1/client/allocation/{alloc_id}/gc"),
        ],
    ),
    (
        "AllocService/GcNode",
        &[
            ("GET", "/v1/client/gc"),
            ("PUT", "/v1/client/gc"),
            ("POST", "/v1/client/gc"),
        ],
    ),
    ("NodeService/GetNode", &[("GET", "/v1/node/{id}")]),
    ("NodeService/ListNodes", &[("GET", "/v1/nodes")]),
    (
        "NodeService/NodeAllocations",
        &[("GET", "/v1/node/{id}/allocations")],
    ),
    (
        "NodeService/UpdateEligibility",
        &[
            ("PUT", "/v1/node/{id}/eligibility"),
            ("POST", "/v1/node/{id}/eligibility"),
        ],
    ),
    (
        "NodeService/UpdateDrain",
        &[
            ("PUT", "/v1/node/{id}/drain"),
            ("POST", "/v1/node/{id}/drain"),
        ],
    ),
    (
        "NodeService/EvaluateNode",
        &[
            ("PUT", "/v1/node/{id}/evaluate"),
            ("POST", "/v1/node/{id}/evaluate"),
        ],
    ),
    (
        "NodeService/PurgeNode",
        &[
            ("PUT", "/v1/node/{id}/purge"),
            ("POST", "/v1/node/{id}/purge"),
        ],
    ),
    (
        "DeploymentService/GetDeployment",
        &[("GET", "/v1/deployment/{id}")],
    ),
    (
        "DeploymentService/ListDeployments",
        &[("GET", "/v1/deployments")],
    ),
    (
        "DeploymentService/PromoteDeployment",
        &[
            ("PUT", "/v1/deployment/promote/{id}"),
            ("POST", "/v1/deployment/promote/{id}"),
        ],
    ),
    (
        "DeploymentService/FailDeployment",
        &[
            ("PUT", "/v1/deployment/fail/{id}"),
            ("POST", "/v1/deployment/fail/{id}"),
        ],
    ),
    (
        "DeploymentService/PauseDeployment",
        &[
            ("PUT", "/v1/deployment/pause/{id}"),
            ("POST", "/v1/deployment/pause/{id}"),
        ],
    ),
    (
        "DeploymentService/SetAllocHealth",
        &[
            ("PUT", "/v1/deployment/allocation-health/{id}"),
            ("POST", "/v1/deployment/allocation-health/{id}"),
        ],
    ),
    ("StatusService/Leaders", &[("GET", "/v1/status/leader")]),
    ("SystemService/GarbageCollect", &[("PUT", "/v1/system/gc")]),
    ("EventService/Stream", &[("GET", "/v1/event/stream")]),
    ("VariableService/ListVariables", &[("GET", "/v1/vars")]),
    ("VariableService/GetVariable", &[("GET", "/v1/var/{*path}")]),
    (
        "VariableService/PutVariable",
        &[("PUT", "/v1/var/{*path}"), ("POST", "/v1/var/{*path}")],
    ),
    (
        "VariableService/DeleteVariable",
        &[("DELETE", "/v1/var/{*path}")],
    ),
    (
        "ServiceRegistryService/ListServices",
        &[("GET", "/v1/services")],
    ),
    (
        "ServiceRegistryService/GetService",
        &[("GET", "/v1/service/{name}")],
    ),
    (
        "AclService/Bootstrap",
        &[("PUT", "/v1/acl/bootstrap"), ("POST", "/v1/acl/bootstrap")],
    ),
    ("AclService/ListPolicies", &[("GET", "/v1/acl/policies")]),
    ("AclService/GetPolicy", &[("GET", "/v1/acl/policy/{name}")]),
    (
        "AclService/UpsertPolicy",
        &[
            ("PUT", "/v1/acl/policy/{name}"),
            ("POST", "/v1/acl/policy/{name}"),
        ],
    ),
    (
        "AclService/DeletePolicy",
        &[("DELETE", "/v1/acl/policy/{name}")],
    ),
    ("AclService/ListTokens", &[("GET", "/v1/acl/tokens")]),
    (
        "AclService/GetToken",
        &[("GET", "/v1/acl/token/{accessor}")],
    ),
    ("AclService/TokenSelf", &[("GET", "/v1/acl/token/self")]),
    (
        "AclService/UpsertToken",
        &[
            ("PUT", "/v1/acl/token"),
            ("POST", "/v1/acl/token"),
            ("PUT", "/v1/acl/token/{accessor}"),
            ("POST", "/v1/acl/token/{accessor}"),
        ],
    ),
    (
        "AclService/DeleteToken",
        &[("DELETE", "/v1/acl/token/{accessor}")],
    ),
];

/// The operations that read one named policy or token: a client token is
/// allowed only its own, so a read-only token naming nothing it holds is
/// refused (by the handler, with the same words).
const NAMED_ACL_READS: &[AclOp] = &[acl_ops::ACL_POLICY_READ, acl_ops::ACL_TOKEN_READ];

/// Who calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Who {
    Anonymous,
    Reader,
    Management,
}

const EVERYONE: [Who; 3] = [Who::Anonymous, Who::Reader, Who::Management];

/// The namespace capabilities `policy = "read"` grants.
const NAMESPACE_READ: &[&str] = &[
    "list-jobs",
    "parse-job",
    "read-job",
    "read-job-scaling",
    "list-scaling-policies",
    "read-scaling-policy",
];

/// Whether `who` is allowed operation `op` in namespace `default`, on
/// objects that do not exist.
fn allowed(who: Who, op: AclOp) -> bool {
    let AclOp { need, list, .. } = op;
    // The list of node pools is anyone's, cut to what they may read.
    if need == AclNeed::Public || (list && matches!(need, AclNeed::NodePool(_))) {
        return true;
    }
    match who {
        Who::Anonymous => false,
        Who::Management => true,
        Who::Reader => match need {
            AclNeed::Token => !NAMED_ACL_READS.contains(&op),
            AclNeed::Ns(cap) => NAMESPACE_READ.contains(&cap),
            AclNeed::NodeRead | AclNeed::AgentRead | AclNeed::OperatorRead => true,
            AclNeed::AnyRead | AclNeed::ServiceRead => true,
            // The namespace the URL names is not `default`; no node pool
            // or variable is granted.
            AclNeed::NamespaceAny
            | AclNeed::NodePool(_)
            | AclNeed::PoolNodes
            | AclNeed::PoolJobs
            | AclNeed::Var(_) => false,
            AclNeed::NodeWrite
            | AclNeed::AgentWrite
            | AclNeed::OperatorWrite
            | AclNeed::Management
            | AclNeed::Exec => false,
            AclNeed::Public => true,
        },
    }
}

/// An answer: allowed, or refused with the words given.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Allowed(String),
    Refused(String),
}

impl Answer {
    fn allowed(&self) -> bool {
        matches!(self, Answer::Allowed(_))
    }
}

/// The three tokens' secrets.
struct Tokens {
    reader: String,
    root: String,
}

impl Tokens {
    fn of(&self, who: Who) -> Option<&str> {
        match who {
            Who::Anonymous => None,
            Who::Reader => Some(&self.reader),
            Who::Management => Some(&self.root),
        }
    }
}

const PATIENCE: Duration = Duration::from_secs(10);

/// The status line and headers of an answer that may never end (the event
/// stream): its body is read only when refused.
async fn http_head(addr: std::net::SocketAddr, path: &str, token: Option<&str>) -> Answer {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let header = token.map_or(String::new(), |t| format!("X-Nomad-Token: {t}\r\n"));
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{header}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 1024];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "GET {path}: connection closed before the headers");
        raw.extend_from_slice(&buf[..n]);
    }
    let status: u16 = String::from_utf8_lossy(&raw)
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    if status == 403 {
        let answer = http_with(addr, "GET", path, &token_header(token), b"").await;
        return Answer::Refused(answer.text());
    }
    Answer::Allowed(status.to_string())
}

fn token_header(token: Option<&str>) -> Vec<(&str, &str)> {
    token.map(|t| ("X-Nomad-Token", t)).into_iter().collect()
}

async fn call_http(gw: &TestGateway, method: &str, pattern: &str, token: Option<&str>) -> Answer {
    let method = if method == "*" { "GET" } else { method };
    let path = concrete(pattern);
    let call = async {
        if pattern == "/v1/event/stream" {
            return http_head(gw.bound.http, &path, token).await;
        }
        let answer = http_with(gw.bound.http, method, &path, &token_header(token), b"").await;
        if answer.status == 403 {
            Answer::Refused(answer.text())
        } else {
            Answer::Allowed(format!("{} {}", answer.status, answer.text()))
        }
    };
    tokio::time::timeout(PATIENCE, call)
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer in time"))
}

/// A message with no fields: the empty encoding, which every request
/// message decodes from (each field its default), and which skips every
/// field of an answer.
#[derive(Clone, PartialEq, prost::Message)]
struct Empty {}

/// Calls gRPC method `path` with an empty request message. Every call is
/// made as a server stream, which a unary method answers the same way on
/// the wire; an allowed stream is not read.
async fn call_grpc(channel: &Channel, path: &str, token: Option<&str>) -> Answer {
    let call = async {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await.unwrap();
        let mut request = tonic::Request::new(Empty {});
        if let Some(token) = token {
            request
                .metadata_mut()
                .insert("x-nomad-token", token.parse().unwrap());
        }
        let codec = tonic_prost::ProstCodec::<Empty, Empty>::default();
        match grpc
            .server_streaming(request, path.parse().unwrap(), codec)
            .await
        {
            Ok(_) => Answer::Allowed("OK".into()),
            Err(status) if status.code() == tonic::Code::PermissionDenied => {
                Answer::Refused(status.message().to_string())
            }
            Err(status) => Answer::Allowed(format!("{:?} {}", status.code(), status.message())),
        }
    };
    tokio::time::timeout(PATIENCE, call)
        .await
        .unwrap_or_else(|_| panic!("{path}: no answer in time"))
}

/// Checks `answer` against what `need` says for `who`.
fn check(what: &str, who: Who, answer: &Answer, want: bool) {
    assert_eq!(
        answer.allowed(),
        want,
        "{what} as {who:?}: {answer:?}, expected {}",
        if want { "allowed" } else { "refused" }
    );
    if let Answer::Refused(words) = answer {
        assert_eq!(words, "Permission denied", "{what} as {who:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_transports_answer_every_operation_alike() {
    let gw = start(Arc::new(MemStore::new()), "acl-transports").await;
    let root = bootstrap(&gw).await;
    put_policy(&gw, &root, "read-only", READ_ONLY).await;
    let reader = client_token(&gw, &root, &["read-only"]).await;
    let tokens = Tokens {
        reader: reader["SecretID"].as_str().unwrap().to_string(),
        root,
    };
    let channel = gw.channel().await;

    // The pairing names real entries, each method once, and pairs each
    // method with exactly the routes of its operation.
    let mut twin_of: HashMap<&str, &[(&str, &str)]> = HashMap::new();
    for (method, routes) in TWINS {
        let path = format!("/caravan.v1.{method}");
        let rule = ACL_METHODS
            .iter()
            .find(|m| m.path == path)
            .unwrap_or_else(|| panic!("{path} is in no table"));
        assert!(twin_of.insert(rule.path, routes).is_none(), "{path} twice");
        for (verb, pattern) in *routes {
            assert!(
                ACL_ROUTES
                    .iter()
                    .any(|r| r.method == *verb && r.pattern == *pattern),
                "{verb} {pattern} is in no table"
            );
        }
    }
    for rule in ACL_METHODS {
        let mut of_the_op: Vec<(&str, &str)> = ACL_ROUTES
            .iter()
            .filter(|r| r.op == rule.op)
            .map(|r| (r.method, r.pattern))
            .collect();
        let mut paired = twin_of.get(rule.path).copied().unwrap_or_default().to_vec();
        of_the_op.sort();
        paired.sort();
        assert_eq!(
            of_the_op, paired,
            "{}: the routes of {} and its twins here",
            rule.path, rule.op.name
        );
    }
    // An operation's name names one operation.
    let mut by_name: HashMap<&str, AclOp> = HashMap::new();
    let ops = ACL_ROUTES.iter().map(|r| r.op);
    for op in ops.chain(ACL_METHODS.iter().map(|m| m.op)) {
        let seen = *by_name.entry(op.name).or_insert(op);
        assert_eq!(seen, op, "two operations named {}", op.name);
    }

    // Every HTTP route, as its need says.
    let mut http_answers: HashMap<(&str, &str, Who), Answer> = HashMap::new();
    for rule in ACL_ROUTES {
        for who in EVERYONE {
            let answer = call_http(&gw, rule.method, rule.pattern, tokens.of(who)).await;
            let want = allowed(who, rule.op);
            check(
                &format!("{} {}", rule.method, rule.pattern),
                who,
                &answer,
                want,
            );
            http_answers.insert((rule.method, rule.pattern, who), answer);
        }
    }

    // Every gRPC method, as its need says and as its HTTP twins answer.
    let mut twins_compared = 0;
    for rule in ACL_METHODS {
        for who in EVERYONE {
            let answer = call_grpc(&channel, rule.path, tokens.of(who)).await;
            let want = allowed(who, rule.op);
            check(
                &format!("{} ({})", rule.path, rule.op.name),
                who,
                &answer,
                want,
            );
            for (verb, pattern) in twin_of.get(rule.path).copied().unwrap_or_default() {
                let http = &http_answers[&(*verb, *pattern, who)];
                assert_eq!(
                    answer.allowed(),
                    http.allowed(),
                    "{} as {who:?}: {answer:?}, but {verb} {pattern}: {http:?}",
                    rule.path
                );
                twins_compared += 1;
            }
        }
    }
    assert!(ACL_ROUTES.len() > 150, "{} routes", ACL_ROUTES.len());
    assert!(ACL_METHODS.len() > 60, "{} methods", ACL_METHODS.len());
    let twin_routes: usize = TWINS.iter().map(|(_, routes)| routes.len()).sum();
    assert_eq!(twins_compared, EVERYONE.len() * twin_routes);
    gw.stop().await;
}
