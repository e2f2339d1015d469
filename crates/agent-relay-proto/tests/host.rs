//! The Host's rules, one test per behaviour: the Host alone fed raw relay frames, then Host +
//! Relay + a raw agent under the `sim` harness, then the timer-contract property test.

use std::time::{Duration, Instant};

use agent_relay_proto::{
    host_texts, sources, study_log_path, texts, ChatRole, DecodeError, Envelope, ErrorCode,
    ErrorPayload, Host, HostCommandError, HostConfig, HostEvent, HostLimits, HostMessage,
    HostTimer, RawJson, Relay, RelayConfig, RelayEvent, ToolContext, ToolError, ToolOutcome,
    ToolSchema, Tools, ENDPOINT_PATH,
};
use agentwire_core::sim::{check_timer_contract, Sim, SimConfig, TimerInput};
use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, Machine, Output, PeerInfo, SequentialIds,
};
use proptest::prelude::*;
use serde_json::{json, Value};

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

/// 2026-02-13T10:22:17.123Z, the spec's log example.
const UNIX_MS: u64 = 1_770_978_137_123;
const DAY_MS: u64 = 86_400_000;

// ---- a movie-booking UI --------------------------------------------------------------------

const STAGES: [&str; 7] = [
    "movie", "theater", "date", "time", "seat", "ticket", "confirm",
];

fn tool(name: &str, parameters: Value) -> ToolSchema {
    ToolSchema {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        parameters: RawJson::from_value(&parameters),
    }
}

