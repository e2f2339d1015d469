//! Limits and server/client configuration, with documented defaults.
//!
//! Longer than the workspace's 700 lines because every transport setting lives here, each
//! field with its default and what happens at the bound, beside its builder methods.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::CloseCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::{AddressFilter, Backoff, Refusal, UpgradeHook, WallClockSync};

/// Per-connection limits and timers, shared by [`ServerConfig`] and [`ClientConfig`].
///
/// Every field bounds memory or time that a peer could otherwise make grow. Defaults:
///
/// | field | default | why |
/// |---|---|---|
/// | `max_message_size` | 1 MiB | tungstenite's 64 MiB lets one peer pin 64 MiB |
/// | `max_frame_size` | 1 MiB | same, per frame (tungstenite: 16 MiB) |
/// | `read_buffer_size` | 4 KiB | tungstenite's 128 KiB is allocated for every idle connection; also the most read at once |
/// | `write_buffer_size` | 64 KiB | frames are batched up to this before a write; the flush writes the rest |
/// | `max_write_buffer_size` | 4 MiB | bounds tungstenite's write buffer; the largest frame you can send |
/// | `send_queue_frames` | 256 | frames queued per connection before it counts as a slow reader |
/// | `send_queue_bytes` | 8 MiB | bytes queued per connection before it counts as a slow reader |
/// | `slow_reader_close` | 1013 | close code for a connection whose queue overflowed (1008 also fits) |
/// | `ping_interval` | 15 s | WebSocket ping period (`None`: no pings, no pong timeout) |
/// | `pong_timeout` | 30 s | silence (no pong, no data) after which the connection is closed with 1008 |
/// | `handshake_timeout` | 10 s | TCP accept (or connect) to finished upgrade, TLS included |
/// | `max_header_bytes` | 16 KiB | request bytes read during the upgrade before the socket is dropped |
/// | `close_timeout` | 5 s | how long a close frame may take to go out, and the peer to answer it |
/// | `first_frame_delay` | 0 | hold a new connection's first outbound frame this long after the upgrade (see the field) |
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest inbound message; a larger one closes the connection with 1009. Default: 1 MiB.
    pub max_message_size: usize,
    /// Largest inbound frame payload; a larger one closes with 1009. Default: 1 MiB.
    pub max_frame_size: usize,
    /// tungstenite's read buffer, allocated per connection, and the most read from the socket
    /// at once. Default: 4 KiB.
    pub read_buffer_size: usize,
    /// Outbound bytes buffered before tungstenite writes to the socket. Default: 64 KiB.
    pub write_buffer_size: usize,
    /// Hard cap of tungstenite's write buffer (buffered + one frame). Default: 4 MiB.
    pub max_write_buffer_size: usize,
    /// Frames that may wait in one connection's send queue. Default: 256.
    pub send_queue_frames: usize,
    /// Bytes that may wait in one connection's send queue. Default: 8 MiB.
    ///
    /// A single frame larger than this is still accepted into an empty queue.
    pub send_queue_bytes: usize,
    /// Close code sent to a connection whose send queue overflowed. Default: 1013
    /// (try again later); 1008 (policy) is the other usual choice.
    pub slow_reader_close: CloseCode,
    /// WebSocket ping period; `None` disables pings and the pong timeout. Default: 15 s.
    pub ping_interval: Option<Duration>,
    /// With pings on: close the connection with 1008 "pong timeout" after this long without
    /// a pong or any other inbound message. Default: 30 s.
    pub pong_timeout: Duration,
    /// Time allowed from TCP accept/connect to a finished upgrade (TLS included). Default: 10 s.
    pub handshake_timeout: Duration,
    /// Bytes a client may send during the upgrade (request line + headers). Default: 16 KiB.
    pub max_header_bytes: usize,
    /// Time allowed for sending a close frame and for the peer's reply. Default: 5 s.
    pub close_timeout: Duration,
    /// How long a new connection's writer holds its first outbound frame after the upgrade
    /// (frames queued meanwhile go out together when it ends). Meant for servers that greet
    /// first: the npm `ws` client emits `open` and then, in the same tick, every frame that
    /// arrived in the same TCP read as the HTTP 101, before code that awaited `open` has
    /// attached its listeners, so a greeting sent at once is lost to it (llmrtc's `ready`
    /// and the real web client in Node). A few milliseconds put the greeting in a later
    /// read. Default: zero (no hold).
    pub first_frame_delay: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_size: 1 << 20,
            max_frame_size: 1 << 20,
            read_buffer_size: 4 << 10,
            write_buffer_size: 64 << 10,
            max_write_buffer_size: 4 << 20,
            send_queue_frames: 256,
            send_queue_bytes: 8 << 20,
            slow_reader_close: CloseCode::TRY_AGAIN_LATER,
            ping_interval: Some(Duration::from_secs(15)),
            pong_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            max_header_bytes: 16 << 10,
            close_timeout: Duration::from_secs(5),
            first_frame_delay: Duration::ZERO,
        }
    }
}

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limits")
            .field("max_message_size", &self.max_message_size)
            .field("max_frame_size", &self.max_frame_size)
            .field("read_buffer_size", &self.read_buffer_size)
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_write_buffer_size", &self.max_write_buffer_size)
            .field("send_queue_frames", &self.send_queue_frames)
            .field("send_queue_bytes", &self.send_queue_bytes)
            .field("slow_reader_close", &self.slow_reader_close)
            .field("ping_interval", &self.ping_interval)
            .field("pong_timeout", &self.pong_timeout)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_header_bytes", &self.max_header_bytes)
            .field("close_timeout", &self.close_timeout)
            .field("first_frame_delay", &self.first_frame_delay)
            .finish()
    }
}

