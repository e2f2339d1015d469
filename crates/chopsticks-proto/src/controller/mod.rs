//! The `Controller`: the server role, owning every agent connection.
//!
//! The controller delegates to three sub-states that own their data and deadlines:
//! [`registry`] (connections, caps, rate windows, the live agents, hello and stale
//! deadlines), [`sessions`] (bindings and selection) and [`requests`] (pending requests,
//! their frames and timeouts). This module routes input to them and keeps what crosses
//! them: an agent that leaves frees its sessions and fails its requests; a start request
//! that fails frees the binding it made. Just over 700 lines because those crossings and
//! the routing of every agent message read best together.

mod handshake;
mod registry;
mod requests;
mod sessions;

use std::time::{Duration, Instant};

use agentwire_core::{
    CloseCode, ConnId, Frame, Id128, IdGen, Machine, Monotonic, Outbox, Output, PeerInfo,
    RotatingSecrets,
};
use serde::Serialize;

use self::handshake::Verdict;
use self::registry::{ConnTimer, Connect, Rate, Registry, Upsert};
use self::requests::{Answer, Pending, Requests};
use self::sessions::Sessions;
use crate::config::ControllerConfig;
use crate::error::{CommandError, DecodeError, ProtocolError};
use crate::event::{ControllerEvent, DropReason};
use crate::id::AgentId;
use crate::message::{
    AgentMessage, ControllerMessage, ErrorMessage, Event, Hello, Resp, SessionKind,
};
use crate::ops::{session_kind_of, starts_session};
use crate::texts;

pub use self::registry::LiveAgent;
pub use self::sessions::{Session, SessionKey};

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

impl From<ConnTimer> for TimerKind {
    fn from(t: ConnTimer) -> Self {
        match t {
            ConnTimer::Hello(conn) => Self::Hello(conn),
            ConnTimer::Stale(conn) => Self::Stale(conn),
        }
    }
}

