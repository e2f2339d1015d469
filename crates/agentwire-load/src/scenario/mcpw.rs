//! MCPW under load: `--connections` agents registered with `agentwire serve`'s orchestrator
//! (subprotocol `mcp.v1`), exchanging frames with it in one of three forms:
//!
//! - `mcpw-json`: JSON text frames;
//! - `mcpw-binary`: the spec's binary frames (24-byte header, then the params' JSON), never
//!   compressed;
//! - `mcpw-gzip`: binary frames whose payload is gzipped (flag `COMPRESSED`; every payload the
//!   agent sends is compressed, as gzip makes the padded payload smaller).
//!
//! Every agent keeps one request in flight: a `ping` request (type 0) whose params are the
//! `--size` payload, answered by the orchestrator with its pong result in the same form. One
//! message is one request, its delivery the answer; the latency is the round trip.
//!
//! And task routing, `mcpw-tasks`: `--connections` agents (JSON form) registered with the
//! capability `load` and `max_concurrent_tasks: 1` (so the router spreads the tasks in flight
//! over the agents); `--publishers` submitters each keep one task in flight, submitted with
//! `Orchestrator::submit_task`, routed by capability to an agent (`task.assigned`), which
//! completes it at once (`task.complete`). A message is a task, its delivery the orchestrator's
//! `TaskCompleted`; the latency is submit to completed. Tasks are submitted by the server's
//! own application, which `agentwire serve` does not expose, so the orchestrator runs in this
//! process on a runtime of its own (threads named [`TASK_SERVER_THREADS`], whose CPU time is
//! the server's), with `agentwire serve`'s `[mcpw]` defaults.
//!
//! In every MCPW scenario the orchestrator's per-connection message rate (1,000/min) is off
//! and its agent cap raised, since the run measures the cost per message, not the limiter.

use std::time::Duration;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentwire::mcpw::orchestrator::{OrchestratorEvent, TaskSpec};
use agentwire::mcpw::{
    AgentHeartbeat, AgentRegister, Body, Capability, Codec, CodecConfig, CompressPolicy, Message,
    MessageType, OtherCall, Resources, TaskComplete,
};
use agentwire_server::config::Config;
use agentwire_server::mcpw::server_app::{self, ServerApp};
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::{Ctx, Outcome, Scenario};
use crate::drive::{self, Sent};
use crate::error::LoadError;
use crate::in_process::InProcess;
use crate::latency::{stamp, Latency};
use crate::options::Budget;
use crate::payload::payload;
use crate::server::ServerKind;
use crate::ws::{stop_signal, StopRx, Ws};

/// The name of the `mcpw-tasks` orchestrator's runtime threads.
pub const TASK_SERVER_THREADS: &str = "aw-mcpw-tasks";

/// Longest wait for one answer before the run fails.
const ANSWER_BOUND: Duration = Duration::from_secs(30);

/// No per-connection message rate, room for every agent; the relay (not under load) off, so
/// the server writes no study-log folder into the working directory.
const SETTINGS: &[&str] = &[
    "relay.enabled=false",
    "mcpw.rate_per_minute=0",
    "mcpw.max_connections=200000",
    "mcpw.max_agents=200000",
];

const SERVER: ServerKind = ServerKind::Agentwire {
    protocol: "mcpw",
    settings: SETTINGS,
};

/// The form an agent's frames take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    /// JSON text frames.
    Json,
    /// Binary frames, never compressed.
    Binary,
    /// Binary frames with gzipped payloads.
    Gzip,
}

impl Wire {
    /// An agent's codec for this form.
    fn codec(self) -> Codec {
        let mut config = CodecConfig::default();
        match self {
            Self::Json | Self::Binary => config.compression.policy = CompressPolicy::Never,
            Self::Gzip => {
                config.compression.policy = CompressPolicy::IfSmaller;
                config.compression.threshold = 0;
            }
        }
        Codec::new(config)
    }

    /// `msg` (a request numbered `n`) as a WebSocket message in this form.
    fn encode(self, codec: &mut Codec, msg: Message, n: u64) -> Result<WsMessage, LoadError> {
        let mut out = Vec::new();
        let encoded = match self {
            Self::Json => codec
                .encode_json(&msg.with_id(n.to_string()), &mut out)
                .map(|()| None),
            Self::Binary | Self::Gzip => codec.encode(&msg.with_seq(n), &mut out).map(Some),
        };
        match encoded.map_err(|e| LoadError::Protocol(format!("encoding: {e}")))? {
            None => String::from_utf8(out)
                .map(WsMessage::text)
                .map_err(|_| LoadError::Protocol("JSON form not UTF-8".into())),
            Some(_) => Ok(WsMessage::binary(out)),
        }
    }

