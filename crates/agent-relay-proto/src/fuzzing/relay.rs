//! The [`Relay`] machine's fuzz body.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use agentwire_core::fuzzing::{checked_wall_clock, WallJumps};
use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use arbitrary::Unstructured;

use crate::codec::{Route, VersionRule};
use crate::config::{Limits, RateLimit, RelayConfig, ENDPOINT_PATH};
use crate::event::RelayEvent;
use crate::relay::Relay;

/// Operations of one [`relay`] run, at most.
const MAX_OPS: usize = 256;

/// The relay's own message types: every other frame it sends is a peer's, forwarded.
const RELAY_TYPES: [&str; 4] = ["relay.hello", "relay.joined", "relay.presence", "error"];
/// Session ids the templates use (one over the session limit, one blank = `default`).
const SESSIONS: [&str; 4] = ["default", "s-1", "s-2", "  "];
/// Every type a template may send: agent requests, host messages, and some no role sends.
const TYPES: [&str; 15] = [
    "session.start",
    "snapshot.get",
    "tool.call",
    "agent.message",
    "session.end",
    "session.started",
    "snapshot.state",
    "tool.result",
    "state.updated",
    "user.message",
    "session.ended",
    "error",
    "relay.hello",
    "relay.joined",
    "nonsense",
];

struct Harness {
    now: Instant,
    /// Wall-clock jumps at every few timeout steps.
    wall: WallJumps,
    next_conn: u64,
    /// Connections reported to the relay and not yet disconnected.
    open: BTreeSet<ConnId>,
    /// Connections the relay closed (the driver reports their end at the next step).
    closing: BTreeSet<ConnId>,
    /// Every frame text fed in: what the relay forwards must be one of them, byte for byte.
    inputs: BTreeSet<String>,
    /// `id`s of the requests each host received, for replies.
    host_got: BTreeMap<ConnId, Vec<String>>,
    config: RelayConfig,
}

/// Drives a [`Relay`] (small limits; hello, presence, rate limit and timeouts from the
/// input) with an arbitrary sequence of connects (on the endpoint or another path, over the
/// connection limit too), frames (raw bytes, or templates: joins in either role to a few
/// sessions, every message type with and without ids, host replies to the ids it received,
/// oversize and version-less messages), disconnects, clock moves (forward and backwards),
/// `handle_timeout` and [`Relay::close`].
///
/// Checks: output only to open connections; input on closed or unknown connections is a
/// no-op; every frame sent is an envelope that decodes; every frame not of the relay's own
/// types is byte for byte a frame that was fed in (forwarded, never rewritten), but for a
/// request without `id` (given the relay's) and the answer to one (its `replyTo` taken out),
/// whose payloads are still the ones fed in; every
/// log record's payload is a JSON object and its whole line reads back with serde_json,
/// within its length bound; the limits (connections, sessions, agents per
/// session, pending requests per agent) hold; and the timer contract (after
/// `handle_timeout(now)`, `poll_timeout()` is `None` or later, and a second call is a no-op).
pub fn relay(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(config) = relay_config(&mut u) else {
        return;
    };
    #[allow(clippy::disallowed_methods)] // the one base time of a run
    let start = Instant::now();
    let mut r = Relay::new(
        config.clone(),
        SequentialIds::new(1),
        start,
        1_770_978_137_123,
    );
    let mut h = Harness {
        now: start,
        wall: WallJumps::default(),
        next_conn: 1,
        open: BTreeSet::new(),
        closing: BTreeSet::new(),
        inputs: BTreeSet::new(),
        host_got: BTreeMap::new(),
        config,
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut r, &mut u).is_err() {
            break;
        }
        h.check(&r);
    }
}

fn relay_config(u: &mut Unstructured<'_>) -> arbitrary::Result<RelayConfig> {
    // Fields are read from the input in this order (committed seeds depend on it).
    let limits = Limits {
        max_connections: u.int_in_range(1..=6)?,
        max_sessions: 2,
        max_agents_per_session: 2,
        max_message_bytes: 2048,
        max_pending_per_agent: 3,
        max_id_bytes: 16,
        max_session_id_bytes: 16,
        max_name_bytes: 8,
        // Fixed (not read from the input, so the committed seeds keep their meaning), small
        // enough for templates and raw frames to reach both.
        max_json_depth: 6,
        max_log_bytes_per_session: Some(8 << 10),
        rate: if u.arbitrary()? {
            Some(RateLimit {
                per_second: u.int_in_range(1..=20)?,
                burst: u.int_in_range(1..=20)?,
            })
        } else {
            None
        },
    };
    let secs = |u: &mut Unstructured<'_>| -> arbitrary::Result<Option<Duration>> {
        Ok(if u.arbitrary()? {
            Some(Duration::from_secs(u.int_in_range(1..=60)?))
        } else {
            None
        })
    };
    let join_timeout = secs(u)?;
    let pending_timeout = secs(u)?;
    Ok(RelayConfig::default()
        .with_hello(u.arbitrary()?)
        .with_presence(u.arbitrary()?)
        .with_missing_version_allowed(u.arbitrary()?)
        .with_join_timeout(join_timeout)
        .with_pending_timeout(pending_timeout)
        .with_limits(limits))
}

