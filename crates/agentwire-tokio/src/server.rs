//! The WebSocket server driver: accept loop, handshakes, and the owner task.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use agentwire_core::{CloseCode, DatagramMachine, Machine, PeerInfo};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{self, HeaderValue, StatusCode};
use tokio_tungstenite::WebSocketStream;
use tracing::Instrument;

use crate::conn::ConnSlot;
use crate::driver::{Core, Timer};
use crate::handle::{handle_pair, Control, Events, Handle};
use crate::hook::{Accept, Refusal, Reject, UpgradeHook, UpgradeRequest};
use crate::http::{Head, Replay};
use crate::per_address::{Kind, PerAddress};
use crate::stats::{DropReason, TransportCounters};
use crate::stream::{Capped, ServerIo};
use crate::udp::{Udp, UdpStats};
use crate::{Limits, ServerConfig};

/// The socket type of an upgraded server connection.
pub(crate) type ServerWs = WebSocketStream<Replay<Capped<ServerIo>>>;

/// An upgraded socket on its way to the owner task.
pub(crate) struct Accepted {
    ws: ServerWs,
    peer: PeerInfo,
    slot: ConnSlot,
}

/// What the upgrade callback decided.
pub(crate) enum Outcome {
    /// Hand the connection to the machine.
    Open(PeerInfo, ConnSlot),
    /// Over the per-address cap with [`Refusal::Close`]: close it here, unseen by the machine.
    Refuse,
}

/// What every handshake task of one machine shares.
pub(crate) struct AcceptShared {
    pub(crate) limits: Limits,
    pub(crate) max_connections: usize,
    pub(crate) max_open_per_address: usize,
    pub(crate) open: Arc<AtomicUsize>,
    pub(crate) per_address: Arc<PerAddress>,
    pub(crate) refusal: Refusal,
    pub(crate) plain_http_body: String,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    pub(crate) hook: Option<Arc<dyn UpgradeHook>>,
    pub(crate) accepted: mpsc::Sender<Accepted>,
    /// The machine's transport counters (refusals are counted here).
    pub(crate) stats: Arc<TransportCounters>,
}

impl AcceptShared {
    /// The shared state of a machine served with `config`, handing upgraded sockets to
    /// `accepted`, counting into `stats`.
    pub(crate) fn new(
        config: &ServerConfig,
        accepted: mpsc::Sender<Accepted>,
        stats: Arc<TransportCounters>,
    ) -> Self {
        Self {
            limits: config.limits.clone(),
            max_connections: config.max_connections,
            max_open_per_address: config.max_connections_per_address,
            open: Arc::new(AtomicUsize::new(0)),
            per_address: Arc::new(PerAddress::default()),
            refusal: config.address_refusal.clone(),
            plain_http_body: config.plain_http_body.clone(),
            tls: config.tls.clone().map(tokio_rustls::TlsAcceptor::from),
            hook: config.hook.clone(),
            accepted,
            stats,
        }
    }
}

/// The accept loop's bounds on handshakes in progress.
#[derive(Clone, Copy)]
pub(crate) struct PendingCaps {
    pub(crate) total: usize,
    pub(crate) per_address: usize,
    pub(crate) plain: bool,
}

/// The accept loop's address filter, if the listener has one.
pub(crate) type Filter = Option<Arc<dyn crate::AddressFilter>>;

/// A WebSocket server driving one machine that owns every connection.
///
/// [`bind`](Self::bind) spawns the accept loop and the owner task and returns at once.
/// Dropping the `Server` does not stop it: call [`shutdown`](Self::shutdown) (or
/// [`Handle::shutdown`]).
pub struct Server<M> {
    local_addr: SocketAddr,
    udp_addr: Option<SocketAddr>,
    handle: Handle<M>,
}

impl<M> std::fmt::Debug for Server<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("udp_addr", &self.udp_addr)
            .finish()
    }
}

