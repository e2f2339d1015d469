//! The `Bus` machine target.
//!
//! Over 700 lines: the harness checks every output against a model of the chains it keeps
//! itself (deliveries, hops, order per publisher, flow, drops), and those checks read best
//! beside the steps that feed them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentwire_core::fuzzing::FuzzClock;
use agentwire_core::{ConnId, FrameBuf, Id128, Machine, Output, PeerInfo, SequentialIds};
use arbitrary::Unstructured;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::{
    for_each_sent, frame_of, maybe_set, move_clock, mutate, version, MAX_OPS, PATTERNS, TOPICS,
};
use crate::codec::Incoming;
use crate::config::{BusConfig, Limits};
use crate::event::{BusEvent, DeliveryId, DropReason, HopOutcome};
use crate::message::{
    method, Id, InitializeResult, PingResult, SendMessageRef, SendMessageResult, SubscribeResult,
    UnsubscribeResult,
};
use crate::topic::MatchMode;
use crate::Bus;
use agentwire_core::fuzzing::{checked_timeout, json_value, pick, pick_or_any, FuzzDriver};

/// Drives a [`Bus`] (small limits and arbitrary options: match mode, in-flight window,
/// delivery to the publisher, initialize and delivery timeouts) through an arbitrary
/// sequence of connects, frames, disconnects, clock moves, `handle_timeout`, application
/// publishes and closes, draining after every step. Frames are raw bytes, non-object JSON,
/// oversize bodies, batches, byte-mutated messages, or messages from a dictionary of every
/// client method and of subscriber replies to the bus's own requests (ids taken from the
/// requests the bus sent to that connection).
///
/// Checks: no panic; frames and closes go only to open connections; input on a connection
/// that is not open is a no-op; every frame sent is text and decodes, every bus request is
/// a `sendMessage` with a UUID id and `{topic, payload}`, every result has the shape of its
/// method; each publisher's messages reach each subscriber in the order published;
/// `Published`, `Hop` and `Completed` events agree (each delivery completes once, its
/// counters add up to its hops, it stops only on a `Stopped` hop and otherwise gives every
/// subscriber a turn); `deliveries_in_flight`, `connection_count` and the stats counters
/// agree with the events and frames seen (`params_encoded == publishes`);
/// `deliveries_in_flight` stays within the publishers' limits; the timer contract; and at
/// the end every publish completes once time passes the delivery timeouts with nobody
/// answering.
pub fn bus(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(config) = bus_config(&mut u) else {
        return;
    };
    let mut clock = FuzzClock::new();
    let start = clock.t();
    let mut b = Bus::new(
        config.clone(),
        SequentialIds::new(7),
        start,
        1_739_534_400_000,
    );
    let mut h = BusHarness {
        clock,
        config,
        next_conn: 1,
        open: BTreeSet::new(),
        ended: BTreeSet::new(),
        accepted: 0,
        next_id: 0,
        next_seq: 1,
        seq_owner: BTreeMap::new(),
        last_seq: BTreeMap::new(),
        expected: BTreeMap::new(),
        bus_requests: BTreeMap::new(),
        live: BTreeMap::new(),
        published: 0,
        completed: 0,
        hops_seen: 0,
        paused: BTreeSet::new(),
        pauses: 0,
        drops_reported: BTreeMap::new(),
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut b, &mut u).is_err() {
            break;
        }
        h.check(&b);
    }
    h.finish(&mut b);
}

fn bus_config(u: &mut Unstructured<'_>) -> arbitrary::Result<BusConfig> {
    // Fields are read from the input in this order (committed seeds depend on it).
    Ok(BusConfig {
        match_mode: if u.arbitrary()? {
            MatchMode::Glob
        } else {
            MatchMode::GlobOrPrefix
        },
        max_in_flight_per_subscriber: *u.choose(&[1usize, 2, 8, 0])?,
        deliver_to_publisher: u.arbitrary()?,
        initialize_timeout: if u.ratio(1u8, 2u8)? {
            None
        } else {
            Some(Duration::from_secs(u.int_in_range(1..=60)?))
        },
        delivery_timeout: Duration::from_millis(u.int_in_range(100..=30_000)?),
        limits: Limits {
            max_connections: u.int_in_range(1..=6)?,
            max_message_bytes: 4096,
            max_batch_len: 4,
            max_subscriptions_per_conn: 3,
            max_topic_bytes: 64,
            max_pending_per_subscriber: u.int_in_range(1..=4)?,
            max_pending_per_publisher: u.int_in_range(1..=4)?,
            // Fixed, so committed seeds keep their meaning: pauses happen, and the generated
            // payloads (`{"__seq":..,"x":<depth 2>}`) are sometimes too deep.
            max_backlog_per_publisher: 2,
            max_payload_depth: 2,
        },
        ..BusConfig::default()
    })
}

