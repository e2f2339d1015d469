//! [`ReplyKey`]: how an answer names the message of the agent's it answers.

use crate::message::Message;

/// How a reply names the message it answers: its id (JSON and 12-byte forms) and its
/// sequence id (24-byte form).
pub(super) type ReplyKey = (Option<String>, u64);

/// The reply key of `msg`.
pub(super) fn key_of(msg: &Message) -> ReplyKey {
    (msg.id.clone(), msg.seq)
}
