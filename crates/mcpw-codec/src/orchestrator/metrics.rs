//! Prometheus metrics with the spec's names, rendered in the text exposition format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::{ErrorCode, MessageType};

/// Histogram buckets of `websocket_message_latency_seconds`, from the spec.
pub const LATENCY_BUCKETS: [f64; 7] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0];

/// Label value used once [`Metrics`] holds `max_series` series of a family.
pub const OVERFLOW_LABEL: &str = "other";

#[derive(Debug, Clone, Default, PartialEq)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// The orchestrator's counters, gauges and histograms.
///
/// - `websocket_connections_active{agent_type,protocol}` (gauge): open connections by the
///   `X-Agent-Type` they announced (`unknown` when none) and the frame form they use
///   (`json`, `binary`, or `none` before their first frame);
/// - `websocket_messages_total{type,method,status}` (counter): messages handled, by MCPW
///   message type name, method name (`unknown` for one not in the method table) and outcome
///   (`ok` or the error name, e.g. `rate_limited`);
/// - `websocket_message_latency_seconds{method}` (histogram, the spec's buckets): processing
///   time, recorded by the driver with [`observe_latency`](Self::observe_latency) (a sans-IO
///   machine cannot time itself).
///
/// Label values from peers are bounded: each family holds at most `max_series` label sets;
/// further ones are counted under [`OVERFLOW_LABEL`].
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    connections: BTreeMap<(String, String), i64>,
    messages: BTreeMap<(String, String, String), u64>,
    latency: BTreeMap<String, Histogram>,
    max_series: usize,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(256)
    }
}

impl Metrics {
    /// Empty metrics keeping at most `max_series` label sets per family.
    pub fn new(max_series: usize) -> Self {
        Self {
            connections: BTreeMap::new(),
            messages: BTreeMap::new(),
            latency: BTreeMap::new(),
            max_series: max_series.max(1),
        }
    }

    /// Adds `delta` to `websocket_connections_active{agent_type, protocol}`.
    pub fn add_connection(&mut self, agent_type: &str, protocol: &str, delta: i64) {
        let key = (agent_type.to_owned(), protocol.to_owned());
        let key = if self.connections.contains_key(&key) || self.connections.len() < self.max_series
        {
            key
        } else {
            (OVERFLOW_LABEL.to_owned(), protocol.to_owned())
        };
        let v = self.connections.entry(key).or_insert(0);
        *v = v.saturating_add(delta);
    }

    /// Counts one message in `websocket_messages_total{type, method, status}`.
    pub fn count_message(&mut self, msg_type: &str, method: &str, status: &str) {
        let key = (msg_type.to_owned(), method.to_owned(), status.to_owned());
        let key = if self.messages.contains_key(&key) || self.messages.len() < self.max_series {
            key
        } else {
            (
                OVERFLOW_LABEL.to_owned(),
                OVERFLOW_LABEL.to_owned(),
                status.to_owned(),
            )
        };
        let v = self.messages.entry(key).or_insert(0);
        *v = v.saturating_add(1);
    }

