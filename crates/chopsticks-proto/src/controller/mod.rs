//! The `Controller`: the server role, owning every agent connection.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, Id128, Id128Map, IdGen, Machine, Monotonic, Outbox, Output,
    PeerInfo, TimerSet, Utf8Bytes,
};
use bytes::BytesMut;
use serde::Serialize;
use subtle::ConstantTimeEq;

use crate::config::ControllerConfig;
use crate::error::{CommandError, DecodeError, ProtocolError};
use crate::event::{BindSource, ControllerEvent, DropReason, FreeReason};
use crate::message::{
    Add, AgentMessage, ControllerMessage, ErrorMessage, Event, Hello, Released, ReqRef, Resp,
    SessionKind,
};
use crate::ops::{session_kind_of, starts_session};

/// Error text for a `hello` without a version (INTEROP.md).
pub const ERR_VERSION_REQUIRED: &str = "Protocol version required. Please upgrade agent.";
/// Error text for a wrong runner secret (INTEROP.md).
pub const ERR_UNAUTHORIZED: &str = "Unauthorized runner secret.";
/// Error-reply string for a request whose agent went away.
pub const AGENT_OFFLINE: &str = "agent-offline";
/// Error string for a request that timed out.
pub const AGENT_TIMEOUT: &str = "agent-timeout";

/// One live agent in the controller's registry.
///
/// Its `lastSeen` is [`Controller::last_seen`] and its pending request count
/// [`Controller::pending_for`]: both live with the connection, where every message updates
/// them without a registry lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveAgent {
    /// Agent id.
    pub agent_id: String,
    /// The connection it is live on.
    pub conn: ConnId,
    /// Discord bot user id.
    pub bot_user_id: Option<String>,
    /// Discord bot tag.
    pub tag: Option<String>,
    /// Whether its audio node is ready.
    pub ready: bool,
    /// Guilds it is in.
    pub guild_ids: BTreeSet<String>,
    /// Pool id.
    pub pool_id: String,
    /// Protocol version from its last `hello`.
    pub protocol_version: String,
    /// Runner id, if it sends one.
    pub runner_id: Option<String>,
}

/// The versions a controller accepts, as its version-mismatch error names them: `1.0.0`,
/// `1.0.0 or 2.0.0`, `0.9.0, 1.0.0 or 2.0.0` (in the set's order); `no version` when the
/// set is empty.
fn expected_versions(versions: &BTreeSet<String>) -> String {
    let mut out = String::new();
    let n = versions.len();
    for (i, v) in versions.iter().enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == n { " or " } else { ", " });
        }
        out.push_str(v);
    }
    if out.is_empty() {
        out.push_str("no version");
    }
    out
}

/// The end of a rate window that starts at `start` (one second later).
fn rate_window_end(start: Instant) -> Instant {
    // `Instant + Duration` panics on overflow; a window that cannot end is never reached.
    start.checked_add(Duration::from_secs(1)).unwrap_or(start)
}

/// Where a `req`'s id starts in its encoding: `ReqRef` writes its tag, then its id.
const REQ_ID_AT: usize = r#"{"type":"req","id":""#.len();
/// Stands in for the id while a `req` is encoded (36 bytes, like every hyphenated id).
const ID_PLACEHOLDER: &str = "00000000-0000-0000-0000-000000000000";

/// Size of the blocks `req` frames are encoded into (a compact `req` is about 200 bytes).
const REQ_BUF_BLOCK: usize = 4096;

/// The key of a voice session: kind, guild and voice channel (`guildId:voiceChannelId`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionKey {
    /// Music or assistant.
    pub kind: SessionKind,
    /// Guild.
    pub guild_id: String,
    /// Voice channel.
    pub voice_channel_id: String,
}

impl SessionKey {
    /// A key.
    pub fn new(kind: SessionKind, guild_id: impl Into<String>, vc: impl Into<String>) -> Self {
        Self {
            kind,
            guild_id: guild_id.into(),
            voice_channel_id: vc.into(),
        }
    }
}

/// A voice session bound to an agent: at selection (the agent chosen for a request that
/// starts the session), or by the agent's `add` event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Session {
    /// The bound agent.
    pub agent_id: String,
    /// Text channel from the `add` event.
    pub text_channel_id: Option<String>,
    /// Owner from the `add` event.
    pub owner_user_id: Option<String>,
    /// Whether the agent confirmed the session with an `add` (real agents never send one).
    pub confirmed: bool,
    /// The unanswered request that starts the session on the agent it was bound to by
    /// selection: if it fails before an `add` confirms the session, the session is freed.
    starting: Option<Id128>,
}

/// What a deadline is for (see [`Controller::next_timer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimerKind {
    /// A connection's hello-required deadline.
    Hello(ConnId),
    /// A registered connection's stale check.
    Stale(ConnId),
    /// A request's timeout.
    Request(Id128),
}

#[derive(Debug)]
struct ConnState {
    ip: Option<IpAddr>,
    /// The agent registered on this connection, once a valid hello arrived.
    agent_id: Option<String>,
    /// We queued a close: ignore further input until the driver reports the disconnect.
    closing: bool,
    /// End of the current one-second rate window (kept as its end, so that the per-message
    /// check is one comparison).
    window_end: Instant,
    window_count: u32,
    /// Requests sent on this connection and not answered yet.
    pending: usize,
    /// Last time a message (or a reported pong) arrived on this connection.
    last_seen: Instant,
}

#[derive(Debug)]
struct Pending {
    agent_id: String,
    conn: ConnId,
    op: String,
    /// The session this request starts (sent by `request_for_session` with a start op);
    /// boxed, so that the common request without one stays small in the pending map.
    starts: Option<Box<SessionKey>>,
}

