//! The `Host`: the UI side of the protocol (client role), answering agents through the relay.
//!
//! `mod.rs` is the [`Machine`] impl and the routing of the relay's messages; the host's
//! state lives in sub-states that own their data and deadlines: the connection to the relay
//! ([`link`]), the study session ([`study`]) and the chat ([`history`]). The application's
//! UI is the [`Tools`] it implements ([`tools`]); a `tool.call` is checked ([`call`],
//! [`params`]) before a tool runs. Just over 700 lines because the routing of every relay
//! message reads best as one match.

mod call;
mod frames;
mod history;
mod link;
mod params;
mod study;
mod tools;

use std::time::Instant;

use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, Machine, Monotonic, Outbox, Output, PeerInfo,
};

pub use history::{ChatEntry, ChatRole, History};
pub use params::validate_params;
pub use tools::{ToolContext, ToolOutcome, Tools};

use crate::codec::{truncate, Route, VersionRule};
use crate::config::HostConfig;
use crate::error::{DecodeError, HostCommandError};
use crate::event::{EndTicket, HostEvent};
use crate::id::{RequestId, SessionId, StudySessionId};
use crate::message::{
    types, AgentText, ErrorCode, ErrorPayload, RelayPresence, SessionEnd, SessionStart,
};
use crate::texts::{self, host as host_texts, sources};

use call::{check_call, Checked, MAX_ECHOED};
use link::Link;
use study::{Ending, Start, Study};

/// The reason a tool sees ([`ToolContext::reason`]) when the participant, not an agent,
/// acts through it ([`Host::user_action`]).
pub const USER_ACTION_REASON: &str = "participant action";

/// The spec's log file layout, `logs/study/<sessionId>.jsonl`, for a log writer that wants
/// it. The host never makes up a path: `session.ended` reports the one given to
/// [`Host::confirm_flush`].
pub fn study_log_path(session_id: &str) -> String {
    format!("logs/study/{session_id}.jsonl")
}

/// What the next deadline of [`Host::next_timer`] is for (for tracing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum HostTimer {
    /// The relay's answer to `relay.join` is due.
    JoinReply,
    /// The application's confirmation of a log flush is due.
    LogFlush,
}

/// The UI host (client role): one connection to the relay at a time, surviving reconnects,
/// answering the agents of its relay session on behalf of the application's [`Tools`].
///
/// - On every connect it sends `relay.join` (role `host`,
///   [`HostConfig::relay_session`]); pushes made while not joined wait until the relay
///   answers. A study session in progress survives reconnects.
/// - `session.start` → `session.started` with a new id `s-YYYYMMDD-NNN` (UTC date of the
///   wall clock, `NNN` counting the day's sessions from 001). Outside a session every other
///   request but `snapshot.get` gets `SESSION_NOT_ACTIVE`.
/// - `snapshot.get` → `snapshot.state` with `uiSpec` (no `backendData` at any depth),
///   `messageHistory` and `toolSchema` only, in and outside a study session.
/// - `tool.call` → checked (`reason`, `NO_ACTIVE_SPEC`, `UNKNOWN_TOOL`, `INVALID_PARAMS`),
///   run through [`Tools::call`], answered `tool.result`, then pushed as `state.updated`.
/// - `agent.message` → appended to the chat [`History`], pushed as `state.updated`.
/// - [`Host::user_message`] → `user.message` to the agents (and the chat).
/// - [`Host::user_action`] → the participant's click, run as the stage's tool, pushed as
///   `state.updated` with source `user`.
/// - `session.end` → [`HostEvent::SessionEnding`]; once the application has flushed the
///   study log it calls [`Host::confirm_flush`]: state reset, `session.ended` with the log
///   file and `stateReset: true`.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`];
/// - output: [`Machine::poll_output`] (frames, closes, [`HostEvent`]s),
///   [`Machine::poll_timeout`];
/// - commands: [`Host::user_message`], [`Host::user_action`], [`Host::publish_state`],
///   [`Host::end_session`],
///   [`Host::confirm_flush`], [`Host::fail_flush`], [`Host::resume_numbering`],
///   [`Host::set_wall_clock`], [`Host::tools_mut`];
/// - getters: [`Host::config`], [`Host::tools`], [`Host::history`], [`Host::session_id`],
///   [`Host::is_connected`], [`Host::is_joined`], [`Host::is_ending`],
///   [`Host::queued_pushes`], [`Host::next_timer`].
pub struct Host<T> {
    config: HostConfig,
    tools: T,
    clock: Monotonic,
    link: Link,
    study: Study,
    history: History,
    out: Outbox<HostEvent>,
}