    /// The number of the request an answer is for, and whether it is a response (not an
    /// error).
    fn decode(self, codec: &mut Codec, msg: &WsMessage) -> Result<Option<(u64, bool)>, LoadError> {
        let decoded = match msg {
            WsMessage::Text(t) => codec.decode_json(t.as_bytes()),
            WsMessage::Binary(b) => codec.decode(b),
            _ => return Ok(None),
        }
        .map_err(|e| LoadError::Protocol(format!("decoding the orchestrator's frame: {e}")))?;
        let n = match self {
            Self::Json => decoded.id.as_deref().and_then(|id| id.parse().ok()),
            Self::Binary | Self::Gzip => Some(decoded.seq),
        };
        Ok(n.map(|n| (n, decoded.kind == MessageType::RESPONSE)))
    }
}

/// The MCPW frame scenarios.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "mcpw-json",
            "--connections agents each one ping request of --size in flight, JSON text frames",
            SERVER,
            |ctx| frames(ctx, Wire::Json).boxed(),
        ),
        Scenario::new(
            "mcpw-binary",
            "--connections agents each one ping request of --size in flight, binary frames",
            SERVER,
            |ctx| frames(ctx, Wire::Binary).boxed(),
        ),
        Scenario::new(
            "mcpw-gzip",
            "--connections agents each one ping request of --size in flight, binary frames \
             with gzipped payloads",
            SERVER,
            |ctx| frames(ctx, Wire::Gzip).boxed(),
        ),
        Scenario::new(
            "mcpw-tasks",
            "--publishers submitters each one task in flight, routed to --connections agents \
             that complete it at once; a delivery is the task completed",
            ServerKind::InProcess {
                threads: TASK_SERVER_THREADS,
            },
            |ctx| tasks(ctx).boxed(),
        ),
    ]
}

