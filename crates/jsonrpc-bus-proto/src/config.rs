//! Role configuration and limits, with documented defaults.

use std::time::Duration;

use agentwire_core::DEFAULT_MAX_JSON_DEPTH;

use crate::message::{topics, ClientInfo};
use crate::topic::MatchMode;

/// Bounds on what peers can make the [`Bus`](crate::Bus) hold.
///
/// Every collection that peer input can grow has a limit here; exceeding one is answered with
/// a JSON-RPC error ([`ErrorCode::LIMIT_EXCEEDED`](crate::ErrorCode::LIMIT_EXCEEDED), -32005,
/// whose `data` names the limit), never with unbounded memory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Connections the bus serves at once. Default 1,024; one more gets a -32005 error
    /// (`id: null`) and close 1013 `server-full`.
    pub max_connections: usize,
    /// Largest message body, in bytes. Default 1 MiB (1,048,576), exactly the limit allowed;
    /// larger bodies get -32005 with `id: null` (the transport's own cap should match).
    pub max_message_bytes: usize,
    /// Entries in one batch. Default 100; a longer batch gets one -32005 error.
    pub max_batch_len: usize,
    /// Subscriptions one connection may hold. Default 256.
    pub max_subscriptions_per_conn: usize,
    /// Longest topic or pattern, in bytes. Default 1,024; it also bounds the glob matcher's
    /// work per pattern.
    pub max_topic_bytes: usize,
    /// Deliveries queued for one subscriber (in flight or waiting for their turn). Default
    /// 1,024; when full, later publishes skip that subscriber and count it as `overloaded`.
    pub max_pending_per_subscriber: usize,
    /// `sendMessage` requests one connection may have awaiting their result. Default 256; one
    /// more gets -32005 (a notification over it is dropped, counted and reported as
    /// [`BusEvent::Dropped`](crate::BusEvent::Dropped)). The application's own
    /// [`Bus::publish`](crate::Bus::publish) calls share one such budget.
    ///
    /// Flow control keeps a publisher well below it: see
    /// [`max_backlog_per_publisher`](Self::max_backlog_per_publisher).
    pub max_pending_per_publisher: usize,
    /// Publishes of one connection whose chains have not ended before the bus stops reading
    /// that connection (flow control: [`agentwire_core::Flow::PauseReading`], so TCP slows
    /// the publisher down instead of the bus queueing or dropping). Default 64; reading
    /// resumes once half of them have ended. A connection that a delivery is waiting on (a
    /// subscriber with a request in flight) is never paused, so this bound never stalls a
    /// chain; such a connection is held to `max_pending_per_publisher` alone.
    pub max_backlog_per_publisher: usize,
    /// Nesting depth a `sendMessage` payload may have (`{}` is 1, `{"a":[1]}` 2). Default
    /// 128 ([`agentwire_core::DEFAULT_MAX_JSON_DEPTH`]); a deeper payload is refused with
    /// -32005 (`data`: `max_payload_depth`) and never forwarded: the bus forwards payloads
    /// unparsed, and a subscriber's parser must not be the first to meet a 100,000-deep one.
    /// (A delivery nests its payload two levels deeper; receivers that parse whole messages
    /// with serde_json's default bound, 127 levels, should read the payload raw, as
    /// [`BusClient`](crate::BusClient) does.)
    pub max_payload_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_message_bytes: 1 << 20,
            max_batch_len: 100,
            max_subscriptions_per_conn: 256,
            max_topic_bytes: 1024,
            max_pending_per_subscriber: 1024,
            max_pending_per_publisher: 256,
            max_backlog_per_publisher: 64,
            max_payload_depth: DEFAULT_MAX_JSON_DEPTH,
        }
    }
}

/// Which `sendMessage` payloads the [`Bus`](crate::Bus) accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PayloadRule {
    /// A JSON object, the spec's shape and what the reference bus and its subscribers
    /// require (they validate `payload` as a dict); anything else, a missing payload
    /// included, is -32602. The default.
    #[default]
    Object,
    /// Any JSON value; a missing payload is forwarded as `null`. Only for buses whose
    /// subscribers all accept that (reference subscribers do not).
    Any,
}

