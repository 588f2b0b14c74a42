//! Dialling over TLS for tonic channels: a connector that opens TCP to the
//! URI's host and port and shakes hands checking the peer's role name
//! (not the address dialled), with the process's current certificate.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tonic::codegen::http::Uri;

/// The port dialled when a URI names none.
const DEFAULT_PORT: u16 = 443;

/// A connector for `Endpoint::connect_with_connector[_lazy]`; the endpoint's
/// URI must be `http://` (tonic would otherwise add its own TLS on top).
#[derive(Debug, Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
    peer: ServerName<'static>,
}

impl TlsConnector {
    /// Dials with `config`, accepting only a certificate naming `peer`.
    pub(super) fn new(config: Arc<ClientConfig>, peer: ServerName<'static>) -> Self {
        TlsConnector { config, peer }
    }
}

impl tower::Service<Uri> for TlsConnector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, std::io::Result<Self::Response>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let peer = self.peer.clone();
        Box::pin(async move {
            let host = uri.host().ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{uri}: no host to dial"),
                )
            })?;
            // `[::1]` as the URI writes it is also how an address is parsed.
            let port = uri.port_u16().unwrap_or(DEFAULT_PORT);
            let tcp = TcpStream::connect(format!("{host}:{port}")).await?;
            tcp.set_nodelay(true)?;
            let tls = connector.connect(peer, tcp).await?;
            Ok(TokioIo::new(tls))
        })
    }
}
