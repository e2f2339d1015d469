//! The WebSocket client driver: one machine, one socket at a time, reconnect with backoff.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{CloseCode, ConnId, DatagramMachine, Dial, Dialer, Machine, PeerInfo};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::{self, HeaderName, HeaderValue, Uri};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use tracing::Instrument;

use crate::backoff::random_u64;
use crate::driver::{Core, Timer};
use crate::handle::{handle_pair, Control, Events, Handle};
use crate::udp::Udp;
use crate::{tls, Backoff, ClientConfig, ConfigError};

/// The shortest wait between two attempts, whatever the backoff says.
const MIN_RECONNECT_DELAY: Duration = Duration::from_millis(10);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Attempt = Pin<Box<dyn Future<Output = Result<(Ws, PeerInfo), String>> + Send>>;

/// Where and how the client connects.
struct Target {
    url: String,
    host: String,
    port: u16,
    path: String,
    query: Option<String>,
    tls: Option<Arc<rustls::ClientConfig>>,
    headers: Vec<(HeaderName, HeaderValue)>,
    ws_config: WebSocketConfig,
    handshake_timeout: Duration,
}

/// A WebSocket client driving one machine over one socket at a time.
///
/// [`connect`](Self::connect) spawns the driver and returns at once; the machine runs
/// (commands, timers) whether or not a socket is open. Each successful open gets a new
/// [`ConnId`] and a `handle_connect`; each end a `handle_disconnect_with` saying how it
/// ended; then, if
/// [`ClientConfig::reconnect`] is set, the next attempt starts after
/// [`Backoff::delay`] (at least 10 ms). A new attempt starts only after the old socket is
/// fully closed. Outputs addressed to an earlier `ConnId` are dropped.
///
/// The backoff counts failed attempts *and* connections that ended before
/// [`ClientConfig::stable_after`] (30 s); only a connection that stayed open that long
/// resets it. A server that accepts the upgrade and rejects the client right after its
/// hello (1008) is therefore redialled after 1 s, 2 s, 4 s ... 30 s, not once a second.
/// Every failed attempt is logged at `warn` with the OS error (e.g. "Connection refused")
/// and the delay before the next one, as soon as it fails.
///
/// The [`PeerInfo`] given to `handle_connect` holds the server's socket address, the URL's
/// path and query, the server's *response* headers (names lowercased) and the subprotocol the server
/// chose.
///
/// A machine that owns its reconnect policy (attempt limits, backoff with its own jitter,
/// giving up) implements [`Dialer`] and is started with
/// [`connect_dialer`](Self::connect_dialer) instead: the transport then dials only when the
/// machine says so.
///
/// Dropping every [`Handle`] does not stop the driver; call [`Handle::shutdown`].
pub struct Client<M> {
    _machine: PhantomData<fn() -> M>,
}

impl<M> std::fmt::Debug for Client<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client")
    }
}

impl<M> Client<M>
where
    M: Machine + Send + 'static,
    M::Event: Send + 'static,
{
    /// Starts driving `machine` against `url` (`ws://` or `wss://`), from inside a tokio
    /// runtime. The first attempt starts at once.
    pub fn connect(
        url: &str,
        machine: M,
        config: ClientConfig,
    ) -> Result<(Handle<M>, Events<M::Event>), ConfigError> {
        let policy = Policy::Backoff {
            reconnect: config.reconnect,
        };
        start(url, machine, config, policy, None)
    }
}

impl<M> Client<M>
where
    M: DatagramMachine + Send + 'static,
    M::Event: Send + 'static,
{
    /// As [`connect`](Self::connect), and the task that owns the machine also drives `udp`,
    /// a bound UDP socket, as [`Server::bind_with_udp`](crate::Server::bind_with_udp) does:
    /// datagrams in go to [`DatagramMachine::handle_datagram`], the machine's transmits go
    /// out without waiting (a full send buffer drops and counts,
    /// [`Handle::udp_stats`]).
    ///
    /// The socket is kept for the driver's whole life, across reconnects of the WebSocket:
    /// a reconnected session makes new peers (new ICE credentials) on the same port, and a
    /// late datagram of an old peer is the machine's to drop, as any unknown datagram. It is
    /// closed when the driver stops. `udp` must be a `tokio` socket bound inside the
    /// runtime (e.g. `tokio::net::UdpSocket::bind("0.0.0.0:0").await`).
    pub fn connect_with_udp(
        url: &str,
        udp: UdpSocket,
        machine: M,
        config: ClientConfig,
    ) -> Result<(Handle<M>, Events<M::Event>), ConfigError> {
        tokio::runtime::Handle::try_current().map_err(|_| ConfigError::NoRuntime)?;
        let udp = Udp::new(udp, &config.udp).map_err(ConfigError::Udp)?;
        let policy = Policy::Backoff {
            reconnect: config.reconnect,
        };
        start(url, machine, config, policy, Some(udp))
    }
}

