//! The `LlmrtcServer` machine (server role): connections, sessions, heartbeats and
//! reconnects, with the turn pipeline's providers as commands and events.
//!
//! The state is split by what owns it: [`conns`] holds the connections and their heartbeat
//! deadlines, [`session`] each session (history, stage, speech intake and its queue of
//! utterances) and the sessions' TTLs, [`turn`] the turn state machine
//! (STT → LLM (→ tools) → TTS), [`requests`] the pending provider requests and their
//! deadlines, [`wire`] the outputs, [`texts`] the wire strings. This module is the
//! [`Machine`] impl, the commands, and the routing between them.
//!
//! It is longer than 700 lines because it holds the role's whole public surface: 27
//! documented commands and getters, each a few lines that check the request and hand the
//! work to the session that owns it.

mod conns;
mod requests;
mod session;
pub mod texts;
mod turn;
mod wire;

use std::time::Instant;

use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, IdGen, Machine, Monotonic, Output, PeerInfo,
};
use serde_json::{Map, Value};

use crate::codec::{encode_tts, encode_tts_chunk, Decoded};
use crate::config::ServerConfig;
use crate::error::{CommandError, ConfigError};
use crate::event::ServerEvent;
use crate::ids::{CallId, RequestId, SessionId};
use crate::message::{
    Attachments, Channel, ClientMessageRef, ErrorCode, Pong, RawJson, Ready, ReconnectAck,
    ServerMessage, SessionMode, Signal, PROTOCOL_VERSION,
};
use crate::provider::{ChatMessage, ProviderError, ProviderKind};
use conns::{Admit, Conns};
use requests::{provider_error, Requests};
use session::{AudioScratch, Session, Sessions};
use turn::{cut, Turn};
use wire::{Ctx, Link, Wire};

/// Which deadline is due next. At the same instant heartbeats go first, then session TTLs,
/// then the end of TTS playing on WebRTC tracks, then provider requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    Heartbeat,
    Ttl,
    Playout,
    Provider,
}

/// The llmrtc server role: owns every connection and session.
///
/// See the crate docs for the run loop and the API map.
pub struct LlmrtcServer {
    config: ServerConfig,
    ids: Box<dyn IdGen>,
    clock: Monotonic,
    wire: Wire,
    conns: Conns,
    sessions: Sessions,
    requests: Requests,
    scratch: AudioScratch,
    /// Messages dropped for going over a connection's rate, since the start.
    dropped: u64,
}

impl std::fmt::Debug for LlmrtcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmrtcServer")
            .field("connections", &self.conns.len())
            .field("sessions", &self.sessions.len())
            .field("requests", &self.requests.len())
            .finish_non_exhaustive()
    }
}

