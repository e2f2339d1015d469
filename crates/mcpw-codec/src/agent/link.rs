//! [`Link`]: what the agent knows about its open connection (its sequence ids included),
//! forgotten when it ends.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Outbox};

use super::event::{AgentEvent, Request};
use super::retry::Retries;
use crate::codec::Form;
use crate::message::Message;
use crate::sequence::{is_numbered, SeqCheck, Sequence};

pub(super) use super::reply::{key_of, ReplyKey};

/// The open connection: its form, its registration and heartbeat, the requests awaiting an
/// answer on it.
#[derive(Debug)]
pub(super) struct Link {
    /// The connection.
    pub(super) conn: ConnId,
    /// When it opened (a connection that stays up resets the reconnect waits).
    pub(super) opened: Instant,
    /// The 12-byte form is on (after the server confirmed `protocol.set_binary`), gzipped
    /// above the threshold asked for.
    pub(super) compact: Option<Option<usize>>,
    /// The pending `protocol.set_binary`: what it asked for (`Some(threshold)` on, `None`
    /// off).
    pub(super) set_binary: Option<Option<Option<usize>>>,
    /// This agent's requests awaiting an answer, by reply key. Bounded: one register, one
    /// `protocol.set_binary`, one shutdown, one `task.complete` per held task, and at most
    /// [`AgentConfig::max_pending`](crate::AgentConfig::max_pending) capability updates and
    /// collaboration requests.
    pub(super) pending: BTreeMap<ReplyKey, Request>,
    /// The next `agent.heartbeat` (once registered) and the period.
    pub(super) heartbeat: Option<(Instant, Duration)>,
    /// What was sent that may be sent again after a retryable error.
    pub(super) retries: Retries,
    /// The check of the server's sequence ids on this connection.
    pub(super) seq: Sequence,
    /// The protocol version the upgrade selected (the subprotocol `mcp.v<n>` the server
    /// echoed), if it named one.
    pub(super) version: Option<u8>,
    /// Messages waiting for the next batch (decision 58), oldest first.
    pub(super) held: Vec<Message>,
    /// When they leave.
    pub(super) linger_at: Option<Instant>,
    /// The waiting messages are being sent (they do not wait again).
    pub(super) flushing: bool,
}

impl Link {
    /// A connection that just opened.
    pub(super) fn new(conn: ConnId, now: Instant) -> Self {
        Self {
            conn,
            opened: now,
            compact: None,
            set_binary: None,
            pending: BTreeMap::new(),
            heartbeat: None,
            retries: Retries::default(),
            seq: Sequence::default(),
            version: None,
            held: Vec::new(),
            linger_at: None,
            flushing: false,
        }
    }

    /// Checks the sequence id of `msg`, received in `form` (decision 38): a gap is
    /// reported and the message handled; a duplicate is reported and dropped (`false`).
    pub(super) fn is_fresh(
        &mut self,
        msg: &Message,
        form: Form,
        out: &mut Outbox<AgentEvent>,
    ) -> bool {
        if form != Form::Binary || !is_numbered(msg.kind, msg.seq) {
            return true;
        }
        match self.seq.receive(msg.seq) {
            SeqCheck::InOrder => true,
            SeqCheck::Gap { expected, .. } => {
                out.event(AgentEvent::SequenceGap {
                    expected,
                    received: msg.seq,
                });
                true
            }
            SeqCheck::Duplicate { .. } => {
                out.event(AgentEvent::SequenceDuplicate { seq: msg.seq });
                false
            }
        }
    }

    /// Whether `agent.register` was confirmed on this connection.
    pub(super) fn is_registered(&self) -> bool {
        self.heartbeat.is_some()
    }

    /// Starts heartbeats every `period` from `now`.
    pub(super) fn start_heartbeats(&mut self, now: Instant, period: Duration) {
        // A zero period would make the timer due again at the same instant.
        let period = period.max(Duration::from_millis(1));
        self.heartbeat = Some((now + period, period));
    }

    /// Whether a heartbeat is due at `now`; if so, the next one is scheduled.
    pub(super) fn heartbeat_due(&mut self, now: Instant) -> bool {
        match &mut self.heartbeat {
            Some((at, period)) if *at <= now => {
                *at = now + *period;
                true
            }
            _ => false,
        }
    }

    /// The next heartbeat, retry, or end of a linger.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        [
            self.heartbeat.map(|(at, _)| at),
            self.retries.next_deadline(),
            self.linger_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