impl<M> Client<M>
where
    M: Dialer + Send + 'static,
    M::Event: Send + 'static,
{
    /// As [`connect`](Self::connect), but the machine decides when to dial: the driver
    /// starts an attempt whenever it has no socket and no attempt under way and
    /// [`Dialer::poll_dial`] says [`Dial::Now`], reports failed attempts with
    /// [`Dialer::handle_dial_failed`], and stops on [`Dial::Stop`].
    /// [`ClientConfig::reconnect`] is not used. [`ClientConfig::backoff`] is used only as a
    /// floor after connections that ended within [`ClientConfig::stable_after`]: after the
    /// `n`th such end in a row, the next attempt starts no sooner than `backoff.delay(n - 1)`
    /// after it, whatever the machine's own delay, so a peer that accepts and then closes at
    /// once is not redialled once a second forever.
    pub fn connect_dialer(
        url: &str,
        machine: M,
        config: ClientConfig,
    ) -> Result<(Handle<M>, Events<M::Event>), ConfigError> {
        start(url, machine, config, dialer_policy(), None)
    }
}

impl<M> Client<M>
where
    M: Dialer + DatagramMachine + Send + 'static,
    M::Event: Send + 'static,
{
    /// [`connect_dialer`](Self::connect_dialer) with a UDP socket, driven as in
    /// [`connect_with_udp`](Self::connect_with_udp).
    pub fn connect_dialer_with_udp(
        url: &str,
        udp: UdpSocket,
        machine: M,
        config: ClientConfig,
    ) -> Result<(Handle<M>, Events<M::Event>), ConfigError> {
        tokio::runtime::Handle::try_current().map_err(|_| ConfigError::NoRuntime)?;
        let udp = Udp::new(udp, &config.udp).map_err(ConfigError::Udp)?;
        start(url, machine, config, dialer_policy(), Some(udp))
    }
}

/// The policy of a [`Dialer`] machine.
fn dialer_policy<M: Dialer>() -> Policy<M> {
    Policy::Machine {
        poll_dial: M::poll_dial,
        dial_failed: M::handle_dial_failed,
    }
}