/// One delivery between its `Published` and `Completed` events.
struct Live {
    subscribers: usize,
    hops: usize,
    stopped: bool,
}

struct BusHarness {
    clock: FuzzClock,
    config: BusConfig,
    next_conn: u64,
    /// Connections open from the bus's point of view (plus, during its connect, one the
    /// bus refuses).
    open: BTreeSet<ConnId>,
    /// Connections disconnected.
    ended: BTreeSet<ConnId>,
    /// Connections the bus ever accepted.
    accepted: usize,
    /// Counter for request ids.
    next_id: u64,
    /// Counter for the `__seq` member of published payloads.
    next_seq: u64,
    /// `__seq` → its publisher (`None`: the application).
    seq_owner: BTreeMap<u64, Option<ConnId>>,
    /// (publisher, subscriber) → the last `__seq` the subscriber received from it.
    last_seq: BTreeMap<(Option<ConnId>, ConnId), u64>,
    /// Requests the harness sent with a string id, awaiting their answer: (conn, id) → method.
    expected: BTreeMap<(ConnId, String), &'static str>,
    /// The ids of the latest requests the bus sent to each connection.
    bus_requests: BTreeMap<ConnId, Vec<String>>,
    live: BTreeMap<DeliveryId, Live>,
    published: u64,
    completed: u64,
    hops_seen: u64,
    /// Connections the bus has paused (flow control).
    paused: BTreeSet<ConnId>,
    /// Pause requests seen.
    pauses: u64,
    /// Per drop reason: drops reported so far (the sum of `count`s) and the last `total`.
    drops_reported: BTreeMap<DropReason, (u64, u64)>,
}

impl BusHarness {
    fn step(&mut self, b: &mut Bus, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
        match u.int_in_range(0..=15)? {
            0 | 1 => self.connect(b),
            2..=7 => {
                let conn = self.conn(u)?;
                let body = self.body(u, conn)?;
                self.feed(b, conn, &body, u)?;
            }
            8 => {
                let conn = self.conn(u)?;
                let dead = !self.open.contains(&conn);
                self.disconnect(b, conn);
                let n = self.drain(b);
                assert!(
                    !dead || n == 0,
                    "disconnect of {conn:?} (not open) gave {n} outputs"
                );
            }
            9..=11 => {
                if move_clock(&mut self.clock, u, b.poll_timeout())? {
                    checked_timeout(self, b);
                }
            }
            12 => {
                let topic = pick_or_any(u, &TOPICS)?;
                let seq = self.seq(None);
                let payload = json!({ "__seq": seq, "x": json_value(u, 2)? });
                let t = self.clock.t();
                let before = self.published;
                match b.publish(&topic, &payload, t) {
                    Ok(_) => {
                        self.drain(b);
                        assert_eq!(self.published, before + 1, "publish gave no Published");
                    }
                    Err(_) => assert_eq!(self.drain(b), 0, "a refused publish has outputs"),
                }
            }
            13 => {
                let conn = self.conn(u)?;
                let r = b.close(conn, agentwire_core::CloseCode::NORMAL, "fuzz");
                assert_eq!(r.is_ok(), self.open.contains(&conn), "close of {conn:?}");
                self.drain(b);
            }
            14 => {
                // A quick start: initialize and subscribe on a new connection.
                self.connect(b);
                let conn = ConnId::new(self.next_conn - 1);
                let init = self.call(u, conn, method::INITIALIZE, json!({"clientId": "a"}))?;
                let pattern = pick_or_any(u, &PATTERNS)?;
                let sub = self.call(u, conn, method::SUBSCRIBE, json!({ "topic": pattern }))?;
                let body = if u.arbitrary()? {
                    Value::Array(vec![init, sub]).to_string()
                } else {
                    self.feed(b, conn, init.to_string().as_bytes(), u)?;
                    sub.to_string()
                };
                self.feed(b, conn, body.as_bytes(), u)?;
            }
            _ => {
                // A subscriber answers every request the bus sent it.
                let conn = self.conn(u)?;
                let ids = self.bus_requests.remove(&conn).unwrap_or_default();
                let mut replies = Vec::new();
                for id in ids {
                    let stop = u.ratio(1u8, 4u8)?;
                    replies.push(json!({
                        "jsonrpc": "2.0",
                        "result": {"success": true, "stopPropagation": stop},
                        "id": id,
                    }));
                }
                if replies.is_empty() {
                    return Ok(());
                }
                let body = if replies.len() > 1 && u.arbitrary()? {
                    Value::Array(replies).to_string()
                } else {
                    let last = replies.pop().map(|v| v.to_string()).unwrap_or_default();
                    for r in replies {
                        self.feed(b, conn, r.to_string().as_bytes(), u)?;
                    }
                    last
                };
                self.feed(b, conn, body.as_bytes(), u)?;
            }
        }
        Ok(())
    }

