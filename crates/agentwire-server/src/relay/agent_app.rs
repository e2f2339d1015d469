//! An external agent: a plain WebSocket client of the relay (the protocol gives agents no
//! state machine: they send requests with an `id` and read the replies that carry it as
//! `replyTo`), and [`book_ticket`], the booking the `relay_agent` example runs.
//!
//! Like the reference agent client, each request waits at most 12 s for its reply
//! ([`REQUEST_TIMEOUT`]); pushes (`state.updated`, `user.message`) and the relay's own
//! messages (`relay.hello`) that arrive meanwhile are handed to the transcript.

use std::fmt;
use std::time::Duration;

use agentwire::tokio::Limits;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long a request waits for its reply (the reference agent client's).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(12);

/// Messages read while waiting for one reply before giving up (pushes included).
const MAX_MESSAGES_PER_REPLY: usize = 10_000;

/// Which way a message went, for the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Agent → relay.
    Sent,
    /// Relay → agent.
    Received,
}

/// Why a step of the agent failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentError {
    /// The socket failed or closed.
    Transport(String),
    /// No reply within [`REQUEST_TIMEOUT`].
    Timeout(String),
    /// The host or the relay answered with an `error`.
    Refused {
        /// The request's type.
        request: String,
        /// The error code.
        code: String,
        /// The error text.
        message: String,
    },
    /// The answer was not what the booking flow expected.
    Unexpected(String),
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "transport: {e}"),
            Self::Timeout(what) => write!(f, "no reply to {what} within {REQUEST_TIMEOUT:?}"),
            Self::Refused {
                request,
                code,
                message,
            } => write!(f, "{request} refused: {code} {message:?}"),
            Self::Unexpected(e) => write!(f, "unexpected: {e}"),
        }
    }
}

impl std::error::Error for AgentError {}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Transcript = Box<dyn FnMut(Dir, &Value) + Send>;

/// An agent connected to the relay.
pub struct Agent {
    ws: Ws,
    next_id: u64,
    tool_calls: usize,
    transcript: Transcript,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Connects to the relay at `url`; `transcript` sees every message sent and received.
    pub async fn connect(
        url: &str,
        transcript: impl FnMut(Dir, &Value) + Send + 'static,
    ) -> Result<Self, AgentError> {
        let config = Limits::default().websocket_config();
        // `wss://` with the installed client TLS settings, if any (else the defaults).
        let connector =
            crate::common::installed_client_tls().map(tokio_tungstenite::Connector::Rustls);
        let connect =
            tokio_tungstenite::connect_async_tls_with_config(url, Some(config), true, connector);
        let (ws, _) = tokio::time::timeout(REQUEST_TIMEOUT, connect)
            .await
            .map_err(|_| AgentError::Timeout("the connection".to_owned()))?
            .map_err(|e| AgentError::Transport(e.to_string()))?;
        Ok(Self {
            ws,
            next_id: 0,
            tool_calls: 0,
            transcript: Box::new(transcript),
        })
    }

    /// `tool.call`s sent so far.
    pub fn tool_calls(&self) -> usize {
        self.tool_calls
    }

    /// Joins relay session `session` as an agent named `name`.
    pub async fn join(&mut self, session: &str, name: &str) -> Result<Value, AgentError> {
        let payload = json!({"role": "agent", "sessionId": session, "agentName": name});
        self.request("relay.join", payload).await
    }

