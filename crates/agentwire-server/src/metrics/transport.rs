//! The collector that reads the transport's counters at scrape time, and the drops the
//! machines' events report, written out together as `agentwire_drops_total`.

use std::collections::BTreeMap;

use agentwire::tokio::{TransportStats, UdpStats};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::lock;
use crate::config::Protocol;

/// Reads one driver's (or listener's) counters.
pub(super) type Source = Box<dyn Fn() -> TransportStats + Send + Sync>;

/// Reads one driver's UDP socket counters (`None` for a driver without one).
pub(super) type UdpSource = Box<dyn Fn() -> Option<UdpStats> + Send + Sync>;

/// The transport sources per protocol and per listener, and the machines' drop counts.
#[derive(Default)]
pub(super) struct TransportCollector {
    sources: std::sync::Mutex<Vec<(Protocol, Source)>>,
    listeners: std::sync::Mutex<Vec<(String, Source)>>,
    udp: std::sync::Mutex<Vec<(Protocol, UdpSource)>>,
    event_drops: std::sync::Mutex<BTreeMap<(Protocol, &'static str), u64>>,
}

impl std::fmt::Debug for TransportCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportCollector").finish_non_exhaustive()
    }
}

/// One protocol's transport counters, added up over its sources.
#[derive(Default)]
struct Totals {
    open: u64,
    accepted: u64,
    frames: [u64; 2],
    bytes: [u64; 2],
    closes: BTreeMap<Option<u16>, u64>,
    drops: BTreeMap<&'static str, u64>,
}

impl Totals {
    fn add(&mut self, s: &TransportStats) {
        self.open += s.connections_open;
        self.accepted += s.connections_accepted;
        self.frames[0] += s.frames_in;
        self.frames[1] += s.frames_out;
        self.bytes[0] += s.bytes_in;
        self.bytes[1] += s.bytes_out;
        for (code, n) in s.closes.iter() {
            *self.closes.entry(code).or_default() += n;
        }
        for (reason, n) in s.drops.iter() {
            *self.drops.entry(reason).or_default() += n;
        }
    }
}

const DIRECTIONS: [&str; 2] = ["in", "out"];

/// The drop reasons a shared listener counts itself (the rest are its routes').
const LISTENER_REASONS: [&str; 5] = [
    "not_found",
    "not_allowed",
    "handshake_cap",
    "handshake_timeout",
    "handshake_failed",
];

impl TransportCollector {
    pub(super) fn add_source(&self, protocol: Protocol, source: Source) {
        lock(&self.sources).push((protocol, source));
    }

    pub(super) fn add_udp(&self, protocol: Protocol, source: UdpSource) {
        lock(&self.udp).push((protocol, source));
    }

    /// Every protocol's UDP counters added up, for the protocols with a socket.
    fn udp_totals(&self) -> BTreeMap<Protocol, [u64; 7]> {
        let mut totals: BTreeMap<Protocol, [u64; 7]> = BTreeMap::new();
        for (protocol, source) in lock(&self.udp).iter() {
            let Some(u) = source() else { continue };
            let t = totals.entry(*protocol).or_default();
            let add = [
                u.received,
                u.sent,
                u.received_bytes,
                u.sent_bytes,
                u.dropped_full,
                u.send_errors,
                u.receive_errors,
            ];
            for (sum, n) in t.iter_mut().zip(add) {
                *sum += n;
            }
        }
        totals
    }

    pub(super) fn add_listener(&self, name: &str, source: Source) {
        lock(&self.listeners).push((name.to_owned(), source));
    }

    /// Counts `n` drops of `protocol` for `reason` (reported by its machine's events).
    pub(super) fn dropped(&self, protocol: Protocol, reason: &'static str, n: u64) {
        *lock(&self.event_drops)
            .entry((protocol, reason))
            .or_default() += n;
    }