    /// A connection: usually one ever opened, sometimes one that never was.
    fn conn(&self, u: &mut Unstructured<'_>) -> arbitrary::Result<ConnId> {
        if self.next_conn == 1 || u.ratio(1u8, 16u8)? {
            return Ok(ConnId::new(1_000_000 + u.int_in_range(0..=3)?));
        }
        Ok(ConnId::new(u.int_in_range(1..=self.next_conn - 1)?))
    }

    fn connect(&mut self, b: &mut Bus) {
        let conn = ConnId::new(self.next_conn);
        self.next_conn += 1;
        let before = b.connection_count();
        self.open.insert(conn);
        b.handle_connect(conn, &PeerInfo::new(None), self.clock.t());
        let accepted = b.connection_count() == before + 1;
        if accepted {
            self.accepted += 1;
        }
        self.drain(b);
        assert_eq!(
            self.open.contains(&conn),
            accepted,
            "a refused connection must be closed at once"
        );
    }

    fn disconnect(&mut self, b: &mut Bus, conn: ConnId) {
        if self.open.remove(&conn) {
            self.ended.insert(conn);
        }
        self.bus_requests.remove(&conn);
        b.handle_disconnect(conn, self.clock.t());
    }

    fn feed(
        &mut self,
        b: &mut Bus,
        conn: ConnId,
        body: &[u8],
        u: &mut Unstructured<'_>,
    ) -> arbitrary::Result<()> {
        let dead = !self.open.contains(&conn);
        let frame = frame_of(u, body)?;
        b.handle_frame(conn, frame, self.clock.t());
        let n = self.drain(b);
        assert!(
            !dead || n == 0,
            "frame on {conn:?} (not open) gave {n} outputs"
        );
        Ok(())
    }

    fn seq(&mut self, publisher: Option<ConnId>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.seq_owner.insert(seq, publisher);
        seq
    }

    /// A request id: usually a unique string, recorded so that the result's shape can be
    /// checked (not for a message about to be mutated), sometimes a number, null, an
    /// invalid id, or none (a notification).
    fn id(
        &mut self,
        u: &mut Unstructured<'_>,
        conn: ConnId,
        m: &'static str,
        mutated: bool,
    ) -> arbitrary::Result<Option<Value>> {
        self.next_id += 1;
        let n = self.next_id;
        Ok(match u.int_in_range(0..=11)? {
            0 => None,
            1 => Some(Value::Null),
            2 => Some(Value::from(n)),
            3 => Some(json!({})),
            _ if mutated => Some(Value::String(format!("m-{n}"))),
            _ => {
                let id = format!("{m}-{n}");
                self.expected.insert((conn, id.clone()), m);
                Some(Value::String(id))
            }
        })
    }