impl Limits {
    /// Sets [`max_message_size`](Self::max_message_size).
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// Sets [`max_frame_size`](Self::max_frame_size).
    pub fn with_max_frame_size(mut self, bytes: usize) -> Self {
        self.max_frame_size = bytes;
        self
    }

    /// Sets [`read_buffer_size`](Self::read_buffer_size).
    pub fn with_read_buffer_size(mut self, bytes: usize) -> Self {
        self.read_buffer_size = bytes;
        self
    }

    /// Sets [`write_buffer_size`](Self::write_buffer_size).
    pub fn with_write_buffer_size(mut self, bytes: usize) -> Self {
        self.write_buffer_size = bytes;
        self
    }

    /// Sets [`max_write_buffer_size`](Self::max_write_buffer_size).
    pub fn with_max_write_buffer_size(mut self, bytes: usize) -> Self {
        self.max_write_buffer_size = bytes;
        self
    }

    /// Sets [`send_queue_frames`](Self::send_queue_frames) (at least 1).
    pub fn with_send_queue_frames(mut self, frames: usize) -> Self {
        self.send_queue_frames = frames.max(1);
        self
    }

    /// Sets [`send_queue_bytes`](Self::send_queue_bytes).
    pub fn with_send_queue_bytes(mut self, bytes: usize) -> Self {
        self.send_queue_bytes = bytes;
        self
    }

    /// Sets [`slow_reader_close`](Self::slow_reader_close).
    pub fn with_slow_reader_close(mut self, code: CloseCode) -> Self {
        self.slow_reader_close = code;
        self
    }

    /// Sets [`ping_interval`](Self::ping_interval).
    pub fn with_ping_interval(mut self, every: Option<Duration>) -> Self {
        self.ping_interval = every;
        self
    }

    /// Sets [`pong_timeout`](Self::pong_timeout).
    pub fn with_pong_timeout(mut self, timeout: Duration) -> Self {
        self.pong_timeout = timeout;
        self
    }

    /// Sets [`handshake_timeout`](Self::handshake_timeout).
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Sets [`max_header_bytes`](Self::max_header_bytes).
    pub fn with_max_header_bytes(mut self, bytes: usize) -> Self {
        self.max_header_bytes = bytes;
        self
    }

    /// Sets [`close_timeout`](Self::close_timeout).
    pub fn with_close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// Sets [`first_frame_delay`](Self::first_frame_delay).
    pub fn with_first_frame_delay(mut self, delay: Duration) -> Self {
        self.first_frame_delay = delay;
        self
    }

    /// The tungstenite configuration these limits imply.
    pub fn websocket_config(&self) -> WebSocketConfig {
        WebSocketConfig::default()
            .read_buffer_size(self.read_buffer_size)
            .write_buffer_size(self.write_buffer_size)
            .max_write_buffer_size(self.max_write_buffer_size)
            .max_message_size(Some(self.max_message_size))
            .max_frame_size(Some(self.max_frame_size))
    }
}

