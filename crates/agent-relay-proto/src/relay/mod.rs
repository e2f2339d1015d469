//! The `Relay`: the server role at `/agent/ws`, pairing one host with the agents of a
//! session.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use agentwire_core::{
    check_json_depth, CloseCode, ConnId, Frame, FrameBuf, IdGen, Machine, Monotonic, Outbox,
    Output, PeerInfo, TimerSet, Utf8Bytes,
};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::config::RelayConfig;
use crate::envelope::{raw_str, truncate, write_envelope, Route, VersionRule};
use crate::error::{texts, CommandError, DecodeError, ErrorCode, ProtocolError};
use crate::event::{Refusal, RelayEvent, Undelivered};
use crate::log::{line_len_bound, Direction, LogRecord, SessionId};
use crate::message::{types, PresenceAgent, RelayHello, RelayJoined, RelayPresence, Role};
use crate::rate::TokenBucket;

/// Longest piece of a peer's `type` echoed in an error or an event.
const MAX_ECHOED_TYPE: usize = 128;

/// Counters a test or a metrics exporter can read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayStats {
    /// Frames received on accepted connections.
    pub received: u64,
    /// Agent messages forwarded to a host.
    pub to_host: u64,
    /// Frames sent to agents by forwarding (a push to three agents counts three).
    pub to_agents: u64,
    /// `error` messages the relay itself sent.
    pub errors_sent: u64,
    /// Study-log records emitted.
    pub log_records: u64,
    /// The relay's own study-log records (joins, presence, errors, ...) not emitted because
    /// their session's log reached
    /// [`Limits::max_log_bytes_per_session`](crate::Limits::max_log_bytes_per_session).
    pub log_records_dropped: u64,
}

/// What the next deadline of [`Relay::next_timer`] is for (for tracing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimerKind {
    /// A connection's time to send `relay.join` runs out.
    JoinDeadline(ConnId),
    /// The oldest outstanding agent request is forgotten.
    RequestExpiry {
        /// The agent that asked.
        agent: ConnId,
    },
}

#[derive(Debug)]
enum ConnState {
    Unjoined,
    Joined {
        session: SessionId,
        role: Role,
    },
    /// The relay closed it (host replaced, join deadline, [`Relay::close`]); its frames are
    /// ignored until the driver reports the disconnect.
    Closing,
}

#[derive(Debug)]
struct Conn {
    state: ConnState,
    bucket: Option<TokenBucket>,
    /// The relay's id for it, assigned at its first join.
    client_id: Option<String>,
    /// Display name (agents).
    name: Option<String>,
    /// Sequence numbers of its outstanding requests (agents).
    pending: Vec<u64>,
}

#[derive(Debug, Default)]
struct Session {
    host: Option<ConnId>,
    /// In join order.
    agents: Vec<ConnId>,
    /// Outstanding agent requests by `id`, oldest first (ids may repeat across agents).
    by_id: BTreeMap<Box<str>, VecDeque<u64>>,
}

/// One agent request forwarded to the host and not yet answered.
#[derive(Debug)]
struct Pending {
    session: SessionId,
    agent: ConnId,
    id: Box<str>,
    expires: Option<Instant>,
}

/// `error` payload, borrowed (what the relay encodes).
#[derive(Serialize)]
struct ErrorRef<'a> {
    code: &'a ErrorCode,
    message: &'a str,
}

/// The study-log payload of an `error` that refused a message: the `error` as sent, plus
/// the refused message's type and size (never its payload).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RefusalRecord<'a> {
    code: &'a ErrorCode,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused_type: Option<&'a str>,
    refused_bytes: usize,
}

/// The message being handled, for the record of a refusal.
#[derive(Debug, Default)]
struct Inbound {
    /// Its `type`, cut to [`MAX_ECHOED_TYPE`] bytes, once known.
    /// (Known types borrow their constant: no allocation per message.)
    msg_type: Option<std::borrow::Cow<'static, str>>,
    /// Its size in bytes.
    bytes: usize,
}

/// `relay.disconnect` log payload (the reference relay's record).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DisconnectRecord<'a> {
    client_id: &'a str,
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_name: Option<&'a str>,
}

/// `relay.join` payload as the relay reads it: every field raw, checked by hand, so that a
/// wrong `role` or `sessionId` gets the reference's exact error.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JoinFields<'a> {
    #[serde(borrow, default)]
    role: Option<&'a RawValue>,
    #[serde(borrow, default)]
    session_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    agent_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    client_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
}

