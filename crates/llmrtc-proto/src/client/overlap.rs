//! The hand-over from the WebSocket to the data channel, so that no payload message is
//! handled twice.
//!
//! The server copies a payload message to the data channel from the moment its side of the
//! channel opens; the client takes payloads from the data channel from the moment its side
//! opens. When the server's side opens first, a message can reach the client on the
//! WebSocket before its channel opens (handled from there) and again on the channel after
//! (the copy). The server writes the very same bytes to both channels, in the same order,
//! so the copies are recognized: the channel's first frames are compared, in order, with
//! the payload frames handled from the WebSocket in the [`window`](crate::ClientConfig::data_channel_overlap)
//! before the channel opened, and those that match are dropped. The first frame that does
//! not match ends the hand-over, and so does a channel frame whose twin already came on the
//! WebSocket after the channel opened (a new message sent on both, not a copy of an old
//! one).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Payload frames remembered from the WebSocket before the data channel opens.
const MAX_REMEMBERED: usize = 32;

/// The state of the hand-over.
#[derive(Debug, Default)]
pub(crate) struct Overlap {
    /// Whether an `offer` went out on this connection: only then can a data channel open,
    /// so only then are WebSocket payloads remembered (hashing them costs a pass over
    /// each).
    armed: bool,
    /// Fingerprints of the payload frames handled from the WebSocket lately, oldest first.
    handled: VecDeque<(Instant, u64)>,
    /// After the channel opened: the fingerprints its first frames may repeat, and whether
    /// a first copy was found (then they must follow in order).
    pending: VecDeque<u64>,
    aligned: bool,
    /// Fingerprints of payload frames that came on the WebSocket after the channel opened
    /// (ignored there), during the hand-over.
    after_open: VecDeque<u64>,
    /// When the hand-over ends whatever comes.
    until: Option<Instant>,
}

impl Overlap {
    /// An `offer` went out on this connection: a data channel may open.
    pub(crate) fn arm(&mut self) {
        self.armed = true;
    }

    /// A payload frame was handled from the WebSocket at `now` (the channel is closed).
    pub(crate) fn handled_from_websocket(&mut self, bytes: &[u8], now: Instant, window: Duration) {
        if !self.armed || window.is_zero() {
            return;
        }
        while self
            .handled
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > window)
            || self.handled.len() >= MAX_REMEMBERED
        {
            self.handled.pop_front();
        }
        self.handled.push_back((now, fingerprint(bytes)));
    }

    /// The data channel opened at `now`: its first frames may repeat what the WebSocket
    /// gave in the last `window`.
    pub(crate) fn channel_opened(&mut self, now: Instant, window: Duration) {
        self.pending = self
            .handled
            .drain(..)
            .filter(|(at, _)| now.saturating_duration_since(*at) <= window)
            .map(|(_, f)| f)
            .collect();
        self.aligned = false;
        self.until = Some(now + window);
    }

    /// A payload frame came on the WebSocket while the channel is open (and was ignored
    /// there): during the hand-over, a channel frame like it is a new message.
    pub(crate) fn seen_on_websocket(&mut self, bytes: &[u8]) {
        if self.pending.is_empty() {
            return;
        }
        if self.after_open.len() >= MAX_REMEMBERED {
            self.after_open.pop_front();
        }
        self.after_open.push_back(fingerprint(bytes));
    }

    /// Whether a payload frame from the data channel is the copy of one already handled
    /// from the WebSocket (then drop it).
    pub(crate) fn is_copy(&mut self, bytes: &[u8], now: Instant) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        if self.until.is_some_and(|t| now > t) {
            self.reset();
            return false;
        }
        let f = fingerprint(bytes);
        if self.after_open.contains(&f) {
            self.reset();
            return false;
        }
        let at = if self.aligned {
            (self.pending.front() == Some(&f)).then_some(0)
        } else {
            self.pending.iter().position(|p| *p == f)
        };
        match at {
            Some(i) => {
                self.pending.drain(..=i);
                self.aligned = true;
                true
            }
            None => {
                self.reset();
                false
            }
        }
    }

    /// The connection ended: forgets everything, and no offer is out.
    pub(crate) fn end_connection(&mut self) {
        self.reset();
        self.armed = false;
    }

    /// Forgets the frames remembered (the channel closed).
    pub(crate) fn reset(&mut self) {
        self.handled.clear();
        self.pending.clear();
        self.aligned = false;
        self.after_open.clear();
        self.until = None;
    }
}

/// FNV-1a over the frame's bytes: equal frames, equal fingerprints; the length is mixed in.
fn fingerprint(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes.iter().chain(&(bytes.len() as u64).to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
