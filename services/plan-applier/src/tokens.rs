//! The token check: before committing, the applier asks the eval broker's
//! leader to reset the eval's nack timer with the plan's delivery token. A
//! broker that no longer knows the token (the eval was redelivered, or the
//! broker failed over) refuses the plan, so a worker holding a stale
//! delivery cannot commit.

use std::time::Duration;

use async_trait::async_trait;
use caravan_proto::OutstandingResetRequest;
use caravan_proto::eval_broker_service_client::EvalBrokerServiceClient;
use caravan_runtime::leader::LeaderChannel;
use caravan_runtime::status::leader_hint;
use tonic::Code;

use crate::error::ApplierError;

/// How many times a token check follows a leader change before giving up.
const ATTEMPTS: usize = 3;

/// Pause before asking again when no broker leader is known.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Checks that a delivery token is outstanding, extending its nack timer.
#[async_trait]
pub trait TokenCheck: Send + Sync + 'static {
    /// `Ok` when the broker holds `token` for `eval_id`;
    /// [`ApplierError::TokenRefused`] when it does not;
    /// [`ApplierError::BrokerUnavailable`] when it could not be asked.
    async fn check(&self, eval_id: &str, token: &str) -> Result<(), ApplierError>;
}

/// The token check against the eval broker's leader over gRPC.
pub struct BrokerTokens {
    channel: LeaderChannel,
    timeout: Duration,
}

impl BrokerTokens {
    /// Asks the leader `channel` follows, each call bounded by `timeout`.
    pub fn new(channel: LeaderChannel, timeout: Duration) -> Self {
        BrokerTokens { channel, timeout }
    }
}

#[async_trait]
impl TokenCheck for BrokerTokens {
    async fn check(&self, eval_id: &str, token: &str) -> Result<(), ApplierError> {
        let mut last = String::from("no attempt made");
        for _ in 0..ATTEMPTS {
            let channel = match self.channel.channel().await {
                Ok(c) => c,
                Err(status) => {
                    last = status.message().to_string();
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            };
            let mut request = tonic::Request::new(OutstandingResetRequest {
                eval_id: eval_id.to_string(),
                token: token.to_string(),
            });
            request.set_timeout(self.timeout);
            match EvalBrokerServiceClient::new(channel)
                .outstanding_reset(request)
                .await
            {
                Ok(_) => return Ok(()),
                Err(status) => {
                    self.channel.on_error(&status);
                    match status.code() {
                        Code::Unavailable
                        | Code::DeadlineExceeded
                        | Code::Unknown
                        | Code::Cancelled => {
                            last = status.message().to_string();
                            if leader_hint(&status).is_none() {
                                tokio::time::sleep(RETRY_PAUSE).await;
                            }
                        }
                        _ => {
                            return Err(ApplierError::TokenRefused {
                                eval_id: eval_id.to_string(),
                                reason: format!("{:?}: {}", status.code(), status.message()),
                            });
                        }
                    }
                }
            }
        }
        Err(ApplierError::BrokerUnavailable(last))
    }
}
