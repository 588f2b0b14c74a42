//! The client and its builder: the addresses, token, namespace, timeout and
//! retry policy every call shares, and the domain handles calls hang off.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{LeadersRequest, QueryOptions};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};
use tonic::{Request, Response, Status};

use crate::error::Result;
use crate::retry::{Idempotence, RetryPolicy};
use crate::transport::{GrpcChannel, Transport};
use crate::{Acl, Allocs, Deployments, Evals, Events, Jobs, Nodes, Variables};

/// Where a client looks for an api-gateway unless told otherwise.
pub const DEFAULT_ADDRESS: &str = "http://127.0.0.1:4647";

/// The namespace of reads and writes unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "default";

/// How long a unary call may take unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client of Caravan's public gRPC API; cheap to clone (clones share their
/// connections).
///
/// ```no_run
/// # async fn demo() -> caravan_client::Result<()> {
/// let client = caravan_client::Client::connect("127.0.0.1:4647").await?;
/// for job in client.jobs().list("").await? {
///     println!("{} {:?}", job.id, job.status());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    transport: Arc<Transport>,
    namespace: String,
}

/// How a [`Client`] is made: [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    addresses: Vec<String>,
    token: Option<String>,
    namespace: String,
    timeout: Duration,
    retry: RetryPolicy,
    tls: Option<ClientTlsConfig>,
}

/// The name a Caravan server's certificate carries in the default region
/// (`caravan tls cert create -server`); TLS clients verify the gateway
/// against it, whatever address they dial.
pub const DEFAULT_SERVER_NAME: &str = "server.global.caravan";

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            addresses: Vec::new(),
            token: None,
            namespace: DEFAULT_NAMESPACE.into(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            tls: None,
        }
    }
}