/// Limits of a driver's UDP socket (a [`DatagramMachine`](agentwire_core::DatagramMachine)
/// driven with [`Server::bind_with_udp`](crate::Server::bind_with_udp) or
/// [`Client::connect_with_udp`](crate::Client::connect_with_udp)), shared by
/// [`ServerConfig`] and [`ClientConfig`]. Unused without a socket.
///
/// | field | default | why |
/// |---|---|---|
/// | `datagrams_per_wake` | 64 | like inbound frames: a flood of datagrams cannot starve the WebSocket side, commands or timers; outputs are drained and the owner yields between slices |
/// | `max_datagram_size` | 65 535 | the receive buffer, one per driver (not per peer): any UDP datagram fits whole; a longer one cannot exist |
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpLimits {
    /// Datagrams taken from the socket per wake-up of the owner task (at least 1).
    /// Default: 64.
    pub datagrams_per_wake: usize,
    /// Size of the receive buffer: a datagram longer than this is cut to it (and the
    /// machine sees a truncated datagram, which it must survive). Default: 65 535.
    pub max_datagram_size: usize,
}

impl Default for UdpLimits {
    fn default() -> Self {
        Self {
            datagrams_per_wake: 64,
            max_datagram_size: 65_535,
        }
    }
}

/// Configuration of a [`Server`](crate::Server).
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Per-connection limits.
    pub limits: Limits,
    /// Open connections (upgrades in progress included) beyond which new upgrades are
    /// answered with HTTP 503 before the upgrade. Default: 10 000.
    pub max_connections: usize,
    /// TCP connections still in the TLS/upgrade handshake beyond which new ones are dropped
    /// at once. Each one is bounded by `handshake_timeout` and `max_header_bytes`.
    /// Default: 4096.
    pub max_pending_handshakes: usize,
    /// Open connections (upgrades past the capacity check included) one peer address may
    /// hold; the next one from that address is refused with
    /// [`address_refusal`](Self::address_refusal), so one address cannot take every slot of
    /// `max_connections` (or of the machine's own cap). An IPv4 address counts alone, an IPv6
    /// address by its /64 prefix; loopback is not exempt. Default: 256.
    pub max_connections_per_address: usize,
    /// Handshakes one peer address may have in progress; further TCP connections from it are
    /// answered at once (plain `ws://`: a short HTTP 429; `wss://`: dropped) without touching
    /// other addresses' handshakes or any established connection. Default: 64.
    pub max_pending_handshakes_per_address: usize,
    /// How a connection over `max_connections_per_address` is refused. Default: HTTP 429
    /// "too many connections from this address"; the reference servers use their protocol's
    /// own refusal (a close code, or HTTP 503 for mcpw).
    pub address_refusal: Refusal,
    /// The text body of the `426 Upgrade Required` answer to a plain HTTP request (one
    /// without `Upgrade: websocket`). Default: a sentence saying this is a WebSocket
    /// endpoint; [`with_endpoint`](Self::with_endpoint) names the protocol and path.
    pub plain_http_body: String,
    /// Capacity of the machine-event channel ([`Events`](crate::Events)); when it is full
    /// the driver waits (backpressure). Default: 1024.
    pub event_capacity: usize,
    /// When the driver re-anchors the machine's wall clock, and where it reads it.
    /// Default: from the system clock, every 60 s and on jumps over 100 ms
    /// ([`WallClockSync`]).
    pub wall_clock: WallClockSync,
    /// Limits of the UDP socket, when the server has one
    /// ([`Server::bind_with_udp`](crate::Server::bind_with_udp)). Default: [`UdpLimits::default`].
    pub udp: UdpLimits,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    pub(crate) hook: Option<Arc<dyn UpgradeHook>>,
    pub(crate) address_filter: Option<Arc<dyn AddressFilter>>,
    /// The protocol named by [`with_endpoint`](Self::with_endpoint): the `protocol` field
    /// of every connection's `conn` span.
    pub(crate) protocol: Option<Arc<str>>,
}