fn object(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

/// The tools of `stage`: `setQuantity` only on the ticket stage, no `select` on confirm.
fn stage_tools(stage: &str) -> Vec<ToolSchema> {
    let mut tools = Vec::new();
    if stage != "confirm" {
        tools.push(tool(
            "select",
            object(json!({"itemId": {"type": "string"}}), &["itemId"]),
        ));
    }
    tools.push(tool(
        "sort",
        object(
            json!({"field": {"type": "string"}, "order": {"type": "string", "enum": ["asc", "desc"]}}),
            &["field"],
        ),
    ));
    tools.push(tool(
        "postMessage",
        object(json!({"text": {"type": "string"}}), &["text"]),
    ));
    tools.push(tool("next", object(json!({}), &[])));
    tools.push(tool("prev", object(json!({}), &[])));
    tools.push(tool("refresh", object(json!({}), &[])));
    if stage == "ticket" {
        tools.push(tool(
            "setQuantity",
            object(
                json!({"typeId": {"type": "string"},
                       "quantity": {"type": "integer", "minimum": 0, "maximum": 10}}),
                &["typeId", "quantity"],
            ),
        ));
    }
    tools
}

struct Booking {
    loaded: bool,
    backend_data: bool,
    stage: usize,
    schema: Vec<Vec<ToolSchema>>,
    selected: Option<String>,
    quantity: u64,
    order: Option<String>,
    calls: usize,
    resets: usize,
}

impl Booking {
    fn new() -> Self {
        Self {
            loaded: true,
            backend_data: false,
            stage: 0,
            schema: STAGES.iter().map(|s| stage_tools(s)).collect(),
            selected: None,
            quantity: 0,
            order: None,
            calls: 0,
            resets: 0,
        }
    }
}

impl Tools for Booking {
    fn tool_schema(&self) -> &[ToolSchema] {
        &self.schema[self.stage]
    }

    fn ui_spec(&self) -> Option<RawJson> {
        if !self.loaded {
            return None;
        }
        let mut spec = json!({
            "stage": STAGES[self.stage],
            "items": ["m1", "m2"],
            "selected": self.selected,
            "quantity": self.quantity,
            "order": self.order,
        });
        if self.backend_data {
            spec["backendData"] = json!({"secret": "raw backend payload"});
        }
        Some(RawJson::from_value(&spec))
    }

    fn stage(&self) -> Option<&str> {
        Some(STAGES[self.stage])
    }

    fn call(
        &mut self,
        name: &str,
        params: &Value,
        ctx: &mut ToolContext<'_>,
    ) -> Result<ToolOutcome, ToolError> {
        self.calls += 1;
        match name {
            "select" => {
                let id = params["itemId"].as_str().unwrap_or_default();
                if !["m1", "m2"].contains(&id) {
                    return Err(ToolError::invalid_params(format!(
                        "select: no item {id:?} on this stage"
                    )));
                }
                if self.selected.as_deref() == Some(id) {
                    return Ok(ToolOutcome::Unchanged);
                }
                self.selected = Some(id.to_owned());
            }
            "sort" => self.order = Some(params["order"].as_str().unwrap_or("asc").to_owned()),
            "postMessage" => {
                let text = params["text"].as_str().unwrap_or_default();
                ctx.post(ChatRole::Agent, text)?;
                return Ok(ToolOutcome::Unchanged);
            }
            "next" => self.stage = (self.stage + 1).min(STAGES.len() - 1),
            "prev" => self.stage = self.stage.saturating_sub(1),
            "refresh" => return Err(ToolError::failed("The showtimes service is down.")),
            "setQuantity" => self.quantity = params["quantity"].as_u64().unwrap_or_default(),
            _ => return Err(ToolError::failed("no such tool")),
        }
        Ok(ToolOutcome::Applied)
    }

    fn reset(&mut self) {
        self.stage = 0;
        self.selected = None;
        self.quantity = 0;
        self.order = None;
        self.resets += 1;
    }
}

// ---- a direct harness ----------------------------------------------------------------------

#[derive(Debug)]
enum Out {
    Send(ConnId, Value),
    Close(ConnId, CloseCode, String),
    Event(HostEvent),
}

struct H {
    host: Host<Booking>,
    now: Instant,
    conn: ConnId,
    next_conn: u64,
    outs: Vec<Out>,
}

impl H {
    fn with(config: HostConfig, tools: Booking) -> Self {
        let now = t0();
        Self {
            host: Host::new(config, tools, now, UNIX_MS),
            now,
            conn: ConnId::new(0),
            next_conn: 1,
            outs: Vec::new(),
        }
    }

    /// A host connected and joined.
    fn new() -> Self {
        let mut h = Self::with(HostConfig::default(), Booking::new());
        h.join();
        h
    }

    /// A host with a session started by `req-001`.
    fn in_session() -> Self {
        let mut h = Self::new();
        h.start();
        h
    }

    fn drain(&mut self) {
        while let Some(out) = self.host.poll_output() {
            self.outs.push(match out {
                Output::Send { conn, frame } => {
                    let v: Value = serde_json::from_slice(frame.as_bytes())
                        .unwrap_or_else(|e| panic!("host sent invalid JSON ({e}): {frame:?}"));
                    // Everything the host sends decodes with the host's sender enum.
                    Envelope::<HostMessage>::decode(frame.as_frame(), 1 << 20)
                        .unwrap_or_else(|e| panic!("not a HostMessage ({e}): {v}"));
                    Out::Send(conn, v)
                }
                Output::Close { conn, code, reason } => Out::Close(conn, code, reason.into_owned()),
                Output::Event(e) => Out::Event(e),
            });
        }
    }

    fn connect(&mut self) -> ConnId {
        self.conn = ConnId::new(self.next_conn);
        self.next_conn += 1;
        let peer = PeerInfo::new(None).with_path(ENDPOINT_PATH);
        self.host.handle_connect(self.conn, &peer, self.now);
        self.drain();
        self.conn
    }

    /// Connects, answers the join, and clears what that produced.
    fn join(&mut self) -> ConnId {
        let conn = self.connect();
        let join = self.sent().pop().expect("relay.join");
        self.feed(
            json!({"v":"mvp-0.2","type":"relay.joined","replyTo":join["id"],
            "payload":{"role":"host","sessionId":"default"}}),
        );
        assert!(self.host.is_joined());
        self.outs.clear();
        conn
    }

    fn feed_text(&mut self, text: &str) {
        self.host
            .handle_frame(self.conn, Frame::Text(text), self.now);
        self.drain();
    }

    fn feed(&mut self, v: Value) {
        self.feed_text(&v.to_string());
    }

    /// An agent request, as the relay forwards it.
    fn req(&mut self, t: &str, id: &str, payload: Value) {
        self.feed(json!({"v":"mvp-0.2","type":t,"id":id,"payload":payload}));
    }

    fn call(&mut self, id: &str, tool: &str, params: Value) {
        self.req(
            "tool.call",
            id,
            json!({"toolName": tool, "params": params, "reason": "Because the test says so."}),
        );
    }

    fn start(&mut self) -> String {
        self.req(
            "session.start",
            "req-001",
            json!({"studyId":"pilot-01","participantId":"P07"}),
        );
        let started = self.one();
        assert_eq!(started["type"], "session.started", "{started}");
        self.outs.clear();
        started["payload"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// Takes every frame sent so far (to any connection).
    fn sent(&mut self) -> Vec<Value> {
        let mut taken = Vec::new();
        let current = self.conn;
        self.outs.retain(|o| match o {
            Out::Send(c, v) => {
                assert_eq!(*c, current, "sent on the current connection only: {v}");
                taken.push(v.clone());
                false
            }
            _ => true,
        });
        taken
    }

    fn one(&mut self) -> Value {
        let mut v = self.sent();
        assert_eq!(v.len(), 1, "expected one frame, got {v:#?}");
        v.remove(0)
    }

    fn types(&mut self) -> Vec<String> {
        self.sent()
            .iter()
            .map(|v| v["type"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Takes every event so far.
    fn events(&mut self) -> Vec<HostEvent> {
        let mut taken = Vec::new();
        self.outs.retain(|o| match o {
            Out::Event(e) => {
                taken.push(e.clone());
                false
            }
            _ => true,
        });
        taken
    }

    fn closes(&mut self) -> Vec<(ConnId, CloseCode, String)> {
        let mut taken = Vec::new();
        self.outs.retain(|o| match o {
            Out::Close(c, code, r) => {
                taken.push((*c, *code, r.clone()));
                false
            }
            _ => true,
        });
        taken
    }

    fn disconnect(&mut self) {
        self.host.handle_disconnect(self.conn, self.now);
        self.drain();
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.host.handle_timeout(self.now);
        self.drain();
    }

    /// Ends the session through `session.end` `req-999` and returns the ticket.
    fn begin_end(&mut self) -> agent_relay_proto::EndTicket {
        self.req("session.end", "req-999", json!({"reason":"study-complete"}));
        assert!(self.sent().is_empty(), "nothing is sent before the flush");
        self.events()
            .into_iter()
            .find_map(|e| match e {
                HostEvent::SessionEnding { ticket, .. } => Some(ticket),
                _ => None,
            })
            .expect("SessionEnding")
    }
}

impl H {
    /// Ends the session (`session.end`, flush confirmed) and clears what that produced.
    fn end(&mut self) {
        let ticket = self.begin_end();
        self.host
            .confirm_flush(ticket, "log.jsonl", self.now)
            .unwrap();
        self.drain();
        self.outs.clear();
    }
}

/// `(code, message, replyTo)` of an `error` frame.
fn error_of(v: &Value) -> (String, String, Option<String>) {
    assert_eq!(v["type"], "error", "{v}");
    (
        v["payload"]["code"].as_str().unwrap().to_owned(),
        v["payload"]["message"].as_str().unwrap().to_owned(),
        v["replyTo"].as_str().map(str::to_owned),
    )
}

fn err(code: &str, message: &str, reply_to: &str) -> (String, String, Option<String>) {
    (code.into(), message.into(), Some(reply_to.into()))
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

// ---- joining the relay ---------------------------------------------------------------------

#[test]
fn every_connect_sends_relay_join_as_host_for_its_relay_session() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    h.connect();
    assert_eq!(
        h.one(),
        json!({"v":"mvp-0.2","type":"relay.join","id":"host-join-1",
               "payload":{"role":"host","sessionId":"default"}})
    );
    assert!(h.host.is_connected() && !h.host.is_joined());
    h.disconnect();
    assert_eq!(h.events(), [HostEvent::Disconnected]);
    h.connect();
    assert_eq!(h.one()["id"], "host-join-2", "a fresh join id per connect");

    let mut h = H::with(
        HostConfig::default().with_relay_session("lab-3"),
        Booking::new(),
    );
    h.connect();
    assert_eq!(h.one()["payload"]["sessionId"], "lab-3");
    // Only the answer to our own join counts.
    h.feed(json!({"v":"mvp-0.2","type":"relay.hello","payload":{"message":"hi"}}));
    h.feed(json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"other","payload":{"role":"host","sessionId":"lab-3"}}));
    assert!(!h.host.is_joined());
    h.feed(json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"host-join-1","payload":{"role":"host","sessionId":"lab-3"}}));
    assert!(h.host.is_joined());
    assert_eq!(
        h.events(),
        [HostEvent::Joined {
            relay_session: "lab-3".into()
        }]
    );
    assert!(h.sent().is_empty());
}

#[test]
fn the_relay_refusing_the_join_closes_the_connection() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    let c = h.connect();
    h.sent();
    h.feed(json!({"v":"mvp-0.2","type":"error","replyTo":"host-join-1",
        "payload":{"code":"LIMIT_EXCEEDED","message":"The relay has reached its session limit."}}));
    assert_eq!(
        h.closes(),
        [(c, CloseCode::NORMAL, "join-refused".to_owned())]
    );
    assert_eq!(
        h.events(),
        [HostEvent::JoinRefused {
            code: ErrorCode::LIMIT_EXCEEDED,
            message: "The relay has reached its session limit.".into()
        }]
    );
    assert!(!h.host.is_connected());
    // The driver's later disconnect and stray frames on that connection are no-ops.
    h.req("snapshot.get", "r", json!({}));
    h.disconnect();
    assert!(h.outs.is_empty(), "{:?}", h.outs);
}

#[test]
fn no_join_answer_within_the_deadline_closes_the_connection() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    let c = h.connect();
    h.sent();
    let (at, kind) = h.host.next_timer().unwrap();
    assert_eq!(
        (at - h.now, kind),
        (Duration::from_secs(10), HostTimer::JoinReply)
    );
    h.advance(Duration::from_millis(9_999));
    assert!(h.outs.is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(
        h.closes(),
        [(c, CloseCode::NORMAL, "join-timeout".to_owned())]
    );
    assert_eq!(h.events(), [HostEvent::JoinTimedOut]);
    assert_eq!(h.host.poll_timeout(), None);
    // A join answered in time leaves no deadline.
    h.join();
    assert_eq!(h.host.poll_timeout(), None);
}

#[test]
fn relay_presence_errors_and_replacement_are_reported() {
    let mut h = H::new();
    h.feed(
        json!({"v":"mvp-0.2","type":"relay.presence","payload":{"sessionId":"default",
        "agentCount":1,"agents":[{"id":"a1","name":"planner"}]}}),
    );
    assert!(matches!(&h.events()[..], [HostEvent::Presence(p)] if p.agent_count == 1));
    h.feed(
        json!({"v":"mvp-0.2","type":"error","payload":{"code":"LIMIT_EXCEEDED",
        "message":"Rate limit exceeded; message dropped."}}),
    );
    assert_eq!(
        h.events(),
        [HostEvent::RelayError {
            code: ErrorCode::LIMIT_EXCEEDED,
            message: texts::RATE_LIMITED.into(),
            reply_to: None
        }]
    );
    h.feed(
        json!({"v":"mvp-0.2","type":"error","payload":{"code":"SESSION_NOT_ACTIVE",
        "message": texts::HOST_REPLACED}}),
    );
    assert_eq!(h.events(), [HostEvent::Replaced]);
    assert!(h.sent().is_empty(), "the host never answers the relay");
}

// ---- sessions ------------------------------------------------------------------------------

#[test]
fn session_start_answers_a_new_dated_id_counting_from_001_per_day() {
    let mut h = H::new();
    h.req(
        "session.start",
        "req-001",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(h.one(), fixture("session_started"));
    assert_eq!(
        h.events(),
        [HostEvent::SessionStarted {
            session_id: "s-20260213-001".into(),
            study_id: "pilot-01".into(),
            participant_id: "P07".into()
        }]
    );
    assert_eq!(h.host.session_id(), Some("s-20260213-001"));

    let mut ids = Vec::new();
    for _ in 0..2 {
        h.end();
        ids.push(h.start());
    }
    // The wall clock runs on with `now`: the next day starts again at 001.
    h.now += Duration::from_millis(DAY_MS);
    h.end();
    ids.push(h.start());
    assert_eq!(ids, ["s-20260213-002", "s-20260213-003", "s-20260214-001"]);
    // Re-anchoring the wall clock moves the date too.
    h.host.set_wall_clock(h.now, UNIX_MS + 30 * DAY_MS);
    h.end();
    assert_eq!(h.start(), "s-20260315-001");
}

#[test]
fn resume_numbering_continues_after_the_last_id_of_the_day() {
    let mut h = H::new();
    assert_eq!(
        h.host.resume_numbering("s-20260213-1"),
        Ok(()),
        "short numbers parse"
    );
    h.host.resume_numbering("s-20260213-041").unwrap();
    h.host.resume_numbering("s-20260212-099").unwrap(); // an older day changes nothing
    for bad in [
        "",
        "s-2026021-001",
        "x-20260213-001",
        "s-20260213-",
        "s-20260213-0a1",
    ] {
        assert_eq!(
            h.host.resume_numbering(bad),
            Err(HostCommandError::InvalidSessionId),
            "{bad}"
        );
    }
    assert_eq!(h.start(), "s-20260213-042");
}

#[test]
fn requests_outside_a_session_get_session_not_active() {
    let mut h = H::new();
    for (t, payload) in [
        ("snapshot.get", json!({})),
        (
            "tool.call",
            json!({"toolName":"select","params":{"itemId":"m1"},"reason":"r"}),
        ),
        ("agent.message", json!({"text":"hi"})),
        ("session.end", json!({})),
    ] {
        h.req(t, "q-1", payload);
        assert_eq!(
            error_of(&h.one()),
            err("SESSION_NOT_ACTIVE", host_texts::NO_SESSION, "q-1"),
            "{t}"
        );
    }
    assert_eq!(h.host.tools().calls, 0);
    assert!(h.host.history().is_empty());
    let refused = h.events();
    assert_eq!(refused.len(), 4);
    assert!(
        matches!(&refused[0], HostEvent::Refused { msg_type: "snapshot.get", reply_to: Some(r), error }
        if r == "q-1" && error.code == ErrorCode::SESSION_NOT_ACTIVE)
    );
}

#[test]
fn a_repeated_session_start_gets_the_same_session_and_another_is_refused() {
    let mut h = H::in_session();
    h.req(
        "session.start",
        "retry",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(
        h.one(),
        json!({"v":"mvp-0.2","type":"session.started","replyTo":"retry",
               "payload":{"sessionId":"s-20260213-001"}})
    );
    assert!(h.events().is_empty(), "no new session");
    h.req(
        "session.start",
        "other",
        json!({"studyId":"pilot-01","participantId":"P08"}),
    );
    assert_eq!(
        error_of(&h.one()),
        err(
            "INVALID_MESSAGE",
            "A session is already active: s-20260213-001.",
            "other"
        )
    );
    h.req("session.start", "bad", json!({"studyId":"pilot-01"}));
    let (code, message, reply_to) = error_of(&h.one());
    assert_eq!(
        (code.as_str(), reply_to.as_deref()),
        ("INVALID_MESSAGE", Some("bad"))
    );
    assert!(
        message.starts_with("Invalid session.start payload: missing field `participantId`"),
        "{message}"
    );
}

// ---- snapshots -----------------------------------------------------------------------------

#[test]
fn snapshot_state_carries_only_ui_spec_message_history_and_tool_schema() {
    let mut h = H::in_session();
    h.req("snapshot.get", "req-002", json!({}));
    let snap = h.one();
    assert_eq!(snap["type"], "snapshot.state");
    assert_eq!(snap["replyTo"], "req-002");
    let keys: Vec<&str> = snap["payload"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["messageHistory", "sessionId", "toolSchema", "uiSpec"]
    );
    assert_eq!(snap["payload"]["sessionId"], "s-20260213-001");
    assert_eq!(snap["payload"]["uiSpec"]["stage"], "movie");
    assert_eq!(snap["payload"]["messageHistory"], json!([]));
    let names: Vec<&str> = snap["payload"]["toolSchema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["select", "sort", "postMessage", "next", "prev", "refresh"]
    );
    assert_eq!(
        snap["payload"]["toolSchema"][0],
        json!({"name":"select","description":"The select tool.","parameters":
            {"type":"object","properties":{"itemId":{"type":"string"}},"required":["itemId"]}})
    );
    // No UI spec loaded: the snapshot still answers, with `uiSpec: null`.
    h.host.tools_mut().loaded = false;
    h.req("snapshot.get", "req-003", json!({}));
    assert_eq!(h.one()["payload"]["uiSpec"], Value::Null);
}

#[test]
fn backend_data_never_reaches_an_agent() {
    let mut h = H::in_session();
    h.host.tools_mut().backend_data = true;
    assert!(h
        .host
        .tools()
        .ui_spec()
        .unwrap()
        .get()
        .contains("backendData"));
    h.req("snapshot.get", "s", json!({}));
    h.call("c", "select", json!({"itemId":"m1"}));
    h.host.publish_state(sources::USER, h.now);
    h.drain();
    let sent = h.sent();
    assert_eq!(sent.len(), 4, "{sent:#?}"); // snapshot, tool.result, state.updated ×2
    for v in &sent {
        assert!(!v.to_string().contains("backendData"), "{v}");
        assert_eq!(
            v["payload"]["uiSpec"]["stage"], "movie",
            "the rest is kept: {v}"
        );
    }
}

// ---- tool calls ----------------------------------------------------------------------------

#[test]
fn a_tool_call_is_answered_with_tool_result_then_state_updated() {
    let mut h = H::in_session();
    h.call("req-003", "select", json!({"itemId":"m1"}));
    let sent = h.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["type"], "tool.result");
    assert_eq!(sent[0]["replyTo"], "req-003");
    assert_eq!(sent[0]["payload"]["ok"], true);
    assert_eq!(sent[0]["payload"]["toolName"], "select");
    assert_eq!(sent[0]["payload"]["uiSpec"]["selected"], "m1");
    assert_eq!(sent[0]["payload"]["messageHistory"], json!([]));
    assert_eq!(sent[1]["type"], "state.updated");
    assert_eq!(sent[1].get("replyTo"), None, "a push");
    assert_eq!(sent[1]["payload"]["source"], "tool");
    assert_eq!(sent[1]["payload"]["uiSpec"], sent[0]["payload"]["uiSpec"]);
    assert_eq!(
        h.events(),
        [
            HostEvent::ToolApplied {
                tool_name: "select".into(),
                reason: "Because the test says so.".into()
            },
            HostEvent::StateChanged {
                source: "tool".into()
            }
        ]
    );
}

#[test]
fn a_tool_that_changes_nothing_sends_no_state_updated() {
    let mut h = H::in_session();
    h.call("a", "select", json!({"itemId":"m1"}));
    h.outs.clear();
    h.call("b", "select", json!({"itemId":"m1"}));
    assert_eq!(h.types(), ["tool.result"]);
}

#[test]
fn reason_is_required_and_must_not_be_blank() {
    let mut h = H::in_session();
    for reason in [
        None,
        Some(json!("")),
        Some(json!("  \n")),
        Some(json!(5)),
        Some(Value::Null),
    ] {
        let mut payload = json!({"toolName":"select","params":{"itemId":"m1"}});
        if let Some(r) = reason.clone() {
            payload["reason"] = r;
        }
        h.req("tool.call", "r", payload);
        assert_eq!(
            error_of(&h.one()),
            err("INVALID_PARAMS", host_texts::REASON_REQUIRED, "r"),
            "{reason:?}"
        );
    }
    h.req("tool.call", "n", json!({"params":{},"reason":"x"}));
    assert_eq!(
        error_of(&h.one()),
        err("INVALID_MESSAGE", host_texts::TOOL_NAME_REQUIRED, "n")
    );
    assert_eq!(h.host.tools().calls, 0);
}

#[test]
fn an_unknown_tool_is_unknown_tool_and_each_stage_has_its_own_tools() {
    let mut h = H::in_session();
    h.call("u", "teleport", json!({}));
    assert_eq!(
        error_of(&h.one()),
        err("UNKNOWN_TOOL", "Unknown tool: teleport", "u")
    );
    // setQuantity exists on the ticket stage only.
    h.call("q", "setQuantity", json!({"typeId":"adult","quantity":2}));
    assert_eq!(error_of(&h.one()).0, "UNKNOWN_TOOL");
    for _ in 0..5 {
        h.call("n", "next", json!({}));
    }
    h.outs.clear();
    assert_eq!(h.host.tools().stage(), Some("ticket"));
    h.call("q", "setQuantity", json!({"typeId":"adult","quantity":2}));
    assert_eq!(h.types(), ["tool.result", "state.updated"]);
    assert_eq!(h.host.tools().quantity, 2);
    // A very long unknown name is cut in the reply.
    h.call("l", &"x".repeat(5000), json!({}));
    assert!(error_of(&h.one()).1.len() < 200);
}

#[test]
fn bad_params_are_invalid_params_naming_the_parameter() {
    let mut h = H::in_session();
    for _ in 0..5 {
        h.call("n", "next", json!({}));
    }
    h.outs.clear();
    let cases = [
        (
            "setQuantity",
            json!({"typeId":"adult","quantity":-1}),
            "setQuantity requires quantity >= 0",
        ),
        (
            "setQuantity",
            json!({"typeId":"adult","quantity":11}),
            "setQuantity requires quantity <= 10",
        ),
        (
            "setQuantity",
            json!({"typeId":"adult","quantity":"2"}),
            "setQuantity requires quantity to be an integer",
        ),
        (
            "setQuantity",
            json!({"quantity":1}),
            "setQuantity requires typeId",
        ),
        ("select", json!({}), "select requires itemId"),
        (
            "select",
            json!({"itemId":7}),
            "select requires itemId to be a string",
        ),
        (
            "select",
            json!(["m1"]),
            "select requires params to be an object",
        ),
        (
            "select",
            json!("m1"),
            "select requires params to be an object",
        ),
        (
            "sort",
            json!({"field":"title","order":"up"}),
            r#"sort requires order to be one of "asc", "desc""#,
        ),
    ];
    for (tool, params, message) in cases {
        h.call("p", tool, params.clone());
        assert_eq!(
            error_of(&h.one()),
            err("INVALID_PARAMS", message, "p"),
            "{tool} {params}"
        );
    }
    assert_eq!(h.host.tools().calls, 5, "only the five `next` calls ran");
    // Absent or null params are `{}`.
    h.req("tool.call", "a", json!({"toolName":"prev","reason":"back"}));
    h.req(
        "tool.call",
        "b",
        json!({"toolName":"prev","params":null,"reason":"back"}),
    );
    assert_eq!(
        h.types(),
        [
            "tool.result",
            "state.updated",
            "tool.result",
            "state.updated"
        ]
    );
}

#[test]
fn the_tools_own_failures_are_tool_execution_failed_or_invalid_params() {
    let mut h = H::in_session();
    h.call("f", "refresh", json!({}));
    assert_eq!(
        error_of(&h.one()),
        err(
            "TOOL_EXECUTION_FAILED",
            "The showtimes service is down.",
            "f"
        )
    );
    h.call("i", "select", json!({"itemId":"zz"}));
    assert_eq!(
        error_of(&h.one()),
        err(
            "INVALID_PARAMS",
            "select: no item \"zz\" on this stage",
            "i"
        )
    );
    let events = h.events();
    assert!(
        events.iter().all(|e| matches!(
            e,
            HostEvent::Refused {
                msg_type: "tool.call",
                ..
            }
        )),
        "{events:?}"
    );
    assert_eq!(
        ToolError::failed("x").code(),
        ErrorCode::TOOL_EXECUTION_FAILED
    );
}

#[test]
fn no_loaded_spec_is_no_active_spec() {
    let mut h = H::in_session();
    h.host.tools_mut().loaded = false;
    h.call("s", "select", json!({"itemId":"m1"}));
    assert_eq!(
        error_of(&h.one()),
        err("NO_ACTIVE_SPEC", host_texts::NO_ACTIVE_SPEC, "s")
    );
    // It comes before the tool lookup: with no spec, no tool is "unknown".
    h.call("t", "teleport", json!({}));
    assert_eq!(error_of(&h.one()).0, "NO_ACTIVE_SPEC");
}

// ---- the chat ------------------------------------------------------------------------------

#[test]
fn agent_message_is_appended_to_the_history_and_pushed() {
    let mut h = H::in_session();
    h.req(
        "agent.message",
        "req-004",
        json!({"text":"I will choose a date next to narrow available showtimes."}),
    );
    let sent = h.sent();
    assert_eq!(sent.len(), 1, "no reply, one push: {sent:#?}");
    assert_eq!(sent[0]["type"], "state.updated");
    assert_eq!(sent[0]["payload"]["source"], "agent");
    assert_eq!(
        sent[0]["payload"]["messageHistory"],
        json!([{"role":"agent","text":"I will choose a date next to narrow available showtimes."}])
    );
    assert!(h.events().contains(&HostEvent::AgentMessage {
        text: "I will choose a date next to narrow available showtimes.".into()
    }));
    h.req("snapshot.get", "s", json!({}));
    assert_eq!(h.one()["payload"]["messageHistory"][0]["role"], "agent");
    h.req("agent.message", "bad", json!({"text": 5}));
    assert_eq!(error_of(&h.one()).0, "INVALID_MESSAGE");
}

#[test]
fn a_tool_may_write_to_the_chat() {
    let mut h = H::in_session();
    h.call("p", "postMessage", json!({"text":"Showing evening times."}));
    let sent = h.sent();
    assert_eq!(sent[0]["type"], "tool.result");
    assert_eq!(
        sent[0]["payload"]["messageHistory"],
        json!([{"role":"agent","text":"Showing evening times."}])
    );
    assert_eq!(sent[1]["type"], "state.updated", "the chat changed");
    assert_eq!(h.host.history().len(), 1);
}

#[test]
fn a_full_history_answers_limit_exceeded() {
    let mut limits = HostLimits::default();
    limits.max_history_entries = 2;
    let mut h = H::with(HostConfig::default().with_limits(limits), Booking::new());
    h.join();
    h.start();
    h.req("agent.message", "1", json!({"text":"a"}));
    h.host.user_message("b", h.now).unwrap();
    h.drain();
    h.outs.clear();
    h.req("agent.message", "3", json!({"text":"c"}));
    assert_eq!(
        error_of(&h.one()),
        err("LIMIT_EXCEEDED", host_texts::HISTORY_FULL, "3")
    );
    assert_eq!(
        h.host.user_message("d", h.now),
        Err(HostCommandError::HistoryFull)
    );
    h.call("p", "postMessage", json!({"text":"e"}));
    assert_eq!(
        error_of(&h.one()),
        err("TOOL_EXECUTION_FAILED", "the chat history is full", "p")
    );
}

#[test]
fn user_message_is_pushed_with_the_stage_and_recorded() {
    let mut h = H::in_session();
    for _ in 0..3 {
        h.call("n", "next", json!({}));
    }
    h.outs.clear();
    h.host
        .user_message("I prefer evening showtimes.", h.now)
        .unwrap();
    h.drain();
    let sent = h.sent();
    assert_eq!(sent[0], fixture("user_message"));
    assert_eq!(sent[1]["type"], "state.updated");
    assert_eq!(sent[1]["payload"]["source"], "user");
    assert_eq!(
        sent[1]["payload"]["messageHistory"],
        json!([{"role":"user","text":"I prefer evening showtimes."}])
    );
    // The participant can chat before an agent starts a session.
    let mut h = H::new();
    h.host.user_message("hello?", h.now).unwrap();
    h.drain();
    assert_eq!(h.types(), ["user.message", "state.updated"]);
}

// ---- ending a session ----------------------------------------------------------------------

#[test]
fn session_end_waits_for_the_flush_then_resets_and_answers_session_ended() {
    let mut h = H::in_session();
    h.call("n", "next", json!({}));
    h.req("agent.message", "m", json!({"text":"hi"}));
    h.outs.clear();
    let ticket = h.begin_end();
    assert!(h.host.is_ending());
    let (_, kind) = h.host.next_timer().unwrap();
    assert_eq!(kind, HostTimer::LogFlush);

    // While the log is flushed, reads work and changes are refused.
    h.req("snapshot.get", "s", json!({}));
    assert_eq!(h.one()["type"], "snapshot.state");
    h.call("c", "next", json!({}));
    assert_eq!(
        error_of(&h.one()),
        err("SESSION_NOT_ACTIVE", host_texts::SESSION_ENDING, "c")
    );
    h.req("session.end", "again", json!({}));
    assert_eq!(error_of(&h.one()).1, host_texts::SESSION_ENDING);
    h.events();

    let log = study_log_path("s-20260213-001");
    assert_eq!(log, "logs/study/s-20260213-001.jsonl");
    h.host.confirm_flush(ticket, &log, h.now).unwrap();
    h.drain();
    let sent = h.sent();
    assert_eq!(sent[0], fixture("session_ended"));
    assert_eq!(sent[1]["type"], "state.updated");
    assert_eq!(sent[1]["payload"]["source"], "reset");
    assert_eq!(sent[1]["payload"]["uiSpec"]["stage"], "movie");
    assert_eq!(sent[1]["payload"]["messageHistory"], json!([]));
    assert_eq!(
        h.events(),
        [
            HostEvent::SessionEnded {
                session_id: "s-20260213-001".into(),
                log_file: log.clone()
            },
            HostEvent::StateChanged {
                source: "reset".into()
            }
        ]
    );
    assert_eq!(h.host.tools().resets, 1);
    assert!(h.host.history().is_empty());
    assert_eq!(h.host.session_id(), None);
    assert_eq!(h.host.poll_timeout(), None);
    h.req("snapshot.get", "after", json!({}));
    assert_eq!(error_of(&h.one()).0, "SESSION_NOT_ACTIVE");
    // The ticket is spent.
    assert_eq!(
        h.host.confirm_flush(ticket, &log, h.now),
        Err(HostCommandError::UnknownTicket)
    );
}

#[test]
fn a_failed_or_late_flush_keeps_the_session_and_answers_log_flush_failed() {
    let mut h = H::in_session();
    h.call("n", "next", json!({}));
    h.outs.clear();
    let ticket = h.begin_end();
    h.host.fail_flush(ticket, "disk full", h.now).unwrap();
    h.drain();
    assert_eq!(
        error_of(&h.one()),
        err("LOG_FLUSH_FAILED", "disk full", "req-999")
    );
    assert_eq!(
        h.events(),
        [HostEvent::SessionEndFailed {
            session_id: "s-20260213-001".into(),
            message: "disk full".into()
        }]
    );
    assert!(!h.host.is_ending());
    assert_eq!(h.host.tools().stage(), Some("theater"), "nothing was reset");
    assert_eq!(h.host.tools().resets, 0);
    assert_eq!(
        h.host.confirm_flush(ticket, "x", h.now),
        Err(HostCommandError::UnknownTicket)
    );

    // No confirmation within flush_timeout (10 s) fails the same way.
    let ticket = h.begin_end();
    h.advance(Duration::from_millis(9_999));
    assert!(h.outs.is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(
        error_of(&h.one()),
        err("LOG_FLUSH_FAILED", host_texts::FLUSH_TIMEOUT, "req-999")
    );
    assert_eq!(h.host.session_id(), Some("s-20260213-001"));
    assert_eq!(
        h.host.confirm_flush(ticket, "late", h.now),
        Err(HostCommandError::UnknownTicket)
    );
    assert_eq!(h.host.poll_timeout(), None);
    // And the agent may try again.
    let ticket = h.begin_end();
    h.host.confirm_flush(ticket, "ok.jsonl", h.now).unwrap();
    assert_eq!(h.host.session_id(), None);
}

#[test]
fn the_application_can_end_the_session_and_agents_get_session_ended() {
    let mut h = H::new();
    assert_eq!(
        h.host.end_session(None, h.now),
        Err(HostCommandError::NoSession)
    );
    h.start();
    let ticket = h.host.end_session(Some("participant-left"), h.now).unwrap();
    h.drain();
    assert_eq!(
        h.events(),
        [HostEvent::SessionEnding {
            session_id: "s-20260213-001".into(),
            reason: Some("participant-left".into()),
            ticket
        }]
    );
    assert_eq!(
        h.host.end_session(None, h.now),
        Err(HostCommandError::Ending)
    );
    h.host.confirm_flush(ticket, "l.jsonl", h.now).unwrap();
    h.drain();
    assert_eq!(
        h.sent()[0],
        json!({"v":"mvp-0.2","type":"session.ended","payload":
            {"sessionId":"s-20260213-001","logFile":"l.jsonl","stateReset":true}})
    );
}

// ---- reconnects ----------------------------------------------------------------------------

#[test]
fn a_session_survives_a_reconnect_and_pushes_wait_for_the_join() {
    let mut h = H::in_session();
    h.call("n", "next", json!({}));
    h.outs.clear();
    h.disconnect();
    assert_eq!(h.events(), [HostEvent::Disconnected]);
    // Offline: the participant chats and clicks; nothing can be sent.
    h.host.user_message("still there?", h.now).unwrap();
    h.host.tools_mut().selected = Some("m2".into());
    h.host.publish_state(sources::USER, h.now);
    h.drain();
    assert!(h.sent().is_empty());
    assert_eq!(h.host.queued_pushes(), 1);

    h.connect();
    assert_eq!(
        h.types(),
        ["relay.join"],
        "nothing before the relay answers"
    );
    h.feed(
        json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"host-join-2",
        "payload":{"role":"host","sessionId":"default"}}),
    );
    let sent = h.sent();
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(sent[0]["type"], "user.message");
    assert_eq!(sent[0]["payload"]["stage"], "theater");
    assert_eq!(
        sent[1]["type"], "state.updated",
        "one push for every change"
    );
    assert_eq!(sent[1]["payload"]["uiSpec"]["selected"], "m2");
    assert_eq!(h.host.queued_pushes(), 0);

    h.req("snapshot.get", "s", json!({}));
    let snap = h.one();
    assert_eq!(snap["payload"]["sessionId"], "s-20260213-001");
    assert_eq!(snap["payload"]["uiSpec"]["stage"], "theater");
}

#[test]
fn a_replaced_connection_is_dropped_and_its_frames_ignored() {
    let mut h = H::in_session();
    let old = h.conn;
    h.join();
    assert_ne!(h.conn, old);
    h.host.handle_frame(
        old,
        Frame::Text(r#"{"v":"mvp-0.2","type":"snapshot.get","id":"x","payload":{}}"#),
        h.now,
    );
    h.host.handle_disconnect(old, h.now);
    h.drain();
    assert!(h.outs.is_empty(), "{:?}", h.outs);
    assert_eq!(h.host.session_id(), Some("s-20260213-001"));
}

#[test]
fn user_message_is_refused_when_the_offline_queue_is_full() {
    let mut limits = HostLimits::default();
    limits.max_queued_pushes = 2;
    let mut h = H::with(HostConfig::default().with_limits(limits), Booking::new());
    h.host.user_message("1", h.now).unwrap();
    h.host.user_message("2", h.now).unwrap();
    assert_eq!(
        h.host.user_message("3", h.now),
        Err(HostCommandError::QueueFull)
    );
    assert_eq!(
        h.host.history().len(),
        2,
        "a refused message is not recorded"
    );
}

#[test]
fn a_session_end_confirmed_after_a_reconnect_is_pushed_without_reply_to() {
    let mut h = H::in_session();
    let ticket = h.begin_end();
    h.disconnect();
    h.host.confirm_flush(ticket, "f.jsonl", h.now).unwrap();
    h.drain();
    assert!(h.sent().is_empty());
    h.join_keep();
    let sent = h.sent();
    assert_eq!(sent[0]["type"], "session.ended");
    assert_eq!(
        sent[0].get("replyTo"),
        None,
        "the relay already failed that request"
    );
    assert_eq!(sent[1]["payload"]["source"], "reset");
}

impl H {
    /// Like `join`, but keeps what the join released.
    fn join_keep(&mut self) {
        self.connect();
        let join = self.sent().pop().unwrap();
        self.feed(
            json!({"v":"mvp-0.2","type":"relay.joined","replyTo":join["id"],
            "payload":{"role":"host","sessionId":"default"}}),
        );
    }
}

// ---- hostile input -------------------------------------------------------------------------

#[test]
fn garbage_from_the_relay_is_reported_and_never_answered() {
    let mut limits = HostLimits::default();
    limits.max_message_bytes = 256;
    let mut h = H::with(HostConfig::default().with_limits(limits), Booking::new());
    h.join();
    h.start();
    let big = format!(
        r#"{{"v":"mvp-0.2","type":"snapshot.get","id":"big","payload":{{"x":"{}"}}}}"#,
        "a".repeat(300)
    );
    for text in [
        "",
        "nope",
        "[1,2]",
        r#"{"v":"mvp-0.1","type":"snapshot.get","id":"v","payload":{}}"#,
        r#"{"type":"snapshot.get","id":"v","payload":{}}"#,
        r#"{"v":"mvp-0.2","type":"state.updated","payload":{}}"#,
        r#"{"v":"mvp-0.2","type":"relay.presence","payload":{"agents":5}}"#,
        r#"{"v":"mvp-0.2","type":"error","payload":{}}"#,
        big.as_str(),
    ] {
        h.feed_text(text);
        assert!(h.sent().is_empty(), "{text}");
        let events = h.events();
        assert!(
            matches!(&events[..], [HostEvent::ProtocolViolation { .. }]),
            "{text}: {events:?}"
        );
    }
    h.host
        .handle_frame(h.conn, Frame::Binary(&[0xff, 0xfe]), h.now);
    h.drain();
    assert!(matches!(
        &h.events()[..],
        [HostEvent::ProtocolViolation {
            error: DecodeError::NotUtf8
        }]
    ));
    // Deep params are refused, not a stack overflow.
    let nested = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let deep = format!(
        r#"{{"v":"mvp-0.2","type":"tool.call","id":"d","payload":{{"toolName":"select","params":{{"itemId":{nested}}},"reason":"r"}}}}"#
    );
    let mut h2 = H::in_session();
    h2.feed_text(&deep);
    let (code, _, reply_to) = error_of(&h2.one());
    assert_eq!(
        (code.as_str(), reply_to.as_deref()),
        ("INVALID_PARAMS", Some("d"))
    );
    // The host still works.
    h.req("snapshot.get", "ok", json!({}));
    assert_eq!(h.one()["type"], "snapshot.state");
}

// ---- the spec's examples -------------------------------------------------------------------

/// A UI whose state is the spec examples' placeholders: `uiSpec` `{}`.
struct Blank;

impl Tools for Blank {
    fn tool_schema(&self) -> &[ToolSchema] {
        &[]
    }
    fn ui_spec(&self) -> Option<RawJson> {
        Some(RawJson::empty_object())
    }
    fn stage(&self) -> Option<&str> {
        Some("time")
    }
    fn call(
        &mut self,
        _: &str,
        _: &Value,
        _: &mut ToolContext<'_>,
    ) -> Result<ToolOutcome, ToolError> {
        Ok(ToolOutcome::Applied)
    }
    fn reset(&mut self) {}
}

/// `Blank` with the spec examples' two tools.
struct SpecTools(Vec<ToolSchema>);

impl Tools for SpecTools {
    fn tool_schema(&self) -> &[ToolSchema] {
        &self.0
    }
    fn ui_spec(&self) -> Option<RawJson> {
        Blank.ui_spec()
    }
    fn stage(&self) -> Option<&str> {
        Some("time")
    }
    fn call(
        &mut self,
        n: &str,
        p: &Value,
        c: &mut ToolContext<'_>,
    ) -> Result<ToolOutcome, ToolError> {
        Blank.call(n, p, c)
    }
    fn reset(&mut self) {}
}

/// A host serving `tools`, connected and joined, with its outputs drained.
fn joined_host<T: Tools>(tools: T) -> (Host<T>, ConnId, Instant) {
    let now = t0();
    let mut host = Host::new(HostConfig::default(), tools, now, UNIX_MS);
    let conn = ConnId::new(1);
    host.handle_connect(conn, &PeerInfo::new(None), now);
    let joined = json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"host-join-1",
        "payload":{"role":"host","sessionId":"default"}});
    host.handle_frame(conn, Frame::Text(&joined.to_string()), now);
    drain(&mut host);
    (host, conn, now)
}

