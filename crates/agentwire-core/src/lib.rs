//! Shared sans-IO vocabulary for the agentwire protocol crates.
//!
//! Every protocol role in agentwire (the chopsticks `Controller` and `Agent`, and the roles
//! of the other protocols) is a [`Machine`]: a state machine that takes input through
//! `handle_*` calls with the current time passed in, and gives output through
//! [`Machine::poll_output`] and [`Machine::poll_timeout`]. It never opens a socket or reads a
//! clock, so the same code runs under the tokio transport (`agentwire-tokio`), under the
//! in-memory `sim` harness with simulated time, or in your own event loop.
//!
//! This crate holds what the roles share:
//!
//! | item | what it is |
//! |---|---|
//! | [`ConnId`] | a connection id assigned by the driver, never reused |
//! | [`Frame`] / [`FrameBuf`] | inbound (borrowed) and outbound (`Bytes`-backed) message bodies |
//! | [`CloseCode`] | WebSocket close codes, an open newtype with named consts |
//! | [`open_codes!`], [`string_id!`] | the macros behind every open code space (`ErrorCode`, `Method`, ...) and string id (`AgentId`, ...) |
//! | [`Output`] / [`Outbox`] | what a machine asks its driver to do, and the queue that holds it |
//! | [`DatagramMachine`], [`Transmit`] | a machine that also takes and sends UDP datagrams (llmrtc's WebRTC) |
//! | [`Flow`] | backpressure: a machine asks its driver to pause or resume reading a connection |
//! | [`Observed`] | a machine whose events a callback sees (counts, logs, keeps or passes on) where the driver polls it, before any channel |
//! | [`PeerInfo`] | remote address, request path and query, headers and subprotocol of a connection |
//! | [`Disconnect`] | how a connection ended: the peer's close code and reason, this side's close, a slow reader, a pong timeout, a refused frame, or a bare end |
//! | [`IdGen`], [`SequentialIds`], `UuidV4Ids` | injected id sources (deterministic in tests) |
//! | [`Monotonic`], [`TimerSet`] | the time clamp and deadline set every machine uses |
//! | [`WallClock`], [`rfc3339_utc`], [`iso8601_ms`], [`UtcDateTime`] | wall-clock time from an anchor (`Instant` + Unix ms) and its RFC 3339 / ISO 8601 forms |
//! | [`Dialer`], [`Dial`] | client machines that own their reconnect policy (when to dial, when to give up) |
//! | [`Rate`], [`TokenBucket`] | a per-connection (or per-key) rate limiter, time passed in |
//! | [`RotatingSecrets`] | API keys / runner secrets rotated with an overlap, compared in constant time |
//! | [`check_json_depth`] | the nesting bound for raw JSON a crate forwards or stores unparsed |
//! | `json` (feature `json`) | `RawJson` (raw JSON kept as text) and the tagged-enum probe decoder |
//! | `fuzzing` (feature `fuzzing`) | `FuzzClock`, the timer-contract check and the input helpers the crates' fuzz bodies share |
//! | `sim` (feature `sim`) | a server + N clients in memory with simulated time, latency, loss |
//!
//! # A run loop
//!
//! A driver is a loop around the contract written on [`Machine`]: feed input, drain output,
//! sleep until `poll_timeout`. The smallest possible one:
//!
//! ```
//! use std::time::{Duration, Instant};
//! use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo};
//!
//! /// Replies "pong" to "ping".
//! #[derive(Default)]
//! struct PingPong { out: Outbox<()> }
//!
//! impl Machine for PingPong {
//!     type Event = ();
//!     fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
//!     fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
//!         if frame == Frame::Text("ping") {
//!             self.out.send(conn, FrameBuf::text("pong"));
//!         }
//!     }
//!     fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
//!     fn handle_timeout(&mut self, _: Instant) {}
//!     fn poll_timeout(&self) -> Option<Instant> { None }
//!     fn poll_output(&mut self) -> Option<Output<()>> { self.out.pop() }
//! }
//!
//! # #[allow(clippy::disallowed_methods)]
//! let now = Instant::now(); // a real driver reads its clock here, and only here
//! let mut m = PingPong::default();
//! let conn = ConnId::new(1);
//! m.handle_connect(conn, &PeerInfo::new(None), now);
//! m.handle_frame(conn, Frame::Text("ping"), now);
//! while let Some(out) = m.poll_output() {
//!     if let Output::Send { frame, .. } = out {
//!         assert_eq!(frame.as_text(), Some("pong")); // a real driver writes it to the socket
//!     }
//! }
//! assert_eq!(m.poll_timeout(), None); // nothing to wake up for
//! ```
//!
//! # Feature flags
//!
//! - `uuid` (default): `UuidV4Ids`, random UUID v4 ids.
//! - `json`: the `json` module (`RawJson`, `probe`, `Tagged`, `Probe`); adds serde and serde_json.
//! - `sim`: the `sim` module (test harness and timer-contract checker).
//! - `fuzzing`: the `fuzzing` module (`FuzzClock`, `checked_timeout`, `json_value`, `pick`):
//!   what the crates' fuzz bodies share; adds arbitrary and serde_json.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod close;
mod codes;
mod conn;
mod datagram;
mod dial;
mod disconnect;
mod frame;
mod id;
mod json_depth;
mod machine;
mod observed;
mod output;
mod peer;
mod rate;
mod secrets;
mod time;

#[cfg(feature = "fuzzing")]
pub mod fuzzing;
#[cfg(feature = "json")]
pub mod json;
#[cfg(feature = "sim")]
pub mod sim;

pub use close::CloseCode;
pub use conn::{ConnId, ConnMap};
pub use datagram::{DatagramMachine, Transmit};
pub use dial::{Dial, Dialer};
pub use disconnect::{truncate_close_reason, Disconnect, MAX_CLOSE_REASON};
pub use frame::{Frame, FrameBuf, FrameError, Utf8Bytes};
#[cfg(feature = "uuid")]
pub use id::UuidV4Ids;
pub use id::{Hyphenated, Id128, Id128Hasher, Id128Map, IdGen, SequentialIds};
pub use json_depth::{check_json_depth, JsonTooDeep, DEFAULT_MAX_JSON_DEPTH};
pub use machine::Machine;
pub use observed::{Observed, Observer};
pub use output::{Flow, Outbox, Output};
pub use peer::PeerInfo;
pub use rate::{Rate, TokenBucket};
pub use secrets::RotatingSecrets;
pub use time::{
    iso8601_ms, rfc3339_utc, DeadlineQueue, Monotonic, TimerSet, UtcDateTime, WallClock,
    MAX_FORMATTED_UNIX_MS,
};