/// The Chopsticks controller (server role): owns every agent connection.
///
/// It negotiates the protocol version, checks the runner secret, keeps the live-agent
/// registry, tracks voice sessions, selects agents for guilds, sends requests and matches
/// their responses, and enforces the limits of [`Limits`](crate::Limits). Like every
/// agentwire machine it does no IO: feed it through [`Machine`], drain
/// [`poll_output`](Machine::poll_output) after every call.
///
/// Method kinds: `handle_*` (input), `poll_*` (output), commands ([`request`](Self::request),
/// [`select_agent`](Self::select_agent), [`touch`](Self::touch)), getters
/// ([`agents`](Self::agents), [`sessions`](Self::sessions), ...).
pub struct Controller {
    cfg: ControllerConfig,
    ids: Box<dyn IdGen>,
    clock: Monotonic,
    out: Outbox<ControllerEvent>,
    scratch: Vec<u8>,
    /// Where `req` frames are built: each frame is split off and frozen without a copy, and
    /// once the driver has dropped every frame of a block its space is reused, so a request
    /// normally costs no allocation for its frame.
    req_buf: BytesMut,
    conns: BTreeMap<ConnId, ConnState>,
    per_ip: BTreeMap<IpAddr, usize>,
    agents: BTreeMap<String, LiveAgent>,
    /// Requests awaiting a `resp`, by id. Ids are ours (never chosen by a peer), so a
    /// cheap hasher is safe; nothing iterates this map (see `fail_pending_on`).
    pending: Id128Map<Pending>,
    sessions: BTreeMap<SessionKey, Session>,
    /// Per guild, the agent chosen last by rule 2 of the selection (round-robin).
    last_pick: BTreeMap<String, String>,
    /// Hello and stale deadlines, keyed per connection.
    timers: TimerSet<TimerKind>,
    /// Request deadlines in issue order. The timeout is one constant and `now` never goes
    /// backwards, so deadlines are non-decreasing and a FIFO replaces a sorted set. Entries
    /// of answered requests are skipped lazily (and trimmed from the front at once).
    request_deadlines: VecDeque<(Instant, Id128)>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("connections", &self.conns.len())
            .field("agents", &self.agents.len())
            .field("pending", &self.pending.len())
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller with `config`, taking request ids from `ids` (the transport passes
    /// `UuidV4Ids`; tests pass `SequentialIds`).
    pub fn new(config: ControllerConfig, ids: impl IdGen + 'static) -> Self {
        Self {
            cfg: config,
            ids: Box::new(ids),
            clock: Monotonic::new(),
            out: Outbox::new(),
            scratch: Vec::with_capacity(512),
            req_buf: BytesMut::with_capacity(REQ_BUF_BLOCK),
            conns: BTreeMap::new(),
            per_ip: BTreeMap::new(),
            agents: BTreeMap::new(),
            pending: HashMap::default(),
            sessions: BTreeMap::new(),
            last_pick: BTreeMap::new(),
            timers: TimerSet::new(),
            request_deadlines: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    // ----- getters -----

    /// Live agents, ordered by agent id.
    pub fn agents(&self) -> impl Iterator<Item = &LiveAgent> {
        self.agents.values()
    }

    /// One live agent.
    pub fn agent(&self, agent_id: &str) -> Option<&LiveAgent> {
        self.agents.get(agent_id)
    }

    /// Bound voice sessions, ordered by key.
    pub fn sessions(&self) -> impl Iterator<Item = (&SessionKey, &Session)> {
        self.sessions.iter()
    }

    /// The session bound for `key`.
    pub fn session(&self, key: &SessionKey) -> Option<&Session> {
        self.sessions.get(key)
    }

    /// Last time a message (or a pong reported through [`touch`](Self::touch)) arrived from
    /// `agent_id`; the stale-agent rule counts from here.
    pub fn last_seen(&self, agent_id: &str) -> Option<Instant> {
        let conn = self.agents.get(agent_id)?.conn;
        self.conns.get(&conn).map(|st| st.last_seen)
    }

    /// Requests awaiting a response from `agent_id` (on its current connection).
    pub fn pending_for(&self, agent_id: &str) -> usize {
        self.agents
            .get(agent_id)
            .and_then(|a| self.conns.get(&a.conn))
            .map_or(0, |st| st.pending)
    }

    /// Requests awaiting a response.
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// Open connections (registered or not).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// The next deadline and what it is for (for tracing).
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        let conn_timer = self.timers.next().map(|(t, k)| (t, *k));
        let request = self
            .request_deadlines
            .front()
            .map(|(t, id)| (*t, TimerKind::Request(*id)));
        match (conn_timer, request) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    // ----- commands -----

    /// Sends `req{op, data}` to `agent_id`; the outcome arrives as
    /// [`RequestCompleted`](ControllerEvent::RequestCompleted),
    /// [`RequestFailed`](ControllerEvent::RequestFailed) or
    /// [`RequestTimedOut`](ControllerEvent::RequestTimedOut).
    ///
    /// Fails at once with [`CommandError::AgentOffline`] if the agent is not live, or
    /// [`CommandError::TooManyPending`] at the per-agent limit.
    pub fn request(
        &mut self,
        agent_id: &str,
        op: &str,
        data: impl Serialize,
        now: Instant,
    ) -> Result<Id128, CommandError> {
        let now = self.clock.observe(now);
        let conn = self
            .agents
            .get(agent_id)
            .ok_or(CommandError::AgentOffline)?
            .conn;
        let max = self.cfg.limits.max_pending_per_agent;
        let st = self
            .conns
            .get_mut(&conn)
            .ok_or(CommandError::AgentOffline)?;
        if st.pending >= max {
            return Err(CommandError::TooManyPending);
        }
        let id = self.ids.next_id();
        // Encoded with a placeholder id of the same length, which is then overwritten in
        // place with the id's digits: the id is never turned into a `&str` (a UTF-8 check).
        let req = ReqRef {
            id: ID_PLACEHOLDER,
            op,
            data,
            agent_id,
        };
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, &req)
            .map_err(|e| CommandError::InvalidData(e.to_string()))?;
        if let Some(slot) = self
            .scratch
            .get_mut(REQ_ID_AT..REQ_ID_AT + ID_PLACEHOLDER.len())
        {
            debug_assert_eq!(slot, ID_PLACEHOLDER.as_bytes());
            slot.copy_from_slice(id.hyphenated().as_bytes());
        }
        // One copy into the frame block (serde_json's many small writes go to the plain
        // `Vec`, which is cheaper per write than `BytesMut`).
        debug_assert!(self.req_buf.is_empty(), "every frame is split off");
        self.req_buf.extend_from_slice(&self.scratch);
        // serde_json writes UTF-8 only, and the id's digits are ASCII (see
        // `Utf8Bytes::from_encoder`).
        let frame = FrameBuf::Text(Utf8Bytes::from_encoder(self.req_buf.split().freeze()));
        st.pending += 1;
        self.out.send(conn, frame);
        let pending = Pending {
            agent_id: agent_id.to_owned(),
            conn,
            op: op.to_owned(),
            starts: None,
        };
        self.pending.insert(id, pending);
        self.request_deadlines
            .push_back((now + self.cfg.request_timeout, id));
        Ok(id)
    }

    /// Chooses the agent for a music session in (`guild_id`, `voice_channel_id`) and binds
    /// it to that session.
    ///
    /// The rules (INTEROP.md): the agent already bound to that session if it is live and
    /// ready; else an idle, ready agent that lists the guild (idle = bound to no session in
    /// that guild), taking candidates in agent-id order, round-robin per guild; else
    /// [`CommandError::NoAgentsInGuild`] if no live agent lists the guild, or
    /// [`CommandError::NoFreeAgents`]. A newly chosen agent is bound to the session at once
    /// ([`ControllerEvent::SessionBound`] with [`BindSource::Selection`]), as the real
    /// controller does: real agents never send `add`. Call it for an op that starts a session
    /// (see [`crate::ops`]); [`request_for_session`](Self::request_for_session) does both.
    pub fn select_agent(
        &mut self,
        guild_id: &str,
        voice_channel_id: &str,
    ) -> Result<String, CommandError> {
        self.select_agent_for(SessionKind::Music, guild_id, voice_channel_id)
    }

    /// [`select_agent`](Self::select_agent) for a session of `kind`.
    pub fn select_agent_for(
        &mut self,
        kind: SessionKind,
        guild_id: &str,
        voice_channel_id: &str,
    ) -> Result<String, CommandError> {
        let key = SessionKey::new(kind, guild_id, voice_channel_id);
        let (agent, bound) = self.choose(&key)?;
        if !bound {
            self.bind_selected(key, &agent, None);
        }
        Ok(agent)
    }

    /// Sends `op` for the session of (`guild_id`, `voice_channel_id`) that `op` addresses
    /// (an `assistant…` op the assistant session, any other the music session; see
    /// [`crate::ops`]); returns the agent and the request id.
    ///
    /// An op that starts a session ([`crate::ops::starts_session`]: `play`, `search`,
    /// `assistantJoin`, ...) goes to the agent [`select_agent_for`](Self::select_agent_for)
    /// picks, bound to the session at selection; if that request then fails (an error
    /// answer, a timeout, `agent-offline`) before an `add` confirms the session, the
    /// binding is undone ([`FreeReason::StartFailed`]). Any other op goes to the agent
    /// already bound, or fails with [`CommandError::NoSession`].
    pub fn request_for_session(
        &mut self,
        guild_id: &str,
        voice_channel_id: &str,
        op: &str,
        data: impl Serialize,
        now: Instant,
    ) -> Result<(String, Id128), CommandError> {
        let now = self.clock.observe(now);
        let key = SessionKey::new(session_kind_of(op), guild_id, voice_channel_id);
        if !starts_session(op) {
            let agent = self
                .sessions
                .get(&key)
                .ok_or(CommandError::NoSession)?
                .agent_id
                .clone();
            let id = self.request(&agent, op, data, now)?;
            return Ok((agent, id));
        }
        let (agent, bound) = self.choose(&key)?;
        let id = self.request(&agent, op, data, now)?;
        if bound {
            // Another start op while the first is still unanswered: the newest decides
            // (any success keeps the session). A session already started stays as it is.
            match self.sessions.get_mut(&key) {
                Some(s) if !s.confirmed && s.starting.is_some() => s.starting = Some(id),
                _ => return Ok((agent, id)),
            }
        } else {
            self.bind_selected(key.clone(), &agent, Some(id));
        }
        if let Some(p) = self.pending.get_mut(&id) {
            p.starts = Some(Box::new(key));
        }
        Ok((agent, id))
    }

    /// [`request_for_session`](Self::request_for_session) (kept for callers of earlier
    /// versions).
    pub fn request_for_guild(
        &mut self,
        guild_id: &str,
        voice_channel_id: &str,
        op: &str,
        data: impl Serialize,
        now: Instant,
    ) -> Result<(String, Id128), CommandError> {
        self.request_for_session(guild_id, voice_channel_id, op, data, now)
    }

    /// Picks the agent for `key` by the selection rules without binding it; `true` when it
    /// is the agent already bound.
    fn choose(&mut self, key: &SessionKey) -> Result<(String, bool), CommandError> {
        if let Some(s) = self.sessions.get(key) {
            if self.agents.get(&s.agent_id).is_some_and(|a| a.ready) {
                return Ok((s.agent_id.clone(), true));
            }
        } else if self.sessions.len() >= self.cfg.limits.max_sessions {
            return Err(CommandError::TooManySessions);
        }
        let guild_id = key.guild_id.as_str();
        // Agents bound to any session (music or assistant) in this guild are busy here.
        let busy: BTreeSet<&str> = self
            .sessions
            .iter()
            .filter(|(k, _)| k.guild_id == guild_id)
            .map(|(_, s)| s.agent_id.as_str())
            .collect();
        let mut any_listing = false;
        let mut candidates: Vec<&str> = Vec::new();
        for a in self.agents.values() {
            if !a.guild_ids.contains(guild_id) {
                continue;
            }
            any_listing = true;
            if a.ready && !busy.contains(a.agent_id.as_str()) {
                candidates.push(&a.agent_id);
            }
        }
        if !any_listing {
            return Err(CommandError::NoAgentsInGuild);
        }
        let last = self.last_pick.get(guild_id).map(String::as_str);
        let pick = last
            .and_then(|l| candidates.iter().find(|c| **c > l))
            .or_else(|| candidates.first())
            .map(|s| (*s).to_owned())
            .ok_or(CommandError::NoFreeAgents)?;
        self.last_pick.insert(guild_id.to_owned(), pick.clone());
        Ok((pick, false))
    }

    /// Binds `agent_id` to `key` at selection (replacing a binding to an agent that is gone
    /// or not ready).
    fn bind_selected(&mut self, key: SessionKey, agent_id: &str, starting: Option<Id128>) {
        let session = Session {
            agent_id: agent_id.to_owned(),
            text_channel_id: None,
            owner_user_id: None,
            confirmed: false,
            starting,
        };
        let replaced = self
            .sessions
            .insert(key.clone(), session)
            .map(|old| old.agent_id)
            .filter(|old| old != agent_id);
        self.out.event(ControllerEvent::SessionBound {
            agent_id: agent_id.to_owned(),
            kind: key.kind,
            guild_id: key.guild_id,
            voice_channel_id: key.voice_channel_id,
            text_channel_id: None,
            owner_user_id: None,
            source: BindSource::Selection,
            replaced,
        });
    }

    /// Frees `key` (if bound) with a [`ControllerEvent::SessionFreed`].
    fn free_session(&mut self, key: SessionKey, reason: FreeReason) {
        if let Some(s) = self.sessions.remove(&key) {
            self.out.event(ControllerEvent::SessionFreed {
                agent_id: s.agent_id,
                kind: key.kind,
                guild_id: key.guild_id,
                voice_channel_id: key.voice_channel_id,
                reason,
            });
        }
    }

    /// The request `id` that started `p.starts` is over: on success the session stays; on
    /// failure it is freed if it is still the unconfirmed binding that request made.
    fn start_settled(&mut self, id: Id128, p: &Pending, ok: bool) {
        let Some(key) = &p.starts else {
            return;
        };
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if s.agent_id != p.agent_id || s.confirmed {
            return;
        }
        if ok {
            s.starting = None;
        } else if s.starting == Some(id) {
            self.free_session((**key).clone(), FreeReason::StartFailed);
        }
    }

    /// Records that `conn` is alive now (for drivers that surface WebSocket pongs).
    pub fn touch(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        if let Some(st) = self.conns.get_mut(&conn) {
            st.last_seen = now;
        }
    }

    // ----- internals -----

    fn violation(&mut self, conn: ConnId, error: ProtocolError) {
        self.out
            .event(ControllerEvent::ProtocolViolation { conn, error });
    }

    fn send_error(&mut self, conn: ConnId, text: &str) {
        let msg = ControllerMessage::Error(ErrorMessage::new(text));
        let frame = msg.to_frame(&mut self.scratch);
        self.out.send(conn, frame);
    }

    /// Sends `error{text}`, closes with the error's code and reason, and drops any agent
    /// registered on the connection.
    fn reject(&mut self, conn: ConnId, text: &str, error: ProtocolError) {
        self.send_error(conn, text);
        self.close_conn(conn, &error);
        self.violation(conn, error);
    }

    fn close_conn(&mut self, conn: ConnId, error: &ProtocolError) {
        let (code, reason) = error
            .close()
            .unwrap_or((CloseCode::POLICY, "protocol-error"));
        self.out.close(conn, code, reason);
        let agent = match self.conns.get_mut(&conn) {
            Some(st) => {
                st.closing = true;
                st.agent_id.take()
            }
            None => None,
        };
        self.timers.cancel(&TimerKind::Hello(conn));
        self.timers.cancel(&TimerKind::Stale(conn));
        if let Some(id) = agent {
            let reason = match error {
                ProtocolError::Stale => DropReason::Stale,
                _ => DropReason::Rejected,
            };
            self.drop_agent_if_on(&id, conn, reason);
        }
    }

    /// Removes `agent_id` if it is live on `conn` (not if a newer connection replaced it).
    fn drop_agent_if_on(&mut self, agent_id: &str, conn: ConnId, reason: DropReason) {
        if self.agents.get(agent_id).is_none_or(|a| a.conn != conn) {
            return;
        }
        self.agents.remove(agent_id);
        self.timers.cancel(&TimerKind::Stale(conn));
        // Its sessions end with it (the real controller frees them on close too).
        let keys: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.agent_id == agent_id)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.free_session(key, FreeReason::AgentDropped);
        }
        self.fail_pending_on(conn);
        self.out.event(ControllerEvent::AgentDropped {
            agent_id: agent_id.to_owned(),
            reason,
        });
    }

