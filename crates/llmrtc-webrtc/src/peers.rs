//! Every peer of one UDP socket, and the demultiplexing of datagrams to them.
//!
//! A datagram goes to its peer in O(1):
//! - from a remote address already learned: that address's peer;
//! - a STUN message from a new address: the peer whose local ICE username fragment starts
//!   the message's `USERNAME` (`<ours>:<theirs>`). Once that peer's ICE agent holds the
//!   address as a checked candidate (after the binding request it answered), the address is
//!   learned, at most [`Limits::max_addrs_per_peer`](crate::Limits::max_addrs_per_peer) per
//!   peer;
//! - anything else (DTLS, SRTP or garbage from an address no ICE check came from) is
//!   dropped and counted: ICE checks always come first.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use agentwire_core::{ConnId, Transmit};
use str0m::net::{Protocol, Receive};
use str0m::Input;

use crate::peer::{Peer, PeerEvent};

/// The peers, their demultiplexing keys and their timers.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    peers: BTreeMap<ConnId, Peer>,
    by_ufrag: HashMap<String, ConnId>,
    by_addr: HashMap<SocketAddr, ConnId>,
    timers: BTreeSet<(Instant, ConnId)>,
    timer_of: HashMap<ConnId, Instant>,
    max_addrs_per_peer: usize,
    /// Datagrams no peer took.
    pub(crate) dropped_datagrams: u64,
}

impl Peers {
    /// No peers; at most `max_addrs_per_peer` addresses learned per peer.
    pub(crate) fn new(max_addrs_per_peer: usize) -> Self {
        Self {
            max_addrs_per_peer,
            ..Self::default()
        }
    }

    /// Peers held.
    pub(crate) fn len(&self) -> usize {
        self.peers.len()
    }

    /// The peer of `conn`.
    pub(crate) fn get_mut(&mut self, conn: ConnId) -> Option<&mut Peer> {
        self.peers.get_mut(&conn)
    }

    /// The peer of `conn`.
    pub(crate) fn get(&self, conn: ConnId) -> Option<&Peer> {
        self.peers.get(&conn)
    }

    /// Adds `peer` (replacing nothing: remove the old one first).
    pub(crate) fn insert(&mut self, peer: Peer) {
        let conn = peer.conn();
        self.by_ufrag.insert(peer.local_ufrag.clone(), conn);
        self.peers.insert(conn, peer);
    }

    /// Removes `conn`'s peer and every key that leads to it.
    pub(crate) fn remove(&mut self, conn: ConnId) -> Option<Peer> {
        let peer = self.peers.remove(&conn)?;
        self.by_ufrag.remove(&peer.local_ufrag);
        for a in &peer.addrs {
            self.by_addr.remove(a);
        }
        if let Some(t) = self.timer_of.remove(&conn) {
            self.timers.remove(&(t, conn));
        }
        Some(peer)
    }

    /// Routes one datagram to its peer and hands it over; the peer that took it, if any.
    pub(crate) fn route(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) -> Option<ConnId> {
        if let Some(&conn) = self.by_addr.get(&remote) {
            if let Some(p) = self.peers.get_mut(&conn) {
                if p.receive(remote, local, contents, now) {
                    return Some(conn);
                }
            }
        }
        let conn = stun_local_ufrag(contents).and_then(|u| self.by_ufrag.get(u).copied());
        let Some(conn) = conn else {
            self.dropped_datagrams += 1;
            return None;
        };
        let max_addrs = self.max_addrs_per_peer;
        let p = self.peers.get_mut(&conn)?;
        if !p.receive(remote, local, contents, now) {
            self.dropped_datagrams += 1;
            return None;
        }
        if !p.addrs.contains(&remote) && p.addrs.len() < max_addrs && checked(p, remote, local, now)
        {
            p.addrs.push(remote);
            if let Some(old) = self.by_addr.insert(remote, conn) {
                if old != conn {
                    // The address moved to another peer (a client's new peer connection
                    // on the same port): the old peer forgets it.
                    if let Some(o) = self.peers.get_mut(&old) {
                        o.addrs.retain(|a| *a != remote);
                    }
                }
            }
        }
        Some(conn)
    }