/// Default of [`ServerConfig::max_pending_handshakes`] and
/// [`ListenerConfig::max_pending_handshakes`].
const MAX_PENDING_HANDSHAKES: usize = 4096;
/// Default of the two configs' `max_pending_handshakes_per_address`.
const MAX_PENDING_HANDSHAKES_PER_ADDRESS: usize = 64;

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            max_connections: 10_000,
            max_pending_handshakes: MAX_PENDING_HANDSHAKES,
            max_connections_per_address: 256,
            max_pending_handshakes_per_address: MAX_PENDING_HANDSHAKES_PER_ADDRESS,
            address_refusal: Refusal::default(),
            plain_http_body:
                "This is a WebSocket endpoint; connect to it with a WebSocket client.\n".to_owned(),
            event_capacity: 1024,
            wall_clock: WallClockSync::default(),
            udp: UdpLimits::default(),
            tls: None,
            hook: None,
            address_filter: None,
            protocol: None,
        }
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("limits", &self.limits)
            .field("max_connections", &self.max_connections)
            .field("max_pending_handshakes", &self.max_pending_handshakes)
            .field(
                "max_connections_per_address",
                &self.max_connections_per_address,
            )
            .field(
                "max_pending_handshakes_per_address",
                &self.max_pending_handshakes_per_address,
            )
            .field("address_refusal", &self.address_refusal)
            .field("plain_http_body", &self.plain_http_body)
            .field("event_capacity", &self.event_capacity)
            .field("wall_clock", &self.wall_clock)
            .field("udp", &self.udp)
            .field("tls", &self.tls.is_some())
            .field("hook", &self.hook.is_some())
            .field("address_filter", &self.address_filter.is_some())
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl ServerConfig {
    /// Sets the per-connection limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets [`max_connections`](Self::max_connections).
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// Sets [`max_pending_handshakes`](Self::max_pending_handshakes).
    pub fn with_max_pending_handshakes(mut self, n: usize) -> Self {
        self.max_pending_handshakes = n;
        self
    }

    /// Sets [`max_connections_per_address`](Self::max_connections_per_address).
    pub fn with_max_connections_per_address(mut self, n: usize) -> Self {
        self.max_connections_per_address = n;
        self
    }

    /// Sets [`max_pending_handshakes_per_address`](Self::max_pending_handshakes_per_address).
    pub fn with_max_pending_handshakes_per_address(mut self, n: usize) -> Self {
        self.max_pending_handshakes_per_address = n;
        self
    }

    /// Sets [`address_refusal`](Self::address_refusal).
    pub fn with_address_refusal(mut self, refusal: Refusal) -> Self {
        self.address_refusal = refusal;
        self
    }

    /// Sets [`plain_http_body`](Self::plain_http_body) to a sentence naming `protocol` and
    /// the WebSocket `path`, e.g. `with_endpoint("jsonrpc-bus", "/")`, and names `protocol`
    /// in every connection's `conn` span (field `protocol`, beside `id` and `peer`).
    pub fn with_endpoint(mut self, protocol: &str, path: &str) -> Self {
        self.protocol = Some(protocol.into());
        self.plain_http_body = format!(
            "This is the {protocol} WebSocket endpoint at {path}; connect to it with a WebSocket client.\n"
        );
        self
    }

    /// Sets [`event_capacity`](Self::event_capacity) (at least 1).
    pub fn with_event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n.max(1);
        self
    }

    /// Sets [`wall_clock`](Self::wall_clock).
    pub fn with_wall_clock(mut self, sync: WallClockSync) -> Self {
        self.wall_clock = sync;
        self
    }

    /// Sets [`udp`](Self::udp).
    pub fn with_udp_limits(mut self, udp: UdpLimits) -> Self {
        self.udp = udp;
        self
    }

    /// Serves `wss://`: every accepted socket does a TLS handshake first.
    ///
    /// See [`tls::server_config`](crate::tls::server_config) to build one from PEM.
    pub fn with_tls(mut self, tls: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Installs the upgrade hook that accepts or rejects each upgrade request.
    pub fn with_hook(mut self, hook: impl UpgradeHook) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Whether TLS is configured.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves only peers `filter` allows: any other TCP connection is closed at accept,
    /// before TLS and before any HTTP (an IP allowlist). Default: every peer is served.
    pub fn with_address_filter(mut self, filter: impl AddressFilter) -> Self {
        self.address_filter = Some(Arc::new(filter));
        self
    }
}

