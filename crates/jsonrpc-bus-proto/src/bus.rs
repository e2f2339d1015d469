//! The `Bus`: the server role, owning every connection, subscription and delivery.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::time::Instant;

use agentwire_core::{
    check_json_depth, CloseCode, ConnId, ConnMap, DeadlineQueue, Flow, Frame, FrameBuf, Id128,
    Id128Hasher, Id128Map, IdGen, Machine, Monotonic, Outbox, Output, PeerInfo, TimerSet,
};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::config::{BusConfig, PayloadRule};
use crate::error::{CommandError, DecodeError, ErrorCode, ErrorObject, ProtocolError};
use crate::event::{BusEvent, DeliveryId, DropReason, HopOutcome};
use crate::fast_publish::{fast_publish, Publish};
use crate::hop_ack::{fast_hop_ack, Ack};
use crate::jsonrpc::{
    self, classify, raw_str, split_body, split_text, write_error, write_json_str,
    write_result_with, Body, Call, Id, Incoming, Reply,
};
use crate::message::{
    method, rfc3339_utc, Capabilities, ClientInfo, InitializeResult, SendMessageResult, ServerInfo,
    SubscribeResult, UnsubscribeResult,
};
use crate::topic::TopicIndex;

/// Counters a test or a metrics exporter can read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BusStats {
    /// Publishes accepted.
    pub publishes: u64,
    /// `sendMessage` params blobs encoded: one per publish however many subscribers it has.
    pub params_encoded: u64,
    /// Requests sent to subscribers.
    pub hops_sent: u64,
    /// Deliveries finished.
    pub completed: u64,
    /// Subscribers skipped because their delivery queue was full
    /// ([`DropReason::SubscriberOverloaded`]).
    pub dropped_subscriber_overloaded: u64,
    /// Publishes refused because their publisher had too many in flight
    /// ([`DropReason::PublisherOverloaded`]).
    pub dropped_publisher_overloaded: u64,
    /// Times the bus paused reading a publisher (flow control,
    /// [`Limits::max_backlog_per_publisher`](crate::Limits::max_backlog_per_publisher)).
    pub pauses: u64,
    /// Most deliveries in flight at once.
    pub peak_deliveries: usize,
    /// Bytes of `sendMessage` params the deliveries in flight hold now.
    pub queued_bytes: usize,
    /// Most bytes of params held at once.
    pub peak_queued_bytes: usize,
}

/// Drops of one [`DropReason`] and their rate-limited reporting.
#[derive(Debug, Default)]
struct DropCount {
    total: u64,
    /// Drops not yet reported.
    unreported: u64,
    /// Until when a new drop is only summed (set by each report).
    quiet_until: Option<Instant>,
}

/// Deliveries in flight by id (ids are the bus's own counter: no SipHash needed).
type Deliveries = HashMap<DeliveryId, Delivery, BuildHasherDefault<Id128Hasher>>;

/// A hop's timeout: live while delivery `.0` is still at hop `.1`.
type HopTimer = (DeliveryId, usize);

#[derive(Debug)]
struct Subscription {
    pattern: String,
    seq: u64,
}

#[derive(Debug, Default)]
struct Conn {
    initialized: bool,
    subs: Vec<Subscription>,
    /// Deliveries reserved for this subscriber, in publish order (in flight or waiting).
    inbox: VecDeque<DeliveryId>,
    in_flight: usize,
    /// This connection's publishes awaiting their result.
    publishing: usize,
    /// Whether the bus asked the driver to stop reading this connection.
    paused: bool,
}

impl Conn {
    /// The flow-control change this connection needs now, recorded as made: `Some(true)` to
    /// pause (a publisher at its backlog, no reply awaited from it), `Some(false)` to resume
    /// (half its backlog ended, or a request to it is in flight: its reply must be read).
    #[inline]
    fn flow(&mut self, backlog: usize) -> Option<bool> {
        if self.paused {
            if self.in_flight > 0 || self.publishing <= backlog / 2 {
                self.paused = false;
                return Some(false);
            }
        } else if self.publishing >= backlog && self.in_flight == 0 {
            self.paused = true;
            return Some(true);
        }
        None
    }
}

/// Who gets the aggregated result.
#[derive(Debug, Clone)]
enum Origin {
    /// A notification or [`Bus::publish`]: nobody is answered.
    Silent,
    /// A request on the publisher's connection.
    Request(Id),
    /// Entry `slot` of batch `batch`, answering request `id`.
    Batch { batch: u64, slot: usize, id: Id },
}