impl ClientBuilder {
    /// Adds a gateway address (`host:port`, `http://host:port`, or
    /// `https://host:port` with [`ClientBuilder::tls`]); calls go
    /// to the one that answered last and move on to the next when it does
    /// not answer. [`DEFAULT_ADDRESS`] when none is given.
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.addresses.push(address.into());
        self
    }

    /// Adds several gateway addresses.
    pub fn addresses<I, S>(mut self, addresses: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.addresses.extend(addresses.into_iter().map(Into::into));
        self
    }

    /// The ACL token (a secret ID) sent with every call; empty sends none.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The namespace of reads and writes (`*` reads every namespace).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// How long one attempt of a unary call may take (a blocking read adds
    /// its wait). Default 30 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The retry policy; see [`crate::retry`] for which calls are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Calls the gateways over TLS: `ca` (PEM) signs the gateway's
    /// certificate, which must name [`DEFAULT_SERVER_NAME`] (see
    /// [`ClientBuilder::tls_server_name`]); `cert` and `key` (PEM) are this
    /// client's identity, e.g. from `caravan tls cert create -cli`.
    pub fn tls(
        mut self,
        ca: impl AsRef<[u8]>,
        cert: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
    ) -> Self {
        self.tls = Some(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .identity(Identity::from_pem(cert, key))
                .domain_name(DEFAULT_SERVER_NAME),
        );
        self
    }

    /// The name the gateway's certificate must carry (with [`ClientBuilder::tls`]),
    /// e.g. `server.europe.caravan` in another region.
    pub fn tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls = self.tls.map(|tls| tls.domain_name(name));
        self
    }

    /// The client, without connecting: the first call connects, so a client
    /// may be built before its gateway is up. Must be called inside a Tokio
    /// runtime, which runs the connections.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidAddress`], [`crate::Error::InvalidToken`], or
    /// [`crate::Error::Config`] outside a Tokio runtime.
    pub fn build(self) -> Result<Client> {
        let addresses = if self.addresses.is_empty() {
            vec![DEFAULT_ADDRESS.to_string()]
        } else {
            self.addresses
        };
        let transport = Transport::new(
            &addresses,
            self.token.as_deref(),
            self.timeout,
            self.retry,
            self.tls.as_ref(),
        )?;
        Ok(Client {
            transport: Arc::new(transport),
            namespace: self.namespace,
        })
    }

    /// The client; as [`ClientBuilder::build`] (the connection is made by the
    /// first call).
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::build`].
    pub async fn connect(self) -> Result<Client> {
        self.build()
    }
}

impl Client {
    /// A client of the gateway at `address` with the defaults.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidAddress`] for an address that is not a URI.
    pub async fn connect(address: impl Into<String>) -> Result<Client> {
        Client::builder().address(address).connect().await
    }

    /// A builder with the defaults.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Jobs: register, plan, status, stop, versions, revert, scale, dispatch.
    pub fn jobs(&self) -> Jobs<'_> {
        Jobs::new(self)
    }

    /// Evaluations.
    pub fn evals(&self) -> Evals<'_> {
        Evals::new(self)
    }

    /// Allocations.
    pub fn allocs(&self) -> Allocs<'_> {
        Allocs::new(self)
    }

    /// Deployments: promote, fail, pause.
    pub fn deployments(&self) -> Deployments<'_> {
        Deployments::new(self)
    }

    /// Client nodes: drain, eligibility.
    pub fn nodes(&self) -> Nodes<'_> {
        Nodes::new(self)
    }

    /// The event stream.
    pub fn events(&self) -> Events<'_> {
        Events::new(self)
    }

    /// Variables.
    pub fn variables(&self) -> Variables<'_> {
        Variables::new(self)
    }

    /// ACL policies and tokens.
    pub fn acl(&self) -> Acl<'_> {
        Acl::new(self)
    }

    /// The leader address of each leader-elected service, by service name.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn leaders(&self) -> Result<std::collections::BTreeMap<String, String>> {
        let resp = self
            .read(LeadersRequest {}, |ch, r| async move {
                caravan_proto::status_service_client::StatusServiceClient::new(ch)
                    .leaders(r)
                    .await
            })
            .await?;
        Ok(resp.leaders.into_iter().collect())
    }

    /// Runs a garbage collection now (retried: a sweep deletes only what it
    /// judged, so a second one after an unknown outcome is harmless).
    ///
    /// # Errors
    ///
    /// As any call.
    pub async fn garbage_collect(&self) -> Result<caravan_proto::GarbageCollectResponse> {
        let req = caravan_proto::GarbageCollectRequest {};
        self.read(req, |ch, r| async move {
            caravan_proto::system_service_client::SystemServiceClient::new(ch)
                .garbage_collect(r)
                .await
        })
        .await
    }

    /// The address calls go to first (the one that answered last).
    pub fn address(&self) -> &str {
        self.transport.address()
    }

    /// The namespace of reads and writes.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The channel to the gateway calls go to first, sending the token: for
    /// the calls this client does not wrap (node GC, host stats) through
    /// the generated `proto::*_client` types. Calls made on it are not
    /// retried.
    pub fn grpc_channel(&self) -> GrpcChannel {
        self.transport.channel()
    }

    /// Query options of a plain read in the client's namespace.
    pub(crate) fn options(&self, prefix: &str) -> Option<QueryOptions> {
        Some(QueryOptions {
            namespace: self.namespace.clone(),
            prefix: prefix.to_string(),
            ..Default::default()
        })
    }

    /// Query options of a blocking read: answered once the state passes
    /// `min_revision`, or after `wait`.
    pub(crate) fn blocking(&self, min_revision: i64, wait: Duration) -> Option<QueryOptions> {
        Some(QueryOptions {
            namespace: self.namespace.clone(),
            min_revision,
            wait_ns: i64::try_from(wait.as_nanos()).unwrap_or(i64::MAX),
            prefix: String::new(),
        })
    }

    /// A read (or a write that may be repeated), retried on UNAVAILABLE.
    pub(crate) async fn read<Req, Resp, F, Fut>(&self, request: Req, call: F) -> Result<Resp>
    where
        Req: Clone,
        F: Fn(GrpcChannel, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        self.read_within(self.transport.timeout(), request, call)
            .await
    }

    /// A blocking read, which may take its `wait` on top of the call's
    /// timeout.
    pub(crate) async fn read_blocking<Req, Resp, F, Fut>(
        &self,
        wait: Duration,
        request: Req,
        call: F,
    ) -> Result<Resp>
    where
        Req: Clone,
        F: Fn(GrpcChannel, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        self.read_within(self.transport.timeout() + wait, request, call)
            .await
    }

    fn read_within<Req, Resp, F, Fut>(
        &self,
        timeout: Duration,
        request: Req,
        call: F,
    ) -> impl Future<Output = Result<Resp>>
    where
        Req: Clone,
        F: Fn(GrpcChannel, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        self.transport
            .call(Idempotence::Repeatable, timeout, request, call)
    }

    /// A write that must not be repeated: sent again only when it certainly
    /// was not acted on.
    pub(crate) async fn write_once<Req, Resp, F, Fut>(&self, request: Req, call: F) -> Result<Resp>
    where
        Req: Clone,
        F: Fn(GrpcChannel, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        self.write(true, request, call).await
    }

    /// A write sent once when `once` (it creates something, or checks and
    /// sets), else retried like a read (repeating it changes nothing).
    pub(crate) async fn write<Req, Resp, F, Fut>(
        &self,
        once: bool,
        request: Req,
        call: F,
    ) -> Result<Resp>
    where
        Req: Clone,
        F: Fn(GrpcChannel, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        let idempotence = if once {
            Idempotence::Once
        } else {
            Idempotence::Repeatable
        };
        self.transport
            .call(idempotence, self.transport.timeout(), request, call)
            .await
    }

    /// How calls are retried.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        self.transport.retry_policy()
    }
}
