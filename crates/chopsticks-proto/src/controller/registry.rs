//! The live-agent registry: every connection (address caps, rate window, hello and stale
//! deadlines, requests pending on it) and the agents registered on them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Outbox, TimerSet};

use crate::config::Limits;
use crate::error::{CommandError, ProtocolError};
use crate::event::ControllerEvent;
use crate::id::{AgentId, GuildId};
use crate::message::Hello;

/// One live agent in the controller's registry.
///
/// Its `lastSeen` is [`Controller::last_seen`](crate::Controller::last_seen) and its
/// pending request count [`Controller::pending_for`](crate::Controller::pending_for): both
/// live with the connection, where every message updates them without a registry lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveAgent {
    /// Agent id.
    pub agent_id: AgentId,
    /// The connection it is live on.
    pub conn: ConnId,
    /// Discord bot user id.
    pub bot_user_id: Option<String>,
    /// Discord bot tag.
    pub tag: Option<String>,
    /// Whether its audio node is ready.
    pub ready: bool,
    /// Guilds it is in.
    pub guild_ids: BTreeSet<GuildId>,
    /// Pool id.
    pub pool_id: String,
    /// Protocol version from its last `hello`.
    pub protocol_version: String,
    /// Runner id, if it sends one.
    pub runner_id: Option<String>,
}

impl LiveAgent {
    /// The record a checked `hello` makes (guilds are set apart, see
    /// [`Registry::set_guilds`]).
    pub(crate) fn from_hello(agent_id: AgentId, conn: ConnId, version: String, h: Hello) -> Self {
        Self {
            agent_id,
            conn,
            bot_user_id: h.bot_user_id,
            tag: h.tag,
            ready: h.ready,
            guild_ids: BTreeSet::new(),
            pool_id: h.pool_id,
            protocol_version: version,
            runner_id: h.runner_id,
        }
    }

    /// Takes the fields a later `hello` sets from `new`; whether any of them changed.
    fn update_from(&mut self, new: Self) -> bool {
        let changed = self.bot_user_id != new.bot_user_id
            || self.tag != new.tag
            || self.ready != new.ready
            || self.pool_id != new.pool_id
            || self.protocol_version != new.protocol_version
            || self.runner_id != new.runner_id;
        self.bot_user_id = new.bot_user_id;
        self.tag = new.tag;
        self.ready = new.ready;
        self.pool_id = new.pool_id;
        self.protocol_version = new.protocol_version;
        self.runner_id = new.runner_id;
        changed
    }
}

/// A connection's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ConnTimer {
    /// No valid `hello` yet.
    Hello(ConnId),
    /// The stale check of a registered connection.
    Stale(ConnId),
}

/// One open connection.
#[derive(Debug)]
pub(crate) struct ConnState {
    ip: Option<IpAddr>,
    /// The agent registered on this connection, once a valid hello arrived.
    agent_id: Option<AgentId>,
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

/// What the rate window says about one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rate {
    /// Within the limit.
    Within,
    /// The first message over the limit in this window (reported once).
    FirstOver,
    /// Over the limit, already reported.
    Over,
}

impl ConnState {
    /// Counts one message in the current one-second window (starting a new window when the
    /// current one has ended).
    pub(crate) fn count_message(&mut self, now: Instant, max_per_second: u32) -> Rate {
        if now >= self.window_end {
            self.window_end = rate_window_end(now);
            self.window_count = 0;
        }
        self.window_count = self.window_count.saturating_add(1);
        if self.window_count <= max_per_second {
            Rate::Within
        } else if self.window_count == max_per_second + 1 {
            Rate::FirstOver
        } else {
            Rate::Over
        }
    }

    /// Whether an agent is registered on this connection.
    pub(crate) fn is_registered(&self) -> bool {
        self.agent_id.is_some()
    }

    /// The agent registered on this connection.
    pub(crate) fn agent_id(&self) -> Option<&AgentId> {
        self.agent_id.as_ref()
    }

    /// A message (or pong) arrived now.
    pub(crate) fn seen(&mut self, now: Instant) {
        self.last_seen = now;
    }
}

/// The end of a rate window that starts at `start` (one second later).
fn rate_window_end(start: Instant) -> Instant {
    // `Instant + Duration` panics on overflow; a window that cannot end is never reached.
    start.checked_add(Duration::from_secs(1)).unwrap_or(start)
}

/// What [`Registry::connect`] did.
#[derive(Debug)]
pub(crate) enum Connect {
    /// The connection was already open: nothing changed.
    Known,
    /// Refused by a cap; the connection is not counted.
    Refused(ProtocolError),
    /// Accepted; its hello deadline runs.
    Accepted,
}