impl Origin {
    /// The origin of a message on its own (not in a batch) with this id.
    fn direct(id: Option<Id>) -> Self {
        id.map_or(Self::Silent, Self::Request)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HopState {
    Reserved,
    Overloaded,
}

#[derive(Debug)]
struct Hop {
    conn: ConnId,
    state: HopState,
}

/// One publish in flight: the explicit record of its chain (STYLE.md 5.8).
#[derive(Debug)]
struct Delivery {
    publisher: Option<ConnId>,
    origin: Origin,
    /// `{"topic":..,"payload":..}`, encoded once and reused for every subscriber.
    params: Bytes,
    hops: Vec<Hop>,
    /// Index of the current hop (`hops.len()` once past the end).
    pos: usize,
    /// The request id of the current hop, once sent.
    sent: Option<Id128>,
    result: SendMessageResult,
}

#[derive(Debug)]
struct Batch {
    conn: ConnId,
    slots: Vec<Option<Vec<u8>>>,
    pending: usize,
    open: bool,
}

/// What a request handler produced.
enum Handled {
    /// The encoded response.
    Now(Vec<u8>),
    /// A `sendMessage` whose result comes when its chain ends.
    Later,
    /// Nothing to send (a notification).
    Nothing,
}

/// The JSON-RPC 2.0 pub/sub bus (server role): owns every connection, subscription and
/// in-flight delivery.
///
/// It accepts `initialize`, `subscribe`, `unsubscribe`, `sendMessage` and `ping`, singly or
/// in batches, and runs each publish as an interceptor chain: the matching subscribers are
/// called one at a time, in subscription order, each with a bus-originated `sendMessage`
/// request, until one answers `stopPropagation: true`. An error answer, a timeout
/// ([`BusConfig::delivery_timeout`]) or a disconnect skips to the next subscriber and is
/// counted in the publisher's result, so no publisher ever hangs.
///
/// Many chains run at once. Each subscriber has a queue of the deliveries that will reach it,
/// in publish order; it gets up to [`BusConfig::max_in_flight_per_subscriber`] of them at a
/// time, but never one that an earlier message of the same publisher is still ahead of, so
/// each publisher's messages reach each subscriber in the order published.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`];
/// - output: [`Machine::poll_output`] (frames, closes, [`BusEvent`]s),
///   [`Machine::poll_timeout`], [`Machine::poll_flow`] (pause/resume reading a publisher:
///   backpressure, [`Limits::max_backlog_per_publisher`](crate::Limits::max_backlog_per_publisher));
/// - commands: [`Bus::publish`], [`Bus::publish_raw`], [`Bus::close`],
///   [`Bus::set_wall_clock`];
/// - getters: [`Bus::server_id`], [`Bus::connection_count`], [`Bus::subscriptions`],
///   [`Bus::is_initialized`], [`Bus::deliveries_in_flight`], [`Bus::stats`].
pub struct Bus {
    config: BusConfig,
    ids: Box<dyn IdGen>,
    server_id: String,
    clock: Monotonic,
    wall: (Instant, u64),
    conns: ConnMap<Conn>,
    index: TopicIndex<u64>,
    /// Subscription (the bus's own counter) → its connection.
    sub_owner: HashMap<u64, ConnId, BuildHasherDefault<Id128Hasher>>,
    next_sub: u64,
    deliveries: Deliveries,
    next_delivery: u64,
    /// Requests sent to subscribers: id → (subscriber, delivery).
    requests: Id128Map<(ConnId, DeliveryId)>,
    batches: BTreeMap<u64, Batch>,
    next_batch: u64,
    /// Publishes by the application itself awaiting their result.
    app_publishing: usize,
    /// `initialize` deadlines.
    init_timers: TimerSet<ConnId>,
    /// Hop deadlines: one timeout length from a monotonic clock, so they come in order.
    hop_timers: DeadlineQueue<HopTimer>,
    out: Outbox<BusEvent>,
    stats: BusStats,
    /// Per [`DropReason`], in [`DropReason::ALL`] order.
    drops: [DropCount; 2],
    scratch_matches: Vec<u64>,
    scratch_hops: Vec<(ConnId, u64)>,
    scratch_send: Vec<DeliveryId>,
    scratch_blocked: Vec<Option<ConnId>>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("server_id", &self.server_id)
            .field("connections", &self.conns.len())
            .field("deliveries", &self.deliveries.len())
            .finish_non_exhaustive()
    }
}

impl Bus {
    /// A bus. `now` and `unix_ms` anchor the wall clock used for `ping` timestamps (the
    /// machine reads no clock: `unix_ms` is the wall-clock time at `now`).
    pub fn new(config: BusConfig, ids: impl IdGen + 'static, now: Instant, unix_ms: u64) -> Self {
        let mut ids: Box<dyn IdGen> = Box::new(ids);
        let server_id = match &config.server_id {
            Some(id) => id.clone(),
            // `bus-<12 hex>`: the id's low 48 bits (random in a UUID v4).
            None => format!("bus-{:012x}", ids.next_id().0 & 0xffff_ffff_ffff),
        };
        let mut clock = Monotonic::new();
        clock.observe(now);
        Self {
            index: TopicIndex::new(config.match_mode),
            config,
            ids,
            server_id,
            clock,
            wall: (now, unix_ms),
            conns: ConnMap::default(),
            sub_owner: HashMap::default(),
            next_sub: 0,
            deliveries: HashMap::default(),
            next_delivery: 0,
            requests: Id128Map::default(),
            batches: BTreeMap::new(),
            next_batch: 0,
            app_publishing: 0,
            init_timers: TimerSet::new(),
            hop_timers: DeadlineQueue::new(),
            out: Outbox::new(),
            stats: BusStats::default(),
            drops: Default::default(),
            scratch_matches: Vec::new(),
            scratch_hops: Vec::new(),
            scratch_send: Vec::new(),
            scratch_blocked: Vec::new(),
        }
    }

    /// The `serverId` this bus reports.
    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// The configuration.
    pub fn config(&self) -> &BusConfig {
        &self.config
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Whether `conn` has completed `initialize`.
    pub fn is_initialized(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.initialized)
    }

    /// The patterns `conn` is subscribed to, in subscription order.
    pub fn subscriptions(&self, conn: ConnId) -> Vec<&str> {
        self.conns
            .get(&conn)
            .map(|c| c.subs.iter().map(|s| s.pattern.as_str()).collect())
            .unwrap_or_default()
    }

    /// Deliveries whose chain has not finished.
    pub fn deliveries_in_flight(&self) -> usize {
        self.deliveries.len()
    }

    /// Counters.
    pub fn stats(&self) -> BusStats {
        self.stats
    }

    /// Re-anchors the wall clock: `unix_ms` is the wall-clock time at `now`.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        let now = self.clock.observe(now);
        self.wall = (now, unix_ms);
    }

