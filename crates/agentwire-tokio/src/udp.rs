//! The UDP side of a driver: one socket, polled by the owner task itself.
//!
//! A machine that is a [`DatagramMachine`] may be driven with a bound [`UdpSocket`] beside
//! its WebSocket(s) ([`Server::bind_with_udp`](crate::Server::bind_with_udp),
//! [`Client::connect_with_udp`](crate::Client::connect_with_udp)). The owner task waits for
//! the socket to become readable in the same `select!` as frames, commands and timers (no
//! task, no channel, no lock), takes at most [`UdpLimits::datagrams_per_wake`] datagrams,
//! hands each to [`DatagramMachine::handle_datagram`], and after every step drains
//! [`DatagramMachine::poll_transmit`] with non-blocking sends (on a duplicate of the
//! socket's descriptor: a send is one syscall and never waits for the reactor). A driver
//! without a socket has no such branch armed and no drain to run.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use agentwire_core::{DatagramMachine, Machine, Transmit};
use tokio::net::UdpSocket;

use crate::config::UdpLimits;

/// Counters of a driver's UDP socket, read with [`Handle::udp_stats`](crate::Handle::udp_stats).
///
/// Every count is since the driver started; they only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpStats {
    /// Datagrams received and handed to the machine.
    pub received: u64,
    /// Bytes in those datagrams.
    pub received_bytes: u64,
    /// Datagrams the machine asked to send that the socket took.
    pub sent: u64,
    /// Bytes in those datagrams.
    pub sent_bytes: u64,
    /// Transmits dropped because the socket's send buffer was full (the socket would have
    /// blocked). UDP is best effort: the protocol above recovers, as from any loss.
    pub dropped_full: u64,
    /// Transmits the operating system refused for another reason (an unreachable network,
    /// an address of the wrong family, ...), dropped and logged at `debug`.
    pub send_errors: u64,
    /// Receive calls that failed with an error other than "would block" (for instance an
    /// ICMP error reported on the socket); the driver goes on.
    pub receive_errors: u64,
}

/// The shared counters behind [`UdpStats`]: written by the owner task only (relaxed
/// atomics, no lock), read by any [`Handle`](crate::Handle).
#[derive(Debug, Default)]
pub(crate) struct UdpCounters {
    received: AtomicU64,
    received_bytes: AtomicU64,
    sent: AtomicU64,
    sent_bytes: AtomicU64,
    dropped_full: AtomicU64,
    send_errors: AtomicU64,
    receive_errors: AtomicU64,
}

impl UdpCounters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A snapshot of the counters.
    pub(crate) fn snapshot(&self) -> UdpStats {
        UdpStats {
            received: self.received.load(Ordering::Relaxed),
            received_bytes: self.received_bytes.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            sent_bytes: self.sent_bytes.load(Ordering::Relaxed),
            dropped_full: self.dropped_full.load(Ordering::Relaxed),
            send_errors: self.send_errors.load(Ordering::Relaxed),
            receive_errors: self.receive_errors.load(Ordering::Relaxed),
        }
    }
}

/// What became of one transmit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// The socket took it.
    Ok,
    /// The send buffer was full: dropped (contract rule 3 of [`DatagramMachine`]).
    Full,
    /// Another error: dropped.
    Error,
}

/// Classifies the result of one non-blocking `send_to`.
fn classify(res: &io::Result<usize>) -> Sent {
    match res {
        Ok(_) => Sent::Ok,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Sent::Full,
        Err(_) => Sent::Error,
    }
}

/// A driver's UDP socket and the machine's datagram entry points.
///
/// The entry points are function pointers taken where `M: DatagramMachine` is known, so the
/// owner loop stays generic over any [`Machine`] and a driver without a socket pays nothing.
pub(crate) struct Udp<M> {
    socket: UdpSocket,
    /// The same socket (a duplicated descriptor, non-blocking) for sends: a send is one
    /// syscall, and "would block" means the send buffer really is full (tokio's own
    /// `try_send_to` also says so while the reactor has not yet reported the socket
    /// writable, which would drop the first datagrams of a fresh socket).
    sender: std::net::UdpSocket,
    local: SocketAddr,
    buf: Box<[u8]>,
    per_wake: usize,
    counters: Arc<UdpCounters>,
    handle_datagram: fn(&mut M, SocketAddr, SocketAddr, &[u8], Instant),
    poll_transmit: fn(&mut M) -> Option<Transmit>,
}