/// Configuration of a [`Router`](crate::Router)'s listener: what comes before a request
/// reaches a route (TLS, pending-handshake caps, reading the request head, the answer to
/// an unknown path). Each route's own [`ServerConfig`] keeps everything after that.
#[derive(Clone)]
#[non_exhaustive]
pub struct ListenerConfig {
    /// TCP connections still in the TLS handshake or reading their request head beyond
    /// which new ones are dropped at once. Default: 4096.
    pub max_pending_handshakes: usize,
    /// Handshakes one peer address may have in progress; further TCP connections from it
    /// are answered at once (plain `ws://`: a short HTTP 429; `wss://`: dropped).
    /// Default: 64.
    pub max_pending_handshakes_per_address: usize,
    /// How long the TLS handshake, the request head and the upgrade may take together;
    /// the socket is dropped after it. Default: 10 s.
    pub handshake_timeout: Duration,
    /// Bytes a client may send before its upgrade is done (request head included).
    /// Default: 16 KiB.
    pub max_header_bytes: usize,
    /// The text body of the `404 Not Found` answer to a request for a path no route
    /// serves. Default: a sentence saying no WebSocket endpoint is at this path.
    pub not_found_body: String,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    pub(crate) address_filter: Option<Arc<dyn AddressFilter>>,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        let limits = Limits::default();
        Self {
            max_pending_handshakes: MAX_PENDING_HANDSHAKES,
            max_pending_handshakes_per_address: MAX_PENDING_HANDSHAKES_PER_ADDRESS,
            handshake_timeout: limits.handshake_timeout,
            max_header_bytes: limits.max_header_bytes,
            not_found_body: "No WebSocket endpoint at this path.\n".to_owned(),
            tls: None,
            address_filter: None,
        }
    }
}

impl fmt::Debug for ListenerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerConfig")
            .field("max_pending_handshakes", &self.max_pending_handshakes)
            .field(
                "max_pending_handshakes_per_address",
                &self.max_pending_handshakes_per_address,
            )
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_header_bytes", &self.max_header_bytes)
            .field("not_found_body", &self.not_found_body)
            .field("tls", &self.tls.is_some())
            .field("address_filter", &self.address_filter.is_some())
            .finish()
    }
}

impl ListenerConfig {
    /// Sets [`max_pending_handshakes`](Self::max_pending_handshakes).
    pub fn with_max_pending_handshakes(mut self, n: usize) -> Self {
        self.max_pending_handshakes = n;
        self
    }

    /// Sets [`max_pending_handshakes_per_address`](Self::max_pending_handshakes_per_address).
    pub fn with_max_pending_handshakes_per_address(mut self, n: usize) -> Self {
        self.max_pending_handshakes_per_address = n;
        self
    }

    /// Sets [`handshake_timeout`](Self::handshake_timeout).
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Sets [`max_header_bytes`](Self::max_header_bytes).
    pub fn with_max_header_bytes(mut self, bytes: usize) -> Self {
        self.max_header_bytes = bytes;
        self
    }

    /// Sets [`not_found_body`](Self::not_found_body).
    pub fn with_not_found_body(mut self, body: impl Into<String>) -> Self {
        self.not_found_body = body.into();
        self
    }

