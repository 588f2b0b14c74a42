//! Allocations: read, list, stop; and, served by the client node running
//! one, a task's log, the alloc directory, resource usage, signals and
//! restarts.

use caravan_proto::alloc_service_client::AllocServiceClient;
use caravan_proto::{
    AllocFileChunk, AllocFileInfo, AllocPathRequest, AllocResourceUsage, AllocStatsRequest,
    Allocation, GcAllocRequest, GetAllocationRequest, ListAllocationsRequest, LogChunk,
    ReadAllocFileRequest, ReadLogsRequest, RestartAllocRequest, SignalAllocRequest,
    StopAllocationRequest, StopAllocationResponse,
};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{GrpcChannel, MAX_MESSAGE_BYTES};

fn service(ch: GrpcChannel) -> AllocServiceClient<GrpcChannel> {
    AllocServiceClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The allocation calls of a [`Client`]: [`Client::allocs`].
#[derive(Debug, Clone, Copy)]
pub struct Allocs<'a> {
    client: &'a Client,
}

impl<'a> Allocs<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Allocs { client }
    }

    /// One allocation.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such allocation.
    pub async fn get(&self, alloc_id: &str) -> Result<Allocation> {
        let req = GetAllocationRequest {
            alloc_id: alloc_id.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).get_allocation(r).await },
            )
            .await?;
        resp.alloc
            .ok_or_else(|| Error::missing("allocation", alloc_id))
    }

    /// The allocations whose ids start with `prefix`.
    ///
    /// ```no_run
    /// # async fn demo(client: caravan_client::Client) -> caravan_client::Result<()> {
    /// for alloc in client.allocs().list("").await? {
    ///     println!("{} {} on {}", alloc.id, alloc.name, alloc.node_id);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Allocation>> {
        let req = ListAllocationsRequest {
            options: self.client.options(prefix),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).list_allocations(r).await },
            )
            .await?;
        Ok(resp.allocs)
    }

    /// Stops an allocation (its job's scheduler replaces it); sent once,
    /// since each stop creates an evaluation.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such allocation.
    pub async fn stop(&self, alloc_id: &str) -> Result<StopAllocationResponse> {
        let req = StopAllocationRequest {
            alloc_id: alloc_id.to_string(),
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).stop_allocation(r).await },
            )
            .await
    }

    /// Opens a task's log, served by the client node running the
    /// allocation; opening is retried, the stream itself is not resumed.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation or task.
    pub async fn logs(&self, request: ReadLogsRequest) -> Result<tonic::Streaming<LogChunk>> {
        self.client
            .read(
                request,
                |ch, r| async move { service(ch).read_logs(r).await },
            )
            .await
    }

    /// The details of a file or directory of an allocation's directory
    /// (`/` is its root).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation or path.
    pub async fn stat_file(&self, alloc_id: &str, path: &str) -> Result<AllocFileInfo> {
        let req = AllocPathRequest {
            alloc_id: alloc_id.to_string(),
            path: path.to_string(),
        };
        self.client
            .read(
                req,
                |ch, r| async move { service(ch).stat_alloc_file(r).await },
            )
            .await
    }

    /// The entries of a directory of an allocation's directory.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation or path.
    pub async fn list_files(&self, alloc_id: &str, path: &str) -> Result<Vec<AllocFileInfo>> {
        let req = AllocPathRequest {
            alloc_id: alloc_id.to_string(),
            path: path.to_string(),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).list_alloc_files(r).await },
            )
            .await?;
        Ok(resp.files)
    }

    /// Opens a file of an allocation's directory (from an offset, from its
    /// end, followed as it grows); opening is retried, the stream is not
    /// resumed.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation or path.
    pub async fn read_file(
        &self,
        request: ReadAllocFileRequest,
    ) -> Result<tonic::Streaming<AllocFileChunk>> {
        self.client
            .read(request, |ch, r| async move {
                service(ch).read_alloc_file(r).await
            })
            .await
    }

    /// The resource usage of an allocation (or of one of its tasks).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation or task.
    pub async fn stats(&self, alloc_id: &str, task: Option<&str>) -> Result<AllocResourceUsage> {
        let req = AllocStatsRequest {
            alloc_id: alloc_id.to_string(),
            task: task.unwrap_or_default().to_string(),
        };
        self.client
            .read(req, |ch, r| async move { service(ch).alloc_stats(r).await })
            .await
    }

    /// Sends `signal` (the task's kill signal when empty) to a task, or to
    /// every task; sent once, since each signal is delivered.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation or task.
    pub async fn signal(&self, alloc_id: &str, task: Option<&str>, signal: &str) -> Result<()> {
        let req = SignalAllocRequest {
            alloc_id: alloc_id.to_string(),
            signal: signal.to_string(),
            task: task.unwrap_or_default().to_string(),
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).signal_alloc(r).await },
            )
            .await?;
        Ok(())
    }

    /// Restarts a task (or the running tasks, or with `all_tasks` every
    /// task) in place, returning once they run again; sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation or task.
    pub async fn restart(&self, alloc_id: &str, task: Option<&str>, all_tasks: bool) -> Result<()> {
        let req = RestartAllocRequest {
            alloc_id: alloc_id.to_string(),
            task: task.unwrap_or_default().to_string(),
            all_tasks,
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).restart_alloc(r).await },
            )
            .await?;
        Ok(())
    }

    /// Removes a terminal allocation's directory from its node; sent once
    /// (a second removal could fail for want of the directory).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown allocation.
    pub async fn gc(&self, alloc_id: &str) -> Result<()> {
        let req = GcAllocRequest {
            alloc_id: alloc_id.to_string(),
        };
        self.client
            .write_once(req, |ch, r| async move { service(ch).gc_alloc(r).await })
            .await?;
        Ok(())
    }
}