    /// `{"jsonrpc":"2.0","method":m,"params":params,"id":..}`.
    fn call(
        &mut self,
        u: &mut Unstructured<'_>,
        conn: ConnId,
        m: &'static str,
        params: Value,
    ) -> arbitrary::Result<Value> {
        let mut o = Map::new();
        version(u, &mut o)?;
        o.insert("method".into(), Value::from(m));
        o.insert("params".into(), params);
        if let Some(id) = self.id(u, conn, m, false)? {
            o.insert("id".into(), id);
        }
        Ok(Value::Object(o))
    }

    /// One client → bus message; `mutated` messages carry no `__seq` and use `m-` ids.
    fn message(
        &mut self,
        u: &mut Unstructured<'_>,
        conn: ConnId,
        mutated: bool,
    ) -> arbitrary::Result<Value> {
        let mut p = Map::new();
        let m = match u.int_in_range(0..=11)? {
            0 => {
                match u.int_in_range(0..=4)? {
                    0 => {
                        p.insert("clientId".into(), Value::from("agent-1"));
                        p.insert(
                            "clientInfo".into(),
                            json!({"name": "bub", "version": "0.2.0"}),
                        );
                    }
                    1 => {
                        p.insert("clientInfo".into(), Value::Null);
                    }
                    2 => {
                        p.insert("clientInfo".into(), json_value(u, 2)?);
                    }
                    3 => {
                        p.insert("clientId".into(), json_value(u, 1)?);
                    }
                    _ => {}
                }
                method::INITIALIZE
            }
            1 | 2 => {
                let topic = self.topic_value(u, &PATTERNS)?;
                maybe_set(topic, u, &mut p, "topic")?;
                method::SUBSCRIBE
            }
            3 => {
                let topic = self.topic_value(u, &PATTERNS)?;
                maybe_set(topic, u, &mut p, "topic")?;
                method::UNSUBSCRIBE
            }
            4..=6 => {
                let topic = self.topic_value(u, &TOPICS)?;
                maybe_set(topic, u, &mut p, "topic")?;
                let mut payload = Map::new();
                if !mutated {
                    payload.insert("__seq".into(), Value::from(self.seq(Some(conn))));
                }
                payload.insert("x".into(), json_value(u, 2)?);
                maybe_set(Value::Object(payload), u, &mut p, "payload")?;
                method::SEND_MESSAGE
            }
            7 => method::PING,
            8 | 9 => return self.reply(u, conn),
            10 => {
                if u.arbitrary()? {
                    "rpc.discover"
                } else {
                    "Subscribe"
                }
            }
            _ => {
                // Params of the wrong shape.
                let mut o = Map::new();
                version(u, &mut o)?;
                o.insert(
                    "method".into(),
                    Value::from(pick(
                        u,
                        &[method::SUBSCRIBE, method::SEND_MESSAGE, method::INITIALIZE],
                    )?),
                );
                o.insert(
                    "params".into(),
                    match u.int_in_range(0..=2)? {
                        0 => Value::Array(vec![Value::from("inbound:chat-1")]),
                        1 => Value::from("inbound:chat-1"),
                        _ => Value::Null,
                    },
                );
                o.insert("id".into(), Value::from(format!("m-{}", self.next_id)));
                return Ok(Value::Object(o));
            }
        };
        let mut o = Map::new();
        version(u, &mut o)?;
        o.insert("method".into(), Value::from(m));
        if !p.is_empty() || u.ratio(7u8, 8u8)? {
            o.insert("params".into(), Value::Object(p));
        }
        if let Some(id) = self.id(u, conn, m, mutated)? {
            o.insert("id".into(), id);
        }
        Ok(Value::Object(o))
    }

    /// A topic member value: usually from `items`, sometimes arbitrary, empty, too long, or
    /// not a string.
    fn topic_value(
        &mut self,
        u: &mut Unstructured<'_>,
        items: &[&str],
    ) -> arbitrary::Result<Value> {
        Ok(match u.int_in_range(0..=15)? {
            0 => Value::from(""),
            1 => Value::from("x".repeat(65)),
            2 => json_value(u, 1)?,
            _ => Value::from(pick_or_any(u, items)?),
        })
    }

