//! The `Relay`: the server role at `/agent/ws`, pairing one host with the agents of a
//! session.
//!
//! This file is the [`Machine`] impl, the routing of each message, and the membership
//! transitions (join, leave, host replacement) that touch every sub-state at once; it is
//! about 800 lines because those transitions read best in one place. The state lives
//! in sub-states that own their data and timers: [`members`] (connections and sessions),
//! [`pending`] (requests awaiting the host, with their expiry), [`study_log`] (records, the
//! study session they belong to and the per-session cap), [`emit`] (outputs and counters), [`inbound`] (the message being
//! handled) and [`join`] (reading a `relay.join`).

mod emit;
mod inbound;
mod join;
mod members;
mod pending;
mod study_log;

use std::time::Instant;

use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, IdGen, Machine, Monotonic, Output, PeerInfo, Rate,
    TimerSet, Utf8Bytes,
};

use crate::codec::{truncate, write_envelope, Route};
use crate::config::RelayConfig;
use crate::error::{CommandError, ProtocolError};
use crate::event::{Refusal, RelayEvent, Undelivered};
use crate::id::{RequestId, SessionId};
use crate::log::Direction;
use crate::message::{types, ErrorCode, RelayHello, RelayJoined, Role};
use crate::texts;

pub use emit::RelayStats;

use emit::{copy_frame, frame_with_id, frame_without_reply_to, Emitter};
use inbound::{Inbound, MAX_ECHOED_TYPE};
use join::{read_join, JoinRequest};
use members::{Admitted, Members};
use pending::PendingRequests;
use study_log::{study_id, StudyLog};

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

