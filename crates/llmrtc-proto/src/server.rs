//! The `LlmrtcServer` machine (server role): sessions, heartbeats, reconnects, and the turn
//! pipeline (audio → VAD → STT → LLM (→ tools) → TTS) with its providers as commands and
//! events.

mod session;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, IdGen, Machine, Monotonic, Outbox, Output, PeerInfo,
    TimerSet,
};
use serde_json::{Map, Value};

use crate::codec::{decode_base64, encode_tts, encode_tts_chunk, Decoded};
use crate::config::ServerConfig;
use crate::error::ErrorCode;
use crate::event::{CommandError, ServerEvent, TurnOutcome};
use crate::message::{
    Attachments, AudioRef, Channel, ClientMessageRef, ErrorMessage, Llm, LlmChunk, Pong, RawJson,
    Ready, ReconnectAck, ServerMessage, SessionMode, Signal, StageChange, ToolCallEnd,
    ToolCallStart, Transcript, VisionAttachment, PROTOCOL_VERSION,
};
use crate::playbook::{PlaybookError, REASON_KEYWORD_MATCH, REASON_TOOL_RESULT};
use crate::provider::{
    ChatMessage, ChatRole, LlmRequest, ProviderError, ProviderKind, RequestId, SpeechSegment,
    StageContext, SttRequest, ToolCallRequest, ToolRecord, TtsRequest,
};
use crate::vad::{Vad, VadEvent};
use crate::wav::parse_wav;
use session::{Conn, Pending, Phase, QueuedTurn, Session, Timer, ToolMeta, Turn};

/// Close reason when a connection sent no `ping` within the heartbeat timeout (code 1008).
pub const CLOSE_HEARTBEAT: &str = "heartbeat-timeout";
/// Close reason when the server is full (code 1013).
pub const CLOSE_FULL: &str = "server-full";
/// Close reason for a connection whose session a `reconnect` on another connection took
/// (code 1000).
pub const CLOSE_SESSION_MOVED: &str = "session-moved";

/// The exact `error` texts the server sends.
pub mod texts {
    /// `offer` without [`ServerConfig::webrtc`](crate::ServerConfig::webrtc)
    /// (WEBRTC_UNAVAILABLE).
    pub const WEBRTC_UNAVAILABLE: &str = "WebRTC is not available on this server";
    /// `reconnect` with an unknown id (SESSION_NOT_FOUND).
    pub const SESSION_NOT_FOUND: &str = "Session not found";
    /// `reconnect` with an expired id (SESSION_EXPIRED).
    pub const SESSION_EXPIRED: &str = "Session expired";
    /// `audio.data` is not base64, or decodes to more than the message limit
    /// (AUDIO_PROCESSING_ERROR).
    pub const BAD_BASE64: &str = "Audio data is not valid base64";
    /// Too many turns waiting (RATE_LIMITED).
    pub const TOO_MANY_TURNS: &str = "Too many utterances waiting; this one was dropped";
    /// Too many attachments waiting (RATE_LIMITED).
    pub const TOO_MANY_ATTACHMENTS: &str = "Too many attachments waiting; the rest were dropped";
    /// Sent before closing a connection over a limit (RATE_LIMITED).
    pub const SERVER_FULL: &str = "The server has reached its connection or session limit";
    /// STT timed out (STT_TIMEOUT).
    pub const STT_TIMEOUT: &str = "Speech-to-text timed out";
    /// LLM timed out (LLM_TIMEOUT).
    pub const LLM_TIMEOUT: &str = "LLM timed out";
    /// TTS timed out (TTS_TIMEOUT).
    pub const TTS_TIMEOUT: &str = "Text-to-speech timed out";
    /// A tool timed out (TOOL_ERROR; also the `tool-call-end.error`).
    pub const TOOL_TIMEOUT: &str = "Tool timed out";
    /// The transcript exceeded `max_transcript_bytes` (STT_ERROR).
    pub const TRANSCRIPT_TOO_LONG: &str = "Transcript too long";
    /// The reply exceeded `max_reply_bytes` (LLM_ERROR).
    pub const REPLY_TOO_LONG: &str = "LLM reply too long";
    /// More tool rounds than `max_tool_rounds` (PLAYBOOK_ERROR).
    pub const TOO_MANY_ROUNDS: &str = "Too many tool rounds in one turn";
    /// More tool calls in a round than `max_tool_calls_per_round` (PLAYBOOK_ERROR).
    pub const TOO_MANY_CALLS: &str = "Too many tool calls in one LLM round";
}

/// Why a server could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The playbook is unusable.
    #[error("invalid playbook: {0}")]
    Playbook(#[from] PlaybookError),
}

