//! Allocations: read, list, stop, and a task's log.

use caravan_proto::alloc_service_client::AllocServiceClient;
use caravan_proto::{
    Allocation, GetAllocationRequest, ListAllocationsRequest, LogChunk, ReadLogsRequest,
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
}