    /// Drops answered requests from the front of the deadline FIFO, and compacts it when
    /// answered entries dominate, so it never holds much more than the pending requests.
    fn trim_deadlines(&mut self) {
        while let Some((_, id)) = self.request_deadlines.front() {
            if self.pending.contains_key(id) {
                break;
            }
            self.request_deadlines.pop_front();
        }
        if self.request_deadlines.len() > 2 * self.pending.len() + 64 {
            let pending = &self.pending;
            self.request_deadlines
                .retain(|(_, id)| pending.contains_key(id));
        }
    }

    /// Fails at once every request that went out on `conn`, in the order they were sent.
    fn fail_pending_on(&mut self, conn: ConnId) {
        // The deadline FIFO holds every pending id in issue order: iterate it, not the
        // hash map, so the events come out in a deterministic order.
        let ids: Vec<Id128> = self
            .request_deadlines
            .iter()
            .map(|(_, id)| *id)
            .filter(|id| self.pending.get(id).is_some_and(|p| p.conn == conn))
            .collect();
        for id in ids {
            if let Some(p) = self.pending.remove(&id) {
                self.unpend(p.conn);
                self.start_settled(id, &p, false);
                self.out.event(ControllerEvent::RequestFailed {
                    id,
                    agent_id: p.agent_id,
                    op: p.op,
                    error: AGENT_OFFLINE,
                });
            }
        }
        self.trim_deadlines();
    }

