//! The open connections: each one's session, data-channel state and heartbeat deadline.

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire_core::{ConnId, TimerSet};

use crate::ids::SessionId;

use super::wire::Link;

/// One WebSocket connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// Its session; `None` once the connection is refused or closing.
    pub(crate) session: Option<SessionId>,
    /// Whether the application reported its data channel open.
    pub(crate) dc_open: bool,
}

/// Every open connection and its heartbeat deadline (no `ping` by then: closed).
#[derive(Debug, Default)]
pub(crate) struct Conns {
    map: BTreeMap<ConnId, Conn>,
    heartbeats: TimerSet<ConnId>,
}

impl Conns {
    /// Open connections.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether `conn` is open.
    pub(crate) fn contains(&self, conn: ConnId) -> bool {
        self.map.contains_key(&conn)
    }

    /// Connection `conn`.
    pub(crate) fn get(&self, conn: ConnId) -> Option<&Conn> {
        self.map.get(&conn)
    }

    /// Connection `conn`, to change it.
    pub(crate) fn get_mut(&mut self, conn: ConnId) -> Option<&mut Conn> {
        self.map.get_mut(&conn)
    }

    /// Opens `conn` for `session` (`None`: refused), data channel closed.
    pub(crate) fn open(&mut self, conn: ConnId, session: Option<SessionId>) {
        let c = Conn {
            session,
            dc_open: false,
        };
        self.map.insert(conn, c);
    }

    /// Forgets `conn` and its heartbeat.
    pub(crate) fn remove(&mut self, conn: ConnId) -> Option<Conn> {
        self.heartbeats.cancel(&conn);
        self.map.remove(&conn)
    }

    /// Where frames for `conn` go, if it is open.
    pub(crate) fn link(&self, conn: ConnId) -> Option<Link> {
        let c = self.map.get(&conn)?;
        Some(Link {
            conn,
            dc_open: c.dc_open,
        })
    }

    /// `conn` must send a `ping` by `at`.
    pub(crate) fn set_heartbeat(&mut self, conn: ConnId, at: Instant) {
        self.heartbeats.set(conn, at);
    }

    /// `conn` no longer needs to ping.
    pub(crate) fn cancel_heartbeat(&mut self, conn: ConnId) {
        self.heartbeats.cancel(&conn);
    }

    /// The earliest heartbeat deadline.
    pub(crate) fn next_heartbeat(&self) -> Option<Instant> {
        self.heartbeats.next_deadline()
    }

    /// The connection whose heartbeat deadline is the earliest, if it passed by `now`.
    pub(crate) fn pop_heartbeat(&mut self, now: Instant) -> Option<ConnId> {
        self.heartbeats.pop_expired(now)
    }
}
