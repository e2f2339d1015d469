//! The Host's test harness: a movie-booking UI ([`Booking`]), a direct driver ([`H`]) that
//! feeds the Host raw relay frames and records every output in order, and the spec
//! examples' tools ([`SpecTools`], [`Blank`]).

use std::time::{Duration, Instant};

use super::{t0, UNIX_MS};

use agent_relay_proto::{
    ChatRole, Envelope, Host, HostConfig, HostEvent, HostMessage, RawJson, ToolContext, ToolError,
    ToolOutcome, ToolSchema, Tools, ENDPOINT_PATH,
};
use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo};
use serde_json::{json, Value};

pub const DAY_MS: u64 = 86_400_000;

// ---- a movie-booking UI --------------------------------------------------------------------

pub const STAGES: [&str; 7] = [
    "movie", "theater", "date", "time", "seat", "ticket", "confirm",
];

pub fn tool(name: &str, parameters: Value) -> ToolSchema {
    ToolSchema {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        parameters: RawJson::from_value(&parameters),
    }
}

pub fn object(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

/// The tools of `stage`: `setQuantity` only on the ticket stage, no `select` on confirm.
pub fn stage_tools(stage: &str) -> Vec<ToolSchema> {
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

pub struct Booking {
    pub loaded: bool,
    pub backend_data: bool,
    pub stage: usize,
    pub schema: Vec<Vec<ToolSchema>>,
    pub selected: Option<String>,
    pub quantity: u64,
    pub order: Option<String>,
    pub calls: usize,
    pub resets: usize,
}

impl Booking {
    pub fn new() -> Self {
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
            // Nested too, in objects and in arrays (spec §7 keeps it out at any depth).
            spec["items"] = json!([
                "m1",
                {"id": "m2", "backendData": {"secret": 2}, "poster": {"backendData": [3]}}
            ]);
            spec["panel"] = json!({"title": "Movies", "backendData": {"secret": 4}});
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
pub enum Out {
    Send(ConnId, Value),
    Close(ConnId, CloseCode, String),
    Event(HostEvent),
}

pub struct H {
    pub host: Host<Booking>,
    pub now: Instant,
    pub conn: ConnId,
    pub next_conn: u64,
    pub outs: Vec<Out>,
}

impl H {
    pub fn with(config: HostConfig, tools: Booking) -> Self {
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
    pub fn new() -> Self {
        let mut h = Self::with(HostConfig::default(), Booking::new());
        h.join();
        h
    }

    /// A host with a session started by `req-001`.
    pub fn in_session() -> Self {
        let mut h = Self::new();
        h.start();
        h
    }

    pub fn drain(&mut self) {
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

    pub fn connect(&mut self) -> ConnId {
        self.conn = ConnId::new(self.next_conn);
        self.next_conn += 1;
        let peer = PeerInfo::new(None).with_path(ENDPOINT_PATH);
        self.host.handle_connect(self.conn, &peer, self.now);
        self.drain();
        self.conn
    }

    /// Connects, answers the join, and clears what that produced.
    pub fn join(&mut self) -> ConnId {
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

    pub fn feed_text(&mut self, text: &str) {
        self.host
            .handle_frame(self.conn, Frame::Text(text), self.now);
        self.drain();
    }

    pub fn feed(&mut self, v: Value) {
        self.feed_text(&v.to_string());
    }

    /// An agent request, as the relay forwards it.
    pub fn req(&mut self, t: &str, id: &str, payload: Value) {
        self.feed(json!({"v":"mvp-0.2","type":t,"id":id,"payload":payload}));
    }

    pub fn call(&mut self, id: &str, tool: &str, params: Value) {
        self.req(
            "tool.call",
            id,
            json!({"toolName": tool, "params": params, "reason": "Because the test says so."}),
        );
    }

    pub fn start(&mut self) -> String {
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
    pub fn sent(&mut self) -> Vec<Value> {
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

    pub fn one(&mut self) -> Value {
        let mut v = self.sent();
        assert_eq!(v.len(), 1, "expected one frame, got {v:#?}");
        v.remove(0)
    }

    pub fn types(&mut self) -> Vec<String> {
        self.sent()
            .iter()
            .map(|v| v["type"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Takes every event so far.
    pub fn events(&mut self) -> Vec<HostEvent> {
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

    pub fn closes(&mut self) -> Vec<(ConnId, CloseCode, String)> {
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

    pub fn disconnect(&mut self) {
        self.host.handle_disconnect(self.conn, self.now);
        self.drain();
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.host.handle_timeout(self.now);
        self.drain();
    }

    /// Ends the session through `session.end` `req-999` and returns the ticket.
    pub fn begin_end(&mut self) -> agent_relay_proto::EndTicket {
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
    pub fn end(&mut self) {
        let ticket = self.begin_end();
        self.host
            .confirm_flush(ticket, "log.jsonl", self.now)
            .unwrap();
        self.drain();
        self.outs.clear();
    }
}

/// `(code, message, replyTo)` of an `error` frame.
impl H {
    /// Like `join`, but keeps what the join released.
    pub fn join_keep(&mut self) {
        self.connect();
        let join = self.sent().pop().unwrap();
        self.feed(
            json!({"v":"mvp-0.2","type":"relay.joined","replyTo":join["id"],
            "payload":{"role":"host","sessionId":"default"}}),
        );
    }
}
pub fn err(code: &str, message: &str, reply_to: &str) -> (String, String, Option<String>) {
    (code.into(), message.into(), Some(reply_to.into()))
}

pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A UI whose state is the spec examples' placeholders: `uiSpec` `{}`.
pub struct Blank;

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
pub struct SpecTools(pub Vec<ToolSchema>);

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
pub fn joined_host<T: Tools>(tools: T) -> (Host<T>, ConnId, Instant) {
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
pub fn drain<T: Tools>(host: &mut Host<T>) -> (Vec<Value>, Vec<HostEvent>) {
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
pub fn exchange<T: Tools>(
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
