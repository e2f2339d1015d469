//! The movie host's UI (agentwire-server: relay/movie) under the `Host` machine, in memory: the
//! per-stage tool table we chose (INTEROP.md has none), each tool's behaviour and its errors
//! as an agent receives them, and the reset at the end of a session.

use std::time::Instant;

use agentwire::agent_relay::{Host, HostConfig, HostEvent};
use agentwire::core::{ConnId, Frame, Machine, Output, PeerInfo};
use agentwire_server::relay;
use relay::movie::schema::{BOOKED_TOOLS, STAGES, STAGE_TOOLS};
use relay::movie::MovieTools;
use serde_json::{json, Value};

/// 2026-02-13T10:22:17.123Z.
const UNIX_MS: u64 = 1_770_978_137_123;

/// A movie host joined to a (simulated) relay, in a study session.
struct Ui {
    host: Host<MovieTools>,
    now: Instant,
    conn: ConnId,
    next: u64,
    sent: Vec<Value>,
    events: Vec<HostEvent>,
}

impl Ui {
    fn new() -> Self {
        #[allow(clippy::disallowed_methods)] // the one base time of a test
        let now = Instant::now();
        let host = Host::new(HostConfig::default(), MovieTools::new(), now, UNIX_MS);
        let mut ui = Self {
            host,
            now,
            conn: ConnId::new(1),
            next: 0,
            sent: Vec::new(),
            events: Vec::new(),
        };
        ui.host.handle_connect(ui.conn, &PeerInfo::new(None), now);
        ui.feed(
            json!({"v": "mvp-0.2", "type": "relay.joined", "replyTo": "host-join-1",
                       "payload": {"role": "host", "sessionId": "default"}}),
        );
        assert!(ui.host.is_joined());
        let started = ui.request(
            "session.start",
            json!({"studyId": "s", "participantId": "p"}),
        );
        assert_eq!(started["type"], "session.started", "{started}");
        ui
    }

    fn feed(&mut self, v: Value) {
        let text = v.to_string();
        self.host
            .handle_frame(self.conn, Frame::Text(&text), self.now);
        while let Some(out) = self.host.poll_output() {
            match out {
                Output::Send { frame, .. } => {
                    self.sent
                        .push(serde_json::from_slice(frame.as_bytes()).expect("json"));
                }
                Output::Event(e) => self.events.push(e),
                Output::Close { .. } => panic!("closed"),
            }
        }
    }

    /// Sends a request; returns the reply (the frame whose `replyTo` is its id).
    fn request(&mut self, t: &str, payload: Value) -> Value {
        self.next += 1;
        let id = format!("req-{}", self.next);
        self.sent.clear();
        self.feed(json!({"v": "mvp-0.2", "type": t, "id": id, "payload": payload}));
        let reply = self
            .sent
            .iter()
            .find(|v| v["replyTo"] == id.as_str())
            .cloned();
        reply.unwrap_or_else(|| panic!("no reply to {t}: {:?}", self.sent))
    }

