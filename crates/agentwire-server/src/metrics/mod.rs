//! The server's Prometheus metrics: one [`Metrics`] for all five protocols, fed by the
//! machines' events (`observe_*`) and by the transport's counters (read at scrape time),
//! rendered as OpenMetrics text by the `prometheus-client` crate for the admin listener's
//! `/metrics`.
//!
//! Every family carries the label `protocol` = `bus` | `chopsticks` | `mcpw` | `llmrtc` |
//! `relay`.
//!
//! | family | type | labels | from |
//! |---|---|---|---|
//! | `agentwire_connections_open` | gauge | protocol | transport: connections open now |
//! | `agentwire_connections_accepted_total` | counter | protocol | transport: connections handed to the machine |
//! | `agentwire_frames_total` | counter | protocol, direction (`in`/`out`) | transport: WebSocket text/binary messages |
//! | `agentwire_bytes_total` | counter | protocol, direction | transport: their payload bytes |
//! | `agentwire_closes_total` | counter | protocol, code | transport: close frames sent, by close code (`other` for codes outside 1000-1015 and 4000-4015) |
//! | `agentwire_drops_total` | counter | protocol, reason | transport drops and refusals ([`DropCounts`](agentwire::tokio::DropCounts): `slow_reader`, `pong_timeout`, `bad_frame`, `address_cap`, `connection_cap`, `handshake_cap`, `rejected`, `handshake_timeout`, `handshake_failed`) and the machines' own (below) |
//! | `agentwire_udp_datagrams_total`, `agentwire_udp_bytes_total` | counter | protocol, direction | a driver's UDP socket (llmrtc's WebRTC), when it has one |
//! | `agentwire_udp_drops_total` | counter | protocol, reason (`send_buffer_full`, `send_error`, `receive_error`) | the same socket's drops and errors |
//! | `agentwire_listener_drops_total` | counter | listener, reason | a shared listener's refusals before a route is chosen (`not_found`, `not_allowed`, `handshake_cap`, `handshake_timeout`, `handshake_failed`) |
//! | `agentwire_errors_total` | counter | protocol, code | errors the server answered or reported (below) |
//! | `agentwire_requests_total` | counter | protocol, operation, outcome | finished requests, hops, tasks, turns and tool calls (below) |
//! | `agentwire_request_duration_seconds` | histogram | protocol, operation | their latency, measured by the event task (below) |
//!
//! What each protocol's events give:
//!
//! | protocol | operation: latency measured from → to | errors (`code`) | drops (`reason`) | own families |
//! |---|---|---|---|---|
//! | bus | `hop`: `Published` or the previous `Hop` → `Hop` (outcome `continued`, `stopped`, `error`, `timed_out`, `disconnected`, `overloaded`); `publish`: `Published` → `Completed` | JSON-RPC code of a protocol violation or of a subscriber's error answer | `subscriber-overloaded`, `publisher-overloaded` | `agentwire_bus_subscriptions`, `agentwire_bus_deliveries_in_flight` |
//! | chopsticks | `request`: counted by outcome (`ok`, `error`, `agent-offline`, `agent-timeout`); no latency (the controller reports no send time) | the violation's kind (`decode`, `unauthorized`, `rate-limited`, ...), `agent-offline`, `agent-timeout` | `agent-stale` | `agentwire_chopsticks_agents`, `agentwire_chopsticks_sessions_bound` |
//! | mcpw | `task`: first `TaskQueued`/`TaskAssigned` → `TaskCompleted` (outcome `completed`) or `TaskFailed` (`deadline-exceeded`, `attempts-exhausted`, `cancelled`) | the MCPW error code (4000-4008) of a refused message | `sequence-gap` (missing ids), `sequence-duplicate` | `agentwire_mcpw_agents`, `agentwire_mcpw_tasks` |
//! | llmrtc | `turn`: a session's first `Stt`/`Llm` request → `TurnEnded` (outcome `completed`, `nothing-heard`, `interrupted`, `failed`, `abandoned`) | the `code` of every `error` sent | `heartbeat-timeout` | `agentwire_llmrtc_sessions`, `agentwire_llmrtc_turns_in_flight` |
//! | relay | `tool_call`: a `tool.call` forwarded → the session's next `tool.result` forwarded (outcome `ok`) or the request's expiry (`expired`), matched in order per relay session | the violation's code, `LOG_WRITE_FAILED` | `refused-wrong-path`, `refused-server-full`, `undelivered-no-host`, `undelivered-unknown-reply-to`, `undelivered-no-reply-to` | `agentwire_relay_sessions`, `agentwire_relay_study_log_bytes_total` |
//!
//! Bounds: an error code is a label only for the first [`MAX_CODES_PER_PROTOCOL`] distinct
//! codes of a protocol (later ones count as `other`), and each in-flight table the event
//! task keeps for latency (deliveries, tasks, turns, tool calls) holds at most
//! [`MAX_TRACKED`] entries (the oldest is forgotten first), so a peer cannot grow them.

