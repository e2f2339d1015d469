//! The `BusClient` machine target.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentwire_core::fuzzing::FuzzClock;
use agentwire_core::{ConnId, FrameBuf, Id128, Machine, Output, PeerInfo, SequentialIds};
use arbitrary::Unstructured;
use serde_json::{json, Map, Value};

use super::{
    for_each_sent, frame_of, maybe_set, move_clock, mutate, version, MAX_OPS, PATTERNS, TOPICS,
};
use crate::codec::Incoming;
use crate::config::ClientConfig;
use crate::event::{ClientEvent, IncomingId, RequestKind};
use crate::message::{method, ErrorCode, ErrorObject, Id};
use crate::BusClient;
use agentwire_core::fuzzing::{checked_timeout, json_value, pick, pick_or_any, FuzzDriver};

/// Drives a [`BusClient`] (plain or intercepting, small limits, arbitrary request timeout)
/// through arbitrary connects (a new [`ConnId`] each, with or without the disconnect of the
/// previous one), bus frames (on the current or a stale connection), disconnects, clock
/// moves and commands, draining after every step. Bus frames are raw bytes, non-object
/// JSON, oversize bodies, batches, byte-mutated messages, or messages from a dictionary:
/// replies of every shape to the requests the client sent (ids taken from them), and
/// bus-originated `sendMessage` requests and notifications.
///
/// Checks: no panic; frames and closes go only to the current connection; input on a
/// stale connection is a no-op; every connect sends `initialize` first; every frame sent
/// decodes, and every request has a known method and a UUID id; each request id a command
/// returned ends exactly once (`Subscribed`, `Unsubscribed`, `Published`, `Pong` or
/// `RequestFailed`), and the client's own requests (`initialize`, restored subscriptions)
/// are the only other ids events name; `unanswered()` agrees with the deliveries seen and
/// answered, and `answer` succeeds exactly for those; the timer contract; and at the end,
/// after a disconnect and the request timeout, every command's request has ended.
pub fn client(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(config) = client_config(&mut u) else {
        return;
    };
    let mut c = BusClient::new(config.clone(), SequentialIds::new(3));
    let mut h = ClientHarness {
        clock: FuzzClock::new(),
        config,
        next_conn: 1,
        current: None,
        requests: Vec::new(),
        outstanding: BTreeMap::new(),
        ended: BTreeSet::new(),
        internal: BTreeSet::new(),
        unanswered: BTreeSet::new(),
        most_subs: 0,
        sent_methods: Vec::new(),
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut c, &mut u).is_err() {
            break;
        }
        h.check(&c);
    }
    h.finish(&mut c);
}

impl FuzzDriver for ClientHarness {
    type M = BusClient;

    fn clock(&mut self) -> &mut FuzzClock {
        &mut self.clock
    }

    fn drain(&mut self, m: &mut BusClient) -> usize {
        Self::drain(self, m)
    }
}

fn client_config(u: &mut Unstructured<'_>) -> arbitrary::Result<ClientConfig> {
    let mut c = ClientConfig::new("agent-1");
    c.intercept = u.arbitrary()?;
    c.request_timeout = Duration::from_millis(u.int_in_range(100..=60_000)?);
    c.max_pending_requests = u.int_in_range(1..=8)?;
    c.max_queued = u.int_in_range(1..=4)?;
    c.max_unanswered = u.int_in_range(1..=4)?;
    c.max_message_bytes = 4096;
    Ok(c)
}

