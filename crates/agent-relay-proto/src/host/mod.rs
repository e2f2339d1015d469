//! The `Host`: the UI side of the protocol (client role), answering agents through the relay.

mod history;
mod params;

use std::collections::VecDeque;
use std::time::Instant;

use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, Machine, Monotonic, Outbox, Output, PeerInfo, TimerSet,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use history::{ChatEntry, ChatRole, History, HistoryFull};
pub use params::{validate_params, ParamError};

use crate::config::HostConfig;
use crate::envelope::{raw_str, truncate, write_envelope, Route, VersionRule};
use crate::error::{host_texts, texts, DecodeError, ErrorCode, HostCommandError};
use crate::event::HostEvent;
use crate::log::iso8601_ms;
use crate::message::{
    types, AgentText, ErrorPayload, RawJson, RelayPresence, Role, SessionEnd, SessionStart,
    ToolSchema,
};
use crate::tool::{ToolContext, ToolOutcome, Tools};

/// Longest piece of a peer's string (tool name, type) echoed in an error or an event.
const MAX_ECHOED: usize = 128;

/// The `source` values of the `state.updated` pushes the host makes itself.
pub mod sources {
    /// A tool applied by an agent's `tool.call`.
    pub const TOOL: &str = "tool";
    /// An `agent.message` added to the chat.
    pub const AGENT: &str = "agent";
    /// The participant's chat message ([`Host::user_message`](crate::Host::user_message)).
    /// The spec's example source; use it for the participant's own UI actions too.
    pub const USER: &str = "user";
    /// The state reset at the end of a session.
    pub const RESET: &str = "reset";
}

/// The spec's log file layout, `logs/study/<sessionId>.jsonl`, for a log writer that wants
/// it. The host never makes up a path: `session.ended` reports the one given to
/// [`Host::confirm_flush`].
pub fn study_log_path(session_id: &str) -> String {
    format!("logs/study/{session_id}.jsonl")
}

/// Names a session end awaiting its log flush ([`HostEvent::SessionEnding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndTicket(u64);

/// What the next deadline of [`Host::next_timer`] is for (for tracing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum HostTimer {
    /// The relay's answer to `relay.join` is due.
    JoinReply,
    /// The application's confirmation of a log flush is due.
    LogFlush,
}

#[derive(Debug)]
struct Ending {
    ticket: EndTicket,
    /// The `session.end` request's id (none when the application ended the session).
    reply_to: Option<String>,
    /// The connection the request came on: a reply only makes sense there.
    conn: Option<ConnId>,
}

#[derive(Debug)]
struct Session {
    id: String,
    study_id: String,
    participant_id: String,
    ending: Option<Ending>,
}

// ---- payloads, borrowed (what the host encodes) -------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JoinRef<'a> {
    role: Role,
    session_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StartedRef<'a> {
    session_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotRef<'a> {
    session_id: &'a str,
    ui_spec: &'a RawJson,
    message_history: &'a RawJson,
    tool_schema: &'a [ToolSchema],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResultRef<'a> {
    ok: bool,
    tool_name: &'a str,
    ui_spec: &'a RawJson,
    message_history: &'a RawJson,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateRef<'a> {
    source: &'a str,
    ui_spec: &'a RawJson,
    message_history: &'a RawJson,
}

#[derive(Serialize)]
struct UserRef<'a> {
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EndedRef<'a> {
    session_id: &'a str,
    log_file: &'a str,
    state_reset: bool,
}

#[derive(Serialize)]
struct ErrorRef<'a> {
    code: &'a ErrorCode,
    message: &'a str,
}

/// `tool.call` payload as the host reads it: every field raw, checked by hand, so that each
/// problem gets its own code and text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallFields<'a> {
    #[serde(borrow, default)]
    tool_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reason: Option<&'a RawValue>,
}

fn encode<P: Serialize + ?Sized>(msg_type: &str, reply_to: Option<&str>, payload: &P) -> FrameBuf {
    let mut buf = Vec::with_capacity(128);
    write_envelope(&mut buf, msg_type, reply_to, payload);
    FrameBuf::json_from_vec(buf)
}

