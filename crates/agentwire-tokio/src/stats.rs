//! Transport counters of one driver (a [`Server`](crate::Server), a [`Router`](crate::Router)
//! route, a [`Client`](crate::Client)) or of one [`Listener`](crate::Listener): connections,
//! frames and bytes each way, close frames by code, and what was dropped or refused and why.
//!
//! The tasks that do the work write them with relaxed atomic adds (one per inbound batch,
//! one per writer batch, one per connection event), and anyone reads them through
//! [`Handle::stats`](crate::Handle::stats) or [`Listener::stats`](crate::Listener::stats)
//! without a lock and without reaching the owner task. They know nothing of any protocol.

use std::sync::atomic::{AtomicU64, Ordering};

/// The close codes counted one by one: the standard range 1000..=1015 and the first 16
/// private codes 4000..=4015 (where the protocols' own codes live); any other code is
/// counted under "other".
const STANDARD: std::ops::RangeInclusive<u16> = 1000..=1015;
const PRIVATE: std::ops::RangeInclusive<u16> = 4000..=4015;
const CLOSE_SLOTS: usize = 33;

/// Slot of `code` in [`CloseCounts`] (the last one is "other").
fn close_slot(code: u16) -> usize {
    if STANDARD.contains(&code) {
        usize::from(code - STANDARD.start())
    } else if PRIVATE.contains(&code) {
        16 + usize::from(code - PRIVATE.start())
    } else {
        CLOSE_SLOTS - 1
    }
}

/// The code a slot of [`CloseCounts`] counts, `None` for "other".
fn slot_code(slot: usize) -> Option<u16> {
    let slot = u16::try_from(slot).ok()?;
    match slot {
        0..=15 => Some(STANDARD.start() + slot),
        16..=31 => Some(PRIVATE.start() + slot - 16),
        _ => None,
    }
}

/// Close frames sent, by close code.
///
/// Codes 1000..=1015 and 4000..=4015 are counted one by one; every other code is counted
/// together ([`other`](Self::other)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseCounts {
    counts: [u64; CLOSE_SLOTS],
}

impl Default for CloseCounts {
    fn default() -> Self {
        Self {
            counts: [0; CLOSE_SLOTS],
        }
    }
}

impl CloseCounts {
    /// Close frames sent with `code` (for a code not counted one by one: every such code,
    /// as [`other`](Self::other)).
    pub fn get(&self, code: u16) -> u64 {
        self.counts[close_slot(code)]
    }

    /// Close frames sent with a code not counted one by one.
    pub fn other(&self) -> u64 {
        self.counts[CLOSE_SLOTS - 1]
    }

    /// Every count above zero, as `(Some(code), n)` or `(None, n)` for [`other`](Self::other),
    /// in code order.
    pub fn iter(&self) -> impl Iterator<Item = (Option<u16>, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(slot, n)| (slot_code(slot), *n))
    }

    /// All close frames sent.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Why a connection (or a socket before it became one) was dropped or refused by the
/// transport, one count per reason. What a machine itself closes is in
/// [`TransportStats::closes`] only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DropCounts {
    /// Connections closed because their send queue was full (the peer does not read):
    /// [`Limits::slow_reader_close`](crate::Limits::slow_reader_close), 1013 by default.
    pub slow_reader: u64,
    /// Connections closed because the peer answered no ping within
    /// [`Limits::pong_timeout`](crate::Limits::pong_timeout) (1008).
    pub pong_timeout: u64,
    /// Connections closed after a frame the WebSocket layer refuses: too big (1009), not
    /// UTF-8 (1007), or a WebSocket protocol error (1002).
    pub bad_frame: u64,
    /// Upgrades refused because the address already holds
    /// [`ServerConfig::max_connections_per_address`](crate::ServerConfig::max_connections_per_address)
    /// connections.
    pub address_cap: u64,
    /// Upgrades refused with 503 because the machine holds
    /// [`ServerConfig::max_connections`](crate::ServerConfig::max_connections) connections.
    pub connection_cap: u64,
    /// Sockets refused at accept over a pending-handshake cap (total or per address).
    pub handshake_cap: u64,
    /// Upgrades the [`UpgradeHook`](crate::UpgradeHook) rejected (401, 403, 404, 426, ...).
    pub rejected: u64,
    /// Handshakes (TLS, request head, upgrade) that did not finish within the handshake
    /// timeout.
    pub handshake_timeout: u64,
    /// Handshakes that failed (a TLS error, a request that is not a valid upgrade, a peer
    /// that went away mid-handshake).
    pub handshake_failed: u64,
    /// Requests for a path no route serves, answered 404 (a [`Listener`](crate::Listener)'s).
    pub not_found: u64,
    /// Sockets closed at accept because the address filter (allowlist) refuses their
    /// address.
    pub not_allowed: u64,
}

