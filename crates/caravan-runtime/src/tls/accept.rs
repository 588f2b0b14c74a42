//! Accepting over TLS: a loop that accepts TCP connections and shakes hands
//! with each on its own task, handing on the streams that succeed — to a
//! tonic server as a stream of incoming connections, to axum as a listener.
//! A failed or stalled handshake costs its own task only: the loop goes on
//! accepting, and failures are logged at debug each and at warn at most
//! once per [`WARN_EVERY`], with how many there were.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::Stream;
use parking_lot::Mutex;
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

/// Longest a peer may take over its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest time between two warnings about failed handshakes.
pub const WARN_EVERY: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the server to take them.
const BACKLOG: usize = 128;
/// Pause after a failed `accept` (out of file descriptors, say), so the
/// loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Connections on a listener that completed a TLS handshake.
#[derive(Debug)]
pub struct TlsIncoming {
    streams: mpsc::Receiver<TlsStream<TcpStream>>,
    local: Option<SocketAddr>,
}

impl TlsIncoming {
    /// Starts accepting on `listener` with `config`; accepting stops when
    /// this is dropped. Needs a tokio runtime.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> Self {
        let local = listener.local_addr().ok();
        let (tx, streams) = mpsc::channel(BACKLOG);
        let failures = Arc::new(Failures::new(
            local.map_or_else(|| "?".to_string(), |a| a.to_string()),
        ));
        tokio::spawn(accept_loop(
            listener,
            tokio_rustls::TlsAcceptor::from(config),
            tx,
            failures,
        ));
        TlsIncoming { streams, local }
    }

    /// The next connection; `None` only if accepting stopped.
    pub async fn next(&mut self) -> Option<TlsStream<TcpStream>> {
        self.streams.recv().await
    }

    /// The connections as a stream, for `serve_with_incoming`.
    pub fn into_stream(self) -> impl Stream<Item = std::io::Result<TlsStream<TcpStream>>> {
        futures::stream::unfold(self, |mut incoming| async move {
            incoming.next().await.map(|s| (Ok(s), incoming))
        })
    }
}

impl axum::serve::Listener for TlsIncoming {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Some(stream) = self.next().await else {
                // The accept loop ends only with this listener: nothing
                // more will come.
                return std::future::pending().await;
            };
            if let Ok(peer) = stream.get_ref().0.peer_addr() {
                return (stream, peer);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.local
            .ok_or_else(|| std::io::Error::other("the listener's address is unknown"))
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    tx: mpsc::Sender<TlsStream<TcpStream>>,
    failures: Arc<Failures>,
) {
    loop {
        let accepted = tokio::select! {
            () = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(addr = %failures.local, error = %err, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, error = %err, "cannot set TCP_NODELAY");
        }
        let (acceptor, tx, failures) = (acceptor.clone(), tx.clone(), failures.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    // The server has stopped taking connections: drop it.
                    let _closed = tx.send(stream).await;
                }
                // Connected and hung up without a word: a TCP probe (a
                // load balancer's, Kubernetes'), not a failed peer.
                Ok(Err(err)) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
                    tracing::debug!(%peer, "closed before a TLS handshake");
                }
                Ok(Err(err)) => failures.note(peer, &err.to_string()),
                Err(_) => failures.note(peer, "no handshake within the timeout"),
            }
        });
    }
}

/// Failed handshakes on one listener, for rate-limited warnings.
#[derive(Debug)]
struct Failures {
    local: String,
    /// Failures since the last warning.
    count: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
}

impl Failures {
    fn new(local: String) -> Self {
        Failures {
            local,
            count: AtomicU64::new(0),
            last_warning: Mutex::new(None),
        }
    }

    fn note(&self, peer: SocketAddr, error: &str) {
        tracing::debug!(addr = %self.local, %peer, error, "TLS handshake failed");
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_warning.lock();
        if last.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        let failed = self.count.swap(0, Ordering::Relaxed);
        tracing::warn!(
            addr = %self.local,
            failed,
            last_peer = %peer,
            last_error = error,
            "TLS handshakes failed (a peer without a certificate of the cluster's CA, \
             or speaking plaintext)"
        );
    }
}
