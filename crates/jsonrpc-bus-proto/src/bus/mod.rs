//! The `Bus`: the server role, owning every connection, subscription and delivery.
//!
//! This file is the `Machine` impl and the routing of each request to its handler; the state
//! lives in sub-states that own their data and timers: [`Subscriptions`], [`Deliveries`]
//! (chains, inboxes, hop requests and timers), [`Flow`] (backlogs, pause/resume, drop
//! reports) and [`Batches`]. Over 700 lines because the type's documentation (the four kinds
//! of method, as in quinn) and the five request handlers sit here with the routing.

use std::borrow::Cow;
use std::time::Instant;

use agentwire_core::{
    CloseCode, ConnId, ConnMap, Flow as FlowChange, Frame, FrameBuf, Id128, IdGen, Machine,
    Monotonic, Outbox, Output, PeerInfo, TimerSet, WallClock,
};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::codec::{
    classify, classify_as, split_body, split_text, write_error, write_result_with, Body, Call,
    Incoming, Reply,
};
use crate::config::BusConfig;
use crate::error::{CommandError, DecodeError, ProtocolError};
use crate::event::{BusEvent, DeliveryId, DropReason, HopOutcome};
use crate::fast;
use crate::message::{
    method, Ack, Capabilities, ClientId, ErrorCode, ErrorObject, Id, InitializeResult,
    SendMessageResult, ServerInfo, SubscribeResult, SubscriptionId, UnsubscribeResult,
};
use crate::texts;

mod batch;
mod deliveries;
mod flow;
mod params;
mod stats;
mod subscriptions;

use batch::{Batches, Handled};
use deliveries::{Deliveries, Delivery, Key, Origin, Step};
use flow::Flow;
use params::{
    check_payload, check_topic, initialize_params, method_not_found, respond, send_message_params,
    Encoded,
};
use params::{topic_params, Members, Params};
pub use stats::BusStats;
use subscriptions::Subscriptions;

