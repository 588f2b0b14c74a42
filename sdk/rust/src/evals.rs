//! Evaluations: read, list, wait for one to finish, and the allocations an
//! evaluation placed.

use std::time::Duration;

use caravan_proto::eval_service_client::EvalServiceClient;
use caravan_proto::{
    Allocation, EvalStatus, Evaluation, EvaluationAllocationsRequest, GetEvaluationRequest,
    ListEvaluationsRequest,
};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{GrpcChannel, MAX_MESSAGE_BYTES};
use crate::{Read, revision};

fn service(ch: GrpcChannel) -> EvalServiceClient<GrpcChannel> {
    EvalServiceClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The longest one blocking read of [`Evals::wait`] waits before asking again.
const WAIT_SLICE: Duration = Duration::from_secs(10);

/// The evaluation calls of a [`Client`]: [`Client::evals`].
#[derive(Debug, Clone, Copy)]
pub struct Evals<'a> {
    client: &'a Client,
}

impl<'a> Evals<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Evals { client }
    }

    /// One evaluation.
    ///
    /// ```no_run
    /// # async fn demo(client: caravan_client::Client) -> caravan_client::Result<()> {
    /// let eval = client.evals().get("9f0c1a2b-0000-0000-0000-000000000000").await?;
    /// println!("{} triggered by {}", eval.id, eval.triggered_by);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such evaluation.
    pub async fn get(&self, eval_id: &str) -> Result<Evaluation> {
        Ok(self.get_after(eval_id, 0, Duration::ZERO).await?.value)
    }

    /// One evaluation, answered once the state is past `min_revision` (0: at
    /// once) or `wait` has passed: a blocking read.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such evaluation.
    pub async fn get_after(
        &self,
        eval_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Evaluation>> {
        let req = GetEvaluationRequest {
            eval_id: eval_id.to_string(),
            options: self.client.blocking(min_revision, wait),
        };
        let resp = self
            .client
            .read_blocking(wait, req, |ch, r| async move {
                service(ch).get_evaluation(r).await
            })
            .await?;
        let value = resp
            .eval
            .ok_or_else(|| Error::missing("evaluation", eval_id))?;
        Ok(Read {
            value,
            revision: revision(resp.meta),
        })
    }

    /// Waits, by blocking reads, until an evaluation is complete, failed or
    /// canceled, and returns it; a blocked evaluation is returned as it is.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown evaluation; [`Error::Other`] with
    /// DEADLINE_EXCEEDED when `within` passes first.
    pub async fn wait(&self, eval_id: &str, within: Duration) -> Result<Evaluation> {
        let deadline = tokio::time::Instant::now() + within;
        let mut min_revision = 0;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let read = self
                .get_after(eval_id, min_revision, left.min(WAIT_SLICE))
                .await?;
            if settled(read.value.status()) {
                return Ok(read.value);
            }
            if left.is_zero() {
                return Err(Error::Other {
                    code: tonic::Code::DeadlineExceeded,
                    message: format!(
                        "evaluation {eval_id} still {:?} after {within:?}",
                        read.value.status()
                    ),
                });
            }
            min_revision = read.revision + 1;
        }
    }

    /// The evaluations whose ids start with `prefix`.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Evaluation>> {
        let req = ListEvaluationsRequest {
            options: self.client.options(prefix),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).list_evaluations(r).await },
            )
            .await?;
        Ok(resp.evals)
    }

    /// The allocations an evaluation placed or updated.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn allocations(&self, eval_id: &str) -> Result<Vec<Allocation>> {
        let req = EvaluationAllocationsRequest {
            eval_id: eval_id.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move {
                service(ch).evaluation_allocations(r).await
            })
            .await?;
        Ok(resp.allocs)
    }
}

/// Whether an evaluation has nothing left to do for now.
fn settled(status: EvalStatus) -> bool {
    matches!(
        status,
        EvalStatus::Complete | EvalStatus::Failed | EvalStatus::Canceled | EvalStatus::Blocked
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pending_evaluations_are_waited_on() {
        assert!(!settled(EvalStatus::Pending));
        assert!(!settled(EvalStatus::Unspecified));
        assert!(settled(EvalStatus::Complete));
        assert!(settled(EvalStatus::Blocked));
        assert!(settled(EvalStatus::Canceled));
    }
}