impl<T> std::fmt::Debug for Host<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("conn", &self.link.conn())
            .field("joined", &self.link.is_joined())
            .field("session", &self.study.id())
            .field("history", &self.history.len())
            .finish_non_exhaustive()
    }
}

impl<T: Tools> Host<T> {
    /// A host serving `tools`; it starts once the driver reports a connection. `now` and
    /// `unix_ms` anchor the wall clock (the machine reads none): `unix_ms` is the wall-clock
    /// time at `now`, and dates the session ids.
    pub fn new(config: HostConfig, tools: T, now: Instant, unix_ms: u64) -> Self {
        let mut clock = Monotonic::new();
        clock.observe(now);
        Self {
            link: Link::new(config.limits.max_queued_pushes),
            history: History::new(config.limits.max_history_entries),
            study: Study::new(now, unix_ms),
            config,
            tools,
            clock,
            out: Outbox::new(),
        }
    }

    // ---- getters -------------------------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The application's tools (its UI state).
    pub fn tools(&self) -> &T {
        &self.tools
    }

    /// The chat timeline of the current session.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The active study session's id, `s-YYYYMMDD-NNN`.
    pub fn session_id(&self) -> Option<&str> {
        self.study.id()
    }

    /// Whether the driver has reported a connection (joined or not).
    pub fn is_connected(&self) -> bool {
        self.link.conn().is_some()
    }

    /// Whether the relay has answered `relay.join` on the current connection.
    pub fn is_joined(&self) -> bool {
        self.link.is_joined()
    }

    /// Whether the session's end awaits the log flush.
    pub fn is_ending(&self) -> bool {
        self.study.is_ending()
    }

    /// Pushes waiting for the host to be joined.
    pub fn queued_pushes(&self) -> usize {
        self.link.queued()
    }

    /// The next deadline and what it is for (the same time as [`Machine::poll_timeout`]).
    pub fn next_timer(&self) -> Option<(Instant, HostTimer)> {
        let join = self.link.join_deadline().map(|t| (t, HostTimer::JoinReply));
        let flush = self
            .study
            .flush_deadline()
            .map(|t| (t, HostTimer::LogFlush));
        match (join, flush) {
            (Some(j), Some(f)) => Some(j.min(f)),
            (j, f) => j.or(f),
        }
    }

    // ---- commands ------------------------------------------------------------------------

    /// The application's tools, to change the UI state directly (a participant's click, a
    /// stage load). Call [`publish_state`](Self::publish_state) afterwards so agents see it.
    pub fn tools_mut(&mut self) -> &mut T {
        &mut self.tools
    }

