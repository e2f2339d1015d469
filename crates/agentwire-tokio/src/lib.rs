//! The tokio transport for agentwire: drives any sans-IO [`Machine`] over real WebSockets.
//!
//! A protocol crate (chopsticks, jsonrpc-bus, mcpw, ...) gives you a [`Machine`]: a state
//! machine that takes frames and time in and gives frames, closes and events out. This
//! crate runs it over tokio + tokio-tungstenite: a [`Server`] that owns every accepted
//! connection, or a [`Client`] that owns one socket at a time and reconnects. It imports
//! no protocol crate and parses no JSON; it carries [`Frame`]s and
//! [`FrameBuf`]s, close codes and timers, and nothing else.
//!
//! # Shape
//!
//! One task owns the machine. Each socket has one task of its own that reads it and
//! writes it. The owner loop waits for whichever comes first: frames or an end from a
//! connection's task, a command from a [`Handle`], the machine's
//! [`poll_timeout`](agentwire_core::Machine::poll_timeout), or shutdown. After each, it drains
//! [`poll_output`](agentwire_core::Machine::poll_output):
//!
//! - `Send` is collected for that connection without waiting. At the end of the pass each
//!   connection's frames move into its task's outbox under one short lock, with one wake-up,
//!   and the task writes them all with one flush: one hand-off and one write per connection
//!   per pass, however many frames. A queue over its bounds (by frames or bytes) means a
//!   slow reader: that connection alone is closed with [`Limits::slow_reader_close`] (1013),
//!   its queue freed at once, and the machine gets `handle_disconnect_with`
//!   ([`Disconnect::SlowReader`](agentwire_core::Disconnect)).
//! - `Close` makes the task send the close frame after the frames already queued (reason
//!   cut to 123 bytes at a character boundary); the machine gets `handle_disconnect_with`
//!   (`Disconnect::Local` with that code and reason) once the socket is gone.
//! - `Event` goes to [`Events`], a bounded channel: when the application does not keep up,
//!   the driver waits (backpressure). Drop the `Events` to discard them. An event never
//!   waits for a socket write: sends only enter their connection's queue (its task writes
//!   them), so a peer that does not read delays no event, its own or another's
//!   (`events_do_not_wait_behind_a_peer_that_does_not_read`).
//!
//! A connection's task reads every message already readable and hands them over in one
//! channel send (up to 64 messages or 64 KiB). The owner takes at most 64 inbound frames
//! per wake-up, drains the outputs, and yields, so connection tasks empty their queues
//! between slices of a burst: a peer that sends far more than its send queue holds, and
//! reads the replies, is not mistaken for a slow reader.
//!
//! Every connection the machine saw in `handle_connect` ends with exactly one
//! [`handle_disconnect_with`](agentwire_core::Machine::handle_disconnect_with), whoever ended
//! it, carrying a [`Disconnect`](agentwire_core::Disconnect): the peer's close code and
//! reason (1005 for a close frame without one), this side's close (the machine's or the
//! shutdown's 1001), a slow reader, a pong timeout, a refused frame (1009, 1007, 1002), or a
//! socket that ended without a close frame. Every WebSocket pong a peer sends reaches
//! [`handle_pong`](agentwire_core::Machine::handle_pong), in order with its frames (the
//! pings are the driver's, every [`Limits::ping_interval`]). [`PeerInfo`](agentwire_core::PeerInfo)
//! carries the upgrade's path and query string. [`ConnId`]s come from a counter and are never
//! reused; outputs for ended connections are dropped. Commands go through one generic
//! path, [`Handle::call`], which runs a closure with `&mut M` in the owner task.
//!
//! The transport reads the clock in one function (tokio's clock), so tests can run
//! with `#[tokio::test(start_paused = true)]` and the machines' time follows it; it reads
//! the wall clock through one [`WallSource`] to keep the machines' wall clocks right
//! (decision 7).
//!
//! # A server
//!
//! ```no_run
//! use std::time::Instant;
//! use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo};
//! use agentwire_tokio::{Accept, Reject, Server, ServerConfig, UpgradeRequest};
//!
//! /// Echoes every message.
//! #[derive(Default)]
//! struct Echo { out: Outbox<()> }
//!
//! impl Machine for Echo {
//!     type Event = ();
//!     fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
//!     fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
//!         let reply = match frame {
//!             Frame::Text(t) => FrameBuf::text(t.to_owned()),
//!             Frame::Binary(b) => FrameBuf::binary(b.to_vec()),
//!         };
//!         self.out.send(conn, reply);
//!     }
//!     fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
//!     fn handle_timeout(&mut self, _: Instant) {}
//!     fn poll_timeout(&self) -> Option<Instant> { None }
//!     fn poll_output(&mut self) -> Option<Output<()>> { self.out.pop() }
//! }
//!
//! # async fn run() -> std::io::Result<()> {
//! // Only upgrades that carry a token and offer `echo.v1` get through; the rest get 401/426.
//! let hook = |req: &UpgradeRequest<'_>| {
//!     if req.header("authorization").is_none() {
//!         return Err(Reject::unauthorized());
//!     }
//!     if !req.offers("echo.v1") {
//!         return Err(Reject::upgrade_required());
//!     }
//!     Ok(Accept::with_subprotocol("echo.v1"))
//! };
//! let config = ServerConfig::default().with_hook(hook).with_max_connections(1000);
//! let (server, _events) = Server::bind("127.0.0.1:8080", Echo::default(), config).await?;
//! println!("listening on ws://{}", server.local_addr());
//! // Commands run in the task that owns the machine:
//! let _ = server.handle().call(|_echo: &mut Echo, _now| ()).await;
//! server.shutdown().await; // every peer gets 1001 "going away"
//! # Ok(())
//! # }
//! ```
//!
//! For `wss://`, build a rustls config with [`tls::server_config`] from PEM and pass it to
//! [`ServerConfig::with_tls`].
//!
//! # A client
//!
//! ```no_run
//! # use std::time::Instant;
//! # use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo};
//! use agentwire_tokio::{Backoff, Client, ClientConfig};
//!
//! /// Remembers the current connection and reports every text message as an event.
//! #[derive(Default)]
//! struct Chat { out: Outbox<String>, conn: Option<ConnId> }
//!
//! impl Chat {
//!     /// A command: send `text` if connected.
//!     fn say(&mut self, text: &str) -> bool {
//!         let Some(conn) = self.conn else { return false };
//!         self.out.send(conn, FrameBuf::text(text.to_owned()));
//!         true
//!     }
//! }
//!
//! impl Machine for Chat {
//!     type Event = String;
//!     fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, _: Instant) { self.conn = Some(conn); }
//!     fn handle_frame(&mut self, _: ConnId, frame: Frame<'_>, _: Instant) {
//!         if let Frame::Text(t) = frame { self.out.event(t.to_owned()); }
//!     }
//!     fn handle_disconnect(&mut self, _: ConnId, _: Instant) { self.conn = None; }
//!     fn handle_timeout(&mut self, _: Instant) {}
//!     fn poll_timeout(&self) -> Option<Instant> { None }
//!     fn poll_output(&mut self) -> Option<Output<String>> { self.out.pop() }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ClientConfig::default()
//!     .with_header("Authorization", "Bearer secret")
//!     .with_subprotocol("echo.v1")
//!     .with_backoff(Backoff::default()); // 1 s, 2 s, 4 s ... 30 s, + up to 500 ms jitter
//! let (handle, mut events) = Client::connect("wss://example.com/ws", Chat::default(), config)?;
//! let sent = handle.call(|chat, _now| chat.say("hello")).await?;
//! if sent {
//!     while let Some(text) = events.recv().await {
//!         println!("{text}");
//!     }
//! }
//! handle.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Several machines on one listener
//!
//! A [`Router`] puts several machines on one TCP listener, each at its own request path
//! (e.g. a relay at `/agent/ws` beside a bus at `/bus`). [`Router::route`] starts a whole
//! driver per machine, exactly as a [`Server`] has one: its own owner task,
//! [`ServerConfig`] (limits, connection caps, per-address cap and refusal, hook,
//! plain-HTTP body, event capacity, wall clock), [`Handle`] and [`Events`];
//! [`Router::route_with_udp`] gives a route its UDP socket as [`Server::bind_with_udp`]
//! does. [`Router::bind`] starts one accept loop for all of them ([`Listener`]). The
//! accept loop only does what comes before a machine is chosen, under a
//! [`ListenerConfig`]: the address filter, the pending-handshake caps (total and per
//! address), TLS, and reading the request head; then the route whose path equals the
//! request path (query aside) takes over. A plain HTTP request gets that route's `426`, an upgrade goes
//! through that route's capacity checks and hook and lands in that route's owner task,
//! which no other route's traffic ever wakes. A path no route serves gets
//! `404 Not Found` before any upgrade (decision 10). [`Handle::shutdown`] on one route
//! closes its connections with 1001 and its path answers 404 from then on; the others
//! serve on. [`Listener::shutdown`] stops accepting and shuts every route down the same
//! way. A single-machine [`Server`] does not go through the router at all.
//!
//! ```no_run
//! # use agentwire_core::Machine;
//! # async fn run<A, B>(bus: A, relay: B) -> Result<(), Box<dyn std::error::Error>>
//! # where A: Machine + Send + 'static, A::Event: Send + 'static,
//! #       B: Machine + Send + 'static, B::Event: Send + 'static {
//! use agentwire_tokio::{ListenerConfig, Router, ServerConfig};
//! let mut router = Router::new(ListenerConfig::default()); // .with_tls(..) for wss://
//! let bus_config = ServerConfig::default().with_endpoint("jsonrpc-bus", "/bus");
//! let (_bus, _bus_events) = router.route("/bus", bus, bus_config)?;
//! let relay_config = ServerConfig::default().with_endpoint("agent-relay", "/agent/ws");
//! let (_relay, _relay_events) = router.route("/agent/ws", relay, relay_config)?;
//! let listener = router.bind("127.0.0.1:8080").await?;
//! listener.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # UDP beside the WebSocket
//!
//! A machine that also speaks UDP (an [`agentwire_core::DatagramMachine`], e.g. a WebRTC
//! peer whose data channel and audio tracks travel as STUN, DTLS and SRTP datagrams) runs
//! under [`Server::bind_with_udp`] or [`Client::connect_with_udp`] /
//! [`Client::connect_dialer_with_udp`], each given one bound `tokio::net::UdpSocket`. The
//! owner task polls that socket in its own `select!` (no extra task, no channel, no lock),
//! takes at most [`UdpLimits::datagrams_per_wake`] datagrams per wake-up (64), hands each to
//! `handle_datagram` with the sender's and the socket's address, and after every step
//! drains `poll_transmit` with non-blocking sends: a full send buffer drops the datagram
//! (UDP is best effort) and counts it in [`UdpStats`] ([`Handle::udp_stats`]). The
//! transport knows nothing of what the datagrams hold; one socket serves every
//! connection and the machine demultiplexes. A driver started without a socket has the
//! branch disabled and nothing to drain: it runs exactly as before.
//!
//! # Counters
//!
//! Every driver counts what it does, knowing nothing of the protocol: connections open and
//! accepted, text and binary messages and their bytes each way, close frames sent by code,
//! and what it dropped or refused and why (a slow reader's 1013, a pong timeout, a frame
//! the WebSocket layer refuses, the per-address and total connection caps, the pending
//! handshake caps, the hook's rejections, handshake timeouts and failures).
//! [`Handle::stats`] reads them as a [`TransportStats`] without a lock and without reaching
//! the owner task; a [`Router`]'s [`Listener::stats`] holds what happens before a route is
//! chosen (404s, the address filter, the pending caps). They cost a relaxed atomic add
//! where the work is already done: one per inbound batch, one per written batch, one per
//! connection event or refusal. A server's metrics read them at scrape time. Each
//! connection also runs in one `conn` span with its id, peer address and the protocol
//! named by [`ServerConfig::with_endpoint`].
//!
//! # Defaults, and why
//!
//! | setting | default | why |
//! |---|---|---|
//! | `TCP_NODELAY` | on (server and client) | small request/response frames must not wait 40 ms for Nagle |
//! | writes | a pass's frames reach the connection's task at once; it feeds them all and flushes once | one wake-up and one `send` per connection per pass; a flush per message is 5-10x slower |
//! | [`Limits::read_buffer_size`] | 4 KiB | tungstenite's 128 KiB default is allocated (and cleared) per idle connection; 4 KiB keeps an idle bus connection under 9 KB of RSS, and measured no slower under load than 8 KiB |
//! | [`Limits::max_message_size`] / [`max_frame_size`](Limits::max_frame_size) | 1 MiB | not tungstenite's 64 MiB / 16 MiB; larger closes with 1009 |
//! | [`Limits::write_buffer_size`] / [`max_write_buffer_size`](Limits::max_write_buffer_size) | 64 KiB / 4 MiB | batched writes, bounded buffer |
//! | [`Limits::send_queue_frames`] / [`send_queue_bytes`](Limits::send_queue_bytes) | 256 / 8 MiB | a slow reader costs at most this, then is closed with 1013 |
//! | [`Limits::ping_interval`] / [`pong_timeout`](Limits::pong_timeout) | 15 s / 30 s | WebSocket-level liveness; a silent peer is closed with 1008 |
//! | [`Limits::handshake_timeout`] | 10 s | slow or idle handshakes run in their own tasks and are dropped after this |
//! | [`Limits::max_header_bytes`] | 16 KiB | a client cannot grow the handshake buffer without bound |
//! | [`Limits::close_timeout`] | 5 s | a close frame, and the peer's reply, may take this long |
//! | [`Limits::first_frame_delay`] | 0 | a server that greets first may hold its first frame a few ms so it never shares a TCP read with the HTTP 101 (the npm `ws` client loses such a frame) |
//! | [`ServerConfig::max_connections`] | 10 000 | beyond it new upgrades get HTTP 503 before the upgrade |
//! | [`ServerConfig::max_pending_handshakes`] | 4096 | sockets beyond it are dropped at accept |
//! | [`ServerConfig::max_connections_per_address`] | 256 | one address cannot take every connection slot; the next one gets [`ServerConfig::address_refusal`] |
//! | [`ServerConfig::max_pending_handshakes_per_address`] | 64 | one address cannot fill the pending-handshake cap; more get a short 429 and are closed |
//! | [`ServerConfig::address_refusal`] | HTTP 429 | reference servers use their protocol's own refusal (a close code, or HTTP 503) |
//! | [`ServerConfig::plain_http_body`] | "This is a WebSocket endpoint; ..." | the body of the `426 Upgrade Required` a plain HTTP request gets |
//! | [`Backoff`] | 1 s doubling to 30 s, + 0..500 ms | reconnect storms spread out |
//! | [`ClientConfig::stable_after`] | 30 s | only a connection that stayed open this long resets the backoff |
//! | [`WallClockSync::period`] / [`max_jump`](WallClockSync::max_jump) | 60 s / 100 ms | the machine's wall clock is re-anchored this often, and at once after a suspend or a clock step |
//! | [`UdpLimits::datagrams_per_wake`] | 64 | a datagram flood cannot starve frames, commands or timers |
//! | [`UdpLimits::max_datagram_size`] | 65 535 | one receive buffer per driver; every UDP datagram fits |
//! | [`ListenerConfig`] pending caps, `handshake_timeout`, `max_header_bytes` | 4096 / 64 per address, 10 s, 16 KiB | a [`Router`]'s listener: the same as a [`Server`]'s, applied before a route is chosen |
//! | [`ListenerConfig::not_found_body`] | "No WebSocket endpoint at this path." | the body of the `404` for a path no route serves |
//!
//! A client machine with its own reconnect rules (the llmrtc client's at most 5 tries with
//! jittered backoff, ending in a `failed` state) implements
//! [`Dialer`](agentwire_core::Dialer) and runs under [`Client::connect_dialer`]: the
//! transport then dials only when the machine asks, and no sooner than its own backoff
//! allows after connections that ended within `stable_after`.
//!
//! # Decisions
//!
//! Choices where "what a WebSocket transport should do" had more than one reading, each
//! pinned by the named test:
//!
//! 1. **Per-address caps count by IP, IPv6 by its /64, loopback included.** One host usually
//!    owns a whole IPv6 /64; an IPv4-mapped IPv6 address counts as the IPv4 address. Pending
//!    handshakes and open connections are counted apart
//!    (`per_address::tests::ipv6_counts_by_its_64_prefix_and_mapped_ipv4_as_ipv4`,
//!    `tests/limits.rs: one_address_at_its_connection_cap_does_not_lock_out_another`).
//! 2. **A socket over the pending cap is refused, never another one dropped.** It gets a
//!    fixed `429` (plain `ws://` only; nothing of its request is read) and is closed; other
//!    handshakes and every established connection are untouched
//!    (`half_open_handshakes_from_one_address_drop_nobody_else`).
//! 3. **The excess over the per-address connection cap is refused the way the protocol
//!    refuses a full server**: an HTTP status before the upgrade, or the upgrade followed by
//!    a fixed frame and a close code, handled in the handshake task so the machine never sees
//!    it (`a_close_refusal_sends_the_protocol_frame_and_code_and_the_machine_never_sees_it`).
//! 4. **Plain HTTP gets `426 Upgrade Required`** with `Upgrade: websocket` and a one-line
//!    text body naming the protocol and path, on any path: the transport reads the request
//!    head itself before tungstenite (which would drop such a connection). An upgrade to a
//!    wrong path is still the hook's to refuse (e.g. 404)
//!    (`plain_http_gets_426_naming_the_protocol_and_path`). Under a [`Router`] the route's
//!    body answers on its own path and other paths get 404 (decision 10).
//! 5. **The reconnect backoff counts early closes.** An open alone does not reset it: only a
//!    connection that stayed open for `stable_after` does, so a peer rejected right after its
//!    hello is redialled after 1 s, 2 s, 4 s ... (simulated time:
//!    `a_peer_that_rejects_right_after_the_upgrade_is_redialled_with_growing_delays`). For a
//!    [`Dialer`](agentwire_core::Dialer) machine the same backoff is a floor under the
//!    machine's own delay (`a_dialer_machine_is_held_to_the_backoff_after_early_closes`).
//! 6. **A failed connect is logged at `warn` at once**, with the OS error and the delay before
//!    the next attempt (`a_refused_connect_is_logged_with_the_os_error_at_once`).
//! 7. **The machine's wall clock is re-anchored lazily, at wake-ups.** Machines turn monotonic
//!    time into wall time from an anchor (rule 9 of the `Machine` contract), which goes wrong
//!    after a suspend (the monotonic clock stops) or a clock step. At every wake-up that
//!    hands the machine input (a frame, a connect, a command, a timer), before the input,
//!    the driver reads the wall clock ([`WallSource`], the system clock by default) and
//!    calls `handle_wall_clock` if [`WallClockSync::period`] (60 s) has passed since the
//!    last anchor or the wall clock is more than [`WallClockSync::max_jump`] (100 ms) away
//!    from where monotonic time puts it; a jump is logged at `info`. No timer of its own:
//!    an idle machine writes no wall time, and the first thing it does after a resume is
//!    timed by a correct anchor (`tests/wall_clock.rs`:
//!    `a_jump_of_the_wall_clock_reaches_the_machine_before_its_next_input`,
//!    `a_drift_under_max_jump_is_corrected_at_the_period`; over real sockets with the
//!    reference bus and relay: the workspace's `tests/wall_clock.rs`).
//!
//! 8. **A client keeps its UDP socket across reconnects.** The socket given to
//!    [`Client::connect_with_udp`] lives as long as the driver: a reconnected WebSocket
//!    session makes new peers on the same local port (nothing to rebind, no port to
//!    re-learn), and a late datagram of an old peer is the machine's to drop like any
//!    unknown datagram (`tests/udp.rs: a_client_keeps_its_udp_socket_across_reconnects`).
//! 9. **A transmit is sent at once or dropped.** Sends never wait for the socket: a
//!    datagram that meets a full send buffer is dropped and counted
//!    ([`UdpStats::dropped_full`]), one the OS refuses for another reason is dropped and
//!    counted ([`UdpStats::send_errors`]), and the driver goes on; waiting would stall every
//!    connection of the machine behind one socket buffer
//!    (`a_transmit_the_os_refuses_is_counted_and_the_driver_goes_on`,
//!    `a_fresh_socket_sends_the_first_transmit_at_once`).
//! 10. **A [`Router`] matches the exact path and answers anything else with 404.** The
//!     request path without its query must equal a route's path (`/a/` is not `/a`; no
//!     prefixes, no wildcards: an operator reads the routes as a list of endpoints). An
//!     unknown path, or the path of a route that was shut down, gets `404 Not Found`
//!     with [`ListenerConfig::not_found_body`] before any upgrade, whether the request
//!     asks for one or is plain HTTP; a plain request on a routed path gets that route's
//!     `426`. Each route keeps its own per-address connection cap and refusal (one
//!     protocol's peers cannot use up another's); the pending-handshake caps, TLS and
//!     the handshake timeout are the listener's, because they apply before the path is
//!     known, and a route's [`ServerConfig`] that sets TLS is refused
//!     ([`ConfigError::TlsOnRoute`]) rather than silently ignored (`tests/router.rs`:
//!     `an_unknown_path_gets_404_and_a_plain_get_gets_the_routes_426`,
//!     `shutting_one_route_down_leaves_the_others_serving`,
//!     `the_per_address_cap_is_each_routes_own`,
//!     `a_tls_listener_serves_every_route_over_wss`).
//! 11. **An address filter acts at accept.** [`ServerConfig::with_address_filter`] and
//!     [`ListenerConfig::with_address_filter`] take an [`AddressFilter`] (an IP
//!     allowlist) that sees only the peer's address: a refused socket is closed before TLS,
//!     before any byte is read or written, and before it counts against the
//!     pending-handshake caps, so a refused address cannot use them up; it is counted as
//!     `not_allowed`. The transport holds no list syntax: the caller decides
//!     (`tests/address_filter.rs`: `a_server_closes_a_refused_address_before_any_http`,
//!     `a_router_closes_a_refused_address_before_any_http`).
//! 12. **One buffered write per pass, not a vectored one.** A connection's task feeds a
//!     pass's frames to tungstenite, which frames them into its write buffer, and flushes
//!     once: one `send` per connection per pass. A `writev` of headers and payloads straight
//!     to the socket would save the copy, but tungstenite writes its own pong and close
//!     replies into the same socket from its read path, and a vectored batch that the
//!     socket took only in part could then be cut by one of them; for the small frames the
//!     protocols send, the copy measured at 2-3% of a loaded server's time. A socket read
//!     happens only after the socket woke the task for reading (a wake-up for the owner's
//!     frames does not read), because tungstenite clears its whole read buffer before every
//!     read (`events_do_not_wait_behind_a_peer_that_does_not_read` drives a connection whose
//!     reads stop at a full batch with more already buffered).
//!
//! What the transport does **not** own: protocol heartbeats (`hello`, JSON `ping`),
//! request timeouts and version checks. Those are machine timers.
//!
//! [`Machine`]: agentwire_core::Machine
//! [`Frame`]: agentwire_core::Frame
//! [`FrameBuf`]: agentwire_core::FrameBuf
//! [`ConnId`]: agentwire_core::ConnId
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod backoff;
mod client;
mod clock;
mod config;
mod conn;
mod driver;
mod error;
mod handle;
mod hook;
mod http;
mod per_address;
mod router;
mod server;
mod stats;
mod stream;
pub mod tls;
mod udp;
mod wall;

pub use agentwire_core;
pub use backoff::Backoff;
pub use client::Client;
pub use config::{ClientConfig, Limits, ListenerConfig, ServerConfig, UdpLimits};
pub use error::{ConfigError, TlsError};
pub use handle::{Closed, Events, Handle};
pub use hook::{Accept, AddressFilter, Refusal, Reject, UpgradeHook, UpgradeRequest};
pub use router::{Listener, Router};
pub use server::Server;
pub use stats::{CloseCounts, DropCounts, TransportStats};
pub use udp::UdpStats;
pub use wall::{WallClockSync, WallSource};
