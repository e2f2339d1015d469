//! The wire strings the machines write themselves: close reasons, and the `data` of their
//! JSON-RPC errors (limit names and what is wrong with params). Method names are
//! [`message::method`](crate::message::method), topics [`message::topics`](crate::message::topics).

// ---- close reasons ----------------------------------------------------------------------

/// The bus is at `max_connections` (close 1013).
pub(crate) const CLOSE_SERVER_FULL: &str = "server-full";
/// No `initialize` within the deadline (close 1008).
pub(crate) const CLOSE_INITIALIZE_REQUIRED: &str = "initialize-required";
/// The bus refused the client's `initialize` (client side, close 1000).
pub(crate) const CLOSE_INITIALIZE_REJECTED: &str = "initialize-rejected";
/// The bus did not answer the client's `initialize` in time (client side, close 1000).
pub(crate) const CLOSE_INITIALIZE_TIMEOUT: &str = "initialize-timeout";

// ---- limits named in -32005 errors and command errors -----------------------------------

/// [`Limits::max_connections`](crate::Limits::max_connections).
pub(crate) const MAX_CONNECTIONS: &str = "max_connections";
/// [`Limits::max_topic_bytes`](crate::Limits::max_topic_bytes).
pub(crate) const MAX_TOPIC_BYTES: &str = "max_topic_bytes";
/// [`Limits::max_subscriptions_per_conn`](crate::Limits::max_subscriptions_per_conn).
pub(crate) const MAX_SUBSCRIPTIONS_PER_CONN: &str = "max_subscriptions_per_conn";
/// [`Limits::max_pending_per_publisher`](crate::Limits::max_pending_per_publisher).
pub(crate) const MAX_PENDING_PER_PUBLISHER: &str = "max_pending_per_publisher";
/// [`Limits::max_payload_depth`](crate::Limits::max_payload_depth) and
/// [`ClientConfig::max_payload_depth`](crate::ClientConfig::max_payload_depth).
pub(crate) const MAX_PAYLOAD_DEPTH: &str = "max_payload_depth";
/// [`ClientConfig::max_pending_requests`](crate::ClientConfig::max_pending_requests).
pub(crate) const MAX_PENDING_REQUESTS: &str = "max_pending_requests";
/// [`ClientConfig::max_queued`](crate::ClientConfig::max_queued).
pub(crate) const MAX_QUEUED: &str = "max_queued";
/// [`ClientConfig::max_unanswered`](crate::ClientConfig::max_unanswered).
pub(crate) const MAX_UNANSWERED: &str = "max_unanswered";

// ---- what is wrong with a request --------------------------------------------------------

/// -32000 `data`: a method other than `initialize` came first.
pub(crate) const INITIALIZE_FIRST: &str = "initialize must be the first request";
/// -32602 `data`: params that are not an object.
pub(crate) const PARAMS_NOT_AN_OBJECT: &str = "params must be an object";
/// -32602 `data`: a `clientId` that is not a string.
pub(crate) const CLIENT_ID_NOT_A_STRING: &str = "clientId must be a string";
/// -32002 `data`.
pub(crate) const INVALID_CLIENT_INFO: &str =
    "clientInfo must be null or an object with string name and version";
/// -32602 `data`: a `topic` that is not a string.
pub(crate) const TOPIC_NOT_A_STRING: &str = "topic must be a string";
/// -32600 `data`: a missing, `null` or empty `topic`.
pub(crate) const MISSING_TOPIC: &str = "missing or empty topic";
/// -32602 `message` for a payload that is not an object (its `data` says what came).
pub(crate) const PAYLOAD_NOT_AN_OBJECT: &str = "Invalid params: payload must be a JSON object";
/// -32602 `data` of a delivery the client cannot read.
pub(crate) const EXPECTED_TOPIC_PAYLOAD: &str = "expected {topic, payload}";
/// The violation reported for a subscriber's result the bus cannot read.
pub(crate) const MALFORMED_HOP_RESULT: &str =
    "sendMessage result must be an object with a boolean stopPropagation";