/// The llmrtc server role: owns every connection and session.
///
/// See the crate docs for the run loop and the API map.
pub struct LlmrtcServer {
    config: ServerConfig,
    ids: Box<dyn IdGen>,
    clock: Monotonic,
    out: Outbox<ServerEvent>,
    conns: BTreeMap<ConnId, Conn>,
    sessions: BTreeMap<String, Session>,
    requests: BTreeMap<RequestId, Pending>,
    timers: TimerSet<Timer>,
    expired: VecDeque<String>,
    expired_set: BTreeSet<String>,
    next_request: u64,
    scratch: Vec<u8>,
    audio: Vec<u8>,
    vad_events: Vec<VadEvent>,
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
        Ok(Self {
            config,
            ids: Box::new(ids),
            clock: Monotonic::new(),
            out: Outbox::new(),
            conns: BTreeMap::new(),
            sessions: BTreeMap::new(),
            requests: BTreeMap::new(),
            timers: TimerSet::new(),
            expired: VecDeque::new(),
            expired_set: BTreeSet::new(),
            next_request: 0,
            scratch: Vec::new(),
            audio: Vec::new(),
            vad_events: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    // -----------------------------------------------------------------------------------
    // Getters
    // -----------------------------------------------------------------------------------

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
        self.conns.get(&conn)?.session.as_deref()
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

    // -----------------------------------------------------------------------------------
    // Commands
    // -----------------------------------------------------------------------------------

    /// Reports whether `conn`'s WebRTC data channel is open. While it is, every payload
    /// message is also emitted as [`ServerEvent::DataChannel`].
    pub fn set_data_channel_open(&mut self, conn: ConnId, open: bool) -> Result<(), CommandError> {
        let c = self
            .conns
            .get_mut(&conn)
            .ok_or(CommandError::UnknownConnection)?;
        c.dc_open = open;
        Ok(())
    }

    /// Answers `conn`'s `offer` with an SDP answer (`signal`).
    pub fn signal(&mut self, conn: ConnId, answer: RawJson) -> Result<(), CommandError> {
        if !self.conns.contains_key(&conn) {
            return Err(CommandError::UnknownConnection);
        }
        self.send(conn, &ServerMessage::Signal(Signal { signal: answer }));
        Ok(())
    }

    /// Sends `error` to `conn` (an application-level failure, e.g. `CONNECTION_FAILED`).
    pub fn send_error(
        &mut self,
        conn: ConnId,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> Result<(), CommandError> {
        if !self.conns.contains_key(&conn) {
            return Err(CommandError::UnknownConnection);
        }
        self.error(conn, code, message.into());
        Ok(())
    }

    /// Closes `conn` (1000); its session waits for a reconnect.
    pub fn close(&mut self, conn: ConnId) -> Result<(), CommandError> {
        if !self.conns.contains_key(&conn) {
            return Err(CommandError::UnknownConnection);
        }
        self.out.close(conn, CloseCode::NORMAL, "closed");
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
        if !self.sessions.contains_key(session) {
            return Err(CommandError::UnknownSession);
        }
        self.move_stage(session, to, reason);
        Ok(())
    }

    /// STT progress: sends `transcript` with `isFinal: false` and restarts the STT timeout.
    pub fn stt_partial(
        &mut self,
        request: RequestId,
        text: &str,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Stt)?;
        self.refresh(request, ProviderKind::Stt, now);
        let text = cut(text, self.config.limits.max_transcript_bytes).to_owned();
        self.send_session(
            &sid,
            &ServerMessage::Transcript(Transcript {
                text,
                is_final: false,
            }),
        );
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
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Stt)?;
        self.finish_request(request);
        let text = match result {
            Ok(t) if t.len() > self.config.limits.max_transcript_bytes => {
                self.fail_turn(
                    &sid,
                    ErrorCode::STT_ERROR,
                    texts::TRANSCRIPT_TOO_LONG.into(),
                    now,
                );
                return Ok(());
            }
            Ok(t) => t,
            Err(e) => {
                let (code, msg) = provider_error(ProviderKind::Stt, e);
                self.fail_turn(&sid, code, msg, now);
                return Ok(());
            }
        };
        self.send_session(
            &sid,
            &ServerMessage::Transcript(Transcript {
                text: text.clone(),
                is_final: true,
            }),
        );
        if text.trim().is_empty() {
            self.end_turn(&sid, TurnOutcome::NothingHeard, now);
            return Ok(());
        }
        let max_history = self.config.limits.max_history;
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.remember(
                ChatMessage {
                    role: ChatRole::User,
                    text: text.clone(),
                },
                max_history,
            );
        }
        // Playbook: a keyword in the transcript moves the stage before the LLM is asked.
        let keyword_to = self
            .current_stage(&sid)
            .and_then(|stage| stage.on_transcript(&text).map(|t| t.to.clone()));
        if let Some(to) = keyword_to {
            self.move_stage(&sid, &to, REASON_KEYWORD_MATCH);
        }
        self.start_llm_round(&sid, now);
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
        let sid = self.active(request, ProviderKind::Llm)?;
        self.refresh(request, ProviderKind::Llm, now);
        if content.is_empty() {
            return Ok(());
        }
        let max = self.config.limits.max_reply_bytes;
        let Some(turn) = self.sessions.get_mut(&sid).and_then(|s| s.turn.as_mut()) else {
            return Err(CommandError::UnknownRequest);
        };
        if turn.reply.len() + content.len() > max {
            self.fail_turn(
                &sid,
                ErrorCode::LLM_ERROR,
                texts::REPLY_TOO_LONG.into(),
                now,
            );
            return Ok(());
        }
        turn.reply.push_str(content);
        let previous = turn.held.replace(content.to_owned());
        if let Some(p) = previous {
            self.send_session(
                &sid,
                &ServerMessage::LlmChunk(LlmChunk {
                    content: p,
                    done: false,
                }),
            );
        }
        Ok(())
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
    ) -> Result<String, CommandError> {
        let now = self.clock.observe(now);
        if self.config.playbook.is_none() {
            return Err(CommandError::UnknownStage);
        }
        let sid = self.active(request, ProviderKind::Llm)?;
        self.refresh(request, ProviderKind::Llm, now);
        let max_calls = self.config.limits.max_tool_calls_per_round;
        let calls = match self.turn_mut(&sid).map(|t| &mut t.phase) {
            Some(Phase::Llm { calls, .. }) => {
                *calls += 1;
                *calls
            }
            _ => return Err(CommandError::UnknownRequest),
        };
        if calls > max_calls {
            self.fail_turn(
                &sid,
                ErrorCode::PLAYBOOK_ERROR,
                texts::TOO_MANY_CALLS.into(),
                now,
            );
            return Err(CommandError::OutOfOrder(
                "too many tool calls; the turn failed",
            ));
        }
        // Text streamed before the call is shown before it.
        self.flush_held(&sid, false);
        self.next_request += 1;
        let id = RequestId(self.next_request);
        let call_id = format!("call_{}", id.0);
        self.send_session(
            &sid,
            &ServerMessage::ToolCallStart(ToolCallStart {
                name: name.to_owned(),
                call_id: call_id.clone(),
                arguments: arguments.clone(),
            }),
        );
        let known = self
            .current_stage(&sid)
            .is_some_and(|s| s.tool(name).is_some());
        if !known {
            let error = format!("Unknown tool {name:?} in the current stage");
            self.send_session(
                &sid,
                &ServerMessage::ToolCallEnd(ToolCallEnd {
                    call_id: call_id.clone(),
                    result: None,
                    error: Some(error.clone()),
                    duration_ms: 0,
                }),
            );
            self.error_session(&sid, ErrorCode::TOOL_ERROR, error.clone());
            if let Some(t) = self.turn_mut(&sid) {
                t.tool_results.push(ToolRecord {
                    call_id: call_id.clone(),
                    name: name.to_owned(),
                    arguments,
                    outcome: Err(error),
                });
            }
            return Ok(call_id);
        }
        self.requests.insert(
            id,
            Pending {
                session: sid.clone(),
                kind: ProviderKind::Tool,
                started: now,
                tool: Some(ToolMeta {
                    call_id: call_id.clone(),
                    name: name.to_owned(),
                    arguments: arguments.clone(),
                }),
            },
        );
        self.timers
            .set(Timer::Provider(id), now + self.config.timeouts.tool);
        if let Some(Phase::Llm { tools, .. }) = self.turn_mut(&sid).map(|t| &mut t.phase) {
            tools.insert(id);
        }
        self.out.event(ServerEvent::ToolCall(ToolCallRequest {
            request: id,
            session: sid,
            call_id: call_id.clone(),
            name: name.to_owned(),
            arguments,
        }));
        Ok(call_id)
    }