impl LlmrtcServer {
    /// A server with `config`, taking session ids from `ids` (pass
    /// [`SequentialIds`](agentwire_core::SequentialIds) in tests, `UuidV4Ids` in production).
    pub fn new(config: ServerConfig, ids: impl IdGen + 'static) -> Result<Self, ConfigError> {
        if let Some(p) = &config.playbook {
            p.validate()?;
        }
        if !config.vad.supports_rate(config.track_sample_rate) {
            return Err(ConfigError::TrackSampleRate(config.track_sample_rate));
        }
        Ok(Self {
            requests: Requests::new(config.timeouts),
            config,
            ids: Box::new(ids),
            clock: Monotonic::new(),
            wire: Wire::new(),
            conns: Conns::default(),
            sessions: Sessions::default(),
            scratch: AudioScratch::default(),
            dropped: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Sessions held (connected or waiting for a reconnect).
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// The session of `conn`.
    pub fn session_of(&self, conn: ConnId) -> Option<&str> {
        self.conns.get(conn)?.session.as_deref()
    }

    /// The connection of `session`, if it is connected.
    pub fn conn_of(&self, session: &str) -> Option<ConnId> {
        self.sessions.get(session)?.conn
    }

    /// The conversation history of `session`, oldest first.
    pub fn history(&self, session: &str) -> Option<impl Iterator<Item = &ChatMessage>> {
        Some(self.sessions.get(session)?.history.iter())
    }

    /// Playbook mode: the current stage of `session`.
    pub fn stage(&self, session: &str) -> Option<&str> {
        self.sessions.get(session)?.stage.as_deref()
    }

    /// Whether `session` is in a turn (between its STT request and the end of its TTS).
    pub fn in_turn(&self, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|s| s.turn.is_some())
    }

    /// Messages dropped unread since the server started because their connection went over
    /// [`Limits::message_rate`](crate::Limits::message_rate) or
    /// [`Limits::byte_rate`](crate::Limits::byte_rate) (the first of each run was answered
    /// `error RATE_LIMITED`).
    pub fn dropped_messages(&self) -> u64 {
        self.dropped
    }

    /// Provider requests awaiting an answer.
    pub fn pending_requests(&self) -> usize {
        self.requests.len()
    }

    /// Attachments queued for the next turn of `session`.
    pub fn queued_attachments(&self, session: &str) -> usize {
        self.sessions
            .get(session)
            .map_or(0, |s| s.attachments.len())
    }

    /// Reports whether `conn`'s WebRTC data channel is open. While it is, every payload
    /// message is also emitted as [`ServerEvent::DataChannel`].
    pub fn set_data_channel_open(&mut self, conn: ConnId, open: bool) -> Result<(), CommandError> {
        let c = self
            .conns
            .get_mut(conn)
            .ok_or(CommandError::UnknownConnection)?;
        c.dc_open = open;
        Ok(())
    }

    /// Reports whether `conn`'s client receives audio on an outbound WebRTC track (its
    /// offer had an audio m-line that receives, and the peer connection is up). While it
    /// does, a turn's TTS audio in PCM (`pcm` chunks, `wav` files) is emitted as
    /// [`ServerEvent::TrackAudio`] instead of `tts-chunk`/`tts` messages, with
    /// [`ServerEvent::TrackAudioEnd`] at the end of the reply or on barge-in; `tts-start`,
    /// `tts-complete` and `tts-cancelled` go out as without the track, `tts-complete` once
    /// the audio has had time to play. Off (the default), TTS goes out as messages.
    pub fn set_audio_track(&mut self, conn: ConnId, on: bool) -> Result<(), CommandError> {
        let c = self
            .conns
            .get_mut(conn)
            .ok_or(CommandError::UnknownConnection)?;
        c.audio_track = on;
        Ok(())
    }

    /// Whether `conn` receives TTS on a WebRTC audio track ([`set_audio_track`](Self::set_audio_track)).
    pub fn has_audio_track(&self, conn: ConnId) -> bool {
        self.conns.get(conn).is_some_and(|c| c.audio_track)
    }

    /// PCM from `conn`'s inbound WebRTC audio track (the client's microphone, decoded):
    /// 16-bit mono at `sample_rate` (48,000 from Opus), in pieces of any length as they
    /// arrive. It is resampled to [`ServerConfig::track_sample_rate`] and goes through the
    /// session's VAD into the same turns as `audio` messages: `speech-start` and
    /// `speech-end` are sent, speech while TTS plays is barge-in (`tts-cancelled`, then
    /// `speech-start`), and each utterance is transcribed ([`ServerEvent::Stt`]). Unlike an
    /// `audio` message, the end of a piece does not end speech: only silence does. Refused
    /// for an unknown connection and for a rate outside the VAD's
    /// ([`VadConfig::supports_rate`](crate::VadConfig::supports_rate), 8 kHz to 384 kHz by
    /// default), which also bounds what resampling can make of a piece.
    pub fn track_audio(
        &mut self,
        conn: ConnId,
        samples: &[i16],
        sample_rate: u32,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self
            .conns
            .get(conn)
            .and_then(|c| c.session.clone())
            .ok_or(CommandError::UnknownConnection)?;
        if !self.config.vad.supports_rate(sample_rate) {
            return Err(CommandError::UnsupportedRate(sample_rate));
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
            s.last_activity = now;
            s.on_track(&mut ctx, samples, sample_rate, &mut scratch, now);
        }
        self.scratch = scratch;
        Ok(())
    }

    /// Answers `conn`'s `offer` with an SDP answer (`signal`).
    pub fn signal(&mut self, conn: ConnId, answer: RawJson) -> Result<(), CommandError> {
        let to = self
            .conns
            .link(conn)
            .ok_or(CommandError::UnknownConnection)?;
        self.wire
            .send(to, &ServerMessage::Signal(Signal { signal: answer }));
        Ok(())
    }

    /// Sends `error` to `conn` (an application-level failure, e.g. `CONNECTION_FAILED`).
    pub fn send_error(
        &mut self,
        conn: ConnId,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> Result<(), CommandError> {
        let to = self
            .conns
            .link(conn)
            .ok_or(CommandError::UnknownConnection)?;
        self.wire.error(to, code, message.into());
        Ok(())
    }

    /// Closes `conn` (1000); its session waits for a reconnect.
    pub fn close(&mut self, conn: ConnId) -> Result<(), CommandError> {
        if !self.conns.contains(conn) {
            return Err(CommandError::UnknownConnection);
        }
        self.wire
            .close(conn, CloseCode::NORMAL, texts::CLOSE_CLOSED);
        Ok(())
    }

    /// Playbook mode: moves `session` to stage `to` and sends `stage-change` with `reason`.
    pub fn change_stage(
        &mut self,
        session: &str,
        to: &str,
        reason: &str,
    ) -> Result<(), CommandError> {
        let known = self
            .config
            .playbook
            .as_ref()
            .is_some_and(|p| p.stage(to).is_some());
        if !known {
            return Err(CommandError::UnknownStage);
        }
        let (s, mut ctx) = self
            .session_ctx(session)
            .ok_or(CommandError::UnknownSession)?;
        s.move_stage(&mut ctx, to, reason);
        Ok(())
    }

    /// STT progress: sends `transcript` with `isFinal: false` and restarts the STT timeout.
    pub fn stt_partial(
        &mut self,
        request: RequestId,
        text: &str,
        now: Instant,
    ) -> Result<(), CommandError> {
        let sid = self.progress(request, ProviderKind::Stt, now)?;
        if let Some((_, mut ctx)) = self.session_ctx(&sid) {
            Turn::partial(&mut ctx, text);
        }
        Ok(())
    }

    /// STT outcome: `Ok(text)` sends `transcript` (`isFinal: true`) and asks the LLM (an empty
    /// transcript ends the turn); `Err` sends `STT_ERROR` or `STT_TIMEOUT` and ends the turn.
    pub fn stt_result(
        &mut self,
        request: RequestId,
        result: Result<String, ProviderError>,
        now: Instant,
    ) -> Result<(), CommandError> {
        let (sid, now) = self.answered(request, ProviderKind::Stt, now)?;
        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
            s.stt_result(&mut ctx, result, now);
        }
        Ok(())
    }

    /// One piece of the LLM reply: sent as `llm-chunk` (one chunk is held back so the last can
    /// carry `done: true`). Restarts the LLM timeout. Empty chunks are ignored.
    pub fn llm_chunk(
        &mut self,
        request: RequestId,
        content: &str,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.progress(request, ProviderKind::Llm, now)?;
        if content.is_empty() {
            return Ok(());
        }
        let (s, mut ctx) = self.session_ctx(&sid).ok_or(CommandError::UnknownRequest)?;
        s.llm_chunk(&mut ctx, content, now)
    }

    /// Playbook mode: the LLM calls tool `name`. Sends `tool-call-start` and emits
    /// [`ServerEvent::ToolCall`]; returns the call id. A tool the current stage lacks gets
    /// `tool-call-end` with an error and `error TOOL_ERROR` at once (the LLM's next round
    /// learns of it).
    pub fn llm_tool_call(
        &mut self,
        request: RequestId,
        name: &str,
        arguments: Map<String, Value>,
        now: Instant,
    ) -> Result<CallId, CommandError> {
        let now = self.clock.observe(now);
        if self.config.playbook.is_none() {
            return Err(CommandError::UnknownStage);
        }
        let sid = self.progress(request, ProviderKind::Llm, now)?;
        let (s, mut ctx) = self.session_ctx(&sid).ok_or(CommandError::UnknownRequest)?;
        s.llm_tool_call(&mut ctx, name, arguments, now)
    }

    /// The LLM round is complete. Without tool calls in the round this ends the reply: the
    /// held chunk goes out with `done: true`, then `llm`, then `tts-start` and a TTS request
    /// (nothing to speak: the turn ends). With tool calls, the LLM is asked again once every
    /// tool has answered.
    pub fn llm_done(&mut self, request: RequestId, now: Instant) -> Result<(), CommandError> {
        let (sid, now) = self.answered(request, ProviderKind::Llm, now)?;
        let (s, mut ctx) = self.session_ctx(&sid).ok_or(CommandError::UnknownRequest)?;
        s.llm_done(&mut ctx, now)
    }

    /// The LLM failed: `LLM_ERROR` or `LLM_TIMEOUT`, and the turn ends (a stream already
    /// started is closed with `done: true` first; no `llm` message).
    pub fn llm_failed(
        &mut self,
        request: RequestId,
        error: ProviderError,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.provider_failed(request, ProviderKind::Llm, error, now)
    }

    /// One piece of TTS audio: sent as `tts-chunk` (base64 encoded straight into the frame),
    /// or, with [`ServerConfig::streaming_tts`] off, gathered for one whole `tts` at
    /// [`tts_done`](Self::tts_done); on a connection with a WebRTC audio track
    /// ([`set_audio_track`](Self::set_audio_track)), PCM (`pcm`, 16-bit little-endian
    /// mono, or a `wav` file) goes on the track instead ([`ServerEvent::TrackAudio`]),
    /// whatever `streaming_tts` says. Restarts the TTS timeout.
    pub fn tts_chunk(
        &mut self,
        request: RequestId,
        format: &str,
        sample_rate: u32,
        audio: &[u8],
        now: Instant,
    ) -> Result<(), CommandError> {
        let sid = self.progress(request, ProviderKind::Tts, now)?;
        let now = self.clock.observe(now);
        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
            let turn = s.turn.as_mut();
            if turn.is_some_and(|t| t.track_chunk(&mut ctx, format, sample_rate, audio, now)) {
                return Ok(());
            }
        }
        if !self.config.streaming_tts {
            let now = self.clock.observe(now);
            if let Some((s, mut ctx)) = self.session_ctx(&sid) {
                s.gather_tts(&mut ctx, format, sample_rate, audio, now);
            }
            return Ok(());
        }
        let frame = self
            .wire
            .frame_with(|out| encode_tts_chunk(out, format, sample_rate, audio));
        self.send_audio(&sid, frame);
        Ok(())
    }

    /// The whole TTS audio at once: sent as `tts` (then call [`tts_done`](Self::tts_done)),
    /// or, as a `wav` file on a connection with a WebRTC audio track, on the track.
    pub fn tts_audio(
        &mut self,
        request: RequestId,
        format: &str,
        audio: &[u8],
        now: Instant,
    ) -> Result<(), CommandError> {
        let sid = self.progress(request, ProviderKind::Tts, now)?;
        let now = self.clock.observe(now);
        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
            let turn = s.turn.as_mut();
            if turn.is_some_and(|t| t.track_chunk(&mut ctx, format, 0, audio, now)) {
                return Ok(());
            }
        }
        let frame = self.wire.frame_with(|out| encode_tts(out, format, audio));
        self.send_audio(&sid, frame);
        Ok(())
    }