/// Checks the configuration and spawns the owner task.
fn start<M>(
    url: &str,
    machine: M,
    config: ClientConfig,
    policy: Policy<M>,
    udp: Option<Udp<M>>,
) -> Result<(Handle<M>, Events<M::Event>), ConfigError>
where
    M: Machine + Send + 'static,
    M::Event: Send + 'static,
{
    let rt = tokio::runtime::Handle::try_current().map_err(|_| ConfigError::NoRuntime)?;
    let target = Arc::new(target(url, &config)?);
    // Fail early on anything the request builder would refuse.
    target.request().map_err(|e| ConfigError::InvalidUrl {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    let (events_tx, events_rx) = mpsc::channel(config.event_capacity.max(1));
    let (mut handle, control) = handle_pair();
    if let Some(u) = &udp {
        handle.set_udp(u.counters());
    }
    let core = Core::new(
        machine,
        config.limits,
        events_tx,
        control.stop.clone(),
        config.wall_clock,
        handle.counters(),
    );
    let span = tracing::info_span!("client", url = %target.url);
    let pace = Pace::new(config.backoff, config.stable_after);
    rt.spawn(run(core, control, target, policy, pace, udp).instrument(span));
    Ok((handle, Events::new(events_rx)))
}

/// Who decides when the client dials.
enum Policy<M> {
    /// The transport: at once, then after every end with the [`Pace`]'s backoff (if
    /// `reconnect`).
    Backoff { reconnect: bool },
    /// The machine, through [`Dialer`].
    Machine {
        poll_dial: fn(&M) -> Dial,
        dial_failed: fn(&mut M, &str, std::time::Instant),
    },
}

fn target(url: &str, config: &ClientConfig) -> Result<Target, ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    let secure = match uri.scheme_str() {
        Some("ws") => false,
        Some("wss") => true,
        Some(other) => return Err(ConfigError::UnsupportedScheme(other.to_owned())),
        None => return Err(invalid("no scheme")),
    };
    let host = uri.host().ok_or_else(|| invalid("no host"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let tls = if secure {
        Some(match &config.tls {
            Some(t) => Arc::clone(t),
            None => tls::client_config_webpki_roots()?,
        })
    } else {
        None
    };
    let mut headers = Vec::new();
    for (name, value) in &config.headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ConfigError::InvalidHeader(name.clone()))?;
        let v =
            HeaderValue::from_str(value).map_err(|_| ConfigError::InvalidHeader(name.clone()))?;
        headers.push((n, v));
    }
    if !config.subprotocols.is_empty() {
        let joined = config.subprotocols.join(", ");
        let v = HeaderValue::from_str(&joined).map_err(|_| ConfigError::InvalidHeader(joined))?;
        headers.push((http::header::SEC_WEBSOCKET_PROTOCOL, v));
    }
    Ok(Target {
        url: url.to_owned(),
        host,
        port,
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        tls,
        headers,
        ws_config: config.limits.websocket_config(),
        handshake_timeout: config.limits.handshake_timeout,
    })
}

impl Target {
    fn request(&self) -> Result<Request, tokio_tungstenite::tungstenite::Error> {
        let mut req = self.url.as_str().into_client_request()?;
        for (n, v) in &self.headers {
            req.headers_mut().append(n.clone(), v.clone());
        }
        Ok(req)
    }
}

/// One connection attempt: TCP (with `TCP_NODELAY`), TLS for `wss`, the upgrade.
async fn connect_once(
    target: &Target,
) -> Result<(Ws, PeerInfo), tokio_tungstenite::tungstenite::Error> {
    let req = target.request()?;
    let tcp = TcpStream::connect((target.host.as_str(), target.port)).await?;
    tcp.set_nodelay(true)?;
    let addr = tcp.peer_addr().ok();
    let connector = match &target.tls {
        Some(cfg) => Connector::Rustls(Arc::clone(cfg)),
        None => Connector::Plain,
    };
    let (ws, resp) = tokio_tungstenite::client_async_tls_with_config(
        req,
        tcp,
        Some(target.ws_config),
        Some(connector),
    )
    .await?;
    let mut peer = PeerInfo::new(addr).with_path(target.path.clone());
    peer.query.clone_from(&target.query);
    peer.subprotocol = resp
        .headers()
        .get(http::header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    peer.headers = crate::hook::header_pairs(resp.headers());
    Ok((ws, peer))
}

/// An attempt that first waits for the previous socket's task, then `delay`.
fn attempt(target: &Arc<Target>, delay: Duration, linger: Option<JoinHandle<()>>) -> Attempt {
    let target = Arc::clone(target);
    Box::pin(async move {
        if let Some(writer) = linger {
            let _ = writer.await;
        }
        if !delay.is_zero() {
            tracing::debug!(?delay, "reconnecting after");
            tokio::time::sleep(delay).await;
        }
        match tokio::time::timeout(target.handshake_timeout, connect_once(&target)).await {
            Ok(res) => res.map_err(|e| e.to_string()),
            Err(_) => Err("handshake timed out".to_owned()),
        }
    })
}

async fn next_attempt(pending: &mut Option<Attempt>) -> Result<(Ws, PeerInfo), String> {
    match pending {
        Some(a) => a.await,
        None => std::future::pending().await,
    }
}

/// The wait before attempt `attempt`: the backoff with fresh jitter, at least
/// [`MIN_RECONNECT_DELAY`].
fn reconnect_delay(backoff: &Backoff, attempt: u32) -> Duration {
    backoff
        .delay(attempt, random_u64(u64::from(attempt)))
        .max(MIN_RECONNECT_DELAY)
}

/// The reconnect pacing both policies share: a connection resets the backoff only once it
/// has stayed open for `stable_after`.
struct Pace {
    backoff: Backoff,
    stable_after: Duration,
    /// Attempts since the backoff was last reset (failed dials and early ends).
    attempts: u32,
    /// When the current socket opened.
    opened_at: Option<std::time::Instant>,
    /// A machine-driven dial waits until then (set after an early end).
    not_before: Option<std::time::Instant>,
}

impl Pace {
    fn new(backoff: Backoff, stable_after: Duration) -> Self {
        Self {
            backoff,
            stable_after,
            attempts: 0,
            opened_at: None,
            not_before: None,
        }
    }

    fn opened(&mut self) {
        self.opened_at = Some(crate::clock::now());
    }

    /// The socket ended: the delay before the next attempt. The count restarts only if the
    /// socket stayed open for `stable_after`.
    fn ended(&mut self) -> Duration {
        let now = crate::clock::now();
        let lived = self
            .opened_at
            .take()
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        if lived >= self.stable_after {
            self.attempts = 0;
            self.not_before = None;
            return self.next_delay();
        }
        let delay = self.next_delay();
        tracing::debug!(
            ?lived,
            ?delay,
            "connection ended before it was stable; backoff not reset"
        );
        self.not_before = Some(now + delay);
        delay
    }

    /// The delay before the next attempt after a failed one (or an end), counting it.
    fn next_delay(&mut self) -> Duration {
        let delay = reconnect_delay(&self.backoff, self.attempts);
        self.attempts = self.attempts.saturating_add(1);
        delay
    }

    /// How long a machine-driven attempt must still wait.
    fn floor(&self) -> Duration {
        self.not_before.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(crate::clock::now())
        })
    }
}