mod bus;
mod chopsticks;
mod families;
mod llmrtc;
mod mcpw;
mod relay;
mod transport;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use agentwire::tokio::{Handle, TransportStats};
use prometheus_client::registry::Registry;

use crate::config::Protocol;

use self::families::Families;
use self::transport::TransportCollector;

/// The `Content-Type` of [`Metrics::render`]'s text (OpenMetrics 1.0, which Prometheus
/// scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Distinct error codes kept as labels per protocol; further codes count as `other`.
pub const MAX_CODES_PER_PROTOCOL: usize = 64;

/// Entries each latency table keeps at most (see the module docs).
pub const MAX_TRACKED: usize = 65_536;

/// The metrics of one server process. Share it as `Arc<Metrics>`; every method takes
/// `&self` and may be called from any task.
pub struct Metrics {
    registry: Registry,
    families: Arc<Families>,
    transport: Arc<TransportCollector>,
    bus: Mutex<bus::State>,
    chopsticks: Mutex<chopsticks::State>,
    mcpw: Mutex<mcpw::State>,
    llmrtc: Mutex<llmrtc::State>,
    relay: Mutex<relay::State>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Locks `m`, going on after a panic elsewhere (every update is a single step).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The transport's clock (tokio's, so paused-time tests agree with the drivers).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Metrics {
    /// Every family registered, all counts zero, no transport source yet.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let families = Arc::new(Families::register(&mut registry));
        let transport = Arc::new(TransportCollector::default());
        registry.register_collector(Box::new(Arc::clone(&transport)));
        Self {
            registry,
            families,
            transport,
            bus: Mutex::default(),
            chopsticks: Mutex::default(),
            mcpw: Mutex::default(),
            llmrtc: Mutex::default(),
            relay: Mutex::default(),
        }
    }

    /// Reads `protocol`'s transport counters from `source` at every scrape (several sources
    /// of one protocol are added up).
    pub fn register_transport(
        &self,
        protocol: Protocol,
        source: impl Fn() -> TransportStats + Send + Sync + 'static,
    ) {
        self.transport.add_source(protocol, Box::new(source));
    }

    /// [`register_transport`](Self::register_transport) with a driver's handle
    /// ([`Handle::stats`]), and its UDP socket's counters ([`Handle::udp_stats`]) when it
    /// has one (llmrtc with WebRTC).
    pub fn register_handle<M: 'static>(&self, protocol: Protocol, handle: Handle<M>) {
        let udp = handle.clone();
        self.register_transport(protocol, move || handle.stats());
        self.transport
            .add_udp(protocol, Box::new(move || udp.udp_stats()));
    }

    /// Reads a shared listener's own counters (what it refuses before a route is chosen,
    /// [`Listener::stats`](agentwire::tokio::Listener::stats)) at every scrape, under the
    /// label `listener` = `name`.
    pub fn register_listener(
        &self,
        name: &str,
        source: impl Fn() -> TransportStats + Send + Sync + 'static,
    ) {
        self.transport.add_listener(name, Box::new(source));
    }

    /// Counts a bus event (call it from the bus app's event task, for every event).
    pub fn observe_bus(&self, event: &agentwire::jsonrpc_bus::BusEvent) {
        bus::observe(
            &self.families,
            &self.transport,
            &mut lock(&self.bus),
            event,
            now(),
        );
    }

    /// Counts a chopsticks controller event.
    pub fn observe_chopsticks(&self, event: &agentwire::chopsticks::ControllerEvent) {
        chopsticks::observe(
            &self.families,
            &self.transport,
            &mut lock(&self.chopsticks),
            event,
        );
    }

    /// Counts an MCPW orchestrator event.
    pub fn observe_mcpw(&self, event: &agentwire::mcpw::orchestrator::OrchestratorEvent) {
        mcpw::observe(
            &self.families,
            &self.transport,
            &mut lock(&self.mcpw),
            event,
            now(),
        );
    }

    /// Counts an llmrtc server event.
    pub fn observe_llmrtc(&self, event: &agentwire::llmrtc::ServerEvent) {
        llmrtc::observe(
            &self.families,
            &self.transport,
            &mut lock(&self.llmrtc),
            event,
            now(),
        );
    }

    /// Counts an event of the relay with its study log.
    pub fn observe_relay(&self, event: &crate::relay::logging_relay::ServerEvent) {
        relay::observe(
            &self.families,
            &self.transport,
            &mut lock(&self.relay),
            event,
            now(),
        );
    }

    /// The OpenMetrics text of every family now ([`CONTENT_TYPE`]), ending in `# EOF`.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(16 << 10);
        // Writing to a String cannot fail; the encoder's only error is the writer's.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use agentwire::core::ConnId;
    use agentwire::jsonrpc_bus::{BusEvent, DeliveryId, DropReason, HopOutcome, SubscriptionId};
    use agentwire::tokio::TransportStats;

    use super::*;

    fn subscribed(n: u64) -> BusEvent {
        BusEvent::Subscribed {
            conn: ConnId::new(n),
            topic: "t".to_owned(),
            subscription_id: SubscriptionId::new(format!("s{n}")),
        }
    }

    #[test]
    fn bus_events_and_transport_counters_render_as_openmetrics() {
        let m = Metrics::new();
        m.register_transport(Protocol::Bus, TransportStats::default);
        m.observe_bus(&subscribed(1));
        m.observe_bus(&subscribed(2));
        let d = DeliveryId(1);
        m.observe_bus(&BusEvent::Published {
            delivery: d,
            publisher: None,
            topic: "t".to_owned(),
            subscribers: 2,
        });
        let text = m.render();
        assert!(
            text.contains("agentwire_bus_deliveries_in_flight 1\n"),
            "{text}"
        );
        for sub in [1, 2] {
            m.observe_bus(&BusEvent::Hop {
                delivery: d,
                subscriber: ConnId::new(sub),
                outcome: HopOutcome::Continued,
            });
        }
        m.observe_bus(&BusEvent::Dropped {
            reason: DropReason::SubscriberOverloaded,
            count: 3,
            total: 3,
        });
        let text = m.render();
        for line in [
            "agentwire_bus_subscriptions 2\n",
            "agentwire_bus_deliveries_in_flight 1\n",
            "agentwire_requests_total{protocol=\"bus\",operation=\"hop\",outcome=\"continued\"} 2\n",
            "agentwire_request_duration_seconds_count{protocol=\"bus\",operation=\"hop\"} 2\n",
            "agentwire_drops_total{protocol=\"bus\",reason=\"subscriber-overloaded\"} 3\n",
            "agentwire_drops_total{protocol=\"bus\",reason=\"slow_reader\"} 0\n",
            "agentwire_connections_open{protocol=\"bus\"} 0\n",
            "agentwire_frames_total{protocol=\"bus\",direction=\"in\"} 0\n",
            "# TYPE agentwire_request_duration_seconds histogram\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn error_codes_past_the_bound_count_as_other() {
        let m = Metrics::new();
        for code in 0..MAX_CODES_PER_PROTOCOL + 5 {
            m.families.error(Protocol::Relay, code);
        }
        let text = m.render();
        assert!(
            text.contains("agentwire_errors_total{protocol=\"relay\",code=\"other\"} 5\n"),
            "{text}"
        );
        assert!(
            text.contains("agentwire_errors_total{protocol=\"relay\",code=\"0\"} 1\n"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod udp_tests {
    use agentwire::tokio::UdpStats;

    use super::*;

    #[test]
    fn udp_families_appear_only_for_a_driver_with_a_socket() {
        let m = Metrics::new();
        m.transport.add_udp(Protocol::Bus, Box::new(|| None));
        assert!(!m.render().contains("agentwire_udp_"));
        m.transport
            .add_udp(Protocol::Llmrtc, Box::new(|| Some(UdpStats::default())));
        let text = m.render();
        for line in [
            "agentwire_udp_datagrams_total{protocol=\"llmrtc\",direction=\"in\"} 0\n",
            "agentwire_udp_bytes_total{protocol=\"llmrtc\",direction=\"out\"} 0\n",
            "agentwire_udp_drops_total{protocol=\"llmrtc\",reason=\"send_buffer_full\"} 0\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("protocol=\"bus\""), "{text}");
    }
}
