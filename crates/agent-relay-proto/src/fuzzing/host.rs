//! The [`Host`] machine's fuzz body.

use std::collections::BTreeSet;
use std::time::Duration;

use agentwire_core::fuzzing::{checked_wall_clock, FuzzClock};
use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo};
use arbitrary::Unstructured;
use serde_json::{json, Value};

use super::FUZZ_MAX;
use crate::config::{HostConfig, HostLimits, ENDPOINT_PATH};
use crate::error::ToolError;
use crate::event::{EndTicket, HostEvent};
use crate::host::{ChatRole, Host, ToolContext, ToolOutcome, Tools};
use crate::message::{Envelope, HostMessage, RawJson, ToolSchema};

/// Operations of one [`host`] run, at most.
const MAX_OPS: usize = 256;
/// Agent request types, plus the relay's own and some a host never receives.
const TYPES: [&str; 12] = [
    "session.start",
    "snapshot.get",
    "tool.call",
    "agent.message",
    "session.end",
    "relay.hello",
    "relay.joined",
    "relay.presence",
    "error",
    "state.updated",
    "tool.result",
    "nonsense",
];
/// Tool names a template calls: the stages' tools, and one no stage has.
const TOOLS: [&str; 6] = ["select", "setQuantity", "next", "post", "fail", "missing"];

/// A small two-stage UI: `select` (an enum), `setQuantity` (a bounded integer, no other
/// property), `next`; `post` writes to the chat, `fail` fails; the spec can be unloaded and
/// can carry `backendData`.
#[derive(Debug)]
struct FuzzTools {
    stages: [Vec<ToolSchema>; 2],
    stage: usize,
    loaded: bool,
    backend_data: bool,
    picked: Option<String>,
    quantity: u64,
}

fn schema(name: &str, parameters: Value) -> ToolSchema {
    ToolSchema {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        parameters: RawJson::from_value(&parameters),
    }
}

impl FuzzTools {
    fn new() -> Self {
        let select = schema(
            "select",
            json!({"type":"object","properties":{"itemId":{"type":"string","enum":["m1","m2"]}},
                   "required":["itemId"]}),
        );
        let quantity = schema(
            "setQuantity",
            json!({"type":"object","properties":{"quantity":{"type":"integer","minimum":0,"maximum":9}},
                   "required":["quantity"],"additionalProperties":false}),
        );
        let plain = |n: &str| schema(n, json!({"type":"object"}));
        Self {
            stages: [
                vec![select, plain("next"), plain("post"), plain("fail")],
                vec![quantity, plain("post")],
            ],
            stage: 0,
            loaded: true,
            backend_data: false,
            picked: None,
            quantity: 0,
        }
    }
}

impl Tools for FuzzTools {
    fn tool_schema(&self) -> &[ToolSchema] {
        &self.stages[self.stage]
    }

    fn ui_spec(&self) -> Option<RawJson> {
        let mut spec =
            json!({"stage": self.stage, "picked": self.picked, "quantity": self.quantity});
        if self.backend_data {
            spec["backendData"] = json!({"secret": 1});
        }
        self.loaded.then(|| RawJson::from_value(&spec))
    }

    fn stage(&self) -> Option<&str> {
        Some(["pick", "quantity"][self.stage])
    }

    fn call(
        &mut self,
        name: &str,
        params: &Value,
        ctx: &mut ToolContext<'_>,
    ) -> Result<ToolOutcome, ToolError> {
        assert!(params.is_object(), "a tool only sees object params");
        assert!(!ctx.reason().trim().is_empty(), "a tool only sees a reason");
        match name {
            "select" => {
                let id = params["itemId"].as_str().expect("itemId fits the schema");
                if self.picked.as_deref() == Some(id) {
                    return Ok(ToolOutcome::Unchanged);
                }
                self.picked = Some(id.to_owned());
                Ok(ToolOutcome::Applied)
            }
            "setQuantity" => {
                let q = params["quantity"]
                    .as_u64()
                    .expect("quantity fits the schema");
                assert!(q <= 9, "the schema's maximum holds");
                self.quantity = q;
                Ok(ToolOutcome::Applied)
            }
            "next" => {
                self.stage = 1;
                Ok(ToolOutcome::Applied)
            }
            "post" => {
                ctx.post(ChatRole::System, "posted")?;
                Ok(ToolOutcome::Unchanged)
            }
            "fail" => {
                let _ = ctx.post(ChatRole::Agent, "about to fail");
                Err(ToolError::failed("it failed"))
            }
            other => panic!("the host called {other:?}, which no stage offers"),
        }
    }

