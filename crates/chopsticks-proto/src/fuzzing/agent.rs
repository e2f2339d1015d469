//! The agent target.

use std::time::Duration;

use agentwire_core::fuzzing::{checked_timeout, json_value, pick_or_any, FuzzClock, FuzzDriver};
use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo};
use arbitrary::Unstructured;
use serde_json::Value;

use super::bodies::{controller_body, guild_list, AGENT_IDS, CHANNELS, GUILDS, MAX_OPS};
use crate::config::AgentConfig;
use crate::event::AgentEvent;
use crate::message::{
    Add, AgentMessage, ControllerMessage, Event, RawJson, Released, Resp, SessionKind,
};
use crate::Agent;

/// Drives an [`Agent`] through arbitrary connects (one connection at a time, a new
/// [`ConnId`] each), controller frames (on the current or a stale connection),
/// disconnects, clock moves and commands, draining after every step.
///
/// Checks: no panic; every frame the agent sends decodes as an [`AgentMessage`] and goes
/// to the current connection; every connect is announced with `hello` then `guilds`;
/// input on a stale connection is a no-op; every `req` fed in surfaces as one
/// `Request` event; the timer rules as for [`controller`](super::controller()).
///
/// Each input runs twice: as the thirteen steps it always meant (so committed seeds keep
/// their meaning), then with a fourteenth step, [`Agent::leave`], which must send one
/// `released` per session the agent is in and then close.
pub fn agent(data: &[u8]) {
    run(data, 12);
    run(data, 13);
}

/// One run over `data` with steps `0..=last_step`.
fn run(data: &[u8], last_step: u8) {
    let mut u = Unstructured::new(data);
    let cfg = AgentConfig::new(AGENT_IDS[0]).with_guilds(GUILDS);
    let mut a = Agent::new(cfg);
    let mut h = AgentHarness {
        clock: FuzzClock::new(),
        next_conn: 1,
        current: None,
        sent: Vec::new(),
        closed: None,
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut a, &mut u, last_step).is_err() {
            break;
        }
    }
    h.timeout(&mut a);
}

struct AgentHarness {
    clock: FuzzClock,
    next_conn: u64,
    current: Option<ConnId>,
    /// What the agent sent since the last drain check.
    sent: Vec<AgentMessage>,
    /// The connection the agent closed in the last drain, if any.
    closed: Option<ConnId>,
}

impl AgentHarness {
    fn step(
        &mut self,
        a: &mut Agent,
        u: &mut Unstructured<'_>,
        last_step: u8,
    ) -> arbitrary::Result<()> {
        match u.int_in_range(0..=last_step)? {
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
                    Resp::ok(id, RawJson::from_value(&json_value(u, 3)?))
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
            13 => {
                let sessions = a.sessions().count();
                let r = a.leave("shutdown", self.clock.t());
                assert_eq!(
                    r.is_ok(),
                    self.current.is_some(),
                    "leave succeeds iff connected"
                );
                self.drain(a);
                let Some(conn) = self.current.take().filter(|_| r.is_ok()) else {
                    assert!(
                        self.sent.is_empty() && self.closed.is_none(),
                        "nothing sent"
                    );
                    return Ok(());
                };
                assert_eq!(r, Ok(sessions));
                assert_eq!(a.sessions().count(), 0);
                assert!(
                    self.sent
                        .iter()
                        .all(|m| matches!(m, AgentMessage::Event(Event::Released(_)))),
                    "only released"
                );
                assert_eq!(self.sent.len(), sessions, "one released per session");
                assert_eq!(self.closed, Some(conn), "then the close");
                assert_eq!(a.poll_timeout(), None, "no heartbeat while closing");
                // The driver reports the end of the connection it closed.
                a.handle_disconnect(conn, self.clock.t());
                self.drain(a);
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

    /// `handle_timeout(now)` with the timer contract checked; a heartbeat is due exactly
    /// while connected.
    fn timeout(&mut self, a: &mut Agent) {
        checked_timeout(self, a);
        assert_eq!(
            a.poll_timeout().is_some(),
            self.current.is_some(),
            "a heartbeat is due iff connected"
        );
    }

    /// Drains every output into `sent` (clearing it first); returns (outputs, requests).
    fn drain(&mut self, a: &mut Agent) -> (usize, usize) {
        self.sent.clear();
        self.closed = None;
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
                    self.closed = Some(conn);
                }
                Output::Event(AgentEvent::Request(_)) => requests += 1,
                Output::Event(_) => {}
            }
        }
        (n, requests)
    }
}

impl FuzzDriver for AgentHarness {
    type M = Agent;

    fn clock(&mut self) -> &mut FuzzClock {
        &mut self.clock
    }

    fn drain(&mut self, a: &mut Agent) -> usize {
        Self::drain(self, a).0
    }
}
