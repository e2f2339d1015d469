//! Chopsticks under load (`chopsticks-req`): `--connections` mock agents (plain WebSocket
//! peers) registered with the reference controller, which sends `req`s round-robin across
//! them from `--publishers` concurrent requesters, each one request in flight; every agent
//! answers each `req` with `resp ok` at once.
//!
//! One message is one request: the controller's `req` to an agent, whose `resp` back is its
//! delivery. The latency is the controller's, from its `request` call to the outcome.
//!
//! Requests start in the controller's own application (`ControllerApp::request`), which
//! `agentwire serve` does not expose, so the controller runs in this process on a runtime of
//! its own (two worker threads named [`SERVER_THREADS`], whose CPU time is the server's);
//! the requesters and agents run on the load generator's. Its per-IP connection cap (20) and
//! message rate (100/s per connection) are lifted, since every agent comes from 127.0.0.1
//! and the run measures the cost per message, not the limiter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentwire::chopsticks::{ControllerConfig, ControllerEvent};
use agentwire_server::chopsticks::controller_app::{self, ControllerApp, Outcome as Answer};
use agentwire_server::config::Config;
use futures_util::FutureExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{Ctx, Outcome, Scenario};
use crate::drive::{self, Sent};
use crate::error::LoadError;
use crate::in_process::InProcess;
use crate::latency::{stamp, Latency};
use crate::options::Budget;
use crate::server::ServerKind;
use crate::ws::{self, stop_signal, StopRx, Ws};

/// The name of the controller's runtime threads.
pub const SERVER_THREADS: &str = "aw-chopsticks";

/// The op every request carries (the mock agents answer any op alike).
const OP: &str = "status";

/// Longest wait for the agents to register, or for one request's outcome.
const BOUND: Duration = Duration::from_secs(30);

/// The chopsticks scenario.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "chopsticks-req",
        "the controller sends req round-robin to --connections agents from --publishers \
         requesters, each one in flight; a delivery is the agent's resp",
        ServerKind::InProcess {
            threads: SERVER_THREADS,
        },
        |ctx| run(ctx).boxed(),
    )]
}

/// The controller's settings for `agents` agents on one address: `agentwire serve`'s
/// defaults (its `[chopsticks]` section) with the per-IP cap, the connection cap and the
/// message rate lifted.
fn controller_config(agents: usize) -> ControllerConfig {
    let mut section = Config::default().chopsticks;
    section.max_connections_per_ip = agents + 1;
    section.max_connections = section.max_connections.max(agents + 1);
    section.max_messages_per_second = u32::MAX;
    section.controller_config()
}

async fn run(ctx: Ctx) -> Result<Outcome, LoadError> {
    let agents = usize::try_from(ctx.options().connections).unwrap_or(usize::MAX);
    let server = InProcess::new(SERVER_THREADS)?;
    let (registered, mut registrations) = mpsc::unbounded_channel();
    let started = server
        .spawn(async move {
            crate::in_process::lift_address_limits();
            let transport =
                controller_app::server_config().with_max_connections(agents.saturating_add(16));
            controller_app::start_with(
                "127.0.0.1:0",
                controller_config(agents),
                transport,
                move |ev| {
                    if let ControllerEvent::AgentRegistered { .. } = ev {
                        let _ = registered.send(());
                    }
                },
            )
            .await
        })
        .await?;
    let app = Arc::new(started.map_err(|e| LoadError::io("starting the controller", e))?);
    let outcome = drive(&ctx, &app, agents, &mut registrations).await;
    if let Ok(app) = Arc::try_unwrap(app) {
        app.server.shutdown().await;
    }
    server.stop();
    outcome
}

async fn drive(
    ctx: &Ctx,
    app: &Arc<ControllerApp>,
    agents: usize,
    registrations: &mut mpsc::UnboundedReceiver<()>,
) -> Result<Outcome, LoadError> {
    let url = app.url();
    let (stop, stop_rx) = stop_signal();
    let answered = Arc::new(AtomicU64::new(0));
    let mut agent_tasks = Vec::new();
    for a in 0..agents {
        let mut w = ws::connect(&url).await?;
        let hello = json!({"type": "hello", "protocolVersion": "1.0.0", "agentId": agent_id(a),
            "botUserId": null, "tag": null, "ready": true, "guildIds": [], "poolId": "load"});
        ws::send(&mut w, hello.to_string()).await?;
        agent_tasks.push(tokio::spawn(agent(
            w,
            stop_rx.clone(),
            Arc::clone(&answered),
        )));
    }
    for _ in 0..agents {
        tokio::time::timeout(BOUND, registrations.recv())
            .await
            .ok()
            .flatten()
            .ok_or_else(|| LoadError::Protocol("the agents did not all register".into()))?;
    }

    let requesters = ctx.options().publishers;
    let budget = ctx.start();
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..requesters)
        .map(|_| {
            tokio::spawn(requester(
                Arc::clone(app),
                agents as u64,
                Arc::clone(&next),
                budget.clone(),
            ))
        })
        .collect();
    let sent = drive::collect(tasks).await?;
    ctx.stop();
    stop.stop();
    for t in agent_tasks {
        t.await
            .map_err(|e| LoadError::Protocol(format!("an agent failed: {e}")))??;
    }
    let by_agents = answered.load(Ordering::Relaxed);
    if by_agents != sent.0 {
        return Err(LoadError::Protocol(format!(
            "the agents answered {by_agents} requests, the controller sent {}",
            sent.0
        )));
    }
    Ok(drive::answered(sent))
}

fn agent_id(index: usize) -> String {
    format!("load-agent-{index}")
}

/// One requester: a request at a time, to the agents in turn, while the budget lasts.
async fn requester(
    app: Arc<ControllerApp>,
    agents: u64,
    next: Arc<AtomicU64>,
    budget: Budget,
) -> Result<Sent, LoadError> {
    let (mut requests, mut errors, mut latency) = (0, 0, Latency::new());
    while budget.take() {
        let n = next.fetch_add(1, Ordering::Relaxed) % agents;
        let target = agent_id(usize::try_from(n).unwrap_or(0));
        let sent = stamp();
        requests += 1;
        let outcome = tokio::time::timeout(BOUND, app.request(&target, OP, json!({})))
            .await
            .map_err(|_| LoadError::Protocol(format!("no outcome from {target} in 30 s")))?;
        match outcome {
            Answer::Answered(resp) if resp.ok => latency.record_since(sent),
            _ => errors += 1,
        }
    }
    Ok((requests, errors, latency))
}

/// One mock agent: answers every `req` with `resp ok` until stopped; counts into `answered`.
async fn agent(mut w: Ws, mut stop: StopRx, answered: Arc<AtomicU64>) -> Result<(), LoadError> {
    loop {
        let text = tokio::select! {
            text = ws::next_text(&mut w) => text?,
            () = stop.stopped() => break,
        };
        let Ok(req) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if req["type"] != "req" {
            continue;
        }
        let resp = json!({"type": "resp", "id": req["id"], "ok": true, "data": {"op": req["op"]}});
        ws::send(&mut w, resp.to_string()).await?;
        answered.fetch_add(1, Ordering::Relaxed);
    }
    let _ = w.close(None).await;
    Ok(())
}