    /// A subscriber's reply to a bus request: usually to one the bus sent this connection.
    fn reply(&mut self, u: &mut Unstructured<'_>, conn: ConnId) -> arbitrary::Result<Value> {
        let mine = self.bus_requests.get(&conn).filter(|v| !v.is_empty());
        let id = match (mine, u.int_in_range(0..=7)?) {
            (Some(ids), 0..=5) => Value::from(u.choose(ids)?.clone()),
            (_, 6) => {
                // Another connection's request (a wrong responder), if any.
                let all: Vec<&String> = self.bus_requests.values().flatten().collect();
                if all.is_empty() {
                    Value::from("00000000-0000-4000-8000-000000000001")
                } else {
                    Value::from(u.choose(&all)?.as_str())
                }
            }
            _ => json_value(u, 1)?,
        };
        let mut o = Map::new();
        version(u, &mut o)?;
        match u.int_in_range(0..=7)? {
            0..=3 => {
                o.insert(
                    "result".into(),
                    json!({"success": true, "stopPropagation": u.ratio(1u8, 3u8)?}),
                );
            }
            4 => {
                o.insert("result".into(), json!({"success": true}));
            }
            5 => {
                o.insert("result".into(), json_value(u, 2)?);
            }
            6 => {
                o.insert(
                    "error".into(),
                    json!({"code": u.arbitrary::<i32>()?, "message": "nope", "data": json_value(u, 1)?}),
                );
            }
            _ => {
                o.insert("error".into(), json_value(u, 1)?);
            }
        }
        o.insert("id".into(), id);
        Ok(Value::Object(o))
    }