/// How a request ended without an answer.
#[derive(Debug, Clone, Copy)]
enum Unanswered {
    /// Its agent went away (`agent-offline`).
    Offline,
    /// Its deadline passed (`agent-timeout`).
    TimedOut,
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
    /// The runner secrets valid now (current and retiring).
    secrets: RotatingSecrets,
    clock: Monotonic,
    out: Outbox<ControllerEvent>,
    /// Encode buffer of `error` messages.
    scratch: Vec<u8>,
    registry: Registry,
    sessions: Sessions,
    requests: Requests,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("connections", &self.registry.connection_count())
            .field("agents", &self.registry.agent_count())
            .field("pending", &self.requests.len())
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller with `config`, taking request ids from `ids` (the transport passes
    /// `UuidV4Ids`; tests pass `SequentialIds`).
    pub fn new(config: ControllerConfig, ids: impl IdGen + 'static) -> Self {
        Self {
            sessions: Sessions::new(config.limits.max_sessions),
            requests: Requests::new(Box::new(ids), config.request_timeout),
            secrets: RotatingSecrets::new(config.runner_secrets.iter().cloned()),
            cfg: config,
            clock: Monotonic::new(),
            out: Outbox::new(),
            scratch: Vec::with_capacity(512),
            registry: Registry::default(),
        }
    }

    /// The configuration (its `runner_secrets` are the ones the controller started with).
    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// The runner secrets accepted now: current ones, and removed ones until their overlap
    /// ends.
    pub fn runner_secrets(&self) -> &RotatingSecrets {
        &self.secrets
    }

    /// Replaces the accepted runner secrets at `now`: a secret no longer listed is still
    /// accepted until `now + overlap` and refused after. Every `hello` (the first and each
    /// heartbeat) is checked, so an agent still on a retired secret is refused at its
    /// first `hello` after the overlap. Once a secret is required it stays required: an
    /// empty list refuses every agent after the overlap.
    pub fn rotate_runner_secrets<S: Into<String>>(
        &mut self,
        secrets: impl IntoIterator<Item = S>,
        overlap: Duration,
        now: Instant,
    ) {
        let now = self.clock.observe(now);
        self.secrets.rotate(secrets, overlap, now);
    }

    // ----- getters -----

    /// Live agents, ordered by agent id.
    pub fn agents(&self) -> impl Iterator<Item = &LiveAgent> {
        self.registry.agents()
    }

    /// One live agent.
    pub fn agent(&self, agent_id: &str) -> Option<&LiveAgent> {
        self.registry.agent(agent_id)
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
        self.registry.last_seen(agent_id)
    }

    /// Requests awaiting a response from `agent_id` (on its current connection).
    pub fn pending_for(&self, agent_id: &str) -> usize {
        self.registry.pending_for(agent_id)
    }

    /// Requests awaiting a response.
    pub fn pending_requests(&self) -> usize {
        self.requests.len()
    }

    /// Open connections (registered or not).
    pub fn connection_count(&self) -> usize {
        self.registry.connection_count()
    }

    /// The next deadline and what it is for (for tracing).
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        let conn_timer = self.registry.next_timer().map(|(t, k)| (t, k.into()));
        let request = self
            .requests
            .next_timer()
            .map(|(t, id)| (t, TimerKind::Request(id)));
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
        let max = self.cfg.limits.max_pending_per_agent;
        let (conn, agent_id, pending) = self.registry.pending_slot(agent_id, max)?;
        let (id, frame) = self.requests.issue(conn, agent_id, op, data, now)?;
        *pending += 1;
        self.out.send(conn, frame);
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
    /// ([`ControllerEvent::SessionBound`] with [`BindSource::Selection`](crate::BindSource::Selection)),
    /// as the real controller does: real agents never send `add`. Call it for an op that
    /// starts a session (see [`crate::ops`]); [`request_for_session`](Self::request_for_session)
    /// does both.
    pub fn select_agent(
        &mut self,
        guild_id: &str,
        voice_channel_id: &str,
    ) -> Result<AgentId, CommandError> {
        self.select_agent_for(SessionKind::Music, guild_id, voice_channel_id)
    }

    /// [`select_agent`](Self::select_agent) for a session of `kind`.
    pub fn select_agent_for(
        &mut self,
        kind: SessionKind,
        guild_id: &str,
        voice_channel_id: &str,
    ) -> Result<AgentId, CommandError> {
        let key = SessionKey::new(kind, guild_id, voice_channel_id);
        let (agent, bound) = self.sessions.choose(&key, &self.registry)?;
        if !bound {
            self.sessions
                .bind_selected(key, &agent, None, &mut self.out);
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
    /// binding is undone ([`FreeReason::StartFailed`](crate::FreeReason::StartFailed)). Any
    /// other op goes to the agent already bound, or fails with [`CommandError::NoSession`].
    pub fn request_for_session(
        &mut self,
        guild_id: &str,
        voice_channel_id: &str,
        op: &str,
        data: impl Serialize,
        now: Instant,
    ) -> Result<(AgentId, Id128), CommandError> {
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
        let (agent, bound) = self.sessions.choose(&key, &self.registry)?;
        let id = self.request(&agent, op, data, now)?;
        if bound {
            if !self.sessions.restart(&key, id) {
                return Ok((agent, id));
            }
        } else {
            self.sessions
                .bind_selected(key.clone(), &agent, Some(id), &mut self.out);
        }
        self.requests.mark_start(id, key);
        Ok((agent, id))
    }

    /// Records that `conn` is alive now. The driver's WebSocket pongs do this through
    /// [`Machine::handle_pong`]; a caller with its own liveness signal can too.
    pub fn touch(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        self.registry.touch(conn, now);
    }

    // ----- what crosses the sub-states -----

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
            .unwrap_or((CloseCode::POLICY, texts::CLOSE_PROTOCOL_ERROR));
        self.out.close(conn, code, reason);
        if let Some(agent_id) = self.registry.start_closing(conn) {
            let reason = match error {
                ProtocolError::Stale => DropReason::Stale,
                _ => DropReason::Rejected,
            };
            self.drop_agent_if_on(&agent_id, conn, reason);
        }
    }

    /// Removes `agent_id` if it is live on `conn` (not if a newer connection replaced it):
    /// its sessions end and its requests fail with it.
    fn drop_agent_if_on(&mut self, agent_id: &AgentId, conn: ConnId, reason: DropReason) {
        if !self.registry.remove_agent_if_on(agent_id, conn) {
            return;
        }
        self.sessions.free_agent(agent_id, &mut self.out);
        self.fail_pending_on(conn);
        self.out.event(ControllerEvent::AgentDropped {
            agent_id: agent_id.clone(),
            reason,
        });
    }

    /// Fails at once every request that went out on `conn`, in the order they were sent.
    fn fail_pending_on(&mut self, conn: ConnId) {
        for (id, p) in self.requests.fail_on(conn) {
            self.unanswered(id, p, Unanswered::Offline);
        }
    }

    /// Request `id` ended without an answer: a start it made is undone, and the event says
    /// why.
    fn unanswered(&mut self, id: Id128, p: Pending, how: Unanswered) {
        self.registry.unpend(p.conn);
        if let Some(key) = &p.starts {
            self.sessions
                .start_settled(key, id, &p.agent_id, false, &mut self.out);
        }
        let (agent_id, op) = (p.agent_id, p.op);
        self.out.event(match how {
            Unanswered::Offline => ControllerEvent::RequestFailed {
                id,
                agent_id,
                op,
                error: texts::AGENT_OFFLINE,
            },
            Unanswered::TimedOut => ControllerEvent::RequestTimedOut { id, agent_id, op },
        });
    }

    // ----- input -----

    fn on_decode_error(&mut self, conn: ConnId, registered: bool, error: DecodeError) {
        match error {
            DecodeError::InvalidHello(bad) => match handshake::check_invalid(&self.cfg, &bad) {
                Verdict::Rejected(text, error) => self.reject(conn, &text, error),
                // Ignored (no agentId); a hello with a wrong-typed field is never accepted.
                Verdict::Ignored | Verdict::Accepted { .. } => {
                    self.violation(conn, ProtocolError::MissingAgentId)
                }
            },
            DecodeError::UnknownType | DecodeError::NotAnObject if !registered => {
                let text = error.reply_text().unwrap_or(texts::ERR_UNKNOWN_TYPE);
                self.reject(conn, text, ProtocolError::Decode(error));
            }
            DecodeError::UnknownType | DecodeError::NotAnObject | DecodeError::InvalidFields(_) => {
                // After hello (unknown types) or any time (bad fields): ignored, no reply.
                self.violation(conn, ProtocolError::Decode(error));
            }
            _ => {
                let text = error.reply_text().unwrap_or(texts::ERR_INVALID_JSON);
                self.send_error(conn, text);
                self.violation(conn, ProtocolError::Decode(error));
            }
        }
    }

    /// Checks a `hello` in the real controller's order (see [`handshake`]) and registers
    /// the agent it announces.
    fn on_hello(&mut self, conn: ConnId, hello: Hello, now: Instant) {
        match handshake::check(&self.cfg, &self.secrets, &hello, now) {
            Verdict::Ignored => self.violation(conn, ProtocolError::MissingAgentId),
            Verdict::Rejected(text, error) => self.reject(conn, &text, error),
            Verdict::Accepted { agent_id, version } => {
                self.register(conn, agent_id, version, hello, now)
            }
        }
    }

    fn register(
        &mut self,
        conn: ConnId,
        agent_id: AgentId,
        version: String,
        mut hello: Hello,
        now: Instant,
    ) {
        // The same connection switching agent id: the old registration ends first.
        if let Some(previous) = self.registry.claim_conn(conn, &agent_id) {
            self.drop_agent_if_on(&previous, conn, DropReason::Rejected);
        }
        let max_guilds = self.cfg.limits.max_guilds_per_agent;
        let guilds = std::mem::take(&mut hello.guild_ids);
        let guild_ids = Registry::capped_guilds(guilds, max_guilds, conn, &mut self.out);
        let record = LiveAgent::from_hello(agent_id.clone(), conn, version.clone(), hello);
        let replaced = match self.registry.upsert(record, now + self.cfg.stale_after) {
            Upsert::Updated(changed) => {
                if changed {
                    self.out.event(ControllerEvent::AgentUpdated {
                        agent_id: agent_id.clone(),
                    });
                }
                None
            }
            Upsert::Replaced(old) => {
                self.out
                    .close(old, CloseCode::NORMAL, texts::CLOSE_REPLACED);
                self.fail_pending_on(old);
                Some(Some(old))
            }
            Upsert::New => Some(None),
        };
        if let Some(replaced) = replaced {
            self.out.event(ControllerEvent::AgentRegistered {
                agent_id: agent_id.clone(),
                conn,
                replaced,
                protocol_version: version,
            });
        }
        self.registry
            .set_guilds(&agent_id, guild_ids, &mut self.out);
    }

    fn on_resp(&mut self, conn: ConnId, resp: Resp) {
        let (id, p) = match self.requests.answer(conn, &resp.id) {
            Answer::Unknown => return,
            Answer::WrongConn => {
                return self.violation(conn, ProtocolError::WrongResponder { id: resp.id })
            }
            Answer::Answered(id, p) => (id, p),
        };
        self.registry.unpend(p.conn);
        if let Some(key) = &p.starts {
            self.sessions
                .start_settled(key, id, &p.agent_id, resp.ok, &mut self.out);
        }
        self.out.event(ControllerEvent::RequestCompleted {
            id,
            agent_id: p.agent_id,
            op: p.op,
            resp,
        });
    }

    /// A hello or stale deadline has passed.
    fn fire_conn_timer(&mut self, timer: ConnTimer, now: Instant) {
        let (conn, error) = match timer {
            ConnTimer::Hello(conn) => (conn, ProtocolError::HelloRequired),
            ConnTimer::Stale(conn) => {
                if !self.registry.is_stale(conn, now, self.cfg.stale_after) {
                    return;
                }
                (conn, ProtocolError::Stale)
            }
        };
        self.close_conn(conn, &error);
        self.violation(conn, error);
    }
}

impl Machine for Controller {
    type Event = ControllerEvent;

    /// Accepts the connection, or closes it at once with 1008 `too-many-connections` (per-IP
    /// cap) or `server-full` (total cap). Starts the hello deadline.
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        let ip = peer.remote_addr.map(|a| a.ip());
        let hello_due = now + self.cfg.hello_timeout;
        match self
            .registry
            .connect(conn, ip, &self.cfg.limits, now, hello_due)
        {
            Connect::Known => {}
            Connect::Refused(error) => {
                if let Some((code, reason)) = error.close() {
                    self.out.close(conn, code, reason);
                }
                self.violation(conn, error);
            }
            Connect::Accepted => self.out.event(ControllerEvent::Connected {
                conn,
                remote: peer.remote_addr,
            }),
        }
    }

    /// Handles one agent message. Bad input gets the reply INTEROP.md names (see the crate
    /// docs' "Spec decisions"); nothing panics; unknown connections are ignored.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        let max_rate = self.cfg.limits.max_messages_per_second;
        let Some(st) = self.registry.open_conn(conn) else {
            return;
        };
        // Rate: a fixed one-second window per connection; the excess is dropped.
        match st.count_message(now, max_rate) {
            Rate::Within => {}
            Rate::FirstOver => return self.violation(conn, ProtocolError::RateLimited),
            Rate::Over => return,
        }
        let registered = st.is_registered();
        let msg = match AgentMessage::decode(frame, self.cfg.limits.max_frame_bytes) {
            Ok(m) => m,
            Err(e) => return self.on_decode_error(conn, registered, e),
        };
        // Any message refreshes lastSeen.
        st.seen(now);
        let other = match msg {
            AgentMessage::Hello(h) => return self.on_hello(conn, h, now),
            AgentMessage::Resp(r) => return self.on_resp(conn, r),
            other => other,
        };
        let sender = st.agent_id().cloned();
        match (other, sender) {
            (AgentMessage::Guilds(g), Some(agent_id)) => {
                let max = self.cfg.limits.max_guilds_per_agent;
                let set = Registry::capped_guilds(g.guild_ids, max, conn, &mut self.out);
                self.registry.set_guilds(&agent_id, set, &mut self.out);
            }
            (AgentMessage::Event(Event::Add(a)), Some(agent_id)) => {
                if let Err(error) = self.sessions.on_add(agent_id, a, &mut self.out) {
                    self.violation(conn, error);
                }
            }
            (AgentMessage::Event(Event::Released(r)), Some(agent_id)) => {
                self.sessions.on_released(agent_id, r, &mut self.out)
            }
            (other, _) => self.violation(conn, ProtocolError::BeforeHello(other.type_name())),
        }
    }

