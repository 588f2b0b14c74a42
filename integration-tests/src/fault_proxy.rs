//! A cuttable TCP link on loopback: a proxy that forwards every connection
//! to one target until told to cut, the fault bench's network partitions.
//!
//! A cut looks like a silent network, not a refusal: live connections are
//! dropped and new ones are accepted and then held (read, never forwarded,
//! never answered), so a dialer sees a connect that succeeds and then
//! nothing, as behind a partition. Healing closes the held connections (the
//! target never saw them: its host would answer their next segment with a
//! reset) and forwards new ones again.
//!
//! Three kinds of cut:
//! - [`FaultProxy::cut`]: both ways, every connection;
//! - [`FaultProxy::cut_replies`]: one way, the target's bytes are dropped
//!   while the dialer's still arrive (the target hears but is not heard);
//! - [`FaultProxy::cut_sender`]: both ways, only the connections of one
//!   sender, known from an HTTP request header of each connection's first
//!   request ([`FaultProxy::start_sniffing`]). etcd members dial one another
//!   at one advertised peer URL each and name themselves in `X-PeerURLs`,
//!   so a proxy in front of each member's peer port can isolate one member
//!   from the others in both directions.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The most bytes of a first request read to find the sender's header.
const MAX_HEAD: usize = 16 * 1024;
/// How long a connection may take to send its first request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes per read while forwarding.
const CHUNK: usize = 64 * 1024;

/// What the link lets through now.
#[derive(Clone, Debug, Default)]
struct LinkState {
    /// Every connection is held or dropped.
    cut: bool,
    /// The target's bytes to dialers are dropped.
    replies_cut: bool,
    /// Connections whose sender header contains one of these are held or
    /// dropped.
    senders_cut: BTreeSet<String>,
    /// Connections whose sender header contains one of these deliver their
    /// first request's head and nothing after it; replies still pass.
    senders_muted: BTreeSet<String>,
    /// The proxy was dropped: every connection ends.
    closed: bool,
}

fn matches(needles: &BTreeSet<String>, sender: Option<&str>) -> bool {
    sender.is_some_and(|s| needles.iter().any(|needle| s.contains(needle)))
}

impl LinkState {
    /// Whether a connection from `sender` may not pass at all.
    fn blocks(&self, sender: Option<&str>) -> bool {
        self.cut || self.closed || matches(&self.senders_cut, sender)
    }

    /// Whether what a connection from `sender` sends is dropped.
    fn mutes(&self, sender: Option<&str>) -> bool {
        matches(&self.senders_muted, sender)
    }
}

/// State shared by the accept loop and every connection: the link's state,
/// and a generation bumped on every change so connections look again.
#[derive(Debug)]
struct Shared {
    state: Mutex<LinkState>,
    changed: watch::Sender<u64>,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut LinkState)) {
        f(&mut self.state.lock());
        self.changed.send_modify(|g| *g += 1);
    }

    fn snapshot(&self) -> LinkState {
        self.state.lock().clone()
    }
}