struct ClientHarness {
    clock: FuzzClock,
    config: ClientConfig,
    next_conn: u64,
    current: Option<ConnId>,
    /// Requests the client sent on the current connection: (id, method).
    requests: Vec<(String, String)>,
    /// Request ids returned by commands that have not ended.
    outstanding: BTreeMap<Id128, (&'static str, String)>,
    /// Request ids returned by commands that ended.
    ended: BTreeSet<Id128>,
    /// Ids of requests the client sent on its own (`initialize`, restored subscriptions).
    internal: BTreeSet<Id128>,
    /// Deliveries awaiting an answer.
    unanswered: BTreeSet<IncomingId>,
    /// The most subscriptions the client held.
    most_subs: usize,
    /// Methods of the requests sent during the last drain, in order.
    sent_methods: Vec<String>,
}

impl ClientHarness {
    fn step(&mut self, c: &mut BusClient, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
        match u.int_in_range(0..=15)? {
            0 => {
                if let Some(old) = self.current {
                    if u.arbitrary()? {
                        self.disconnect(c, old);
                    }
                }
                let conn = ConnId::new(self.next_conn);
                self.next_conn += 1;
                self.current = Some(conn);
                self.requests.clear();
                self.unanswered.clear();
                c.handle_connect(conn, &PeerInfo::new(None), self.clock.t());
                self.drain(c);
                assert_eq!(
                    self.sent_methods.first().map(String::as_str),
                    Some(method::INITIALIZE),
                    "a connect sends initialize first"
                );
            }
            1..=5 => {
                let stale = self.current.is_none() || u.ratio(1u8, 8u8)?;
                let conn = match self.current {
                    Some(c) if !stale => c,
                    _ => ConnId::new(u.int_in_range(0..=self.next_conn)?),
                };
                let body = self.body(u)?;
                self.feed(c, conn, &body, u)?;
            }
            6 => {
                if let Some(conn) = self.current {
                    self.disconnect(c, conn);
                    c.handle_disconnect(conn, self.clock.t());
                    assert_eq!(self.drain(c), 0, "a second disconnect is a no-op");
                }
            }
            7..=9 => {
                if move_clock(&mut self.clock, u, c.poll_timeout())? {
                    checked_timeout(self, c);
                }
            }
            10 => {
                let pattern = pick_or_any(u, &PATTERNS)?;
                let r = c.subscribe(&pattern, self.clock.t());
                self.command(c, r.map(|r| r.0), "subscribe", pattern);
            }
            11 => {
                let subs: Vec<String> = c.subscriptions().iter().map(|s| (*s).to_owned()).collect();
                let pattern = if !subs.is_empty() && u.ratio(7u8, 8u8)? {
                    u.choose(&subs)?.clone()
                } else {
                    pick_or_any(u, &PATTERNS)?
                };
                let r = c.unsubscribe(&pattern, self.clock.t());
                self.command(c, r.map(|r| r.0), "unsubscribe", pattern);
            }
            12 => {
                let topic = pick_or_any(u, &TOPICS)?;
                let payload = json_value(u, 2)?;
                let r = c.publish(&topic, &payload, self.clock.t());
                self.command(c, r.map(|r| r.0), "publish", topic);
            }
            13 => {
                let r = c.ping(self.clock.t());
                self.command(c, r.map(|r| r.0), "ping", String::new());
            }
            14 => {
                let known: Vec<IncomingId> = self.unanswered.iter().copied().collect();
                let id = if !known.is_empty() && u.ratio(7u8, 8u8)? {
                    *u.choose(&known)?
                } else {
                    IncomingId(u.int_in_range(0..=64)?)
                };
                let r = if u.ratio(3u8, 4u8)? {
                    c.answer(id, u.arbitrary()?)
                } else {
                    c.answer_error(id, ErrorObject::new(ErrorCode::INTERNAL_ERROR))
                };
                let expected = self.unanswered.remove(&id);
                assert_eq!(r.is_ok(), expected, "answer({id:?})");
                assert_eq!(
                    self.drain(c),
                    usize::from(expected),
                    "answer sends one frame"
                );
            }
            _ => {
                // The bus plays along: it answers every request the client sent.
                let Some(conn) = self.current else {
                    return Ok(());
                };
                let requests = std::mem::take(&mut self.requests);
                let mut replies = Vec::new();
                for (id, m) in requests {
                    let result = match m.as_str() {
                        method::INITIALIZE => json!({
                            "serverId": "bus-1",
                            "serverInfo": {"name": "bub-bus", "version": "0.2.0"},
                            "capabilities": {"subscribe": true, "publish": true, "topics": ["inbound:*"]},
                        }),
                        method::SUBSCRIBE => json!({"success": true, "subscriptionId": "sub_1"}),
                        method::SEND_MESSAGE => {
                            json!({"success": true, "stopPropagation": false, "delivered": 1})
                        }
                        method::PING => json!({"timestamp": "2025-02-14T12:00:00Z"}),
                        _ => json!({"success": true}),
                    };
                    replies.push(json!({"jsonrpc": "2.0", "result": result, "id": id}));
                }
                if replies.is_empty() {
                    return Ok(());
                }
                let body = Value::Array(replies).to_string();
                self.feed(c, conn, body.as_bytes(), u)?;
            }
        }
        Ok(())
    }