    /// The LLM round is complete. Without tool calls in the round this ends the reply: the
    /// held chunk goes out with `done: true`, then `llm`, then `tts-start` and a TTS request
    /// (nothing to speak: the turn ends). With tool calls, the LLM is asked again once every
    /// tool has answered.
    pub fn llm_done(&mut self, request: RequestId, now: Instant) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Llm)?;
        self.finish_request(request);
        let Some(Phase::Llm { req, calls, .. }) = self.turn_mut(&sid).map(|t| &mut t.phase) else {
            return Err(CommandError::UnknownRequest);
        };
        *req = None;
        if *calls == 0 {
            self.finish_reply(&sid, now);
        } else {
            self.maybe_next_round(&sid, now);
        }
        Ok(())
    }

    /// The LLM failed: `LLM_ERROR` or `LLM_TIMEOUT`, and the turn ends (a stream already
    /// started is closed with `done: true` first; no `llm` message).
    pub fn llm_failed(
        &mut self,
        request: RequestId,
        error: ProviderError,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Llm)?;
        self.finish_request(request);
        let (code, msg) = provider_error(ProviderKind::Llm, error);
        self.fail_turn(&sid, code, msg, now);
        Ok(())
    }

    /// One piece of TTS audio: sent as `tts-chunk` (base64 encoded straight into the frame).
    /// Restarts the TTS timeout.
    pub fn tts_chunk(
        &mut self,
        request: RequestId,
        format: &str,
        sample_rate: u32,
        audio: &[u8],
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Tts)?;
        self.refresh(request, ProviderKind::Tts, now);
        self.scratch.clear();
        encode_tts_chunk(&mut self.scratch, format, sample_rate, audio);
        let frame = FrameBuf::json_from_slice(&self.scratch);
        self.send_frame_session(&sid, frame, Channel::Both);
        Ok(())
    }

    /// The whole TTS audio at once: sent as `tts` (then call [`tts_done`](Self::tts_done)).
    pub fn tts_audio(
        &mut self,
        request: RequestId,
        format: &str,
        audio: &[u8],
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Tts)?;
        self.refresh(request, ProviderKind::Tts, now);
        self.scratch.clear();
        encode_tts(&mut self.scratch, format, audio);
        let frame = FrameBuf::json_from_slice(&self.scratch);
        self.send_frame_session(&sid, frame, Channel::Both);
        Ok(())
    }

    /// TTS finished: `tts-complete`, the turn ends, and the next queued utterance starts.
    pub fn tts_done(&mut self, request: RequestId, now: Instant) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Tts)?;
        self.finish_request(request);
        self.send_session(&sid, &ServerMessage::TtsComplete);
        self.end_turn(&sid, TurnOutcome::Completed, now);
        Ok(())
    }

    /// TTS failed: `TTS_ERROR` or `TTS_TIMEOUT`, then `tts-complete`, and the turn ends.
    pub fn tts_failed(
        &mut self,
        request: RequestId,
        error: ProviderError,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        let sid = self.active(request, ProviderKind::Tts)?;
        self.finish_request(request);
        let (code, msg) = provider_error(ProviderKind::Tts, error);
        self.fail_turn(&sid, code, msg, now);
        Ok(())
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
        let sid = self.active(request, ProviderKind::Tool)?;
        let Some(pending) = self.requests.remove(&request) else {
            return Err(CommandError::UnknownRequest);
        };
        self.timers.cancel(&Timer::Provider(request));
        self.complete_tool(&sid, request, pending, outcome, now);
        Ok(())
    }

    // -----------------------------------------------------------------------------------
    // Inbound messages
    // -----------------------------------------------------------------------------------

    fn on_message(&mut self, conn: ConnId, sid: String, msg: ClientMessageRef<'_>, now: Instant) {
        match msg {
            ClientMessageRef::Ping(p) => {
                if let Some(t) = self.config.heartbeat_timeout {
                    self.timers.set(Timer::Heartbeat(conn), now + t);
                }
                self.send(
                    conn,
                    &ServerMessage::Pong(Pong {
                        timestamp: p.timestamp,
                    }),
                );
            }
            ClientMessageRef::Offer(o) => {
                if self.config.webrtc {
                    self.out.event(ServerEvent::Offer {
                        conn,
                        session: sid,
                        signal: o.signal,
                    });
                } else {
                    self.error(
                        conn,
                        ErrorCode::WEBRTC_UNAVAILABLE,
                        texts::WEBRTC_UNAVAILABLE.into(),
                    );
                }
            }
            ClientMessageRef::Reconnect(r) => self.on_reconnect(conn, sid, r.session_id, now),
            ClientMessageRef::Attachments(Attachments { attachments }) => {
                self.queue_attachments(conn, &sid, attachments);
            }
            ClientMessageRef::Audio(a) => self.on_audio(conn, &sid, a, now),
        }
    }

    fn on_reconnect(&mut self, conn: ConnId, current: String, wanted: String, now: Instant) {
        if wanted == current {
            self.send(
                conn,
                &ServerMessage::ReconnectAck(ReconnectAck {
                    success: true,
                    session_id: current,
                    history_recovered: true,
                }),
            );
            return;
        }
        if !self.sessions.contains_key(&wanted) {
            let expired = self.expired_set.contains(&wanted);
            self.send(
                conn,
                &ServerMessage::ReconnectAck(ReconnectAck {
                    success: false,
                    session_id: current,
                    history_recovered: false,
                }),
            );
            let (code, text) = if expired {
                (ErrorCode::SESSION_EXPIRED, texts::SESSION_EXPIRED)
            } else {
                (ErrorCode::SESSION_NOT_FOUND, texts::SESSION_NOT_FOUND)
            };
            self.error(conn, code, text.into());
            self.out.event(ServerEvent::ResumeFailed {
                conn,
                requested: cut(&wanted, 256).to_owned(),
                expired,
            });
            return;
        }
        // The session this connection got at connect gives way to the recovered one.
        self.abandon(&current, true);
        self.sessions.remove(&current);
        self.timers.cancel(&Timer::Ttl(current.clone()));
        // A connection still holding the wanted session loses it.
        let holder = self.sessions.get(&wanted).and_then(|s| s.conn);
        if let Some(other) = holder.filter(|o| *o != conn) {
            self.abandon(&wanted, false);
            if let Some(c) = self.conns.get_mut(&other) {
                c.session = None;
            }
            self.timers.cancel(&Timer::Heartbeat(other));
            self.out
                .close(other, CloseCode::NORMAL, CLOSE_SESSION_MOVED);
        }
        self.timers.cancel(&Timer::Ttl(wanted.clone()));
        if let Some(s) = self.sessions.get_mut(&wanted) {
            s.conn = Some(conn);
            s.last_activity = now;
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(wanted.clone());
        }
        self.send(
            conn,
            &ServerMessage::ReconnectAck(ReconnectAck {
                success: true,
                session_id: wanted.clone(),
                history_recovered: true,
            }),
        );
        self.out.event(ServerEvent::SessionResumed {
            conn,
            session: wanted,
            replaced: current,
        });
    }

    fn queue_attachments(&mut self, conn: ConnId, sid: &str, attachments: Vec<VisionAttachment>) {
        let max = self.config.limits.max_queued_attachments;
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        let room = max.saturating_sub(s.attachments.len());
        let dropped = attachments.len() > room;
        s.attachments.extend(attachments.into_iter().take(room));
        if dropped {
            self.error(
                conn,
                ErrorCode::RATE_LIMITED,
                texts::TOO_MANY_ATTACHMENTS.into(),
            );
        }
    }

    fn on_audio(&mut self, conn: ConnId, sid: &str, audio: AudioRef<'_>, now: Instant) {
        if let Some(a) = audio.attachments {
            self.queue_attachments(conn, sid, a);
        }
        let mut bytes = std::mem::take(&mut self.audio);
        bytes.clear();
        let max = self.config.limits.max_message_bytes;
        if decode_base64(&audio.data, max, &mut bytes).is_none() {
            self.audio = bytes;
            self.error(
                conn,
                ErrorCode::AUDIO_PROCESSING_ERROR,
                texts::BAD_BASE64.into(),
            );
            return;
        }
        drop(audio.data);
        let (rate, samples) = match parse_wav(&bytes) {
            Ok(w) => (w.format.sample_rate, w.mono_samples().collect::<Vec<i16>>()),
            Err(e) => {
                self.audio = bytes;
                self.error(
                    conn,
                    ErrorCode::INVALID_AUDIO_FORMAT,
                    format!("Unsupported audio: {e}"),
                );
                return;
            }
        };
        self.audio = bytes;
        let mut events = std::mem::take(&mut self.vad_events);
        events.clear();
        let vad_config = self.config.vad.clone();
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        // A new sample rate ends whatever the old stream was saying.
        if let Some(v) = s.vad.as_mut().filter(|v| v.sample_rate() != rate) {
            v.finish(&mut events);
        }
        let end_of_message = vad_config.end_of_message_ends_speech;
        let vad = match &mut s.vad {
            Some(v) if v.sample_rate() == rate => v,
            slot => slot.insert(Vad::new(vad_config, rate)),
        };
        vad.push(&samples, &mut events);
        if end_of_message {
            vad.finish(&mut events);
        }
        // Events of the old stream come first; a segment keeps the rate it started at.
        for ev in events.drain(..) {
            self.on_vad(sid, ev, rate, now);
        }
        self.vad_events = events;
        self.pump(sid, now);
    }

    fn on_vad(&mut self, sid: &str, ev: VadEvent, rate: u32, now: Instant) {
        let max_samples = self.config.limits.max_segment_bytes / 2;
        match ev {
            VadEvent::SpeechStart { pre_roll } => {
                // Barge-in: speech while TTS plays cancels it first.
                let tts = match self.sessions.get(sid).and_then(|s| s.turn.as_ref()) {
                    Some(Turn {
                        phase: Phase::Tts { req },
                        ..
                    }) => Some(*req),
                    _ => None,
                };
                if let Some(req) = tts {
                    self.cancel_request(req);
                    self.send_session(sid, &ServerMessage::TtsCancelled);
                    self.end_turn(sid, TurnOutcome::Interrupted, now);
                }
                self.send_session(sid, &ServerMessage::SpeechStart);
                if let Some(s) = self.sessions.get_mut(sid) {
                    let mut seg = pre_roll;
                    seg.truncate(max_samples);
                    s.segment = Some(seg);
                    s.segment_rate = rate;
                }
            }
            VadEvent::Speech(samples) => {
                let full = match self.sessions.get_mut(sid).and_then(|s| s.segment.as_mut()) {
                    Some(seg) => {
                        let room = max_samples.saturating_sub(seg.len());
                        seg.extend_from_slice(&samples[..room.min(samples.len())]);
                        seg.len() >= max_samples
                    }
                    None => false,
                };
                if full {
                    self.end_segment(sid);
                }
            }
            VadEvent::SpeechEnd => self.end_segment(sid),
        }
    }

    /// Ends the speech segment being recorded (if any): `speech-end`, and the utterance
    /// queues for its turn.
    fn end_segment(&mut self, sid: &str) {
        let max_turns = self.config.limits.max_queued_turns;
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        let Some(samples) = s.segment.take() else {
            return;
        };
        let rate = s.segment_rate;
        let attachments = std::mem::take(&mut s.attachments);
        let full = s.queued.len() >= max_turns;
        if !full {
            s.queued.push_back(QueuedTurn {
                segment: SpeechSegment {
                    sample_rate: rate,
                    samples,
                },
                attachments,
            });
        }
        self.send_session(sid, &ServerMessage::SpeechEnd);
        if full {
            self.error_session(sid, ErrorCode::RATE_LIMITED, texts::TOO_MANY_TURNS.into());
        }
    }

    // -----------------------------------------------------------------------------------
    // The turn pipeline
    // -----------------------------------------------------------------------------------

    /// Starts the next queued turn of `sid` if it is connected and idle.
    fn pump(&mut self, sid: &str, now: Instant) {
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        if s.turn.is_some() || s.conn.is_none() {
            return;
        }
        let Some(q) = s.queued.pop_front() else {
            return;
        };
        let req = self.new_request(sid, ProviderKind::Stt, now);
        if let Some(s) = self.sessions.get_mut(sid) {
            s.turn = Some(Turn::new(req, q.attachments));
        }
        self.out.event(ServerEvent::Stt(SttRequest {
            request: req,
            session: sid.to_owned(),
            segment: q.segment,
        }));
    }

    fn start_llm_round(&mut self, sid: &str, now: Instant) {
        let req = self.new_request(sid, ProviderKind::Llm, now);
        let stage = self.current_stage(sid).map(|st| StageContext {
            name: st.name.clone(),
            instructions: st.instructions.clone(),
            tools: st.tools.clone(),
        });
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        let Some(turn) = s.turn.as_mut() else {
            return;
        };
        turn.phase = Phase::Llm {
            req: Some(req),
            tools: BTreeSet::new(),
            calls: 0,
        };
        let request = LlmRequest {
            request: req,
            session: sid.to_owned(),
            history: s.history.iter().cloned().collect(),
            attachments: turn.attachments.clone(),
            stage,
            tool_results: turn.tool_results.clone(),
        };
        self.out.event(ServerEvent::Llm(request));
    }

    /// After a tool answered or the LLM round ended: the next round once both are done.
    fn maybe_next_round(&mut self, sid: &str, now: Instant) {
        let ready = matches!(
            self.turn_mut(sid).map(|t| &t.phase),
            Some(Phase::Llm { req: None, tools, .. }) if tools.is_empty()
        );
        if !ready {
            return;
        }
        let max = self.config.limits.max_tool_rounds;
        let rounds = match self.turn_mut(sid) {
            Some(t) => {
                t.rounds += 1;
                t.rounds
            }
            None => return,
        };
        if rounds > max {
            self.fail_turn(
                sid,
                ErrorCode::PLAYBOOK_ERROR,
                texts::TOO_MANY_ROUNDS.into(),
                now,
            );
            return;
        }
        self.start_llm_round(sid, now);
    }

    fn complete_tool(
        &mut self,
        sid: &str,
        request: RequestId,
        pending: Pending,
        outcome: Result<Value, String>,
        now: Instant,
    ) {
        let Some(meta) = pending.tool else {
            return;
        };
        let duration_ms = u64::try_from(now.saturating_duration_since(pending.started).as_millis())
            .unwrap_or(u64::MAX);
        let (result, error) = match &outcome {
            Ok(v) => (Some(v.clone()), None),
            Err(e) => (None, Some(e.clone())),
        };
        self.send_session(
            sid,
            &ServerMessage::ToolCallEnd(ToolCallEnd {
                call_id: meta.call_id.clone(),
                result,
                error: error.clone(),
                duration_ms,
            }),
        );
        if let Some(e) = error {
            self.error_session(sid, ErrorCode::TOOL_ERROR, e);
        }
        let to = if outcome.is_ok() {
            self.current_stage(sid)
                .and_then(|st| st.on_tool_result(&meta.name))
                .map(|t| t.to.clone())
        } else {
            None
        };
        if let Some(to) = to {
            self.move_stage(sid, &to, REASON_TOOL_RESULT);
        }
        if let Some(t) = self.turn_mut(sid) {
            if let Phase::Llm { tools, .. } = &mut t.phase {
                tools.remove(&request);
            }
            t.tool_results.push(ToolRecord {
                call_id: meta.call_id,
                name: meta.name,
                arguments: meta.arguments,
                outcome,
            });
        }
        self.maybe_next_round(sid, now);
    }

    /// The reply is complete: last chunk (`done: true`), `llm`, history, then TTS.
    fn finish_reply(&mut self, sid: &str, now: Instant) {
        let flushed = self.flush_held(sid, true);
        if !flushed {
            self.send_session(
                sid,
                &ServerMessage::LlmChunk(LlmChunk {
                    content: String::new(),
                    done: true,
                }),
            );
        }
        let reply = self
            .turn_mut(sid)
            .map(|t| std::mem::take(&mut t.reply))
            .unwrap_or_default();
        self.send_session(
            sid,
            &ServerMessage::Llm(Llm {
                text: reply.clone(),
            }),
        );
        if reply.trim().is_empty() {
            self.end_turn(sid, TurnOutcome::Completed, now);
            return;
        }
        let max_history = self.config.limits.max_history;
        if let Some(s) = self.sessions.get_mut(sid) {
            s.remember(
                ChatMessage {
                    role: ChatRole::Assistant,
                    text: reply.clone(),
                },
                max_history,
            );
        }
        let req = self.new_request(sid, ProviderKind::Tts, now);
        if let Some(t) = self.turn_mut(sid) {
            t.phase = Phase::Tts { req };
        }
        self.send_session(sid, &ServerMessage::TtsStart);
        self.out.event(ServerEvent::Tts(TtsRequest {
            request: req,
            session: sid.to_owned(),
            text: reply,
        }));
    }

    /// Sends the held LLM chunk with `done`; whether there was one.
    fn flush_held(&mut self, sid: &str, done: bool) -> bool {
        let Some(content) = self.turn_mut(sid).and_then(|t| t.held.take()) else {
            return false;
        };
        self.send_session(sid, &ServerMessage::LlmChunk(LlmChunk { content, done }));
        true
    }

    /// A turn failed with `code`: the LLM stream is closed, `error` goes out, an open
    /// `tts-start` gets its `tts-complete`, every other request is cancelled.
    fn fail_turn(&mut self, sid: &str, code: ErrorCode, message: String, now: Instant) {
        let in_tts = matches!(
            self.turn_mut(sid).map(|t| &t.phase),
            Some(Phase::Tts { .. })
        );
        self.flush_held(sid, true);
        self.error_session(sid, code.clone(), message);
        if in_tts {
            self.send_session(sid, &ServerMessage::TtsComplete);
        }
        self.end_turn(sid, TurnOutcome::Failed(code), now);
    }

    /// Ends the current turn (cancelling what it still waits on) and starts the next.
    fn end_turn(&mut self, sid: &str, outcome: TurnOutcome, now: Instant) {
        let Some(turn) = self.sessions.get_mut(sid).and_then(|s| s.turn.take()) else {
            return;
        };
        for req in turn.requests() {
            self.cancel_request(req);
        }
        self.out.event(ServerEvent::TurnEnded {
            session: sid.to_owned(),
            outcome,
        });
        self.pump(sid, now);
    }

    /// Drops the session's turn, queued utterances and VAD state. With `tell`, a
    /// `tts-start` the client got is closed with `tts-cancelled` (the connection stays, as
    /// when a `reconnect` replaces the session); otherwise nothing is sent (it is gone).
    fn abandon(&mut self, sid: &str, tell: bool) {
        let in_tts = matches!(
            self.sessions.get(sid).and_then(|s| s.turn.as_ref()),
            Some(Turn {
                phase: Phase::Tts { .. },
                ..
            })
        );
        if tell && in_tts {
            self.send_session(sid, &ServerMessage::TtsCancelled);
        }
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        s.queued.clear();
        s.segment = None;
        s.vad = None;
        let had_turn = s.turn.is_some();
        if let Some(turn) = s.turn.take() {
            for req in turn.requests() {
                self.cancel_request(req);
            }
        }
        if had_turn {
            self.out.event(ServerEvent::TurnEnded {
                session: sid.to_owned(),
                outcome: TurnOutcome::Abandoned,
            });
        }
    }

    fn move_stage(&mut self, sid: &str, to: &str, reason: &str) {
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        let from = s.stage.replace(to.to_owned()).unwrap_or_default();
        self.send_session(
            sid,
            &ServerMessage::StageChange(StageChange {
                from,
                to: to.to_owned(),
                reason: reason.to_owned(),
            }),
        );
    }

    fn current_stage(&self, sid: &str) -> Option<&crate::playbook::Stage> {
        let name = self.sessions.get(sid)?.stage.as_deref()?;
        self.config.playbook.as_ref()?.stage(name)
    }

    // -----------------------------------------------------------------------------------
    // Requests and timers
    // -----------------------------------------------------------------------------------

    fn timeout_of(&self, kind: ProviderKind) -> Duration {
        let t = &self.config.timeouts;
        match kind {
            ProviderKind::Stt => t.stt,
            ProviderKind::Llm => t.llm,
            ProviderKind::Tts => t.tts,
            ProviderKind::Tool => t.tool,
        }
    }

    fn new_request(&mut self, sid: &str, kind: ProviderKind, now: Instant) -> RequestId {
        self.next_request += 1;
        let id = RequestId(self.next_request);
        self.requests.insert(
            id,
            Pending {
                session: sid.to_owned(),
                kind,
                started: now,
                tool: None,
            },
        );
        self.timers
            .set(Timer::Provider(id), now + self.timeout_of(kind));
        id
    }

    /// The session of an active request of `kind`.
    fn active(&self, request: RequestId, kind: ProviderKind) -> Result<String, CommandError> {
        let p = self
            .requests
            .get(&request)
            .ok_or(CommandError::UnknownRequest)?;
        if p.kind != kind {
            return Err(CommandError::WrongProvider(p.kind));
        }
        Ok(p.session.clone())
    }

    fn refresh(&mut self, request: RequestId, kind: ProviderKind, now: Instant) {
        let at = now + self.timeout_of(kind);
        self.timers.set(Timer::Provider(request), at);
    }

    fn finish_request(&mut self, request: RequestId) {
        self.requests.remove(&request);
        self.timers.cancel(&Timer::Provider(request));
    }

    fn cancel_request(&mut self, request: RequestId) {
        if let Some(p) = self.requests.remove(&request) {
            self.timers.cancel(&Timer::Provider(request));
            self.out.event(ServerEvent::Cancel {
                request,
                kind: p.kind,
            });
        }
    }

    fn on_provider_timeout(&mut self, request: RequestId, now: Instant) {
        let Some(p) = self.requests.get(&request) else {
            return;
        };
        let (kind, sid) = (p.kind, p.session.clone());
        match kind {
            ProviderKind::Tool => {
                let Some(pending) = self.requests.remove(&request) else {
                    return;
                };
                self.out.event(ServerEvent::Cancel { request, kind });
                self.complete_tool(
                    &sid,
                    request,
                    pending,
                    Err(texts::TOOL_TIMEOUT.to_owned()),
                    now,
                );
            }
            _ => {
                self.cancel_request(request);
                let (code, msg) = provider_error(kind, ProviderError::Timeout);
                self.fail_turn(&sid, code, msg, now);
            }
        }
    }

    fn expire(&mut self, sid: &str) {
        let Some(s) = self.sessions.get(sid) else {
            return;
        };
        if s.conn.is_some() {
            return;
        }
        self.abandon(sid, false);
        self.sessions.remove(sid);
        self.timers.cancel(&Timer::Ttl(sid.to_owned()));
        self.remember_expired(sid.to_owned());
        self.out.event(ServerEvent::SessionExpired {
            session: sid.to_owned(),
        });
    }

    fn remember_expired(&mut self, sid: String) {
        let max = self.config.limits.max_expired_remembered;
        if max == 0 {
            return;
        }
        while self.expired.len() >= max {
            if let Some(old) = self.expired.pop_front() {
                self.expired_set.remove(&old);
            }
        }
        self.expired_set.insert(sid.clone());
        self.expired.push_back(sid);
    }

    // -----------------------------------------------------------------------------------
    // Sending
    // -----------------------------------------------------------------------------------

    fn turn_mut(&mut self, sid: &str) -> Option<&mut Turn> {
        self.sessions.get_mut(sid)?.turn.as_mut()
    }

    fn send(&mut self, conn: ConnId, msg: &ServerMessage) {
        self.scratch.clear();
        msg.encode(&mut self.scratch);
        let frame = FrameBuf::json_from_slice(&self.scratch);
        self.send_frame(conn, frame, msg.channel());
    }

    fn send_frame(&mut self, conn: ConnId, frame: FrameBuf, channel: Channel) {
        let dc = self.conns.get(&conn).is_some_and(|c| c.dc_open);
        if dc && channel == Channel::Both {
            self.out.send(conn, frame.clone());
            self.out.event(ServerEvent::DataChannel { conn, frame });
        } else {
            self.out.send(conn, frame);
        }
    }

    fn send_session(&mut self, sid: &str, msg: &ServerMessage) {
        if let Some(conn) = self.conn_of(sid) {
            self.send(conn, msg);
        }
    }

    fn send_frame_session(&mut self, sid: &str, frame: FrameBuf, channel: Channel) {
        if let Some(conn) = self.conn_of(sid) {
            self.send_frame(conn, frame, channel);
        }
    }

    fn error(&mut self, conn: ConnId, code: ErrorCode, message: String) {
        let msg = ServerMessage::Error(ErrorMessage {
            code: code.clone(),
            message: message.clone(),
        });
        self.send(conn, &msg);
        self.out.event(ServerEvent::ErrorSent {
            conn,
            code,
            message,
        });
    }

    fn error_session(&mut self, sid: &str, code: ErrorCode, message: String) {
        if let Some(conn) = self.conn_of(sid) {
            self.error(conn, code, message);
        }
    }

    /// Refuses a connection over a limit: error, then close 1013.
    fn refuse(&mut self, conn: ConnId) {
        self.conns.insert(
            conn,
            Conn {
                session: None,
                dc_open: false,
            },
        );
        self.error(conn, ErrorCode::RATE_LIMITED, texts::SERVER_FULL.into());
        self.out.close(conn, CloseCode::TRY_AGAIN_LATER, CLOSE_FULL);
    }

    /// Makes room for one more session: evicts the least recently active disconnected one.
    fn make_room(&mut self) -> bool {
        if self.sessions.len() < self.config.limits.max_sessions {
            return true;
        }
        let victim = self
            .sessions
            .iter()
            .filter(|(_, s)| s.conn.is_none())
            .min_by_key(|(_, s)| s.last_activity)
            .map(|(id, _)| id.clone());
        match victim {
            Some(v) => {
                self.expire(&v);
                true
            }
            None => false,
        }
    }
}

