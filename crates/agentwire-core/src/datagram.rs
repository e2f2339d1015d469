//! UDP beside the WebSocket: a [`Machine`] that also takes and sends datagrams.
//!
//! Some protocols carry part of their traffic outside the WebSocket: llmrtc's WebRTC data
//! channel and audio tracks travel as STUN, DTLS and SRTP datagrams on a UDP socket. Such a
//! machine implements [`DatagramMachine`] as well as [`Machine`], and a driver that owns a UDP
//! socket feeds it every datagram it receives and sends every [`Transmit`] it asks for. The
//! driver knows nothing about what the datagrams hold: demultiplexing (by remote address,
//! ICE username, ...) is the machine's job, so one socket serves every connection.

use std::net::SocketAddr;
use std::time::Instant;

use crate::Machine;

/// One datagram a [`DatagramMachine`] asks its driver to send.
#[derive(Clone, PartialEq, Eq)]
pub struct Transmit {
    /// The local address to send from: one the driver reported through
    /// [`DatagramMachine::handle_datagram`]'s `local` (a driver with one socket ignores it).
    pub local: SocketAddr,
    /// The remote address to send to.
    pub remote: SocketAddr,
    /// The datagram's bytes.
    pub contents: Vec<u8>,
}

impl std::fmt::Debug for Transmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transmit")
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("len", &self.contents.len())
            .finish()
    }
}

/// A [`Machine`] that also speaks UDP.
///
/// # Contract
///
/// Everything written on [`Machine`] holds, and:
///
/// 1. **Drain transmits with the outputs.** After any `&mut self` call, the driver drains
///    [`poll_transmit`](Self::poll_transmit) until `None` as well as
///    [`poll_output`](Machine::poll_output), then reads
///    [`poll_timeout`](Machine::poll_timeout), which covers the datagram side's timers too.
/// 2. **Any datagram is safe.** Garbage, truncated, replayed, oversized or unexpected
///    datagrams never panic and never fail the call; a datagram that belongs to no known peer
///    is dropped (and counted by the machine).
/// 3. **Sending is best effort.** UDP may lose, reorder or duplicate datagrams, and a driver
///    whose socket buffer is full may drop a transmit (and should count it): the protocol
///    above recovers, as it must on any network.
pub trait DatagramMachine: Machine {
    /// A datagram of `contents` arrived from `remote` on the local address `local`.
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    );

    /// The next datagram to send, if any. Drain until `None` after every mutation.
    fn poll_transmit(&mut self) -> Option<Transmit>;
}