/// The External Agent Protocol relay (server role): owns every connection at `/agent/ws`,
/// pairs each session's host with its agents, and forwards between them.
///
/// - A connection joins with `relay.join` (`role` host or agent, `sessionId` default
///   `"default"`) and gets `relay.joined`; one host per session (a newer host replaces the
///   old one), any number of agents.
/// - Agent messages (`session.start`, `snapshot.get`, `tool.call`, `agent.message`,
///   `session.end`) go to the session's host; those with an `id` are remembered as requests
///   of that agent.
/// - Host messages with a `replyTo` go only to the agent that asked; the others
///   (`state.updated`, `user.message`, ...) go to every agent of the session.
/// - Frames are forwarded as received (the bytes are copied once from the driver's buffer and
///   shared between recipients); only the envelope is parsed, never the payload.
/// - Every accepted message, forward and relay-made message of a session produces a
///   [`LogRecord`] event *before* the output that sends it.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`];
/// - output: [`Machine::poll_output`] (frames, closes, [`RelayEvent`]s),
///   [`Machine::poll_timeout`];
/// - commands: [`Relay::close`], [`Relay::set_wall_clock`];
/// - getters: [`Relay::config`], [`Relay::connection_count`], [`Relay::session_count`],
///   [`Relay::sessions`], [`Relay::host_of`], [`Relay::agents_of`], [`Relay::membership`],
///   [`Relay::pending_requests`], [`Relay::pending_total`], [`Relay::next_timer`],
///   [`Relay::stats`].
pub struct Relay {
    config: RelayConfig,
    ids: Box<dyn IdGen>,
    clock: Monotonic,
    wall: (Instant, u64),
    conns: BTreeMap<ConnId, Conn>,
    sessions: BTreeMap<SessionId, Session>,
    /// Every outstanding request, by sequence number (= creation order = expiry order).
    pending: BTreeMap<u64, Pending>,
    next_seq: u64,
    join_deadlines: TimerSet<ConnId>,
    hello: Option<FrameBuf>,
    out: Outbox<RelayEvent>,
    stats: RelayStats,
    /// Study-log bytes (line-length bounds) per session since its last `session.ended`.
    log_usage: BTreeMap<SessionId, u64>,
    /// The message [`Machine::handle_frame`] is handling.
    inbound: Inbound,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("connections", &self.conns.len())
            .field("sessions", &self.sessions.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay. `now` and `unix_ms` anchor the wall clock of the study-log records (the
    /// machine reads no clock: `unix_ms` is the wall-clock time at `now`). `ids` names
    /// connections in `relay.presence` and `relay.disconnect` records.
    pub fn new(config: RelayConfig, ids: impl IdGen + 'static, now: Instant, unix_ms: u64) -> Self {
        let mut clock = Monotonic::new();
        clock.observe(now);
        let hello = config.hello.then(|| {
            let mut out = Vec::with_capacity(96);
            write_envelope(&mut out, types::RELAY_HELLO, None, &RelayHello::default());
            FrameBuf::json_from_vec(out)
        });
        Self {
            config,
            ids: Box::new(ids),
            clock,
            wall: (now, unix_ms),
            conns: BTreeMap::new(),
            sessions: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_seq: 0,
            join_deadlines: TimerSet::new(),
            hello,
            out: Outbox::new(),
            stats: RelayStats::default(),
            log_usage: BTreeMap::new(),
            inbound: Inbound::default(),
        }
    }

    // ---- getters -------------------------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.config
    }

    /// Open connections (joined or not, including ones the relay is closing).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Sessions with at least one member.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// The sessions with at least one member, in id order.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionId> {
        self.sessions.keys()
    }

    /// The host of `session`, if one is joined.
    pub fn host_of(&self, session: &str) -> Option<ConnId> {
        self.sessions.get(session).and_then(|s| s.host)
    }

    /// The agents of `session`, in join order.
    pub fn agents_of(&self, session: &str) -> &[ConnId] {
        self.sessions
            .get(session)
            .map_or(&[][..], |s| s.agents.as_slice())
    }

    /// The session and role `conn` has joined, if any.
    pub fn membership(&self, conn: ConnId) -> Option<(&SessionId, Role)> {
        match &self.conns.get(&conn)?.state {
            ConnState::Joined { session, role } => Some((session, *role)),
            _ => None,
        }
    }

    /// Requests of agent `conn` awaiting the host's reply.
    pub fn pending_requests(&self, conn: ConnId) -> usize {
        self.conns.get(&conn).map_or(0, |c| c.pending.len())
    }

    /// Requests of all agents awaiting a reply.
    pub fn pending_total(&self) -> usize {
        self.pending.len()
    }