impl DropCounts {
    /// Every reason with its count (zeros included), each named as a metrics label would
    /// name it (`slow_reader`, `pong_timeout`, ...).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("slow_reader", self.slow_reader),
            ("pong_timeout", self.pong_timeout),
            ("bad_frame", self.bad_frame),
            ("address_cap", self.address_cap),
            ("connection_cap", self.connection_cap),
            ("handshake_cap", self.handshake_cap),
            ("rejected", self.rejected),
            ("handshake_timeout", self.handshake_timeout),
            ("handshake_failed", self.handshake_failed),
            ("not_found", self.not_found),
            ("not_allowed", self.not_allowed),
        ]
        .into_iter()
    }
}

/// A snapshot of a driver's (or a listener's) transport counters.
///
/// Every count is since the driver started and only grows, except
/// [`connections_open`](Self::connections_open), the connections open at the time of the
/// read. A [`Listener`](crate::Listener)'s own counters hold only what happens before a
/// route is chosen (pending caps, handshake timeouts and failures, 404s); each route's
/// [`Handle::stats`](crate::Handle::stats) holds the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Connections open now (handed to the machine and not yet ended).
    pub connections_open: u64,
    /// Connections handed to the machine (`handle_connect`) since the start.
    pub connections_accepted: u64,
    /// Text and binary messages received and handed to the machine.
    pub frames_in: u64,
    /// Payload bytes in those messages.
    pub bytes_in: u64,
    /// Text and binary messages written to sockets (pings and close frames aside).
    pub frames_out: u64,
    /// Payload bytes in those messages.
    pub bytes_out: u64,
    /// Close frames sent (or attempted, to a peer that may already be gone), by code.
    pub closes: CloseCounts,
    /// What the transport dropped or refused, by reason.
    pub drops: DropCounts,
}

/// Why the transport dropped or refused something (a [`DropCounts`] field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DropReason {
    SlowReader,
    PongTimeout,
    BadFrame,
    AddressCap,
    ConnectionCap,
    HandshakeCap,
    Rejected,
    HandshakeTimeout,
    HandshakeFailed,
    NotFound,
    NotAllowed,
}

const DROP_REASONS: usize = 11;

impl DropReason {
    fn slot(self) -> usize {
        self as usize
    }
}

/// The live counters behind [`TransportStats`]: relaxed atomics written by the tasks that
/// do the work, read by any handle.
#[derive(Debug)]
pub(crate) struct TransportCounters {
    open: AtomicU64,
    accepted: AtomicU64,
    frames_in: AtomicU64,
    bytes_in: AtomicU64,
    frames_out: AtomicU64,
    bytes_out: AtomicU64,
    closes: [AtomicU64; CLOSE_SLOTS],
    drops: [AtomicU64; DROP_REASONS],
}