    fn on_decode_error(&mut self, conn: ConnId, registered: bool, error: DecodeError) {
        match error {
            DecodeError::UnknownType | DecodeError::NotAnObject if !registered => {
                let text = error.reply_text().unwrap_or("Unknown message type");
                self.reject(conn, text, ProtocolError::Decode(error));
            }
            DecodeError::UnknownType | DecodeError::NotAnObject | DecodeError::InvalidFields(_) => {
                // After hello (unknown types) or any time (bad fields): ignored, no reply.
                self.violation(conn, ProtocolError::Decode(error));
            }
            _ => {
                let text = error.reply_text().unwrap_or("Invalid JSON");
                self.send_error(conn, text);
                self.violation(conn, ProtocolError::Decode(error));
            }
        }
    }

    fn secret_matches(&self, presented: Option<&str>) -> bool {
        match (&self.cfg.runner_secret, presented) {
            (None, _) => true,
            (Some(expected), Some(p)) if !expected.is_empty() && !p.is_empty() => {
                bool::from(expected.as_bytes().ct_eq(p.as_bytes()))
            }
            _ => false,
        }
    }

    /// Checks a `hello` in the real controller's order: `agentId` (a hello without one is
    /// ignored, whatever its version), then the version, then the runner secret.
    fn on_hello(&mut self, conn: ConnId, hello: Hello, now: Instant) {
        let Some(agent_id) = hello.agent_id.clone().filter(|a| !a.is_empty()) else {
            self.violation(conn, ProtocolError::MissingAgentId);
            return;
        };
        let Some(version) = hello.protocol_version.clone().filter(|v| !v.is_empty()) else {
            self.reject(conn, ERR_VERSION_REQUIRED, ProtocolError::MissingVersion);
            return;
        };
        if !self.cfg.supported_versions.contains(&version) {
            let text = format!(
                "Incompatible protocol version {version}. Controller expects {}.",
                expected_versions(&self.cfg.supported_versions)
            );
            self.reject(conn, &text, ProtocolError::IncompatibleVersion(version));
            return;
        }
        if !self.secret_matches(hello.runner_secret.as_deref()) {
            self.reject(conn, ERR_UNAUTHORIZED, ProtocolError::Unauthorized);
            return;
        }
        self.register(conn, agent_id, version, hello, now);
    }