    /// Drives `conn`'s peer (see [`Peer::drive`]) and re-arms its timer.
    pub(crate) fn drive(
        &mut self,
        conn: ConnId,
        now: Instant,
        transmits: &mut VecDeque<Transmit>,
        events: &mut Vec<PeerEvent>,
    ) {
        let Some(p) = self.peers.get_mut(&conn) else {
            return;
        };
        p.drive(now, transmits, events);
        let next = p.next_timeout();
        if let Some(t) = self.timer_of.remove(&conn) {
            self.timers.remove(&(t, conn));
        }
        if let Some(t) = next {
            self.timer_of.insert(conn, t);
            self.timers.insert((t, conn));
        }
    }

    /// The earliest timer of any peer.
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|(t, _)| *t)
    }

    /// The peers whose timers are due at `now`, earliest first.
    pub(crate) fn due(&self, now: Instant) -> Vec<ConnId> {
        self.timers
            .iter()
            .take_while(|(t, _)| *t <= now)
            .map(|(_, c)| *c)
            .collect()
    }
}

/// Whether `p`'s ICE agent now takes non-STUN traffic from `remote` (it holds `remote` as
/// a checked candidate or its nominated address): asked with a one-byte-header DTLS probe
/// that is only checked, never handled.
fn checked(p: &Peer, remote: SocketAddr, local: SocketAddr, now: Instant) -> bool {
    const PROBE: [u8; 13] = [22, 254, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    match Receive::new(Protocol::Udp, remote, local, &PROBE) {
        Ok(r) => p.accepts(&Input::Receive(now, r)),
        Err(_) => false,
    }
}

/// The local ICE username fragment a STUN message is addressed to: the part of its
/// `USERNAME` attribute before `:`. `None` for anything that is not a well-formed STUN
/// message with a username.
pub(crate) fn stun_local_ufrag(d: &[u8]) -> Option<&str> {
    const MAGIC: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
    const USERNAME: u16 = 0x0006;
    if d.len() < 20 || d[0] & 0xC0 != 0 || d[4..8] != MAGIC {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([d[2], d[3]]));
    let body = d.get(20..20 + len)?;
    let mut at = 0;
    while at + 4 <= body.len() {
        let kind = u16::from_be_bytes([body[at], body[at + 1]]);
        let alen = usize::from(u16::from_be_bytes([body[at + 2], body[at + 3]]));
        let value = body.get(at + 4..at + 4 + alen)?;
        if kind == USERNAME {
            let name = std::str::from_utf8(value).ok()?;
            return name.split(':').next();
        }
        at += 4 + alen.div_ceil(4) * 4;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stun(attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (k, v) in attrs {
            body.extend_from_slice(&k.to_be_bytes());
            body.extend_from_slice(&(v.len() as u16).to_be_bytes());
            body.extend_from_slice(v);
            while body.len() % 4 != 0 {
                body.push(0);
            }
        }
        let mut d = vec![0, 1];
        d.extend_from_slice(&(body.len() as u16).to_be_bytes());
        d.extend_from_slice(&[0x21, 0x12, 0xA4, 0x42]);
        d.extend_from_slice(&[7; 12]);
        d.extend_from_slice(&body);
        d
    }

    #[test]
    fn the_local_ufrag_is_read_from_username() {
        let d = stun(&[(0x8022, b"agent"), (0x0006, b"abcd:wxyz")]);
        assert_eq!(stun_local_ufrag(&d), Some("abcd"));
    }

    #[test]
    fn truncated_or_foreign_datagrams_have_no_ufrag() {
        let d = stun(&[(0x0006, b"abcd:wxyz")]);
        for cut in 0..d.len() {
            assert_eq!(stun_local_ufrag(&d[..cut]), None, "cut at {cut}");
        }
        assert_eq!(stun_local_ufrag(&[22; 40]), None);
        let mut bad_len = d.clone();
        bad_len[27] = 200; // the attribute claims more than the message holds
        assert_eq!(stun_local_ufrag(&bad_len), None);
    }
}