impl Default for TransportCounters {
    fn default() -> Self {
        Self {
            open: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            frames_in: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            frames_out: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            closes: std::array::from_fn(|_| AtomicU64::new(0)),
            drops: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl TransportCounters {
    /// A connection was handed to the machine.
    pub(crate) fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection the machine saw has ended.
    pub(crate) fn ended(&self) {
        // Never below zero, whatever the order of reads.
        let _ = self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// `frames` messages of `bytes` bytes in all were handed to the machine.
    pub(crate) fn received(&self, frames: u64, bytes: u64) {
        self.frames_in.fetch_add(frames, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `frames` messages of `bytes` bytes in all were written to a socket.
    pub(crate) fn sent(&self, frames: u64, bytes: u64) {
        if frames > 0 {
            self.frames_out.fetch_add(frames, Ordering::Relaxed);
            self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// A close frame with `code` was sent.
    pub(crate) fn close_sent(&self, code: u16) {
        self.closes[close_slot(code)].fetch_add(1, Ordering::Relaxed);
    }

    /// Something was dropped or refused for `reason`.
    pub(crate) fn dropped(&self, reason: DropReason) {
        self.drops[reason.slot()].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> TransportStats {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let d = |r: DropReason| load(&self.drops[r.slot()]);
        TransportStats {
            connections_open: load(&self.open),
            connections_accepted: load(&self.accepted),
            frames_in: load(&self.frames_in),
            bytes_in: load(&self.bytes_in),
            frames_out: load(&self.frames_out),
            bytes_out: load(&self.bytes_out),
            closes: CloseCounts {
                counts: std::array::from_fn(|i| load(&self.closes[i])),
            },
            drops: DropCounts {
                slow_reader: d(DropReason::SlowReader),
                pong_timeout: d(DropReason::PongTimeout),
                bad_frame: d(DropReason::BadFrame),
                address_cap: d(DropReason::AddressCap),
                connection_cap: d(DropReason::ConnectionCap),
                handshake_cap: d(DropReason::HandshakeCap),
                rejected: d(DropReason::Rejected),
                handshake_timeout: d(DropReason::HandshakeTimeout),
                handshake_failed: d(DropReason::HandshakeFailed),
                not_found: d(DropReason::NotFound),
                not_allowed: d(DropReason::NotAllowed),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_the_open_gauge_never_goes_below_zero() {
        let c = TransportCounters::default();
        c.opened();
        c.opened();
        c.ended();
        c.ended();
        c.ended(); // one end too many (cannot happen, must not wrap)
        c.received(3, 30);
        c.sent(2, 7);
        c.sent(0, 0);
        c.close_sent(1001);
        c.close_sent(1001);
        c.close_sent(4003);
        c.close_sent(3000);
        c.dropped(DropReason::SlowReader);
        c.dropped(DropReason::NotFound);
        let s = c.snapshot();
        assert_eq!((s.connections_open, s.connections_accepted), (0, 2));
        assert_eq!(
            (s.frames_in, s.bytes_in, s.frames_out, s.bytes_out),
            (3, 30, 2, 7)
        );
        assert_eq!(s.closes.get(1001), 2);
        assert_eq!(s.closes.get(4003), 1);
        assert_eq!(s.closes.other(), 1);
        assert_eq!(s.closes.total(), 4);
        let listed: Vec<_> = s.closes.iter().collect();
        assert_eq!(listed, [(Some(1001), 2), (Some(4003), 1), (None, 1)]);
        assert_eq!(s.drops.slow_reader, 1);
        assert_eq!(s.drops.not_found, 1);
        let reasons: Vec<_> = s.drops.iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(reasons, [("slow_reader", 1), ("not_found", 1)]);
        assert_eq!(s.drops.iter().count(), DROP_REASONS);
    }

    #[test]
    fn every_close_slot_maps_back_to_its_code() {
        for code in STANDARD.chain(PRIVATE) {
            assert_eq!(slot_code(close_slot(code)), Some(code));
        }
        assert_eq!(slot_code(close_slot(999)), None);
        assert_eq!(slot_code(close_slot(4016)), None);
    }
}
