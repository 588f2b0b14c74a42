//! The node's own gRPC API (`ClientNodeService`): task logs for `alloc logs`,
//! the alloc file system for `alloc fs`, host and alloc resource usage, and
//! signal, restart and garbage collection of allocs, and commands run in
//! their tasks (`alloc exec`); the api-gateway proxies
//! here through `Node.http_addr`.

use std::path::PathBuf;
use std::sync::Arc;

use caravan_proto::client_node_service_server::ClientNodeService;
use caravan_proto::{
    AllocActionResponse, AllocFileChunk, AllocFileInfo, AllocPathRequest, AllocResourceUsage,
    AllocStatsRequest, ExecInput, GcAllocRequest, GcNodeRequest, GcNodeResponse, HostStats,
    HostStatsRequest, ListAllocFilesResponse, LogChunk, ReadAllocFileRequest, ReadLogsRequest,
    RestartAllocRequest, SignalAllocRequest,
};
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::fs::{AllocFs, FileRead, stream_file};
use crate::live_allocs::LiveAllocs;
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
    /// The allocs running here, for usage, signals, restarts and GC.
    live: Arc<LiveAllocs>,
    /// The node's CPU in MHz, to turn CPU shares into Nomad's ticks.
    cpu_total_mhz: u64,
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
            live: Arc::default(),
            cpu_total_mhz: 0,
        }
    }

    /// Serves the allocs of `live` on a node of `cpu_total_mhz`.
    pub fn with_allocs(mut self, live: Arc<LiveAllocs>, cpu_total_mhz: u64) -> Self {
        self.live = live;
        self.cpu_total_mhz = cpu_total_mhz;
        self
    }

    fn data_dir(&self) -> Result<&PathBuf, Status> {
        self.data_dir
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("simulated nodes keep no alloc files"))
    }

    fn alloc_fs(&self, alloc_id: &str) -> Result<AllocFs, Status> {
        AllocFs::open(self.data_dir()?, alloc_id)
    }

    /// Runs `produce` on its own task, sending into the stream answered; a
    /// followed stream holds one of the node's follow places while it runs.
    /// Refused once the node is shutting down.
    fn stream<T, F, Fut>(
        &self,
        follow: bool,
        produce: F,
    ) -> Result<ReceiverStream<Result<T, Status>>, Status>
    where
        T: Send + 'static,
        F: FnOnce(mpsc::Sender<Result<T, Status>>, CancellationToken) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        if self.shutdown.is_cancelled() {
            return Err(Status::unavailable("the client node is shutting down"));
        }
        let permit = if follow {
            Some(self.follow_permit()?)
        } else {
            None
        };
        let (tx, rx) = mpsc::channel(16);
        let producing = produce(tx, self.shutdown.clone());
        tokio::spawn(async move {
            producing.await;
            drop(permit);
        });
        Ok(ReceiverStream::new(rx))
    }

    /// A place among the followed streams, or a refusal naming the cap.
    fn follow_permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Status> {
        self.follows.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "this node already follows {} log streams (max_log_follows); \
                 end one or read without follow",
                self.max_follows
            ))
        })
    }
}