    /// The wall-clock time at `now`, in Unix milliseconds.
    fn unix_ms(&self, now: Instant) -> u64 {
        let (at, ms) = self.wall;
        let elapsed = now.saturating_duration_since(at).as_millis();
        ms.saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    /// Publishes `payload` on `topic` from the application itself (no connection); the
    /// outcome arrives as [`BusEvent::Completed`] with `publisher: None`.
    pub fn publish<T: Serialize + ?Sized>(
        &mut self,
        topic: &str,
        payload: &T,
        now: Instant,
    ) -> Result<DeliveryId, CommandError> {
        let raw = serde_json::value::to_raw_value(payload)
            .map_err(|e| CommandError::Payload(e.to_string()))?;
        self.publish_raw(topic, &raw, now)
    }

    /// As [`Bus::publish`], with the payload already encoded.
    pub fn publish_raw(
        &mut self,
        topic: &str,
        payload: &RawValue,
        now: Instant,
    ) -> Result<DeliveryId, CommandError> {
        let now = self.clock.observe(now);
        if topic.is_empty() || topic.len() > self.config.limits.max_topic_bytes {
            return Err(CommandError::InvalidTopic);
        }
        if let Err(e) = self.check_payload(Some(payload)) {
            return Err(CommandError::Payload(e.to_string()));
        }
        if self.app_publishing >= self.config.limits.max_pending_per_publisher {
            return Err(CommandError::Limit("max_pending_per_publisher"));
        }
        Ok(self.start_delivery(None, Origin::Silent, topic, Some(payload), now))
    }

    /// Closes `conn` with `code` and `reason`; its subscriptions and deliveries are cleaned
    /// up when the driver reports the disconnect.
    pub fn close(
        &mut self,
        conn: ConnId,
        code: CloseCode,
        reason: &'static str,
    ) -> Result<(), CommandError> {
        if !self.conns.contains_key(&conn) {
            return Err(CommandError::UnknownConnection);
        }
        self.out.close(conn, code, reason);
        Ok(())
    }

    // ---- input ---------------------------------------------------------------------------

    fn on_body(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let limits = &self.config.limits;
        let (max_len, max_batch) = (limits.max_message_bytes, limits.max_batch_len);
        let body = match frame {
            Frame::Text(text) => split_text(text, max_len, max_batch),
            Frame::Binary(bytes) => split_body(bytes, max_len, max_batch),
        };
        match body {
            Ok(Body::Single(raw)) => {
                // The two messages a bus gets most, each read in one pass when plain.
                if let Some((request, stop)) = fast_hop_ack(raw) {
                    if let Some(delivery) = self.hop_answered(conn, Some(request)) {
                        self.finish_hop(delivery, stop.outcome(), now);
                    }
                } else if let Some(Publish { id, topic, payload }) = self
                    .is_initialized(conn)
                    .then(|| fast_publish(raw))
                    .flatten()
                {
                    if let Handled::Now(bytes) =
                        self.send_message(conn, id, topic, payload, Origin::direct, now)
                    {
                        self.send_bytes(conn, bytes);
                    }
                } else {
                    self.on_single(conn, raw, now);
                }
            }
            Ok(Body::Batch(entries)) => self.on_batch(conn, &entries, now),
            Err(e) => self.reject(conn, e),
        }
    }

    /// One message object, the general way.
    fn on_single(&mut self, conn: ConnId, raw: &str, now: Instant) {
        match classify(raw) {
            Ok(Incoming::Call(call)) => {
                if let Handled::Now(bytes) = self.on_call(conn, call, Origin::direct, now) {
                    self.send_bytes(conn, bytes);
                }
            }
            Ok(Incoming::Reply(reply)) => self.on_reply(conn, reply, now),
            Err(e) => self.reject(conn, e),
        }
    }

    fn reject(&mut self, conn: ConnId, e: DecodeError) {
        let mut out = Vec::with_capacity(128);
        write_error(&mut out, &e.id(), &e.to_error_object());
        self.send_bytes(conn, out);
        self.violation(conn, ProtocolError::Decode(e));
    }

    fn violation(&mut self, conn: ConnId, error: ProtocolError) {
        self.out.event(BusEvent::ProtocolViolation { conn, error });
    }

    fn send_bytes(&mut self, conn: ConnId, bytes: Vec<u8>) {
        self.out.send(conn, FrameBuf::json_from_vec(bytes));
    }

    fn on_batch(&mut self, conn: ConnId, entries: &[&RawValue], now: Instant) {
        let batch = self.next_batch;
        self.next_batch += 1;
        self.batches.insert(
            batch,
            Batch {
                conn,
                slots: Vec::new(),
                pending: 0,
                open: true,
            },
        );
        for raw in entries {
            // Reserve the entry's slot first: a publish whose chain ends at once (no
            // subscriber) fills it from `complete` before `on_call` returns.
            let Some(b) = self.batches.get_mut(&batch) else {
                return;
            };
            let slot = b.slots.len();
            b.slots.push(None);
            b.pending += 1;
            let handled = match classify(raw.get()) {
                Ok(Incoming::Call(call)) => {
                    let origin = |id: Option<Id>| {
                        id.map_or(Origin::Silent, |id| Origin::Batch { batch, slot, id })
                    };
                    self.on_call(conn, call, origin, now)
                }
                Ok(Incoming::Reply(reply)) => {
                    self.on_reply(conn, reply, now);
                    Handled::Nothing
                }
                Err(e) => {
                    let mut out = Vec::with_capacity(128);
                    write_error(&mut out, &e.id(), &e.to_error_object());
                    self.violation(conn, ProtocolError::Decode(e));
                    Handled::Now(out)
                }
            };
            let Some(b) = self.batches.get_mut(&batch) else {
                return;
            };
            match handled {
                Handled::Now(bytes) => {
                    if let Some(s) = b.slots.get_mut(slot) {
                        *s = Some(bytes);
                    }
                    b.pending = b.pending.saturating_sub(1);
                }
                // Filled (and `pending` lowered) by `complete` when the chain ends.
                Handled::Later => {}
                Handled::Nothing => {
                    b.slots.truncate(slot);
                    b.pending = b.pending.saturating_sub(1);
                }
            }
        }
        if let Some(b) = self.batches.get_mut(&batch) {
            b.open = false;
        }
        self.flush_batch(batch);
    }

    fn flush_batch(&mut self, batch: u64) {
        let ready = self
            .batches
            .get(&batch)
            .is_some_and(|b| !b.open && b.pending == 0);
        if !ready {
            return;
        }
        let Some(b) = self.batches.remove(&batch) else {
            return;
        };
        let parts: Vec<Vec<u8>> = b.slots.into_iter().flatten().collect();
        if parts.is_empty() {
            return; // only notifications: nothing is sent
        }
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
        out.push(b'[');
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(p);
        }
        out.push(b']');
        self.send_bytes(b.conn, out);
    }

    /// Runs one request or notification; `origin` makes the delivery origin from the id.
    fn on_call(
        &mut self,
        conn: ConnId,
        call: Call<'_>,
        origin: impl FnOnce(Option<Id>) -> Origin,
        now: Instant,
    ) -> Handled {
        let Call { id, method, params } = call;
        let initialized = self.conns.get(&conn).is_some_and(|c| c.initialized);
        let result = if method == method::INITIALIZE {
            self.initialize(conn, params, now)
        } else if !initialized {
            let known = [
                method::SUBSCRIBE,
                method::UNSUBSCRIBE,
                method::SEND_MESSAGE,
                method::PING,
            ]
            .contains(&method.as_ref());
            if known {
                Err(ErrorObject::with_data(
                    ErrorCode::NOT_INITIALIZED,
                    "initialize must be the first request",
                ))
            } else {
                Err(method_not_found(&method))
            }
        } else {
            match method.as_ref() {
                method::SUBSCRIBE => self.subscribe(conn, params),
                method::UNSUBSCRIBE => self.unsubscribe(conn, params),
                method::PING => Ok(Encoded::ping(rfc3339_utc(self.unix_ms(now)))),
                method::SEND_MESSAGE => {
                    return match topic_params(params) {
                        Ok((topic, payload)) => {
                            self.send_message(conn, id, &topic, payload, origin, now)
                        }
                        Err(e) => respond(id.as_ref(), Err(e)),
                    };
                }
                other => Err(method_not_found(other)),
            }
        };
        respond(id.as_ref(), result)
    }