impl<M> Server<M>
where
    M: Machine + Send + 'static,
    M::Event: Send + 'static,
{
    /// Binds `addr` and starts serving `machine`. Must be called inside a tokio runtime.
    ///
    /// Returns the server and the stream of machine events.
    pub async fn bind(
        addr: impl ToSocketAddrs,
        machine: M,
        config: ServerConfig,
    ) -> io::Result<(Self, Events<M::Event>)> {
        Self::start(addr, machine, config, None).await
    }

    /// Binds `addr`, starts serving `machine`, and returns the server and its events; the
    /// owner task also drives `udp` (see [`bind_with_udp`](Self::bind_with_udp)).
    async fn start(
        addr: impl ToSocketAddrs,
        machine: M,
        config: ServerConfig,
        udp: Option<Udp<M>>,
    ) -> io::Result<(Self, Events<M::Event>)> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let (events_tx, events_rx) = mpsc::channel(config.event_capacity.max(1));
        let (mut handle, control) = handle_pair();
        let udp_addr = udp.as_ref().map(Udp::local_addr);
        if let Some(u) = &udp {
            handle.set_udp(u.counters());
        }
        let (accepted_tx, accepted_rx) = mpsc::channel(64);
        let shared = Arc::new(AcceptShared::new(&config, accepted_tx, handle.counters()));
        let caps = PendingCaps {
            total: config.max_pending_handshakes,
            per_address: config.max_pending_handshakes_per_address,
            plain: config.tls.is_none(),
        };
        let pending = Arc::clone(&shared.per_address);
        let filter = config.address_filter.clone();
        let accept_task = tokio::spawn(accept_loop(
            listener,
            pending,
            caps,
            filter,
            handle.counters(),
            move |tcp, addr| handshake(tcp, addr, Arc::clone(&shared)),
        ));
        let mut core = Core::new(
            machine,
            config.limits,
            events_tx,
            control.stop.clone(),
            config.wall_clock,
            handle.counters(),
        );
        core.protocol = config.protocol;
        tokio::spawn(
            run(core, control, accepted_rx, Some(accept_task), udp)
                .instrument(tracing::info_span!("server", addr = %local_addr)),
        );
        Ok((
            Self {
                local_addr,
                udp_addr,
                handle,
            },
            Events::new(events_rx),
        ))
    }

    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The local address of the UDP socket, for a server started with
    /// [`bind_with_udp`](Self::bind_with_udp).
    pub fn udp_local_addr(&self) -> Option<SocketAddr> {
        self.udp_addr
    }

    /// The counters of the UDP socket (see [`Handle::udp_stats`]).
    pub fn udp_stats(&self) -> Option<UdpStats> {
        self.handle.udp_stats()
    }

    /// A handle to run commands on the machine.
    pub fn handle(&self) -> Handle<M> {
        self.handle.clone()
    }

    /// Stops accepting, closes every connection with 1001 "going away", calls
    /// `handle_disconnect_with` (`Disconnect::Local`) for each, and waits until the driver has stopped.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}