/// Every frame sent and every event since the last drain.
fn drain<T: Tools>(host: &mut Host<T>) -> (Vec<Value>, Vec<HostEvent>) {
    let (mut sent, mut events) = (Vec::new(), Vec::new());
    while let Some(out) = host.poll_output() {
        match out {
            Output::Send { frame, .. } => {
                sent.push(serde_json::from_slice(frame.as_bytes()).unwrap())
            }
            Output::Event(e) => events.push(e),
            Output::Close { .. } => {}
        }
    }
    (sent, events)
}

/// Feeds `frames` to `host` and returns what it sent.
fn exchange<T: Tools>(
    host: &mut Host<T>,
    conn: ConnId,
    now: Instant,
    frames: &[Value],
) -> Vec<Value> {
    for f in frames {
        host.handle_frame(conn, Frame::Text(&f.to_string()), now);
    }
    drain(host).0
}

#[test]
fn the_host_answers_the_spec_examples_word_for_word() {
    let spec_tools = SpecTools(vec![
        tool(
            "select",
            object(json!({"itemId":{"type":"string"}}), &["itemId"]),
        ),
        tool(
            "setQuantity",
            object(
                json!({"quantity":{"type":"integer","minimum":0}}),
                &["quantity"],
            ),
        ),
    ]);
    let bad_quantity = json!({"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":
        {"toolName":"setQuantity","params":{"quantity":-1},"reason":"Two tickets."}});
    let (mut host, conn, now) = joined_host(spec_tools);
    let sent = exchange(
        &mut host,
        conn,
        now,
        &[
            fixture("session_start"),
            fixture("tool_call"),
            bad_quantity,
            fixture("session_end"),
        ],
    );
    assert_eq!(sent[0], fixture("session_started"));
    assert_eq!(sent[1], fixture("tool_result"));
    assert_eq!(sent[2]["type"], "state.updated");
    assert_eq!(sent[3], fixture("error"));
    assert_eq!(sent.len(), 4, "session.end waits for the flush");

    let (mut host, conn, now) = joined_host(Blank);
    let sent = exchange(
        &mut host,
        conn,
        now,
        &[fixture("session_start"), fixture("snapshot_get")],
    );
    assert_eq!(sent[1], fixture("snapshot_state"));
    host.publish_state(sources::USER, now);
    assert_eq!(drain(&mut host).0, [fixture("state_updated")]);

    let (mut host, conn, now) = joined_host(Blank);
    host.handle_frame(
        conn,
        Frame::Text(&fixture("session_start").to_string()),
        now,
    );
    host.handle_frame(conn, Frame::Text(&fixture("session_end").to_string()), now);
    let ticket = drain(&mut host)
        .1
        .into_iter()
        .find_map(|e| match e {
            HostEvent::SessionEnding { ticket, .. } => Some(ticket),
            _ => None,
        })
        .unwrap();
    host.confirm_flush(ticket, &study_log_path("s-20260213-001"), now)
        .unwrap();
    let sent = drain(&mut host).0;
    assert_eq!(sent[0], fixture("session_ended"));
    assert_eq!(sent[1]["type"], "state.updated");
    let e: Envelope<HostMessage> = serde_json::from_value(fixture("error")).unwrap();
    assert!(
        matches!(e.body, HostMessage::Error(ErrorPayload { ref code, .. }) if *code == ErrorCode::INVALID_PARAMS)
    );
}

