//! Prometheus metrics with the spec's names, rendered in the text exposition format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::{CompressionStats, ErrorCode, MessageType};

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
/// Beside them, the spec's "Protocol Analytics" (`ProtocolAnalytics`: compression ratio,
/// error rates, average message size, peak connections), and the sequence-id checks:
///
/// - `mcpw_compression_ratio{direction}` (gauge): bytes before gzip over bytes after, over
///   every payload that was compressed (`out`) or inflated (`in`); 1 until there is one;
/// - `mcpw_errors_total{code}` (counter) and `mcpw_error_rate{code}` (gauge): error replies
///   sent by code, and the same per message received;
/// - `mcpw_message_size_bytes_avg{direction}` (gauge) with `mcpw_messages_bytes_total` and
///   `mcpw_frames_total` (counters, by `direction`): WebSocket messages as they crossed the
///   wire (`in`: received, `out`: sent);
/// - `mcpw_connections_peak` (gauge): the most connections open at once;
/// - `mcpw_sequence_gaps_total` and `mcpw_sequence_duplicates_total` (counters): sequence
///   ids skipped by peers (each missing id counts), and numbered messages dropped as
///   duplicates (the crate's spec decision 38).
///
/// Label values from peers are bounded: each family holds at most `max_series` label sets;
/// further ones are counted under [`OVERFLOW_LABEL`].
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    connections: BTreeMap<(String, String), i64>,
    messages: BTreeMap<(String, String, String), u64>,
    latency: BTreeMap<String, Histogram>,
    max_series: usize,
    /// Error replies by code (bounded by `max_series`; beyond, under code 0).
    errors: BTreeMap<i32, u64>,
    /// WebSocket messages and their bytes: received, sent.
    frames: [(u64, u64); 2],
    peak_connections: i64,
    compression: CompressionStats,
    sequence_gaps: u64,
    sequence_duplicates: u64,
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
            errors: BTreeMap::new(),
            frames: [(0, 0); 2],
            peak_connections: 0,
            compression: CompressionStats::default(),
            sequence_gaps: 0,
            sequence_duplicates: 0,
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
        self.peak_connections = self.peak_connections.max(self.connections_active());
    }

    /// Counts one error reply with `code` in `mcpw_errors_total`.
    pub fn count_error(&mut self, code: ErrorCode) {
        let key = if self.errors.contains_key(&code.0) || self.errors.len() < self.max_series {
            code.0
        } else {
            0
        };
        let v = self.errors.entry(key).or_insert(0);
        *v = v.saturating_add(1);
    }

    /// Counts one WebSocket message of `bytes` received (`incoming`) or sent.
    pub fn count_frame(&mut self, incoming: bool, bytes: usize) {
        let (n, b) = &mut self.frames[usize::from(!incoming)];
        *n = n.saturating_add(1);
        *b = b.saturating_add(bytes as u64);
    }

    /// Sets the bytes through gzip (the codec's running totals).
    pub fn set_compression(&mut self, stats: CompressionStats) {
        self.compression = stats;
    }

    /// Counts `missing` sequence ids a peer skipped.
    pub fn count_sequence_gap(&mut self, missing: u64) {
        self.sequence_gaps = self.sequence_gaps.saturating_add(missing);
    }

    /// Counts one numbered message dropped as a duplicate.
    pub fn count_sequence_duplicate(&mut self) {
        self.sequence_duplicates = self.sequence_duplicates.saturating_add(1);
    }

    /// `mcpw_errors_total{code}`.
    pub fn errors(&self, code: ErrorCode) -> u64 {
        self.errors.get(&code.0).copied().unwrap_or(0)
    }

    /// `mcpw_error_rate{code}`: error replies with `code` per message received.
    pub fn error_rate(&self, code: ErrorCode) -> f64 {
        per(self.errors(code), self.frames[0].0)
    }

    /// `mcpw_message_size_bytes_avg{direction}`: the average size of the WebSocket messages
    /// received (`incoming`) or sent, 0 before any.
    pub fn average_message_size(&self, incoming: bool) -> f64 {
        let (n, b) = self.frames[usize::from(!incoming)];
        per(b, n)
    }

    /// `mcpw_connections_peak`.
    pub fn peak_connections(&self) -> i64 {
        self.peak_connections
    }

    /// The bytes through gzip behind `mcpw_compression_ratio`.
    pub fn compression(&self) -> CompressionStats {
        self.compression
    }

    /// `mcpw_sequence_gaps_total`.
    pub fn sequence_gaps(&self) -> u64 {
        self.sequence_gaps
    }

    /// `mcpw_sequence_duplicates_total`.
    pub fn sequence_duplicates(&self) -> u64 {
        self.sequence_duplicates
    }

    /// The analytics families, appended to `out`.
    fn render_analytics(&self, out: &mut String) {
        let c = &self.compression;
        let dirs = [("in", self.frames[0]), ("out", self.frames[1])];
        let received = self.frames[0].0;
        let by_dir = |f: &dyn Fn(u64, u64) -> String| -> Vec<(String, String)> {
            dirs.iter()
                .map(|(d, (n, b))| ((*d).to_owned(), f(*n, *b)))
                .collect()
        };
        let ratios = [("in", c.ratio_in()), ("out", c.ratio_out())]
            .map(|(d, r)| (d.to_owned(), r.unwrap_or(1.0).to_string()));
        let errors: Vec<_> = self
            .errors
            .iter()
            .map(|(c, n)| (c.to_string(), *n))
            .collect();
        let families: [Family<'_>; 8] = [
            (
                "mcpw_compression_ratio",
                "gauge",
                "Bytes before gzip over bytes after, compressed payloads only",
                "direction",
                ratios.to_vec(),
            ),
            (
                "mcpw_errors_total",
                "counter",
                "Error replies sent, by code",
                "code",
                errors
                    .iter()
                    .map(|(c, n)| (c.clone(), n.to_string()))
                    .collect(),
            ),
            (
                "mcpw_error_rate",
                "gauge",
                "Error replies per message received, by code",
                "code",
                errors
                    .iter()
                    .map(|(c, n)| (c.clone(), per(*n, received).to_string()))
                    .collect(),
            ),
            (
                "mcpw_frames_total",
                "counter",
                "WebSocket messages, by direction",
                "direction",
                by_dir(&|n, _| n.to_string()),
            ),
            (
                "mcpw_messages_bytes_total",
                "counter",
                "Bytes of WebSocket messages, by direction",
                "direction",
                by_dir(&|_, b| b.to_string()),
            ),
            (
                "mcpw_message_size_bytes_avg",
                "gauge",
                "Average WebSocket message size, by direction",
                "direction",
                by_dir(&|n, b| per(b, n).to_string()),
            ),
            (
                "mcpw_connections_peak",
                "gauge",
                "Most connections open at once",
                "",
                vec![(String::new(), self.peak_connections.to_string())],
            ),
            (
                "mcpw_sequence_gaps_total",
                "counter",
                "Sequence ids peers skipped",
                "",
                vec![(String::new(), self.sequence_gaps.to_string())],
            ),
        ];
        for (name, kind, help, label, rows) in families {
            family(out, name, kind, help);
            for (value, n) in rows {
                if label.is_empty() {
                    let _ = writeln!(out, "{name} {n}");
                } else {
                    let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {n}");
                }
            }
        }
        family(
            out,
            "mcpw_sequence_duplicates_total",
            "counter",
            "Numbered messages dropped as duplicates",
        );
        let _ = writeln!(
            out,
            "mcpw_sequence_duplicates_total {}",
            self.sequence_duplicates
        );
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
        self.render_analytics(&mut out);
        out
    }
}

/// One analytics family: name, type, help, label name (empty: none), and its samples as
/// (label value, value).
type Family<'a> = (&'a str, &'a str, &'a str, &'a str, Vec<(String, String)>);

/// `a / b`, 0 when `b` is.
fn per(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The `# HELP` and `# TYPE` lines of a family.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
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