impl<M> Server<M>
where
    M: DatagramMachine + Send + 'static,
    M::Event: Send + 'static,
{
    /// As [`bind`](Self::bind), and the task that owns the machine also drives `udp`, a
    /// bound UDP socket: every datagram it receives goes to
    /// [`DatagramMachine::handle_datagram`] (with the sender's address and the socket's
    /// local address), every [`Transmit`](agentwire_core::Transmit) the machine queues is
    /// sent from it. One socket serves every connection: the machine demultiplexes.
    ///
    /// The socket is polled in the owner task's own `select!` (no extra task, channel or
    /// lock); at most [`UdpLimits::datagrams_per_wake`](crate::UdpLimits::datagrams_per_wake)
    /// datagrams are taken per wake-up; sends never wait: a full send buffer drops the
    /// datagram and counts it ([`udp_stats`](Self::udp_stats)). Bind the socket yourself
    /// (`tokio::net::UdpSocket::bind`), typically on the same IP as `addr`, port 0 for any
    /// free port; [`udp_local_addr`](Self::udp_local_addr) tells which. Size its kernel
    /// buffers before you pass it if many peers stream audio through it (`SO_RCVBUF`, e.g.
    /// with the `socket2` crate): the driver sets nothing. A [`Transmit`]'s `local` is not
    /// used (one socket). The socket is closed when the server stops.
    ///
    /// [`Transmit`]: agentwire_core::Transmit
    ///
    /// ```no_run
    /// # use agentwire_core::DatagramMachine;
    /// # async fn run<M: DatagramMachine + Send + 'static>(machine: M) -> std::io::Result<()>
    /// # where M::Event: Send + 'static {
    /// use agentwire_tokio::{Server, ServerConfig};
    /// let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
    /// let (server, _events) =
    ///     Server::bind_with_udp("127.0.0.1:0", udp, machine, ServerConfig::default()).await?;
    /// println!("ws://{} udp {:?}", server.local_addr(), server.udp_local_addr());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn bind_with_udp(
        addr: impl ToSocketAddrs,
        udp: UdpSocket,
        machine: M,
        config: ServerConfig,
    ) -> io::Result<(Self, Events<M::Event>)> {
        let udp = Udp::new(udp, &config.udp)?;
        Self::start(addr, machine, config, Some(udp)).await
    }
}

/// The owner task. `accept_task` is the accept loop it owns (a [`Server`]'s); a routed
/// machine shares its listener's and has none.
pub(crate) async fn run<M: Machine>(
    mut core: Core<M>,
    mut control: Control<M>,
    mut accepted: mpsc::Receiver<Accepted>,
    accept_task: Option<tokio::task::JoinHandle<()>>,
    mut udp: Option<Udp<M>>,
) {
    let mut timer = Timer::new();
    while !control.stop_requested() {
        timer.set(core.poll_timeout());
        let mut more_input = false;
        tokio::select! {
            Some(a) = accepted.recv() => {
                core.open(a.ws, a.peer, Some(a.slot));
            }
            Some(i) = core.inbound_rx.recv() => more_input = core.inbound(i),
            Some(cmd) = control.commands.recv() => core.command(cmd),
            () = timer.wait() => core.timeout(),
            // Disabled (never polled) without a socket.
            () = Udp::readable(&udp), if udp.is_some() => {
                if let Some(u) = udp.as_mut() {
                    let now = core.wake();
                    more_input = u.receive(&mut core.machine, now);
                }
            }
            _ = control.stop.changed() => {}
        }
        core.finish_step(more_input, &mut control.commands, |m| {
            crate::udp::flush(&mut udp, m);
        })
        .await;
        core.take_ended();
    }
    tracing::debug!(open = core.len(), "shutting down");
    if let Some(task) = accept_task {
        task.abort();
    }
    accepted.close();
    while accepted.try_recv().is_ok() {}
    core.close_all(CloseCode::GOING_AWAY, "going away").await;
    crate::udp::flush(&mut udp, &mut core.machine);
    core.take_ended();
    control.commands.close();
    control.done.send_replace(true);
}

/// What a plain-`ws://` peer over its pending-handshake cap is told before the socket is
/// dropped (nothing of its request has been read).
pub(crate) const TOO_MANY_HANDSHAKES: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\n\
Content-Type: text/plain; charset=utf-8\r\nContent-Length: 38\r\nConnection: close\r\n\r\n\
too many handshakes from this address\n";

