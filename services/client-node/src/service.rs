//! The node's own gRPC API (`ClientNodeService`): task logs for `alloc logs`,
//! which the api-gateway proxies here through `Node.http_addr`.

use std::path::PathBuf;
use std::sync::Arc;

use caravan_proto::client_node_service_server::ClientNodeService;
use caravan_proto::{LogChunk, ReadLogsRequest};
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::logs::{LogRequest, stream_log};

/// The tonic face of the node's API.
#[derive(Debug, Clone)]
pub struct ClientNodeApi {
    data_dir: Option<PathBuf>,
    /// Ends every stream when the client stops.
    shutdown: CancellationToken,
    /// One permit per followed stream.
    follows: Arc<Semaphore>,
    max_follows: usize,
}

impl ClientNodeApi {
    /// Serves logs from `data_dir` (`None` for simulated nodes, which keep
    /// none), following at most `max_follows` streams at once.
    pub fn new(data_dir: Option<PathBuf>, shutdown: CancellationToken, max_follows: usize) -> Self {
        ClientNodeApi {
            data_dir,
            shutdown,
            follows: Arc::new(Semaphore::new(max_follows)),
            max_follows,
        }
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
        if self.shutdown.is_cancelled() {
            return Err(Status::unavailable("the client node is shutting down"));
        }
        let req = LogRequest::parse(data_dir, request.get_ref())?;
        let permit = if req.follow {
            Some(self.follows.clone().try_acquire_owned().map_err(|_| {
                Status::resource_exhausted(format!(
                    "this node already follows {} log streams (max_log_follows); \
                     end one or read without follow",
                    self.max_follows
                ))
            })?)
        } else {
            None
        };
        let (tx, rx) = mpsc::channel(16);
        let stop = self.shutdown.clone();
        tokio::spawn(async move {
            stream_log(req, tx, stop).await;
            drop(permit);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    use super::*;

    fn follow() -> Request<ReadLogsRequest> {
        Request::new(ReadLogsRequest {
            alloc_id: "a".into(),
            task: "t".into(),
            stream: "stdout".into(),
            follow: true,
            offset: 0,
        })
    }

    #[tokio::test]
    async fn follows_are_capped_and_end_on_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("allocs/a/alloc/logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("t.stdout.0"), "hi\n").unwrap();
        let shutdown = CancellationToken::new();
        let api = ClientNodeApi::new(Some(dir.path().to_path_buf()), shutdown.clone(), 2);
        let mut a = api.read_logs(follow()).await.unwrap().into_inner();
        let mut b = api.read_logs(follow()).await.unwrap().into_inner();
        let refused = api.read_logs(follow()).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("max_log_follows"), "{refused:?}");
        // Reading without follow is not capped.
        let mut once = api
            .read_logs(Request::new(ReadLogsRequest {
                follow: false,
                ..follow().into_inner()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(once.next().await.unwrap().unwrap().data, b"hi\n");
        assert!(once.next().await.is_none());
        // Ending a follow frees its place.
        assert_eq!(a.next().await.unwrap().unwrap().data, b"hi\n");
        drop(a);
        let mut c = caravan_testkit::wait::eventually_some(
            "a follow place freed",
            std::time::Duration::from_secs(5),
            || {
                let api = api.clone();
                async move { api.read_logs(follow()).await.ok() }
            },
        )
        .await
        .into_inner();
        // Shutdown ends the followed streams.
        assert_eq!(b.next().await.unwrap().unwrap().data, b"hi\n");
        shutdown.cancel();
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while b.next().await.is_some() {}
            while c.next().await.is_some() {}
        })
        .await;
        assert!(ended.is_ok(), "followed streams end on shutdown");
        let late = api.read_logs(follow()).await.unwrap_err();
        assert_eq!(late.code(), tonic::Code::Unavailable);
    }
}
