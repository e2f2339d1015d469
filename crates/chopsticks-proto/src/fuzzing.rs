//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`).
//!
//! Each `fuzz/fuzz_targets/*.rs` only calls one of these functions, so the bodies build and
//! run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed through them.
//! Every function panics on a broken invariant; that is how the fuzzer finds bugs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Frame, Id128, Machine, Output, PeerInfo, SequentialIds};
use arbitrary::Unstructured;
use serde_json::{Map, Number, Value};

use crate::config::{AgentConfig, ControllerConfig};
use crate::event::{AgentEvent, ControllerEvent};
use crate::message::{
    Add, AgentMessage, ControllerMessage, RawJson, Released, Resp, SessionKind, PROTOCOL_VERSION,
};
use crate::ops::session_kind_of;
use crate::{Agent, Controller, SessionKey};

/// A frame limit well above anything a fuzzer produces, so that parsing always runs.
const FUZZ_MAX: usize = 1 << 20;

/// Decodes `data` as an agent → controller message (as a binary frame and, when it is
/// UTF-8, as a text frame); whatever decodes must survive an encode/decode round trip.
pub fn decode_agent(data: &[u8]) {
    let binary = AgentMessage::decode(Frame::Binary(data), FUZZ_MAX);
    if let Ok(text) = std::str::from_utf8(data) {
        let from_text = AgentMessage::decode(Frame::Text(text), FUZZ_MAX);
        assert_eq!(
            binary.as_ref().ok(),
            from_text.as_ref().ok(),
            "text and binary frames decode alike"
        );
    }
    if let Ok(m) = binary {
        let mut out = Vec::new();
        m.encode(&mut out);
        match AgentMessage::decode(Frame::Binary(&out), usize::MAX) {
            Ok(again) => assert_eq!(again, m, "round trip of {}", String::from_utf8_lossy(&out)),
            Err(e) => panic!("re-decode failed: {e}: {}", String::from_utf8_lossy(&out)),
        }
    }
}