/// Accepts sockets and runs `handshake` for each in its own task.
///
/// A socket from an address `filter` refuses is closed at once, before anything is read or
/// counted. A socket over the total or per-address (`pending`) pending cap is answered and
/// dropped at once; it never displaces another handshake, and established connections are
/// not touched.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    pending: Arc<PerAddress>,
    caps: PendingCaps,
    filter: Filter,
    stats: Arc<TransportCounters>,
    handshake: F,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut handshakes = JoinSet::new();
    loop {
        tokio::select! {
            res = listener.accept() => match res {
                Ok((tcp, addr)) => {
                    if filter.as_ref().is_some_and(|f| !f.allows(addr)) {
                        stats.dropped(DropReason::NotAllowed);
                        tracing::trace!(peer = %addr, "address not allowed; closed");
                        drop(tcp);
                        continue;
                    }
                    if handshakes.len() >= caps.total {
                        stats.dropped(DropReason::HandshakeCap);
                        tracing::debug!(peer = %addr, "too many pending handshakes; dropped");
                        continue;
                    }
                    let Some(slot) =
                        pending.reserve(addr.ip(), Kind::Pending, caps.per_address)
                    else {
                        stats.dropped(DropReason::HandshakeCap);
                        tracing::debug!(peer = %addr, "too many pending handshakes from this address; refused");
                        if caps.plain {
                            // Best effort, never waits: the socket's send buffer is empty.
                            let _ = tcp.try_write(TOO_MANY_HANDSHAKES);
                        }
                        continue;
                    };
                    let work = handshake(tcp, addr);
                    handshakes.spawn(
                        async move {
                            work.await;
                            drop(slot);
                        }
                        .instrument(tracing::debug_span!("handshake", peer = %addr)),
                    );
                }
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = handshakes.join_next(), if !handshakes.is_empty() => {}
        }
    }
}

/// TLS (if configured) and the WebSocket upgrade of one socket, under `handshake_timeout`.
async fn handshake(tcp: TcpStream, addr: SocketAddr, shared: Arc<AcceptShared>) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "set_nodelay failed");
    }
    let work = async {
        let io = match &shared.tls {
            Some(acceptor) => ServerIo::Tls(Box::new(acceptor.accept(tcp).await?)),
            None => ServerIo::Plain(tcp),
        };
        let mut capped = Capped::new(io, shared.limits.max_header_bytes);
        let head = match crate::http::read_head(&mut capped).await? {
            Head::Upgrade(head) => head,
            Head::Plain(_) => {
                tracing::debug!("plain HTTP request; answered 426");
                crate::http::answer_426(&mut capped, &shared.plain_http_body).await?;
                return Ok(None);
            }
        };
        upgrade(&shared, addr, head, capped).await
    };
    match tokio::time::timeout(shared.limits.handshake_timeout, work).await {
        Ok(Ok(Some((ws, outcome)))) => deliver(&shared, ws, outcome).await,
        Ok(Ok(None)) => {}
        Ok(Err(e)) => {
            shared.stats.dropped(DropReason::HandshakeFailed);
            tracing::debug!(error = %e, "handshake failed");
        }
        Err(_) => {
            shared.stats.dropped(DropReason::HandshakeTimeout);
            tracing::debug!("handshake timed out");
        }
    }
}

/// The WebSocket upgrade of a socket whose request `head` was already read: the
/// machine's capacity checks and hook decide (see [`decide`]).
#[allow(clippy::result_large_err)] // the callback's signature is tungstenite's
pub(crate) async fn upgrade(
    shared: &AcceptShared,
    addr: SocketAddr,
    head: Vec<u8>,
    capped: Capped<ServerIo>,
) -> io::Result<Option<(ServerWs, Outcome)>> {
    let mut outcome: Option<Outcome> = None;
    let callback = |req: &Request, resp: Response| decide(shared, addr, req, resp, &mut outcome);
    let ws = tokio_tungstenite::accept_hdr_async_with_config(
        Replay::new(head, capped),
        callback,
        Some(shared.limits.websocket_config()),
    )
    .await
    .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(outcome.map(|o| (ws, o)))
}

/// Hands an upgraded socket to the owner task, or refuses it over its address's cap.
pub(crate) async fn deliver(shared: &AcceptShared, mut ws: ServerWs, outcome: Outcome) {
    match outcome {
        Outcome::Open(peer, slot) => {
            ws.get_mut().get_mut().disarm();
            let _ = shared.accepted.send(Accepted { ws, peer, slot }).await;
        }
        Outcome::Refuse => {
            shared.stats.dropped(DropReason::AddressCap);
            refuse_open(ws, shared).await;
        }
    }
}