// ---- Host + Relay + a raw agent, simulated -------------------------------------------------

type RelaySim = Sim<Relay, Host<Booking>>;

fn relay_sim(latency: Duration) -> (RelaySim, usize, usize) {
    let start = t0();
    let relay = Relay::new(
        RelayConfig::default().with_hello(true),
        SequentialIds::new(0),
        start,
        UNIX_MS,
    );
    let mut sim: RelaySim = Sim::new(relay, start, SimConfig::default().with_latency(latency));
    let host = sim.add_client(Host::new(
        HostConfig::default(),
        Booking::new(),
        start,
        UNIX_MS,
    ));
    let peer = PeerInfo::new(None).with_path(ENDPOINT_PATH);
    sim.connect_with(host, peer.clone());
    let agent = sim.connect_raw(peer);
    agent_send(
        &mut sim,
        agent,
        json!({"v":"mvp-0.2","type":"relay.join","id":"join-001","payload":{"role":"agent","sessionId":"default"}}),
    );
    sim.settle();
    assert!(sim.client(host).is_joined());
    let got = agent_take(&mut sim, agent);
    assert_eq!(got.last().unwrap()["type"], "relay.joined");
    (sim, host, agent)
}

fn agent_send(sim: &mut RelaySim, agent: usize, v: Value) {
    sim.raw_send(agent, FrameBuf::text(v.to_string()));
}