    /// A tool call: `Ok(uiSpec)` or `Err((code, message))`.
    fn call(&mut self, tool: &str, params: Value) -> Result<Value, (String, String)> {
        let reply = self.request(
            "tool.call",
            json!({"toolName": tool, "params": params, "reason": "testing"}),
        );
        match reply["type"].as_str() {
            Some("tool.result") => {
                assert_eq!(reply["payload"]["ok"], true);
                Ok(reply["payload"]["uiSpec"].clone())
            }
            Some("error") => Err((
                reply["payload"]["code"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                reply["payload"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )),
            _ => panic!("unexpected reply {reply}"),
        }
    }

    fn ok(&mut self, tool: &str, params: Value) -> Value {
        self.call(tool, params)
            .unwrap_or_else(|e| panic!("{tool} failed: {e:?}"))
    }

    fn err(&mut self, tool: &str, params: Value) -> (String, String) {
        match self.call(tool, params) {
            Ok(ui) => panic!("{tool} succeeded: {ui}"),
            Err(e) => e,
        }
    }

    fn snapshot(&mut self) -> Value {
        let s = self.request("snapshot.get", json!({}));
        assert_eq!(s["type"], "snapshot.state", "{s}");
        s["payload"].clone()
    }

    fn tool_names(&mut self) -> Vec<String> {
        self.snapshot()["toolSchema"]
            .as_array()
            .expect("toolSchema")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_owned())
            .collect()
    }

    fn ui(&mut self) -> Value {
        self.snapshot()["uiSpec"].clone()
    }

    /// Chooses the first item on screen and moves on.
    fn choose_first_and_next(&mut self) {
        let ui = self.ui();
        let id = ui["items"][0]["id"].as_str().expect("an item").to_owned();
        self.ok("select", json!({"itemId": id}));
        self.ok("next", json!({}));
    }

    /// From the movie stage to the seat stage.
    fn go_to_seats(&mut self) {
        for _ in 0..4 {
            self.choose_first_and_next();
        }
        assert_eq!(self.ui()["stage"], "seat");
    }

    /// The ids of the first `n` free seats.
    fn free_seats(&mut self, n: usize) -> Vec<String> {
        let ui = self.ui();
        ui["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|s| s["available"] == true)
            .take(n)
            .map(|s| s["id"].as_str().expect("id").to_owned())
            .collect()
    }

    /// From the movie stage to a placed booking of `n` seats.
    fn book(&mut self, n: usize) -> Value {
        self.go_to_seats();
        for seat in self.free_seats(n) {
            self.ok("select", json!({"itemId": seat}));
        }
        self.ok("next", json!({}));
        self.ok("setQuantity", json!({"typeId": "adult", "quantity": n}));
        self.ok("next", json!({}));
        self.ok("next", json!({}))
    }
}

fn ids(ui: &Value) -> Vec<String> {
    ui["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["id"].as_str().expect("id").to_owned())
        .collect()
}

#[test]
fn every_stage_offers_the_tools_of_the_table_and_a_booking_only_post_message() {
    let mut ui = Ui::new();
    for (i, stage) in STAGES.iter().enumerate() {
        let spec = ui.ui();
        assert_eq!(spec["stage"], *stage);
        assert_eq!(spec["stageIndex"], i);
        assert_eq!(ui.tool_names(), STAGE_TOOLS[i], "tools of {stage}");
        match *stage {
            "seat" => {
                let seat = ui.free_seats(1);
                ui.ok("select", json!({"itemId": seat[0]}));
                ui.ok("next", json!({}));
            }
            "ticket" => {
                ui.ok("setQuantity", json!({"typeId": "child", "quantity": 1}));
                ui.ok("next", json!({}));
            }
            "confirm" => {
                ui.ok("next", json!({}));
            }
            _ => ui.choose_first_and_next(),
        }
    }
    assert_eq!(ui.tool_names(), BOOKED_TOOLS);
    assert_eq!(ui.ui()["title"], "Booking confirmed");
}

#[test]
fn a_tool_the_stage_does_not_offer_is_unknown_tool() {
    let mut ui = Ui::new();
    for tool in ["prev", "setQuantity", "bookNow"] {
        let (code, message) = ui.err(tool, json!({}));
        assert_eq!(code, "UNKNOWN_TOOL", "{tool} on the movie stage");
        assert_eq!(message, format!("Unknown tool: {tool}"));
    }
    ui.go_to_seats();
    assert_eq!(
        ui.err("sort", json!({"field": "row", "order": "asc"})).0,
        "UNKNOWN_TOOL"
    );
    let seat = ui.free_seats(1);
    ui.ok("select", json!({"itemId": seat[0]}));
    ui.ok("next", json!({}));
    for tool in ["select", "filter", "sort"] {
        assert_eq!(
            ui.err(tool, json!({})).0,
            "UNKNOWN_TOOL",
            "{tool} on tickets"
        );
    }
}

#[test]
fn params_outside_the_interop_schemas_are_invalid_params_naming_the_parameter() {
    let mut ui = Ui::new();
    let cases = [
        (
            "filter",
            json!({"field": "rating", "operator": "like", "value": 8}),
            "filter requires operator to be one of",
        ),
        (
            "filter",
            json!({"field": "rating", "operator": "gte"}),
            "filter requires value",
        ),
        (
            "sort",
            json!({"field": "rating", "order": "up"}),
            "sort requires order to be one of",
        ),
        (
            "highlight",
            json!({"itemIds": ["m1"], "style": "blink"}),
            "highlight requires style to be one of",
        ),
        (
            "highlight",
            json!({"itemIds": "m1"}),
            "highlight requires itemIds to be an array",
        ),
        (
            "augment",
            json!({"items": [{"itemId": "m1"}]}),
            "augment requires items[0].value",
        ),
        (
            "clearModification",
            json!({"type": "everything"}),
            "clearModification requires type to be one of",
        ),
        (
            "select",
            json!({"itemId": 1}),
            "select requires itemId to be a string",
        ),
        ("next", json!({"fast": true}), "next does not take fast"),
    ];
    for (tool, params, text) in cases {
        let (code, message) = ui.err(tool, params.clone());
        assert_eq!(code, "INVALID_PARAMS", "{tool} {params}");
        assert!(message.starts_with(text), "{tool} {params}: {message}");
    }
    ui.go_to_seats();
    let seat = ui.free_seats(1);
    ui.ok("select", json!({"itemId": seat[0]}));
    ui.ok("next", json!({}));
    // The spec's own example, word for word.
    let (code, message) = ui.err("setQuantity", json!({"typeId": "adult", "quantity": -1}));
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("INVALID_PARAMS", "setQuantity requires quantity >= 0")
    );
    let (code, message) = ui.err("setQuantity", json!({"typeId": "adult", "quantity": 11}));
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("INVALID_PARAMS", "setQuantity requires quantity <= 10")
    );
    let (code, message) = ui.err("setQuantity", json!({"typeId": "vip", "quantity": 1}));
    assert_eq!(code, "INVALID_PARAMS");
    assert!(
        message.starts_with("setQuantity requires typeId to be one of: adult"),
        "{message}"
    );
}

#[test]
fn fields_and_items_not_on_screen_are_invalid_params() {
    let mut ui = Ui::new();
    let (code, message) = ui.err(
        "filter",
        json!({"field": "price", "operator": "eq", "value": 1}),
    );
    assert_eq!(code, "INVALID_PARAMS");
    assert!(
        message.starts_with("filter requires field to be a field of the movie items: "),
        "{message}"
    );
    assert_eq!(
        ui.err("sort", json!({"field": "distanceKm", "order": "asc"}))
            .0,
        "INVALID_PARAMS"
    );
    let (code, message) = ui.err("select", json!({"itemId": "t1"}));
    assert_eq!(code, "INVALID_PARAMS");
    assert!(message.contains("no such item"), "{message}");

    ui.ok(
        "filter",
        json!({"field": "genre", "operator": "eq", "value": "drama"}),
    );
    let (_, message) = ui.err("select", json!({"itemId": "m1"}));
    assert!(message.contains("hidden by a filter"), "{message}");
    let (_, message) = ui.err("highlight", json!({"itemIds": ["m3", "m1"]}));
    assert!(
        message.starts_with("highlight requires itemIds[1] to be an item"),
        "{message}"
    );
    let (_, message) = ui.err(
        "augment",
        json!({"items": [{"itemId": "m9", "value": "x"}]}),
    );
    assert!(
        message.starts_with("augment requires items[0].itemId"),
        "{message}"
    );
    let (_, message) = ui.err(
        "filter",
        json!({"field": "rating", "operator": "in", "value": 8}),
    );
    assert_eq!(
        message,
        "filter requires value to be an array for operator in"
    );
    let (_, message) = ui.err("postMessage", json!({"text": "  "}));
    assert_eq!(message, "postMessage requires text to be non-empty");
    assert_eq!(
        ui.err("highlight", json!({"itemIds": []})).0,
        "INVALID_PARAMS"
    );
}

#[test]
fn filter_sort_highlight_and_augment_change_the_screen_until_cleared() {
    let mut ui = Ui::new();
    let all = ids(&ui.ui());
    assert_eq!(all.len(), 6);

    let spec = ui.ok(
        "filter",
        json!({"field": "rating", "operator": "gte", "value": 8}),
    );
    assert_eq!(ids(&spec), ["m2", "m3", "m6"]);
    assert_eq!(spec["itemCount"], 6, "the stage still has six movies");
    let spec = ui.ok(
        "filter",
        json!({"field": "genre", "operator": "in", "value": ["drama", "adventure"]}),
    );
    assert_eq!(ids(&spec), ["m3", "m6"], "filters add up");
    let spec = ui.ok("sort", json!({"field": "runtimeMinutes", "order": "desc"}));
    assert_eq!(ids(&spec), ["m6", "m3"]);
    let spec = ui.ok("highlight", json!({"itemIds": ["m3"]}));
    assert_eq!(spec["items"][1]["highlight"], "border", "the default style");
    let spec = ui.ok(
        "augment",
        json!({"items": [{"itemId": "m6", "value": "Longest"}]}),
    );
    assert_eq!(spec["items"][0]["note"], "Longest");
    assert_eq!(
        spec["modifications"]["sort"],
        json!({"field": "runtimeMinutes", "order": "desc"})
    );
    assert_eq!(
        spec["modifications"]["filters"].as_array().map(Vec::len),
        Some(2)
    );

    let spec = ui.ok("clearModification", json!({"type": "filter"}));
    assert_eq!(ids(&spec).len(), 6);
    assert_eq!(ids(&spec)[0], "m6", "the sort order stays");
    let spec = ui.ok(
        "filter",
        json!({"field": "title", "operator": "contains", "value": "LIGHT"}),
    );
    assert_eq!(ids(&spec), ["m3"], "contains ignores case");
    let spec = ui.ok("clearModification", json!({}));
    assert_eq!(ids(&spec), all);
    assert!(spec["items"][0].get("highlight").is_none());

    // Nothing left to clear: tool.result only, no state.updated.
    ui.sent.clear();
    ui.ok("clearModification", json!({}));
    assert!(
        !ui.sent.iter().any(|v| v["type"] == "state.updated"),
        "{:?}",
        ui.sent
    );
}

#[test]
fn leaving_a_stage_clears_its_modifications_but_keeps_the_choices() {
    let mut ui = Ui::new();
    ui.ok(
        "filter",
        json!({"field": "genre", "operator": "eq", "value": "comedy"}),
    );
    ui.ok("select", json!({"itemId": "m5"}));
    let spec = ui.ok("next", json!({}));
    assert_eq!(spec["stage"], "theater");
    assert_eq!(
        spec["booking"]["movie"],
        json!({"id": "m5", "label": "Laugh Track"})
    );
    assert_eq!(ids(&spec), ["t1", "t3", "t4"], "the theaters showing it");
    let spec = ui.ok("prev", json!({}));
    assert_eq!(spec["stage"], "movie");
    assert_eq!(ids(&spec).len(), 6, "the filter went with the screen");
    assert_eq!(spec["booking"]["movie"]["id"], "m5");
}

#[test]
fn next_needs_the_stage_complete_else_tool_execution_failed() {
    let mut ui = Ui::new();
    assert_eq!(
        ui.err("next", json!({})),
        (
            "TOOL_EXECUTION_FAILED".to_owned(),
            "Select a movie first.".to_owned()
        )
    );
    ui.go_to_seats();
    assert_eq!(
        ui.err("next", json!({})).1,
        "Select at least one seat first."
    );
    for seat in ui.free_seats(2) {
        ui.ok("select", json!({"itemId": seat}));
    }
    ui.ok("next", json!({}));
    ui.ok("setQuantity", json!({"typeId": "adult", "quantity": 1}));
    assert_eq!(
        ui.err("next", json!({})),
        (
            "TOOL_EXECUTION_FAILED".to_owned(),
            "The ticket quantities add up to 1, but 2 seat(s) are selected.".to_owned()
        )
    );
    let spec = ui.ok("setQuantity", json!({"typeId": "child", "quantity": 1}));
    assert_eq!(spec["booking"]["totalCents"], 1250 + 800);
    assert_eq!(ui.ok("next", json!({}))["stage"], "confirm");
}

#[test]
fn changing_an_earlier_choice_clears_the_later_ones() {
    let mut ui = Ui::new();
    ui.go_to_seats();
    let seat = ui.free_seats(1);
    ui.ok("select", json!({"itemId": seat[0]}));
    for _ in 0..4 {
        ui.ok("prev", json!({}));
    }
    let spec = ui.ok("select", json!({"itemId": "m2"}));
    let b = &spec["booking"];
    assert_eq!(b["movie"]["id"], "m2");
    assert_eq!(
        (&b["theater"], &b["date"], &b["time"]),
        (&Value::Null, &Value::Null, &Value::Null)
    );
    assert_eq!(b["seats"], json!([]));
    // Re-selecting the same movie changes nothing.
    ui.sent.clear();
    ui.ok("select", json!({"itemId": "m2"}));
    assert!(!ui.sent.iter().any(|v| v["type"] == "state.updated"));
}

#[test]
fn seats_toggle_and_a_taken_seat_cannot_be_selected() {
    let mut ui = Ui::new();
    ui.go_to_seats();
    let spec = ui.ui();
    let seats = spec["items"].as_array().expect("seats");
    assert_eq!(seats.len(), 40);
    let taken = seats
        .iter()
        .find(|s| s["available"] == false)
        .expect("some seat is taken")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        ui.err("select", json!({"itemId": taken})),
        (
            "TOOL_EXECUTION_FAILED".to_owned(),
            format!("Seat {taken} is already taken.")
        )
    );
    let free = ui.free_seats(1).remove(0);
    let spec = ui.ok("select", json!({"itemId": free}));
    assert_eq!(spec["booking"]["seats"], json!([free]));
    let spec = ui.ok("select", json!({"itemId": free}));
    assert_eq!(spec["booking"]["seats"], json!([]), "select again frees it");
}

