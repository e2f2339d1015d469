//! Sender-side batching (the crate's spec decision 58): with
//! [`AgentConfig::batch_linger`](crate::AgentConfig::batch_linger) set, small messages the
//! agent starts wait up to that long and leave together as one batch.

use std::time::Instant;

use super::Agent;
use crate::header::{Flags, MessageType};
use crate::message::Message;

/// Messages whose JSON form is longer than this go at once.
const SMALL: usize = 1024;

impl Agent {
    /// Holds `msg` for the next batch if it waits: batching is on, the agent starts it (a
    /// request, notification or progress report), it is not urgent
    /// ([`Flags::PRIORITY`]), small (1 KiB of JSON at most), and the connection speaks the
    /// JSON or 12-byte form (a 24-byte batch's entries carry no sequence id). `false`: send
    /// it now.
    pub(super) fn hold(&mut self, msg: &Message) -> bool {
        let (Some(linger), Some(now)) = (self.config.batch_linger, self.clock.latest()) else {
            return false;
        };
        let starts = matches!(
            msg.kind,
            MessageType::REQUEST | MessageType::NOTIFICATION | MessageType::PROGRESS
        );
        let binary = self.config.binary && !self.is_compact();
        if !starts || binary || msg.flags.contains(Flags::PRIORITY) {
            return false;
        }
        let mut text = Vec::new();
        if self.codec.encode_json(msg, &mut text).is_err() || text.len() > SMALL {
            return false;
        }
        let max = self.codec.limits().max_batch.max(1);
        let Some(link) = self
            .link
            .as_mut()
            .filter(|l| !l.flushing && l.is_registered())
        else {
            return false;
        };
        link.held.push(msg.clone());
        if link.held.len() == 1 {
            link.linger_at = Some(now + linger);
        }
        if link.held.len() >= max {
            self.flush_held();
        }
        true
    }

    /// Sends what waits if its linger is over by `now`.
    pub(super) fn flush_due(&mut self, now: Instant) {
        if self
            .link
            .as_ref()
            .and_then(|l| l.linger_at)
            .is_some_and(|at| at <= now)
        {
            self.flush_held();
        }
    }

    /// Sends what waits: one message alone, several as one batch.
    fn flush_held(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        link.linger_at = None;
        let mut held = std::mem::take(&mut link.held);
        link.flushing = true;
        let msg = match held.len() {
            0 => None,
            1 => held.pop(),
            _ => Some(Message::batch(held)),
        };
        if let Some(msg) = msg {
            self.send_own(&msg);
        }
        if let Some(link) = self.link.as_mut() {
            link.flushing = false;
        }
    }
}
