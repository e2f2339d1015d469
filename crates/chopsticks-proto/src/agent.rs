//! The `Agent`: the client role, one connection at a time, surviving reconnects.

use std::collections::BTreeSet;
use std::time::Instant;

use agentwire_core::{CloseCode, ConnId, Frame, Machine, Monotonic, Outbox, Output, PeerInfo};

use crate::config::AgentConfig;
use crate::error::CommandError;
use crate::event::AgentEvent;
use crate::message::{
    Add, AgentMessage, ControllerMessage, Event, Guilds, Hello, RawJson, Released, Resp,
    SessionKind,
};
use crate::texts;

/// A voice session the agent is in: (kind, guild, voice channel).
type SessionRef = (SessionKind, String, String);

/// A Chopsticks agent (client role): says `hello` and `guilds` on every connect and every
/// heartbeat interval (30 s), surfaces `req` and `error` from the controller, and sends
/// `resp`, `add` and `released` through commands.
///
/// The driver gives each connection attempt a new [`ConnId`]; the agent keeps its
/// configuration (guilds, ready flag) across reconnects and re-announces itself each time.
///
/// The agent remembers the voice sessions it reported joining ([`send_add`](Self::send_add)
/// with `ok: true`, until [`send_released`](Self::send_released) for it), so that
/// [`leave`](Self::leave) can release each before it closes: the spec's graceful
/// disconnect, which frees the controller's bindings at once.
///
/// Method kinds: `handle_*` (input), `poll_*` (output), commands ([`respond`](Self::respond),
/// [`send_add`](Self::send_add), [`send_released`](Self::send_released),
/// [`leave`](Self::leave), [`set_guilds`](Self::set_guilds), [`set_ready`](Self::set_ready)),
/// getters ([`is_connected`](Self::is_connected), [`config`](Self::config),
/// [`sessions`](Self::sessions)).
#[derive(Debug)]
pub struct Agent {
    cfg: AgentConfig,
    clock: Monotonic,
    out: Outbox<AgentEvent>,
    scratch: Vec<u8>,
    conn: Option<ConnId>,
    next_heartbeat: Option<Instant>,
    /// Voice sessions joined and not released, in key order.
    sessions: BTreeSet<SessionRef>,
    /// The connection [`leave`](Self::leave) closed: nothing more is sent or handled on it.
    leaving: Option<ConnId>,
}

impl Agent {
    /// An agent with `config`, not yet connected.
    pub fn new(config: AgentConfig) -> Self {
        Self {
            cfg: config,
            clock: Monotonic::new(),
            out: Outbox::new(),
            scratch: Vec::with_capacity(256),
            conn: None,
            next_heartbeat: None,
            sessions: BTreeSet::new(),
            leaving: None,
        }
    }

    /// The configuration (with the current guilds and ready flag).
    pub fn config(&self) -> &AgentConfig {
        &self.cfg
    }

    /// Whether a connection is open (and not closing after [`leave`](Self::leave)).
    pub fn is_connected(&self) -> bool {
        self.live_conn().is_some()
    }

    /// The voice sessions this agent is in, as (kind, guild, voice channel), in that order:
    /// joined with [`send_add`](Self::send_add) (`ok: true`) and not yet released.
    pub fn sessions(&self) -> impl Iterator<Item = (SessionKind, &str, &str)> {
        self.sessions
            .iter()
            .map(|(k, g, v)| (*k, g.as_str(), v.as_str()))
    }

    /// The open connection, unless `leave` is closing it.
    fn live_conn(&self) -> Option<ConnId> {
        self.conn.filter(|c| self.leaving != Some(*c))
    }

    /// The `hello` this agent sends now.
    pub fn hello(&self) -> Hello {
        Hello {
            protocol_version: Some(self.cfg.protocol_version.clone()),
            agent_id: Some(self.cfg.agent_id.clone()),
            bot_user_id: self.cfg.bot_user_id.clone(),
            tag: self.cfg.tag.clone(),
            ready: self.cfg.ready,
            guild_ids: self.cfg.guild_ids.clone(),
            pool_id: self.cfg.pool_id.clone(),
            runner_secret: self.cfg.runner_secret.clone(),
            runner_id: self.cfg.runner_id.clone(),
        }
    }

    fn send(&mut self, msg: &AgentMessage) -> Result<(), CommandError> {
        let conn = self.live_conn().ok_or(CommandError::NotConnected)?;
        let frame = msg.to_frame(&mut self.scratch);
        self.out.send(conn, frame);
        Ok(())
    }

    fn announce(&mut self) {
        let hello = AgentMessage::Hello(self.hello());
        let guilds = AgentMessage::Guilds(Guilds {
            guild_ids: self.cfg.guild_ids.clone(),
            agent_id: Some(self.cfg.agent_id.clone()),
            runner_id: self.cfg.runner_id.clone(),
        });
        // Only called while connected.
        let _ = self.send(&hello);
        let _ = self.send(&guilds);
    }

    /// Answers a request. `agentId` and `runnerId` are filled in as the real agent does.
    pub fn respond(&mut self, mut resp: Resp, now: Instant) -> Result<(), CommandError> {
        self.clock.observe(now);
        resp.agent_id
            .get_or_insert_with(|| self.cfg.agent_id.clone());
        if resp.runner_id.is_none() {
            resp.runner_id.clone_from(&self.cfg.runner_id);
        }
        self.send(&AgentMessage::Resp(resp))
    }

    /// Answers request `id` with `ok: true` and `data`.
    pub fn respond_ok(
        &mut self,
        id: impl Into<String>,
        data: impl Into<RawJson>,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.respond(Resp::ok(id, data), now)
    }