/// The owner task.
async fn run<M: Machine>(
    mut core: Core<M>,
    mut control: Control<M>,
    target: Arc<Target>,
    policy: Policy<M>,
    mut pace: Pace,
    mut udp: Option<Udp<M>>,
) {
    let mut timer = Timer::new();
    let mut current: Option<ConnId> = None;
    // The task of the last socket: the next attempt waits for it (one socket at a time).
    let mut linger: Option<JoinHandle<()>> = None;
    let mut pending = match policy {
        Policy::Backoff { .. } => Some(attempt(&target, Duration::ZERO, None)),
        Policy::Machine { .. } => None,
    };
    'outer: while !control.stop_requested() {
        if let Policy::Machine { poll_dial, .. } = &policy {
            match poll_dial(&core.machine) {
                Dial::Stop => break 'outer,
                Dial::Now if current.is_none() && pending.is_none() => {
                    pending = Some(attempt(&target, pace.floor(), linger.take()));
                }
                Dial::Now | Dial::Wait => {}
            }
        }
        timer.set(core.poll_timeout());
        let mut more_input = false;
        tokio::select! {
            res = next_attempt(&mut pending) => {
                pending = None;
                match res {
                    Ok((ws, peer)) => {
                        pace.opened();
                        current = Some(core.open(ws, peer, None));
                    }
                    Err(e) => match &policy {
                        Policy::Backoff { reconnect: false, .. } => {
                            tracing::warn!("could not connect to {}: {e}", target.url);
                            break 'outer;
                        }
                        Policy::Backoff { .. } => {
                            let delay = pace.next_delay();
                            tracing::warn!(
                                "could not connect to {}: {e}; retrying in {:.1} s",
                                target.url,
                                delay.as_secs_f64()
                            );
                            pending = Some(attempt(&target, delay, None));
                        }
                        Policy::Machine { dial_failed, .. } => {
                            tracing::warn!("could not connect to {}: {e}", target.url);
                            dial_failed(&mut core.machine, &e, crate::clock::now());
                        }
                    },
                }
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
        for (conn, writer) in core.take_ended() {
            if current == Some(conn) {
                current = None;
                let delay = pace.ended();
                match &policy {
                    Policy::Backoff {
                        reconnect: false, ..
                    } => break 'outer,
                    Policy::Backoff { .. } => {
                        pending = Some(attempt(&target, delay, writer));
                    }
                    Policy::Machine { .. } => linger = writer,
                }
            }
        }
    }
    drop(pending);
    core.close_all(CloseCode::GOING_AWAY, "going away").await;
    crate::udp::flush(&mut udp, &mut core.machine);
    core.take_ended();
    control.commands.close();
    control.done.send_replace(true);
}