    fn register(
        &mut self,
        conn: ConnId,
        agent_id: String,
        version: String,
        hello: Hello,
        now: Instant,
    ) {
        // The same connection switching agent id: the old registration ends first.
        let previous_on_conn = self.conns.get_mut(&conn).and_then(|st| {
            if st.agent_id.as_deref() == Some(agent_id.as_str()) {
                None
            } else {
                st.agent_id.replace(agent_id.clone())
            }
        });
        if let Some(prev) = previous_on_conn {
            self.drop_agent_if_on(&prev, conn, DropReason::Rejected);
        }
        self.timers.cancel(&TimerKind::Hello(conn));

        let mut guild_ids: BTreeSet<String> = BTreeSet::new();
        for g in hello.guild_ids {
            if guild_ids.len() >= self.cfg.limits.max_guilds_per_agent {
                self.violation(conn, ProtocolError::Limit("guilds per agent"));
                break;
            }
            guild_ids.insert(g);
        }
        let record = LiveAgent {
            agent_id: agent_id.clone(),
            conn,
            bot_user_id: hello.bot_user_id,
            tag: hello.tag,
            ready: hello.ready,
            guild_ids: BTreeSet::new(),
            pool_id: hello.pool_id,
            protocol_version: version.clone(),
            runner_id: hello.runner_id,
        };

        match self.agents.get_mut(&agent_id) {
            Some(existing) if existing.conn == conn => {
                let changed = existing.bot_user_id != record.bot_user_id
                    || existing.tag != record.tag
                    || existing.ready != record.ready
                    || existing.pool_id != record.pool_id
                    || existing.protocol_version != record.protocol_version
                    || existing.runner_id != record.runner_id;
                existing.bot_user_id = record.bot_user_id;
                existing.tag = record.tag;
                existing.ready = record.ready;
                existing.pool_id = record.pool_id;
                existing.protocol_version = record.protocol_version;
                existing.runner_id = record.runner_id;
                if changed {
                    self.out.event(ControllerEvent::AgentUpdated {
                        agent_id: agent_id.clone(),
                    });
                }
            }
            Some(existing) => {
                // A second socket for the same agent: the newer one wins. The old socket is
                // closed and forgotten here, so its later disconnect cannot remove the new
                // registration (the real controller's stale-close race).
                let old = existing.conn;
                let old_guilds = std::mem::take(&mut existing.guild_ids);
                *existing = record;
                existing.guild_ids = old_guilds;
                if let Some(st) = self.conns.get_mut(&old) {
                    st.agent_id = None;
                    st.closing = true;
                }
                self.timers.cancel(&TimerKind::Stale(old));
                self.timers.cancel(&TimerKind::Hello(old));
                self.out
                    .close(old, CloseCode::NORMAL, "replaced by a newer connection");
                self.fail_pending_on(old);
                self.timers
                    .set(TimerKind::Stale(conn), now + self.cfg.stale_after);
                self.out.event(ControllerEvent::AgentRegistered {
                    agent_id: agent_id.clone(),
                    conn,
                    replaced: Some(old),
                    protocol_version: version,
                });
            }
            None => {
                self.agents.insert(agent_id.clone(), record);
                self.timers
                    .set(TimerKind::Stale(conn), now + self.cfg.stale_after);
                self.out.event(ControllerEvent::AgentRegistered {
                    agent_id: agent_id.clone(),
                    conn,
                    replaced: None,
                    protocol_version: version,
                });
            }
        }
        self.set_guilds(&agent_id, guild_ids);
    }