/// A TCP proxy on `127.0.0.1` in front of one target, cut and healed at
/// will; stops (dropping every connection) when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    target: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on a free loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr) -> anyhow::Result<FaultProxy> {
        FaultProxy::spawn(target, None).await
    }

    /// A proxy that also reads the value of the HTTP request header `header`
    /// (case-insensitive) from each connection's first request, naming the
    /// connection's sender for [`FaultProxy::cut_sender`].
    pub async fn start_sniffing(
        target: SocketAddr,
        header: &'static str,
    ) -> anyhow::Result<FaultProxy> {
        FaultProxy::spawn(target, Some(header)).await
    }

    async fn spawn(target: SocketAddr, sniff: Option<&'static str>) -> anyhow::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(LinkState::default()),
            changed,
        });
        let accept = tokio::spawn(accept_loop(listener, target, shared.clone(), sniff));
        Ok(FaultProxy {
            addr,
            target,
            shared,
            accept,
        })
    }

    /// Where dialers connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` and [`FaultProxy::addr`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where connections are forwarded.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// Cuts the link both ways: live connections are dropped, new ones held.
    pub fn cut(&self) {
        self.shared.update(|s| s.cut = true);
    }

    /// Cuts one way: what the target sends is dropped, what dialers send
    /// still arrives. Connections stay open.
    pub fn cut_replies(&self) {
        self.shared.update(|s| s.replies_cut = true);
    }

    /// Cuts both ways the connections whose sender header contains
    /// `sender` (only with [`FaultProxy::start_sniffing`]).
    pub fn cut_sender(&self, sender: &str) {
        self.shared.update(|s| {
            s.senders_cut.insert(sender.to_string());
        });
    }

    /// Cuts one way the connections whose sender header contains `sender`
    /// (only with [`FaultProxy::start_sniffing`]): each delivers its first
    /// request's head, so the target may answer on it, and nothing more the
    /// sender says. Live connections stay open.
    pub fn mute_sender(&self, sender: &str) {
        self.shared.update(|s| {
            s.senders_muted.insert(sender.to_string());
        });
    }

    /// Lifts every cut: held connections are closed, new ones forwarded.
    pub fn heal(&self) {
        self.shared.update(|s| *s = LinkState::default());
    }

    /// Whether any cut is in force.
    pub fn is_cut(&self) -> bool {
        let s = self.shared.snapshot();
        s.cut || s.replies_cut || !s.senders_cut.is_empty() || !s.senders_muted.is_empty()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Live and held connections see the change and end.
        self.shared.update(|s| s.closed = true);
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    shared: Arc<Shared>,
    sniff: Option<&'static str>,
) {
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            // Out of descriptors or the like: try again shortly.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = conn.set_nodelay(true);
        tokio::spawn(serve(conn, target, shared.clone(), sniff));
    }
}

/// One dialer's connection: identified, then held or forwarded until a
/// change of the link's state blocks it.
async fn serve(
    mut client: TcpStream,
    target: SocketAddr,
    shared: Arc<Shared>,
    sniff: Option<&'static str>,
) {
    let mut changed = shared.changed.subscribe();
    let (head, sender) = match sniff {
        Some(header) => match read_head(&mut client).await {
            Some(head) => {
                let sender = header_value(&head, header);
                (head, sender)
            }
            None => return,
        },
        None => (Vec::new(), None),
    };
    if shared.snapshot().blocks(sender.as_deref()) {
        hold(client, &shared, sender.as_deref(), &mut changed).await;
        return;
    }
    let Ok(mut upstream) = TcpStream::connect(target).await else {
        // The target is down: the dialer sees its connection closed.
        return;
    };
    let _ = upstream.set_nodelay(true);
    if !head.is_empty() && upstream.write_all(&head).await.is_err() {
        return;
    }
    let (mut client_read, mut client_write) = client.into_split();
    let (mut up_read, mut up_write) = upstream.into_split();
    let forward = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if shared.snapshot().mutes(sender.as_deref()) {
                continue;
            }
            if up_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let backward = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match up_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if shared.snapshot().replies_cut {
                continue;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let blocked = async {
        loop {
            if changed.changed().await.is_err() {
                return;
            }
            if shared.snapshot().blocks(sender.as_deref()) {
                return;
            }
        }
    };
    // Either side closing, or a cut, ends the connection: both halves drop.
    tokio::select! {
        _ = forward => {}
        _ = backward => {}
        _ = blocked => {}
    }
}

/// Accepts and ignores what the dialer sends until the link no longer
/// blocks it (then closes it) or the dialer gives up.
async fn hold(
    mut client: TcpStream,
    shared: &Shared,
    sender: Option<&str>,
    changed: &mut watch::Receiver<u64>,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        tokio::select! {
            read = client.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            change = changed.changed() => {
                let now = shared.snapshot();
                if change.is_err() || now.closed || !now.blocks(sender) {
                    return;
                }
            }
        }
    }
}

/// Reads up to the end of the first request's head (`\r\n\r\n`); `None`
/// when the dialer closes, is too slow, or sends more than [`MAX_HEAD`]
/// without one.
async fn read_head(client: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            let n = client.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            head.extend_from_slice(&buf[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Some(());
            }
            if head.len() > MAX_HEAD {
                return None;
            }
        }
    };
    tokio::time::timeout(HEAD_TIMEOUT, read).await.ok()??;
    Some(head)
}

