//! The `BusClient`: the client role, one connection at a time, surviving reconnects.
//!
//! Over 700 lines because its state is one piece: the subscriptions to restore, the requests
//! in flight and the commands queued until `initialize` succeeds are all ended or moved by
//! the same reconnect, so they stay in one type.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use agentwire_core::{
    check_json_depth, CloseCode, ConnId, Frame, FrameBuf, Id128, IdGen, Machine, Monotonic, Outbox,
    Output, PeerInfo, TimerSet,
};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::codec::{
    classify, split_body, split_text, write_error, write_result, Body, Call, Incoming, Reply,
};
use crate::config::ClientConfig;
use crate::error::RequestError;
use crate::error::{CommandError, DecodeError, ProtocolError};
use crate::event::{ClientEvent, IncomingId, RequestId, RequestKind};
use crate::message::{
    method, write_json_str, ErrorCode, ErrorObject, Id, InitializeParams, InitializeResult,
    PingResult, SendMessageParams, SendMessageResult, SubscribeResult, SubscriptionId,
};
use crate::texts;

#[derive(Debug)]
struct Pending {
    kind: RequestKind,
}

#[derive(Debug)]
struct Queued {
    id: Id128,
    kind: RequestKind,
    frame: Vec<u8>,
}

#[derive(Debug)]
struct Sub {
    pattern: String,
    /// The caller's `subscribe` request not yet answered (sent again after a reconnect).
    request: Option<Id128>,
    /// The `subscribe` request for this record now on the wire, if any. Replies and
    /// disconnects are matched by it, never by the pattern alone: an old request for the
    /// same pattern must not touch a newer subscription.
    sent: Option<Id128>,
}

/// A JSON-RPC bus client (client role): one connection at a time, surviving reconnects.
///
/// On every connect it sends `initialize` and, once answered, subscribes again to every
/// pattern the application subscribed to, then sends the commands queued meanwhile. Requests
/// carry UUID string ids, as the reference client's, and fail after
/// [`ClientConfig::request_timeout`]. Deliveries from the bus (bus-originated `sendMessage`)
/// surface as [`ClientEvent::Delivery`]; an interceptor
/// ([`ClientConfig::intercept`]) answers each with [`BusClient::answer`], otherwise the client
/// answers `stopPropagation: false` at once.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`];
/// - output: [`Machine::poll_output`], [`Machine::poll_timeout`];
/// - commands: [`BusClient::subscribe`], [`BusClient::unsubscribe`], [`BusClient::publish`],
///   [`BusClient::publish_raw`], [`BusClient::ping`], [`BusClient::answer`],
///   [`BusClient::answer_error`];
/// - getters: [`BusClient::is_ready`], [`BusClient::server`], [`BusClient::subscriptions`],
///   [`BusClient::pending_requests`], [`BusClient::unanswered`].
pub struct BusClient {
    config: ClientConfig,
    ids: Box<dyn IdGen>,
    clock: Monotonic,
    conn: Option<ConnId>,
    ready: bool,
    server: Option<InitializeResult>,
    subs: Vec<Sub>,
    pending: BTreeMap<Id128, Pending>,
    queue: VecDeque<Queued>,
    timers: TimerSet<Id128>,
    unanswered: BTreeMap<IncomingId, (ConnId, Id)>,
    next_incoming: u64,
    out: Outbox<ClientEvent>,
}

