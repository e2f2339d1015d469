//! `[bus]`: the JSON-RPC bus.

use std::time::Duration;

use agentwire::jsonrpc_bus::{BusConfig, Limits, MatchMode, PayloadRule};
use serde::{Deserialize, Serialize};

use super::listener::duration_ms;
use super::transport::Transport;

/// How subscription patterns match topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum BusMatchMode {
    /// Anchored glob (`*`, `?`, `[seq]`, `[!seq]`), as the reference bus. Default.
    #[default]
    Glob,
    /// Glob, and a pattern also matches the topics it is a prefix of.
    Prefix,
}

/// Which payloads `sendMessage` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum BusPayload {
    /// JSON objects only, as reference subscribers require. Default.
    #[default]
    Object,
    /// Any JSON value.
    Any,
}

/// `[bus]`: the JSON-RPC bus, its behaviour and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct BusSection {
    /// Serve the bus. Default true.
    pub enabled: bool,
    /// Name of the `[[listener]]` it is served on. Default `"main"`.
    pub listener: String,
    /// URL path on that listener. Default `"/bus"`.
    pub path: String,
    /// `serverId` in the initialize result; absent: `bus-<12 hex>`, random.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    /// `serverInfo.name` in the initialize result. Default `"bub-bus"`.
    pub server_name: String,
    /// `serverInfo.version` in the initialize result. Default `"0.2.0"`.
    pub server_version: String,
    /// Topics advertised in the initialize result. Default the built-in three.
    pub topics: Vec<String>,
    /// `"glob"` or `"prefix"`. Default `"glob"`.
    pub match_mode: BusMatchMode,
    /// `"object"` or `"any"`. Default `"object"`.
    pub payload: BusPayload,
    /// Milliseconds one subscriber has to answer a delivery before the chain skips it.
    /// Default 30000.
    pub delivery_timeout_ms: u64,
    /// Seconds a connection has to send `initialize` (0: wait forever). Default 30.
    pub initialize_timeout_secs: u64,
    /// Deliveries sent to one subscriber before it answers the first. Default 8.
    pub max_in_flight_per_subscriber: usize,
    /// Whether a publisher subscribed to its own topic receives its own messages.
    /// Default true.
    pub deliver_to_publisher: bool,
    /// Milliseconds between reports of dropped deliveries. Default 1000.
    pub drop_report_interval_ms: u64,
    /// Connections served at once. Default 1024.
    pub max_connections: usize,
    /// Largest message body in bytes. Default 1048576.
    pub max_message_bytes: usize,
    /// Entries in one JSON-RPC batch. Default 100.
    pub max_batch_len: usize,
    /// Subscriptions one connection may hold. Default 256.
    pub max_subscriptions_per_conn: usize,
    /// Longest topic or pattern, in bytes. Default 1024.
    pub max_topic_bytes: usize,
    /// Deliveries queued for one subscriber. Default 1024.
    pub max_pending_per_subscriber: usize,
    /// `sendMessage` requests one connection may have awaiting their result. Default 256.
    pub max_pending_per_publisher: usize,
    /// Publishes of one connection in their chains before the bus stops reading it.
    /// Default 64.
    pub max_backlog_per_publisher: usize,
    /// Deepest nesting of a payload. Default 128.
    pub max_payload_depth: usize,
    /// Transport settings of the bus route.
    pub transport: Transport,
}

impl Default for BusSection {
    fn default() -> Self {
        let c = BusConfig::default();
        let l = &c.limits;
        Self {
            enabled: true,
            listener: "main".to_owned(),
            path: "/bus".to_owned(),
            server_id: c.server_id.clone(),
            server_name: c.server_name.clone(),
            server_version: c.server_version.clone(),
            topics: c.topics.clone(),
            match_mode: BusMatchMode::Glob,
            payload: BusPayload::Object,
            delivery_timeout_ms: duration_ms(c.delivery_timeout),
            initialize_timeout_secs: c.initialize_timeout.map_or(0, |d| d.as_secs()),
            max_in_flight_per_subscriber: c.max_in_flight_per_subscriber,
            deliver_to_publisher: c.deliver_to_publisher,
            drop_report_interval_ms: duration_ms(c.drop_report_interval),
            max_connections: l.max_connections,
            max_message_bytes: l.max_message_bytes,
            max_batch_len: l.max_batch_len,
            max_subscriptions_per_conn: l.max_subscriptions_per_conn,
            max_topic_bytes: l.max_topic_bytes,
            max_pending_per_subscriber: l.max_pending_per_subscriber,
            max_pending_per_publisher: l.max_pending_per_publisher,
            max_backlog_per_publisher: l.max_backlog_per_publisher,
            max_payload_depth: l.max_payload_depth,
            transport: Transport::default(),
        }
    }
}

impl BusSection {
    /// The bus machine's configuration.
    pub fn bus_config(&self) -> BusConfig {
        let mut limits = Limits::default();
        limits.max_connections = self.max_connections;
        limits.max_message_bytes = self.max_message_bytes;
        limits.max_batch_len = self.max_batch_len;
        limits.max_subscriptions_per_conn = self.max_subscriptions_per_conn;
        limits.max_topic_bytes = self.max_topic_bytes;
        limits.max_pending_per_subscriber = self.max_pending_per_subscriber;
        limits.max_pending_per_publisher = self.max_pending_per_publisher;
        limits.max_backlog_per_publisher = self.max_backlog_per_publisher;
        limits.max_payload_depth = self.max_payload_depth;
        let mut cfg = BusConfig::default()
            .with_match_mode(match self.match_mode {
                BusMatchMode::Glob => MatchMode::Glob,
                BusMatchMode::Prefix => MatchMode::GlobOrPrefix,
            })
            .with_delivery_timeout(Duration::from_millis(self.delivery_timeout_ms))
            .with_payload(match self.payload {
                BusPayload::Object => PayloadRule::Object,
                BusPayload::Any => PayloadRule::Any,
            })
            .with_limits(limits);
        if let Some(id) = &self.server_id {
            cfg = cfg.with_server_id(id.clone());
        }
        cfg.server_name.clone_from(&self.server_name);
        cfg.server_version.clone_from(&self.server_version);
        cfg.topics.clone_from(&self.topics);
        cfg.initialize_timeout = (self.initialize_timeout_secs > 0)
            .then(|| Duration::from_secs(self.initialize_timeout_secs));
        cfg.max_in_flight_per_subscriber = self.max_in_flight_per_subscriber;
        cfg.deliver_to_publisher = self.deliver_to_publisher;
        cfg.drop_report_interval = Duration::from_millis(self.drop_report_interval_ms);
        cfg
    }
}