/// `{"v":"mvp-0.2","type":T,"id":I,"payload":P}`: a request (the host sends one, `relay.join`).
fn encode_request<P: Serialize + ?Sized>(msg_type: &str, id: &str, payload: &P) -> FrameBuf {
    let mut buf = Vec::with_capacity(96);
    buf.extend_from_slice(b"{\"v\":\"mvp-0.2\",\"type\":");
    // Strings and the host's payload types always serialize.
    let _ = serde_json::to_writer(&mut buf, msg_type);
    buf.extend_from_slice(b",\"id\":");
    let _ = serde_json::to_writer(&mut buf, id);
    buf.extend_from_slice(b",\"payload\":");
    let _ = serde_json::to_writer(&mut buf, payload);
    buf.push(b'}');
    FrameBuf::json_from_vec(buf)
}

fn null_json() -> RawJson {
    RawJson::from_text("null").unwrap_or_else(RawJson::empty_object)
}

/// `uiSpec` without a top-level `backendData` key (spec §7); parsed only when the text
/// mentions it.
fn without_backend_data(spec: RawJson) -> RawJson {
    if !spec.get().contains("backendData") {
        return spec;
    }
    match serde_json::from_str::<Value>(spec.get()) {
        Ok(Value::Object(mut m)) => {
            if m.remove("backendData").is_none() {
                return spec;
            }
            RawJson::from_value(&m).unwrap_or_else(|_| RawJson::empty_object())
        }
        _ => spec,
    }
}

/// `YYYYMMDD` (UTC) of a Unix time in milliseconds.
fn yyyymmdd(unix_ms: u64) -> String {
    iso8601_ms(unix_ms)
        .chars()
        .take(10)
        .filter(char::is_ascii_digit)
        .collect()
}

/// Splits `s-YYYYMMDD-NNN` into its date and number.
fn parse_session_id(id: &str) -> Option<(String, u32)> {
    let rest = id.strip_prefix("s-")?;
    let (date, n) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if date.len() != 8 || !digits(date) || !digits(n) || n.len() > 9 {
        return None;
    }
    Some((date.to_owned(), n.parse().ok()?))
}

/// The UI host (client role): one connection to the relay at a time, surviving reconnects,
/// answering the agents of its relay session on behalf of the application's [`Tools`].
///
/// - On every connect it sends `relay.join` (role `host`,
///   [`HostConfig::relay_session`]); pushes made while not joined wait until the relay
///   answers. A study session in progress survives reconnects.
/// - `session.start` → `session.started` with a new id `s-YYYYMMDD-NNN` (UTC date of the
///   wall clock, `NNN` counting the day's sessions from 001). Outside a session every other
///   request gets `SESSION_NOT_ACTIVE`.
/// - `snapshot.get` → `snapshot.state` with `uiSpec`, `messageHistory` and `toolSchema`
///   only.
/// - `tool.call` → checked (`reason`, `NO_ACTIVE_SPEC`, `UNKNOWN_TOOL`, `INVALID_PARAMS`),
///   run through [`Tools::call`], answered `tool.result`, then pushed as `state.updated`.
/// - `agent.message` → appended to the chat [`History`], pushed as `state.updated`.
/// - [`Host::user_message`] → `user.message` to the agents (and the chat).
/// - `session.end` → [`HostEvent::SessionEnding`]; once the application has flushed the
///   study log it calls [`Host::confirm_flush`]: state reset, `session.ended` with the log
///   file and `stateReset: true`.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`];
/// - output: [`Machine::poll_output`] (frames, closes, [`HostEvent`]s),
///   [`Machine::poll_timeout`];
/// - commands: [`Host::user_message`], [`Host::publish_state`], [`Host::end_session`],
///   [`Host::confirm_flush`], [`Host::fail_flush`], [`Host::resume_numbering`],
///   [`Host::set_wall_clock`], [`Host::tools_mut`];
/// - getters: [`Host::config`], [`Host::tools`], [`Host::history`], [`Host::session_id`],
///   [`Host::is_connected`], [`Host::is_joined`], [`Host::is_ending`],
///   [`Host::queued_pushes`], [`Host::next_timer`].
pub struct Host<T> {
    config: HostConfig,
    tools: T,
    clock: Monotonic,
    wall: (Instant, u64),
    conn: Option<ConnId>,
    joined: bool,
    joins_sent: u64,
    join_id: String,
    session: Option<Session>,
    /// The date and number of the last session id given out.
    numbering: Option<(String, u32)>,
    history: History,
    /// Pushes waiting for the host to be joined.
    queue: VecDeque<FrameBuf>,
    /// The source of a state change made while not joined, pushed once joined.
    dirty: Option<String>,
    timers: TimerSet<HostTimer>,
    next_ticket: u64,
    out: Outbox<HostEvent>,
}