    /// TTS finished: `tts-complete` (after the gathered audio as one `tts` when
    /// [`ServerConfig::streaming_tts`] is off), the turn ends, and the next queued utterance
    /// starts. With audio on a WebRTC track: [`ServerEvent::TrackAudioEnd`] at once, and
    /// `tts-complete` (and the end of the turn) once the audio has had time to play, counted
    /// in real time from its first piece; until then speech is barge-in.
    pub fn tts_done(&mut self, request: RequestId, now: Instant) -> Result<(), CommandError> {
        let (sid, now) = self.answered(request, ProviderKind::Tts, now)?;
        let playing = match self.session_ctx(&sid) {
            Some((s, mut ctx)) => s.tts_done(&mut ctx, now),
            None => None,
        };
        if let Some(at) = playing {
            self.sessions.set_playout(&sid, at);
        }
        Ok(())
    }

    /// TTS failed: `TTS_ERROR` or `TTS_TIMEOUT`, then `tts-complete`, and the turn ends.
    pub fn tts_failed(
        &mut self,
        request: RequestId,
        error: ProviderError,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.provider_failed(request, ProviderKind::Tts, error, now)
    }

    /// A tool's outcome: `tool-call-end` with `result` or `error` and `durationMs`; an error
    /// also sends `error TOOL_ERROR`; a success may move the stage (`stage-change`,
    /// `"tool_result"`). When the LLM round is done and no tool is left running, the LLM is
    /// asked again with the results.
    pub fn tool_result(
        &mut self,
        request: RequestId,
        outcome: Result<Value, String>,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.requests.active(request, ProviderKind::Tool)?;
        let pending = self
            .requests
            .finish(request)
            .ok_or(CommandError::UnknownRequest)?;
        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
            s.tool_done(&mut ctx, request, pending, outcome, now);
        }
        Ok(())
    }

    /// Progress on an active `request` of `kind`: its timeout restarts; its session.
    fn progress(
        &mut self,
        request: RequestId,
        kind: ProviderKind,
        now: Instant,
    ) -> Result<SessionId, CommandError> {
        let now = self.clock.observe(now);
        let sid = self.requests.active(request, kind)?;
        self.requests.refresh(request, kind, now);
        Ok(sid)
    }

    /// The final answer to an active `request` of `kind`: it is done; its session.
    fn answered(
        &mut self,
        request: RequestId,
        kind: ProviderKind,
        now: Instant,
    ) -> Result<(SessionId, Instant), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.requests.active(request, kind)?;
        self.requests.finish(request);
        Ok((sid, now))
    }

    fn provider_failed(
        &mut self,
        request: RequestId,
        kind: ProviderKind,
        error: ProviderError,
        now: Instant,
    ) -> Result<(), CommandError> {
        let (sid, now) = self.answered(request, kind, now)?;
        let (code, msg) = provider_error(kind, error);
        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
            s.fail_turn(&mut ctx, code, msg, now);
        }
        Ok(())
    }

    /// Sends TTS audio to session `sid` (a payload message: also on the data channel).
    fn send_audio(&mut self, sid: &str, frame: FrameBuf) {
        if let Some(to) = self.link_of(sid) {
            self.wire.send_frame(to, frame, Channel::Both);
        }
    }

    /// Where frames for session `sid` go, if it is connected.
    fn link_of(&self, sid: &str) -> Option<Link> {
        let conn = self.sessions.get(sid)?.conn?;
        let c = self.conns.get(conn);
        Some(Link {
            conn,
            dc_open: c.is_some_and(|c| c.dc_open),
            audio_track: c.is_some_and(|c| c.audio_track),
        })
    }

    /// Session `sid` with what its work needs.
    fn session_ctx(&mut self, sid: &str) -> Option<(&mut Session, Ctx<'_>)> {
        let link = self.link_of(sid);
        let s = self.sessions.get_mut(sid)?;
        let ctx = Ctx {
            wire: &mut self.wire,
            requests: &mut self.requests,
            config: &self.config,
            link,
        };
        Some((s, ctx))
    }

    fn on_message(
        &mut self,
        conn: ConnId,
        sid: SessionId,
        msg: ClientMessageRef<'_>,
        now: Instant,
    ) {
        let Some(to) = self.conns.link(conn) else {
            return;
        };
        match msg {
            ClientMessageRef::Ping(p) => {
                if let Some(t) = self.config.heartbeat_timeout {
                    self.conns.set_heartbeat(conn, now + t);
                }
                let pong = ServerMessage::Pong(Pong {
                    timestamp: p.timestamp,
                });
                self.wire.send(to, &pong);
            }
            ClientMessageRef::Offer(o) => {
                if self.config.webrtc {
                    self.wire.event(ServerEvent::Offer {
                        conn,
                        session: sid,
                        signal: o.signal,
                    });
                } else {
                    let text = texts::WEBRTC_UNAVAILABLE.into();
                    self.wire.error(to, ErrorCode::WEBRTC_UNAVAILABLE, text);
                }
            }
            ClientMessageRef::Reconnect(r) => self.on_reconnect(to, sid, r.session_id, now),
            ClientMessageRef::Attachments(Attachments { attachments }) => {
                if let Some((s, mut ctx)) = self.session_ctx(&sid) {
                    s.queue_attachments(&mut ctx, attachments);
                }
            }
            ClientMessageRef::Audio(a) => {
                let mut scratch = std::mem::take(&mut self.scratch);
                if let Some((s, mut ctx)) = self.session_ctx(&sid) {
                    s.on_audio(&mut ctx, a, &mut scratch, now);
                }
                self.scratch = scratch;
            }
        }
    }

    fn on_reconnect(&mut self, to: Link, current: SessionId, wanted: String, now: Instant) {
        let conn = to.conn;
        let ack = |success: bool, session_id: &SessionId| {
            ServerMessage::ReconnectAck(ReconnectAck {
                success,
                session_id: session_id.to_string(),
                history_recovered: success,
            })
        };
        if current == wanted {
            self.wire.send(to, &ack(true, &current));
            return;
        }
        if !self.sessions.contains(&wanted) {
            let expired = self.sessions.was_expired(&wanted);
            self.wire.send(to, &ack(false, &current));
            let (code, text) = if expired {
                (ErrorCode::SESSION_EXPIRED, texts::SESSION_EXPIRED)
            } else {
                (ErrorCode::SESSION_NOT_FOUND, texts::SESSION_NOT_FOUND)
            };
            self.wire.error(to, code, text.into());
            self.wire.event(ServerEvent::ResumeFailed {
                conn,
                requested: SessionId::from(cut(&wanted, 256)),
                expired,
            });
            return;
        }
        let wanted = SessionId::from(wanted);
        // The session this connection got at connect gives way to the recovered one.
        if let Some((s, mut ctx)) = self.session_ctx(&current) {
            s.abandon(&mut ctx, true);
        }
        self.sessions.remove(&current);
        // A connection still holding the wanted session loses it.
        let holder = self.sessions.get(&wanted).and_then(|s| s.conn);
        if let Some(other) = holder.filter(|o| *o != conn) {
            if let Some((s, mut ctx)) = self.session_ctx(&wanted) {
                s.abandon(&mut ctx, false);
            }
            if let Some(c) = self.conns.get_mut(other) {
                c.session = None;
            }
            self.conns.cancel_heartbeat(other);
            self.wire
                .close(other, CloseCode::NORMAL, texts::CLOSE_SESSION_MOVED);
        }
        self.sessions.cancel_ttl(&wanted);
        if let Some(s) = self.sessions.get_mut(&wanted) {
            s.conn = Some(conn);
            s.last_activity = now;
        }
        if let Some(c) = self.conns.get_mut(conn) {
            c.session = Some(wanted.clone());
        }
        self.wire.send(to, &ack(true, &wanted));
        self.wire.event(ServerEvent::SessionResumed {
            conn,
            session: wanted,
            replaced: current,
        });
    }

    /// Session `sid` lost its connection at `now`: its turn is dropped and its TTL starts,
    /// counted from its last activity or `now`, whichever is later. A disconnect counts as
    /// activity (`touch`); a heartbeat timeout does not.
    fn detach(&mut self, sid: SessionId, now: Instant, touch: bool) {
        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
            s.abandon(&mut ctx, false);
            s.conn = None;
            let from = s.last_activity.max(now);
            if touch {
                s.last_activity = from;
            }
            let at = from + self.config.session_ttl;
            self.sessions.set_ttl(&sid, at);
        }
        self.wire
            .event(ServerEvent::SessionDetached { session: sid });
    }

    fn expire(&mut self, sid: &SessionId) {
        if self.sessions.get(sid).is_none_or(|s| s.conn.is_some()) {
            return;
        }
        let max = self.config.limits.max_expired_remembered;
        let Some(mut s) = self.sessions.expire(sid, max) else {
            return;
        };
        let mut ctx = Ctx {
            wire: &mut self.wire,
            requests: &mut self.requests,
            config: &self.config,
            link: None,
        };
        s.abandon(&mut ctx, false);
        self.wire.event(ServerEvent::SessionExpired {
            session: sid.clone(),
        });
    }

    /// Refuses a connection over a limit: error, then close 1013.
    fn refuse(&mut self, conn: ConnId, now: Instant) {
        self.conns.open(conn, None, now);
        let to = Link {
            conn,
            dc_open: false,
            audio_track: false,
        };
        let text = texts::SERVER_FULL.into();
        self.wire.error(to, ErrorCode::RATE_LIMITED, text);
        self.wire
            .close(conn, CloseCode::TRY_AGAIN_LATER, texts::CLOSE_FULL);
    }

    /// Makes room for one more session: evicts the least recently active disconnected one.
    fn make_room(&mut self) -> bool {
        if self.sessions.len() < self.config.limits.max_sessions {
            return true;
        }
        let victim = self.sessions.least_recent_disconnected();
        match victim {
            Some(v) => {
                self.expire(&v);
                true
            }
            None => false,
        }
    }

    /// A provider request passed its deadline: a tool's fails its call (`TOOL_ERROR`),
    /// another's fails the turn (`*_TIMEOUT`).
    fn on_provider_timeout(&mut self, request: RequestId, now: Instant) {
        let Some(p) = self.requests.get(request) else {
            return;
        };
        let (kind, sid) = (p.kind, p.session.clone());
        if kind == ProviderKind::Tool {
            let Some(pending) = self.requests.finish(request) else {
                return;
            };
            self.wire.event(ServerEvent::Cancel { request, kind });
            let outcome = Err(texts::TOOL_TIMEOUT.to_owned());
            if let Some((s, mut ctx)) = self.session_ctx(&sid) {
                s.tool_done(&mut ctx, request, pending, outcome, now);
            }
        } else {
            self.requests.cancel(request, self.wire.out());
            let (code, msg) = provider_error(kind, ProviderError::Timeout);
            if let Some((s, mut ctx)) = self.session_ctx(&sid) {
                s.fail_turn(&mut ctx, code, msg, now);
            }
        }
    }

    /// `conn` sent no `ping` in time: it is closed 1008, and its session waits for a
    /// reconnect.
    fn on_heartbeat_timeout(&mut self, conn: ConnId, now: Instant) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let sid = c.session.take();
        self.wire
            .close(conn, CloseCode::POLICY, texts::CLOSE_HEARTBEAT);
        self.wire.event(ServerEvent::HeartbeatTimeout { conn });
        if let Some(sid) = sid {
            self.detach(sid, now, false);
        }
    }

    /// The next deadline due at `now`, in firing order.
    fn next_due(&self, now: Instant) -> Option<Due> {
        let heartbeat = self.conns.next_heartbeat().map(|at| (at, Due::Heartbeat));
        let ttl = self.sessions.next_ttl().map(|at| (at, Due::Ttl));
        let playout = self.sessions.next_playout().map(|at| (at, Due::Playout));
        let provider = self.requests.next().map(|(at, _)| (at, Due::Provider));
        [heartbeat, ttl, playout, provider]
            .into_iter()
            .flatten()
            .filter(|(at, _)| *at <= now)
            .min()
            .map(|(_, due)| due)
    }
}