    /// Answers request `id` with `ok: false` and `error` (e.g. `"no-session"`).
    pub fn respond_err(
        &mut self,
        id: impl Into<String>,
        error: impl Into<String>,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.respond(Resp::err(id, error), now)
    }

    /// Sends an `add` event (joined, or failed to join, a voice channel). With `ok: true`
    /// the agent counts itself in that session (see [`sessions`](Self::sessions)); with
    /// `ok: false`, out of it.
    pub fn send_add(&mut self, mut add: Add, now: Instant) -> Result<(), CommandError> {
        self.clock.observe(now);
        if add.channel_id.is_empty() {
            add.channel_id.clone_from(&add.voice_channel_id);
        }
        let key = (add.kind, add.guild_id.clone(), add.voice_channel_id.clone());
        let joined = add.ok;
        self.send(&AgentMessage::Event(Event::Add(add)))?;
        if joined {
            self.sessions.insert(key);
        } else {
            self.sessions.remove(&key);
        }
        Ok(())
    }

    /// Sends a `released` event (left a voice channel); the agent no longer counts itself in
    /// that session.
    pub fn send_released(&mut self, rel: Released, now: Instant) -> Result<(), CommandError> {
        self.clock.observe(now);
        let key = (rel.kind, rel.guild_id.clone(), rel.voice_channel_id.clone());
        self.send(&AgentMessage::Event(Event::Released(rel)))?;
        self.sessions.remove(&key);
        Ok(())
    }

    /// The spec's graceful disconnect: sends `released` (with `reason`) for every session
    /// in [`sessions`](Self::sessions), in that order, then closes the connection with 1000
    /// [`texts::CLOSE_AGENT_LEAVING`]. The controller frees each session as the `released`
    /// arrives, so the agent's guilds are free for other agents (or this agent, restarted)
    /// at once. Returns how many sessions were released.
    ///
    /// From then on nothing more is sent on that connection (commands fail with
    /// [`CommandError::NotConnected`], no heartbeat, controller frames ignored) until it
    /// ends; a later connection is announced as usual. Fails with
    /// [`CommandError::NotConnected`] when no connection is open (the controller frees a
    /// disconnected agent's sessions itself); the sessions are then kept.
    pub fn leave(
        &mut self,
        reason: impl Into<String>,
        now: Instant,
    ) -> Result<usize, CommandError> {
        self.clock.observe(now);
        let conn = self.live_conn().ok_or(CommandError::NotConnected)?;
        let reason = reason.into();
        let sessions = std::mem::take(&mut self.sessions);
        let n = sessions.len();
        for (kind, guild_id, voice_channel_id) in sessions {
            let rel = Released {
                agent_id: self.cfg.agent_id.clone(),
                guild_id,
                voice_channel_id,
                reason: reason.clone(),
                kind,
                runner_id: self.cfg.runner_id.clone(),
            };
            self.send(&AgentMessage::Event(Event::Released(rel)))?;
        }
        self.out
            .close(conn, CloseCode::NORMAL, texts::CLOSE_AGENT_LEAVING);
        self.leaving = Some(conn);
        self.next_heartbeat = None;
        Ok(n)
    }

    /// Replaces the guild list and, if connected, sends `guilds` now.
    pub fn set_guilds(&mut self, guilds: Vec<String>, now: Instant) {
        self.clock.observe(now);
        self.cfg.guild_ids = guilds;
        let msg = AgentMessage::Guilds(Guilds {
            guild_ids: self.cfg.guild_ids.clone(),
            agent_id: Some(self.cfg.agent_id.clone()),
            runner_id: self.cfg.runner_id.clone(),
        });
        let _ = self.send(&msg);
    }

    /// Sets the ready flag and, if connected, re-sends `hello` now.
    pub fn set_ready(&mut self, ready: bool, now: Instant) {
        self.clock.observe(now);
        self.cfg.ready = ready;
        let hello = AgentMessage::Hello(self.hello());
        let _ = self.send(&hello);
    }
}

impl Machine for Agent {
    type Event = AgentEvent;

    /// A new connection: sends `hello` then `guilds` and starts the heartbeat.
    fn handle_connect(&mut self, conn: ConnId, _peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        self.conn = Some(conn);
        self.out.event(AgentEvent::Connected { conn });
        self.announce();
        self.next_heartbeat = Some(now + self.cfg.heartbeat_interval);
    }

    /// A controller message: `req` and `error` become events; anything else is reported as
    /// malformed and ignored.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        self.clock.observe(now);
        if self.live_conn() != Some(conn) {
            return;
        }
        match ControllerMessage::decode(frame, self.cfg.max_frame_bytes) {
            Ok(ControllerMessage::Req(req)) => self.out.event(AgentEvent::Request(req)),
            Ok(ControllerMessage::Error(e)) => self
                .out
                .event(AgentEvent::ControllerError { error: e.error }),
            Err(error) => self.out.event(AgentEvent::Malformed { error }),
        }
    }

    /// The connection ended: stops the heartbeat until the next connect.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        if self.conn != Some(conn) {
            return;
        }
        self.conn = None;
        self.leaving = None;
        self.next_heartbeat = None;
        self.out.event(AgentEvent::Disconnected { conn });
    }

    /// Sends the `hello` + `guilds` heartbeat when due.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        let Some(due) = self.next_heartbeat else {
            return;
        };
        if due > now {
            return;
        }
        self.announce();
        // Never schedule at or before `now`, even with a zero interval.
        let next = (due + self.cfg.heartbeat_interval).max(now);
        self.next_heartbeat = Some(if next > now {
            next
        } else {
            now + std::time::Duration::from_millis(1)
        });
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_heartbeat
    }

    fn poll_output(&mut self) -> Option<Output<AgentEvent>> {
        self.out.pop()
    }
}