fn no_alloc_id() -> Status {
    Status::invalid_argument("must provide a valid alloc id")
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
        let follow = req.follow;
        self.stream(follow, move |tx, stop| stream_log(req, tx, stop))
            .map(Response::new)
    }

    async fn list_alloc_files(
        &self,
        request: Request<AllocPathRequest>,
    ) -> Result<Response<ListAllocFilesResponse>, Status> {
        let req = request.into_inner();
        let files = self.alloc_fs(&req.alloc_id)?.list(&req.path)?;
        Ok(Response::new(ListAllocFilesResponse { files }))
    }

    async fn stat_alloc_file(
        &self,
        request: Request<AllocPathRequest>,
    ) -> Result<Response<AllocFileInfo>, Status> {
        let req = request.into_inner();
        if req.path.is_empty() {
            return Err(Status::invalid_argument("must provide a file name"));
        }
        Ok(Response::new(
            self.alloc_fs(&req.alloc_id)?.stat(&req.path)?,
        ))
    }

    type ReadAllocFileStream = ReceiverStream<Result<AllocFileChunk, Status>>;

    async fn read_alloc_file(
        &self,
        request: Request<ReadAllocFileRequest>,
    ) -> Result<Response<Self::ReadAllocFileStream>, Status> {
        let req = FileRead::parse(self.data_dir()?, request.get_ref())?;
        let follow = req.follow;
        self.stream(follow, move |tx, stop| stream_file(req, tx, stop))
            .map(Response::new)
    }

    async fn get_host_stats(
        &self,
        _request: Request<HostStatsRequest>,
    ) -> Result<Response<HostStats>, Status> {
        let dir = self.data_dir()?;
        Ok(Response::new(
            crate::stats::host_stats(dir, self.cpu_total_mhz).await,
        ))
    }

    async fn alloc_stats(
        &self,
        request: Request<AllocStatsRequest>,
    ) -> Result<Response<AllocResourceUsage>, Status> {
        let req = request.into_inner();
        if req.alloc_id.is_empty() {
            return Err(no_alloc_id());
        }
        let tasks = self.live.tasks(&req.alloc_id).await?;
        if !req.task.is_empty() && !tasks.contains_key(&req.task) {
            return Err(Status::invalid_argument(format!(
                "task {:?} not found in allocation",
                req.task
            )));
        }
        let cpu_mhz = self.cpu_total_mhz;
        let usages = futures::future::join_all(
            tasks
                .into_iter()
                .filter(|(name, _)| req.task.is_empty() || *name == req.task)
                .map(|(name, view)| async move {
                    let usage = match view.handle.as_ref().filter(|_| view.running()) {
                        Some(h) => h.stats(cpu_mhz).await.unwrap_or_else(|e| {
                            tracing::debug!(task = %name, error = %e, "no usage of the task");
                            crate::stats::idle_task_usage()
                        }),
                        None => crate::stats::idle_task_usage(),
                    };
                    (name, usage)
                }),
        )
        .await;
        Ok(Response::new(crate::stats::alloc_usage(
            usages.into_iter().collect(),
        )))
    }

    async fn signal_alloc(
        &self,
        request: Request<SignalAllocRequest>,
    ) -> Result<Response<AllocActionResponse>, Status> {
        let req = request.into_inner();
        if req.alloc_id.is_empty() {
            return Err(no_alloc_id());
        }
        let signal =
            crate::driver::parse_signal_name(&req.signal).map_err(Status::invalid_argument)?;
        let task = (!req.task.is_empty()).then_some(req.task.as_str());
        self.live.signal(&req.alloc_id, task, signal).await?;
        Ok(Response::new(AllocActionResponse {}))
    }

    async fn restart_alloc(
        &self,
        request: Request<RestartAllocRequest>,
    ) -> Result<Response<AllocActionResponse>, Status> {
        let req = request.into_inner();
        if req.alloc_id.is_empty() {
            return Err(no_alloc_id());
        }
        if req.all_tasks && !req.task.is_empty() {
            return Err(Status::invalid_argument(
                "task name cannot be set when restarting all tasks",
            ));
        }
        let task = (!req.task.is_empty()).then_some(req.task);
        self.live
            .restart(&req.alloc_id, task, req.all_tasks)
            .await?;
        Ok(Response::new(AllocActionResponse {}))
    }

    async fn gc_alloc(
        &self,
        request: Request<GcAllocRequest>,
    ) -> Result<Response<AllocActionResponse>, Status> {
        let req = request.into_inner();
        if req.alloc_id.is_empty() {
            return Err(no_alloc_id());
        }
        self.live.gc(&req.alloc_id).await?;
        Ok(Response::new(AllocActionResponse {}))
    }

    type ExecTaskStream = crate::exec_session::ExecStream;

    async fn exec_task(
        &self,
        request: Request<Streaming<ExecInput>>,
    ) -> Result<Response<Self::ExecTaskStream>, Status> {
        if self.shutdown.is_cancelled() {
            return Err(Status::unavailable("the client node is shutting down"));
        }
        crate::exec_session::start(&self.live, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn gc_node(
        &self,
        _request: Request<GcNodeRequest>,
    ) -> Result<Response<GcNodeResponse>, Status> {
        let mut alloc_ids = Vec::new();
        for id in self.live.ids() {
            if self.live.gc(&id).await.is_ok() {
                alloc_ids.push(id);
            }
        }
        Ok(Response::new(GcNodeResponse { alloc_ids }))
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
            from_end: false,
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