    /// Re-anchors the wall clock: `unix_ms` is the wall-clock time at `now`.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        let now = self.clock.observe(now);
        self.study.set_wall_clock(now, unix_ms);
    }

    /// Continues the day's numbering after `last_session_id` (e.g. the newest log file
    /// found at startup), so a restarted host does not give out `s-…-001` twice. Ids of an
    /// older day than the one already known change nothing.
    pub fn resume_numbering(&mut self, last_session_id: &str) -> Result<(), HostCommandError> {
        self.study.resume_numbering(last_session_id)
    }

    /// The participant typed `text` in the chat: it is added to the history and sent to
    /// the agents as `user.message` (with the current [`Tools::stage`]), then as
    /// `state.updated` (source `user`). While not joined both wait until the host is.
    pub fn user_message(&mut self, text: &str, now: Instant) -> Result<(), HostCommandError> {
        self.clock.observe(now);
        if self.link.is_full() {
            return Err(HostCommandError::QueueFull);
        }
        self.history
            .push(ChatRole::User, text)
            .map_err(|_| HostCommandError::HistoryFull)?;
        let frame = frames::user(text, self.tools.stage());
        self.link.push(frame, &mut self.out);
        self.state_changed(sources::USER);
        Ok(())
    }

    /// The participant acted on the UI (a click: select, filter, next, ...), as tool `tool`
    /// of the current stage with `params`: checked and run exactly as an agent's `tool.call`
    /// of it would be (in or outside a study session), then pushed to the agents as
    /// `state.updated` with source `user` if it changed the visible state or the chat. A
    /// refusal is [`HostCommandError::ActionRefused`] with the code and text an agent would
    /// get, and nothing is pushed (a tool that wrote to the chat before failing still pushes).
    pub fn user_action(
        &mut self,
        tool: &str,
        params: &serde_json::Value,
        now: Instant,
    ) -> Result<ToolOutcome, HostCommandError> {
        self.clock.observe(now);
        let refused = |(code, message)| HostCommandError::ActionRefused { code, message };
        let schema = call::find_tool(&self.tools, tool).map_err(refused)?;
        call::check_params(&schema, truncate(tool, MAX_ECHOED), params).map_err(refused)?;
        let before = self.history.revision();
        let result = {
            let mut ctx = ToolContext::new(tool, USER_ACTION_REASON, &mut self.history);
            self.tools.call(tool, params, &mut ctx)
        };
        let chat_changed = self.history.revision() != before;
        let applied = result == Ok(ToolOutcome::Applied);
        if result.is_ok() {
            self.out.event(HostEvent::UserAction {
                tool_name: tool.to_owned(),
                applied,
            });
        }
        if applied || chat_changed {
            self.state_changed(sources::USER);
        }
        result.map_err(|e| HostCommandError::ActionRefused {
            code: e.code(),
            message: e.to_string(),
        })
    }

    /// The application changed the visible state (through [`tools_mut`](Self::tools_mut)):
    /// pushes `state.updated` with `source` (`"user"` for the participant's actions).
    pub fn publish_state(&mut self, source: &str, now: Instant) {
        self.clock.observe(now);
        self.state_changed(source);
    }

    /// Ends the active session from the host side (the participant closed the study): the
    /// same flow as an agent's `session.end`, and `session.ended` goes to every agent.
    pub fn end_session(
        &mut self,
        reason: Option<&str>,
        now: Instant,
    ) -> Result<EndTicket, HostCommandError> {
        let now = self.clock.observe(now);
        self.study.can_end()?;
        Ok(self.begin_end(None, reason.map(str::to_owned), now))
    }

    /// The study log of the ending session is flushed to `log_file`: the tools and the
    /// chat are reset and `session.ended` `{sessionId, logFile, stateReset: true}` is sent
    /// (with `replyTo` the `session.end`, if it came on the current connection; else to
    /// every agent, once joined), then `state.updated` (source `reset`).
    pub fn confirm_flush(
        &mut self,
        ticket: EndTicket,
        log_file: &str,
        now: Instant,
    ) -> Result<(), HostCommandError> {
        self.clock.observe(now);
        let ending = self.study.take_ending(ticket)?;
        let Some(session) = self.study.finish() else {
            return Err(HostCommandError::UnknownTicket);
        };
        self.tools.reset();
        self.history.clear();
        match self.reply_target(&ending) {
            Some((conn, reply_to)) => {
                let frame = frames::ended(Some(reply_to), &session.id, log_file);
                self.out.send(conn, frame);
            }
            None => {
                let frame = frames::ended(None, &session.id, log_file);
                self.link.push(frame, &mut self.out);
            }
        }
        self.out.event(HostEvent::SessionEnded {
            session_id: session.id,
            log_file: log_file.to_owned(),
        });
        self.state_changed(sources::RESET);
        Ok(())
    }

    /// The study log could not be flushed: the session stays active (nothing is reset) and
    /// the agent that sent `session.end` gets `LOG_FLUSH_FAILED` with `message`.
    pub fn fail_flush(
        &mut self,
        ticket: EndTicket,
        message: &str,
        now: Instant,
    ) -> Result<(), HostCommandError> {
        self.clock.observe(now);
        let ending = self.study.take_ending(ticket)?;
        self.end_failed(&ending, message);
        Ok(())
    }

    // ---- helpers -------------------------------------------------------------------------

    /// Reports a state change and pushes `state.updated` (or remembers it until joined).
    fn state_changed(&mut self, source: &str) {
        self.out.event(HostEvent::StateChanged {
            source: source.to_owned(),
        });
        match self.link.joined_conn() {
            Some(conn) => {
                let frame = self.state_frame(source);
                self.out.send(conn, frame);
            }
            None => self.link.mark_dirty(source),
        }
    }

    fn state_frame(&mut self, source: &str) -> FrameBuf {
        let ui = frames::visible_ui(self.tools.ui_spec());
        frames::state(source, &ui, self.history.json())
    }

    /// Answers a request with an `error` and reports it.
    fn refuse(
        &mut self,
        msg_type: &'static str,
        reply_to: Option<String>,
        code: ErrorCode,
        message: impl Into<String>,
    ) {
        let message = message.into();
        let frame = frames::error(reply_to.as_deref(), &code, &message);
        self.link.reply(frame, &mut self.out);
        self.out.event(HostEvent::Refused {
            msg_type,
            reply_to: reply_to.map(RequestId::from),
            error: ErrorPayload { code, message },
        });
    }

    fn begin_end(
        &mut self,
        reply_to: Option<String>,
        reason: Option<String>,
        now: Instant,
    ) -> EndTicket {
        let conn = self.link.conn();
        let flush_timeout = self.config.flush_timeout;
        let (ticket, session_id) = self.study.begin_end(reply_to, conn, flush_timeout, now);
        if let Some(session_id) = session_id {
            self.out.event(HostEvent::SessionEnding {
                session_id,
                reason,
                ticket,
            });
        }
        ticket
    }

    /// Where a reply to the `session.end` of `ending` can go: its connection, if still the
    /// current one and joined, with its `replyTo`.
    fn reply_target<'e>(&self, ending: &'e Ending) -> Option<(ConnId, &'e str)> {
        let conn = self
            .link
            .joined_conn()
            .filter(|c| ending.conn == Some(*c))?;
        Some((conn, ending.reply_to.as_deref()?))
    }

    fn end_failed(&mut self, ending: &Ending, message: &str) {
        if let Some((conn, reply_to)) = self.reply_target(ending) {
            let frame = frames::error(Some(reply_to), &ErrorCode::LOG_FLUSH_FAILED, message);
            self.out.send(conn, frame);
        }
        let session_id = StudySessionId::new(self.session_id().unwrap_or_default());
        self.out.event(HostEvent::SessionEndFailed {
            session_id,
            message: message.to_owned(),
        });
    }

    fn violation(&mut self, error: DecodeError) {
        self.out.event(HostEvent::ProtocolViolation { error });
    }

    fn invalid_payload(
        msg_type: &'static str,
        id: Option<String>,
        e: &serde_json::Error,
    ) -> DecodeError {
        DecodeError::InvalidPayload {
            msg_type,
            id,
            reason: e.to_string(),
        }
    }

    // ---- relay messages ------------------------------------------------------------------

    fn on_joined(&mut self, route: &Route<'_>) {
        if !self.link.answers_join(route.reply_to.as_deref()) {
            return;
        }
        self.link.joined();
        self.out.event(HostEvent::Joined {
            relay_session: SessionId::new(self.config.relay_session.as_str()),
        });
        if let Some((conn, Some(source))) = self.link.flush(&mut self.out) {
            let frame = self.state_frame(&source);
            self.out.send(conn, frame);
        }
    }

    fn on_relay_error(&mut self, route: &Route<'_>, id: Option<String>) {
        let e: ErrorPayload = match serde_json::from_str(route.payload.get()) {
            Ok(e) => e,
            Err(e) => return self.violation(Self::invalid_payload(types::ERROR, id, &e)),
        };
        let reply_to = route.reply_to.as_deref().map(str::to_owned);
        if self.link.answers_join(reply_to.as_deref()) {
            if let Some(conn) = self.link.conn() {
                self.out.close(conn, CloseCode::NORMAL, "join-refused");
            }
            self.link.drop_conn();
            self.out.event(HostEvent::JoinRefused {
                code: e.code,
                message: e.message,
            });
        } else if e.code == ErrorCode::SESSION_NOT_ACTIVE && e.message == texts::HOST_REPLACED {
            self.out.event(HostEvent::Replaced);
        } else {
            self.out.event(HostEvent::RelayError {
                code: e.code,
                message: e.message,
                reply_to: reply_to.map(RequestId::from),
            });
        }
    }

    // ---- agent requests ------------------------------------------------------------------

    fn on_session_start(&mut self, id: Option<String>, route: &Route<'_>, now: Instant) {
        const T: &str = types::SESSION_START;
        let start: SessionStart = match serde_json::from_str(route.payload.get()) {
            Ok(s) => s,
            Err(e) => {
                let text = format!("Invalid session.start payload: {e}");
                return self.refuse(T, id, ErrorCode::INVALID_MESSAGE, text);
            }
        };
        match self
            .study
            .start(&start.study_id, &start.participant_id, now)
        {
            Start::Again(session_id) => {
                let frame = frames::started(id.as_deref(), &session_id);
                self.link.reply(frame, &mut self.out);
            }
            Start::Refused(active) => {
                let text = format!("A session is already active: {active}.");
                self.refuse(T, id, ErrorCode::INVALID_MESSAGE, text);
            }
            Start::Started(session_id) => {
                let frame = frames::started(id.as_deref(), &session_id);
                self.link.reply(frame, &mut self.out);
                self.out.event(HostEvent::SessionStarted {
                    session_id,
                    study_id: start.study_id,
                    participant_id: start.participant_id,
                });
            }
        }
    }

    /// A read: answered in and outside a study session (no session gate, as the real host;
    /// the reference agent polls it from the moment it joins). Outside a session `sessionId`
    /// is the relay session's.
    fn on_snapshot_get(&mut self, id: Option<String>) {
        let ui = frames::visible_ui(self.tools.ui_spec());
        let session_id = self
            .study
            .id()
            .unwrap_or(self.config.relay_session.as_str());
        let frame = frames::snapshot(
            id.as_deref(),
            session_id,
            &ui,
            self.history.json(),
            self.tools.tool_schema(),
        );
        self.link.reply(frame, &mut self.out);
    }

    fn on_tool_call(&mut self, id: Option<String>, route: &Route<'_>) {
        const T: &str = types::TOOL_CALL;
        if let Some(text) = self.study.gate() {
            return self.refuse(T, id, ErrorCode::SESSION_NOT_ACTIVE, text);
        }
        let Checked {
            name,
            reason,
            params,
        } = match check_call(route.payload, &self.tools) {
            Ok(call) => call,
            Err((code, text)) => return self.refuse(T, id, code, text),
        };
        let before = self.history.revision();
        let result = {
            let mut ctx = ToolContext::new(&name, &reason, &mut self.history);
            self.tools.call(&name, &params, &mut ctx)
        };
        let chat_changed = self.history.revision() != before;
        match result {
            Ok(outcome) => {
                let ui = frames::visible_ui(self.tools.ui_spec());
                let frame = frames::tool_result(id.as_deref(), &name, &ui, self.history.json());
                self.link.reply(frame, &mut self.out);
                self.out.event(HostEvent::ToolApplied {
                    tool_name: name,
                    reason,
                });
                if outcome == ToolOutcome::Applied || chat_changed {
                    self.state_changed(sources::TOOL);
                }
            }
            Err(e) => {
                self.refuse(T, id, e.code(), e.to_string());
                if chat_changed {
                    self.state_changed(sources::TOOL);
                }
            }
        }
    }

    fn on_agent_message(&mut self, id: Option<String>, route: &Route<'_>) {
        const T: &str = types::AGENT_MESSAGE;
        if let Some(text) = self.study.gate() {
            return self.refuse(T, id, ErrorCode::SESSION_NOT_ACTIVE, text);
        }
        let msg: AgentText = match serde_json::from_str(route.payload.get()) {
            Ok(m) => m,
            Err(e) => {
                let text = format!("Invalid agent.message payload: {e}");
                return self.refuse(T, id, ErrorCode::INVALID_MESSAGE, text);
            }
        };
        if self
            .history
            .push(ChatRole::Agent, msg.text.as_str())
            .is_err()
        {
            let text = host_texts::HISTORY_FULL;
            return self.refuse(T, id, ErrorCode::LIMIT_EXCEEDED, text);
        }
        self.out.event(HostEvent::AgentMessage { text: msg.text });
        self.state_changed(sources::AGENT);
    }

    fn on_session_end(&mut self, id: Option<String>, route: &Route<'_>, now: Instant) {
        const T: &str = types::SESSION_END;
        if let Some(text) = self.study.gate() {
            return self.refuse(T, id, ErrorCode::SESSION_NOT_ACTIVE, text);
        }
        let end: SessionEnd = match serde_json::from_str(route.payload.get()) {
            Ok(e) => e,
            Err(e) => {
                let text = format!("Invalid session.end payload: {e}");
                return self.refuse(T, id, ErrorCode::INVALID_MESSAGE, text);
            }
        };
        self.begin_end(id, end.reason, now);
    }
}

