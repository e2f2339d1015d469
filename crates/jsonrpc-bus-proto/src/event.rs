//! What the machines tell the application.

use std::fmt;
use std::net::SocketAddr;

use agentwire_core::{ConnId, Id128};

use crate::error::{ProtocolError, RequestError};
use crate::message::{
    ClientId, ClientInfo, ErrorObject, InitializeResult, RawJson, SendMessageResult, SubscriptionId,
};

/// One publish travelling through the bus (from a connection or from [`Bus::publish`]).
///
/// [`Bus::publish`]: crate::Bus::publish
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeliveryId(pub u64);

impl fmt::Display for DeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "d{}", self.0)
    }
}

/// How one subscriber's turn in a delivery ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HopOutcome {
    /// Answered `stopPropagation: false`; the chain goes on.
    Continued,
    /// Answered `stopPropagation: true`; the chain ends here.
    Stopped,
    /// Answered with an error object; skipped.
    Error(ErrorObject),
    /// Did not answer within the delivery timeout; skipped.
    TimedOut,
    /// Disconnected before answering; skipped.
    Disconnected,
    /// Its delivery queue was full when the message was published; skipped.
    Overloaded,
}

/// Why the bus dropped a delivery or a publish (see [`BusEvent::Dropped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// A subscriber's delivery queue was full
    /// ([`Limits::max_pending_per_subscriber`](crate::Limits::max_pending_per_subscriber)),
    /// so a publish skipped it; the publisher's result counts it as `overloaded`.
    SubscriberOverloaded,
    /// A publisher had
    /// [`Limits::max_pending_per_publisher`](crate::Limits::max_pending_per_publisher)
    /// publishes in flight, so one more was refused: a request got -32005, a notification
    /// could not be told.
    PublisherOverloaded,
}

impl DropReason {
    /// Every reason, in report order.
    pub const ALL: [Self; 2] = [Self::SubscriberOverloaded, Self::PublisherOverloaded];

    /// A short name for logs and metrics: `subscriber-overloaded`, `publisher-overloaded`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::SubscriberOverloaded => "subscriber-overloaded",
            Self::PublisherOverloaded => "publisher-overloaded",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event of the [`Bus`](crate::Bus).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BusEvent {
    /// A connection was accepted.
    Connected {
        /// The connection.
        conn: ConnId,
        /// Its remote address, if known.
        remote: Option<SocketAddr>,
    },
    /// A connection completed `initialize`.
    Initialized {
        /// The connection.
        conn: ConnId,
        /// Its `clientId`.
        client_id: Option<ClientId>,
        /// Its `clientInfo`.
        client_info: Option<ClientInfo>,
    },
    /// A connection subscribed.
    Subscribed {
        /// The connection.
        conn: ConnId,
        /// The pattern.
        topic: String,
        /// The `subscriptionId` returned.
        subscription_id: SubscriptionId,
    },
    /// A connection unsubscribed.
    Unsubscribed {
        /// The connection.
        conn: ConnId,
        /// The pattern.
        topic: String,
    },
    /// A publish started its chain.
    Published {
        /// The delivery.
        delivery: DeliveryId,
        /// The publishing connection (`None` for [`Bus::publish`](crate::Bus::publish)).
        publisher: Option<ConnId>,
        /// The topic.
        topic: String,
        /// Matching subscribers (one per connection).
        subscribers: usize,
    },
    /// One subscriber's turn ended.
    Hop {
        /// The delivery.
        delivery: DeliveryId,
        /// The subscriber.
        subscriber: ConnId,
        /// How it ended.
        outcome: HopOutcome,
    },
    /// A delivery finished; the publisher (if still connected) got `result`.
    Completed {
        /// The delivery.
        delivery: DeliveryId,
        /// The publishing connection (`None` for [`Bus::publish`](crate::Bus::publish)).
        publisher: Option<ConnId>,
        /// The aggregated result.
        result: SendMessageResult,
    },
    /// A connection ended; its subscriptions were dropped.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// Subscriptions it held.
        subscriptions: usize,
    },
    /// A peer broke the protocol (the wire reply, if any, was sent).
    ProtocolViolation {
        /// The connection.
        conn: ConnId,
        /// What it did.
        error: ProtocolError,
    },
    /// Deliveries or publishes were dropped for `reason` (flow control could not prevent
    /// it). Rate-limited: at most one per reason per
    /// [`BusConfig::drop_report_interval`](crate::BusConfig::drop_report_interval); the
    /// first drop after a quiet interval at once, the rest summed at the interval's end.
    /// Log it as a warning. [`BusStats`](crate::BusStats) keeps the totals too.
    Dropped {
        /// Why.
        reason: DropReason,
        /// Drops since the previous report of this reason.
        count: u64,
        /// Drops of this reason since the bus started.
        total: u64,
    },
}

/// The id of a request the [`BusClient`](crate::BusClient) sent (a UUID string on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub Id128);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Which command a request came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestKind {
    /// `initialize` (sent by the client itself on every connect).
    Initialize,
    /// `subscribe` of a pattern.
    Subscribe(String),
    /// `unsubscribe` of a pattern.
    Unsubscribe(String),
    /// `sendMessage` to a topic.
    Publish(String),
    /// `ping`.
    Ping,
}

/// A delivery the bus sent to this client, awaiting (or already given) an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IncomingId(pub u64);

/// An event of the [`BusClient`](crate::BusClient).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// `initialize` succeeded (on every connect); subscriptions are being restored.
    Initialized(InitializeResult),
    /// A `subscribe` succeeded (including the automatic ones after a reconnect).
    Subscribed {
        /// The request.
        request: RequestId,
        /// The pattern.
        topic: String,
        /// The bus's `subscriptionId`, if it sent one.
        subscription_id: Option<SubscriptionId>,
    },
    /// An `unsubscribe` succeeded.
    Unsubscribed {
        /// The request.
        request: RequestId,
        /// The pattern.
        topic: String,
    },
    /// A publish went through the chain.
    Published {
        /// The request.
        request: RequestId,
        /// The bus's aggregated result.
        result: SendMessageResult,
    },
    /// A `ping` was answered.
    Pong {
        /// The request.
        request: RequestId,
        /// The bus's timestamp.
        timestamp: String,
    },
    /// A request failed.
    RequestFailed {
        /// The request.
        request: RequestId,
        /// Which command it was.
        kind: RequestKind,
        /// Why.
        error: RequestError,
    },
    /// The bus delivered a message. In intercept mode answer it with
    /// [`BusClient::answer`](crate::BusClient::answer); otherwise it was already answered
    /// `stopPropagation: false`.
    Delivery {
        /// Pass to `answer`.
        id: IncomingId,
        /// The topic it was published to.
        topic: String,
        /// The payload, raw.
        payload: RawJson,
        /// Whether the client already answered it (not intercepting).
        answered: bool,
    },
    /// The connection ended; requests in flight failed, subscriptions will be restored.
    Disconnected,
    /// The bus broke the protocol.
    ProtocolViolation(ProtocolError),
}