    fn reset(&mut self) {
        self.stage = 0;
        self.picked = None;
        self.quantity = 0;
    }
}

struct Harness {
    clock: FuzzClock,
    next_conn: u64,
    /// The connection the driver last reported and has not reported ended.
    current: Option<ConnId>,
    /// Whether the host closed `current` (the driver reports its end next).
    closing: bool,
    /// `id`s of the requests fed in: every `replyTo` the host sends is one of them.
    ids: BTreeSet<String>,
    /// Tickets of session ends the host announced.
    tickets: Vec<EndTicket>,
    limits: HostLimits,
}

/// Drives a [`Host`] (small limits; join and flush deadlines from the input) over a small
/// two-stage UI with an arbitrary sequence of connects, frames (the relay's answers to the
/// join, right or wrong, its presence and errors, every agent request with good and bad
/// payloads, types a host never receives, raw bytes, oversize frames), disconnects, clock
/// moves (forward and backwards), `handle_timeout`, and the host's commands (participant
/// messages, state pushes, session ends, flush confirmations and failures with real and
/// made-up tickets, numbering, wall-clock moves, UI changes), then the participant's actions
/// (every tool name, a few params) from the state it reached.
///
/// Checks: output only to the current connection; input on another connection is a no-op;
/// every frame sent is a `HostMessage` envelope; every `replyTo` is the `id` of a request fed
/// in; `tool.result` is always `ok: true`; no `uiSpec` sent carries `backendData`; the tools
/// only see known tools with params that fit their schema; the chat and the offline queue
/// stay within their limits; session ids read `s-YYYYMMDD-NNN`; and the timer contract
/// (after `handle_timeout(now)`, `poll_timeout()` is `None` or later, and a second call is
/// a no-op).
pub fn host(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(config) = host_config(&mut u) else {
        return;
    };
    let mut clock = FuzzClock::new();
    let mut host = Host::new(
        config.clone(),
        FuzzTools::new(),
        clock.t(),
        1_770_978_137_123,
    );
    let mut h = Harness {
        clock,
        next_conn: 1,
        current: None,
        closing: false,
        ids: BTreeSet::new(),
        tickets: Vec::new(),
        limits: config.limits,
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut host, &mut u).is_err() {
            break;
        }
        h.check(&host);
    }
    // The participant's actions, from whatever state the run left: every tool name with a
    // few params, none of it read from the input (committed seeds keep their meaning).
    for tool in TOOLS {
        for params in [
            json!({}),
            json!({"itemId": "m1"}),
            json!({"itemId": 7}),
            json!({"typeId": "adult", "quantity": 3}),
            json!([]),
        ] {
            let before = host.history().len();
            let done = host.user_action(tool, &params, h.clock.t());
            if done.is_err() {
                assert!(host.history().len() >= before, "a refusal removes nothing");
            }
            h.drain(&mut host);
            h.check(&host);
        }
    }
}

fn host_config(u: &mut Unstructured<'_>) -> arbitrary::Result<HostConfig> {
    let secs = |u: &mut Unstructured<'_>| -> arbitrary::Result<Option<Duration>> {
        Ok(if u.arbitrary()? {
            Some(Duration::from_secs(u.int_in_range(1..=30)?))
        } else {
            None
        })
    };
    let join_timeout = secs(u)?;
    let flush_timeout = secs(u)?;
    let limits = HostLimits {
        max_message_bytes: 2048,
        max_history_entries: u.int_in_range(0..=6)?,
        max_queued_pushes: u.int_in_range(0..=4)?,
    };
    Ok(HostConfig::default()
        .with_join_timeout(join_timeout)
        .with_flush_timeout(flush_timeout)
        .with_limits(limits))
}