/// The value of header `name` in an HTTP request head, if present.
fn header_value(head: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    let end = text.find("\r\n\r\n").unwrap_or(text.len());
    text[..end].split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then(|| value.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// An echo server: what it reads, it writes back.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    loop {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if conn.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    /// Sends `msg` and reads it back within 500 ms; `None` when nothing
    /// (or end of stream) comes back in time. The timeout states the
    /// property: a silent link answers nothing.
    async fn round_trip(conn: &mut TcpStream, msg: &[u8]) -> Option<Vec<u8>> {
        conn.write_all(msg).await.ok()?;
        let mut got = vec![0u8; msg.len()];
        tokio::time::timeout(Duration::from_millis(500), conn.read_exact(&mut got))
            .await
            .ok()?
            .ok()?;
        Some(got)
    }

    #[tokio::test]
    async fn forwards_then_holds_when_cut_then_forwards_again_when_healed() {
        let proxy = FaultProxy::start(echo().await).await.unwrap();
        let mut live = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut live, b"ping").await.unwrap(), b"ping");

        proxy.cut();
        assert!(proxy.is_cut());
        assert_eq!(round_trip(&mut live, b"ping").await, None, "live dropped");
        // A new connection is accepted (no refusal) but answered by nothing.
        let mut held = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut held, b"ping").await, None, "held");

        proxy.heal();
        assert!(!proxy.is_cut());
        let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut fresh, b"pong").await.unwrap(), b"pong");
    }

    #[tokio::test]
    async fn a_one_way_cut_delivers_but_drops_the_replies() {
        // The target records what arrives, and answers it.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 64];
            loop {
                let n = conn.read(&mut buf).await.unwrap();
                if n == 0 {
                    return;
                }
                seen_tx.send(buf[..n].to_vec()).unwrap();
                conn.write_all(&buf[..n]).await.unwrap();
            }
        });
        let proxy = FaultProxy::start(target).await.unwrap();
        let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut conn, b"a").await.unwrap(), b"a");
        assert_eq!(seen.recv().await.unwrap(), b"a");

        proxy.cut_replies();
        assert_eq!(round_trip(&mut conn, b"b").await, None, "no reply");
        assert_eq!(seen.recv().await.unwrap(), b"b", "the target heard it");
        proxy.heal();
        assert_eq!(round_trip(&mut conn, b"c").await.unwrap(), b"c");
    }

    #[tokio::test]
    async fn a_sender_cut_blocks_only_that_senders_connections() {
        let proxy = FaultProxy::start_sniffing(echo().await, "X-PeerURLs")
            .await
            .unwrap();
        let request = |from: &str| {
            format!("GET /raft HTTP/1.1\r\nHost: x\r\nx-peerurls: http://{from}\r\n\r\n")
                .into_bytes()
        };
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut b = TcpStream::connect(proxy.addr()).await.unwrap();
        let (ra, rb) = (request("10.0.0.1:1"), request("10.0.0.2:2"));
        assert_eq!(round_trip(&mut a, &ra).await.unwrap(), ra);
        assert_eq!(round_trip(&mut b, &rb).await.unwrap(), rb);

        proxy.cut_sender("10.0.0.1:1");
        assert_eq!(round_trip(&mut a, b"x").await, None, "a's live one dropped");
        assert_eq!(
            round_trip(&mut b, b"y").await.unwrap(),
            b"y",
            "b unaffected"
        );
        let mut a2 = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut a2, &ra).await, None, "a's new one held");

        proxy.heal();
        let mut a3 = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut a3, &ra).await.unwrap(), ra);

        // Muted: the head arrives (and is echoed back), the rest is lost.
        proxy.mute_sender("10.0.0.1:1");
        let mut a4 = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut a4, &ra).await.unwrap(), ra);
        assert_eq!(round_trip(&mut a4, b"z").await, None, "a's words lost");
        assert_eq!(
            round_trip(&mut b, b"w").await.unwrap(),
            b"w",
            "b unaffected"
        );
    }

    #[test]
    fn header_values_are_found_case_insensitively_in_the_head_only() {
        let head = b"POST /raft HTTP/1.1\r\nX-PeerURLs: http://1.2.3.4:5\r\n\r\nX-Other: no";
        assert_eq!(
            header_value(head, "x-peerurls").as_deref(),
            Some("http://1.2.3.4:5")
        );
        assert_eq!(header_value(head, "x-other"), None);
    }
}