impl std::fmt::Debug for BusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusClient")
            .field("conn", &self.conn)
            .field("ready", &self.ready)
            .field("subscriptions", &self.subs.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl BusClient {
    /// A client; it starts sending once the driver reports a connection.
    pub fn new(config: ClientConfig, ids: impl IdGen + 'static) -> Self {
        Self {
            config,
            ids: Box::new(ids),
            clock: Monotonic::new(),
            conn: None,
            ready: false,
            server: None,
            subs: Vec::new(),
            pending: BTreeMap::new(),
            queue: VecDeque::new(),
            timers: TimerSet::new(),
            unanswered: BTreeMap::new(),
            next_incoming: 0,
            out: Outbox::new(),
        }
    }

    /// Whether the current connection has completed `initialize`.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The bus's `initialize` result on the current connection.
    pub fn server(&self) -> Option<&InitializeResult> {
        self.server.as_ref()
    }

    /// The patterns this client is subscribed to (or will be, once connected), in order.
    pub fn subscriptions(&self) -> Vec<&str> {
        self.subs.iter().map(|s| s.pattern.as_str()).collect()
    }

    /// Requests sent and not yet answered, plus those queued.
    pub fn pending_requests(&self) -> usize {
        self.pending.len() + self.queue.len()
    }

    /// Deliveries awaiting [`BusClient::answer`].
    pub fn unanswered(&self) -> usize {
        self.unanswered.len()
    }

    /// Subscribes to `pattern`; [`ClientEvent::Subscribed`] follows. The subscription is
    /// restored after every reconnect.
    pub fn subscribe(&mut self, pattern: &str, now: Instant) -> Result<RequestId, CommandError> {
        let now = self.clock.observe(now);
        if pattern.is_empty() {
            return Err(CommandError::InvalidTopic);
        }
        if self.subs.iter().any(|s| s.pattern == pattern) {
            return Err(CommandError::AlreadySubscribed);
        }
        self.check_room()?;
        let id = self.ids.next_id();
        self.subs.push(Sub {
            pattern: pattern.to_owned(),
            request: Some(id),
            sent: None,
        });
        self.timers.set(id, now + self.config.request_timeout);
        if self.ready {
            self.send_subscribe(id, pattern);
            if let Some(s) = self.subs.last_mut() {
                s.request = None;
            }
        }
        Ok(RequestId(id))
    }

    /// Unsubscribes from `pattern` (the same string passed to `subscribe`);
    /// [`ClientEvent::Unsubscribed`] follows.
    pub fn unsubscribe(&mut self, pattern: &str, now: Instant) -> Result<RequestId, CommandError> {
        let now = self.clock.observe(now);
        let Some(i) = self.subs.iter().position(|s| s.pattern == pattern) else {
            return Err(CommandError::NotSubscribed);
        };
        self.check_room()?;
        let sub = self.subs.remove(i);
        if let Some(unsent) = sub.request {
            self.timers.cancel(&unsent);
            self.out.event(ClientEvent::RequestFailed {
                request: RequestId(unsent),
                kind: RequestKind::Subscribe(sub.pattern.clone()),
                error: RequestError::Cancelled,
            });
        }
        let id = self.ids.next_id();
        if self.ready {
            let mut params = Vec::with_capacity(pattern.len() + 12);
            params.extend_from_slice(b"{\"topic\":");
            write_json_str(&mut params, pattern);
            params.push(b'}');
            self.send_request(
                id,
                RequestKind::Unsubscribe(sub.pattern),
                method::UNSUBSCRIBE,
                &params,
                now,
            );
        } else {
            // Not connected: the bus holds no subscriptions for us, so this is done.
            self.out.event(ClientEvent::Unsubscribed {
                request: RequestId(id),
                topic: sub.pattern,
            });
        }
        Ok(RequestId(id))
    }

    /// Publishes `payload` on `topic` (`sendMessage`); [`ClientEvent::Published`] follows
    /// with the chain's result. Queued while not connected; failed (not resent) if the
    /// connection drops before the answer, so a message is never published twice.
    pub fn publish<T: Serialize + ?Sized>(
        &mut self,
        topic: &str,
        payload: &T,
        now: Instant,
    ) -> Result<RequestId, CommandError> {
        let raw = crate::codec::payload_to_raw(payload)?;
        self.publish_raw(topic, &raw, now)
    }

    /// As [`BusClient::publish`], with the payload already encoded.
    pub fn publish_raw(
        &mut self,
        topic: &str,
        payload: &RawValue,
        now: Instant,
    ) -> Result<RequestId, CommandError> {
        let now = self.clock.observe(now);
        if topic.is_empty() {
            return Err(CommandError::InvalidTopic);
        }
        self.check_room()?;
        let mut params = Vec::with_capacity(topic.len() + payload.get().len() + 24);
        params.extend_from_slice(b"{\"topic\":");
        write_json_str(&mut params, topic);
        params.extend_from_slice(b",\"payload\":");
        params.extend_from_slice(payload.get().as_bytes());
        params.push(b'}');
        let id = self.ids.next_id();
        self.request_or_queue(
            id,
            RequestKind::Publish(topic.to_owned()),
            method::SEND_MESSAGE,
            &params,
            now,
        )?;
        Ok(RequestId(id))
    }

    /// Sends `ping`; [`ClientEvent::Pong`] follows with the bus's timestamp.
    pub fn ping(&mut self, now: Instant) -> Result<RequestId, CommandError> {
        let now = self.clock.observe(now);
        self.check_room()?;
        let id = self.ids.next_id();
        self.request_or_queue(id, RequestKind::Ping, method::PING, b"{}", now)?;
        Ok(RequestId(id))
    }

    /// Answers a delivery (intercept mode): `stop_propagation: true` ends the bus's chain.
    pub fn answer(&mut self, id: IncomingId, stop_propagation: bool) -> Result<(), CommandError> {
        let (conn, request) = self.take_unanswered(id)?;
        let mut out = Vec::with_capacity(96);
        write_result(
            &mut out,
            &request,
            &SendMessageResult::answer(stop_propagation),
        );
        self.out.send(conn, FrameBuf::json_from_vec(out));
        Ok(())
    }

    /// Answers a delivery with an error (the bus skips to the next subscriber and counts it).
    pub fn answer_error(&mut self, id: IncomingId, error: ErrorObject) -> Result<(), CommandError> {
        let (conn, request) = self.take_unanswered(id)?;
        let mut out = Vec::with_capacity(96);
        write_error(&mut out, &request, &error);
        self.out.send(conn, FrameBuf::json_from_vec(out));
        Ok(())
    }

    fn take_unanswered(&mut self, id: IncomingId) -> Result<(ConnId, Id), CommandError> {
        match self.unanswered.remove(&id) {
            Some((conn, request)) if Some(conn) == self.conn => Ok((conn, request)),
            _ => Err(CommandError::UnknownDelivery),
        }
    }

    fn check_room(&self) -> Result<(), CommandError> {
        if self.pending.len() + self.queue.len() >= self.config.max_pending_requests {
            return Err(CommandError::Limit(texts::MAX_PENDING_REQUESTS));
        }
        Ok(())
    }

    fn request_or_queue(
        &mut self,
        id: Id128,
        kind: RequestKind,
        method: &str,
        params: &[u8],
        now: Instant,
    ) -> Result<(), CommandError> {
        if self.ready {
            self.send_request(id, kind, method, params, now);
            return Ok(());
        }
        if self.queue.len() >= self.config.max_queued {
            return Err(CommandError::Limit(texts::MAX_QUEUED));
        }
        self.queue.push_back(Queued {
            id,
            kind,
            frame: encode_request(id, method, params),
        });
        self.timers.set(id, now + self.config.request_timeout);
        Ok(())
    }

    fn send_request(
        &mut self,
        id: Id128,
        kind: RequestKind,
        method: &str,
        params: &[u8],
        now: Instant,
    ) {
        let frame = encode_request(id, method, params);
        self.send_frame(id, kind, frame, Some(now));
    }

    /// Sends an encoded request; `now: None` keeps an already-set deadline.
    fn send_frame(&mut self, id: Id128, kind: RequestKind, frame: Vec<u8>, now: Option<Instant>) {
        let Some(conn) = self.conn else {
            return;
        };
        if let Some(now) = now {
            self.timers.set(id, now + self.config.request_timeout);
        }
        self.pending.insert(id, Pending { kind });
        self.out.send(conn, FrameBuf::json_from_vec(frame));
    }

    fn send_subscribe(&mut self, id: Id128, pattern: &str) {
        let mut params = Vec::with_capacity(pattern.len() + 12);
        params.extend_from_slice(b"{\"topic\":");
        write_json_str(&mut params, pattern);
        params.push(b'}');
        let frame = encode_request(id, method::SUBSCRIBE, &params);
        if let Some(s) = self.subs.iter_mut().find(|s| s.pattern == pattern) {
            s.sent = Some(id);
        }
        self.send_frame(id, RequestKind::Subscribe(pattern.to_owned()), frame, None);
    }

    fn on_ready(&mut self, result: Option<InitializeResult>, now: Instant) {
        self.ready = true;
        if let Some(r) = &result {
            self.out.event(ClientEvent::Initialized(r.clone()));
        }
        self.server = result;
        // Restore subscriptions in their order, answering any caller request still open.
        let subs: Vec<(String, Option<Id128>)> = self
            .subs
            .iter_mut()
            .map(|s| (s.pattern.clone(), s.request.take()))
            .collect();
        for (pattern, request) in subs {
            let id = match request {
                Some(id) => id,
                None => {
                    let id = self.ids.next_id();
                    self.timers.set(id, now + self.config.request_timeout);
                    id
                }
            };
            self.send_subscribe(id, &pattern);
        }
        while let Some(q) = self.queue.pop_front() {
            self.send_frame(q.id, q.kind, q.frame, None);
        }
    }

    fn fail(&mut self, id: Id128, kind: RequestKind, error: RequestError) {
        self.timers.cancel(&id);
        self.out.event(ClientEvent::RequestFailed {
            request: RequestId(id),
            kind,
            error,
        });
    }

    fn on_body(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let max_len = self.config.max_message_bytes;
        let body = match frame {
            Frame::Text(text) => split_text(text, max_len, usize::MAX),
            Frame::Binary(bytes) => split_body(bytes, max_len, usize::MAX),
        };
        match body {
            Ok(Body::Single(raw)) => self.on_entry(conn, raw, now),
            Ok(Body::Batch(entries)) => {
                for raw in entries {
                    self.on_entry(conn, raw.get(), now);
                }
            }
            Err(e) => self.reject(conn, e),
        }
    }

    fn reject(&mut self, conn: ConnId, e: DecodeError) {
        let mut out = Vec::with_capacity(128);
        write_error(&mut out, &e.id(), &e.to_error_object());
        self.out.send(conn, FrameBuf::json_from_vec(out));
        self.out
            .event(ClientEvent::ProtocolViolation(ProtocolError::Decode(e)));
    }

    fn on_entry(&mut self, conn: ConnId, text: &str, now: Instant) {
        match classify(text) {
            Ok(Incoming::Reply(reply)) => self.on_reply(conn, reply, now),
            Ok(Incoming::Call(call)) => self.on_call(conn, call),
            Err(e) => self.reject(conn, e),
        }
    }

    fn on_call(&mut self, conn: ConnId, call: Call<'_>) {
        let Call { id, method, params } = call;
        if method != method::SEND_MESSAGE {
            if let Some(id) = id {
                let mut out = Vec::with_capacity(128);
                write_error(
                    &mut out,
                    &id,
                    &ErrorObject::with_data(ErrorCode::METHOD_NOT_FOUND, method.to_string()),
                );
                self.out.send(conn, FrameBuf::json_from_vec(out));
            }
            self.out.event(ClientEvent::ProtocolViolation(
                ProtocolError::UnexpectedRequest {
                    method: method.into_owned(),
                },
            ));
            return;
        }
        let parsed = params.and_then(|p| serde_json::from_str::<SendMessageParams>(p.get()).ok());
        let Some(msg) = parsed else {
            if let Some(id) = id {
                let mut out = Vec::with_capacity(128);
                write_error(
                    &mut out,
                    &id,
                    &ErrorObject::with_data(
                        ErrorCode::INVALID_PARAMS,
                        texts::EXPECTED_TOPIC_PAYLOAD,
                    ),
                );
                self.out.send(conn, FrameBuf::json_from_vec(out));
            }
            return;
        };
        let limit = self.config.max_payload_depth;
        if check_json_depth(msg.payload.get().as_bytes(), limit).is_err() {
            // Never surfaced: the application's parser must not be the first to meet it.
            if let Some(id) = id {
                let mut out = Vec::with_capacity(128);
                let error =
                    ErrorObject::with_data(ErrorCode::LIMIT_EXCEEDED, texts::MAX_PAYLOAD_DEPTH);
                write_error(&mut out, &id, &error);
                self.out.send(conn, FrameBuf::json_from_vec(out));
            }
            self.out.event(ClientEvent::ProtocolViolation(
                ProtocolError::PayloadTooDeep { limit },
            ));
            return;
        }
        let incoming = IncomingId(self.next_incoming);
        self.next_incoming += 1;
        let answered = match id {
            None => true,
            Some(id) if !self.config.intercept => {
                let mut out = Vec::with_capacity(96);
                write_result(&mut out, &id, &SendMessageResult::answer(false));
                self.out.send(conn, FrameBuf::json_from_vec(out));
                true
            }
            Some(id) if self.unanswered.len() >= self.config.max_unanswered => {
                let mut out = Vec::with_capacity(128);
                write_error(
                    &mut out,
                    &id,
                    &ErrorObject::with_data(ErrorCode::LIMIT_EXCEEDED, texts::MAX_UNANSWERED),
                );
                self.out.send(conn, FrameBuf::json_from_vec(out));
                return;
            }
            Some(id) => {
                self.unanswered.insert(incoming, (conn, id));
                false
            }
        };
        self.out.event(ClientEvent::Delivery {
            id: incoming,
            topic: msg.topic,
            payload: msg.payload,
            answered,
        });
    }

    fn on_reply(&mut self, conn: ConnId, reply: Reply<'_>, now: Instant) {
        let key = reply.id_str().and_then(|s| Id128::parse(&s));
        let Some((id, pending)) = key.and_then(|k| self.pending.remove(&k).map(|p| (k, p))) else {
            self.out.event(ClientEvent::ProtocolViolation(
                ProtocolError::UnknownResponse,
            ));
            return;
        };
        self.timers.cancel(&id);
        let request = RequestId(id);
        let result = match reply.outcome {
            Ok(result) => result,
            Err(error) => {
                match pending.kind {
                    RequestKind::Initialize if error.code == ErrorCode::ALREADY_INITIALIZED => {
                        self.on_ready(None, now);
                    }
                    RequestKind::Initialize => {
                        self.fail(id, RequestKind::Initialize, RequestError::Rejected(error));
                        self.out
                            .close(conn, CloseCode::NORMAL, texts::CLOSE_INITIALIZE_REJECTED);
                    }
                    RequestKind::Subscribe(topic)
                        if error.code == ErrorCode::ALREADY_SUBSCRIBED =>
                    {
                        self.out.event(ClientEvent::Subscribed {
                            request,
                            topic,
                            subscription_id: None,
                        });
                    }
                    RequestKind::Subscribe(topic) => {
                        self.subs.retain(|s| s.sent != Some(id));
                        self.fail(
                            id,
                            RequestKind::Subscribe(topic),
                            RequestError::Rejected(error),
                        );
                    }
                    kind => self.fail(id, kind, RequestError::Rejected(error)),
                }
                return;
            }
        };
        let text = result.get();
        match pending.kind {
            RequestKind::Initialize => {
                let parsed = serde_json::from_str::<InitializeResult>(text).ok();
                if parsed.is_none() {
                    self.out
                        .event(ClientEvent::ProtocolViolation(ProtocolError::Decode(
                            DecodeError::InvalidRequest {
                                id: reply.id(),
                                reason: "malformed initialize result",
                            },
                        )));
                }
                self.on_ready(parsed, now);
            }
            RequestKind::Subscribe(topic) => {
                if let Some(s) = self.subs.iter_mut().find(|s| s.sent == Some(id)) {
                    s.sent = None;
                }
                let subscription_id = serde_json::from_str::<SubscribeResult>(text)
                    .ok()
                    .and_then(|r| r.subscription_id)
                    .map(SubscriptionId::from);
                self.out.event(ClientEvent::Subscribed {
                    request,
                    topic,
                    subscription_id,
                });
            }
            RequestKind::Unsubscribe(topic) => {
                self.out.event(ClientEvent::Unsubscribed { request, topic });
            }
            RequestKind::Publish(topic) => match serde_json::from_str::<SendMessageResult>(text) {
                Ok(result) => self.out.event(ClientEvent::Published { request, result }),
                Err(_) => self.fail(id, RequestKind::Publish(topic), RequestError::Malformed),
            },
            RequestKind::Ping => match serde_json::from_str::<PingResult>(text) {
                Ok(p) => self.out.event(ClientEvent::Pong {
                    request,
                    timestamp: p.timestamp,
                }),
                Err(_) => self.fail(id, RequestKind::Ping, RequestError::Malformed),
            },
        }
    }

    fn initialize(&mut self, now: Instant) {
        let params = InitializeParams {
            client_id: self.config.client_id.clone(),
            client_info: self.config.client_info.clone(),
        };
        let params = serde_json::to_vec(&params).unwrap_or_else(|_| b"{}".to_vec());
        let id = self.ids.next_id();
        self.send_request(
            id,
            RequestKind::Initialize,
            method::INITIALIZE,
            &params,
            now,
        );
    }

    fn drop_connection(&mut self) {
        let Some(_) = self.conn.take() else {
            return;
        };
        self.ready = false;
        self.server = None;
        self.unanswered.clear();
        // In id order: deterministic.
        let pending = std::mem::take(&mut self.pending);
        for (id, p) in pending {
            match p.kind {
                // Resent after the reconnect, keeping its deadline.
                RequestKind::Subscribe(topic) => {
                    if let Some(s) = self.subs.iter_mut().find(|s| s.sent == Some(id)) {
                        s.request = Some(id);
                        s.sent = None;
                    } else {
                        // Withdrawn (unsubscribed) while on the wire: it ends here.
                        self.fail(
                            id,
                            RequestKind::Subscribe(topic),
                            RequestError::Disconnected,
                        );
                    }
                }
                // The bus dropped the subscription with the connection: done.
                RequestKind::Unsubscribe(topic) => {
                    self.timers.cancel(&id);
                    self.out.event(ClientEvent::Unsubscribed {
                        request: RequestId(id),
                        topic,
                    });
                }
                RequestKind::Initialize => {
                    self.timers.cancel(&id);
                }
                kind => self.fail(id, kind, RequestError::Disconnected),
            }
        }
        self.out.event(ClientEvent::Disconnected);
    }
}

fn encode_request(id: Id128, method: &str, params: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(params.len() + method.len() + 80);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    write_json_str(&mut out, method);
    out.extend_from_slice(b",\"params\":");
    out.extend_from_slice(params);
    out.extend_from_slice(b",\"id\":\"");
    out.extend_from_slice(id.hyphenated().as_str().as_bytes());
    out.extend_from_slice(b"\"}");
    out
}

impl Machine for BusClient {
    type Event = ClientEvent;

    /// A new connection (a reconnect replaces the old one): sends `initialize`.
    fn handle_connect(&mut self, conn: ConnId, _peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn.is_some() {
            self.drop_connection();
        }
        self.conn = Some(conn);
        self.initialize(now);
    }

    /// One message from the bus. Never panics; malformed input is answered with a JSON-RPC
    /// error and reported as [`ClientEvent::ProtocolViolation`].
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn != Some(conn) {
            return;
        }
        self.on_body(conn, frame, now);
    }

    /// The connection ended: publishes and pings in flight fail with
    /// [`RequestError::Disconnected`]; subscriptions are restored on the next connect.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        if self.conn == Some(conn) {
            self.drop_connection();
        }
    }

    /// Fails requests whose deadline passed; an unanswered `initialize` closes the connection
    /// so the driver reconnects.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(id) = self.timers.pop_expired(now) {
            if let Some(p) = self.pending.remove(&id) {
                if p.kind == RequestKind::Initialize {
                    if let Some(conn) = self.conn {
                        self.out
                            .close(conn, CloseCode::NORMAL, texts::CLOSE_INITIALIZE_TIMEOUT);
                    }
                }
                self.out.event(ClientEvent::RequestFailed {
                    request: RequestId(id),
                    kind: p.kind,
                    error: RequestError::TimedOut,
                });
            } else if let Some(i) = self.queue.iter().position(|q| q.id == id) {
                if let Some(q) = self.queue.remove(i) {
                    self.out.event(ClientEvent::RequestFailed {
                        request: RequestId(id),
                        kind: q.kind,
                        error: RequestError::TimedOut,
                    });
                }
            } else if let Some(s) = self.subs.iter_mut().find(|s| s.request == Some(id)) {
                // A subscribe waiting for a connection: the subscription stays recorded.
                s.request = None;
                let topic = s.pattern.clone();
                self.out.event(ClientEvent::RequestFailed {
                    request: RequestId(id),
                    kind: RequestKind::Subscribe(topic),
                    error: RequestError::TimedOut,
                });
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    fn poll_output(&mut self) -> Option<Output<ClientEvent>> {
        self.out.pop()
    }
}
