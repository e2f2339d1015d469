//! The `LlmrtcClient`: the client role, one connection at a time, surviving reconnects.
//!
//! It is longer than 700 lines because the role's public surface and its documentation
//! live here: the method list, fifteen spec decisions and the limits table take a third
//! of it. What grows on its own is split out: reply assembly ([`reply`]), the hand-over to
//! the data channel ([`overlap`]), states, events and jitter.

mod event;
mod jitter;
mod overlap;
mod reply;
pub(crate) mod state;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use agentwire_core::{
    CloseCode, ConnId, Dial, Dialer, Frame, FrameBuf, Machine, Monotonic, Outbox, Output, PeerInfo,
    TimerSet, WallClock,
};

use crate::codec::{encode_audio, Decoded};
use crate::config::ClientConfig;
use crate::error::{ClientCommandError, ProtocolError};
use crate::ids::SessionId;
use crate::message::{
    channel_of, Attachments, Channel, ClientMessage, IceServer, Offer, Ping, RawJson, Ready,
    Reconnect, ServerMessage, SessionMode, VisionAttachment, PROTOCOL_VERSION,
};

pub use event::{ClientEvent, IgnoreReason, LossReason};
pub use jitter::{FixedJitter, JitterSource, SplitMix64};
use overlap::Overlap;
use reply::Reply;
pub use state::ConnectionState;

/// Close reason sent when no `ready` came in time.
pub const CLOSE_READY_TIMEOUT: &str = "ready-timeout";
/// Close reason sent when pongs stopped coming.
pub const CLOSE_PONG_TIMEOUT: &str = "pong-timeout";
/// Close reason sent by [`LlmrtcClient::drop_connection`].
pub const CLOSE_DROPPED: &str = "client-reconnect";
/// Close reason sent by [`LlmrtcClient::close`].
pub const CLOSE_CLIENT: &str = "client-closed";

/// The client's deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// `ready` must arrive by then.
    Ready,
    /// Send the next `ping`.
    Ping,
    /// The outstanding `ping` counts as missed.
    Pong,
    /// Start the next reconnect try.
    Retry,
}

/// Where a server message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    WebSocket,
    DataChannel,
}