impl Harness {
    fn step(&mut self, r: &mut Relay, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
        // The driver reports the end of every connection the relay closed.
        for conn in std::mem::take(&mut self.closing) {
            self.open.remove(&conn);
            r.handle_disconnect(conn, self.now);
            self.drain(r);
        }
        match u.int_in_range(0..=9u8)? {
            0 => {
                let conn = ConnId::new(self.next_conn);
                self.next_conn += 1;
                let path = if u.ratio(1u8, 8u8)? {
                    "/"
                } else {
                    ENDPOINT_PATH
                };
                self.open.insert(conn);
                r.handle_connect(conn, &PeerInfo::new(None).with_path(path), self.now);
            }
            1..=5 => {
                let conn = self.pick(u)?;
                let text = self.template(conn, u)?;
                if u.ratio(1u8, 16u8)? {
                    r.handle_frame(conn, Frame::Binary(text.as_bytes()), self.now);
                } else {
                    r.handle_frame(conn, Frame::Text(&text), self.now);
                }
                self.no_op_unless_open(r, conn);
                self.remember(text);
            }
            6 => {
                let conn = self.pick(u)?;
                let len = u.int_in_range(0..=64usize)?;
                let bytes = u.bytes(len)?.to_vec();
                r.handle_frame(conn, Frame::Binary(&bytes), self.now);
                self.no_op_unless_open(r, conn);
                if let Ok(t) = String::from_utf8(bytes) {
                    self.remember(t);
                }
            }
            7 => {
                let conn = self.pick(u)?;
                let was_open = self.open.remove(&conn);
                r.handle_disconnect(conn, self.now);
                if !was_open {
                    assert!(
                        r.poll_output().is_none(),
                        "disconnect of an unknown {conn:?}"
                    );
                }
            }
            8 => {
                let d = Duration::from_millis(u.int_in_range(0..=70_000u64)?);
                if u.ratio(1u8, 8u8)? {
                    // Time going backwards is clamped by the relay.
                    self.now = self.now.checked_sub(d).unwrap_or(self.now);
                } else {
                    self.now += d;
                }
                self.timeout(r);
            }
            _ => {
                let conn = self.pick(u)?;
                let closed = r.close(conn, CloseCode::NORMAL, "fuzz", self.now);
                assert_eq!(
                    closed.is_ok(),
                    self.open.contains(&conn),
                    "close succeeds exactly on open connections"
                );
            }
        }
        self.drain(r);
        Ok(())
    }

    /// Input on a connection that is not open changes nothing.
    fn no_op_unless_open(&self, r: &mut Relay, conn: ConnId) {
        if !self.open.contains(&conn) {
            assert!(
                r.poll_output().is_none(),
                "input on a closed {conn:?} made output"
            );
        }
    }

    fn remember(&mut self, text: String) {
        if self.inputs.len() < 4 * MAX_OPS {
            self.inputs.insert(text);
        }
    }

    /// An open connection most of the time; sometimes a closed or never-seen one.
    fn pick(&self, u: &mut Unstructured<'_>) -> arbitrary::Result<ConnId> {
        let open: Vec<ConnId> = self.open.iter().copied().collect();
        if open.is_empty() || u.ratio(1u8, 10u8)? {
            return Ok(ConnId::new(u.int_in_range(0..=self.next_conn + 1)?));
        }
        Ok(*u.choose(&open)?)
    }

