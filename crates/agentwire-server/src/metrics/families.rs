//! The families the event observers write: errors, finished requests and their durations,
//! and each protocol's own gauges.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use super::{lock, MAX_CODES_PER_PROTOCOL};
use crate::config::Protocol;

/// `protocol` and `code`.
type ErrorLabels = [(&'static str, String); 2];
/// `protocol`, `operation` and `outcome`.
type RequestLabels = [(&'static str, &'static str); 3];
/// `protocol` and `operation`.
type DurationLabels = [(&'static str, &'static str); 2];

/// Latency buckets: 0.5 ms doubling to about 16 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every family the observers write, registered once.
pub(super) struct Families {
    errors: Family<ErrorLabels, Counter>,
    /// The codes seen per protocol (label values), at most [`MAX_CODES_PER_PROTOCOL`] each.
    codes: Mutex<BTreeMap<Protocol, BTreeSet<String>>>,
    requests: Family<RequestLabels, Counter>,
    durations: Family<DurationLabels, Histogram, fn() -> Histogram>,
    pub(super) bus_subscriptions: Gauge,
    pub(super) bus_deliveries: Gauge,
    pub(super) chopsticks_agents: Gauge,
    pub(super) chopsticks_sessions: Gauge,
    pub(super) mcpw_agents: Gauge,
    pub(super) mcpw_tasks: Gauge,
    pub(super) llmrtc_sessions: Gauge,
    pub(super) llmrtc_turns: Gauge,
    pub(super) relay_sessions: Gauge,
    pub(super) relay_log_bytes: Counter,
}

impl Families {
    /// Registers every family in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let f = Self {
            errors: Family::default(),
            codes: Mutex::default(),
            requests: Family::default(),
            durations: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            bus_subscriptions: Gauge::default(),
            bus_deliveries: Gauge::default(),
            chopsticks_agents: Gauge::default(),
            chopsticks_sessions: Gauge::default(),
            mcpw_agents: Gauge::default(),
            mcpw_tasks: Gauge::default(),
            llmrtc_sessions: Gauge::default(),
            llmrtc_turns: Gauge::default(),
            relay_sessions: Gauge::default(),
            relay_log_bytes: Counter::default(),
        };
        registry.register(
            "agentwire_errors",
            "Errors the server answered or reported, by protocol and code",
            f.errors.clone(),
        );
        registry.register(
            "agentwire_requests",
            "Finished requests, hops, tasks, turns and tool calls, by outcome",
            f.requests.clone(),
        );
        registry.register_with_unit(
            "agentwire_request_duration",
            "Latency of requests, hops, tasks, turns and tool calls, measured by the event task",
            Unit::Seconds,
            f.durations.clone(),
        );
        let gauges = [
            (
                "agentwire_bus_subscriptions",
                "Bus subscriptions held",
                &f.bus_subscriptions,
            ),
            (
                "agentwire_bus_deliveries_in_flight",
                "Bus publishes whose chain has not finished",
                &f.bus_deliveries,
            ),
            (
                "agentwire_chopsticks_agents",
                "Chopsticks agents registered",
                &f.chopsticks_agents,
            ),
            (
                "agentwire_chopsticks_sessions_bound",
                "Chopsticks sessions bound to an agent",
                &f.chopsticks_sessions,
            ),
            (
                "agentwire_mcpw_agents",
                "MCPW agents registered",
                &f.mcpw_agents,
            ),
            (
                "agentwire_mcpw_tasks",
                "MCPW tasks queued or assigned and not finished",
                &f.mcpw_tasks,
            ),
            (
                "agentwire_llmrtc_sessions",
                "llmrtc sessions held (connected or waiting for a reconnect)",
                &f.llmrtc_sessions,
            ),
            (
                "agentwire_llmrtc_turns_in_flight",
                "llmrtc turns started and not ended",
                &f.llmrtc_turns,
            ),
            (
                "agentwire_relay_sessions",
                "Relay sessions with at least one member",
                &f.relay_sessions,
            ),
        ];
        for (name, help, gauge) in gauges {
            registry.register(name, help, gauge.clone());
        }
        registry.register(
            "agentwire_relay_study_log_bytes",
            "Bytes of study-log lines the relay wrote",
            f.relay_log_bytes.clone(),
        );
        f
    }

    /// Counts one error with `code` for `protocol` (as `other` once the protocol has
    /// [`MAX_CODES_PER_PROTOCOL`] distinct codes).
    pub(super) fn error(&self, protocol: Protocol, code: impl std::fmt::Display) {
        let code = code.to_string();
        let code = {
            let mut codes = lock(&self.codes);
            let seen = codes.entry(protocol).or_default();
            if seen.contains(&code) {
                code
            } else if seen.len() < MAX_CODES_PER_PROTOCOL {
                seen.insert(code.clone());
                code
            } else {
                "other".to_owned()
            }
        };
        self.errors
            .get_or_create(&[("protocol", protocol.name().to_owned()), ("code", code)])
            .inc();
    }

    /// Counts one finished `operation` of `protocol` with `outcome`.
    pub(super) fn request(
        &self,
        protocol: Protocol,
        operation: &'static str,
        outcome: &'static str,
    ) {
        self.request_counter(protocol, operation, outcome).inc();
    }

    /// Records how long one `operation` of `protocol` took.
    pub(super) fn duration(&self, protocol: Protocol, operation: &'static str, took: Duration) {
        self.duration_histogram(protocol, operation)
            .observe(took.as_secs_f64());
    }

    /// The counter of finished `operation`s of `protocol` with `outcome`.
    fn request_counter(
        &self,
        protocol: Protocol,
        operation: &'static str,
        outcome: &'static str,
    ) -> Counter {
        self.requests
            .get_or_create(&[
                ("protocol", protocol.name()),
                ("operation", operation),
                ("outcome", outcome),
            ])
            .clone()
    }

    /// The latency histogram of `operation` of `protocol`.
    fn duration_histogram(&self, protocol: Protocol, operation: &'static str) -> Histogram {
        self.durations
            .get_or_create(&[("protocol", protocol.name()), ("operation", operation)])
            .clone()
    }
}