/// Sends [`Refusal::Close`]'s frame and close frame on an upgraded socket that is over its
/// address's cap, and waits (at most `close_timeout`) for the peer's close.
async fn refuse_open(mut ws: ServerWs, shared: &AcceptShared) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let Refusal::Close {
        code,
        reason,
        frame,
    } = &shared.refusal
    else {
        return;
    };
    tracing::debug!(
        code = code.0,
        "too many connections from this address; refused"
    );
    let close = crate::conn::close_frame(*code, reason);
    shared.stats.close_sent(close.code.into());
    let work = async {
        if let Some(frame) = frame.clone().map(crate::conn::to_message) {
            ws.feed(frame).await?;
        }
        ws.send(Message::Close(Some(close))).await?;
        // The peer's close reply (or the end of the socket); anything else is discarded.
        while let Some(msg) = ws.next().await {
            msg?;
        }
        Ok::<_, tokio_tungstenite::tungstenite::Error>(())
    };
    let _ = tokio::time::timeout(shared.limits.close_timeout, work).await;
}

/// The upgrade callback: capacity check, hook, subprotocol, and the peer's `PeerInfo`.
#[allow(clippy::result_large_err)] // the callback's signature is tungstenite's
fn decide(
    shared: &AcceptShared,
    addr: SocketAddr,
    req: &Request,
    mut resp: Response,
    outcome: &mut Option<Outcome>,
) -> Result<Response, ErrorResponse> {
    let Some(slot) = ConnSlot::reserve(&shared.open, shared.max_connections) else {
        shared.stats.dropped(DropReason::ConnectionCap);
        return Err(reject(Reject::unavailable()));
    };
    let Some(addr_slot) =
        shared
            .per_address
            .reserve(addr.ip(), Kind::Open, shared.max_open_per_address)
    else {
        return match &shared.refusal {
            Refusal::Http(r) => {
                shared.stats.dropped(DropReason::AddressCap);
                Err(reject(r.clone()))
            }
            Refusal::Close { .. } => {
                *outcome = Some(Outcome::Refuse);
                Ok(resp)
            }
        };
    };
    let slot = slot.with_address(addr_slot);
    let headers = crate::hook::header_pairs(req.headers());
    let offered: Vec<String> = headers
        .iter()
        .filter(|(n, _)| n == "sec-websocket-protocol")
        .flat_map(|(_, v)| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let path = req.uri().path();
    let upgrade = UpgradeRequest {
        path,
        query: req.uri().query(),
        headers: &headers,
        subprotocols: &offered,
        remote_addr: addr,
    };
    let accept = match &shared.hook {
        Some(hook) => hook.check(&upgrade).map_err(|r| {
            shared.stats.dropped(DropReason::Rejected);
            reject(r)
        })?,
        None => Accept::new(),
    };
    let mut subprotocol = None;
    if let Some(p) = accept.subprotocol {
        if !offered.contains(&p) {
            tracing::warn!(subprotocol = %p, "hook chose a subprotocol the client did not offer; ignored");
        } else if let Ok(v) = HeaderValue::from_str(&p) {
            resp.headers_mut()
                .insert(http::header::SEC_WEBSOCKET_PROTOCOL, v);
            subprotocol = Some(p);
        }
    }
    let path = path.to_owned();
    let mut peer = PeerInfo::new(Some(addr)).with_path(path);
    peer.query = req.uri().query().map(str::to_owned);
    peer.headers = headers;
    peer.subprotocol = subprotocol;
    *outcome = Some(Outcome::Open(peer, slot));
    Ok(resp)
}

/// The HTTP response for a rejection.
fn reject(r: Reject) -> ErrorResponse {
    let status = match r.status {
        300..=599 => StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let len = HeaderValue::from(r.body.len());
    let mut resp = ErrorResponse::new(Some(r.body));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(http::header::CONTENT_LENGTH, len);
    headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pending_refusal_is_a_well_formed_response() {
        let text = std::str::from_utf8(TOO_MANY_HANDSHAKES).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("blank line");
        assert!(head.starts_with("HTTP/1.1 429 "));
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
    }
}