    /// Replaces an agent's guild set and reports the difference.
    fn set_guilds(&mut self, agent_id: &str, new: BTreeSet<String>) {
        let Some(agent) = self.agents.get_mut(agent_id) else {
            return;
        };
        let added: Vec<String> = new.difference(&agent.guild_ids).cloned().collect();
        let removed: Vec<String> = agent.guild_ids.difference(&new).cloned().collect();
        agent.guild_ids = new;
        if !added.is_empty() || !removed.is_empty() {
            self.out.event(ControllerEvent::GuildsChanged {
                agent_id: agent_id.to_owned(),
                added,
                removed,
            });
        }
    }

    /// `add`: with `ok: true` it confirms the binding made at selection, or binds (or moves)
    /// the session to the sender; with `ok: false` it frees the session if the sender is the
    /// bound agent (it is not in that channel).
    fn on_add(&mut self, sender: String, add: Add, conn: ConnId) {
        let key = SessionKey::new(add.kind, add.guild_id, add.voice_channel_id);
        if !add.ok {
            let bound_here = self
                .sessions
                .get(&key)
                .is_some_and(|s| s.agent_id == sender);
            self.out.event(ControllerEvent::SessionJoinFailed {
                agent_id: sender,
                kind: key.kind,
                guild_id: key.guild_id.clone(),
                voice_channel_id: key.voice_channel_id.clone(),
                error: add.error.unwrap_or_default(),
            });
            if bound_here {
                self.free_session(key, FreeReason::JoinFailed);
            }
            return;
        }
        if !self.sessions.contains_key(&key) && self.sessions.len() >= self.cfg.limits.max_sessions
        {
            self.violation(conn, ProtocolError::Limit("sessions"));
            return;
        }
        let replaced = self
            .sessions
            .insert(
                key.clone(),
                Session {
                    agent_id: sender.clone(),
                    text_channel_id: add.text_channel_id.clone(),
                    owner_user_id: add.owner_user_id.clone(),
                    confirmed: true,
                    starting: None,
                },
            )
            .map(|old| old.agent_id)
            .filter(|old| *old != sender);
        self.out.event(ControllerEvent::SessionBound {
            agent_id: sender,
            kind: key.kind,
            guild_id: key.guild_id,
            voice_channel_id: key.voice_channel_id,
            text_channel_id: add.text_channel_id,
            owner_user_id: add.owner_user_id,
            source: BindSource::Add,
            replaced,
        });
    }

    /// `released` frees the session only when the sender is the bound agent; any other
    /// `released` is ignored (reported as [`ControllerEvent::ReleaseIgnored`], no violation).
    fn on_released(&mut self, sender: String, rel: Released) {
        let key = SessionKey::new(rel.kind, rel.guild_id, rel.voice_channel_id);
        let event = if self
            .sessions
            .get(&key)
            .is_some_and(|s| s.agent_id == sender)
        {
            self.sessions.remove(&key);
            ControllerEvent::SessionReleased {
                agent_id: sender,
                kind: key.kind,
                guild_id: key.guild_id,
                voice_channel_id: key.voice_channel_id,
                reason: rel.reason,
            }
        } else {
            ControllerEvent::ReleaseIgnored {
                agent_id: sender,
                kind: key.kind,
                guild_id: key.guild_id,
                voice_channel_id: key.voice_channel_id,
                reason: rel.reason,
            }
        };
        self.out.event(event);
    }