    /// A frame body for `conn`.
    fn body(&mut self, u: &mut Unstructured<'_>, conn: ConnId) -> arbitrary::Result<Vec<u8>> {
        Ok(match u.int_in_range(0..=15)? {
            0 => {
                let n = u.int_in_range(0..=256)?;
                u.bytes(n)?.to_vec()
            }
            1 | 2 => {
                let mut body = self.message(u, conn, true)?.to_string().into_bytes();
                mutate(u, &mut body)?;
                body
            }
            3 | 4 => {
                let n = u.int_in_range(0..=5)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.message(u, conn, false)?);
                }
                Value::Array(items).to_string().into_bytes()
            }
            5 => {
                // Oversize by one byte, or exactly at the limit.
                let len =
                    self.config.limits.max_message_bytes + usize::from(u.arbitrary::<bool>()?);
                let mut body = br#"{"jsonrpc":"2.0","method":"ping","params":{"pad":""#.to_vec();
                body.resize(len.saturating_sub(3), b'x');
                body.extend_from_slice(br#""}}"#);
                body
            }
            6 => json_value(u, 3)?.to_string().into_bytes(),
            _ => self.message(u, conn, false)?.to_string().into_bytes(),
        })
    }

    /// Drains every output, checking each; a `Close` is followed by the driver's
    /// `handle_disconnect`. Returns the number of outputs.
    fn drain(&mut self, b: &mut Bus) -> usize {
        let mut n = 0;
        let mut closed = Vec::new();
        while let Some(out) = b.poll_output() {
            n += 1;
            match out {
                Output::Send { conn, frame } => {
                    assert!(
                        self.open.contains(&conn),
                        "send to {conn:?}, which is not open"
                    );
                    self.sent(conn, &frame);
                }
                Output::Close { conn, .. } => {
                    assert!(
                        self.open.contains(&conn),
                        "close of {conn:?}, which is not open"
                    );
                    closed.push(conn);
                }
                Output::Event(e) => self.event(e),
            }
        }
        while let Some(flow) = b.poll_flow() {
            n += 1;
            let conn = flow.conn();
            assert!(self.open.contains(&conn), "{flow:?}: not open");
            if flow.is_pause() {
                assert!(self.paused.insert(conn), "{conn:?} paused twice");
                self.pauses += 1;
            } else {
                assert!(self.paused.remove(&conn), "{conn:?} resumed, not paused");
            }
        }
        for conn in closed {
            if self.open.contains(&conn) {
                self.disconnect(b, conn);
                n += self.drain(b);
            }
        }
        n
    }

    /// Checks one frame the bus sent to `conn`.
    fn sent(&mut self, conn: ConnId, frame: &FrameBuf) {
        for_each_sent(frame, "bus", |entry| match entry {
            Incoming::Call(call) => {
                assert_eq!(call.method, method::SEND_MESSAGE, "bus request method");
                let id = call.id.as_ref().and_then(Id::as_str).unwrap_or_default();
                assert!(
                    Id128::parse(id).is_some(),
                    "bus request id {:?} is not a UUID",
                    call.id
                );
                let params = call.params.map_or("", RawValue::get);
                let p: SendMessageRef<'_> = serde_json::from_str(params)
                    .unwrap_or_else(|e| panic!("bus request params {params}: {e}"));
                self.hops_seen += 1;
                let ids = self.bus_requests.entry(conn).or_default();
                ids.push(id.to_owned());
                if ids.len() > 32 {
                    ids.remove(0);
                }
                let seq = p
                    .payload
                    .and_then(|v| serde_json::from_str::<Value>(v.get()).ok())
                    .and_then(|v| v.get("__seq").and_then(Value::as_u64));
                if let Some((seq, publisher)) =
                    seq.and_then(|s| self.seq_owner.get(&s).map(|p| (s, *p)))
                {
                    let last = self.last_seq.entry((publisher, conn)).or_insert(0);
                    assert!(
                        seq > *last,
                        "{conn:?} got message {seq} of {publisher:?} after {last}"
                    );
                    *last = seq;
                }
            }
            Incoming::Reply(reply) => {
                let m = reply
                    .id_str()
                    .and_then(|id| self.expected.remove(&(conn, id.into_owned())));
                match reply.outcome {
                    Ok(result) => check_result(m.unwrap_or_default(), result.get()),
                    Err(e) => assert!(
                        e.code.message().is_some(),
                        "bus answered with an unknown code {:?}",
                        e.code
                    ),
                }
            }
        });
    }

    fn event(&mut self, e: BusEvent) {
        match e {
            BusEvent::Published {
                delivery,
                publisher,
                subscribers,
                ..
            } => {
                if let Some(p) = publisher {
                    assert!(
                        self.open.contains(&p),
                        "publish from {p:?}, which is not open"
                    );
                }
                let fresh = self
                    .live
                    .insert(
                        delivery,
                        Live {
                            subscribers,
                            hops: 0,
                            stopped: false,
                        },
                    )
                    .is_none();
                assert!(fresh, "{delivery} published twice");
                self.published += 1;
            }
            BusEvent::Hop {
                delivery, outcome, ..
            } => {
                let l = self
                    .live
                    .get_mut(&delivery)
                    .unwrap_or_else(|| panic!("hop of {delivery}, which is not in flight"));
                assert!(!l.stopped, "hop of {delivery} after it stopped");
                l.hops += 1;
                assert!(
                    l.hops <= l.subscribers,
                    "{delivery}: more hops than subscribers"
                );
                if outcome == HopOutcome::Stopped {
                    l.stopped = true;
                }
            }
            BusEvent::Completed {
                delivery, result, ..
            } => {
                let l = self
                    .live
                    .remove(&delivery)
                    .unwrap_or_else(|| panic!("{delivery} completed twice or never published"));
                let counted: u32 = [
                    result.delivered,
                    result.errors,
                    result.timeouts,
                    result.disconnected,
                    result.overloaded,
                ]
                .iter()
                .map(|c| c.unwrap_or(0))
                .sum();
                assert_eq!(counted as usize, l.hops, "{delivery}: counters vs hops");
                assert_eq!(
                    result.stop_propagation, l.stopped,
                    "{delivery}: stopPropagation"
                );
                assert!(result.success);
                if !l.stopped {
                    assert_eq!(
                        l.hops, l.subscribers,
                        "{delivery}: a subscriber got no turn"
                    );
                }
                self.completed += 1;
            }
            BusEvent::Disconnected { conn, .. } => {
                assert!(
                    self.ended.contains(&conn),
                    "Disconnected for {conn:?}, not ended"
                );
                self.paused.remove(&conn);
            }
            BusEvent::Dropped {
                reason,
                count,
                total,
            } => {
                let (reported, last) = self.drops_reported.entry(reason).or_default();
                assert!(count > 0, "an empty drop report");
                *reported += count;
                assert_eq!(*reported, total, "{reason}: counts reported vs total");
                assert!(total > *last, "{reason}: total went backwards");
                *last = total;
            }
            BusEvent::Connected { conn, .. }
            | BusEvent::Initialized { conn, .. }
            | BusEvent::Subscribed { conn, .. }
            | BusEvent::Unsubscribed { conn, .. }
            | BusEvent::ProtocolViolation { conn, .. } => {
                assert!(
                    self.open.contains(&conn),
                    "event for {conn:?}, which is not open"
                );
            }
        }
    }

    /// Invariants between steps.
    fn check(&self, b: &Bus) {
        assert_eq!(
            b.deliveries_in_flight(),
            self.live.len(),
            "deliveries in flight"
        );
        let s = b.stats();
        assert_eq!(s.publishes, self.published, "stats.publishes");
        assert_eq!(s.params_encoded, s.publishes, "one params blob per publish");
        assert_eq!(s.completed, self.completed, "stats.completed");
        assert_eq!(
            s.hops_sent, self.hops_seen,
            "stats.hops_sent vs requests seen"
        );
        assert_eq!(b.connection_count(), self.open.len(), "connection count");
        assert_eq!(s.pauses, self.pauses, "stats.pauses vs pause requests");
        for (reason, stat) in [
            (
                DropReason::SubscriberOverloaded,
                s.dropped_subscriber_overloaded,
            ),
            (
                DropReason::PublisherOverloaded,
                s.dropped_publisher_overloaded,
            ),
        ] {
            let (reported, _) = self
                .drops_reported
                .get(&reason)
                .copied()
                .unwrap_or_default();
            assert!(reported <= stat, "{reason}: more reported than counted");
        }
        let bound = self.config.limits.max_pending_per_publisher * (self.accepted + 1);
        assert!(
            self.live.len() <= bound,
            "{} deliveries in flight, over {bound}",
            self.live.len()
        );
    }

    /// With nobody answering, every publish completes once the clock passes the delivery
    /// timeouts; then every connection goes away.
    fn finish(&mut self, b: &mut Bus) {
        for _ in 0..100_000 {
            if b.deliveries_in_flight() == 0 {
                break;
            }
            let Some(t) = b.poll_timeout() else { break };
            self.clock.jump_past_seen_to(t);
            checked_timeout(self, b);
        }
        assert_eq!(
            b.deliveries_in_flight(),
            0,
            "publishes still in flight with no timer left"
        );
        self.check(b);
        let open: Vec<ConnId> = self.open.iter().copied().collect();
        for conn in open {
            self.disconnect(b, conn);
            self.drain(b);
        }
        assert_eq!(b.connection_count(), 0);
        self.check(b);
    }
}

