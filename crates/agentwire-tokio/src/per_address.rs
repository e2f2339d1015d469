//! Per-address accounting of a server's pending handshakes and open connections.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};

/// The key one peer's sockets are counted under: its IPv4 address, or the /64 prefix of
/// its IPv6 address (one host usually owns a whole /64, so counting single IPv6 addresses
/// would let it open 2^64 times the cap). IPv4-mapped IPv6 addresses count as IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AddrKey(IpAddr);

impl AddrKey {
    /// The key of `ip`.
    pub(crate) fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    Self(IpAddr::V6(Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }
}

/// Which count a [`Slot`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A TCP connection still in its TLS/upgrade handshake.
    Pending,
    /// An upgraded (or upgrading, once past the capacity check) connection.
    Open,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    pending: usize,
    open: usize,
}

/// Counts per peer address. An entry exists only while one of its counts is above zero, so
/// the table holds at most one entry per pending or open socket.
#[derive(Debug, Default)]
pub(crate) struct PerAddress {
    counts: Mutex<HashMap<AddrKey, Counts>>,
}

impl PerAddress {
    fn lock(&self) -> MutexGuard<'_, HashMap<AddrKey, Counts>> {
        // A panic while holding this lock cannot leave the counts half-updated (each update
        // is one arithmetic step), so a poisoned lock is still usable.
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one `kind` slot for `ip` if fewer than `max` are taken.
    pub(crate) fn reserve(self: &Arc<Self>, ip: IpAddr, kind: Kind, max: usize) -> Option<Slot> {
        let key = AddrKey::of(ip);
        let mut map = self.lock();
        let counts = map.entry(key).or_default();
        let n = match kind {
            Kind::Pending => &mut counts.pending,
            Kind::Open => &mut counts.open,
        };
        if *n >= max {
            if counts.pending == 0 && counts.open == 0 {
                map.remove(&key);
            }
            return None;
        }
        *n += 1;
        Some(Slot {
            table: Arc::clone(self),
            key,
            kind,
        })
    }

    /// The `(pending, open)` counts of `ip` (tests and logs).
    #[cfg(test)]
    pub(crate) fn counts(&self, ip: IpAddr) -> (usize, usize) {
        self.lock()
            .get(&AddrKey::of(ip))
            .map_or((0, 0), |c| (c.pending, c.open))
    }

    /// How many addresses have an entry (tests).
    #[cfg(test)]
    pub(crate) fn addresses(&self) -> usize {
        self.lock().len()
    }
}

/// One reserved per-address slot; released on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    table: Arc<PerAddress>,
    key: AddrKey,
    kind: Kind,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self.table.lock();
        if let Some(counts) = map.get_mut(&self.key) {
            match self.kind {
                Kind::Pending => counts.pending = counts.pending.saturating_sub(1),
                Kind::Open => counts.open = counts.open.saturating_sub(1),
            }
            if counts.pending == 0 && counts.open == 0 {
                map.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn caps_each_address_alone_and_frees_on_drop() {
        let t = Arc::new(PerAddress::default());
        let a = ip("127.0.0.1");
        let b = ip("127.0.0.2");
        let held: Vec<Slot> = (0..3)
            .map(|_| t.reserve(a, Kind::Open, 3).expect("slot"))
            .collect();
        assert!(t.reserve(a, Kind::Open, 3).is_none(), "a is at its cap");
        let other = t.reserve(b, Kind::Open, 3).expect("b has its own cap");
        let pending = t
            .reserve(a, Kind::Pending, 1)
            .expect("pending is counted apart");
        assert!(t.reserve(a, Kind::Pending, 1).is_none());
        assert_eq!(t.counts(a), (1, 3));
        drop(held);
        drop(pending);
        assert_eq!(t.counts(a), (0, 0));
        assert_eq!(t.addresses(), 1, "a's entry is gone, b's stays");
        drop(other);
        assert_eq!(t.addresses(), 0);
        assert!(t.reserve(a, Kind::Open, 0).is_none());
        assert_eq!(t.addresses(), 0, "a refused reservation leaves no entry");
    }

    #[test]
    fn ipv6_counts_by_its_64_prefix_and_mapped_ipv4_as_ipv4() {
        assert_eq!(
            AddrKey::of(ip("2001:db8:1:2:aaaa::1")),
            AddrKey::of(ip("2001:db8:1:2:bbbb::9"))
        );
        assert_ne!(
            AddrKey::of(ip("2001:db8:1:2::1")),
            AddrKey::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            AddrKey::of(ip("::ffff:10.0.0.1")),
            AddrKey::of(ip("10.0.0.1"))
        );
    }
}