    /// Serves `wss://` on every route: every accepted socket does a TLS handshake first.
    ///
    /// See [`tls::server_config`](crate::tls::server_config) to build one from PEM.
    pub fn with_tls(mut self, tls: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Whether TLS is configured.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves only peers `filter` allows, on every route: any other TCP connection is
    /// closed at accept, before TLS and before any HTTP (an IP allowlist). Default: every
    /// peer is served.
    pub fn with_address_filter(mut self, filter: impl AddressFilter) -> Self {
        self.address_filter = Some(Arc::new(filter));
        self
    }
}

/// Configuration of a [`Client`](crate::Client).
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Per-connection limits (`max_header_bytes` is not used by the client).
    pub limits: Limits,
    /// Delays between reconnect attempts.
    pub backoff: Backoff,
    /// Whether to reconnect after the socket ends or an attempt fails. When `false`, the
    /// driver stops after the first socket ends (or the first attempt fails). Default: `true`.
    pub reconnect: bool,
    /// How long a connection must stay open before its end resets the backoff. A peer that
    /// accepts the upgrade and then closes at once (a rejected hello, 1008) is redialled
    /// after 1 s, 2 s, 4 s ... like one that refuses the TCP connection, never once a second
    /// forever. Also applied to [`Client::connect_dialer`](crate::Client::connect_dialer)
    /// machines as a lower bound on their own delays. Default: 30 s.
    pub stable_after: Duration,
    /// Capacity of the machine-event channel. Default: 1024.
    pub event_capacity: usize,
    /// When the driver re-anchors the machine's wall clock, and where it reads it.
    /// Default: from the system clock, every 60 s and on jumps over 100 ms
    /// ([`WallClockSync`]).
    pub wall_clock: WallClockSync,
    /// Limits of the UDP socket, when the client has one
    /// ([`Client::connect_with_udp`](crate::Client::connect_with_udp)). Default:
    /// [`UdpLimits::default`].
    pub udp: UdpLimits,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) subprotocols: Vec<String>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            backoff: Backoff::default(),
            reconnect: true,
            stable_after: Duration::from_secs(30),
            event_capacity: 1024,
            wall_clock: WallClockSync::default(),
            udp: UdpLimits::default(),
            tls: None,
            headers: Vec::new(),
            subprotocols: Vec::new(),
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("limits", &self.limits)
            .field("backoff", &self.backoff)
            .field("reconnect", &self.reconnect)
            .field("stable_after", &self.stable_after)
            .field("event_capacity", &self.event_capacity)
            .field("wall_clock", &self.wall_clock)
            .field("udp", &self.udp)
            .field("tls", &self.tls.is_some())
            .field("headers", &self.headers.len())
            .field("subprotocols", &self.subprotocols)
            .finish()
    }
}

impl ClientConfig {
    /// Sets the per-connection limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the reconnect backoff.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets [`reconnect`](Self::reconnect).
    pub fn with_reconnect(mut self, reconnect: bool) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// Sets [`stable_after`](Self::stable_after).
    pub fn with_stable_after(mut self, after: Duration) -> Self {
        self.stable_after = after;
        self
    }

    /// Sets [`event_capacity`](Self::event_capacity) (at least 1).
    pub fn with_event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n.max(1);
        self
    }

    /// Sets [`wall_clock`](Self::wall_clock).
    pub fn with_wall_clock(mut self, sync: WallClockSync) -> Self {
        self.wall_clock = sync;
        self
    }

    /// Sets [`udp`](Self::udp).
    pub fn with_udp_limits(mut self, udp: UdpLimits) -> Self {
        self.udp = udp;
        self
    }

    /// The rustls configuration for `wss://` URLs. Default (`None`): the Mozilla roots
    /// from `webpki-roots`, with the ring provider.
    ///
    /// See [`tls::client_config_trusting`](crate::tls::client_config_trusting) to trust a
    /// private CA.
    pub fn with_tls(mut self, tls: Arc<rustls::ClientConfig>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Adds a request header to every upgrade (e.g. `Authorization`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Offers a subprotocol in `Sec-WebSocket-Protocol` (in the order added).
    pub fn with_subprotocol(mut self, proto: impl Into<String>) -> Self {
        self.subprotocols.push(proto.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let l = Limits::default();
        assert_eq!(l.max_message_size, 1 << 20);
        assert_eq!(l.read_buffer_size, 4 * 1024);
        assert_eq!(l.slow_reader_close, CloseCode::TRY_AGAIN_LATER);
        assert_eq!(l.max_header_bytes, 16 * 1024);
        let ws = l.websocket_config();
        assert_eq!(ws.max_message_size, Some(1 << 20));
        assert_eq!(ws.read_buffer_size, 4 * 1024);
        assert!(ws.max_write_buffer_size > ws.write_buffer_size + l.max_message_size);
        assert!(ClientConfig::default().reconnect);
        assert_eq!(
            ClientConfig::default().stable_after,
            Duration::from_secs(30)
        );
        let s = ServerConfig::default();
        assert_eq!(s.max_connections_per_address, 256);
        for sync in [&s.wall_clock, &ClientConfig::default().wall_clock] {
            assert_eq!(sync.period, Some(Duration::from_secs(60)));
            assert_eq!(sync.max_jump, Duration::from_millis(100));
        }
        assert_eq!(s.max_pending_handshakes_per_address, 64);
        for udp in [&s.udp, &ClientConfig::default().udp] {
            assert_eq!(udp.datagrams_per_wake, 64);
            assert_eq!(udp.max_datagram_size, 65_535);
        }
        assert_eq!(
            s.address_refusal,
            Refusal::http(429, "too many connections from this address\n")
        );
    }
}