impl<T> std::fmt::Debug for Host<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("conn", &self.conn)
            .field("joined", &self.joined)
            .field("session", &self.session.as_ref().map(|s| &s.id))
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
        let history = History::new(config.limits.max_history_entries);
        Self {
            config,
            tools,
            clock,
            wall: (now, unix_ms),
            conn: None,
            joined: false,
            joins_sent: 0,
            join_id: String::new(),
            session: None,
            numbering: None,
            history,
            queue: VecDeque::new(),
            dirty: None,
            timers: TimerSet::new(),
            next_ticket: 0,
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
        self.session.as_ref().map(|s| s.id.as_str())
    }

    /// Whether the driver has reported a connection (joined or not).
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Whether the relay has answered `relay.join` on the current connection.
    pub fn is_joined(&self) -> bool {
        self.joined
    }

    /// Whether the session's end awaits the log flush.
    pub fn is_ending(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.ending.is_some())
    }

    /// Pushes waiting for the host to be joined.
    pub fn queued_pushes(&self) -> usize {
        self.queue.len()
    }

    /// The next deadline and what it is for (the same time as [`Machine::poll_timeout`]).
    pub fn next_timer(&self) -> Option<(Instant, HostTimer)> {
        self.timers.next().map(|(t, k)| (t, *k))
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
        self.wall = (now, unix_ms);
    }

    /// Continues the day's numbering after `last_session_id` (e.g. the newest log file
    /// found at startup), so a restarted host does not give out `s-…-001` twice. Ids of an
    /// older day than the one already known change nothing.
    pub fn resume_numbering(&mut self, last_session_id: &str) -> Result<(), HostCommandError> {
        let (date, n) =
            parse_session_id(last_session_id).ok_or(HostCommandError::InvalidSessionId)?;
        match &mut self.numbering {
            Some((d, last)) if *d == date => *last = (*last).max(n),
            Some((d, _)) if *d > date => {}
            slot => *slot = Some((date, n)),
        }
        Ok(())
    }

    /// The participant typed `text` in the chat: it is added to the history and sent to
    /// the agents as `user.message` (with the current [`Tools::stage`]), then as
    /// `state.updated` (source `user`). While not joined both wait until the host is.
    pub fn user_message(&mut self, text: &str, now: Instant) -> Result<(), HostCommandError> {
        self.clock.observe(now);
        if !self.joined && self.queue.len() >= self.config.limits.max_queued_pushes {
            return Err(HostCommandError::QueueFull);
        }
        self.history
            .push(ChatRole::User, text)
            .map_err(|_| HostCommandError::HistoryFull)?;
        let payload = UserRef {
            text,
            stage: self.tools.stage(),
        };
        let frame = encode(types::USER_MESSAGE, None, &payload);
        self.push(frame);
        self.state_changed(sources::USER);
        Ok(())
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
        match &self.session {
            None => Err(HostCommandError::NoSession),
            Some(s) if s.ending.is_some() => Err(HostCommandError::Ending),
            Some(_) => Ok(self.begin_end(None, reason.map(str::to_owned), now)),
        }
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
        let ending = self.take_ending(ticket)?;
        let Some(session) = self.session.take() else {
            return Err(HostCommandError::UnknownTicket);
        };
        self.tools.reset();
        self.history.clear();
        let payload = EndedRef {
            session_id: &session.id,
            log_file,
            state_reset: true,
        };
        match self.reply_target(&ending) {
            Some((conn, reply_to)) => {
                let frame = encode(types::SESSION_ENDED, Some(reply_to), &payload);
                self.out.send(conn, frame);
            }
            None => {
                let frame = encode(types::SESSION_ENDED, None, &payload);
                self.push(frame);
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
        let ending = self.take_ending(ticket)?;
        self.end_failed(&ending, message);
        Ok(())
    }

    // ---- helpers -------------------------------------------------------------------------

    fn unix_ms(&self, now: Instant) -> u64 {
        let (at, ms) = self.wall;
        let elapsed = now.saturating_duration_since(at).as_millis();
        ms.saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    fn next_session_id(&mut self, now: Instant) -> String {
        let date = yyyymmdd(self.unix_ms(now));
        let n = match &self.numbering {
            Some((d, last)) if *d == date => last.saturating_add(1),
            _ => 1,
        };
        let id = format!("s-{date}-{n:03}");
        self.numbering = Some((date, n));
        id
    }

    /// Forgets the current connection (the session stays).
    fn drop_conn(&mut self) {
        self.conn = None;
        self.joined = false;
        self.timers.cancel(&HostTimer::JoinReply);
    }

    /// Sends a reply on the current connection (requests only arrive on it).
    fn reply(&mut self, frame: FrameBuf) {
        if let Some(conn) = self.conn {
            self.out.send(conn, frame);
        }
    }

    /// Sends a push now if joined, else queues it; `false` if the queue was full.
    fn push(&mut self, frame: FrameBuf) -> bool {
        match self.conn {
            Some(conn) if self.joined => {
                self.out.send(conn, frame);
                true
            }
            _ if self.queue.len() < self.config.limits.max_queued_pushes => {
                self.queue.push_back(frame);
                true
            }
            _ => false,
        }
    }

    /// The visible state, as agents may see it.
    fn visible_ui(&self) -> RawJson {
        self.tools
            .ui_spec()
            .map_or_else(null_json, without_backend_data)
    }

    /// Reports a state change and pushes `state.updated` (or remembers it until joined).
    fn state_changed(&mut self, source: &str) {
        self.out.event(HostEvent::StateChanged {
            source: source.to_owned(),
        });
        match self.conn {
            Some(conn) if self.joined => {
                let frame = self.state_frame(source);
                self.out.send(conn, frame);
            }
            _ => self.dirty = Some(source.to_owned()),
        }
    }

    fn state_frame(&mut self, source: &str) -> FrameBuf {
        let ui = self.visible_ui();
        let payload = StateRef {
            source,
            ui_spec: &ui,
            message_history: self.history.json(),
        };
        encode(types::STATE_UPDATED, None, &payload)
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
        let payload = ErrorRef {
            code: &code,
            message: &message,
        };
        self.reply(encode(types::ERROR, reply_to.as_deref(), &payload));
        self.out.event(HostEvent::Refused {
            msg_type,
            reply_to,
            error: ErrorPayload { code, message },
        });
    }

    /// Why a request cannot be served in the current session state, if it cannot.
    fn session_gate(&self, allow_ending: bool) -> Option<&'static str> {
        match &self.session {
            None => Some(host_texts::NO_SESSION),
            Some(s) if s.ending.is_some() && !allow_ending => Some(host_texts::SESSION_ENDING),
            Some(_) => None,
        }
    }

    fn begin_end(
        &mut self,
        reply_to: Option<String>,
        reason: Option<String>,
        now: Instant,
    ) -> EndTicket {
        let ticket = EndTicket(self.next_ticket);
        self.next_ticket += 1;
        let conn = self.conn;
        let Some(s) = self.session.as_mut() else {
            return ticket;
        };
        s.ending = Some(Ending {
            ticket,
            reply_to,
            conn,
        });
        let session_id = s.id.clone();
        if let Some(t) = self.config.flush_timeout {
            self.timers.set(HostTimer::LogFlush, now + t);
        }
        self.out.event(HostEvent::SessionEnding {
            session_id,
            reason,
            ticket,
        });
        ticket
    }

    fn take_ending(&mut self, ticket: EndTicket) -> Result<Ending, HostCommandError> {
        let s = self
            .session
            .as_mut()
            .ok_or(HostCommandError::UnknownTicket)?;
        match &s.ending {
            Some(e) if e.ticket == ticket => {
                self.timers.cancel(&HostTimer::LogFlush);
                s.ending.take().ok_or(HostCommandError::UnknownTicket)
            }
            _ => Err(HostCommandError::UnknownTicket),
        }
    }

    /// Where a reply to the `session.end` of `ending` can go: its connection, if still the
    /// current one and joined, with its `replyTo`.
    fn reply_target<'e>(&self, ending: &'e Ending) -> Option<(ConnId, &'e str)> {
        let conn = self
            .conn
            .filter(|c| self.joined && ending.conn == Some(*c))?;
        Some((conn, ending.reply_to.as_deref()?))
    }

    fn end_failed(&mut self, ending: &Ending, message: &str) {
        if let Some((conn, reply_to)) = self.reply_target(ending) {
            let payload = ErrorRef {
                code: &ErrorCode::LOG_FLUSH_FAILED,
                message,
            };
            self.out
                .send(conn, encode(types::ERROR, Some(reply_to), &payload));
        }
        let session_id = self.session_id().unwrap_or_default().to_owned();
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
        if self.joined || route.reply_to.as_deref() != Some(self.join_id.as_str()) {
            return;
        }
        self.joined = true;
        self.timers.cancel(&HostTimer::JoinReply);
        self.out.event(HostEvent::Joined {
            relay_session: self.config.relay_session.clone(),
        });
        let Some(conn) = self.conn else { return };
        while let Some(frame) = self.queue.pop_front() {
            self.out.send(conn, frame);
        }
        if let Some(source) = self.dirty.take() {
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
        if !self.joined && reply_to.as_deref() == Some(self.join_id.as_str()) {
            if let Some(conn) = self.conn {
                self.out.close(conn, CloseCode::NORMAL, "join-refused");
            }
            self.drop_conn();
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
                reply_to,
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
        if let Some(s) = &self.session {
            if s.ending.is_none()
                && s.study_id == start.study_id
                && s.participant_id == start.participant_id
            {
                // A retry (its first answer was lost with a connection): the same session.
                let frame = encode(
                    types::SESSION_STARTED,
                    id.as_deref(),
                    &StartedRef { session_id: &s.id },
                );
                return self.reply(frame);
            }
            let text = format!("A session is already active: {}.", s.id);
            return self.refuse(T, id, ErrorCode::INVALID_MESSAGE, text);
        }
        let session_id = self.next_session_id(now);
        let frame = encode(
            types::SESSION_STARTED,
            id.as_deref(),
            &StartedRef {
                session_id: &session_id,
            },
        );
        self.session = Some(Session {
            id: session_id.clone(),
            study_id: start.study_id.clone(),
            participant_id: start.participant_id.clone(),
            ending: None,
        });
        self.reply(frame);
        self.out.event(HostEvent::SessionStarted {
            session_id,
            study_id: start.study_id,
            participant_id: start.participant_id,
        });
    }

    fn on_snapshot_get(&mut self, id: Option<String>) {
        if let Some(text) = self.session_gate(true) {
            return self.refuse(types::SNAPSHOT_GET, id, ErrorCode::SESSION_NOT_ACTIVE, text);
        }
        let ui = self.visible_ui();
        let session_id = self.session.as_ref().map_or("", |s| s.id.as_str());
        let payload = SnapshotRef {
            session_id,
            ui_spec: &ui,
            message_history: self.history.json(),
            tool_schema: self.tools.tool_schema(),
        };
        let frame = encode(types::SNAPSHOT_STATE, id.as_deref(), &payload);
        self.reply(frame);
    }

    fn on_tool_call(&mut self, id: Option<String>, route: &Route<'_>) {
        const T: &str = types::TOOL_CALL;
        if let Some(text) = self.session_gate(false) {
            return self.refuse(T, id, ErrorCode::SESSION_NOT_ACTIVE, text);
        }
        let fields: CallFields<'_> = match serde_json::from_str(route.payload.get()) {
            Ok(f) => f,
            Err(e) => {
                let text = format!("Invalid tool.call payload: {e}");
                return self.refuse(T, id, ErrorCode::INVALID_MESSAGE, text);
            }
        };
        let Some(name) = fields.tool_name.and_then(raw_str) else {
            let text = host_texts::TOOL_NAME_REQUIRED;
            return self.refuse(T, id, ErrorCode::INVALID_MESSAGE, text);
        };
        let Some(reason) = fields
            .reason
            .and_then(raw_str)
            .filter(|r| !r.trim().is_empty())
        else {
            let text = host_texts::REASON_REQUIRED;
            return self.refuse(T, id, ErrorCode::INVALID_PARAMS, text);
        };
        if !self.tools.has_active_spec() {
            let text = host_texts::NO_ACTIVE_SPEC;
            return self.refuse(T, id, ErrorCode::NO_ACTIVE_SPEC, text);
        }
        let shown = truncate(&name, MAX_ECHOED).to_owned();
        let Some(tool) = self.tools.tool_schema().iter().find(|t| t.name == name) else {
            let text = format!("Unknown tool: {shown}");
            return self.refuse(T, id, ErrorCode::UNKNOWN_TOOL, text);
        };
        // The schema is the application's: one that does not parse constrains nothing.
        let schema: Value = tool.parameters.parse().unwrap_or(Value::Bool(true));
        let params: Value = match fields.params {
            None => Value::Object(Map::new()),
            Some(raw) => match serde_json::from_str(raw.get()) {
                Ok(v) => v,
                Err(e) => {
                    let text = format!("{shown} params could not be read: {e}");
                    return self.refuse(T, id, ErrorCode::INVALID_PARAMS, text);
                }
            },
        };
        let checked = if params.is_object() {
            validate_params(&schema, &params)
        } else {
            Err(ParamError::WrongType {
                param: "params".to_owned(),
                expected: "an object".to_owned(),
            })
        };
        if let Err(e) = checked {
            return self.refuse(T, id, ErrorCode::INVALID_PARAMS, format!("{shown} {e}"));
        }

        let before = self.history.revision();
        let result = {
            let mut ctx = ToolContext::new(&name, &reason, &mut self.history);
            self.tools.call(&name, &params, &mut ctx)
        };
        let chat_changed = self.history.revision() != before;
        match result {
            Ok(outcome) => {
                let ui = self.visible_ui();
                let payload = ToolResultRef {
                    ok: true,
                    tool_name: &name,
                    ui_spec: &ui,
                    message_history: self.history.json(),
                };
                let frame = encode(types::TOOL_RESULT, id.as_deref(), &payload);
                self.reply(frame);
                self.out.event(HostEvent::ToolApplied {
                    tool_name: name.into_owned(),
                    reason: reason.into_owned(),
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
        if let Some(text) = self.session_gate(false) {
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
        if let Some(text) = self.session_gate(false) {
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
        if self.conn == Some(conn) {
            return;
        }
        if self.conn.is_some() {
            self.drop_conn();
            self.out.event(HostEvent::Disconnected);
        }
        self.conn = Some(conn);
        self.joins_sent += 1;
        self.join_id = format!("host-join-{}", self.joins_sent);
        let payload = JoinRef {
            role: Role::Host,
            session_id: &self.config.relay_session,
        };
        let frame = encode_request(types::RELAY_JOIN, &self.join_id, &payload);
        self.out.send(conn, frame);
        if let Some(t) = self.config.join_timeout {
            self.timers.set(HostTimer::JoinReply, now + t);
        }
    }

    /// One message from the relay: its own (`relay.hello`, `relay.joined`,
    /// `relay.presence`, `error`) or an agent's request, answered as the spec says. Never
    /// panics; frames on other connections are ignored, undecodable ones reported as
    /// [`HostEvent::ProtocolViolation`] without a reply.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn != Some(conn) {
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
        if self.conn == Some(conn) {
            self.drop_conn();
            self.out.event(HostEvent::Disconnected);
        }
    }

    /// Closes a connection whose join went unanswered (1000 `join-timeout`) and fails a
    /// session end whose flush was not confirmed in time. Idempotent; an early call is a
    /// no-op.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(timer) = self.timers.pop_expired(now) {
            match timer {
                HostTimer::JoinReply => {
                    if let Some(conn) = self.conn.filter(|_| !self.joined) {
                        self.out.close(conn, CloseCode::NORMAL, "join-timeout");
                        self.drop_conn();
                        self.out.event(HostEvent::JoinTimedOut);
                    }
                }
                HostTimer::LogFlush => {
                    let ending = self.session.as_mut().and_then(|s| s.ending.take());
                    if let Some(ending) = ending {
                        self.end_failed(&ending, host_texts::FLUSH_TIMEOUT);
                    }
                }
            }
        }
    }

    /// The join deadline or the flush deadline, whichever is first.
    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// The next queued output: frames, closes and [`HostEvent`]s, in the order they were made.
    fn poll_output(&mut self) -> Option<Output<HostEvent>> {
        self.out.pop()
    }
}