/// The llmrtc client role (what `@llmrtc/llmrtc-web-client` does), sans IO.
///
/// It owns one WebSocket at a time and keeps its session across reconnects:
///
/// - waits for `ready` ([`ClientConfig::ready_timeout`], 10 s), warns on a protocol version
///   mismatch ([`ClientEvent::VersionMismatch`]) and carries on;
/// - pings every 15 s; a pong not back in 10 s is a miss, two misses in a row drop the
///   connection;
/// - reconnects with backoff (1 s × 2^n, capped at 30 s, + up to 30 % jitter from the
///   injected [`JitterSource`], at most 5 tries, then `failed`), and on each new connection
///   sends `reconnect` with the previous session id right after `ready`, before anything
///   else (queued commands follow it);
/// - applies INTEROP.md's dual-channel rule, so each payload message is handled once:
///   `signal`, `pong` and `reconnect-ack` only from the WebSocket, every other type from the
///   WebSocket only while the data channel is not open and from the data channel while it is
///   ([`set_data_channel_open`](Self::set_data_channel_open),
///   [`handle_data_channel_frame`](Self::handle_data_channel_frame));
/// - assembles the `llm-chunk` stream ([`ClientEvent::LlmReply`]) and TTS chunks
///   ([`ClientEvent::TtsAudio`]);
/// - exposes the web client's states ([`ConnectionState`]).
///
/// It implements [`Dialer`]: run it with `agentwire_tokio::Client::connect_dialer`, which
/// dials only when the machine asks, so the backoff and the try limit are this machine's,
/// tested in simulated time.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`],
///   [`Dialer::handle_dial_failed`], [`LlmrtcClient::handle_data_channel_frame`];
/// - output: [`Machine::poll_output`], [`Machine::poll_timeout`], [`Dialer::poll_dial`];
/// - commands: [`LlmrtcClient::start`], [`LlmrtcClient::close`],
///   [`LlmrtcClient::drop_connection`],
///   [`LlmrtcClient::send_audio`], [`LlmrtcClient::send_attachments`],
///   [`LlmrtcClient::offer`] (alias [`send_offer`](LlmrtcClient::send_offer)),
///   [`LlmrtcClient::set_data_channel_open`],
///   [`LlmrtcClient::set_wall_clock`];
/// - getters: [`LlmrtcClient::state`], [`LlmrtcClient::session_id`],
///   [`LlmrtcClient::ready_id`], [`LlmrtcClient::server_protocol_version`],
///   [`LlmrtcClient::ice_servers`], [`LlmrtcClient::mode`], [`LlmrtcClient::reconnect_tries`],
///   [`LlmrtcClient::rtt`], [`LlmrtcClient::is_data_channel_open`],
///   [`LlmrtcClient::queued`].
///
/// # Spec decisions (client role)
///
/// Each is pinned by the test named after it (`tests/client_*.rs`).
///
/// 1. **Jitter is added, never subtracted, after the cap**: the wait before try `n` is
///    `min(1 s × 2^n, 30 s)` plus up to 30 % of that (INTEROP.md's "+≤30 %"), so the longest
///    wait is 39 s (`backoff_caps_at_thirty_seconds_and_jitter_adds_at_most_thirty_percent`).
/// 2. **"At most 5 tries" counts the tries after a loss**, and the count resets on `ready`,
///    not on the TCP/WebSocket open: a server that accepts but never says `ready` uses tries
///    up (`backoff_doubles_from_one_second_and_gives_up_after_five_tries`,
///    `tries_restart_from_one_second_after_a_successful_ready`,
///    `no_ready_within_ten_seconds_closes_and_retries`).
/// 3. **A failed first connection goes to `reconnecting`** (the web client's
///    `CONNECTING → RECONNECTING`), and **`failed` is not terminal**: `start` tries again with
///    a fresh count; only `closed` is terminal ([`Dial::Stop`]) (`close_is_terminal`).
/// 4. **`connected` means `ready` arrived**: this machine is the WebSocket session; the
///    WebRTC peer is the application's (`llmrtc-webrtc`'s `WebrtcClient` builds it on
///    [`offer`](Self::offer) and the data-channel hooks) and reports its own state
///    (`starts_disconnected_and_dials_only_after_start`, `the_full_state_cycle`).
/// 5. **`reconnect` goes out right after `ready`, then the commands queued meanwhile**,
///    without waiting for `reconnect-ack`: the server handles one connection's messages in
///    order (`reconnect_is_sent_before_anything_else_and_the_session_follows_the_ack`).
/// 6. **The session follows `reconnect-ack.sessionId`**: kept on success, replaced by the
///    new connection's id on failure, kept while no ack has come (same test;
///    `after_a_server_restart_the_client_moves_to_a_new_session` in `tests/llmrtc_e2e.rs`).
/// 7. **Any `pong` resets the miss count; RTT only when it echoes the last `ping`**
///    (`a_pong_between_misses_resets_the_count`,
///    `pings_every_fifteen_seconds_and_measures_rtt_from_the_echo`). Ping timestamps are
///    Unix milliseconds from [`set_wall_clock`](Self::set_wall_clock) (the browser's
///    `Date.now()`); without it, milliseconds since the first time the client saw.
/// 8. **Nothing before `ready` is handled** (reported as
///    [`IgnoreReason::BeforeReady`]); `ready` counts only from the WebSocket, and a second
///    one on a connection is a violation
///    (`nothing_before_ready_unknown_types_and_garbage_are_ignored_without_harm`).
/// 9. **`error` is a payload message** for the dual-channel rule (it is not in INTEROP.md's
///    WebSocket-only list) (`dual_channel_each_payload_message_is_handled_once`).
/// 10. **TTS chunks surface decoded** ([`ClientEvent::TtsChunk`], not as a
///     [`ClientEvent::Message`]); the joined audio comes at `tts-complete`
///     ([`ClientEvent::TtsAudio`]); `tts-cancelled` drops it
///     (`tts_chunks_are_decoded_and_joined_at_tts_complete`).
/// 11. **Bad server messages never close the connection**: they are reported
///     ([`ClientEvent::ProtocolViolation`]) and skipped; assembled text and audio are
///     bounded ([`ClientConfig::max_llm_text_bytes`], [`ClientConfig::max_tts_audio_bytes`])
///     (`the_llm_text_limit_stops_appending_and_says_so_once`,
///     `tts_audio_beyond_the_limit_is_dropped`).
/// 12. **core 1.3.0's messages surface as [`ClientEvent::Message`]** (`assistant-transcript`,
///     `usage`, `mode-changed`, under the dual-channel rule like every payload message);
///     [`ClientEvent::Ready`] carries `ready.mode` as sent, and [`mode`](Self::mode) follows
///     `ready.mode` then each `mode-changed`, reading a `ready` without `mode` as
///     `pipeline` (older servers always run it); an unknown mode is kept, not refused
///     (`core_1_3_messages_surface_as_events_and_mode_follows_mode_changed`,
///     `dual_channel_each_payload_message_is_handled_once`).
/// 13. **An `offer` needs `ready` and is never queued** ([`ClientCommandError::NotReady`]):
///     a peer connection belongs to one WebSocket connection, and after a reconnect the
///     real client makes a new peer and offers after `reconnect`; `signal` surfaces as
///     [`ClientEvent::Message`] from the WebSocket only
///     (`offer_needs_ready_and_goes_on_the_websocket_and_signal_comes_back_from_it`).
/// 14. **What goes on the data channel**: `attachments`, while it is open
///     ([`ClientEvent::DataChannelSend`]); that is all the real web client sends there, and
///     all the real backend reads from it. `audio` (the spec's fallback for a missing
///     track), `ping`, `offer` and `reconnect` stay on the WebSocket
///     (`attachments_go_on_the_data_channel_while_it_is_open_and_the_rest_on_the_websocket`).
/// 15. **No payload twice across the hand-over**: the server copies payloads to the data
///     channel from when its side opens, the client reads them from when its side opens;
///     a message between the two is handled from the WebSocket and then repeated by the
///     channel. The channel's first frames are compared, in order and byte for byte (the
///     server writes the same frame to both), with the payload frames handled from the
///     WebSocket in [`ClientConfig::data_channel_overlap`] (2 s) before the channel
///     opened (remembered only once an `offer` went out on the connection); matching ones are dropped ([`IgnoreReason::Duplicate`]); the first that
///     does not match ends the hand-over, as does one whose twin came on the WebSocket
///     after the channel opened (a new message, sent on both). Without sequence numbers
///     on the wire this is a judgement: a new message identical to one of the last
///     moments' whose channel copy outruns its WebSocket copy would be dropped, which needs
///     identical payloads within milliseconds around the opening. The other way round (a channel that closes with
///     copies in flight) may lose those messages, as in the real client
///     (`the_data_channel_repeating_what_the_websocket_gave_before_it_opened_is_dropped`).
///
/// # Limits
///
/// | limit | default |
/// |---|---|
/// | [`ClientConfig::max_message_bytes`] | 8 MiB |
/// | [`ClientConfig::max_llm_text_bytes`] | 1 MiB |
/// | [`ClientConfig::max_tts_audio_bytes`] | 32 MiB |
/// | [`ClientConfig::max_queued`] / [`max_queued_bytes`](ClientConfig::max_queued_bytes) | 16 / 16 MiB |
pub struct LlmrtcClient {
    config: ClientConfig,
    rng: Box<dyn JitterSource>,
    clock: Monotonic,
    state: ConnectionState,
    conn: Option<ConnId>,
    ready: bool,
    want_dial: bool,
    tries: u32,
    timers: TimerSet<Timer>,
    /// The session a `reconnect` asks for on the next connection.
    session_id: Option<SessionId>,
    ready_id: Option<SessionId>,
    server_version: Option<u32>,
    ice_servers: Option<Vec<IceServer>>,
    mode: Option<SessionMode>,
    data_channel_open: bool,
    overlap: Overlap,
    missed_pongs: u32,
    last_ping: Option<(u64, Instant)>,
    wall_clock: Option<WallClock>,
    rtt: Option<Duration>,
    queue: VecDeque<FrameBuf>,
    queued_bytes: usize,
    reply: Reply,
    scratch: Vec<u8>,
    out: Outbox<ClientEvent>,
}

