//! Task logs: the gateway proxies them from the node that runs the
//! allocation, over HTTP (plain or framed) and over gRPC.

use std::pin::Pin;

use caravan_proto::client_node_service_server::{ClientNodeService, ClientNodeServiceServer};
use caravan_proto::{
    AllocActionResponse, AllocFileChunk, AllocFileInfo, AllocPathRequest, AllocResourceUsage,
    AllocStatsRequest, ExecInput, ExecOutput, GcAllocRequest, GcNodeRequest, GcNodeResponse,
    HostStats, HostStatsRequest, ListAllocFilesResponse, LogChunk, ReadAllocFileRequest,
    ReadLogsRequest, RestartAllocRequest, SignalAllocRequest,
};
use futures::Stream;

use crate::common::{Backend, TestGateway};
use crate::fixtures::node_running_web;

/// A client node that serves one fixed log.
struct FakeNode;

type Chunks = Pin<Box<dyn Stream<Item = Result<LogChunk, tonic::Status>> + Send>>;
type FileChunks = Pin<Box<dyn Stream<Item = Result<AllocFileChunk, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl ClientNodeService for FakeNode {
    type ReadLogsStream = Chunks;

    async fn read_logs(
        &self,
        request: tonic::Request<ReadLogsRequest>,
    ) -> Result<tonic::Response<Chunks>, tonic::Status> {
        let req = request.into_inner();
        let text = format!("{} of {} says hello\n", req.stream, req.task);
        let chunks = vec![
            // A node that names no file (the first log file is meant).
            Ok(LogChunk {
                data: text.as_bytes()[..5].to_vec(),
                offset: 0,
                file: String::new(),
            }),
            // The rest from the log's next rotated file.
            Ok(LogChunk {
                data: text.as_bytes()[5..].to_vec(),
                offset: 5,
                file: format!("alloc/logs/{}.{}.1", req.task, req.stream),
            }),
        ];
        Ok(tonic::Response::new(Box::pin(futures::stream::iter(
            chunks,
        ))))
    }

    // The rest of the node's API is not this fake's: the client_fs tests
    // run a real node.

    async fn list_alloc_files(
        &self,
        _: tonic::Request<AllocPathRequest>,
    ) -> Result<tonic::Response<ListAllocFilesResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    async fn stat_alloc_file(
        &self,
        _: tonic::Request<AllocPathRequest>,
    ) -> Result<tonic::Response<AllocFileInfo>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    type ReadAllocFileStream = FileChunks;

    async fn read_alloc_file(
        &self,
        _: tonic::Request<ReadAllocFileRequest>,
    ) -> Result<tonic::Response<FileChunks>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    async fn get_host_stats(
        &self,
        _: tonic::Request<HostStatsRequest>,
    ) -> Result<tonic::Response<HostStats>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    async fn alloc_stats(
        &self,
        _: tonic::Request<AllocStatsRequest>,
    ) -> Result<tonic::Response<AllocResourceUsage>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    async fn signal_alloc(
        &self,
        _: tonic::Request<SignalAllocRequest>,
    ) -> Result<tonic::Response<AllocActionResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    async fn restart_alloc(
        &self,
        _: tonic::Request<RestartAllocRequest>,
    ) -> Result<tonic::Response<AllocActionResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    async fn gc_alloc(
        &self,
        _: tonic::Request<GcAllocRequest>,
    ) -> Result<tonic::Response<AllocActionResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    async fn gc_node(
        &self,
        _: tonic::Request<GcNodeRequest>,
    ) -> Result<tonic::Response<GcNodeResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }

    type ExecTaskStream = Pin<Box<dyn Stream<Item = Result<ExecOutput, tonic::Status>> + Send>>;

    async fn exec_task(
        &self,
        _: tonic::Request<tonic::Streaming<ExecInput>>,
    ) -> Result<tonic::Response<Self::ExecTaskStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("fake node"))
    }
}

/// A gateway that knows alloc `a1` on node `n1`, which is a [`FakeNode`]
/// serving until the gateway shuts down.
async fn gateway_with_log_node(backend: Backend, name: &str) -> TestGateway {
    let gw = TestGateway::start(backend, name).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node_addr = listener.local_addr().unwrap();
    let stop = gw.shutdown.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ClientNodeServiceServer::new(FakeNode))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                stop.cancelled_owned(),
            ),
    );
    node_running_web(&gw, &node_addr.to_string()).await;
    gw
}

pub async fn plain_logs_are_proxied_from_the_node(backend: Backend) {
    let gw = gateway_with_log_node(backend, "http-logs-plain").await;
    let r = gw
        .http(
            "GET",
            "/v1/client/fs/logs/a1?task=app&type=stderr&plain=true",
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "stderr of app says hello\n");
    gw.stop().await;
}

pub async fn framed_logs_carry_the_nodes_offsets(backend: Backend) {
    let gw = gateway_with_log_node(backend, "http-logs-framed").await;
    let framed = gw
        .http("GET", "/v1/client/fs/logs/a1?task=app&type=stdout", b"")
        .await;
    assert_eq!(framed.status, 200);
    assert!(framed.text().contains("\"Offset\":5"), "{}", framed.text());
    assert!(
        framed
            .text()
            .contains("\"File\":\"alloc/logs/app.stdout.0\""),
        "{}",
        framed.text()
    );
    assert!(
        framed
            .text()
            .contains("\"File\":\"alloc/logs/app.stdout.1\""),
        "{}",
        framed.text()
    );
    gw.stop().await;
}

pub async fn logs_of_an_unknown_task_are_400(backend: Backend) {
    let gw = gateway_with_log_node(backend, "http-logs-task").await;
    assert_eq!(
        gw.http("GET", "/v1/client/fs/logs/a1?task=nope", b"")
            .await
            .status,
        400
    );
    gw.stop().await;
}

pub async fn logs_of_an_unknown_allocation_are_404(backend: Backend) {
    let gw = gateway_with_log_node(backend, "http-logs-alloc").await;
    assert_eq!(
        gw.http("GET", "/v1/client/fs/logs/zzz?task=app", b"")
            .await
            .status,
        404
    );
    gw.stop().await;
}

pub async fn grpc_read_logs_streams_the_nodes_log(backend: Backend) {
    let gw = gateway_with_log_node(backend, "http-logs-grpc").await;
    let mut allocs =
        caravan_proto::alloc_service_client::AllocServiceClient::new(gw.channel().await);
    let mut stream = allocs
        .read_logs(ReadLogsRequest {
            alloc_id: "a1".into(),
            task: "app".into(),
            stream: "stdout".into(),
            follow: false,
            offset: 0,
            from_end: false,
        })
        .await
        .unwrap()
        .into_inner();
    let mut data = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        data.extend(chunk.data);
    }
    assert_eq!(
        String::from_utf8(data).unwrap(),
        "stdout of app says hello\n"
    );
    gw.stop().await;
}
