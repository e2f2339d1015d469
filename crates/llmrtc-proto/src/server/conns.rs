//! The open connections: each one's session, data-channel state, rate budgets and
//! heartbeat deadline.

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire_core::{ConnId, TimerSet, TokenBucket};

use crate::config::Limits;
use crate::ids::SessionId;

use super::wire::Link;

/// One WebSocket connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// Its session; `None` once the connection is refused or closing.
    pub(crate) session: Option<SessionId>,
    /// Whether the application reported its data channel open.
    pub(crate) dc_open: bool,
    /// Whether the client receives audio on an outbound WebRTC track (TTS goes there).
    pub(crate) audio_track: bool,
    /// Its budget of messages ([`Limits::message_rate`]).
    messages: TokenBucket,
    /// Its budget of bytes, in KiB ([`Limits::byte_rate`]).
    bytes: TokenBucket,
    /// Whether its last message was dropped for going over a rate (a run of drops is
    /// answered once).
    limited: bool,
}

/// What the rate limits make of one incoming message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Within both rates: read it.
    Read,
    /// Over a rate, the first of a run: drop it and tell the client.
    DropAndTell,
    /// Over a rate again: drop it (counted).
    Drop,
}

impl Conn {
    /// Charges a message of `len` bytes at `now` against both budgets; both are charged
    /// only when both have room.
    pub(crate) fn admit(&mut self, len: usize, limits: &Limits, now: Instant) -> Admit {
        let kib = u32::try_from(len.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, limits.byte_rate.burst().max(1));
        let room = self.messages.available(&limits.message_rate, now) >= 1
            && self.bytes.available(&limits.byte_rate, now) >= kib;
        if room {
            self.messages.take(&limits.message_rate, now);
            for _ in 0..kib {
                self.bytes.take(&limits.byte_rate, now);
            }
            self.limited = false;
            Admit::Read
        } else if std::mem::replace(&mut self.limited, true) {
            Admit::Drop
        } else {
            Admit::DropAndTell
        }
    }
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

    /// Opens `conn` for `session` (`None`: refused) at `now`, data channel closed, rate
    /// budgets full.
    pub(crate) fn open(&mut self, conn: ConnId, session: Option<SessionId>, now: Instant) {
        let c = Conn {
            session,
            dc_open: false,
            audio_track: false,
            messages: TokenBucket::new(now),
            bytes: TokenBucket::new(now),
            limited: false,
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
            audio_track: c.audio_track,
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