impl<T: Tools> Machine for Host<T> {
    type Event = HostEvent;

    /// A connection to the relay opened (replacing any previous one): sends `relay.join`
    /// (role `host`, [`HostConfig::relay_session`]) and starts the join deadline.
    fn handle_connect(&mut self, conn: ConnId, _peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.link.conn() == Some(conn) {
            return;
        }
        if self.link.conn().is_some() {
            self.link.drop_conn();
            self.out.event(HostEvent::Disconnected);
        }
        let join_id = self.link.connect(conn, self.config.join_timeout, now);
        let frame = frames::join(join_id, &self.config.relay_session);
        self.out.send(conn, frame);
    }

    /// One message from the relay: its own (`relay.hello`, `relay.joined`,
    /// `relay.presence`, `error`) or an agent's request, answered as the spec says. Never
    /// panics; frames on other connections are ignored, undecodable ones reported as
    /// [`HostEvent::ProtocolViolation`] without a reply.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        if self.link.conn() != Some(conn) {
            return;
        }
        let max = self.config.limits.max_message_bytes;
        let route = match Route::decode(frame, max, VersionRule::Required) {
            Ok(r) => r,
            Err(e) => return self.violation(e),
        };
        let id = route.id.as_deref().map(str::to_owned);
        match &*route.msg_type {
            types::RELAY_HELLO => {}
            types::RELAY_JOINED => self.on_joined(&route),
            types::RELAY_PRESENCE => {
                match serde_json::from_str::<RelayPresence>(route.payload.get()) {
                    Ok(p) => self.out.event(HostEvent::Presence(p)),
                    Err(e) => self.violation(Self::invalid_payload(types::RELAY_PRESENCE, id, &e)),
                }
            }
            types::ERROR => self.on_relay_error(&route, id),
            types::SESSION_START => self.on_session_start(id, &route, now),
            types::SNAPSHOT_GET => self.on_snapshot_get(id),
            types::TOOL_CALL => self.on_tool_call(id, &route),
            types::AGENT_MESSAGE => self.on_agent_message(id, &route),
            types::SESSION_END => self.on_session_end(id, &route, now),
            other => self.violation(DecodeError::UnknownType {
                msg_type: truncate(other, MAX_ECHOED).to_owned(),
                id,
            }),
        }
    }

    /// The connection ended: the host is no longer joined; the study session, the chat and
    /// a session end awaiting its flush all stay. Pushes wait for the next join.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        if self.link.conn() == Some(conn) {
            self.link.drop_conn();
            self.out.event(HostEvent::Disconnected);
        }
    }

    /// Closes a connection whose join went unanswered (1000 `join-timeout`) and fails a
    /// session end whose flush was not confirmed in time. Idempotent; an early call is a
    /// no-op.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some((at, timer)) = self.next_timer() {
            if at > now {
                break;
            }
            match timer {
                HostTimer::JoinReply => {
                    self.link.join_expired(now);
                    if let Some(conn) = self.link.conn().filter(|_| !self.link.is_joined()) {
                        self.out.close(conn, CloseCode::NORMAL, "join-timeout");
                        self.link.drop_conn();
                        self.out.event(HostEvent::JoinTimedOut);
                    }
                }
                HostTimer::LogFlush => {
                    if let Some(ending) = self.study.expire_flush(now) {
                        self.end_failed(&ending, host_texts::FLUSH_TIMEOUT);
                    }
                }
            }
        }
    }

    /// The join deadline or the flush deadline, whichever is first.
    /// Re-anchors the wall clock that dates session ids ([`set_wall_clock`](Self::set_wall_clock)).
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.set_wall_clock(now, unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(t, _)| t)
    }

    /// The next queued output: frames, closes and [`HostEvent`]s, in the order they were made.
    fn poll_output(&mut self) -> Option<Output<HostEvent>> {
        self.out.pop()
    }
}