    /// Forgets the connection; drops its agent (failing its pending requests at once) unless
    /// a newer connection already replaced it.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        let Some(agent) = self.registry.disconnect(conn) else {
            return;
        };
        if let Some(agent_id) = agent {
            self.drop_agent_if_on(&agent_id, conn, DropReason::Disconnected);
        }
        self.fail_pending_on(conn);
        self.out.event(ControllerEvent::Disconnected { conn });
    }

    /// A WebSocket pong refreshes `lastSeen` like any message (INTEROP: the controller pings
    /// every 15 s; any message or pong keeps an agent from going stale).
    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        self.touch(conn, now);
    }

    /// Fires due deadlines: hello-required closes, stale-agent drops, request timeouts.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        // Both deadline sources, in time order (connection timers first on ties).
        while let Some((_, kind)) = self.next_timer().filter(|(t, _)| *t <= now) {
            match kind {
                TimerKind::Request(_) => {
                    if let Some((id, p)) = self.requests.pop_due(now) {
                        self.unanswered(id, p, Unanswered::TimedOut);
                    }
                }
                TimerKind::Hello(_) | TimerKind::Stale(_) => {
                    if let Some(timer) = self.registry.pop_due(now) {
                        self.fire_conn_timer(timer, now);
                    }
                }
            }
        }
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
    use std::time::Duration;

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
            assert!(c.requests.deadline_entries() <= 2 * c.pending_requests() + 64 + 1);
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
        assert_eq!(c.requests.deadline_entries(), 0);
    }
}