/// The External Agent Protocol relay (server role): owns every connection at `/agent/ws`,
/// pairs each session's host with its agents, and forwards between them.
///
/// - A connection joins with `relay.join` (`role` host or agent, `sessionId` default
///   `"default"`) and gets `relay.joined`; one host per session (a newer host replaces the
///   old one), any number of agents.
/// - Agent messages (`session.start`, `snapshot.get`, `tool.call`, `agent.message`,
///   `session.end`) go to the session's host and are remembered as requests of that agent;
///   one without `id` is given one of the relay's (`relay-N`).
/// - Host messages with a `replyTo` go only to the agent that asked (without the relay's
///   `replyTo` if the agent sent no `id`); pushes (`state.updated`, `user.message`, a
///   `session.ended` without `replyTo`) go to every agent of the session; any other host
///   message without `replyTo` is dropped.
/// - Frames are forwarded as received (the bytes are copied once from the driver's buffer and
///   shared between recipients), but for the `id` added to a request that had none; only the
///   envelope is parsed, never the payload.
/// - Every accepted message, forward and relay-made message of a session produces a
///   [`LogRecord`](crate::LogRecord) event *before* the output that sends it.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`];
/// - output: [`Machine::poll_output`] (frames, closes, [`RelayEvent`]s),
///   [`Machine::poll_timeout`];
/// - commands: [`Relay::close`], [`Relay::set_wall_clock`];
/// - getters: [`Relay::config`], [`Relay::connection_count`], [`Relay::session_count`],
///   [`Relay::sessions`], [`Relay::host_of`], [`Relay::agents_of`], [`Relay::membership`],
///   [`Relay::study_session_of`],
///   [`Relay::pending_requests`], [`Relay::pending_total`], [`Relay::next_timer`],
///   [`Relay::stats`].
pub struct Relay {
    config: RelayConfig,
    /// The per-connection rate, from [`Limits::rate`](crate::Limits::rate).
    rate: Option<Rate>,
    ids: Box<dyn IdGen>,
    clock: Monotonic,
    members: Members,
    pending: PendingRequests,
    join_deadlines: TimerSet<ConnId>,
    hello: Option<FrameBuf>,
    /// Frames, events, study-log records and counters.
    emit: Emitter,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("connections", &self.members.connection_count())
            .field("sessions", &self.members.session_count())
            .field("pending", &self.pending.total())
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
        let study_log = StudyLog::new(
            config.log_records,
            config.limits.max_log_bytes_per_session,
            now,
            unix_ms,
        );
        Self {
            rate: config.limits.rate.map(Rate::from),
            config,
            ids: Box::new(ids),
            clock,
            members: Members::default(),
            pending: PendingRequests::default(),
            join_deadlines: TimerSet::new(),
            hello,
            emit: Emitter::new(study_log),
        }
    }

    // ---- getters -------------------------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.config
    }

    /// Open connections (joined or not, including ones the relay is closing).
    pub fn connection_count(&self) -> usize {
        self.members.connection_count()
    }

    /// Sessions with at least one member.
    pub fn session_count(&self) -> usize {
        self.members.session_count()
    }

    /// The sessions with at least one member, in id order.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionId> {
        self.members.sessions()
    }

    /// The host of `session`, if one is joined.
    pub fn host_of(&self, session: &str) -> Option<ConnId> {
        self.members.host_of(session)
    }

    /// The agents of `session`, in join order.
    pub fn agents_of(&self, session: &str) -> &[ConnId] {
        self.members.agents_of(session)
    }

    /// The session and role `conn` has joined, if any.
    pub fn membership(&self, conn: ConnId) -> Option<(&SessionId, Role)> {
        self.members.membership(conn)
    }

    /// The study session in progress in relay session `session`: the `sessionId` of its
    /// host's last `session.started`, until its `session.ended`. The relay's log records of
    /// `session` carry it as their `sessionId` meanwhile.
    pub fn study_session_of(&self, session: &str) -> Option<&SessionId> {
        self.emit.study_log.study_of(session)
    }

    /// Requests of agent `conn` awaiting the host's reply.
    pub fn pending_requests(&self, conn: ConnId) -> usize {
        self.pending.of_agent(conn)
    }

    /// Requests of all agents awaiting a reply.
    pub fn pending_total(&self) -> usize {
        self.pending.total()
    }

    /// The next deadline and what it is for (the same time as [`Machine::poll_timeout`]).
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        let join = self
            .join_deadlines
            .next()
            .map(|(t, c)| (t, TimerKind::JoinDeadline(*c)));
        let expiry = self
            .pending
            .next_expiry()
            .map(|(t, agent)| (t, TimerKind::RequestExpiry { agent }));
        match (join, expiry) {
            (Some(j), Some(e)) => Some(if e.0 < j.0 { e } else { j }),
            (j, e) => j.or(e),
        }
    }

    /// Counters.
    pub fn stats(&self) -> RelayStats {
        self.emit.stats
    }

    // ---- commands ------------------------------------------------------------------------

    /// Re-anchors the wall clock of the log records: `unix_ms` is the wall-clock time at `now`.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        let now = self.clock.observe(now);
        self.emit.study_log.set_wall_clock(now, unix_ms);
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
        if !self.members.is_open(conn) {
            return Err(CommandError::UnknownConnection);
        }
        self.emit.out.close(conn, code, reason);
        self.leave(conn, true, now);
        self.set_closing(conn);
        Ok(())
    }

    // ---- output helpers ------------------------------------------------------------------

    fn set_closing(&mut self, conn: ConnId) {
        self.members.set_closing(conn);
        self.join_deadlines.cancel(&conn);
    }

    /// Refuses the message being handled: `error` is answered with its code and `text`
    /// (`replyTo` the message's `id`), then reported.
    fn refuse(
        &mut self,
        conn: ConnId,
        error: ProtocolError,
        text: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        let members = &self.members;
        self.emit.refuse(members, conn, error, text, reply_to, now);
    }

    /// Refuses the message being handled for passing `limit`, a [`Limits`](crate::Limits)
    /// field.
    fn over_limit(
        &mut self,
        conn: ConnId,
        limit: &'static str,
        text: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        self.refuse(conn, ProtocolError::Limit { limit }, text, reply_to, now);
    }

    /// Whether the records of accepted message `route` fit its session's study log.
    fn fits_log(&self, session: &SessionId, msg_type: &str, route: &Route<'_>) -> bool {
        let len = route.payload.get().len();
        self.emit.study_log.message_fits(session, msg_type, len)
    }

    /// Refuses the message being handled: its session's study log is full.
    fn log_full(&mut self, conn: ConnId, reply_to: Option<&str>, now: Instant) {
        let limit = "max_log_bytes_per_session";
        self.over_limit(conn, limit, texts::LOG_FULL, reply_to, now);
    }

    /// Sends the host of `session` the list of its agents (if enabled and there is a host).
    fn presence(&mut self, session: &SessionId, now: Instant) {
        if self.config.presence {
            self.emit.presence(&self.members, session, now);
        }
    }

    // ---- membership ----------------------------------------------------------------------

    /// Takes `conn` out of its session. A host's outstanding requests fail (each agent gets
    /// SESSION_NOT_ACTIVE); an agent's are forgotten and the host gets the new presence.
    /// `disconnected` adds a `relay.disconnect` record. The connection is left unjoined.
    fn leave(&mut self, conn: ConnId, disconnected: bool, now: Instant) {
        let Some((session, role)) = self.members.unjoin(conn) else {
            return;
        };
        if disconnected {
            self.emit
                .log_disconnect(&self.members, conn, &session, role, now);
        }
        let failed = match role {
            Role::Host if self.members.unseat(conn, &session, role) => {
                let failed = self.pending.take_session(&session);
                self.emit.host_gone(&self.members, &failed, now)
            }
            Role::Host => 0,
            Role::Agent => {
                self.members.unseat(conn, &session, role);
                let failed = self.pending.forget_agent(conn);
                self.presence(&session, now);
                failed
            }
        };
        self.emit.out.event(RelayEvent::Left {
            conn,
            session: session.clone(),
            role,
            failed_requests: failed,
        });
        if self.members.remove_if_empty(&session) {
            // Forgets the log usage of sessions without members once there are many.
            let bound = self.config.limits.max_sessions.saturating_mul(4).max(64);
            let members = &self.members;
            self.emit.study_log.prune(bound, |s| members.has_session(s));
        }
    }

    /// A newer host takes `session` from `old`: SESSION_NOT_ACTIVE, close 1000, and `old`
    /// leaves as on a disconnect.
    fn replace_host(&mut self, session: &SessionId, old: ConnId, new: ConnId, now: Instant) {
        self.emit.send_error(
            &self.members,
            old,
            &ErrorCode::SESSION_NOT_ACTIVE,
            texts::HOST_REPLACED,
            None,
            now,
        );
        self.emit.out.close(old, CloseCode::NORMAL, "host-replaced");
        self.leave(old, true, now);
        self.set_closing(old);
        self.emit.out.event(RelayEvent::HostReplaced {
            session: session.clone(),
            old,
            new,
        });
    }

    // ---- input ---------------------------------------------------------------------------

    fn on_join(&mut self, conn: ConnId, route: &Route<'_>, now: Instant) {
        let reply_to = route.id.as_deref();
        let JoinRequest {
            role,
            session,
            name,
        } = match read_join(route.payload, &self.config.limits) {
            Ok(join) => join,
            Err((e, text)) => return self.refuse(conn, e, text, reply_to, now),
        };
        let current = self.membership(conn).map(|(s, r)| (s.clone(), r));
        let repeat = current.as_ref() == Some(&(session.clone(), role));
        if !repeat {
            let limits = &self.config.limits;
            let room = self.members.room_for(
                &session,
                role,
                limits.max_sessions,
                limits.max_agents_per_session,
            );
            if let Err((limit, text)) = room {
                return self.over_limit(conn, limit, text, reply_to, now);
            }
            if current.is_some() {
                self.leave(conn, false, now);
            }
        }

        // The join is accepted: record it, then make it so.
        let join_payload = Utf8Bytes::copy_from_str(route.payload.get());
        self.emit.log(
            &session,
            Direction::Internal,
            types::RELAY_JOIN,
            join_payload,
            now,
        );
        let Some((client_id, client_name)) = self.members.name(conn, role, name, &mut *self.ids)
        else {
            return;
        };
        self.join_deadlines.cancel(&conn);
        if !repeat {
            if role == Role::Host {
                if let Some(old) = self
                    .members
                    .host_of(session.as_str())
                    .filter(|o| *o != conn)
                {
                    self.replace_host(&session, old, conn, now);
                }
            }
            self.members.seat(conn, &session, role);
        }

        let joined = RelayJoined {
            role,
            session_id: session.as_str().to_owned(),
            client_name: client_name.clone(),
        };
        self.emit.send_own(
            &self.members,
            conn,
            types::RELAY_JOINED,
            reply_to,
            &joined,
            now,
        );
        self.emit.out.event(RelayEvent::Joined {
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
        if self.pending.of_agent(conn) >= self.config.limits.max_pending_per_agent {
            return self.over_limit(
                conn,
                "max_pending_per_agent",
                texts::TOO_MANY_PENDING,
                reply_to,
                now,
            );
        }
        // Refused before it is logged: a message nobody receives is no study event.
        let Some(host) = self.members.host_of(session.as_str()) else {
            self.emit.send_refusal(
                &self.members,
                conn,
                &ErrorCode::SESSION_NOT_ACTIVE,
                texts::NO_HOST,
                reply_to,
                now,
            );
            self.emit.out.event(RelayEvent::Undelivered {
                from: conn,
                session,
                msg_type,
                reason: Undelivered::NoHost,
            });
            return;
        };
        if !self.fits_log(&session, msg_type, route) {
            return self.log_full(conn, reply_to, now);
        }
        // Every request is remembered, so its answer reaches only this agent; one sent
        // without `id` is forwarded with one of the relay's.
        let (id, minted) = match route.id.as_deref() {
            Some(id) => (id.to_owned(), false),
            None => (self.pending.mint(&session), true),
        };
        let (frame, payload) = if minted {
            frame_with_id(route, &id)
        } else {
            copy_frame(route)
        };
        self.emit
            .log(&session, Direction::In, msg_type, payload.clone(), now);
        let expires = self.config.pending_timeout.map(|d| now + d);
        self.pending.insert(&session, conn, &id, minted, expires);
        self.emit
            .log(&session, Direction::Out, msg_type, payload, now);
        self.emit.out.send(host, frame);
        self.emit.stats.to_host += 1;
        self.emit.out.event(RelayEvent::Forwarded {
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
        if !self.fits_log(&session, msg_type, route) {
            // The agent waiting for this reply is told too, rather than left to time out.
            let asker = route
                .reply_to
                .as_deref()
                .and_then(|r| self.pending.take_answered(&session, r));
            if let Some(p) = asker {
                self.emit.send_error(
                    &self.members,
                    p.agent,
                    &ErrorCode::LIMIT_EXCEEDED,
                    texts::LOG_FULL,
                    p.reply_to(),
                    now,
                );
            }
            return self.log_full(conn, route.id.as_deref(), now);
        }
        if msg_type == types::SESSION_STARTED {
            // A study session: its records, this one first, carry its id (spec §6).
            if let Some(study) = study_id(route, self.config.limits.max_session_id_bytes) {
                self.emit.study_log.study_started(&session, study);
            }
        }
        let (frame, payload) = copy_frame(route);
        self.emit
            .log(&session, Direction::In, msg_type, payload.clone(), now);
        if msg_type == types::SESSION_ENDED {
            // The study session's log is complete: the cap counts the next one afresh.
            self.emit.study_log.session_ended(&session);
        }
        let delivered = if let Some(reply_to) = route.reply_to.as_deref() {
            // A reply goes to the agent that asked: the oldest outstanding request with
            // this id in the session.
            match self.pending.take_answered(&session, reply_to) {
                None => {
                    self.emit.out.event(RelayEvent::Undelivered {
                        from: conn,
                        session: session.clone(),
                        msg_type,
                        reason: Undelivered::UnknownReplyTo {
                            reply_to: RequestId::new(truncate(
                                reply_to,
                                self.config.limits.max_id_bytes,
                            )),
                        },
                    });
                    None
                }
                Some(p) => {
                    // The answer to a request sent without `id` loses the relay's `replyTo`.
                    let (frame, payload) = if p.minted {
                        frame_without_reply_to(route)
                    } else {
                        (frame, payload)
                    };
                    self.emit
                        .log(&session, Direction::Out, msg_type, payload, now);
                    self.emit.out.send(p.agent, frame);
                    Some(1)
                }
            }
        } else if !types::is_push(msg_type) {
            // An answer naming no request: never sent to every agent.
            self.emit.out.event(RelayEvent::Undelivered {
                from: conn,
                session: session.clone(),
                msg_type,
                reason: Undelivered::NoReplyTo,
            });
            None
        } else {
            // A push goes to every agent of the session.
            let n = self.members.agents_of(session.as_str()).len();
            if n > 0 {
                self.emit
                    .log(&session, Direction::Out, msg_type, payload, now);
                for a in self.members.agents_of(session.as_str()) {
                    self.emit.out.send(*a, frame.clone());
                }
            }
            Some(n)
        };
        if let Some(recipients) = delivered {
            self.emit.stats.to_agents += recipients as u64;
            self.emit.out.event(RelayEvent::Forwarded {
                from: conn,
                session: session.clone(),
                msg_type,
                recipients,
            });
        }
        if msg_type == types::SESSION_ENDED {
            // Whether or not an agent got it, the host ended the study session.
            self.emit.study_log.study_ended(&session);
        }
    }

    /// Handles one message of a connection that may send (see [`Machine::handle_frame`]).
    fn route_frame(
        &mut self,
        conn: ConnId,
        frame: Frame<'_>,
        state: Option<(SessionId, Role)>,
        within_rate: bool,
        now: Instant,
    ) {
        let decoded = self.emit.inbound.decode(frame, &self.config);
        let route = match decoded {
            Ok(route) => route,
            Err(e) => {
                let (code, text) = (e.code(), e.text());
                self.emit
                    .send_refusal(&self.members, conn, &code, &text, e.reply_to(), now);
                return self.emit.violation(conn, ProtocolError::Decode(e));
            }
        };
        let reply_to = route.id.as_deref();
        if !within_rate {
            return self.over_limit(conn, "rate", texts::RATE_LIMITED, reply_to, now);
        }
        if reply_to.is_some_and(|id| id.len() > self.config.limits.max_id_bytes) {
            return self.over_limit(conn, "max_id_bytes", texts::ID_TOO_LONG, None, now);
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
        if self.members.contains(conn) {
            return;
        }
        if !self.config.accepts_path(&peer.path) {
            self.emit.out.close(conn, CloseCode::POLICY, "unknown-path");
            self.emit.out.event(RelayEvent::Refused {
                conn,
                reason: Refusal::WrongPath {
                    path: truncate(&peer.path, 256).to_owned(),
                },
            });
            return;
        }
        if self.members.connection_count() >= self.config.limits.max_connections {
            self.emit.send_error(
                &self.members,
                conn,
                &ErrorCode::LIMIT_EXCEEDED,
                texts::TOO_MANY_CONNECTIONS,
                None,
                now,
            );
            self.emit
                .out
                .close(conn, CloseCode::TRY_AGAIN_LATER, "server-full");
            self.emit.out.event(RelayEvent::Refused {
                conn,
                reason: Refusal::ServerFull,
            });
            return;
        }
        self.members.insert(conn, self.rate.is_some(), now);
        if let Some(t) = self.config.join_timeout {
            self.join_deadlines.set(conn, now + t);
        }
        self.emit.out.event(RelayEvent::Connected {
            conn,
            remote: peer.remote_addr,
        });
        if let Some(hello) = &self.hello {
            self.emit.out.send(conn, hello.clone());
        }
    }

    /// Handles one message: size, rate and envelope checks, then `relay.join`, or forwarding
    /// by role. Every refusal is answered with an `error` (with `replyTo` when the message had
    /// an `id`) and reported as [`RelayEvent::ProtocolViolation`]; the connection stays open.
    /// Frames on unknown or closing connections are ignored.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        let Some(Admitted {
            within_rate,
            membership,
        }) = self.members.admit_frame(conn, self.rate.as_ref(), now)
        else {
            return;
        };
        self.emit.stats.received += 1;
        self.emit.inbound = Inbound::new(frame.len());
        self.route_frame(conn, frame, membership, within_rate, now);
        self.emit.inbound = Inbound::default();
    }

    /// Forgets `conn`: it leaves its session (a host's outstanding requests are answered
    /// SESSION_NOT_ACTIVE, an agent's forgotten) with a `relay.disconnect` record.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        if !self.members.contains(conn) {
            return;
        }
        self.leave(conn, true, now);
        self.members.remove(conn);
        self.join_deadlines.cancel(&conn);
        self.emit.out.event(RelayEvent::Disconnected { conn });
    }

    /// Closes connections past their join deadline (1008 `join-required`) and forgets
    /// requests past [`RelayConfig::pending_timeout`]. Idempotent; an early call is a no-op.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(conn) = self.join_deadlines.pop_expired(now) {
            if self.members.close_if_unjoined(conn) {
                self.emit
                    .out
                    .close(conn, CloseCode::POLICY, "join-required");
                self.emit.violation(conn, ProtocolError::JoinTimeout);
            }
        }
        while let Some(p) = self.pending.pop_expired(now) {
            self.emit.out.event(RelayEvent::RequestExpired {
                session: p.session,
                agent: p.agent,
                id: RequestId::new(p.id),
            });
        }
    }

    /// The earliest join deadline or request expiry.
    /// Re-anchors the wall clock of study-log records ([`set_wall_clock`](Self::set_wall_clock)).
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.set_wall_clock(now, unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(t, _)| t)
    }

    /// The next queued output: frames, closes and [`RelayEvent`]s, in the order they were
    /// made (a [`RelayEvent::Log`] always comes before the send it records).
    fn poll_output(&mut self) -> Option<Output<RelayEvent>> {
        self.emit.out.pop()
    }
}