impl std::fmt::Debug for LlmrtcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmrtcClient")
            .field("state", &self.state)
            .field("conn", &self.conn)
            .field("session_id", &self.session_id)
            .field("tries", &self.tries)
            .finish_non_exhaustive()
    }
}

impl LlmrtcClient {
    /// A client in state `disconnected`; call [`start`](Self::start) to connect. `jitter`
    /// supplies the reconnect jitter (a seeded [`SplitMix64`] in tests).
    pub fn new(config: ClientConfig, jitter: impl JitterSource + 'static) -> Self {
        Self {
            session_id: config.resume_session.clone().map(SessionId::from),
            config,
            rng: Box::new(jitter),
            clock: Monotonic::new(),
            state: ConnectionState::Disconnected,
            conn: None,
            ready: false,
            want_dial: false,
            tries: 0,
            timers: TimerSet::new(),
            ready_id: None,
            server_version: None,
            ice_servers: None,
            mode: None,
            data_channel_open: false,
            overlap: Overlap::default(),
            missed_pongs: 0,
            last_ping: None,
            wall_clock: None,
            rtt: None,
            queue: VecDeque::new(),
            queued_bytes: 0,
            reply: Reply::default(),
            scratch: Vec::new(),
            out: Outbox::new(),
        }
    }