    /// `session.start`; returns the study session id.
    pub async fn start_session(
        &mut self,
        study_id: &str,
        participant_id: &str,
    ) -> Result<String, AgentError> {
        let payload = json!({"studyId": study_id, "participantId": participant_id});
        let started = self.request("session.start", payload).await?;
        started["sessionId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| AgentError::Unexpected(format!("session.started without id: {started}")))
    }

    /// `snapshot.get`; returns the `snapshot.state` payload.
    pub async fn snapshot(&mut self) -> Result<Value, AgentError> {
        self.request("snapshot.get", json!({})).await
    }

    /// `tool.call`; returns the `tool.result` payload.
    pub async fn tool(
        &mut self,
        name: &str,
        params: Value,
        reason: &str,
    ) -> Result<Value, AgentError> {
        let payload = json!({"toolName": name, "params": params, "reason": reason});
        self.tool_calls += 1;
        self.request("tool.call", payload).await
    }

    /// `agent.message` (the spec defines no reply: it is sent and not awaited).
    pub async fn say(&mut self, text: &str) -> Result<(), AgentError> {
        let id = self.new_id();
        let msg = json!({"v": "mvp-0.2", "type": "agent.message", "id": id,
                         "payload": {"text": text}});
        self.send(&msg).await
    }

    /// `session.end`; returns the `session.ended` payload.
    pub async fn end_session(&mut self, reason: &str) -> Result<Value, AgentError> {
        self.request("session.end", json!({"reason": reason})).await
    }

    /// Closes the connection and waits for the relay's answer (bounded).
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let _ = self.ws.close(None).await;
            while let Some(Ok(_)) = self.ws.next().await {}
        })
        .await;
    }

    fn new_id(&mut self) -> String {
        self.next_id += 1;
        format!("req-{:03}", self.next_id)
    }

    async fn send(&mut self, msg: &Value) -> Result<(), AgentError> {
        (self.transcript)(Dir::Sent, msg);
        self.ws
            .send(Message::text(msg.to_string()))
            .await
            .map_err(|e| AgentError::Transport(e.to_string()))
    }

    /// Sends a request of type `t` and returns the payload of the reply carrying its id
    /// (an `error` reply is [`AgentError::Refused`]).
    pub async fn request(&mut self, t: &str, payload: Value) -> Result<Value, AgentError> {
        let id = self.new_id();
        let msg = json!({"v": "mvp-0.2", "type": t, "id": id, "payload": payload});
        self.send(&msg).await?;
        let wait = async {
            for _ in 0..MAX_MESSAGES_PER_REPLY {
                let text = match self.ws.next().await {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(frame))) => {
                        return Err(AgentError::Transport(format!(
                            "closed by the relay: {frame:?}"
                        )))
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(AgentError::Transport(e.to_string())),
                    None => return Err(AgentError::Transport("connection ended".to_owned())),
                };
                let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else {
                    return Err(AgentError::Unexpected(format!(
                        "not JSON: {}",
                        text.as_str()
                    )));
                };
                (self.transcript)(Dir::Received, &v);
                if v["replyTo"].as_str() != Some(id.as_str()) {
                    continue; // a push, or the relay's own message
                }
                if v["type"] == "error" {
                    return Err(AgentError::Refused {
                        request: t.to_owned(),
                        code: v["payload"]["code"].as_str().unwrap_or_default().to_owned(),
                        message: v["payload"]["message"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    });
                }
                return Ok(v["payload"].clone());
            }
            Err(AgentError::Unexpected(format!(
                "no reply to {t} among {MAX_MESSAGES_PER_REPLY} messages"
            )))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, wait)
            .await
            .map_err(|_| AgentError::Timeout(format!("{t} {id}")))?
    }
}

/// What [`book_ticket`] achieved.
#[derive(Debug, Clone, PartialEq)]
pub struct Booked {
    /// The study session, `s-YYYYMMDD-NNN`.
    pub session_id: String,
    /// The booking reference (`BK-NNNN`).
    pub reference: String,
    /// The booking as the last `uiSpec` showed it.
    pub booking: Value,
    /// Tool calls the agent has made on this connection.
    pub tool_calls: usize,
    /// `session.ended`'s payload (`sessionId`, `logFile`, `stateReset`).
    pub ended: Value,
}

/// The booking plan's choices.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `session.start`'s `studyId`.
    pub study_id: String,
    /// `session.start`'s `participantId`.
    pub participant_id: String,
    /// Tickets (and seats) to book, 1..=10.
    pub tickets: u64,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            study_id: "pilot-01".to_owned(),
            participant_id: "P07".to_owned(),
            tickets: 2,
        }
    }
}

/// The visible items of a `uiSpec`.
fn items(ui: &Value) -> &[Value] {
    ui["items"].as_array().map_or(&[], Vec::as_slice)
}