    fn initialize(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
        now: Instant,
    ) -> Result<Encoded, ErrorObject> {
        let Some(c) = self.conns.get(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        if c.initialized {
            return Err(ErrorObject::new(ErrorCode::ALREADY_INITIALIZED));
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Raw<'a> {
            #[serde(default, borrow)]
            client_id: Option<&'a RawValue>,
            #[serde(default, borrow)]
            client_info: Option<&'a RawValue>,
        }
        let raw: Raw<'_> = match params {
            None => Raw {
                client_id: None,
                client_info: None,
            },
            Some(p) => serde_json::from_str(p.get()).map_err(|_| {
                ErrorObject::with_data(ErrorCode::INVALID_PARAMS, "params must be an object")
            })?,
        };
        let client_id = match raw.client_id.filter(|v| v.get() != "null") {
            None => None,
            Some(v) => Some(
                raw_str(v)
                    .ok_or_else(|| {
                        ErrorObject::with_data(
                            ErrorCode::INVALID_PARAMS,
                            "clientId must be a string",
                        )
                    })?
                    .into_owned(),
            ),
        };
        let client_info = match raw.client_info.filter(|v| v.get() != "null") {
            None => None,
            Some(v) => Some(serde_json::from_str::<ClientInfo>(v.get()).map_err(|_| {
                ErrorObject::with_data(
                    ErrorCode::INVALID_CLIENT_INFO,
                    "clientInfo must be null or an object with string name and version",
                )
            })?),
        };
        if let Some(c) = self.conns.get_mut(&conn) {
            c.initialized = true;
        }
        self.init_timers.cancel(&conn);
        let _ = now;
        self.out.event(BusEvent::Initialized {
            conn,
            client_id,
            client_info,
        });
        Ok(Encoded::encode(&InitializeResult {
            server_id: self.server_id.clone(),
            server_info: ServerInfo {
                name: self.config.server_name.clone(),
                version: self.config.server_version.clone(),
            },
            capabilities: Capabilities {
                subscribe: true,
                publish: true,
                topics: self.config.topics.clone(),
            },
        }))
    }

