//! Per-listener IP allowlists (the MCPW spec's "IP Allowlisting"): network matching, and
//! the filter a listener runs at accept, which counts refusals and logs each address at most
//! once a minute.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ipnet::IpNet;

/// `ip`, with an IPv4-mapped IPv6 address turned into its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The networks a listener serves (a bare IP is its /32 or /128). Empty: every address is
/// served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    nets: Vec<IpNet>,
}

impl Allowlist {
    /// A list of `nets`.
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self { nets }
    }

    /// Whether no network is listed (every address is served).
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Whether `ip` is served: the list is empty or a network contains it. An IPv4-mapped
    /// IPv6 peer (`::ffff:10.0.0.1`, what a dual-stack listener sees) counts as its IPv4
    /// address.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.nets.is_empty() || self.nets.iter().any(|n| n.contains(&ip))
    }

    /// The networks, in the order given.
    pub fn nets(&self) -> &[IpNet] {
        &self.nets
    }
}

/// How often one refused address is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(60);
/// Addresses remembered for the once-a-minute log; beyond it (a flood from many
/// addresses), refusals are still counted but new addresses are not logged until old
/// entries expire.
const MAX_REMEMBERED: usize = 4096;

/// A listener's allowlist as its accept filter: refusals are counted
/// ([`refused`](Self::refused)) and logged at most once a minute per address.
#[derive(Debug)]
pub struct AllowFilter {
    list: Allowlist,
    listener: String,
    refused: AtomicU64,
    logged: Mutex<BTreeMap<IpAddr, Instant>>,
}

impl AllowFilter {
    /// The filter of listener `listener` (its name, for the log) with `list`.
    pub fn new(listener: impl Into<String>, list: Allowlist) -> Self {
        Self {
            list,
            listener: listener.into(),
            refused: AtomicU64::new(0),
            logged: Mutex::new(BTreeMap::new()),
        }
    }

    /// Connections refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The allowlist.
    pub fn list(&self) -> &Allowlist {
        &self.list
    }

    /// Whether a connection from `peer` is served; a refusal is counted and maybe logged.
    pub fn check(&self, peer: SocketAddr) -> bool {
        if self.list.allows(peer.ip()) {
            return true;
        }
        let total = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if self.should_log(canonical(peer.ip()), tokio::time::Instant::now().into_std()) {
            tracing::warn!(
                listener = %self.listener,
                peer = %peer.ip(),
                refused_total = total,
                "connection refused: address not in the listener's allow list (logged once a minute per address)"
            );
        }
        false
    }

    /// Whether a refusal of `ip` at `now` is logged, remembering it if so.
    fn should_log(&self, ip: IpAddr, now: Instant) -> bool {
        let mut logged = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = logged.get(&ip) {
            if now.saturating_duration_since(*at) < LOG_EVERY {
                return false;
            }
        }
        if logged.len() >= MAX_REMEMBERED && !logged.contains_key(&ip) {
            logged.retain(|_, at| now.saturating_duration_since(*at) < LOG_EVERY);
            if logged.len() >= MAX_REMEMBERED {
                return false;
            }
        }
        logged.insert(ip, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn list(nets: &[&str]) -> Allowlist {
        Allowlist::new(nets.iter().map(|n| n.parse().unwrap()).collect())
    }

    #[test]
    fn networks_match_by_prefix_and_mapped_addresses_as_ipv4() {
        let l = list(&[
            "10.0.0.0/8",
            "192.168.1.7/32",
            "2001:db8::/32",
            "127.0.0.1/32",
        ]);
        for yes in [
            "10.1.2.3",
            "192.168.1.7",
            "2001:db8::1",
            "127.0.0.1",
            "::ffff:10.9.9.9",
        ] {
            assert!(l.allows(ip(yes)), "{yes}");
        }
        for no in ["11.0.0.1", "192.168.1.8", "2001:db9::1", "127.0.0.2", "::1"] {
            assert!(!l.allows(ip(no)), "{no}");
        }
        assert!(Allowlist::default().allows(ip("8.8.8.8")));
    }

    #[test]
    fn refusals_are_counted_every_time_and_logged_once_a_minute_per_address() {
        let f = AllowFilter::new("main", list(&["127.0.0.2/32"]));
        let peer: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert!(!f.check(peer));
        assert!(!f.check(peer));
        assert!(f.check("127.0.0.2:1".parse().unwrap()));
        assert_eq!(f.refused(), 2);
        let t = tokio::time::Instant::now().into_std();
        let a = ip("10.0.0.1");
        assert!(f.should_log(a, t));
        assert!(!f.should_log(a, t + Duration::from_secs(59)));
        assert!(f.should_log(a, t + Duration::from_secs(60)));
        assert!(f.should_log(ip("10.0.0.2"), t));
    }

    #[test]
    fn the_log_memory_is_bounded() {
        let f = AllowFilter::new("main", list(&["127.0.0.2/32"]));
        let t = tokio::time::Instant::now().into_std();
        for i in 0..MAX_REMEMBERED as u32 {
            assert!(f.should_log(IpAddr::V4(i.into()), t));
        }
        assert!(!f.should_log(ip("255.255.255.255"), t));
        assert!(f.should_log(ip("255.255.255.255"), t + LOG_EVERY));
        assert!(f.logged.lock().unwrap().len() <= MAX_REMEMBERED);
    }
}