    /// A command's result: an id to track, or a refusal with no output.
    fn command(
        &mut self,
        c: &mut BusClient,
        r: Result<Id128, crate::CommandError>,
        what: &'static str,
        arg: String,
    ) {
        match r {
            Ok(id) => {
                assert!(
                    !self.ended.contains(&id) && !self.internal.contains(&id),
                    "{what} returned a used id {id}"
                );
                let fresh = self.outstanding.insert(id, (what, arg)).is_none();
                assert!(fresh, "{what} returned a used id {id}");
                self.drain(c);
            }
            Err(_) => assert_eq!(self.drain(c), 0, "a refused {what} has outputs"),
        }
    }

    fn disconnect(&mut self, c: &mut BusClient, conn: ConnId) {
        if self.current == Some(conn) {
            self.current = None;
            self.requests.clear();
            self.unanswered.clear();
        }
        c.handle_disconnect(conn, self.clock.t());
        self.drain(c);
    }

    fn feed(
        &mut self,
        c: &mut BusClient,
        conn: ConnId,
        body: &[u8],
        u: &mut Unstructured<'_>,
    ) -> arbitrary::Result<()> {
        let live = self.current == Some(conn);
        let frame = frame_of(u, body)?;
        c.handle_frame(conn, frame, self.clock.t());
        let n = self.drain(c);
        assert!(live || n == 0, "frame on stale {conn:?} gave {n} outputs");
        Ok(())
    }

    /// A bus → client frame body.
    fn body(&mut self, u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>> {
        Ok(match u.int_in_range(0..=15)? {
            0 => {
                let n = u.int_in_range(0..=256)?;
                u.bytes(n)?.to_vec()
            }
            1 | 2 => {
                let mut body = self.message(u)?.to_string().into_bytes();
                mutate(u, &mut body)?;
                body
            }
            3 | 4 => {
                let n = u.int_in_range(0..=5)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.message(u)?);
                }
                Value::Array(items).to_string().into_bytes()
            }
            5 => {
                let len = self.config.max_message_bytes + usize::from(u.arbitrary::<bool>()?);
                let mut body =
                    br#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"a","payload":""#
                        .to_vec();
                body.resize(len.saturating_sub(3), b'x');
                body.extend_from_slice(br#""},"id":"big"}"#);
                body
            }
            6 => json_value(u, 3)?.to_string().into_bytes(),
            _ => self.message(u)?.to_string().into_bytes(),
        })
    }

