//! `caravan-client`: a typed async client of Caravan's public gRPC API, the
//! one every api-gateway replica serves (`proto/caravan/v1/api.proto`).
//!
//! ```no_run
//! # async fn demo(job: caravan_client::proto::Job) -> caravan_client::Result<()> {
//! let client = caravan_client::Client::connect("127.0.0.1:4647").await?;
//! let registered = client.jobs().register(job).await?;
//! let eval = client.evals().wait(&registered.eval_id, std::time::Duration::from_secs(60)).await?;
//! for alloc in client.evals().allocations(&eval.id).await? { println!("{} on {}", alloc.name, alloc.node_id); }
//! # Ok(())
//! # }
//! ```
//!
//! Calls are grouped by domain: [`Client::jobs`], [`Client::evals`],
//! [`Client::allocs`], [`Client::deployments`], [`Client::nodes`],
//! [`Client::events`], [`Client::variables`] and [`Client::acl`]; answers are the generated messages, re-exported as
//! [`proto`]. A [`ClientBuilder`] takes several gateway addresses, the ACL
//! token (sent as `x-nomad-token`), the namespace, the timeout and the
//! [`RetryPolicy`].
//!
//! # Retries
//!
//! Every gateway replica serves every call, and a gateway forwards
//! leader-only work to the leader of the service behind it, following the
//! leader hints those services answer with. So the client retries by moving
//! on to the next address, with a doubling pause between rounds:
//!
//! * Reads, plans and validations, and writes whose repetition leaves the
//!   same state (node eligibility, deployment pause, allocation health, job
//!   stability, garbage collection, a variable written or deleted without
//!   check-and-set, an ACL policy or an existing token written), are
//!   retried on any UNAVAILABLE.
//! * Writes that create something each time (register, stop, revert, scale,
//!   dispatch, force a periodic launch, evaluate, promote, fail, drain,
//!   allocation stop, signal, restart and GC, ACL bootstrap, token
//!   creation), writes that would fail
//!   the second time (policy and token deletion) and check-and-set writes (a
//!   check-index register, a variable write or delete with `cas`, whose
//!   second attempt would fail with a spurious conflict) are sent again only
//!   when they certainly were not acted on: no connection could be made, or
//!   the gateway answered UNAVAILABLE marked as a refusal by a replica that
//!   does not lead or as not applied. Any other UNAVAILABLE is returned,
//!   since the write may have committed; [`Error::Unavailable`] then carries
//!   the leader the refusal named, if any.
//! * The event stream resumes from the last index seen when its gateway
//!   goes away.

mod acl;
mod allocs;
mod client;
mod deployments;
mod error;
mod evals;
mod events;
mod jobs;
mod nodes;
pub mod retry;
mod transport;
mod variables;

pub use acl::Acl;
pub use allocs::Allocs;
pub use client::{
    Client, ClientBuilder, DEFAULT_ADDRESS, DEFAULT_NAMESPACE, DEFAULT_SERVER_NAME, DEFAULT_TIMEOUT,
};
pub use deployments::Deployments;
pub use error::{Error, Result};
pub use evals::Evals;
pub use events::{EventStream, Events};
pub use jobs::{JobStatus, Jobs};
pub use nodes::Nodes;
pub use retry::RetryPolicy;
pub use transport::{GrpcChannel, TOKEN_METADATA, TokenHeader};
pub use variables::Variables;

/// The API's messages and generated gRPC clients (`caravan_proto`).
pub use caravan_proto as proto;

/// A read's answer and the store revision it reflects (for the next blocking
/// read's `min_revision`).
#[derive(Debug, Clone)]
pub struct Read<T> {
    /// The answer.
    pub value: T,
    /// The store revision the gateway answered at.
    pub revision: i64,
}

fn revision(meta: Option<proto::QueryMeta>) -> i64 {
    meta.map_or(0, |m| m.revision)
}
