//! The host's connection to the relay: the current connection, its `relay.join` and the
//! deadline of the answer, and the pushes that wait while the host is not joined.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, FrameBuf, Outbox};

use crate::event::HostEvent;

/// One connection to the relay at a time, and what waits for the next join.
#[derive(Debug)]
pub(super) struct Link {
    conn: Option<ConnId>,
    joined: bool,
    joins_sent: u64,
    /// The `id` of the current connection's `relay.join`.
    join_id: String,
    join_deadline: Option<Instant>,
    /// Pushes waiting for the host to be joined.
    queue: VecDeque<FrameBuf>,
    max_queued: usize,
    /// The source of a state change made while not joined, pushed once joined.
    dirty: Option<String>,
}

impl Link {
    /// Not connected; at most `max_queued` pushes wait for a join.
    pub(super) fn new(max_queued: usize) -> Self {
        Self {
            conn: None,
            joined: false,
            joins_sent: 0,
            join_id: String::new(),
            join_deadline: None,
            queue: VecDeque::new(),
            max_queued,
            dirty: None,
        }
    }

    /// The current connection.
    pub(super) fn conn(&self) -> Option<ConnId> {
        self.conn
    }

    /// The current connection, if the relay has answered its join.
    pub(super) fn joined_conn(&self) -> Option<ConnId> {
        self.conn.filter(|_| self.joined)
    }

    /// Whether the relay has answered `relay.join` on the current connection.
    pub(super) fn is_joined(&self) -> bool {
        self.joined
    }

    /// Pushes waiting for the host to be joined.
    pub(super) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Whether a push made now would find no room (not joined and the queue full).
    pub(super) fn is_full(&self) -> bool {
        !self.joined && self.queue.len() >= self.max_queued
    }

    /// When the current join is given up.
    pub(super) fn join_deadline(&self) -> Option<Instant> {
        self.join_deadline
    }

    /// A new connection: returns the `id` of its `relay.join`, whose answer is due
    /// `join_timeout` from `now`.
    pub(super) fn connect(
        &mut self,
        conn: ConnId,
        join_timeout: Option<Duration>,
        now: Instant,
    ) -> &str {
        self.conn = Some(conn);
        self.joins_sent += 1;
        self.join_id = format!("host-join-{}", self.joins_sent);
        if let Some(t) = join_timeout {
            self.join_deadline = Some(now + t);
        }
        &self.join_id
    }

    /// Whether a message with `reply_to` answers the current, unanswered join.
    pub(super) fn answers_join(&self, reply_to: Option<&str>) -> bool {
        !self.joined && reply_to == Some(self.join_id.as_str())
    }

    /// The relay answered the join: its deadline is off.
    pub(super) fn joined(&mut self) {
        self.joined = true;
        self.join_deadline = None;
    }

    /// Sends the pushes that waited for the join; returns the connection and the source
    /// of a state change that waited too.
    pub(super) fn flush(
        &mut self,
        out: &mut Outbox<HostEvent>,
    ) -> Option<(ConnId, Option<String>)> {
        let conn = self.conn?;
        while let Some(frame) = self.queue.pop_front() {
            out.send(conn, frame);
        }
        Some((conn, self.dirty.take()))
    }

    /// Whether the join's deadline has passed at `now`; clears it either way once passed.
    pub(super) fn join_expired(&mut self, now: Instant) -> bool {
        if self.join_deadline.is_none_or(|t| t > now) {
            return false;
        }
        self.join_deadline = None;
        true
    }

    /// Forgets the current connection (the session stays).
    pub(super) fn drop_conn(&mut self) {
        self.conn = None;
        self.joined = false;
        self.join_deadline = None;
    }

    /// Sends a reply on the current connection (requests only arrive on it).
    pub(super) fn reply(&self, frame: FrameBuf, out: &mut Outbox<HostEvent>) {
        if let Some(conn) = self.conn {
            out.send(conn, frame);
        }
    }

    /// Sends a push now if joined, else queues it (dropped when the queue is full).
    pub(super) fn push(&mut self, frame: FrameBuf, out: &mut Outbox<HostEvent>) {
        match self.joined_conn() {
            Some(conn) => out.send(conn, frame),
            None if self.queue.len() < self.max_queued => self.queue.push_back(frame),
            None => {}
        }
    }

    /// Remembers a state change made while not joined, pushed once joined.
    pub(super) fn mark_dirty(&mut self, source: &str) {
        self.dirty = Some(source.to_owned());
    }
}
