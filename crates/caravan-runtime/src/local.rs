//! Calls between services of one process without the network. Where
//! several services run in one process (`caravan server`), each still
//! serves on its own port, leads by its own lease and answers as it would
//! to any caller; what a call to a leader of the same process skips is the
//! way there: HTTP/2 framing, the loopback socket, the wake-ups of two
//! connection tasks and TLS. The request goes to the same generated service
//! the server routes to, as an in-memory body, in the caller's task.
//!
//! A service registers the address it advertises (the one its leader key
//! names) with the service it serves; a [`crate::leader::LeaderChannel`]
//! that finds its leader's address registered calls the service directly.
//! Nothing is registered unless the process turns this on ([`enable`]), so
//! separate processes, and tests that put a service behind a proxy or a
//! fault, keep the network path.
//!
//! A service may register its handler too ([`Registration::with_handler`]): a
//! caller that knows the handler's type then calls it with the request as
//! it stands ([`handler`], [`call_handler`]), skipping the encoding and
//! decoding of the message as well (the plan-applier's `SubmitPlan`, whose
//! plans carry a thousand allocations at a time).
//!
//! What the direct path leaves out is the server's layers: the TLS role
//! check (the caller is the process itself, which holds the server's
//! identity), the INVALID_ARGUMENT answer to a body that does not decode
//! (the body is the caller's own encoding) and the per-method traffic
//! counters (no bytes cross a wire: direct calls are counted by method in
//! `caravan_grpc_local_calls_total` instead). The caller's deadline (`grpc-timeout`)
//! is kept: a call that outlives it is answered DEADLINE_EXCEEDED, as the
//! channel would answer it.

use std::any::Any;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::transport::Channel;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

/// A service of this process, as the server routes to it.
pub type LocalService = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, Infallible>;

static LOCAL_CALLS: LazyLock<caravan_metrics::IntCounterVec> = LazyLock::new(|| {
    caravan_metrics::counter_vec(
        "caravan_grpc_local_calls_total",
        "gRPC calls this process made to a service of its own without the network, by method.",
        &["method"],
    )
});

static ENABLED: AtomicBool = AtomicBool::new(false);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// A service's handler, as registered: downcast by callers that know its
/// type (e.g. `Arc<dyn PlanApplierService>`).
type Handler = Arc<dyn Any + Send + Sync>;

/// What an address of this process serves.
struct Entry {
    id: u64,
    service: LocalService,
    handler: Option<Handler>,
}

static REGISTRY: LazyLock<Mutex<HashMap<String, Entry>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Lets services of this process call each other directly from now on.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether direct calls are on in this process.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Keeps a service registered until dropped.
#[derive(Debug)]
#[must_use = "the service is registered only while this is held"]
pub struct Registration {
    address: String,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut registry = REGISTRY.lock();
        if registry
            .get(&self.address)
            .is_some_and(|entry| entry.id == self.id)
        {
            registry.remove(&self.address);
        }
    }
}

/// Registers `service` as what `address` serves, while the returned
/// registration is held; `None` (nothing registered) unless [`enable`] was
/// called. A later registration of the same address replaces this one.
pub fn register<S>(address: &str, service: S) -> Option<Registration>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    if !enabled() || address.is_empty() {
        return None;
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    REGISTRY.lock().insert(
        address.to_string(),
        Entry {
            id,
            service: BoxCloneSyncService::new(service),
            handler: None,
        },
    );
    Some(Registration {
        address: address.to_string(),
        id,
    })
}

impl Registration {
    /// Registers `handler`, the handler behind this registration's service,
    /// which callers that know its type `H` may call directly ([`handler`]).
    pub fn with_handler<H: Any + Send + Sync>(self, handler: H) -> Self {
        if let Some(entry) = REGISTRY
            .lock()
            .get_mut(&self.address)
            .filter(|entry| entry.id == self.id)
        {
            entry.handler = Some(Arc::new(handler));
        }
        self
    }
}

/// Holds the registration of a service made where it cannot be kept (in a
/// builder closure), for as long as the holder lives.
#[derive(Debug, Default)]
pub struct Held(Mutex<Option<Registration>>);

impl Held {
    /// Keeps `registration` (dropping one held before).
    pub fn keep(&self, registration: Option<Registration>) {
        *self.0.lock() = registration;
    }
}

/// The service of this process registered at `address`, if any.
pub fn lookup(address: &str) -> Option<LocalService> {
    if !enabled() {
        return None;
    }
    REGISTRY.lock().get(address).map(|e| e.service.clone())
}

/// The handler of type `H` registered at `address` in this process, if any.
pub fn handler<H: Any + Clone>(address: &str) -> Option<H> {
    if !enabled() {
        return None;
    }
    REGISTRY
        .lock()
        .get(address)?
        .handler
        .as_ref()?
        .downcast_ref::<H>()
        .cloned()
}

/// Runs `call`, a call of `method` (its gRPC path) straight to a handler
/// of this process, within `deadline` as a channel would: counted as a
/// direct call, answered DEADLINE_EXCEEDED when it outlives it.
pub async fn call_handler<T>(
    method: &'static str,
    deadline: Duration,
    call: impl Future<Output = Result<T, tonic::Status>>,
) -> Result<T, tonic::Status> {
    LOCAL_CALLS.with_label_values(&[method]).inc();
    tokio::time::timeout(deadline, call)
        .await
        .unwrap_or_else(|_| Err(deadline_exceeded(deadline)))
}

fn deadline_exceeded(deadline: Duration) -> tonic::Status {
    tonic::Status::deadline_exceeded(format!(
        "no answer within the call's deadline ({deadline:?})"
    ))
}

/// The way to a leader: over the network, or straight to a service of this
/// process. Generated gRPC clients take either.
#[derive(Clone)]
pub enum Transport {
    /// A channel to another process (or to this one's listener).
    Remote(Channel),
    /// A service of this process.
    Local(LocalService),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Remote(_) => f.write_str("Transport::Remote"),
            Transport::Local(_) => f.write_str("Transport::Local"),
        }
    }
}

impl Transport {
    /// Whether calls stay in this process.
    pub fn is_local(&self) -> bool {
        matches!(self, Transport::Local(_))
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Service<http::Request<Body>> for Transport {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self {
            Transport::Remote(ch) => ch.poll_ready(cx).map_err(Into::into),
            Transport::Local(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match self {
            Transport::Remote(ch) => {
                let call = ch.call(req);
                Box::pin(async move { call.await.map_err(Into::into) })
            }
            Transport::Local(service) => {
                LOCAL_CALLS.with_label_values(&[req.uri().path()]).inc();
                let deadline = grpc_timeout(req.headers());
                let call = service.clone().oneshot(req);
                Box::pin(async move {
                    let answered = match deadline {
                        Some(d) => tokio::time::timeout(d, call)
                            .await
                            .map_err(|_| BoxError::from(deadline_exceeded(d)))?,
                        None => call.await,
                    };
                    Ok(answered.unwrap_or_else(|never| match never {}))
                })
            }
        }
    }
}

/// The deadline a `grpc-timeout` header sets (`<digits><unit>`, unit one of
/// `H M S m u n`), if any.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