    /// The next deadline and what it is for (the same time as [`Machine::poll_timeout`]).
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        let join = self
            .join_deadlines
            .next()
            .map(|(t, c)| (t, TimerKind::JoinDeadline(*c)));
        let expiry = self.pending.first_key_value().and_then(|(_, p)| {
            p.expires
                .map(|t| (t, TimerKind::RequestExpiry { agent: p.agent }))
        });
        match (join, expiry) {
            (Some(j), Some(e)) => Some(if e.0 < j.0 { e } else { j }),
            (j, e) => j.or(e),
        }
    }

    /// Counters.
    pub fn stats(&self) -> RelayStats {
        self.stats
    }

    // ---- commands ------------------------------------------------------------------------

    /// Re-anchors the wall clock of the log records: `unix_ms` is the wall-clock time at `now`.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        let now = self.clock.observe(now);
        self.wall = (now, unix_ms);
    }

    /// Closes `conn` with `code` and `reason`. It leaves its session at once (a host's
    /// outstanding requests fail as on a disconnect); its later frames are ignored.
    pub fn close(
        &mut self,
        conn: ConnId,
        code: CloseCode,
        reason: &'static str,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.clock.observe(now);
        match self.conns.get(&conn) {
            None
            | Some(Conn {
                state: ConnState::Closing,
                ..
            }) => return Err(CommandError::UnknownConnection),
            Some(_) => {}
        }
        self.out.close(conn, code, reason);
        self.leave(conn, true, now);
        self.set_closing(conn);
        Ok(())
    }

    // ---- helpers -------------------------------------------------------------------------

    /// The wall-clock time at `now`, in Unix milliseconds.
    fn unix_ms(&self, now: Instant) -> u64 {
        let (at, ms) = self.wall;
        let elapsed = now.saturating_duration_since(at).as_millis();
        ms.saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    fn session_of(&self, conn: ConnId) -> Option<SessionId> {
        match &self.conns.get(&conn)?.state {
            ConnState::Joined { session, .. } => Some(session.clone()),
            _ => None,
        }
    }

    fn set_closing(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.state = ConnState::Closing;
        }
        self.join_deadlines.cancel(&conn);
    }

    fn log(
        &mut self,
        session: &SessionId,
        direction: Direction,
        msg_type: &'static str,
        payload: Utf8Bytes,
        now: Instant,
    ) {
        if !self.config.log_records {
            return;
        }
        let bytes = line_len_bound(session.as_str(), msg_type, payload.len());
        // Messages (`in`, `out`) were checked against the cap before they were accepted;
        // the relay's own records that would pass it are dropped and counted.
        if direction == Direction::Internal && !self.log_fits(session, bytes) {
            self.stats.log_records_dropped += 1;
            return;
        }
        *self.log_usage.entry(session.clone()).or_default() += bytes;
        self.stats.log_records += 1;
        let at_unix_ms = self.unix_ms(now);
        self.out.event(RelayEvent::Log(LogRecord {
            session_id: session.clone(),
            direction,
            msg_type,
            payload,
            at_unix_ms,
        }));
    }

    /// Whether `bytes` more of study log fit `session`'s cap.
    fn log_fits(&self, session: &SessionId, bytes: u64) -> bool {
        let used = self.log_usage.get(session).copied().unwrap_or(0);
        self.config
            .limits
            .max_log_bytes_per_session
            .is_none_or(|cap| used.saturating_add(bytes) <= cap)
    }

    /// Whether the records of accepted message `route` (one `in`, one `out`) fit its
    /// session's log; `session.end` and `session.ended` always do, so a study can end.
    fn message_fits(&self, session: &SessionId, msg_type: &str, route: &Route<'_>) -> bool {
        if !self.config.log_records
            || msg_type == types::SESSION_END
            || msg_type == types::SESSION_ENDED
        {
            return true;
        }
        let one = line_len_bound(session.as_str(), msg_type, route.payload.get().len());
        self.log_fits(session, one.saturating_mul(2))
    }

    /// Forgets the usage of sessions without members once there are many of them.
    fn prune_log_usage(&mut self) {
        let bound = self.config.limits.max_sessions.saturating_mul(4).max(64);
        if self.log_usage.len() > bound {
            let live = &self.sessions;
            self.log_usage.retain(|s, _| live.contains_key(s));
        }
    }

    /// Sends a message the relay makes; a member's session logs it (internal) first.
    fn send_own<P: Serialize + ?Sized>(
        &mut self,
        conn: ConnId,
        msg_type: &'static str,
        reply_to: Option<&str>,
        payload: &P,
        now: Instant,
    ) {
        let mut buf = Vec::with_capacity(128);
        let range = write_envelope(&mut buf, msg_type, reply_to, payload);
        let bytes = Bytes::from(buf);
        if let Some(session) = self.session_of(conn) {
            let payload = Utf8Bytes::from_encoder(bytes.slice(range));
            self.log(&session, Direction::Internal, msg_type, payload, now);
        }
        self.out
            .send(conn, FrameBuf::Text(Utf8Bytes::from_encoder(bytes)));
    }

    fn send_error(
        &mut self,
        conn: ConnId,
        code: &ErrorCode,
        message: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        self.stats.errors_sent += 1;
        let payload = ErrorRef { code, message };
        self.send_own(conn, types::ERROR, reply_to, &payload, now);
    }

    fn violation(&mut self, conn: ConnId, error: ProtocolError) {
        self.out
            .event(RelayEvent::ProtocolViolation { conn, error });
    }

    /// Answers the message being handled with an `error`: the frame as any `error`, the
    /// study-log record (for a member's session) with the refused message's type and size
    /// added, never its payload.
    fn send_refusal(
        &mut self,
        conn: ConnId,
        code: &ErrorCode,
        message: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        self.stats.errors_sent += 1;
        let mut buf = Vec::with_capacity(128);
        write_envelope(
            &mut buf,
            types::ERROR,
            reply_to,
            &ErrorRef { code, message },
        );
        if let Some(session) = self.session_of(conn) {
            let record = RefusalRecord {
                code,
                message,
                refused_type: self.inbound.msg_type.as_deref(),
                refused_bytes: self.inbound.bytes,
            };
            let payload = serde_json::to_vec(&record).unwrap_or_default();
            let payload = Utf8Bytes::from_encoder(Bytes::from(payload));
            self.log(&session, Direction::Internal, types::ERROR, payload, now);
        }
        self.out.send(
            conn,
            FrameBuf::Text(Utf8Bytes::from_encoder(Bytes::from(buf))),
        );
    }

    /// Answers `error` with its code and `text`, then reports it.
    fn refuse(
        &mut self,
        conn: ConnId,
        error: ProtocolError,
        text: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        self.send_refusal(conn, &error.code(), text, reply_to, now);
        self.violation(conn, error);
    }

    /// Copies a received message once: the frame to forward, and its payload as a slice of
    /// the same bytes (for the log).
    fn copy_frame(route: &Route<'_>) -> (FrameBuf, Utf8Bytes) {
        let bytes = Bytes::copy_from_slice(route.text.as_bytes());
        let payload = Utf8Bytes::from_encoder(bytes.slice(route.payload_range()));
        (FrameBuf::Text(Utf8Bytes::from_encoder(bytes)), payload)
    }

    fn remove_pending(&mut self, seq: u64) -> Option<Pending> {
        let p = self.pending.remove(&seq)?;
        if let Some(s) = self.sessions.get_mut(&p.session) {
            if let Some(q) = s.by_id.get_mut(&*p.id) {
                q.retain(|x| *x != seq);
                if q.is_empty() {
                    s.by_id.remove(&*p.id);
                }
            }
        }
        if let Some(c) = self.conns.get_mut(&p.agent) {
            c.pending.retain(|x| *x != seq);
        }
        Some(p)
    }

    /// Answers every outstanding request of `session` with SESSION_NOT_ACTIVE (its host is
    /// gone); returns how many there were.
    fn fail_pending(&mut self, session: &SessionId, now: Instant) -> usize {
        let Some(s) = self.sessions.get(session) else {
            return 0;
        };
        let mut seqs: Vec<u64> = s.by_id.values().flatten().copied().collect();
        seqs.sort_unstable();
        for seq in &seqs {
            if let Some(p) = self.remove_pending(*seq) {
                self.send_error(
                    p.agent,
                    &ErrorCode::SESSION_NOT_ACTIVE,
                    texts::HOST_GONE,
                    Some(&p.id),
                    now,
                );
            }
        }
        seqs.len()
    }

    /// Sends the host of `session` the list of its agents (if enabled and there is a host).
    fn presence(&mut self, session: &SessionId, now: Instant) {
        if !self.config.presence {
            return;
        }
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let Some(host) = s.host else {
            return;
        };
        let agents: Vec<PresenceAgent> = s
            .agents
            .iter()
            .filter_map(|a| self.conns.get(a))
            .map(|c| PresenceAgent {
                id: c.client_id.clone().unwrap_or_default(),
                name: c.name.clone().unwrap_or_default(),
            })
            .collect();
        let payload = RelayPresence {
            session_id: session.as_str().to_owned(),
            agent_count: u32::try_from(agents.len()).unwrap_or(u32::MAX),
            agents,
        };
        self.send_own(host, types::RELAY_PRESENCE, None, &payload, now);
    }

    /// Takes `conn` out of its session. A host's outstanding requests fail; an agent's are
    /// forgotten and the host gets the new presence. `disconnected` adds a
    /// `relay.disconnect` record. The connection is left unjoined.
    fn leave(&mut self, conn: ConnId, disconnected: bool, now: Instant) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let ConnState::Joined { session, role } =
            std::mem::replace(&mut c.state, ConnState::Unjoined)
        else {
            return;
        };
        let own_pending = std::mem::take(&mut c.pending);
        if disconnected && self.config.log_records {
            let c = &self.conns[&conn];
            let record = DisconnectRecord {
                client_id: c.client_id.as_deref().unwrap_or_default(),
                role,
                client_name: c.name.as_deref(),
            };
            let payload = serde_json::to_vec(&record).unwrap_or_default();
            let payload = Utf8Bytes::from_encoder(Bytes::from(payload));
            self.log(
                &session,
                Direction::Internal,
                types::RELAY_DISCONNECT,
                payload,
                now,
            );
        }
        let failed = match role {
            Role::Host => {
                let was_host = self
                    .sessions
                    .get_mut(&session)
                    .filter(|s| s.host == Some(conn))
                    .map(|s| s.host = None)
                    .is_some();
                if was_host {
                    self.fail_pending(&session, now)
                } else {
                    0
                }
            }
            Role::Agent => {
                if let Some(s) = self.sessions.get_mut(&session) {
                    s.agents.retain(|a| *a != conn);
                }
                for seq in &own_pending {
                    self.remove_pending(*seq);
                }
                self.presence(&session, now);
                own_pending.len()
            }
        };
        self.out.event(RelayEvent::Left {
            conn,
            session: session.clone(),
            role,
            failed_requests: failed,
        });
        if self
            .sessions
            .get(&session)
            .is_some_and(|s| s.host.is_none() && s.agents.is_empty())
        {
            self.sessions.remove(&session);
            self.prune_log_usage();
        }
    }

    // ---- input ---------------------------------------------------------------------------

    fn on_join(&mut self, conn: ConnId, route: &Route<'_>, now: Instant) {
        let reply_to = route.id.as_deref();
        let Ok(fields) = serde_json::from_str::<JoinFields<'_>>(route.payload.get()) else {
            // Only a duplicated field gets here: the payload is known to be an object.
            let e = ProtocolError::InvalidJoin {
                reason: texts::INVALID_ROLE,
            };
            return self.refuse(conn, e, texts::INVALID_ROLE, reply_to, now);
        };
        let role = match fields.role.and_then(raw_str).as_deref() {
            Some("host") => Role::Host,
            Some("agent") => Role::Agent,
            _ => {
                let e = ProtocolError::InvalidJoin {
                    reason: texts::INVALID_ROLE,
                };
                return self.refuse(conn, e, texts::INVALID_ROLE, reply_to, now);
            }
        };
        let session = match fields.session_id.map(raw_str) {
            None => SessionId::default_session(),
            Some(None) => {
                let e = ProtocolError::InvalidJoin {
                    reason: texts::INVALID_SESSION_ID,
                };
                return self.refuse(conn, e, texts::INVALID_SESSION_ID, reply_to, now);
            }
            Some(Some(s)) => match s.trim() {
                "" => SessionId::default_session(),
                t if t.len() > self.config.limits.max_session_id_bytes => {
                    let e = ProtocolError::Limit {
                        limit: "max_session_id_bytes",
                    };
                    return self.refuse(conn, e, texts::SESSION_ID_TOO_LONG, reply_to, now);
                }
                t => SessionId::new(t),
            },
        };
        let requested_name = match role {
            Role::Host => None,
            Role::Agent => [fields.agent_name, fields.client_name, fields.name]
                .into_iter()
                .flatten()
                .filter_map(raw_str)
                .find_map(|n| {
                    let n = n.trim();
                    (!n.is_empty())
                        .then(|| truncate(n, self.config.limits.max_name_bytes).to_owned())
                }),
        };

        let current = self.membership(conn).map(|(s, r)| (s.clone(), r));
        let repeat = current.as_ref() == Some(&(session.clone(), role));
        if !repeat {
            let target = self.sessions.get(&session);
            if target.is_none() && self.sessions.len() >= self.config.limits.max_sessions {
                let e = ProtocolError::Limit {
                    limit: "max_sessions",
                };
                return self.refuse(conn, e, texts::TOO_MANY_SESSIONS, reply_to, now);
            }
            if role == Role::Agent
                && target
                    .is_some_and(|s| s.agents.len() >= self.config.limits.max_agents_per_session)
            {
                let e = ProtocolError::Limit {
                    limit: "max_agents_per_session",
                };
                return self.refuse(conn, e, texts::TOO_MANY_AGENTS, reply_to, now);
            }
            if current.is_some() {
                self.leave(conn, false, now);
            }
        }

        // The join is accepted: record it, then make it so.
        let join_payload = Utf8Bytes::copy_from_str(route.payload.get());
        self.log(
            &session,
            Direction::Internal,
            types::RELAY_JOIN,
            join_payload,
            now,
        );
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let client_id = match &c.client_id {
            Some(id) => id.clone(),
            None => {
                let id = self.ids.next_id().to_string();
                c.client_id = Some(id.clone());
                id
            }
        };
        c.name = match role {
            Role::Host => None,
            Role::Agent => Some(requested_name.unwrap_or_else(|| {
                let tail = client_id.len().saturating_sub(6);
                format!("agent-{}", client_id.get(tail..).unwrap_or_default())
            })),
        };
        let client_name = c.name.clone();
        self.join_deadlines.cancel(&conn);

        if !repeat {
            if role == Role::Host {
                let old = self.sessions.get(&session).and_then(|s| s.host);
                if let Some(old) = old.filter(|o| *o != conn) {
                    self.send_error(
                        old,
                        &ErrorCode::SESSION_NOT_ACTIVE,
                        texts::HOST_REPLACED,
                        None,
                        now,
                    );
                    self.out.close(old, CloseCode::NORMAL, "host-replaced");
                    self.leave(old, true, now);
                    self.set_closing(old);
                    self.out.event(RelayEvent::HostReplaced {
                        session: session.clone(),
                        old,
                        new: conn,
                    });
                }
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.state = ConnState::Joined {
                    session: session.clone(),
                    role,
                };
            }
            let s = self.sessions.entry(session.clone()).or_default();
            match role {
                Role::Host => s.host = Some(conn),
                Role::Agent => s.agents.push(conn),
            }
        }

        let joined = RelayJoined {
            role,
            session_id: session.as_str().to_owned(),
            client_name: client_name.clone(),
        };
        self.send_own(conn, types::RELAY_JOINED, reply_to, &joined, now);
        self.out.event(RelayEvent::Joined {
            conn,
            session: session.clone(),
            role,
            client_id,
            client_name,
        });
        self.presence(&session, now);
    }

    fn on_agent(
        &mut self,
        conn: ConnId,
        session: SessionId,
        msg_type: &'static str,
        route: &Route<'_>,
        now: Instant,
    ) {
        let reply_to = route.id.as_deref();
        if route.id.is_some()
            && self.pending_requests(conn) >= self.config.limits.max_pending_per_agent
        {
            let e = ProtocolError::Limit {
                limit: "max_pending_per_agent",
            };
            return self.refuse(conn, e, texts::TOO_MANY_PENDING, reply_to, now);
        }
        // Refused before it is logged: a message nobody receives is no study event.
        let Some(host) = self.sessions.get(&session).and_then(|s| s.host) else {
            self.send_refusal(
                conn,
                &ErrorCode::SESSION_NOT_ACTIVE,
                texts::NO_HOST,
                reply_to,
                now,
            );
            self.out.event(RelayEvent::Undelivered {
                from: conn,
                session,
                msg_type,
                reason: Undelivered::NoHost,
            });
            return;
        };
        if !self.message_fits(&session, msg_type, route) {
            let e = ProtocolError::Limit {
                limit: "max_log_bytes_per_session",
            };
            return self.refuse(conn, e, texts::LOG_FULL, reply_to, now);
        }
        let (frame, payload) = Self::copy_frame(route);
        self.log(&session, Direction::In, msg_type, payload.clone(), now);
        if let Some(id) = &route.id {
            let seq = self.next_seq;
            self.next_seq += 1;
            let id: Box<str> = id.as_ref().into();
            let expires = self.config.pending_timeout.map(|d| now + d);
            if let Some(s) = self.sessions.get_mut(&session) {
                s.by_id.entry(id.clone()).or_default().push_back(seq);
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.pending.push(seq);
            }
            self.pending.insert(
                seq,
                Pending {
                    session: session.clone(),
                    agent: conn,
                    id,
                    expires,
                },
            );
        }
        self.log(&session, Direction::Out, msg_type, payload, now);
        self.out.send(host, frame);
        self.stats.to_host += 1;
        self.out.event(RelayEvent::Forwarded {
            from: conn,
            session,
            msg_type,
            recipients: 1,
        });
    }

    fn on_host(
        &mut self,
        conn: ConnId,
        session: SessionId,
        msg_type: &'static str,
        route: &Route<'_>,
        now: Instant,
    ) {
        if !self.message_fits(&session, msg_type, route) {
            // The agent waiting for this reply is told too, rather than left to time out.
            let asker = route.reply_to.as_deref().and_then(|r| {
                let seq = self
                    .sessions
                    .get(&session)?
                    .by_id
                    .get(r)?
                    .front()
                    .copied()?;
                self.remove_pending(seq)
            });
            if let Some(p) = asker {
                self.send_error(
                    p.agent,
                    &ErrorCode::LIMIT_EXCEEDED,
                    texts::LOG_FULL,
                    Some(&p.id),
                    now,
                );
            }
            let e = ProtocolError::Limit {
                limit: "max_log_bytes_per_session",
            };
            return self.refuse(conn, e, texts::LOG_FULL, route.id.as_deref(), now);
        }
        let (frame, payload) = Self::copy_frame(route);
        self.log(&session, Direction::In, msg_type, payload.clone(), now);
        if msg_type == types::SESSION_ENDED {
            // The study session's log is complete: the cap counts the next one afresh.
            self.log_usage.remove(&session);
        }
        let recipients = if let Some(reply_to) = route.reply_to.as_deref() {
            // A reply goes to the agent that asked: the oldest outstanding request with
            // this id in the session.
            let seq = self
                .sessions
                .get(&session)
                .and_then(|s| s.by_id.get(reply_to))
                .and_then(|q| q.front().copied());
            let Some(p) = seq.and_then(|seq| self.remove_pending(seq)) else {
                self.out.event(RelayEvent::Undelivered {
                    from: conn,
                    session,
                    msg_type,
                    reason: Undelivered::UnknownReplyTo {
                        reply_to: truncate(reply_to, self.config.limits.max_id_bytes).to_owned(),
                    },
                });
                return;
            };
            self.log(&session, Direction::Out, msg_type, payload, now);
            self.out.send(p.agent, frame);
            1
        } else {
            // A push goes to every agent of the session.
            let n = self.sessions.get(&session).map_or(0, |s| s.agents.len());
            if n > 0 {
                self.log(&session, Direction::Out, msg_type, payload, now);
                if let Some(s) = self.sessions.get(&session) {
                    for a in &s.agents {
                        self.out.send(*a, frame.clone());
                    }
                }
            }
            n
        };
        self.stats.to_agents += recipients as u64;
        self.out.event(RelayEvent::Forwarded {
            from: conn,
            session,
            msg_type,
            recipients,
        });
    }
}