#[test]
fn the_booking_is_placed_on_confirm_and_the_session_end_resets_the_ui() {
    let mut ui = Ui::new();
    let spec = ui.book(2);
    let b = &spec["booking"];
    assert_eq!(
        (&b["status"], &b["reference"]),
        (&json!("confirmed"), &json!("BK-0001"))
    );
    assert_eq!(b["ticketCount"], 2);
    let history = ui.snapshot()["messageHistory"].clone();
    let line = history
        .as_array()
        .and_then(|h| h.last())
        .expect("a chat line");
    assert_eq!(line["role"], "system");
    assert!(
        line["text"]
            .as_str()
            .expect("text")
            .starts_with("Booking BK-0001 confirmed: "),
        "{line}"
    );
    let spec = ui.ok("postMessage", json!({"text": "Enjoy the movie!"}));
    assert_eq!(spec["booking"]["reference"], "BK-0001");

    // session.end: the host asks for the flush; once confirmed the UI is back at the start.
    ui.sent.clear();
    ui.feed(json!({"v": "mvp-0.2", "type": "session.end", "id": "end-1",
                   "payload": {"reason": "study-complete"}}));
    let ticket = ui
        .events
        .iter()
        .find_map(|e| match e {
            HostEvent::SessionEnding { ticket, .. } => Some(*ticket),
            _ => None,
        })
        .expect("SessionEnding");
    ui.host
        .confirm_flush(ticket, "relay-logs/default.jsonl", ui.now)
        .expect("confirm");
    assert_eq!(ui.host.tools().stage_name(), "movie");
    assert_eq!(ui.host.tools().reference(), None);
    assert_eq!(
        ui.host.tools().bookings(),
        1,
        "the numbering survives the reset"
    );

    let started = ui.request(
        "session.start",
        json!({"studyId": "s", "participantId": "p2"}),
    );
    assert_eq!(started["type"], "session.started");
    let spec = ui.ui();
    assert_eq!(
        (&spec["stage"], &spec["booking"]["reference"]),
        (&json!("movie"), &Value::Null)
    );
    assert_eq!(ui.book(1)["booking"]["reference"], "BK-0002");
}
