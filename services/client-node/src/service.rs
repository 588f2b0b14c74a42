//! The node's own gRPC API (`ClientNodeService`): task logs for `alloc logs`,
//! which the api-gateway proxies here through `Node.http_addr`.

use std::path::PathBuf;

use caravan_proto::client_node_service_server::ClientNodeService;
use caravan_proto::{LogChunk, ReadLogsRequest};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::logs::{LogRequest, stream_log};

/// The tonic face of the node's API.
#[derive(Debug, Clone)]
pub struct ClientNodeApi {
    data_dir: Option<PathBuf>,
    shutdown: CancellationToken,
}

impl ClientNodeApi {
    /// Serves logs from `data_dir` (`None` for simulated nodes, which keep none).
    pub fn new(data_dir: Option<PathBuf>, shutdown: CancellationToken) -> Self {
        ClientNodeApi { data_dir, shutdown }
    }
}

#[tonic::async_trait]
impl ClientNodeService for ClientNodeApi {
    type ReadLogsStream = ReceiverStream<Result<LogChunk, Status>>;

    async fn read_logs(
        &self,
        request: Request<ReadLogsRequest>,
    ) -> Result<Response<Self::ReadLogsStream>, Status> {
        let data_dir = self
            .data_dir
            .as_ref()
            .ok_or_else(|| Status::not_found("simulated nodes keep no task logs"))?;
        let req = LogRequest::parse(data_dir, request.get_ref())?;
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(stream_log(req, tx, self.shutdown.clone()));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