/// What [`Registry::upsert`] did with a checked `hello`'s record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upsert {
    /// A new agent.
    New,
    /// The agent's own connection said `hello` again; whether its record changed.
    Updated(bool),
    /// The agent was live on `old`, which is now forgotten (to be closed by the caller).
    Replaced(ConnId),
}

/// Connections and the agents live on them, with the connections' deadlines.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    conns: BTreeMap<ConnId, ConnState>,
    per_ip: BTreeMap<IpAddr, usize>,
    agents: BTreeMap<AgentId, LiveAgent>,
    /// Hello and stale deadlines.
    timers: TimerSet<ConnTimer>,
}

impl Registry {
    /// Live agents, ordered by agent id.
    pub(crate) fn agents(&self) -> impl Iterator<Item = &LiveAgent> {
        self.agents.values()
    }

    /// Live agents.
    pub(crate) fn agent_count(&self) -> usize {
        self.agents.len()
    }

    /// One live agent.
    pub(crate) fn agent(&self, agent_id: &str) -> Option<&LiveAgent> {
        self.agents.get(agent_id)
    }

    /// Open connections (registered or not).
    pub(crate) fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// The state of `conn`, unless it is unknown or closing.
    pub(crate) fn open_conn(&mut self, conn: ConnId) -> Option<&mut ConnState> {
        self.conns.get_mut(&conn).filter(|st| !st.closing)
    }

    /// Last time a message or reported pong arrived from `agent_id`.
    pub(crate) fn last_seen(&self, agent_id: &str) -> Option<Instant> {
        let conn = self.agents.get(agent_id)?.conn;
        self.conns.get(&conn).map(|st| st.last_seen)
    }

    /// Records that `conn` is alive now.
    pub(crate) fn touch(&mut self, conn: ConnId, now: Instant) {
        if let Some(st) = self.conns.get_mut(&conn) {
            st.last_seen = now;
        }
    }

    /// Requests pending on `agent_id`'s current connection.
    pub(crate) fn pending_for(&self, agent_id: &str) -> usize {
        self.agents
            .get(agent_id)
            .and_then(|a| self.conns.get(&a.conn))
            .map_or(0, |st| st.pending)
    }

    /// The connection of `agent_id` and its pending-request counter, if the agent is live
    /// and has room for one more request.
    pub(crate) fn pending_slot(
        &mut self,
        agent_id: &str,
        max: usize,
    ) -> Result<(ConnId, AgentId, &mut usize), CommandError> {
        let agent = self
            .agents
            .get(agent_id)
            .ok_or(CommandError::AgentOffline)?;
        let (conn, agent_id) = (agent.conn, agent.agent_id.clone());
        let st = self
            .conns
            .get_mut(&conn)
            .ok_or(CommandError::AgentOffline)?;
        if st.pending >= max {
            return Err(CommandError::TooManyPending);
        }
        Ok((conn, agent_id, &mut st.pending))
    }

    /// One request on `conn` ended.
    pub(crate) fn unpend(&mut self, conn: ConnId) {
        if let Some(st) = self.conns.get_mut(&conn) {
            st.pending = st.pending.saturating_sub(1);
        }
    }

    /// The earliest connection deadline.
    pub(crate) fn next_timer(&self) -> Option<(Instant, ConnTimer)> {
        self.timers.next().map(|(t, k)| (t, *k))
    }