    /// Records one processing time in `websocket_message_latency_seconds{method}`.
    pub fn observe_latency(&mut self, method: &str, took: Duration) {
        let key = if self.latency.contains_key(method) || self.latency.len() < self.max_series {
            method.to_owned()
        } else {
            OVERFLOW_LABEL.to_owned()
        };
        let h = self.latency.entry(key).or_default();
        let secs = took.as_secs_f64();
        for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
            if secs <= *le {
                h.buckets[i] += 1;
            }
        }
        h.sum += secs;
        h.count += 1;
    }

    /// Open connections, all labels together.
    pub fn connections_active(&self) -> i64 {
        self.connections.values().sum()
    }

    /// `websocket_messages_total` for one label set.
    pub fn messages(&self, msg_type: &str, method: &str, status: &str) -> u64 {
        self.messages
            .get(&(msg_type.to_owned(), method.to_owned(), status.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// `websocket_messages_total` summed over every label set with `status`.
    pub fn messages_with_status(&self, status: &str) -> u64 {
        self.messages
            .iter()
            .filter(|((_, _, s), _)| s == status)
            .map(|(_, v)| *v)
            .sum()
    }

    /// The text exposition format (version 0.0.4), ready for `GET /metrics`.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(1024);
        out.push_str("# HELP websocket_connections_active Active WebSocket connections\n");
        out.push_str("# TYPE websocket_connections_active gauge\n");
        for ((agent_type, protocol), v) in &self.connections {
            let _ = writeln!(
                out,
                "websocket_connections_active{{agent_type=\"{}\",protocol=\"{}\"}} {v}",
                escape(agent_type),
                escape(protocol)
            );
        }
        out.push_str("# HELP websocket_messages_total Total WebSocket messages\n");
        out.push_str("# TYPE websocket_messages_total counter\n");
        for ((t, m, s), v) in &self.messages {
            let _ = writeln!(
                out,
                "websocket_messages_total{{type=\"{}\",method=\"{}\",status=\"{}\"}} {v}",
                escape(t),
                escape(m),
                escape(s)
            );
        }
        out.push_str("# HELP websocket_message_latency_seconds Message processing latency\n");
        out.push_str("# TYPE websocket_message_latency_seconds histogram\n");
        for (method, h) in &self.latency {
            let m = escape(method);
            for (le, n) in LATENCY_BUCKETS.iter().zip(h.buckets) {
                let _ = writeln!(
                    out,
                    "websocket_message_latency_seconds_bucket{{method=\"{m}\",le=\"{le}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "websocket_message_latency_seconds_bucket{{method=\"{m}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "websocket_message_latency_seconds_sum{{method=\"{m}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "websocket_message_latency_seconds_count{{method=\"{m}\"}} {}",
                h.count
            );
        }
        out
    }
}

/// The metrics label of a message type (`request`, ..., `unknown`).
pub fn type_label(kind: MessageType) -> &'static str {
    match kind {
        MessageType::REQUEST => "request",
        MessageType::RESPONSE => "response",
        MessageType::NOTIFICATION => "notification",
        MessageType::ERROR => "error",
        MessageType::PING => "ping",
        MessageType::PONG => "pong",
        MessageType::BATCH => "batch",
        MessageType::PROGRESS => "progress",
        _ => "unknown",
    }
}

/// The metrics status label of an error code (`invalid_message`, ..., `error`).
pub fn status_label(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::INVALID_MESSAGE => "invalid_message",
        ErrorCode::AUTHENTICATION_FAILED => "authentication_failed",
        ErrorCode::RATE_LIMITED => "rate_limited",
        ErrorCode::SERVER_ERROR => "server_error",
        ErrorCode::METHOD_NOT_FOUND => "method_not_found",
        ErrorCode::INVALID_PARAMS => "invalid_params",
        ErrorCode::OPERATION_CANCELLED => "operation_cancelled",
        ErrorCode::CONTEXT_TOO_LARGE => "context_too_large",
        ErrorCode::CONFLICT => "conflict",
        _ => "error",
    }
}

/// Escapes a label value (`\`, `"` and newline, as the format requires).
fn escape(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return v.into();
    }
    let mut s = String::with_capacity(v.len() + 4);
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_three_families() {
        let mut m = Metrics::default();
        m.add_connection("code-analyzer", "binary", 1);
        m.add_connection("code-analyzer", "binary", 1);
        m.add_connection("code-analyzer", "binary", -1);
        m.count_message("request", "agent.register", "ok");
        m.count_message("request", "agent.register", "ok");
        m.count_message("request", "unknown", "method_not_found");
        m.observe_latency("agent.register", Duration::from_micros(300));
        m.observe_latency("agent.register", Duration::from_millis(20));
        let text = m.render();
        assert!(text.contains(
            "websocket_connections_active{agent_type=\"code-analyzer\",protocol=\"binary\"} 1\n"
        ));
        assert!(text.contains(
            "websocket_messages_total{type=\"request\",method=\"agent.register\",status=\"ok\"} 2\n"
        ));
        assert!(text.contains("# TYPE websocket_message_latency_seconds histogram\n"));
        assert!(text.contains(
            "websocket_message_latency_seconds_bucket{method=\"agent.register\",le=\"0.001\"} 1\n"
        ));
        assert!(text.contains(
            "websocket_message_latency_seconds_bucket{method=\"agent.register\",le=\"0.05\"} 2\n"
        ));
        assert!(text.contains(
            "websocket_message_latency_seconds_bucket{method=\"agent.register\",le=\"+Inf\"} 2\n"
        ));
        assert!(
            text.contains("websocket_message_latency_seconds_count{method=\"agent.register\"} 2\n")
        );
        assert_eq!(m.connections_active(), 1);
        assert_eq!(m.messages_with_status("method_not_found"), 1);
    }

    #[test]
    fn label_values_are_escaped_and_bounded() {
        let mut m = Metrics::new(2);
        m.add_connection("a\"b\\c\nd", "json", 1);
        m.add_connection("t2", "json", 1);
        m.add_connection("t3", "json", 1);
        m.add_connection("t4", "json", 1);
        let text = m.render();
        assert!(text.contains(r#"agent_type="a\"b\\c\nd""#));
        assert!(text.contains("{agent_type=\"other\",protocol=\"json\"} 2\n"));
        assert!(!text.contains("t3"));
        assert_eq!(m.connections_active(), 4);
    }
}