fn agent_take(sim: &mut RelaySim, agent: usize) -> Vec<Value> {
    sim.raw_take(agent)
        .iter()
        .map(|f| serde_json::from_slice(f.as_bytes()).unwrap())
        .collect()
}

fn ask(sim: &mut RelaySim, agent: usize, t: &str, id: &str, payload: Value) -> Vec<Value> {
    agent_send(
        sim,
        agent,
        json!({"v":"mvp-0.2","type":t,"id":id,"payload":payload}),
    );
    sim.settle();
    agent_take(sim, agent)
}

#[test]
fn an_agent_books_through_the_relay_with_a_real_host() {
    let (mut sim, host, agent) = relay_sim(Duration::from_millis(5));
    let got = ask(
        &mut sim,
        agent,
        "session.start",
        "req-001",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(got, [fixture("session_started")]);

    let got = ask(&mut sim, agent, "snapshot.get", "req-002", json!({}));
    assert_eq!(got[0]["payload"]["toolSchema"][0]["name"], "select");

    let got = ask(
        &mut sim,
        agent,
        "tool.call",
        "req-003",
        json!({"toolName":"select",
        "params":{"itemId":"m1"},"reason":"Pick the first available movie option to continue the flow."}),
    );
    let types: Vec<&str> = got.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["tool.result", "state.updated"]);
    assert_eq!(got[0]["replyTo"], "req-003");

    let got = ask(
        &mut sim,
        agent,
        "tool.call",
        "req-004",
        json!({"toolName":"select",
        "params":{"itemId":7},"reason":"r"}),
    );
    assert_eq!(
        error_of(&got[0]),
        err(
            "INVALID_PARAMS",
            "select requires itemId to be a string",
            "req-004"
        )
    );

    sim.call_client(host, |h, now| {
        h.user_message("I prefer evening showtimes.", now)
    })
    .unwrap();
    sim.settle();
    let got = agent_take(&mut sim, agent);
    assert_eq!(got[0]["type"], "user.message");
    assert_eq!(got[0]["payload"]["stage"], "movie");

    let got = ask(
        &mut sim,
        agent,
        "session.end",
        "req-999",
        json!({"reason":"study-complete"}),
    );
    assert!(got.is_empty(), "the host waits for the flush");
    let ticket = sim
        .take_client_events(host)
        .into_iter()
        .find_map(|e| match e {
            HostEvent::SessionEnding { ticket, .. } => Some(ticket),
            _ => None,
        })
        .unwrap();
    // The relay logged the request before the host saw it: the flush covers it.
    let logs: Vec<String> = sim
        .take_server_events()
        .into_iter()
        .filter_map(|e| match e {
            RelayEvent::Log(r) => Some(r.msg_type.to_owned()),
            _ => None,
        })
        .collect();
    assert!(
        logs.ends_with(&["session.end".to_owned(), "session.end".to_owned()]),
        "{logs:?}"
    );
    sim.call_client(host, |h, now| {
        h.confirm_flush(ticket, &study_log_path("s-20260213-001"), now)
    })
    .unwrap();
    sim.settle();
    let got = agent_take(&mut sim, agent);
    assert_eq!(got[0], fixture("session_ended"));
    assert_eq!(got[1]["payload"]["source"], "reset");
}

