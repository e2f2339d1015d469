//! The WebSocket server driver: accept loop, handshakes, and the owner task.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use agentwire_core::{CloseCode, Machine, PeerInfo};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{self, HeaderValue, StatusCode};
use tokio_tungstenite::WebSocketStream;
use tracing::Instrument;

use crate::conn::ConnSlot;
use crate::driver::{Core, Timer};
use crate::handle::{handle_pair, Control, Events, Handle};
use crate::hook::{Accept, Reject, UpgradeHook, UpgradeRequest};
use crate::stream::{Capped, ServerIo};
use crate::{Limits, ServerConfig};

/// An upgraded socket on its way to the owner task.
struct Accepted {
    ws: WebSocketStream<Capped<ServerIo>>,
    peer: PeerInfo,
    slot: ConnSlot,
}

/// What every handshake task shares.
struct AcceptShared {
    limits: Limits,
    max_connections: usize,
    open: Arc<AtomicUsize>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    hook: Option<Arc<dyn UpgradeHook>>,
    accepted: mpsc::Sender<Accepted>,
}

/// A WebSocket server driving one machine that owns every connection.
///
/// [`bind`](Self::bind) spawns the accept loop and the owner task and returns at once.
/// Dropping the `Server` does not stop it: call [`shutdown`](Self::shutdown) (or
/// [`Handle::shutdown`]).
pub struct Server<M> {
    local_addr: SocketAddr,
    handle: Handle<M>,
}

impl<M> std::fmt::Debug for Server<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
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
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let (events_tx, events_rx) = mpsc::channel(config.event_capacity.max(1));
        let (handle, control) = handle_pair();
        let (accepted_tx, accepted_rx) = mpsc::channel(64);
        let shared = Arc::new(AcceptShared {
            limits: config.limits.clone(),
            max_connections: config.max_connections,
            open: Arc::new(AtomicUsize::new(0)),
            tls: config.tls.clone().map(tokio_rustls::TlsAcceptor::from),
            hook: config.hook.clone(),
            accepted: accepted_tx,
        });
        let accept_task =
            tokio::spawn(accept_loop(listener, shared, config.max_pending_handshakes));
        let core = Core::new(machine, config.limits, events_tx, control.stop.clone());
        tokio::spawn(
            run(core, control, accepted_rx, accept_task)
                .instrument(tracing::info_span!("server", addr = %local_addr)),
        );
        Ok((Self { local_addr, handle }, Events::new(events_rx)))
    }

    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle to run commands on the machine.
    pub fn handle(&self) -> Handle<M> {
        self.handle.clone()
    }

    /// Stops accepting, closes every connection with 1001 "going away", calls
    /// `handle_disconnect` for each, and waits until the driver has stopped.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}

/// The owner task.
async fn run<M: Machine>(
    mut core: Core<M>,
    mut control: Control<M>,
    mut accepted: mpsc::Receiver<Accepted>,
    accept_task: tokio::task::JoinHandle<()>,
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
            _ = control.stop.changed() => {}
        }
        core.finish_step(more_input, &mut control.commands).await;
        core.take_ended();
    }
    tracing::debug!(open = core.len(), "shutting down");
    accept_task.abort();
    accepted.close();
    while accepted.try_recv().is_ok() {}
    core.close_all(CloseCode::GOING_AWAY, "going away").await;
    core.take_ended();
    control.commands.close();
    control.done.send_replace(true);
}

/// Accepts sockets and runs each handshake in its own task.
async fn accept_loop(listener: TcpListener, shared: Arc<AcceptShared>, max_pending: usize) {
    let mut handshakes = JoinSet::new();
    loop {
        tokio::select! {
            res = listener.accept() => match res {
                Ok((tcp, addr)) => {
                    if handshakes.len() >= max_pending {
                        tracing::debug!(peer = %addr, "too many pending handshakes; dropped");
                        continue;
                    }
                    let shared = Arc::clone(&shared);
                    handshakes.spawn(
                        handshake(tcp, addr, shared)
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
#[allow(clippy::result_large_err)] // the callback's signature is tungstenite's
async fn handshake(tcp: TcpStream, addr: SocketAddr, shared: Arc<AcceptShared>) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "set_nodelay failed");
    }
    let work = async {
        let io = match &shared.tls {
            Some(acceptor) => ServerIo::Tls(Box::new(acceptor.accept(tcp).await?)),
            None => ServerIo::Plain(tcp),
        };
        let capped = Capped::new(io, shared.limits.max_header_bytes);
        let mut outcome: Option<(PeerInfo, ConnSlot)> = None;
        let callback =
            |req: &Request, resp: Response| decide(&shared, addr, req, resp, &mut outcome);
        let ws = tokio_tungstenite::accept_hdr_async_with_config(
            capped,
            callback,
            Some(shared.limits.websocket_config()),
        )
        .await
        .map_err(|e| io::Error::other(e.to_string()))?;
        Ok::<_, io::Error>((ws, outcome))
    };
    match tokio::time::timeout(shared.limits.handshake_timeout, work).await {
        Ok(Ok((mut ws, Some((peer, slot))))) => {
            ws.get_mut().disarm();
            let _ = shared.accepted.send(Accepted { ws, peer, slot }).await;
        }
        Ok(Ok((_, None))) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "handshake failed"),
        Err(_) => tracing::debug!("handshake timed out"),
    }
}

/// The upgrade callback: capacity check, hook, subprotocol, and the peer's `PeerInfo`.
#[allow(clippy::result_large_err)] // the callback's signature is tungstenite's
fn decide(
    shared: &AcceptShared,
    addr: SocketAddr,
    req: &Request,
    mut resp: Response,
    outcome: &mut Option<(PeerInfo, ConnSlot)>,
) -> Result<Response, ErrorResponse> {
    let Some(slot) = ConnSlot::reserve(&shared.open, shared.max_connections) else {
        return Err(reject(Reject::unavailable()));
    };
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
        Some(hook) => hook.check(&upgrade).map_err(reject)?,
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
    peer.headers = headers;
    peer.subprotocol = subprotocol;
    *outcome = Some((peer, slot));
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