    /// Reads `{topic, payload?}` ([`topic_params`]) and checks the topic's length (-32005).
    fn topic_param<'a>(
        &self,
        params: Option<&'a RawValue>,
    ) -> Result<(Cow<'a, str>, Option<&'a RawValue>), ErrorObject> {
        let (topic, payload) = topic_params(params)?;
        self.check_topic(&topic)?;
        Ok((topic, payload))
    }

    /// A topic (or pattern) must not be empty (-32600) nor longer than the limit (-32005).
    fn check_topic(&self, topic: &str) -> Result<(), ErrorObject> {
        if topic.is_empty() {
            return Err(missing_topic());
        }
        if topic.len() > self.config.limits.max_topic_bytes {
            return Err(ErrorObject::with_data(
                ErrorCode::LIMIT_EXCEEDED,
                "max_topic_bytes",
            ));
        }
        Ok(())
    }

    fn subscribe(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Encoded, ErrorObject> {
        let (topic, _) = self.topic_param(params)?;
        let max = self.config.limits.max_subscriptions_per_conn;
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        if c.subs.iter().any(|s| s.pattern == topic) {
            return Err(ErrorObject::new(ErrorCode::ALREADY_SUBSCRIBED));
        }
        if c.subs.len() >= max {
            return Err(ErrorObject::with_data(
                ErrorCode::LIMIT_EXCEEDED,
                "max_subscriptions_per_conn",
            ));
        }
        let seq = self.next_sub;
        self.next_sub += 1;
        c.subs.push(Subscription {
            pattern: topic.clone().into_owned(),
            seq,
        });
        self.index.insert(&topic, seq);
        self.sub_owner.insert(seq, conn);
        let subscription_id = format!("sub_{}", self.ids.next_id().short_hex());
        self.out.event(BusEvent::Subscribed {
            conn,
            topic: topic.into_owned(),
            subscription_id: subscription_id.clone(),
        });
        Ok(Encoded::encode(&SubscribeResult {
            success: true,
            subscription_id: Some(subscription_id),
        }))
    }

    fn unsubscribe(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Encoded, ErrorObject> {
        let (topic, _) = self.topic_param(params)?;
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        let Some(i) = c.subs.iter().position(|s| s.pattern == topic) else {
            return Err(ErrorObject::new(ErrorCode::SUBSCRIPTION_NOT_FOUND));
        };
        let sub = c.subs.remove(i);
        self.index.remove(&sub.pattern, sub.seq);
        self.sub_owner.remove(&sub.seq);
        self.out.event(BusEvent::Unsubscribed {
            conn,
            topic: sub.pattern,
        });
        Ok(Encoded::encode(&UnsubscribeResult { success: true }))
    }

    /// A `sendMessage` from `conn` whose params are read (by `topic_params` or
    /// `fast_publish`): checks the topic's length and the publisher's limit, then starts the
    /// delivery, answered when its chain ends (`origin` makes the answer's address from `id`).
    fn send_message(
        &mut self,
        conn: ConnId,
        id: Option<Id>,
        topic: &str,
        payload: Option<&RawValue>,
        origin: impl FnOnce(Option<Id>) -> Origin,
        now: Instant,
    ) -> Handled {
        if let Err(e) = self
            .check_topic(topic)
            .and_then(|()| self.check_payload(payload))
        {
            if id.is_none() {
                self.violation(conn, ProtocolError::NotificationRefused(e.clone()));
            }
            return respond(id.as_ref(), Err(e));
        }
        if let Err(e) = self.may_publish(conn) {
            self.dropped(DropReason::PublisherOverloaded, now);
            return respond(id.as_ref(), Err(e));
        }
        let answered = id.is_some();
        self.start_delivery(Some(conn), origin(id), topic, payload, now);
        self.update_flow(conn);
        if answered {
            Handled::Later
        } else {
            Handled::Nothing
        }
    }

    /// The payload rules: an object unless [`PayloadRule::Any`] (-32602), nested at most
    /// `max_payload_depth` levels (-32005). One check for both read paths.
    fn check_payload(&self, payload: Option<&RawValue>) -> Result<(), ErrorObject> {
        if self.config.payload == PayloadRule::Object {
            let first = payload.and_then(|p| p.get().bytes().find(|b| !jsonrpc::is_json_space(*b)));
            if first != Some(b'{') {
                return Err(not_an_object(first));
            }
        }
        let limit = self.config.limits.max_payload_depth;
        if let Some(p) = payload {
            let bytes = p.get().as_bytes();
            // Valid JSON (serde_json read it) of n bytes nests at most n / 2 levels.
            if bytes.len() / 2 > limit && check_json_depth(bytes, limit).is_err() {
                return Err(ErrorObject::with_data(
                    ErrorCode::LIMIT_EXCEEDED,
                    "max_payload_depth",
                ));
            }
        }
        Ok(())
    }

    /// Asks the driver to pause or resume reading `conn` if its state calls for it.
    fn update_flow(&mut self, conn: ConnId) {
        let backlog = self.config.limits.max_backlog_per_publisher.max(1);
        if let Some(pause) = self.conns.get_mut(&conn).and_then(|c| c.flow(backlog)) {
            self.apply_flow(conn, pause);
        }
    }

    fn apply_flow(&mut self, conn: ConnId, pause: bool) {
        if pause {
            self.stats.pauses += 1;
            self.out.pause_reading(conn);
        } else {
            self.out.resume_reading(conn);
        }
    }

    /// Counts one drop and reports it, rate-limited ([`BusConfig::drop_report_interval`]).
    fn dropped(&mut self, reason: DropReason, now: Instant) {
        let (i, stat) = match reason {
            DropReason::SubscriberOverloaded => (0, &mut self.stats.dropped_subscriber_overloaded),
            DropReason::PublisherOverloaded => (1, &mut self.stats.dropped_publisher_overloaded),
        };
        *stat += 1;
        let d = &mut self.drops[i];
        d.total += 1;
        d.unreported += 1;
        if d.quiet_until.is_none_or(|t| now >= t) {
            self.report_drops(i, now);
        }
    }

    /// Reports the unreported drops of reason `i` and starts a quiet interval.
    fn report_drops(&mut self, i: usize, now: Instant) {
        let interval = self.config.drop_report_interval;
        let d = &mut self.drops[i];
        let count = std::mem::take(&mut d.unreported);
        d.quiet_until = (!interval.is_zero()).then(|| now + interval);
        let total = d.total;
        self.out.event(BusEvent::Dropped {
            reason: DropReason::ALL[i],
            count,
            total,
        });
    }

    /// When summed drops are next due to be reported.
    fn next_drop_report(&self) -> Option<Instant> {
        self.drops
            .iter()
            .filter(|d| d.unreported > 0)
            .filter_map(|d| d.quiet_until)
            .min()
    }

    /// Whether `conn` may start one more publish (`max_pending_per_publisher`).
    fn may_publish(&self, conn: ConnId) -> Result<(), ErrorObject> {
        let Some(c) = self.conns.get(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        if c.publishing >= self.config.limits.max_pending_per_publisher {
            return Err(ErrorObject::with_data(
                ErrorCode::LIMIT_EXCEEDED,
                "max_pending_per_publisher",
            ));
        }
        Ok(())
    }

    // ---- deliveries ------------------------------------------------------------------------

    fn start_delivery(
        &mut self,
        publisher: Option<ConnId>,
        origin: Origin,
        topic: &str,
        payload: Option<&RawValue>,
        now: Instant,
    ) -> DeliveryId {
        let id = DeliveryId(self.next_delivery);
        self.next_delivery += 1;
        self.stats.publishes += 1;

        // Matching connections, one per connection, ordered by their first matching
        // subscription.
        let mut matches = std::mem::take(&mut self.scratch_matches);
        let mut hops = std::mem::take(&mut self.scratch_hops);
        self.index.matches_into(topic, &mut matches);
        hops.clear();
        for seq in &matches {
            if let Some(&conn) = self.sub_owner.get(seq) {
                if self.config.deliver_to_publisher || Some(conn) != publisher {
                    hops.push((conn, *seq));
                }
            }
        }
        hops.sort_unstable();
        hops.dedup_by_key(|(conn, _)| *conn);
        hops.sort_unstable_by_key(|(_, seq)| *seq);

        let mut params =
            Vec::with_capacity(topic.len() + payload.map_or(4, |p| p.get().len()) + 24);
        params.extend_from_slice(b"{\"topic\":");
        write_json_str(&mut params, topic);
        params.extend_from_slice(b",\"payload\":");
        params.extend_from_slice(payload.map_or("null", RawValue::get).as_bytes());
        params.push(b'}');
        self.stats.params_encoded += 1;

        let max_inbox = self.config.limits.max_pending_per_subscriber;
        let mut chain = Vec::with_capacity(hops.len());
        let mut overloaded = 0;
        for &(conn, _) in &hops {
            let state = match self.conns.get_mut(&conn) {
                Some(c) if c.inbox.len() < max_inbox => {
                    c.inbox.push_back(id);
                    HopState::Reserved
                }
                _ => {
                    overloaded += 1;
                    HopState::Overloaded
                }
            };
            chain.push(Hop { conn, state });
        }
        self.scratch_matches = matches;
        self.scratch_hops = hops;
        for _ in 0..overloaded {
            self.dropped(DropReason::SubscriberOverloaded, now);
        }
        self.stats.queued_bytes += params.len();
        self.stats.peak_queued_bytes = self.stats.peak_queued_bytes.max(self.stats.queued_bytes);

        match publisher.and_then(|p| self.conns.get_mut(&p)) {
            Some(c) => c.publishing += 1,
            None => self.app_publishing += 1,
        }
        self.out.event(BusEvent::Published {
            delivery: id,
            publisher,
            topic: topic.to_owned(),
            subscribers: chain.len(),
        });
        self.deliveries.insert(
            id,
            Delivery {
                publisher,
                origin,
                params: Bytes::from(params),
                hops: chain,
                pos: 0,
                sent: None,
                result: SendMessageResult {
                    success: true,
                    stop_propagation: false,
                    delivered: Some(0),
                    errors: Some(0),
                    timeouts: Some(0),
                    disconnected: Some(0),
                    overloaded: Some(0),
                },
            },
        );
        self.stats.peak_deliveries = self.stats.peak_deliveries.max(self.deliveries.len());
        self.activate(id, now);
        id
    }

    /// Moves delivery `id` to its first live hop at or after `pos`, or completes it.
    fn activate(&mut self, id: DeliveryId, now: Instant) {
        let Some(d) = self.deliveries.get_mut(&id) else {
            return;
        };
        while d.pos < d.hops.len() && !d.result.stop_propagation {
            let hop = &d.hops[d.pos];
            let outcome = match hop.state {
                HopState::Overloaded => HopOutcome::Overloaded,
                HopState::Reserved if !self.conns.contains_key(&hop.conn) => {
                    HopOutcome::Disconnected
                }
                HopState::Reserved => {
                    let conn = hop.conn;
                    self.hop_timers
                        .push(now + self.config.delivery_timeout, (id, d.pos));
                    self.compact_hop_timers();
                    self.pump(conn);
                    return;
                }
            };
            count(&mut d.result, &outcome);
            let subscriber = hop.conn;
            d.pos += 1;
            self.out.event(BusEvent::Hop {
                delivery: id,
                subscriber,
                outcome,
            });
        }
        self.complete(id);
    }

    /// Sends subscriber `conn` every delivery whose turn it is, up to the in-flight window,
    /// never passing an earlier message of the same publisher.
    fn pump(&mut self, conn: ConnId) {
        let window = self.config.max_in_flight_per_subscriber.max(1);
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if c.in_flight >= window {
            return;
        }
        let mut room = window - c.in_flight;
        let mut send = std::mem::take(&mut self.scratch_send);
        let mut blocked = std::mem::take(&mut self.scratch_blocked);
        send.clear();
        blocked.clear();
        for id in &c.inbox {
            if room == 0 {
                break;
            }
            let Some(d) = self.deliveries.get(id) else {
                continue;
            };
            let current = d.hops.get(d.pos).is_some_and(|h| h.conn == conn);
            if current && d.sent.is_some() {
                continue; // in flight
            }
            if current && !blocked.contains(&d.publisher) {
                send.push(*id);
                room -= 1;
            } else if !blocked.contains(&d.publisher) {
                blocked.push(d.publisher);
            }
        }
        for id in &send {
            self.send_hop(conn, *id);
        }
        self.scratch_send = send;
        self.scratch_blocked = blocked;
    }

    fn send_hop(&mut self, conn: ConnId, id: DeliveryId) {
        let request = self.ids.next_id();
        let Some(d) = self.deliveries.get_mut(&id) else {
            return;
        };
        let mut out = Vec::with_capacity(d.params.len() + 96);
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"sendMessage\",\"params\":");
        out.extend_from_slice(&d.params);
        out.extend_from_slice(b",\"id\":\"");
        out.extend_from_slice(request.hyphenated().as_bytes());
        out.extend_from_slice(b"\"}");
        d.sent = Some(request);
        self.requests.insert(request, (conn, id));
        if let Some(c) = self.conns.get_mut(&conn) {
            c.in_flight += 1;
            if c.paused {
                // Its reply must be read: a chain never waits on a paused connection.
                c.paused = false;
                self.out.resume_reading(conn);
            }
        }
        self.stats.hops_sent += 1;
        self.send_bytes(conn, out);
    }

    /// Ends the current hop of `id` with `outcome` and moves the chain on.
    fn finish_hop(&mut self, id: DeliveryId, outcome: HopOutcome, now: Instant) {
        let Some(d) = self.deliveries.get_mut(&id) else {
            return;
        };
        let Some(hop) = d.hops.get(d.pos) else {
            return;
        };
        let subscriber = hop.conn;
        let sent = d.sent.take();
        if let Some(request) = sent {
            self.requests.remove(&request);
        }
        if let Some(c) = self.conns.get_mut(&subscriber) {
            if sent.is_some() {
                c.in_flight = c.in_flight.saturating_sub(1);
            }
            if let Some(i) = c.inbox.iter().position(|x| *x == id) {
                c.inbox.remove(i);
            }
        }
        count(&mut d.result, &outcome);
        if outcome == HopOutcome::Stopped {
            d.result.stop_propagation = true;
        }
        d.pos += 1;
        self.out.event(BusEvent::Hop {
            delivery: id,
            subscriber,
            outcome,
        });
        self.activate(id, now);
        self.pump(subscriber);
        // A subscriber that publishes too may be paused now that no reply is awaited from it.
        self.update_flow(subscriber);
        self.drop_stale_hop_timers();
    }

    /// Whether a hop timer still times a hop: its delivery is at that hop.
    fn hop_timer_live(deliveries: &Deliveries, (id, pos): &HopTimer) -> bool {
        deliveries.get(id).is_some_and(|d| d.pos == *pos)
    }

    /// Drops timers of finished hops from the front, so [`Machine::poll_timeout`] is exact.
    fn drop_stale_hop_timers(&mut self) {
        let deliveries = &self.deliveries;
        self.hop_timers
            .drop_stale_front(|t| !Self::hop_timer_live(deliveries, t));
    }

    /// Removes timers of finished hops stuck behind a live one once they outnumber the
    /// deliveries (each has at most one live hop timer) twice over: memory stays
    /// proportional to the deliveries in flight, at amortized O(1) per hop.
    fn compact_hop_timers(&mut self) {
        if self.hop_timers.len() > 2 * self.deliveries.len() + 64 {
            let deliveries = &self.deliveries;
            self.hop_timers
                .retain(|t| Self::hop_timer_live(deliveries, t));
        }
    }

    /// Answers the publisher of `id` and drops the delivery.
    fn complete(&mut self, id: DeliveryId) {
        let Some(d) = self.deliveries.remove(&id) else {
            return;
        };
        self.drop_stale_hop_timers();
        self.stats.completed += 1;
        self.stats.queued_bytes = self.stats.queued_bytes.saturating_sub(d.params.len());
        // A stopped chain still holds reservations further on; release them.
        let mut unblocked = Vec::new();
        for hop in d.hops.iter().skip(d.pos) {
            if let Some(c) = self.conns.get_mut(&hop.conn) {
                if let Some(i) = c.inbox.iter().position(|x| *x == id) {
                    c.inbox.remove(i);
                    unblocked.push(hop.conn);
                }
            }
        }
        let backlog = self.config.limits.max_backlog_per_publisher.max(1);
        match d
            .publisher
            .and_then(|p| self.conns.get_mut(&p).map(|c| (p, c)))
        {
            Some((p, c)) => {
                c.publishing = c.publishing.saturating_sub(1);
                if let Some(pause) = c.flow(backlog) {
                    self.apply_flow(p, pause);
                }
            }
            None if d.publisher.is_none() => {
                self.app_publishing = self.app_publishing.saturating_sub(1);
            }
            None => {}
        }
        match (&d.origin, d.publisher) {
            (Origin::Request(req), Some(p)) if self.conns.contains_key(&p) => {
                let mut out = Vec::with_capacity(160);
                write_result_with(&mut out, req, |out| d.result.write_json(out));
                self.send_bytes(p, out);
            }
            (Origin::Batch { batch, slot, id }, _) => {
                if let Some(b) = self.batches.get_mut(batch) {
                    let mut out = Vec::with_capacity(160);
                    write_result_with(&mut out, id, |out| d.result.write_json(out));
                    if let Some(s) = b.slots.get_mut(*slot) {
                        *s = Some(out);
                    }
                    b.pending = b.pending.saturating_sub(1);
                }
                self.flush_batch(*batch);
            }
            _ => {}
        }
        self.out.event(BusEvent::Completed {
            delivery: id,
            publisher: d.publisher,
            result: d.result,
        });
        for conn in unblocked {
            self.pump(conn);
        }
    }

    /// The delivery whose hop request `request` answers, if `conn` may answer it; otherwise
    /// the violation is reported.
    fn hop_answered(&mut self, conn: ConnId, request: Option<Id128>) -> Option<DeliveryId> {
        let Some((owner, delivery)) = request.and_then(|r| self.requests.get(&r).copied()) else {
            self.violation(conn, ProtocolError::UnknownResponse);
            return None;
        };
        if owner != conn {
            self.violation(conn, ProtocolError::WrongResponder);
            return None;
        }
        Some(delivery)
    }

    fn on_reply(&mut self, conn: ConnId, reply: Reply<'_>, now: Instant) {
        let request = reply.id_str().and_then(|s| Id128::parse(&s));
        let Some(delivery) = self.hop_answered(conn, request) else {
            return;
        };
        let outcome = match reply.outcome {
            Ok(result) => match serde_json::from_str::<Ack>(result.get()) {
                Ok(ack) => ack.outcome(),
                Err(_) => {
                    const REASON: &str =
                        "sendMessage result must be an object with a boolean stopPropagation";
                    let error = DecodeError::InvalidRequest {
                        id: reply.id(),
                        reason: REASON,
                    };
                    self.violation(conn, ProtocolError::Decode(error));
                    HopOutcome::Continued
                }
            },
            Err(error) => HopOutcome::Error(error),
        };
        self.finish_hop(delivery, outcome, now);
    }
}

/// Reads `{topic, payload?}` the general way: a missing, `null` or empty topic is -32600
/// (the spec's table), params that are not an object or a topic that is not a string -32602.
pub(crate) fn topic_params(
    params: Option<&RawValue>,
) -> Result<(Cow<'_, str>, Option<&RawValue>), ErrorObject> {
    #[derive(Deserialize)]
    struct Raw<'a> {
        #[serde(default, borrow)]
        topic: Option<&'a RawValue>,
        #[serde(default, borrow)]
        payload: Option<&'a RawValue>,
    }
    let Some(params) = params else {
        return Err(missing_topic());
    };
    let raw: Raw<'_> = serde_json::from_str(params.get()).map_err(|_| {
        ErrorObject::with_data(ErrorCode::INVALID_PARAMS, "params must be an object")
    })?;
    let Some(topic) = raw.topic.filter(|t| t.get() != "null") else {
        return Err(missing_topic());
    };
    let Some(topic) = raw_str(topic) else {
        return Err(ErrorObject::with_data(
            ErrorCode::INVALID_PARAMS,
            "topic must be a string",
        ));
    };
    if topic.is_empty() {
        return Err(missing_topic());
    }
    Ok((topic, raw.payload))
}