impl Relay {
    /// Handles one message of a connection that may send (see [`Machine::handle_frame`]).
    fn route_frame(
        &mut self,
        conn: ConnId,
        frame: Frame<'_>,
        state: Option<(SessionId, Role)>,
        within_rate: bool,
        now: Instant,
    ) {
        let version = if self.config.allow_missing_version {
            VersionRule::MayBeMissing
        } else {
            VersionRule::Required
        };
        let limit = self.config.limits.max_json_depth;
        let decoded =
            Route::decode(frame, self.config.limits.max_message_bytes, version).and_then(|route| {
                let t = &route.msg_type;
                let known = types::agent_to_host(t)
                    .or_else(|| types::host_to_agent(t))
                    .or_else(|| (t == types::RELAY_JOIN).then_some(types::RELAY_JOIN));
                self.inbound.msg_type = Some(match known {
                    Some(k) => k.into(),
                    None => truncate(t, MAX_ECHOED_TYPE).to_owned().into(),
                });
                // Deeper than a reader can read back: never forwarded, never logged.
                match check_json_depth(route.text.as_bytes(), limit) {
                    Ok(()) => Ok(route),
                    Err(_) => Err(DecodeError::TooDeep {
                        limit,
                        id: route.id.as_deref().map(str::to_owned),
                    }),
                }
            });
        let route = match decoded {
            Ok(route) => route,
            Err(e) => {
                let (code, text) = (e.code(), e.text());
                self.send_refusal(conn, &code, &text, e.reply_to(), now);
                return self.violation(conn, ProtocolError::Decode(e));
            }
        };
        let reply_to = route.id.as_deref();
        if !within_rate {
            let e = ProtocolError::Limit { limit: "rate" };
            return self.refuse(conn, e, texts::RATE_LIMITED, reply_to, now);
        }
        if reply_to.is_some_and(|id| id.len() > self.config.limits.max_id_bytes) {
            let e = ProtocolError::Limit {
                limit: "max_id_bytes",
            };
            return self.refuse(conn, e, texts::ID_TOO_LONG, None, now);
        }
        if route.msg_type == types::RELAY_JOIN {
            return self.on_join(conn, &route, now);
        }
        let echoed = || truncate(&route.msg_type, MAX_ECHOED_TYPE).to_owned();
        match state {
            None => {
                let e = ProtocolError::NotJoined { msg_type: echoed() };
                self.refuse(conn, e, texts::NOT_JOINED, reply_to, now);
            }
            Some((session, role)) => {
                let allowed = match role {
                    Role::Agent => types::agent_to_host(&route.msg_type),
                    Role::Host => types::host_to_agent(&route.msg_type),
                };
                match (allowed, role) {
                    (Some(t), Role::Agent) => self.on_agent(conn, session, t, &route, now),
                    (Some(t), Role::Host) => self.on_host(conn, session, t, &route, now),
                    (None, _) => {
                        let text =
                            format!("Unsupported message type for {role} role: {}", echoed());
                        let e = ProtocolError::TypeNotAllowed {
                            role,
                            msg_type: echoed(),
                        };
                        self.refuse(conn, e, &text, reply_to, now);
                    }
                }
            }
        }
    }
}

