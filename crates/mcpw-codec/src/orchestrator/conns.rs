//! Open connections: the form each peer speaks, its binary mode, its rate limit, the agent
//! registered on it, its sequence ids, what it holds for the next batch, and the
//! register-first and linger timers this table owns.

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire_core::{ConnId, TimerSet, TokenBucket};

use crate::message::Message;
use crate::sequence::Sequence;
use crate::stream::Reassembly;
use crate::{AgentId, Form};

/// One connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// The form of the peer's latest frame (or announced by `X-Protocol`): replies use it.
    pub(crate) form: Option<Form>,
    /// After `protocol.set_binary` enabled it: every reply to a text frame goes in the
    /// 12-byte form, gzipped above this threshold (`None`: never).
    pub(crate) compact: Option<Option<usize>>,
    /// Its message rate limit.
    pub(crate) bucket: Option<TokenBucket>,
    /// The agent registered on it.
    pub(crate) agent: Option<AgentId>,
    /// `X-Agent-Type`, or `unknown`: the metrics label.
    pub(crate) agent_type_label: String,
    /// The form the connection gauge counts it under.
    pub(crate) counted_as: Option<Form>,
    /// Sequence ids: those the orchestrator gives what it starts here, and the check of
    /// the peer's.
    pub(crate) seq: Sequence,
    /// The protocol version selected at the upgrade (the subprotocol `mcp.v<n>`; 1 when
    /// none was).
    pub(crate) version: u8,
    /// Streamed messages being reassembled.
    pub(crate) streams: Reassembly,
    /// Messages waiting for the next batch (decision 58), oldest first.
    pub(crate) held: Vec<Message>,
}

/// Connections by id, with the time each has left to register.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    map: BTreeMap<ConnId, Conn>,
    register_by: TimerSet<ConnId>,
    /// When each connection's held messages leave.
    linger: TimerSet<ConnId>,
}

impl Conns {
    pub(crate) fn get(&self, conn: ConnId) -> Option<&Conn> {
        self.map.get(&conn)
    }

    pub(crate) fn get_mut(&mut self, conn: ConnId) -> Option<&mut Conn> {
        self.map.get_mut(&conn)
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn contains(&self, conn: ConnId) -> bool {
        self.map.contains_key(&conn)
    }

    /// The agent registered on `conn`.
    pub(crate) fn agent(&self, conn: ConnId) -> Option<&AgentId> {
        self.map.get(&conn).and_then(|c| c.agent.as_ref())
    }

    /// Opens `conn`; it must register by `register_by` (`None`: no limit).
    pub(crate) fn open(&mut self, conn: ConnId, c: Conn, register_by: Option<Instant>) {
        self.map.insert(conn, c);
        if let Some(at) = register_by {
            self.register_by.set(conn, at);
        }
    }

    /// `agent_id` registered on `conn`: it has no register deadline any more.
    pub(crate) fn registered(&mut self, conn: ConnId, agent_id: &AgentId) {
        self.register_by.cancel(&conn);
        if let Some(c) = self.map.get_mut(&conn) {
            c.agent = Some(agent_id.clone());
        }
    }

    /// Closes `conn` (what it held is dropped with it).
    pub(crate) fn close(&mut self, conn: ConnId) -> Option<Conn> {
        self.register_by.cancel(&conn);
        self.linger.cancel(&conn);
        self.map.remove(&conn)
    }

    /// `conn`'s held messages leave at `at`.
    pub(crate) fn linger_until(&mut self, conn: ConnId, at: Instant) {
        self.linger.set(conn, at);
    }

    /// `conn`'s held messages left.
    pub(crate) fn cancel_linger(&mut self, conn: ConnId) {
        self.linger.cancel(&conn);
    }

    /// When held messages leave next.
    pub(crate) fn next_linger(&self) -> Option<Instant> {
        self.linger.next_deadline()
    }

    /// A connection whose held messages are due by `now`, if any.
    pub(crate) fn pop_linger(&mut self, now: Instant) -> Option<ConnId> {
        self.linger.pop_expired(now)
    }

    /// The next register deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.register_by.next_deadline()
    }

    /// A connection whose register deadline passed by `now`, if any.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<ConnId> {
        self.register_by.pop_expired(now)
    }
}