    /// Every registered protocol's totals, in protocol order.
    fn totals(&self) -> BTreeMap<Protocol, Totals> {
        let mut totals: BTreeMap<Protocol, Totals> = BTreeMap::new();
        for (protocol, source) in lock(&self.sources).iter() {
            totals.entry(*protocol).or_default().add(&source());
        }
        for ((protocol, reason), n) in lock(&self.event_drops).iter() {
            *totals
                .entry(*protocol)
                .or_default()
                .drops
                .entry(reason)
                .or_default() += n;
        }
        totals
    }
}

impl Collector for TransportCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let totals = self.totals();
        {
            let mut family = encoder.encode_descriptor(
                "agentwire_connections_open",
                "WebSocket connections open now",
                None,
                MetricType::Gauge,
            )?;
            for (protocol, t) in &totals {
                let labels = [("protocol", protocol.name())];
                ConstGauge::new(i64::try_from(t.open).unwrap_or(i64::MAX))
                    .encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "agentwire_connections_accepted",
                "WebSocket connections accepted and handed to the protocol",
                None,
                MetricType::Counter,
            )?;
            for (protocol, t) in &totals {
                let labels = [("protocol", protocol.name())];
                ConstCounter::new(t.accepted).encode(family.encode_family(&labels)?)?;
            }
        }
        for (name, help, pick) in [
            (
                "agentwire_frames",
                "WebSocket text and binary messages, by direction",
                (|t: &Totals| t.frames) as fn(&Totals) -> [u64; 2],
            ),
            (
                "agentwire_bytes",
                "Payload bytes of those messages, by direction",
                |t: &Totals| t.bytes,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (protocol, t) in &totals {
                for (direction, n) in DIRECTIONS.iter().zip(pick(t)) {
                    let labels = [("protocol", protocol.name()), ("direction", direction)];
                    ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "agentwire_closes",
                "Close frames sent, by close code",
                None,
                MetricType::Counter,
            )?;
            for (protocol, t) in &totals {
                for (code, n) in &t.closes {
                    let code = code.map_or_else(|| "other".to_owned(), |c| c.to_string());
                    let labels = [("protocol", protocol.name().to_owned()), ("code", code)];
                    ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "agentwire_drops",
                "Connections, messages and requests dropped or refused, by reason",
                None,
                MetricType::Counter,
            )?;
            for (protocol, t) in &totals {
                for (reason, n) in &t.drops {
                    let labels = [("protocol", protocol.name()), ("reason", reason)];
                    ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        let udp = self.udp_totals();
        if !udp.is_empty() {
            for (name, help, range) in [
                (
                    "agentwire_udp_datagrams",
                    "UDP datagrams (WebRTC), by direction",
                    0..2,
                ),
                (
                    "agentwire_udp_bytes",
                    "Bytes in those datagrams, by direction",
                    2..4,
                ),
            ] {
                let mut family =
                    encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
                for (protocol, t) in &udp {
                    for (direction, n) in DIRECTIONS.iter().zip(&t[range.clone()]) {
                        let labels = [("protocol", protocol.name()), ("direction", direction)];
                        ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                    }
                }
            }
            let mut family = encoder.encode_descriptor(
                "agentwire_udp_drops",
                "UDP datagrams dropped (send buffer full, send refused) and receive errors",
                None,
                MetricType::Counter,
            )?;
            for (protocol, t) in &udp {
                for (reason, n) in ["send_buffer_full", "send_error", "receive_error"]
                    .iter()
                    .zip(&t[4..7])
                {
                    let labels = [("protocol", protocol.name()), ("reason", reason)];
                    ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        let listeners = lock(&self.listeners);
        if !listeners.is_empty() {
            let mut family = encoder.encode_descriptor(
                "agentwire_listener_drops",
                "Sockets a shared listener refused before choosing a route, by reason",
                None,
                MetricType::Counter,
            )?;
            for (name, source) in listeners.iter() {
                let stats = source();
                for (reason, n) in stats.drops.iter() {
                    if !LISTENER_REASONS.contains(&reason) {
                        continue; // counted by the routes, never before a route is chosen
                    }
                    let labels = [("listener", name.as_str()), ("reason", reason)];
                    ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}