    fn on_resp(&mut self, conn: ConnId, resp: Resp) {
        let Some(id) = Id128::parse(&resp.id) else {
            return; // not one of ours: dropped silently
        };
        let Some(p) = self.pending.remove(&id) else {
            return; // unknown or late: dropped silently
        };
        if p.conn != conn {
            // Not the agent it went to: the request stays pending (nothing iterates the
            // map, so taking it out and back in changes no output).
            self.pending.insert(id, p);
            self.violation(conn, ProtocolError::WrongResponder { id: resp.id });
            return;
        }
        self.unpend(p.conn);
        // Answers usually come in issue order: the front deadline is this request's.
        if self
            .request_deadlines
            .front()
            .is_some_and(|(_, f)| *f == id)
        {
            self.request_deadlines.pop_front();
        }
        self.trim_deadlines();
        if p.starts.is_some() {
            self.start_settled(id, &p, resp.ok);
        }
        self.out.event(ControllerEvent::RequestCompleted {
            id,
            agent_id: p.agent_id,
            op: p.op,
            resp,
        });
    }

    /// The front request deadline has passed: time the request out unless it was answered.
    fn fire_request_deadline(&mut self) {
        let Some((_, id)) = self.request_deadlines.pop_front() else {
            return;
        };
        let Some(p) = self.pending.remove(&id) else {
            return; // answered already
        };
        self.unpend(p.conn);
        self.start_settled(id, &p, false);
        self.out.event(ControllerEvent::RequestTimedOut {
            id,
            agent_id: p.agent_id,
            op: p.op,
        });
    }

    /// A hello or stale deadline has passed.
    fn fire_conn_timer(&mut self, key: TimerKind, now: Instant) {
        match key {
            TimerKind::Hello(conn) => {
                let error = ProtocolError::HelloRequired;
                self.close_conn(conn, &error);
                self.violation(conn, error);
            }
            TimerKind::Stale(conn) => {
                let Some(last_seen) = self
                    .conns
                    .get(&conn)
                    .filter(|st| st.agent_id.is_some())
                    .map(|st| st.last_seen)
                else {
                    return;
                };
                let due = last_seen + self.cfg.stale_after;
                if due > now {
                    self.timers.set(TimerKind::Stale(conn), due);
                } else {
                    let error = ProtocolError::Stale;
                    self.close_conn(conn, &error);
                    self.violation(conn, error);
                }
            }
            // Request deadlines live in `request_deadlines`, never in `timers`.
            TimerKind::Request(_) => {}
        }
    }

    fn unpend(&mut self, conn: ConnId) {
        if let Some(st) = self.conns.get_mut(&conn) {
            st.pending = st.pending.saturating_sub(1);
        }
    }
}

impl Machine for Controller {
    type Event = ControllerEvent;