impl Harness {
    fn step(
        &mut self,
        host: &mut Host<FuzzTools>,
        u: &mut Unstructured<'_>,
    ) -> arbitrary::Result<()> {
        // The driver reports the end of a connection the host closed.
        if std::mem::take(&mut self.closing) {
            if let Some(conn) = self.current.take() {
                host.handle_disconnect(conn, self.clock.t());
                self.drain(host);
            }
        }
        match u.int_in_range(0..=9u8)? {
            0 => {
                let conn = ConnId::new(self.next_conn);
                self.next_conn += 1;
                self.current = Some(conn);
                let peer = PeerInfo::new(None).with_path(ENDPOINT_PATH);
                host.handle_connect(conn, &peer, self.clock.t());
            }
            1..=5 => {
                let conn = self.pick(u)?;
                let text = self.template(host, u)?;
                if u.ratio(1u8, 16u8)? {
                    host.handle_frame(conn, Frame::Binary(text.as_bytes()), self.clock.t());
                } else {
                    host.handle_frame(conn, Frame::Text(&text), self.clock.t());
                }
                self.no_op_unless_current(host, conn);
            }
            6 => {
                let conn = self.pick(u)?;
                let len = u.int_in_range(0..=64usize)?;
                let bytes = u.bytes(len)?;
                host.handle_frame(conn, Frame::Binary(bytes), self.clock.t());
                self.no_op_unless_current(host, conn);
            }
            7 => {
                let conn = self.pick(u)?;
                host.handle_disconnect(conn, self.clock.t());
                if self.current == Some(conn) {
                    self.current = None;
                } else {
                    assert!(
                        host.poll_output().is_none(),
                        "disconnect of another {conn:?}"
                    );
                }
            }
            8 => {
                let d = Duration::from_millis(u.int_in_range(0..=40_000u64)?);
                if u.ratio(1u8, 8u8)? {
                    // Time going backwards is clamped by the host.
                    self.clock.rewind(d);
                } else {
                    self.clock.advance(d);
                }
                self.timeout(host);
            }
            _ => self.command(host, u)?,
        }
        self.drain(host);
        Ok(())
    }

    /// One of the host's commands.
    fn command(
        &mut self,
        host: &mut Host<FuzzTools>,
        u: &mut Unstructured<'_>,
    ) -> arbitrary::Result<()> {
        let now = self.clock.t();
        match u.int_in_range(0..=8u8)? {
            0 => {
                let _ = host.user_message("participant text", now);
            }
            1 => host.publish_state("user", now),
            2 => {
                let _ = host.end_session(Some("closed"), now);
            }
            3 | 4 => {
                let ticket = self.ticket(u)?;
                let done = host
                    .confirm_flush(ticket, "logs/study/x.jsonl", now)
                    .is_ok();
                if done {
                    assert_eq!(host.session_id(), None, "a confirmed end ends the session");
                    assert!(host.history().is_empty(), "a confirmed end clears the chat");
                }
            }
            5 => {
                let ticket = self.ticket(u)?;
                let _ = host.fail_flush(ticket, "disk full", now);
            }
            6 => {
                let id = *u.choose(&["s-20260213-007", "s-20260212-900", "s-2026-1", "x"])?;
                let _ = host.resume_numbering(id);
            }
            7 => {
                let day = u.int_in_range(0..=3u64)? * 86_400_000;
                host.set_wall_clock(now, 1_770_978_137_123 + day);
            }
            _ => {
                let tools = host.tools_mut();
                match u.int_in_range(0..=2u8)? {
                    0 => tools.loaded = !tools.loaded,
                    1 => tools.backend_data = !tools.backend_data,
                    _ => tools.stage = 1 - tools.stage,
                }
                host.publish_state("user", now);
            }
        }
        Ok(())
    }