impl FuzzDriver for BusHarness {
    type M = Bus;

    fn clock(&mut self) -> &mut FuzzClock {
        &mut self.clock
    }

    fn drain(&mut self, m: &mut Bus) -> usize {
        Self::drain(self, m)
    }
}

/// A success result must have the shape of its method (named by the id's prefix).
fn check_result(m: &str, text: &str) {
    match m {
        method::SEND_MESSAGE => {
            let r: SendMessageResult = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("sendMessage result {text}: {e}"));
            assert!(
                r.success && r.delivered.is_some(),
                "sendMessage result {text}"
            );
        }
        method::PING => {
            let r: PingResult =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("ping result {text}: {e}"));
            assert_eq!(r.timestamp.len(), 20, "timestamp {:?}", r.timestamp);
        }
        method::INITIALIZE => {
            serde_json::from_str::<InitializeResult>(text)
                .unwrap_or_else(|e| panic!("initialize result {text}: {e}"));
        }
        method::SUBSCRIBE => {
            let r: SubscribeResult = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("subscribe result {text}: {e}"));
            assert!(
                r.success && r.subscription_id.is_some(),
                "subscribe result {text}"
            );
        }
        method::UNSUBSCRIBE => {
            let r: UnsubscribeResult = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("unsubscribe result {text}: {e}"));
            assert!(r.success, "unsubscribe result {text}");
        }
        _ => {}
    }
}