/// Connects to the orchestrator at `url` with the `mcp.v1` subprotocol.
pub async fn connect(url: &str) -> Result<Ws, LoadError> {
    let mut request = url
        .into_client_request()
        .map_err(|e| LoadError::ws(format!("the URL {url}"), e))?;
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", HeaderValue::from_static("mcp.v1"));
    let (ws, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
        .await
        .map_err(|e| LoadError::ws(format!("connecting to {url}"), e))?;
    Ok(ws)
}

/// An agent: connected, registered as `agent_id` with the capability `load`.
struct Agent {
    ws: Ws,
    codec: Codec,
    wire: Wire,
    next: u64,
    id: String,
    /// When it last sent `agent.heartbeat` (a [`stamp`]).
    beat_at: u64,
}

/// How often an agent sends `agent.heartbeat` under load, so a run longer than the
/// orchestrator's heartbeat window (30 s, unhealthy after 2 missed, removed after 3) keeps its
/// agents. Not counted as a message.
const HEARTBEAT: Duration = Duration::from_secs(10);

impl Agent {
    /// Registers; with `one_task_at_a_time` the agent declares `max_concurrent_tasks: 1`, so
    /// the router, which counts a busy agent out, spreads concurrent tasks over the agents
    /// (with no limit every agent scores the same and the first by id gets them all).
    async fn register(
        url: &str,
        agent_id: String,
        wire: Wire,
        one_task_at_a_time: bool,
    ) -> Result<Self, LoadError> {
        let mut agent = Self {
            ws: connect(url).await?,
            codec: wire.codec(),
            wire,
            next: 0,
            id: agent_id.clone(),
            beat_at: stamp(),
        };
        let register = Body::AgentRegister(AgentRegister {
            agent_id: agent_id.clone(),
            agent_type: Some("load".into()),
            capabilities: vec![Capability::new("load", 0.9)],
            model: None,
            resources: one_task_at_a_time.then(|| Resources {
                max_concurrent_tasks: Some(1),
                ..Resources::default()
            }),
            metadata: None,
        });
        if !agent.request(register).await? {
            return Err(LoadError::Protocol(format!(
                "agent {agent_id} was not registered"
            )));
        }
        Ok(agent)
    }

    /// The `agent.heartbeat` frame, when one is due (see [`HEARTBEAT`]).
    fn heartbeat_due(&mut self) -> Result<Option<WsMessage>, LoadError> {
        let now = stamp();
        if now.saturating_sub(self.beat_at)
            < u64::try_from(HEARTBEAT.as_nanos()).unwrap_or(u64::MAX)
        {
            return Ok(None);
        }
        self.beat_at = now;
        self.next += 1;
        let beat = Body::AgentHeartbeat(AgentHeartbeat {
            agent_id: self.id.clone(),
            status: Some("healthy".into()),
            metrics: None,
            workload: None,
        });
        let msg = Message::new(MessageType::REQUEST, beat);
        self.wire.encode(&mut self.codec, msg, self.next).map(Some)
    }

    /// Sends a request with `body` and waits for its answer: `true` for a response, `false`
    /// for an error.
    async fn request(&mut self, body: Body) -> Result<bool, LoadError> {
        self.next += 1;
        let n = self.next;
        let frame =
            self.wire
                .encode(&mut self.codec, Message::new(MessageType::REQUEST, body), n)?;
        self.send_and_wait(frame, n).await
    }

    /// Sends `frame` (request number `n`) and waits for its answer: `true` for a response,
    /// `false` for an error.
    async fn send_and_wait(&mut self, frame: WsMessage, n: u64) -> Result<bool, LoadError> {
        self.ws
            .send(frame)
            .await
            .map_err(|e| LoadError::ws("sending", e))?;
        let answer = async {
            loop {
                let msg = self
                    .ws
                    .next()
                    .await
                    .ok_or_else(|| LoadError::Protocol("the orchestrator closed".into()))?
                    .map_err(|e| LoadError::ws("receiving", e))?;
                if let WsMessage::Close(c) = &msg {
                    return Err(LoadError::Protocol(format!(
                        "the orchestrator closed: {c:?}"
                    )));
                }
                match self.wire.decode(&mut self.codec, &msg)? {
                    Some((got, ok)) if got == n => return Ok(ok),
                    _ => {} // a notification, or not this request's answer
                }
            }
        };
        tokio::time::timeout(ANSWER_BOUND, answer)
            .await
            .map_err(|_| LoadError::Protocol("no answer from the orchestrator in 30 s".into()))?
    }
}

async fn frames(ctx: Ctx, wire: Wire) -> Result<Outcome, LoadError> {
    let agents = ctx.options().connections;
    let mut peers = Vec::new();
    for a in 0..agents {
        peers.push(Agent::register(ctx.address(), format!("load-{a}"), wire, false).await?);
    }
    let params: serde_json::Value = serde_json::from_str(&payload(ctx.options().payload_size(), 0))
        .map_err(|e| LoadError::Protocol(format!("the payload: {e}")))?;

    let budget = ctx.start();
    let tasks: Vec<_> = peers
        .into_iter()
        .map(|agent| tokio::spawn(pinger(agent, params.clone(), budget.clone())))
        .collect();
    let sent = drive::collect(tasks).await?;
    ctx.stop();
    Ok(drive::answered(sent))
}

/// One agent's pings while the budget lasts.
async fn pinger(
    mut agent: Agent,
    params: serde_json::Value,
    budget: Budget,
) -> Result<Sent, LoadError> {
    let (mut requests, mut errors, mut latency) = (0, 0, Latency::new());
    while budget.take() {
        if let Some(beat) = agent.heartbeat_due()? {
            let n = agent.next;
            agent.send_and_wait(beat, n).await?;
        }
        let body = Body::Other(OtherCall::new("ping", params.clone()));
        let sent = stamp();
        requests += 1;
        if agent.request(body).await? {
            latency.record_since(sent);
        } else {
            errors += 1;
        }
    }
    let _ = agent.ws.close(None).await;
    Ok((requests, errors, latency))
}

/// Submitters waiting for their task's completion, by task id.
type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<()>>>>;

async fn tasks(ctx: Ctx) -> Result<Outcome, LoadError> {
    let agents = ctx.options().connections;
    let server = InProcess::new(TASK_SERVER_THREADS)?;
    let waiters: Waiters = Arc::default();
    let w = Arc::clone(&waiters);
    let started = server
        .spawn(async move {
            let mut section = Config::default().mcpw;
            section.rate_per_minute = 0;
            section.max_agents = section
                .max_agents
                .max(usize::try_from(agents).unwrap_or(usize::MAX));
            let on_event = move |ev: &OrchestratorEvent| {
                if let OrchestratorEvent::TaskCompleted { task_id, .. } = ev {
                    let waiter = w.lock().ok().and_then(|mut m| m.remove(task_id.as_str()));
                    if let Some(tx) = waiter {
                        let _ = tx.send(());
                    }
                }
            };
            crate::in_process::lift_address_limits();
            server_app::start(
                "127.0.0.1:0",
                None,
                section.orchestrator_config(),
                section.upgrade_config(),
                on_event,
            )
            .await
        })
        .await?;
    let app = started.map_err(|e| LoadError::io("starting the orchestrator", e))?;
    let outcome = route_tasks(&ctx, &app, &waiters).await;
    app.shutdown().await;
    server.stop();
    outcome
}

async fn route_tasks(ctx: &Ctx, app: &ServerApp, waiters: &Waiters) -> Result<Outcome, LoadError> {
    let url = app.url();
    let (stop, stop_rx) = stop_signal();
    let mut workers = Vec::new();
    for a in 0..ctx.options().connections {
        let agent = Agent::register(&url, format!("load-{a}"), Wire::Json, true).await?;
        workers.push(tokio::spawn(worker(
            agent,
            format!("load-{a}"),
            stop_rx.clone(),
        )));
    }

    let budget = ctx.start();
    let submitters: Vec<_> = (0..ctx.options().publishers)
        .map(|p| {
            tokio::spawn(submitter(
                app.handle.clone(),
                Arc::clone(waiters),
                p,
                budget.clone(),
            ))
        })
        .collect();
    let sent = drive::collect(submitters).await?;
    ctx.stop();
    stop.stop();
    let mut completed_by_agents = 0;
    for w in workers {
        completed_by_agents += w
            .await
            .map_err(|e| LoadError::Protocol(format!("an agent failed: {e}")))??;
    }
    let reported = sent.0 - sent.1;
    if completed_by_agents != reported {
        return Err(LoadError::Protocol(format!(
            "the agents completed {completed_by_agents} tasks, the orchestrator reported {reported}"
        )));
    }
    Ok(drive::answered(sent))
}

/// One submitter: a task at a time while the budget lasts.
async fn submitter(
    handle: agentwire::tokio::Handle<server_app::TimedOrchestrator>,
    waiters: Waiters,
    index: u64,
    budget: Budget,
) -> Result<Sent, LoadError> {
    let (mut requests, mut errors, mut latency) = (0, 0, Latency::new());
    let mut k = 0u64;
    while budget.take() {
        k += 1;
        let id = format!("task-{index}-{k}");
        let (tx, rx) = oneshot::channel();
        if let Ok(mut m) = waiters.lock() {
            m.insert(id.clone(), tx);
        }
        let spec = TaskSpec::new("load").with_id(id.clone());
        let sent = stamp();
        requests += 1;
        let submitted = handle
            .call(move |m, now| m.inner.submit_task(spec, now).map(|_| ()))
            .await
            .map_err(|_| LoadError::Protocol("the orchestrator stopped".into()))?;
        if submitted.is_err() {
            errors += 1;
            if let Ok(mut m) = waiters.lock() {
                m.remove(&id);
            }
            continue;
        }
        tokio::time::timeout(ANSWER_BOUND, rx)
            .await
            .map_err(|_| LoadError::Protocol(format!("{id} not completed in 30 s")))?
            .map_err(|_| LoadError::Protocol(format!("{id} was dropped")))?;
        latency.record_since(sent);
    }
    Ok((requests, errors, latency))
}

/// One agent: completes every task it is assigned at once, until stopped; returns how many.
async fn worker(mut agent: Agent, agent_id: String, mut stop: StopRx) -> Result<u64, LoadError> {
    let mut completed = 0;
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.tick().await; // the first tick is at once; the agent registered just now
    loop {
        let msg = tokio::select! {
            msg = agent.ws.next() => msg,
            _ = beat.tick() => {
                agent.beat_at = 0;
                if let Some(frame) = agent.heartbeat_due()? {
                    agent.ws.send(frame).await.map_err(|e| LoadError::ws("sending", e))?;
                }
                continue;
            }
            () = stop.stopped() => break,
        };
        let msg = msg
            .ok_or_else(|| LoadError::Protocol("the orchestrator closed".into()))?
            .map_err(|e| LoadError::ws("receiving", e))?;
        let WsMessage::Text(text) = msg else { continue };
        let decoded = agent
            .codec
            .decode_json(text.as_bytes())
            .map_err(|e| LoadError::Protocol(format!("decoding the orchestrator's frame: {e}")))?;
        let Body::TaskAssigned(assigned) = decoded.body else {
            continue; // the acks of our task.complete requests
        };
        let done = Body::TaskComplete(TaskComplete {
            task_id: assigned.task_id,
            agent_id: agent_id.clone(),
            status: Some("completed".into()),
            duration_ms: Some(0),
            result: None,
            resource_usage: None,
            idempotency_key: None,
        });
        agent.next += 1;
        let frame = agent.wire.encode(
            &mut agent.codec,
            Message::new(MessageType::REQUEST, done),
            agent.next,
        )?;
        agent
            .ws
            .send(frame)
            .await
            .map_err(|e| LoadError::ws("sending", e))?;
        completed += 1;
    }
    let _ = agent.ws.close(None).await;
    Ok(completed)
}