    // ----- getters -----

    /// The connection state.
    pub fn state(&self) -> ConnectionState {
        self.state
    }

    /// The session this client belongs to: the first `ready.id`, kept across reconnects
    /// while the server recovers it, replaced when a `reconnect-ack` says it is gone.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_ref().map(SessionId::as_str)
    }

    /// `ready.id` of the current connection.
    pub fn ready_id(&self) -> Option<&str> {
        self.ready_id.as_ref().map(SessionId::as_str)
    }

    /// The protocol version the server announced.
    pub fn server_protocol_version(&self) -> Option<u32> {
        self.server_version
    }

    /// The ICE servers of the last `ready`.
    pub fn ice_servers(&self) -> Option<&[IceServer]> {
        self.ice_servers.as_deref()
    }

    /// The session's mode on the current (or last) connection: `ready.mode`, then what
    /// `mode-changed` said; [`SessionMode::PIPELINE`] when the server's `ready` had no mode
    /// (servers older than core 1.3.0 always run the pipeline). `None` before the first
    /// `ready`.
    pub fn mode(&self) -> Option<&SessionMode> {
        self.mode.as_ref()
    }

    /// Reconnect tries made since the last `ready`.
    pub fn reconnect_tries(&self) -> u32 {
        self.tries
    }

    /// The last measured ping round trip.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    /// Whether the application reported the data channel open.
    pub fn is_data_channel_open(&self) -> bool {
        self.data_channel_open
    }

    /// Messages queued until the next `ready`.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The current connection, once open.
    pub fn conn(&self) -> Option<ConnId> {
        self.conn
    }

    // ----- commands -----

    /// Starts connecting (from `disconnected`, or again from `failed` with a fresh try
    /// count). The driver dials next ([`Dialer::poll_dial`] says [`Dial::Now`]).
    pub fn start(&mut self, now: Instant) -> Result<(), ClientCommandError> {
        self.clock.observe(now);
        match self.state {
            ConnectionState::Closed => Err(ClientCommandError::Closed),
            ConnectionState::Disconnected | ConnectionState::Failed => {
                self.tries = 0;
                self.want_dial = true;
                self.set_state(ConnectionState::Connecting);
                Ok(())
            }
            other => Err(ClientCommandError::AlreadyStarted(other)),
        }
    }

    /// Closes the client for good (state `closed`): the socket gets close 1000, queued
    /// messages are dropped, and the driver stops ([`Dial::Stop`]).
    pub fn close(&mut self, now: Instant) {
        self.clock.observe(now);
        if self.state == ConnectionState::Closed {
            return;
        }
        if let Some(conn) = self.conn.take() {
            self.out.close(conn, CloseCode::NORMAL, CLOSE_CLIENT);
        }
        self.ready = false;
        self.want_dial = false;
        self.data_channel_open = false;
        self.overlap.end_connection();
        self.timers.clear();
        self.queue.clear();
        self.queued_bytes = 0;
        self.reply.drop_audio();
        self.set_state(ConnectionState::Closed);
    }

    /// Drops the current connection (close 1000) and reconnects through the usual backoff,
    /// resuming the session: for a network change the application knows of, or to show
    /// recovery. Returns whether there was a connection to drop.
    pub fn drop_connection(&mut self, now: Instant) -> bool {
        let now = self.clock.observe(now);
        if self.conn.is_none() || self.state == ConnectionState::Closed {
            return false;
        }
        self.lose(LossReason::Requested, Some(CLOSE_DROPPED), now);
        true
    }

    /// Sends an utterance as `audio` (`wav`: a whole WAV file, base64-encoded here) with
    /// optional images. Queued while not connected (bounded); sent after `reconnect`.
    pub fn send_audio(
        &mut self,
        wav: &[u8],
        attachments: &[VisionAttachment],
        now: Instant,
    ) -> Result<(), ClientCommandError> {
        self.clock.observe(now);
        let mut buf = Vec::with_capacity(wav.len() / 3 * 4 + 64);
        encode_audio(&mut buf, wav, attachments);
        self.send_or_queue(FrameBuf::json_from_vec(buf))
    }

    /// Sends `attachments` (queued by the server for the next speech segment): on the data
    /// channel while it is open ([`ClientEvent::DataChannelSend`], as the real web client
    /// sends them), else on the WebSocket (queued while not connected).
    pub fn send_attachments(
        &mut self,
        attachments: Vec<VisionAttachment>,
        now: Instant,
    ) -> Result<(), ClientCommandError> {
        self.clock.observe(now);
        let msg = ClientMessage::Attachments(Attachments { attachments });
        let frame = msg.to_frame(&mut self.scratch);
        if self.data_channel_open && self.ready {
            self.out.event(ClientEvent::DataChannelSend { frame });
            return Ok(());
        }
        self.send_or_queue(frame)
    }

    /// Sends a WebRTC SDP `offer` (opaque JSON, an `RTCSessionDescriptionInit`) on the
    /// WebSocket; the answer arrives as [`ClientEvent::Message`] with
    /// [`ServerMessage::Signal`], from the WebSocket only. Only once `ready` came on the
    /// current connection ([`ClientCommandError::NotReady`] before, and never queued: a
    /// peer connection belongs to one WebSocket connection, so after a reconnect the
    /// application makes a new peer and offers again, after the `reconnect` this client
    /// sends first).
    pub fn offer(&mut self, signal: RawJson, now: Instant) -> Result<(), ClientCommandError> {
        self.clock.observe(now);
        let conn = match (self.ready, self.conn) {
            (true, Some(conn)) if self.state != ConnectionState::Closed => conn,
            _ => return Err(ClientCommandError::NotReady(self.state)),
        };
        let frame = ClientMessage::Offer(Offer { signal }).to_frame(&mut self.scratch);
        self.out.send(conn, frame);
        self.overlap.arm();
        Ok(())
    }

    /// The same as [`offer`](Self::offer), under the name of the other `send_*` commands.
    pub fn send_offer(&mut self, signal: RawJson, now: Instant) -> Result<(), ClientCommandError> {
        self.offer(signal, now)
    }

    /// Reports whether the current connection's WebRTC data channel is open. While it is,
    /// payload messages are taken from [`handle_data_channel_frame`](Self::handle_data_channel_frame)
    /// and their WebSocket copies ignored, and `attachments` go on the channel; when it
    /// opens, the channel's copies of payloads already handled from the WebSocket are
    /// dropped ([`ClientConfig::data_channel_overlap`]). Reset to closed whenever the
    /// connection ends.
    pub fn set_data_channel_open(&mut self, open: bool, now: Instant) {
        let now = self.clock.observe(now);
        let open = open && self.conn.is_some();
        if open && !self.data_channel_open {
            self.overlap
                .channel_opened(now, self.config.data_channel_overlap);
        } else if !open {
            self.overlap.reset();
        }
        self.data_channel_open = open;
    }

    /// Ties `ping` timestamps to the wall clock: `unix_ms` is the time in milliseconds since
    /// the Unix epoch at `now` (the browser's `Date.now()`). Without it, timestamps count
    /// milliseconds from the first time the client saw.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        let now = self.clock.observe(now);
        self.wall_clock = Some(WallClock::new(now, unix_ms));
    }

    /// A message that arrived on the current connection's WebRTC data channel.
    pub fn handle_data_channel_frame(&mut self, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn.is_none() {
            return;
        }
        self.on_message(Source::DataChannel, frame, now);
    }

    // ----- internals -----

    fn set_state(&mut self, to: ConnectionState) {
        if self.state != to {
            let from = std::mem::replace(&mut self.state, to);
            self.out.event(ClientEvent::StateChanged { from, to });
        }
    }

    fn send_or_queue(&mut self, frame: FrameBuf) -> Result<(), ClientCommandError> {
        if self.state == ConnectionState::Closed {
            return Err(ClientCommandError::Closed);
        }
        if let (true, Some(conn)) = (self.ready, self.conn) {
            self.out.send(conn, frame);
            return Ok(());
        }
        if self.queue.len() >= self.config.max_queued {
            return Err(ClientCommandError::QueueFull("max_queued"));
        }
        if self.queued_bytes + frame.len() > self.config.max_queued_bytes {
            return Err(ClientCommandError::QueueFull("max_queued_bytes"));
        }
        self.queued_bytes += frame.len();
        self.queue.push_back(frame);
        Ok(())
    }

    fn unix_ms(&mut self, now: Instant) -> u64 {
        self.wall_clock
            .get_or_insert(WallClock::new(now, 0))
            .unix_ms(now)
    }

    /// Drops the current connection (closing it when `close` is set) and schedules a retry.
    fn lose(&mut self, reason: LossReason, close: Option<&'static str>, now: Instant) {
        if let Some(conn) = self.conn.take() {
            if let Some(why) = close {
                self.out.close(conn, CloseCode::NORMAL, why);
            }
        }
        self.ready = false;
        self.want_dial = false;
        self.data_channel_open = false;
        self.overlap.end_connection();
        self.missed_pongs = 0;
        self.last_ping = None;
        self.reply.reset();
        for t in [Timer::Ready, Timer::Ping, Timer::Pong] {
            self.timers.cancel(&t);
        }
        self.out.event(ClientEvent::ConnectionLost { reason });
        self.schedule_retry(now);
    }

    fn schedule_retry(&mut self, now: Instant) {
        let policy = self.config.reconnection;
        if !policy.enabled || self.tries >= policy.max_retries {
            self.set_state(ConnectionState::Failed);
            return;
        }
        let delay = policy.delay(self.tries, self.rng.next_u64());
        self.tries += 1;
        self.timers.set(Timer::Retry, now + delay);
        self.set_state(ConnectionState::Reconnecting);
        self.out.event(ClientEvent::Reconnecting {
            attempt: self.tries,
            max_attempts: policy.max_retries,
            delay,
        });
    }

    fn violation(&mut self, error: ProtocolError) {
        self.out.event(ClientEvent::ProtocolViolation { error });
    }

    fn ignore(&mut self, type_name: &str, reason: IgnoreReason) {
        let mut end = type_name.len().min(64);
        while !type_name.is_char_boundary(end) {
            end -= 1;
        }
        self.out.event(ClientEvent::Ignored {
            type_name: type_name[..end].to_owned(),
            reason,
        });
    }

    fn on_message(&mut self, src: Source, frame: Frame<'_>, now: Instant) {
        let bytes = frame.as_bytes();
        let msg = match ServerMessage::decode(frame, self.config.max_message_bytes) {
            Ok(Decoded::Message(m)) => m,
            Ok(Decoded::Unknown { type_name }) => {
                return self.ignore(&type_name, IgnoreReason::UnknownType)
            }
            Err(e) => return self.violation(e.into()),
        };
        let ty = msg.type_name();
        if !self.ready {
            match msg {
                ServerMessage::Ready(r) if src == Source::WebSocket => self.on_ready(r, now),
                _ => self.ignore(ty, IgnoreReason::BeforeReady),
            }
            return;
        }
        // INTEROP.md's dual-channel rule: each payload message is handled from one channel.
        let channel = channel_of(ty);
        let wanted = match channel {
            Channel::WebSocket => src == Source::WebSocket,
            Channel::Both => (src == Source::DataChannel) == self.data_channel_open,
        };
        if !wanted {
            if channel == Channel::Both && src == Source::WebSocket {
                self.overlap.seen_on_websocket(bytes);
            }
            return self.ignore(ty, IgnoreReason::OtherChannel);
        }
        // The hand-over: the channel's copies of what the WebSocket gave just before.
        if channel == Channel::Both {
            match src {
                Source::WebSocket => {
                    let window = self.config.data_channel_overlap;
                    self.overlap.handled_from_websocket(bytes, now, window);
                }
                Source::DataChannel if self.overlap.is_copy(bytes, now) => {
                    return self.ignore(ty, IgnoreReason::Duplicate);
                }
                Source::DataChannel => {}
            }
        }
        self.on_server_message(msg, now);
    }

    fn on_ready(&mut self, r: Ready, now: Instant) {
        let Some(conn) = self.conn else { return };
        self.ready = true;
        self.timers.cancel(&Timer::Ready);
        if r.protocol_version != PROTOCOL_VERSION {
            self.out.event(ClientEvent::VersionMismatch {
                server: r.protocol_version,
                client: PROTOCOL_VERSION,
            });
        }
        self.server_version = Some(r.protocol_version);
        self.ice_servers.clone_from(&r.ice_servers);
        let id = SessionId::from(r.id);
        self.ready_id = Some(id.clone());
        self.mode = Some(r.mode.clone().unwrap_or(SessionMode::PIPELINE));
        self.out.event(ClientEvent::Ready {
            id: id.clone(),
            protocol_version: r.protocol_version,
            ice_servers: r.ice_servers,
            mode: r.mode,
        });
        // `reconnect` before anything else on this connection (INTEROP.md).
        match self.session_id.clone() {
            Some(previous) if previous != id => {
                let msg = ClientMessage::Reconnect(Reconnect {
                    session_id: previous.to_string(),
                });
                let frame = msg.to_frame(&mut self.scratch);
                self.out.send(conn, frame);
                self.out.event(ClientEvent::ResumeRequested { previous });
            }
            Some(_) => {}
            None => self.session_id = Some(id),
        }
        while let Some(frame) = self.queue.pop_front() {
            self.out.send(conn, frame);
        }
        self.queued_bytes = 0;
        self.tries = 0;
        self.missed_pongs = 0;
        self.timers
            .set(Timer::Ping, now + self.config.ping_interval);
        self.set_state(ConnectionState::Connected);
    }

    fn on_server_message(&mut self, msg: ServerMessage, now: Instant) {
        match msg {
            ServerMessage::Ready(_) => self.violation(ProtocolError::SecondReady),
            ServerMessage::Pong(p) => {
                self.missed_pongs = 0;
                self.timers.cancel(&Timer::Pong);
                let timestamp = p.timestamp.as_u64().unwrap_or(0);
                let rtt = match self.last_ping.take() {
                    Some((ts, sent)) if ts == timestamp => {
                        Some(now.saturating_duration_since(sent))
                    }
                    other => {
                        self.last_ping = other;
                        None
                    }
                };
                if rtt.is_some() {
                    self.rtt = rtt;
                }
                self.out.event(ClientEvent::Pong { timestamp, rtt });
            }
            ServerMessage::ReconnectAck(a) => {
                let session_id = SessionId::from(a.session_id);
                self.session_id = Some(session_id.clone());
                self.out.event(ClientEvent::Resumed {
                    success: a.success,
                    session_id,
                    history_recovered: a.history_recovered,
                });
            }
            ServerMessage::ModeChanged(m) => {
                self.mode = Some(m.mode.clone());
                self.out
                    .event(ClientEvent::Message(ServerMessage::ModeChanged(m)));
            }
            other => {
                if let Some(other) = self.reply.on_message(other, &self.config, &mut self.out) {
                    self.out.event(ClientEvent::Message(other));
                }
            }
        }
    }

    fn on_timer(&mut self, timer: Timer, now: Instant) {
        match timer {
            Timer::Ready => self.lose(LossReason::ReadyTimeout, Some(CLOSE_READY_TIMEOUT), now),
            Timer::Ping => {
                let Some(conn) = self.conn.filter(|_| self.ready) else {
                    return;
                };
                let ts = self.unix_ms(now);
                let frame = ClientMessage::Ping(Ping::new(ts)).to_frame(&mut self.scratch);
                self.out.send(conn, frame);
                self.last_ping = Some((ts, now));
                if self.timers.get(&Timer::Pong).is_none() {
                    self.timers.set(Timer::Pong, now + self.config.pong_timeout);
                }
                self.timers
                    .set(Timer::Ping, now + self.config.ping_interval);
            }
            Timer::Pong => {
                self.missed_pongs += 1;
                self.out.event(ClientEvent::PongMissed {
                    missed: self.missed_pongs,
                });
                if self.missed_pongs >= self.config.max_missed_pongs.max(1) {
                    self.lose(LossReason::HeartbeatTimeout, Some(CLOSE_PONG_TIMEOUT), now);
                }
            }
            Timer::Retry => {
                if self.state == ConnectionState::Reconnecting {
                    self.want_dial = true;
                    self.set_state(ConnectionState::Connecting);
                }
            }
        }
    }
}