impl<M: Machine> Udp<M> {
    /// Wraps a bound socket for a datagram machine.
    ///
    /// Must run inside the tokio runtime that will drive it.
    pub(crate) fn new(socket: UdpSocket, limits: &UdpLimits) -> io::Result<Self>
    where
        M: DatagramMachine,
    {
        let std_socket = socket.into_std()?;
        let sender = std_socket.try_clone()?;
        sender.set_nonblocking(true)?;
        let socket = UdpSocket::from_std(std_socket)?;
        let local = socket.local_addr()?;
        Ok(Self {
            socket,
            sender,
            local,
            buf: vec![0; limits.max_datagram_size.max(1)].into_boxed_slice(),
            per_wake: limits.datagrams_per_wake.max(1),
            counters: Arc::new(UdpCounters::default()),
            handle_datagram: M::handle_datagram,
            poll_transmit: M::poll_transmit,
        })
    }

    /// The socket's local address.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The counters, for the [`Handle`](crate::Handle).
    pub(crate) fn counters(&self) -> Arc<UdpCounters> {
        Arc::clone(&self.counters)
    }

    /// Resolves when the socket of `udp` may have a datagram; never without a socket.
    pub(crate) async fn readable(udp: &Option<Self>) {
        match udp {
            Some(u) => {
                if let Err(e) = u.socket.readable().await {
                    // Readiness itself failed (the reactor is gone): nothing left to wait for.
                    tracing::warn!(error = %e, "udp socket readiness failed");
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }

    /// Hands the datagrams waiting on the socket to the machine (with `now`, read once for
    /// the wake-up), at most `datagrams_per_wake` of them. Returns whether the budget ran out (more may wait:
    /// the caller drains outputs and yields before taking more).
    pub(crate) fn receive(&mut self, machine: &mut M, now: Instant) -> bool {
        for _ in 0..self.per_wake {
            match self.socket.try_recv_from(&mut self.buf) {
                Ok((len, remote)) => {
                    UdpCounters::add(&self.counters.received, 1);
                    UdpCounters::add(&self.counters.received_bytes, len as u64);
                    let contents = &self.buf[..len];
                    (self.handle_datagram)(machine, remote, self.local, contents, now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) => {
                    UdpCounters::add(&self.counters.receive_errors, 1);
                    tracing::debug!(error = %e, "udp receive failed");
                }
            }
        }
        true
    }

    /// Sends every datagram the machine has queued, without waiting: a full send buffer
    /// drops the datagram (counted), as does any other send error.
    pub(crate) fn flush(&mut self, machine: &mut M) {
        while let Some(t) = (self.poll_transmit)(machine) {
            let res = self.sender.send_to(&t.contents, t.remote);
            match classify(&res) {
                Sent::Ok => {
                    UdpCounters::add(&self.counters.sent, 1);
                    UdpCounters::add(&self.counters.sent_bytes, t.contents.len() as u64);
                }
                Sent::Full => {
                    UdpCounters::add(&self.counters.dropped_full, 1);
                    tracing::trace!(remote = %t.remote, "udp send buffer full; datagram dropped");
                }
                Sent::Error => {
                    UdpCounters::add(&self.counters.send_errors, 1);
                    if let Err(e) = res {
                        tracing::debug!(remote = %t.remote, error = %e, "udp send failed; datagram dropped");
                    }
                }
            }
        }
    }
}

/// Drains the transmits of `udp`'s machine, if the driver has a socket.
pub(crate) fn flush<M: Machine>(udp: &mut Option<Udp<M>>, machine: &mut M) {
    if let Some(u) = udp {
        u.flush(machine);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_send_buffer_is_a_drop_and_other_errors_are_errors() {
        assert_eq!(classify(&Ok(3)), Sent::Ok);
        assert_eq!(
            classify(&Err(io::Error::from(io::ErrorKind::WouldBlock))),
            Sent::Full
        );
        assert_eq!(
            classify(&Err(io::Error::from(io::ErrorKind::AddrNotAvailable))),
            Sent::Error
        );
    }

    #[test]
    fn counters_snapshot_what_was_added() {
        let c = UdpCounters::default();
        UdpCounters::add(&c.received, 2);
        UdpCounters::add(&c.dropped_full, 1);
        let s = c.snapshot();
        assert_eq!(s.received, 2);
        assert_eq!(s.dropped_full, 1);
        assert_eq!(s.sent, 0);
    }
}