/// Decodes `data` as a controller → agent message (as a binary frame and, when it is
/// UTF-8, as a text frame); whatever decodes must survive an encode/decode round trip.
pub fn decode_controller(data: &[u8]) {
    let binary = ControllerMessage::decode(Frame::Binary(data), FUZZ_MAX);
    if let Ok(text) = std::str::from_utf8(data) {
        let from_text = ControllerMessage::decode(Frame::Text(text), FUZZ_MAX);
        assert_eq!(
            binary.as_ref().ok(),
            from_text.as_ref().ok(),
            "text and binary frames decode alike"
        );
    }
    if let Ok(m) = binary {
        let mut out = Vec::new();
        m.encode(&mut out);
        match ControllerMessage::decode(Frame::Binary(&out), usize::MAX) {
            Ok(again) => assert_eq!(again, m, "round trip of {}", String::from_utf8_lossy(&out)),
            Err(e) => panic!("re-decode failed: {e}: {}", String::from_utf8_lossy(&out)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Role machines
// ---------------------------------------------------------------------------------------

/// Operations on a machine are read from the input until it runs out, at most this many.
const MAX_OPS: usize = 512;

/// A few agent ids, guilds and channels, so that arbitrary operations meet each other.
const AGENT_IDS: [&str; 3] = ["agent-a", "agent-b", "agent-c"];
const GUILDS: [&str; 3] = ["g1", "g2", "g3"];
const CHANNELS: [&str; 2] = ["v1", "v2"];
const OPS: [&str; 9] = [
    "play",
    "search",
    "pause",
    "queue",
    "status",
    "assistantJoin",
    "assistantStatus",
    "unknownOp",
    "",
];
const VERSION_KEYS: [&str; 4] = [
    "protocolVersion",
    "protocol_version",
    "protocolversion",
    "version",
];
const IPS: [IpAddr; 4] = [
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    IpAddr::V6(Ipv6Addr::LOCALHOST),
];

/// The base time of a run. Only differences from it matter, so reading the real clock
/// once keeps every run deterministic. A day is added so that rewinding (at most
/// `MAX_OPS` × 60 s) never reaches the clock's origin, where `checked_sub` would fail and
/// make a run depend on the machine's uptime.
#[allow(clippy::disallowed_methods)]
fn base_time() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

/// The driver's clock. `now` may go backwards; `seen` is the latest time actually passed
/// to the machine, which is what the machine clamps to (a time the driver moved to but
/// never passed does not count).
struct Clock {
    base: Instant,
    now: Instant,
    seen: Option<Instant>,
}

impl Clock {
    fn new() -> Self {
        let t = base_time();
        Self {
            base: t,
            now: t,
            seen: None,
        }
    }

    /// The time to pass to the machine now.
    fn t(&mut self) -> Instant {
        self.seen = Some(self.seen.map_or(self.now, |s| s.max(self.now)));
        self.now
    }

    /// The latest time passed to the machine (`now` before the first call).
    fn seen(&self) -> Instant {
        self.seen.unwrap_or(self.now)
    }

    /// `t` as an offset from the start, for messages.
    fn since(&self, t: Option<Instant>) -> Option<Duration> {
        t.map(|t| t.saturating_duration_since(self.base))
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    fn rewind(&mut self, d: Duration) {
        self.now = self.now.checked_sub(d).unwrap_or(self.now);
    }

    fn jump_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }
}

fn pick<'a>(u: &mut Unstructured<'_>, items: &[&'a str]) -> arbitrary::Result<&'a str> {
    u.choose(items).copied()
}

/// A string that is usually one of `items` and sometimes arbitrary.
fn pick_or_any(u: &mut Unstructured<'_>, items: &[&str]) -> arbitrary::Result<String> {
    if u.ratio(7u8, 8u8)? {
        Ok(pick(u, items)?.to_owned())
    } else {
        u.arbitrary::<String>()
    }
}

/// A small arbitrary JSON value (depth ≤ 3).
fn json(u: &mut Unstructured<'_>, depth: u8) -> arbitrary::Result<Value> {
    let kind = u.int_in_range(0..=if depth == 0 { 4 } else { 6 })?;
    Ok(match kind {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => Number::from_f64(u.arbitrary::<f64>()?).map_or(Value::Null, Value::Number),
        4 => Value::String(u.arbitrary()?),
        5 => {
            let n = u.int_in_range(0..=3)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(json(u, depth - 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let n = u.int_in_range(0..=3)?;
            let mut obj = Map::new();
            for _ in 0..n {
                let k: String = u.arbitrary()?;
                obj.insert(k, json(u, depth - 1)?);
            }
            Value::Object(obj)
        }
    })
}

/// A subset of the guild pool (plus, rarely, an arbitrary guild).
fn guild_list(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<Value>> {
    let mut out = Vec::new();
    for g in GUILDS {
        if u.arbitrary()? {
            out.push(Value::from(g));
        }
    }
    if u.ratio(1u8, 8u8)? {
        out.push(Value::String(u.arbitrary()?));
    }
    Ok(out)
}

/// Sets `obj[key] = value`, or (rarely) leaves the field out.
fn maybe_set(
    value: Value,
    u: &mut Unstructured<'_>,
    obj: &mut Map<String, Value>,
    key: &str,
) -> arbitrary::Result<()> {
    if u.ratio(15u8, 16u8)? {
        obj.insert(key.to_owned(), value);
    }
    Ok(())
}

/// An agent → controller message body: arbitrary bytes, or a template with arbitrary field
/// values (`resp` ids are taken from `pending` when there are any).
fn agent_body(u: &mut Unstructured<'_>, pending: &[String]) -> arbitrary::Result<Vec<u8>> {
    let mut o = Map::new();
    o.insert("type".into(), Value::from("hello"));
    match u.int_in_range(0..=9)? {
        0 => {
            let n = u.int_in_range(0..=256)?;
            return Ok(u.bytes(n)?.to_vec());
        }
        1 => {
            // hello: good, bad, missing or aliased version; secret; missing agentId.
            let version = match u.int_in_range(0..=3)? {
                0 | 1 => Value::from(PROTOCOL_VERSION),
                2 => Value::from("0.9.0"),
                _ => Value::String(u.arbitrary()?),
            };
            if u.ratio(7u8, 8u8)? {
                o.insert(pick(u, &VERSION_KEYS)?.into(), version);
            }
            maybe_set(pick_or_any(u, &AGENT_IDS)?.into(), u, &mut o, "agentId")?;
            o.insert("botUserId".into(), Value::Null);
            o.insert("tag".into(), Value::from("Bot#1"));
            maybe_set(Value::Bool(u.ratio(3u8, 4u8)?), u, &mut o, "ready")?;
            let guilds = guild_list(u)?;
            maybe_set(Value::Array(guilds), u, &mut o, "guildIds")?;
            o.insert("poolId".into(), Value::from("pool"));
            if u.ratio(1u8, 8u8)? {
                o.insert("runnerSecret".into(), Value::String(u.arbitrary()?));
            }
        }
        2 => {
            o.insert("type".into(), Value::from("guilds"));
            let guilds = guild_list(u)?;
            maybe_set(Value::Array(guilds), u, &mut o, "guildIds")?;
            o.insert("agentId".into(), pick_or_any(u, &AGENT_IDS)?.into());
        }
        3 | 4 => {
            o.insert("type".into(), Value::from("event"));
            let add = u.arbitrary::<bool>()?;
            o.insert(
                "event".into(),
                Value::from(if add { "add" } else { "released" }),
            );
            maybe_set(pick_or_any(u, &AGENT_IDS)?.into(), u, &mut o, "agentId")?;
            maybe_set(pick_or_any(u, &GUILDS)?.into(), u, &mut o, "guildId")?;
            let vc = pick_or_any(u, &CHANNELS)?;
            maybe_set(vc.clone().into(), u, &mut o, "voiceChannelId")?;
            let kind = if u.ratio(3u8, 4u8)? {
                "music"
            } else {
                "assistant"
            };
            maybe_set(kind.into(), u, &mut o, "kind")?;
            if add {
                maybe_set(vc.into(), u, &mut o, "channelId")?;
                let ok = u.ratio(3u8, 4u8)?;
                maybe_set(ok.into(), u, &mut o, "ok")?;
                if !ok {
                    o.insert("error".into(), Value::String(u.arbitrary()?));
                }
                if u.arbitrary()? {
                    o.insert("ownerUserId".into(), Value::String(u.arbitrary()?));
                }
            } else {
                o.insert("reason".into(), Value::from("USER_LEFT"));
            }
        }
        5 | 6 => {
            o.insert("type".into(), Value::from("resp"));
            let id = if !pending.is_empty() && u.ratio(7u8, 8u8)? {
                u.choose(pending)?.clone()
            } else {
                u.arbitrary()?
            };
            maybe_set(id.into(), u, &mut o, "id")?;
            let ok = u.arbitrary::<bool>()?;
            maybe_set(ok.into(), u, &mut o, "ok")?;
            if ok {
                if u.ratio(7u8, 8u8)? {
                    o.insert("data".into(), json(u, 3)?);
                }
            } else {
                o.insert("error".into(), Value::String(u.arbitrary()?));
            }
        }
        7 => {
            // Wrong direction, unknown type, not an object, `type` last.
            match u.int_in_range(0..=3)? {
                0 => {
                    o.insert("type".into(), Value::from("req"));
                    o.insert("id".into(), Value::from("x"));
                }
                1 => {
                    o.insert("type".into(), Value::String(u.arbitrary()?));
                }
                2 => return Ok(b"[1,2,3]".to_vec()),
                _ => {
                    return Ok(
                        br#"{"guildIds":["g1"],"agentId":"agent-a","type":"guilds"}"#.to_vec(),
                    )
                }
            }
        }
        8 => {
            // Oversize (just over the default 64 KiB limit), or exactly at it.
            let len = 64 * 1024 + usize::from(u.arbitrary::<bool>()?);
            let mut body = br#"{"type":"guilds","guildIds":[""#.to_vec();
            body.resize(len.saturating_sub(3), b'x');
            body.extend_from_slice(br#""]}"#);
            return Ok(body);
        }
        _ => {
            let v = json(u, 3)?;
            return Ok(v.to_string().into_bytes());
        }
    }
    Ok(Value::Object(o).to_string().into_bytes())
}

/// Drives a [`Controller`] (default configuration, [`SequentialIds`]) through arbitrary
/// connects, frames, disconnects, clock moves and commands, draining after every step.
///
/// Checks: no panic; every frame the controller sends decodes as a [`ControllerMessage`];
/// nothing is sent to a connection that never opened or has ended; input on such a
/// connection is a no-op; every request id ends exactly once (completed, failed or timed
/// out) and `pending_requests` agrees; after `handle_timeout(now)`, `poll_timeout()` is
/// `None` or later than now, and a second call is a no-op.
pub fn controller(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut c = Controller::new(ControllerConfig::default(), SequentialIds::new(0));
    let mut h = ControllerHarness {
        clock: Clock::new(),
        conns: Vec::new(),
        open: BTreeSet::new(),
        ended: BTreeSet::new(),
        outstanding: BTreeMap::new(),
        req_ids: Vec::new(),
        wire: 0,
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut c, &mut u).is_err() {
            break;
        }
    }
    h.timeout(&mut c);
    assert_eq!(c.pending_requests(), h.outstanding.len(), "pending count");
}

struct ControllerHarness {
    clock: Clock,
    /// Every connection ever opened, in order.
    conns: Vec<ConnId>,
    /// Connections that are open (connected and not yet disconnected).
    open: BTreeSet<ConnId>,
    /// Connections that were disconnected.
    ended: BTreeSet<ConnId>,
    /// Request ids returned by `request` that have not ended yet.
    outstanding: BTreeMap<Id128, String>,
    /// Every `req` the controller sent: its connection and id (for `resp` templates).
    req_ids: Vec<(ConnId, String)>,
    /// Sends and closes drained so far.
    wire: usize,
}

impl ControllerHarness {
    fn step(&mut self, c: &mut Controller, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
        match u.int_in_range(0..=12)? {
            0 | 1 => {
                let conn = ConnId::new(self.conns.len() as u64 + 1);
                let ip = *u.choose(&IPS)?;
                let port = u.arbitrary::<u16>()?;
                let peer = PeerInfo::new(Some(SocketAddr::new(ip, port)));
                self.conns.push(conn);
                self.open.insert(conn);
                c.handle_connect(conn, &peer, self.clock.t());
                self.drain(c);
            }
            2..=5 => {
                // Usually any connection and any known request id; sometimes the connection
                // a request went to, with that request's id, so that answers get through.
                let (conn, ids): (ConnId, Vec<String>) =
                    if !self.req_ids.is_empty() && u.ratio(1u8, 4u8)? {
                        let (conn, id) = u.choose(&self.req_ids)?.clone();
                        (conn, vec![id])
                    } else {
                        let ids = self.req_ids.iter().map(|(_, id)| id.clone()).collect();
                        (self.conn(u)?, ids)
                    };
                let body = agent_body(u, &ids)?;
                let dead = !self.open.contains(&conn);
                let text = u.arbitrary::<bool>()?;
                match std::str::from_utf8(&body) {
                    Ok(s) if text => c.handle_frame(conn, Frame::Text(s), self.clock.t()),
                    _ => c.handle_frame(conn, Frame::Binary(&body), self.clock.t()),
                }
                let n = self.drain(c);
                assert!(!dead || n == 0, "frame on ended {conn:?} gave {n} outputs");
            }
            6 => {
                let conn = self.conn(u)?;
                let dead = !self.open.contains(&conn);
                self.disconnect(c, conn);
                let n = self.drain(c);
                assert!(
                    !dead || n == 0,
                    "disconnect of ended {conn:?} gave {n} outputs"
                );
            }
            7 => {
                let ms = u.int_in_range(0..=60_000u64)?;
                self.clock.advance(Duration::from_millis(ms));
                if u.arbitrary()? {
                    self.timeout(c);
                }
            }
            8 => {
                let ms = u.int_in_range(0..=60_000u64)?;
                self.clock.rewind(Duration::from_millis(ms));
            }
            9 => {
                if let Some(t) = c.poll_timeout() {
                    self.clock.jump_to(t);
                }
                self.timeout(c);
            }
            10 => {
                let agent = pick_or_any(u, &AGENT_IDS)?;
                let op = pick_or_any(u, &OPS)?;
                let data = json(u, 3)?;
                if let Ok(id) = c.request(&agent, &op, data, self.clock.t()) {
                    let fresh = self.outstanding.insert(id, agent).is_none();
                    assert!(fresh, "request id {id} reused");
                }
                self.drain(c);
            }
            11 => {
                let guild = pick_or_any(u, &GUILDS)?;
                let vc = pick_or_any(u, &CHANNELS)?;
                let kind = if u.arbitrary()? {
                    SessionKind::Music
                } else {
                    SessionKind::Assistant
                };
                if let Ok(agent) = c.select_agent_for(kind, &guild, &vc) {
                    let live = c.agent(&agent);
                    assert!(live.is_some(), "selected agent {agent} is not live");
                    let key = SessionKey::new(kind, guild, vc);
                    let bound = c.session(&key).map(|s| s.agent_id.as_str());
                    assert_eq!(bound, Some(agent.as_str()), "selection binds");
                }
                let wire = self.wire;
                self.drain(c);
                assert_eq!(self.wire, wire, "select_agent sends and closes nothing");
            }
            _ => {
                let guild = pick_or_any(u, &GUILDS)?;
                let vc = pick_or_any(u, &CHANNELS)?;
                let op = pick_or_any(u, &OPS)?;
                let data = json(u, 3)?;
                let now = self.clock.t();
                if let Ok((agent, id)) = c.request_for_session(&guild, &vc, &op, data, now) {
                    let key = SessionKey::new(session_kind_of(&op), guild, vc);
                    let bound = c.session(&key).map(|s| s.agent_id.as_str());
                    assert_eq!(bound, Some(agent.as_str()), "sent to the bound agent");
                    let fresh = self.outstanding.insert(id, agent).is_none();
                    assert!(fresh, "request id {id} reused");
                }
                self.drain(c);
            }
        }
        // Every session belongs to a live agent: a dropped agent's sessions are freed.
        for (key, s) in c.sessions() {
            assert!(
                c.agent(&s.agent_id).is_some(),
                "session {key:?} bound to {} which is not live",
                s.agent_id
            );
        }
        Ok(())
    }

    /// A connection: usually one ever opened, sometimes one that never was.
    fn conn(&self, u: &mut Unstructured<'_>) -> arbitrary::Result<ConnId> {
        if self.conns.is_empty() || u.ratio(1u8, 16u8)? {
            return Ok(ConnId::new(1_000_000 + u.int_in_range(0..=3)?));
        }
        u.choose(&self.conns).copied()
    }

    fn disconnect(&mut self, c: &mut Controller, conn: ConnId) {
        if self.open.remove(&conn) {
            self.ended.insert(conn);
        }
        c.handle_disconnect(conn, self.clock.t());
    }

    /// `handle_timeout(now)` with the timer checks.
    fn timeout(&mut self, c: &mut Controller) {
        self.drain(c);
        let before = c.poll_timeout();
        c.handle_timeout(self.clock.t());
        let produced = self.drain(c);
        let after = c.poll_timeout();
        if let Some(d) = before {
            if d > self.clock.seen() {
                assert!(
                    produced == 0 && after == before,
                    "early handle_timeout was not a no-op"
                );
            }
        }
        if let Some(a) = after {
            assert!(
                a > self.clock.seen(),
                "poll_timeout {:?} did not move past now {:?} (next timer {:?}, was {:?})",
                self.clock.since(after),
                self.clock.since(Some(self.clock.seen())),
                c.next_timer().map(|(_, k)| k),
                self.clock.since(before),
            );
        }
        c.handle_timeout(self.clock.t());
        let again = self.drain(c);
        assert_eq!(again, 0, "handle_timeout is not idempotent");
        assert_eq!(c.poll_timeout(), after, "handle_timeout is not idempotent");
    }

    /// Drains every output, checking each; a `Close` is followed by the driver's
    /// `handle_disconnect`, as the contract requires. Returns the number of outputs.
    fn drain(&mut self, c: &mut Controller) -> usize {
        let mut n = 0;
        let mut closed = Vec::new();
        while let Some(out) = c.poll_output() {
            n += 1;
            match out {
                Output::Send { conn, frame } => {
                    self.wire += 1;
                    assert!(
                        self.open.contains(&conn),
                        "send to {conn:?}, which is not open"
                    );
                    match ControllerMessage::decode(frame.as_frame(), usize::MAX) {
                        Ok(ControllerMessage::Req(req)) => {
                            assert!(frame.as_text().is_some(), "req in a binary frame");
                            self.req_ids.push((conn, req.id));
                        }
                        Ok(ControllerMessage::Error(_)) => {}
                        Err(e) => panic!("controller sent an undecodable frame: {e}: {frame:?}"),
                    }
                }
                Output::Close { conn, .. } => {
                    self.wire += 1;
                    assert!(!self.ended.contains(&conn), "close of ended {conn:?}");
                    closed.push(conn);
                }
                Output::Event(e) => self.event(e),
            }
        }
        for conn in closed {
            if self.open.contains(&conn) {
                self.disconnect(c, conn);
                n += self.drain(c);
            }
        }
        n
    }

    fn event(&mut self, e: ControllerEvent) {
        let ended = match e {
            ControllerEvent::RequestCompleted { id, agent_id, .. }
            | ControllerEvent::RequestFailed { id, agent_id, .. }
            | ControllerEvent::RequestTimedOut { id, agent_id, .. } => Some((id, agent_id)),
            _ => None,
        };
        if let Some((id, agent_id)) = ended {
            let to = self.outstanding.remove(&id);
            assert_eq!(
                to.as_deref(),
                Some(agent_id.as_str()),
                "request {id} ended twice, or was never sent, or names the wrong agent"
            );
        }
    }
}

/// A controller → agent message body: arbitrary bytes, or a `req`/`error` template with
/// arbitrary field values, or an agent message (wrong direction).
fn controller_body(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>> {
    let mut o = Map::new();
    match u.int_in_range(0..=5)? {
        0 => {
            let n = u.int_in_range(0..=256)?;
            return Ok(u.bytes(n)?.to_vec());
        }
        1 | 2 => {
            o.insert("type".into(), Value::from("req"));
            maybe_set(Value::String(u.arbitrary()?), u, &mut o, "id")?;
            maybe_set(pick_or_any(u, &OPS)?.into(), u, &mut o, "op")?;
            if u.ratio(7u8, 8u8)? {
                o.insert("data".into(), json(u, 3)?);
            }
            maybe_set(pick_or_any(u, &AGENT_IDS)?.into(), u, &mut o, "agentId")?;
        }
        3 => {
            o.insert("type".into(), Value::from("error"));
            maybe_set(Value::String(u.arbitrary()?), u, &mut o, "error")?;
        }
        4 => return agent_body(u, &[]),
        _ => {
            let v = json(u, 3)?;
            return Ok(v.to_string().into_bytes());
        }
    }
    Ok(Value::Object(o).to_string().into_bytes())
}

/// Drives an [`Agent`] through arbitrary connects (one connection at a time, a new
/// [`ConnId`] each), controller frames (on the current or a stale connection),
/// disconnects, clock moves and commands, draining after every step.
///
/// Checks: no panic; every frame the agent sends decodes as an [`AgentMessage`] and goes
/// to the current connection; every connect is announced with `hello` then `guilds`;
/// input on a stale connection is a no-op; every `req` fed in surfaces as one
/// `Request` event; the timer rules as for [`controller`].
pub fn agent(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let cfg = AgentConfig::new(AGENT_IDS[0]).with_guilds(GUILDS);
    let mut a = Agent::new(cfg);
    let mut h = AgentHarness {
        clock: Clock::new(),
        next_conn: 1,
        current: None,
        sent: Vec::new(),
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut a, &mut u).is_err() {
            break;
        }
    }
    h.timeout(&mut a);
}

struct AgentHarness {
    clock: Clock,
    next_conn: u64,
    current: Option<ConnId>,
    /// What the agent sent since the last drain check.
    sent: Vec<AgentMessage>,
}

impl AgentHarness {
    fn step(&mut self, a: &mut Agent, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
        match u.int_in_range(0..=12)? {
            0 => {
                if let Some(old) = self.current.take() {
                    a.handle_disconnect(old, self.clock.t());
                    self.drain(a);
                }
                let conn = ConnId::new(self.next_conn);
                self.next_conn += 1;
                self.current = Some(conn);
                a.handle_connect(conn, &PeerInfo::new(None), self.clock.t());
                self.drain(a);
                let types: Vec<&str> = self.sent.iter().map(AgentMessage::type_name).collect();
                assert_eq!(
                    types,
                    ["hello", "guilds"],
                    "connect announces hello, guilds"
                );
            }
            1..=4 => {
                let stale = self.current.is_none() || u.ratio(1u8, 8u8)?;
                let conn = match self.current {
                    Some(c) if !stale => c,
                    _ => ConnId::new(u.int_in_range(0..=self.next_conn)?),
                };
                let live = self.current == Some(conn);
                let body = controller_body(u)?;
                let is_req = matches!(
                    ControllerMessage::decode(Frame::Binary(&body), usize::MAX),
                    Ok(ControllerMessage::Req(_))
                ) && body.len() <= a.config().max_frame_bytes;
                match std::str::from_utf8(&body) {
                    Ok(s) if u.arbitrary::<bool>()? => {
                        a.handle_frame(conn, Frame::Text(s), self.clock.t())
                    }
                    _ => a.handle_frame(conn, Frame::Binary(&body), self.clock.t()),
                }
                let (n, requests) = self.drain(a);
                assert!(live || n == 0, "frame on stale {conn:?} gave {n} outputs");
                assert_eq!(requests, usize::from(live && is_req), "one Request per req");
            }
            5 => {
                if let Some(conn) = self.current.take() {
                    a.handle_disconnect(conn, self.clock.t());
                    self.drain(a);
                    a.handle_disconnect(conn, self.clock.t());
                    assert_eq!(self.drain(a).0, 0, "second disconnect is a no-op");
                }
            }
            6 => {
                let ms = u.int_in_range(0..=60_000u64)?;
                self.clock.advance(Duration::from_millis(ms));
                if u.arbitrary()? {
                    self.timeout(a);
                }
            }
            7 => {
                let ms = u.int_in_range(0..=60_000u64)?;
                self.clock.rewind(Duration::from_millis(ms));
            }
            8 => {
                if let Some(t) = a.poll_timeout() {
                    self.clock.jump_to(t);
                }
                self.timeout(a);
            }
            9 => {
                let id: String = u.arbitrary()?;
                let resp = if u.arbitrary()? {
                    Resp::ok(id, RawJson::from_value(&json(u, 3)?))
                } else {
                    Resp::err(id, u.arbitrary::<String>()?)
                };
                let r = a.respond(resp, self.clock.t());
                self.expect_sent(a, r.is_ok(), "resp");
            }
            10 => {
                let vc = pick_or_any(u, &CHANNELS)?;
                let ok = u.arbitrary::<bool>()?;
                let add = Add {
                    agent_id: AGENT_IDS[0].to_owned(),
                    guild_id: pick_or_any(u, &GUILDS)?,
                    voice_channel_id: vc,
                    text_channel_id: None,
                    channel_id: String::new(),
                    kind: SessionKind::Music,
                    owner_user_id: None,
                    ok,
                    error: (!ok).then(|| "Missing permissions".to_owned()),
                    runner_id: None,
                };
                let r = a.send_add(add, self.clock.t());
                self.expect_sent(a, r.is_ok(), "event");
            }
            11 => {
                let rel = Released {
                    agent_id: AGENT_IDS[0].to_owned(),
                    guild_id: pick_or_any(u, &GUILDS)?,
                    voice_channel_id: pick_or_any(u, &CHANNELS)?,
                    reason: "USER_LEFT".to_owned(),
                    kind: SessionKind::Assistant,
                    runner_id: None,
                };
                let r = a.send_released(rel, self.clock.t());
                self.expect_sent(a, r.is_ok(), "event");
            }
            _ => {
                if u.arbitrary()? {
                    let mut guilds = Vec::new();
                    for g in guild_list(u)? {
                        if let Value::String(s) = g {
                            guilds.push(s);
                        }
                    }
                    a.set_guilds(guilds, self.clock.t());
                    self.expect_sent(a, self.current.is_some(), "guilds");
                } else {
                    a.set_ready(u.arbitrary()?, self.clock.t());
                    self.expect_sent(a, self.current.is_some(), "hello");
                }
            }
        }
        Ok(())
    }

    /// Drains and checks that exactly one message of type `ty` went out iff `sent`.
    fn expect_sent(&mut self, a: &mut Agent, sent: bool, ty: &str) {
        assert_eq!(
            sent,
            self.current.is_some(),
            "commands succeed iff connected"
        );
        self.drain(a);
        let types: Vec<&str> = self.sent.iter().map(AgentMessage::type_name).collect();
        let expected: &[&str] = if sent { &[ty] } else { &[] };
        assert_eq!(types, expected, "{ty} command output");
    }

    fn timeout(&mut self, a: &mut Agent) {
        self.drain(a);
        let before = a.poll_timeout();
        a.handle_timeout(self.clock.t());
        let (produced, _) = self.drain(a);
        let after = a.poll_timeout();
        if let Some(d) = before {
            if d > self.clock.seen() {
                assert!(
                    produced == 0 && after == before,
                    "early handle_timeout was not a no-op"
                );
            }
        }
        if let Some(t) = after {
            assert!(t > self.clock.seen(), "poll_timeout did not move past now");
        }
        a.handle_timeout(self.clock.t());
        assert_eq!(self.drain(a).0, 0, "handle_timeout is not idempotent");
        assert_eq!(a.poll_timeout(), after, "handle_timeout is not idempotent");
        assert_eq!(
            after.is_some(),
            self.current.is_some(),
            "a heartbeat is due iff connected"
        );
    }

    /// Drains every output into `sent` (clearing it first); returns (outputs, requests).
    fn drain(&mut self, a: &mut Agent) -> (usize, usize) {
        self.sent.clear();
        let mut n = 0;
        let mut requests = 0;
        while let Some(out) = a.poll_output() {
            n += 1;
            match out {
                Output::Send { conn, frame } => {
                    assert_eq!(Some(conn), self.current, "send to a stale connection");
                    match AgentMessage::decode(frame.as_frame(), usize::MAX) {
                        Ok(m) => self.sent.push(m),
                        Err(e) => panic!("agent sent an undecodable frame: {e}: {frame:?}"),
                    }
                }
                Output::Close { conn, .. } => {
                    assert_eq!(Some(conn), self.current, "close of a stale connection");
                }
                Output::Event(AgentEvent::Request(_)) => requests += 1,
                Output::Event(_) => {}
            }
        }
        (n, requests)
    }
}