/// A connection's own state; its subscriptions, inbox and backlog live in the sub-states.
#[derive(Debug, Default)]
struct Conn {
    initialized: bool,
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
    wall: WallClock,
    conns: ConnMap<Conn>,
    subscriptions: Subscriptions,
    deliveries: Deliveries,
    flow: Flow,
    batches: Batches,
    /// `initialize` deadlines.
    init_timers: TimerSet<ConnId>,
    out: Outbox<BusEvent>,
    stats: BusStats,
    scratch_chain: Vec<ConnId>,
    /// The publisher's answer, written here before it is copied out.
    scratch_answer: Vec<u8>,
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
            subscriptions: Subscriptions::new(config.match_mode),
            deliveries: Deliveries::new(&config),
            flow: Flow::new(&config.limits, config.drop_report_interval),
            config,
            ids,
            server_id,
            clock,
            wall: WallClock::new(now, unix_ms),
            conns: ConnMap::default(),
            batches: Batches::default(),
            init_timers: TimerSet::new(),
            out: Outbox::new(),
            stats: BusStats::default(),
            scratch_chain: Vec::new(),
            scratch_answer: Vec::with_capacity(160),
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
        self.subscriptions.patterns(conn)
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
        self.wall.set(self.clock.observe(now), unix_ms);
    }

    /// Publishes `payload` on `topic` from the application itself (no connection); the
    /// outcome arrives as [`BusEvent::Completed`] with `publisher: None`.
    pub fn publish<T: Serialize + ?Sized>(
        &mut self,
        topic: &str,
        payload: &T,
        now: Instant,
    ) -> Result<DeliveryId, CommandError> {
        let raw = crate::codec::payload_to_raw(payload)?;
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
        if self.flow.start(None).is_err() {
            return Err(CommandError::Limit(texts::MAX_PENDING_PER_PUBLISHER));
        }
        Ok(self
            .start_delivery(None, Origin::Silent, topic, Some(payload), now)
            .id)
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
                // The message a bus gets most, read in one pass when plain.
                if let Some((request, ack)) = fast::read(raw) {
                    if let Some(delivery) = self.hop_answered(conn, Some(request)) {
                        self.finish_hop(delivery, hop_outcome(&ack), true, now);
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
        match read(raw) {
            Ok(Incoming::Call(call)) => {
                if let Handled::Now(bytes) = self.on_call(conn, call, Origin::direct, now) {
                    self.send_bytes(conn, bytes);
                }
            }
            Ok(Incoming::Reply(reply)) => self.on_reply(conn, reply, now),
            Err(e) => self.reject(conn, e),
        }
    }

    #[cold]
    fn reject(&mut self, conn: ConnId, e: DecodeError) {
        let mut out = Vec::with_capacity(128);
        write_error(&mut out, &e.id(), &e.to_error_object());
        self.send_bytes(conn, out);
        self.violation(conn, ProtocolError::Decode(e));
    }

    #[cold]
    fn violation(&mut self, conn: ConnId, error: ProtocolError) {
        self.out.event(BusEvent::ProtocolViolation { conn, error });
    }

    fn send_bytes(&mut self, conn: ConnId, bytes: Vec<u8>) {
        self.out.send(conn, FrameBuf::json_from_vec(bytes));
    }

    #[cold]
    fn on_batch(&mut self, conn: ConnId, entries: &[&RawValue], now: Instant) {
        let batch = self.batches.open(conn);
        for raw in entries {
            // Reserve the entry's slot first: a publish whose chain ends at once (no
            // subscriber) fills it from `complete` before `on_call` returns.
            let Some(slot) = self.batches.reserve(batch) else {
                return;
            };
            let handled = match read(raw.get()) {
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
            // A `Later` slot is filled by `complete` when the chain ends.
            if !self.batches.handled(batch, slot, handled) {
                return;
            }
        }
        self.batches.close(batch);
        self.flush_batch(batch);
    }

    /// Sends the answer to `batch` if every entry has one.
    #[cold]
    fn flush_batch(&mut self, batch: u64) {
        if let Some((conn, out)) = self.batches.take_ready(batch) {
            self.send_bytes(conn, out);
        }
    }

    /// Runs one request or notification; `origin` makes the delivery origin from the id.
    fn on_call(
        &mut self,
        conn: ConnId,
        call: Call<'_, Params<'_>>,
        origin: impl FnOnce(Option<Id>) -> Origin,
        now: Instant,
    ) -> Handled {
        let Call { id, method, params } = call;
        let params = params.unwrap_or(Params::Raw(None));
        // The call a bus gets most, a publish on an initialized connection, stays on this
        // compact path; every other call is handled out of line.
        if method.as_ref() != method::SEND_MESSAGE
            || !self.conns.get(&conn).is_some_and(|c| c.initialized)
        {
            return self.on_other_call(conn, id, &method, params, now);
        }
        match topic_params(params) {
            Ok((topic, payload)) => self.send_message(conn, id, &topic, payload, origin, now),
            Err(e) => respond(id.as_ref(), Err(e)),
        }
    }

    /// Runs any call but a publish on an initialized connection ([`Bus::on_call`]).
    #[cold]
    fn on_other_call(
        &mut self,
        conn: ConnId,
        id: Option<Id>,
        method: &str,
        params: Params<'_>,
        now: Instant,
    ) -> Handled {
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
            .contains(&method);
            if known {
                Err(ErrorObject::with_data(
                    ErrorCode::NOT_INITIALIZED,
                    texts::INITIALIZE_FIRST,
                ))
            } else {
                Err(method_not_found(method))
            }
        } else {
            match method {
                method::SUBSCRIBE => self.subscribe(conn, params),
                method::UNSUBSCRIBE => self.unsubscribe(conn, params),
                method::PING => Ok(Encoded::ping(self.wall.rfc3339(now))),
                other => Err(method_not_found(other)),
            }
        };
        respond(id.as_ref(), result)
    }

    #[cold]
    fn initialize(
        &mut self,
        conn: ConnId,
        params: Params<'_>,
        now: Instant,
    ) -> Result<Encoded, ErrorObject> {
        let Some(c) = self.conns.get(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        if c.initialized {
            return Err(ErrorObject::new(ErrorCode::ALREADY_INITIALIZED));
        }
        let (client_id, client_info) = initialize_params(params)?;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.initialized = true;
        }
        self.init_timers.cancel(&conn);
        let _ = now;
        self.out.event(BusEvent::Initialized {
            conn,
            client_id: client_id.map(ClientId::from),
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
        params: Params<'a>,
    ) -> Result<(Cow<'a, str>, Option<&'a RawValue>), ErrorObject> {
        let (topic, payload) = topic_params(params)?;
        check_topic(&topic, self.config.limits.max_topic_bytes)?;
        Ok((topic, payload))
    }

    #[cold]
    fn subscribe(&mut self, conn: ConnId, params: Params<'_>) -> Result<Encoded, ErrorObject> {
        let (topic, _) = self.topic_param(params)?;
        let max = self.config.limits.max_subscriptions_per_conn;
        self.subscriptions.subscribe(conn, &topic, max)?;
        let subscription_id =
            SubscriptionId::from(format!("sub_{}", self.ids.next_id().short_hex()));
        self.out.event(BusEvent::Subscribed {
            conn,
            topic: topic.into_owned(),
            subscription_id: subscription_id.clone(),
        });
        Ok(Encoded::encode(&SubscribeResult {
            success: true,
            subscription_id: Some(subscription_id.into_string()),
        }))
    }

    #[cold]
    fn unsubscribe(&mut self, conn: ConnId, params: Params<'_>) -> Result<Encoded, ErrorObject> {
        let (topic, _) = self.topic_param(params)?;
        let pattern = self.subscriptions.unsubscribe(conn, &topic)?;
        self.out.event(BusEvent::Unsubscribed {
            conn,
            topic: pattern,
        });
        Ok(Encoded::encode(&UnsubscribeResult { success: true }))
    }

    /// A `sendMessage` from `conn` whose params are read ([`topic_params`]): checks the
    /// topic's length, the payload and the publisher's limit, then starts the delivery, answered when its chain ends (`origin` makes the answer's address from `id`).
    fn send_message(
        &mut self,
        conn: ConnId,
        id: Option<Id>,
        topic: &str,
        payload: Option<&RawValue>,
        origin: impl FnOnce(Option<Id>) -> Origin,
        now: Instant,
    ) -> Handled {
        if let Err(e) = check_topic(topic, self.config.limits.max_topic_bytes)
            .and_then(|()| self.check_payload(payload))
        {
            if id.is_none() {
                self.violation(conn, ProtocolError::NotificationRefused(e.clone()));
            }
            return respond(id.as_ref(), Err(e));
        }
        if let Err(e) = self.flow.start(Some(conn)) {
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

    /// The payload rules: an object unless [`PayloadRule::Any`](crate::PayloadRule::Any) (-32602), nested at most
    /// `max_payload_depth` levels (-32005). One check for both read paths.
    fn check_payload(&self, payload: Option<&RawValue>) -> Result<(), ErrorObject> {
        check_payload(
            payload,
            self.config.payload,
            self.config.limits.max_payload_depth,
        )
    }

    /// Asks the driver to pause or resume reading `conn` if its state calls for it.
    fn update_flow(&mut self, conn: ConnId) {
        let deliveries = &self.deliveries;
        self.flow.update(
            conn,
            || deliveries.in_flight(conn),
            &mut self.out,
            &mut self.stats,
        );
    }

    /// Counts one drop and reports it, rate-limited ([`BusConfig::drop_report_interval`]).
    #[cold]
    fn dropped(&mut self, reason: DropReason, now: Instant) {
        self.flow
            .dropped(reason, now, &mut self.out, &mut self.stats);
    }

    // ---- deliveries ------------------------------------------------------------------------

    /// Starts the chain of a publish that [`Flow::start`] has counted.
    fn start_delivery(
        &mut self,
        publisher: Option<ConnId>,
        origin: Origin,
        topic: &str,
        payload: Option<&RawValue>,
        now: Instant,
    ) -> Key {
        self.stats.publishes += 1;
        let mut chain = std::mem::take(&mut self.scratch_chain);
        self.subscriptions.chain(
            topic,
            publisher,
            self.config.deliver_to_publisher,
            &mut chain,
        );

        let mut params = self.deliveries.params_buffer();
        send_message_params(&mut params, topic, payload);
        self.stats.params_encoded += 1;
        let len = params.len();

        let (key, overloaded) = self.deliveries.start(publisher, origin, params, &chain);
        let subscribers = chain.len();
        self.scratch_chain = chain;
        for _ in 0..overloaded {
            self.dropped(DropReason::SubscriberOverloaded, now);
        }
        self.stats.queued_bytes += len;
        self.stats.peak_queued_bytes = self.stats.peak_queued_bytes.max(self.stats.queued_bytes);
        self.out.event(BusEvent::Published {
            delivery: key.id,
            publisher,
            topic: topic.to_owned(),
            subscribers,
        });
        self.stats.peak_deliveries = self.stats.peak_deliveries.max(self.deliveries.len());
        self.activate(key, now);
        key
    }

    /// Moves delivery `key` to its next live hop (and sends it if it is that subscriber's
    /// turn), or completes it.
    fn activate(&mut self, key: Key, now: Instant) {
        match self.deliveries.step(key, now, &mut self.out) {
            Step::Waiting(conn) => self.pump(conn),
            Step::Done(d) => self.complete(key, d),
            Step::Gone => {}
        }
    }

    /// Sends subscriber `conn` every delivery whose turn it is, within its window.
    fn pump(&mut self, conn: ConnId) {
        self.deliveries.pump(
            conn,
            &mut *self.ids,
            &mut self.flow,
            &mut self.out,
            &mut self.stats,
        );
    }

    /// Ends the current hop of `key` with `outcome` and moves the chain on.
    /// `answered`: the hop's request was answered (and freed by [`Bus::hop_answered`]).
    fn finish_hop(&mut self, key: Key, outcome: HopOutcome, answered: bool, now: Instant) {
        let Some(subscriber) = self
            .deliveries
            .end_hop(key, outcome, answered, &mut self.out)
        else {
            return;
        };
        self.activate(key, now);
        self.pump(subscriber);
        // A subscriber that publishes too may be paused now that no reply is awaited from it.
        self.update_flow(subscriber);
        self.deliveries.drop_stale_hop_timers();
    }

    /// Answers the publisher of the ended delivery `d` (`key`).
    fn complete(&mut self, key: Key, mut d: Delivery) {
        self.deliveries.drop_stale_hop_timers();
        self.stats.completed += 1;
        self.stats.queued_bytes = self.stats.queued_bytes.saturating_sub(d.params.len());
        // A stopped chain still holds reservations further on; release them.
        let unblocked = self.deliveries.release(key, &d);
        let deliveries = &self.deliveries;
        let in_flight = || d.publisher.map_or(0, |p| deliveries.in_flight(p));
        self.flow
            .ended(d.publisher, in_flight, &mut self.out, &mut self.stats);
        match (&d.origin, d.publisher) {
            (Origin::Request(req), Some(p)) if self.conns.contains_key(&p) => {
                // Written into a kept buffer and copied out at its exact size: the frame's
                // buffer becomes `Bytes` with one allocation, not two.
                let mut out = std::mem::take(&mut self.scratch_answer);
                out.clear();
                write_result_with(&mut out, req, |out| d.result.write_json(out));
                self.send_bytes(p, out.as_slice().to_vec());
                self.scratch_answer = out;
            }
            (Origin::Batch { batch, slot, id }, _) => {
                self.answer_in_batch(*batch, *slot, id, &d.result);
            }
            _ => {}
        }
        self.out.event(BusEvent::Completed {
            delivery: key.id,
            publisher: d.publisher,
            result: std::mem::take(&mut d.result),
        });
        self.deliveries.recycle(d);
        for conn in unblocked {
            self.pump(conn);
        }
    }

    /// Fills entry `slot` of `batch` with the result of its publish, and sends the batch's
    /// answer if it was the last entry awaited.
    #[cold]
    fn answer_in_batch(&mut self, batch: u64, slot: usize, id: &Id, result: &SendMessageResult) {
        let mut out = Vec::with_capacity(160);
        write_result_with(&mut out, id, |out| result.write_json(out));
        self.batches.fill(batch, slot, out);
        self.flush_batch(batch);
    }

    /// The delivery whose hop request `request` answers, if `conn` may answer it (the request
    /// is freed: the caller ends the hop); otherwise the violation is reported.
    fn hop_answered(&mut self, conn: ConnId, request: Option<Id128>) -> Option<Key> {
        match self.deliveries.answered(conn, request) {
            Ok(delivery) => Some(delivery),
            Err(e) => {
                self.violation(conn, e);
                None
            }
        }
    }

    #[cold]
    fn on_reply(&mut self, conn: ConnId, reply: Reply<'_>, now: Instant) {
        let request = reply.id_str().and_then(|s| Id128::parse(&s));
        let Some(delivery) = self.hop_answered(conn, request) else {
            return;
        };
        let outcome = match reply.outcome {
            Ok(result) => match serde_json::from_str::<Ack>(result.get()) {
                Ok(ack) => hop_outcome(&ack),
                Err(_) => {
                    let error = DecodeError::InvalidRequest {
                        id: reply.id(),
                        reason: texts::MALFORMED_HOP_RESULT,
                    };
                    self.violation(conn, ProtocolError::Decode(error));
                    HopOutcome::Continued
                }
            },
            Err(error) => HopOutcome::Error(error),
        };
        self.finish_hop(delivery, outcome, true, now);
    }
}

/// Classifies one message object, reading a call's params in the same pass when they are an
/// object the bus can read that way ([`params::Members`]); any other message is classified
/// again the general way ([`classify`]), whose answer it gets.
fn read(text: &str) -> Result<Incoming<'_, Params<'_>>, DecodeError> {
    if let Ok(incoming) = classify_as::<Members<'_>>(text) {
        return Ok(match incoming {
            Incoming::Call(Call { id, method, params }) => Incoming::Call(Call {
                id,
                method,
                params: params.map(Params::Read),
            }),
            Incoming::Reply(reply) => Incoming::Reply(reply),
        });
    }
    Ok(match classify(text)? {
        Incoming::Call(Call { id, method, params }) => Incoming::Call(Call {
            id,
            method,
            params: params.map(|p| Params::Raw(Some(p))),
        }),
        Incoming::Reply(reply) => Incoming::Reply(reply),
    })
}

/// What a subscriber's answer does to the chain.
fn hop_outcome(ack: &Ack) -> HopOutcome {
    if ack.stops() {
        HopOutcome::Stopped
    } else {
        HopOutcome::Continued
    }
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
                &ErrorObject::with_data(ErrorCode::LIMIT_EXCEEDED, texts::MAX_CONNECTIONS),
            );
            self.send_bytes(conn, out);
            self.out
                .close(conn, CloseCode::TRY_AGAIN_LATER, texts::CLOSE_SERVER_FULL);
            return;
        }
        self.conns.insert(conn, Conn::default());
        self.subscriptions.open(conn);
        self.deliveries.open(conn);
        self.flow.open(conn);
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
        if self.conns.remove(&conn).is_none() {
            return;
        }
        self.init_timers.cancel(&conn);
        let subscriptions = self.subscriptions.remove_conn(conn);
        self.flow.close(conn);
        self.batches.forget_conn(conn);
        self.out.forget_conn(conn);
        self.out.event(BusEvent::Disconnected {
            conn,
            subscriptions,
        });
        for key in self.deliveries.close(conn) {
            self.finish_hop(key, HopOutcome::Disconnected, false, now);
        }
    }

    /// Fires due delivery timeouts (the chain skips to the next subscriber) and initialize
    /// deadlines (close 1008 `initialize-required`).
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(delivery) = self.deliveries.pop_expired(now) {
            self.finish_hop(delivery, HopOutcome::TimedOut, false, now);
        }
        self.deliveries.drop_stale_hop_timers();
        self.flow.report_due(now, &mut self.out);
        while let Some(conn) = self.init_timers.pop_expired(now) {
            if self.conns.get(&conn).is_some_and(|c| !c.initialized) {
                self.out
                    .close(conn, CloseCode::POLICY, texts::CLOSE_INITIALIZE_REQUIRED);
                self.violation(conn, ProtocolError::InitializeTimeout);
            }
        }
    }

    /// Re-anchors the wall clock of `ping` timestamps ([`set_wall_clock`](Self::set_wall_clock)).
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.set_wall_clock(now, unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.deliveries.next_deadline(),
            self.init_timers.next_deadline(),
            self.flow.next_report(),
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
    fn poll_flow(&mut self) -> Option<FlowChange> {
        self.out.pop_flow()
    }
}

#[cfg(test)]
mod tests;