/// Counters and histograms an observer has already looked up, by label values: a busy
/// event stream (a bus hop per delivery) then neither hashes its labels nor locks the family
/// for every event. Each observer's `State` keeps one; it holds a handful of entries (one
/// per operation and outcome the protocol reports).
#[derive(Debug, Default)]
pub(super) struct Handles {
    requests: Vec<((&'static str, &'static str), Counter)>,
    durations: Vec<(&'static str, Histogram)>,
}

impl Families {
    /// [`request`](Self::request) through `handles`.
    pub(super) fn request_via(
        &self,
        handles: &mut Handles,
        protocol: Protocol,
        operation: &'static str,
        outcome: &'static str,
    ) {
        let key = (operation, outcome);
        if let Some((_, counter)) = handles.requests.iter().find(|(k, _)| *k == key) {
            counter.inc();
            return;
        }
        let counter = self.request_counter(protocol, operation, outcome);
        counter.inc();
        handles.requests.push((key, counter));
    }

    /// [`duration`](Self::duration) through `handles`.
    pub(super) fn duration_via(
        &self,
        handles: &mut Handles,
        protocol: Protocol,
        operation: &'static str,
        took: Duration,
    ) {
        if let Some((_, h)) = handles.durations.iter().find(|(op, _)| *op == operation) {
            h.observe(took.as_secs_f64());
            return;
        }
        let h = self.duration_histogram(protocol, operation);
        h.observe(took.as_secs_f64());
        handles.durations.push((operation, h));
    }
}

/// Sets `gauge` to `n`.
pub(super) fn set(gauge: &Gauge, n: usize) {
    gauge.set(i64::try_from(n).unwrap_or(i64::MAX));
}
