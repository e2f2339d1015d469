//! The controller target.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use agentwire_core::fuzzing::{checked_timeout, json_value, pick_or_any, FuzzClock, FuzzDriver};
use agentwire_core::{ConnId, Frame, Id128, Machine, Output, PeerInfo, SequentialIds};
use arbitrary::Unstructured;

use super::bodies::{agent_body, AGENT_IDS, CHANNELS, GUILDS, IPS, MAX_OPS, OPS};
use crate::config::ControllerConfig;
use crate::event::ControllerEvent;
use crate::message::{ControllerMessage, SessionKind};
use crate::ops::session_kind_of;
use crate::{Controller, SessionKey};

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
        clock: FuzzClock::new(),
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
    checked_timeout(&mut h, &mut c);
    assert_eq!(c.pending_requests(), h.outstanding.len(), "pending count");
}

struct ControllerHarness {
    clock: FuzzClock,
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
                    checked_timeout(self, c);
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
                checked_timeout(self, c);
            }
            10 => {
                let agent = pick_or_any(u, &AGENT_IDS)?;
                let op = pick_or_any(u, &OPS)?;
                let data = json_value(u, 3)?;
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
                let data = json_value(u, 3)?;
                let now = self.clock.t();
                if let Ok((agent, id)) = c.request_for_session(&guild, &vc, &op, data, now) {
                    let key = SessionKey::new(session_kind_of(&op), guild, vc);
                    let bound = c.session(&key).map(|s| s.agent_id.as_str());
                    assert_eq!(bound, Some(agent.as_str()), "sent to the bound agent");
                    let fresh = self.outstanding.insert(id, agent.into_string()).is_none();
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

impl FuzzDriver for ControllerHarness {
    type M = Controller;

    fn clock(&mut self) -> &mut FuzzClock {
        &mut self.clock
    }

    fn drain(&mut self, c: &mut Controller) -> usize {
        Self::drain(self, c)
    }
}
