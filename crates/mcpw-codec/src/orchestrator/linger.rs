//! Sender-side batching (the spec's "batch small messages"; the crate's spec decision 58):
//! with [`OrchestratorConfig::batch_linger`](crate::OrchestratorConfig::batch_linger) set,
//! small messages the orchestrator starts wait up to that long and leave together as one
//! batch.

use agentwire_core::ConnId;

use super::Orchestrator;
use crate::config::BatchForm;
use crate::header::{Flags, MessageType};
use crate::{Form, Message};

/// Messages whose JSON form is longer than this go at once (they gain little from a batch).
const SMALL: usize = 1024;

impl Orchestrator {
    /// Holds `m` for `conn`'s next batch if it is one that waits: batching is on, the
    /// orchestrator starts it (a notification or a request), it is not urgent
    /// ([`Flags::PRIORITY`]), small (1 KiB of JSON at most) and goes in the JSON or 12-byte
    /// form (a 24-byte batch's entries carry no sequence id). Otherwise it is given back.
    pub(super) fn hold(&mut self, conn: ConnId, form: Form, m: Message) -> Option<Message> {
        let (Some(linger), Some(now)) = (self.config.batch_linger, self.clock.latest()) else {
            return Some(m);
        };
        let starts = matches!(m.kind, MessageType::NOTIFICATION | MessageType::REQUEST);
        if !starts || m.flags.contains(Flags::PRIORITY) || form == Form::Binary {
            return Some(m);
        }
        let mut text = Vec::new();
        if self.codec.encode_json(&m, &mut text).is_err() || text.len() > SMALL {
            return Some(m);
        }
        let max = self.codec.limits().max_batch.max(1);
        let Some(c) = self.conns.get_mut(conn) else {
            return Some(m);
        };
        c.held.push(m);
        let count = c.held.len();
        if count == 1 {
            self.conns.linger_until(conn, now + linger);
        }
        if count >= max {
            self.flush_held(conn);
        }
        None
    }

    /// Sends what `conn` holds: one message alone, several as one batch.
    pub(super) fn flush_held(&mut self, conn: ConnId) {
        self.conns.cancel_linger(conn);
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let mut held = std::mem::take(&mut c.held);
        let form = self.form_of(conn);
        match held.len() {
            0 => {}
            1 => {
                if let Some(m) = held.pop() {
                    self.send_message(conn, form, &m, BatchForm::Json);
                }
            }
            _ => self.send_message(conn, form, &Message::batch(held), BatchForm::Json),
        }
    }
}