impl Machine for LlmrtcClient {
    type Event = ClientEvent;

    /// A WebSocket opened. The client waits for `ready` (timer started); a connection it
    /// did not ask for (closed, or one already open) is closed at once.
    fn handle_connect(&mut self, conn: ConnId, _peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.state == ConnectionState::Closed || self.conn.is_some() {
            self.out.close(conn, CloseCode::NORMAL, CLOSE_CLIENT);
            return;
        }
        self.conn = Some(conn);
        self.want_dial = false;
        self.ready = false;
        self.data_channel_open = false;
        self.overlap.end_connection();
        self.timers.cancel(&Timer::Retry);
        self.timers
            .set(Timer::Ready, now + self.config.ready_timeout);
        self.set_state(ConnectionState::Connecting);
    }

    /// A WebSocket message on the current connection; others are ignored. Never panics.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn != Some(conn) {
            return;
        }
        self.on_message(Source::WebSocket, frame, now);
    }

    /// The current connection ended: a reconnect try is scheduled (or `failed`).
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn == Some(conn) {
            self.conn = None;
            self.lose(LossReason::Disconnected, None, now);
        }
    }

    /// Fires due timers: ready timeout, ping, pong timeout, reconnect try.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(timer) = self.timers.pop_expired(now) {
            self.on_timer(timer, now);
        }
    }

    /// Re-anchors the wall clock of `ping` timestamps ([`set_wall_clock`](Self::set_wall_clock)).
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.set_wall_clock(now, unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    fn poll_output(&mut self) -> Option<Output<ClientEvent>> {
        self.out.pop()
    }
}

impl Dialer for LlmrtcClient {
    /// `Now` while connecting without a socket; `Stop` once closed.
    fn poll_dial(&self) -> Dial {
        match self.state {
            ConnectionState::Closed => Dial::Stop,
            _ if self.want_dial && self.conn.is_none() => Dial::Now,
            _ => Dial::Wait,
        }
    }

    /// A try failed before the WebSocket opened: the next one is scheduled (or `failed`).
    fn handle_dial_failed(&mut self, _reason: &str, now: Instant) {
        let now = self.clock.observe(now);
        if self.want_dial && self.conn.is_none() {
            self.want_dial = false;
            self.out.event(ClientEvent::ConnectionLost {
                reason: LossReason::DialFailed,
            });
            self.schedule_retry(now);
        }
    }
}