    /// Accepts the connection, or closes it at once with 1008 `too-many-connections` (per-IP
    /// cap) or `server-full` (total cap). Starts the hello deadline.
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conns.contains_key(&conn) {
            return;
        }
        let ip = peer.remote_addr.map(|a| a.ip());
        let from_ip = ip.and_then(|ip| self.per_ip.get(&ip)).copied().unwrap_or(0);
        let refusal = if from_ip >= self.cfg.limits.max_connections_per_ip {
            Some(ProtocolError::TooManyConnectionsPerIp)
        } else if self.conns.len() >= self.cfg.limits.max_connections {
            Some(ProtocolError::ServerFull)
        } else {
            None
        };
        if let Some(error) = refusal {
            if let Some((code, reason)) = error.close() {
                self.out.close(conn, code, reason);
            }
            self.violation(conn, error);
            return;
        }
        if let Some(ip) = ip {
            *self.per_ip.entry(ip).or_insert(0) += 1;
        }
        self.conns.insert(
            conn,
            ConnState {
                ip,
                agent_id: None,
                closing: false,
                window_end: rate_window_end(now),
                window_count: 0,
                pending: 0,
                last_seen: now,
            },
        );
        self.timers
            .set(TimerKind::Hello(conn), now + self.cfg.hello_timeout);
        self.out.event(ControllerEvent::Connected {
            conn,
            remote: peer.remote_addr,
        });
    }

    /// Handles one agent message. Bad input gets the reply INTEROP.md names (see the crate
    /// docs' "Spec decisions"); nothing panics; unknown connections are ignored.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        let max_rate = self.cfg.limits.max_messages_per_second;
        let Some(st) = self.conns.get_mut(&conn).filter(|st| !st.closing) else {
            return;
        };
        let registered = st.agent_id.is_some();
        // Rate: a fixed one-second window per connection; the excess is dropped.
        if now >= st.window_end {
            st.window_end = rate_window_end(now);
            st.window_count = 0;
        }
        st.window_count = st.window_count.saturating_add(1);
        if st.window_count > max_rate {
            if st.window_count == max_rate + 1 {
                self.violation(conn, ProtocolError::RateLimited);
            }
            return;
        }
        let msg = match AgentMessage::decode(frame, self.cfg.limits.max_frame_bytes) {
            Ok(m) => m,
            Err(e) => return self.on_decode_error(conn, registered, e),
        };
        // Any message refreshes lastSeen.
        st.last_seen = now;
        match msg {
            AgentMessage::Hello(h) => self.on_hello(conn, h, now),
            AgentMessage::Resp(r) => self.on_resp(conn, r),
            other => {
                let sender = self.conns.get(&conn).and_then(|st| st.agent_id.clone());
                match (other, sender) {
                    (AgentMessage::Guilds(g), Some(agent_id)) => {
                        let mut set = BTreeSet::new();
                        for id in g.guild_ids {
                            if set.len() >= self.cfg.limits.max_guilds_per_agent {
                                self.violation(conn, ProtocolError::Limit("guilds per agent"));
                                break;
                            }
                            set.insert(id);
                        }
                        self.set_guilds(&agent_id, set);
                    }
                    (AgentMessage::Event(Event::Add(a)), Some(agent_id)) => {
                        self.on_add(agent_id, a, conn)
                    }
                    (AgentMessage::Event(Event::Released(r)), Some(agent_id)) => {
                        self.on_released(agent_id, r)
                    }
                    (other, _) => {
                        self.violation(conn, ProtocolError::BeforeHello(other.type_name()))
                    }
                }
            }
        }
    }

    /// Forgets the connection; drops its agent (failing its pending requests at once) unless
    /// a newer connection already replaced it.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        let Some(st) = self.conns.remove(&conn) else {
            return;
        };
        if let Some(ip) = st.ip {
            if let Some(n) = self.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.per_ip.remove(&ip);
                }
            }
        }
        self.timers.cancel(&TimerKind::Hello(conn));
        self.timers.cancel(&TimerKind::Stale(conn));
        if let Some(agent_id) = st.agent_id {
            self.drop_agent_if_on(&agent_id, conn, DropReason::Disconnected);
        }
        self.fail_pending_on(conn);
        self.out.event(ControllerEvent::Disconnected { conn });
    }

    /// Fires due deadlines: hello-required closes, stale-agent drops, request timeouts.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        // Both deadline sources, in time order (connection timers first on ties).
        while let Some((_, kind)) = self.next_timer().filter(|(t, _)| *t <= now) {
            match kind {
                TimerKind::Request(_) => self.fire_request_deadline(),
                TimerKind::Hello(_) | TimerKind::Stale(_) => {
                    if let Some(key) = self.timers.pop_expired(now) {
                        self.fire_conn_timer(key, now);
                    }
                }
            }
        }
        self.trim_deadlines();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(t, _)| t)
    }

    // Inlined into the driver's drain loop: an `Output` is about 200 bytes, and each
    // non-inlined hop moves it once more.
    #[inline]
    fn poll_output(&mut self) -> Option<Output<ControllerEvent>> {
        self.out.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::SequentialIds;

    #[allow(clippy::disallowed_methods)] // the one base time of a test
    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn req_frames_encode_like_an_owned_req_with_the_id_in_place() {
        let now = t0();
        let mut c = Controller::new(ControllerConfig::default(), SequentialIds::new(0xfeed));
        let conn = ConnId::new(1);
        c.handle_connect(conn, &PeerInfo::new(None), now);
        let hello = r#"{"type":"hello","protocolVersion":"1.0.0","agentId":"a\"b","ready":true,"guildIds":[],"poolId":"p"}"#;
        c.handle_frame(conn, Frame::Text(hello), now);
        while c.poll_output().is_some() {}
        let data = serde_json::json!({"q": "x\u{e9}\"", "n": [1, 2]});
        // Enough requests to cross several blocks of the frame buffer, some kept alive.
        let mut kept = Vec::new();
        for i in 0..100 {
            let op = if i % 2 == 0 { "play" } else { "sk\u{ef}p\n" };
            let id = c.request("a\"b", op, &data, now).expect("sent");
            let frame = match c.poll_output() {
                Some(Output::Send { frame, .. }) => frame,
                other => panic!("{other:?}"),
            };
            let mut expected = Vec::new();
            ControllerMessage::Req(crate::message::Req {
                id: id.to_string(),
                op: op.to_owned(),
                data: crate::RawJson::from_value(&data),
                agent_id: "a\"b".to_owned(),
            })
            .encode(&mut expected);
            assert_eq!(frame.as_text(), std::str::from_utf8(&expected).ok());
            if i % 3 == 0 {
                kept.push((frame, expected));
            }
        }
        // Frames still held are not overwritten by later ones.
        for (frame, expected) in kept {
            assert_eq!(frame.as_bytes(), &expected[..]);
        }
    }

    #[test]
    fn the_deadline_fifo_stays_bounded_when_answers_come_out_of_order() {
        let now = t0();
        let limits = crate::Limits {
            max_pending_per_agent: 100_000,
            ..crate::Limits::default()
        };
        let mut c = Controller::new(
            ControllerConfig::default().with_limits(limits),
            SequentialIds::new(0),
        );
        let conn = ConnId::new(1);
        c.handle_connect(conn, &PeerInfo::new(None), now);
        let hello = r#"{"type":"hello","protocolVersion":"1.0.0","agentId":"a","ready":true,"guildIds":[],"poolId":"p"}"#;
        c.handle_frame(conn, Frame::Text(hello), now);
        let ids: Vec<Id128> = (0..5_000)
            .map(|_| c.request("a", "x", (), now).expect("sent"))
            .collect();
        while c.poll_output().is_some() {}
        // Answer every request except the first, newest first: the front stays pending, so
        // only compaction can keep the FIFO small.
        for id in ids.iter().skip(1).rev() {
            let resp = format!(r#"{{"type":"resp","id":"{id}","ok":true}}"#);
            // Stay under the rate limit by moving time forward a little.
            let t =
                now + Duration::from_millis(11) * (ids.len() as u32 - c.pending_requests() as u32);
            c.handle_frame(conn, Frame::Text(&resp), t);
            assert!(c.request_deadlines.len() <= 2 * c.pending_requests() + 64 + 1);
        }
        assert_eq!(c.pending_requests(), 1);
        while c.poll_output().is_some() {}
        // The one left still times out on time.
        c.handle_timeout(now + Duration::from_secs(31));
        let timed_out: Vec<Id128> = std::iter::from_fn(|| c.poll_output())
            .filter_map(|o| match o {
                Output::Event(ControllerEvent::RequestTimedOut { id, .. }) => Some(id),
                _ => None,
            })
            .collect();
        assert_eq!(timed_out, [ids[0]]);
        assert!(c.request_deadlines.is_empty());
    }
}