/// The error code and text for a provider failure.
fn provider_error(kind: ProviderKind, e: ProviderError) -> (ErrorCode, String) {
    match (kind, e) {
        (ProviderKind::Stt, ProviderError::Failed(m)) => (ErrorCode::STT_ERROR, m),
        (ProviderKind::Stt, ProviderError::Timeout) => {
            (ErrorCode::STT_TIMEOUT, texts::STT_TIMEOUT.into())
        }
        (ProviderKind::Llm, ProviderError::Failed(m)) => (ErrorCode::LLM_ERROR, m),
        (ProviderKind::Llm, ProviderError::Timeout) => {
            (ErrorCode::LLM_TIMEOUT, texts::LLM_TIMEOUT.into())
        }
        (ProviderKind::Tts, ProviderError::Failed(m)) => (ErrorCode::TTS_ERROR, m),
        (ProviderKind::Tts, ProviderError::Timeout) => {
            (ErrorCode::TTS_TIMEOUT, texts::TTS_TIMEOUT.into())
        }
        (ProviderKind::Tool, ProviderError::Failed(m)) => (ErrorCode::TOOL_ERROR, m),
        (ProviderKind::Tool, ProviderError::Timeout) => {
            (ErrorCode::TOOL_ERROR, texts::TOOL_TIMEOUT.into())
        }
    }
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Machine for LlmrtcServer {
    type Event = ServerEvent;

    fn handle_connect(&mut self, conn: ConnId, _peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conns.contains_key(&conn) {
            return;
        }
        if self.conns.len() >= self.config.limits.max_connections || !self.make_room() {
            self.refuse(conn);
            return;
        }
        let sid = self.ids.next_id().to_uuid_string();
        let stage = self
            .config
            .playbook
            .as_ref()
            .map(|p| p.initial_stage.clone());
        let mut session = Session::new(stage, now);
        session.conn = Some(conn);
        self.sessions.insert(sid.clone(), session);
        self.conns.insert(
            conn,
            Conn {
                session: Some(sid.clone()),
                dc_open: false,
            },
        );
        let ice = (!self.config.ice_servers.is_empty()).then(|| self.config.ice_servers.clone());
        self.send(
            conn,
            &ServerMessage::Ready(Ready {
                id: sid.clone(),
                protocol_version: PROTOCOL_VERSION,
                ice_servers: ice,
                // This machine runs STT → LLM → TTS; core 1.3.0's backend says so too.
                mode: Some(SessionMode::PIPELINE),
            }),
        );
        if let Some(t) = self.config.heartbeat_timeout {
            self.timers.set(Timer::Heartbeat(conn), now + t);
        }
        self.out
            .event(ServerEvent::SessionStarted { conn, session: sid });
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        let Some(sid) = self.conns.get(&conn).and_then(|c| c.session.clone()) else {
            return;
        };
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.last_activity = now;
        }
        match ClientMessageRef::decode(frame, self.config.limits.max_message_bytes) {
            Ok(Decoded::Message(m)) => self.on_message(conn, sid, m, now),
            Ok(Decoded::Unknown { type_name }) => {
                self.out.event(ServerEvent::Ignored { conn, type_name });
            }
            Err(e) => {
                let text = e.to_string();
                self.error(conn, e.code(), cut(&text, 256).to_owned());
            }
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.timers.cancel(&Timer::Heartbeat(conn));
        self.out.forget_conn(conn);
        let Some(sid) = c.session else {
            return;
        };
        if self.conn_of(&sid) != Some(conn) {
            return;
        }
        self.abandon(&sid, false);
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.conn = None;
            s.last_activity = s.last_activity.max(now);
            let at = s.last_activity + self.config.session_ttl;
            self.timers.set(Timer::Ttl(sid.clone()), at);
        }
        self.out
            .event(ServerEvent::SessionDetached { session: sid });
    }

    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(t) = self.timers.pop_expired(now) {
            match t {
                Timer::Heartbeat(conn) => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        let sid = c.session.take();
                        self.out.close(conn, CloseCode::POLICY, CLOSE_HEARTBEAT);
                        self.out.event(ServerEvent::HeartbeatTimeout { conn });
                        // The session waits for a reconnect from now on.
                        if let Some(sid) = sid {
                            self.abandon(&sid, false);
                            if let Some(s) = self.sessions.get_mut(&sid) {
                                s.conn = None;
                                let at = s.last_activity.max(now) + self.config.session_ttl;
                                self.timers.set(Timer::Ttl(sid.clone()), at);
                            }
                            self.out
                                .event(ServerEvent::SessionDetached { session: sid });
                        }
                    }
                }
                Timer::Ttl(sid) => self.expire(&sid),
                Timer::Provider(req) => self.on_provider_timeout(req, now),
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    fn poll_output(&mut self) -> Option<Output<ServerEvent>> {
        self.out.pop()
    }
}