    /// A ticket the host announced most of the time, sometimes a made-up one.
    fn ticket(&self, u: &mut Unstructured<'_>) -> arbitrary::Result<EndTicket> {
        match self.tickets.last() {
            Some(t) if !u.ratio(1u8, 6u8)? => Ok(*t),
            _ => Ok(EndTicket(u.int_in_range(0..=3u64)?)),
        }
    }

    /// Input on a connection other than the current one changes nothing.
    fn no_op_unless_current(&self, host: &mut Host<FuzzTools>, conn: ConnId) {
        if self.current != Some(conn) {
            assert!(
                host.poll_output().is_none(),
                "input on another {conn:?} made output"
            );
        }
    }

    /// The current connection most of the time; sometimes another one.
    fn pick(&self, u: &mut Unstructured<'_>) -> arbitrary::Result<ConnId> {
        match self.current {
            Some(c) if !u.ratio(1u8, 10u8)? => Ok(c),
            _ => Ok(ConnId::new(u.int_in_range(0..=self.next_conn)?)),
        }
    }

    fn template(
        &mut self,
        host: &Host<FuzzTools>,
        u: &mut Unstructured<'_>,
    ) -> arbitrary::Result<String> {
        let joins = self.next_conn.saturating_sub(1);
        Ok(match u.int_in_range(0..=6u8)? {
            0 => {
                // The relay's answer to a join: this connection's, an earlier one's, or none.
                let n = u.int_in_range(0..=joins + 1)?;
                let t = *u.choose(&["relay.joined", "error"])?;
                let payload = if t == "error" {
                    r#"{"code":"LIMIT_EXCEEDED","message":"no"}"#
                } else {
                    r#"{"role":"host","sessionId":"default"}"#
                };
                format!(
                    r#"{{"v":"mvp-0.2","type":"{t}","replyTo":"host-join-{n}","payload":{payload}}}"#
                )
            }
            1 => {
                let payload = *u.choose(&[
                    r#"{"sessionId":"default","agentCount":1,"agents":[{"id":"a","name":"n"}]}"#,
                    r#"{"sessionId":7}"#,
                    r#"{"code":"SESSION_NOT_ACTIVE","message":"Host connection replaced by a newer host."}"#,
                    r#"{"code":"X","message":"other"}"#,
                ])?;
                let t = if payload.contains("code") {
                    "error"
                } else {
                    "relay.presence"
                };
                format!(r#"{{"v":"mvp-0.2","type":"{t}","payload":{payload}}}"#)
            }
            2 | 3 => {
                let id = format!("r{}", u.int_in_range(0..=5u8)?);
                let payload = match *u.choose(&TOOLS[..])? {
                    name if u.ratio(1u8, 8u8)? => format!(r#"{{"toolName":"{name}"}}"#),
                    name => {
                        let params = *u.choose(&[
                            r#"{"itemId":"m1"}"#,
                            r#"{"itemId":"m3"}"#,
                            r#"{"quantity":3}"#,
                            r#"{"quantity":-1}"#,
                            r#"{"quantity":2.5,"x":1}"#,
                            r#"{}"#,
                            r#"null"#,
                            r#"[1]"#,
                        ])?;
                        let reason = *u.choose(&[r#""go""#, r#""  ""#, "7"])?;
                        format!(r#"{{"toolName":"{name}","params":{params},"reason":{reason}}}"#)
                    }
                };
                self.ids.insert(id.clone());
                format!(r#"{{"v":"mvp-0.2","type":"tool.call","id":"{id}","payload":{payload}}}"#)
            }
            4 => {
                let t = *u.choose(&TYPES)?;
                let payload = *u.choose(&[
                    r#"{"studyId":"pilot","participantId":"P1"}"#,
                    r#"{"studyId":"pilot","participantId":"P2"}"#,
                    r#"{"text":"hello"}"#,
                    r#"{"reason":"done"}"#,
                    r#"{}"#,
                    r#"{"text":5}"#,
                ])?;
                let id = if u.ratio(1u8, 5u8)? {
                    String::new()
                } else {
                    let id = format!("q{}", u.int_in_range(0..=5u8)?);
                    self.ids.insert(id.clone());
                    format!(r#","id":"{id}""#)
                };
                let v = if u.ratio(1u8, 16u8)? {
                    ""
                } else {
                    r#""v":"mvp-0.2","#
                };
                format!(r#"{{{v}"type":"{t}"{id},"payload":{payload}}}"#)
            }
            5 => {
                // Oversize, by a little or a lot.
                let n = host.config().limits.max_message_bytes + u.int_in_range(0..=64usize)?;
                format!(
                    r#"{{"v":"mvp-0.2","type":"agent.message","payload":{{"text":"{}"}}}}"#,
                    "x".repeat(n)
                )
            }
            _ => {
                let len = u.int_in_range(0..=48usize)?;
                String::from_utf8_lossy(u.bytes(len)?).into_owned()
            }
        })
    }

    fn timeout(&mut self, host: &mut Host<FuzzTools>) {
        let now = self.clock.t();
        if let Some(unix_ms) = self.clock.wall_jump() {
            checked_wall_clock(host, now, unix_ms);
            self.drain(host);
        }
        host.handle_timeout(now);
        self.drain(host);
        if let Some(t) = host.poll_timeout() {
            assert!(t > now, "poll_timeout after handle_timeout must be later");
        }
        host.handle_timeout(now);
        assert!(
            host.poll_output().is_none(),
            "a second handle_timeout is a no-op"
        );
    }

    fn drain(&mut self, host: &mut Host<FuzzTools>) {
        while let Some(out) = host.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    assert_eq!(Some(conn), self.current, "send to a connection not current");
                    assert!(!self.closing, "send after close");
                    let env = Envelope::<HostMessage>::decode(frame.as_frame(), FUZZ_MAX)
                        .unwrap_or_else(|e| {
                            panic!("the host sent no HostMessage ({e}): {frame:?}")
                        });
                    if let Some(r) = &env.reply_to {
                        assert!(
                            self.ids.contains(r) || r.starts_with("host-join-"),
                            "replyTo {r:?} answers no request"
                        );
                    }
                    let v: Value = serde_json::from_slice(frame.as_bytes()).expect("JSON");
                    let p = &v["payload"];
                    assert!(
                        p["uiSpec"].get("backendData").is_none(),
                        "backendData sent: {v}"
                    );
                    if v["type"] == "tool.result" {
                        assert_eq!(p["ok"], true, "tool.result is only ever ok");
                    }
                }
                Output::Close { conn, .. } => {
                    assert_eq!(
                        Some(conn),
                        self.current,
                        "close of a connection not current"
                    );
                    self.closing = true;
                }
                Output::Event(HostEvent::SessionEnding { ticket, .. }) => {
                    if self.tickets.len() < 16 {
                        self.tickets.push(ticket);
                    }
                }
                Output::Event(_) => {}
            }
        }
    }

    fn check(&self, host: &Host<FuzzTools>) {
        assert!(
            host.history().len() <= self.limits.max_history_entries,
            "history"
        );
        assert!(
            host.queued_pushes() <= self.limits.max_queued_pushes,
            "queue"
        );
        if let Some(id) = host.session_id() {
            let b = id.as_bytes();
            assert!(
                id.len() >= 14
                    && id.starts_with("s-")
                    && b[2..10].iter().all(u8::is_ascii_digit)
                    && b[10] == b'-'
                    && b[11..].iter().all(u8::is_ascii_digit),
                "session id {id:?}"
            );
        }
        assert!(
            !host.is_ending() || host.session_id().is_some(),
            "ending without a session"
        );
        assert!(
            !host.is_joined() || host.is_connected(),
            "joined without a connection"
        );
    }
}