/// A success result, encoded.
struct Encoded(Vec<u8>);

impl Encoded {
    fn encode<T: Serialize>(value: &T) -> Self {
        Self(serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec()))
    }

    fn ping(timestamp: String) -> Self {
        Self::encode(&crate::message::PingResult { timestamp })
    }
}

fn respond(id: Option<&Id>, result: Result<Encoded, ErrorObject>) -> Handled {
    let Some(id) = id else {
        return Handled::Nothing;
    };
    let mut out = Vec::with_capacity(128);
    match result {
        Ok(Encoded(bytes)) => jsonrpc::write_result_raw(&mut out, id, &bytes),
        Err(e) => write_error(&mut out, id, &e),
    }
    Handled::Now(out)
}

fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::with_data(ErrorCode::METHOD_NOT_FOUND, method.to_owned())
}

/// -32602 for a payload that is not an object; `first` is its first byte (`None`: absent).
fn not_an_object(first: Option<u8>) -> ErrorObject {
    let got = match first {
        // The general path reads `"payload": null` as no payload; both say the same.
        None | Some(b'n') => "it is missing or null",
        Some(b'[') => "got an array",
        Some(b'"') => "got a string",
        Some(b't' | b'f') => "got a boolean",
        Some(_) => "got a number",
    };
    ErrorObject {
        message: "Invalid params: payload must be a JSON object".to_owned(),
        ..ErrorObject::with_data(ErrorCode::INVALID_PARAMS, got)
    }
}