/// Configuration of the [`Bus`](crate::Bus).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BusConfig {
    /// `serverId` in the `initialize` result. Default `None`: `bus-<12 hex>` from the id
    /// generator, as the reference (`bus-<hex>`).
    pub server_id: Option<String>,
    /// `serverInfo.name`. Default `"bub-bus"` (the reference's; clients may check it).
    pub server_name: String,
    /// `serverInfo.version`. Default `"0.2.0"`, the protocol version of the spec's example.
    pub server_version: String,
    /// `capabilities.topics`. Default the built-in `inbound:*`, `outbound:*`, `agent:*`.
    pub topics: Vec<String>,
    /// How subscription patterns match topics. Default [`MatchMode::Glob`], as the reference;
    /// [`MatchMode::GlobOrPrefix`] adds the spec's prefix rule.
    pub match_mode: MatchMode,
    /// Time one subscriber has to answer a delivery, counted from when it becomes that
    /// subscriber's turn. Default 30 s; then the chain skips to the next subscriber and the
    /// result counts a `timeouts`.
    pub delivery_timeout: Duration,
    /// Deliveries sent to one subscriber before it answers the first. Default 8. Order per
    /// publisher is kept whatever the value; 1 is the reference's strict one-at-a-time.
    pub max_in_flight_per_subscriber: usize,
    /// Whether a publisher subscribed to its own topic receives its own message. Default
    /// `true` (it is delivered like to any subscriber; our machines cannot deadlock on it).
    pub deliver_to_publisher: bool,
    /// Time a connection has to send `initialize`. Default `Some(30 s)`; then close 1008
    /// `initialize-required`. `None` waits forever, as the reference.
    pub initialize_timeout: Option<Duration>,
    /// Which payloads `sendMessage` accepts. Default [`PayloadRule::Object`].
    pub payload: PayloadRule,
    /// Shortest time between two [`BusEvent::Dropped`](crate::BusEvent::Dropped) reports of
    /// one reason. Default 1 s: the first drop after a quiet interval is reported at once,
    /// later ones are summed and reported when the interval ends, so a flood of drops is
    /// one event (and one log line) per second.
    pub drop_report_interval: Duration,
    /// Limits on what peers can make the bus hold.
    pub limits: Limits,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            server_id: None,
            server_name: "bub-bus".to_owned(),
            server_version: "0.2.0".to_owned(),
            topics: topics::BUILT_IN.iter().map(|t| (*t).to_owned()).collect(),
            match_mode: MatchMode::Glob,
            delivery_timeout: Duration::from_secs(30),
            max_in_flight_per_subscriber: 8,
            deliver_to_publisher: true,
            initialize_timeout: Some(Duration::from_secs(30)),
            payload: PayloadRule::Object,
            drop_report_interval: Duration::from_secs(1),
            limits: Limits::default(),
        }
    }
}

impl BusConfig {
    /// Sets the match mode.
    pub fn with_match_mode(mut self, mode: MatchMode) -> Self {
        self.match_mode = mode;
        self
    }

    /// Sets the per-subscriber delivery timeout.
    pub fn with_delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = timeout;
        self
    }

    /// Sets the server id.
    pub fn with_server_id(mut self, id: impl Into<String>) -> Self {
        self.server_id = Some(id.into());
        self
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets which payloads `sendMessage` accepts.
    pub fn with_payload(mut self, rule: PayloadRule) -> Self {
        self.payload = rule;
        self
    }
}

/// Configuration of the [`BusClient`](crate::BusClient).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientConfig {
    /// `clientId` sent in `initialize`. Default `None`.
    pub client_id: Option<String>,
    /// `clientInfo` sent in `initialize`. Default `{name: "agentwire", version: <crate>}`.
    pub client_info: Option<ClientInfo>,
    /// Time the bus has to answer a request. Default 30 s; then
    /// [`RequestError::TimedOut`](crate::RequestError::TimedOut). A publish's result waits for
    /// the whole chain, so keep this above the bus's delivery timeout times the chain length.
    pub request_timeout: Duration,
    /// Whether incoming deliveries wait for [`BusClient::answer`](crate::BusClient::answer)
    /// (an interceptor). Default `false`: the client answers `stopPropagation: false` at once
    /// and still reports each delivery as an event.
    pub intercept: bool,
    /// Requests awaiting an answer. Default 1,024.
    pub max_pending_requests: usize,
    /// Commands queued while not connected or not yet initialized. Default 1,024.
    pub max_queued: usize,
    /// Deliveries awaiting the application's answer (intercept mode). Default 1,024; beyond
    /// it the client answers -32005 itself, so the bus skips to the next subscriber.
    pub max_unanswered: usize,
    /// Limit on incoming message size, in bytes. Default 1 MiB.
    pub max_message_bytes: usize,
    /// Nesting depth a delivered payload may have. Default 128
    /// ([`agentwire_core::DEFAULT_MAX_JSON_DEPTH`], the bus's own limit); a deeper one (from a
    /// bus that forwards anything) is answered -32005 and reported as
    /// [`ProtocolError::PayloadTooDeep`](crate::ProtocolError::PayloadTooDeep), never surfaced.
    pub max_payload_depth: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            client_id: None,
            client_info: Some(ClientInfo::new("agentwire", env!("CARGO_PKG_VERSION"))),
            request_timeout: Duration::from_secs(30),
            intercept: false,
            max_pending_requests: 1024,
            max_queued: 1024,
            max_unanswered: 1024,
            max_message_bytes: 1 << 20,
            max_payload_depth: DEFAULT_MAX_JSON_DEPTH,
        }
    }
}

impl ClientConfig {
    /// A config with `clientId`.
    pub fn new(client_id: impl Into<String>) -> Self {
        Self {
            client_id: Some(client_id.into()),
            ..Self::default()
        }
    }

    /// Makes the client an interceptor: deliveries wait for `answer`.
    pub fn intercepting(mut self) -> Self {
        self.intercept = true;
        self
    }

    /// Sets the request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}