fn first_id(ui: &Value, what: &str) -> Result<String, AgentError> {
    items(ui)
        .first()
        .and_then(|i| i["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| AgentError::Unexpected(format!("no {what} on screen: {ui}")))
}

/// Calls `next` and checks that the screen moved to `stage`; returns the new `uiSpec`.
async fn next(agent: &mut Agent, stage: &str, reason: &str) -> Result<Value, AgentError> {
    let ui = agent.tool("next", json!({}), reason).await?["uiSpec"].clone();
    if ui["stage"] != stage {
        return Err(AgentError::Unexpected(format!(
            "expected stage {stage}, got {ui}"
        )));
    }
    Ok(ui)
}

/// Books `plan.tickets` tickets end to end in one study session: starts the session, reads
/// the snapshot, then works through every stage with tool calls (each with its reason),
/// choosing from what the screen shows (a well-rated movie, the nearest theater, the first
/// date, an evening show, free seats that are not wheelchair places, adult tickets), confirms, tells the participant, and
/// ends the session. The agent must have joined.
pub async fn book_ticket(agent: &mut Agent, plan: &Plan) -> Result<Booked, AgentError> {
    let n = plan.tickets.clamp(1, 10);
    let session_id = agent
        .start_session(&plan.study_id, &plan.participant_id)
        .await?;
    let snapshot = agent.snapshot().await?;
    let ui = &snapshot["uiSpec"];
    if ui["stage"] != "movie" {
        return Err(AgentError::Unexpected(format!(
            "a new session starts at the movie stage: {ui}"
        )));
    }
    let tools: Vec<&str> = snapshot["toolSchema"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    if !tools.contains(&"select") || !tools.contains(&"filter") {
        return Err(AgentError::Unexpected(format!(
            "movie stage tools: {tools:?}"
        )));
    }
    agent
        .say("Hello! I will look for a well-rated movie at a nearby theater, in the evening.")
        .await?;

    // Movie: the best rated of those rated 8 or more.
    let reason = "Only show movies rated 8 or better, as the participant wants a good one.";
    agent
        .tool(
            "filter",
            json!({"field": "rating", "operator": "gte", "value": 8}),
            reason,
        )
        .await?;
    let reason = "Put the best rated movie first.";
    let ui = agent
        .tool("sort", json!({"field": "rating", "order": "desc"}), reason)
        .await?["uiSpec"]
        .clone();
    let movie = first_id(&ui, "movie")?;
    let reason = "Point the participant at the movie I am about to choose.";
    agent
        .tool(
            "highlight",
            json!({"itemIds": [movie], "style": "glow"}),
            reason,
        )
        .await?;
    let note = format!("Rated {} - the best on screen", items(&ui)[0]["rating"]);
    let reason = "Explain the choice beside the movie.";
    agent
        .tool(
            "augment",
            json!({"items": [{"itemId": movie, "value": note}]}),
            reason,
        )
        .await?;
    let reason = "Choose the best rated movie.";
    agent
        .tool("select", json!({"itemId": movie}), reason)
        .await?;
    next(
        agent,
        "theater",
        "The movie is chosen; go on to the theaters.",
    )
    .await?;

    // Theater: the nearest.
    let reason = "Nearest theaters first.";
    let ui = agent
        .tool(
            "sort",
            json!({"field": "distanceKm", "order": "asc"}),
            reason,
        )
        .await?["uiSpec"]
        .clone();
    let theater = first_id(&ui, "theater")?;
    agent
        .tool(
            "select",
            json!({"itemId": theater}),
            "Choose the nearest theater.",
        )
        .await?;
    let ui = next(agent, "date", "The theater is chosen; go on to the dates.").await?;

    // Date: the first one offered.
    let date = first_id(&ui, "date")?;
    agent
        .tool(
            "select",
            json!({"itemId": date}),
            "Choose the earliest date.",
        )
        .await?;
    next(agent, "time", "The date is chosen; go on to the showtimes.").await?;

    // Time: an evening show.
    let reason = "The participant prefers evening showtimes.";
    let ui = agent
        .tool(
            "filter",
            json!({"field": "time", "operator": "gte", "value": "18:00"}),
            reason,
        )
        .await?["uiSpec"]
        .clone();
    let time = first_id(&ui, "evening showtime")?;
    agent
        .tool(
            "select",
            json!({"itemId": time}),
            "Choose the earliest evening show.",
        )
        .await?;
    next(agent, "seat", "The showtime is chosen; go on to the seats.").await?;

    // Seats: free ones only, leaving the wheelchair places to those who need them.
    let reason = "Hide the seats that are taken.";
    agent
        .tool(
            "filter",
            json!({"field": "available", "operator": "eq", "value": true}),
            reason,
        )
        .await?;
    let reason = "Leave the wheelchair places free.";
    let ui = agent
        .tool(
            "filter",
            json!({"field": "type", "operator": "neq", "value": "accessible"}),
            reason,
        )
        .await?["uiSpec"]
        .clone();
    let free: Vec<String> = items(&ui)
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .take(n as usize)
        .collect();
    if (free.len() as u64) < n {
        return Err(AgentError::Unexpected(format!(
            "only {} free seats",
            free.len()
        )));
    }
    for seat in &free {
        let reason = format!("Take free seat {seat} for the party of {n}.");
        agent
            .tool("select", json!({"itemId": seat}), &reason)
            .await?;
    }
    next(
        agent,
        "ticket",
        "The seats are chosen; go on to the tickets.",
    )
    .await?;

    // Tickets: one adult ticket per seat.
    let reason = format!("{n} adult ticket(s), one per seat.");
    agent
        .tool(
            "setQuantity",
            json!({"typeId": "adult", "quantity": n}),
            &reason,
        )
        .await?;
    let ui = next(
        agent,
        "confirm",
        "The tickets match the seats; go on to confirm.",
    )
    .await?;
    let total = ui["booking"]["totalCents"].as_u64().unwrap_or(0);

    // Confirm.
    let reason = "Everything is chosen; place the booking.";
    let ui = agent.tool("next", json!({}), reason).await?["uiSpec"].clone();
    let booking = ui["booking"].clone();
    let Some(reference) = booking["reference"].as_str().map(str::to_owned) else {
        return Err(AgentError::Unexpected(format!(
            "no booking reference: {ui}"
        )));
    };
    let text = format!(
        "Done: booking {reference}, {} seat(s) ({}), {}.{:02} EUR in total.",
        n,
        free.join(", "),
        total / 100,
        total % 100
    );
    agent
        .tool(
            "postMessage",
            json!({"text": text}),
            "Tell the participant the booking is placed.",
        )
        .await?;

    let ended = agent.end_session("study-complete").await?;
    if ended["stateReset"] != true || ended["sessionId"] != session_id.as_str() {
        return Err(AgentError::Unexpected(format!("session.ended: {ended}")));
    }
    Ok(Booked {
        session_id,
        reference,
        booking,
        tool_calls: agent.tool_calls,
        ended,
    })
}

/// One readable line for a message of the transcript: `agent -> tool.call req-005 select
/// {"itemId":"m6"} because "..."`, `host -> tool.result req-005 ok (stage theater, 3 items)`.
pub fn describe(dir: Dir, v: &Value) -> String {
    let t = v["type"].as_str().unwrap_or("?");
    let p = &v["payload"];
    let tag = v["id"]
        .as_str()
        .or_else(|| v["replyTo"].as_str())
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let who = match (dir, t) {
        (Dir::Sent, _) => "agent ->",
        (Dir::Received, "relay.hello" | "relay.joined") => "relay ->",
        (Dir::Received, "error") if v.get("replyTo").is_none() => "relay ->",
        (Dir::Received, _) => "host  ->",
    };
    let what = match t {
        "tool.call" => format!(
            "{} {} because {}",
            p["toolName"].as_str().unwrap_or("?"),
            p["params"],
            p["reason"]
        ),
        "tool.result" | "state.updated" => {
            let ui = &p["uiSpec"];
            let head = if t == "tool.result" {
                format!("{} ok", p["toolName"].as_str().unwrap_or("?"))
            } else {
                format!("source {}", p["source"].as_str().unwrap_or("?"))
            };
            format!(
                "{head} (stage {}, {} item(s) shown, {} chat line(s))",
                ui["stage"].as_str().unwrap_or("-"),
                ui["items"].as_array().map_or(0, Vec::len),
                p["messageHistory"].as_array().map_or(0, Vec::len)
            )
        }
        "snapshot.state" => format!(
            "stage {}, tools {}",
            p["uiSpec"]["stage"].as_str().unwrap_or("-"),
            p["toolSchema"]
                .as_array()
                .map(|t| t
                    .iter()
                    .filter_map(|t| t["name"].as_str())
                    .collect::<Vec<_>>()
                    .join(","))
                .unwrap_or_default()
        ),
        _ => p.to_string(),
    };
    format!("{who} {t}{tag} {what}")
}