impl Machine for LlmrtcServer {
    type Event = ServerEvent;

    fn handle_connect(&mut self, conn: ConnId, _peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conns.contains(conn) {
            return;
        }
        if self.conns.len() >= self.config.limits.max_connections || !self.make_room() {
            self.refuse(conn, now);
            return;
        }
        let sid = SessionId::from(self.ids.next_id().to_uuid_string());
        let stage = self
            .config
            .playbook
            .as_ref()
            .map(|p| p.initial_stage.clone());
        let session = Session::new(sid.clone(), conn, stage, now);
        self.sessions.insert(session);
        self.conns.open(conn, Some(sid.clone()), now);
        let ice = (!self.config.ice_servers.is_empty()).then(|| self.config.ice_servers.clone());
        let ready = ServerMessage::Ready(Ready {
            id: sid.to_string(),
            protocol_version: PROTOCOL_VERSION,
            ice_servers: ice,
            // This machine runs STT → LLM → TTS; core 1.3.0's backend says so too.
            mode: Some(SessionMode::PIPELINE),
        });
        let to = Link {
            conn,
            dc_open: false,
            audio_track: false,
        };
        self.wire.send(to, &ready);
        if let Some(t) = self.config.heartbeat_timeout {
            self.conns.set_heartbeat(conn, now + t);
        }
        self.wire
            .event(ServerEvent::SessionStarted { conn, session: sid });
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        let limits = &self.config.limits;
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let Some(sid) = c.session.clone() else {
            return;
        };
        match c.admit(frame.as_bytes().len(), limits, now) {
            Admit::Read => {}
            admit => {
                self.dropped += 1;
                if admit == Admit::DropAndTell {
                    if let Some(to) = self.conns.link(conn) {
                        let text = texts::RATE_LIMITED.into();
                        self.wire.error(to, ErrorCode::RATE_LIMITED, text);
                    }
                }
                return;
            }
        }
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.last_activity = now;
        }
        match ClientMessageRef::decode(frame, self.config.limits.max_message_bytes) {
            Ok(Decoded::Message(m)) => self.on_message(conn, sid, m, now),
            Ok(Decoded::Unknown { type_name }) => {
                self.wire.event(ServerEvent::Ignored { conn, type_name });
            }
            Err(e) => {
                if let Some(to) = self.conns.link(conn) {
                    let text = e.to_string();
                    self.wire.error(to, e.code(), cut(&text, 256).to_owned());
                }
            }
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        let Some(c) = self.conns.remove(conn) else {
            return;
        };
        self.wire.out().forget_conn(conn);
        let Some(sid) = c.session else {
            return;
        };
        if self.conn_of(&sid) == Some(conn) {
            self.detach(sid, now, true);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(due) = self.next_due(now) {
            match due {
                Due::Heartbeat => {
                    if let Some(conn) = self.conns.pop_heartbeat(now) {
                        self.on_heartbeat_timeout(conn, now);
                    }
                }
                Due::Ttl => {
                    if let Some(sid) = self.sessions.pop_ttl(now) {
                        self.expire(&sid);
                    }
                }
                Due::Playout => {
                    if let Some(sid) = self.sessions.pop_playout(now) {
                        if let Some((s, mut ctx)) = self.session_ctx(&sid) {
                            s.played(&mut ctx, now);
                        }
                    }
                }
                Due::Provider => {
                    if let Some(req) = self.requests.pop_expired(now) {
                        self.on_provider_timeout(req, now);
                    }
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let provider = self.requests.next().map(|(at, _)| at);
        [
            self.conns.next_heartbeat(),
            self.sessions.next_ttl(),
            self.sessions.next_playout(),
            provider,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn poll_output(&mut self) -> Option<Output<ServerEvent>> {
        self.wire.out().pop()
    }
}