    /// One bus → client message.
    fn message(&mut self, u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
        let mut o = Map::new();
        version(u, &mut o)?;
        match u.int_in_range(0..=7)? {
            0..=3 => {
                // A reply to a request the client sent (or to an unknown id).
                let (id, m) = if !self.requests.is_empty() && u.ratio(7u8, 8u8)? {
                    let (id, m) = u.choose(&self.requests)?.clone();
                    (Value::from(id), m)
                } else {
                    (
                        json_value(u, 1)?,
                        pick(u, &[method::INITIALIZE, method::SUBSCRIBE, method::PING])?.to_owned(),
                    )
                };
                let error = |code: ErrorCode| json!({"code": code.0, "message": "x"});
                let outcome = match (m.as_str(), u.int_in_range(0..=4)?) {
                    (method::INITIALIZE, 0..=1) => Ok(json!({
                        "serverId": "bus-1",
                        "serverInfo": {"name": "bub-bus", "version": "0.2.0"},
                        "capabilities": {"subscribe": true, "publish": true, "topics": ["inbound:*", "outbound:*", "agent:*"]},
                    })),
                    (method::INITIALIZE, 2) => Err(error(ErrorCode::ALREADY_INITIALIZED)),
                    (method::SUBSCRIBE, 0..=1) => {
                        Ok(json!({"success": true, "subscriptionId": "sub_0a1b2c3d"}))
                    }
                    (method::SUBSCRIBE, 2) => Err(error(ErrorCode::ALREADY_SUBSCRIBED)),
                    (method::UNSUBSCRIBE, 0..=2) => Ok(json!({"success": true})),
                    (method::SEND_MESSAGE, 0..=1) => Ok(
                        json!({"success": true, "stopPropagation": u.arbitrary::<bool>()?, "delivered": 2, "errors": 0, "timeouts": 0, "disconnected": 0, "overloaded": 0}),
                    ),
                    (method::SEND_MESSAGE, 2) => {
                        Ok(json!({"success": true, "stopPropagation": false}))
                    }
                    (method::PING, 0..=2) => Ok(json!({"timestamp": "2025-02-14T12:00:00Z"})),
                    (_, 3) => Err(
                        json!({"code": u.arbitrary::<i32>()?, "message": "no", "data": json_value(u, 1)?}),
                    ),
                    _ => Ok(json_value(u, 2)?),
                };
                match outcome {
                    Ok(r) => o.insert("result".into(), r),
                    Err(e) => o.insert("error".into(), e),
                };
                o.insert("id".into(), id);
            }
            4..=6 => {
                // A delivery: a bus-originated sendMessage request (or notification).
                o.insert("method".into(), Value::from(method::SEND_MESSAGE));
                let mut p = Map::new();
                maybe_set(Value::from(pick_or_any(u, &TOPICS)?), u, &mut p, "topic")?;
                maybe_set(json_value(u, 2)?, u, &mut p, "payload")?;
                if u.ratio(15u8, 16u8)? {
                    o.insert("params".into(), Value::Object(p));
                }
                match u.int_in_range(0..=7)? {
                    0 => {}
                    1 => {
                        o.insert("id".into(), Value::from(u.arbitrary::<u32>()?));
                    }
                    2 => {
                        o.insert("id".into(), Value::Null);
                    }
                    _ => {
                        o.insert(
                            "id".into(),
                            Value::from(Id128(u.arbitrary()?).to_uuid_string()),
                        );
                    }
                }
            }
            _ => {
                o.insert(
                    "method".into(),
                    Value::from(pick_or_any(u, &[method::PING, method::SUBSCRIBE, "x"])?),
                );
                o.insert("params".into(), json!({}));
                o.insert("id".into(), Value::from(7));
            }
        }
        Ok(Value::Object(o))
    }

    /// Drains every output; a `Close` is followed by the driver's `handle_disconnect`.
    fn drain(&mut self, c: &mut BusClient) -> usize {
        self.sent_methods.clear();
        let mut n = 0;
        let mut closed = None;
        while let Some(out) = c.poll_output() {
            n += 1;
            match out {
                Output::Send { conn, frame } => {
                    assert_eq!(Some(conn), self.current, "send to a stale connection");
                    self.sent(&frame);
                }
                Output::Close { conn, .. } => {
                    assert_eq!(Some(conn), self.current, "close of a stale connection");
                    closed = Some(conn);
                }
                Output::Event(e) => self.event(e),
            }
        }
        if let Some(conn) = closed {
            let methods = std::mem::take(&mut self.sent_methods);
            self.disconnect(c, conn);
            self.sent_methods = methods;
        }
        n
    }