    fn template(&self, conn: ConnId, u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
        let session = *u.choose(&SESSIONS)?;
        Ok(match u.int_in_range(0..=5u8)? {
            0 => {
                let role = *u.choose(&["host", "agent", "admin"])?;
                format!(
                    r#"{{"v":"mvp-0.2","type":"relay.join","id":"j{}","payload":{{"role":"{role}","sessionId":"{session}","agentName":"agent-with-a-long-name"}}}}"#,
                    u.int_in_range(0..=3u8)?
                )
            }
            1 | 2 => {
                let t = *u.choose(&TYPES)?;
                let id = match u.int_in_range(0..=3u8)? {
                    0 => String::new(),
                    1 => r#","id":"an-id-longer-than-sixteen-bytes""#.to_owned(),
                    n => format!(r#","id":"req-{}""#, n + u.int_in_range(0..=2u8)?),
                };
                let v = if u.ratio(1u8, 10u8)? {
                    ""
                } else {
                    r#""v":"mvp-0.2","#
                };
                format!(
                    r#"{{{v}"type":"{t}"{id},"payload":{{"x":{}}}}}"#,
                    u.int_in_range(0..=9u8)?
                )
            }
            3 => {
                // A host reply to a request it received (or to a made-up id).
                let got = self.host_got.get(&conn).cloned().unwrap_or_default();
                let reply_to = match got.last() {
                    Some(id) if u.arbitrary()? => id.clone(),
                    _ => "req-9".to_owned(),
                };
                let t = *u.choose(&["tool.result", "snapshot.state", "error", "session.ended"])?;
                format!(
                    r#"{{"v":"mvp-0.2","type":"{t}","replyTo":"{reply_to}","payload":{{"ok":true}}}}"#
                )
            }
            4 => {
                let t = *u.choose(&["state.updated", "user.message"])?;
                format!(r#"{{"v":"mvp-0.2","type":"{t}","payload":{{"text":"hi"}}}}"#)
            }
            _ => {
                // Oversize, by a little or a lot.
                let n = self.config.limits.max_message_bytes + u.int_in_range(0..=64usize)?;
                format!(
                    r#"{{"v":"mvp-0.2","type":"agent.message","id":"big","payload":{{"text":"{}"}}}}"#,
                    "x".repeat(n)
                )
            }
        })
    }

    fn timeout(&mut self, r: &mut Relay) {
        if let Some(unix_ms) = self.wall.tick() {
            checked_wall_clock(r, self.now, unix_ms);
            self.drain(r);
        }
        r.handle_timeout(self.now);
        self.drain(r);
        if let Some(t) = r.poll_timeout() {
            assert!(
                t > self.now,
                "poll_timeout after handle_timeout must be later"
            );
        }
        r.handle_timeout(self.now);
        assert!(
            r.poll_output().is_none(),
            "a second handle_timeout is a no-op"
        );
    }

    fn drain(&mut self, r: &mut Relay) {
        while let Some(out) = r.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    assert!(self.open.contains(&conn), "send to a closed {conn:?}");
                    let text = frame.as_text().expect("the relay sends text");
                    // The relay's own frames always carry `v`; a forwarded one is the
                    // peer's bytes, without `v` when the config allows that.
                    let rule = if self.config.allow_missing_version {
                        VersionRule::MayBeMissing
                    } else {
                        VersionRule::Required
                    };
                    let route = Route::parse(text, rule).unwrap_or_else(|e| {
                        panic!("relay sent an undecodable frame ({e}): {text}")
                    });
                    if !self.inputs.contains(text) {
                        assert!(
                            Route::parse(text, VersionRule::Required).is_ok(),
                            "the relay's own frame lacks v: {text}"
                        );
                    }
                    if !RELAY_TYPES.contains(&&*route.msg_type)
                        && !self.inputs.contains(text)
                        && self.inputs.len() < 4 * MAX_OPS
                    {
                        // Re-encoded: a request that came without `id` (now the relay's),
                        // or the answer to one (without `replyTo`); the payload as it came.
                        let minted = route.id.as_deref().is_some_and(|i| i.starts_with("relay-"))
                            && route.reply_to.is_none();
                        let answer = route.id.is_none() && route.reply_to.is_none();
                        let payload = route.payload.get();
                        assert!(
                            (minted || answer) && self.inputs.iter().any(|i| i.contains(payload)),
                            "forwarded frame is not one that came in: {text}"
                        );
                    }
                    if let Some(id) = route.id {
                        let got = self.host_got.entry(conn).or_default();
                        if got.len() < 16 {
                            got.push(id.into_owned());
                        }
                    }
                }
                Output::Close { conn, .. } => {
                    assert!(self.open.contains(&conn), "close of a closed {conn:?}");
                    self.closing.insert(conn);
                }
                Output::Event(RelayEvent::Log(record)) => {
                    let p = record.payload.as_str();
                    assert!(
                        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(p)
                            .is_ok(),
                        "log payload is a JSON object: {p}"
                    );
                    // The whole line reads back (nesting within what serde_json reads).
                    let mut line = Vec::new();
                    record.write_jsonl(u64::MAX, &mut line);
                    assert!(
                        serde_json::from_slice::<serde_json::Value>(&line).is_ok(),
                        "log line reads back: {p}"
                    );
                    assert!(
                        (line.len() as u64) < record.line_len_bound(),
                        "the line length bound holds"
                    );
                }
                Output::Event(_) => {}
            }
        }
    }

    fn check(&self, r: &Relay) {
        let l = &self.config.limits;
        assert!(r.connection_count() <= l.max_connections, "connections");
        assert!(r.session_count() <= l.max_sessions, "sessions");
        for s in r.sessions() {
            assert!(
                r.agents_of(s.as_str()).len() <= l.max_agents_per_session,
                "agents"
            );
        }
        for conn in &self.open {
            assert!(
                r.pending_requests(*conn) <= l.max_pending_per_agent,
                "pending"
            );
        }
    }
}