impl Machine for Relay {
    type Event = RelayEvent;

    /// Accepts the connection, or closes it at once: 1008 `unknown-path` if its path is not
    /// [`RelayConfig::path`], 1013 `server-full` (after an error) at `max_connections`.
    /// Otherwise sends `relay.hello` (if enabled) and starts its join deadline.
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conns.contains_key(&conn) {
            return;
        }
        if !self.config.accepts_path(&peer.path) {
            self.out.close(conn, CloseCode::POLICY, "unknown-path");
            self.out.event(RelayEvent::Refused {
                conn,
                reason: Refusal::WrongPath {
                    path: truncate(&peer.path, 256).to_owned(),
                },
            });
            return;
        }
        if self.conns.len() >= self.config.limits.max_connections {
            self.send_error(
                conn,
                &ErrorCode::LIMIT_EXCEEDED,
                texts::TOO_MANY_CONNECTIONS,
                None,
                now,
            );
            self.out
                .close(conn, CloseCode::TRY_AGAIN_LATER, "server-full");
            self.out.event(RelayEvent::Refused {
                conn,
                reason: Refusal::ServerFull,
            });
            return;
        }
        self.conns.insert(
            conn,
            Conn {
                state: ConnState::Unjoined,
                bucket: self.config.limits.rate.map(|r| TokenBucket::new(r, now)),
                client_id: None,
                name: None,
                pending: Vec::new(),
            },
        );
        if let Some(t) = self.config.join_timeout {
            self.join_deadlines.set(conn, now + t);
        }
        self.out.event(RelayEvent::Connected {
            conn,
            remote: peer.remote_addr,
        });
        if let Some(hello) = &self.hello {
            self.out.send(conn, hello.clone());
        }
    }

    /// Handles one message: size, rate and envelope checks, then `relay.join`, or forwarding
    /// by role. Every refusal is answered with an `error` (with `replyTo` when the message had
    /// an `id`) and reported as [`RelayEvent::ProtocolViolation`]; the connection stays open.
    /// Frames on unknown or closing connections are ignored.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        let rate = self.config.limits.rate;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let within_rate = match (&mut c.bucket, rate) {
            (Some(bucket), Some(rate)) => bucket.take(rate, now),
            _ => true,
        };
        let state = match &c.state {
            ConnState::Closing => return,
            ConnState::Unjoined => None,
            ConnState::Joined { session, role } => Some((session.clone(), *role)),
        };
        self.stats.received += 1;
        self.inbound = Inbound {
            msg_type: None,
            bytes: frame.len(),
        };
        self.route_frame(conn, frame, state, within_rate, now);
        self.inbound = Inbound::default();
    }

    /// Forgets `conn`: it leaves its session (a host's outstanding requests are answered
    /// SESSION_NOT_ACTIVE, an agent's forgotten) with a `relay.disconnect` record.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        if !self.conns.contains_key(&conn) {
            return;
        }
        self.leave(conn, true, now);
        self.conns.remove(&conn);
        self.join_deadlines.cancel(&conn);
        self.out.event(RelayEvent::Disconnected { conn });
    }

    /// Closes connections past their join deadline (1008 `join-required`) and forgets
    /// requests past [`RelayConfig::pending_timeout`]. Idempotent; an early call is a no-op.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(conn) = self.join_deadlines.pop_expired(now) {
            if let Some(c) = self.conns.get_mut(&conn) {
                if matches!(c.state, ConnState::Unjoined) {
                    c.state = ConnState::Closing;
                    self.out.close(conn, CloseCode::POLICY, "join-required");
                    self.violation(conn, ProtocolError::JoinTimeout);
                }
            }
        }
        while let Some((&seq, p)) = self.pending.first_key_value() {
            if p.expires.is_none_or(|t| t > now) {
                break;
            }
            if let Some(p) = self.remove_pending(seq) {
                self.out.event(RelayEvent::RequestExpired {
                    session: p.session,
                    agent: p.agent,
                    id: p.id.into(),
                });
            }
        }
    }

    /// The earliest join deadline or request expiry.
    fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(t, _)| t)
    }

    /// The next queued output: frames, closes and [`RelayEvent`]s, in the order they were
    /// made (a [`RelayEvent::Log`] always comes before the send it records).
    fn poll_output(&mut self) -> Option<Output<RelayEvent>> {
        self.out.pop()
    }
}