    fn sent(&mut self, frame: &FrameBuf) {
        for_each_sent(frame, "client", |entry| match entry {
            Incoming::Call(call) => {
                assert!(
                    [
                        method::INITIALIZE,
                        method::SUBSCRIBE,
                        method::UNSUBSCRIBE,
                        method::SEND_MESSAGE,
                        method::PING
                    ]
                    .contains(&call.method.as_ref()),
                    "client request method {}",
                    call.method
                );
                let id = call.id.as_ref().and_then(Id::as_str).unwrap_or_default();
                let key = Id128::parse(id)
                    .unwrap_or_else(|| panic!("client request id {:?} is not a UUID", call.id));
                assert!(
                    call.params.is_some_and(|p| p.get().starts_with('{')),
                    "client request params"
                );
                if !self.outstanding.contains_key(&key) {
                    assert!(
                        matches!(call.method.as_ref(), method::INITIALIZE | method::SUBSCRIBE),
                        "{} request with an id no command returned",
                        call.method
                    );
                    assert!(
                        !self.ended.contains(&key),
                        "request {key} sent after it ended"
                    );
                    self.internal.insert(key);
                }
                self.sent_methods.push(call.method.to_string());
                self.requests.push((id.to_owned(), call.method.to_string()));
                if self.requests.len() > 32 {
                    self.requests.remove(0);
                }
            }
            Incoming::Reply(_) => {}
        });
    }

    fn end(&mut self, id: Id128, what: &str) {
        if self.outstanding.remove(&id).is_some() {
            self.ended.insert(id);
        } else {
            assert!(
                self.internal.contains(&id),
                "{what} for request {id}, which ended before or was never sent"
            );
        }
    }

    fn event(&mut self, e: ClientEvent) {
        match e {
            ClientEvent::Subscribed { request, .. } => self.end(request.0, "Subscribed"),
            ClientEvent::Unsubscribed { request, .. } => self.end(request.0, "Unsubscribed"),
            ClientEvent::Published { request, .. } => self.end(request.0, "Published"),
            ClientEvent::Pong { request, .. } => self.end(request.0, "Pong"),
            ClientEvent::RequestFailed { request, kind, .. } => {
                if !self.outstanding.contains_key(&request.0) {
                    assert!(
                        matches!(kind, RequestKind::Initialize | RequestKind::Subscribe(_)),
                        "RequestFailed of {kind:?} for an id no command returned"
                    );
                }
                self.end(request.0, "RequestFailed");
            }
            ClientEvent::Delivery { id, answered, .. } => {
                assert!(self.current.is_some(), "a delivery while disconnected");
                if !answered {
                    assert!(
                        self.config.intercept,
                        "unanswered delivery without intercept"
                    );
                    assert!(self.unanswered.insert(id), "delivery id {id:?} reused");
                }
            }
            _ => {}
        }
    }

    fn check(&mut self, c: &BusClient) {
        assert_eq!(
            c.unanswered(),
            self.unanswered.len(),
            "unanswered deliveries"
        );
        assert!(
            c.unanswered() <= self.config.max_unanswered,
            "max_unanswered"
        );
        self.most_subs = self.most_subs.max(c.subscriptions().len());
        let bound =
            self.config.max_pending_requests.max(self.most_subs + 1) + self.config.max_queued;
        assert!(
            c.pending_requests() <= bound,
            "{} requests pending, over {bound}",
            c.pending_requests()
        );
    }

    /// After a disconnect and enough time, every command's request has ended.
    fn finish(&mut self, c: &mut BusClient) {
        if let Some(conn) = self.current {
            self.disconnect(c, conn);
        }
        for _ in 0..100_000 {
            let Some(t) = c.poll_timeout() else { break };
            self.clock.jump_past_seen_to(t);
            checked_timeout(self, c);
        }
        assert_eq!(
            c.poll_timeout(),
            None,
            "timers left after the final timeouts"
        );
        assert!(
            self.outstanding.is_empty(),
            "requests that never ended: {:?}",
            self.outstanding
        );
        self.check(c);
    }
}