    /// Removes and returns the earliest connection deadline at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<ConnTimer> {
        self.timers.pop_expired(now)
    }

    /// Opens `conn` from `ip` unless a cap refuses it (the per-address cap first); starts
    /// its hello deadline at `hello_due`.
    pub(crate) fn connect(
        &mut self,
        conn: ConnId,
        ip: Option<IpAddr>,
        limits: &Limits,
        now: Instant,
        hello_due: Instant,
    ) -> Connect {
        if self.conns.contains_key(&conn) {
            return Connect::Known;
        }
        let from_ip = ip.and_then(|ip| self.per_ip.get(&ip)).copied().unwrap_or(0);
        if from_ip >= limits.max_connections_per_ip {
            return Connect::Refused(ProtocolError::TooManyConnectionsPerIp);
        }
        if self.conns.len() >= limits.max_connections {
            return Connect::Refused(ProtocolError::ServerFull);
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
        self.timers.set(ConnTimer::Hello(conn), hello_due);
        Connect::Accepted
    }

    /// Forgets `conn`; `None` if it was unknown, else the agent registered on it.
    pub(crate) fn disconnect(&mut self, conn: ConnId) -> Option<Option<AgentId>> {
        let st = self.conns.remove(&conn)?;
        if let Some(ip) = st.ip {
            if let Some(n) = self.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.per_ip.remove(&ip);
                }
            }
        }
        self.cancel_timers(conn);
        Some(st.agent_id)
    }

    /// Marks `conn` closing (its input is ignored from now on) and stops its deadlines;
    /// returns the agent that was registered on it.
    pub(crate) fn start_closing(&mut self, conn: ConnId) -> Option<AgentId> {
        let agent = self.conns.get_mut(&conn).and_then(|st| {
            st.closing = true;
            st.agent_id.take()
        });
        self.cancel_timers(conn);
        agent
    }

    fn cancel_timers(&mut self, conn: ConnId) {
        self.timers.cancel(&ConnTimer::Hello(conn));
        self.timers.cancel(&ConnTimer::Stale(conn));
    }

    /// Removes `agent_id` if it is live on `conn` (not if a newer connection replaced it);
    /// whether it was.
    pub(crate) fn remove_agent_if_on(&mut self, agent_id: &str, conn: ConnId) -> bool {
        if self.agents.get(agent_id).is_none_or(|a| a.conn != conn) {
            return false;
        }
        self.agents.remove(agent_id);
        self.timers.cancel(&ConnTimer::Stale(conn));
        true
    }

    /// The stale deadline of `conn` has passed: `true` if the agent on it has been silent
    /// for `stale_after` (the caller closes it); otherwise the deadline moves to its next
    /// due time.
    pub(crate) fn is_stale(&mut self, conn: ConnId, now: Instant, stale_after: Duration) -> bool {
        let Some(last_seen) = self
            .conns
            .get(&conn)
            .filter(|st| st.agent_id.is_some())
            .map(|st| st.last_seen)
        else {
            return false;
        };
        let due = last_seen + stale_after;
        if due > now {
            self.timers.set(ConnTimer::Stale(conn), due);
            false
        } else {
            true
        }
    }

    /// Records `agent_id` as the agent of `conn`; returns the other agent that was
    /// registered on it (a connection switching agent id), which the caller drops.
    pub(crate) fn claim_conn(&mut self, conn: ConnId, agent_id: &AgentId) -> Option<AgentId> {
        let st = self.conns.get_mut(&conn)?;
        if st.agent_id.as_ref() == Some(agent_id) {
            None
        } else {
            st.agent_id.replace(agent_id.clone())
        }
    }

    /// The first `max` distinct guilds of `ids`; reports a truncation as a violation.
    pub(crate) fn capped_guilds(
        ids: Vec<String>,
        max: usize,
        conn: ConnId,
        out: &mut Outbox<ControllerEvent>,
    ) -> BTreeSet<GuildId> {
        let mut set = BTreeSet::new();
        for id in ids {
            if set.len() >= max {
                out.event(ControllerEvent::ProtocolViolation {
                    conn,
                    error: ProtocolError::Limit("guilds per agent"),
                });
                break;
            }
            set.insert(GuildId::from(id));
        }
        set
    }

    /// Registers `record` (the hello deadline of its connection is over): a new agent, a
    /// `hello` again on its own connection, or a second connection that replaces the first
    /// (the newer one wins; the old one is forgotten here, so its later disconnect cannot
    /// remove the new registration: the real controller's stale-close race). A new or
    /// replacing registration starts the stale deadline at `stale_due`.
    pub(crate) fn upsert(&mut self, record: LiveAgent, stale_due: Instant) -> Upsert {
        let conn = record.conn;
        self.timers.cancel(&ConnTimer::Hello(conn));
        let upsert = match self.agents.get_mut(&record.agent_id) {
            Some(existing) if existing.conn == conn => {
                return Upsert::Updated(existing.update_from(record))
            }
            Some(existing) => {
                let old = existing.conn;
                let old_guilds = std::mem::take(&mut existing.guild_ids);
                *existing = record;
                existing.guild_ids = old_guilds;
                if let Some(st) = self.conns.get_mut(&old) {
                    st.agent_id = None;
                    st.closing = true;
                }
                self.cancel_timers(old);
                Upsert::Replaced(old)
            }
            None => {
                self.agents.insert(record.agent_id.clone(), record);
                Upsert::New
            }
        };
        self.timers.set(ConnTimer::Stale(conn), stale_due);
        upsert
    }

    /// Replaces an agent's guild set and reports the difference.
    pub(crate) fn set_guilds(
        &mut self,
        agent_id: &AgentId,
        new: BTreeSet<GuildId>,
        out: &mut Outbox<ControllerEvent>,
    ) {
        let Some(agent) = self.agents.get_mut(agent_id) else {
            return;
        };
        let added: Vec<GuildId> = new.difference(&agent.guild_ids).cloned().collect();
        let removed: Vec<GuildId> = agent.guild_ids.difference(&new).cloned().collect();
        agent.guild_ids = new;
        if !added.is_empty() || !removed.is_empty() {
            out.event(ControllerEvent::GuildsChanged {
                agent_id: agent_id.clone(),
                added,
                removed,
            });
        }
    }
}