#[test]
fn a_host_reconnect_through_the_relay_keeps_the_session() {
    let (mut sim, host, agent) = relay_sim(Duration::from_millis(5));
    ask(
        &mut sim,
        agent,
        "session.start",
        "req-001",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    ask(
        &mut sim,
        agent,
        "tool.call",
        "t1",
        json!({"toolName":"next","params":{},"reason":"go"}),
    );

    // The host drops with the agent's request in flight: the relay fails it.
    agent_send(
        &mut sim,
        agent,
        json!({"v":"mvp-0.2","type":"snapshot.get","id":"lost","payload":{}}),
    );
    sim.run_for(Duration::from_millis(5)); // delivered to the relay, not yet to the host
    sim.disconnect(host);
    sim.settle();
    let got = agent_take(&mut sim, agent);
    assert_eq!(
        error_of(&got[0]),
        err("SESSION_NOT_ACTIVE", texts::HOST_GONE, "lost")
    );
    let got = ask(&mut sim, agent, "snapshot.get", "none", json!({}));
    assert_eq!(error_of(&got[0]).1, texts::NO_HOST);

    sim.connect_with(host, PeerInfo::new(None).with_path(ENDPOINT_PATH));
    sim.settle();
    assert!(sim.client(host).is_joined());
    // A retried session.start is the same session; the state is where it was.
    let got = ask(
        &mut sim,
        agent,
        "session.start",
        "req-001b",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(got[0]["payload"]["sessionId"], "s-20260213-001");
    let got = ask(&mut sim, agent, "snapshot.get", "again", json!({}));
    assert_eq!(got[0]["payload"]["uiSpec"]["stage"], "theater");
}

// ---- the timer contract --------------------------------------------------------------------

fn frames() -> impl Strategy<Value = FrameBuf> {
    let join = (1u32..4).prop_map(|n| {
        format!(r#"{{"v":"mvp-0.2","type":"relay.joined","replyTo":"host-join-{n}","payload":{{"role":"host","sessionId":"default"}}}}"#)
    });
    let refuse = (1u32..4).prop_map(|n| {
        format!(r#"{{"v":"mvp-0.2","type":"error","replyTo":"host-join-{n}","payload":{{"code":"LIMIT_EXCEEDED","message":"no"}}}}"#)
    });
    prop_oneof![
        3 => join,
        1 => refuse,
        2 => Just(r#"{"v":"mvp-0.2","type":"session.start","id":"s","payload":{"studyId":"a","participantId":"b"}}"#.to_owned()),
        2 => Just(r#"{"v":"mvp-0.2","type":"session.end","id":"e","payload":{}}"#.to_owned()),
        2 => Just(r#"{"v":"mvp-0.2","type":"tool.call","id":"t","payload":{"toolName":"next","params":{},"reason":"r"}}"#.to_owned()),
        1 => Just(r#"{"v":"mvp-0.2","type":"tool.call","id":"t","payload":{"toolName":"select","params":{"itemId":1},"reason":"r"}}"#.to_owned()),
        1 => Just(r#"{"v":"mvp-0.2","type":"snapshot.get","id":"g","payload":{}}"#.to_owned()),
        1 => Just(r#"{"v":"mvp-0.2","type":"agent.message","payload":{"text":"hi"}}"#.to_owned()),
        1 => ".{0,40}",
    ]
    .prop_map(FrameBuf::text)
}

fn inputs() -> impl Strategy<Value = Vec<TimerInput>> {
    let one = prop_oneof![
        2 => Just(TimerInput::Connect),
        8 => (0usize..5, frames()).prop_map(|(n, f)| TimerInput::Frame(n, f)),
        1 => (0usize..5).prop_map(TimerInput::Disconnect),
        3 => (0u64..15_000).prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
        1 => (0u64..15_000).prop_map(|ms| TimerInput::Rewind(Duration::from_millis(ms))),
        2 => Just(TimerInput::Timeout),
        3 => Just(TimerInput::FireDue),
    ];
    proptest::collection::vec(one, 1..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn host_keeps_the_timer_contract(inputs in inputs(), short in any::<bool>()) {
        let start = t0();
        let config = if short {
            HostConfig::default()
                .with_join_timeout(Some(Duration::from_secs(2)))
                .with_flush_timeout(Some(Duration::from_secs(3)))
        } else {
            HostConfig::default()
        };
        let mut host = Host::new(config, Booking::new(), start, UNIX_MS);
        let r = check_timer_contract(&mut host, start, &inputs);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    h.connect();
    let deadline = h.host.poll_timeout().unwrap();
    let earlier = h.now.checked_sub(Duration::from_secs(60)).unwrap_or(h.now);
    h.host.handle_timeout(earlier);
    h.host.handle_timeout(deadline - Duration::from_millis(1));
    h.drain();
    assert_eq!(h.types(), ["relay.join"]);
    assert_eq!(h.host.poll_timeout(), Some(deadline));
    h.host.handle_timeout(deadline);
    h.drain();
    assert_eq!(h.closes().len(), 1);
}

#[test]
fn a_host_can_move_to_the_transports_task() {
    fn send<T: Send + 'static>() {}
    send::<Host<Booking>>();
    send::<HostEvent>();
}