fn missing_topic() -> ErrorObject {
    ErrorObject::with_data(ErrorCode::INVALID_REQUEST, "missing or empty topic")
}

fn count(result: &mut SendMessageResult, outcome: &HopOutcome) {
    let field = match outcome {
        HopOutcome::Continued | HopOutcome::Stopped => &mut result.delivered,
        HopOutcome::Error(_) => &mut result.errors,
        HopOutcome::TimedOut => &mut result.timeouts,
        HopOutcome::Disconnected => &mut result.disconnected,
        HopOutcome::Overloaded => &mut result.overloaded,
    };
    *field = Some(field.unwrap_or(0) + 1);
}

impl Machine for Bus {
    type Event = BusEvent;

    /// A new connection. Over [`Limits::max_connections`](crate::Limits::max_connections)
    /// it gets a -32005 error and close 1013 `server-full`.
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conns.contains_key(&conn) {
            return;
        }
        if self.conns.len() >= self.config.limits.max_connections {
            let mut out = Vec::with_capacity(128);
            write_error(
                &mut out,
                &Id::Null,
                &ErrorObject::with_data(ErrorCode::LIMIT_EXCEEDED, "max_connections"),
            );
            self.send_bytes(conn, out);
            self.out
                .close(conn, CloseCode::TRY_AGAIN_LATER, "server-full");
            return;
        }
        self.conns.insert(conn, Conn::default());
        if let Some(t) = self.config.initialize_timeout {
            self.init_timers.set(conn, now + t);
        }
        self.out.event(BusEvent::Connected {
            conn,
            remote: peer.remote_addr,
        });
    }

    /// One message body (text, or binary holding UTF-8 JSON). Never panics; bad input is
    /// answered with the JSON-RPC error the spec names and reported as
    /// [`BusEvent::ProtocolViolation`]; the connection stays open.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        if !self.conns.contains_key(&conn) {
            return;
        }
        self.on_body(conn, frame, now);
    }

    /// The connection is gone: its subscriptions are dropped, every delivery waiting on it
    /// skips to the next subscriber (counted as `disconnected`), and its own publishes still
    /// run to the end (their result has nobody to go to).
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.init_timers.cancel(&conn);
        for sub in &c.subs {
            self.index.remove(&sub.pattern, sub.seq);
            self.sub_owner.remove(&sub.seq);
        }
        let batches: Vec<u64> = self
            .batches
            .iter()
            .filter(|(_, b)| b.conn == conn)
            .map(|(id, _)| *id)
            .collect();
        for b in batches {
            self.batches.remove(&b);
        }
        self.out.forget_conn(conn);
        self.out.event(BusEvent::Disconnected {
            conn,
            subscriptions: c.subs.len(),
        });
        for id in c.inbox {
            let current = self
                .deliveries
                .get(&id)
                .is_some_and(|d| d.hops.get(d.pos).is_some_and(|h| h.conn == conn));
            if current {
                self.finish_hop(id, HopOutcome::Disconnected, now);
            }
        }
    }

    /// Fires due delivery timeouts (the chain skips to the next subscriber) and initialize
    /// deadlines (close 1008 `initialize-required`).
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(timer) = self.hop_timers.pop_expired(now) {
            if Self::hop_timer_live(&self.deliveries, &timer) {
                self.finish_hop(timer.0, HopOutcome::TimedOut, now);
            }
        }
        self.drop_stale_hop_timers();
        for i in 0..self.drops.len() {
            let d = &self.drops[i];
            if d.unreported > 0 && d.quiet_until.is_some_and(|t| now >= t) {
                self.report_drops(i, now);
            }
        }
        while let Some(conn) = self.init_timers.pop_expired(now) {
            if self.conns.get(&conn).is_some_and(|c| !c.initialized) {
                self.out
                    .close(conn, CloseCode::POLICY, "initialize-required");
                self.violation(conn, ProtocolError::InitializeTimeout);
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.hop_timers.next_deadline(),
            self.init_timers.next_deadline(),
            self.next_drop_report(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn poll_output(&mut self) -> Option<Output<BusEvent>> {
        self.out.pop()
    }

    /// Flow control: the bus stops reading a publisher with
    /// [`Limits::max_backlog_per_publisher`](crate::Limits::max_backlog_per_publisher)
    /// publishes in flight and resumes it when half have ended (or when it must read a
    /// subscriber's reply from it).
    fn poll_flow(&mut self) -> Option<Flow> {
        self.out.pop_flow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::SequentialIds;
    use std::time::Duration;

    fn call(method: &str, params: &str, id: u32) -> String {
        format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params},"id":{id}}}"#)
    }

    /// Hop requests sent to `conn` since the last call, as their ids.
    fn hop_ids(bus: &mut Bus, conn: ConnId) -> Vec<String> {
        let mut ids = Vec::new();
        while let Some(out) = bus.poll_output() {
            if let Output::Send { conn: c, frame } = out {
                let text = frame.as_text().unwrap_or_default().to_owned();
                if c == conn && text.contains("\"method\":\"sendMessage\"") {
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                    ids.push(v["id"].as_str().unwrap().to_owned());
                }
            }
        }
        ids
    }

    /// A hop stuck on a silent subscriber keeps its timeout at the front of the queue while
    /// thousands of other hops finish behind it: the queue stays bounded by the deliveries in
    /// flight, `poll_timeout` stays the stuck hop's deadline, and it still fires on time.
    #[test]
    fn hop_timers_stay_bounded_behind_a_stuck_hop() {
        #[allow(clippy::disallowed_methods)] // the one base time of a test
        let t0 = Instant::now();
        let timeout = Duration::from_secs(30);
        let config = BusConfig {
            delivery_timeout: timeout,
            initialize_timeout: None,
            ..BusConfig::default()
        };
        let mut bus = Bus::new(config, SequentialIds::new(1), t0, 0);
        let peer = PeerInfo::new(None);
        let (publisher, slow, fast) = (ConnId::new(1), ConnId::new(2), ConnId::new(3));
        for (conn, topic) in [
            (publisher, None),
            (slow, Some("slow")),
            (fast, Some("fast")),
        ] {
            bus.handle_connect(conn, &peer, t0);
            let init = call("initialize", r#"{"clientId":"c"}"#, 1);
            bus.handle_frame(conn, Frame::Text(&init), t0);
            if let Some(topic) = topic {
                let sub = call("subscribe", &format!(r#"{{"topic":"{topic}"}}"#), 2);
                bus.handle_frame(conn, Frame::Text(&sub), t0);
            }
        }
        while bus.poll_output().is_some() {}
        let stuck = call("sendMessage", r#"{"topic":"slow","payload":{}}"#, 3);
        bus.handle_frame(publisher, Frame::Text(&stuck), t0);
        assert_eq!(hop_ids(&mut bus, slow).len(), 1);
        assert_eq!(bus.poll_timeout(), Some(t0 + timeout));

        let mut most = 0;
        for i in 0..5_000u32 {
            let now = t0 + Duration::from_millis(u64::from(i));
            let msg = call(
                "sendMessage",
                r#"{"topic":"fast","payload":{"n":1}}"#,
                10 + i,
            );
            bus.handle_frame(publisher, Frame::Text(&msg), now);
            for id in hop_ids(&mut bus, fast) {
                let reply = format!(
                    r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":false}},"id":"{id}"}}"#
                );
                bus.handle_frame(fast, Frame::Text(&reply), now);
            }
            most = most.max(bus.hop_timers.len());
            assert_eq!(bus.poll_timeout(), Some(t0 + timeout), "round {i}");
        }
        assert!(most <= 2 * 2 + 64 + 1, "hop timers grew to {most}");
        assert_eq!(bus.deliveries_in_flight(), 1);

        bus.handle_timeout(t0 + timeout - Duration::from_millis(1));
        assert_eq!(bus.deliveries_in_flight(), 1);
        bus.handle_timeout(t0 + timeout);
        assert_eq!(bus.deliveries_in_flight(), 0);
        assert!(bus.hop_timers.is_empty());
        assert_eq!(bus.poll_timeout(), None);
        assert_eq!(bus.stats().completed, 5_001);
    }
}
